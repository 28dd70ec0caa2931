//! Slack over Socket Mode into `tern serve`, against a fake Slack (`fakes/slack.rs`): the
//! Web API methods tern calls and a Socket Mode WebSocket that says hello, pushes envelopes,
//! records the acks and disconnects on demand.

use super::fakes::slack::{SlackFake, WAIT};
use super::{Served, text};
use crate::support::Reply;
use serde_json::json;
use std::time::{Duration, Instant};
use tokio_tungstenite::tungstenite::Message as Ws;

/// `tern serve` against the fake.
trait Serve {
    fn serve(&self) -> Served;
}

impl Serve for SlackFake {
    fn serve(&self) -> Served {
        let served = Served::start(&self.config(""), &SlackFake::env());
        self.wait_connections(1);
        served
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
    // What the person did at the terminal stays out of the chat thread.
    std::thread::sleep(Duration::from_millis(500));
    assert!(!slack.shown("Continued in the terminal."));
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
