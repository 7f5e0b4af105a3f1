//! Fuzz target: arbitrary bytes and time ranges through the vnode's partial block reader,
//! which picks segments by their first timestamps and decodes only those (never panics; a
//! range read twice, the second time from the cache, gives the same columns).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    tidal_vnode::fuzzing::block_range(data);
});
