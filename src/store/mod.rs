//! The only code that touches redb: the per-session journal, the session index, and the
//! database's lock and corruption handling.
//!
//! One process owns `<data>/tern.redb`. Every append is committed with immediate durability
//! before it returns, so an input the caller acknowledges after `append` survives a crash. A
//! file that is damaged or not a tern database is refused and left untouched; a database held
//! by another process is reported with that process named (see `owner`). After an I/O failure
//! the store reopens the database and retries once, so a full disk stops writes only until
//! space is freed (see `db`).

mod activity;
mod append;
mod clean;
mod codec;
mod db;
mod deleted;
mod error;
mod event;
mod frame;
mod keys;
mod lazy;
mod logged;
mod maintenance;
mod meta;
mod migrate;
mod owner;
mod probe;
#[cfg(test)]
mod reopen_tests;
mod repair;
mod schema;
mod search;
#[cfg(test)]
mod search_tests;
mod snapshot;
mod summary;
#[cfg(test)]
mod tests;
mod totals;
mod wal;
#[cfg(test)]
mod wal_tests;

pub use activity::{ListFilter, PageCursor, RecentPage};
pub use append::Unsynced;
pub use db::{MIN_PREFIX_CHARS, Observer, Store, StoreChange};
pub use error::StoreError;
pub use event::{JournalEvent, JournalRecord};
pub use maintenance::{Orphan, Plan, Reason, Removal, StoredSession, plan};
pub use meta::{Lifecycle, Overrides, ParentRun, Permissions, SessionMeta};
pub use owner::LockOwner;
pub use repair::{
    Health, HealthState, Limits, Repair, RepairOptions, Salvage, SessionSalvage, Source, Task,
    Worker, check, lost_with_folders, repair, serve, unfinished_repair,
};
pub use search::{SEARCH_INPUT_CHARS, SearchEntry, SearchSink};
pub use snapshot::Snapshot;
pub use summary::title_from_input;
pub use totals::Totals;
