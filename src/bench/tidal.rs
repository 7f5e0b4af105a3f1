//! Tidal as a benchmarked engine: a local cluster (mnode + 2 data nodes as child processes,
//! data in the run's folder), the `bench` database with WAL_LEVEL 2 and VGROUPS 4, the load
//! through the client library's batching [`Writer`] with several batches in flight per vgroup,
//! the settle step (FLUSH + COMPACT DATABASE) and SQL queries. The generated points are
//! turned into the Writer's columnar form ([`row_blocks`]) before the clock starts, as the
//! peers' input files are written before theirs.

use super::answers::Answer;
use crate::local::Cluster;
use crate::server::BoxError;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tidal_client::{Client, Writer, WriterConfig};
use tidal_common::{RowBlock, TableWrite};
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
        "mnode + {DNODES} data nodes on loopback; `CREATE DATABASE {DB} VGROUPS {VGROUPS} PRECISION 'ms' WAL_LEVEL 2 CACHEMODEL 'both' CACHESIZE 512` (the last-row cache on and large enough for every subtable, as a fleet dashboard would run it); client library `Writer` fed row blocks of {BATCH_ROWS} points, {BATCH_ROWS} rows per batch, {IN_FLIGHT_PER_VGROUP} batches in flight per vgroup"
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
            "CREATE DATABASE {DB} VGROUPS {VGROUPS} PRECISION 'ms' KEEP 36500d DURATION 10d WAL_LEVEL 2 CACHEMODEL 'both' CACHESIZE 512"
        );
        for (sql, in_db) in [(db.as_str(), ""), (READINGS_DDL, DB), (DIAGNOSTICS_DDL, DB)] {
            self.client
                .execute(sql, in_db)
                .await
                .map_err(|e| format!("Tidal: {sql}: {e}"))?;
        }
        Ok(())
    }

    fn writer(&self) -> Writer {
        let mut cfg = WriterConfig::new(DB);
        cfg.batch_rows = BATCH_ROWS;
        cfg.in_flight_per_vgroup = IN_FLIGHT_PER_VGROUP;
        Writer::new(self.client.clone(), cfg)
    }

    /// Writes every batch through one [`Writer`]; returns the rows acknowledged.
    pub async fn load(&self, batches: Vec<Vec<TableWrite>>) -> Result<u64, BoxError> {
        let writer = self.writer();
        for batch in batches {
            writer
                .write_many(batch)
                .await
                .map_err(|e| format!("Tidal write: {e}"))?;
        }
        Self::close(writer).await
    }

    /// Writes every row block through one [`Writer`]; returns the rows acknowledged.
    pub async fn load_blocks(&self, blocks: Vec<RowBlock>) -> Result<u64, BoxError> {
        let writer = self.writer();
        for b in blocks {
            writer
                .write_block(b)
                .await
                .map_err(|e| format!("Tidal write: {e}"))?;
        }
        Self::close(writer).await
    }

    async fn close(writer: Writer) -> Result<u64, BoxError> {
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

    /// The last-row cache's entries and bytes, summed over the database's vnodes.
    pub async fn cache_stats(&self) -> Result<(u64, u64), BoxError> {
        let route = self.client.route(DB).await?;
        let (mut entries, mut bytes) = (0, 0);
        for vg in &route.vgroups {
            let st = self
                .client
                .dnode(&vg.addr)?
                .vnode_stats(tidal_proto::v1::VnodeRef {
                    db: DB.into(),
                    vgroup_id: vg.id.0,
                })
                .await?
                .into_inner();
            entries += st.cache_entries;
            bytes += st.cache_bytes;
        }
        Ok((entries, bytes))
    }

    pub async fn stop(self) {
        self.cluster.stop().await;
    }
}

/// The generated batches as row blocks, one per STABLE per batch (the form the [`Writer`]
/// buffers). A subtable's tags travel with its first rows only, as a loader that knows which
/// subtables it has written sends them; the Writer resends them if the subtable is missing.
pub fn row_blocks(batches: impl IntoIterator<Item = Vec<TableWrite>>) -> Vec<RowBlock> {
    let mut seen: HashSet<String> = HashSet::new();
    let mut out = Vec::new();
    for batch in batches {
        let mut blocks: Vec<(RowBlock, HashMap<String, u32>)> = Vec::new();
        for t in batch {
            let rows = t.num_rows();
            let k = match blocks
                .iter()
                .position(|(b, _)| b.stable() == t.stable && b.accepts(&t.columns))
            {
                Some(k) => k,
                None => {
                    blocks.push((
                        RowBlock::like(&t.stable, &t.columns, BATCH_ROWS),
                        HashMap::new(),
                    ));
                    blocks.len() - 1
                }
            };
            let (b, index) = &mut blocks[k];
            let tags = if seen.contains(&t.table) {
                None
            } else {
                seen.insert(t.table.clone());
                t.tags
            };
            let i = match index.get(&t.table) {
                Some(i) => *i,
                None => {
                    let i = b.add_table(&t.table, tags);
                    index.insert(t.table, i);
                    i
                }
            };
            b.push_rows(i, &t.columns, 0, rows);
        }
        out.extend(blocks.into_iter().map(|(b, _)| b));
    }
    out
}
