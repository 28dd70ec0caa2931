//! Discord into `tern serve`: a fake Gateway and REST API on 127.0.0.1 (`fakes/discord.rs`),
//! written from Discord's documented protocol; the real binary connects to it, starts
//! threads, streams replies, asks with buttons and reconnects the way Discord asks.

use super::fakes::discord::{BOT, CHANNEL, Command, Discord, Got, JANE, STRANGER, TOKEN, WAIT};
use super::{Served, text};
use crate::session::tool_result_texts;
use crate::support::Reply;
use serde_json::json;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// `tern serve` connected to the fake.
trait Serve {
    fn serve(&self) -> Served;
}

impl Serve for Discord {
    fn serve(&self) -> Served {
        let served = Served::start(&self.config(), &Discord::env());
        served.wait_said("discord: connected (as ternbot (999))", WAIT);
        served
    }
}

fn op(got: &Got) -> Option<u64> {
    got.frame["op"].as_u64()
}

fn utf16(text: &str) -> usize {
    text.encode_utf16().count()
}

#[test]
fn a_mention_starts_a_thread_where_the_reply_streams_to_its_final_text() {
    let discord = Discord::start();
    let mut served = discord.serve();
    let identify = discord.wait_frame("Identify", |g| op(g) == Some(2));
    let d = &identify.frame["d"];
    assert_eq!(d["token"], TOKEN);
    assert_eq!(d["intents"], 37377);
    assert_eq!(d["properties"]["browser"], "tern");
    assert_eq!(d["properties"]["device"], "tern");
    assert!(
        identify.path.starts_with("/gateway/?v=10&encoding=json"),
        "{}",
        identify.path
    );
    // Heartbeats go out, carrying the last sequence number.
    discord.wait_frame("a heartbeat", |g| op(g) == Some(1) && g.frame["d"] == 1);

    let answer = "CI is red because `cargo fmt` found two files unformatted; run it and push.";
    served
        .mock
        .push(Reply::text(answer).delay_between_events(Duration::from_millis(60)));
    discord.message("5001", JANE, CHANNEL, "<@999> why is CI red?", false);

    // A thread from the message, named by it; the reply goes there.
    discord.fake.wait_for(WAIT, "a thread", |r| {
        r.iter()
            .any(|r| r.path == "/api/v10/channels/222/messages/5001/threads")
    });
    let thread = &discord
        .fake
        .to("/api/v10/channels/222/messages/5001/threads")[0];
    assert_eq!(thread.json()["name"], "why is CI red?");
    assert_eq!(thread.header("authorization"), Some("Bot test-token"));
    assert_eq!(
        thread.header("user-agent"),
        Some("DiscordBot (https://github.com/tern, 0.1)")
    );
    discord.wait_messages("5001", "the final text", |m| {
        m.len() == 1 && m[0].content == answer
    });
    let reply = &discord.messages("5001")[0];
    assert!(reply.edits >= 1, "streamed as edits: {reply:?}");
    let posts = discord.fake.to("/api/v10/channels/5001/messages");
    assert_eq!(posts[0].json()["allowed_mentions"], json!({ "parse": [] }));
    assert!(
        !discord.fake.to("/api/v10/channels/5001/typing").is_empty(),
        "typing shown while it worked"
    );

    // The model saw the text without the mention, from a team member.
    let request = &served.mock.model_requests()[0];
    let texts = request.texts().join("\n");
    assert!(texts.contains("why is CI red?"), "{texts}");
    assert!(!texts.contains("<@999>"), "{texts}");

    // In the thread tern talks in, no mention is needed.
    served.mock.push(Reply::text("Yes, both files."));
    discord.message("5002", JANE, "5001", "both of them?", false);
    discord.wait_messages("5001", "the second reply", |m| {
        m.last().is_some_and(|m| m.content == "Yes, both files.")
    });
    let second = &served.mock.model_requests()[1];
    assert!(second.texts().join("\n").contains("both of them?"));

    // Both inputs went to one session: the thread's.
    let listed = text(&served.tern(&["sessions", "list"]));
    let rows: Vec<&str> = listed
        .lines()
        .filter(|l| l.contains("why is CI red?"))
        .collect();
    assert_eq!(rows.len(), 1, "{listed}");
    assert!(rows[0].split_whitespace().any(|w| w == "2"), "{listed}");
    let status = text(&served.tern(&["channels", "status"]));
    assert!(
        status.contains("discord: connected (as ternbot (999))"),
        "{status}"
    );
    assert!(status.contains("2 inputs"), "{status}");
    assert!(served.stop().success(), "{}", served.stderr());
}

#[test]
fn strangers_elsewhere_other_bots_and_its_own_echo_reach_no_model() {
    let discord = Discord::start();
    let mut served = discord.serve();
    served.mock.push(Reply::text("Here."));
    // A DM from someone not listed.
    discord.message("6001", STRANGER, "640", "run rm -rf for me", true);
    // A mention in a channel that is not listed (looked up: not a thread).
    discord.message("6002", JANE, "444", "<@999> hello", false);
    // No mention in a listed channel.
    discord.message("6003", JANE, CHANNEL, "just chatting", false);
    // Its own message and another bot's.
    discord.message("6004", BOT, CHANNEL, "<@999> echo", false);
    let mut other_bot = json!({
        "id": "6005", "channel_id": CHANNEL, "guild_id": "1", "content": "<@999> hi",
        "author": { "id": "777", "username": "otherbot", "bot": true },
        "mentions": [{ "id": BOT }],
    });
    discord.dispatch("MESSAGE_CREATE", other_bot.clone());
    // A webhook's.
    other_bot["id"] = json!("6006");
    other_bot["author"] = json!({ "id": "778", "username": "hook" });
    other_bot["webhook_id"] = json!("778");
    discord.dispatch("MESSAGE_CREATE", other_bot);
    discord
        .fake
        .wait_for(WAIT, "the lookup of channel 444", |r| {
            r.iter().any(|r| r.path == "/api/v10/channels/444")
        });

    // A DM from the listed person is let in, as their own.
    discord.message("6007", JANE, "640", "hello from a DM", true);
    discord.wait_messages("640", "the DM's reply", |m| {
        m.first().is_some_and(|m| m.content == "Here.")
    });
    // The same message replayed (after a resume) counts once.
    discord.message("6007", JANE, "640", "hello from a DM", true);
    // Its own reply echoed back starts nothing either.
    discord.message("6008", BOT, "640", "Here.", true);
    std::thread::sleep(Duration::from_millis(500));
    let requests = served.mock.model_requests();
    assert_eq!(requests.len(), 1, "only the DM reached the model");
    let texts = requests[0].texts().join("\n");
    assert!(texts.contains("hello from a DM"), "{texts}");
    for refused in ["rm -rf", "hello\n", "just chatting", "echo", "<@999> hi"] {
        assert!(!texts.contains(refused), "{refused} got in: {texts}");
    }
    assert!(
        discord
            .fake
            .to("/api/v10/channels/222/messages/6004/threads")
            .is_empty()
    );
    assert!(served.stop().success(), "{}", served.stderr());
}

#[test]
fn a_long_reply_is_split_at_2000_utf16_units_with_its_code_fence_kept_whole() {
    let discord = Discord::start();
    let mut served = discord.serve();
    let mut answer = String::from("Here is the module, with emoji that count twice:\n\n```rust\n");
    for n in 0..200 {
        answer.push_str(&format!("let line_{n} = \"é😀 {n}\";\n"));
    }
    answer.push_str("```\n\nThat is all.");
    assert!(utf16(&answer) > 2 * 2000, "{}", utf16(&answer));
    served.mock.push(Reply::text(answer.clone()));
    discord.message("7001", JANE, CHANNEL, "<@999> write it", false);

    discord.wait_messages("7001", "the whole reply", |m| {
        m.last()
            .is_some_and(|m| m.content.ends_with("That is all."))
    });
    let pieces: Vec<String> = discord
        .messages("7001")
        .into_iter()
        .map(|m| m.content)
        .collect();
    assert!(pieces.len() >= 3, "{pieces:#?}");
    for piece in &pieces {
        assert!(utf16(piece) <= 2000, "{} units: {piece}", utf16(piece));
        let fences = piece
            .lines()
            .filter(|l| l.trim_start().starts_with("```"))
            .count();
        assert_eq!(fences % 2, 0, "an unbalanced fence in {piece}");
    }
    assert!(pieces[1].starts_with("```rust\n"), "{}", pieces[1]);
    let all = pieces.join("\n");
    for n in 0..120 {
        assert!(
            all.contains(&format!("let line_{n} = \"é😀 {n}\";")),
            "line {n}"
        );
    }
    assert!(served.stop().success(), "{}", served.stderr());
}

#[test]
fn only_a_listed_person_can_press_approve_and_then_the_call_runs() {
    let discord = Discord::start();
    let mut served = discord.serve();
    served.mock.push(Reply::tool_call(
        "shell_execute",
        json!({ "command": "echo approved-in-discord" }),
    ));
    served.mock.push(Reply::text("It ran."));
    served.mock.push(Reply::text("Noted."));
    discord.message("8001", JANE, CHANNEL, "<@999> say it", false);

    let (question_id, question) = discord.question("8001");
    assert!(question.content.contains("shell_execute"), "{question:?}");
    let buttons = &question.components[0]["components"];
    assert_eq!(buttons[0]["style"], 3);
    assert_eq!(buttons[0]["label"], "Approve");
    assert_eq!(buttons[1]["style"], 4);
    assert_eq!(buttons[1]["label"], "Deny");
    let approve = buttons[0]["custom_id"].as_str().unwrap().to_owned();
    assert!(
        approve.starts_with("approve:") && approve.len() <= 100,
        "{approve}"
    );
    let deny = buttons[1]["custom_id"].as_str().unwrap();
    assert!(deny.starts_with("deny:") && deny.len() <= 100, "{deny}");

    let click = |n: u32, user: &str| discord.click(n, user, "8001", question_id, &approve);
    // Someone not listed: told so, alone; nothing is answered.
    click(1, STRANGER);
    let refusal = discord.callback(1);
    assert_eq!(refusal["type"], 4);
    assert_eq!(refusal["data"]["flags"], 64);
    assert_eq!(
        refusal["data"]["content"],
        "Only the people this tern is set up for may answer"
    );
    std::thread::sleep(Duration::from_millis(400));
    assert_eq!(
        served.mock.model_requests().len(),
        1,
        "the call still waits"
    );
    // Chat text approves nothing either.
    discord.message("8002", JANE, "8001", "approve", false);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        served.mock.model_requests().len(),
        1,
        "the call still waits"
    );

    click(2, JANE);
    let update = discord.callback(2);
    assert_eq!(update["type"], 7);
    assert_eq!(update["data"]["content"], "✅ Approved by <@111>");
    assert_eq!(update["data"]["components"], json!([]));

    let requests = served.mock.wait_for_model_requests_blocking(2, WAIT);
    let results = tool_result_texts(&requests[1].body);
    assert!(
        results.iter().any(|r| r.contains("approved-in-discord")),
        "{results:?}"
    );
    discord.wait_messages("8001", "the final text", |m| {
        m.iter().any(|m| m.content.contains("It ran."))
    });
    // The click's update showed who approved; the question was not edited over it.
    let edits = discord.state.messages.lock().unwrap()[&question_id].edits;
    assert_eq!(edits, 0);
    assert!(served.stop().success(), "{}", served.stderr());
}

#[test]
fn deny_tells_the_model_who_denied_and_nothing_runs() {
    let discord = Discord::start();
    let mut served = discord.serve();
    served.mock.push(Reply::tool_call(
        "shell_execute",
        json!({ "command": "echo never-run" }),
    ));
    served.mock.push(Reply::text("Understood, not running it."));
    discord.message("8101", JANE, CHANNEL, "<@999> run it", false);
    let (question_id, question) = discord.question("8101");
    let deny = question.components[0]["components"][1]["custom_id"]
        .as_str()
        .unwrap()
        .to_owned();
    discord.click(1, JANE, "8101", question_id, &deny);
    let update = discord.callback(1);
    assert_eq!(update["type"], 7);
    assert_eq!(update["data"]["content"], "❌ Denied by <@111>");
    let requests = served.mock.wait_for_model_requests_blocking(2, WAIT);
    let results = tool_result_texts(&requests[1].body).join("\n");
    assert!(
        results.contains("denied in Discord by User 111"),
        "{results}"
    );
    discord.wait_messages("8101", "the final text", |m| {
        m.iter().any(|m| m.content.contains("not running it"))
    });
    assert!(served.stop().success(), "{}", served.stderr());
}

#[test]
fn a_429_on_an_edit_delays_the_final_text_but_loses_none_of_it() {
    let discord = Discord::start();
    discord.state.edit_429s.store(1, Ordering::SeqCst);
    let mut served = discord.serve();
    let answer = (1..=30)
        .map(|n| format!("word{n}"))
        .collect::<Vec<_>>()
        .join(" ");
    served
        .mock
        .push(Reply::text(answer.clone()).delay_between_events(Duration::from_millis(50)));
    discord.message("9001", JANE, CHANNEL, "<@999> count", false);
    discord.wait_messages("9001", "the final text", |m| {
        m.first().is_some_and(|m| m.content == answer)
    });
    assert!(
        discord.state.served_429.load(Ordering::SeqCst),
        "a 429 was served"
    );
    assert!(served.stop().success(), "{}", served.stderr());
}

/// The frames of connection `conn`.
fn of(discord: &Discord, conn: usize) -> Vec<Got> {
    discord
        .got()
        .into_iter()
        .filter(|g| g.conn == conn)
        .collect()
}

#[test]
fn a_reconnect_request_or_a_resumable_close_resumes_the_session() {
    let discord = Discord::start();
    let mut served = discord.serve();
    discord.wait_frame("Identify", |g| op(g) == Some(2));
    let s = discord.dispatch(
        "TYPING_START",
        json!({ "channel_id": CHANNEL, "user_id": JANE }),
    );
    discord.send(Command::Frame(
        json!({ "op": 7, "d": null, "s": null, "t": null }),
    ));

    let resume = discord.wait_frame("Resume after op 7", |g| g.conn == 2 && op(g) == Some(6));
    assert!(
        resume.path.starts_with("/resume/?v=10&encoding=json"),
        "{}",
        resume.path
    );
    assert_eq!(
        resume.frame["d"],
        json!({ "token": TOKEN, "session_id": "sess-1", "seq": s })
    );
    // tern closed the old connection keeping the session (not 1000 or 1001).
    let closed = discord.wait_frame("the close", |g| {
        g.conn == 1 && g.frame.get("close").is_some()
    });
    let code = closed.frame["close"].as_u64().unwrap();
    assert!(code != 1000 && code != 1001, "{code}");

    // Discord closes with 4000: resumed again, with the sequence READY and RESUMED moved on.
    let s = discord.dispatch(
        "TYPING_START",
        json!({ "channel_id": CHANNEL, "user_id": JANE }),
    );
    discord.send(Command::Close(4000));
    let resume = discord.wait_frame("Resume after 4000", |g| g.conn == 3 && op(g) == Some(6));
    assert_eq!(resume.frame["d"]["session_id"], "sess-1");
    assert_eq!(resume.frame["d"]["seq"], s);
    assert!(
        of(&discord, 3).iter().all(|g| op(g) != Some(2)),
        "no new Identify"
    );
    assert_eq!(discord.fake.to("/api/v10/gateway/bot").len(), 1);
    assert!(served.stop().success(), "{}", served.stderr());
}

#[test]
fn an_invalid_session_that_cannot_be_resumed_is_identified_afresh() {
    let discord = Discord::start();
    let mut served = discord.serve();
    discord.wait_frame("Identify", |g| op(g) == Some(2));
    discord.send(Command::Frame(
        json!({ "op": 9, "d": false, "s": null, "t": null }),
    ));
    let identify = discord.wait_frame("a new Identify", |g| g.conn == 2 && op(g) == Some(2));
    assert!(identify.path.starts_with("/gateway/"), "{}", identify.path);
    assert_eq!(identify.frame["d"]["intents"], 37377);
    assert!(
        of(&discord, 2).iter().all(|g| op(g) != Some(6)),
        "no Resume"
    );
    assert_eq!(discord.fake.to("/api/v10/gateway/bot").len(), 2);
    assert!(served.stop().success(), "{}", served.stderr());
}

#[test]
fn a_connection_whose_heartbeats_go_unacked_is_dropped_and_resumed() {
    let discord = Discord::start();
    let mut served = discord.serve();
    discord.wait_frame("Identify", |g| op(g) == Some(2));
    discord.state.silent_conn.store(1, Ordering::SeqCst);
    let closed = discord.wait_frame("tern closing the zombie", |g| {
        g.conn == 1 && g.frame.get("close").is_some()
    });
    let code = closed.frame["close"].as_u64().unwrap();
    assert!(code != 1000 && code != 1001, "{code}");
    let resume = discord.wait_frame("Resume", |g| g.conn == 2 && op(g) == Some(6));
    assert_eq!(resume.frame["d"]["session_id"], "sess-1");
    assert!(served.stop().success(), "{}", served.stderr());
}

#[test]
fn a_refused_token_stops_the_channel_without_reconnecting_and_says_why() {
    let discord = Discord::start();
    *discord.state.refuse_identify.lock().unwrap() = Some(4004);
    let mut served = Served::start(&discord.config(), &[("DISCORD_BOT_TOKEN", TOKEN)]);
    served.wait_said("discord: stopped", WAIT);
    let status = text(&served.tern(&["channels", "status"]));
    assert!(
        status.contains(
            "discord: stopped (Discord closed the gateway with 4004: the token was refused: \
             check DISCORD_BOT_TOKEN)"
        ),
        "{status}"
    );
    // Proving an absence takes a while: no second connection.
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(discord.state.conns.load(Ordering::SeqCst), 1);
    assert_eq!(discord.fake.to("/api/v10/gateway/bot").len(), 1);
    assert!(served.stop().success(), "{}", served.stderr());
}

#[test]
fn a_missing_token_stops_the_channel_and_names_the_variable() {
    let discord = Discord::start();
    let mut served = Served::start(&discord.config(), &[]);
    served.wait_said("discord: stopped (DISCORD_BOT_TOKEN is not set", WAIT);
    assert!(discord.got().is_empty());
    assert!(served.stop().success(), "{}", served.stderr());
}
