//! Replies not delivered yet, kept in `<data>/channels/pending.json` so that a reply a stop
//! or a crash cut off is delivered by the next tern that runs the channel: per thread key,
//! the session and the journal position its reply is read again from. The journal holds the
//! text; this file only says where delivery stood. It is rewritten whole (through a
//! temporary file and a rename) at each change, without an fsync of its own: losing the last
//! change to a crash costs at most a reply delivered twice or not resumed.

use crate::domain::SessionId;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

/// Where one thread's delivery stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    pub session: SessionId,
    /// The reply is read again from the records after this position.
    pub from: u64,
}

/// The replies under way in this process's channels.
#[derive(Debug, Default)]
pub struct Pending {
    path: Option<PathBuf>,
    entries: Mutex<BTreeMap<String, Entry>>,
}

impl Pending {
    /// Reads the file in `dir` (a missing or unreadable one holds nothing).
    pub fn load(dir: &Path) -> Self {
        let path = dir.join("channels").join("pending.json");
        let entries = std::fs::read(&path)
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or_default();
        Self {
            path: Some(path),
            entries: Mutex::new(entries),
        }
    }

    fn change(&self, f: impl FnOnce(&mut BTreeMap<String, Entry>) -> bool) {
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        if !f(&mut entries) {
            return;
        }
        let Some(path) = &self.path else {
            return;
        };
        if let Err(err) = write(path, &entries) {
            tracing::warn!(%err, path = %path.display(), "could not keep where channel replies stand");
        }
    }

    /// The reply of thread `key` begins after position `from` of `session`.
    pub fn started(&self, key: &str, session: &SessionId, from: u64) {
        let entry = Entry {
            session: session.clone(),
            from,
        };
        self.change(|entries| entries.insert(key.to_owned(), entry.clone()) != Some(entry));
    }

    /// Thread `key` has nothing left to deliver.
    pub fn delivered(&self, key: &str) {
        self.change(|entries| entries.remove(key).is_some());
    }

    /// The threads of `channel` (`slack`, …) with a reply left to deliver.
    pub fn of(&self, channel: &str) -> Vec<(String, Entry)> {
        let prefix = format!("{channel}:");
        self.entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter(|(key, _)| key.starts_with(&prefix))
            .map(|(key, entry)| (key.clone(), entry.clone()))
            .collect()
    }
}

fn write(path: &Path, entries: &BTreeMap<String, Entry>) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension(format!("json.{}.tmp", std::process::id()));
    std::fs::write(&tmp, serde_json::to_vec_pretty(entries)?)?;
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_pending_survives_a_new_process() {
        let dir = tempfile::tempdir().unwrap();
        let session = SessionId::generate();
        let pending = Pending::load(dir.path());
        pending.started("slack:T/C/1.2", &session, 7);
        pending.started("webhook:ci/b1", &session, 9);
        pending.delivered("webhook:ci/b1");
        let again = Pending::load(dir.path());
        assert_eq!(
            again.of("slack"),
            [(
                "slack:T/C/1.2".to_owned(),
                Entry {
                    session: session.clone(),
                    from: 7
                }
            )]
        );
        assert!(again.of("webhook").is_empty());
        std::fs::write(dir.path().join("channels/pending.json"), "{not json").unwrap();
        assert!(Pending::load(dir.path()).of("slack").is_empty());
    }
}
