//! The inputs a prompt is built from that live outside the session itself: identity and
//! project instruction files, git working context, recent files. This module does the IO that
//! gathers them and hands plain data to the prompt layer, which stays pure. So far: the
//! project's instruction file and the git working context.

pub mod git;
mod instructions;
mod status_split;

pub use git::{
    AheadBehind, Branch, GIT_BUDGET, GitContext, GitSnapshot, GitUnavailable, Head, StatusCounts,
    Upstream, snapshot, working_git, working_git_with,
};
pub use instructions::{
    INSTRUCTION_FILES, MAX_INSTRUCTION_BYTES, ProjectInstructions, project_instructions,
};
