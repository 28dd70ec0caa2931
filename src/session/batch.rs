//! Running the tool calls of one model response as a batch.
//!
//! Each call is planned (unknown tool, malformed arguments, audience, approval) just before
//! it runs; runs of consecutive read-only calls execute concurrently and every other call
//! runs alone, in order. A call a person must decide on is handed to the batch's
//! [`Approver`] once every call before it has run, and the batch waits for the ruling, with
//! no time limit: the tool's watchdog starts only when the call does. Results always come
//! back in call order, one per call, so the history stays paired whatever happened.

use crate::domain::{ApprovalNeed, Audience, ToolCall, ToolResult};
use crate::tools::{
    self, ApprovalMode, Decision, Tool, ToolContext, ToolEffect, ToolOutput, ToolRegistry,
};
use futures_util::FutureExt;
use futures_util::future::join_all;
use std::collections::BTreeMap;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use tokio_util::sync::CancellationToken;

/// The outcome of one call.
#[derive(Debug, Clone, PartialEq)]
pub struct CallOutcome {
    pub result: ToolResult,
    pub effects: Vec<ToolEffect>,
}

/// The result of a call that a cancel stopped before it began.
pub(super) const NOT_STARTED: &str = "not run: the turn was cancelled before this call started";

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
            let ruling = approver
                .ask(&calls[first], tool, need, ctx, &outcomes)
                .await;
            group[0] = match ruling {
                Ruling::Run => Plan::Run(tool),
                Ruling::Decline(result) => Plan::Answer(result),
                Ruling::Halt { result, rest } => {
                    outcomes.extend(not_run(&calls[first..=first], &result));
                    outcomes.extend(not_run(&calls[first + 1..], &rest));
                    break;
                }
            };
        }
        while is_concurrent(&group[0]) && first + group.len() < calls.len() {
            let next = plan(&calls[first + group.len()], env, ctx, approver);
            if !is_concurrent(&next) {
                break;
            }
            group.push(next);
        }
        let runs = calls[first..]
            .iter()
            .zip(&group)
            .map(|(call, plan)| execute(call, plan, ctx, cancel));
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
    cancel: &CancellationToken,
) -> CallOutcome {
    match plan {
        Plan::Answer(text) => CallOutcome {
            result: ToolResult::error(&call.id, text.clone()),
            effects: Vec::new(),
        },
        // Asked calls are ruled on before they execute; one never gets here.
        Plan::Ask(..) => CallOutcome {
            result: ToolResult::error(&call.id, "not run: no decision was made on this call"),
            effects: Vec::new(),
        },
        Plan::Run(tool) => {
            let output = guarded(*tool, call, ctx, cancel).await;
            CallOutcome {
                result: ToolResult {
                    tool_use_id: call.id.clone(),
                    content: output.content,
                    is_error: output.is_error,
                },
                effects: output.effects,
            }
        }
    }
}

/// Runs one call with the guards every tool gets: a panic becomes an error result, and a tool
/// that does not watch its own progress is stopped by a cancel or after `tool_timeout`
/// (dropping its future; blocking work it started finishes on its own in the background).
async fn guarded(
    tool: &dyn Tool,
    call: &ToolCall,
    ctx: &ToolContext,
    cancel: &CancellationToken,
) -> ToolOutput {
    let run = AssertUnwindSafe(tool.execute(call.input.clone(), ctx, cancel.child_token()))
        .catch_unwind();
    let finished = if tool.watches_its_own_progress() {
        run.await
    } else {
        let limit = ctx.tool_timeout;
        tokio::select! {
            finished = run => finished,
            () = cancel.cancelled() => {
                return ToolOutput::error(format!("`{}` was stopped: the turn was cancelled", call.name));
            }
            () = tokio::time::sleep(limit), if !limit.is_zero() => {
                return ToolOutput::error(format!(
                    "`{}` was stopped after {} s without finishing (`tool_execution_timeout` in \
                     [session]); try a narrower call",
                    call.name,
                    limit.as_secs()
                ));
            }
        }
    };
    finished.unwrap_or_else(|panic| {
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
    })
}
