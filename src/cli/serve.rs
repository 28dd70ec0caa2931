//! `tern serve`: a tern with no interface that owns the store, serves its sessions to the
//! other tern processes and runs the configured chat channels, for a machine without a
//! terminal open. Beside a tern that already owns the store it waits as that one's client
//! and takes the store (and the channels) over when it quits. SIGTERM or SIGHUP drain it
//! like any front end; a changed `config.toml` starts it again with the new channels.

use super::Outcome;
use super::door;
use super::lifecycle::{self, DRAIN_BOUND, Stop, Stops};
use super::setup::{self, ModelArgs};
use crate::channels::ChannelStatus;
use crate::channels::status::now_ms;
use crate::gateway::SessionService;
use crate::tools::ApprovalMode;
use anyhow::Context;
use std::sync::Arc;
use std::time::Duration;
use tokio::signal::unix::{SignalKind, signal};

/// How often the channels' state is looked at (and a client sees that its owner left).
const LOOK_EVERY: Duration = Duration::from_secs(2);

#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub model: ModelArgs,
}

pub async fn run(args: ServeArgs) -> anyhow::Result<Outcome> {
    let loaded = Arc::new(setup::load()?);
    // Listening from the start: a stop asked while the store opens is a drain, not a kill.
    let rejected = Box::new(|text: String| eprintln!("tern serve: {text}"));
    let mut stops =
        Stops::listen(&loaded.config, rejected).context("could not listen for stop signals")?;
    let mut interrupts = signal(SignalKind::interrupt()).context("could not listen for Ctrl-C")?;
    let client = setup::model_client(&loaded, &args.model, setup::KeyCheck::Required)?;
    if !loaded.config.channels.any() {
        eprintln!(
            "tern serve: no channel is configured in {}; serving the sessions to other tern \
             processes only. Add [channels.slack], [channels.discord], [channels.mattermost] \
             or [channels.webhook] there to take inputs from chat.",
            loaded.config.config_file.display()
        );
    }
    let build = door::build(
        loaded.clone(),
        client,
        ApprovalMode::Ask,
        args.model.overrides(),
        true,
    );
    let said = Arc::new(|text: String| eprintln!("tern serve: {text}"));
    let door = door::open(&loaded.paths, build, said).await?;
    let service = door.service;
    if service.owns_store().await {
        eprintln!(
            "tern serve: serving the sessions (pid {}); SIGTERM or Ctrl-C stops it",
            std::process::id()
        );
    } else {
        eprintln!(
            "tern serve: another tern process owns the sessions and runs the channels; this \
             one waits and takes them over when it quits"
        );
    }
    let mut look = tokio::time::interval(LOOK_EVERY);
    let mut shown: Vec<(String, String)> = Vec::new();
    let stop = loop {
        tokio::select! {
            stop = stops.next() => break stop,
            _ = interrupts.recv() => break Stop::Signal("SIGINT"),
            _ = look.tick() => report(&service, &mut shown).await,
        }
    };
    eprintln!("tern serve: {}", stop.notice());
    if let Err(err) = service.drain(DRAIN_BOUND).await {
        eprintln!("tern serve: the drain did not finish cleanly: {err}");
    }
    service.close_all().await;
    if stop == Stop::ConfigChanged {
        return Err(lifecycle::serve_again(&args.model))
            .context("could not start tern serve again");
    }
    Ok(Outcome::Success)
}

/// Prints each channel's state when it changes (what it is connected to, or why it
/// stopped), so the log of a service manager shows it.
async fn report(service: &SessionService, shown: &mut Vec<(String, String)>) {
    let Ok(channels) = service.channels().await else {
        return;
    };
    for status in channels {
        let state = state_line(&status);
        match shown.iter_mut().find(|(name, _)| *name == status.name) {
            Some((_, last)) if *last == state => {}
            Some((_, last)) => {
                eprintln!("tern serve: {state}");
                *last = state;
            }
            None => {
                eprintln!("tern serve: {state}");
                shown.push((status.name.clone(), state));
            }
        }
    }
}

/// A channel's state without the counts that change at every input.
fn state_line(status: &ChannelStatus) -> String {
    let quiet = ChannelStatus {
        inputs: 0,
        posts: 0,
        last_event_ms: None,
        last_error: None,
        ..status.clone()
    };
    let line = quiet.line(now_ms());
    line.split(" · ").next().unwrap_or(&line).to_owned()
}
