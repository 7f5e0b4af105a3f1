//! Arbitrary bytes into the line protocol parser: it must never panic or hang, every error
//! must carry a 1-based line and column, and every parsed line must survive a serialize →
//! parse round trip unchanged. Parsed again with every series key it gave called known
//! (`next_into_known`), the body gives the same keys, fields, timestamps and errors; so it
//! does with the field keys of the lines before forgotten at every line.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::collections::HashSet;
use tidal_lineproto::{parse_line, parse_lines, Line};

fuzz_target!(|data: &[u8]| {
    let mut want = Vec::new();
    let mut lines = parse_lines(data);
    let mut l = Line::default();
    while let Some(r) = lines.next_into(&mut l) {
        want.push(r.map(|k| (k, l.fields.clone(), l.timestamp)));
    }
    let keys: HashSet<&[u8]> = want.iter().filter_map(|r| r.as_ref().ok().map(|o| o.0)).collect();
    let mut got = Vec::new();
    let mut lines = parse_lines(data);
    while let Some(r) = lines.next_into_known(&mut l, &mut |k| keys.contains(k)) {
        got.push(r.map(|k| (k, l.fields.clone(), l.timestamp)));
    }
    assert_eq!(got, want);
    let mut alone = Vec::new();
    let mut lines = parse_lines(data);
    loop {
        lines.forget_field_keys();
        let Some(r) = lines.next_into(&mut l) else {
            break;
        };
        alone.push(r.map(|k| (k, l.fields.clone(), l.timestamp)));
    }
    assert_eq!(alone, want);
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
