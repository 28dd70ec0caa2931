//! The inputs a prompt is built from that live outside the session itself: identity and
//! project instruction files, the time, the shell, and the git working context. This module
//! does the IO that gathers them and hands plain data to the prompt layer, which stays pure.

mod capped;
pub mod git;
mod git_share;
mod identity;
mod in_flight;
mod instructions;
pub mod repo_map;
mod status_split;
mod working;

pub use capped::{MAX_PROMPT_FILE_BYTES, PromptFile, read_prompt_file};
pub use git::{
    AheadBehind, Branch, GIT_BUDGET, GitContext, GitSnapshot, GitUnavailable, Head, StatusCounts,
    Upstream, snapshot, snapshot_on, working_git, working_git_with,
};
pub use git_share::shared_git_with;
pub use identity::{IDENTITY_DIR, IdentityFiles};
pub use instructions::{INSTRUCTION_FILES, ProjectInstructions, project_instructions};
pub use working::{CurrentTime, DurableContext, ShellInfo, WorkingContext};
