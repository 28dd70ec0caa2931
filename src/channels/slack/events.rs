//! What a Socket Mode frame means, as plain data: the frame kinds, and for a message event
//! whether it is let in, under which key, for which audience. No IO here.

use super::super::recent::Recent;
use crate::config::ChatAccess;
use crate::domain::Audience;
use serde_json::Value;

/// Who tern is in the workspace, from `auth.test`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Me {
    pub team: String,
    pub user: String,
    pub bot: Option<String>,
    pub name: String,
}

/// One Socket Mode frame.
#[derive(Debug, Clone, PartialEq)]
pub enum Frame {
    Hello,
    /// Slack asks for a new connection; `reason` says why.
    Disconnect {
        reason: String,
    },
    /// Work to acknowledge at once, by its id, then do.
    Envelope {
        id: String,
        kind: String,
        payload: Value,
    },
    Other,
}

/// Reads a text frame; `None` when it is not JSON.
pub fn frame(text: &str) -> Option<Frame> {
    let value: Value = serde_json::from_str(text).ok()?;
    let kind = value.get("type").and_then(Value::as_str).unwrap_or("");
    Some(match kind {
        "hello" => Frame::Hello,
        "disconnect" => Frame::Disconnect {
            reason: str_of(&value, "reason").unwrap_or("unknown").to_owned(),
        },
        _ => match str_of(&value, "envelope_id") {
            Some(id) => Frame::Envelope {
                id: id.to_owned(),
                kind: kind.to_owned(),
                payload: value.get("payload").cloned().unwrap_or(Value::Null),
            },
            None => Frame::Other,
        },
    })
}

fn str_of<'a>(value: &'a Value, key: &str) -> Option<&'a str> {
    value.get(key).and_then(Value::as_str)
}

/// A message let in: what becomes an input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub key: String,
    pub channel: String,
    /// The thread the reply goes in (the message's own ts when it starts one).
    pub thread_ts: String,
    pub ts: String,
    pub user: String,
    pub audience: Audience,
    pub text: String,
}

/// Why a message event is not an input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Skip {
    /// Edits, joins, bot messages: a subtype that no person typed as a new message.
    Subtype,
    /// From a bot, tern's own messages included.
    Bot,
    /// Neither the user nor the channel is allowed.
    NotAllowed,
    /// In a shared channel, without a mention, outside a thread tern talks in.
    NoMention,
    /// Seen already (`app_mention` and `message` both arrive for a mention).
    Duplicate,
    /// Not a message event, or one missing its fields.
    NotAMessage,
}

/// Message timestamps and event ids remembered, so a retried envelope or a second event for
/// the same message does nothing twice.
pub const SEEN_MAX: usize = 4096;

/// Decides what an `events_api` payload's event is. `active` says whether tern already talks
/// in a thread (by key), where no mention is needed.
pub fn message(
    payload: &Value,
    me: &Me,
    access: &ChatAccess,
    seen: &mut Recent,
    active: impl Fn(&str) -> bool,
) -> Result<Message, Skip> {
    let event = payload.get("event").ok_or(Skip::NotAMessage)?;
    let kind = str_of(event, "type").unwrap_or("");
    if kind != "message" && kind != "app_mention" {
        return Err(Skip::NotAMessage);
    }
    if let Some(subtype) = str_of(event, "subtype")
        && !matches!(subtype, "file_share" | "thread_broadcast")
    {
        return Err(Skip::Subtype);
    }
    let user = str_of(event, "user").ok_or(Skip::NotAMessage)?;
    if event.get("bot_id").is_some_and(|b| !b.is_null()) || user == me.user {
        return Err(Skip::Bot);
    }
    let channel = str_of(event, "channel").ok_or(Skip::NotAMessage)?;
    let ts = str_of(event, "ts").ok_or(Skip::NotAMessage)?;
    let text = str_of(event, "text").unwrap_or("");
    let direct = str_of(event, "channel_type") == Some("im") || channel.starts_with('D');
    let user_allowed = access.allow_users.iter().any(|u| u == user);
    let channel_allowed = access.allow_channels.iter().any(|c| c == channel);
    let mut audience = match (direct, user_allowed, channel_allowed) {
        (true, true, _) => Audience::Personal,
        (false, true, true) => Audience::Team,
        (false, false, true) => Audience::Public,
        _ => return Err(Skip::NotAllowed),
    };
    // Slack Connect: someone of another organisation is a stranger here.
    let external = payload
        .get("is_ext_shared_channel")
        .and_then(Value::as_bool)
        .unwrap_or(false)
        || str_of(event, "user_team").is_some_and(|team| team != me.team);
    if external {
        audience = Audience::Public;
    }
    let thread_ts = str_of(event, "thread_ts").unwrap_or(ts);
    let key = format!("slack:{}/{channel}/{thread_ts}", me.team);
    let mention = format!("<@{}>", me.user);
    let mentioned = kind == "app_mention" || text.contains(&mention);
    if !direct && !mentioned && !active(&key) {
        return Err(Skip::NoMention);
    }
    if !seen.insert(&format!("{channel}/{ts}")) {
        return Err(Skip::Duplicate);
    }
    Ok(Message {
        key,
        channel: channel.to_owned(),
        thread_ts: thread_ts.to_owned(),
        ts: ts.to_owned(),
        user: user.to_owned(),
        audience,
        text: text.replace(&mention, "").trim().to_owned(),
    })
}

/// A click on one of tern's approval buttons.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Click {
    pub user: String,
    pub channel: String,
    pub message_ts: String,
    pub thread_ts: Option<String>,
    pub approve: bool,
    pub token: String,
}

/// Reads a `block_actions` payload of an `interactive` envelope.
pub fn click(payload: &Value) -> Option<Click> {
    if str_of(payload, "type") != Some("block_actions") {
        return None;
    }
    let action = payload.get("actions")?.as_array()?.first()?;
    let approve = match str_of(action, "action_id")? {
        "approve" => true,
        "deny" => false,
        _ => return None,
    };
    let container = payload.get("container");
    let message = payload.get("message");
    Some(Click {
        user: payload
            .get("user")
            .and_then(|u| str_of(u, "id"))?
            .to_owned(),
        channel: payload
            .get("channel")
            .and_then(|c| str_of(c, "id"))
            .or_else(|| container.and_then(|c| str_of(c, "channel_id")))?
            .to_owned(),
        message_ts: container
            .and_then(|c| str_of(c, "message_ts"))
            .or_else(|| message.and_then(|m| str_of(m, "ts")))?
            .to_owned(),
        thread_ts: message
            .and_then(|m| str_of(m, "thread_ts"))
            .map(str::to_owned),
        approve,
        token: str_of(action, "value")?.to_owned(),
    })
}

/// Disconnect reasons after which connecting again is pointless.
pub fn final_disconnect(reason: &str) -> bool {
    reason == "link_disabled"
}

/// Web API errors no retry mends: the token or the app is not usable.
pub fn fatal_error(error: &str) -> bool {
    matches!(
        error,
        "invalid_auth"
            | "not_authed"
            | "account_inactive"
            | "user_removed_from_team"
            | "team_disabled"
            | "token_revoked"
            | "not_allowed_token_type"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn me() -> Me {
        Me {
            team: "T1".into(),
            user: "UBOT".into(),
            bot: Some("BBOT".into()),
            name: "tern".into(),
        }
    }

    fn access() -> ChatAccess {
        ChatAccess {
            allow_users: vec!["U1".into()],
            allow_channels: vec!["C1".into()],
            ..ChatAccess::default()
        }
    }

    fn event(event: Value) -> Value {
        json!({"event_id": "Ev1", "event": event})
    }

    fn decide(payload: &Value, active: bool) -> Result<Message, Skip> {
        message(
            payload,
            &me(),
            &access(),
            &mut Recent::new(SEEN_MAX),
            |_| active,
        )
    }

    #[test]
    fn frames_are_read() {
        assert_eq!(
            frame(r#"{"type":"hello","num_connections":1}"#),
            Some(Frame::Hello)
        );
        assert_eq!(
            frame(r#"{"type":"disconnect","reason":"refresh_requested"}"#),
            Some(Frame::Disconnect {
                reason: "refresh_requested".into()
            })
        );
        let envelope = frame(r#"{"envelope_id":"e1","type":"events_api","payload":{"a":1}}"#);
        assert!(
            matches!(envelope, Some(Frame::Envelope { ref id, ref kind, .. }) if id == "e1" && kind == "events_api")
        );
        assert_eq!(frame("not json"), None);
    }

    #[test]
    fn audiences_follow_who_and_where() {
        let dm = event(
            json!({"type":"message","channel":"D9","channel_type":"im","user":"U1","text":"hi","ts":"1.1"}),
        );
        let got = decide(&dm, false).unwrap();
        assert_eq!(got.audience, Audience::Personal);
        assert_eq!(got.key, "slack:T1/D9/1.1");
        let team = event(
            json!({"type":"app_mention","channel":"C1","user":"U1","text":"<@UBOT> fix it","ts":"2.2"}),
        );
        let got = decide(&team, false).unwrap();
        assert_eq!(
            (got.audience, got.text.as_str()),
            (Audience::Team, "fix it")
        );
        let public = event(
            json!({"type":"app_mention","channel":"C1","user":"U7","text":"<@UBOT> hi","ts":"3.3"}),
        );
        assert_eq!(decide(&public, false).unwrap().audience, Audience::Public);
        let stranger_dm = event(
            json!({"type":"message","channel":"D8","channel_type":"im","user":"U7","text":"hi","ts":"4.4"}),
        );
        assert_eq!(decide(&stranger_dm, false), Err(Skip::NotAllowed));
        let elsewhere = event(
            json!({"type":"app_mention","channel":"C9","user":"U1","text":"<@UBOT> hi","ts":"5.5"}),
        );
        assert_eq!(decide(&elsewhere, false), Err(Skip::NotAllowed));
        let mut external = team.clone();
        external["is_ext_shared_channel"] = json!(true);
        assert_eq!(decide(&external, false).unwrap().audience, Audience::Public);
    }

    #[test]
    fn a_shared_channel_needs_a_mention_outside_tern_threads() {
        let plain = event(
            json!({"type":"message","channel":"C1","channel_type":"channel","user":"U1","text":"and then?","ts":"6.6","thread_ts":"2.2"}),
        );
        assert_eq!(decide(&plain, false), Err(Skip::NoMention));
        let got = decide(&plain, true).unwrap();
        assert_eq!(
            (got.key.as_str(), got.thread_ts.as_str()),
            ("slack:T1/C1/2.2", "2.2")
        );
    }

    #[test]
    fn bots_subtypes_and_doubles_are_skipped() {
        let own = event(
            json!({"type":"message","channel":"D9","channel_type":"im","user":"UBOT","text":"x","ts":"7.7"}),
        );
        assert_eq!(decide(&own, false), Err(Skip::Bot));
        let bot = event(
            json!({"type":"message","channel":"D9","channel_type":"im","user":"U1","bot_id":"B2","text":"x","ts":"7.8"}),
        );
        assert_eq!(decide(&bot, false), Err(Skip::Bot));
        let edited =
            event(json!({"type":"message","subtype":"message_changed","channel":"D9","ts":"7.9"}));
        assert_eq!(decide(&edited, false), Err(Skip::Subtype));
        let mut seen = Recent::new(SEEN_MAX);
        let mention = event(
            json!({"type":"app_mention","channel":"C1","user":"U1","text":"<@UBOT> hi","ts":"8.8"}),
        );
        let message_too = event(
            json!({"type":"message","channel":"C1","channel_type":"channel","user":"U1","text":"<@UBOT> hi","ts":"8.8"}),
        );
        assert!(message(&mention, &me(), &access(), &mut seen, |_| false).is_ok());
        assert_eq!(
            message(&message_too, &me(), &access(), &mut seen, |_| false),
            Err(Skip::Duplicate)
        );
    }

    #[test]
    fn clicks_are_read_from_block_actions() {
        let payload = json!({
            "type": "block_actions",
            "user": {"id": "U1", "username": "jane", "team_id": "T1"},
            "container": {"type": "message", "message_ts": "9.9", "channel_id": "C1", "is_ephemeral": false},
            "channel": {"id": "C1"},
            "message": {"ts": "9.9", "thread_ts": "2.2"},
            "actions": [{"action_id": "deny", "block_id": "b", "value": "sid call", "type": "button", "action_ts": "1"}]
        });
        let got = click(&payload).unwrap();
        assert!(!got.approve);
        assert_eq!(
            (
                got.user.as_str(),
                got.token.as_str(),
                got.message_ts.as_str()
            ),
            ("U1", "sid call", "9.9")
        );
        assert_eq!(click(&json!({"type": "view_submission"})), None);
    }

    #[test]
    fn final_reasons_and_errors() {
        assert!(final_disconnect("link_disabled"));
        assert!(!final_disconnect("refresh_requested"));
        assert!(fatal_error("invalid_auth"));
        assert!(!fatal_error("ratelimited"));
    }
}
