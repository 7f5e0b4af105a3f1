//! CPU seconds and memory of server processes, read from /proc the way
//! ../shared/peers/stats.sh does (utime+stime+cutime+cstime; VmRSS), applied alike to Tidal's
//! child processes and to each peer's server and its descendants (postgres backends), plus a
//! sampler thread that records the peak resident memory during a phase.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

fn clk_tck() -> f64 {
    // SAFETY: sysconf has no memory effects.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

/// Fields after the `)` of comm in /proc/PID/stat (field 3 onwards).
fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &s[s.rfind(')')? + 1..];
    Some(after.split_whitespace().map(String::from).collect())
}

/// `roots` and all their descendants that are alive now.
pub fn with_descendants(roots: &[u32]) -> Vec<u32> {
    let mut parent = Vec::new();
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for e in dir.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            if let Some(ppid) = stat_fields(pid).and_then(|f| f.get(1)?.parse::<u32>().ok()) {
                parent.push((pid, ppid));
            }
        }
    }
    let mut out: Vec<u32> = roots
        .iter()
        .copied()
        .filter(|p| std::path::Path::new(&format!("/proc/{p}")).exists())
        .collect();
    let mut i = 0;
    while i < out.len() {
        let p = out[i];
        for (c, pp) in &parent {
            if *pp == p && !out.contains(c) {
                out.push(*c);
            }
        }
        i += 1;
    }
    out
}

/// User + system CPU seconds of the processes, including their reaped children.
pub fn cpu_seconds(pids: &[u32]) -> f64 {
    let ticks: u64 = pids
        .iter()
        .filter_map(|p| stat_fields(*p))
        .map(|f| {
            // utime, stime, cutime, cstime are fields 14-17, i.e. 11..15 after comm.
            f.get(11..15)
                .map(|v| v.iter().filter_map(|x| x.parse::<u64>().ok()).sum())
                .unwrap_or(0)
        })
        .sum();
    ticks as f64 / clk_tck()
}

fn status_kb(pid: u32, key: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(key))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

/// Resident memory of the processes now, in bytes.
pub fn rss_bytes(pids: &[u32]) -> u64 {
    pids.iter().map(|p| status_kb(*p, "VmRSS:") * 1024).sum()
}

/// Samples the summed RSS of `roots` and their descendants every 500 ms until stopped.
pub struct PeakSampler {
    stop: Arc<AtomicBool>,
    peak: Arc<AtomicU64>,
    handle: Option<JoinHandle<()>>,
}

impl PeakSampler {
    pub fn start(roots: Vec<u32>) -> PeakSampler {
        let stop = Arc::new(AtomicBool::new(false));
        let peak = Arc::new(AtomicU64::new(0));
        let (s, p) = (stop.clone(), peak.clone());
        let handle = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                let rss = rss_bytes(&with_descendants(&roots));
                p.fetch_max(rss, Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(500));
            }
        });
        PeakSampler {
            stop,
            peak,
            handle: Some(handle),
        }
    }

    /// Stops sampling; returns the peak in bytes.
    pub fn finish(mut self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
        self.peak.load(Ordering::Relaxed)
    }
}

/// Allocated bytes of every file under `dir` (what `du -s -B1` counts).
pub fn du_bytes(dir: &std::path::Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let Ok(m) = e.metadata() else { continue };
            if m.is_dir() {
                stack.push(e.path());
            } else {
                total += m.blocks() * 512;
            }
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_own_process() {
        let me = std::process::id();
        assert!(rss_bytes(&[me]) > 0);
        assert!(cpu_seconds(&[me]) >= 0.0);
        assert!(with_descendants(&[me]).contains(&me));
        let s = PeakSampler::start(vec![me]);
        std::thread::sleep(Duration::from_millis(50));
        assert!(s.finish() > 0);
    }
}
