//! `tidal shell`: the SQL shell. Interactive when neither -s nor -f is given; otherwise runs
//! the statements (split on `;` outside quotes and comments) in order, printing each result in
//! the chosen format, and stops with exit code 1 and the server's message on stderr at the
//! first failing statement.

use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;
use tidal_client::{Client, StatementResult};
use tidal_common::{Batch, Precision, Value};

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
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Table,
    Csv,
    Json,
}

/// Splits SQL text into statements on `;` outside quotes (' " `) and `--` comments.
/// Blank statements are dropped.
pub fn split_statements(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    let mut chars = text.chars().peekable();
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
                ';' => {
                    if !cur.trim().is_empty() {
                        out.push(cur.trim().to_string());
                    }
                    cur.clear();
                }
                _ => cur.push(c),
            },
        }
    }
    if !cur.trim().is_empty() {
        out.push(cur.trim().to_string());
    }
    out
}

/// Whether the accumulated interactive input ends a statement (a `;` outside quotes at the end).
fn complete(text: &str) -> bool {
    let t = text.trim_end();
    if !t.ends_with(';') {
        return false;
    }
    let mut quote: Option<char> = None;
    for c in t.chars() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == '\'' || c == '"' || c == '`' => quote = Some(c),
            None => {}
        }
    }
    quote.is_none()
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

fn json_value(v: &Value, precision: Precision) -> String {
    match v {
        Value::Null => "null".to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Int(i) => i.to_string(),
        Value::UInt(u) => u.to_string(),
        Value::Float(f) if f.is_finite() => f.to_string(),
        Value::Float(_) => "null".to_string(),
        Value::Str(s) => serde_json::Value::String(s.clone()).to_string(),
        Value::Timestamp(t) => {
            serde_json::Value::String(precision.format_timestamp(*t)).to_string()
        }
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

fn print_result(
    r: &StatementResult,
    format: Format,
    elapsed_s: f64,
    out: &mut impl Write,
) -> std::io::Result<()> {
    match (format, &r.batch) {
        (Format::Table, Some(b)) => {
            write!(out, "{}", render_table(b, r.precision))?;
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
        (Format::Json, Some(b)) => {
            let cols: Vec<String> = b
                .fields
                .iter()
                .map(|f| {
                    format!(
                        "[{},{}]",
                        serde_json::Value::String(f.name.clone()),
                        serde_json::Value::String(f.data_type.to_string())
                    )
                })
                .collect();
            let rows: Vec<String> = (0..b.num_rows())
                .map(|i| {
                    let cells: Vec<String> = b
                        .row(i)
                        .iter()
                        .map(|v| json_value(v, r.precision))
                        .collect();
                    format!("[{}]", cells.join(","))
                })
                .collect();
            writeln!(
                out,
                "{{\"column_meta\":[{}],\"data\":[{}],\"rows\":{}}}",
                cols.join(","),
                rows.join(","),
                b.num_rows()
            )?;
        }
        (Format::Csv, None) => {}
        (Format::Json, None) => writeln!(out, "{{\"affected_rows\":{}}}", r.affected_rows)?,
    }
    Ok(())
}

pub async fn run(args: ShellArgs) -> Result<ExitCode, crate::server::BoxError> {
    let client = Client::connect(&args.host).await?;
    let mut db = args.database.clone().unwrap_or_default();
    if !db.is_empty() {
        if let Err(e) = client.execute(&format!("USE {db}"), "").await {
            eprintln!("error: {e}");
            return Ok(ExitCode::FAILURE);
        }
    }
    let script = match (&args.sql, &args.file) {
        (Some(s), _) => Some(s.clone()),
        (None, Some(f)) => Some(
            std::fs::read_to_string(f).map_err(|e| format!("cannot read {}: {e}", f.display()))?,
        ),
        (None, None) => None,
    };
    let stdout = std::io::stdout();
    if let Some(script) = script {
        for stmt in split_statements(&script) {
            let start = Instant::now();
            match client.execute(&stmt, &db).await {
                Ok(r) => {
                    db = r.db.clone();
                    print_result(
                        &r,
                        args.format,
                        start.elapsed().as_secs_f64(),
                        &mut stdout.lock(),
                    )?;
                }
                Err(e) => {
                    eprintln!("error: {e}");
                    return Ok(ExitCode::FAILURE);
                }
            }
        }
        return Ok(ExitCode::SUCCESS);
    }
    interactive(&client, &mut db, args.format).await
}

async fn interactive(
    client: &Client,
    db: &mut String,
    format: Format,
) -> Result<ExitCode, crate::server::BoxError> {
    let stdin = std::io::stdin();
    let tty = stdin.is_terminal();
    if tty {
        println!("Tidal shell. End statements with ';'. Type 'quit' to leave.");
    }
    let mut buf = String::new();
    loop {
        if tty {
            print!("{}", if buf.is_empty() { "tidal> " } else { "    -> " });
            std::io::stdout().flush()?;
        }
        let mut line = String::new();
        if stdin.lock().read_line(&mut line)? == 0 {
            break;
        }
        let trimmed = line.trim();
        if buf.is_empty()
            && matches!(
                trimmed.trim_end_matches(';').to_ascii_lowercase().as_str(),
                "quit" | "exit" | "q" | "\\q"
            )
        {
            break;
        }
        buf.push_str(&line);
        if !complete(&buf) {
            continue;
        }
        for stmt in split_statements(&buf) {
            let start = Instant::now();
            match client.execute(&stmt, db).await {
                Ok(r) => {
                    *db = r.db.clone();
                    print_result(
                        &r,
                        format,
                        start.elapsed().as_secs_f64(),
                        &mut std::io::stdout().lock(),
                    )?;
                }
                Err(e) => eprintln!("error: {e}"),
            }
        }
        buf.clear();
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_outside_quotes_and_comments() {
        let s = split_statements(
            "use iot; select ';' from t -- a; comment\n; ;insert into t values ('a;b')",
        );
        assert_eq!(
            s,
            vec![
                "use iot",
                "select ';' from t",
                "insert into t values ('a;b')"
            ]
        );
    }

    #[test]
    fn completion_needs_unquoted_semicolon() {
        assert!(complete("select 1;"));
        assert!(!complete("select ';"));
        assert!(!complete("select 1"));
    }
}
