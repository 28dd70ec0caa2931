//! Tests for session.
