//! Replays the committed SQL fuzz corpus (fuzz/corpus/sql_statement) and any crash artifacts
//! (fuzz/artifacts/sql_statement) through `check_sql`, so a fuzz finding stays fixed without
//! a nightly toolchain. Also checks that the corpus reaches the executor: most of its seed
//! queries must plan and run on the fuzz catalog.

use std::path::{Path, PathBuf};
use tidal_sql::fuzzing::check_sql;

fn files(dir: &Path) -> Vec<PathBuf> {
    tidal_codec::fuzzing::corpus_files(dir)
}

#[test]
fn replay_sql_corpus_and_artifacts() {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz");
    let (mut n, mut answered) = (0, 0);
    for sub in ["corpus/sql_statement", "artifacts/sql_statement"] {
        for f in files(&fuzz.join(sub)) {
            let data = std::fs::read(&f).expect("corpus file");
            answered += check_sql(&data);
            // and every prefix of the short ones: half-typed statements
            if data.len() <= 200 {
                for i in 0..data.len() {
                    let _ = check_sql(&data[..i]);
                }
            }
            n += 1;
        }
    }
    assert!(n >= 100, "the SQL corpus has only {n} inputs");
    // The seeds written for the fuzz catalog (windows, fills, row functions, selectors,
    // subqueries, MATCH, calendar functions) must get through planning and execution.
    assert!(
        answered >= 20,
        "only {answered} corpus queries ran to a result"
    );
    eprintln!("{n} inputs, {answered} queries answered");
}
