//! Arbitrary bytes into the line protocol parser: it must never panic or hang, every error
//! must carry a 1-based line and column, and every parsed line must survive a serialize →
//! parse round trip unchanged. Parsed again with every series key it gave called known
//! (`next_into_known`), the body gives the same keys, fields, timestamps and errors; so it
//! does with the field keys of the lines before forgotten at every line, and with each key
//! told the shape of its first point's numeric fields (`next_into_shaped`); and cut into
//! parts by a `BodyCutter` as if it arrived in pieces of a few sizes (`parse_parts`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::collections::HashSet;
use tidal_lineproto::{
    parse_line, parse_lines, parse_parts, Ask, BodyCutter, Cut, FieldValue, Line, Number, Shape,
};

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
    // Each key's first point's fields as a shape, when they are all numbers.
    let mut shapes: Vec<(&[u8], Vec<(String, Number)>, Shape)> = Vec::new();
    for (key, fields, _) in want.iter().filter_map(|r| r.as_ref().ok()) {
        if shapes.iter().any(|(k, _, _)| k == key) {
            continue;
        }
        let kinds: Option<Vec<(String, Number)>> = fields
            .iter()
            .map(|(k, v)| match v {
                FieldValue::Float(_) => Some((k.to_string(), Number::Float)),
                FieldValue::Int(_) => Some((k.to_string(), Number::Int)),
                _ => None,
            })
            .collect();
        let Some(kinds) = kinds else { continue };
        if let Some(shape) = Shape::new(kinds.iter().map(|(k, n)| (k.as_str(), *n))) {
            shapes.push((key, kinds, shape));
        }
    }
    let mut shaped = Vec::new();
    let mut values = Vec::new();
    let mut lines = parse_lines(data);
    loop {
        let mut asked = None;
        let r = lines.next_into_shaped(&mut l, &mut values, &mut |k| {
            match shapes.iter().position(|(s, _, _)| *s == k) {
                Some(i) => {
                    asked = Some(i);
                    Ask::Shaped(&shapes[i].2)
                }
                None => Ask::Parse,
            }
        });
        let Some(r) = r else { break };
        shaped.push(r.map(|(k, by_shape)| {
            let fields = match (by_shape, asked) {
                (Some(present), Some(i)) => shapes[i]
                    .1
                    .iter()
                    .zip(&values)
                    .enumerate()
                    .filter(|(j, _)| present & (1 << j) != 0)
                    .map(|(_, ((name, n), &v))| {
                        let v = match n {
                            Number::Float => FieldValue::Float(f64::from_bits(v)),
                            Number::Int => FieldValue::Int(v as i64),
                        };
                        (std::borrow::Cow::Owned(name.clone()), v)
                    })
                    .collect(),
                (Some(_), None) => panic!("a point read by a shape it was not asked with"),
                (None, _) => l.fields.clone(),
            };
            (k, fields, l.timestamp)
        }));
    }
    assert_eq!(shaped, want);
    // Pieces of sizes the body's first bytes choose.
    let sizes: Vec<usize> = data.iter().take(3).map(|b| 1 + usize::from(*b % 64)).collect();
    if !sizes.is_empty() {
        let mut cutter = BodyCutter::default();
        let mut parts: Vec<Vec<u8>> = Vec::new();
        let mut at = 0;
        for n in sizes.iter().cycle() {
            if at >= data.len() {
                break;
            }
            let piece = &data[at..(at + n).min(data.len())];
            cutter.push(piece, &mut |c| match c {
                Cut::Piece(r) => parts.push(piece[r].to_vec()),
                Cut::Gathered(v) => parts.push(v),
            });
            at += piece.len();
        }
        parts.extend(cutter.finish());
        assert_eq!(parts.concat(), data);
        let refs: Vec<&[u8]> = parts.iter().map(Vec::as_slice).collect();
        let mut lines = parse_parts(&refs);
        let mut got = Vec::new();
        while let Some(r) = lines.next_into(&mut l) {
            got.push(r.map(|k| (k.to_vec(), l.fields.clone(), l.timestamp)));
        }
        let want: Vec<_> = want
            .iter()
            .map(|r| r.clone().map(|(k, f, t)| (k.to_vec(), f, t)))
            .collect();
        assert_eq!(got, want);
    }
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
