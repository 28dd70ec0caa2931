//! Keys and credentials never leak: not from `config.render()`, from a key pasted where a
//! variable name belongs, from a base URL carrying a password or query, or from the
//! `Debug` output of the environment.

use super::{FILE, FULL, check_error, env, load, loaded};
use pretty_assertions::assert_eq;
use tern::config::ConfigError;

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
        "api_key = \"<set>\"  # from WORK_ANTHROPIC_KEY",
        "api_key = \"<set>\"  # from OPENAI_API_KEY",
        "[providers.local]",
        "provider = \"work\"",
        "compaction = \"work/claude-haiku-4-5\"",
        "max_disk_bytes = \"2GB\"",
        "idle_timeout = 0  # passivation off",
    ] {
        assert!(
            text.contains(fragment),
            "`{fragment}` missing from:\n{text}"
        );
    }
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
