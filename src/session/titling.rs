//! Naming a session: after its first turn completes, while the title is still the one its
//! first input gave, one best-effort model call (the compaction model when one is set, the
//! conversation model otherwise, within `sidecar_llm_timeout`) asks for a short title.
//!
//! This file holds the request, the call and the cleaning of its answer. The actor decides
//! when to ask, runs the call beside the session while it is idle, and journals the title
//! through `snapshot::commit` on its own state, after any turn that started meanwhile; a call
//! that fails, times out or answers nothing usable leaves the derived title, with a log line.

use super::deps::SessionDeps;
use super::events::SessionEvent;
use super::snapshot;
use super::state::SessionState;
use crate::domain::{ContentBlock, Message, Role, TurnStop};
use crate::llm::ChatRequest;
use crate::prompt::NUDGE_OPENING;
use crate::store::JournalEvent;
use std::sync::Arc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// The longest title kept, in characters.
pub const TITLE_CHARS: usize = 60;

/// How much of the first input and of the answer the title call sees, in characters.
const EXCERPT_CHARS: usize = 2000;

/// The instructions the title call works under.
const TITLE_SYSTEM: &str = "You name conversations between a developer and a coding \
                            assistant. Reply with a title of 3 to 7 words that says what the \
                            conversation is about: no quotes, no trailing period, nothing else.";

/// The longest reply asked for, in tokens.
const TITLE_MAX_TOKENS: u32 = 64;

/// The actor's title call: the task while it runs, then the title it found until the actor
/// holds the state to journal it.
#[derive(Debug, Default)]
pub struct Titler {
    task: Option<JoinHandle<Option<String>>>,
    found: Option<String>,
}

impl Titler {
    /// Starts the title call when the turn that just ended (`stop`) completed as the
    /// session's first, titles are on, and the title is still the derived one.
    pub fn start_after(
        &mut self,
        deps: &Arc<SessionDeps>,
        state: &SessionState,
        stop: Option<TurnStop>,
    ) {
        // A subagent is titled by its task when it starts.
        if stop != Some(TurnStop::Completed)
            || !deps.settings.sidecar_titles
            || self.running()
            || state.subagent.is_some()
        {
            return;
        }
        if let Some(topic) = topic(state) {
            self.task = Some(tokio::spawn(suggest(deps.clone(), topic)));
        }
    }

    /// Whether the call is still running.
    pub fn running(&self) -> bool {
        self.task.is_some()
    }

    /// Returns once the running call has ended, keeping what it found; pending for ever when
    /// none runs.
    pub async fn finished(&mut self) {
        let Some(task) = &mut self.task else {
            return std::future::pending().await;
        };
        let found = task.await.ok().flatten();
        self.task = None;
        if found.is_some() {
            self.found = found;
        }
    }

    /// Journals the title found on `state` (through `snapshot::commit`), unless something
    /// renamed the session meanwhile; returns the event to publish.
    pub fn journal(
        &mut self,
        deps: &SessionDeps,
        state: &mut SessionState,
    ) -> Option<SessionEvent> {
        let title = self.found.take()?;
        if !still_wanted(state) || state.title.as_ref() == Some(&title) {
            return None;
        }
        let every = deps.settings.snapshot_every;
        let event = [JournalEvent::TitleChanged {
            title: title.clone(),
        }];
        match snapshot::commit_soon(&deps.store, every, state, &event) {
            Ok(_) => Some(SessionEvent::TitleChanged { title }),
            Err(err) => {
                tracing::warn!(%err, "could not journal the session's title; keeping the old one");
                None
            }
        }
    }

    /// Drops a call still running: it is best effort, and the session is stopping.
    pub fn abort(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// What the title call is given: the first input and the answer to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TitleTopic {
    pub input: String,
    pub answer: String,
}

/// Whether the turn that just ended (completed, as the session's first) should be followed by
/// a title call, and on what: only while the title is still the derived one.
pub fn topic(state: &SessionState) -> Option<TitleTopic> {
    if state.turns != 1 || state.title.is_none() || state.title != state.derived_title {
        return None;
    }
    let input = state.messages.iter().find_map(|m| {
        let is_input = m.role == Role::User
            && !m.content.is_empty()
            && m.content
                .iter()
                .all(|b| matches!(b, ContentBlock::Text { .. }));
        let text = m.text();
        (is_input && !text.starts_with(NUDGE_OPENING)).then_some(text)
    })?;
    let answer = state.last_reply_text().unwrap_or_default();
    Some(TitleTopic {
        input: excerpt(&input),
        answer: excerpt(&answer),
    })
}

/// Whether a found title may still replace the session's: nothing else renamed it meanwhile.
fn still_wanted(state: &SessionState) -> bool {
    state.title.is_some() && state.title == state.derived_title
}

/// The request for a title.
pub fn request(model: &str, topic: &TitleTopic) -> ChatRequest {
    ChatRequest {
        model: model.to_owned(),
        system: vec![TITLE_SYSTEM.to_owned()],
        messages: vec![Message::user_text(format!(
            "The developer wrote:\n{}\n\nThe assistant answered:\n{}\n\nThe title:",
            topic.input, topic.answer
        ))],
        tools: Vec::new(),
        max_output_tokens: TITLE_MAX_TOKENS,
        context_window: 0,
        cache_breakpoints: Vec::new(),
        cache_key: None,
        images: false,
    }
}

/// Asks the model for a title; `None` on failure, timeout or an unusable answer, each logged.
pub async fn suggest(deps: Arc<SessionDeps>, topic: TitleTopic) -> Option<String> {
    let client = deps.notes_client.as_ref().unwrap_or(&deps.client);
    let timeout = deps.settings.sidecar_llm_timeout;
    let request = request(&client.primary.model(), &topic);
    let cancel = CancellationToken::new();
    let mut quiet = ();
    let call = client.complete(request, &mut quiet, &cancel);
    let reply = match tokio::time::timeout(timeout, call).await {
        Ok(Ok(reply)) => reply,
        Ok(Err(err)) => {
            tracing::info!(%err, "no title from the model; keeping the one from the first input");
            return None;
        }
        Err(_) => {
            tracing::info!(
                "the title call took longer than {timeout:?} (sidecar_llm_timeout); keeping the \
                 one from the first input"
            );
            return None;
        }
    };
    let text = Message {
        role: Role::Assistant,
        content: reply.content,
    }
    .text();
    let title = sanitize(&text);
    if title.is_none() {
        tracing::info!("the title call answered nothing usable; keeping the one from the input");
    }
    title
}

/// A model's answer as a title: its first non-blank line, without a `Title:` label, quotes,
/// or a trailing period, spaces collapsed, at most [`TITLE_CHARS`] characters (cut at a word
/// when one ends close enough). `None` when nothing is left.
pub fn sanitize(raw: &str) -> Option<String> {
    const QUOTES: &[char] = &['"', '\'', '`', '“', '”', '‘', '’', '«', '»', '*', '#'];
    let line = raw.lines().map(str::trim).find(|line| !line.is_empty())?;
    let line = strip_label(line);
    let line = line.split_whitespace().collect::<Vec<_>>().join(" ");
    let line = line.trim_matches(QUOTES).trim();
    let line = line
        .trim_end_matches(['.', '。'])
        .trim_end_matches(QUOTES)
        .trim();
    if line.is_empty() {
        return None;
    }
    if line.chars().count() <= TITLE_CHARS {
        return Some(line.to_owned());
    }
    let cut: String = line.chars().take(TITLE_CHARS).collect();
    let ends_at_word = line.chars().nth(TITLE_CHARS) == Some(' ');
    let cut = match cut.rfind(' ') {
        _ if ends_at_word => cut.as_str(),
        Some(space) if cut[..space].chars().count() >= TITLE_CHARS * 2 / 3 => &cut[..space],
        _ => cut.as_str(),
    };
    Some(cut.trim_end_matches([' ', ',', ';', ':', '-']).to_owned())
}

/// `line` without a leading `Title:` (any case).
fn strip_label(line: &str) -> &str {
    match line.split_once(':') {
        Some((label, rest)) if label.trim().eq_ignore_ascii_case("title") => rest.trim(),
        _ => line,
    }
}

/// The start of `text`, at most [`EXCERPT_CHARS`] characters.
fn excerpt(text: &str) -> String {
    let text = text.trim();
    if text.chars().count() <= EXCERPT_CHARS {
        return text.to_owned();
    }
    let mut cut: String = text.chars().take(EXCERPT_CHARS).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::SessionId;
    use crate::store::JournalEvent;

    fn check(raw: &str, expected: Option<&str>) {
        assert_eq!(sanitize(raw).as_deref(), expected, "raw: {raw:?}");
    }

    #[test]
    fn titles_are_one_clean_line() {
        check("Fix the flaky CI build", Some("Fix the flaky CI build"));
        check(
            "  \"Fix the flaky CI build.\"  \n",
            Some("Fix the flaky CI build"),
        );
        check(
            "Title: Rename   the session module",
            Some("Rename the session module"),
        );
        check(
            "**Speed up the prompt cache**",
            Some("Speed up the prompt cache"),
        );
        check("\n\nFirst line\nsecond line", Some("First line"));
        check(
            "“Quoted with curly marks”.",
            Some("Quoted with curly marks"),
        );
        check(
            "Version 1.2 release notes",
            Some("Version 1.2 release notes"),
        );
        check("", None);
        check("  \"\" . ", None);
    }

    #[test]
    fn long_titles_are_cut_to_sixty_characters_at_a_word() {
        let raw = "Investigate why the integration tests time out on the shared runner every night";
        let title = sanitize(raw).unwrap();
        assert!(title.chars().count() <= TITLE_CHARS, "{title}");
        assert_eq!(
            title,
            "Investigate why the integration tests time out on the shared"
        );
        let word = "x".repeat(80);
        assert_eq!(sanitize(&word).unwrap().chars().count(), TITLE_CHARS);
    }

    fn state(events: &[JournalEvent]) -> SessionState {
        let mut state = SessionState::new(SessionId::from_string("s"), "/p".into());
        for event in events {
            state.apply(event);
        }
        state
    }

    fn input(text: &str) -> JournalEvent {
        JournalEvent::InputAccepted {
            sender: crate::domain::Sender::local_user(),
            audience: crate::domain::Audience::Personal,
            kind: crate::domain::InputKind::Person,
            text: text.into(),
        }
    }

    #[test]
    fn only_a_first_turn_with_the_derived_title_is_followed_by_a_title_call() {
        let first = [
            input("fix the build"),
            JournalEvent::TitleChanged {
                title: "fix the build".into(),
            },
            JournalEvent::NudgeAdded {
                text: format!("{NUDGE_OPENING}\n[current-time]"),
            },
            JournalEvent::AssistantMessage {
                model: "m".into(),
                content: vec![ContentBlock::Text {
                    text: "Fixed.".into(),
                }],
            },
            JournalEvent::completed(),
        ];
        assert_eq!(
            topic(&state(&first)),
            Some(TitleTopic {
                input: "fix the build".into(),
                answer: "Fixed.".into()
            })
        );
        let mut renamed = first.to_vec();
        renamed.push(JournalEvent::TitleChanged {
            title: "Chosen by hand".into(),
        });
        assert_eq!(topic(&state(&renamed)), None);
        let mut second = first.to_vec();
        second.extend([input("more"), JournalEvent::completed()]);
        assert_eq!(topic(&state(&second)), None);
    }
}
