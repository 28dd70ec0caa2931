//! Tests for config.
