//! Differential test: the same generated TSBS IoT data in Tidal (a local cluster) and in
//! DuckDB (an independent engine, through Python's `duckdb` module, which scripts/test.sh
//! installs); all 13 IoT query types (TDengine form against PostgreSQL form) and randomly
//! generated aggregate/window queries must give the same answers
//! (`tidal bench differential`, which exits 1 on any disagreement and prints it).

use std::process::Command;

#[test]
fn tsbs_and_random_queries_agree_with_duckdb() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_tidal"))
        .args([
            "bench",
            "differential",
            "--scale",
            "8",
            "--duration",
            "1d",
            "--seed",
            "11",
            "--queries",
            "2",
            "--random",
            "150",
            "--work",
        ])
        .arg(dir.path())
        .env("TIDAL_LOG", "error")
        .output()
        .expect("run tidal bench differential");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "tidal bench differential failed:\n{stderr}"
    );
    assert!(
        stderr.contains("== 176 queries compared, 0 disagreed"),
        "{stderr}"
    );
}
