//! What the Mattermost WebSocket says, read into plain data, and who is let in: the frames
//! tern acts on (the answer to its authentication, `hello`, `posted`, `reaction_added`), the
//! post inside a `posted` event (a JSON string parsed a second time), and the pure rules that
//! turn a post into an input or into nothing. Nothing here does IO.

use crate::config::ChatAccess;
use crate::domain::{Audience, SessionKey};
use serde_json::Value;

/// The bot's own account, from `GET /api/v4/users/me`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Me {
    pub id: String,
    pub username: String,
}

/// A WebSocket frame, as far as tern reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// The answer to an action tern sent (`seq_reply` is the action's `seq`).
    Reply {
        seq_reply: u64,
        ok: bool,
        error: String,
    },
    /// The server took the connection, under this id (empty when it names none).
    Hello { connection_id: String },
    /// A new post somewhere the bot can see.
    Posted(Posted),
    /// Somebody reacted to a post.
    Reaction(Reaction),
    /// Anything else (`post_edited`, `typing`, `status_change`, …): read and let go.
    Other,
}

/// A `posted` event: the post and what the event says around it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Posted {
    pub id: String,
    pub user_id: String,
    pub channel_id: String,
    /// The thread's first post, empty for a post that starts a thread.
    pub root_id: String,
    pub message: String,
    /// The post's `type`: empty for what a person wrote, `system_…` for joins and the like.
    pub kind: String,
    /// Whether `props.from_bot` says a bot wrote it.
    pub from_bot: bool,
    /// `D` for a direct message, `O` open, `P` private, `G` a group message.
    pub channel_type: String,
    /// The author's name as the event gives it (`@alice`).
    pub sender_name: String,
    /// The user ids the server found mentioned.
    pub mentions: Vec<String>,
}

/// A `reaction_added` event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reaction {
    pub user_id: String,
    pub post_id: String,
    pub emoji_name: String,
}

/// Reads one text frame, and for an event of the server's stream its `seq`; anything
/// malformed is [`Frame::Other`].
pub fn frame(raw: &str) -> (Frame, Option<u64>) {
    let Ok(value) = serde_json::from_str::<Value>(raw) else {
        return (Frame::Other, None);
    };
    if let Some(seq_reply) = value.get("seq_reply").and_then(Value::as_u64) {
        let ok = value.get("status").and_then(Value::as_str) == Some("OK");
        let error = value
            .get("error")
            .map(|error| match error {
                Value::String(text) => text.clone(),
                Value::Object(fields) => fields
                    .get("message")
                    .or_else(|| fields.get("id"))
                    .and_then(Value::as_str)
                    .map_or_else(|| error.to_string(), str::to_owned),
                other => other.to_string(),
            })
            .unwrap_or_default();
        let reply = Frame::Reply {
            seq_reply,
            ok,
            error,
        };
        return (reply, None);
    }
    let data = value.get("data").unwrap_or(&Value::Null);
    let event = value.get("event").and_then(Value::as_str);
    let seq = event.and(value.get("seq").and_then(Value::as_u64));
    let frame = match event {
        Some("hello") => Frame::Hello {
            connection_id: text(data, "connection_id"),
        },
        Some("posted") => posted(data).map_or(Frame::Other, Frame::Posted),
        Some("reaction_added") => reaction(data).map_or(Frame::Other, Frame::Reaction),
        _ => Frame::Other,
    };
    (frame, seq)
}

/// A field that may be sent as a JSON string holding JSON (the server's habit) or as the
/// JSON itself.
fn nested(data: &Value, name: &str) -> Option<Value> {
    match data.get(name)? {
        Value::String(text) => serde_json::from_str(text).ok(),
        other => Some(other.clone()),
    }
}

fn text(value: &Value, name: &str) -> String {
    value
        .get(name)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

fn posted(data: &Value) -> Option<Posted> {
    let post = nested(data, "post")?;
    let id = text(&post, "id");
    let channel_id = text(&post, "channel_id");
    if id.is_empty() || channel_id.is_empty() {
        return None;
    }
    let from_bot = match post.get("props").and_then(|props| props.get("from_bot")) {
        Some(Value::String(flag)) => flag == "true",
        Some(Value::Bool(flag)) => *flag,
        _ => false,
    };
    let mentions = nested(data, "mentions")
        .and_then(|mentions| {
            mentions.as_array().map(|ids| {
                ids.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
        })
        .unwrap_or_default();
    Some(Posted {
        id,
        user_id: text(&post, "user_id"),
        channel_id,
        root_id: text(&post, "root_id"),
        message: text(&post, "message"),
        kind: text(&post, "type"),
        from_bot,
        channel_type: text(data, "channel_type"),
        sender_name: text(data, "sender_name"),
        mentions,
    })
}

fn reaction(data: &Value) -> Option<Reaction> {
    let reaction = nested(data, "reaction")?;
    let found = Reaction {
        user_id: text(&reaction, "user_id"),
        post_id: text(&reaction, "post_id"),
        emoji_name: text(&reaction, "emoji_name"),
    };
    (!found.user_id.is_empty() && !found.post_id.is_empty()).then_some(found)
}

/// A post let in: what its input is and where its replies go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Admitted {
    /// `mattermost:<channel>/<root post>`.
    pub key: String,
    pub channel_id: String,
    /// The thread replies go in: the post's root, or the post itself.
    pub root_id: String,
    pub audience: Audience,
    /// Whether the sender is one of `allow_users`.
    pub trusted: bool,
    /// The text with the bot's mention taken out.
    pub text: String,
    /// The sender's name without its `@`.
    pub sender_name: String,
}

/// The session key of a thread.
pub fn key(channel_id: &str, root_id: &str) -> String {
    format!("mattermost:{channel_id}/{root_id}")
}

/// Whether `post` is an input for tern, and as what. `talking` says whether tern already
/// talks in a thread (by key): there a channel post needs no mention.
///
/// Never let in: the bot's own posts, system posts (a non-empty `type`), other bots' posts,
/// direct messages from anyone not in `allow_users`, and posts in channels not in
/// `allow_channels`. A channel post that does not mention the bot starts nothing.
pub fn admit(
    post: &Posted,
    me: &Me,
    access: &ChatAccess,
    talking: impl Fn(&str) -> bool,
) -> Option<Admitted> {
    if post.user_id.is_empty() || post.user_id == me.id || !post.kind.is_empty() || post.from_bot {
        return None;
    }
    let allowed = access.allow_users.contains(&post.user_id);
    let root_id = if post.root_id.is_empty() {
        post.id.clone()
    } else {
        post.root_id.clone()
    };
    let key = key(&post.channel_id, &root_id);
    SessionKey::parse(&key).ok()?;
    let audience = if post.channel_type == "D" {
        if !allowed {
            return None;
        }
        Audience::Personal
    } else {
        if !access.allow_channels.contains(&post.channel_id) {
            return None;
        }
        let mentioned =
            post.mentions.contains(&me.id) || mention_at(&post.message, &me.username).is_some();
        if !mentioned && !talking(&key) {
            return None;
        }
        if allowed {
            Audience::Team
        } else {
            Audience::Public
        }
    };
    let text = strip_mention(&post.message, &me.username);
    if text.is_empty() {
        return None;
    }
    let sender_name = post.sender_name.trim_start_matches('@');
    Some(Admitted {
        key,
        channel_id: post.channel_id.clone(),
        root_id,
        audience,
        trusted: allowed,
        text,
        sender_name: if sender_name.is_empty() {
            post.user_id.clone()
        } else {
            sender_name.to_owned()
        },
    })
}

/// Characters a Mattermost username is made of.
fn in_name(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')
}

/// Where the first `@username` mention starts in `text` and where it ends (byte offsets);
/// a longer name that starts the same (`@ternbot` for `tern`) is not one. A name's trailing
/// dot is the sentence's, as Mattermost reads it.
fn mention_at(text: &str, username: &str) -> Option<(usize, usize)> {
    if username.is_empty() {
        return None;
    }
    let wanted = format!("@{}", username.to_ascii_lowercase());
    let lower = text.to_ascii_lowercase();
    let mut from = 0;
    while let Some(found) = lower[from..].find(&wanted) {
        let start = from + found;
        let end = start + wanted.len();
        let before_ok = lower[..start]
            .chars()
            .next_back()
            .is_none_or(|c| !in_name(c));
        let mut rest = lower[end..].chars();
        let after_ok = match rest.next() {
            None => true,
            Some('.') => rest.next().is_none_or(|c| !in_name(c)),
            Some(c) => !in_name(c),
        };
        if before_ok && after_ok {
            return Some((start, end));
        }
        from = end;
    }
    None
}

/// `text` without the bot's `@username` mentions, and without the `:` or `,` that often
/// follows a leading one.
pub fn strip_mention(text: &str, username: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some((start, end)) = mention_at(rest, username) {
        out.push_str(&rest[..start]);
        rest = &rest[end..];
        if out.is_empty() || out.ends_with(' ') {
            rest = rest.trim_start_matches(' ');
        }
    }
    out.push_str(rest);
    let trimmed = out.trim();
    let trimmed = trimmed
        .strip_prefix(':')
        .or_else(|| trimmed.strip_prefix(','))
        .unwrap_or(trimmed);
    trimmed.trim().to_owned()
}

/// What a reaction answers, if it is one of the two tern asks for.
pub fn vote(emoji_name: &str) -> Option<bool> {
    match emoji_name {
        "+1" | "thumbsup" | "white_check_mark" => Some(true),
        "-1" | "thumbsdown" | "x" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn me() -> Me {
        Me {
            id: "bot1".into(),
            username: "tern".into(),
        }
    }

    fn access() -> ChatAccess {
        ChatAccess {
            allow_users: vec!["u1".into()],
            allow_channels: vec!["c1".into()],
            ..ChatAccess::default()
        }
    }

    /// A `posted` frame the way the server sends it: the post and the mentions as strings.
    fn posted_frame(post: Value, channel_type: &str, mentions: &[&str]) -> String {
        json!({
            "event": "posted",
            "data": {
                "channel_type": channel_type,
                "channel_name": "town-square",
                "sender_name": "@alice",
                "team_id": "t1",
                "post": post.to_string(),
                "mentions": serde_json::to_string(mentions).unwrap(),
            },
            "broadcast": {"omit_users": null, "user_id": "", "channel_id": "c1", "team_id": ""},
            "seq": 3
        })
        .to_string()
    }

    fn frame_of(text: &str) -> Frame {
        frame(text).0
    }

    fn post(user: &str, channel: &str, root: &str, message: &str) -> Value {
        json!({
            "id": "p1", "create_at": 1_700_000_000_000_i64, "user_id": user,
            "channel_id": channel, "root_id": root, "message": message, "type": "",
            "props": {}, "hashtags": ""
        })
    }

    fn read(frame_text: &str) -> Posted {
        match frame(frame_text).0 {
            Frame::Posted(posted) => posted,
            other => panic!("not a post: {other:?}"),
        }
    }

    fn check(frame_text: &str, talking: bool, expected: Option<(&str, Audience, &str)>) {
        let admitted = admit(&read(frame_text), &me(), &access(), |_| talking);
        let got = admitted
            .as_ref()
            .map(|a| (a.key.as_str(), a.audience, a.text.as_str()));
        assert_eq!(got, expected, "{frame_text}");
    }

    #[test]
    fn the_post_inside_a_posted_event_is_parsed_a_second_time() {
        let text = posted_frame(post("u1", "c1", "", "@tern hi"), "O", &["bot1"]);
        let posted = read(&text);
        assert_eq!(posted.id, "p1");
        assert_eq!(posted.user_id, "u1");
        assert_eq!(posted.message, "@tern hi");
        assert_eq!(posted.mentions, ["bot1"]);
        assert_eq!(posted.sender_name, "@alice");
        assert!(!posted.from_bot);
    }

    #[test]
    fn frames_tern_does_not_act_on_or_cannot_read_are_other() {
        assert_eq!(frame_of("not json"), Frame::Other);
        assert_eq!(
            frame_of(r#"{"event":"posted","data":{"post":"{oops"}}"#),
            Frame::Other
        );
        assert_eq!(frame_of(r#"{"event":"posted","data":{}}"#), Frame::Other);
        let edited = json!({"event": "post_edited", "data": {"post": post("u1", "c1", "", "x").to_string()}});
        assert_eq!(frame_of(&edited.to_string()), Frame::Other);
        assert_eq!(
            frame_of(r#"{"event":"hello","data":{"server_version":"10.0"},"seq":0}"#),
            Frame::Hello {
                connection_id: String::new()
            }
        );
        assert_eq!(
            frame_of(r#"{"status":"OK","seq_reply":1}"#),
            Frame::Reply {
                seq_reply: 1,
                ok: true,
                error: String::new()
            }
        );
        let failed = frame_of(
            r#"{"status":"FAIL","seq_reply":1,"error":{"id":"api.web_socket_router.not_authenticated.app_error","message":"bad token"}}"#,
        );
        assert_eq!(
            failed,
            Frame::Reply {
                seq_reply: 1,
                ok: false,
                error: "bad token".into()
            }
        );
    }

    #[test]
    fn events_carry_their_place_in_the_stream_and_replies_none() {
        let hello = r#"{"event":"hello","data":{"connection_id":"abc123","server_version":"10.5"},"seq":0}"#;
        assert_eq!(
            frame(hello),
            (
                Frame::Hello {
                    connection_id: "abc123".into()
                },
                Some(0)
            )
        );
        let posted = posted_frame(post("u1", "c1", "", "@tern hi"), "O", &["bot1"]);
        assert_eq!(frame(&posted).1, Some(3));
        // An event tern does not act on still counts in the stream.
        assert_eq!(
            frame(r#"{"event":"typing","data":{},"seq":7}"#),
            (Frame::Other, Some(7))
        );
        assert_eq!(frame(r#"{"status":"OK","seq_reply":1,"seq":4}"#).1, None);
        assert_eq!(frame(r#"{"seq":5}"#).1, None);
        assert_eq!(frame(r#"{"event":"typing","seq":-1}"#).1, None);
        assert_eq!(frame("[1,2]"), (Frame::Other, None));
    }

    #[test]
    fn a_reaction_is_read_from_its_string() {
        let reaction =
            json!({"user_id": "u1", "post_id": "q1", "emoji_name": "+1", "create_at": 1});
        let text = json!({"event": "reaction_added", "data": {"reaction": reaction.to_string()}});
        assert_eq!(
            frame_of(&text.to_string()),
            Frame::Reaction(Reaction {
                user_id: "u1".into(),
                post_id: "q1".into(),
                emoji_name: "+1".into()
            })
        );
        assert_eq!(vote("+1"), Some(true));
        assert_eq!(vote("-1"), Some(false));
        assert_eq!(vote("tada"), None);
    }

    #[test]
    fn who_is_let_in_and_as_what() {
        use Audience::*;
        let key = "mattermost:c1/p1";
        // A mention by an allowed user in an allowed channel: the team.
        check(
            &posted_frame(post("u1", "c1", "", "@tern fix it"), "O", &["bot1"]),
            false,
            Some((key, Team, "fix it")),
        );
        // Anyone else there: the public, untrusted.
        let stranger = posted_frame(post("u9", "c1", "", "@tern fix it"), "O", &["bot1"]);
        check(&stranger, false, Some((key, Public, "fix it")));
        assert!(
            !admit(&read(&stranger), &me(), &access(), |_| false)
                .unwrap()
                .trusted
        );
        // No mention: nothing, unless tern talks in that thread already.
        let plain = posted_frame(post("u1", "c1", "r1", "and the tests?"), "O", &[]);
        check(&plain, false, None);
        check(
            &plain,
            true,
            Some(("mattermost:c1/r1", Team, "and the tests?")),
        );
        // The mention found in the text when `mentions` lacks it.
        check(
            &posted_frame(post("u1", "c1", "", "hey @Tern, look"), "O", &[]),
            false,
            Some((key, Team, "hey , look")),
        );
        // A channel not allowed, even with a mention.
        check(
            &posted_frame(post("u1", "c2", "", "@tern hi"), "O", &["bot1"]),
            false,
            None,
        );
        // A direct message: only from an allowed user, and no mention needed.
        check(
            &posted_frame(post("u1", "d7", "", "hello"), "D", &[]),
            false,
            Some(("mattermost:d7/p1", Personal, "hello")),
        );
        check(
            &posted_frame(post("u9", "d7", "", "hello"), "D", &[]),
            false,
            None,
        );
    }

    #[test]
    fn the_bots_own_posts_system_posts_and_other_bots_are_ignored() {
        check(
            &posted_frame(post("bot1", "c1", "", "@tern echo"), "O", &["bot1"]),
            true,
            None,
        );
        let mut system = post("u1", "c1", "", "@tern joined");
        system["type"] = json!("system_join_channel");
        check(&posted_frame(system, "O", &["bot1"]), true, None);
        for flag in [json!("true"), json!(true)] {
            let mut bot = post("u1", "c1", "", "@tern hi");
            bot["props"] = json!({"from_bot": flag});
            check(&posted_frame(bot, "O", &["bot1"]), true, None);
        }
        // Only a mention, nothing to say.
        check(
            &posted_frame(post("u1", "c1", "", "@tern"), "O", &["bot1"]),
            false,
            None,
        );
    }

    #[test]
    fn a_reply_in_a_thread_keys_on_its_root() {
        let admitted = admit(
            &read(&posted_frame(
                post("u1", "c1", "root9", "@tern more"),
                "O",
                &["bot1"],
            )),
            &me(),
            &access(),
            |_| false,
        )
        .unwrap();
        assert_eq!(admitted.key, "mattermost:c1/root9");
        assert_eq!(admitted.root_id, "root9");
        assert_eq!(admitted.sender_name, "alice");
    }

    #[test]
    fn mentions_are_stripped_and_look_alikes_kept() {
        let cases = [
            ("@tern fix the build", "fix the build"),
            ("@tern: fix it", "fix it"),
            ("@tern, fix it", "fix it"),
            ("please @tern fix it", "please fix it"),
            ("ask @TERN.", "ask ."),
            ("@ternbot fix it", "@ternbot fix it"),
            ("mail me@tern fix", "mail me@tern fix"),
            ("@tern\n```\ncode\n```", "```\ncode\n```"),
        ];
        for (text, expected) in cases {
            assert_eq!(strip_mention(text, "tern"), expected, "{text}");
        }
        assert!(mention_at("@tern.x", "tern").is_none());
        assert!(mention_at("hi @tern.", "tern").is_some());
    }
}
