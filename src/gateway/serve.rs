//! The owner's socket: the process holding the store serves the session service to every
//! other tern process of the same user, at `<data>/run/tern.sock` (the folder 0700, the
//! socket 0600, each peer's uid checked with `SO_PEERCRED`).
//!
//! Each connection opens with the hello exchange (see [`super::wire`]); then every request
//! is answered in a task of its own, and every feed is pumped in one, into the connection's
//! bounded outbox. A client that reads slowly fills its outbox, the pumps wait, and the
//! session drops their subscriptions as it drops any slow reader: a client never slows a
//! session.

use super::feed::FeedItem;
use super::local::Local;
use super::remote::OWNER_LEFT;
use super::wire::{Call, Hello, Reply, Request, ToClient, read_frame, write_batches, write_frame};
use crate::session::Dropped;
use std::collections::HashMap;
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;
use tokio::io::{AsyncWriteExt, BufWriter};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{broadcast, mpsc};
use tokio::task::AbortHandle;
use tokio_util::sync::CancellationToken;

/// Frames a connection may have waiting to be written.
const OUTBOX: usize = 1024;
/// Longest the replies already computed may take to be written when a connection closes.
const DRAIN_REPLIES: Duration = Duration::from_secs(2);
/// Longest a new connection may take to say hello.
const HELLO_BOUND: Duration = Duration::from_secs(5);

/// Where copies of the database made for `tern doctor` are named from: `check-<pid>-<n>.redb`.
pub(super) const CHECK_COPY_PREFIX: &str = "check-";

/// The folder of the owner's socket and of the copies it makes for checking.
pub fn run_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("run")
}

/// The socket of the store in `data_dir`.
pub fn socket_path(data_dir: &Path) -> PathBuf {
    run_dir(data_dir).join("tern.sock")
}

/// Creates the run folder `dir`, private to the user.
pub(super) fn make_run_dir(dir: &Path) -> io::Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
}

/// Removes the copies for checking left in `dir`: those of the owner `pid`, or all of them
/// (an owner starting: whoever made them is gone, and only an owner makes them).
fn remove_check_copies(dir: &Path, pid: Option<u32>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let prefix = match pid {
        Some(pid) => format!("{CHECK_COPY_PREFIX}{pid}-"),
        None => CHECK_COPY_PREFIX.to_owned(),
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with(&prefix) && name.ends_with(".redb") {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// A socket being served; dropping it stops serving and removes the socket.
pub struct Serving {
    clients: Arc<AtomicUsize>,
    stop: CancellationToken,
    path: PathBuf,
    /// The socket file's device and inode, so only the file bound here is removed.
    bound: (u64, u64),
}

impl Serving {
    /// Clients connected now.
    pub fn clients(&self) -> usize {
        self.clients.load(Ordering::SeqCst)
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        self.stop.cancel();
        if let Ok(meta) = std::fs::symlink_metadata(&self.path)
            && (meta.dev(), meta.ino()) == self.bound
        {
            let _ = std::fs::remove_file(&self.path);
        }
        // Copies this owner made for a check that never removed them (its asker died).
        if let Some(dir) = self.path.parent() {
            remove_check_copies(dir, Some(std::process::id()));
        }
    }
}

/// Serves `local` at `path`. Only the process holding the store's lock calls this, so a
/// socket file already there is one a process that died left behind, and is replaced.
pub(super) fn serve(local: Weak<Local>, path: &Path) -> io::Result<Serving> {
    let dir = path
        .parent()
        .ok_or_else(|| io::Error::other("the socket path has no folder"))?;
    make_run_dir(dir)?;
    remove_check_copies(dir, None);
    match std::fs::remove_file(path) {
        Ok(()) => tracing::info!(path = %path.display(), "replaced a stale socket"),
        Err(err) if err.kind() == io::ErrorKind::NotFound => {}
        Err(err) => return Err(err),
    }
    let listener = UnixListener::bind(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    let meta = std::fs::symlink_metadata(path)?;
    let serving = Serving {
        clients: Arc::new(AtomicUsize::new(0)),
        stop: CancellationToken::new(),
        path: path.to_path_buf(),
        bound: (meta.dev(), meta.ino()),
    };
    let (clients, stop) = (serving.clients.clone(), serving.stop.clone());
    tokio::spawn(async move {
        loop {
            let accepted = tokio::select! {
                _ = stop.cancelled() => return,
                accepted = listener.accept() => accepted,
            };
            match accepted {
                Ok((stream, _)) => {
                    let served = Served {
                        local: local.clone(),
                        clients: clients.clone(),
                        stop: stop.clone(),
                    };
                    tokio::spawn(served.connection(stream));
                }
                Err(err) => {
                    tracing::warn!(%err, "could not accept a client");
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        }
    });
    Ok(serving)
}

/// What one connection is served with.
struct Served {
    local: Weak<Local>,
    clients: Arc<AtomicUsize>,
    stop: CancellationToken,
}

/// Counts a connected client while it lives.
struct Counted(Arc<AtomicUsize>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Served {
    async fn connection(self, stream: UnixStream) {
        // SAFETY: geteuid has no preconditions and cannot fail.
        let uid = unsafe { libc::geteuid() };
        match stream.peer_cred() {
            Ok(cred) if cred.uid() == uid => {}
            Ok(cred) => {
                tracing::warn!(peer = cred.uid(), "refused a client of another user");
                return;
            }
            Err(err) => {
                tracing::warn!(%err, "could not tell who a client is");
                return;
            }
        }
        let (mut reader, writer) = stream.into_split();
        let mut writer = BufWriter::new(writer);
        let hello = tokio::time::timeout(HELLO_BOUND, read_frame::<_, Hello>(&mut reader)).await;
        let Ok(Ok(Some(hello))) = hello else {
            return;
        };
        let ours = Hello::ours();
        if write_frame(&mut writer, ours.clone()).await.is_err() || writer.flush().await.is_err() {
            return;
        }
        if !hello.matches(&ours) {
            tracing::warn!(version = %hello.version, pid = hello.pid, "refused a client of another version");
            return;
        }
        self.clients.fetch_add(1, Ordering::SeqCst);
        let _counted = Counted(self.clients.clone());
        let (out, outbox) = mpsc::channel::<ToClient>(OUTBOX);
        let writing = tokio::spawn(write_batches(writer, outbox));
        let mut feeds: HashMap<u64, AbortHandle> = HashMap::new();
        loop {
            let read = tokio::select! {
                _ = self.stop.cancelled() => break,
                read = read_frame::<_, Request>(&mut reader) => read,
            };
            let request = match read {
                Ok(Some(request)) => request,
                Ok(None) => break,
                Err(err) => {
                    tracing::warn!(%err, "a client's frame could not be read; closing it");
                    break;
                }
            };
            let Some(local) = self.local.upgrade() else {
                break;
            };
            let (id, out) = (request.id, out.clone());
            // Handing over: nothing new starts here (no session is woken again); the client
            // asks the next owner.
            if local.is_leaving() && !matches!(request.call, Call::Unsubscribe { .. }) {
                let _ = out.send(reply(id, Err(OWNER_LEFT.to_owned()))).await;
                continue;
            }
            match request.call {
                call @ (Call::Subscribe { .. } | Call::SendFollowed { .. } | Call::Lifecycle) => {
                    let pump = match call {
                        Call::Lifecycle => tokio::spawn(pump_lifecycle(local, id, out)),
                        call => tokio::spawn(pump(local, id, call, out)),
                    };
                    feeds.retain(|_, pump| !pump.is_finished());
                    feeds.insert(id, pump.abort_handle());
                }
                Call::Unsubscribe { stream } => {
                    if let Some(pump) = feeds.remove(&stream) {
                        pump.abort();
                    }
                    let _ = out.send(reply(id, Ok(Reply::Done))).await;
                }
                call => {
                    tokio::spawn(async move {
                        let result = local.dispatch(call).await.map_err(|err| err.message);
                        let _ = out.send(reply(id, result)).await;
                    });
                }
            }
        }
        for pump in feeds.values() {
            pump.abort();
        }
        // The replies already on their way still go out (a send the owner journaled is not
        // reported lost), within a bound.
        drop(out);
        if tokio::time::timeout(DRAIN_REPLIES, writing).await.is_err() {
            tracing::debug!("a client's last replies were not all written");
        }
    }
}

/// Opens the feed `call` asks for and sends its items under the request's `id`.
async fn pump(local: Arc<Local>, id: u64, call: Call, out: mpsc::Sender<ToClient>) {
    let opened = match call {
        Call::Subscribe {
            id: session,
            from,
            filter,
            backlog,
        } => local
            .subscribe(&session, from, filter, backlog)
            .await
            .map(|feed| (Reply::Streaming, feed)),
        Call::SendFollowed {
            key,
            project_dir,
            input,
            filter,
        } => local
            .send_followed(&key, &project_dir, input, filter)
            .await
            .map(|(delivered, feed)| (Reply::Followed(delivered), feed)),
        _ => return,
    };
    let mut feed = match opened {
        Ok((opened, feed)) => {
            if out.send(reply(id, Ok(opened))).await.is_err() {
                return;
            }
            feed
        }
        Err(err) => {
            let _ = out.send(reply(id, Err(err.message))).await;
            return;
        }
    };
    loop {
        // A feed that stops without saying why (its journal could not be read) is ended, so
        // the client's stream closes too.
        let mut item = feed.next().await.unwrap_or(FeedItem::Ended);
        let last = matches!(item, FeedItem::Ended | FeedItem::Dropped(_));
        // The session stopped because this owner hands it over: its client follows it again
        // where it goes next.
        if matches!(item, FeedItem::Ended) && local.is_leaving() {
            item = FeedItem::Dropped(Dropped {
                reason: OWNER_LEFT.to_owned(),
                last_at: feed.last_at(),
            });
        }
        if out.send(ToClient::Item { stream: id, item }).await.is_err() || last {
            return;
        }
    }
}

/// Sends every session's lifecycle events from now on under the request's `id`, until the
/// client unsubscribes or leaves. Events a slow client missed are skipped: a listing that
/// follows them reads the sessions again.
async fn pump_lifecycle(local: Arc<Local>, id: u64, out: mpsc::Sender<ToClient>) {
    let mut events = local.manager.lifecycle();
    drop(local);
    if out.send(reply(id, Ok(Reply::Streaming))).await.is_err() {
        return;
    }
    loop {
        let event = match events.recv().await {
            Ok(event) => event,
            Err(broadcast::error::RecvError::Lagged(missed)) => {
                tracing::debug!(missed, "a client's lifecycle stream fell behind");
                continue;
            }
            Err(broadcast::error::RecvError::Closed) => return,
        };
        let item = ToClient::Lifecycle { stream: id, event };
        if out.send(item).await.is_err() {
            return;
        }
    }
}

fn reply(id: u64, result: Result<Reply, String>) -> ToClient {
    ToClient::Reply { id, result }
}
