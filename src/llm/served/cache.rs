//! `served.json` in the data folder: what each server last said about its model, by base URL
//! and model, so the next start begins from it while the server is asked again.
//!
//! A small JSON file rather than the session store: the store is owned by one process and
//! holds sessions, while this is a hint any process may read at once (`tern doctor`, a
//! `tern run` beside a running `tern`) and lose without harm. It is replaced whole through a
//! temporary file and a rename, so a reader never sees half of it; two processes writing at
//! once can lose one's entry, which the next start asks again.

use super::ServerAnswer;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The file's name in the data folder.
const FILE: &str = "served.json";

/// The format; an unknown one is read as empty.
const VERSION: u32 = 1;

/// The cache file in one data folder.
#[derive(Debug, Clone)]
pub struct ServedCache {
    path: PathBuf,
}

/// What the file holds for one server and model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Remembered {
    #[serde(flatten)]
    pub answer: ServerAnswer,
    /// When the server said it, RFC 3339.
    pub learned_at: String,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct File {
    version: u32,
    servers: BTreeMap<String, Remembered>,
}

impl ServedCache {
    /// The cache in `data_dir`.
    pub fn in_dir(data_dir: &Path) -> Self {
        Self {
            path: data_dir.join(FILE),
        }
    }

    /// Where the file is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// What is remembered under `key`; nothing when the file is missing or unreadable.
    pub fn get(&self, key: &str) -> Option<Remembered> {
        self.read().servers.remove(key)
    }

    /// Remembers `answer` under `key`, now.
    pub fn put(&self, key: &str, answer: &ServerAnswer) -> std::io::Result<()> {
        let mut file = self.read();
        file.version = VERSION;
        file.servers.insert(
            key.to_owned(),
            Remembered {
                answer: answer.clone(),
                learned_at: jiff::Timestamp::now().to_string(),
            },
        );
        let text = serde_json::to_string_pretty(&file).map_err(std::io::Error::other)?;
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        // A name of this process's own, so two writers never share a temporary file.
        let temp = self
            .path
            .with_extension(format!("json.{}.tmp", std::process::id()));
        let written = std::fs::File::create(&temp)
            .and_then(|mut out| out.write_all(text.as_bytes()))
            .and_then(|()| std::fs::rename(&temp, &self.path));
        if written.is_err() {
            let _ = std::fs::remove_file(&temp);
        }
        written
    }

    fn read(&self) -> File {
        let Ok(text) = std::fs::read_to_string(&self.path) else {
            return File::default();
        };
        match serde_json::from_str::<File>(&text) {
            Ok(file) if file.version == VERSION => file,
            Ok(_) | Err(_) => {
                tracing::info!(path = %self.path.display(), "the served-model cache is unreadable; asking afresh");
                File::default()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(window: u64) -> ServerAnswer {
        ServerAnswer {
            model: Some("m".into()),
            window: Some(window),
            said_by: "llama.cpp /props".into(),
        }
    }

    #[test]
    fn entries_are_kept_apart_and_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let cache = ServedCache::in_dir(&dir.path().join("data"));
        assert_eq!(cache.get("a"), None);
        cache.put("a", &answer(4096)).unwrap();
        cache.put("b", &answer(8192)).unwrap();
        cache.put("a", &answer(2048)).unwrap();
        assert_eq!(cache.get("a").unwrap().answer, answer(2048));
        assert_eq!(cache.get("b").unwrap().answer, answer(8192));
        let leftovers = std::fs::read_dir(dir.path().join("data")).unwrap().count();
        assert_eq!(leftovers, 1, "no temporary file stays");
    }

    #[test]
    fn a_damaged_file_reads_as_empty_and_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let cache = ServedCache::in_dir(dir.path());
        std::fs::write(cache.path(), "{not json").unwrap();
        assert_eq!(cache.get("a"), None);
        cache.put("a", &answer(4096)).unwrap();
        assert_eq!(cache.get("a").unwrap().answer, answer(4096));
    }
}
