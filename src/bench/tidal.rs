//! Tidal as a benchmarked engine: a local cluster (mnode + 2 data nodes as child processes,
//! data in the run's folder), the `bench` database with WAL_LEVEL 2 and VGROUPS 4, the load
//! through the client library's batching [`Writer`] with several batches in flight per vgroup,
//! the settle step (FLUSH + COMPACT DATABASE) and SQL queries.

use super::answers::Answer;
use crate::local::Cluster;
use crate::server::BoxError;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tidal_client::{Client, Writer, WriterConfig};
use tidal_common::TableWrite;
use tidal_tsbs::format::tidal::{DIAGNOSTICS_DDL, READINGS_DDL};

pub const DB: &str = "bench";
pub const DNODES: u32 = 2;
pub const VGROUPS: u32 = 4;
/// The Writer's defaults (10,000 rows per batch, 4 in flight per vgroup) suit bulk loading.
pub const BATCH_ROWS: usize = 10_000;
pub const IN_FLIGHT_PER_VGROUP: usize = 4;
const QUERY_TIMEOUT: Duration = Duration::from_secs(300);

pub fn settings() -> String {
    format!(
        "mnode + {DNODES} data nodes on loopback; `CREATE DATABASE {DB} VGROUPS {VGROUPS} PRECISION 'ms' WAL_LEVEL 2`; client library `Writer`, {BATCH_ROWS} rows per batch, {IN_FLIGHT_PER_VGROUP} batches in flight per vgroup"
    )
}

pub const DURABILITY: &str = "WAL_LEVEL 2: the WAL is fsynced before a write is acknowledged, with group commit across concurrent writes";

pub struct TidalEngine {
    cluster: Cluster,
    client: Client,
    dir: PathBuf,
}

impl TidalEngine {
    pub async fn start(dir: &Path) -> Result<TidalEngine, BoxError> {
        let cluster = Cluster::start(dir, DNODES, "127.0.0.1:0")
            .await
            .map_err(|e| format!("starting the local Tidal cluster in {}: {e}", dir.display()))?;
        let client = match Client::connect(&cluster.addr).await {
            Ok(c) => c,
            Err(e) => {
                cluster.stop().await;
                return Err(format!("connecting to the local cluster: {e}").into());
            }
        };
        Ok(TidalEngine {
            cluster,
            client,
            dir: dir.to_path_buf(),
        })
    }

    /// The server processes (mnode and data nodes).
    pub fn pids(&self) -> Vec<u32> {
        self.cluster.pids()
    }

    pub async fn create(&self) -> Result<(), BoxError> {
        let db = format!(
            "CREATE DATABASE {DB} VGROUPS {VGROUPS} PRECISION 'ms' KEEP 36500d DURATION 10d WAL_LEVEL 2"
        );
        for (sql, in_db) in [(db.as_str(), ""), (READINGS_DDL, DB), (DIAGNOSTICS_DDL, DB)] {
            self.client
                .execute(sql, in_db)
                .await
                .map_err(|e| format!("Tidal: {sql}: {e}"))?;
        }
        Ok(())
    }

    /// Writes every batch through one [`Writer`]; returns the rows acknowledged.
    pub async fn load(&self, batches: Vec<Vec<TableWrite>>) -> Result<u64, BoxError> {
        let mut cfg = WriterConfig::new(DB);
        cfg.batch_rows = BATCH_ROWS;
        cfg.in_flight_per_vgroup = IN_FLIGHT_PER_VGROUP;
        let writer = Writer::new(self.client.clone(), cfg);
        for batch in batches {
            for t in batch {
                writer
                    .write(t)
                    .await
                    .map_err(|e| format!("Tidal write: {e}"))?;
            }
        }
        // A clone keeps the shared counters readable after `close` consumes the writer.
        let counters = writer.clone();
        writer
            .close()
            .await
            .map_err(|e| format!("Tidal write (flush): {e}"))?;
        let stats = counters.stats();
        if stats.rows_failed > 0 {
            return Err(format!("Tidal: {} rows failed to write", stats.rows_failed).into());
        }
        Ok(stats.rows_written)
    }

    /// FLUSH + COMPACT DATABASE, then the allocated bytes of every file of the cluster.
    pub async fn settle(&self) -> Result<(u64, String), BoxError> {
        for sql in [
            format!("FLUSH DATABASE {DB}"),
            format!("COMPACT DATABASE {DB}"),
        ] {
            self.client
                .execute(&sql, DB)
                .await
                .map_err(|e| format!("Tidal: {sql}: {e}"))?;
        }
        let total = super::procfs::du_bytes(&self.dir);
        let mnode = super::procfs::du_bytes(&self.dir.join("mnode"));
        Ok((
            total,
            format!(
                "whole cluster folder after FLUSH + COMPACT (mnode catalog {})",
                super::report::human_bytes(mnode)
            ),
        ))
    }

    pub async fn query(&self, sql: &str) -> Result<Answer, String> {
        match tokio::time::timeout(QUERY_TIMEOUT, self.client.execute(sql, DB)).await {
            Err(_) => Err(format!("timed out after {} s", QUERY_TIMEOUT.as_secs())),
            Ok(Err(e)) => Err(e.to_string()),
            Ok(Ok(r)) => Ok(r.batch.as_ref().map(Answer::from_batch).unwrap_or_default()),
        }
    }

    pub async fn stop(self) {
        self.cluster.stop().await;
    }
}
