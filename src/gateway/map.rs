//! The repository map a front end shows (`/map`): made now, centred where the session's own
//! map is (its recent files and the code names in its last messages) and on whatever else
//! the person names, within the session's map budget; read on a blocking thread.

use super::local::{Local, blocking};
use super::service::ServiceError;
use crate::context::repo_map::{self, Focus};

/// The languages a map reads, for a front end to name.
pub use crate::context::repo_map::LANGUAGES;
use crate::domain::SessionId;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// A map made for a person to read, with what went into it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MapShown {
    pub project_dir: PathBuf,
    /// The map; empty when the project has nothing to map.
    pub text: String,
    /// Its budget, and whether the session's prompt carries a map at all
    /// (`[context] repo_map_tokens` is not 0).
    pub tokens: u64,
    pub in_prompt: bool,
    /// What it is centred on: paths in the project, then names.
    pub centre: Vec<String>,
    pub files: usize,
    pub definitions: usize,
    pub left_out: usize,
    pub took_ms: u64,
}

/// What a map centred on `focus` is said to be centred on: the paths and names, then the
/// plain words not among them, a dozen entries at most.
fn centre(focus: Focus) -> Vec<String> {
    const SHOWN: usize = 12;
    let mut centre: Vec<String> = focus.files;
    for item in focus.names.into_iter().chain(focus.words) {
        if !centre.iter().any(|seen| seen.eq_ignore_ascii_case(&item)) {
            centre.push(item);
        }
    }
    if centre.len() > SHOWN {
        let more = centre.len() - SHOWN;
        centre.truncate(SHOWN);
        centre.push(format!("… {more} more"));
    }
    centre
}

impl Local {
    /// The map of session `id`'s project (or, without a session, of `project_dir`), centred
    /// on the session's focus and on `extra` (paths from the project, or names).
    pub async fn repo_map(
        &self,
        id: Option<&SessionId>,
        project_dir: &Path,
        extra: Vec<String>,
    ) -> Result<MapShown, ServiceError> {
        // Paths the person gives are read from the session's working directory.
        let (root, cwd, mut focus) = match id {
            Some(id) => match self.manager.live_handle(id).await {
                Some(handle) => {
                    let state = handle.state().await?;
                    let focus = crate::session::map_focus(&state);
                    (state.project_dir, state.cwd, focus)
                }
                None => {
                    let meta = self.meta(id).await?;
                    (meta.project_dir.clone(), meta.project_dir, Focus::default())
                }
            },
            None => (
                project_dir.to_path_buf(),
                project_dir.to_path_buf(),
                Focus::default(),
            ),
        };
        let asked = crate::tools::repo_map::focus_of(&root, &cwd, &extra);
        focus.files.extend(asked.files);
        focus.names.extend(asked.names);
        focus.words.extend(asked.words);
        let configured = self.deps.settings.repo_map_tokens;
        let tokens = match configured {
            0 => crate::config::SessionSettings::default().repo_map_tokens,
            n => n,
        };
        let cache_dir = repo_map::cache::dir_in(&self.deps.data_dir);
        let started = std::time::Instant::now();
        let (map, root, focus) = blocking(move || {
            let map = repo_map::build(&root, &focus, tokens, Some(&cache_dir));
            (map, root, focus)
        })
        .await?;
        Ok(MapShown {
            project_dir: root,
            text: map.text,
            tokens,
            in_prompt: configured > 0,
            centre: centre(focus),
            files: map.files,
            definitions: map.definitions,
            left_out: map.skipped.total(),
            took_ms: started.elapsed().as_millis() as u64,
        })
    }
}
