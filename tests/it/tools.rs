//! Tests for tools.
