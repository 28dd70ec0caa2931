//! The session's in-memory state and how the journal rebuilds it.
//!
//! Everything here is pure: `apply` folds one journal event into the state, and `replay`
//! folds a whole journal, then reports the repairs the journal needs so that every tool call
//! stays paired with a result even when the process died in the middle of a batch (or while
//! a call of it waited for a person's approval).

use super::approvals::STOPPED_WAITING;
use super::events::JournalHead;
use crate::domain::{
    Audience, ContentBlock, ErrorCategory, Grant, InputKind, JobRecord, Message, Role, Sender,
    SessionId, SubagentRole, ToolResult, Usage,
};
use crate::store::{JournalEvent, JournalRecord, title_from_input};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashSet, VecDeque};
use std::path::{Path, PathBuf};

/// How many recently read or written files the working context remembers.
pub const RECENT_FILES: usize = 10;

/// The result text given to a call that never started because the process stopped
/// mid-batch. Calls that can change anything journal their start before they run, so one
/// without that record did not run; a read-only one may have, to no effect.
pub const INTERRUPTED_CALL: &str =
    "not run: tern stopped before this call ran; call it again if it is still needed";

/// The result text given to a call whose start was journaled but whose result never was:
/// it may have done all it was asked.
pub const OUTCOME_UNKNOWN: &str = "outcome unknown: tern stopped while this ran; it may have \
     completed — check its effects before running it again";

/// What a session knows between journal events. Serializable, so a snapshot can stand in
/// for the journal up to the position it was taken at.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionState {
    pub id: SessionId,
    pub project_dir: PathBuf,
    /// Where relative paths and shell commands start.
    pub cwd: PathBuf,
    pub messages: Vec<Message>,
    /// Most recent first, at most [`RECENT_FILES`].
    pub recent_files: VecDeque<PathBuf>,
    /// Tokens used over the session's life.
    pub usage: Usage,
    /// The latest call's usage: how full the context window is.
    pub last_usage: Option<Usage>,
    /// How many messages the history held when that call was made; later ones were not
    /// counted in it yet.
    pub messages_at_last_usage: usize,
    pub title: Option<String>,
    /// Turns that ended, completed or failed.
    pub turns: u64,
    /// Whether the journal's last turn has not ended yet.
    pub turn_open: bool,
    /// Tier A of the prompt, per audience, as last journaled.
    pub system_prompts: BTreeMap<Audience, String>,
    /// Tier B of the prompt, per audience; cleared by a compaction so it is rendered again.
    pub static_contexts: BTreeMap<Audience, String>,
    /// The journal position of the last event applied.
    #[serde(default)]
    pub last_seq: u64,
    /// Who sent the latest input, for whom, and whether a person typed it: whom a turn
    /// resumed without a new input answers.
    #[serde(default)]
    pub last_input: Option<(Sender, Audience, InputKind)>,
    /// What the person's "always" answers allow for the rest of the session.
    #[serde(default)]
    pub grants: BTreeSet<Grant>,
    /// The call whose approval request has no decision yet, if one waits.
    #[serde(default)]
    pub pending_approval: Option<String>,
    /// Calls journaled as started that have no result yet.
    #[serde(default)]
    pub started_calls: BTreeSet<String>,
    /// The title the first input gave, while it is still the session's title: after the
    /// first turn a model call may find a better one.
    #[serde(default)]
    pub derived_title: Option<String>,
    /// For a subagent: its role (definition, parent, run), from its first event.
    #[serde(default)]
    pub subagent: Option<SubagentRole>,
    /// The background jobs it started, in order.
    #[serde(default)]
    pub jobs: Vec<JobRecord>,
    /// The journal position the latest snapshot was taken at.
    #[serde(skip)]
    pub snapshot_seq: u64,
    /// `last_seq`, shared with what stamps the session's events.
    #[serde(skip)]
    pub head: JournalHead,
}

impl SessionState {
    pub fn new(id: SessionId, project_dir: PathBuf) -> Self {
        Self {
            id,
            cwd: project_dir.clone(),
            project_dir,
            messages: Vec::new(),
            recent_files: VecDeque::new(),
            usage: Usage::default(),
            last_usage: None,
            messages_at_last_usage: 0,
            title: None,
            turns: 0,
            turn_open: false,
            system_prompts: BTreeMap::new(),
            static_contexts: BTreeMap::new(),
            last_seq: 0,
            snapshot_seq: 0,
            head: JournalHead::default(),
            last_input: None,
            grants: BTreeSet::new(),
            pending_approval: None,
            started_calls: BTreeSet::new(),
            derived_title: None,
            subagent: None,
            jobs: Vec::new(),
        }
    }

    /// Moves the journal position to `seq`, where the session's events are stamped from now.
    pub fn set_last_seq(&mut self, seq: u64) {
        self.last_seq = seq;
        self.head.set(seq);
    }

    /// Folds one journal event into the state.
    pub fn apply(&mut self, event: &JournalEvent) {
        match event {
            JournalEvent::InputAccepted {
                text,
                sender,
                audience,
                kind,
            } => {
                if self.title.is_none() {
                    self.derived_title = Some(title_from_input(text));
                }
                self.messages.push(Message::user_text(text.clone()));
                self.turn_open = true;
                self.last_input = Some((sender.clone(), *audience, *kind));
            }
            JournalEvent::AssistantMessage { content, .. } => {
                self.messages.push(Message {
                    role: Role::Assistant,
                    content: content.clone(),
                });
            }
            JournalEvent::ToolResults { results, .. } => {
                for result in results {
                    self.started_calls.remove(&result.tool_use_id);
                }
                if let Some(waiting) = &self.pending_approval
                    && results.iter().any(|r| &r.tool_use_id == waiting)
                {
                    self.pending_approval = None;
                }
                let content = results.iter().cloned().map(ContentBlock::ToolResult);
                match self.messages.last_mut() {
                    // The rest of a batch that waited for a person: one message holds all
                    // its results, as if the batch had been journaled at once.
                    Some(last) if is_results_only(last) => last.content.extend(content),
                    _ => self.messages.push(Message {
                        role: Role::User,
                        content: content.collect(),
                    }),
                }
            }
            JournalEvent::ArgumentsShortened { inputs } => self.shorten_arguments(inputs),
            JournalEvent::Usage { usage, .. } => {
                self.usage.add(usage);
                self.last_usage = Some(*usage);
                // Usage is journaled before the reply it belongs to, so this is what was sent.
                self.messages_at_last_usage = self.messages.len();
            }
            JournalEvent::TurnCompleted { .. } | JournalEvent::TurnFailed { .. } => {
                self.turns += 1;
                self.turn_open = false;
                self.started_calls.clear();
            }
            JournalEvent::ToolCallsStarted { call_ids } => {
                self.started_calls.extend(call_ids.iter().cloned());
            }
            JournalEvent::TitleChanged { title } => {
                if self.derived_title.as_ref() != Some(title) {
                    self.derived_title = None;
                }
                self.title = Some(title.clone());
            }
            JournalEvent::WorkingDirectoryChanged { path } => self.cwd = path.clone(),
            JournalEvent::FileTouched { path } => self.touch_file(path),
            JournalEvent::Message { message } => self.messages.push(message.clone()),
            JournalEvent::SystemPromptSet { audience, text } => {
                self.system_prompts.insert(*audience, text.clone());
            }
            JournalEvent::StaticContextSet { audience, text } => {
                self.static_contexts.insert(*audience, text.clone());
            }
            JournalEvent::Compacted { messages, .. } => {
                self.messages = messages.clone();
                self.static_contexts.clear();
                self.last_usage = None;
                self.messages_at_last_usage = 0;
            }
            JournalEvent::MemoryCheckpoint { .. } => {}
            JournalEvent::Passivated { .. } => {
                for job in self.jobs.iter_mut().filter(|job| job.ended.is_none()) {
                    job.rested = true;
                }
            }
            JournalEvent::SubagentRoleSet { role } => self.subagent = Some(role.clone()),
            JournalEvent::JobStarted { job } => self.jobs.push(job.clone()),
            JournalEvent::JobEnded { id, how } => {
                if let Some(job) = self.jobs.iter_mut().find(|job| job.id == *id) {
                    job.ended = Some(how.clone());
                }
            }
            JournalEvent::TurnResumed { .. } => self.turn_open = true,
            JournalEvent::NudgeAdded { text } => {
                let nudge = Message::user_text(text.clone());
                match self.latest_input_index() {
                    Some(at) => self.messages.insert(at, nudge),
                    None => self.messages.push(nudge),
                }
            }
            JournalEvent::ApprovalRequested { call_id, .. } => {
                self.pending_approval = Some(call_id.clone());
            }
            JournalEvent::ApprovalDecided { call_id, grant, .. } => {
                if self.pending_approval.as_ref() == Some(call_id) {
                    self.pending_approval = None;
                }
                if let Some(grant) = grant {
                    self.grants.insert(grant.clone());
                }
            }
        }
    }

    /// Gives each call named in `inputs` the arguments it maps to, looking from the newest
    /// message back, since the calls shortened are those of the latest batches (and a
    /// provider may use an id again in a later reply: the newest call of an id is meant).
    fn shorten_arguments(&mut self, inputs: &BTreeMap<String, serde_json::Value>) {
        let mut done: HashSet<&str> = HashSet::new();
        for message in self.messages.iter_mut().rev() {
            if done.len() == inputs.len() {
                return;
            }
            for block in &mut message.content {
                if let ContentBlock::ToolUse(call) = block
                    && let Some((id, input)) = inputs.get_key_value(&call.id)
                    && done.insert(id.as_str())
                {
                    call.input = input.clone();
                }
            }
        }
    }

    /// Where the latest user message is, when the history ends with one (a person's or an
    /// automation's text, not tool results).
    fn latest_input_index(&self) -> Option<usize> {
        let last = self.messages.last()?;
        let is_input = last.role == Role::User
            && last
                .content
                .iter()
                .all(|block| matches!(block, ContentBlock::Text { .. }));
        is_input.then(|| self.messages.len() - 1)
    }

    /// Moves `path` to the front of the recent files.
    pub fn touch_file(&mut self, path: &Path) {
        self.recent_files.retain(|p| p != path);
        self.recent_files.push_front(path.to_path_buf());
        self.recent_files.truncate(RECENT_FILES);
    }

    /// Rebuilds a session from its journal. Returns the state and the events that must be
    /// appended to repair the journal (results for calls that never got one, and the end of
    /// a turn that the process did not live to finish).
    pub fn replay(id: SessionId, project_dir: PathBuf, records: &[JournalRecord]) -> Replay {
        Self::replay_onto(Self::new(id, project_dir), records, &|_| None)
    }

    /// [`SessionState::replay`] starting from `state` (a snapshot) instead of an empty
    /// session: `records` are the journal after the snapshot's position. `captured` gives,
    /// for a call that was running when tern stopped, what it had printed (its spool), to go
    /// with its "outcome unknown".
    pub fn replay_onto(
        mut state: Self,
        records: &[JournalRecord],
        captured: &dyn Fn(&str) -> Option<String>,
    ) -> Replay {
        // A snapshot brings its position but not the shared head.
        state.set_last_seq(state.last_seq);
        for record in records {
            state.apply(&record.event);
            state.set_last_seq(record.seq);
        }
        let mut repairs = Vec::new();
        let orphans = state.unanswered_calls();
        if !orphans.is_empty() {
            let waiting = state.pending_approval.clone();
            let results = orphans
                .into_iter()
                .map(|id| {
                    let why = if waiting.as_ref() == Some(&id) {
                        STOPPED_WAITING.to_owned()
                    } else if state.started_calls.contains(&id) {
                        outcome_unknown(captured(&id).as_deref())
                    } else {
                        INTERRUPTED_CALL.to_owned()
                    };
                    ToolResult::error(id, why)
                })
                .collect();
            repairs.push(JournalEvent::results_not_timed(results));
        }
        if state.turn_open {
            repairs.push(JournalEvent::TurnFailed {
                category: ErrorCategory::Cancelled,
                message: "interrupted: tern stopped before this turn finished".to_owned(),
                stop: None,
            });
        }
        for event in &repairs {
            state.apply(event);
        }
        Replay { state, repairs }
    }

    /// Ids of tool calls in the last assistant message that no later message answers.
    pub fn unanswered_calls(&self) -> Vec<String> {
        let Some(last_assistant) = self
            .messages
            .iter()
            .rposition(|m| m.role == Role::Assistant)
        else {
            return Vec::new();
        };
        let answered: HashSet<&str> = self.messages[last_assistant + 1..]
            .iter()
            .flat_map(|m| m.tool_results())
            .map(|r| r.tool_use_id.as_str())
            .collect();
        self.messages[last_assistant]
            .tool_calls()
            .filter(|call| !answered.contains(call.id.as_str()))
            .map(|call| call.id.clone())
            .collect()
    }

    /// The text of the last assistant message, if the history ends with one.
    pub fn last_reply_text(&self) -> Option<String> {
        self.messages
            .last()
            .filter(|m| m.role == Role::Assistant)
            .map(Message::text)
    }
}

/// The result of a call that was running when tern stopped, with what it had printed.
fn outcome_unknown(captured: Option<&str>) -> String {
    match captured {
        Some(text) if !text.trim().is_empty() => format!(
            "{OUTCOME_UNKNOWN}. What it printed before tern stopped:\n{}",
            text.trim_end()
        ),
        _ => OUTCOME_UNKNOWN.to_owned(),
    }
}

/// Whether `message` holds tool results and nothing else.
fn is_results_only(message: &Message) -> bool {
    message.role == Role::User
        && !message.content.is_empty()
        && message
            .content
            .iter()
            .all(|block| matches!(block, ContentBlock::ToolResult(_)))
}

/// A replayed session and the journal repairs it needs.
#[derive(Debug, Clone, PartialEq)]
pub struct Replay {
    pub state: SessionState,
    pub repairs: Vec<JournalEvent>,
}

/// The placeholder that stands in for a message over the size limit.
pub fn oversize_placeholder(bytes: usize, limit: usize, saved_to: Option<&Path>) -> String {
    let kib = |n: usize| n as f64 / 1024.0;
    match saved_to {
        Some(path) => format!(
            "[message of {:.1} KiB replaced: messages over {:.0} KiB are not kept in the \
             history; the full text was saved to {} and can be read from there]",
            kib(bytes),
            kib(limit),
            path.display()
        ),
        None => format!(
            "[message of {:.1} KiB replaced: messages over {:.0} KiB are not kept in the history]",
            kib(bytes),
            kib(limit)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{Audience, Sender, ToolCall};
    use serde_json::json;

    fn record(seq: u64, event: JournalEvent) -> JournalRecord {
        JournalRecord {
            seq,
            at_ms: 0,
            event,
        }
    }

    fn input(text: &str) -> JournalEvent {
        JournalEvent::InputAccepted {
            sender: Sender::local_user(),
            audience: Audience::Personal,
            kind: crate::domain::InputKind::Person,
            text: text.to_owned(),
        }
    }

    fn call(id: &str) -> ContentBlock {
        ContentBlock::ToolUse(ToolCall {
            id: id.into(),
            name: "glob".into(),
            input: json!({}),
        })
    }

    fn replay(events: Vec<JournalEvent>) -> Replay {
        let records: Vec<_> = events
            .into_iter()
            .enumerate()
            .map(|(i, e)| record(i as u64 + 1, e))
            .collect();
        SessionState::replay(SessionId::from_string("s"), PathBuf::from("/p"), &records)
    }

    #[test]
    fn a_finished_turn_needs_no_repair() {
        let out = replay(vec![
            input("hi"),
            JournalEvent::AssistantMessage {
                model: "m".into(),
                content: vec![call("a")],
            },
            JournalEvent::ToolResults {
                results: vec![ToolResult::ok("a", "x")],
                took_ms: None,
            },
            JournalEvent::AssistantMessage {
                model: "m".into(),
                content: vec![ContentBlock::Text {
                    text: "done".into(),
                }],
            },
            JournalEvent::completed(),
        ]);
        assert!(out.repairs.is_empty());
        assert_eq!(out.state.messages.len(), 4);
        assert_eq!(out.state.last_reply_text().as_deref(), Some("done"));
    }

    #[test]
    fn calls_cut_off_by_a_crash_get_results_and_the_turn_ends() {
        let out = replay(vec![
            input("hi"),
            JournalEvent::AssistantMessage {
                model: "m".into(),
                content: vec![call("a"), call("b")],
            },
        ]);
        assert_eq!(out.repairs.len(), 2);
        let JournalEvent::ToolResults { results, .. } = &out.repairs[0] else {
            panic!("{out:?}")
        };
        let ids: Vec<_> = results.iter().map(|r| r.tool_use_id.as_str()).collect();
        assert_eq!(ids, ["a", "b"]);
        assert!(results.iter().all(|r| r.is_error));
        assert!(matches!(out.repairs[1], JournalEvent::TurnFailed { .. }));
        assert!(out.state.unanswered_calls().is_empty());
        assert!(!out.state.turn_open);
    }

    /// A call journaled as started may have done everything it was asked before tern
    /// stopped: it is never called "not run". One that did not start is.
    #[test]
    fn a_call_that_had_started_gets_outcome_unknown_with_what_it_printed() {
        let records: Vec<JournalRecord> = [
            input("hi"),
            JournalEvent::AssistantMessage {
                model: "m".into(),
                content: vec![call("read"), call("shell"), call("later")],
            },
            JournalEvent::ToolResults {
                results: vec![ToolResult::ok("read", "x")],
                took_ms: None,
            },
            JournalEvent::ToolCallsStarted {
                call_ids: vec!["shell".into()],
            },
        ]
        .into_iter()
        .enumerate()
        .map(|(i, e)| record(i as u64 + 1, e))
        .collect();
        let printed = |id: &str| (id == "shell").then(|| "migrating table 3 of 9\n".to_owned());
        let state = SessionState::new(SessionId::from_string("s"), PathBuf::from("/p"));
        let out = SessionState::replay_onto(state, &records, &printed);
        let JournalEvent::ToolResults { results, .. } = &out.repairs[0] else {
            panic!("{out:?}")
        };
        let shown: Vec<(&str, &str)> = results
            .iter()
            .map(|r| (r.tool_use_id.as_str(), r.content.as_str()))
            .collect();
        assert_eq!(
            shown,
            [
                (
                    "shell",
                    "outcome unknown: tern stopped while this ran; it may have completed — \
                     check its effects before running it again. What it printed before tern \
                     stopped:\nmigrating table 3 of 9"
                ),
                ("later", INTERRUPTED_CALL),
            ]
        );
        assert!(
            out.state.started_calls.is_empty(),
            "answered, so no longer running"
        );
    }

    #[test]
    fn a_started_call_that_got_its_result_needs_no_repair() {
        let out = replay(vec![
            input("hi"),
            JournalEvent::AssistantMessage {
                model: "m".into(),
                content: vec![call("a")],
            },
            JournalEvent::ToolCallsStarted {
                call_ids: vec!["a".into()],
            },
            JournalEvent::ToolResults {
                results: vec![ToolResult::ok("a", "done")],
                took_ms: None,
            },
            JournalEvent::completed(),
        ]);
        assert!(out.repairs.is_empty());
        assert!(out.state.started_calls.is_empty());
    }

    #[test]
    fn a_batch_journaled_in_parts_is_one_message_and_grants_survive_replay() {
        let grant = Grant::Command {
            prefix: "cargo test".into(),
        };
        let out = replay(vec![
            input("hi"),
            JournalEvent::AssistantMessage {
                model: "m".into(),
                content: vec![call("a"), call("b"), call("c")],
            },
            JournalEvent::ToolResults {
                results: vec![ToolResult::ok("a", "x")],
                took_ms: None,
            },
            JournalEvent::ApprovalRequested {
                call_id: "b".into(),
                tool: "shell_execute".into(),
                need: crate::domain::ApprovalNeed::Exec,
                prompt: "Run `cargo test`".into(),
            },
            JournalEvent::ApprovalDecided {
                call_id: "b".into(),
                answer: crate::domain::Answer::Always,
                grant: Some(grant.clone()),
            },
            JournalEvent::ToolResults {
                results: vec![ToolResult::ok("b", "y"), ToolResult::ok("c", "z")],
                took_ms: None,
            },
        ]);
        let ids: Vec<_> = out.state.messages[2]
            .tool_results()
            .map(|r| r.tool_use_id.as_str())
            .collect();
        assert_eq!(ids, ["a", "b", "c"]);
        assert_eq!(out.state.messages.len(), 3);
        assert!(out.state.grants.contains(&grant));
        assert_eq!(out.state.pending_approval, None);
    }

    /// Shortened arguments go to the newest call of the id, the older one with the same id
    /// (a provider that numbers its calls per reply) keeping its own.
    #[test]
    fn shortened_arguments_replace_the_newest_call_of_their_id() {
        let write = |content: &str| {
            ContentBlock::ToolUse(ToolCall {
                id: "a".into(),
                name: "file_write".into(),
                input: json!({"path": "x", "content": content}),
            })
        };
        let answered = || JournalEvent::ToolResults {
            results: vec![ToolResult::ok("a", "wrote x")],
            took_ms: None,
        };
        let short = json!({"path": "x", "content": "[content of 40.0 KiB written to x]"});
        let out = replay(vec![
            input("hi"),
            JournalEvent::AssistantMessage {
                model: "m".into(),
                content: vec![write("old")],
            },
            answered(),
            JournalEvent::AssistantMessage {
                model: "m".into(),
                content: vec![write(&"n".repeat(40 * 1024))],
            },
            answered(),
            JournalEvent::ArgumentsShortened {
                inputs: [("a".to_owned(), short.clone())].into(),
            },
            JournalEvent::completed(),
        ]);
        let inputs: Vec<_> = out
            .state
            .messages
            .iter()
            .flat_map(Message::tool_calls)
            .map(|call| call.input.clone())
            .collect();
        assert_eq!(inputs, [json!({"path": "x", "content": "old"}), short]);
        assert!(out.repairs.is_empty());
    }

    #[test]
    fn a_call_that_waited_for_approval_when_tern_died_is_answered_so() {
        let out = replay(vec![
            input("hi"),
            JournalEvent::AssistantMessage {
                model: "m".into(),
                content: vec![call("a"), call("b"), call("c")],
            },
            JournalEvent::ToolResults {
                results: vec![ToolResult::ok("a", "x")],
                took_ms: None,
            },
            JournalEvent::ApprovalRequested {
                call_id: "b".into(),
                tool: "shell_execute".into(),
                need: crate::domain::ApprovalNeed::Exec,
                prompt: "Run `make`".into(),
            },
        ]);
        let JournalEvent::ToolResults { results, .. } = &out.repairs[0] else {
            panic!("{out:?}")
        };
        let texts: Vec<_> = results
            .iter()
            .map(|r| (r.tool_use_id.as_str(), r.content.as_str()))
            .collect();
        assert_eq!(
            texts,
            [("b", STOPPED_WAITING), ("c", INTERRUPTED_CALL)],
            "the call that waited says so"
        );
        assert!(out.state.unanswered_calls().is_empty());
        assert_eq!(out.state.pending_approval, None);
        assert_eq!(out.state.messages[2].tool_results().count(), 3);
    }

    #[test]
    fn the_derived_title_is_known_until_another_replaces_it() {
        let derived = replay(vec![
            input("  fix the build\nmore"),
            JournalEvent::TitleChanged {
                title: "fix the build".into(),
            },
        ])
        .state;
        assert_eq!(derived.derived_title.as_deref(), Some("fix the build"));
        let renamed = replay(vec![
            input("fix the build"),
            JournalEvent::TitleChanged {
                title: "fix the build".into(),
            },
            JournalEvent::TitleChanged {
                title: "Repair the CI build".into(),
            },
        ])
        .state;
        assert_eq!(renamed.derived_title, None);
        let titled_first = replay(vec![
            JournalEvent::TitleChanged {
                title: "given".into(),
            },
            input("fix the build"),
        ])
        .state;
        assert_eq!(titled_first.derived_title, None);
    }

    #[test]
    fn recent_files_keep_ten_most_recent_first() {
        let mut events = vec![];
        for i in 0..12 {
            events.push(JournalEvent::FileTouched {
                path: PathBuf::from(format!("f{i}")),
            });
        }
        events.push(JournalEvent::FileTouched {
            path: PathBuf::from("f5"),
        });
        let state = replay(events).state;
        assert_eq!(state.recent_files.len(), RECENT_FILES);
        assert_eq!(state.recent_files[0], PathBuf::from("f5"));
        assert_eq!(state.recent_files[1], PathBuf::from("f11"));
    }

    #[test]
    fn the_nudge_goes_before_the_latest_input_and_tiers_per_audience() {
        let state = replay(vec![
            JournalEvent::SystemPromptSet {
                audience: Audience::Personal,
                text: "a".into(),
            },
            JournalEvent::StaticContextSet {
                audience: Audience::Public,
                text: "b".into(),
            },
            input("hi"),
            JournalEvent::NudgeAdded {
                text: "[system: now]".into(),
            },
        ])
        .state;
        let texts: Vec<_> = state.messages.iter().map(Message::text).collect();
        assert_eq!(texts, ["[system: now]", "hi"]);
        assert_eq!(state.system_prompts[&Audience::Personal], "a");
        assert_eq!(state.static_contexts[&Audience::Public], "b");
        assert!(!state.system_prompts.contains_key(&Audience::Public));
    }

    #[test]
    fn placeholder_names_size_and_place() {
        let text = oversize_placeholder(200 * 1024, 128 * 1024, Some(Path::new("/d/a.txt")));
        assert!(text.contains("200.0 KiB"), "{text}");
        assert!(text.contains("128 KiB"), "{text}");
        assert!(text.contains("/d/a.txt"), "{text}");
    }
}
