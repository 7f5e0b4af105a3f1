//! A line-protocol body of two megabytes arrives in many frames, and is parsed in the
//! frames it came in (lines split between frames are gathered; from a quoted string on, the
//! rest of the body is): every good line is written, and each bad line is reported with its
//! line number in the whole body, before and after a string value spanning two lines.

mod common;

use common::{rows, write_lp, Cluster};

#[test]
fn a_body_in_many_frames_is_written_as_one() {
    let c = Cluster::start_with_http(2);
    let http = c.http.clone().expect("mnode printed its HTTP address");
    c.ok("", "CREATE DATABASE f PRECISION 'ms'");

    let lines = 60_000usize;
    let bad = [7usize, 23_457, 41_000, 59_999];
    // 1-based number of the line (in the body's text) that holds a string spanning two
    // lines: the lines after it are numbered one further on.
    let quoted_at = 40_000usize;
    let mut body = String::new();
    let (mut good, mut sum) = (0u64, 0u64);
    let mut want_errors = Vec::new();
    let mut line_no = 0usize;
    for i in 0..lines {
        line_no += 1;
        if line_no == quoted_at {
            body.push_str("s,host=q txt=\"first\nsecond\" 5\n");
            line_no += 1;
            continue;
        }
        if bad.contains(&i) {
            body.push_str("m,host=x v= 1\n");
            want_errors.push(line_no as u64);
            continue;
        }
        let host = i % 100;
        let ts = 1_000 + i / 100;
        body.push_str(&format!("m,host=h{host} v={i},w={i}i {ts}\n"));
        good += 1;
        sum += i as u64;
    }
    // The last line has no newline.
    body.push_str("m,host=last v=1,w=1i 1");
    good += 1;
    sum += 1;
    assert!(body.len() > 1 << 20, "{}", body.len());

    let (status, resp) = write_lp(&http, "f", "&precision=ms", &body);
    assert_eq!(status, 400, "{resp}");
    let json: serde_json::Value = serde_json::from_str(&resp).expect("JSON error body");
    let msg = json["error"].as_str().expect("error string");
    assert!(
        msg.starts_with(&format!(
            "partial write: {} line(s) rejected, {} row(s) written",
            bad.len(),
            good + 1
        )),
        "{msg}"
    );
    let numbers: Vec<u64> = json["line_errors"]
        .as_array()
        .expect("line_errors")
        .iter()
        .map(|e| e["line"].as_u64().expect("a line number"))
        .collect();
    assert_eq!(numbers, want_errors);
    for e in json["line_errors"].as_array().expect("line_errors") {
        let text = e["error"].as_str().expect("error text");
        assert!(text.contains("missing value for field 'v'"), "{text}");
    }

    let out = rows(&c.ok("f", "SELECT COUNT(*), SUM(w) FROM m"));
    assert_eq!(out, vec![format!("{good},{sum}")]);
    let out = rows(&c.ok("f", "SELECT txt FROM s"));
    assert_eq!(out.join("\n"), "\"first\nsecond\"", "{out:?}");
}
