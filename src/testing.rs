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
