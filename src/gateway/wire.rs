//! The owner's socket protocol: length-prefixed JSON frames. Each frame is a 4-byte big-endian
//! length and that many bytes of one JSON value.
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
use crate::session::{OutputFilter, UserInput};
use crate::store::{JournalRecord, ListFilter, Overrides, PageCursor, RecentPage, SessionMeta};
use crate::tools::ApprovalMode;
use crate::tools::jobs::JobView;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Changes whenever a frame's meaning does.
pub const PROTOCOL: u32 = 3;
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

/// Why a frame could not be read.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    #[error("the connection failed: {0}")]
    Io(#[from] std::io::Error),
    #[error("a frame of {0} bytes is over the {MAX_FRAME}-byte limit")]
    TooLarge(usize),
    #[error("a frame is not understood: {0}")]
    Malformed(#[from] serde_json::Error),
}

/// Writes `value` as one frame (one write call for the length and the body).
pub async fn write_frame<W, T>(writer: &mut W, value: &T) -> Result<(), WireError>
where
    W: AsyncWrite + Unpin,
    T: Serialize,
{
    write_frame_within(writer, value, MAX_FRAME).await
}

/// [`write_frame`], refusing a frame over `limit` bytes before writing any of it.
async fn write_frame_within<W, T>(writer: &mut W, value: &T, limit: usize) -> Result<(), WireError>
where
    W: AsyncWrite + Unpin,
    T: Serialize,
{
    let mut buf = vec![0u8; 4];
    serde_json::to_writer(&mut buf, value)?;
    let len = buf.len() - 4;
    if len > limit {
        return Err(WireError::TooLarge(len));
    }
    let prefix = u32::try_from(len).map_err(|_| WireError::TooLarge(len))?;
    buf[..4].copy_from_slice(&prefix.to_be_bytes());
    writer.write_all(&buf).await?;
    Ok(())
}

/// A frame with something to send in its place when it comes out too large for one.
pub trait Frame: Serialize {
    /// What is sent instead of this frame, which encoded to `len` bytes, over the limit:
    /// it answers (or ends) the same request, saying why.
    fn instead_of_oversized(&self, len: usize) -> Self;
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
}

/// Writes the frames `outbox` receives until it closes or the peer goes, flushing once
/// for as many as were waiting together. A frame over the limit is replaced by what it
/// says to send instead, so its request is answered and the connection goes on.
pub async fn write_batches<W, T>(writer: W, outbox: tokio::sync::mpsc::Receiver<T>)
where
    W: AsyncWrite + Unpin,
    T: Frame,
{
    write_batches_within(writer, outbox, MAX_FRAME).await;
}

async fn write_batches_within<W, T>(
    mut writer: W,
    mut outbox: tokio::sync::mpsc::Receiver<T>,
    limit: usize,
) where
    W: AsyncWrite + Unpin,
    T: Frame,
{
    let write =
        async |writer: &mut W, frame: T| match write_frame_within(writer, &frame, limit).await {
            Err(WireError::TooLarge(len)) => {
                tracing::warn!(
                    bytes = len,
                    "a frame was too large to send; its request is refused"
                );
                write_frame_within(writer, &frame.instead_of_oversized(len), limit).await
            }
            other => other,
        };
    while let Some(frame) = outbox.recv().await {
        if write(&mut writer, frame).await.is_err() {
            return;
        }
        while let Ok(frame) = outbox.try_recv() {
            if write(&mut writer, frame).await.is_err() {
                return;
            }
        }
        if writer.flush().await.is_err() {
            return;
        }
    }
}

/// Reads one frame; `None` when the peer closed the connection between frames.
pub async fn read_frame<R, T>(reader: &mut R) -> Result<Option<T>, WireError>
where
    R: AsyncRead + Unpin,
    T: DeserializeOwned,
{
    let mut prefix = [0u8; 4];
    match reader.read_exact(&mut prefix).await {
        Ok(_) => {}
        Err(err) if err.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(err) => return Err(err.into()),
    }
    let len = u32::from_be_bytes(prefix) as usize;
    if len > MAX_FRAME {
        return Err(WireError::TooLarge(len));
    }
    let mut body = vec![0u8; len];
    reader.read_exact(&mut body).await?;
    Ok(Some(serde_json::from_slice(&body)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn frames_round_trip_and_a_closed_peer_reads_as_none() {
        let (mut a, mut b) = tokio::io::duplex(1 << 16);
        let request = Request {
            id: 7,
            call: Call::Tail {
                id: SessionId::generate(),
                n: 3,
            },
        };
        write_frame(&mut a, &request).await.unwrap();
        write_frame(&mut a, &Hello::ours()).await.unwrap();
        drop(a);
        let read: Request = read_frame(&mut b).await.unwrap().unwrap();
        assert_eq!(read.id, 7);
        assert!(matches!(read.call, Call::Tail { n: 3, .. }));
        let hello: Hello = read_frame(&mut b).await.unwrap().unwrap();
        assert!(hello.matches(&Hello::ours()));
        assert!(read_frame::<_, Hello>(&mut b).await.unwrap().is_none());
    }

    #[tokio::test]
    async fn an_oversized_or_garbled_frame_is_refused() {
        let (mut a, mut b) = tokio::io::duplex(1 << 16);
        a.write_all(&u32::MAX.to_be_bytes()).await.unwrap();
        assert!(matches!(
            read_frame::<_, Hello>(&mut b).await,
            Err(WireError::TooLarge(_))
        ));
        let (mut a, mut b) = tokio::io::duplex(1 << 16);
        a.write_all(&3u32.to_be_bytes()).await.unwrap();
        a.write_all(b"{x}").await.unwrap();
        assert!(matches!(
            read_frame::<_, Hello>(&mut b).await,
            Err(WireError::Malformed(_))
        ));
    }

    #[tokio::test]
    async fn a_frame_too_large_is_answered_in_its_place_and_the_connection_goes_on() {
        let (a, mut b) = tokio::io::duplex(1 << 16);
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        let writing = tokio::spawn(write_batches_within(a, rx, 1000));
        let big = Reply::Files {
            files: vec!["x".repeat(2000)],
        };
        tx.send(ToClient::Reply {
            id: 1,
            result: Ok(big),
        })
        .await
        .unwrap();
        tx.send(ToClient::Reply {
            id: 2,
            result: Ok(Reply::Done),
        })
        .await
        .unwrap();
        drop(tx);
        let first: ToClient = read_frame(&mut b).await.unwrap().unwrap();
        let ToClient::Reply {
            id: 1,
            result: Err(why),
        } = first
        else {
            panic!("not the refusal: {first:?}");
        };
        assert!(why.contains("MiB") && why.contains("quit"), "{why}");
        let second: ToClient = read_frame(&mut b).await.unwrap().unwrap();
        assert!(matches!(
            second,
            ToClient::Reply {
                id: 2,
                result: Ok(Reply::Done)
            }
        ));
        writing.await.unwrap();

        // A request too large goes as one the owner refuses, under the same id.
        let (a, mut b) = tokio::io::duplex(1 << 16);
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        let writing = tokio::spawn(write_batches_within(a, rx, 1000));
        let call = Call::Shell {
            cwd: PathBuf::from("/"),
            command: "y".repeat(2000),
        };
        tx.send(Request { id: 9, call }).await.unwrap();
        drop(tx);
        let sent: Request = read_frame(&mut b).await.unwrap().unwrap();
        assert_eq!(sent.id, 9);
        assert!(matches!(sent.call, Call::Oversized { .. }), "{sent:?}");
        writing.await.unwrap();
    }

    #[test]
    fn another_version_does_not_match() {
        let mut other = Hello::ours();
        other.version.push_str("-other");
        assert!(!Hello::ours().matches(&other));
    }
}
