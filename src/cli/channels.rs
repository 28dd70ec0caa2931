//! `tern channels status`: what each chat channel of the tern that owns the store is doing.

use super::Outcome;
use super::door;
use super::setup;
use crate::channels::status::now_ms;

#[derive(Debug, clap::Subcommand)]
pub enum ChannelsCommand {
    /// Show each channel's state: connected or not, its last event and its last error.
    Status,
}

pub async fn run(command: ChannelsCommand) -> anyhow::Result<Outcome> {
    let ChannelsCommand::Status = command;
    let loaded = setup::load()?;
    let configured = configured(&loaded.config.channels);
    let Some(service) = door::owner(&loaded.paths).await? else {
        if configured.is_empty() {
            println!(
                "No channel is configured. Add [channels.slack], [channels.discord], \
                 [channels.mattermost] or [channels.webhook] to {}.",
                loaded.config.config_file.display()
            );
        } else {
            println!(
                "No tern runs now, so no channel is connected ({} configured). `tern serve` \
                 (or `tern` in a terminal) runs them.",
                configured.join(", ")
            );
        }
        return Ok(Outcome::Success);
    };
    let channels = service.channels().await?;
    if channels.is_empty() {
        println!(
            "The tern that owns the sessions runs no channel{}.",
            if configured.is_empty() {
                String::new()
            } else {
                format!(
                    " ({} configured here: it may have started before they were, or be a \
                     `tern run`; start `tern serve` after it quits)",
                    configured.join(", ")
                )
            }
        );
        return Ok(Outcome::Success);
    }
    let now = now_ms();
    for status in channels {
        println!("{}", status.line(now));
    }
    Ok(Outcome::Success)
}

fn configured(settings: &crate::config::ChannelSettings) -> Vec<&'static str> {
    [
        ("slack", settings.slack.is_some()),
        ("discord", settings.discord.is_some()),
        ("mattermost", settings.mattermost.is_some()),
        ("webhook", settings.webhook.is_some()),
    ]
    .into_iter()
    .filter_map(|(name, set)| set.then_some(name))
    .collect()
}
