//! Tests for cli.
