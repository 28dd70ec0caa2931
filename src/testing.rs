//! What the unit tests share.

use proptest::test_runner::{Config as ProptestConfig, RngSeed};

/// The settings of every random-case test: the same cases on every run, so the suite passes
/// or fails alike each time, and no failure file; a failure found is turned into a named
/// unit test instead.
pub fn fixed_cases() -> ProptestConfig {
    ProptestConfig {
        failure_persistence: None,
        rng_seed: RngSeed::Fixed(0x7465_726e),
        ..ProptestConfig::default()
    }
}

/// `events` as journal records numbered from 1, as a journal holds them.
pub fn numbered(events: Vec<crate::store::JournalEvent>) -> Vec<crate::store::JournalRecord> {
    events
        .into_iter()
        .zip(1..)
        .map(|(event, seq)| crate::store::JournalRecord {
            seq,
            at_ms: 0,
            event,
        })
        .collect()
}
