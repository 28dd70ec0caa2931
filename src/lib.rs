//! tern: a terminal-first AI coding assistant.
//!
//! The library holds everything; `main.rs` is a thin CLI over it. See ARCHITECTURE.md for the
//! codemap and the invariants that keep the layers apart.

pub mod agents;
pub mod channels;
pub mod cli;
pub mod config;
pub mod context;
pub mod domain;
pub mod gateway;
pub mod llm;
pub mod priority;
pub mod prompt;
pub mod session;
pub mod store;
#[cfg(test)]
mod testing;
pub mod tls;
pub mod tools;
pub mod tui;
