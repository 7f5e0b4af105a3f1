//! `tidal shell`: the SQL shell, in the manner of TDengine's `taos`.
//!
//! - `-s SQL` / `-f FILE`: runs the statements in order, printing each result in the chosen
//!   format; the first failing statement prints `DB error: <message> (<seconds>s)` on stderr
//!   and ends the run with exit code 1.
//! - On a terminal: line editing, a history file kept across sessions (`--history-file`, env
//!   `TIDAL_HISTORY`, default `~/.tidal_history`, at most [`HISTORY_ENTRIES_MAX`] entries),
//!   tab completion of keywords, functions, databases, tables and columns
//!   ([`complete::complete`]), and statements over several lines (`tidal> ` then `    -> `
//!   until a `;` or `\G` outside quotes). Ctrl-C drops the line being typed (or abandons a
//!   running statement); Ctrl-D, `quit`, `exit` or `\q` leave.
//! - Standard input that is not a terminal is read the same way, without prompts or editing.
//!
//! A statement ending in `\G` instead of `;` prints its rows vertically (one block per row).

mod complete;

use crate::http::rest;
use complete::{Catalog, ShellHelper};
use parking_lot::RwLock;
use rustyline::error::ReadlineError;
use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;
use tidal_client::{Client, StatementResult};
use tidal_common::{Batch, Precision, Value};

/// Most statements kept in the history file (as `taos` does).
pub const HISTORY_ENTRIES_MAX: usize = 1000;
/// Environment variable naming the history file.
pub const HISTORY_ENV: &str = "TIDAL_HISTORY";

#[derive(clap::Args)]
pub struct ShellArgs {
    /// gRPC address of a Tidal server (the mnode in a `tidal local` cluster).
    #[arg(long, default_value = "127.0.0.1:6030")]
    host: String,
    /// Database to use, as `USE` does.
    #[arg(short = 'd', long = "database")]
    database: Option<String>,
    /// Run these statements and exit.
    #[arg(short = 's', long = "sql")]
    sql: Option<String>,
    /// Run the statements in this file and exit.
    #[arg(short = 'f', long = "file")]
    file: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
    /// History file of the interactive shell (default: $TIDAL_HISTORY, else ~/.tidal_history).
    #[arg(long = "history-file")]
    history_file: Option<PathBuf>,
    /// -u USER, -p PASSWORD, --tls-ca (crate::auth).
    #[command(flatten)]
    pub auth: crate::auth::ClientAuthArgs,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Table,
    Csv,
    /// The JSON that `POST /rest/sql` answers (TDengine's REST shape).
    Json,
}

/// One statement of a script or of interactive input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stmt {
    pub sql: String,
    /// Ended by `\G`: print rows vertically.
    pub vertical: bool,
}

/// Splits `text` into the statements it terminates (`;` or `\G` outside quotes ' " ` and
/// `--` comments, which are dropped) and the unterminated rest, kept verbatim but without
/// comments so that more input can be appended to it.
pub fn scan(text: &str) -> (Vec<Stmt>, String) {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    let mut chars = text.chars().peekable();
    let mut end = |cur: &mut String, vertical: bool| {
        let sql = cur.trim();
        if !sql.is_empty() {
            out.push(Stmt {
                sql: sql.to_string(),
                vertical,
            });
        }
        cur.clear();
    };
    while let Some(c) = chars.next() {
        match quote {
            Some(q) => {
                cur.push(c);
                if c == q {
                    // A doubled quote inside a string is an escaped quote.
                    if chars.peek() == Some(&q) {
                        if let Some(n) = chars.next() {
                            cur.push(n);
                        }
                    } else {
                        quote = None;
                    }
                } else if c == '\\' {
                    if let Some(n) = chars.next() {
                        cur.push(n);
                    }
                }
            }
            None => match c {
                '\'' | '"' | '`' => {
                    quote = Some(c);
                    cur.push(c);
                }
                '-' if chars.peek() == Some(&'-') => {
                    for n in chars.by_ref() {
                        if n == '\n' {
                            cur.push('\n');
                            break;
                        }
                    }
                }
                ';' => end(&mut cur, false),
                '\\' if chars.peek() == Some(&'G') => {
                    chars.next();
                    end(&mut cur, true);
                }
                _ => cur.push(c),
            },
        }
    }
    (out, cur)
}

/// Splits a script into statements; a last statement without terminator counts too.
pub fn split_statements(text: &str) -> Vec<Stmt> {
    let (mut stmts, rest) = scan(text);
    if !rest.trim().is_empty() {
        stmts.push(Stmt {
            sql: rest.trim().to_string(),
            vertical: false,
        });
    }
    stmts
}

/// Whether a line typed at an empty prompt leaves the shell.
fn is_quit(line: &str) -> bool {
    matches!(
        line.trim()
            .trim_end_matches(';')
            .trim()
            .to_ascii_lowercase()
            .as_str(),
        "quit" | "exit" | "q" | "\\q"
    )
}

pub fn format_value(v: &Value, precision: Precision) -> String {
    match v {
        Value::Timestamp(t) => precision.format_timestamp(*t),
        Value::Null => "NULL".to_string(),
        other => other.to_string(),
    }
}

fn csv_escape(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// Renders a batch as an aligned table.
pub fn render_table(batch: &Batch, precision: Precision) -> String {
    let headers: Vec<String> = batch.fields.iter().map(|f| f.name.clone()).collect();
    let rows: Vec<Vec<String>> = (0..batch.num_rows())
        .map(|r| {
            batch
                .row(r)
                .iter()
                .map(|v| format_value(v, precision))
                .collect()
        })
        .collect();
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for r in &rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |cells: &[String]| -> String {
        let parts: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!(" {c:<w$} "))
            .collect();
        format!("{}|\n", parts.join("|"))
    };
    let mut out = line(&headers);
    let total: usize = widths.iter().map(|w| w + 3).sum();
    out.push_str(&"=".repeat(total));
    out.push('\n');
    for r in &rows {
        out.push_str(&line(r));
    }
    out
}

/// Renders a batch vertically, as `taos` does for `\G`: a `*** n.row ***` header per row, then
/// one `name: value` line per column with the names right-aligned.
pub fn render_vertical(batch: &Batch, precision: Precision) -> String {
    let width = batch
        .fields
        .iter()
        .map(|f| f.name.chars().count())
        .max()
        .unwrap_or(0);
    let stars = "*".repeat(27);
    let mut out = String::new();
    for r in 0..batch.num_rows() {
        out.push_str(&format!("{stars} {}.row {stars}\n", r + 1));
        for (f, v) in batch.fields.iter().zip(batch.row(r).iter()) {
            out.push_str(&format!(
                "{:>width$}: {}\n",
                f.name,
                format_value(v, precision)
            ));
        }
    }
    out
}

fn print_result(
    r: &StatementResult,
    format: Format,
    vertical: bool,
    elapsed_s: f64,
    out: &mut impl Write,
) -> std::io::Result<()> {
    match (format, &r.batch) {
        (Format::Table, Some(b)) => {
            if vertical {
                write!(out, "{}", render_vertical(b, r.precision))?;
            } else {
                write!(out, "{}", render_table(b, r.precision))?;
            }
            writeln!(
                out,
                "Query OK, {} row(s) in set ({elapsed_s:.6}s)\n",
                b.num_rows()
            )?;
        }
        (Format::Table, None) => writeln!(
            out,
            "Query OK, {} row(s) affected ({elapsed_s:.6}s)\n",
            r.affected_rows
        )?,
        (Format::Csv, Some(b)) => {
            let header: Vec<String> = b.fields.iter().map(|f| csv_escape(&f.name)).collect();
            writeln!(out, "{}", header.join(","))?;
            for i in 0..b.num_rows() {
                let cells: Vec<String> = b
                    .row(i)
                    .iter()
                    .map(|v| csv_escape(&format_value(v, r.precision)))
                    .collect();
                writeln!(out, "{}", cells.join(","))?;
            }
        }
        (Format::Csv, None) => {}
        (Format::Json, _) => writeln!(out, "{}", rest::to_json(r))?,
    }
    Ok(())
}

/// The one line a failed statement prints, as `taos` prints it.
fn error_line(message: &str, elapsed_s: f64) -> String {
    format!("DB error: {message} ({elapsed_s:.6}s)")
}

/// A session: the connection, the current database and the output format.
struct Session {
    client: Client,
    db: String,
    format: Format,
    /// Abandon a running statement on Ctrl-C (only on a terminal: elsewhere SIGINT must keep
    /// ending the process).
    interruptible: bool,
}

impl Session {
    /// Runs one statement and prints its result (stdout) or its error line (stderr).
    /// Returns whether it succeeded.
    async fn run(&mut self, stmt: &Stmt) -> std::io::Result<bool> {
        let start = Instant::now();
        let exec = self.client.execute(&stmt.sql, &self.db);
        let result = if self.interruptible {
            tokio::select! {
                r = exec => Some(r),
                _ = tokio::signal::ctrl_c() => None,
            }
        } else {
            Some(exec.await)
        };
        let elapsed_s = start.elapsed().as_secs_f64();
        match result {
            Some(Ok(r)) => {
                self.db = r.db.clone();
                let mut out = std::io::stdout().lock();
                print_result(&r, self.format, stmt.vertical, elapsed_s, &mut out)?;
                out.flush()?;
                Ok(true)
            }
            Some(Err(e)) => {
                eprintln!("{}", error_line(&e.to_string(), elapsed_s));
                Ok(false)
            }
            None => {
                eprintln!("{}", error_line("statement interrupted", elapsed_s));
                Ok(false)
            }
        }
    }
}

pub async fn run(args: ShellArgs) -> Result<ExitCode, crate::server::BoxError> {
    let client = args.auth.connect(&args.host).await?;
    let mut session = Session {
        client,
        db: String::new(),
        format: args.format,
        interruptible: false,
    };
    if let Some(db) = &args.database {
        let stmt = Stmt {
            sql: format!("USE {db}"),
            vertical: false,
        };
        let start = Instant::now();
        match session.client.execute(&stmt.sql, "").await {
            Ok(r) => session.db = r.db,
            Err(e) => {
                eprintln!(
                    "{}",
                    error_line(&e.to_string(), start.elapsed().as_secs_f64())
                );
                return Ok(ExitCode::FAILURE);
            }
        }
    }
    let script = match (&args.sql, &args.file) {
        (Some(s), _) => Some(s.clone()),
        (None, Some(f)) => Some(
            std::fs::read_to_string(f).map_err(|e| format!("cannot read {}: {e}", f.display()))?,
        ),
        (None, None) => None,
    };
    if let Some(script) = script {
        for stmt in split_statements(&script) {
            if !session.run(&stmt).await? {
                return Ok(ExitCode::FAILURE);
            }
        }
        return Ok(ExitCode::SUCCESS);
    }
    if std::io::stdin().is_terminal() {
        let history = args
            .history_file
            .or_else(|| std::env::var_os(HISTORY_ENV).map(PathBuf::from))
            .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".tidal_history")));
        session.interruptible = true;
        terminal(session, history).await
    } else {
        piped(session).await
    }
}

/// Statements from standard input that is not a terminal: no prompts, no editing.
async fn piped(mut session: Session) -> Result<ExitCode, crate::server::BoxError> {
    let stdin = std::io::stdin();
    let mut buf = String::new();
    loop {
        let mut line = String::new();
        if stdin.lock().read_line(&mut line)? == 0 {
            break;
        }
        if buf.trim().is_empty() && is_quit(&line) {
            break;
        }
        buf.push_str(&line);
        let (stmts, rest) = scan(&buf);
        for stmt in &stmts {
            session.run(stmt).await?;
        }
        buf = rest;
    }
    // A last statement without `;` at the end of the input still runs.
    for stmt in split_statements(&buf) {
        session.run(&stmt).await?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Whether a statement may change what completion offers (databases, tables, columns).
fn changes_catalog(sql: &str) -> bool {
    let first = sql
        .split_whitespace()
        .next()
        .unwrap_or("")
        .to_ascii_lowercase();
    matches!(first.as_str(), "create" | "drop" | "alter" | "use")
}

/// Refreshes the completion catalog in the background (completion never waits for the server).
fn refresh_catalog(catalog: &Arc<RwLock<Catalog>>, client: &Client, db: &str) {
    let (catalog, client, db) = (catalog.clone(), client.clone(), db.to_string());
    tokio::spawn(async move {
        let fresh = complete::fetch_catalog(&client, &db).await;
        *catalog.write() = fresh;
    });
}

/// The interactive shell on a terminal.
async fn terminal(
    mut session: Session,
    history: Option<PathBuf>,
) -> Result<ExitCode, crate::server::BoxError> {
    let config = rustyline::Config::builder()
        .max_history_size(HISTORY_ENTRIES_MAX)?
        .history_ignore_dups(true)?
        .auto_add_history(false)
        .completion_type(rustyline::CompletionType::List)
        .build();
    let mut rl: rustyline::Editor<ShellHelper, rustyline::history::FileHistory> =
        rustyline::Editor::with_config(config)?;
    let catalog = Arc::new(RwLock::new(Catalog::default()));
    rl.set_helper(Some(ShellHelper::new(catalog.clone())));
    if let Some(h) = &history {
        match rl.load_history(h) {
            Ok(()) => {}
            Err(ReadlineError::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => eprintln!("warning: cannot read the history file {}: {e}", h.display()),
        }
    }
    refresh_catalog(&catalog, &session.client, &session.db);
    println!("Welcome to the Tidal shell. End statements with ';' (or '\\G' for vertical rows); 'quit' or Ctrl-D leaves.");
    let mut buf = String::new();
    loop {
        let prompt = if buf.trim().is_empty() {
            "tidal> "
        } else {
            "    -> "
        };
        let line = match tokio::task::block_in_place(|| rl.readline(prompt)) {
            Ok(l) => l,
            // Ctrl-C: forget what was typed for the current statement.
            Err(ReadlineError::Interrupted) => {
                buf.clear();
                continue;
            }
            Err(ReadlineError::Eof) => break,
            Err(e) => return Err(e.into()),
        };
        if buf.trim().is_empty() && is_quit(&line) {
            break;
        }
        buf.push_str(&line);
        buf.push('\n');
        let (stmts, rest) = scan(&buf);
        buf = rest;
        for stmt in &stmts {
            let entry = format!("{}{}", stmt.sql, if stmt.vertical { "\\G" } else { ";" });
            let _ = rl.add_history_entry(entry);
            let db_before = session.db.clone();
            let ok = session.run(stmt).await?;
            if ok && (changes_catalog(&stmt.sql) || session.db != db_before) {
                refresh_catalog(&catalog, &session.client, &session.db);
            }
        }
    }
    if let Some(h) = &history {
        if let Err(e) = rl.save_history(h) {
            eprintln!(
                "warning: cannot write the history file {}: {e}",
                h.display()
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tidal_common::{DataType, Field};

    fn sqls(stmts: &[Stmt]) -> Vec<&str> {
        stmts.iter().map(|s| s.sql.as_str()).collect()
    }

    #[test]
    fn splits_outside_quotes_and_comments() {
        let s = split_statements(
            "use iot; select ';' from t -- a; comment\n; ;insert into t values ('a;b')",
        );
        assert_eq!(
            sqls(&s),
            vec![
                "use iot",
                "select ';' from t",
                "insert into t values ('a;b')"
            ]
        );
        assert!(s.iter().all(|s| !s.vertical));
    }

    #[test]
    fn backslash_g_ends_a_vertical_statement() {
        let (s, rest) = scan("select * from t\\G select '\\G;' from u; show");
        assert_eq!(
            s,
            vec![
                Stmt {
                    sql: "select * from t".into(),
                    vertical: true
                },
                Stmt {
                    sql: "select '\\G;' from u".into(),
                    vertical: false
                },
            ]
        );
        assert_eq!(rest.trim(), "show");
    }

    #[test]
    fn continuation_until_an_unquoted_terminator() {
        // Each line appended as the terminal loop does; the statement ends only at the `;`.
        let mut buf = String::new();
        for (line, done) in [
            ("select count(*)", false),
            ("  from t -- a comment; not the end", false),
            ("  where name = 'x;", false),
            ("y'", false),
            (";", true),
        ] {
            buf.push_str(line);
            buf.push('\n');
            let (stmts, rest) = scan(&buf);
            assert_eq!(!stmts.is_empty(), done, "after {line:?}: {buf:?}");
            if done {
                assert_eq!(
                    stmts[0].sql,
                    "select count(*)\n  from t \n  where name = 'x;\ny'"
                );
                assert!(rest.trim().is_empty());
            }
            buf = rest;
        }
        assert!(scan("select 1;").0.len() == 1);
        assert!(scan("select ';").0.is_empty());
        assert!(scan("select 1").0.is_empty());
        assert!(
            scan("select \"a\"\"b;\"").0.is_empty(),
            "doubled quote stays quoted"
        );
    }

    #[test]
    fn quit_words() {
        for q in ["quit", "exit;", " \\q ", "QUIT;"] {
            assert!(is_quit(q), "{q}");
        }
        assert!(!is_quit("quitx"));
        assert!(!is_quit("select 1;"));
    }

    #[test]
    fn vertical_rows_and_error_line() {
        let b = Batch::from_rows(
            vec![
                Field::new("ts", DataType::Timestamp),
                Field::new("velocity", DataType::Double),
            ],
            &[
                vec![Value::Timestamp(0), Value::Float(1.5)],
                vec![Value::Timestamp(1), Value::Null],
            ],
        );
        let stars = "*".repeat(27);
        assert_eq!(
            render_vertical(&b, Precision::Millis),
            format!(
                "{stars} 1.row {stars}\n      ts: 1970-01-01 00:00:00.000\nvelocity: 1.5\n\
                 {stars} 2.row {stars}\n      ts: 1970-01-01 00:00:00.001\nvelocity: NULL\n"
            )
        );
        assert_eq!(
            error_line("Table does not exist", 0.0012),
            "DB error: Table does not exist (0.001200s)"
        );
    }
}
