//! Chat platforms and signed webhooks as inputs to sessions: one adapter per platform, each
//! turning the platform's messages into inputs under a session key per thread and the
//! session's events into the platform's messages (`deliver.rs`). Channels run in the tern
//! process that owns the store, beside its interface or alone under `tern serve`; this is the
//! only place besides `llm/` that speaks HTTP to the outside.

pub mod deliver;
pub mod discord;
mod follow;
pub mod mattermost;
pub mod pace;
pub mod pending;
pub mod recent;
pub mod signature;
pub mod slack;
pub mod split;
pub mod status;
pub mod webhook;

/// A builder for a channel's HTTP client, the process's TLS crypto provider installed first.
pub(crate) fn http_client() -> reqwest::ClientBuilder {
    crate::tls::install_crypto_provider();
    reqwest::Client::builder()
}

pub use deliver::{Ask, Conversations, Inbound, PostError, Poster};
pub use status::{ChannelState, ChannelStatus, Status};

use crate::config::ChannelSettings;
use crate::gateway::SessionService;
use pending::Pending;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Longest the channels are waited for when they stop.
const STOP_BOUND: Duration = Duration::from_secs(2);

/// What every channel starts with.
#[derive(Clone)]
pub struct Start {
    pub service: SessionService,
    /// Where sessions work when the channel names no `project_dir`.
    pub default_dir: PathBuf,
    /// The channel's own status.
    pub status: Status,
    pub stop: CancellationToken,
    /// Replies under way, shared by the channels of this process.
    pub pending: Arc<Pending>,
}

impl Start {
    /// The value of `token`, or `None` with the channel stopped, its status naming the
    /// variable to set.
    pub fn token(&self, token: &crate::config::Token) -> Option<String> {
        match token.value() {
            Ok(value) => Some(value.to_owned()),
            Err(why) => {
                self.status.set(ChannelState::Stopped, why);
                None
            }
        }
    }
}

/// The channels running in this process.
pub struct Channels {
    statuses: Vec<Status>,
    stop: CancellationToken,
    tasks: Mutex<Vec<JoinHandle<()>>>,
}

impl Channels {
    /// Starts every configured channel; sessions of a channel without a `project_dir` work
    /// in `default_dir`; where replies stand is kept in `data_dir`.
    pub fn start(
        service: &SessionService,
        settings: &ChannelSettings,
        default_dir: PathBuf,
        data_dir: &std::path::Path,
    ) -> Self {
        let stop = CancellationToken::new();
        let pending = Arc::new(Pending::load(data_dir));
        let mut statuses = Vec::new();
        let mut start = |name: &str| {
            let status = Status::new(name);
            statuses.push(status.clone());
            Start {
                service: service.clone(),
                default_dir: default_dir.clone(),
                status,
                stop: stop.clone(),
                pending: pending.clone(),
            }
        };
        let mut tasks = Vec::new();
        if let Some(slack) = &settings.slack {
            tasks.push(tokio::spawn(slack::run(slack.clone(), start("slack"))));
        }
        if let Some(discord) = &settings.discord {
            tasks.push(tokio::spawn(discord::run(
                discord.clone(),
                start("discord"),
            )));
        }
        if let Some(mattermost) = &settings.mattermost {
            let start = start("mattermost");
            tasks.push(tokio::spawn(mattermost::run(mattermost.clone(), start)));
        }
        if let Some(webhook) = &settings.webhook {
            tasks.push(tokio::spawn(webhook::run(
                webhook.clone(),
                start("webhook"),
            )));
        }
        Self {
            statuses,
            stop,
            tasks: Mutex::new(tasks),
        }
    }

    /// Each channel's status now.
    pub fn status(&self) -> Vec<ChannelStatus> {
        self.statuses.iter().map(Status::get).collect()
    }

    /// Stops every channel (deliveries under way end; the journal keeps their text, and
    /// the next tern that runs the channel delivers them).
    pub async fn stop(&self) {
        self.stop.cancel();
        let tasks = std::mem::take(
            &mut *self
                .tasks
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        let _ = tokio::time::timeout(STOP_BOUND, futures_util::future::join_all(tasks)).await;
    }
}
