//! What every session of a process shares: the store, the model client, the tools and the
//! settings. Kept apart from the actor so that the turn, its layers and compaction can use it
//! without depending on the actor that runs them.

use super::redact::Redactor;
use crate::config::SessionSettings;
use crate::llm::ModelClient;
use crate::store::{Overrides, Store};
use crate::tools::agents::AgentRuns;
use crate::tools::jobs::Jobs;
use crate::tools::mcp::McpHub;
use crate::tools::{ApprovalMode, ChildEnv, ToolRegistry};
use std::path::PathBuf;
use std::sync::{Arc, OnceLock, Weak};

/// What every session of this process shares; a session given settings of its own (an
/// approval mode) holds a changed copy.
#[derive(Clone)]
pub struct SessionDeps {
    pub store: Arc<Store>,
    pub client: ModelClient,
    pub tools: ToolRegistry,
    pub settings: SessionSettings,
    pub approval: ApprovalMode,
    /// Where session folders live (`<data>/sessions/<id>/`).
    pub data_dir: PathBuf,
    /// The user's identity files (`<config>/identity/`): SOUL.md, AGENTS.md, TOOLING.md.
    pub identity_dir: PathBuf,
    /// Writes compaction notes; `None` uses `client`.
    pub notes_client: Option<ModelClient>,
    /// The provider and model asked for on the command line, recorded with new sessions.
    pub overrides: Overrides,
    /// Keeps secrets out of the session logs.
    pub redactor: Arc<Redactor>,
    /// Builds the environment of the commands the tools run.
    pub child_env: Arc<ChildEnv>,
    /// The subagent runs of the session service, once it runs them: shared by every copy of
    /// these dependencies.
    pub agents: AgentSlot,
    /// The background jobs of every session of this process.
    pub jobs: Arc<Jobs>,
    /// The MCP servers of this process, whose tools join a session's own at each turn.
    pub mcp: Option<Arc<McpHub>>,
}

impl SessionDeps {
    /// The person's own subagent definitions: `agents/` in the config folder (beside
    /// `identity/`).
    pub fn agents_dir(&self) -> PathBuf {
        match self.identity_dir.parent() {
            Some(config) => config.join("agents"),
            None => self.identity_dir.join("agents"),
        }
    }
}

/// Where the session service puts its subagent runs for the sessions' tools to reach.
pub type AgentSlot = Arc<OnceLock<Weak<dyn AgentRuns>>>;
