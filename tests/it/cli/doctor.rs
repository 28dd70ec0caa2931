//! `tern doctor` on a clean home: only the providers the environment or the config file set
//! up are asked, the local model servers are found or not running (never an error), the
//! configuration is printed as TOML, and the exit code says whether a provider answered,
//! with the next step when none did.

use super::*;

/// The doctor's output from the line `start` up to the next section's, without the indent.
fn section(text: &str, start: &str) -> String {
    let rest = text
        .split_once(&format!("{start}\n"))
        .unwrap_or_else(|| panic!("no {start} section in:\n{text}"))
        .1;
    rest.lines()
        .take_while(|line| line.is_empty() || line.starts_with("  "))
        .map(|line| line.strip_prefix("  ").unwrap_or(line))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Whether something listens on `port` of this machine.
fn listening(port: u16) -> bool {
    let address = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    std::net::TcpStream::connect_timeout(&address, Duration::from_millis(300)).is_ok()
}

#[test]
fn with_nothing_configured_it_tries_no_provider_and_says_what_to_do() {
    let home = TernHome::new();
    let output = home.tern().arg("doctor").output().expect("running tern");
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{text}\n{}", stderr(&output));
    assert!(text.contains("Providers\n  none configured\n"), "{text}");
    let log_line = text
        .lines()
        .find(|line| line.trim_start().starts_with("log file"))
        .unwrap_or_else(|| panic!("no log file line in:\n{text}"));
    assert!(log_line.ends_with("(not created yet)"), "{log_line}");

    // The local servers the first-run screen offers: never an error. Whether one runs on
    // this machine is not the test's to decide, but a port nobody listens on is not running.
    let local = section(&text, "Local model servers (on their default ports)");
    for (name, port) in [("llama.cpp server", 8080), ("Ollama", 11434)] {
        let line = local
            .lines()
            .find(|line| line.starts_with(name))
            .unwrap_or_else(|| panic!("no {name} line in:\n{local}"));
        if listening(port) {
            assert!(
                line.contains("found") || line.ends_with("not running"),
                "{line}"
            );
        } else {
            assert!(line.ends_with("not running"), "{line}");
        }
    }
    let before_mcp = text.split("MCP servers").next().unwrap_or_default();
    assert!(
        !before_mcp.to_lowercase().contains("error"),
        "nothing was asked for, so nothing failed:\n{text}"
    );

    let step = section(&text, "Next step");
    let config_file = home.home().join("config.toml").display().to_string();
    assert!(
        step.contains("export ANTHROPIC_API_KEY=<key>") && step.contains(&config_file),
        "{step}"
    );

    let config = section(&text, "Configuration");
    let parsed: toml::Table =
        toml::from_str(&config).unwrap_or_else(|err| panic!("{err}\n{config}"));
    assert!(parsed.get("providers").is_none(), "{config}");
    assert!(parsed["session"]["prefill_timeout"].is_str(), "{config}");
}

#[test]
fn with_the_mock_provider_configured_it_answers_and_succeeds() {
    let cli = Cli::new();
    let output = cli.run(&["doctor"]);
    let text = stdout(&output);
    assert!(output.status.success(), "{text}\n{}", stderr(&output));
    assert!(
        text.contains(&cli.home.home().display().to_string()),
        "{text}"
    );
    let providers = section(&text, "Providers");
    let anthropic = providers
        .lines()
        .find(|line| line.starts_with("anthropic"))
        .unwrap_or_else(|| panic!("no anthropic line in:\n{providers}"));
    assert!(
        anthropic.contains(&cli.mock.base_url())
            && anthropic.contains("ok: ")
            && anthropic.contains("answered"),
        "{anthropic}"
    );
    assert!(
        !providers.contains("ollama") && !providers.contains("openai"),
        "only what the environment set up is asked:\n{providers}"
    );
    assert!(!text.contains("Next step"), "{text}");
    assert!(
        !text.contains("test-key"),
        "the key must never be printed: {text}"
    );
    let config = section(&text, "Configuration");
    let parsed: toml::Table =
        toml::from_str(&config).unwrap_or_else(|err| panic!("{err}\n{config}"));
    assert_eq!(
        parsed["providers"]["anthropic"]["api_key"].as_str(),
        Some("<set>"),
        "{config}"
    );
}

#[test]
fn a_configured_provider_that_does_not_answer_fails_with_what_to_fix() {
    let home = TernHome::new();
    let port = crate::support::free_port();
    let output = home
        .tern()
        .arg("doctor")
        .env("ANTHROPIC_API_KEY", "test-key")
        .env("ANTHROPIC_BASE_URL", format!("http://127.0.0.1:{port}"))
        .output()
        .expect("running tern");
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{text}");
    let providers = section(&text, "Providers");
    assert!(
        providers.starts_with("anthropic") && providers.contains("error: "),
        "{providers}"
    );
    let step = section(&text, "Next step");
    assert!(step.contains("No configured provider answered"), "{step}");
}
