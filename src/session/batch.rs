//! Running the tool calls of one model response as a batch.
//!
//! Each call is planned (unknown tool, malformed arguments, audience, approval) just before
//! it runs; runs of consecutive read-only calls execute concurrently and every other call
//! runs alone, in order. A call a person must decide on is first checked by its tool
//! ([`Tool::check`]): one that cannot work is answered with the reason and nobody is asked.
//! The others are handed to the batch's [`Approver`] once every call before them has run,
//! and the batch waits for the ruling, with no time limit: the tool's watchdog starts only
//! when the call does. Results always come back in call order, one per call, so the history
//! stays paired whatever happened.

use super::spool;
use crate::domain::{ApprovalNeed, Audience, ToolCall, ToolResult};
use crate::tools::{
    self, ApprovalMode, Decision, Tool, ToolContext, ToolEffect, ToolOutput, ToolRegistry,
};
use futures_util::FutureExt;
use futures_util::future::join_all;
use std::collections::BTreeMap;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// The outcome of one call.
#[derive(Debug, Clone, PartialEq)]
pub struct CallOutcome {
    pub result: ToolResult,
    pub effects: Vec<ToolEffect>,
    /// Where the call kept what it printed as it ran, to be removed once its result is
    /// journaled.
    pub spool: Option<PathBuf>,
    /// It succeeded but found and changed nothing ([`ToolOutput::empty`]).
    pub empty: bool,
    /// How long the tool ran, from its start to its answer; `None` for a call that never
    /// started (refused, declined, malformed, cut off by a cancel). Journaled with the
    /// result, so a reopened session shows the figure the live view showed.
    pub took: Option<Duration>,
}

/// The result of a call that a cancel stopped before it began.
pub(super) const NOT_STARTED: &str = "not run: the turn was cancelled before this call started";

/// The result of a call, and of those after it, when the journal could not record what the
/// batch needed recorded first (a question, its answer, or that calls start): the turn fails
/// on that error.
pub(super) const NOT_RECORDED: &str = "not run: the session journal could not be written";

/// How long a call that can change things gets to answer after a cancel or its time limit
/// before it is given up on: its own answer says truthfully what it did.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// What the batch will do with one call.
enum Plan<'a> {
    Run(&'a dyn Tool),
    /// A person decides first.
    Ask(&'a dyn Tool, ApprovalNeed),
    Answer(String),
}

/// How a call a person was asked about goes on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ruling {
    Run,
    /// Not run; `result` tells the model why.
    Decline(String),
    /// Not run, and neither is any later call of the batch: the turn is ending (cancelled,
    /// or tern is stopping). `rest` is the result of those later calls.
    Halt {
        result: String,
        rest: String,
    },
}

/// Decides on the calls that need a person (`ApprovalMode::Ask`).
pub trait Approver {
    /// Whether an earlier "always" covers `call`, so it runs without asking.
    fn granted(&self, call: &ToolCall, need: &ApprovalNeed) -> bool;

    /// Told that `calls`, which can change things, are about to run, after `done` (the
    /// outcomes of the calls before them, all final). The turn journals their start durably
    /// first, so a crash while they run can never make them look as if they had not run.
    /// `false` when that failed: the batch ends there and nothing more runs.
    fn starting(&mut self, calls: &[ToolCall], done: &[CallOutcome]) -> bool;

    /// Puts `call` to a person and waits for the ruling. `done` holds the outcomes of the
    /// batch's calls before it, in order, all of them final.
    fn ask<'a>(
        &'a mut self,
        call: &'a ToolCall,
        tool: &'a dyn Tool,
        need: ApprovalNeed,
        ctx: &'a ToolContext,
        done: &'a [CallOutcome],
    ) -> impl Future<Output = Ruling> + Send + 'a;
}

/// Everything a batch needs besides the calls.
pub struct BatchEnv<'a> {
    pub tools: &'a ToolRegistry,
    pub audience: Audience,
    pub approval: ApprovalMode,
    pub malformed: &'a BTreeMap<String, String>,
    /// Where calls that print as they run keep a copy of it (see [`Tool::keeps_spool`]).
    pub spool_dir: Option<&'a Path>,
}

/// Runs `calls` and returns one outcome per call, in call order.
pub async fn run_batch<A: Approver + Send>(
    calls: &[ToolCall],
    env: &BatchEnv<'_>,
    ctx: &mut ToolContext,
    cancel: &CancellationToken,
    approver: &mut A,
) -> Vec<CallOutcome> {
    let mut outcomes = Vec::with_capacity(calls.len());
    while outcomes.len() < calls.len() {
        let first = outcomes.len();
        if cancel.is_cancelled() {
            // Calls after a cancel never start, but each still gets its result.
            outcomes.extend(not_run(&calls[first..], NOT_STARTED));
            break;
        }
        // Plan just before running, against the working directory as it is now: an earlier
        // call of this batch may have moved it. A run of read-only calls goes together
        // (none of them can move it); anything else goes alone.
        let mut group = vec![plan(&calls[first], env, ctx, approver)];
        if let Plan::Ask(tool, need) = &group[0] {
            let (tool, need) = (*tool, need.clone());
            let call = &calls[first];
            // Nobody is asked about a call that cannot work: it gets the reason at once.
            group[0] = match tool.check(&call.input, ctx).await {
                Err(reason) => Plan::Answer(reason),
                Ok(()) => match approver.ask(call, tool, need, ctx, &outcomes).await {
                    Ruling::Run => Plan::Run(tool),
                    Ruling::Decline(result) => Plan::Answer(result),
                    Ruling::Halt { result, rest } => {
                        outcomes.extend(not_run(&calls[first..=first], &result));
                        outcomes.extend(not_run(&calls[first + 1..], &rest));
                        break;
                    }
                },
            };
        }
        while is_concurrent(&group[0]) && first + group.len() < calls.len() {
            let next = plan(&calls[first + group.len()], env, ctx, approver);
            if !is_concurrent(&next) {
                break;
            }
            group.push(next);
        }
        let starting: Vec<ToolCall> = calls[first..]
            .iter()
            .zip(&group)
            .filter(|(_, plan)| matches!(plan, Plan::Run(tool) if !tool.is_read_only()))
            .map(|(call, _)| call.clone())
            .collect();
        if !starting.is_empty() && !approver.starting(&starting, &outcomes) {
            outcomes.extend(not_run(&calls[first..], NOT_RECORDED));
            break;
        }
        let runs = calls[first..]
            .iter()
            .zip(&group)
            .map(|(call, plan)| execute(call, plan, ctx, env.spool_dir, cancel));
        for outcome in join_all(runs).await {
            for effect in &outcome.effects {
                if let ToolEffect::SetWorkingDirectory(path) = effect {
                    ctx.cwd = path.clone();
                }
            }
            outcomes.push(outcome);
        }
    }
    outcomes
}

/// Error outcomes saying `why` for calls that will not run.
fn not_run<'c>(calls: &'c [ToolCall], why: &'c str) -> impl Iterator<Item = CallOutcome> + 'c {
    calls.iter().map(move |call| CallOutcome {
        result: ToolResult::error(&call.id, why),
        effects: Vec::new(),
        spool: None,
        empty: false,
        took: None,
    })
}

fn is_concurrent(plan: &Plan<'_>) -> bool {
    match plan {
        Plan::Run(tool) => tool.is_read_only(),
        // A question waits for everything before it and holds up everything after it.
        Plan::Ask(..) => false,
        Plan::Answer(_) => true,
    }
}

fn plan<'a>(
    call: &ToolCall,
    env: &BatchEnv<'a>,
    ctx: &ToolContext,
    approver: &impl Approver,
) -> Plan<'a> {
    if let Some(problem) = env.malformed.get(&call.id) {
        return Plan::Answer(format!(
            "the arguments of this `{}` call were not valid JSON ({problem}); send the call \
             again with a JSON object that matches the tool's schema",
            call.name
        ));
    }
    let Some(tool) = env.tools.get(&call.name) else {
        let names: Vec<&str> = env
            .tools
            .visible(env.audience)
            .iter()
            .map(|t| t.name())
            .collect();
        return Plan::Answer(format!(
            "there is no tool named `{}`; the tools you can call are: {}",
            call.name,
            names.join(", ")
        ));
    };
    if tool.min_audience() > env.audience {
        return Plan::Answer(format!(
            "the tool `{}` is not available in this conversation",
            call.name
        ));
    }
    let need = tool.approval_need(&call.input, ctx);
    match tools::policy::decide(env.approval, &need) {
        Decision::Allow => Plan::Run(tool),
        Decision::Refuse(reason) => Plan::Answer(reason),
        Decision::Ask if approver.granted(call, &need) => Plan::Run(tool),
        Decision::Ask => Plan::Ask(tool, need),
    }
}

async fn execute(
    call: &ToolCall,
    plan: &Plan<'_>,
    ctx: &ToolContext,
    spool_dir: Option<&Path>,
    cancel: &CancellationToken,
) -> CallOutcome {
    let answer = |text: &str| CallOutcome {
        result: ToolResult::error(&call.id, text),
        effects: Vec::new(),
        spool: None,
        empty: false,
        took: None,
    };
    match plan {
        Plan::Answer(text) => answer(text),
        // Asked calls are ruled on before they execute; one never gets here.
        Plan::Ask(..) => answer("not run: no decision was made on this call"),
        Plan::Run(tool) => {
            let spool = spool_dir
                .filter(|_| tool.keeps_spool())
                .map(|dir| spool::file_for(dir, &call.id));
            let started = tokio::time::Instant::now();
            let output = match &spool {
                Some(path) => {
                    let ctx = ToolContext {
                        spool: Some(path.clone()),
                        ..ctx.clone()
                    };
                    guarded(*tool, call, &ctx, cancel).await
                }
                None => guarded(*tool, call, ctx, cancel).await,
            };
            CallOutcome {
                result: ToolResult {
                    tool_use_id: call.id.clone(),
                    content: output.content,
                    is_error: output.is_error,
                    images: output.images,
                },
                effects: output.effects,
                spool,
                empty: output.empty && !output.is_error,
                took: Some(started.elapsed()),
            }
        }
    }
}

/// Runs one call with the guards every tool gets: a panic becomes an error result, and a tool
/// that does not watch its own progress is stopped by a cancel or after `tool_timeout`. A
/// read-only one is dropped there (blocking work it started finishes on its own in the
/// background); one that can change things is told to stop and gets [`STOP_GRACE`] to answer,
/// since only its own answer says whether the change happened.
async fn guarded(
    tool: &dyn Tool,
    call: &ToolCall,
    ctx: &ToolContext,
    cancel: &CancellationToken,
) -> ToolOutput {
    let token = cancel.child_token();
    let mut run = std::pin::pin!(
        AssertUnwindSafe(tool.execute(call.input.clone(), ctx, token.clone())).catch_unwind()
    );
    let finished = if tool.watches_its_own_progress() {
        run.await
    } else {
        let limit = ctx.tool_timeout;
        let stopped = tokio::select! {
            finished = &mut run => return finished.unwrap_or_else(|panic| crashed(call, panic)),
            () = cancel.cancelled() => format!("`{}` was stopped: the turn was cancelled", call.name),
            () = tokio::time::sleep(limit), if !limit.is_zero() => format!(
                "`{}` was stopped after {} s without finishing (`tool_execution_timeout` in \
                 [session]); try a narrower call",
                call.name,
                limit.as_secs()
            ),
        };
        if tool.is_read_only() {
            return ToolOutput::error(stopped);
        }
        token.cancel();
        match tokio::time::timeout(STOP_GRACE, &mut run).await {
            Ok(finished) => finished,
            Err(_) => {
                return ToolOutput::error(format!(
                    "{stopped}. It did not say how far it got: it may have completed — check \
                     its effects before calling it again"
                ));
            }
        }
    };
    finished.unwrap_or_else(|panic| crashed(call, panic))
}

/// The result of a call whose tool panicked.
fn crashed(call: &ToolCall, panic: Box<dyn std::any::Any + Send>) -> ToolOutput {
    let what = panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "no message".to_owned());
    tracing::error!(tool = call.name, %what, "tool panicked");
    ToolOutput::error(format!(
        "the tool `{}` crashed ({what}); this is a bug in tern, not in your call. Work \
         around it with other tools",
        call.name
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::{ToolFuture, ToolOutput};
    use serde_json::{Value, json};

    /// A tool that changes things and takes `takes` to do it; it stops at a cancel only when
    /// `heeds_cancel`, and then says it changed nothing.
    struct Writer {
        takes: Duration,
        heeds_cancel: bool,
    }

    impl Tool for Writer {
        fn name(&self) -> &'static str {
            "writer"
        }
        fn description(&self) -> &str {
            "Writes."
        }
        fn input_schema(&self) -> Value {
            json!({"type": "object"})
        }
        fn min_audience(&self) -> Audience {
            Audience::Team
        }
        fn is_read_only(&self) -> bool {
            false
        }
        fn approval_need(&self, _: &Value, _: &ToolContext) -> ApprovalNeed {
            ApprovalNeed::None
        }
        fn execute<'a>(
            &'a self,
            _: Value,
            _: &'a ToolContext,
            cancel: CancellationToken,
        ) -> ToolFuture<'a> {
            Box::pin(async move {
                let heed = async {
                    if self.heeds_cancel {
                        cancel.cancelled().await;
                    } else {
                        std::future::pending::<()>().await;
                    }
                };
                tokio::select! {
                    () = tokio::time::sleep(self.takes) => ToolOutput::ok("written"),
                    () = heed => ToolOutput::error("stopped before writing anything"),
                }
            })
        }
    }

    fn ctx(timeout: Duration) -> ToolContext {
        ToolContext {
            project_dir: "/p".into(),
            cwd: "/p".into(),
            temp_dir: "/tmp".into(),
            readable_dirs: Vec::new(),
            tool_timeout: timeout,
            child_env: Default::default(),
            spool: None,
            agents: None,
            jobs: None,
            repo_maps: None,
        }
    }

    fn call() -> ToolCall {
        ToolCall {
            id: "c1".into(),
            name: "writer".into(),
            input: json!({}),
        }
    }

    async fn run(tool: Writer, cancel_after: Option<Duration>) -> ToolOutput {
        let cancel = CancellationToken::new();
        if let Some(after) = cancel_after {
            let cancel = cancel.clone();
            tokio::spawn(async move {
                tokio::time::sleep(after).await;
                cancel.cancel();
            });
        }
        guarded(&tool, &call(), &ctx(Duration::from_secs(90)), &cancel).await
    }

    #[tokio::test(start_paused = true)]
    async fn a_change_stopped_by_a_cancel_says_what_it_did() {
        let heeds = Writer {
            takes: Duration::from_secs(60),
            heeds_cancel: true,
        };
        let output = run(heeds, Some(Duration::from_secs(1))).await;
        assert_eq!(output.content, "stopped before writing anything");
    }

    #[tokio::test(start_paused = true)]
    async fn a_change_that_finishes_within_the_grace_is_reported_done() {
        let late = Writer {
            takes: Duration::from_secs(3),
            heeds_cancel: false,
        };
        let output = run(late, Some(Duration::from_secs(1))).await;
        assert_eq!(
            output.content, "written",
            "the cancel came too late to stop it"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_change_that_does_not_answer_is_never_called_not_done() {
        let deaf = Writer {
            takes: Duration::from_secs(600),
            heeds_cancel: false,
        };
        let output = run(deaf, Some(Duration::from_secs(1))).await;
        assert!(output.is_error);
        assert!(
            output
                .content
                .contains("it may have completed — check its effects"),
            "{}",
            output.content
        );
        assert!(!output.content.starts_with("not run"), "{}", output.content);
    }
}
