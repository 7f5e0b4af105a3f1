//! Arbitrary bytes as a data node's `Write` request: the direct reader
//! (`tidal_proto::write_read`) must never panic, and whenever it answers, prost's decoding
//! with the conversion must give the same batch (the reader leaves everything else to them).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    tidal_proto::write_read::fuzz_input(data);
});
