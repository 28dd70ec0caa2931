//! The integration test binary: every test drives tern through its public interface with
//! real parts (a redb file in a temp dir, a provider on 127.0.0.1, the real binary).

#[path = "../support/mod.rs"]
mod support;

mod channels;
mod cli;
mod config;
mod conformance;
mod context;
mod corruption;
mod crash;
mod git_reads;
mod local_llm;
mod mock;
mod prompt;
mod prompt_size;
mod repair;
mod session;
mod store;
mod tools;
mod tui;
