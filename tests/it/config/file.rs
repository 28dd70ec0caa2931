//! The config file format: every section and key of a full file read back, and the forms
//! durations and sizes may take.

use super::{FILE, FULL, loaded, role};
use pretty_assertions::assert_eq;
use std::path::Path;
use std::time::Duration;
use tern::config::{
    MaintenanceMode, MaintenanceSettings, ProviderKind, ResetSettings, RetrySettings,
};

#[test]
fn full_file_round_trip() {
    let config = loaded(FULL, &[("WORK_ANTHROPIC_KEY", "sk-work")]);
    assert_eq!(config.source.as_deref(), Some(Path::new(FILE)));

    let work = config.provider("work").unwrap();
    assert_eq!(work.kind, ProviderKind::Anthropic);
    assert_eq!(work.api_key_env.as_deref(), Some("WORK_ANTHROPIC_KEY"));
    assert_eq!(work.api_key.as_deref(), Some("sk-work"));
    assert_eq!(
        (work.context_window, work.max_output_tokens),
        (200_000, 16_000)
    );
    let local = config.provider("local").unwrap();
    assert_eq!(local.kind, ProviderKind::OpenAi);
    assert_eq!(local.base_url, "http://127.0.0.1:8080/v1");
    assert_eq!(local.default_model, "qwen2.5-coder");
    // Unset limits take the file-profile defaults.
    assert_eq!(
        (local.context_window, local.max_output_tokens),
        (128_000, 8192)
    );
    assert_eq!(local.api_key_env, None);

    assert_eq!(config.default_provider().unwrap().name, "work");
    assert_eq!(role(config.conversation_model()), "work/claude-sonnet-4-5");
    assert_eq!(role(config.compaction_model()), "work/claude-haiku-4-5");
    let fallback = config
        .fallback_model()
        .unwrap()
        .map(|(p, m)| format!("{}/{m}", p.name));
    assert_eq!(fallback.as_deref(), Some("openai/gpt-4.1"));

    let s = &config.session;
    assert_eq!(s.prefill_timeout, Duration::from_secs(1800));
    assert_eq!(s.idle_timeout, Duration::ZERO);
    assert_eq!(s.compaction_threshold, 0.7);
    assert_eq!(s.snapshot_every, 25);
    assert_eq!(s.max_message_bytes, 131_072);
    assert_eq!(s.max_rounds, 40);
    assert_eq!(
        s.maintenance,
        MaintenanceSettings {
            mode: MaintenanceMode::Enforce,
            prune_after: Duration::from_secs(12 * 3600),
            max_entries: 300,
            max_disk_bytes: Some(2_000_000_000),
            high_water_bytes: Some(1_600_000_000),
        }
    );
    assert_eq!(
        s.reset,
        ResetSettings {
            daily: true,
            daily_at: jiff::civil::time(5, 30, 0, 0),
            idle: Some(Duration::from_secs(90 * 60)),
        }
    );
    assert_eq!(
        config.retry,
        RetrySettings {
            max_attempts: 5,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(30),
        }
    );
}

#[test]
fn durations_and_sizes_in_every_accepted_form() {
    let config = loaded(
        "[session]\nprefill_timeout = \"30m\"\nmax_message_bytes = \"64KiB\"\n\
         [session.maintenance]\nprune_after = \"90m\"\nmax_disk_bytes = 1000\n",
        &[],
    );
    assert_eq!(config.session.prefill_timeout, Duration::from_secs(1800));
    assert_eq!(config.session.max_message_bytes, 65_536);
    assert_eq!(
        config.session.maintenance.prune_after,
        Duration::from_secs(5400)
    );
    // The high-water mark defaults to 80% of the budget.
    assert_eq!(config.session.maintenance.high_water_bytes, Some(800));
}
