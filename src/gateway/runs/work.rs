//! One run on its way: waiting for a place, its worktree, its child session followed to the
//! end of its turn, `result.md`, and the notice to its parent.

use super::{Runs, SessionManager};
use crate::agents::{Change, Definition, Worktree, worktree};
use crate::domain::{
    Audience, InputKind, RunId, RunState, Sender, SessionId, SessionKey, SubagentRole, TurnStop,
};
use crate::gateway::SendUserMessage;
use crate::session::{
    ChildStart, KeepAwake, OutputFilter, SessionEvent, SessionHandle, SubagentDirs, UserInput,
};
use crate::store::title_from_input;
use crate::tools::agents::{PARENT_ONLY, SpawnRequest};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// One accepted run, on its way.
pub(super) struct Work {
    /// Where its worktree goes, when it works in one.
    pub(super) worktree_at: Option<PathBuf>,
    pub(super) worktree: Option<Worktree>,
    pub(super) id: RunId,
    pub(super) definition: Definition,
    pub(super) request: SpawnRequest,
    pub(super) dirs: SubagentDirs,
    pub(super) cancel: CancellationToken,
}

/// How a child's work ended.
struct Outcome {
    state: RunState,
    /// The child's answer, or why there is none.
    text: String,
    child: Option<SessionId>,
    /// What it changed on its worktree's branch.
    change: Option<Change>,
}

impl Work {
    pub(super) async fn run(mut self, manager: Arc<SessionManager>) {
        let runs = manager.runs().clone();
        // The parent stays awake until it has heard of the end.
        let awake: Option<KeepAwake> = manager
            .live_handle(&self.request.parent)
            .await
            .map(|handle| handle.keep_awake());
        let outcome = self.work(&manager, &runs).await;
        // The process is ending and its runtimes drop every task, this one too in a moment:
        // whatever the run saw end was ended by that, and nothing is reported, as nothing
        // would be had both runtimes stopped at once.
        if crate::session::background::ending() {
            return std::future::pending().await;
        }
        // Written before the end is told, so whoever hears of it finds the file.
        if let Err(err) = std::fs::write(&self.dirs.result_path, self.result_file(&outcome)) {
            tracing::warn!(run = %self.id, %err, "could not write a run's result");
        }
        runs.set_state(&self.id, outcome.state);
        let reported = self.report(&manager, &outcome).await;
        if let Some(run) = runs.table().get_mut(&self.id) {
            run.reported = true;
            if !reported {
                tracing::warn!(run = %self.id, "the parent could not be told of a run's end");
            }
        }
        drop(awake);
    }

    async fn work(&mut self, manager: &Arc<SessionManager>, runs: &Runs) -> Outcome {
        let ended = |state, text: &str| Outcome {
            state,
            text: text.to_owned(),
            child: None,
            change: None,
        };
        let _place = tokio::select! {
            place = runs.places.clone().acquire_owned() => match place {
                Ok(place) => place,
                Err(_) => return ended(RunState::Failed, "The runs stopped before this one started."),
            },
            () = self.cancel.cancelled() => return ended(RunState::Cancelled, "Cancelled before it started."),
        };
        if self.cancel.is_cancelled() {
            return ended(RunState::Cancelled, "Cancelled before it started.");
        }
        if manager.is_stopping() {
            return ended(
                RunState::OwnerRestarted,
                "tern stopped before this run started; nothing of it ran.",
            );
        }
        runs.set_state(&self.id, RunState::Running);
        if let Err(why) = self.make_worktree(runs).await {
            return ended(RunState::Failed, &why);
        }
        let key = SessionKey::subagent(&self.id);
        let child = match manager.start_child(&key, self.start(manager)).await {
            Ok(child) => child,
            Err(err) => {
                return ended(
                    RunState::Failed,
                    &format!("Its session could not start: {err}"),
                );
            }
        };
        if let Some(run) = runs.table().get_mut(&self.id) {
            run.child = Some(child.id().clone());
        }
        let mut outcome = self.follow(manager, &key, &child).await;
        outcome.child = Some(child.id().clone());
        if let Some(worktree) = self.worktree.clone() {
            let message = format!(
                "{} ({}): {}",
                self.id,
                self.definition.name,
                title_from_input(&self.request.task)
            );
            let committed =
                tokio::task::spawn_blocking(move || worktree::commit_all(&worktree, &message))
                    .await;
            match committed {
                Ok(Ok(change)) => outcome.change = change,
                Ok(Err(why)) => outcome.text.push_str(&format!(
                    "\n\n(Its changes could not be committed to its branch: {why}.)"
                )),
                Err(err) => {
                    tracing::warn!(run = %self.id, %err, "committing a run's worktree stopped")
                }
            }
            if let Some(run) = runs.table().get_mut(&self.id) {
                run.change = outcome.change.clone();
            }
        }
        outcome
    }

    /// Makes the run's worktree, when it works in one, off the async threads.
    async fn make_worktree(&mut self, runs: &Runs) -> Result<(), String> {
        let Some(at) = self.worktree_at.clone() else {
            return Ok(());
        };
        let (project, cwd, name) = (
            self.request.project_dir.clone(),
            self.request.cwd.clone(),
            self.id.to_string(),
        );
        let made =
            tokio::task::spawn_blocking(move || worktree::create(&project, &cwd, &at, &name))
                .await
                .map_err(|err| format!("Making its worktree stopped: {err}"))?;
        let (worktree, cwd) =
            made.map_err(|why| format!("Its worktree could not be made: {why}."))?;
        // What the parent worked with, found where the child works.
        let from = self.request.project_dir.clone();
        for path in &mut self.request.recent_files {
            if let Ok(rel) = path.strip_prefix(&from) {
                *path = worktree.project_dir.join(rel);
            }
        }
        self.request.cwd = cwd;
        if let Some(run) = runs.table().get_mut(&self.id) {
            run.worktree = Some(worktree.clone());
        }
        self.worktree = Some(worktree);
        Ok(())
    }

    fn start(&self, manager: &SessionManager) -> ChildStart {
        let known = manager.tool_names();
        let tools = match &self.definition.tools {
            Some(names) => names
                .iter()
                .filter(|name| known.contains(name) && !PARENT_ONLY.contains(&name.as_str()))
                .cloned()
                .collect(),
            None => known
                .into_iter()
                .filter(|name| !PARENT_ONLY.contains(&name.as_str()))
                .collect(),
        };
        ChildStart {
            role: SubagentRole {
                parent: self.request.parent.clone(),
                run_id: self.id.clone(),
                agent: self.definition.name.clone(),
                instructions: self.definition.body.clone(),
                run_dir: self.dirs.dir.clone(),
            },
            project_dir: self.project_dir().to_path_buf(),
            cwd: self.request.cwd.clone(),
            recent_files: self.request.recent_files.clone(),
            tools,
            model: self.definition.model.clone(),
            title: format!(
                "{}: {}",
                self.definition.name,
                crate::store::title_from_input(&self.request.task)
            ),
        }
    }

    /// Sends the child its task and follows its turn to the end.
    async fn follow(
        &self,
        manager: &SessionManager,
        key: &SessionKey,
        child: &SessionHandle,
    ) -> Outcome {
        let failed = |text: String| Outcome {
            state: RunState::Failed,
            text,
            child: None,
            change: None,
        };
        let message = SendUserMessage {
            key: key.as_str().to_owned(),
            input: UserInput {
                sender: subagent_sender(&self.request.parent),
                audience: self.request.audience,
                kind: InputKind::SubagentTask,
                text: self.first_message().into(),
                approval: Some(self.request.approval),
                touched: Vec::new(),
            },
            project_dir: self.request.project_dir.clone(),
        };
        // The streamed text too: a reply the output limit cuts off is kept nowhere else.
        let filter = OutputFilter::TEXT
            .union(OutputFilter::TEXT_STREAMING)
            .union(OutputFilter::PROCESSING_STATE);
        let mut events = match manager.send_watched(message, filter).await {
            Ok((_, events)) => events,
            Err(err) => return failed(format!("Its task could not be given to it: {err}")),
        };
        let mut cancelled = false;
        // The text the current model call has streamed.
        let mut streamed = String::new();
        loop {
            let event = tokio::select! {
                event = events.recv() => event,
                () = self.cancel.cancelled(), if !cancelled => {
                    cancelled = true;
                    if let Err(err) = child.cancel().await {
                        tracing::warn!(run = %self.id, %err, "could not cancel a run's session");
                    }
                    continue;
                }
            };
            match event {
                Some(SessionEvent::TurnCompleted { text, stop, .. }) => {
                    return Outcome {
                        state: run_state(stop, cancelled),
                        text,
                        child: None,
                        change: None,
                    };
                }
                Some(SessionEvent::TurnFailed { message, stop, .. }) => {
                    let mut text = message;
                    if stop == TurnStop::OutputLimit && !streamed.trim().is_empty() {
                        text.push_str(&self.keep_cut_off(&streamed));
                    }
                    return Outcome {
                        state: run_state(stop, cancelled),
                        text,
                        child: None,
                        change: None,
                    };
                }
                Some(SessionEvent::TextDelta { text }) => streamed.push_str(&text),
                // A call asked again voids what it streamed; a new call starts afresh.
                Some(SessionEvent::Retry {
                    discarded_chars, ..
                }) => {
                    let keep = streamed
                        .chars()
                        .count()
                        .saturating_sub(discarded_chars as usize);
                    streamed = streamed.chars().take(keep).collect();
                }
                Some(SessionEvent::ToolResult { .. }) => streamed.clear(),
                Some(_) => {}
                None => {
                    let state = if manager.is_stopping() {
                        RunState::OwnerRestarted
                    } else {
                        RunState::Failed
                    };
                    return Outcome {
                        state,
                        text: "Its session stopped before its turn ended.".to_owned(),
                        child: None,
                        change: None,
                    };
                }
            }
        }
    }

    /// Keeps a reply the output limit cut off in `artifacts/truncated-output.md`; what the
    /// result says of it.
    fn keep_cut_off(&self, text: &str) -> String {
        let path = self.dirs.artifact_dir.join("truncated-output.md");
        match std::fs::write(&path, text) {
            Ok(()) => format!(
                "\n\nThe reply the output limit cut off ({} bytes) is kept in {}.",
                text.len(),
                path.display()
            ),
            Err(err) => {
                format!("\n\n(The reply the output limit cut off could not be kept: {err}.)")
            }
        }
    }

    /// Where the child works: its worktree's project folder, or its parent's.
    fn project_dir(&self) -> &Path {
        match &self.worktree {
            Some(worktree) => &worktree.project_dir,
            None => &self.request.project_dir,
        }
    }

    /// "Context: … Task: …", with where it works and what its parent worked on last.
    fn first_message(&self) -> String {
        let request = &self.request;
        let mut context = format!(
            "You are subagent run {} ({}), sent by session {}. Project: {}. Working directory: {}.",
            self.id,
            self.definition.name,
            request.parent,
            self.project_dir().display(),
            request.cwd.display()
        );
        if let Some(worktree) = &self.worktree {
            context.push_str(&format!(
                " You work in a git worktree of your own on branch {}, made from the last \
                 commit (the parent's uncommitted changes are not in it); what you change \
                 there is committed to that branch when you finish, for your parent to bring in.",
                worktree.branch
            ));
        }
        if !request.recent_files.is_empty() {
            let files: Vec<String> = request
                .recent_files
                .iter()
                .take(10)
                .map(|path| path.display().to_string())
                .collect();
            context.push_str(&format!(
                " Files your parent worked with lately: {}.",
                files.join(", ")
            ));
        }
        context.push_str(&format!(
            " Your run's folder is {} (write any long output to its artifacts/).",
            self.dirs.dir.display()
        ));
        format!("Context: {context}\n\nTask: {}", request.task.trim())
    }

    fn result_file(&self, outcome: &Outcome) -> String {
        let mut text = result_heading(&self.id, &self.definition.name, outcome.state);
        if let Some(child) = &outcome.child {
            text.push_str(&format!("Session: {child}\n"));
        }
        text.push_str(&format!(
            "Artifacts: {}\nLogs: {}\n",
            self.dirs.artifact_dir.display(),
            self.dirs.log_dir.display(),
        ));
        if let Some(worktree) = &self.worktree {
            text.push_str(&format!(
                "Worktree: {}\nBranch: {}\n",
                worktree.root.display(),
                worktree.branch
            ));
            match &outcome.change {
                Some(change) => text.push_str(&format!("Changes:\n{}\n", change.stat)),
                None => text.push_str("Changes: none\n"),
            }
        }
        text.push_str(&format!("\n{}\n", outcome.text.trim()));
        text
    }

    /// Tells the parent the run ended, as an automated input; whether it was delivered.
    async fn report(&self, manager: &SessionManager, outcome: &Outcome) -> bool {
        let Some(key) = manager.key_of(&self.request.parent) else {
            return false;
        };
        let summary: String = outcome.text.trim().chars().take(600).collect();
        let cut = if summary.len() < outcome.text.trim().len() {
            " …"
        } else {
            ""
        };
        let mut text = notice_heading(
            &self.id,
            &self.definition.name,
            outcome.state,
            &self.dirs.result_path,
        );
        text.push_str(&format!("Summary: {summary}{cut}\n"));
        if let (Some(worktree), Some(change)) = (&self.worktree, &outcome.change) {
            text.push_str(&format!(
                "Its changes are on branch {} ({}).",
                worktree.branch,
                change.stat.lines().last().unwrap_or("").trim()
            ));
            if outcome.state == RunState::Completed {
                text.push_str(&format!(
                    " To bring them into the working tree: check_agent_run {{\"run_id\": \"{}\", \
                     \"action\": \"merge\"}}.",
                    self.id
                ));
            }
            text.push('\n');
        }
        text.push_str("\nRead the result file for the whole answer before relying on it.");
        // Only what a run that completed wrote where the parent works.
        let touched = match outcome.state {
            RunState::Completed if self.worktree.is_none() => manager.runs().written(&self.id),
            _ => Vec::new(),
        };
        let notice = Notice {
            run: &self.id,
            parent: &self.request.parent,
            key: &key,
            audience: self.request.audience,
            project_dir: self.request.project_dir.clone(),
            text,
            touched,
        };
        notice.send(manager).await
    }
}

/// How a run ended, from how its child's turn did.
fn run_state(stop: TurnStop, cancelled: bool) -> RunState {
    match stop {
        _ if cancelled => RunState::Cancelled,
        TurnStop::Interrupted => RunState::Cancelled,
        TurnStop::Completed => RunState::Completed,
        TurnStop::Drained => RunState::OwnerRestarted,
        _ => RunState::Failed,
    }
}

/// The top of a run's `result.md`.
pub(super) fn result_heading(run: &RunId, agent: &str, state: RunState) -> String {
    format!("# Result of run {run} ({agent})\n\nState: {state}\n")
}

/// The first lines of the notice of a run's end, naming its `result.md`.
pub(super) fn notice_heading(run: &RunId, agent: &str, state: RunState, result: &Path) -> String {
    format!(
        "[subagent run {run} ({agent}) ended: {state}]\nResult: {}\n",
        result.display()
    )
}

/// The notice of a run's end, for its parent.
pub(super) struct Notice<'a> {
    pub run: &'a RunId,
    pub parent: &'a SessionId,
    /// The key the parent is reached by.
    pub key: &'a SessionKey,
    pub audience: Audience,
    pub project_dir: PathBuf,
    pub text: String,
    /// Files to join the parent's recent files.
    pub touched: Vec<PathBuf>,
}

impl Notice<'_> {
    /// Sends it to the parent as an automated input; whether it was delivered.
    pub(super) async fn send(self, manager: &SessionManager) -> bool {
        let message = SendUserMessage {
            key: self.key.as_str().to_owned(),
            input: UserInput {
                sender: subagent_sender(self.parent),
                audience: self.audience,
                kind: InputKind::ChildNotice,
                text: self.text.into(),
                approval: None,
                touched: self.touched,
            },
            project_dir: self.project_dir,
        };
        match manager.send(message).await {
            Ok(_) => true,
            Err(err) => {
                tracing::warn!(run = %self.run, %err, "a run's notice was not delivered");
                false
            }
        }
    }
}

/// Who a run's task and notice come from.
pub(super) fn subagent_sender(parent: &SessionId) -> Sender {
    Sender {
        id: format!("subagents:{parent}"),
        name: "subagents".to_owned(),
        automated: true,
        trusted: true,
    }
}
