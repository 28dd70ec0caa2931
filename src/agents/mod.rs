//! Subagent definitions: which kinds of subagent a session may send, each a markdown file with
//! a frontmatter (`name`, `description`, `tools`, `model`, `isolation`) and a body of
//! instructions. Built-in ones ship in `assets/agents/`; the person's own live in the config
//! folder's `agents/`, a project's in its `.tern/agents/`, and the nearest of those wins over
//! a definition of the same name.
//!
//! Plain data and file reads: the runs themselves are the session service's
//! (`gateway::runs`).

mod definition;

pub use definition::{Definition, Definitions, Isolation, ParseError};
