//! Configuration without a file: the built-in defaults, and the provider chosen from the
//! environment (`ANTHROPIC_API_KEY`, `OPENAI_API_KEY`/`OPENAI_BASE_URL`, `OLLAMA_HOST`) with
//! its base URL and limits.

use super::{FILE, load, loaded, role};
use pretty_assertions::assert_eq;
use tern::config::{ConfigError, ProviderKind, RetrySettings, SessionSettings};

#[test]
fn no_file_and_no_environment_gives_defaults_and_no_provider() {
    let config = loaded("", &[]);
    assert_eq!(config.session, SessionSettings::default());
    assert_eq!(config.session.max_rounds, 60);
    assert_eq!(config.session.subagents.max_concurrent, 4);
    let set = loaded("[subagents]\nmax_concurrent = 8\n", &[]);
    assert_eq!(set.session.subagents.max_concurrent, 8);
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
fn the_no_provider_message_says_what_is_true_of_keys_for_a_local_server() {
    let err = match loaded("", &[]).default_provider() {
        Err(err) => err.to_string(),
        Ok(p) => panic!("unexpected provider {}", p.name),
    };
    // The line for a server on this machine asks for no key…
    let local = err
        .lines()
        .find(|line| line.contains("OPENAI_BASE_URL=http://127.0.0.1"))
        .unwrap_or_else(|| panic!("no line for a local server in: {err}"));
    assert!(local.contains("needs no key"), "{local}");
    assert!(!local.contains("OPENAI_API_KEY"), "{local}");
    // …and following it, with no key anywhere, gives a provider that is ready to use.
    let config = loaded("", &[("OPENAI_BASE_URL", "http://127.0.0.1:8080/v1")]);
    let profile = config.default_provider().unwrap();
    assert_eq!(profile.name, "openai");
    assert!(profile.require_key().is_ok(), "a local server needs no key");
    // So does the example profile the message shows, copied as it stands.
    let example: String = err
        .lines()
        .skip_while(|line| !line.contains("[providers.local]"))
        .map(|line| format!("{}\n", line.trim()))
        .collect();
    let config = loaded(&format!("[models]\nprovider = \"local\"\n{example}"), &[]);
    let profile = config.default_provider().unwrap();
    assert_eq!(profile.base_url, "http://127.0.0.1:8080/v1");
    assert!(profile.require_key().is_ok(), "{example}");
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
    // gpt-4.1's window holds at OpenAI only: another server's is assumed until it says.
    assert_eq!(
        (profile.context_window, profile.max_output_tokens),
        (128_000, 8192)
    );
    assert!(profile.asks_server());
    let official = loaded("", &[("OPENAI_API_KEY", "sk")]);
    let profile = official.default_provider().unwrap();
    assert_eq!(
        (profile.context_window, profile.max_output_tokens),
        (1_047_576, 32_768)
    );
    assert!(!profile.asks_server(), "OpenAI's model list says no window");
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
