//! The only code that touches redb: the per-session journal, the session index, and the
//! database's lock and corruption handling.
//!
//! One process owns `<data>/tern.redb`. Every append is committed with immediate durability
//! before it returns, so an input the caller acknowledges after `append` survives a crash.

mod event;
mod meta;

pub use event::{JournalEvent, JournalRecord};
pub use meta::SessionMeta;
