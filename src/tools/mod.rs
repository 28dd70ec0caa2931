//! Tools the model can call on the user's repository: the [`Tool`] trait, the
//! [`ToolRegistry`], the approval [`policy`], and the built-in tools.
//!
//! A tool never mutates session state directly. It returns a [`ToolOutput`] whose
//! [`ToolEffect`]s (files read or written, a new working directory) the session applies, so
//! every change of state goes through the session and its journal.
//!
//! Each built-in tool lives in its own file; the pieces they share are argument checking
//! ([`args`]), path resolution and the project boundary ([`paths`]), names that are not
//! UTF-8 shown in an escaped form the tools read back ([`path_text`]), output capping
//! ([`output`]) and making captured bytes fit to read ([`printable`]), the environment of the
//! commands tern runs ([`child_env`]), opening and atomically replacing regular files
//! (`regular_file`), the ignore-respecting file walk behind `glob` and `grep` (`walk`), and
//! what a person asked to approve a call is shown ([`preview`]), and the check that fails a
//! call which cannot work before anyone is asked about it ([`check`]).

pub mod agents;
pub mod args;
pub mod check;
pub mod child_env;
pub mod file_edit;
pub mod file_read;
pub mod file_write;
pub mod glob;
pub mod grep;
pub mod jobs;
pub mod mcp;
pub mod output;
pub mod path_text;
pub mod paths;
pub mod policy;
pub mod preview;
pub mod printable;
pub mod registry;
mod regular_file;
pub mod repo_map;
pub mod set_working_directory;
pub mod shell_execute;
pub mod symbols;
mod walk;

pub use walk::list_files;

pub use check::CheckFuture;
pub use child_env::ChildEnv;
pub use output::{OutputCap, cap_head_tail};
pub use policy::{ApprovalMode, ApprovalNeed, Decision, decide};
pub use preview::{Preview, PreviewFuture};
pub use registry::{NOT_IN_SMALL_WINDOW, ToolRegistry};
pub use shell_execute::ShellLimits;

use crate::domain::{Audience, JobRecord};
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// A boxed future, so that `Tool` stays object-safe.
pub type ToolFuture<'a> = Pin<Box<dyn Future<Output = ToolOutput> + Send + 'a>>;

/// What a tool may touch and see while it runs. Built fresh by the session for each batch.
#[derive(Debug, Clone)]
pub struct ToolContext {
    /// The project directory: relative paths resolve against it, and anything outside it
    /// needs approval.
    pub project_dir: PathBuf,
    /// The current working directory for relative paths and shell commands (starts as
    /// `project_dir`, moved by `set_working_directory`).
    pub cwd: PathBuf,
    /// Exported as `TMPDIR`, `TMP` and `TEMP` to child processes.
    pub temp_dir: PathBuf,
    /// Folders outside the project that tools may read without approval: the session's own
    /// artifacts (where oversized messages are kept), never anything of the user's.
    pub readable_dirs: Vec<PathBuf>,
    /// Watchdog for a tool without progress; streamed output resets it (`[session]
    /// tool_execution`).
    pub tool_timeout: Duration,
    /// Builds the environment of every process a tool starts: without credentials or
    /// anything that looks like one.
    pub child_env: Arc<ChildEnv>,
    /// Where a tool that keeps a spool ([`Tool::keeps_spool`]) writes what it prints as it
    /// runs, so it outlives tern; set per call by the session, `None` elsewhere.
    pub spool: Option<PathBuf>,
    /// The subagent runs a session may start and ask after; `None` where it may not (a
    /// subagent, a session outside the session service).
    pub agents: Option<agents::AgentContext>,
    /// The session's background jobs; `None` where there are none (a `!` line).
    pub jobs: Option<jobs::JobContext>,
    /// Where the repository map keeps the tags it read, so the next map reads only changed
    /// files; `None`: each map reads the project anew.
    pub repo_maps: Option<PathBuf>,
}

/// What a tool call changed, for the session to record (recent files, working directory).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolEffect {
    /// The call read this file (absolute path).
    Read(PathBuf),
    /// The call created or changed this file (absolute path).
    Wrote(PathBuf),
    /// The working directory moves here (canonical path).
    SetWorkingDirectory(PathBuf),
    /// A background job started.
    JobStarted(JobRecord),
}

/// The result of one call: the text returned to the model and the effects to apply.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ToolOutput {
    pub content: String,
    pub is_error: bool,
    pub effects: Vec<ToolEffect>,
    /// The call succeeded but found nothing and changed nothing: a search without a match, a
    /// glob without a file, a read of no line. The loop guard does not take such a call as
    /// progress: it leaves the failure score where it was.
    pub empty: bool,
    /// Images the tool returned, kept as files (see [`crate::domain::ToolResult::images`]).
    pub images: Vec<crate::domain::Attachment>,
}

impl ToolOutput {
    /// A successful result.
    pub fn ok(content: impl Into<String>) -> Self {
        Self {
            content: content.into(),
            is_error: false,
            effects: Vec::new(),
            empty: false,
            images: Vec::new(),
        }
    }

    /// A failed call; the content says why, for the model to adapt.
    pub fn error(content: impl Into<String>) -> Self {
        Self {
            content: content.into(),
            is_error: true,
            effects: Vec::new(),
            empty: false,
            images: Vec::new(),
        }
    }

    /// A successful result that found and changed nothing (see [`ToolOutput::empty`]).
    pub fn nothing_found(content: impl Into<String>) -> Self {
        Self {
            empty: true,
            ..Self::ok(content)
        }
    }

    /// Adds an effect for the session to apply.
    pub fn with_effect(mut self, effect: ToolEffect) -> Self {
        self.effects.push(effect);
        self
    }
}

/// A capability offered to the model.
pub trait Tool: Send + Sync {
    /// The name the model calls it by.
    fn name(&self) -> &'static str;

    /// One paragraph for the model: what it does and when to use it. It must not change
    /// while a process runs: it rides in the prompt's cached prefix.
    fn description(&self) -> &str;

    /// One line for the tool index in the prompt, and the whole description in the compact
    /// prompt of a small window; the description's first sentence unless the tool says
    /// otherwise.
    fn summary(&self) -> &str {
        first_sentence(self.description())
    }

    /// The JSON schema of its arguments.
    fn input_schema(&self) -> serde_json::Value;

    /// The least trusted audience that may see and call this tool.
    fn min_audience(&self) -> Audience;

    /// True when calls have no side effects, so several may run concurrently in one batch.
    fn is_read_only(&self) -> bool;

    /// True when the tool enforces `ToolContext::tool_timeout` itself as an inactivity
    /// watchdog (each streamed item resets it). Every other tool gets `tool_timeout` as a
    /// hard limit from the batch that runs it.
    fn watches_its_own_progress(&self) -> bool {
        false
    }

    /// True when the tool writes what it prints to [`ToolContext::spool`] as it runs (a
    /// command's output), for recovery to show if tern stops meanwhile.
    fn keeps_spool(&self) -> bool {
        false
    }

    /// What approval this particular call needs, given its arguments.
    fn approval_need(&self, input: &serde_json::Value, ctx: &ToolContext) -> ApprovalNeed;

    /// What a person asked to approve this call is shown (the command, the diff a change
    /// would make), worked out without side effects; `None` leaves the session to show the
    /// arguments.
    fn preview<'a>(
        &'a self,
        _input: &'a serde_json::Value,
        _ctx: &'a ToolContext,
    ) -> PreviewFuture<'a> {
        Box::pin(async { None })
    }

    /// Why this call cannot work, found cheaply and without side effects before a person is
    /// asked about it: `Err` with the reason for the model (the call is then answered with it
    /// and nobody is asked), `Ok` when it may work. It never reads the content of a file the
    /// tools may not read freely (see [`check`]).
    fn check<'a>(
        &'a self,
        _input: &'a serde_json::Value,
        _ctx: &'a ToolContext,
    ) -> CheckFuture<'a> {
        check::passes()
    }

    /// Runs the call. Must return promptly once `cancel` fires; errors are returned as a
    /// `ToolOutput` with `is_error`, never as a panic.
    fn execute<'a>(
        &'a self,
        input: serde_json::Value,
        ctx: &'a ToolContext,
        cancel: CancellationToken,
    ) -> ToolFuture<'a>;
}

/// `text` up to the end of its first sentence (a period followed by a space), or all of it.
fn first_sentence(text: &str) -> &str {
    text.find(". ").map_or(text, |end| &text[..=end])
}

/// Runs blocking file-system work (reads, walks) off the async threads. Returns as soon as
/// `cancel` fires; the work itself is handed a token that fires on cancel and also when this
/// future is dropped (a caller's time limit), and is expected to stop at its next check.
pub(crate) async fn run_blocking<F>(cancel: &CancellationToken, work: F) -> ToolOutput
where
    F: FnOnce(&CancellationToken) -> ToolOutput + Send + 'static,
{
    let token = cancel.child_token();
    let _stop_when_dropped = token.clone().drop_guard();
    let task = tokio::task::spawn_blocking(move || work(&token));
    tokio::select! {
        _ = cancel.cancelled() => ToolOutput::error("Cancelled before the tool finished."),
        joined = task => joined.unwrap_or_else(|err| {
            ToolOutput::error(format!("The tool stopped unexpectedly: {err}"))
        }),
    }
}

/// Runs blocking work that changes files off the async threads and waits for its answer even
/// after a cancel, so the answer says truthfully whether the change happened. The work's token
/// fires on cancel and when this future is dropped; the work must check it before its point of
/// no return and stop there, which also keeps a dropped call from changing a file afterwards.
pub(crate) async fn run_blocking_change<F>(cancel: &CancellationToken, work: F) -> ToolOutput
where
    F: FnOnce(&CancellationToken) -> ToolOutput + Send + 'static,
{
    let token = cancel.child_token();
    let _stop_when_dropped = token.clone().drop_guard();
    tokio::task::spawn_blocking(move || work(&token))
        .await
        .unwrap_or_else(|err| ToolOutput::error(format!("The tool stopped unexpectedly: {err}")))
}

/// Runs `work`, which waits (for the disk, for a thread), so that the async worker it is
/// called on hands its other tasks to another thread meanwhile (on a multi-threaded
/// runtime; elsewhere it simply runs).
pub fn off_async_threads<T>(work: impl FnOnce() -> T) -> T {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(work)
        }
        _ => work(),
    }
}
