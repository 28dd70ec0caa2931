//! The gateway: where inputs from every front end and channel arrive, addressed by session
//! key, and are routed to the session that key talks to. It also owns what concerns every
//! session at once: resets, drain and restart, lifecycle events and maintenance.

mod asked;
pub mod catalog;
mod drain;
pub mod events;
pub mod feed;
mod local;
pub mod maintenance;
mod manager;
pub mod map;
pub mod remote;
pub mod reset;
mod runs;
mod serve;
pub mod service;
pub mod wire;

pub use drain::{DRAIN_BOUND, DrainedSession, WarmedUp};
pub use events::{LifecycleBus, LifecycleEvent};
pub use feed::{Feed, FeedItem};
pub use local::SHELL_TIMEOUT;
pub use manager::{
    Clock, Delivered, GatewayError, ModelShown, Models, SendUserMessage, SessionManager,
};
pub use map::MapShown;
pub use reset::ResetReason;
pub use runs::{RunNews, Runs, follow_run, has_ended};
pub use serve::socket_path;
pub use service::{Preview, Reached, ServiceError, SessionService, ShellRun};
