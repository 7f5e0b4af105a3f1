//! Arbitrary bytes into the line protocol parser: it must never panic or hang, every error
//! must carry a 1-based line and column, and every parsed line must survive a serialize →
//! parse round trip unchanged.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tidal_lineproto::{parse_line, parse_lines};

fuzz_target!(|data: &[u8]| {
    for r in parse_lines(data) {
        match r {
            Err(e) => {
                assert!(e.line >= 1 && e.column >= 1);
                let _ = e.to_string();
            }
            Ok(l) => {
                let text = l.to_line_protocol();
                let again = parse_line(text.as_bytes())
                    .expect("a serialized line parses")
                    .expect("a serialized line is not blank");
                assert_eq!(again.measurement, l.measurement);
                assert_eq!(again.tags, l.tags);
                assert_eq!(again.fields, l.fields);
                assert_eq!(again.timestamp, l.timestamp);
            }
        }
    }
});
