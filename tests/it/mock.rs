//! Tests for mock.
