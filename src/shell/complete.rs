//! Tab completion of the shell: SQL keywords and functions, and the names of databases,
//! tables (STABLEs and subtables of the current database) and columns (of its STABLEs),
//! fetched from the server into a [`Catalog`] and refreshed after DDL and `USE`, plus
//! `information_schema` and its tables, which every server has.

use parking_lot::RwLock;
use rustyline::completion::Completer;
use rustyline::highlight::Highlighter;
use rustyline::hint::Hinter;
use rustyline::validate::Validator;
use rustyline::{Context, Helper};
use std::sync::Arc;
use std::time::Duration;
use tidal_client::Client;
use tidal_common::Value;

/// How long one catalog query may take before completion goes on without its names.
const CATALOG_TIMEOUT_MS: u64 = 3_000;
/// Most table names kept for completion (a database may hold millions of subtables).
const TABLE_NAMES_MAX: usize = 10_000;
/// Most STABLEs whose columns are fetched (one DESCRIBE each).
const STABLES_DESCRIBED_MAX: usize = 100;

/// The database of catalog views every server has (its tables: `SYSTEM_TABLES`).
const INFORMATION_SCHEMA: &str = tidal_sql::INFORMATION_SCHEMA;

const KEYWORDS: &[&str] = &[
    "ALTER",
    "ANALYZE",
    "AND",
    "AS",
    "ASC",
    "BETWEEN",
    "BIGINT",
    "BINARY",
    "BOOL",
    "BUFFER",
    "BY",
    "CACHEMODEL",
    "CACHESIZE",
    "CASE",
    "CLUSTER",
    "COMP",
    "COMPACT",
    "COUNT_WINDOW",
    "CREATE",
    "DATABASE",
    "DATABASES",
    "DELETE",
    "DESC",
    "DESCRIBE",
    "DISTINCT",
    "DISTRIBUTED",
    "DNODE",
    "DNODES",
    "DOUBLE",
    "DROP",
    "DURATION",
    "ELSE",
    "END",
    "EVENT_WINDOW",
    "EVERY",
    "EXISTS",
    "EXPLAIN",
    "FILL",
    "FLOAT",
    "FLUSH",
    "FROM",
    "GRANTS",
    "GROUP",
    "HAVING",
    "IF",
    "IN",
    "INSERT",
    "INT",
    "INTERVAL",
    "INTO",
    "IS",
    "KEEP",
    "LICENCES",
    "LIKE",
    "LIMIT",
    "LINEAR",
    "MAXROWS",
    "MINROWS",
    "MNODES",
    "NCHAR",
    "NEXT",
    "NONE",
    "NOT",
    "NOW",
    "NULL",
    "NULLS",
    "OFFSET",
    "OR",
    "ORDER",
    "PARTITION",
    "PRECISION",
    "PREV",
    "QUERIES",
    "RANGE",
    "REPLICA",
    "SELECT",
    "SESSION",
    "SET",
    "SHOW",
    "SLIDING",
    "SLIMIT",
    "SMALLINT",
    "SOFFSET",
    "STABLE",
    "STABLES",
    "START",
    "STATE_WINDOW",
    "STT_TRIGGER",
    "TABLE",
    "TABLES",
    "TAG",
    "TAGS",
    "THEN",
    "TIMESTAMP",
    "TINYINT",
    "UNSIGNED",
    "USE",
    "USING",
    "VALUE",
    "VALUES",
    "VARCHAR",
    "VARIABLES",
    "VGROUPS",
    "VNODES",
    "WAL_FSYNC_PERIOD",
    "WAL_LEVEL",
    "WHEN",
    "WHERE",
    "WITH",
];

const FUNCTIONS: &[&str] = &[
    "ABS",
    "ACOS",
    "APERCENTILE",
    "ASCII",
    "ASIN",
    "ATAN",
    "AVG",
    "BOTTOM",
    "CEIL",
    "CHAR",
    "CHAR_LENGTH",
    "CLIENT_VERSION",
    "COALESCE",
    "CONCAT",
    "CONCAT_WS",
    "COS",
    "COUNT",
    "CSUM",
    "CURRENT_USER",
    "DATABASE",
    "DAYOFWEEK",
    "DEGREES",
    "DERIVATIVE",
    "DIFF",
    "ELAPSED",
    "EXP",
    "FIRST",
    "FLOOR",
    "GREATEST",
    "GROUP_CONCAT",
    "HISTOGRAM",
    "HYPERLOGLOG",
    "IF",
    "IFNULL",
    "INTERP",
    "IRATE",
    "LAG",
    "LAST",
    "LAST_ROW",
    "LEAST",
    "LEASTSQUARES",
    "LENGTH",
    "LOG",
    "LOWER",
    "LTRIM",
    "MAVG",
    "MAX",
    "MIN",
    "MOD",
    "MODE",
    "NULLIF",
    "NVL",
    "NVL2",
    "PERCENTILE",
    "PI",
    "POSITION",
    "POW",
    "RADIANS",
    "RAND",
    "REPEAT",
    "REPLACE",
    "ROUND",
    "RTRIM",
    "SAMPLE",
    "SERVER_STATUS",
    "SERVER_VERSION",
    "SIGN",
    "SIN",
    "SPREAD",
    "SQRT",
    "STATECOUNT",
    "STATEDURATION",
    "STDDEV",
    "STDDEV_POP",
    "SUBSTRING",
    "SUM",
    "TAIL",
    "TAN",
    "TIMEDIFF",
    "TIMETRUNCATE",
    "TIMEZONE",
    "TODAY",
    "TOP",
    "TO_CHAR",
    "TO_ISO8601",
    "TO_TIMESTAMP",
    "TO_UNIXTIMESTAMP",
    "TRIM",
    "TRUNCATE",
    "TWA",
    "UNIQUE",
    "UPPER",
    "USER",
    "VAR_POP",
    "WEEK",
    "WEEKDAY",
    "WEEKOFYEAR",
];

/// The names completion offers, as last fetched from the server.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Catalog {
    pub databases: Vec<String>,
    /// STABLEs and subtables of the current database.
    pub tables: Vec<String>,
    /// Columns and tags of the current database's STABLEs.
    pub columns: Vec<String>,
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// What the word under the cursor names, judged from the words before it.
#[derive(Debug, PartialEq, Eq)]
enum Want {
    Databases,
    Tables,
    /// After `qualifier.`: tables of a database or columns of a table.
    Qualified,
    Anything,
}

/// The completions of the word that ends at byte `pos` of `line`: the byte offset where that
/// word starts and the candidates that replace it, sorted. Keywords and functions follow the
/// case of what was typed (upper case when nothing was); names keep their own case.
pub fn complete(line: &str, pos: usize, cat: &Catalog) -> (usize, Vec<String>) {
    let before = line.get(..pos).unwrap_or(line);
    let start = before
        .char_indices()
        .rev()
        .find(|(_, c)| !is_word_char(*c))
        .map(|(i, c)| i + c.len_utf8())
        .unwrap_or(0);
    let word = &before[start..];
    let head = &before[..start];
    // Inside a string literal there is nothing to complete.
    if head.chars().filter(|c| *c == '\'').count() % 2 == 1 {
        return (start, Vec::new());
    }
    let words: Vec<String> = head
        .split(|c: char| !is_word_char(c))
        .filter(|w| !w.is_empty())
        .map(str::to_ascii_uppercase)
        .collect();
    let prev = words.last().map(String::as_str).unwrap_or("");
    let first = words.first().map(String::as_str).unwrap_or("");
    let want = if head.ends_with('.') {
        Want::Qualified
    } else {
        match prev {
            "USE" | "DATABASE" => Want::Databases,
            // `SHOW TABLE TAGS` / `SHOW TABLE DISTRIBUTED`, not a table name.
            "TABLE" if words.len() == 2 && first == "SHOW" => Want::Anything,
            "DISTRIBUTED" => Want::Tables,
            "FROM" | "JOIN" | "INTO" | "TABLE" | "STABLE" | "DESCRIBE" | "USING" => Want::Tables,
            // `DESC t` (DESCRIBE), not `ORDER BY ts DESC`.
            "DESC" if words.len() == 1 && first == "DESC" => Want::Tables,
            _ => Want::Anything,
        }
    };
    let upper = !word.chars().any(|c| c.is_lowercase());
    let matches = |c: &str| {
        c.len() >= word.len()
            && c.get(..word.len())
                .is_some_and(|p| p.eq_ignore_ascii_case(word))
    };
    let mut out: Vec<String> = Vec::new();
    let mut names = |list: &[String]| {
        out.extend(list.iter().filter(|n| matches(n)).cloned());
    };
    let system = [INFORMATION_SCHEMA.to_string()];
    match want {
        Want::Databases => {
            names(&cat.databases);
            // USE information_schema, but no DROP or ALTER DATABASE of it.
            if prev == "USE" {
                names(&system);
            }
        }
        Want::Tables => {
            names(&cat.tables);
            names(&cat.databases);
            names(&system);
        }
        Want::Qualified => {
            let qualifier = head
                .trim_end_matches('.')
                .rsplit(|c: char| !is_word_char(c))
                .next()
                .unwrap_or("");
            if qualifier.eq_ignore_ascii_case(INFORMATION_SCHEMA) {
                let tables: Vec<String> = crate::frontend::SYSTEM_TABLES
                    .iter()
                    .map(|t| t.to_string())
                    .collect();
                names(&tables);
            } else if cat
                .databases
                .iter()
                .any(|d| d.eq_ignore_ascii_case(qualifier))
            {
                names(&cat.tables);
            } else {
                names(&cat.columns);
            }
        }
        Want::Anything => {
            names(&cat.columns);
            let case = |k: &str| {
                if upper {
                    k.to_string()
                } else {
                    k.to_ascii_lowercase()
                }
            };
            out.extend(KEYWORDS.iter().filter(|k| matches(k)).map(|k| case(k)));
            out.extend(
                FUNCTIONS
                    .iter()
                    .filter(|k| matches(k))
                    .map(|k| format!("{}(", case(k))),
            );
        }
    }
    out.sort();
    out.dedup();
    (start, out)
}

/// The first column of a result as strings.
fn first_column(r: Result<tidal_client::StatementResult, String>) -> Vec<String> {
    let Ok(r) = r else { return Vec::new() };
    let Some(b) = r.batch else {
        return Vec::new();
    };
    let Some(col) = b.columns.first() else {
        return Vec::new();
    };
    (0..b.num_rows())
        .filter_map(|i| match col.get(i) {
            Value::Str(s) => Some(s),
            _ => None,
        })
        .collect()
}

async fn query(
    client: &Client,
    sql: &str,
    db: &str,
) -> Result<tidal_client::StatementResult, String> {
    match tokio::time::timeout(
        Duration::from_millis(CATALOG_TIMEOUT_MS),
        client.execute(sql, db),
    )
    .await
    {
        Ok(r) => r.map_err(|e| e.to_string()),
        Err(_) => Err(format!("no answer within {CATALOG_TIMEOUT_MS} ms")),
    }
}

/// Fetches the names completion offers: databases, and for the current database `db` (if
/// any) its STABLEs, subtables and STABLE columns. Best effort: what cannot be fetched in
/// time is left out.
pub async fn fetch_catalog(client: &Client, db: &str) -> Catalog {
    let mut cat = Catalog {
        databases: first_column(query(client, "SHOW DATABASES", "").await),
        ..Catalog::default()
    };
    if db.is_empty() {
        return cat;
    }
    let stables = first_column(query(client, "SHOW STABLES", db).await);
    let describes = stables
        .iter()
        .take(STABLES_DESCRIBED_MAX)
        .map(|s| async move { query(client, &format!("DESCRIBE `{s}`"), db).await });
    for r in futures::future::join_all(describes).await {
        cat.columns.extend(first_column(r));
    }
    cat.tables = stables;
    let mut tables = first_column(query(client, "SHOW TABLES", db).await);
    tables.truncate(TABLE_NAMES_MAX);
    cat.tables.extend(tables);
    for list in [&mut cat.tables, &mut cat.columns] {
        list.sort();
        list.dedup();
    }
    cat
}

/// The rustyline helper: completion from the shared catalog; no hints, highlighting or
/// validation (statement continuation is the shell loop's job).
pub struct ShellHelper {
    catalog: Arc<RwLock<Catalog>>,
}

impl ShellHelper {
    pub fn new(catalog: Arc<RwLock<Catalog>>) -> ShellHelper {
        ShellHelper { catalog }
    }
}

impl Completer for ShellHelper {
    type Candidate = String;

    fn complete(
        &self,
        line: &str,
        pos: usize,
        _ctx: &Context<'_>,
    ) -> rustyline::Result<(usize, Vec<String>)> {
        Ok(complete(line, pos, &self.catalog.read()))
    }
}

impl Hinter for ShellHelper {
    type Hint = String;
}
impl Highlighter for ShellHelper {}
impl Validator for ShellHelper {}
impl Helper for ShellHelper {}

#[cfg(test)]
mod tests {
    use super::*;

    fn cat() -> Catalog {
        Catalog {
            databases: vec!["iot".into(), "infra".into()],
            tables: vec!["diagnostics".into(), "r_truck_1".into(), "readings".into()],
            columns: vec!["fleet".into(), "ts".into(), "velocity".into()],
        }
    }

    fn words(line: &str) -> Vec<String> {
        complete(line, line.len(), &cat()).1
    }

    #[test]
    fn keywords_follow_the_typed_case() {
        assert_eq!(words("SEL"), vec!["SELECT"]);
        assert_eq!(words("sel"), vec!["select"]);
        assert_eq!(
            complete("select * fr", 11, &cat()),
            (9, vec!["from".into()])
        );
        assert!(words("").contains(&"SELECT".to_string()));
    }

    #[test]
    fn databases_after_use() {
        assert_eq!(words("use i"), vec!["information_schema", "infra", "iot"]);
        assert_eq!(words("USE io"), vec!["iot"]);
        assert_eq!(words("drop database inf"), vec!["infra"]);
    }

    #[test]
    fn tables_after_from_describe_and_using() {
        assert_eq!(words("select * from r"), vec!["r_truck_1", "readings"]);
        assert_eq!(words("describe dia"), vec!["diagnostics"]);
        assert_eq!(words("DESC re"), vec!["readings"]);
        assert_eq!(words("insert into r_truck_2 using rea"), vec!["readings"]);
        // A database also qualifies a table name.
        assert_eq!(
            words("select * from i"),
            vec!["information_schema", "infra", "iot"]
        );
        assert_eq!(words("select * from iot.rea"), vec!["readings"]);
    }

    #[test]
    fn columns_and_functions_elsewhere() {
        assert_eq!(words("select velo"), vec!["velocity"]);
        assert_eq!(words("select avg(vel"), vec!["velocity"]);
        assert_eq!(words("select la"), vec!["lag(", "last(", "last_row("]);
        assert_eq!(words("select readings.fl"), vec!["fleet"]);
        assert_eq!(
            words("select * from readings order by ts as"),
            vec!["as", "asc", "ascii(", "asin("]
        );
        assert_eq!(
            words("select * from readings where fleet = 'ea"),
            Vec::<String>::new(),
            "nothing inside a string"
        );
    }

    #[test]
    fn alter_table_set_tag() {
        assert_eq!(words("alter table r_tr"), vec!["r_truck_1"]);
        assert!(words("ALTER TABLE r_truck_1 SE").contains(&"SET".to_string()));
        assert!(words("alter table r_truck_1 set ta").contains(&"tag".to_string()));
        assert!(words("alter table r_truck_1 set tag fl").contains(&"fleet".to_string()));
    }

    #[test]
    fn information_schema_and_its_tables() {
        assert_eq!(words("use inf"), vec!["information_schema", "infra"]);
        assert_eq!(
            words("select * from information_schema.ins_t"),
            vec!["ins_tables", "ins_tags"]
        );
        assert_eq!(
            words("select * from INFORMATION_SCHEMA.ins_vn"),
            vec!["ins_vnodes"]
        );
        assert_eq!(words("show table distr"), vec!["distributed"]);
        assert_eq!(words("show table distributed rea"), vec!["readings"]);
        assert_eq!(words("show create table rea"), vec!["readings"]);
        assert_eq!(words("SHOW VARI"), vec!["VARIABLES"]);
        assert_eq!(words("show vn"), vec!["vnodes"]);
    }

    #[test]
    fn the_cursor_may_be_mid_line() {
        let line = "select velo from readings";
        assert_eq!(complete(line, 11, &cat()), (7, vec!["velocity".into()]));
        // A position inside a multi-byte character does not panic.
        let _ = complete("é", 1, &cat());
    }
}
