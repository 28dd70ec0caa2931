//! Pure functions from session state to a provider request, in the layers of the prompt:
//! tier A, the persisted system prompt ([`system`]); tier B, the static context
//! ([`static_context`]); tier C, the history, sent verbatim (with every tool call paired,
//! [`pair_tool_calls`]); tier D, the per-turn nudge ([`nudge`]). Stable material comes first
//! so a provider can reuse the cached prefix; the request puts cache breakpoints at the end
//! of tier A, tier B and the stable history ([`build_request`]).
//!
//! Nothing here does IO: `context/` gathers the inputs and the session journals the results,
//! so the same inputs always yield byte-identical requests.

mod history;
mod inspect;
mod nudge;
mod request;
mod static_context;
mod system;

pub use history::pair_tool_calls;
pub use inspect::describe_request;
pub use nudge::{NUDGE_OPENING, NudgeSources, TurnNotes, history_for, nudge, quote_lookalikes};
pub use request::{RequestFrame, build_request};
pub use static_context::{IndexEntry, MEMORY_OFF, SessionPaths, StaticSources, static_context};
pub use system::{SystemSources, agents_core, system_prompt};

use crate::domain::Audience;
use crate::llm::ToolSpec;
use crate::tools::ToolRegistry;

/// The schemas of the tools `audience` may call, in the registry's stable order.
pub fn tool_specs(registry: &ToolRegistry, audience: Audience) -> Vec<ToolSpec> {
    registry
        .visible(audience)
        .into_iter()
        .map(|tool| ToolSpec {
            name: tool.name().to_owned(),
            description: tool.description().to_owned(),
            input_schema: tool.input_schema(),
        })
        .collect()
}

/// The one-line-per-tool index of the tools `audience` may call, for tier B.
pub fn tool_index(registry: &ToolRegistry, audience: Audience) -> Vec<IndexEntry> {
    registry
        .visible(audience)
        .into_iter()
        .map(|tool| IndexEntry {
            name: tool.name().to_owned(),
            summary: tool.summary().to_owned(),
        })
        .collect()
}

/// Asserts that each of `parts` occurs in `text`, in this order.
#[cfg(test)]
fn assert_in_order(text: &str, parts: &[&str]) {
    let mut from = 0;
    for part in parts {
        match text[from..].find(part) {
            Some(at) => from += at + part.len(),
            None => panic!("{part:?} missing, or out of order, in\n{text}"),
        }
    }
}
