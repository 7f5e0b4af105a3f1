//! Returning freed memory to the OS off the request path.
//!
//! mimalloc (the global allocator) gives freed arena memory back to the OS only after
//! `purge_delay` (1 s), and the purge is done by whichever thread next asks its arenas for a
//! page once that delay has passed. After a flush or a compaction frees hundreds of MB, that
//! thread was the first query's: a data node's worker spent 10–50 ms in `madvise` before it
//! sent the answer (measured: a `COUNT(*)` over no rows, 1 s after `COMPACT DATABASE`, took
//! 23 ms instead of 2–5 ms; with purging off it took 5 ms). This thread asks for expired
//! purges every [`PURGE_TICK_MS`], so that they run here: mimalloc lets one thread purge at a
//! time and the others skip it, so a request thread finds the work done or being done.

use std::time::Duration;

/// How often the purge thread asks mimalloc to purge what has expired. The check is a clock
/// read and an atomic load when nothing is due; mimalloc itself looks again at most every
/// tenth of its delay (100 ms).
pub const PURGE_TICK_MS: u64 = 50;

extern "C" {
    /// mimalloc's collection for the calling thread's heap; it includes the process-wide
    /// purge of expired arena memory. Linked from the `libmimalloc-sys` static library that
    /// the global allocator already links.
    fn mi_collect(force: bool);
}

/// Starts the purge thread (once per process; a failure to start it only costs latency).
pub fn start_purge_thread() {
    let spawned = std::thread::Builder::new()
        .name("mem-purge".into())
        .spawn(|| {
            // mimalloc collects nothing for a thread whose heap was never initialised: one
            // allocation initialises it.
            std::hint::black_box(Box::new(0u64));
            loop {
                std::thread::sleep(Duration::from_millis(PURGE_TICK_MS));
                // SAFETY: mimalloc is linked as the global allocator; `mi_collect` takes no
                // pointers and may be called from any thread at any time.
                unsafe { mi_collect(false) };
            }
        });
    if let Err(e) = spawned {
        tracing::warn!("cannot start the memory purge thread: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    /// Resident bytes of this process, read without allocating (an allocation here could do
    /// the purge this test expects of the purge thread).
    fn rss_bytes() -> u64 {
        let mut buf = [0u8; 128];
        let n = std::fs::File::open("/proc/self/statm")
            .and_then(|mut f| f.read(&mut buf))
            .unwrap_or(0);
        let text = std::str::from_utf8(&buf[..n]).unwrap_or("");
        let pages: u64 = text
            .split_whitespace()
            .nth(1)
            .and_then(|p| p.parse().ok())
            .unwrap_or(0);
        pages * 4096
    }

    #[test]
    fn freed_memory_goes_back_to_the_os_while_the_program_is_idle() {
        const CHUNK_BYTES: usize = 64 << 10;
        const CHUNKS: usize = 4096; // 256 MiB in arena pages (not one huge OS mapping)
        start_purge_thread();
        let mut chunks: Vec<Vec<u8>> = Vec::with_capacity(CHUNKS);
        for i in 0..CHUNKS {
            chunks.push(vec![i as u8 | 1; CHUNK_BYTES]);
        }
        let held = rss_bytes();
        drop(chunks);
        // mimalloc defers the purge by a second; this thread does not allocate meanwhile,
        // so only the purge thread (or another test's allocations) can do it.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        let mut now = rss_bytes();
        while held.saturating_sub(now) < 3 * (CHUNKS * CHUNK_BYTES) as u64 / 4 {
            assert!(
                std::time::Instant::now() < deadline,
                "RSS {now} bytes 5 s after freeing 256 MiB (it was {held} bytes)"
            );
            std::thread::sleep(Duration::from_millis(50));
            now = rss_bytes();
        }
    }
}
