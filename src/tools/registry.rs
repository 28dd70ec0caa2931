//! The set of tools a session offers, looked up by name and filtered by audience.
//!
//! Tools are kept sorted by name, so the list sent to the provider is the same from one request
//! to the next: it rides in the prompt's stable prefix, and a reordering would break the cache.

use super::Tool;
use super::agents::{CheckAgentRun, SpawnAgent};
use super::file_edit::FileEdit;
use super::file_read::FileRead;
use super::file_write::FileWrite;
use super::glob::Glob;
use super::grep::Grep;
use super::jobs::JobTool;
use super::repo_map::RepoMap;
use super::set_working_directory::SetWorkingDirectory;
use super::shell_execute::{ShellExecute, ShellLimits};
use super::symbols::Symbols;
use crate::domain::Audience;
use std::sync::Arc;

/// The tools a session whose window is small (the compact prompt) is not offered, so its
/// fixed prompt stays small: sending subagents, reading or stopping jobs (a job can still
/// be started, and its log read), and maps on demand (tier B holds one sized to the window).
pub const NOT_IN_SMALL_WINDOW: [&str; 5] = [
    "check_agent_run",
    "job_kill",
    "job_output",
    "repo_map",
    "spawn_agent",
];

/// Tools by name.
#[derive(Clone, Default)]
pub struct ToolRegistry {
    /// Sorted by name, names unique.
    tools: Vec<Arc<dyn Tool>>,
}

impl ToolRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Every built-in tool, with the default limits.
    pub fn builtin() -> Self {
        Self::builtin_with(ShellLimits::default())
    }

    /// Every built-in tool, commands held to `shell` (from `[tools]`).
    pub fn builtin_with(shell: ShellLimits) -> Self {
        let mut registry = Self::new();
        registry.register(Arc::new(FileRead));
        registry.register(Arc::new(FileWrite));
        registry.register(Arc::new(FileEdit));
        registry.register(Arc::new(ShellExecute::new(shell)));
        registry.register(Arc::new(Grep));
        registry.register(Arc::new(Glob));
        registry.register(Arc::new(RepoMap));
        registry.register(Arc::new(Symbols));
        registry.register(Arc::new(SetWorkingDirectory));
        registry.register(Arc::new(SpawnAgent));
        registry.register(Arc::new(CheckAgentRun));
        registry.register(Arc::new(JobTool::Output));
        registry.register(Arc::new(JobTool::Kill));
        registry
    }

    /// Adds a tool, replacing any tool of the same name.
    pub fn register(&mut self, tool: Arc<dyn Tool>) {
        match self.tools.binary_search_by(|t| t.name().cmp(tool.name())) {
            Ok(at) => self.tools[at] = tool,
            Err(at) => self.tools.insert(at, tool),
        }
    }

    /// The tool called `name`.
    pub fn get(&self, name: &str) -> Option<&dyn Tool> {
        self.get_shared(name).map(|tool| tool.as_ref())
    }

    /// The tool called `name`, shareable with a spawned task.
    pub fn get_shared(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.tools
            .binary_search_by(|t| t.name().cmp(name))
            .ok()
            .map(|at| &self.tools[at])
    }

    /// The tools `audience` may see and call, sorted by name.
    pub fn visible(&self, audience: Audience) -> Vec<&dyn Tool> {
        self.tools
            .iter()
            .filter(|tool| audience >= tool.min_audience())
            .map(|tool| tool.as_ref())
            .collect()
    }

    /// A registry of only the tools `names` names; an unknown name is an error that lists
    /// the tools there are.
    pub fn only(&self, names: &[String]) -> Result<Self, String> {
        let unknown: Vec<&str> = names
            .iter()
            .map(String::as_str)
            .filter(|name| self.get(name).is_none())
            .collect();
        if !unknown.is_empty() {
            return Err(format!(
                "no tool is called {}; the tools are {}",
                unknown.join(", "),
                self.names().join(", ")
            ));
        }
        let tools = self
            .tools
            .iter()
            .filter(|tool| names.iter().any(|name| name == tool.name()))
            .cloned()
            .collect();
        Ok(Self { tools })
    }

    /// This registry less the tools `names` names.
    pub fn without(&self, names: &[&str]) -> Self {
        let tools = self
            .tools
            .iter()
            .filter(|tool| !names.contains(&tool.name()))
            .cloned()
            .collect();
        Self { tools }
    }

    /// Every tool's name, sorted.
    pub fn names(&self) -> Vec<&'static str> {
        self.tools.iter().map(|tool| tool.name()).collect()
    }
}

impl std::fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.names()).finish()
    }
}
