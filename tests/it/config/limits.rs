//! A profile's context window and output limit: what is written wins, what is not is
//! assumed and fitted to the window, and only two written values can conflict.

use super::{FILE, check_error, load, loaded};
use pretty_assertions::assert_eq;
use tern::config::{ConfigError, Written, fitted_output};

/// A local llama.cpp-style profile with the given extra lines.
fn local(extra: &str) -> String {
    format!(
        "[models]\nprovider = \"local\"\n\n[providers.local]\nkind = \"openai\"\n\
         base_url = \"http://127.0.0.1:8080/v1\"\nmodel = \"m\"\n{extra}"
    )
}

/// The window and output limit of the `local` profile, and which were written.
fn limits(text: &str) -> (u64, u32, Written) {
    let config = loaded(text, &[]);
    let profile = config.provider("local").unwrap();
    (
        profile.context_window,
        profile.max_output_tokens,
        profile.written,
    )
}

#[test]
fn a_small_window_alone_gets_an_output_limit_that_fits_it() {
    let (window, output, written) = limits(&local("context_window = 4096\n"));
    assert_eq!((window, output), (4096, 1024), "a quarter of the window");
    assert!(written.context_window && !written.max_output_tokens);
    // Large windows keep the usual ceiling.
    assert_eq!(limits(&local("context_window = 200000\n")).1, 8192);
    assert_eq!(limits(&local("context_window = 3\n")).1, 1, "never zero");
    assert_eq!(fitted_output(8192, 16_384), 4096);
}

#[test]
fn written_limits_that_fit_are_kept() {
    let (window, output, written) =
        limits(&local("context_window = 4096\nmax_output_tokens = 3000\n"));
    assert_eq!((window, output), (4096, 3000));
    assert!(written.context_window && written.max_output_tokens && written.model);
}

#[test]
fn a_written_output_limit_over_a_written_window_names_both_lines() {
    let text = local("context_window = 4096\nmax_output_tokens = 8192\n");
    check_error(
        &text,
        9,
        "providers.local.max_output_tokens",
        &[
            "max_output_tokens (8192, line 9)",
            "context_window (4096, line 8)",
            "must be smaller",
            "leave it out",
            "1024",
        ],
    );
    // The same with the window written after the limit.
    let text = local("max_output_tokens = 5000\ncontext_window = 5000\n");
    check_error(
        &text,
        8,
        "providers.local.max_output_tokens",
        &["(5000, line 8)", "context_window (5000, line 9)"],
    );
}

#[test]
fn a_written_output_limit_over_an_assumed_window_is_lowered_not_refused() {
    let text = local("max_output_tokens = 200000\n");
    let config = loaded(&text, &[]);
    let profile = config.provider("local").unwrap();
    assert_eq!(profile.context_window, 128_000, "assumed");
    assert_eq!(profile.max_output_tokens, 200_000, "as written");
    // Used with the assumed window or a smaller one the server says, it is lowered to fit.
    assert_eq!(profile.output_for(128_000), 8192);
    assert_eq!(profile.output_for(4096), 1024);
    let fits = loaded(&local("max_output_tokens = 2000\n"), &[]);
    assert_eq!(fits.provider("local").unwrap().output_for(4096), 2000);
    // Not written: a share of whatever window is in use.
    let plain = loaded(&local(""), &[]);
    let plain = plain.provider("local").unwrap();
    assert_eq!(plain.output_for(plain.context_window), 8192);
    assert_eq!(plain.output_for(8192), 2048);
}

#[test]
fn a_local_server_may_leave_the_model_to_the_server() {
    let text = "[providers.local]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:8080/v1\"\n";
    let config = loaded(text, &[]);
    let profile = config.default_provider().unwrap();
    assert_eq!(profile.name, "local");
    assert!(!profile.written.model);
    assert!(profile.asks_server());
    let ollama = loaded("[providers.box]\nkind = \"ollama\"\n", &[]);
    assert!(!ollama.provider("box").unwrap().written.model);
    // A remote server lists many models, or none: the profile must name one.
    let remote = "[providers.r]\nkind = \"openai\"\nbase_url = \"https://gw.example.com/v1\"\n";
    let err = load(remote, &[]).unwrap_err();
    assert!(
        matches!(&err, ConfigError::Invalid { key, .. } if key == "providers.r"),
        "{err}"
    );
    assert!(err.to_string().contains("no `model`"), "{err}");
    assert!(err.to_string().contains(FILE), "{err}");
}
