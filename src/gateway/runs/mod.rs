//! Subagent runs: a session sends a child session to work on one task in the background, and
//! hears back when it ends.
//!
//! A run is accepted at once (`spawn_agent` returns its id), queued behind
//! `[subagents] max_concurrent` others, and then works in a session of its own under the key
//! `subagent:<run-id>`, started with its role journaled first (its definition's thin prompt
//! stack, its parent) and the tools of its definition, less the subagent tools. The child's
//! turn is followed to its end; its answer goes to `result.md` in the run's folder
//! (`<parent session>/subagents/<run-id>/`, with `task.md`, `artifacts/` and `logs/`), and the
//! parent gets a notice naming it as an automated input: it starts a turn when the parent is
//! idle and waits for the turn under way otherwise. A parent with a live or unreported run is
//! kept awake until the notice is delivered.

mod drained;
mod follow;
mod service;
mod work;

use super::manager::SessionManager;
use crate::agents::{Change, Definition, Definitions, Isolation, Worktree, worktree};
use crate::domain::{RunId, RunState, SessionId, SessionKey};
use crate::session::{ChildStart, SessionDeps, SessionHandle, SubagentDirs};
use crate::tools::agents::{AgentRuns, SpawnRequest};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError, Weak};
use std::time::Instant;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use work::Work;

pub use follow::{RunNews, follow_run, has_ended};

/// The definition used when a spawn names none.
const GENERAL: &str = "general";

/// How a subagent works, whatever its definition: it reports, it never asks.
const GENERAL_BODY: &str = "You carry out one task in a code repository, as well as it can be \
    done, and report what you did and found.";

/// The subagent runs of one owner.
pub struct Runs {
    manager: OnceLock<Weak<SessionManager>>,
    places: Arc<Semaphore>,
    table: Mutex<BTreeMap<RunId, Run>>,
    /// The files each working run that shares its folder wrote, released when it ends.
    claims: Mutex<BTreeMap<PathBuf, RunId>>,
    /// The config folder's `agents/`.
    config_agents: PathBuf,
}

/// One run, as the owner keeps it.
struct Run {
    parent: SessionId,
    agent: String,
    state: RunState,
    child: Option<SessionId>,
    dirs: SubagentDirs,
    accepted: Instant,
    ended: Option<Instant>,
    cancel: CancellationToken,
    /// Whether the parent has been told of its end.
    reported: bool,
    /// The parent's project folder, where an isolated run's changes are brought in.
    project_dir: PathBuf,
    /// Where it works when isolated, once made.
    worktree: Option<Worktree>,
    /// What it changed on its branch, once it ended.
    change: Option<Change>,
    /// The files it wrote or edited.
    written: BTreeSet<PathBuf>,
}

impl Runs {
    pub(super) fn new(max_concurrent: usize, config_agents: PathBuf) -> Self {
        Self {
            manager: OnceLock::new(),
            places: Arc::new(Semaphore::new(max_concurrent.max(1))),
            table: Mutex::new(BTreeMap::new()),
            claims: Mutex::new(BTreeMap::new()),
            config_agents,
        }
    }

    /// Runs that belong to no manager, put in `deps` for as long as the returned handle is
    /// kept: the sessions of a preview (`--print-prompt`) are offered the subagent tools as a
    /// served session is, and a spawn is refused, as nothing of a preview may start.
    pub fn for_preview(deps: &SessionDeps) -> Arc<dyn AgentRuns> {
        let runs: Arc<dyn AgentRuns> = Arc::new(Self::new(
            deps.settings.subagents.max_concurrent,
            deps.agents_dir(),
        ));
        let _ = deps.agents.set(Arc::downgrade(&runs));
        runs
    }

    /// Lets the runs start sessions through `manager`.
    pub(super) fn attach(&self, manager: Weak<SessionManager>) {
        let _ = self.manager.set(manager);
    }

    fn table(&self) -> MutexGuard<'_, BTreeMap<RunId, Run>> {
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs of session `parent` that have not been reported to it yet (queued, running, or
    /// ended with the notice still on its way).
    pub fn pending(&self, parent: &SessionId) -> usize {
        self.table()
            .values()
            .filter(|run| &run.parent == parent && !run.reported)
            .count()
    }

    /// Runs of session `parent` still queued or working, oldest first.
    pub fn live(&self, parent: &SessionId) -> Vec<RunId> {
        let table = self.table();
        let mut live: Vec<(&RunId, &Run)> = table
            .iter()
            .filter(|(_, run)| &run.parent == parent && !run.state.is_final())
            .collect();
        live.sort_by_key(|(_, run)| run.accepted);
        live.into_iter().map(|(id, _)| id.clone()).collect()
    }

    /// The files run `id` wrote or edited, in name order.
    fn written(&self, id: &RunId) -> Vec<PathBuf> {
        self.table()
            .get(id)
            .map(|run| run.written.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// The definitions a session of `project_dir` may send.
    pub fn definitions(&self, project_dir: &Path) -> Definitions {
        Definitions::load(&self.config_agents, project_dir)
    }

    fn set_state(&self, id: &RunId, state: RunState) {
        if let Some(run) = self.table().get_mut(id) {
            run.state = state;
            if state.is_final() {
                run.ended = Some(Instant::now());
            }
        }
        if state.is_final() {
            self.claims
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .retain(|_, holder| holder != id);
        }
    }
}

impl AgentRuns for Runs {
    fn spawn(&self, request: SpawnRequest) -> Result<RunId, String> {
        let manager = self
            .manager
            .get()
            .and_then(Weak::upgrade)
            .ok_or_else(|| "Subagents are not available: tern is stopping.".to_owned())?;
        if manager.is_stopping() {
            return Err("tern is stopping; no subagent can start now.".to_owned());
        }
        let definitions = self.definitions(&request.project_dir);
        let definition = match request.agent.as_deref() {
            None | Some(GENERAL) => general(),
            Some(name) => definitions.get(name).cloned().ok_or_else(|| {
                format!(
                    "There is no subagent definition {name:?}. Those there are: {}.",
                    std::iter::once(GENERAL)
                        .chain(definitions.names())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            })?,
        };
        let isolated = request.isolation.unwrap_or(definition.isolation) == Isolation::Worktree;
        let parent_dirs = manager
            .session_dirs(&request.parent)
            .ok_or_else(|| "The session sending the subagent is not stored.".to_owned())?;
        let id = RunId::generate();
        let dirs = parent_dirs
            .subagent(id.as_str())
            .map_err(|err| format!("Could not create the run's folder: {err}"))?;
        std::fs::write(&dirs.task_path, task_file(&id, &definition, &request))
            .map_err(|err| format!("Could not write {}: {err}", dirs.task_path.display()))?;
        let cancel = CancellationToken::new();
        let mut table = self.table();
        forget_old(&mut table);
        table.insert(
            id.clone(),
            Run {
                parent: request.parent.clone(),
                agent: definition.name.clone(),
                state: RunState::Queued,
                child: None,
                dirs: dirs.clone(),
                accepted: Instant::now(),
                ended: None,
                cancel: cancel.clone(),
                reported: false,
                project_dir: request.project_dir.clone(),
                worktree: None,
                change: None,
                written: BTreeSet::new(),
            },
        );
        drop(table);
        let work = Work {
            worktree_at: isolated.then(|| parent_dirs.worktree_dir.join(id.as_str())),
            worktree: None,
            id: id.clone(),
            definition,
            request,
            dirs,
            cancel,
        };
        tokio::spawn(work.run(manager));
        Ok(id)
    }

    fn check(&self, parent: &SessionId, run: &RunId, cancel: bool) -> Result<Value, String> {
        let mut table = self.table();
        let Some(entry) = table.get_mut(run).filter(|entry| &entry.parent == parent) else {
            return Err(format!(
                "This session started no run {run} that tern still keeps (a run that ended and was \
                 reported over an hour ago is only in its result.md); spawn_agent returned the \
                 ids of those it started."
            ));
        };
        if cancel && !entry.state.is_final() {
            entry.cancel.cancel();
        }
        let elapsed = entry
            .ended
            .unwrap_or_else(Instant::now)
            .duration_since(entry.accepted);
        let mut status = json!({
            "run_id": run.as_str(),
            "agent": entry.agent,
            "state": if cancel && !entry.state.is_final() { "cancelling" } else { entry.state.as_str() },
            "elapsed_s": elapsed.as_secs(),
        });
        if entry.state.is_final() {
            status["result_path"] = json!(entry.dirs.result_path.display().to_string());
        }
        if let Some(child) = &entry.child {
            status["session"] = json!(child.as_str());
        }
        if let Some(worktree) = &entry.worktree {
            status["branch"] = json!(worktree.branch);
            status["worktree"] = json!(worktree.root.display().to_string());
        }
        if let Some(change) = &entry.change {
            status["changes"] = json!(change.stat);
        }
        Ok(status)
    }

    fn claim_write(&self, run: &RunId, path: &Path) -> Result<(), String> {
        let mut claims = self.claims.lock().unwrap_or_else(PoisonError::into_inner);
        match claims.get(path) {
            Some(other) if other != run => {
                let table = self.table();
                let agent = table
                    .get(other)
                    .map_or("another", |entry| entry.agent.as_str());
                Err(format!(
                    "{} is being written by subagent run {other} ({agent}), which works in the \
                     same folder and has not ended; two runs must not write one file. Leave it \
                     to that run, or say in your report what you would change.",
                    path.display()
                ))
            }
            _ => {
                claims.insert(path.to_path_buf(), run.clone());
                drop(claims);
                if let Some(entry) = self.table().get_mut(run) {
                    entry.written.insert(path.to_path_buf());
                }
                Ok(())
            }
        }
    }

    fn bring_in(&self, parent: &SessionId, run: &RunId) -> Result<(String, Vec<PathBuf>), String> {
        let (worktree, project_dir) = {
            let table = self.table();
            let Some(entry) = table.get(run).filter(|entry| &entry.parent == parent) else {
                return Err(format!("This session started no run {run}."));
            };
            let Some(worktree) = entry.worktree.clone() else {
                return Err(format!(
                    "Run {run} worked in the project folder itself: its changes are there already."
                ));
            };
            match entry.state {
                RunState::Completed => {}
                RunState::Queued | RunState::Running => {
                    return Err(format!(
                        "Run {run} has not ended; bring its changes in once it has."
                    ));
                }
                other => {
                    return Err(format!(
                        "Run {run} ended {other}: the changes of a run that did not complete are \
                         not brought in (branch {} keeps them).",
                        worktree.branch
                    ));
                }
            }
            if entry.change.is_none() {
                return Err(format!("Run {run} changed nothing."));
            }
            (worktree, entry.project_dir.clone())
        };
        let change = worktree::bring_in(&project_dir, &worktree.base, &worktree.branch)?;
        Ok((change.stat, change.files))
    }
}

/// How long a run that ended and was reported stays in the owner's table.
const KEPT_AFTER_END: std::time::Duration = std::time::Duration::from_secs(3600);

/// Forgets the runs that ended, were reported and are older than [`KEPT_AFTER_END`], so a
/// long-lived owner's table stays bounded; their `result.md` keeps what they did.
fn forget_old(table: &mut BTreeMap<RunId, Run>) {
    table.retain(|_, run| {
        !run.reported
            || run
                .ended
                .is_none_or(|ended| ended.elapsed() < KEPT_AFTER_END)
    });
}

/// The definition of a subagent sent without one: every tool of its parent.
fn general() -> Definition {
    Definition {
        name: GENERAL.to_owned(),
        description: "Does one task with every tool its parent has.".to_owned(),
        tools: None,
        model: None,
        isolation: Isolation::Shared,
        body: GENERAL_BODY.to_owned(),
        source: None,
    }
}

fn task_file(id: &RunId, definition: &Definition, request: &SpawnRequest) -> String {
    format!(
        "# Task of run {id}\n\nAgent: {}\nParent session: {}\nWorking directory: {}\n\n{}\n",
        definition.name,
        request.parent,
        request.cwd.display(),
        request.task.trim()
    )
}

impl SessionManager {
    /// Lets the sessions of this manager send subagents: their `spawn_agent` calls reach
    /// its runs from now on.
    pub fn enable_subagents(self: &Arc<Self>) {
        self.runs.attach(Arc::downgrade(self));
        let runs: Arc<dyn AgentRuns> = self.runs.clone();
        let _ = self.deps.agents.set(Arc::downgrade(&runs));
    }

    /// The subagent runs of this manager's sessions.
    pub fn runs(&self) -> &Arc<Runs> {
        &self.runs
    }

    /// The background jobs of this manager's sessions.
    pub fn jobs(&self) -> &Arc<crate::tools::jobs::Jobs> {
        &self.deps.jobs
    }

    /// Whether a drain began: nothing new starts.
    pub fn is_stopping(&self) -> bool {
        self.stopping.load(std::sync::atomic::Ordering::Acquire)
    }

    /// The folders of stored session `id`.
    fn session_dirs(&self, id: &SessionId) -> Option<crate::session::SessionDirs> {
        let meta = self.deps.store.meta(id).ok().flatten()?;
        Some(crate::session::SessionDirs::locate(&self.deps.data_dir, &meta).0)
    }

    /// The key stored session `id` is reached by.
    fn key_of(&self, id: &SessionId) -> Option<SessionKey> {
        Some(self.deps.store.meta(id).ok().flatten()?.key)
    }

    /// The names of every tool the sessions may be given.
    fn tool_names(&self) -> Vec<String> {
        self.deps
            .tools
            .visible(crate::domain::Audience::Personal)
            .iter()
            .map(|tool| tool.name().to_owned())
            .collect()
    }

    /// Starts the session of a subagent run under `key` and makes it the one `key` talks to.
    async fn start_child(
        &self,
        key: &SessionKey,
        start: ChildStart,
    ) -> Result<SessionHandle, crate::session::SessionError> {
        let overrides = crate::store::Overrides {
            provider: None,
            model: start.model.clone(),
        };
        let mut deps = (*self.deps_for(&overrides)).clone();
        deps.tools = deps
            .tools
            .only(&start.tools)
            .map_err(crate::session::SessionError::Io)?;
        let handle = SessionHandle::create_child(Arc::new(deps), key.clone(), start)?;
        self.live.lock().await.insert(key.clone(), handle.clone());
        Ok(handle)
    }
}
