//! The session: one conversation, its phases, its turn loop and its journal.
//!
//! A [`SessionHandle`] is the cloneable front; a private actor task owns the state and runs
//! one turn at a time. The decisions that need no IO live in pure modules ([`phase`],
//! [`state`], [`approvals`], the prompt module); the actor and the turn task perform the
//! effects: journal appends, model calls, tool batches and the questions put to a person.

mod actor;
pub mod approvals;
mod arguments;
mod asking;
pub mod background;
mod batch;
mod calls;
mod compacting;
pub mod compaction;
mod deps;
mod envelope;
mod events;
mod fit;
mod handle;
mod input;
mod joining;
mod layers;
mod log;
pub mod loop_guard;
pub mod phase;
mod redact;
pub mod snapshot;
mod spool;
pub mod state;
mod titling;
mod turn;

pub use crate::domain::{Answer, ApprovalDetail, Grant};
pub use deps::{AgentSlot, SessionDeps};
pub use envelope::{Rerooted, SessionDirs, SubagentDirs};
pub use events::{
    Dropped, JournalHead, OutputFilter, SUBSCRIBER_BACKLOG, SessionEvent, Stamped, Subscription,
};
pub use handle::{ChildStart, DrainedTurn, KeepAwake, SessionHandle};
pub use input::{InputText, SessionError, UserInput};
pub use layers::{map_focus, preview};
pub use phase::{IllegalTransition, Phase};
pub use redact::Redactor;
pub use state::SessionState;

/// The folder of a session's log folder its background jobs' logs go to.
pub const JOB_LOGS: &str = "jobs";
