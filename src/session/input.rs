//! What comes into a session: inputs, who sent them, and how one is journaled before it is
//! acknowledged.

use super::deps::SessionDeps;
use super::envelope::SessionDirs;
use super::phase::IllegalTransition;
use super::snapshot;
use super::state::{SessionState, oversize_placeholder};
use crate::domain::{Audience, InputKind, Sender};
use crate::llm::LlmError;
use crate::prompt;
use crate::store::{JournalEvent, StoreError, Unsynced, title_from_input};
use crate::tools::ApprovalMode;
use std::path::PathBuf;
use std::sync::Arc;

/// Input for the session, from any front end.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct UserInput {
    pub sender: Sender,
    pub audience: Audience,
    /// A person, or which automation.
    pub kind: InputKind,
    pub text: InputText,
    /// How much the turn this input starts may do without asking, when not what the session
    /// says (`tern run --approve`); inputs that join a running turn keep that turn's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<ApprovalMode>,
    /// Files to join the session's recent files with the input: those a subagent run that
    /// reports in it wrote.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub touched: Vec<PathBuf>,
}

impl UserInput {
    /// Text typed by the person at this terminal.
    pub fn local(text: impl Into<InputText>) -> Self {
        Self {
            sender: Sender::local_user(),
            audience: Audience::Personal,
            kind: InputKind::Person,
            text: text.into(),
            approval: None,
            touched: Vec::new(),
        }
    }

    /// Text typed at a terminal that answers approvals: its turn asks the person, whatever
    /// the process serving the session would otherwise do.
    pub fn asking(text: impl Into<InputText>) -> Self {
        Self {
            approval: Some(ApprovalMode::Ask),
            ..Self::local(text)
        }
    }

    /// Whether no person typed this.
    pub fn is_automation(&self) -> bool {
        self.kind.is_automation() || self.sender.automated
    }
}

/// An input's text, shared rather than copied on its way in: a front end that may have to
/// give a message back keeps a handle on the same text the session journals, so a paste of
/// megabytes exists once. Serialized as a plain string.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(from = "String")]
pub struct InputText(Arc<String>);

impl serde::Serialize for InputText {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        // Written from where it is: a shared text is not copied to be sent.
        serializer.serialize_str(&self.0)
    }
}

impl InputText {
    /// The text as a `String`: moved out when nothing else holds it, else copied.
    pub fn into_string(self) -> String {
        Arc::try_unwrap(self.0).unwrap_or_else(|shared| shared.as_str().to_owned())
    }
}

impl std::ops::Deref for InputText {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl From<String> for InputText {
    fn from(text: String) -> Self {
        Self(Arc::new(text))
    }
}

impl From<&str> for InputText {
    fn from(text: &str) -> Self {
        Self(Arc::new(text.to_owned()))
    }
}

impl From<&String> for InputText {
    fn from(text: &String) -> Self {
        Self::from(text.as_str())
    }
}

impl From<InputText> for String {
    fn from(text: InputText) -> Self {
        text.into_string()
    }
}

impl PartialEq<str> for InputText {
    fn eq(&self, other: &str) -> bool {
        self.0.as_str() == other
    }
}

impl PartialEq<&str> for InputText {
    fn eq(&self, other: &&str) -> bool {
        self.0.as_str() == *other
    }
}

/// Why a session request failed.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Phase(#[from] IllegalTransition),
    #[error("the session has stopped and takes no more requests")]
    Closed,
    /// [`SessionError::Closed`] for an input the actor had not taken in: given back, so it
    /// can go to the actor started in its place (see `SessionHandle::offer`).
    #[error("the session has stopped and takes no more requests")]
    NotTaken(Box<UserInput>),
    #[error("the input is empty; type a message for the model")]
    EmptyInput,
    #[error(
        "the input was dropped because the turn was cancelled before it started; send it again"
    )]
    Cancelled,
    #[error(
        "the input is {bytes} bytes, over the {limit}-byte message limit, and could not be saved \
         in {dir} to keep it whole; check that the folder is writable, or send a shorter message"
    )]
    Oversized {
        bytes: usize,
        limit: usize,
        dir: PathBuf,
    },
    /// A file of the session could not be written or read.
    #[error("{0}")]
    Io(String),
    /// An answer for a call that is not waiting for one.
    #[error(
        "no tool call `{call_id}` is waiting for approval: it was answered already, its turn \
         ended, or the id is wrong; answer the call id of a pending approval request"
    )]
    NotWaiting { call_id: String },
    /// An input naming an MCP prompt (`/mcp__server__prompt`) that could not be had.
    #[error("{0}")]
    Prompt(String),
    /// Work the session did on request failed (a compaction on demand).
    #[error(transparent)]
    Turn(#[from] LlmError),
}

/// Journals `input` durably and applies it to `state`; returns its journal position and the
/// text as the history keeps it. An input over the size limit is kept whole as an artifact
/// and replaced by a placeholder; if it cannot be kept, it is refused rather than lost. No
/// input may pass itself off as tern's own note to the model. The first input also names the
/// session, in the same commit.
pub fn journal_input(
    deps: &SessionDeps,
    dirs: &SessionDirs,
    state: &mut SessionState,
    input: UserInput,
) -> Result<(u64, String), SessionError> {
    let (events, text) = input_events(deps, dirs, state, input)?;
    let records = snapshot::commit(&deps.store, deps.settings.snapshot_every, state, &events)?;
    Ok((first_seq(&records), text))
}

/// [`journal_input`] in two steps, awaited rather than blocked on (the actor's thread serves
/// other sessions while the disk works): the input is stored and applied to `state`, and what
/// makes it durable is returned for [`snapshot::sync_awaited`], for its turn to start while
/// the disk syncs. It may not be acknowledged until then.
pub async fn journal_input_unsynced(
    deps: &SessionDeps,
    dirs: &SessionDirs,
    state: &mut SessionState,
    input: UserInput,
) -> Result<(u64, String, Unsynced), SessionError> {
    let (events, text) = input_events(deps, dirs, state, input)?;
    let every = deps.settings.snapshot_every;
    let (records, unsynced) =
        snapshot::commit_unsynced_awaited(&deps.store, every, state, events).await?;
    Ok((first_seq(&records), text, unsynced))
}

/// The journal position of an input: that of the first of its records.
fn first_seq(records: &[crate::store::JournalRecord]) -> u64 {
    records.first().map_or(0, |record| record.seq)
}

/// The events that journal `input`, and its text as the history keeps it.
fn input_events(
    deps: &SessionDeps,
    dirs: &SessionDirs,
    state: &SessionState,
    input: UserInput,
) -> Result<(Vec<JournalEvent>, String), SessionError> {
    let limit = deps.settings.max_message_bytes;
    // Taken as it came unless a line must be quoted: a paste of megabytes is not copied; it
    // goes to its artifact from where it is.
    let quoted = match prompt::quote_lookalikes(&input.text) {
        std::borrow::Cow::Owned(quoted) => Some(quoted),
        std::borrow::Cow::Borrowed(_) => None,
    };
    let whole: &str = quoted.as_deref().unwrap_or(&input.text);
    let text = if whole.len() > limit {
        let name = format!("input-{}.txt", state.messages.len());
        let Some(saved) = dirs.save_artifact(&name, whole) else {
            return Err(SessionError::Oversized {
                bytes: whole.len(),
                limit,
                dir: dirs.artifact_dir.clone(),
            });
        };
        oversize_placeholder(whole.len(), limit, Some(&saved))
    } else {
        quoted.unwrap_or_else(|| input.text.into_string())
    };
    let mut events = vec![JournalEvent::InputAccepted {
        sender: input.sender,
        audience: input.audience,
        kind: input.kind,
        text: text.clone(),
    }];
    events.extend(
        input
            .touched
            .into_iter()
            .map(|path| JournalEvent::FileTouched { path }),
    );
    if state.title.is_none() {
        let title = title_from_input(&text);
        if !title.is_empty() {
            events.push(JournalEvent::TitleChanged { title });
        }
    }
    Ok((events, text))
}
