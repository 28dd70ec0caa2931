//! Slack over Socket Mode into `tern serve`, against a fake Slack: the Web API methods tern
//! calls and a Socket Mode WebSocket that says hello, pushes envelopes, records the acks and
//! disconnects on demand.

use super::fake::{Fake, HttpResponse};
use super::{Served, text};
use crate::support::Reply;
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message as Ws;

const WAIT: Duration = Duration::from_secs(20);

/// What the fake Slack holds between requests.
#[derive(Default)]
struct State {
    /// Frames sent to tern on the current connection.
    outbox: Option<mpsc::UnboundedSender<Ws>>,
    /// Socket connections made.
    connections: usize,
    /// Envelope ids tern acknowledged, and when.
    acks: Vec<(String, Instant)>,
    /// `auth.test` answers `invalid_auth`.
    refuse_auth: bool,
    /// `chat.update` answers 429 this many more times.
    updates_limited: usize,
}

struct SlackFake {
    fake: Fake,
    state: Arc<Mutex<State>>,
    ts: Arc<AtomicUsize>,
}

impl SlackFake {
    fn start() -> Self {
        let state = Arc::new(Mutex::new(State::default()));
        let ts = Arc::new(AtomicUsize::new(100));
        let addr = Arc::new(Mutex::new(String::new()));
        let (http_state, http_ts, http_addr) = (state.clone(), ts.clone(), addr.clone());
        let http = Arc::new(move |request: &super::fake::HttpRequest| {
            let ok = |extra: Value| {
                let mut body = json!({"ok": true});
                if let (Some(body), Some(extra)) = (body.as_object_mut(), extra.as_object()) {
                    body.extend(extra.clone());
                }
                HttpResponse::json(200, body)
            };
            let mut state = http_state.lock().unwrap();
            match request.path.as_str() {
                "/api/auth.test" if state.refuse_auth => {
                    HttpResponse::json(200, json!({"ok": false, "error": "invalid_auth"}))
                }
                "/api/auth.test" => ok(
                    json!({"team_id": "T1", "user_id": "UBOT", "bot_id": "BBOT", "user": "tern"}),
                ),
                "/api/apps.connections.open" => {
                    assert_eq!(request.header("authorization"), Some("Bearer xapp-test"));
                    let n = state.connections;
                    ok(json!({"url": format!("ws://{}/link/?n={n}", http_addr.lock().unwrap())}))
                }
                "/api/chat.postMessage" => {
                    assert_eq!(request.header("authorization"), Some("Bearer xoxb-test"));
                    let ts = format!("9.{}", http_ts.fetch_add(1, Ordering::SeqCst));
                    ok(json!({"channel": request.json()["channel"], "ts": ts}))
                }
                "/api/chat.update" if state.updates_limited > 0 => {
                    state.updates_limited -= 1;
                    HttpResponse::json(429, json!({"ok": false, "error": "ratelimited"}))
                        .with_header("retry-after", "1")
                }
                "/api/chat.update" | "/api/chat.postEphemeral" => ok(json!({})),
                _ => HttpResponse::json(404, json!({"ok": false, "error": "unknown_method"})),
            }
        });
        let ws_state = state.clone();
        let ws = Arc::new(
            move |socket: tokio_tungstenite::WebSocketStream<tokio::net::TcpStream>,
                  _path: String| {
                let state = ws_state.clone();
                let run: futures_util::future::BoxFuture<'static, ()> = Box::pin(async move {
                    let (mut sink, mut stream) = socket.split();
                    let (tx, mut rx) = mpsc::unbounded_channel();
                    {
                        let mut state = state.lock().unwrap();
                        state.connections += 1;
                        state.outbox = Some(tx.clone());
                    }
                    let hello = json!({"type": "hello", "num_connections": 1,
                    "debug_info": {"host": "fake", "approximate_connection_time": 18060},
                    "connection_info": {"app_id": "A1"}});
                    let _ = tx.send(Ws::Text(hello.to_string().into()));
                    loop {
                        tokio::select! {
                            out = rx.recv() => match out {
                                Some(frame) => {
                                    let closing = matches!(frame, Ws::Close(_));
                                    if sink.send(frame).await.is_err() || closing {
                                        break;
                                    }
                                }
                                None => break,
                            },
                            heard = stream.next() => match heard {
                                Some(Ok(Ws::Text(text))) => {
                                    if let Ok(value) = serde_json::from_str::<Value>(&text)
                                        && let Some(id) = value["envelope_id"].as_str()
                                    {
                                        state.lock().unwrap().acks.push((id.to_owned(), Instant::now()));
                                    }
                                }
                                Some(Ok(_)) => {}
                                _ => break,
                            },
                        }
                    }
                });
                run
            },
        );
        let fake = Fake::start(http, Some(ws));
        *addr.lock().unwrap() = fake.addr.to_string();
        Self { fake, state, ts }
    }

    fn config(&self, extra: &str) -> String {
        format!(
            "[session]\nsidecar_titles = false\n[channels.slack]\napi_url = \"{}/api\"\n\
             allow_users = [\"U1\"]\nallow_channels = [\"C1\"]\nedit_interval = \"200ms\"\n{extra}",
            self.fake.base_url()
        )
    }

    fn serve(&self) -> Served {
        let served = Served::start(
            &self.config(""),
            &[
                ("SLACK_APP_TOKEN", "xapp-test"),
                ("SLACK_BOT_TOKEN", "xoxb-test"),
            ],
        );
        self.wait_connections(1);
        served
    }

    fn wait_connections(&self, n: usize) {
        let deadline = Instant::now() + WAIT;
        while self.state.lock().unwrap().connections < n {
            assert!(Instant::now() < deadline, "tern never made connection {n}");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Sends a frame on the current connection.
    fn send(&self, frame: Value) {
        let outbox = self
            .state
            .lock()
            .unwrap()
            .outbox
            .clone()
            .expect("connected");
        outbox
            .send(Ws::Text(frame.to_string().into()))
            .expect("the connection is open");
    }

    /// Pushes an `events_api` envelope carrying `event`; its envelope id.
    fn event(&self, event_id: &str, event: Value) -> String {
        let envelope = format!("env-{event_id}-{}", self.ts.fetch_add(1, Ordering::SeqCst));
        self.send(json!({
            "envelope_id": envelope,
            "type": "events_api",
            "accepts_response_payload": false,
            "retry_attempt": 0,
            "payload": {"type": "event_callback", "team_id": "T1", "event_id": event_id, "event": event},
        }));
        envelope
    }

    fn mention(&self, event_id: &str, user: &str, ts: &str, text: &str) -> String {
        self.event(
            event_id,
            json!({"type": "app_mention", "user": user, "text": format!("<@UBOT> {text}"),
                   "ts": ts, "channel": "C1", "event_ts": ts}),
        )
    }

    fn acked(&self, envelope: &str) -> bool {
        self.state
            .lock()
            .unwrap()
            .acks
            .iter()
            .any(|(id, _)| id == envelope)
    }

    fn wait_acked(&self, envelope: &str) {
        let deadline = Instant::now() + WAIT;
        while !self.acked(envelope) {
            assert!(
                Instant::now() < deadline,
                "envelope {envelope} never acknowledged"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Waits until `check` holds, or fails naming `what`.
    fn wait(&self, what: &str, check: impl Fn() -> bool) {
        let deadline = Instant::now() + WAIT;
        while !check() {
            assert!(
                Instant::now() < deadline,
                "{what} never happened: {:#?}",
                self.updates()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Whether a message was posted or updated to end with `text`.
    fn shown(&self, text: &str) -> bool {
        let posted = self.fake.to("/api/chat.postMessage");
        posted
            .iter()
            .map(|r| r.json())
            .chain(self.updates())
            .any(|b| b["text"].as_str().is_some_and(|t| t.ends_with(text)))
    }

    /// The bodies of every `chat.update` so far.
    fn updates(&self) -> Vec<Value> {
        self.fake
            .to("/api/chat.update")
            .iter()
            .map(|r| r.json())
            .collect()
    }
}

#[test]
fn a_mention_is_acknowledged_answered_in_its_thread_and_streamed_by_updates() {
    let slack = SlackFake::start();
    let mut served = slack.serve();
    served.mock.push(
        Reply::text("First part of the answer, then the rest of it.")
            .delay_between_events(Duration::from_millis(60)),
    );
    let envelope = slack.mention("Ev1", "U1", "1700.0001", "why is CI red?");
    slack.wait_acked(&envelope);
    served.mock.wait_for_model_requests_blocking(1, WAIT);
    let request = &served.mock.model_requests()[0];
    assert!(
        request.texts().iter().any(|t| t.contains("why is CI red?")),
        "{:?}",
        request.texts()
    );
    assert!(!request.texts().iter().any(|t| t.contains("<@UBOT>")));

    slack.wait("the final update", || {
        slack
            .updates()
            .last()
            .is_some_and(|u| u["text"] == "First part of the answer, then the rest of it.")
    });
    let post = slack.fake.to("/api/chat.postMessage")[0].json();
    assert_eq!(
        (post["channel"].as_str(), post["thread_ts"].as_str()),
        (Some("C1"), Some("1700.0001"))
    );

    // The same session is the store's: a terminal continues it.
    let listed = text(&served.tern(&["sessions", "list", "--json"]));
    let id = listed
        .split('"')
        .find(|part| part.len() == 36 && part.chars().filter(|c| *c == '-').count() == 4)
        .unwrap_or_else(|| panic!("a session id in {listed}"))
        .to_owned();
    served.mock.push(Reply::text("Continued in the terminal."));
    let output = served.tern(&["run", "--session", &id, "and now?"]);
    assert!(
        text(&output).contains("Continued in the terminal."),
        "{}",
        text(&output)
    );
    let status = text(&served.tern(&["channels", "status"]));
    assert!(
        status.contains("slack: connected (workspace T1 as @tern)"),
        "{status}"
    );
    assert!(served.stop().success(), "{}", served.stderr());
}

#[test]
fn retries_doubles_strangers_and_echoes_start_nothing() {
    let slack = SlackFake::start();
    let served = slack.serve();
    served.mock.push(Reply::text("once"));
    let first = slack.mention("Ev1", "U1", "1.1", "hello");
    // Slack retries the envelope; the `message` event of the same mention comes too.
    let retried = slack.mention("Ev1", "U1", "1.1", "hello");
    let double = slack.event(
        "Ev2",
        json!({"type": "message", "channel_type": "channel", "user": "U1",
               "text": "<@UBOT> hello", "ts": "1.1", "channel": "C1"}),
    );
    let stranger_dm = slack.event(
        "Ev3",
        json!({"type": "message", "channel_type": "im", "user": "U7", "text": "hi", "ts": "2.2", "channel": "D7"}),
    );
    let echo = slack.event(
        "Ev4",
        json!({"type": "message", "channel_type": "channel", "user": "UBOT", "bot_id": "BBOT",
               "text": "<@UBOT> echo", "ts": "3.3", "channel": "C1"}),
    );
    let edit = slack.event(
        "Ev5",
        json!({"type": "message", "subtype": "message_changed", "channel": "C1", "ts": "3.4"}),
    );
    let no_mention = slack.event(
        "Ev6",
        json!({"type": "message", "channel_type": "channel", "user": "U1", "text": "just chatting", "ts": "4.4", "channel": "C1"}),
    );
    for envelope in [
        &first,
        &retried,
        &double,
        &stranger_dm,
        &echo,
        &edit,
        &no_mention,
    ] {
        slack.wait_acked(envelope);
    }
    slack.wait("the answer", || slack.shown("once"));
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(served.mock.model_requests().len(), 1);
}

#[test]
fn every_disconnect_gets_a_fresh_url_but_link_disabled_stops() {
    let slack = SlackFake::start();
    let served = slack.serve();
    for reason in ["warning", "refresh_requested", "too_many_websockets"] {
        let before = slack.state.lock().unwrap().connections;
        slack.send(json!({"type": "disconnect", "reason": reason, "debug_info": {"host": "fake"}}));
        slack.wait_connections(before + 1);
    }
    assert_eq!(slack.fake.to("/api/apps.connections.open").len(), 4);
    // A dropped socket too.
    let before = slack.state.lock().unwrap().connections;
    let outbox = slack.state.lock().unwrap().outbox.clone().unwrap();
    outbox.send(Ws::Close(None)).unwrap();
    slack.wait_connections(before + 1);

    // Work goes on over the new connection.
    served.mock.push(Reply::text("still here"));
    let envelope = slack.mention("Ev9", "U1", "5.5", "still there?");
    slack.wait_acked(&envelope);
    slack.wait("the answer", || slack.shown("still here"));

    slack.send(
        json!({"type": "disconnect", "reason": "link_disabled", "debug_info": {"host": "fake"}}),
    );
    let deadline = Instant::now() + WAIT;
    loop {
        let status = text(&served.tern(&["channels", "status"]));
        if status.contains("slack: stopped (Socket Mode was switched off") {
            break;
        }
        assert!(Instant::now() < deadline, "{status}");
        std::thread::sleep(Duration::from_millis(100));
    }
    let connections = slack.state.lock().unwrap().connections;
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        slack.state.lock().unwrap().connections,
        connections,
        "no reconnect"
    );
}

#[test]
fn a_refused_token_stops_the_channel_and_says_why() {
    let slack = SlackFake::start();
    slack.state.lock().unwrap().refuse_auth = true;
    let served = Served::start(
        &slack.config(""),
        &[
            ("SLACK_APP_TOKEN", "xapp-test"),
            ("SLACK_BOT_TOKEN", "xoxb-test"),
        ],
    );
    let deadline = Instant::now() + WAIT;
    loop {
        let status = text(&served.tern(&["channels", "status"]));
        if status.contains("slack: stopped (auth.test: invalid_auth: check SLACK_BOT_TOKEN") {
            break;
        }
        assert!(Instant::now() < deadline, "{status}");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(slack.state.lock().unwrap().connections, 0);
}

#[test]
fn an_approval_is_a_button_only_allowed_people_can_press() {
    let slack = SlackFake::start();
    let served = slack.serve();
    served.mock.push(Reply::tool_call(
        "shell_execute",
        json!({"command": "touch approved.txt"}),
    ));
    served.mock.push(Reply::text("Made the file."));
    let envelope = slack.mention("Ev1", "U1", "7.7", "make the file");
    slack.wait_acked(&envelope);
    slack.wait("the approval question", || {
        slack
            .fake
            .to("/api/chat.postMessage")
            .iter()
            .any(|r| r.json()["blocks"].is_array())
    });
    let question = slack
        .fake
        .to("/api/chat.postMessage")
        .into_iter()
        .map(|r| r.json())
        .find(|b| b["blocks"].is_array())
        .unwrap();
    assert!(
        question["text"]
            .as_str()
            .unwrap()
            .contains("touch approved.txt"),
        "{question}"
    );
    let token = question["blocks"][1]["elements"][0]["value"]
        .as_str()
        .unwrap()
        .to_owned();
    let click = |user: &str, action: &str| {
        json!({"envelope_id": format!("click-{user}-{action}"), "type": "interactive",
               "accepts_response_payload": false,
               "payload": {"type": "block_actions", "user": {"id": user, "username": user, "team_id": "T1"},
                   "container": {"type": "message", "message_ts": "9.200", "channel_id": "C1", "is_ephemeral": false},
                   "channel": {"id": "C1"}, "message": {"ts": "9.200", "thread_ts": "7.7"},
                   "actions": [{"action_id": action, "block_id": "b1", "value": token, "type": "button", "action_ts": "1"}]}})
    };
    // Someone else's click answers nothing.
    slack.send(click("U7", "approve"));
    slack.wait("the refusal", || {
        !slack.fake.to("/api/chat.postEphemeral").is_empty()
    });
    let refusal = slack.fake.to("/api/chat.postEphemeral")[0].json();
    assert_eq!(refusal["user"], "U7");
    std::thread::sleep(Duration::from_millis(300));
    assert!(!served.home.project().join("approved.txt").exists());

    slack.send(click("U1", "approve"));
    slack.wait("the answer", || slack.shown("Made the file."));
    assert!(served.home.project().join("approved.txt").exists());
    // The question lost its buttons.
    assert!(
        slack
            .updates()
            .iter()
            .any(|u| u["text"] == "✅ Approved once"
                && u["blocks"].as_array().is_some_and(|b| b.len() == 1))
    );
}

#[test]
fn a_rate_limited_update_delays_the_reply_and_loses_none_of_it() {
    let slack = SlackFake::start();
    let served = slack.serve();
    slack.state.lock().unwrap().updates_limited = 2;
    let long: String = (0..30)
        .map(|i| format!("Line {i} of a long answer.\n"))
        .collect();
    served
        .mock
        .push(Reply::text(long.clone()).delay_between_events(Duration::from_millis(30)));
    slack.mention("Ev1", "U1", "8.8", "a long one");
    slack.wait("the final text", || {
        slack
            .updates()
            .last()
            .is_some_and(|u| u["text"].as_str() == Some(long.trim_end()))
    });
    let limited = slack.fake.to("/api/chat.update").len();
    assert!(limited >= 3, "two 429s, then the update: {limited}");
}
