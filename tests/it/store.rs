//! Tests for store.
