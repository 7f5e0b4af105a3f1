//! InfluxDB 1.x's `/query` endpoint, for the statements InfluxDB clients send by themselves
//! around their writes: `CREATE DATABASE` (Telegraf sends it when it starts and again when a
//! write answers "database not found"), `DROP DATABASE` and `SHOW DATABASES` (client
//! libraries' database helpers, dashboards' connection checks). Queries are Tidal SQL, at
//! `POST /rest/sql`: any other statement is refused with a 400 that says so, never run as
//! something else.
//!
//! As InfluxDB 1.x: `q` comes from the URL or, for POST, from a form body
//! (`application/x-www-form-urlencoded`); statements are separated by `;` and run in order,
//! and the first that fails ends the request (its error is in its result, with status 200);
//! a statement that cannot be parsed fails the whole request with 400 before any runs;
//! statements that change the server need POST; `CREATE DATABASE` of a database that exists
//! and `DROP DATABASE` of one that does not succeed. A database created here keeps
//! nanosecond timestamps (`PRECISION 'ns'`), as InfluxDB does, so that a client's points
//! are stored as it wrote them.

use super::AppState;
use axum::body::Body;
use axum::extract::{Query, State};
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use std::collections::HashMap;
use std::sync::Arc;
use tidal_common::Value;

/// Most statements one `q` may hold (each is a catalog call).
const STATEMENTS_MAX: usize = 64;

/// A statement `/query` runs.
#[derive(Debug, PartialEq, Eq)]
enum Statement {
    CreateDatabase(String),
    DropDatabase(String),
    ShowDatabases,
}

impl Statement {
    /// The statement's verb when it changes the server (InfluxDB refuses those over GET).
    fn change(&self) -> Option<&'static str> {
        match self {
            Statement::CreateDatabase(_) => Some("CREATE DATABASE"),
            Statement::DropDatabase(_) => Some("DROP DATABASE"),
            Statement::ShowDatabases => None,
        }
    }

    /// The Tidal SQL that does what the statement asks. Names were checked by [`parse`] to
    /// be letters, digits and `_`, so quoting them in backquotes cannot be escaped.
    fn sql(&self) -> String {
        match self {
            Statement::CreateDatabase(db) => {
                format!("CREATE DATABASE IF NOT EXISTS `{db}` PRECISION 'ns'")
            }
            Statement::DropDatabase(db) => format!("DROP DATABASE IF EXISTS `{db}`"),
            Statement::ShowDatabases => "SHOW DATABASES".to_string(),
        }
    }
}

/// What went wrong parsing `q`, in InfluxDB's words where it has them.
#[derive(Debug, PartialEq, Eq)]
struct ParseError(String);

/// A token of InfluxQL: a keyword or bare identifier, a double-quoted identifier, or `;`.
#[derive(Debug, PartialEq, Eq)]
enum Token {
    Word(String),
    Quoted(String),
    Semicolon,
    /// Any other character: always a syntax error here.
    Other(char),
}

/// The tokens of `q` with the character (1-based) each starts at; a quoted identifier that
/// never ends is an error.
fn tokens(q: &str) -> Result<Vec<(Token, usize)>, ParseError> {
    let chars: Vec<char> = q.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(&c) = chars.get(i) {
        let at = i + 1;
        i += 1;
        match c {
            c if c.is_whitespace() => {}
            ';' => out.push((Token::Semicolon, at)),
            '"' => {
                let mut s = String::new();
                loop {
                    let ch = chars.get(i).copied();
                    i += 1;
                    match ch {
                        Some('"') => break,
                        Some('\\') if i < chars.len() => {
                            s.extend(chars.get(i));
                            i += 1;
                        }
                        Some(ch) if ch != '\\' => s.push(ch),
                        _ => {
                            return Err(ParseError(format!(
                                "found unterminated quoted identifier at char {at}"
                            )))
                        }
                    }
                }
                out.push((Token::Quoted(s), at));
            }
            c if c.is_alphanumeric() || c == '_' => {
                let mut s = String::from(c);
                while let Some(&n) = chars.get(i) {
                    if !(n.is_alphanumeric() || n == '_') {
                        break;
                    }
                    s.push(n);
                    i += 1;
                }
                out.push((Token::Word(s), at));
            }
            other => out.push((Token::Other(other), at)),
        }
    }
    Ok(out)
}

fn describe(t: Option<&(Token, usize)>) -> String {
    match t {
        None => "EOF".to_string(),
        Some((Token::Word(w), at)) | Some((Token::Quoted(w), at)) => format!("{w} at char {at}"),
        Some((Token::Semicolon, at)) => format!("; at char {at}"),
        Some((Token::Other(c), at)) => format!("{c} at char {at}"),
    }
}

/// A database name as Tidal takes it: letters, digits and `_`, not starting with a digit.
fn database_name(t: Option<&(Token, usize)>) -> Result<String, ParseError> {
    let (name, at) = match t {
        Some((Token::Word(w), at)) | Some((Token::Quoted(w), at)) => (w, *at),
        other => {
            return Err(ParseError(format!(
                "found {}, expected identifier",
                describe(other)
            )))
        }
    };
    let valid = name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && name.chars().next().is_some_and(|c| !c.is_ascii_digit());
    if !valid {
        return Err(ParseError(format!(
            "invalid database name {name:?} at char {at}: Tidal database names use letters, \
             digits and '_', not starting with a digit"
        )));
    }
    Ok(name.clone())
}

fn is_word(t: Option<&(Token, usize)>, kw: &str) -> bool {
    matches!(t, Some((Token::Word(w), _)) if w.eq_ignore_ascii_case(kw))
}

/// The statements of `q`, or why it cannot be run.
fn parse(q: &str) -> Result<Vec<Statement>, ParseError> {
    let toks = tokens(q)?;
    let mut out = Vec::new();
    for stmt in toks.split(|(t, _)| *t == Token::Semicolon) {
        let Some(first) = stmt.first() else {
            continue;
        };
        let (s, used) = if is_word(Some(first), "CREATE") && is_word(stmt.get(1), "DATABASE") {
            (Statement::CreateDatabase(database_name(stmt.get(2))?), 3)
        } else if is_word(Some(first), "DROP") && is_word(stmt.get(1), "DATABASE") {
            (Statement::DropDatabase(database_name(stmt.get(2))?), 3)
        } else if is_word(Some(first), "SHOW") && is_word(stmt.get(1), "DATABASES") {
            (Statement::ShowDatabases, 2)
        } else {
            return Err(ParseError(format!(
                "statement at char {} is not supported: /query runs CREATE DATABASE, DROP \
                 DATABASE and SHOW DATABASES; query in SQL with POST /rest/sql",
                first.1
            )));
        };
        if out.len() == STATEMENTS_MAX {
            return Err(ParseError(format!(
                "more than {STATEMENTS_MAX} statements in one query: send them in several"
            )));
        }
        match stmt.get(used) {
            None => out.push(s),
            Some(rest) if is_word(Some(rest), "WITH") => {
                return Err(ParseError(format!(
                    "retention policies are not supported (WITH at char {}): Tidal keeps a \
                     database's data for its KEEP, set with CREATE DATABASE ... KEEP at POST \
                     /rest/sql",
                    rest.1
                )))
            }
            other => {
                return Err(ParseError(format!(
                    "found {}, expected ; or EOF",
                    describe(other)
                )))
            }
        }
    }
    if out.is_empty() {
        return Err(ParseError("found EOF, expected a statement".to_string()));
    }
    Ok(out)
}

/// The names in a `SHOW DATABASES` answer's `name` column.
fn database_names(r: &tidal_client::StatementResult) -> Vec<serde_json::Value> {
    let Some(b) = &r.batch else {
        return Vec::new();
    };
    let Some(col) = b.fields.iter().position(|f| f.name == "name") else {
        return Vec::new();
    };
    (0..b.num_rows())
        .filter_map(|i| match b.row(i).get(col) {
            Some(Value::Str(s)) => Some(serde_json::json!([s])),
            _ => None,
        })
        .collect()
}

fn answer(status: StatusCode, body: serde_json::Value, pretty: bool) -> Response {
    let text = if pretty {
        serde_json::to_string_pretty(&body)
    } else {
        serde_json::to_string(&body)
    }
    .unwrap_or_else(|_| "{}".to_string());
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        text + "\n",
    )
        .into_response()
}

fn error(status: StatusCode, message: String, pretty: bool) -> Response {
    answer(status, serde_json::json!({ "error": message }), pretty)
}

/// `GET|POST /query`.
pub(super) async fn query(
    State(st): State<Arc<AppState>>,
    method: Method,
    Query(params): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let pretty = params.get("pretty").is_some_and(|p| p == "true");
    let mut q = params.get("q").cloned();
    let form = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/x-www-form-urlencoded"));
    if method == Method::POST && form {
        let limit = st.limits.sql_bytes_max;
        let raw = match axum::body::to_bytes(body, limit).await {
            Ok(raw) => raw,
            Err(e) => {
                return error(
                    StatusCode::BAD_REQUEST,
                    format!("cannot read the form body (at most {limit} bytes): {e}"),
                    pretty,
                )
            }
        };
        if let Some((_, v)) = form_urlencoded::parse(&raw).find(|(k, _)| k == "q") {
            q = Some(v.into_owned());
        }
    }
    let Some(q) = q.filter(|q| !q.trim().is_empty()) else {
        return error(
            StatusCode::BAD_REQUEST,
            "missing required parameter \"q\"".to_string(),
            pretty,
        );
    };
    let stmts = match parse(&q) {
        Ok(s) => s,
        Err(ParseError(e)) => {
            return error(
                StatusCode::BAD_REQUEST,
                format!("error parsing query: {e}"),
                pretty,
            )
        }
    };
    if method != Method::POST {
        if let Some(what) = stmts.iter().find_map(Statement::change) {
            return error(
                StatusCode::METHOD_NOT_ALLOWED,
                format!("{what} changes the server: send it with POST"),
                pretty,
            );
        }
    }
    let mut results = Vec::with_capacity(stmts.len());
    for (id, s) in stmts.iter().enumerate() {
        match st.client.execute(&s.sql(), "").await {
            Ok(r) => {
                let mut res = serde_json::json!({ "statement_id": id });
                if *s == Statement::ShowDatabases {
                    let values = database_names(&r);
                    let mut series = serde_json::json!({"name": "databases", "columns": ["name"]});
                    // InfluxDB leaves `values` out when there are none.
                    if !values.is_empty() {
                        series["values"] = serde_json::Value::Array(values);
                    }
                    res["series"] = serde_json::json!([series]);
                }
                results.push(res);
            }
            Err(e) => {
                results.push(serde_json::json!({ "statement_id": id, "error": e.message }));
                break;
            }
        }
    }
    answer(
        StatusCode::OK,
        serde_json::json!({ "results": results }),
        pretty,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_parse_case_insensitively_with_quoted_names() {
        assert_eq!(
            parse(r#"CREATE DATABASE "telegraf""#),
            Ok(vec![Statement::CreateDatabase("telegraf".into())])
        );
        // An escaped quote is part of the name (which Tidal then refuses).
        let e = parse(r#"DROP DATABASE "a\"b""#)
            .err()
            .map(|e| e.0)
            .unwrap_or_default();
        assert!(
            e.starts_with(r#"invalid database name "a\"b" at char 15"#),
            "{e}"
        );
        assert_eq!(
            parse("create database iot; show Databases ;drop DATABASE \"x_1\";"),
            Ok(vec![
                Statement::CreateDatabase("iot".into()),
                Statement::ShowDatabases,
                Statement::DropDatabase("x_1".into()),
            ])
        );
    }

    #[test]
    fn other_statements_and_bad_syntax_are_refused_with_where() {
        let err = |q: &str| parse(q).err().map(|e| e.0).unwrap_or_default();
        assert!(
            err("SELECT * FROM cpu").contains("not supported"),
            "{}",
            err("SELECT 1")
        );
        assert!(err("SELECT * FROM cpu").contains("POST /rest/sql"));
        assert_eq!(err("CREATE DATABASE"), "found EOF, expected identifier");
        assert_eq!(
            err("CREATE DATABASE a b"),
            "found b at char 19, expected ; or EOF"
        );
        assert!(err("CREATE DATABASE a WITH DURATION 1d").contains("WITH at char 19"));
        assert!(err("CREATE DATABASE \"a").contains("unterminated quoted identifier at char 17"));
        assert!(err("CREATE DATABASE 1a").contains("invalid database name \"1a\""));
        assert!(err("CREATE DATABASE \"my-db\"").contains("invalid database name \"my-db\""));
        assert_eq!(err("  ; "), "found EOF, expected a statement");
        assert!(err("CREATE DATABASE a; SELECT 1").contains("at char 20 is not supported"));
        assert_eq!(
            parse(&"SHOW DATABASES;".repeat(STATEMENTS_MAX)).map(|v| v.len()),
            Ok(64)
        );
        assert!(err(&"SHOW DATABASES;".repeat(STATEMENTS_MAX + 1)).contains("more than 64"));
    }

    /// Random text over the bytes that matter to the tokenizer never panics, and every
    /// error names a position inside the text.
    #[test]
    fn random_text_never_panics() {
        use rand::{Rng, SeedableRng};
        let alphabet = [
            "CREATE",
            "DATABASE",
            "DROP",
            "SHOW",
            "DATABASES",
            "WITH",
            " ",
            "\"",
            "\\",
            ";",
            "a",
            "_",
            "1",
            "-",
            "é",
            "\u{1F600}",
            "\n",
        ];
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        for _ in 0..20_000 {
            let n = rng.random_range(0..12);
            let q: String = (0..n)
                .map(|_| alphabet[rng.random_range(0..alphabet.len())])
                .collect();
            if let Err(ParseError(e)) = parse(&q) {
                assert!(!e.is_empty(), "{q:?}");
            }
        }
    }

    #[test]
    fn names_are_quoted_in_the_sql() {
        assert_eq!(
            Statement::CreateDatabase("select".into()).sql(),
            "CREATE DATABASE IF NOT EXISTS `select` PRECISION 'ns'"
        );
        assert_eq!(
            Statement::DropDatabase("x".into()).sql(),
            "DROP DATABASE IF EXISTS `x`"
        );
    }
}
