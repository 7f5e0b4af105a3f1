//! SQL golden files: every `tests/sql/NAME.sql` runs statement by statement (through
//! `tidal shell --format csv`) against a fresh 2-data-node cluster, and the transcript must
//! equal `tests/sql/NAME.out`. A statement's block is `> statement` followed by its CSV output,
//! or `ERROR: message` when it fails. `TIDAL_BLESS=1 cargo test --test sql_golden` rewrites
//! the .out files (`TIDAL_GOLDEN=delete,windows` limits a run to those files); review the diff
//! before committing.

mod common;

use common::{shell_output, Cluster};
use std::path::Path;

fn split(script: &str) -> Vec<String> {
    // Statements end with ';' at the end of a line; '--' lines are comments.
    let mut out = Vec::new();
    let mut cur = String::new();
    for line in script.lines() {
        let t = line.trim();
        if t.starts_with("--") || t.is_empty() {
            continue;
        }
        if !cur.is_empty() {
            cur.push(' ');
        }
        cur.push_str(t);
        if t.ends_with(';') {
            out.push(cur.trim_end_matches(';').trim().to_string());
            cur.clear();
        }
    }
    if !cur.trim().is_empty() {
        out.push(cur.trim().to_string());
    }
    out
}

fn run_file(path: &Path) -> Result<(), String> {
    let script = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let cluster = Cluster::start(2);
    let mut db = String::new();
    let mut transcript = String::new();
    for stmt in split(&script) {
        transcript.push_str(&format!("> {stmt}\n"));
        let out = shell_output(&cluster.mnode_addr, &db, &stmt, "csv");
        if out.status.success() {
            transcript.push_str(&String::from_utf8_lossy(&out.stdout));
            let lower = stmt.to_ascii_lowercase();
            if let Some(rest) = lower.strip_prefix("use ") {
                db = rest.trim().to_string();
            }
        } else {
            let err = String::from_utf8_lossy(&out.stderr);
            // The shell's error line is `DB error: <message> (<seconds>s)`, as taos prints it.
            let err = err.trim().trim_start_matches("DB error: ");
            // The shell ends an error line with the statement's time, which varies.
            let err = match err.rfind(" (") {
                Some(i)
                    if err.ends_with("s)") && err[i + 2..err.len() - 2].parse::<f64>().is_ok() =>
                {
                    &err[..i]
                }
                _ => err,
            };
            transcript.push_str(&format!("ERROR: {err}\n"));
        }
    }
    let expected_path = path.with_extension("out");
    if std::env::var_os("TIDAL_BLESS").is_some() {
        std::fs::write(&expected_path, &transcript).map_err(|e| e.to_string())?;
        return Ok(());
    }
    let expected = std::fs::read_to_string(&expected_path).map_err(|e| {
        format!(
            "{}: {e} (run with TIDAL_BLESS=1 to create it)",
            expected_path.display()
        )
    })?;
    if expected != transcript {
        let mut diff = String::new();
        for (i, (e, a)) in expected.lines().zip(transcript.lines()).enumerate() {
            if e != a {
                diff.push_str(&format!(
                    "line {}:\n  expected: {e}\n  actual:   {a}\n",
                    i + 1
                ));
            }
        }
        let (el, al) = (expected.lines().count(), transcript.lines().count());
        if el != al {
            diff.push_str(&format!("expected {el} lines, got {al}\n"));
        }
        return Err(format!(
            "{} differs:\n{diff}\nfull transcript:\n{transcript}",
            path.display()
        ));
    }
    Ok(())
}

#[test]
fn golden_sql_files() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/sql");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("tests/sql")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "sql"))
        // TIDAL_GOLDEN=name[,name]: only these files (to bless one file at a time).
        .filter(|p| match std::env::var("TIDAL_GOLDEN") {
            Ok(only) => only
                .split(',')
                .any(|n| p.file_stem().is_some_and(|s| s == n.trim())),
            Err(_) => true,
        })
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no golden files in {}", dir.display());
    let failures: Vec<String> = files.iter().filter_map(|f| run_file(f).err()).collect();
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
