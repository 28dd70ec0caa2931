//! Reads of git still running per directory. A read that overruns its budget is abandoned,
//! not stopped (a blocking thread cannot be cancelled); on a repository where every read
//! overruns, starting a new one each turn would pile up threads. So a directory whose last
//! read is still running past its budget gets no new read until that one ends.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{LazyLock, Mutex};
use std::time::{Duration, Instant};

/// Per directory, the reads still running: an id and when each started.
type Running = HashMap<PathBuf, Vec<(u64, Instant)>>;

static READS: LazyLock<Mutex<Running>> = LazyLock::new(Mutex::default);
static NEXT_ID: AtomicU64 = AtomicU64::new(0);

/// A read in progress; dropping it (when the read ends, on whatever thread) removes it.
#[derive(Debug)]
pub struct ReadTicket {
    dir: PathBuf,
    id: u64,
}

/// Registers a read of `dir`, unless an earlier read of it has been running longer than
/// `budget`; then returns how long that one has been running.
pub fn begin(dir: &Path, budget: Duration) -> Result<ReadTicket, Duration> {
    let mut reads = READS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let running = reads.entry(dir.to_path_buf()).or_default();
    if let Some(oldest) = running.iter().map(|(_, started)| started.elapsed()).max()
        && oldest >= budget
    {
        return Err(oldest);
    }
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    running.push((id, Instant::now()));
    Ok(ReadTicket {
        dir: dir.to_path_buf(),
        id,
    })
}

impl Drop for ReadTicket {
    fn drop(&mut self) {
        let mut reads = READS
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(running) = reads.get_mut(&self.dir) {
            running.retain(|(id, _)| *id != self.id);
            if running.is_empty() {
                reads.remove(&self.dir);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_overdue_read_blocks_new_ones_until_it_ends() {
        let dir = Path::new("/in-flight-test");
        let first = begin(dir, Duration::from_secs(60)).unwrap();
        // Within the budget, reads may overlap (two sessions on one repository).
        let second = begin(dir, Duration::from_secs(60)).unwrap();
        drop(second);
        assert!(begin(dir, Duration::ZERO).is_err());
        drop(first);
        assert!(begin(dir, Duration::ZERO).is_ok());
    }
}
