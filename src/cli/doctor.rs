//! `tern doctor`: where tern keeps its files, the configuration it resolved, and whether
//! each provider answers.

use super::Outcome;
use super::setup;
use crate::llm;
use std::time::Duration;

/// How long one provider gets to answer the probe.
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

pub async fn run() -> anyhow::Result<Outcome> {
    let loaded = setup::load()?;
    let paths = &loaded.paths;
    let exists = |p: &std::path::Path| if p.exists() { "" } else { " (not created yet)" };
    println!("Paths");
    println!(
        "  config file  {}{}",
        paths.config_file.display(),
        exists(&paths.config_file)
    );
    println!(
        "  data dir     {}{}",
        paths.data_dir.display(),
        exists(&paths.data_dir)
    );
    println!(
        "  database     {}{}",
        paths.db_file.display(),
        exists(&paths.db_file)
    );
    println!(
        "  log file     {}",
        paths.log_dir.join("tern.log").display()
    );
    println!();
    println!("Configuration");
    for line in loaded.config.render().lines() {
        println!("  {line}");
    }
    println!();
    println!("Providers");
    if loaded.config.providers.is_empty() {
        println!("  none configured");
    }
    let mut any_ok = false;
    for profile in loaded.config.providers.values() {
        let status = match profile.require_key() {
            Err(err) => format!("skipped: {err}"),
            Ok(()) => {
                let provider = llm::provider_for(profile);
                match tokio::time::timeout(PROBE_TIMEOUT, provider.probe()).await {
                    Ok(Ok(what)) => {
                        any_ok = true;
                        format!("ok: {what}")
                    }
                    Ok(Err(err)) => format!("error: {err}"),
                    Err(_) => format!("error: no answer within {}s", PROBE_TIMEOUT.as_secs()),
                }
            }
        };
        println!(
            "  {:<12} {:<9} {}  {status}",
            profile.name,
            profile.kind.as_str(),
            profile.base_url
        );
    }
    match loaded.config.default_provider() {
        Ok(profile) => println!(
            "\nDefault provider: {} (model {})",
            profile.name, profile.default_model
        ),
        Err(err) => println!("\n{err}"),
    }
    Ok(if any_ok {
        Outcome::Success
    } else {
        Outcome::TurnFailed
    })
}
