//! Mattermost into `tern serve`, against a fake server (`fakes/mattermost.rs`) that answers
//! `users/me`, posts and patches, and whose WebSocket takes the authentication challenge,
//! says `hello`, pushes `posted` and `reaction_added` events and records what the client
//! sends. Who is let in, threads, reconnects, a refused token, approvals by reaction, a 429
//! and the typing indicator, all through the real binary.

use super::Served;
use super::fakes::mattermost::{BOT, Chat, Post, Push, TOKEN, WITHIN, wait};
use super::text;
use crate::support::Reply;
use serde_json::json;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// `tern serve` with the fake and its token, once its socket is authenticated.
trait Serve {
    fn serve(&self) -> Served;
}

impl Serve for Chat {
    fn serve(&self) -> Served {
        let served = Served::start(&self.config(), &Chat::env());
        self.wait_logins(1);
        served
    }
}

/// A reply streamed word by word, slowly enough to be posted and then edited.
fn streamed(text: &str) -> Reply {
    Reply::text(text).delay_between_events(Duration::from_millis(120))
}

#[test]
fn a_mention_reaches_the_model_and_the_reply_streams_into_its_thread() {
    let chat = Chat::start();
    let mut served = chat.serve();
    let answer = "The build broke in parse_config because a comma is missing there.";
    served.mock.push(streamed(answer));
    chat.post(&Post::mention("p1", "u1", "@tern why did the build break?"));

    let (id, body) = chat.wait_shown("c1", answer);
    assert_eq!(body["root_id"], "p1", "the reply is in the post's thread");
    let patches = chat.patches(&id);
    assert!(
        !patches.is_empty() && body["message"] != answer,
        "posted while streaming, then patched: {}",
        chat.dump()
    );
    let request = &served.mock.model_requests()[0];
    let texts = request.texts();
    assert!(
        texts.iter().any(|t| t.contains("why did the build break?")),
        "{texts:?}"
    );
    assert!(
        !texts.iter().any(|t| t.contains("@tern why")),
        "the mention is taken out: {texts:?}"
    );
    // The typing indicator, in that thread, while the turn worked.
    let typing = chat.typing();
    assert!(!typing.is_empty(), "{}", chat.dump());
    assert_eq!(typing[0]["data"]["channel_id"], "c1");
    assert_eq!(typing[0]["data"]["parent_id"], "p1");
    assert!(typing[0]["seq"].as_u64().unwrap() > 1);

    // A reply in that thread needs no mention: tern talks there.
    served.mock.push(Reply::text("Yes, the tests pass."));
    chat.post(&Post::mention("p2", "u1", "and the tests?").in_thread("p1"));
    let (_, body) = chat.wait_shown("c1", "Yes, the tests pass.");
    assert_eq!(body["root_id"], "p1");
    assert_eq!(served.mock.model_requests().len(), 2);

    let status = text(&served.tern(&["channels", "status"]));
    assert!(status.contains("mattermost: connected"), "{status}");
    assert!(status.contains("as @tern on http://127.0.0.1"), "{status}");
    assert!(status.contains("2 inputs"), "{status}");
    assert!(served.stop().success(), "{}", served.stderr());
}

#[test]
fn a_direct_message_needs_no_mention_and_strangers_bots_and_itself_start_nothing() {
    let chat = Chat::start();
    let mut served = chat.serve();
    served.mock.push(Reply::text("Hello from tern."));

    // None of these may reach the model.
    chat.post(&Post::direct("x1", "u9", "a stranger's direct message"));
    chat.post(&Post::mention("x2", BOT, "@tern my own post"));
    chat.post(&Post {
        props: json!({"from_bot": "true"}),
        ..Post::mention("x3", "u1", "@tern another bot's post")
    });
    chat.post(&Post {
        kind: "system_join_channel".into(),
        ..Post::mention("x4", "u1", "@tern joined the channel")
    });
    chat.post(&Post {
        mentions: Vec::new(),
        ..Post::mention("x5", "u1", "talking among people")
    });
    chat.post(&Post {
        channel: "c2".into(),
        ..Post::mention("x6", "u1", "@tern in a channel not allowed")
    });
    chat.post(&Post {
        event: "post_edited",
        ..Post::mention("x7", "u1", "@tern an edit")
    });
    // Then a direct message from the allowed user, without a mention.
    chat.post(&Post::direct("d-1", "u1", "hello there"));

    let (_, body) = chat.wait_shown("d1", "Hello from tern.");
    assert_eq!(body["root_id"], "d-1");
    let requests = served.mock.model_requests();
    assert_eq!(requests.len(), 1, "{}", chat.dump());
    let texts = requests[0].texts().join("\n");
    assert!(texts.contains("hello there"), "{texts}");
    for ignored in [
        "stranger",
        "my own post",
        "another bot",
        "joined",
        "among people",
        "not allowed",
        "an edit",
    ] {
        assert!(!texts.contains(ignored), "{ignored} got in: {texts}");
    }
    assert_eq!(chat.posts().len(), 1, "{}", chat.dump());
    assert!(served.stop().success(), "{}", served.stderr());
}

#[test]
fn a_dropped_socket_is_opened_again_and_replayed_posts_count_once() {
    let chat = Chat::start();
    let mut served = chat.serve();
    served.mock.push(Reply::text("First answer."));
    chat.post(&Post::mention("p1", "u1", "@tern first"));
    chat.wait_shown("c1", "First answer.");

    chat.push(Push::Drop);
    chat.wait_logins(2);
    let challenges = chat
        .state
        .actions
        .lock()
        .unwrap()
        .iter()
        .filter(|a| a["action"] == "authentication_challenge" && a["data"]["token"] == TOKEN)
        .count();
    assert_eq!(challenges, 2, "authenticated again");
    // The server replays the first post; then a new one.
    served.mock.push(Reply::text("Second answer."));
    chat.post(&Post::mention("p1", "u1", "@tern first"));
    chat.post(&Post::mention("p3", "u1", "@tern second"));
    let (_, body) = chat.wait_shown("c1", "Second answer.");
    assert_eq!(body["root_id"], "p3");
    let requests = served.mock.model_requests();
    assert_eq!(requests.len(), 2, "the replay started nothing");
    assert!(requests[1].texts().iter().any(|t| t.contains("second")));
    assert!(served.stop().success(), "{}", served.stderr());
}

#[test]
fn a_post_made_while_the_socket_was_down_is_replayed_and_reaches_the_model_once() {
    let chat = Chat::start();
    let mut served = chat.serve();
    served.mock.push(Reply::text("First answer."));
    chat.post(&Post::mention("p1", "u1", "@tern first"));
    chat.wait_shown("c1", "First answer.");
    let first = chat.connection_id();

    // The socket drops; a post is made before tern is back (seq 2, after the hello and p1).
    chat.push(Push::Drop);
    served.mock.push(Reply::text("Missed answer."));
    chat.post(&Post::mention(
        "p2",
        "u1",
        "@tern written while you were away",
    ));
    chat.wait_logins(2);
    let (_, body) = chat.wait_shown("c1", "Missed answer.");
    assert_eq!(body["root_id"], "p2");
    let queries = chat.queries();
    assert_eq!(queries[0], "", "the first socket resumes nothing");
    assert_eq!(
        queries[1],
        format!("connection_id={first}&sequence_number=2"),
        "{queries:?}"
    );
    assert_eq!(chat.connection_id(), first, "the same connection, resumed");

    // A server that cannot replay starts a fresh connection: its hello is taken, the posts
    // seen already count once, and the next socket resumes the new connection.
    chat.state.forget.store(true, Ordering::SeqCst);
    chat.push(Push::Drop);
    chat.wait_logins(3);
    chat.state.forget.store(false, Ordering::SeqCst);
    let second = chat.connection_id();
    assert_ne!(second, first);
    served.mock.push(Reply::text("Third answer."));
    chat.post(&Post::mention(
        "p2",
        "u1",
        "@tern written while you were away",
    ));
    chat.post(&Post::mention("p3", "u1", "@tern third"));
    chat.wait_shown("c1", "Third answer.");
    chat.push(Push::Drop);
    chat.wait_logins(4);
    let queries = chat.queries();
    assert_eq!(
        queries[3],
        format!("connection_id={second}&sequence_number=3"),
        "{queries:?}"
    );

    let requests = served.mock.model_requests();
    assert_eq!(requests.len(), 3, "{}", chat.dump());
    let away = |i: usize| {
        requests[i]
            .texts()
            .iter()
            .any(|t| t.contains("written while you were away"))
    };
    assert!(away(1), "the missed post reached the model");
    assert!(!away(2), "the post seen again started nothing");
    let answers = chat
        .posts()
        .iter()
        .filter(|(id, _)| chat.shown(id) == "Missed answer.")
        .count();
    assert_eq!(answers, 1, "{}", chat.dump());
    assert!(served.stop().success(), "{}", served.stderr());
}

#[test]
fn a_refused_token_stops_the_channel_with_what_to_fix() {
    let chat = Chat::start();
    let served = Served::start(&chat.config(), &[("MATTERMOST_TOKEN", "wrong")]);
    served.wait_said("mattermost: stopped", WITHIN);
    let status = text(&served.tern(&["channels", "status"]));
    assert!(status.contains("mattermost: stopped"), "{status}");
    assert!(
        status.contains("refused the token in MATTERMOST_TOKEN"),
        "{status}"
    );
    assert!(status.contains("401"), "{status}");
    assert!(
        !status.contains("wrong"),
        "the token is never shown: {status}"
    );
    // Not tried again.
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(chat.fake.to("/api/v4/users/me").len(), 1);
    assert_eq!(chat.state.logins.load(Ordering::SeqCst), 0);

    // Taken by `users/me` but refused by the socket's challenge: stopped as well.
    let revoked = Chat::start();
    revoked.state.refuse_socket.store(true, Ordering::SeqCst);
    let served = Served::start(&revoked.config(), &[("MATTERMOST_TOKEN", TOKEN)]);
    served.wait_said("mattermost: stopped", WITHIN);
    let status = text(&served.tern(&["channels", "status"]));
    assert!(
        status.contains("refused the token in MATTERMOST_TOKEN on its WebSocket (bad token)"),
        "{status}"
    );

    let unset = Served::start(&chat.config(), &[]);
    unset.wait_said("mattermost: stopped", WITHIN);
    let status = text(&unset.tern(&["channels", "status"]));
    assert!(status.contains("MATTERMOST_TOKEN is not set"), "{status}");
}

#[test]
fn a_thumbs_up_from_an_allowed_user_approves_and_anyone_elses_answers_nothing() {
    let chat = Chat::start();
    let mut served = chat.serve();
    served.mock.push(Reply::tool_call(
        "shell_execute",
        json!({"command": "touch ran-after-approval"}),
    ));
    served.mock.push(Reply::text("Done, the file is there."));
    served.mock.push(Reply::text("Noted."));
    chat.post(&Post::direct("d-1", "u1", "make the file"));

    let mut question = None;
    wait(WITHIN, "the approval question", || {
        question = chat.posts().into_iter().find(|(_, body)| {
            body["message"]
                .as_str()
                .is_some_and(|m| m.contains("Approve `shell_execute`"))
        });
        question.is_some()
    });
    let (question, body) = question.unwrap();
    assert_eq!(body["root_id"], "d-1");
    assert!(body["message"].as_str().unwrap().contains(":+1:"), "{body}");
    let marker = served.home.project().join("ran-after-approval");
    // tern seeds the question with both reactions once it waits for them.
    wait(WITHIN, "the seeded reactions", || {
        chat.fake.to("/api/v4/reactions").len() >= 2
    });

    // Someone not allowed: told so, once; nothing runs.
    chat.react("u9", &question, "+1");
    chat.react("u9", &question, "+1");
    wait(WITHIN, "the note to the stranger", || {
        chat.posts().iter().any(|(_, body)| {
            body["message"]
                .as_str()
                .is_some_and(|m| m.contains("your reaction does not count"))
        })
    });
    // Chat text does not approve either.
    chat.post(&Post::direct("d-2", "u1", "yes, approve it").in_thread("d-1"));
    std::thread::sleep(Duration::from_millis(500));
    assert!(!marker.exists(), "ran without approval");
    assert_eq!(served.mock.model_requests().len(), 1);

    chat.react("u1", &question, "+1");
    wait(WITHIN, "the question settled", || {
        chat.shown(&question).contains("Approved once")
    });
    assert!(
        chat.shown(&question).contains("Approve `shell_execute`"),
        "the question stays above its answer: {}",
        chat.shown(&question)
    );
    chat.wait_shown("d1", "Done, the file is there.");
    assert!(marker.exists(), "the approved call ran");
    let notes = chat
        .posts()
        .iter()
        .filter(|(_, b)| {
            b["message"]
                .as_str()
                .unwrap_or_default()
                .contains("does not count")
        })
        .count();
    assert_eq!(notes, 1, "told once");
    assert!(served.stop().success(), "{}", served.stderr());
}

#[test]
fn a_429_on_an_edit_waits_and_the_final_text_still_arrives() {
    let chat = Chat::start();
    let mut served = chat.serve();
    chat.state.refuse_patches.store(2, Ordering::SeqCst);
    let answer = "Every word of this answer arrives in the end despite the rate limit.";
    served.mock.push(streamed(answer));
    chat.post(&Post::mention("p1", "u1", "@tern go"));
    let (id, _) = chat.wait_shown("c1", answer);
    assert_eq!(
        chat.state.refused.load(Ordering::SeqCst),
        2,
        "{}",
        chat.dump()
    );
    assert_eq!(chat.patches(&id).last().map(String::as_str), Some(answer));
    assert!(served.stop().success(), "{}", served.stderr());
}

#[test]
fn a_thumbs_down_denies_the_call_naming_who_denied_it() {
    let chat = Chat::start();
    let mut served = chat.serve();
    served.mock.push(Reply::tool_call(
        "shell_execute",
        json!({"command": "touch never-made"}),
    ));
    served.mock.push(Reply::text("Understood, I left it."));
    chat.post(&Post::mention("p1", "u1", "@tern make the file"));
    let mut question = None;
    wait(WITHIN, "the approval question", || {
        question = chat
            .posts()
            .into_iter()
            .find(|(_, body)| body["message"].as_str().is_some_and(|m| m.contains(":-1:")));
        question.is_some()
    });
    let (question, _) = question.unwrap();
    // tern seeds the question with both reactions once it waits for them.
    wait(WITHIN, "the seeded reactions", || {
        chat.fake.to("/api/v4/reactions").len() >= 2
    });
    chat.react("u1", &question, "-1");
    wait(WITHIN, "the question settled", || {
        chat.shown(&question)
            .contains("❌ Denied: denied in Mattermost by @u1")
    });
    chat.wait_shown("c1", "Understood, I left it.");
    assert!(!served.home.project().join("never-made").exists());
    assert!(served.stop().success(), "{}", served.stderr());
}
