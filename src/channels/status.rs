//! What each channel is doing, for `tern channels status` and the interface's status bar.

use serde::{Deserialize, Serialize};
use std::sync::{Arc, Mutex, PoisonError};

/// Where a channel's connection stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChannelState {
    /// Connecting for the first time.
    Starting,
    /// Connected (or listening, for webhooks) and taking inputs.
    Connected,
    /// Lost its connection and is connecting again.
    Reconnecting,
    /// Not running: it was stopped, or cannot run (`detail` says why).
    Stopped,
}

/// One channel's state as last reported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChannelStatus {
    /// `slack`, `discord`, `mattermost` or `webhook`.
    pub name: String,
    pub state: ChannelState,
    /// What it is connected or listening to, or why it stopped.
    pub detail: String,
    /// When it last received anything from its platform (Unix milliseconds).
    pub last_event_ms: Option<i64>,
    /// The last error, with when it happened (Unix milliseconds).
    pub last_error: Option<(i64, String)>,
    /// Inputs it delivered to sessions.
    pub inputs: u64,
    /// Messages it posted or edited.
    pub posts: u64,
}

impl ChannelStatus {
    /// One line for the person: `slack: connected (workspace T1 as @tern) · 3 inputs · 5 posts
    /// · last event 12 s ago`.
    pub fn line(&self, now_ms: i64) -> String {
        let state = match self.state {
            ChannelState::Starting => "starting",
            ChannelState::Connected => "connected",
            ChannelState::Reconnecting => "reconnecting",
            ChannelState::Stopped => "stopped",
        };
        let mut line = format!("{}: {state}", self.name);
        if !self.detail.is_empty() {
            line.push_str(&format!(" ({})", self.detail));
        }
        line.push_str(&format!(" · {} inputs · {} posts", self.inputs, self.posts));
        if let Some(at) = self.last_event_ms {
            line.push_str(&format!(" · last event {} ago", ago(now_ms - at)));
        }
        if let Some((at, error)) = &self.last_error {
            line.push_str(&format!(" · last error {} ago: {error}", ago(now_ms - at)));
        }
        line
    }
}

fn ago(ms: i64) -> String {
    let secs = (ms / 1000).max(0);
    match secs {
        0..=119 => format!("{secs} s"),
        120..=7199 => format!("{} min", secs / 60),
        _ => format!("{} h", secs / 3600),
    }
}

/// The milliseconds since the Unix epoch now.
pub fn now_ms() -> i64 {
    jiff::Timestamp::now().as_millisecond()
}

/// A channel's own handle on its status: what its adapter reports.
#[derive(Debug, Clone)]
pub struct Status(Arc<Mutex<ChannelStatus>>);

impl Status {
    pub fn new(name: &str) -> Self {
        Self(Arc::new(Mutex::new(ChannelStatus {
            name: name.to_owned(),
            state: ChannelState::Starting,
            detail: String::new(),
            last_event_ms: None,
            last_error: None,
            inputs: 0,
            posts: 0,
        })))
    }

    fn with<T>(&self, f: impl FnOnce(&mut ChannelStatus) -> T) -> T {
        f(&mut self.0.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// The status now.
    pub fn get(&self) -> ChannelStatus {
        self.with(|status| status.clone())
    }

    pub fn set(&self, state: ChannelState, detail: impl Into<String>) {
        let detail = detail.into();
        self.with(|status| {
            status.state = state;
            status.detail = detail;
        });
    }

    /// Something arrived from the platform.
    pub fn heard(&self) {
        self.with(|status| status.last_event_ms = Some(now_ms()));
    }

    pub fn error(&self, error: impl Into<String>) {
        let error = error.into();
        // Kept on the board; logged quietly, since anyone who reaches a listening port can
        // cause one.
        tracing::debug!(channel = %self.with(|s| s.name.clone()), %error, "channel error");
        self.with(|status| status.last_error = Some((now_ms(), error)));
    }

    pub fn input(&self) {
        self.with(|status| status.inputs += 1);
    }

    pub fn posted(&self) {
        self.with(|status| status.posts += 1);
    }
}
