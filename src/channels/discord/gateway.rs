//! The Discord Gateway (v10, JSON, no compression): one WebSocket connection at a time,
//! kept alive by heartbeats, identified once and resumed after every drop Discord allows to
//! be resumed, so events missed meanwhile are replayed. Dispatches go to the adapter as
//! they arrive; the decisions (what a close code means, when a heartbeat is due, when a
//! connection is dead) are pure functions below the loop.

use super::super::deliver::PostError;
use super::super::status::{ChannelState, Status};
use super::rest::Rest;
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use std::time::Duration;
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_util::sync::CancellationToken;

/// GUILDS, GUILD_MESSAGES, DIRECT_MESSAGES and MESSAGE_CONTENT.
pub const INTENTS: u64 = 1 | 1 << 9 | 1 << 12 | 1 << 15;
/// What tern closes with when it means to resume: anything but 1000 and 1001 keeps the
/// session.
const CLOSE_TO_RESUME: u16 = 4000;
/// Longest wait for the WebSocket to open, and then for Hello.
const OPEN_WITHIN: Duration = Duration::from_secs(20);
/// Longest wait between reconnects.
const MAX_BACKOFF: Duration = Duration::from_secs(60);
/// Failed connections in a row after which a resume is given up for a fresh session.
const RESUME_TRIES: u32 = 3;

/// The gateway session kept across connections: what a resume needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resumable {
    pub session_id: String,
    pub resume_url: String,
}

/// Why a connection ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ended {
    /// Discord closed it, with this code when it gave one.
    Closed(Option<u16>),
    /// It broke or could not be opened.
    Dropped,
    /// Discord asked for a reconnect (op 7).
    Reconnect,
    /// Discord called the session invalid (op 9), resumable or not.
    Invalid { resumable: bool },
    /// No heartbeat ack came before the next beat.
    Zombie,
    /// tern is stopping.
    Stopped,
}

/// What to do after a connection ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    /// Reconnect to the resume address and resume the session.
    Resume,
    /// Start a new session (a fresh Identify).
    Identify,
    /// Never reconnect: this says why and what to fix.
    Stop(String),
}

/// The close codes after which Discord must not be reconnected to, with the fix.
pub fn fatal(code: u16, token_var: &str) -> Option<String> {
    let fix = match code {
        4004 => format!("the token was refused: check {token_var}"),
        4010 => "an invalid shard was sent".to_owned(),
        4011 => "the bot is in too many servers for one connection (sharding required)".to_owned(),
        4012 => "the gateway refused API version 10: check [channels.discord] api_url".to_owned(),
        4013 => "invalid intents were sent".to_owned(),
        4014 => "disallowed intents: switch on Message Content in the Developer Portal \
                 (Bot → Privileged Gateway Intents)"
            .to_owned(),
        _ => return None,
    };
    Some(format!("Discord closed the gateway with {code}: {fix}"))
}

/// What follows `ended`.
pub fn next_after(ended: &Ended, token_var: &str) -> Next {
    match ended {
        Ended::Closed(Some(code)) => match fatal(*code, token_var) {
            Some(why) => Next::Stop(why),
            // An invalid sequence or a timed-out session cannot be resumed.
            None if matches!(code, 4007 | 4009) => Next::Identify,
            None => Next::Resume,
        },
        Ended::Invalid { resumable: false } => Next::Identify,
        Ended::Stopped => Next::Stop("stopped".to_owned()),
        Ended::Closed(None)
        | Ended::Dropped
        | Ended::Reconnect
        | Ended::Zombie
        | Ended::Invalid { resumable: true } => Next::Resume,
    }
}

/// How long to wait before connecting again after `ended`, `failures` connections in a row
/// having failed; `jitter` in 0..1.
pub fn wait_before(ended: &Ended, failures: u32, jitter: f64) -> Duration {
    match ended {
        // Asked for, by a healthy server: at once.
        Ended::Reconnect | Ended::Invalid { resumable: true } if failures == 0 => Duration::ZERO,
        // Discord asks for 1–5 s before a new Identify.
        Ended::Invalid { resumable: false } => Duration::from_secs_f64(1.0 + 4.0 * jitter),
        _ => {
            let base = Duration::from_millis(250) * 2u32.saturating_pow(failures.min(10));
            base.min(MAX_BACKOFF).mul_f64(0.75 + jitter / 2.0)
        }
    }
}

/// A connection's heartbeat: when the next beat is due and whether the last one was acked.
#[derive(Debug, Clone)]
pub struct Heart {
    interval: Duration,
    due: Instant,
    acked: bool,
}

/// What a due beat means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Beat {
    /// Send a heartbeat.
    Send,
    /// The last one was never acked: the connection is dead.
    Zombie,
}

impl Heart {
    /// After Hello at `now`: the first beat after `interval * jitter` (`jitter` in 0..1).
    pub fn new(interval: Duration, now: Instant, jitter: f64) -> Self {
        Self {
            interval,
            due: now + interval.mul_f64(jitter.clamp(0.0, 1.0)),
            acked: true,
        }
    }

    /// When the next beat is due.
    pub fn due(&self) -> Instant {
        self.due
    }

    /// The beat due at `now`: sent, unless the one before is still unacked.
    pub fn beat(&mut self, now: Instant) -> Beat {
        if !self.acked {
            return Beat::Zombie;
        }
        self.acked = false;
        self.due = now + self.interval;
        Beat::Send
    }

    /// Discord acked (op 11).
    pub fn ack(&mut self) {
        self.acked = true;
    }
}

/// A frame as Discord sends it.
#[derive(Debug, Clone, PartialEq)]
pub struct Frame {
    pub op: u64,
    pub d: Value,
    pub s: Option<u64>,
    pub t: Option<String>,
}

impl Frame {
    /// `text` as a frame; `None` for anything else.
    pub fn parse(text: &str) -> Option<Self> {
        let value: Value = serde_json::from_str(text).ok()?;
        Some(Self {
            op: value["op"].as_u64()?,
            d: value["d"].clone(),
            s: value["s"].as_u64(),
            t: value["t"].as_str().map(str::to_owned),
        })
    }
}

/// The bot as READY names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Me {
    pub id: String,
    pub name: String,
}

/// One bot's gateway session.
pub struct Gateway<'a> {
    rest: &'a Rest,
    token: String,
    token_var: String,
    status: Status,
    stop: CancellationToken,
    resumable: Option<Resumable>,
    seq: Option<u64>,
    me: Option<Me>,
    /// The address of the connection under way.
    url: String,
    /// Whether the connection under way reached READY or RESUMED.
    healthy: bool,
}

impl<'a> Gateway<'a> {
    /// A gateway session for the bot with `token` (read from `token_var`), not connected
    /// yet.
    pub fn new(
        rest: &'a Rest,
        token: &str,
        token_var: &str,
        status: Status,
        stop: CancellationToken,
    ) -> Self {
        Self {
            rest,
            token: token.to_owned(),
            token_var: token_var.to_owned(),
            status,
            stop,
            resumable: None,
            seq: None,
            me: None,
            url: String::new(),
            healthy: false,
        }
    }

    /// Connects and reconnects until tern stops or Discord refuses for good (the status
    /// says why); every dispatch (`t`, `d`) goes to `dispatch`.
    pub async fn run(&mut self, dispatch: &(dyn Fn(&str, &Value) + Sync)) {
        let mut failures = 0u32;
        loop {
            let url = match self.resumable.as_ref() {
                Some(resumable) => resumable.resume_url.clone(),
                None => match self.rest.gateway_url().await {
                    Ok(url) => url,
                    Err(PostError::Failed(why)) => {
                        self.status.set(ChannelState::Stopped, why);
                        return;
                    }
                    Err(PostError::Later(wait)) => {
                        failures += 1;
                        let wait =
                            wait.max(wait_before(&Ended::Dropped, failures, fastrand::f64()));
                        self.status.set(
                            ChannelState::Reconnecting,
                            "Discord's API cannot be reached; trying again",
                        );
                        if !self.sleep(wait).await {
                            break;
                        }
                        continue;
                    }
                },
            };
            self.healthy = false;
            let ended = self.connect(&url, dispatch).await;
            failures = if self.healthy { 0 } else { failures + 1 };
            match next_after(&ended, &self.token_var) {
                Next::Stop(_) if ended == Ended::Stopped => break,
                Next::Stop(why) => {
                    self.status.set(ChannelState::Stopped, why);
                    return;
                }
                Next::Resume if failures < RESUME_TRIES => {}
                Next::Resume | Next::Identify => {
                    self.resumable = None;
                    self.seq = None;
                }
            }
            tracing::debug!(?ended, failures, "the Discord gateway connection ended");
            if matches!(ended, Ended::Closed(_) | Ended::Zombie) {
                self.status.error(reconnecting(&ended));
            }
            self.status
                .set(ChannelState::Reconnecting, reconnecting(&ended));
            if !self
                .sleep(wait_before(&ended, failures, fastrand::f64()))
                .await
            {
                break;
            }
        }
        self.status.set(ChannelState::Stopped, "stopped");
    }

    /// Sleeps `wait`; false when tern stops meanwhile.
    async fn sleep(&self, wait: Duration) -> bool {
        tokio::select! {
            () = self.stop.cancelled() => false,
            () = tokio::time::sleep(wait) => true,
        }
    }

    /// One connection, from open to end.
    async fn connect(&mut self, url: &str, dispatch: &(dyn Fn(&str, &Value) + Sync)) -> Ended {
        self.url = url.to_owned();
        let address = format!("{}/?v=10&encoding=json", url.trim_end_matches('/'));
        let opened = tokio::select! {
            () = self.stop.cancelled() => return Ended::Stopped,
            opened = tokio::time::timeout(OPEN_WITHIN, tokio_tungstenite::connect_async_with_config(&address, None, true)) => opened,
        };
        let socket = match opened {
            Ok(Ok((socket, _))) => socket,
            Ok(Err(err)) => {
                self.status
                    .error(format!("the Discord gateway could not be opened: {err}"));
                return Ended::Dropped;
            }
            Err(_) => {
                self.status
                    .error("the Discord gateway did not open within 20 s");
                return Ended::Dropped;
            }
        };
        let (mut write, mut read) = socket.split();
        let mut heart: Option<Heart> = None;
        let hello_by = Instant::now() + OPEN_WITHIN;
        let ended = loop {
            let due = heart.as_ref().map_or(hello_by, Heart::due);
            let mut out: Vec<Value> = Vec::new();
            let ended = tokio::select! {
                biased;
                () = self.stop.cancelled() => {
                    let closing = write.send(close(1000));
                    let _ = tokio::time::timeout(Duration::from_secs(1), closing).await;
                    return Ended::Stopped;
                }
                () = tokio::time::sleep_until(due) => match heart.as_mut() {
                    None => Some(Ended::Dropped),
                    Some(heart) => match heart.beat(Instant::now()) {
                        Beat::Send => {
                            out.push(json!({ "op": 1, "d": self.seq }));
                            None
                        }
                        Beat::Zombie => Some(Ended::Zombie),
                    },
                },
                message = read.next() => match message {
                    None => Some(Ended::Dropped),
                    Some(Err(err)) => {
                        self.status.error(format!("the Discord gateway connection broke: {err}"));
                        Some(Ended::Dropped)
                    }
                    Some(Ok(Message::Close(frame))) => {
                        Some(Ended::Closed(frame.map(|frame| u16::from(frame.code))))
                    }
                    Some(Ok(Message::Text(text))) => {
                        self.status.heard();
                        match Frame::parse(text.as_str()) {
                            Some(frame) => self.on_frame(frame, &mut heart, &mut out, dispatch),
                            None => None,
                        }
                    }
                    Some(Ok(_)) => None,
                },
            };
            for frame in out {
                if write
                    .send(Message::Text(frame.to_string().into()))
                    .await
                    .is_err()
                {
                    break;
                }
            }
            if let Some(ended) = ended {
                break ended;
            }
        };
        // Close ourselves unless Discord did; a resume needs a code other than 1000/1001.
        if !matches!(ended, Ended::Closed(_) | Ended::Dropped) {
            let code = match ended {
                Ended::Invalid { resumable: false } => 1000,
                _ => CLOSE_TO_RESUME,
            };
            let _ = tokio::time::timeout(Duration::from_secs(2), write.send(close(code))).await;
        }
        ended
    }

    /// Handles one frame; what to send goes to `out`; `Some` when the connection ends.
    fn on_frame(
        &mut self,
        frame: Frame,
        heart: &mut Option<Heart>,
        out: &mut Vec<Value>,
        dispatch: &(dyn Fn(&str, &Value) + Sync),
    ) -> Option<Ended> {
        match frame.op {
            0 => {
                if let Some(seq) = frame.s {
                    self.seq = Some(seq);
                }
                let name = frame.t.as_deref().unwrap_or_default();
                match name {
                    "READY" => self.on_ready(&frame.d),
                    "RESUMED" => self.on_resumed(),
                    _ => {}
                }
                dispatch(name, &frame.d);
                None
            }
            1 => {
                out.push(json!({ "op": 1, "d": self.seq }));
                None
            }
            7 => Some(Ended::Reconnect),
            9 => Some(Ended::Invalid {
                resumable: frame.d.as_bool().unwrap_or(false),
            }),
            10 => {
                // Discord says about 41 s; anything past ten minutes is not a heartbeat.
                let interval = frame.d["heartbeat_interval"]
                    .as_u64()
                    .filter(|ms| *ms > 0)
                    .unwrap_or(41_250)
                    .min(600_000);
                *heart = Some(Heart::new(
                    Duration::from_millis(interval),
                    Instant::now(),
                    fastrand::f64(),
                ));
                out.push(self.hello_answer());
                None
            }
            11 => {
                if let Some(heart) = heart.as_mut() {
                    heart.ack();
                }
                None
            }
            _ => None,
        }
    }

    /// Identify, or Resume when a session can be resumed.
    fn hello_answer(&self) -> Value {
        match &self.resumable {
            Some(resumable) => json!({
                "op": 6,
                "d": { "token": self.token, "session_id": resumable.session_id, "seq": self.seq },
            }),
            None => json!({
                "op": 2,
                "d": {
                    "token": self.token,
                    "properties": { "os": std::env::consts::OS, "browser": "tern", "device": "tern" },
                    "intents": INTENTS,
                },
            }),
        }
    }

    fn on_ready(&mut self, d: &Value) {
        let user = &d["user"];
        let me = Me {
            id: user["id"].as_str().unwrap_or_default().to_owned(),
            name: user["username"].as_str().unwrap_or("?").to_owned(),
        };
        self.resumable = d["session_id"].as_str().map(|session_id| Resumable {
            session_id: session_id.to_owned(),
            resume_url: d["resume_gateway_url"]
                .as_str()
                .unwrap_or(&self.url)
                .to_owned(),
        });
        self.me = Some(me);
        self.on_resumed();
    }

    fn on_resumed(&mut self) {
        self.healthy = true;
        let detail = match &self.me {
            Some(me) => format!("as {} ({})", me.name, me.id),
            None => "connected".to_owned(),
        };
        self.status.set(ChannelState::Connected, detail);
    }
}

fn close(code: u16) -> Message {
    Message::Close(Some(CloseFrame {
        code: CloseCode::from(code),
        reason: "".into(),
    }))
}

/// The status detail while reconnecting after `ended`.
fn reconnecting(ended: &Ended) -> String {
    match ended {
        Ended::Closed(Some(code)) => {
            format!("Discord closed the gateway with {code}; reconnecting")
        }
        Ended::Closed(None) | Ended::Dropped => {
            "the gateway connection dropped; reconnecting".to_owned()
        }
        Ended::Reconnect => "Discord asked for a reconnect".to_owned(),
        Ended::Invalid { .. } => "Discord invalidated the session; reconnecting".to_owned(),
        Ended::Zombie => "no heartbeat ack came; reconnecting".to_owned(),
        Ended::Stopped => "stopped".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_intents_are_guilds_messages_dms_and_content() {
        assert_eq!(INTENTS, 37377);
    }

    #[test]
    fn close_codes_that_must_not_reconnect_stop_with_the_fix() {
        for code in [4004, 4010, 4011, 4012, 4013, 4014] {
            let Next::Stop(why) = next_after(&Ended::Closed(Some(code)), "DISCORD_BOT_TOKEN")
            else {
                panic!("{code} reconnects");
            };
            assert!(why.contains(&code.to_string()), "{why}");
        }
        let Next::Stop(why) = next_after(&Ended::Closed(Some(4004)), "DISCORD_BOT_TOKEN") else {
            unreachable!()
        };
        assert!(why.contains("check DISCORD_BOT_TOKEN"), "{why}");
        let Next::Stop(why) = next_after(&Ended::Closed(Some(4014)), "X") else {
            unreachable!()
        };
        assert!(why.contains("Message Content"), "{why}");
    }

    #[test]
    fn other_ends_resume_or_identify_again() {
        let check =
            |ended: Ended, next: Next| assert_eq!(next_after(&ended, "T"), next, "{ended:?}");
        check(Ended::Closed(Some(4000)), Next::Resume);
        check(Ended::Closed(Some(1006)), Next::Resume);
        check(Ended::Closed(None), Next::Resume);
        check(Ended::Dropped, Next::Resume);
        check(Ended::Reconnect, Next::Resume);
        check(Ended::Zombie, Next::Resume);
        check(Ended::Invalid { resumable: true }, Next::Resume);
        check(Ended::Invalid { resumable: false }, Next::Identify);
        check(Ended::Closed(Some(4007)), Next::Identify);
        check(Ended::Closed(Some(4009)), Next::Identify);
    }

    #[test]
    fn waits_grow_with_failures_up_to_a_cap() {
        assert_eq!(wait_before(&Ended::Reconnect, 0, 0.5), Duration::ZERO);
        let fresh = wait_before(&Ended::Invalid { resumable: false }, 0, 0.0);
        assert_eq!(fresh, Duration::from_secs(1));
        let fresh = wait_before(&Ended::Invalid { resumable: false }, 0, 1.0);
        assert_eq!(fresh, Duration::from_secs(5));
        let first = wait_before(&Ended::Dropped, 1, 0.5);
        let later = wait_before(&Ended::Dropped, 4, 0.5);
        assert!(first < later, "{first:?} {later:?}");
        assert!(first <= Duration::from_secs(1), "{first:?}");
        assert!(wait_before(&Ended::Dropped, 40, 1.0) <= MAX_BACKOFF.mul_f64(1.25));
    }

    #[test]
    fn a_beat_without_an_ack_before_the_next_means_a_dead_connection() {
        let start = Instant::now();
        let interval = Duration::from_millis(100);
        let mut heart = Heart::new(interval, start, 0.5);
        assert_eq!(heart.due(), start + Duration::from_millis(50));
        assert_eq!(heart.beat(heart.due()), Beat::Send);
        assert_eq!(heart.due(), start + Duration::from_millis(150));
        heart.ack();
        assert_eq!(heart.beat(heart.due()), Beat::Send);
        // No ack this time.
        assert_eq!(heart.beat(heart.due()), Beat::Zombie);
    }

    #[test]
    fn frames_are_read_without_trusting_them() {
        let frame = Frame::parse(r#"{"op":0,"d":{"a":1},"s":42,"t":"MESSAGE_CREATE"}"#).unwrap();
        assert_eq!(frame.op, 0);
        assert_eq!(frame.s, Some(42));
        assert_eq!(frame.t.as_deref(), Some("MESSAGE_CREATE"));
        let hello = Frame::parse(r#"{"op":10,"d":{"heartbeat_interval":45000},"s":null,"t":null}"#)
            .unwrap();
        assert_eq!((hello.s, hello.t), (None, None));
        assert_eq!(Frame::parse("not json"), None);
        assert_eq!(Frame::parse(r#"{"op":"x"}"#), None);
        assert_eq!(Frame::parse("[1,2]"), None);
    }
}
