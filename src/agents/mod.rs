//! Subagent definitions: which kinds of subagent a session may send, each a markdown file with
//! a frontmatter (`name`, `description`, `tools`, `model`, `isolation`) and a body of
//! instructions. Built-in ones ship in `assets/agents/`; the person's own live in the config
//! folder's `agents/`, a project's in its `.tern/agents/`, and the nearest of those wins over
//! a definition of the same name.
//!
//! Also the git worktree a run with `isolation: "worktree"` works in (`worktree`). The runs
//! themselves are the session service's (`gateway::runs`).

mod definition;
pub mod worktree;

pub use definition::{Definition, Definitions, Isolation, ParseError};
pub use worktree::{Change, Worktree};
