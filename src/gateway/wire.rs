//! The owner's socket protocol: the messages, sent as length-prefixed JSON frames (the
//! [`frames`] module; a long text travels raw after its frame).
//!
//! Both sides open with a [`Hello`]; the owner answers a client of another protocol or
//! version with its own hello and closes, so the two are never mixed. Then the client sends
//! [`Request`]s, each with an id of its choosing, and the owner sends [`ToClient`] frames: one
//! reply per request, in any order, and the items of every feed the client subscribed to,
//! named by the id of the request that opened it.

use super::events::LifecycleEvent;
use super::feed::FeedItem;
use super::maintenance::Cleanup;
use super::manager::{Delivered, ModelShown};
use super::service::Preview;
use super::service::ShellRun;
use crate::domain::{Answer, RunId, SessionId};
use crate::session::{InputText, OutputFilter, UserInput};
use crate::store::{JournalRecord, ListFilter, Overrides, PageCursor, RecentPage, SessionMeta};
use crate::tools::ApprovalMode;
use crate::tools::jobs::JobView;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

mod frames;

use frames::ATTACH_OVER;
pub use frames::{Frame, WireError, read_frame, write_batches, write_frame};

/// Changes whenever a frame's meaning does.
pub const PROTOCOL: u32 = 4;
/// Largest frame either side accepts: a replay chunk of long tool outputs fits many times.
pub const MAX_FRAME: usize = 256 * 1024 * 1024;

/// The first frame each way.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    pub protocol: u32,
    /// The tern version that speaks.
    pub version: String,
    pub pid: u32,
}

impl Hello {
    /// This process's hello.
    pub fn ours() -> Self {
        Self {
            protocol: PROTOCOL,
            version: env!("CARGO_PKG_VERSION").to_owned(),
            pid: std::process::id(),
        }
    }

    /// Whether a peer that said `other` speaks as this one does.
    pub fn matches(&self, other: &Hello) -> bool {
        self.protocol == other.protocol && self.version == other.version
    }
}

/// A client's request.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Request {
    pub id: u64,
    pub call: Call,
}

/// What a client asks of the owner: the [`super::SessionService`] methods, one each.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "call", rename_all = "snake_case")]
pub enum Call {
    Send {
        key: String,
        project_dir: PathBuf,
        input: UserInput,
    },
    SendTo {
        id: SessionId,
        input: UserInput,
    },
    /// Sends, with a feed (named by this request's id) attached to the session the input
    /// goes to before it is sent: answered [`Reply::Followed`], then the feed's items.
    SendFollowed {
        key: String,
        project_dir: PathBuf,
        input: UserInput,
        filter: OutputFilter,
    },
    OpenKey {
        key: String,
        project_dir: PathBuf,
    },
    Open {
        id: SessionId,
    },
    /// Opens a feed named by this request's id.
    Subscribe {
        id: SessionId,
        from: Option<u64>,
        filter: OutputFilter,
        backlog: usize,
    },
    /// Opens a stream, named by this request's id, of every session's lifecycle events from
    /// now on (see [`super::LifecycleEvent`]).
    Lifecycle,
    /// Closes the feed (or stream) the request `stream` opened.
    Unsubscribe {
        stream: u64,
    },
    Answer {
        id: SessionId,
        call_id: String,
        answer: Answer,
    },
    Cancel {
        id: SessionId,
    },
    Compact {
        id: SessionId,
    },
    Reset {
        key: String,
        project_dir: PathBuf,
    },
    SetApproval {
        id: SessionId,
        mode: ApprovalMode,
    },
    SetModel {
        id: SessionId,
        overrides: Overrides,
    },
    /// Only these tools (`None`: all of the owner's).
    SetTools {
        id: SessionId,
        tools: Option<Vec<String>>,
    },
    Shell {
        cwd: PathBuf,
        command: String,
    },
    Meta {
        id: SessionId,
    },
    Resolve {
        prefix: String,
    },
    Latest {
        project_dir: PathBuf,
    },
    GitBranch {
        dir: PathBuf,
    },
    /// The models the provider of session `id` lists.
    ListedModels {
        id: SessionId,
    },
    Files {
        root: PathBuf,
    },
    RepoMap {
        id: Option<SessionId>,
        project_dir: PathBuf,
        focus: Vec<String>,
    },
    StoredSessions,
    RecentPage {
        filter: ListFilter,
        after: Option<PageCursor>,
        limit: usize,
        max_scanned: usize,
    },
    ScanSearch,
    Tail {
        id: SessionId,
        n: usize,
    },
    /// The `limit` most recently used sessions, archived or not.
    Recent {
        limit: usize,
        archived: bool,
    },
    /// A session's whole journal.
    Journal {
        id: SessionId,
    },
    /// A stored session's meta, or none.
    Lookup {
        id: SessionId,
    },
    /// `tern sessions cleanup`: `enforce` or only report (`None`: as the config says).
    Cleanup {
        enforce: Option<bool>,
    },
    /// The request a turn for `input` would send first (`--print-prompt`).
    Preview {
        id: Option<SessionId>,
        project_dir: PathBuf,
        input: UserInput,
    },
    /// Waits until session `id` has no turn running.
    Idle {
        id: SessionId,
    },
    /// How many subagent runs of session `id` have not been reported to it yet.
    PendingRuns {
        id: SessionId,
    },
    /// The runs of session `parent` still queued or working.
    LiveRuns {
        parent: SessionId,
    },
    /// Where run `run` of session `parent` stands (as `check_agent_run` says it), after
    /// cancelling it when `cancel`.
    Run {
        parent: SessionId,
        run: RunId,
        cancel: bool,
    },
    /// The background jobs of session `id`, with what each printed when `with_output`.
    Jobs {
        id: SessionId,
        with_output: bool,
    },
    /// A copy of the database as of a durable commit made now, for `tern doctor` to check.
    CopyStore,
    /// The status of each chat channel the owner runs.
    Channels,
    /// The MCP servers of a project as the owner runs them (`/mcp`, `tern mcp list`), after
    /// approving the one of its `.mcp.json` named by `approve`, if any.
    Mcp {
        project_dir: PathBuf,
        approve: Option<String>,
    },
    /// What to tell a person opening the project about servers of its `.mcp.json` that are
    /// not approved: nothing when all are.
    McpUnapproved {
        project_dir: PathBuf,
    },
    /// Sent in place of a request too large for a frame: answered with `refused`.
    Oversized {
        refused: String,
    },
}

impl Call {
    /// The input a call sends, if it sends one.
    fn input_mut(&mut self) -> Option<&mut UserInput> {
        match self {
            Call::Send { input, .. }
            | Call::SendTo { input, .. }
            | Call::SendFollowed { input, .. } => Some(input),
            _ => None,
        }
    }

    /// Whether asking this twice is the same as asking it once: a read, or waiting.
    pub fn changes_nothing(&self) -> bool {
        matches!(
            self,
            Call::Meta { .. }
                | Call::Preview { .. }
                | Call::Resolve { .. }
                | Call::Latest { .. }
                | Call::GitBranch { .. }
                | Call::ListedModels { .. }
                | Call::Files { .. }
                | Call::RepoMap { .. }
                | Call::StoredSessions
                | Call::RecentPage { .. }
                | Call::ScanSearch
                | Call::Tail { .. }
                | Call::Recent { .. }
                | Call::Journal { .. }
                | Call::Lookup { .. }
                | Call::Idle { .. }
                | Call::PendingRuns { .. }
                | Call::Jobs { .. }
                | Call::LiveRuns { .. }
                | Call::Channels
                | Call::Mcp { .. }
                | Call::McpUnapproved { .. }
        )
    }
}

/// The owner's answer to one request.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "reply", rename_all = "snake_case")]
pub enum Reply {
    Done,
    Delivered(Delivered),
    Seq {
        seq: u64,
    },
    Session {
        id: SessionId,
    },
    Meta(Box<SessionMeta>),
    MaybeMeta {
        meta: Option<Box<SessionMeta>>,
    },
    Changed {
        changed: bool,
    },
    Shell(ShellRun),
    Branch {
        branch: Option<String>,
    },
    Files {
        files: Vec<String>,
    },
    Map(Box<super::map::MapShown>),
    Lines {
        lines: Vec<String>,
    },
    Count {
        count: u64,
    },
    /// A run's status, as JSON.
    Status {
        status: serde_json::Value,
    },
    Jobs {
        jobs: Vec<JobView>,
    },
    Runs {
        runs: Vec<RunId>,
    },
    Page(RecentPage),
    Sessions {
        sessions: Vec<SessionMeta>,
    },
    Search(SearchScan),
    Records {
        records: Vec<JournalRecord>,
    },
    /// The feed is open; its items follow under this request's id.
    Streaming,
    Channels {
        channels: Vec<crate::channels::ChannelStatus>,
    },
    Model(ModelShown),
    /// The provider's name and the models it lists (`None`: it lists none).
    ListedModels {
        provider: String,
        models: Option<Vec<String>>,
    },
    Cleanup(Box<Cleanup>),
    Preview(Box<Preview>),
    /// The input was delivered and its session's feed is open.
    Followed(Delivered),
    /// The database was copied to `path`, which the asker checks and then removes.
    Copied {
        path: PathBuf,
        bytes: u64,
    },
}

/// A whole scan of the search table, for a client's picker.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SearchScan {
    pub entries: Vec<ScannedEntry>,
    /// Every session's last activity, most recent first.
    pub activity: Vec<(i64, String)>,
}

/// One session's searchable text.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ScannedEntry {
    pub id: String,
    pub title: String,
    pub first_input: String,
    pub project_dir: String,
    pub archived: bool,
}

/// A frame from the owner.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "to", rename_all = "snake_case")]
pub enum ToClient {
    Reply {
        id: u64,
        result: Result<Reply, String>,
    },
    Item {
        stream: u64,
        item: FeedItem,
    },
    /// A lifecycle event of the stream the request `stream` opened.
    Lifecycle {
        stream: u64,
        event: LifecycleEvent,
    },
}

/// Why a frame was not sent.
fn oversized(what: &str, len: usize) -> String {
    format!(
        "{what} is {len} bytes, over the {} MiB one message between tern processes may \
         carry; quit the other tern processes so that this one opens the sessions itself",
        MAX_FRAME >> 20
    )
}

impl Frame for ToClient {
    fn instead_of_oversized(&self, len: usize) -> Self {
        match self {
            ToClient::Reply { id, .. } => ToClient::Reply {
                id: *id,
                result: Err(oversized("the answer", len)),
            },
            // The feed ends: sent again from the same position it would not fit either.
            ToClient::Item { stream, .. } | ToClient::Lifecycle { stream, .. } => ToClient::Item {
                stream: *stream,
                item: FeedItem::Ended,
            },
        }
    }
}

impl Frame for Request {
    fn instead_of_oversized(&self, len: usize) -> Self {
        Request {
            id: self.id,
            call: Call::Oversized {
                refused: oversized("the request", len),
            },
        }
    }

    const HOLDS_TEXT: bool = true;

    fn take_text(&mut self) -> Option<InputText> {
        let input = self.call.input_mut()?;
        (input.text.len() > ATTACH_OVER).then(|| std::mem::take(&mut input.text))
    }

    fn put_text(&mut self, text: InputText) -> bool {
        let Some(input) = self.call.input_mut() else {
            return false;
        };
        input.text = text;
        true
    }
}

impl Frame for Hello {
    fn instead_of_oversized(&self, _len: usize) -> Self {
        self.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn another_version_does_not_match() {
        let mut other = Hello::ours();
        other.version.push_str("-other");
        assert!(!Hello::ours().matches(&other));
    }
}
