//! Arbitrary bytes into `decode_column`: must return Ok or Err, never panic, hang or allocate
//! beyond O(rows + bytes). Input layout (shared with codec/tests/fuzz_corpus.rs through
//! `tidal_codec::fuzzing`): byte 0 picks the DataType, bytes 1-2 the expected row count, the
//! rest is the column block.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    tidal_codec::fuzzing::decode_input(data);
});
