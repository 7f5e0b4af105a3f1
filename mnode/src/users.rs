//! Users, passwords, privileges and the cluster secret: the [`Mnode`] operations behind
//! CREATE/ALTER/DROP USER, GRANT/REVOKE, SHOW USERS and login (docs/SECURITY.md).
//!
//! Passwords are stored only as Argon2id hashes with a random 16-byte salt per hash (PHC
//! strings, parameters included); they are never logged and never returned. Hashing runs
//! before the catalog lock is taken, so a slow hash never blocks other catalog changes.
//!
//! Only superusers manage users. `root` is the one superuser: created on first start (with
//! `taosdata` unless another password is given) and never dropped.

use crate::catalog::{Op, UserRecord};
use crate::error::MnodeError;
use crate::mnode::{lookup_name, normalize_name, now_ms, Mnode, MAX_DB_NAME};
use crate::types::{AuthTable, Privilege, UserAuth, UserInfo};
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::Argon2;
use std::sync::OnceLock;

/// The superuser every cluster has.
pub const ROOT_USER: &str = "root";
/// root's password on first start unless another is given (as TDengine's).
pub const DEFAULT_ROOT_PASSWORD: &str = "taosdata";
/// Longest user name (TDengine allows 23 characters).
pub const MAX_USER_NAME: usize = 23;
/// Longest password, in bytes.
pub const MAX_PASSWORD_BYTES: usize = 128;
/// Most users a cluster holds (the user table goes to every data node).
pub const MAX_USERS: usize = 1024;
/// Most databases one user holds privileges on.
pub const MAX_PRIVILEGES_PER_USER: usize = 1024;
/// Bytes of the cluster secret.
pub const CLUSTER_SECRET_BYTES: usize = 32;

/// What [`Mnode::init_auth`] found or did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuthInit {
    /// This call created the cluster secret and `root` (first start).
    pub created: bool,
    /// root's password is still the default one: the server should warn.
    pub root_has_default_password: bool,
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if s.len() & 1 == 1 {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

fn check_password(name: &str, password: &str) -> Result<(), MnodeError> {
    if password.is_empty() {
        return Err(MnodeError::InvalidArgument(format!(
            "the password of user '{name}' must not be empty"
        )));
    }
    if password.len() > MAX_PASSWORD_BYTES {
        return Err(MnodeError::InvalidArgument(format!(
            "the password of user '{name}' is longer than {MAX_PASSWORD_BYTES} bytes"
        )));
    }
    if password.chars().any(char::is_control) {
        return Err(MnodeError::InvalidArgument(format!(
            "the password of user '{name}' contains a control character"
        )));
    }
    Ok(())
}

/// An Argon2id PHC string of `password` with a fresh random salt.
pub fn hash_password(password: &str) -> Result<String, MnodeError> {
    let salt_bytes: [u8; 16] = rand::random();
    let salt = SaltString::encode_b64(&salt_bytes)
        .map_err(|e| MnodeError::InvalidArgument(format!("cannot encode a salt: {e}")))?;
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| MnodeError::InvalidArgument(format!("cannot hash the password: {e}")))
}

/// Whether `password` matches the PHC string `hash`. A malformed stored hash matches nothing.
pub fn verify_password(password: &str, hash: &str) -> bool {
    match PasswordHash::new(hash) {
        Ok(parsed) => Argon2::default()
            .verify_password(password.as_bytes(), &parsed)
            .is_ok(),
        Err(_) => false,
    }
}

/// A hash no password is known for: unknown user names are checked against it so that a
/// login takes as long for them as for a real user with a wrong password.
fn decoy_hash() -> &'static str {
    static DECOY: OnceLock<String> = OnceLock::new();
    DECOY.get_or_init(|| {
        let pw: [u8; 16] = rand::random();
        hash_password(&hex(&pw)).unwrap_or_default()
    })
}

fn user_name(name: &str) -> Result<String, MnodeError> {
    normalize_name("user", name, MAX_USER_NAME)
}

fn auth_of(u: &UserRecord) -> UserAuth {
    UserAuth {
        name: u.name.clone(),
        version: u.version,
        superuser: u.superuser,
        privileges: u.privileges.clone(),
    }
}

impl Mnode {
    /// On first start (no cluster secret yet): creates the cluster secret and `root` with
    /// `root_password` (default [`DEFAULT_ROOT_PASSWORD`]). Later starts change nothing (a
    /// given `root_password` is ignored: root's password is changed with ALTER USER). Either
    /// way reports whether root still has the default password.
    pub fn init_auth(&self, root_password: Option<&str>) -> Result<AuthInit, MnodeError> {
        let initialized = !self.state.read().cluster_secret_hex.is_empty();
        let mut created = false;
        if !initialized {
            let password = root_password.unwrap_or(DEFAULT_ROOT_PASSWORD);
            check_password(ROOT_USER, password)?;
            let hash = hash_password(password)?;
            let secret: [u8; CLUSTER_SECRET_BYTES] = rand::random();
            let mut sdb = self.sdb.lock();
            let (version, has_root) = {
                let st = self.state.read();
                (st.next_user_version, st.users.contains_key(ROOT_USER))
            };
            if has_root {
                return Err(MnodeError::corruption(
                    sdb.log_path(),
                    0,
                    "the catalog has users but no cluster secret",
                ));
            }
            self.commit(
                &mut sdb,
                Op::InitAuth {
                    secret_hex: hex(&secret),
                    root: UserRecord {
                        name: ROOT_USER.to_string(),
                        password_hash: hash,
                        superuser: true,
                        version,
                        created_ms: now_ms(),
                        privileges: Default::default(),
                    },
                },
            )?;
            created = true;
        }
        let root_hash = self
            .state
            .read()
            .users
            .get(ROOT_USER)
            .map(|u| u.password_hash.clone());
        Ok(AuthInit {
            created,
            root_has_default_password: root_hash
                .is_some_and(|h| verify_password(DEFAULT_ROOT_PASSWORD, &h)),
        })
    }

    /// The cluster secret (`None` before [`Mnode::init_auth`]).
    pub fn cluster_secret(&self) -> Option<Vec<u8>> {
        let st = self.state.read();
        if st.cluster_secret_hex.is_empty() {
            return None;
        }
        unhex(&st.cluster_secret_hex)
    }

    /// Checks a user's password (slow on purpose: one Argon2 hash). The error does not say
    /// whether the user or the password was wrong.
    pub fn login(&self, user: &str, password: &str) -> Result<UserAuth, MnodeError> {
        let record =
            lookup_name(user, MAX_USER_NAME).and_then(|n| self.state.read().users.get(&n).cloned());
        let hash = record
            .as_ref()
            .map(|u| u.password_hash.as_str())
            .unwrap_or_else(|| decoy_hash());
        let ok = verify_password(password, hash);
        match record {
            Some(u) if ok => Ok(auth_of(&u)),
            _ => Err(MnodeError::Unauthenticated(format!(
                "wrong user name or password for user '{user}'"
            ))),
        }
    }

    /// CREATE USER: a user with no privileges.
    pub fn create_user(&self, name: &str, password: &str) -> Result<(), MnodeError> {
        let name = user_name(name)?;
        check_password(&name, password)?;
        if self.state.read().users.contains_key(&name) {
            return Err(MnodeError::UserExists(name));
        }
        let hash = hash_password(password)?;
        let mut sdb = self.sdb.lock();
        let version = {
            let st = self.state.read();
            if st.users.contains_key(&name) {
                return Err(MnodeError::UserExists(name));
            }
            if st.users.len() >= MAX_USERS {
                return Err(MnodeError::InvalidArgument(format!(
                    "cannot create user '{name}': the cluster already has {MAX_USERS} users"
                )));
            }
            st.next_user_version
        };
        self.commit(
            &mut sdb,
            Op::CreateUser {
                user: UserRecord {
                    name,
                    password_hash: hash,
                    superuser: false,
                    version,
                    created_ms: now_ms(),
                    privileges: Default::default(),
                },
            },
        )
    }

    /// ALTER USER ... PASS: every session of the user ends (tokens carry the old version).
    pub fn alter_user_password(&self, name: &str, password: &str) -> Result<(), MnodeError> {
        let key = lookup_name(name, MAX_USER_NAME)
            .ok_or_else(|| MnodeError::UserNotFound(name.to_string()))?;
        check_password(&key, password)?;
        if !self.state.read().users.contains_key(&key) {
            return Err(MnodeError::UserNotFound(key));
        }
        let hash = hash_password(password)?;
        let mut sdb = self.sdb.lock();
        let version = {
            let st = self.state.read();
            if !st.users.contains_key(&key) {
                return Err(MnodeError::UserNotFound(key));
            }
            st.next_user_version
        };
        self.commit(
            &mut sdb,
            Op::SetPassword {
                name: key,
                password_hash: hash,
                version,
            },
        )
    }

    /// DROP USER; the superuser cannot be dropped.
    pub fn drop_user(&self, name: &str) -> Result<(), MnodeError> {
        let key = lookup_name(name, MAX_USER_NAME)
            .ok_or_else(|| MnodeError::UserNotFound(name.to_string()))?;
        let mut sdb = self.sdb.lock();
        match self.state.read().users.get(&key) {
            None => return Err(MnodeError::UserNotFound(key)),
            Some(u) if u.superuser => {
                return Err(MnodeError::InvalidArgument(format!(
                    "user '{key}' is the superuser and cannot be dropped"
                )))
            }
            Some(_) => {}
        }
        self.commit(&mut sdb, Op::DropUser { name: key })
    }

    /// GRANT (`revoke == false`) or REVOKE `privilege` on database `db` (`*`: every database)
    /// to/from `user`.
    pub fn grant(
        &self,
        user: &str,
        db: &str,
        privilege: Privilege,
        revoke: bool,
    ) -> Result<(), MnodeError> {
        let key = lookup_name(user, MAX_USER_NAME)
            .ok_or_else(|| MnodeError::UserNotFound(user.to_string()))?;
        if privilege.is_empty() {
            return Err(MnodeError::InvalidArgument(
                "GRANT/REVOKE names no privilege: use READ, WRITE or ALL".to_string(),
            ));
        }
        let db = if db == "*" {
            "*".to_string()
        } else {
            lookup_name(db, MAX_DB_NAME)
                .ok_or_else(|| MnodeError::DatabaseNotFound(db.to_ascii_lowercase()))?
        };
        let mut sdb = self.sdb.lock();
        {
            let st = self.state.read();
            let Some(u) = st.users.get(&key) else {
                return Err(MnodeError::UserNotFound(key));
            };
            if u.superuser {
                return Err(MnodeError::InvalidArgument(format!(
                    "user '{key}' is a superuser and has every privilege"
                )));
            }
            if db != "*" && !st.databases.contains_key(&db) {
                return Err(MnodeError::DatabaseNotFound(db));
            }
            if !revoke
                && !u.privileges.contains_key(&db)
                && u.privileges.len() >= MAX_PRIVILEGES_PER_USER
            {
                return Err(MnodeError::InvalidArgument(format!(
                    "user '{key}' already holds privileges on {MAX_PRIVILEGES_PER_USER} databases"
                )));
            }
            if revoke && !u.privileges.contains_key(&db) {
                // Nothing to revoke: succeed without logging an op (REVOKE is idempotent).
                return Ok(());
            }
        }
        self.commit(
            &mut sdb,
            Op::Grant {
                user: key,
                db,
                privilege,
                revoke,
            },
        )
    }

    /// Every user, by name (SHOW USERS).
    pub fn users(&self) -> Vec<UserInfo> {
        self.state
            .read()
            .users
            .values()
            .map(|u| UserInfo {
                name: u.name.clone(),
                superuser: u.superuser,
                created_ms: u.created_ms,
                privileges: u.privileges.clone(),
            })
            .collect()
    }

    /// What servers need to authorize requests, with the current auth epoch.
    pub fn auth_table(&self) -> AuthTable {
        let st = self.state.read();
        AuthTable {
            epoch: st.auth_epoch,
            users: st.users.values().map(auth_of).collect(),
        }
    }

    /// Changes whenever users or privileges change.
    pub fn auth_epoch(&self) -> u64 {
        self.state.read().auth_epoch
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open() -> (tempfile::TempDir, Mnode) {
        let dir = tempfile::tempdir().unwrap();
        let m = Mnode::open(dir.path()).unwrap();
        (dir, m)
    }

    #[test]
    fn first_start_creates_root_with_the_default_password() {
        let (dir, m) = open();
        let init = m.init_auth(None).unwrap();
        assert!(init.created && init.root_has_default_password);
        assert!(m.login("root", DEFAULT_ROOT_PASSWORD).unwrap().superuser);
        assert!(matches!(
            m.login("root", "nope"),
            Err(MnodeError::Unauthenticated(_))
        ));
        let secret = m.cluster_secret().unwrap();
        assert_eq!(secret.len(), CLUSTER_SECRET_BYTES);
        // A second start keeps the secret and ignores a new root password.
        drop(m);
        let m = Mnode::open(dir.path()).unwrap();
        let init = m.init_auth(Some("other")).unwrap();
        assert!(!init.created && init.root_has_default_password);
        assert_eq!(m.cluster_secret().unwrap(), secret);
    }

    #[test]
    fn root_password_flag_and_no_warning() {
        let (_dir, m) = open();
        let init = m.init_auth(Some("s3cret")).unwrap();
        assert!(init.created && !init.root_has_default_password);
        assert!(m.login("root", "s3cret").is_ok());
        assert!(m.login("root", DEFAULT_ROOT_PASSWORD).is_err());
    }

    #[test]
    fn users_grants_and_passwords_survive_reopen_and_snapshots() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = crate::MnodeConfig {
            snapshot_every: 3,
            ..Default::default()
        };
        {
            let m = Mnode::open_with(dir.path(), cfg.clone()).unwrap();
            m.init_auth(None).unwrap();
            m.register_dnode("127.0.0.1:1", None).unwrap();
            m.create_database("db1", tidal_common::DbOptions::default(), false)
                .unwrap();
            m.create_user("Alice", "pw-one").unwrap();
            m.grant("alice", "db1", Privilege::READ, false).unwrap();
            m.grant("alice", "*", Privilege::WRITE, false).unwrap();
            m.alter_user_password("alice", "pw-two").unwrap();
            m.create_user("bob", "bobpw").unwrap();
            m.drop_user("bob").unwrap();
        }
        let m = Mnode::open_with(dir.path(), cfg).unwrap();
        let a = m.login("alice", "pw-two").unwrap();
        assert!(m.login("alice", "pw-one").is_err());
        assert!(m.login("bob", "bobpw").is_err());
        assert_eq!(a.privileges.get("db1"), Some(&Privilege::READ));
        assert_eq!(a.privileges.get("*"), Some(&Privilege::WRITE));
        // The password itself is nowhere in the files.
        for e in std::fs::read_dir(dir.path()).unwrap() {
            let bytes = std::fs::read(e.unwrap().path()).unwrap();
            for pw in [&b"pw-one"[..], b"pw-two", b"bobpw", b"taosdata"] {
                assert!(!bytes.windows(pw.len()).any(|w| w == pw));
            }
        }
    }

    #[test]
    fn password_change_bumps_version_and_epoch() {
        let (_dir, m) = open();
        m.init_auth(None).unwrap();
        m.create_user("u", "a").unwrap();
        let v1 = m.login("u", "a").unwrap().version;
        let e1 = m.auth_epoch();
        m.alter_user_password("u", "b").unwrap();
        assert!(m.login("u", "b").unwrap().version > v1);
        assert!(m.auth_epoch() > e1);
        // Re-created users never reuse a version.
        m.drop_user("u").unwrap();
        m.create_user("u", "a").unwrap();
        assert!(m.login("u", "a").unwrap().version > v1 + 1);
    }

    #[test]
    fn grant_revoke_and_drop_database() {
        let (_dir, m) = open();
        m.init_auth(None).unwrap();
        m.register_dnode("127.0.0.1:1", None).unwrap();
        m.create_database("d", tidal_common::DbOptions::default(), false)
            .unwrap();
        m.create_user("u", "p").unwrap();
        m.grant("u", "d", Privilege::ALL, false).unwrap();
        m.grant("u", "d", Privilege::WRITE, true).unwrap();
        let privs = |m: &Mnode| m.login("u", "p").unwrap().privileges;
        assert_eq!(privs(&m).get("d"), Some(&Privilege::READ));
        m.grant("u", "d", Privilege::READ, true).unwrap();
        assert!(privs(&m).is_empty());
        // Revoking what is not held is a no-op.
        m.grant("u", "d", Privilege::READ, true).unwrap();
        m.grant("u", "d", Privilege::READ, false).unwrap();
        m.drop_database("d", false).unwrap();
        assert!(privs(&m).is_empty());
        assert!(matches!(
            m.grant("u", "d", Privilege::READ, false),
            Err(MnodeError::DatabaseNotFound(_))
        ));
        assert!(matches!(
            m.grant("nobody", "*", Privilege::READ, false),
            Err(MnodeError::UserNotFound(_))
        ));
        assert!(m.grant("root", "*", Privilege::READ, false).is_err());
    }

    #[test]
    fn bad_user_input_is_refused() {
        let (_dir, m) = open();
        m.init_auth(None).unwrap();
        assert!(matches!(
            m.create_user("root", "x"),
            Err(MnodeError::UserExists(_))
        ));
        assert!(m.create_user("9lives", "x").is_err());
        assert!(m.create_user(&"a".repeat(MAX_USER_NAME + 1), "x").is_err());
        assert!(m.create_user("u", "").is_err());
        assert!(m
            .create_user("u", &"p".repeat(MAX_PASSWORD_BYTES + 1))
            .is_err());
        assert!(m.create_user("u", "a\nb").is_err());
        assert!(m.drop_user("root").is_err());
        assert!(matches!(
            m.drop_user("ghost"),
            Err(MnodeError::UserNotFound(_))
        ));
        assert!(matches!(
            m.alter_user_password("ghost", "x"),
            Err(MnodeError::UserNotFound(_))
        ));
    }

    #[test]
    fn hex_round_trips() {
        assert_eq!(
            unhex(&hex(&[0, 1, 254, 255])).unwrap(),
            vec![0, 1, 254, 255]
        );
        assert!(unhex("abc").is_none());
        assert!(unhex("zz").is_none());
    }
}
