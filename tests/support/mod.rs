//! Shared test support: the mock provider and helpers to run tern in isolation.
#![allow(dead_code)]
