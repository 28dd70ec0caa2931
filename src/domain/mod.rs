//! Plain data shared by every layer: identifiers, messages and their content blocks, tool
//! calls and results, approvals, token usage, audiences, senders, error categories and why
//! turns end; and the shapes of secrets (`secret_shapes`), which more than one layer checks.
//!
//! Nothing here does IO or imports a storage, network or terminal crate; every other module
//! may depend on `domain`, and `domain` depends on none of them.

mod agent;
mod approval;
pub mod call_text;
pub mod cut;
mod error;
mod ids;
mod job;
mod message;
mod request;
pub mod secret_shapes;
mod sender;
mod stop;
mod usage;

pub use agent::{RunId, RunState, SubagentRole};
pub use approval::{Answer, ApprovalDetail, ApprovalMode, ApprovalNeed, Grant, NeedKind};
pub use error::ErrorCategory;
pub use ids::{InvalidSessionKey, SessionId, SessionKey};
pub use job::JobRecord;
pub use message::{Attachment, ContentBlock, Message, Role, ToolCall, ToolResult, text_of};
pub use request::{ChatRequest, ToolSpec};
pub use sender::{Audience, InputKind, Sender};
pub use stop::{GuardCause, TurnStop, Watchdog};
pub use usage::{BYTES_PER_TOKEN, Usage, estimate_tokens};
