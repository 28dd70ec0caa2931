//! The first run with no usable provider, in a terminal: the setup screen says what is
//! missing and offers the local model servers that answer; choosing one writes a minimal
//! `config.toml` for it (never over an existing file) and starts tern again.

use super::Outcome;
use super::lifecycle;
use super::setup::{Loaded, ModelArgs};
use crate::llm::local::find_local_servers;
use crate::tui::setup::{FoundServer, SetupChoice, SetupScreen};
use crate::tui::{ColorDepth, Theme};
use anyhow::Context;

/// Shows the setup screen for `problem`; returns when the person quits.
pub async fn run(loaded: &Loaded, problem: &str) -> anyhow::Result<Outcome> {
    let config_file = loaded.config.config_file.clone();
    // A config that exists is the person's: only a missing one is offered to be written.
    let servers = if config_file.exists() {
        Vec::new()
    } else {
        find_local_servers().await
    };
    let theme = Theme::default().for_depth(ColorDepth::detect(|name| std::env::var(name).ok()));
    let screen = SetupScreen {
        problem: problem.to_owned(),
        config_file: config_file.clone(),
        servers: servers
            .iter()
            .map(|server| FoundServer {
                name: server.name.to_owned(),
                base_url: server.base_url.clone(),
                model: server.model.clone(),
            })
            .collect(),
        selected: 0,
    };
    let choice = crate::tui::setup::run(screen, &theme)
        .await
        .context("the setup screen stopped")?;
    let SetupChoice::Use(index) = choice else {
        eprintln!("tern: {problem}");
        return Ok(Outcome::Success);
    };
    let Some(server) = servers.get(index) else {
        return Ok(Outcome::Success);
    };
    if let Some(parent) = config_file.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("could not create {}", parent.display()))?;
    }
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&config_file)
        .with_context(|| format!("could not write {}", config_file.display()))?;
    std::io::Write::write_all(&mut file, server.config().as_bytes())
        .with_context(|| format!("could not write {}", config_file.display()))?;
    eprintln!(
        "tern: wrote {} for the {} at {}",
        config_file.display(),
        server.name,
        server.base_url
    );
    let err = lifecycle::start_again(&ModelArgs::default());
    anyhow::bail!("could not start tern again: {err}")
}
