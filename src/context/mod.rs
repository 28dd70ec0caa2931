//! The inputs a prompt is built from that live outside the session itself: identity and
//! project instruction files, git working context, recent files. This module does the IO that
//! gathers them and hands plain data to the prompt layer, which stays pure. Only the git working
//! context exists so far.

pub mod git;
mod status_split;

pub use git::{
    AheadBehind, Branch, GIT_BUDGET, GitContext, GitSnapshot, GitUnavailable, Head, StatusCounts,
    Upstream, snapshot, working_git, working_git_with,
};
