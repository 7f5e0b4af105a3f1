//! `tidal bench`: the `--small` benchmark run (a local cluster, no peers, seconds long) writes
//! a report with every section and non-zero figures, its JSON and charts, with Tidal loaded
//! through the client library, through the line protocol over HTTP and through `tidal load`;
//! `bench generate` is deterministic for a seed; bad input gives a clear error, not a panic.

use std::process::Command;

fn tidal() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tidal"))
}

fn run_ok(cmd: &mut Command) -> std::process::Output {
    let out = cmd.output().expect("run tidal");
    assert!(
        out.status.success(),
        "{:?} failed: {}\n{}",
        cmd,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[test]
fn small_run_writes_a_complete_report() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("B.md");
    run_ok(
        tidal()
            .args(["bench", "run", "--small", "--out"])
            .arg(&out)
            .arg("--work")
            .arg(dir.path().join("work")),
    );
    let md = std::fs::read_to_string(&out).unwrap();
    for section in [
        "# Benchmarks",
        "## Machine",
        "## Data set",
        "## Engines, versions and settings",
        "## Ingest",
        "### Ingest rate",
        "### Server CPU per million rows ingested",
        "### Peak server memory",
        "## Bytes on disk",
        "## Query latency",
        "### Warm p50 (ms)",
        "### Cold, first run (ms)",
        "## Do the engines agree?",
        "## Charts",
        "WAL_LEVEL 2",
    ] {
        assert!(md.contains(section), "missing {section:?} in\n{md}");
    }

    let json: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("bench/results.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(json["small"], true);
    assert!(json["data"]["points"].as_u64().unwrap() > 1000);
    let tidal = &json["engines"][0];
    assert_eq!(tidal["name"], "tidal");
    assert_eq!(
        tidal["ingest"]["rows"].as_u64(),
        json["data"]["points"].as_u64(),
        "every generated point is acknowledged"
    );
    assert!(tidal["ingest"]["rows_per_s"].as_f64().unwrap() > 0.0);
    assert!(tidal["disk_bytes"].as_u64().unwrap() > 0);
    assert!(tidal["peak_rss_bytes"].as_u64().unwrap() > 0);
    let queries = tidal["queries"].as_array().unwrap();
    assert_eq!(queries.len(), 13);
    for q in queries {
        assert!(q["error"].is_null(), "query failed: {q}");
        assert!(q["cold_ms"].as_f64().unwrap() > 0.0, "{q}");
        assert!(q["p50_ms"].as_f64().unwrap() > 0.0, "{q}");
    }

    // The line-protocol variant: ingest and size only, its COUNT(*) check passed (a failed
    // check would have put it under `skipped` instead).
    assert_eq!(json["skipped"].as_array().map(Vec::len), Some(0), "{json}");
    let lp = &json["engines"][1];
    assert_eq!(lp["name"], "tidal (line protocol)");
    assert_eq!(lp["variant_of"], "tidal");
    let lp_rows = lp["ingest"]["rows"].as_u64().unwrap();
    assert!(lp_rows > 1000 && lp_rows <= json["data"]["points"].as_u64().unwrap());
    assert!(lp["ingest"]["rows_per_s"].as_f64().unwrap() > 0.0);
    assert!(lp["ingest"]["method"]
        .as_str()
        .unwrap()
        .contains("POST /write"));
    assert!(lp["disk_bytes"].as_u64().unwrap() > 0);
    assert!(lp["peak_rss_bytes"].as_u64().unwrap() > 0);
    assert_eq!(lp["queries"].as_array().map(Vec::len), Some(0));
    assert!(
        lp["notes"].as_array().unwrap().iter().any(|n| n
            .as_str()
            .unwrap_or("")
            .contains("`SELECT COUNT(*)` found the rows expected")),
        "{lp}"
    );
    assert!(md.contains("| tidal (line protocol) | "), "{md}");

    // The `tidal load` variant: every row of the TDengine file loaded and counted, with the
    // loader's parse-only rate and the ratio the report states.
    let ld = &json["engines"][2];
    assert_eq!(ld["name"], "tidal (tidal load)");
    assert_eq!(ld["variant_of"], "tidal");
    assert_eq!(
        ld["ingest"]["rows"].as_u64(),
        json["data"]["points"].as_u64(),
        "the TDengine file holds every point"
    );
    assert!(ld["parse_only_rows_per_s"].as_f64().unwrap() > 0.0);
    assert!(ld["disk_bytes"].as_u64().unwrap() > 0);
    assert!(
        ld["notes"].as_array().unwrap().iter().any(|n| n
            .as_str()
            .unwrap_or("")
            .contains("`SELECT COUNT(*)` found the rows of the file")),
        "{ld}"
    );
    assert!(
        md.contains("### `tidal load` against its parse-only rate"),
        "{md}"
    );
    assert!(md.contains("| tidal (tidal load) | "), "{md}");

    for chart in ["ingest.png", "disk.png", "queries_p50.png"] {
        let p = dir.path().join("bench").join(chart);
        let bytes = std::fs::read(&p).unwrap();
        assert!(bytes.starts_with(b"\x89PNG"), "{}", p.display());
    }
}

#[test]
fn generate_is_deterministic_for_a_seed() {
    let gen = |seed: &str, format: &str| {
        run_ok(tidal().args([
            "bench",
            "generate",
            "--scale",
            "3",
            "--duration",
            "1h",
            "--seed",
            seed,
            "--format",
            format,
        ]))
        .stdout
    };
    let a = gen("7", "influx");
    assert!(a.starts_with(b"readings,name=truck_0,"));
    assert_eq!(a, gen("7", "influx"));
    assert_ne!(a, gen("8", "influx"));
    assert_eq!(gen("7", "tdengine"), gen("7", "tdengine"));
    let out = run_ok(tidal().args([
        "bench",
        "generate",
        "--scale",
        "3",
        "--duration",
        "1h",
        "--seed",
        "7",
    ]));
    let summary = String::from_utf8_lossy(&out.stderr);
    assert!(summary.contains("rows per truck per day"), "{summary}");
}

#[test]
fn queries_print_and_bad_input_is_reported() {
    let out = run_ok(tidal().args([
        "bench", "queries", "--type", "last-loc", "--engine", "postgres", "--count", "2",
    ]));
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(text.matches("SELECT DISTINCT ON").count(), 2, "{text}");
    for args in [
        &["bench", "queries", "--type", "nope"][..],
        &["bench", "generate", "--start", "yesterday"],
        &["bench", "generate", "--scale", "0"],
        &[
            "bench",
            "run",
            "--peers",
            "mysql",
            "--out",
            "/nonexistent/x/B.md",
        ],
    ] {
        let out = tidal().args(args).output().unwrap();
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("error"), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}
