//! Fuzz target: arbitrary bytes through the vnode's head decoder (never panics).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    tidal_vnode::fuzzing::head(data);
});
