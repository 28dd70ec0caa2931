//! What the benchmarks that run sessions share: their dependencies against the mock
//! provider, and quantiles.

use crate::support::{MockProvider, TernHome};
use std::sync::Arc;
use std::time::Duration;
use tern::config::{
    MaintenanceSettings, ProviderKind, ProviderProfile, RetrySettings, SessionSettings,
};
use tern::llm::{self, ModelClient, ModelRoute, RetryPolicy};
use tern::session::SessionDeps;
use tern::store::Store;
use tern::tools::{ApprovalMode, ToolRegistry};

/// The `q` quantile of sorted `durations`, in microseconds.
pub fn quantile_us(sorted: &[Duration], q: f64) -> f64 {
    let index = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[index].as_secs_f64() * 1e6
}

/// The Anthropic-format profile of `mock`, with a context window of `window` tokens.
pub fn mock_profile(mock: &MockProvider, window: u64) -> ProviderProfile {
    ProviderProfile {
        name: "mock".into(),
        kind: ProviderKind::Anthropic,
        base_url: mock.base_url(),
        api_key_env: None,
        api_key: Some("bench".into()),
        default_model: "primary-model".into(),
        context_window: window,
        max_output_tokens: 1000,
        written: Default::default(),
        images: false,
    }
}

/// Session dependencies over a store in `home`, calling `mock`, under `maintenance` limits.
pub fn deps(
    home: &TernHome,
    mock: &MockProvider,
    maintenance: MaintenanceSettings,
) -> Arc<SessionDeps> {
    let profile = mock_profile(mock, 200_000);
    let settings = SessionSettings {
        maintenance,
        ..SessionSettings::default()
    };
    let policy = RetryPolicy::new(&RetrySettings::default(), &settings);
    let route = ModelRoute::new(llm::provider_for(&profile), "primary-model", 1000, 200_000);
    Arc::new(SessionDeps {
        store: Arc::new(Store::open(&home.home().join("data/tern.redb")).expect("a store")),
        client: ModelClient::new(route, None, policy),
        tools: ToolRegistry::builtin(),
        settings,
        approval: ApprovalMode::Never,
        data_dir: home.home().join("data"),
        identity_dir: home.home().join("identity"),
        notes_client: None,
        overrides: Default::default(),
        redactor: Default::default(),
        child_env: Default::default(),
        agents: Default::default(),
        jobs: Default::default(),
        mcp: None,
    })
}
