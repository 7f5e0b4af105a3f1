//! Arbitrary bytes read as a fragment-frame connection (client/src/FRAMES.md): the preface
//! check, the frame decoder fed in pieces, and every frame body decoder must return Ok or Err,
//! never panic or buffer beyond what arrived. Input layout: `tidal_client::frames::fuzz_input`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    tidal_client::frames::fuzz_input(data);
});
