//! Config loading through the public API: defaults, providers from the environment, the full
//! file format, and the message of every class of error (file, line, key, what to do).

use std::path::{Path, PathBuf};
use std::time::Duration;

use pretty_assertions::assert_eq;
use tern::config::{
    self, Config, ConfigError, Environment, MaintenanceMode, MaintenanceSettings, ModelRef, Paths,
    ProviderKind, RetrySettings, SessionSettings,
};

/// The path error messages must name; nothing is read from it.
const FILE: &str = "/home/dev/.config/tern/config.toml";

fn env(pairs: &[(&str, &str)]) -> Environment {
    Environment::from_pairs(pairs.iter().copied())
}

fn load(text: &str, pairs: &[(&str, &str)]) -> Result<Config, ConfigError> {
    config::load_from_str(text, Path::new(FILE), &env(pairs))
}

fn loaded(text: &str, pairs: &[(&str, &str)]) -> Config {
    match load(text, pairs) {
        Ok(config) => config,
        Err(err) => panic!("config should load, got: {err}"),
    }
}

/// Loads `text` expecting an error at `line` about `key`, whose message also contains every
/// fragment.
#[track_caller]
fn check_error(text: &str, line: usize, key: &str, fragments: &[&str]) {
    let err = match load(text, &[]) {
        Ok(_) => panic!("config should be rejected:\n{text}"),
        Err(err) => err,
    };
    let message = err.to_string();
    match &err {
        ConfigError::Invalid {
            line: l,
            key: k,
            path,
            ..
        } => {
            assert_eq!(
                (*l, k.as_str(), path.as_path()),
                (line, key, Path::new(FILE)),
                "{message}"
            );
        }
        other => panic!("expected ConfigError::Invalid, got {other:?}"),
    }
    assert!(message.contains(FILE), "no file path in: {message}");
    assert!(
        message.contains(&format!("line {line},")),
        "no line in: {message}"
    );
    assert!(
        message.contains(&format!("`{key}`")),
        "no key in: {message}"
    );
    for fragment in fragments {
        assert!(
            message.contains(fragment),
            "`{fragment}` missing from: {message}"
        );
    }
}

/// The profile and model a role resolves to, as `profile/model`.
fn role(resolved: Result<(&config::ProviderProfile, String), ConfigError>) -> String {
    match resolved {
        Ok((profile, model)) => format!("{}/{model}", profile.name),
        Err(err) => format!("error: {err}"),
    }
}

#[test]
fn no_file_and_no_environment_gives_defaults_and_no_provider() {
    let config = loaded("", &[]);
    assert_eq!(config.session, SessionSettings::default());
    assert_eq!(config.retry, RetrySettings::default());
    assert_eq!(config.models.default_provider, None);
    let names: Vec<_> = config.providers.keys().map(String::as_str).collect();
    assert_eq!(names, ["anthropic", "ollama", "openai"]);
    assert!(matches!(
        config.default_provider(),
        Err(ConfigError::NoProvider { .. })
    ));
}

#[test]
fn no_provider_message_explains_every_way_to_configure_one() {
    let err = match loaded("", &[]).default_provider() {
        Err(err) => err.to_string(),
        Ok(p) => panic!("unexpected provider {}", p.name),
    };
    for fragment in [
        "ANTHROPIC_API_KEY",
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "OpenRouter",
        "llama.cpp",
        "OLLAMA_HOST",
        FILE,
        "[providers.local]",
        "kind = \"openai\"",
        "model = ",
    ] {
        assert!(err.contains(fragment), "`{fragment}` missing from: {err}");
    }
}

#[test]
fn anthropic_key_in_the_environment_is_enough() {
    let config = loaded("", &[("ANTHROPIC_API_KEY", "sk-ant-test")]);
    let profile = config.default_provider().unwrap();
    assert_eq!(profile.name, "anthropic");
    assert_eq!(profile.kind, ProviderKind::Anthropic);
    assert_eq!(profile.base_url, "https://api.anthropic.com");
    assert_eq!(profile.api_key.as_deref(), Some("sk-ant-test"));
    assert_eq!(
        (profile.context_window, profile.max_output_tokens),
        (200_000, 32_000)
    );
    assert_eq!(
        role(config.conversation_model()),
        "anthropic/claude-sonnet-4-5"
    );
    assert!(profile.require_key().is_ok());
}

#[test]
fn anthropic_wins_over_openai_and_ollama() {
    let config = loaded(
        "",
        &[
            ("OLLAMA_HOST", "box"),
            ("OPENAI_API_KEY", "k"),
            ("ANTHROPIC_API_KEY", "k"),
        ],
    );
    assert_eq!(config.default_provider().unwrap().name, "anthropic");
    let config = loaded("", &[("OLLAMA_HOST", "box"), ("OPENAI_API_KEY", "k")]);
    assert_eq!(config.default_provider().unwrap().name, "openai");
}

#[test]
fn openai_with_a_compatible_base_url() {
    let config = loaded(
        "",
        &[
            ("OPENAI_API_KEY", "sk-or"),
            ("OPENAI_BASE_URL", "https://openrouter.ai/api/v1/"),
        ],
    );
    let profile = config.default_provider().unwrap();
    assert_eq!(profile.name, "openai");
    assert_eq!(profile.base_url, "https://openrouter.ai/api/v1");
    assert_eq!(profile.default_model, "gpt-4.1");
    assert_eq!(
        (profile.context_window, profile.max_output_tokens),
        (1_047_576, 32_768)
    );
}

#[test]
fn openai_on_this_machine_needs_no_key() {
    let config = loaded("", &[("OPENAI_BASE_URL", "http://127.0.0.1:8080/v1")]);
    let profile = config.default_provider().unwrap();
    assert_eq!(profile.name, "openai");
    assert!(!profile.needs_key());
    assert!(profile.require_key().is_ok());
}

#[test]
fn ollama_host_without_scheme() {
    let config = loaded("", &[("OLLAMA_HOST", "gpu-box:11500")]);
    let profile = config.default_provider().unwrap();
    assert_eq!(profile.name, "ollama");
    assert_eq!(profile.kind, ProviderKind::Ollama);
    assert_eq!(profile.base_url, "http://gpu-box:11500");
    assert_eq!(profile.api_key_env, None);
    assert_eq!(
        (profile.context_window, profile.max_output_tokens),
        (32_768, 8192)
    );
    assert!(profile.require_key().is_ok());
    let config = loaded("", &[]);
    assert_eq!(
        config.provider("ollama").unwrap().base_url,
        "http://127.0.0.1:11434"
    );
}

#[test]
fn bad_base_url_in_the_environment_names_the_variable() {
    let err = load("", &[("ANTHROPIC_BASE_URL", "api.example.com")])
        .unwrap_err()
        .to_string();
    assert!(err.contains("ANTHROPIC_BASE_URL"), "{err}");
    assert!(err.contains("https://"), "{err}");
}

const FULL: &str = r#"
[models]
provider = "work"
default = "claude-sonnet-4-5"
compaction = "work/claude-haiku-4-5"
fallback = "openai/gpt-4.1"

[providers.work]
kind = "anthropic"
base_url = "https://api.anthropic.com"
api_key_env = "WORK_ANTHROPIC_KEY"
model = "claude-sonnet-4-5"
context_window = 200000
max_output_tokens = 16000

[providers.local]
kind = "openai"
base_url = "http://127.0.0.1:8080/v1"
model = "qwen2.5-coder"

[session]
prefill_timeout = 1800
first_token_timeout = 600
no_progress_timeout = 1200
tool_execution_timeout = 90
sidecar_llm_timeout = 90
idle_timeout = 0
compaction_threshold = 0.7
snapshot_every = 25
max_message_bytes = 131072

[session.maintenance]
mode = "enforce"
prune_after = "12h"
max_entries = 300
max_disk_bytes = "2GB"
high_water_bytes = "1.6GB"

[retry]
max_attempts = 5
base_delay_ms = 500
max_delay_ms = 30000
"#;

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

#[test]
fn a_section_named_like_a_built_in_changes_only_what_it_sets() {
    let config = loaded(
        "[providers.anthropic]\nmodel = \"claude-opus-4-1\"\n",
        &[
            ("ANTHROPIC_API_KEY", "k"),
            ("ANTHROPIC_BASE_URL", "https://proxy.example/"),
        ],
    );
    let profile = config.provider("anthropic").unwrap();
    assert_eq!(profile.default_model, "claude-opus-4-1");
    assert_eq!(profile.base_url, "https://proxy.example");
    assert_eq!(profile.api_key.as_deref(), Some("k"));
    assert_eq!(profile.context_window, 200_000);
}

#[test]
fn default_provider_choices() {
    // The only profile in the file, when the environment enables none.
    let one = "[providers.local]\nkind = \"openai\"\nbase_url = \"http://10.0.0.5:8000/v1\"\nmodel = \"m\"\n";
    assert_eq!(loaded(one, &[]).default_provider().unwrap().name, "local");
    // The environment comes first...
    assert_eq!(
        loaded(one, &[("OPENAI_API_KEY", "k")])
            .default_provider()
            .unwrap()
            .name,
        "openai"
    );
    // ...unless models.default names a profile, or models.provider is set.
    let qualified = format!("[models]\ndefault = \"local/other\"\n{one}");
    let config = loaded(&qualified, &[("ANTHROPIC_API_KEY", "k")]);
    assert_eq!(config.default_provider().unwrap().name, "local");
    assert_eq!(role(config.conversation_model()), "local/other");
    let named = "[models]\nprovider = \"ollama\"\ncompaction = \"small\"\n";
    let config = loaded(named, &[("ANTHROPIC_API_KEY", "k")]);
    assert_eq!(role(config.conversation_model()), "ollama/llama3.2");
    assert_eq!(role(config.compaction_model()), "ollama/small");
    assert!(config.fallback_model().unwrap().is_none());
}

#[test]
fn resolve_model_references() {
    let config = loaded(FULL, &[]);
    let check = |text: &str, expected: &str| {
        let reference = ModelRef::parse(text).unwrap();
        assert_eq!(role(config.resolve_model(&reference)), expected, "{text}");
    };
    check("claude-opus-4-1", "work/claude-opus-4-1");
    check("local/qwen3", "local/qwen3");
    check("openai/gpt-5", "openai/gpt-5");
    let err = role(config.resolve_model(&ModelRef::parse("nope/m").unwrap()));
    assert!(err.contains("unknown provider profile `nope`"), "{err}");
}

#[test]
fn unknown_provider_lists_the_known_ones() {
    let err = loaded(FULL, &[]).provider("wrok").unwrap_err().to_string();
    assert!(err.contains("`wrok`"), "{err}");
    assert!(
        err.contains("anthropic, local, ollama, openai, work"),
        "{err}"
    );
}

#[test]
fn missing_keys_are_reported_only_when_the_profile_is_used() {
    let text = "[providers.router]\nkind = \"openai\"\nbase_url = \"https://openrouter.ai/api/v1\"\nmodel = \"m\"\n";
    let config = loaded(text, &[]);
    let err = config
        .provider("anthropic")
        .unwrap()
        .require_key()
        .unwrap_err()
        .to_string();
    assert!(err.contains("ANTHROPIC_API_KEY"), "{err}");
    // A profile pointing away from the vendor never borrows the vendor's key variable.
    let router = config.provider("router").unwrap();
    assert_eq!(router.api_key_env, None);
    let err = router.require_key().unwrap_err().to_string();
    assert!(
        err.contains("api_key_env") && err.contains("[providers.router]"),
        "{err}"
    );
    let named = format!("{text}api_key_env = \"ROUTER_KEY\"\n");
    let err = loaded(&named, &[])
        .provider("router")
        .unwrap()
        .require_key()
        .unwrap_err();
    assert!(err.to_string().contains("ROUTER_KEY"), "{err}");
    assert!(
        loaded(&named, &[("ROUTER_KEY", "k")])
            .provider("router")
            .unwrap()
            .require_key()
            .is_ok()
    );
}

#[test]
fn render_shows_where_keys_come_from_but_never_the_keys() {
    let config = loaded(
        FULL,
        &[
            ("WORK_ANTHROPIC_KEY", "sk-work-SECRET"),
            ("OPENAI_API_KEY", "sk-openai-SECRET"),
        ],
    );
    let text = config.render();
    assert!(!text.contains("SECRET"), "{text}");
    for fragment in [
        FILE,
        "set (from WORK_ANTHROPIC_KEY)",
        "set (from OPENAI_API_KEY)",
        "missing (ANTHROPIC_API_KEY)",
        "[providers.local]",
        "provider = work",
        "compaction = work/claude-haiku-4-5",
        "max_disk_bytes = 2GB",
        "idle_timeout = 0 (passivation off)",
    ] {
        assert!(
            text.contains(fragment),
            "`{fragment}` missing from:\n{text}"
        );
    }
}

#[test]
fn tern_home_holds_config_data_and_logs() {
    let paths = Paths::from_env(&env(&[("TERN_HOME", "/srv/tern-home")])).unwrap();
    let home = PathBuf::from("/srv/tern-home");
    assert_eq!(paths.home.as_ref(), Some(&home));
    assert_eq!(paths.config_dir, home);
    assert_eq!(paths.config_file, home.join("config.toml"));
    assert_eq!(paths.data_dir, home.join("data"));
    assert_eq!(paths.db_file, home.join("data/tern.redb"));
    assert_eq!(paths.log_dir, home.join("logs"));
}

#[test]
fn load_reads_the_file_under_tern_home_when_there_is_one() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().to_str().unwrap();
    let (paths, config) = config::load(&env(&[("TERN_HOME", home)])).unwrap();
    assert_eq!(config.source, None);
    assert_eq!(config.config_file, paths.config_file);
    let err = config.default_provider().unwrap_err().to_string();
    assert!(
        err.contains(&paths.config_file.display().to_string()),
        "{err}"
    );

    std::fs::write(&paths.config_file, "[session]\nsnapshot_every = 0\n").unwrap();
    let err = config::load(&env(&[("TERN_HOME", home)]))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(&paths.config_file.display().to_string()) && err.contains("line 2"),
        "{err}"
    );

    std::fs::write(&paths.config_file, FULL).unwrap();
    let (_, config) = config::load(&env(&[("TERN_HOME", home)])).unwrap();
    assert_eq!(config.source.as_ref(), Some(&paths.config_file));
    assert_eq!(config.default_provider().unwrap().name, "work");
}

#[test]
fn syntax_errors() {
    check_error(
        "[session\nidle_timeout = 3\n",
        1,
        "session",
        &["expected `]`"],
    );
    check_error(
        "[retry]\nmax_attempts = = 3\n",
        2,
        "retry.max_attempts",
        &[],
    );
    check_error(
        "[session]\nidle_timeout = 3\nidle_timeout = 4\n",
        3,
        "session.idle_timeout",
        &["duplicate key"],
    );
}

#[test]
fn unknown_keys_at_every_level() {
    check_error(
        "[sesion]\nidle_timeout = 3\n",
        1,
        "sesion",
        &["unknown key `sesion`", "`session`"],
    );
    check_error(
        "\nverbose = true\n",
        2,
        "verbose",
        &["unknown key `verbose`", "`models`"],
    );
    check_error(
        "[session.maintenance]\nmode = \"warn\"\nmax_entrys = 3\n",
        3,
        "session.maintenance.max_entrys",
        &["`max_entries`"],
    );
    check_error(
        "[providers.work]\nkind = \"anthropic\"\nmodel = \"m\"\napi_key = \"sk-x\"\n",
        4,
        "providers.work.api_key",
        &["api_key_env"],
    );
}

#[test]
fn wrong_types() {
    check_error(
        "[session]\nsnapshot_every = \"x\"\n",
        2,
        "session.snapshot_every",
        &["wrong type", "whole number"],
    );
    check_error(
        "[session]\ncompaction_threshold = \"high\"\n",
        2,
        "session.compaction_threshold",
        &["a number"],
    );
    check_error("session = 3\n", 1, "session", &["table"]);
    check_error(
        "[[session]]\nidle_timeout = 1\n",
        1,
        "session",
        &["found an array", "table"],
    );
    check_error(
        "[retry]\nmax_attempts = -1\n",
        2,
        "retry.max_attempts",
        &["-1"],
    );
    check_error(
        "[session]\nidle_timeout = true\n",
        2,
        "session.idle_timeout",
        &["\"30m\""],
    );
}

#[test]
fn bad_values() {
    check_error(
        "[session]\ncompaction_threshold = 1.5\n",
        2,
        "session.compaction_threshold",
        &["1.5", "between 0 and 1"],
    );
    check_error(
        "[session]\ncompaction_threshold = 0\n",
        2,
        "session.compaction_threshold",
        &["between 0 and 1"],
    );
    check_error(
        "\n\n[retry]\nmax_attempts = 0\n",
        4,
        "retry.max_attempts",
        &["from 1 to"],
    );
    check_error(
        "[retry]\nbase_delay_ms = 5000\nmax_delay_ms = 10\n",
        3,
        "retry.max_delay_ms",
        &["base_delay_ms"],
    );
    check_error(
        "[session]\nprefill_timeout = 0\n",
        2,
        "session.prefill_timeout",
        &["longer than zero"],
    );
    check_error(
        "[session]\nfirst_token_timeout = -5\n",
        2,
        "session.first_token_timeout",
        &["negative"],
    );
    check_error(
        "[session]\nidle_timeout = 9223372036854775807\n",
        2,
        "session.idle_timeout",
        &["hundred years"],
    );
    check_error(
        "[retry]\nmax_delay_ms = 9223372036854775807\n",
        2,
        "retry.max_delay_ms",
        &["one hour"],
    );
    // Dotted keys and inline tables are located like sections.
    check_error(
        "# tern\nsession.compaction_threshold = 2.0\n",
        2,
        "session.compaction_threshold",
        &["between 0 and 1"],
    );
    check_error(
        "[session]\nmaintenance = { mode = \"warn\", max_entries = 0 }\n",
        2,
        "session.maintenance.max_entries",
        &["from 1 to"],
    );
    check_error(
        "[session]\ncompaction_threshold = nan\n",
        2,
        "session.compaction_threshold",
        &["NaN is out of range"],
    );
    check_error(
        "[session.maintenance]\nmode = \"delete\"\n",
        2,
        "session.maintenance.mode",
        &["\"delete\"", "\"warn\" or \"enforce\""],
    );
    check_error(
        "[session.maintenance]\nprune_after = \"30x\"\n",
        2,
        "session.maintenance.prune_after",
        &["\"30x\"", "\"30d\""],
    );
    check_error(
        "[session.maintenance]\nmax_disk_bytes = \"2XB\"\n",
        2,
        "session.maintenance.max_disk_bytes",
        &["\"2XB\"", "\"512MB\"", "GiB"],
    );
    check_error(
        "[session.maintenance]\nmax_disk_bytes = \"1GB\"\nhigh_water_bytes = \"2GB\"\n",
        3,
        "session.maintenance.high_water_bytes",
        &["must not exceed max_disk_bytes"],
    );
}

#[test]
fn bad_profiles() {
    check_error(
        "[providers.work]\nkind = \"gemini\"\nmodel = \"m\"\n",
        2,
        "providers.work.kind",
        &["\"gemini\"", "\"anthropic\", \"openai\" or \"ollama\""],
    );
    check_error(
        "[providers.work]\nmodel = \"m\"\n",
        1,
        "providers.work",
        &["no `kind`"],
    );
    check_error(
        "[providers.work]\nkind = \"openai\"\n",
        1,
        "providers.work",
        &["no `model`"],
    );
    check_error(
        "[providers.work]\nkind = \"openai\"\nmodel = \"m\"\nbase_url = \"localhost:8080\"\n",
        4,
        "providers.work.base_url",
        &["\"localhost:8080\"", "http:// or https://"],
    );
    check_error(
        "[providers.work]\nkind = \"openai\"\nmodel = \"m\"\ncontext_window = 8000\nmax_output_tokens = 9000\n",
        5,
        "providers.work.max_output_tokens",
        &["smaller than context_window"],
    );
    check_error(
        "[providers.\"a/b\"]\nkind = \"openai\"\nmodel = \"m\"\n",
        1,
        "providers.\"a/b\"",
        &["`/`"],
    );
}

#[test]
fn a_key_pasted_into_api_key_env_is_rejected_without_echoing_it() {
    let text =
        "[providers.work]\nkind = \"anthropic\"\nmodel = \"m\"\napi_key_env = \"sk-ant-SECRET\"\n";
    check_error(
        text,
        4,
        "providers.work.api_key_env",
        &["name of an environment variable"],
    );
    let message = load(text, &[]).unwrap_err().to_string();
    assert!(!message.contains("SECRET"), "{message}");
}

#[test]
fn model_roles_must_name_known_profiles() {
    check_error(
        "[models]\ndefault = \"work/claude\"\n",
        2,
        "models.default",
        &["\"work\"", "anthropic, ollama, openai", "[providers.work]"],
    );
    check_error(
        "[models]\nfallback = \"nope/x\"\n",
        2,
        "models.fallback",
        &["\"nope\""],
    );
    check_error(
        "[models]\nprovider = \"nope\"\n",
        2,
        "models.provider",
        &["\"nope\"", "known profiles"],
    );
    check_error(
        "[models]\ncompaction = \"work/\"\n",
        2,
        "models.compaction",
        &["empty"],
    );
}

#[test]
fn environment_debug_output_hides_keys() {
    let text = format!(
        "{:?}",
        env(&[("ANTHROPIC_API_KEY", "sk-SECRET"), ("WORK_KEY", "SECRET")])
    );
    assert!(!text.contains("SECRET"), "{text}");
}

#[test]
fn api_key_env_takes_only_upper_snake_case_names_and_never_echoes_others() {
    let profile = |var: &str| {
        format!("[providers.work]\nkind = \"anthropic\"\nmodel = \"m\"\napi_key_env = \"{var}\"\n")
    };
    for name in ["WORK_KEY", "_KEY", "KEY2", "A"] {
        let config = loaded(&profile(name), &[(name, "v")]);
        assert_eq!(
            config.provider("work").unwrap().api_key_env.as_deref(),
            Some(name)
        );
    }
    // Identifier-shaped keys (Groq's `gsk_…`, a lowercase token) are keys, not names.
    for pasted in [
        "gsk_8fJ2SECRET",
        "sk_SECRET",
        "work_key_SECRET",
        "2SECRET",
        "",
    ] {
        let text = profile(pasted);
        check_error(
            &text,
            4,
            "providers.work.api_key_env",
            &[
                "this looks like a key itself; put the key in an environment variable and \
                 give its name here",
                "WORK_API_KEY",
            ],
        );
        let err = load(&text, &[]).unwrap_err();
        for shown in [err.to_string(), format!("{err:?}")] {
            if !pasted.is_empty() {
                assert!(!shown.contains(pasted), "{shown}");
            }
            assert!(!shown.contains("SECRET"), "{shown}");
        }
    }
    // A wrongly typed value is not echoed either.
    for key in ["api_key_env", "base_url"] {
        let text = format!("[providers.work]\nkind = \"openai\"\nmodel = \"m\"\n{key} = 98765\n");
        let key = format!("providers.work.{key}");
        check_error(
            &text,
            4,
            &key,
            &["wrong type: found integer, expected a string"],
        );
        let message = load(&text, &[]).unwrap_err().to_string();
        assert!(!message.contains("98765"), "{message}");
    }
}

#[test]
fn a_base_url_with_credentials_or_a_query_is_rejected_without_echoing_the_secret() {
    let profile = |url: &str| {
        format!("[providers.work]\nkind = \"openai\"\nmodel = \"m\"\nbase_url = \"{url}\"\n")
    };
    let cases = [
        (
            "https://dev:SECRET@proxy.example/v1",
            "user name or password",
        ),
        ("https://SECRET@proxy.example/v1", "user name or password"),
        ("https://proxy.example/v1?key=SECRET", "query string"),
        ("https://proxy.example/v1?", "query string"),
        ("https://proxy.example/v1#SECRET", "query string"),
    ];
    for (url, problem) in cases {
        let text = profile(url);
        check_error(
            &text,
            4,
            "providers.work.base_url",
            &[problem, "proxy.example", "api_key_env"],
        );
        let err = load(&text, &[]).unwrap_err();
        for shown in [err.to_string(), format!("{err:?}")] {
            assert!(!shown.contains("SECRET"), "{shown}");
        }
    }
    // `@` in the path is not user info.
    let config = loaded(&profile("https://proxy.example/@team/v1"), &[]);
    assert_eq!(
        config.provider("work").unwrap().base_url,
        "https://proxy.example/@team/v1"
    );
}

#[test]
fn a_base_url_variable_with_credentials_or_a_query_is_rejected_without_echoing_the_secret() {
    let cases = [
        (
            "OPENAI_BASE_URL",
            "https://dev:SECRET@router.example/v1",
            "OPENAI_API_KEY",
        ),
        (
            "OPENAI_BASE_URL",
            "https://router.example/v1?api_key=SECRET",
            "OPENAI_API_KEY",
        ),
        (
            "ANTHROPIC_BASE_URL",
            "https://SECRET@proxy.example",
            "ANTHROPIC_API_KEY",
        ),
        (
            "ANTHROPIC_BASE_URL",
            "https://proxy.example#SECRET",
            "ANTHROPIC_API_KEY",
        ),
        ("OLLAMA_HOST", "dev:SECRET@gpu-box:11434", "remove"),
        (
            "OLLAMA_HOST",
            "http://gpu-box:11434/?token=SECRET",
            "remove",
        ),
    ];
    for (var, value, fix) in cases {
        let err = load("", &[(var, value)]).unwrap_err();
        let message = err.to_string();
        assert!(
            matches!(&err, ConfigError::InvalidEnv { var: v, .. } if v == var),
            "{err:?}"
        );
        assert!(
            message.starts_with(&format!("environment variable {var} ")),
            "{message}"
        );
        assert!(message.contains(fix), "{message}");
        for shown in [message, format!("{err:?}")] {
            assert!(!shown.contains("SECRET"), "{shown}");
        }
    }
}

#[test]
fn environment_debug_output_hides_credentials_in_base_urls() {
    let text = format!(
        "{:?}",
        env(&[
            (
                "OPENAI_BASE_URL",
                "https://dev:SECRET@router.example/v1?k=SECRET"
            ),
            ("ANTHROPIC_BASE_URL", "https://SECRET@proxy.example"),
            ("OLLAMA_HOST", "dev:SECRET@gpu-box:11434"),
        ])
    );
    assert!(!text.contains("SECRET"), "{text}");
    assert!(text.contains("router.example"), "{text}");
}
