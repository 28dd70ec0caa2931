//! Running the tool calls of one model response as a batch.
//!
//! Each call is planned (unknown tool, malformed arguments, audience, approval) just before
//! it runs; runs of consecutive read-only calls execute concurrently and every other call
//! runs alone, in order. Results always come back in call order, one per call, so
//! the history stays paired whatever happened.

use crate::domain::{Audience, ToolCall, ToolResult};
use crate::tools::{self, ApprovalMode, Decision, Tool, ToolContext, ToolEffect, ToolRegistry};
use futures_util::future::join_all;
use std::collections::BTreeMap;
use tokio_util::sync::CancellationToken;

/// The outcome of one call.
#[derive(Debug, Clone, PartialEq)]
pub struct CallOutcome {
    pub result: ToolResult,
    pub effects: Vec<ToolEffect>,
}

/// What the batch will do with one call.
enum Plan<'a> {
    Run(&'a dyn Tool),
    Answer(String),
}

/// Everything a batch needs besides the calls.
pub struct BatchEnv<'a> {
    pub tools: &'a ToolRegistry,
    pub audience: Audience,
    pub approval: ApprovalMode,
    pub malformed: &'a BTreeMap<String, String>,
}

/// Runs `calls` and returns one outcome per call, in call order.
pub async fn run_batch(
    calls: &[ToolCall],
    env: &BatchEnv<'_>,
    ctx: &mut ToolContext,
    cancel: &CancellationToken,
) -> Vec<CallOutcome> {
    let mut outcomes: Vec<Option<CallOutcome>> = vec![None; calls.len()];
    let mut i = 0;
    while i < calls.len() {
        // Plan just before running, against the working directory as it is now: an earlier
        // call of this batch may have moved it. A run of read-only calls goes together
        // (none of them can move it); anything else goes alone.
        let mut group = vec![plan(&calls[i], env, ctx)];
        if is_concurrent(&group[0]) {
            while i + group.len() < calls.len() {
                let next = plan(&calls[i + group.len()], env, ctx);
                if !is_concurrent(&next) {
                    break;
                }
                group.push(next);
            }
        }
        let end = i + group.len();
        let runs = (i..end)
            .zip(&group)
            .map(|(k, plan)| execute(&calls[k], plan, ctx, cancel));
        let done = join_all(runs).await;
        for (k, outcome) in (i..end).zip(done) {
            for effect in &outcome.effects {
                if let ToolEffect::SetWorkingDirectory(path) = effect {
                    ctx.cwd = path.clone();
                }
            }
            outcomes[k] = Some(outcome);
        }
        i = end;
    }
    outcomes
        .into_iter()
        .zip(calls)
        .map(|(outcome, call)| {
            outcome.unwrap_or_else(|| CallOutcome {
                result: ToolResult::error(&call.id, "not run"),
                effects: Vec::new(),
            })
        })
        .collect()
}

fn is_concurrent(plan: &Plan<'_>) -> bool {
    match plan {
        Plan::Run(tool) => tool.is_read_only(),
        Plan::Answer(_) => true,
    }
}

fn plan<'a>(call: &ToolCall, env: &BatchEnv<'a>, ctx: &ToolContext) -> Plan<'a> {
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
        Plan::Run(tool) => {
            let output = tool
                .execute(call.input.clone(), ctx, cancel.child_token())
                .await;
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
