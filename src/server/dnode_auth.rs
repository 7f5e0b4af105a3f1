//! A data node's side of authentication: joining the cluster and keeping its user table.
//!
//! A new data node registers with superuser credentials (`user`/`password`, default
//! root/taosdata); the answer carries the cluster secret, which it keeps in
//! `<data>/cluster.key` (mode 0600) and from then on signs its own calls with (so a restart
//! needs no password, and changing root's password does not lock data nodes out). If the mnode
//! refuses the kept secret (a new cluster was created on the mnode's address), the node
//! registers again with the credentials. Heartbeats carry the epoch of the user table held;
//! the mnode answers with the new table when it moved.

use super::auth::{table_from_wire, Verifier};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tidal_client::{Client, ClientError, Credentials};
use tidal_common::{DnodeId, StatusCode};
use tidal_proto::v1;

const SECRET_FILE: &str = "cluster.key";

pub struct DnodeAuth {
    verifier: Arc<Verifier>,
    /// Credentials a node without the secret registers with.
    join: Credentials,
    secret_path: PathBuf,
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    let s = s.trim();
    if s.len() & 1 == 1 || s.is_empty() {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

impl DnodeAuth {
    /// Loads the kept cluster secret (if this node joined before) into `verifier`.
    pub fn load(
        data: &Path,
        join: Credentials,
        verifier: Arc<Verifier>,
    ) -> Result<DnodeAuth, super::BoxError> {
        let secret_path = data.join(SECRET_FILE);
        match std::fs::read_to_string(&secret_path) {
            Ok(s) => {
                let secret = unhex(&s).ok_or_else(|| {
                    format!(
                        "{} is corrupt (not hex); delete it to join the cluster again with the configured user",
                        secret_path.display()
                    )
                })?;
                verifier.set_secret(&secret);
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(format!("read {}: {e}", secret_path.display()).into()),
        }
        Ok(DnodeAuth {
            verifier,
            join,
            secret_path,
        })
    }

    fn use_secret(&self, client: &Client, id: Option<u32>) -> bool {
        match self.verifier.secret() {
            Some(secret) => {
                client.set_credentials(Credentials::ClusterSecret {
                    name: id.map(|i| format!("dnode-{i}")).unwrap_or("dnode".into()),
                    secret,
                });
                true
            }
            None => false,
        }
    }

    fn keep_secret(&self, secret: &[u8]) -> Result<(), String> {
        if self.verifier.secret().as_deref() == Some(secret) {
            return Ok(());
        }
        write_secret(&self.secret_path, hex(secret).as_bytes())
            .map_err(|e| format!("write {}: {e}", self.secret_path.display()))?;
        self.verifier.set_secret(secret);
        Ok(())
    }

    /// Registers with the mnode (retrying retryable failures until `timeout_ms` passes),
    /// keeps the cluster secret it answers with and switches `client` to it.
    pub async fn register(
        &self,
        client: &Client,
        addr: &str,
        known: Option<u32>,
        timeout_ms: u64,
    ) -> Result<DnodeId, super::BoxError> {
        let deadline = tokio::time::Instant::now() + Duration::from_millis(timeout_ms);
        let mut delay_ms = 50;
        let mut with_secret = self.use_secret(client, known);
        if !with_secret {
            client.set_credentials(self.join.clone());
        }
        loop {
            let attempt = async {
                client.authenticate().await?;
                client
                    .mnode()?
                    .register_dnode(v1::RegisterDnodeRequest {
                        addr: addr.to_string(),
                        known_id: known,
                    })
                    .await
                    .map_err(ClientError::from)
            };
            match attempt.await {
                Ok(r) => {
                    let r = r.into_inner();
                    if r.cluster_secret.is_empty() {
                        return Err("the mnode sent no cluster secret".into());
                    }
                    self.keep_secret(&r.cluster_secret)?;
                    self.use_secret(client, Some(r.dnode_id));
                    return Ok(DnodeId(r.dnode_id));
                }
                // The kept secret is not this cluster's: join with the credentials.
                Err(e) if with_secret && e.code == StatusCode::Unauthenticated => {
                    tracing::warn!(
                        "the mnode refused this node's cluster secret ({}); joining again as user {:?}",
                        e.message,
                        self.join
                    );
                    client.set_credentials(self.join.clone());
                    with_secret = false;
                }
                Err(e) if tokio::time::Instant::now() < deadline && e.code.is_retryable() => {
                    tokio::time::sleep(Duration::from_millis(delay_ms)).await;
                    delay_ms = (delay_ms * 2).min(1000);
                }
                Err(e) => {
                    return Err(format!(
                        "cannot register with the mnode at {}: {e}",
                        client.mnode_addr()
                    )
                    .into())
                }
            }
        }
    }

    /// The epoch of the user table held, for the heartbeat.
    pub fn epoch(&self) -> u64 {
        self.verifier.epoch()
    }

    /// Takes the user table a heartbeat answer carries.
    pub fn on_heartbeat(&self, auth: Option<&v1::AuthTable>) {
        if let Some(t) = auth {
            self.verifier.set_table(table_from_wire(t));
        }
    }
}

/// Writes the secret readable by the owner only, atomically.
fn write_secret(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = path.with_extension("key.tmp");
    {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(true)
            .write(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)?;
    if let Some(dir) = path.parent() {
        std::fs::File::open(dir)?.sync_all()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_secret_is_private_and_reloads() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let a = DnodeAuth::load(dir.path(), Credentials::default(), Verifier::new()).unwrap();
        assert!(a.verifier.secret().is_none());
        a.keep_secret(&[1, 2, 250]).unwrap();
        let mode = std::fs::metadata(dir.path().join(SECRET_FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let b = DnodeAuth::load(dir.path(), Credentials::default(), Verifier::new()).unwrap();
        assert_eq!(b.verifier.secret().as_deref(), Some(&[1u8, 2, 250][..]));
        std::fs::write(dir.path().join(SECRET_FILE), "zz").unwrap();
        assert!(DnodeAuth::load(dir.path(), Credentials::default(), Verifier::new()).is_err());
    }
}
