//! CREATE USER, ALTER USER ... PASS, DROP USER, GRANT and REVOKE (SHOW USERS is parsed with
//! the other SHOW statements).

use super::Parser;
use crate::ast::{Statement, UserStatement};
use crate::error::{syntax, SqlError};
use crate::lexer::Tok;

impl Parser {
    /// A user name: an identifier (lower-cased unless `quoted`).
    fn user_name(&mut self) -> Result<String, SqlError> {
        self.ident("a user name")
    }

    /// `PASS 'password'` (a quoted string keeps case and any character).
    fn password(&mut self) -> Result<String, SqlError> {
        self.expect_kw("pass")?;
        match &self.peek().tok {
            Tok::Str(s) => {
                let s = s.clone();
                self.advance();
                Ok(s)
            }
            _ => Err(self.unexpected("the password as a quoted string, e.g. PASS 'secret'")),
        }
    }

    pub(super) fn create_user(&mut self) -> Result<Statement, SqlError> {
        let name = self.user_name()?;
        let password = self.password()?;
        Ok(Statement::User(UserStatement::Create { name, password }))
    }

    pub(super) fn alter_user(&mut self) -> Result<Statement, SqlError> {
        let name = self.user_name()?;
        let password = self.password()?;
        Ok(Statement::User(UserStatement::AlterPassword {
            name,
            password,
        }))
    }

    pub(super) fn drop_user(&mut self) -> Result<Statement, SqlError> {
        let name = self.user_name()?;
        Ok(Statement::User(UserStatement::Drop { name }))
    }

    /// `GRANT privs ON target TO user` / `REVOKE privs ON target FROM user`, where privs is a
    /// comma-separated list of READ, WRITE, ALL [PRIVILEGES] and target is `db`, `db.*`, `*`
    /// or `*.*`.
    pub(super) fn grant(&mut self, revoke: bool) -> Result<Statement, SqlError> {
        let (mut read, mut write) = (false, false);
        loop {
            let pos = self.pos();
            let p = self.ident("READ, WRITE or ALL")?;
            match p.as_str() {
                "read" => read = true,
                "write" => write = true,
                "all" => {
                    self.eat_kw("privileges");
                    read = true;
                    write = true;
                }
                other => {
                    return Err(syntax(
                        pos,
                        format!("unknown privilege '{other}': use READ, WRITE or ALL"),
                    ))
                }
            }
            if !self.eat_op(",") {
                break;
            }
        }
        self.expect_kw("on")?;
        let db = if self.eat_op("*") {
            if self.eat_op(".") {
                self.expect_op("*")?;
            }
            "*".to_string()
        } else {
            let db = self.ident("a database name or *")?;
            if self.eat_op(".") {
                self.expect_op("*")?;
            }
            db
        };
        self.expect_kw(if revoke { "from" } else { "to" })?;
        let user = self.user_name()?;
        Ok(Statement::User(UserStatement::Grant {
            read,
            write,
            db,
            user,
            revoke,
        }))
    }
}

#[cfg(test)]
mod tests {
    use crate::ast::{Statement, UserStatement};
    use crate::parse;

    fn one(sql: &str) -> UserStatement {
        match parse(sql).unwrap().pop() {
            Some(Statement::User(u)) => u,
            other => panic!("{sql}: {other:?}"),
        }
    }

    #[test]
    fn user_statements() {
        assert_eq!(
            one("CREATE USER Alice PASS 'S3cret!'"),
            UserStatement::Create {
                name: "alice".into(),
                password: "S3cret!".into()
            }
        );
        assert_eq!(
            one("alter user bob pass \"x y\""),
            UserStatement::AlterPassword {
                name: "bob".into(),
                password: "x y".into()
            }
        );
        assert_eq!(
            one("DROP USER bob"),
            UserStatement::Drop { name: "bob".into() }
        );
        assert_eq!(one("SHOW USERS"), UserStatement::Show);
        assert_eq!(
            one("GRANT READ ON power TO bob"),
            UserStatement::Grant {
                read: true,
                write: false,
                db: "power".into(),
                user: "bob".into(),
                revoke: false
            }
        );
        assert_eq!(
            one("grant all privileges on power.* to bob"),
            UserStatement::Grant {
                read: true,
                write: true,
                db: "power".into(),
                user: "bob".into(),
                revoke: false
            }
        );
        assert_eq!(
            one("REVOKE WRITE ON *.* FROM bob"),
            UserStatement::Grant {
                read: false,
                write: true,
                db: "*".into(),
                user: "bob".into(),
                revoke: true
            }
        );
        assert_eq!(
            one("GRANT read, write ON * TO bob"),
            UserStatement::Grant {
                read: true,
                write: true,
                db: "*".into(),
                user: "bob".into(),
                revoke: false
            }
        );
    }

    #[test]
    fn bad_user_statements_say_what_is_wrong() {
        for (sql, want) in [
            ("CREATE USER u PASS secret", "quoted string"),
            ("CREATE USER u", "PASS"),
            ("GRANT SUPER ON db TO u", "unknown privilege 'super'"),
            ("GRANT READ ON db FROM u", "TO"),
            ("REVOKE READ ON db TO u", "FROM"),
            ("GRANT READ ON db.t TO u", "'*'"),
        ] {
            let e = parse(sql).unwrap_err().to_string();
            assert!(e.contains(want), "{sql}: {e}");
        }
    }

    #[test]
    fn too_long_sql_is_refused() {
        let sql = format!("SELECT 1 -- {}", "x".repeat(crate::SQL_BYTES_MAX));
        let e = parse(&sql).unwrap_err();
        assert!(e.to_string().contains("SQL statement too long"), "{e}");
    }
}
