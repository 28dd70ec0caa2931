//! Provider profiles and model roles: which profile is the default, how a file section
//! overrides a built-in one, how `profile/model` references resolve, and when a missing
//! API key is reported.

use super::{FULL, loaded, role};
use pretty_assertions::assert_eq;
use tern::config::ModelRef;

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
fn configured_profiles_are_those_the_file_or_the_environment_set_up() {
    let check = |text: &str, pairs: &[(&str, &str)], expected: &[&str]| {
        let config = loaded(text, pairs);
        let names: Vec<&str> = config
            .configured_providers()
            .map(|profile| profile.name.as_str())
            .collect();
        assert_eq!(names, expected, "{text} with {pairs:?}");
    };
    check("", &[], &[]);
    check("", &[("ANTHROPIC_API_KEY", "k")], &["anthropic"]);
    check(
        "",
        &[("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")],
        &["anthropic"],
    );
    check("", &[("OPENAI_API_KEY", "k")], &["openai"]);
    check(
        "",
        &[("OPENAI_BASE_URL", "http://127.0.0.1:8080/v1")],
        &["openai"],
    );
    check("", &[("OLLAMA_HOST", "127.0.0.1:11434")], &["ollama"]);
    check("[models]\nprovider = \"ollama\"\n", &[], &["ollama"]);
    check(
        "[models]\nfallback = \"openai/gpt-4.1\"\n[providers.box]\nkind = \"ollama\"\n",
        &[],
        &["box", "openai"],
    );
    check(FULL, &[], &["local", "openai", "work"]);
}
