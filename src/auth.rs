//! The credentials options of the client commands (`tidal shell`, `tidal load`): `-u USER
//! -p PASSWORD` as `taos` has them (default root / taosdata), and `--tls-ca` to connect over
//! TLS.

use crate::server::BoxError;
use std::path::PathBuf;
use tidal_client::{Client, ConnectOptions};

#[derive(clap::Args, Clone, Debug)]
pub struct ClientAuthArgs {
    /// User to log in as.
    #[arg(short = 'u', long = "user", env = "TIDAL_USER", default_value = tidal_client::auth::DEFAULT_USER)]
    pub user: String,
    /// Password of the user (or set TIDAL_PASSWORD, which keeps it out of the process list).
    #[arg(short = 'p', long = "password", env = "TIDAL_PASSWORD", default_value = tidal_client::auth::DEFAULT_PASSWORD, hide_env_values = true, hide_default_value = true)]
    pub password: String,
    /// CA certificate (PEM) of a TLS cluster: connect over TLS and trust it.
    #[arg(long = "tls-ca", env = "TIDAL_TLS_CA")]
    pub tls_ca: Option<PathBuf>,
}

impl ClientAuthArgs {
    /// Connects and logs in; wrong credentials fail here with a clear message.
    pub async fn connect(&self, host: &str) -> Result<Client, BoxError> {
        let mut opts = ConnectOptions::user(&self.user, &self.password);
        if let Some(ca) = &self.tls_ca {
            opts = opts.with_tls_ca(crate::server::net::read_ca(ca)?);
        }
        Client::connect_with(host, opts)
            .await
            .map_err(|e| format!("cannot log in to {host} as {}: {e}", self.user).into())
    }
}
