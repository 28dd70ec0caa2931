//! Fake platforms on 127.0.0.1, written from the platforms' documented protocols: what the
//! channel tests and `benches/channels.rs` run the real `tern serve` against.
#![allow(dead_code)] // Shared by the tests and the bench; not each uses all of it.

pub mod discord;
pub mod mattermost;
pub mod server;
pub mod slack;
