//! Arbitrary bytes as SQL: parsed, and every query planned, run on two in-memory vnodes
//! (fragments through their byte form) and merged. Must never panic or hang; errors are
//! the expected outcome for most inputs. See `tidal_sql::fuzzing`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = tidal_sql::fuzzing::check_sql(data);
});
