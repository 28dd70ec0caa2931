//! Tests for conformance.
