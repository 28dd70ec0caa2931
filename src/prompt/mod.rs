//! Pure functions from session state to a provider request, in the layers of the prompt:
//! tier A, the persisted system prompt ([`system`]); tier B, the static context
//! ([`static_context`]); tier C, the history, sent verbatim (with every tool call paired,
//! [`pair_tool_calls`]); tier D, the per-turn nudge ([`nudge`]). Stable material comes first
//! so a provider can reuse the cached prefix; the request puts cache breakpoints at the end
//! of tier A, tier B and the stable history ([`build_request`]). Every layer comes in a full
//! and a compact variant; the model's context window decides which ([`PromptSize`]).
//!
//! Nothing here does IO: `context/` gathers the inputs and the session journals the results,
//! so the same inputs always yield byte-identical requests.

mod history;
mod inspect;
mod nudge;
mod request;
mod size;
mod static_context;
mod system;

pub use history::pair_tool_calls;
pub use inspect::describe_request;
pub use nudge::{NUDGE_OPENING, NudgeSources, TurnNotes, history_for, nudge, quote_lookalikes};
pub use request::{RequestFrame, build_request};
pub use size::{COMPACT_WINDOW, PromptSize};
pub use static_context::{
    IndexEntry, MEMORY_OFF, SessionPaths, StaticSources, static_context, tools_in, tools_section,
};
pub use system::{SystemSources, agents_core, subagent_prompt, system_prompt};

use crate::domain::Audience;
use crate::domain::ToolSpec;
use crate::tools::ToolRegistry;

/// The schemas of the tools `audience` may call, in the registry's stable order. The compact
/// variant has the same tools and the same arguments, described by the tool's one-line
/// summary and a schema without the arguments' descriptions: the names, types, limits and
/// choices stay, the guidance goes.
pub fn tool_specs(registry: &ToolRegistry, audience: Audience, size: PromptSize) -> Vec<ToolSpec> {
    registry
        .visible(audience)
        .into_iter()
        .map(|tool| match size {
            PromptSize::Full => ToolSpec {
                name: tool.name().to_owned(),
                description: tool.description().to_owned(),
                input_schema: tool.input_schema(),
            },
            PromptSize::Compact { .. } => ToolSpec {
                name: tool.name().to_owned(),
                description: tool.summary().to_owned(),
                input_schema: without_descriptions(tool.input_schema()),
            },
        })
        .collect()
}

/// `schema` with the `description` of each argument left out, at any depth, and without
/// `additionalProperties` (the tools check their arguments themselves).
fn without_descriptions(mut schema: serde_json::Value) -> serde_json::Value {
    if let Some(fields) = schema.as_object_mut() {
        fields.remove("additionalProperties");
    }
    if let Some(properties) = schema
        .get_mut("properties")
        .and_then(serde_json::Value::as_object_mut)
    {
        for property in properties.values_mut() {
            if let Some(fields) = property.as_object_mut() {
                fields.remove("description");
            }
            *property = without_descriptions(std::mem::take(property));
        }
    }
    if let Some(items) = schema.get_mut("items") {
        *items = without_descriptions(std::mem::take(items));
    }
    schema
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn compact_schemas_keep_names_types_and_limits_but_no_descriptions() {
        let schema = json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "File to read."},
                "mode": {"type": "string", "enum": ["a", "b"], "description": "Which."},
                "list": {"type": "array", "items": {"type": "object", "properties": {
                    "n": {"type": "integer", "minimum": 1, "description": "deep"}
                }}}
            },
            "required": ["path"],
            "additionalProperties": false
        });
        assert_eq!(
            without_descriptions(schema),
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string"},
                    "mode": {"type": "string", "enum": ["a", "b"]},
                    "list": {"type": "array", "items": {"type": "object", "properties": {
                        "n": {"type": "integer", "minimum": 1}
                    }}}
                },
                "required": ["path"]
            })
        );
    }

    #[test]
    fn compact_tools_are_the_same_tools_with_the_same_arguments() {
        let registry = ToolRegistry::builtin();
        let full = tool_specs(&registry, Audience::Personal, PromptSize::Full);
        let compact = tool_specs(&registry, Audience::Personal, PromptSize::for_window(4096));
        assert_eq!(full.len(), compact.len());
        for (full, compact) in full.iter().zip(&compact) {
            assert_eq!(full.name, compact.name);
            let names = |spec: &ToolSpec| spec.input_schema["properties"].clone();
            let keys = |spec: &ToolSpec| {
                let properties = names(spec);
                let object = properties.as_object().cloned().unwrap_or_default();
                object.keys().cloned().collect::<Vec<_>>()
            };
            assert_eq!(keys(full), keys(compact), "{}", full.name);
            assert_eq!(
                full.input_schema["required"], compact.input_schema["required"],
                "{}",
                full.name
            );
            assert!(
                compact.description.len() < full.description.len(),
                "{}",
                full.name
            );
        }
    }
}
