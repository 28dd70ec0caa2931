//! Which Discord messages become inputs, and as whose: DMs from the listed people only,
//! in servers only the listed channels and their threads, a mention of the bot needed
//! except in a thread tern already talks in. Never the bot's own messages, other bots' or
//! webhooks'. Pure: what is known of the channel comes in, a verdict goes out.

use crate::config::ChatAccess;
use crate::domain::Audience;
use serde_json::Value;

/// Message ids remembered to drop what a resume replays.
pub const SEEN_MAX: usize = 10_000;
/// Longest thread name tern gives (Discord takes 100).
const THREAD_NAME_MAX: usize = 80;

/// A `MESSAGE_CREATE` as the rules read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub id: String,
    pub channel_id: String,
    pub guild_id: Option<String>,
    pub author_id: String,
    /// The global display name, else the user name.
    pub author_name: String,
    pub author_bot: bool,
    pub webhook: bool,
    pub content: String,
    /// Ids of the users it mentions.
    pub mentions: Vec<String>,
}

impl Message {
    /// The message in `d`; `None` when it lacks an id, a channel or an author.
    pub fn parse(d: &Value) -> Option<Self> {
        let author = &d["author"];
        let author_id = author["id"].as_str()?.to_owned();
        let author_name = author["global_name"]
            .as_str()
            .or_else(|| author["username"].as_str())
            .unwrap_or(&author_id)
            .to_owned();
        Some(Self {
            id: d["id"].as_str()?.to_owned(),
            channel_id: d["channel_id"].as_str()?.to_owned(),
            guild_id: d["guild_id"].as_str().map(str::to_owned),
            author_id,
            author_name,
            author_bot: author["bot"].as_bool().unwrap_or(false),
            webhook: d["webhook_id"].as_str().is_some(),
            content: d["content"].as_str().unwrap_or_default().to_owned(),
            mentions: d["mentions"]
                .as_array()
                .map(|users| {
                    users
                        .iter()
                        .filter_map(|user| user["id"].as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default(),
        })
    }

    /// Whether it mentions the user `me`.
    pub fn mentions(&self, me: &str) -> bool {
        self.mentions.iter().any(|id| id == me)
            || self.content.contains(&format!("<@{me}>"))
            || self.content.contains(&format!("<@!{me}>"))
    }
}

/// Where a message was written, as far as known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Room {
    /// A direct message.
    Dm,
    /// A server channel that is listed.
    Listed,
    /// A thread, under this channel.
    Thread { parent: String },
    /// A server channel that is neither listed nor a thread.
    Other,
    /// A server channel not known yet: a thread or not.
    Unknown,
}

/// What becomes of a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Ignore,
    /// Whether the channel is a thread must be asked before deciding.
    Lookup,
    /// An input.
    Deliver(Delivery),
}

/// An input's place and standing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    /// The session key: `discord:<parent channel>/<thread>`.
    pub key: String,
    /// Where the replies go: the thread, or the DM channel.
    pub place: String,
    pub audience: Audience,
    /// Whether the sender is one of the listed people.
    pub trusted: bool,
    /// Whether the thread must be started first (from the message, so its id is the
    /// message's).
    pub start_thread: bool,
}

/// What becomes of `message`, written in `room` and seen by the bot `me`; `talking`: tern
/// already talks in its channel.
pub fn judge(
    access: &ChatAccess,
    me: &str,
    message: &Message,
    room: &Room,
    talking: bool,
) -> Verdict {
    if message.author_id == me || message.author_bot || message.webhook {
        return Verdict::Ignore;
    }
    let listed_user = access.allow_users.contains(&message.author_id);
    let (audience, trusted) = if listed_user {
        (Audience::Team, true)
    } else {
        (Audience::Public, false)
    };
    let channel = &message.channel_id;
    match room {
        Room::Dm if listed_user && message.guild_id.is_none() => Verdict::Deliver(Delivery {
            key: format!("discord:{channel}/{channel}"),
            place: channel.clone(),
            audience: Audience::Personal,
            trusted: true,
            start_thread: false,
        }),
        Room::Listed if message.mentions(me) => Verdict::Deliver(Delivery {
            key: format!("discord:{channel}/{}", message.id),
            place: message.id.clone(),
            audience,
            trusted,
            start_thread: true,
        }),
        Room::Thread { parent }
            if access.allow_channels.contains(parent) && (talking || message.mentions(me)) =>
        {
            Verdict::Deliver(Delivery {
                key: format!("discord:{parent}/{channel}"),
                place: channel.clone(),
                audience,
                trusted,
                start_thread: false,
            })
        }
        Room::Unknown if message.mentions(me) => Verdict::Lookup,
        _ => Verdict::Ignore,
    }
}

/// Where `message` was written, from its server and what is known of its channel
/// (`known`: the channel's parent when it is a thread, `None` when it is not one).
pub fn room_of(access: &ChatAccess, message: &Message, known: Option<Option<&str>>) -> Room {
    if message.guild_id.is_none() {
        return Room::Dm;
    }
    if access.allow_channels.contains(&message.channel_id) {
        return Room::Listed;
    }
    match known {
        Some(Some(parent)) => Room::Thread {
            parent: parent.to_owned(),
        },
        Some(None) => Room::Other,
        None => Room::Unknown,
    }
}

/// `content` without the bot's mentions, trimmed.
pub fn strip_mention(content: &str, me: &str) -> String {
    content
        .replace(&format!("<@!{me}>"), "")
        .replace(&format!("<@{me}>"), "")
        .trim()
        .to_owned()
}

/// A thread's name from the text that starts it: its first line, cut short.
pub fn thread_name(text: &str) -> String {
    let line = text.lines().map(str::trim).find(|line| !line.is_empty());
    let Some(line) = line else {
        return "tern".to_owned();
    };
    let mut name: String = line.chars().take(THREAD_NAME_MAX).collect();
    if line.chars().count() > THREAD_NAME_MAX {
        name.push('…');
    }
    name
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const ME: &str = "999";

    fn access() -> ChatAccess {
        ChatAccess {
            allow_users: vec!["111".into()],
            allow_channels: vec!["222".into()],
            ..ChatAccess::default()
        }
    }

    fn message(author: &str, channel: &str, guild: bool, content: &str) -> Message {
        let mut d = json!({
            "id": "500",
            "channel_id": channel,
            "author": {"id": author, "username": "jane", "global_name": "Jane"},
            "content": content,
            "mentions": [],
        });
        if guild {
            d["guild_id"] = json!("1");
        }
        if content.contains(&format!("<@{ME}>")) {
            d["mentions"] = json!([{"id": ME, "username": "tern"}]);
        }
        Message::parse(&d).unwrap()
    }

    fn check(message: &Message, room: Room, talking: bool, expected: Verdict) {
        assert_eq!(
            judge(&access(), ME, message, &room, talking),
            expected,
            "{message:?} in {room:?}"
        );
    }

    fn deliver(key: &str, place: &str, audience: Audience, start_thread: bool) -> Verdict {
        Verdict::Deliver(Delivery {
            key: key.into(),
            place: place.into(),
            audience,
            trusted: audience != Audience::Public,
            start_thread,
        })
    }

    #[test]
    fn a_mention_in_a_listed_channel_starts_a_thread_named_by_the_message() {
        let asked = message("111", "222", true, "<@999> why is CI red?");
        check(
            &asked,
            Room::Listed,
            false,
            deliver("discord:222/500", "500", Audience::Team, true),
        );
        // Anyone else there is heard as the public.
        let stranger = message("333", "222", true, "<@999> hi");
        check(
            &stranger,
            Room::Listed,
            false,
            deliver("discord:222/500", "500", Audience::Public, true),
        );
        // Without a mention, nothing.
        check(
            &message("111", "222", true, "why is CI red?"),
            Room::Listed,
            false,
            Verdict::Ignore,
        );
    }

    #[test]
    fn in_a_thread_a_mention_is_needed_until_tern_talks_there() {
        let thread = Room::Thread {
            parent: "222".into(),
        };
        let plain = message("111", "700", true, "and the tests?");
        check(&plain, thread.clone(), false, Verdict::Ignore);
        check(
            &plain,
            thread.clone(),
            true,
            deliver("discord:222/700", "700", Audience::Team, false),
        );
        let mentioned = message("111", "700", true, "<@!999> and the tests?");
        assert!(mentioned.mentions(ME));
        check(
            &mentioned,
            thread,
            false,
            deliver("discord:222/700", "700", Audience::Team, false),
        );
        // A thread under a channel that is not listed stays out, even where tern talked.
        let elsewhere = Room::Thread {
            parent: "888".into(),
        };
        check(&plain, elsewhere, true, Verdict::Ignore);
    }

    #[test]
    fn dms_only_from_listed_people_and_as_their_own() {
        let dm = message("111", "640", false, "status?");
        check(
            &dm,
            Room::Dm,
            false,
            deliver("discord:640/640", "640", Audience::Personal, false),
        );
        check(
            &message("333", "640", false, "status?"),
            Room::Dm,
            false,
            Verdict::Ignore,
        );
    }

    #[test]
    fn own_bot_and_webhook_messages_are_never_inputs() {
        let own = message(ME, "222", true, "<@999> echo");
        check(&own, Room::Listed, true, Verdict::Ignore);
        let mut bot = message("111", "222", true, "<@999> hi");
        bot.author_bot = true;
        check(&bot, Room::Listed, false, Verdict::Ignore);
        let mut hook = message("111", "222", true, "<@999> hi");
        hook.webhook = true;
        check(&hook, Room::Listed, false, Verdict::Ignore);
    }

    #[test]
    fn an_unknown_channel_is_looked_up_only_for_a_mention() {
        check(
            &message("111", "700", true, "<@999> hi"),
            Room::Unknown,
            false,
            Verdict::Lookup,
        );
        check(
            &message("111", "700", true, "hi"),
            Room::Unknown,
            false,
            Verdict::Ignore,
        );
        check(
            &message("111", "700", true, "<@999> hi"),
            Room::Other,
            false,
            Verdict::Ignore,
        );
    }

    #[test]
    fn rooms_follow_from_the_server_the_list_and_what_is_known() {
        let access = access();
        let room = |channel: &str, guild: bool, known: Option<Option<&str>>| {
            room_of(&access, &message("111", channel, guild, "x"), known)
        };
        assert_eq!(room("640", false, None), Room::Dm);
        assert_eq!(room("222", true, None), Room::Listed);
        assert_eq!(
            room("700", true, Some(Some("222"))),
            Room::Thread {
                parent: "222".into()
            }
        );
        assert_eq!(room("701", true, Some(None)), Room::Other);
        assert_eq!(room("702", true, None), Room::Unknown);
    }

    #[test]
    fn mentions_are_stripped_and_threads_named() {
        assert_eq!(strip_mention("<@999> why?", ME), "why?");
        assert_eq!(strip_mention("hey <@!999>, look", ME), "hey , look");
        assert_eq!(strip_mention("<@123> stays", ME), "<@123> stays");
        assert_eq!(thread_name("\n  why is CI red?\nmore"), "why is CI red?");
        assert_eq!(thread_name(""), "tern");
        let long = thread_name(&"é".repeat(200));
        assert_eq!(long.chars().count(), THREAD_NAME_MAX + 1);
    }

    #[test]
    fn a_message_lacking_its_ids_is_not_read() {
        assert_eq!(Message::parse(&json!({"id": "1", "channel_id": "2"})), None);
        assert_eq!(Message::parse(&json!("text")), None);
        let named = Message::parse(
            &json!({"id": "1", "channel_id": "2", "author": {"id": "3", "username": "u"}}),
        )
        .unwrap();
        assert_eq!(named.author_name, "u");
    }
}
