//! The gateway: where inputs from every front end and channel arrive, addressed by session
//! key, and are routed to the session that key talks to.

mod manager;

pub use manager::{DrainedSession, GatewayError, SendUserMessage, SessionManager, WarmedUp};
