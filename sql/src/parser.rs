//! Recursive-descent parser for the TDengine dialect (DDL, INSERT, SELECT [DISTINCT] with
//! PARTITION BY, INTERVAL/SLIDING/FILL, STATE_WINDOW, SESSION, EVENT_WINDOW, COUNT_WINDOW,
//! RANGE/EVERY, SLIMIT, CASE, nested subqueries, EXPLAIN [ANALYZE]).

use crate::ast::*;
use crate::error::{syntax, Pos, SqlError};
use crate::lexer::{tokenize, Tok, Token};
use tidal_common::{parse_duration, ColumnDef, DataType, DbOptions, Precision, Value};

// CREATE/ALTER/DROP USER, SHOW USERS, GRANT, REVOKE.
mod users;

/// Words that end an expression list or cannot be an implicit alias.
const RESERVED: &[&str] = &[
    "select",
    "from",
    "where",
    "partition",
    "group",
    "having",
    "order",
    "limit",
    "slimit",
    "soffset",
    "offset",
    "interval",
    "sliding",
    "fill",
    "state_window",
    "session",
    "event_window",
    "count_window",
    "and",
    "or",
    "not",
    "as",
    "by",
    "asc",
    "desc",
    "union",
    "on",
    "join",
    "using",
    "tags",
    "values",
    "in",
    "is",
    "between",
    "like",
    "match",
    "nmatch",
    "null",
    "nulls",
    "into",
    "when",
    "then",
    "else",
    "end",
    "distinct",
    "range",
    "every",
];

/// Longest SQL text accepted, in bytes (TDengine's maximum SQL length is 1 MB): bounds the
/// memory and time one request can take in the parser. Larger loads belong in several
/// statements or the write API.
pub const SQL_BYTES_MAX: usize = 1 << 20;

/// Parses one or more `;`-separated statements; empty statements are skipped.
pub fn parse(sql: &str) -> Result<Vec<Statement>, SqlError> {
    if sql.len() > SQL_BYTES_MAX {
        return Err(SqlError::InvalidArgument(format!(
            "SQL statement too long: {} bytes, the limit is {SQL_BYTES_MAX} bytes (1 MiB); split it into several statements",
            sql.len()
        )));
    }
    let tokens = tokenize(sql)?;
    let mut p = Parser {
        t: tokens,
        i: 0,
        nest: 0,
    };
    let mut out = Vec::new();
    loop {
        while p.eat_op(";") {}
        if p.at_eof() {
            break;
        }
        out.push(p.statement()?);
        if !p.at_eof() && !p.peek_op(";") {
            return Err(p.unexpected("';' or end of input"));
        }
    }
    Ok(out)
}

struct Parser {
    t: Vec<Token>,
    i: usize,
    /// Current nesting of parentheses / subqueries (bounded to keep the stack small).
    nest: usize,
}

const MAX_NEST: usize = 48;

fn lower_ident(t: &Tok) -> Option<String> {
    match t {
        Tok::Ident(s) => Some(s.to_lowercase()),
        Tok::QIdent(s) => Some(s.clone()),
        _ => None,
    }
}

impl Parser {
    fn peek(&self) -> &Token {
        // the token vector always ends with Eof
        let i = self.i.min(self.t.len() - 1);
        &self.t[i]
    }

    fn peek_at(&self, k: usize) -> &Tok {
        let i = (self.i + k).min(self.t.len() - 1);
        &self.t[i].tok
    }

    fn pos(&self) -> Pos {
        self.peek().pos
    }

    fn advance(&mut self) -> Token {
        let t = self.peek().clone();
        if self.i < self.t.len() - 1 {
            self.i += 1;
        }
        t
    }

    fn at_eof(&self) -> bool {
        matches!(self.peek().tok, Tok::Eof)
    }

    fn unexpected(&self, expected: &str) -> SqlError {
        let t = self.peek();
        syntax(
            t.pos,
            format!("expected {expected}, found {}", t.tok.describe()),
        )
    }

    fn peek_kw(&self, kw: &str) -> bool {
        matches!(&self.peek().tok, Tok::Ident(s) if s.eq_ignore_ascii_case(kw))
    }

    fn peek_kw_at(&self, k: usize, kw: &str) -> bool {
        matches!(self.peek_at(k), Tok::Ident(s) if s.eq_ignore_ascii_case(kw))
    }

    fn eat_kw(&mut self, kw: &str) -> bool {
        if self.peek_kw(kw) {
            self.advance();
            true
        } else {
            false
        }
    }

    fn expect_kw(&mut self, kw: &str) -> Result<(), SqlError> {
        if self.eat_kw(kw) {
            Ok(())
        } else {
            Err(self.unexpected(&kw.to_uppercase()))
        }
    }

    fn peek_op(&self, op: &str) -> bool {
        matches!(&self.peek().tok, Tok::Op(o) if *o == op)
    }

    fn eat_op(&mut self, op: &str) -> bool {
        if self.peek_op(op) {
            self.advance();
            true
        } else {
            false
        }
    }

    fn expect_op(&mut self, op: &str) -> Result<(), SqlError> {
        if self.eat_op(op) {
            Ok(())
        } else {
            Err(self.unexpected(&format!("'{op}'")))
        }
    }

    fn ident(&mut self, what: &str) -> Result<String, SqlError> {
        match lower_ident(&self.peek().tok) {
            Some(s) => {
                self.advance();
                Ok(s)
            }
            None => Err(self.unexpected(what)),
        }
    }

    fn object_ref(&mut self, what: &str) -> Result<ObjectRef, SqlError> {
        let first = self.ident(what)?;
        if self.eat_op(".") {
            let name = self.ident(what)?;
            Ok(ObjectRef {
                db: Some(first),
                name,
            })
        } else {
            Ok(ObjectRef {
                db: None,
                name: first,
            })
        }
    }

    fn if_not_exists(&mut self) -> Result<bool, SqlError> {
        if self.peek_kw("if") {
            self.advance();
            self.expect_kw("not")?;
            self.expect_kw("exists")?;
            Ok(true)
        } else {
            Ok(false)
        }
    }

    fn if_exists(&mut self) -> Result<bool, SqlError> {
        if self.eat_kw("if") {
            self.expect_kw("exists")?;
            Ok(true)
        } else {
            Ok(false)
        }
    }

    fn u64_lit(&mut self, what: &str) -> Result<u64, SqlError> {
        let t = self.peek().clone();
        match &t.tok {
            Tok::Int(s) => {
                self.advance();
                s.parse()
                    .map_err(|_| syntax(t.pos, format!("{what}: number {s} is too large")))
            }
            _ => Err(self.unexpected(what)),
        }
    }

    // -----------------------------------------------------------------------------------------

    fn statement(&mut self) -> Result<Statement, SqlError> {
        let pos = self.pos();
        let kw = match &self.peek().tok {
            Tok::Ident(s) => s.to_lowercase(),
            Tok::Op("(") => return Ok(Statement::Select(Box::new(self.query_or_paren()?))),
            _ => return Err(self.unexpected("a statement")),
        };
        match kw.as_str() {
            "select" => Ok(Statement::Select(Box::new(self.query_or_paren()?))),
            "explain" => {
                self.advance();
                let analyze = self.eat_kw("analyze");
                Ok(Statement::Explain {
                    analyze,
                    query: Box::new(self.query_or_paren()?),
                })
            }
            "create" => {
                self.advance();
                self.create()
            }
            "drop" => {
                self.advance();
                self.drop()
            }
            "alter" => {
                self.advance();
                self.alter()
            }
            "use" => {
                self.advance();
                Ok(Statement::Use {
                    db: self.ident("a database name")?,
                })
            }
            "insert" => {
                self.advance();
                self.insert()
            }
            "show" => {
                self.advance();
                self.show()
            }
            "kill" => {
                self.advance();
                self.kill()
            }
            "grant" | "revoke" => {
                self.advance();
                self.grant(kw == "revoke")
            }
            "describe" | "desc" => {
                self.advance();
                Ok(Statement::Describe {
                    table: self.object_ref("a table name")?,
                })
            }
            "delete" => {
                self.advance();
                self.expect_kw("from")?;
                let table_pos = self.pos();
                let table = self.object_ref("a table name")?;
                let selection = if self.eat_kw("where") {
                    Some(self.expr()?)
                } else {
                    None
                };
                Ok(Statement::Delete {
                    table,
                    table_pos,
                    selection,
                })
            }
            "flush" | "compact" => {
                self.advance();
                self.expect_kw("database")?;
                let name = self.ident("a database name")?;
                Ok(if kw == "flush" {
                    Statement::FlushDatabase { name }
                } else {
                    Statement::CompactDatabase { name }
                })
            }
            other => Err(syntax(pos, format!("unknown statement '{other}'"))),
        }
    }

    fn create(&mut self) -> Result<Statement, SqlError> {
        if self.eat_kw("user") {
            return self.create_user();
        }
        if self.eat_kw("database") {
            let if_not_exists = self.if_not_exists()?;
            let name = self.ident("a database name")?;
            let options = self.db_options()?;
            return Ok(Statement::CreateDatabase {
                name,
                if_not_exists,
                options,
            });
        }
        if self.eat_kw("stable") {
            let if_not_exists = self.if_not_exists()?;
            let r = self.object_ref("a STABLE name")?;
            let columns = self.column_defs()?;
            self.expect_kw("tags")?;
            let tags = self.column_defs()?;
            return Ok(Statement::CreateStable {
                db: r.db,
                name: r.name,
                if_not_exists,
                columns,
                tags,
            });
        }
        if self.eat_kw("table") {
            let if_not_exists = self.if_not_exists()?;
            let r = self.object_ref("a table name")?;
            if self.peek_kw("using") {
                let mut tables = vec![self.create_subtable(r)?];
                loop {
                    // optional repeated IF NOT EXISTS per table
                    let save = self.i;
                    let _ = self.if_not_exists()?;
                    if lower_ident(&self.peek().tok).is_some() && !self.peek_kw("using") {
                        let r = self.object_ref("a table name")?;
                        tables.push(self.create_subtable(r)?);
                    } else {
                        self.i = save;
                        break;
                    }
                }
                return Ok(Statement::CreateTables {
                    if_not_exists,
                    tables,
                });
            }
            let pos = self.pos();
            let columns = self.column_defs()?;
            if self.eat_kw("tags") {
                let tags = self.column_defs()?;
                return Ok(Statement::CreateStable {
                    db: r.db,
                    name: r.name,
                    if_not_exists,
                    columns,
                    tags,
                });
            }
            return Err(syntax(
                pos,
                "normal tables (without TAGS) are not supported; use CREATE STABLE ... TAGS (...)",
            ));
        }
        Err(self.unexpected("DATABASE, STABLE or TABLE"))
    }

    fn create_subtable(&mut self, name: ObjectRef) -> Result<CreateSubtable, SqlError> {
        self.expect_kw("using")?;
        let stable = self.object_ref("a STABLE name")?;
        let (tag_names, tags) = self.tag_values()?;
        Ok(CreateSubtable {
            name,
            stable,
            tag_names,
            tags,
        })
    }

    /// `[(tag names)] TAGS (values)`
    fn tag_values(&mut self) -> Result<(Option<Vec<String>>, Vec<InsertValue>), SqlError> {
        let tag_names = if self.peek_op("(") {
            Some(self.ident_list()?)
        } else {
            None
        };
        self.expect_kw("tags")?;
        self.expect_op("(")?;
        let mut tags = Vec::new();
        if !self.peek_op(")") {
            loop {
                tags.push(self.insert_value()?);
                if !self.eat_op(",") {
                    break;
                }
            }
        }
        self.expect_op(")")?;
        Ok((tag_names, tags))
    }

    fn ident_list(&mut self) -> Result<Vec<String>, SqlError> {
        self.expect_op("(")?;
        let mut v = vec![self.ident("a name")?];
        while self.eat_op(",") {
            v.push(self.ident("a name")?);
        }
        self.expect_op(")")?;
        Ok(v)
    }

    fn column_defs(&mut self) -> Result<Vec<ColumnDef>, SqlError> {
        self.expect_op("(")?;
        let mut out = Vec::new();
        loop {
            out.push(self.column_def()?);
            if !self.eat_op(",") {
                break;
            }
        }
        self.expect_op(")")?;
        Ok(out)
    }

    /// `name type [ENCODE '..'] [COMPRESS '..'] [LEVEL '..']`.
    fn column_def(&mut self) -> Result<ColumnDef, SqlError> {
        let name = self.ident("a column name")?;
        let data_type = self.data_type()?;
        let mut d = ColumnDef::new(name, data_type);
        // TDengine 3.3: ENCODE '..' COMPRESS '..' LEVEL '..', each optional, any order.
        let pos = self.pos();
        let mut spec = tidal_common::ColumnCodecSpec::default();
        loop {
            let slot = if self.eat_kw("ENCODE") {
                &mut spec.encode
            } else if self.eat_kw("COMPRESS") {
                &mut spec.compress
            } else if self.eat_kw("LEVEL") {
                &mut spec.level
            } else {
                break;
            };
            let v = match &self.peek().tok {
                Tok::Str(s) => s.clone(),
                _ => return Err(self.unexpected("a quoted string")),
            };
            self.advance();
            *slot = Some(v);
        }
        if spec != tidal_common::ColumnCodecSpec::default() {
            tidal_codec::ColumnCodec::parse(
                data_type,
                spec.encode.as_deref(),
                spec.compress.as_deref(),
                spec.level.as_deref(),
                2,
            )
            .map_err(|e| syntax(pos, format!("column '{}': {e}", d.name)))?;
            d.codec = Some(spec);
        }
        Ok(d)
    }

    /// ALTER STABLE [db.]name ADD COLUMN c type | DROP COLUMN c | MODIFY COLUMN c type |
    /// ADD TAG t type | DROP TAG t | MODIFY TAG t type | RENAME TAG old new (one change per
    /// statement, as TDengine).
    fn alter_stable(&mut self) -> Result<Statement, SqlError> {
        let r = self.object_ref("a STABLE name")?;
        let pos = self.pos();
        let verb = if self.eat_kw("add") {
            "add"
        } else if self.eat_kw("drop") {
            "drop"
        } else if self.eat_kw("modify") {
            "modify"
        } else if self.eat_kw("rename") {
            "rename"
        } else {
            return Err(self.unexpected("ADD, DROP, MODIFY or RENAME"));
        };
        let tag = if self.eat_kw("tag") {
            true
        } else if self.eat_kw("column") {
            false
        } else {
            return Err(self.unexpected("COLUMN or TAG"));
        };
        let change =
            match (verb, tag) {
                ("add", false) => AlterStable::AddColumn(self.column_def()?),
                ("add", true) => AlterStable::AddTag(self.column_def()?),
                ("modify", false) => AlterStable::ModifyColumn(self.column_def()?),
                ("modify", true) => AlterStable::ModifyTag(self.column_def()?),
                ("drop", false) => AlterStable::DropColumn(self.ident("a column name")?),
                ("drop", true) => AlterStable::DropTag(self.ident("a tag name")?),
                ("rename", true) => AlterStable::RenameTag {
                    from: self.ident("a tag name")?,
                    to: self.ident("the new tag name")?,
                },
                _ => return Err(syntax(
                    pos,
                    "RENAME COLUMN is not supported (TDengine renames tags only); use RENAME TAG",
                )),
            };
        Ok(Statement::AlterStable {
            db: r.db,
            name: r.name,
            change,
        })
    }

    /// ALTER TABLE [db.]name SET TAG tag = value [, tag = value ...] (TDengine 3; the one-tag
    /// form of TDengine 2 is the same with one assignment). Values are literals, as in TAGS (..).
    fn alter_table(&mut self) -> Result<Statement, SqlError> {
        let table_pos = self.pos();
        let table = self.object_ref("a table name")?;
        if !self.eat_kw("set") {
            return Err(self.unexpected(
                "SET TAG (ALTER TABLE changes a subtable's tags; ALTER STABLE changes a schema)",
            ));
        }
        if !self.eat_kw("tag") {
            return Err(self.unexpected("TAG after SET"));
        }
        let mut tags: Vec<TagAssignment> = Vec::new();
        loop {
            let pos = self.pos();
            let tag = self.ident("a tag name")?;
            if tags.iter().any(|t| t.tag.eq_ignore_ascii_case(&tag)) {
                return Err(syntax(pos, format!("tag '{tag}' is set twice")));
            }
            self.expect_op("=")?;
            let value = self.insert_value()?;
            tags.push(TagAssignment { tag, pos, value });
            if !self.eat_op(",") {
                break;
            }
        }
        Ok(Statement::AlterTableSetTags {
            table,
            table_pos,
            tags,
        })
    }

    fn data_type(&mut self) -> Result<DataType, SqlError> {
        let pos = self.pos();
        let mut name = match &self.peek().tok {
            Tok::Ident(s) => s.clone(),
            _ => return Err(self.unexpected("a data type")),
        };
        self.advance();
        let mut len = None;
        if self.eat_op("(") {
            let n = self.u64_lit("a length")?;
            len = Some(u32::try_from(n).map_err(|_| syntax(pos, "type length too large"))?);
            self.expect_op(")")?;
        }
        if self.peek_kw("unsigned") {
            self.advance();
            name.push_str(" UNSIGNED");
        }
        DataType::from_sql(&name, len).ok_or_else(|| {
            if len.is_none()
                && matches!(
                    name.to_ascii_uppercase().as_str(),
                    "VARCHAR" | "BINARY" | "NCHAR"
                )
            {
                syntax(pos, format!("type {name} needs a length, e.g. {name}(32)"))
            } else {
                syntax(pos, format!("unknown data type '{name}'"))
            }
        })
    }

    fn db_options(&mut self) -> Result<DbOptions, SqlError> {
        let mut o = DbOptions::default();
        self.db_options_into(&mut o, &mut Vec::new())?;
        o.validate().map_err(SqlError::InvalidArgument)?;
        Ok(o)
    }

    /// Parses `OPTION value ...` into `o`, recording the (lower-case) names given in `set`.
    fn db_options_into(
        &mut self,
        o: &mut DbOptions,
        set: &mut Vec<String>,
    ) -> Result<(), SqlError> {
        const DAY_NS: i64 = 86_400_000_000_000;
        while let Tok::Ident(word) = &self.peek().tok {
            let pos = self.pos();
            let opt = word.to_lowercase();
            set.push(opt.clone());
            self.advance();
            let num = |p: &mut Parser, what: &str| -> Result<u32, SqlError> {
                let v = p.u64_lit(what)?;
                u32::try_from(v).map_err(|_| syntax(pos, format!("{what} is too large")))
            };
            match opt.as_str() {
                "vgroups" => o.vgroups = num(self, "VGROUPS")?,
                "replica" => o.replica = num(self, "REPLICA")?,
                "buffer" => o.buffer_mb = num(self, "BUFFER")?,
                "wal_level" => {
                    o.wal_level = u8::try_from(num(self, "WAL_LEVEL")?)
                        .map_err(|_| syntax(pos, "WAL_LEVEL is too large"))?
                }
                "wal_fsync_period" => o.wal_fsync_period_ms = num(self, "WAL_FSYNC_PERIOD")?,
                "cachesize" => o.cache_size_mb = num(self, "CACHESIZE")?,
                "stt_trigger" => o.stt_trigger = num(self, "STT_TRIGGER")?,
                "minrows" => o.minrows = num(self, "MINROWS")?,
                "maxrows" => o.maxrows = num(self, "MAXROWS")?,
                "comp" => {
                    o.comp = u8::try_from(num(self, "COMP")?)
                        .map_err(|_| syntax(pos, "COMP must be 0, 1 or 2"))?
                }
                "precision" | "cachemodel" => {
                    let s = match &self.peek().tok {
                        Tok::Str(s) => s.clone(),
                        _ => return Err(self.unexpected("a quoted string")),
                    };
                    self.advance();
                    if opt == "precision" {
                        o.precision = Precision::parse(&s).ok_or_else(|| {
                            syntax(
                                pos,
                                format!("PRECISION must be 'ms', 'us' or 'ns', got '{s}'"),
                            )
                        })?;
                    } else {
                        o.cache_model = s.to_lowercase();
                    }
                }
                "keep" | "duration" => {
                    // KEEP may list up to three values; the last (largest) one is the retention.
                    let minutes = loop {
                        let t = self.advance();
                        let text = match &t.tok {
                            Tok::Int(s) | Tok::Duration(s) => s.clone(),
                            _ => {
                                return Err(syntax(
                                    t.pos,
                                    format!(
                                        "expected a duration for {}, found {}",
                                        opt.to_uppercase(),
                                        t.tok.describe()
                                    ),
                                ))
                            }
                        };
                        let ns = parse_duration(&text, DAY_NS).ok_or_else(|| {
                            syntax(
                                t.pos,
                                format!("invalid duration '{text}' for {}", opt.to_uppercase()),
                            )
                        })?;
                        let m = (ns / 60_000_000_000).max(0) as u64;
                        if opt == "duration" || !self.eat_op(",") {
                            break m;
                        }
                    };
                    if opt == "keep" {
                        o.keep_minutes = minutes;
                    } else {
                        o.duration_minutes = minutes;
                    }
                }
                _ => {
                    return Err(syntax(
                        pos,
                        format!("unknown database option '{}'", opt.to_uppercase()),
                    ))
                }
            }
        }
        Ok(())
    }

    /// ALTER DATABASE name option value ... (the options a running database can change),
    /// ALTER STABLE, ALTER USER.
    fn alter(&mut self) -> Result<Statement, SqlError> {
        if self.eat_kw("user") {
            return self.alter_user();
        }
        if self.eat_kw("stable") {
            return self.alter_stable();
        }
        if self.eat_kw("table") {
            return self.alter_table();
        }
        if !self.peek_kw("database") {
            return Err(self.unexpected("DATABASE, STABLE, TABLE or USER"));
        }
        self.expect_kw("database")?;
        let name = self.ident("a database name")?;
        let pos = self.pos();
        let mut options = DbOptions::default();
        let mut set = Vec::new();
        self.db_options_into(&mut options, &mut set)?;
        if set.is_empty() {
            return Err(syntax(pos, "ALTER DATABASE needs at least one option"));
        }
        const ALTERABLE: [&str; 6] = [
            "cachemodel",
            "cachesize",
            "keep",
            "buffer",
            "stt_trigger",
            "minrows",
        ];
        if let Some(bad) = set.iter().find(|k| !ALTERABLE.contains(&k.as_str())) {
            return Err(syntax(
                pos,
                format!(
                    "{} cannot be changed by ALTER DATABASE; these can: {}",
                    bad.to_uppercase(),
                    ALTERABLE.map(|k| k.to_uppercase()).join(", ")
                ),
            ));
        }
        Ok(Statement::AlterDatabase { name, options, set })
    }

    fn drop(&mut self) -> Result<Statement, SqlError> {
        if self.eat_kw("user") {
            return self.drop_user();
        }
        if self.eat_kw("database") {
            let if_exists = self.if_exists()?;
            return Ok(Statement::DropDatabase {
                if_exists,
                name: self.ident("a database name")?,
            });
        }
        if self.eat_kw("stable") {
            let if_exists = self.if_exists()?;
            return Ok(Statement::DropStable {
                if_exists,
                name: self.object_ref("a STABLE name")?,
            });
        }
        if self.eat_kw("table") {
            let if_exists = self.if_exists()?;
            let mut tables = vec![self.object_ref("a table name")?];
            while self.eat_op(",") {
                let _ = self.if_exists()?;
                tables.push(self.object_ref("a table name")?);
            }
            return Ok(Statement::DropTable { if_exists, tables });
        }
        Err(self.unexpected("DATABASE, STABLE or TABLE"))
    }

    fn show(&mut self) -> Result<Statement, SqlError> {
        if self.eat_kw("users") {
            return Ok(Statement::User(UserStatement::Show));
        }
        if self.eat_kw("databases") {
            return Ok(Statement::ShowDatabases);
        }
        if self.eat_kw("dnodes") {
            return Ok(Statement::ShowDnodes);
        }
        if self.eat_kw("mnodes") {
            return Ok(Statement::ShowMnodes);
        }
        if self.eat_kw("queries") {
            return Ok(Statement::ShowQueries);
        }
        if self.eat_kw("grants") || self.eat_kw("licences") || self.eat_kw("licenses") {
            return Ok(Statement::ShowGrants);
        }
        // SHOW CLUSTER VARIABLES is what TDengine calls SHOW VARIABLES since 3.0.1.6.
        if self.peek_kw("variables") || (self.peek_kw("cluster") && self.peek_kw_at(1, "variables"))
        {
            self.eat_kw("cluster");
            self.advance();
            let like = self.like_opt()?;
            return Ok(Statement::ShowVariables { dnode: None, like });
        }
        if self.eat_kw("cluster") {
            return Ok(Statement::ShowCluster);
        }
        if self.peek_kw("local") && self.peek_kw_at(1, "variables") {
            return Err(syntax(
                self.pos(),
                "SHOW LOCAL VARIABLES lists a client's settings, which the server does not \
                 know; SHOW VARIABLES lists this node's",
            ));
        }
        if self.eat_kw("vnodes") {
            let dnode = if self.eat_kw("on") {
                self.expect_kw("dnode")?;
                Some(DnodeRef::Id(self.dnode_id()?))
            } else if let Tok::Str(ep) = &self.peek().tok {
                let ep = ep.clone();
                self.advance();
                Some(DnodeRef::Endpoint(ep))
            } else if matches!(self.peek().tok, Tok::Int(_)) {
                Some(DnodeRef::Id(self.dnode_id()?))
            } else {
                None
            };
            return Ok(Statement::ShowVnodes { dnode });
        }
        // TDengine's older spelling: SHOW dnode_id VNODES.
        if matches!(self.peek().tok, Tok::Int(_)) && self.peek_kw_at(1, "vnodes") {
            let id = self.dnode_id()?;
            self.advance();
            return Ok(Statement::ShowVnodes {
                dnode: Some(DnodeRef::Id(id)),
            });
        }
        if self.eat_kw("dnode") {
            let dnode = self.dnode_id()?;
            self.expect_kw("variables")?;
            let like = self.like_opt()?;
            return Ok(Statement::ShowVariables {
                dnode: Some(dnode),
                like,
            });
        }
        if self.eat_kw("create") {
            if self.eat_kw("database") {
                return Ok(Statement::ShowCreateDatabase {
                    name: self.ident("a database name")?,
                });
            }
            let stable = if self.eat_kw("stable") {
                true
            } else if self.eat_kw("table") {
                false
            } else {
                return Err(self.unexpected("DATABASE, STABLE or TABLE"));
            };
            let table = self.object_ref("a table name")?;
            return Ok(Statement::ShowCreateTable { table, stable });
        }
        if self.peek_kw("table") && self.peek_kw_at(1, "distributed") {
            self.advance();
            self.advance();
            let table = self.object_ref("a table name")?;
            return Ok(Statement::ShowTableDistributed { table });
        }
        // SHOW TABLE TAGS FROM t [FROM db] / SHOW TAGS FROM t [FROM db]
        if self.peek_kw("table") && self.peek_kw_at(1, "tags") {
            self.advance();
            self.advance();
            let table = self.show_from_table()?;
            return Ok(Statement::ShowTableTags { table });
        }
        if self.eat_kw("tags") {
            let table = self.show_from_table()?;
            return Ok(Statement::ShowTags { table });
        }
        if self.eat_kw("table") {
            return Err(self.unexpected("TAGS or DISTRIBUTED"));
        }
        let db =
            if lower_ident(&self.peek().tok).is_some() && matches!(self.peek_at(1), Tok::Op(".")) {
                let d = self.ident("a database name")?;
                self.advance();
                Some(d)
            } else {
                None
            };
        if self.eat_kw("vgroups") {
            return Ok(Statement::ShowVgroups { db });
        }
        let stables = self.eat_kw("stables");
        if stables || self.eat_kw("tables") {
            let like = self.like_opt()?;
            return Ok(if stables {
                Statement::ShowStables { db, like }
            } else {
                Statement::ShowTables { db, like }
            });
        }
        Err(self.unexpected(
            "DATABASES, DNODES, MNODES, STABLES, TABLES, VGROUPS, VNODES, TABLE TAGS, TABLE DISTRIBUTED, TAGS, CREATE, QUERIES, VARIABLES, DNODE n VARIABLES, CLUSTER or GRANTS",
        ))
    }

    /// A data node id (`SHOW DNODE n ...`, `SHOW VNODES ON DNODE n`).
    fn dnode_id(&mut self) -> Result<u32, SqlError> {
        let at = self.pos();
        let id = self.u64_lit("a data node id")?;
        u32::try_from(id).map_err(|_| syntax(at, format!("data node id {id} is too large")))
    }

    /// An optional `LIKE 'pattern'`.
    fn like_opt(&mut self) -> Result<Option<String>, SqlError> {
        if !self.eat_kw("like") {
            return Ok(None);
        }
        match &self.peek().tok {
            Tok::Str(s) => {
                let s = s.clone();
                self.advance();
                Ok(Some(s))
            }
            _ => Err(self.unexpected("a quoted pattern")),
        }
    }

    /// `FROM [db.]table [FROM db]` of SHOW [TABLE] TAGS.
    fn show_from_table(&mut self) -> Result<ObjectRef, SqlError> {
        self.expect_kw("from")?;
        let mut table = self.object_ref("a table name")?;
        if self.peek_kw("from") {
            let pos = self.pos();
            self.advance();
            let db = self.ident("a database name")?;
            if table.db.is_some() {
                return Err(syntax(
                    pos,
                    format!("table {table} already names its database; drop FROM {db}"),
                ));
            }
            table.db = Some(db);
        }
        Ok(table)
    }

    /// `KILL QUERY 'id'`
    fn kill(&mut self) -> Result<Statement, SqlError> {
        self.expect_kw("query")?;
        match &self.peek().tok {
            Tok::Str(s) => {
                let id = s.clone();
                self.advance();
                Ok(Statement::KillQuery { id })
            }
            _ => Err(self.unexpected("a quoted query id from SHOW QUERIES, e.g. '1a2b:7'")),
        }
    }

    fn insert(&mut self) -> Result<Statement, SqlError> {
        self.expect_kw("into")?;
        let mut items = Vec::new();
        loop {
            let table = self.object_ref("a table name")?;
            let using = if self.eat_kw("using") {
                let stable = self.object_ref("a STABLE name")?;
                let (tag_names, tags) = self.tag_values()?;
                Some(InsertUsing {
                    stable,
                    tag_names,
                    tags,
                })
            } else {
                None
            };
            let columns = if self.peek_op("(") && !self.peek_kw_at(1, "select") {
                Some(self.ident_list()?)
            } else {
                None
            };
            if items.is_empty() && (self.peek_kw("select") || self.peek_op("(")) {
                // INSERT INTO t [USING ..] [(cols)] SELECT ...
                let query = self.query_or_paren()?;
                return Ok(Statement::InsertSelect {
                    target: InsertItem {
                        table,
                        using,
                        columns,
                        rows: Vec::new(),
                        row_numbers: Vec::new(),
                    },
                    query: Box::new(query),
                });
            }
            self.expect_kw("values")?;
            let mut rows = Vec::new();
            while self.peek_op("(") {
                self.advance();
                let mut row = Vec::new();
                loop {
                    row.push(self.insert_value()?);
                    if !self.eat_op(",") {
                        break;
                    }
                }
                self.expect_op(")")?;
                rows.push(row);
                self.eat_op(",");
            }
            if rows.is_empty() {
                return Err(self.unexpected("'(' starting a row of values"));
            }
            items.push(InsertItem {
                table,
                using,
                columns,
                rows,
                row_numbers: Vec::new(),
            });
            if self.at_eof() || self.peek_op(";") {
                break;
            }
            // `INSERT INTO t1 VALUES (...) INTO t2 ...` is not TDengine; `t2 VALUES` is.
            self.eat_kw("into");
        }
        Ok(Statement::Insert { items })
    }

    fn signed_number(&mut self, neg: bool) -> Result<Value, SqlError> {
        let t = self.advance();
        match &t.tok {
            Tok::Int(s) => {
                if neg {
                    let full = format!("-{s}");
                    match full.parse::<i64>() {
                        Ok(v) => Ok(Value::Int(v)),
                        Err(_) => full
                            .parse::<f64>()
                            .map(Value::Float)
                            .map_err(|_| syntax(t.pos, format!("invalid number -{s}"))),
                    }
                } else if let Ok(v) = s.parse::<i64>() {
                    Ok(Value::Int(v))
                } else if let Ok(v) = s.parse::<u64>() {
                    Ok(Value::UInt(v))
                } else {
                    s.parse::<f64>()
                        .map(Value::Float)
                        .map_err(|_| syntax(t.pos, format!("invalid number {s}")))
                }
            }
            Tok::Float(s) => s
                .parse::<f64>()
                .map(|f| Value::Float(if neg { -f } else { f }))
                .map_err(|_| syntax(t.pos, format!("invalid number {s}"))),
            other => Err(syntax(
                t.pos,
                format!("expected a number, found {}", other.describe()),
            )),
        }
    }

    fn insert_value(&mut self) -> Result<InsertValue, SqlError> {
        let pos = self.pos();
        match self.peek().tok.clone() {
            Tok::Str(s) => {
                self.advance();
                Ok(InsertValue::Value(Value::Str(s)))
            }
            Tok::Int(_) | Tok::Float(_) => Ok(InsertValue::Value(self.signed_number(false)?)),
            Tok::Op("-") => {
                self.advance();
                Ok(InsertValue::Value(self.signed_number(true)?))
            }
            Tok::Op("+") => {
                self.advance();
                Ok(InsertValue::Value(self.signed_number(false)?))
            }
            Tok::Ident(w) => {
                let w = w.to_lowercase();
                self.advance();
                match w.as_str() {
                    "null" => Ok(InsertValue::Value(Value::Null)),
                    "true" => Ok(InsertValue::Value(Value::Bool(true))),
                    "false" => Ok(InsertValue::Value(Value::Bool(false))),
                    // TDengine's `today()` takes its parentheses; `now` may go without.
                    "now" | "today" => {
                        let midnight = w == "today";
                        if midnight {
                            if !self.eat_op("(") {
                                return Err(syntax(pos, "write TODAY() with its parentheses"));
                            }
                            self.expect_op(")")?;
                        } else if self.eat_op("(") {
                            self.expect_op(")")?;
                        }
                        let mut offset_ns = 0i64;
                        while self.peek_op("+") || self.peek_op("-") {
                            let neg = self.peek_op("-");
                            self.advance();
                            let d = self.duration_ns()?;
                            offset_ns = if neg {
                                offset_ns.saturating_sub(d)
                            } else {
                                offset_ns.saturating_add(d)
                            };
                        }
                        Ok(InsertValue::Now {
                            offset_ns,
                            midnight,
                        })
                    }
                    _ => Err(syntax(pos, format!("expected a value, found '{w}'"))),
                }
            }
            _ => Err(self.unexpected("a value")),
        }
    }

    /// A duration literal: `10m`, `1d`; a bare integer is milliseconds.
    fn duration_ns(&mut self) -> Result<i64, SqlError> {
        let t = self.advance();
        match &t.tok {
            Tok::Duration(s) | Tok::Int(s) => parse_duration(s, 1_000_000)
                .ok_or_else(|| syntax(t.pos, format!("invalid duration '{s}'"))),
            other => Err(syntax(
                t.pos,
                format!("expected a duration like 10m, found {}", other.describe()),
            )),
        }
    }

    // -----------------------------------------------------------------------------------------
    // SELECT

    fn enter(&mut self) -> Result<(), SqlError> {
        self.nest += 1;
        if self.nest > MAX_NEST {
            return Err(syntax(
                self.pos(),
                "expression or subquery nested too deeply",
            ));
        }
        Ok(())
    }

    fn query_or_paren(&mut self) -> Result<Query, SqlError> {
        self.enter()?;
        let r = self.query_or_paren_inner();
        self.nest -= 1;
        r
    }

    fn query_or_paren_inner(&mut self) -> Result<Query, SqlError> {
        let (first, _) = self.union_member()?;
        if !self.peek_kw("union") {
            return Ok(first);
        }
        let pos = self.pos();
        let mut members = vec![first];
        let mut all = Vec::new();
        let mut last_in_parens = false;
        while self.eat_kw("union") {
            all.push(self.eat_kw("all"));
            let (m, parens) = self.union_member()?;
            members.push(m);
            last_in_parens = parens;
        }
        // ORDER BY and LIMIT after an unparenthesized last member order and cut the union
        let (order_by, limit, slimit) = match members.last_mut() {
            Some(last) if !last_in_parens => (
                std::mem::take(&mut last.order_by),
                last.limit.take(),
                last.slimit.take(),
            ),
            _ => (Vec::new(), None, None),
        };
        Ok(Query {
            distinct: false,
            tags: None,
            projection: vec![SelectItem::Wildcard(pos)],
            from: FromItem::Union { members, all, pos },
            selection: None,
            partition_by: Vec::new(),
            window: None,
            group_by: Vec::new(),
            having: None,
            order_by,
            slimit,
            limit,
        })
    }

    /// One SELECT of a UNION (or the only one), and whether it stood in parentheses.
    fn union_member(&mut self) -> Result<(Query, bool), SqlError> {
        if self.eat_op("(") {
            let q = self.query_or_paren()?;
            self.expect_op(")")?;
            Ok((q, true))
        } else {
            Ok((self.query()?, false))
        }
    }

    fn query(&mut self) -> Result<Query, SqlError> {
        self.expect_kw("select")?;
        let distinct = self.eat_kw("distinct");
        let tags_pos = self.pos();
        let tags = self.eat_kw("tags").then_some(tags_pos);
        let mut projection = Vec::new();
        loop {
            if self.peek_op("*") {
                let pos = self.pos();
                self.advance();
                projection.push(SelectItem::Wildcard(pos));
            } else {
                let expr = self.expr()?;
                let alias = self.alias()?;
                projection.push(SelectItem::Expr { expr, alias });
            }
            if !self.eat_op(",") {
                break;
            }
        }
        let from_pos = self.pos();
        let has_from = self.eat_kw("from");
        let pos = self.pos();
        let from = if !has_from {
            // Without FROM the statement ends here (or its subquery does): anything else is
            // most likely a misspelt FROM, and saying so beats a complaint about what follows.
            if !(self.at_eof() || self.peek_op(";") || self.peek_op(")")) {
                return Err(self.unexpected("FROM"));
            }
            FromItem::None { pos: from_pos }
        } else if self.eat_op("(") {
            let q = self.query_or_paren()?;
            self.expect_op(")")?;
            let alias = self.alias()?;
            FromItem::Subquery {
                query: Box::new(q),
                alias,
                pos,
            }
        } else {
            let name = self.object_ref("a table name or '('")?;
            let alias = self.alias()?;
            FromItem::Table { name, alias, pos }
        };
        let mut q = Query {
            distinct,
            tags,
            projection,
            from,
            selection: None,
            partition_by: Vec::new(),
            window: None,
            group_by: Vec::new(),
            having: None,
            order_by: Vec::new(),
            slimit: None,
            limit: None,
        };
        if self.eat_kw("where") {
            q.selection = Some(self.expr()?);
        }
        if self.peek_kw("partition") {
            self.advance();
            self.expect_kw("by")?;
            q.partition_by = self.expr_list()?;
        }
        q.window = self.window()?;
        if self.peek_kw("group") {
            self.advance();
            self.expect_kw("by")?;
            q.group_by = self.expr_list()?;
        }
        if self.eat_kw("having") {
            q.having = Some(self.expr()?);
        }
        if q.window.is_none() {
            q.window = self.window()?;
        }
        if self.peek_kw("order") {
            self.advance();
            self.expect_kw("by")?;
            loop {
                let expr = self.expr()?;
                let asc = if self.eat_kw("desc") {
                    false
                } else {
                    self.eat_kw("asc");
                    true
                };
                let nulls_pos = self.pos();
                if self.eat_kw("nulls") {
                    let first = self.eat_kw("first");
                    if !first {
                        self.expect_kw("last")?;
                    }
                    // NULL sorts below every value: first ascending, last descending
                    if first != asc {
                        return Err(SqlError::Unsupported(format!(
                            "NULLS {} with {} order is not supported (NULL comes {} in {} order) at {nulls_pos}",
                            if first { "FIRST" } else { "LAST" },
                            if asc { "ascending" } else { "descending" },
                            if asc { "first" } else { "last" },
                            if asc { "ascending" } else { "descending" },
                        )));
                    }
                }
                q.order_by.push(OrderItem { expr, asc });
                if !self.eat_op(",") {
                    break;
                }
            }
        }
        if self.eat_kw("slimit") {
            q.slimit = Some(self.limit_tail("soffset")?);
        }
        if self.eat_kw("limit") {
            q.limit = Some(self.limit_tail("offset")?);
        }
        if self.eat_kw("slimit") {
            q.slimit = Some(self.limit_tail("soffset")?);
        }
        Ok(q)
    }

    fn limit_tail(&mut self, offset_kw: &str) -> Result<Limit, SqlError> {
        let a = self.u64_lit("a row count")?;
        if self.eat_kw(offset_kw) {
            let b = self.u64_lit("an offset")?;
            return Ok(Limit {
                limit: a,
                offset: b,
            });
        }
        if self.eat_op(",") {
            // LIMIT offset, count
            let b = self.u64_lit("a row count")?;
            return Ok(Limit {
                limit: b,
                offset: a,
            });
        }
        Ok(Limit {
            limit: a,
            offset: 0,
        })
    }

    /// `FILL(NONE|NULL|PREV|NEXT|LINEAR|VALUE, v, ...)`, if present.
    fn fill_clause(&mut self, pos: Pos) -> Result<Option<Fill>, SqlError> {
        if !self.eat_kw("fill") {
            return Ok(None);
        }
        self.expect_op("(")?;
        let w = self.ident("a FILL mode")?;
        let fill = match w.as_str() {
            "none" => Fill::None,
            "null" => Fill::Null,
            "prev" => Fill::Prev,
            "next" => Fill::Next,
            "linear" => Fill::Linear,
            "value" => {
                let mut vals = Vec::new();
                while self.eat_op(",") {
                    match self.insert_value()? {
                        InsertValue::Value(v) => vals.push(v),
                        now @ InsertValue::Now { .. } => {
                            let f = now.time_function().unwrap_or("NOW");
                            return Err(syntax(pos, format!("{f} is not a FILL value")));
                        }
                    }
                }
                Fill::Value(vals)
            }
            other => return Err(syntax(pos, format!("unknown FILL mode '{other}'"))),
        };
        self.expect_op(")")?;
        Ok(Some(fill))
    }

    fn window(&mut self) -> Result<Option<WindowClause>, SqlError> {
        if self.peek_kw("range") && matches!(self.peek_at(1), Tok::Op("(")) {
            let pos = self.pos();
            self.advance();
            self.advance();
            let start = self.expr()?;
            let end = if self.eat_op(",") {
                Some(self.expr()?)
            } else {
                None
            };
            self.expect_op(")")?;
            let mut every_ns = None;
            if self.eat_kw("every") {
                self.expect_op("(")?;
                every_ns = Some(self.duration_ns()?);
                self.expect_op(")")?;
            }
            let fill = self.fill_clause(pos)?;
            return Ok(Some(WindowClause::Interp {
                start,
                end,
                every_ns,
                fill,
                pos,
            }));
        }
        let pos = self.pos();
        if self.peek_kw("interval") && matches!(self.peek_at(1), Tok::Op("(")) {
            self.advance();
            self.advance();
            let interval_ns = self.duration_ns()?;
            let offset_ns = if self.eat_op(",") {
                Some(self.duration_ns()?)
            } else {
                None
            };
            self.expect_op(")")?;
            let mut sliding_ns = None;
            if self.eat_kw("sliding") {
                self.expect_op("(")?;
                sliding_ns = Some(self.duration_ns()?);
                self.expect_op(")")?;
            }
            let fill = self.fill_clause(pos)?;
            return Ok(Some(WindowClause::Interval {
                interval_ns,
                offset_ns,
                sliding_ns,
                fill,
                pos,
            }));
        }
        if self.peek_kw("state_window") {
            self.advance();
            self.expect_op("(")?;
            let expr = self.expr()?;
            self.expect_op(")")?;
            return Ok(Some(WindowClause::StateWindow { expr, pos }));
        }
        if self.peek_kw("event_window") {
            self.advance();
            self.expect_kw("start")?;
            self.expect_kw("with")?;
            let start = self.expr()?;
            self.expect_kw("end")?;
            self.expect_kw("with")?;
            let end = self.expr()?;
            return Ok(Some(WindowClause::Event { start, end, pos }));
        }
        if self.peek_kw("count_window") && matches!(self.peek_at(1), Tok::Op("(")) {
            self.advance();
            self.advance();
            let n = self.u64_lit("a row count")?;
            let step = if self.eat_op(",") {
                Some(self.u64_lit("a step")?)
            } else {
                None
            };
            self.expect_op(")")?;
            return Ok(Some(WindowClause::Count { n, step, pos }));
        }
        if self.peek_kw("session") && matches!(self.peek_at(1), Tok::Op("(")) {
            self.advance();
            self.advance();
            let column = self.expr()?;
            self.expect_op(",")?;
            let gap_ns = self.duration_ns()?;
            self.expect_op(")")?;
            return Ok(Some(WindowClause::Session {
                column,
                gap_ns,
                pos,
            }));
        }
        Ok(None)
    }

    fn alias(&mut self) -> Result<Option<String>, SqlError> {
        if self.eat_kw("as") {
            return Ok(Some(self.ident("an alias")?));
        }
        match &self.peek().tok {
            Tok::QIdent(s) => {
                let s = s.clone();
                self.advance();
                Ok(Some(s))
            }
            Tok::Ident(s) if !RESERVED.contains(&s.to_lowercase().as_str()) => {
                let s = s.to_lowercase();
                self.advance();
                Ok(Some(s))
            }
            _ => Ok(None),
        }
    }

    fn expr_list(&mut self) -> Result<Vec<Expr>, SqlError> {
        let mut v = vec![self.expr()?];
        while self.eat_op(",") {
            v.push(self.expr()?);
        }
        Ok(v)
    }

    pub fn expr(&mut self) -> Result<Expr, SqlError> {
        self.or_expr(0)
    }

    fn or_expr(&mut self, depth: usize) -> Result<Expr, SqlError> {
        if depth > 200 {
            return Err(syntax(self.pos(), "expression nested too deeply"));
        }
        let mut l = self.and_expr(depth)?;
        while self.eat_kw("or") {
            let r = self.and_expr(depth)?;
            l = Expr::Binary {
                op: BinOp::Or,
                left: Box::new(l),
                right: Box::new(r),
            };
        }
        Ok(l)
    }

    fn and_expr(&mut self, depth: usize) -> Result<Expr, SqlError> {
        let mut l = self.not_expr(depth)?;
        while self.eat_kw("and") {
            let r = self.not_expr(depth)?;
            l = Expr::Binary {
                op: BinOp::And,
                left: Box::new(l),
                right: Box::new(r),
            };
        }
        Ok(l)
    }

    fn not_expr(&mut self, depth: usize) -> Result<Expr, SqlError> {
        if self.eat_kw("not") {
            self.enter()?;
            let r = self.not_expr(depth + 1);
            self.nest -= 1;
            return Ok(Expr::Not(Box::new(r?)));
        }
        self.cmp_expr(depth)
    }

    fn cmp_expr(&mut self, depth: usize) -> Result<Expr, SqlError> {
        let l = self.add_expr(depth)?;
        let op = match &self.peek().tok {
            Tok::Op("=") => Some(BinOp::Eq),
            Tok::Op("!=") => Some(BinOp::NotEq),
            Tok::Op("<") => Some(BinOp::Lt),
            Tok::Op("<=") => Some(BinOp::LtEq),
            Tok::Op(">") => Some(BinOp::Gt),
            Tok::Op(">=") => Some(BinOp::GtEq),
            _ => None,
        };
        if let Some(op) = op {
            self.advance();
            let r = self.add_expr(depth)?;
            return Ok(Expr::Binary {
                op,
                left: Box::new(l),
                right: Box::new(r),
            });
        }
        if self.eat_kw("is") {
            let negated = self.eat_kw("not");
            self.expect_kw("null")?;
            return Ok(Expr::IsNull {
                expr: Box::new(l),
                negated,
            });
        }
        let negated = if self.peek_kw("not")
            && (self.peek_kw_at(1, "in")
                || self.peek_kw_at(1, "between")
                || self.peek_kw_at(1, "like"))
        {
            self.advance();
            true
        } else {
            false
        };
        if self.eat_kw("in") {
            self.expect_op("(")?;
            let list = self.expr_list()?;
            self.expect_op(")")?;
            return Ok(Expr::InList {
                expr: Box::new(l),
                list,
                negated,
            });
        }
        if self.eat_kw("between") {
            let low = self.add_expr(depth)?;
            self.expect_kw("and")?;
            let high = self.add_expr(depth)?;
            return Ok(Expr::Between {
                expr: Box::new(l),
                low: Box::new(low),
                high: Box::new(high),
                negated,
            });
        }
        if self.eat_kw("like") {
            let pattern = self.add_expr(depth)?;
            return Ok(Expr::Like {
                expr: Box::new(l),
                pattern: Box::new(pattern),
                negated,
            });
        }
        if negated {
            return Err(self.unexpected("IN, BETWEEN or LIKE"));
        }
        for (kw, negated) in [("match", false), ("nmatch", true)] {
            if self.peek_kw(kw) {
                let pos = self.pos();
                self.advance();
                let t = self.advance();
                let Tok::Str(pattern) = t.tok else {
                    return Err(syntax(
                        t.pos,
                        format!(
                            "{} needs a quoted regular expression, found {}",
                            kw.to_uppercase(),
                            t.tok.describe()
                        ),
                    ));
                };
                return Ok(Expr::Match {
                    expr: Box::new(l),
                    pattern,
                    negated,
                    pos,
                });
            }
        }
        Ok(l)
    }

    fn add_expr(&mut self, depth: usize) -> Result<Expr, SqlError> {
        let mut l = self.mul_expr(depth)?;
        loop {
            let op = match &self.peek().tok {
                Tok::Op("+") => BinOp::Add,
                Tok::Op("-") => BinOp::Sub,
                _ => break,
            };
            self.advance();
            let r = self.mul_expr(depth)?;
            l = Expr::Binary {
                op,
                left: Box::new(l),
                right: Box::new(r),
            };
        }
        Ok(l)
    }

    fn mul_expr(&mut self, depth: usize) -> Result<Expr, SqlError> {
        let mut l = self.unary(depth)?;
        loop {
            let op = match &self.peek().tok {
                Tok::Op("*") => BinOp::Mul,
                Tok::Op("/") => BinOp::Div,
                Tok::Op("%") => BinOp::Mod,
                _ => break,
            };
            self.advance();
            let r = self.unary(depth)?;
            l = Expr::Binary {
                op,
                left: Box::new(l),
                right: Box::new(r),
            };
        }
        Ok(l)
    }

    fn unary(&mut self, depth: usize) -> Result<Expr, SqlError> {
        if depth > 200 {
            return Err(syntax(self.pos(), "expression nested too deeply"));
        }
        if self.peek_op("-") {
            self.advance();
            if matches!(self.peek().tok, Tok::Int(_) | Tok::Float(_)) {
                return Ok(Expr::Literal(self.signed_number(true)?));
            }
            self.enter()?;
            let r = self.unary(depth + 1);
            self.nest -= 1;
            return Ok(Expr::Neg(Box::new(r?)));
        }
        if self.eat_op("+") {
            self.enter()?;
            let r = self.unary(depth + 1);
            self.nest -= 1;
            return r;
        }
        self.primary(depth)
    }

    fn primary(&mut self, depth: usize) -> Result<Expr, SqlError> {
        self.enter()?;
        let r = self.primary_inner(depth);
        self.nest -= 1;
        r
    }

    fn primary_inner(&mut self, depth: usize) -> Result<Expr, SqlError> {
        let t = self.peek().clone();
        match &t.tok {
            Tok::Int(_) | Tok::Float(_) => Ok(Expr::Literal(self.signed_number(false)?)),
            Tok::Str(s) => {
                self.advance();
                Ok(Expr::Literal(Value::Str(s.clone())))
            }
            Tok::Duration(_) => Ok(Expr::Duration(self.duration_ns()?)),
            Tok::Op("(") => {
                self.advance();
                if self.peek_kw("select") {
                    return Err(syntax(t.pos, "scalar subqueries are not supported"));
                }
                let e = self.or_expr(depth + 1)?;
                self.expect_op(")")?;
                Ok(e)
            }
            Tok::QIdent(s) => {
                self.advance();
                self.column_tail(s.clone(), t.pos)
            }
            Tok::Ident(w) => {
                let lw = w.to_lowercase();
                match lw.as_str() {
                    "null" => {
                        self.advance();
                        return Ok(Expr::Literal(Value::Null));
                    }
                    "true" | "false" => {
                        self.advance();
                        return Ok(Expr::Literal(Value::Bool(lw == "true")));
                    }
                    "now" => {
                        self.advance();
                        if self.eat_op("(") {
                            self.expect_op(")")?;
                        }
                        return Ok(Expr::Now);
                    }
                    "case" => {
                        self.advance();
                        let operand = if self.peek_kw("when") {
                            None
                        } else {
                            Some(Box::new(self.or_expr(depth + 1)?))
                        };
                        let mut whens = Vec::new();
                        while self.eat_kw("when") {
                            let a = self.or_expr(depth + 1)?;
                            self.expect_kw("then")?;
                            let b = self.or_expr(depth + 1)?;
                            whens.push((a, b));
                        }
                        if whens.is_empty() {
                            return Err(self.unexpected("WHEN"));
                        }
                        let else_ = if self.eat_kw("else") {
                            Some(Box::new(self.or_expr(depth + 1)?))
                        } else {
                            None
                        };
                        self.expect_kw("end")?;
                        return Ok(Expr::Case {
                            operand,
                            whens,
                            else_,
                        });
                    }
                    // POSITION(a IN b): `a` stops before IN (an IN list is no argument here)
                    "position" if matches!(self.peek_at(1), Tok::Op("(")) => {
                        self.advance();
                        self.advance();
                        let needle = self.add_expr(depth + 1)?;
                        self.expect_kw("in")?;
                        let hay = self.or_expr(depth + 1)?;
                        self.expect_op(")")?;
                        return Ok(Expr::Function {
                            name: lw,
                            args: vec![needle, hay],
                            star: false,
                            distinct: false,
                            pos: t.pos,
                        });
                    }
                    "cast" if matches!(self.peek_at(1), Tok::Op("(")) => {
                        self.advance();
                        self.advance();
                        let e = self.or_expr(depth + 1)?;
                        self.expect_kw("as")?;
                        let data_type = self.data_type()?;
                        self.expect_op(")")?;
                        return Ok(Expr::Cast {
                            expr: Box::new(e),
                            data_type,
                        });
                    }
                    _ => {}
                }
                if RESERVED.contains(&lw.as_str()) {
                    return Err(self.unexpected("an expression"));
                }
                self.advance();
                if self.peek_op("(") {
                    self.advance();
                    let mut args = Vec::new();
                    let mut star = false;
                    let mut distinct = false;
                    if self.eat_op("*") {
                        star = true;
                    } else if !self.peek_op(")") {
                        distinct = self.eat_kw("distinct");
                        loop {
                            args.push(self.or_expr(depth + 1)?);
                            if !self.eat_op(",") {
                                break;
                            }
                        }
                    }
                    self.expect_op(")")?;
                    return Ok(Expr::Function {
                        name: lw,
                        args,
                        star,
                        distinct,
                        pos: t.pos,
                    });
                }
                self.column_tail(lw, t.pos)
            }
            _ => Err(self.unexpected("an expression")),
        }
    }

    /// `name` or `qualifier.name` (the qualifier, a table or alias, is dropped).
    fn column_tail(&mut self, first: String, pos: Pos) -> Result<Expr, SqlError> {
        if self.peek_op(".") {
            self.advance();
            let p = self.pos();
            if self.eat_op("*") {
                return Err(syntax(p, "qualified * is not supported"));
            }
            let name = self.ident("a column name")?;
            return Ok(Expr::Column { name, pos: p });
        }
        Ok(Expr::Column { name: first, pos })
    }
}
