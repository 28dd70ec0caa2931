//! `spawn_agent` and `check_agent_run`: a session sends a subagent to work on one task in the
//! background, and asks after it or cancels it.
//!
//! The tools only speak to the runs through [`AgentRuns`], which the session service
//! provides (`gateway::runs`) and hands each batch in [`ToolContext::agents`]; a session
//! without it (a subagent, or a session run outside the service) is told subagents are not
//! available here.

use super::args::{ArgError, Args};
use super::{ApprovalMode, ApprovalNeed, Tool, ToolContext, ToolEffect, ToolFuture, ToolOutput};
use crate::agents::Isolation;
use crate::domain::{Audience, RunId, SessionId};
use serde_json::{Value, json};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// The names of the tools a subagent never has: it cannot send subagents of its own.
pub const PARENT_ONLY: [&str; 2] = ["check_agent_run", "spawn_agent"];

/// What a session asks of the runs.
pub trait AgentRuns: Send + Sync {
    /// Accepts a run and starts it (or queues it behind `max_concurrent` others); returns at
    /// once with its id, or why it was refused.
    fn spawn(&self, request: SpawnRequest) -> Result<RunId, String>;

    /// What run `run` of session `parent` is doing, as JSON for the model; with `cancel`,
    /// cancels it first.
    fn check(&self, parent: &SessionId, run: &RunId, cancel: bool) -> Result<Value, String>;

    /// Brings the change run `run` of session `parent` made on its worktree's branch into
    /// the project's working tree, as edits; what it changed (a `git diff --stat`) and the
    /// files, or why nothing was. Blocks on the disk.
    fn bring_in(&self, parent: &SessionId, run: &RunId) -> Result<(String, Vec<PathBuf>), String>;

    /// Lets run `run` write `path`, unless another run that shares the project folder wrote
    /// it and is still working: then why not.
    fn claim_write(&self, run: &RunId, path: &Path) -> Result<(), String>;
}

/// Lets a subagent's write to `path` go ahead, or refuses it because another run working in
/// the same folder wrote that file; anything else writes freely.
pub fn claim(ctx: &ToolContext, path: &Path) -> Result<(), ToolOutput> {
    match &ctx.agents {
        Some(AgentContext {
            runs,
            as_run: Some(run),
            ..
        }) => runs.claim_write(run, path).map_err(ToolOutput::error),
        _ => Ok(()),
    }
}

/// A run as the parent asked for it, with what the child inherits.
#[derive(Debug, Clone)]
pub struct SpawnRequest {
    pub parent: SessionId,
    pub task: String,
    /// A definition's name; `None`: the general one.
    pub agent: Option<String>,
    /// `None`: as the definition says.
    pub isolation: Option<Isolation>,
    pub project_dir: PathBuf,
    pub cwd: PathBuf,
    pub recent_files: Vec<PathBuf>,
    pub audience: Audience,
    /// How much the run may do without asking: what the parent's turn may.
    pub approval: ApprovalMode,
}

/// The runs, and the parent's own facts a spawn hands on: set per batch by the session. In a
/// subagent (`as_run`), only its writes are checked against the other runs'.
#[derive(Clone)]
pub struct AgentContext {
    pub runs: Arc<dyn AgentRuns>,
    /// The run this session works for, when it is a subagent.
    pub as_run: Option<RunId>,
    pub parent: SessionId,
    pub audience: Audience,
    pub recent_files: Vec<PathBuf>,
    /// How much the parent's turn may do without asking.
    pub approval: ApprovalMode,
}

impl fmt::Debug for AgentContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AgentContext")
            .field("parent", &self.parent)
            .field("audience", &self.audience)
            .finish_non_exhaustive()
    }
}

fn unavailable() -> ToolOutput {
    ToolOutput::error(
        "Subagents are not available in this session (a subagent cannot send subagents of its \
         own). Do the work yourself.",
    )
}

/// Sends a subagent.
pub struct SpawnAgent;

impl Tool for SpawnAgent {
    fn name(&self) -> &'static str {
        "spawn_agent"
    }

    fn summary(&self) -> &'static str {
        "Send a subagent to do one task in the background; its result arrives later."
    }

    fn description(&self) -> &'static str {
        "Send a subagent to do one self-contained task in the background while you go on. It \
         returns at once with a run_id; the subagent works alone (it cannot ask the user \
         anything) and when it ends you get a notice naming its result.md. Give it everything \
         it needs in `task`: the goal, the files or names involved, and what to report. \
         `agent` picks one of the definitions listed in [available-subagents]; \
         `isolation: \"worktree\"` runs it in a git worktree on a branch of its own, so its \
         edits do not touch the working tree until they are brought in. Use it for work that \
         can go on in parallel, such as exploring another part of the code or running tests."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "task": {"type": "string", "description": "The whole task, self-contained: the goal, what is known, and what to report."},
                "agent": {"type": "string", "description": "A definition from [available-subagents]; leave out for a general one."},
                "isolation": {"type": "string", "enum": ["none", "worktree"], "description": "\"worktree\": work in a git worktree on a branch of its own."}
            },
            "required": ["task"],
            "additionalProperties": false
        })
    }

    fn min_audience(&self) -> Audience {
        Audience::Team
    }

    /// Not read-only: it starts work that outlives the call.
    fn is_read_only(&self) -> bool {
        false
    }

    /// The run's own calls ask for approval as they need it.
    fn approval_need(&self, _input: &Value, _ctx: &ToolContext) -> ApprovalNeed {
        ApprovalNeed::None
    }

    fn execute<'a>(
        &'a self,
        input: Value,
        ctx: &'a ToolContext,
        _cancel: CancellationToken,
    ) -> ToolFuture<'a> {
        Box::pin(async move {
            let Some(agents) = ctx.agents.as_ref().filter(|agents| agents.as_run.is_none()) else {
                return unavailable();
            };
            let request = match spawn_request(&input, ctx, agents) {
                Ok(request) => request,
                Err(err) => return err,
            };
            if request.task.trim().is_empty() {
                return ToolOutput::error("`task` is empty: say what the subagent should do.");
            }
            match agents.runs.spawn(request) {
                Ok(run_id) => ToolOutput::ok(
                    json!({"run_id": run_id.as_str(), "state": "accepted"}).to_string(),
                ),
                Err(why) => ToolOutput::error(why),
            }
        })
    }
}

fn spawn_request(
    input: &Value,
    ctx: &ToolContext,
    agents: &AgentContext,
) -> Result<SpawnRequest, ToolOutput> {
    let args = Args::new("spawn_agent", input).map_err(ToolOutput::from)?;
    let task = args.string("task").map_err(ToolOutput::from)?.to_owned();
    let agent = args
        .opt_string("agent")
        .map_err(ToolOutput::from)?
        .map(str::to_owned);
    let isolation = match args.opt_string("isolation").map_err(ToolOutput::from)? {
        None => None,
        Some(text) => Some(Isolation::parse(text).ok_or_else(|| {
            ToolOutput::from(ArgError(format!(
                "spawn_agent: `isolation` is {text:?}; it takes \"none\" or \"worktree\""
            )))
        })?),
    };
    Ok(SpawnRequest {
        parent: agents.parent.clone(),
        task,
        agent,
        isolation,
        project_dir: ctx.project_dir.clone(),
        cwd: ctx.cwd.clone(),
        recent_files: agents.recent_files.clone(),
        audience: agents.audience,
        approval: agents.approval,
    })
}

/// Asks after a run, or cancels it.
pub struct CheckAgentRun;

impl Tool for CheckAgentRun {
    fn name(&self) -> &'static str {
        "check_agent_run"
    }

    fn summary(&self) -> &'static str {
        "See what a subagent run is doing, or cancel it."
    }

    fn description(&self) -> &'static str {
        "See what a subagent run started with spawn_agent is doing (`action: \"status\"`: its \
         state, time, and result.md once it ended), cancel it (`action: \"cancel\"`), or bring \
         the changes a completed run made in its worktree into the working tree \
         (`action: \"merge\"`, applied as edits, which a person may be asked to approve). \
         There is no need to poll: a notice arrives when a run ends."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "run_id": {"type": "string", "description": "The run_id spawn_agent returned."},
                "action": {"type": "string", "enum": ["status", "cancel", "merge"]}
            },
            "required": ["run_id", "action"],
            "additionalProperties": false
        })
    }

    fn min_audience(&self) -> Audience {
        Audience::Team
    }

    fn is_read_only(&self) -> bool {
        false
    }

    /// Bringing a change in edits the working tree; asking and cancelling need nothing.
    fn approval_need(&self, input: &Value, _ctx: &ToolContext) -> ApprovalNeed {
        match check_args(input) {
            Ok((_, Action::Merge)) => ApprovalNeed::Edit,
            _ => ApprovalNeed::None,
        }
    }

    fn execute<'a>(
        &'a self,
        input: Value,
        ctx: &'a ToolContext,
        cancel: CancellationToken,
    ) -> ToolFuture<'a> {
        Box::pin(async move {
            let Some(agents) = ctx.agents.as_ref().filter(|agents| agents.as_run.is_none()) else {
                return unavailable();
            };
            let (run, action) = match check_args(&input) {
                Ok(parsed) => parsed,
                Err(err) => return err,
            };
            if action == Action::Merge {
                let (runs, parent) = (agents.runs.clone(), agents.parent.clone());
                return super::run_blocking_change(&cancel, move |_| {
                    match runs.bring_in(&parent, &run) {
                        Ok((stat, files)) => files.into_iter().fold(
                            ToolOutput::ok(format!("Brought into the working tree:\n{stat}")),
                            |output, file| output.with_effect(ToolEffect::Wrote(file)),
                        ),
                        Err(why) => ToolOutput::error(why),
                    }
                })
                .await;
            }
            match agents
                .runs
                .check(&agents.parent, &run, action == Action::Cancel)
            {
                Ok(status) => ToolOutput::ok(status.to_string()),
                Err(why) => ToolOutput::error(why),
            }
        })
    }
}

/// What `check_agent_run` was asked to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    Status,
    Cancel,
    Merge,
}

fn check_args(input: &Value) -> Result<(RunId, Action), ToolOutput> {
    let args = Args::new("check_agent_run", input).map_err(ToolOutput::from)?;
    let text = args.string("run_id").map_err(ToolOutput::from)?;
    let run = RunId::parse(text).ok_or_else(|| {
        ToolOutput::error(format!(
            "{text:?} is not a run id; spawn_agent returned one like \"run-0123456789ab\"."
        ))
    })?;
    let action = match args.string("action").map_err(ToolOutput::from)? {
        "status" => Action::Status,
        "cancel" => Action::Cancel,
        "merge" => Action::Merge,
        other => {
            return Err(ToolOutput::error(format!(
                "`action` is {other:?}; it takes \"status\", \"cancel\" or \"merge\"."
            )));
        }
    };
    Ok((run, action))
}
