//! A client of the owner's socket: the session service of a tern process that found another
//! one holding the store.
//!
//! A [`Connection`] sends requests and matches the replies by id; the feeds it opened get
//! their items from its reader. When the owner leaves (it quit, or was killed), every waiting
//! request fails and every feed ends with [`FeedItem::Dropped`] at the last position it got,
//! so its reader subscribes again. The [`Remote`] behind the service then finds who owns the
//! store now: another process that took it over, or this one, which opens the store itself
//! (the store's file lock decides), serves the socket and warms up what the old owner
//! drained.

use super::events::LifecycleEvent;
use super::feed::{Feed, FeedItem};
use super::local::Local;
use super::service::{ServiceError, SessionService};
use super::wire::{Call, Hello, Reply, Request, ToClient, read_frame, write_batches, write_frame};
use crate::session::Dropped;
use std::collections::HashMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};
use tokio::io::{AsyncWriteExt, BufWriter};
use tokio::net::UnixStream;
use tokio::net::unix::OwnedReadHalf;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

/// Why a feed ended when its owner left.
pub const OWNER_LEFT: &str = "the tern that owned the sessions left";
/// Longest the owner may take to answer a hello.
const HELLO_BOUND: Duration = Duration::from_secs(5);
/// Longest a client looks for the next owner before giving up.
pub const HANDOVER_WAIT: Duration = Duration::from_secs(10);
/// Requests a connection may have waiting to be written.
const OUTBOX: usize = 256;

/// Why no connection was made.
#[derive(Debug)]
pub enum Unreached {
    /// No process serves the socket (none there, or one a dead process left).
    NoOwner,
    /// The owner is another tern version: it must not be mixed with this one.
    OtherVersion(String),
    /// The socket is there but did not answer as an owner.
    Failed(String),
}

/// A connection to the owner.
pub struct Connection {
    out: mpsc::Sender<Request>,
    pending: Mutex<HashMap<u64, oneshot::Sender<Result<Reply, String>>>>,
    streams: Mutex<HashMap<u64, Stream>>,
    /// Where the lifecycle events of each stream opened go.
    lifecycle: Mutex<HashMap<u64, mpsc::Sender<LifecycleEvent>>>,
    next: AtomicU64,
    closed: CancellationToken,
    /// What the owner said in its hello.
    pub owner: Hello,
}

/// Where a feed's items go, and how far they got.
struct Stream {
    tx: mpsc::Sender<FeedItem>,
    /// The position of the last item sent there.
    last_at: u64,
    /// Whether every record of `last_at` was sent: a position's journaled events come
    /// first, so one that is not journaled, or a replay or seam, closes it.
    whole: bool,
    /// The last position before `last_at` whose records were all sent.
    complete: u64,
}

impl Stream {
    fn new(tx: mpsc::Sender<FeedItem>, from: u64) -> Self {
        Self {
            tx,
            last_at: from,
            whole: true,
            complete: from,
        }
    }

    /// Where to subscribe again from so that nothing is missed: the last position, unless
    /// some of its records may not have been sent.
    fn resume_at(&self) -> u64 {
        if self.whole {
            self.last_at
        } else {
            self.complete
        }
    }

    /// [`Stream::resume_at`] when `item` is the next to go and may not: an item of a later
    /// position means every record of the last one went.
    fn resume_before(&self, item: &FeedItem) -> u64 {
        let at = match item {
            FeedItem::Replay { records } => records.first().map(|record| record.seq),
            FeedItem::Live { at } => Some(*at),
            FeedItem::Event(stamped) => Some(stamped.at),
            FeedItem::Ended | FeedItem::Dropped(_) => None,
        };
        match at {
            Some(at) if at > self.last_at => self.last_at,
            _ => self.resume_at(),
        }
    }

    /// Notes that `item` was sent.
    fn sent(&mut self, item: &FeedItem) {
        let (at, whole) = match item {
            FeedItem::Replay { records } => match records.last() {
                Some(last) => (last.seq, true),
                None => return,
            },
            FeedItem::Live { at } => (*at, true),
            FeedItem::Event(stamped) => (stamped.at, !stamped.event.is_journaled()),
            FeedItem::Ended | FeedItem::Dropped(_) => return,
        };
        if at > self.last_at {
            // A later position came: every record of the one before did.
            self.complete = self.last_at;
            self.last_at = at;
            self.whole = whole;
        } else if at == self.last_at {
            self.whole |= whole;
        }
    }
}

/// Connects to the owner serving `socket`.
pub async fn connect(socket: &Path) -> Result<Arc<Connection>, Unreached> {
    let stream = match UnixStream::connect(socket).await {
        Ok(stream) => stream,
        Err(err)
            if matches!(
                err.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused
            ) =>
        {
            return Err(Unreached::NoOwner);
        }
        Err(err) => return Err(Unreached::Failed(err.to_string())),
    };
    let (mut reader, writer) = stream.into_split();
    let mut writer = BufWriter::new(writer);
    let ours = Hello::ours();
    let said = async {
        write_frame(&mut writer, ours.clone()).await?;
        writer.flush().await?;
        read_frame::<_, Hello>(&mut reader).await
    };
    let owner = match tokio::time::timeout(HELLO_BOUND, said).await {
        Ok(Ok(Some(owner))) => owner,
        // Closed before its hello: an owner that is leaving.
        Ok(Ok(None)) => return Err(Unreached::NoOwner),
        Ok(Err(err)) => return Err(Unreached::Failed(err.to_string())),
        Err(_) => return Err(Unreached::Failed("the owner did not answer".into())),
    };
    if !owner.matches(&ours) {
        return Err(Unreached::OtherVersion(format!(
            "the sessions are open in tern {} (pid {}), and this is tern {}: the two cannot \
             share them. Quit that tern (or run this command with the same version), then try \
             again",
            owner.version, owner.pid, ours.version
        )));
    }
    let (out, outbox) = mpsc::channel(OUTBOX);
    let connection = Arc::new(Connection {
        out,
        pending: Mutex::new(HashMap::new()),
        streams: Mutex::new(HashMap::new()),
        lifecycle: Mutex::new(HashMap::new()),
        next: AtomicU64::new(1),
        closed: CancellationToken::new(),
        owner,
    });
    tokio::spawn(write_batches(writer, outbox));
    tokio::spawn(read_replies(reader, Arc::downgrade(&connection)));
    Ok(connection)
}

impl Connection {
    /// Whether the owner has left.
    pub fn is_closed(&self) -> bool {
        self.closed.is_cancelled()
    }

    /// Resolves once the owner has left.
    pub async fn closed(&self) {
        self.closed.cancelled().await;
    }

    /// Asks the owner `call` and waits for its reply.
    pub async fn call(&self, call: Call) -> Result<Reply, ServiceError> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.call_as(id, call).await
    }

    async fn call_as(&self, id: u64, call: Call) -> Result<Reply, ServiceError> {
        let (tx, rx) = oneshot::channel();
        lock(&self.pending).insert(id, tx);
        // Checked after the insert: a reader that saw the owner leave has failed it, or will.
        if self.is_closed() || self.out.send(Request { id, call }).await.is_err() {
            lock(&self.pending).remove(&id);
            return Err(ServiceError::new(OWNER_LEFT));
        }
        rx.await
            .map_err(|_| ServiceError::new(OWNER_LEFT))?
            .map_err(ServiceError::new)
    }

    /// Asks `call`, which opens a feed (a subscription, an input followed), with room for
    /// `backlog` items; the reply and the feed from position `from`.
    pub async fn open_feed(
        &self,
        call: Call,
        from: Option<u64>,
        backlog: usize,
    ) -> Result<(Reply, Feed), ServiceError> {
        let stream = self.next.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = mpsc::channel(backlog.max(1));
        let start = from.unwrap_or(0);
        lock(&self.streams).insert(stream, Stream::new(tx, start));
        match self.call_as(stream, call).await {
            Ok(reply) => Ok((reply, Feed::new(rx, start))),
            Err(err) => {
                lock(&self.streams).remove(&stream);
                Err(err)
            }
        }
    }

    /// Opens a stream of the lifecycle events of every session from now on; it ends when
    /// the owner leaves. A reader that falls more than `backlog` events behind misses the
    /// newest ones.
    pub async fn open_lifecycle(
        &self,
        backlog: usize,
    ) -> Result<mpsc::Receiver<LifecycleEvent>, ServiceError> {
        let stream = self.next.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = mpsc::channel(backlog.max(1));
        lock(&self.lifecycle).insert(stream, tx);
        match self.call_as(stream, Call::Lifecycle).await {
            Ok(Reply::Streaming) => Ok(rx),
            Ok(other) => {
                lock(&self.lifecycle).remove(&stream);
                Err(ServiceError::new(format!("unexpected reply {other:?}")))
            }
            Err(err) => {
                lock(&self.lifecycle).remove(&stream);
                Err(err)
            }
        }
    }

    /// Where the reader sends an item of feed `stream`: the feed's sender, unless the feed
    /// is gone. A feed's last item (`Ended`, `Dropped`) forgets it. Also where the feed
    /// resumes if the item cannot be delivered (see [`Stream::resume_before`]).
    fn route_item(&self, stream: u64, item: &FeedItem) -> Option<(mpsc::Sender<FeedItem>, u64)> {
        let mut streams = lock(&self.streams);
        let entry = streams.get_mut(&stream)?;
        let before = entry.resume_before(item);
        if let FeedItem::Ended | FeedItem::Dropped(_) = item {
            return streams.remove(&stream).map(|entry| (entry.tx, before));
        }
        entry.sent(item);
        Some((entry.tx.clone(), before))
    }

    /// Stops following feed `stream`: the owner stops pumping it, and its reader, when
    /// given, is told it was dropped at `last_at`, to subscribe again from there.
    fn forget(self: &Arc<Self>, stream: u64, reader: Option<(mpsc::Sender<FeedItem>, u64)>) {
        lock(&self.streams).remove(&stream);
        let connection = self.clone();
        tokio::spawn(async move {
            if let Some((tx, last_at)) = reader {
                let dropped = Dropped {
                    reason: "the feed was read more slowly than the session ran".to_owned(),
                    last_at,
                };
                let _ = tx.send(FeedItem::Dropped(dropped)).await;
            }
            let _ = connection.call(Call::Unsubscribe { stream }).await;
        });
    }

    /// The owner left: every waiting request fails, every feed is dropped at its position.
    fn left(&self) {
        self.closed.cancel();
        lock(&self.lifecycle).clear();
        for (_, waiting) in lock(&self.pending).drain() {
            let _ = waiting.send(Err(OWNER_LEFT.to_owned()));
        }
        for (_, stream) in lock(&self.streams).drain() {
            let dropped = FeedItem::Dropped(Dropped {
                reason: OWNER_LEFT.to_owned(),
                last_at: stream.resume_at(),
            });
            tokio::spawn(async move {
                let _ = stream.tx.send(dropped).await;
            });
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

async fn read_replies(mut reader: OwnedReadHalf, weak: std::sync::Weak<Connection>) {
    loop {
        let frame = read_frame::<_, ToClient>(&mut reader).await;
        let Some(connection) = weak.upgrade() else {
            return;
        };
        match frame {
            Ok(Some(ToClient::Reply { id, result })) => {
                if let Some(waiting) = lock(&connection.pending).remove(&id) {
                    let _ = waiting.send(result);
                }
            }
            Ok(Some(ToClient::Lifecycle { stream, event })) => {
                let tx = lock(&connection.lifecycle).get(&stream).cloned();
                let Some(tx) = tx else {
                    continue;
                };
                // A reader that falls behind misses events rather than holding up the
                // connection; one that let go is unsubscribed.
                if let Err(mpsc::error::TrySendError::Closed(_)) = tx.try_send(event) {
                    lock(&connection.lifecycle).remove(&stream);
                    let connection = connection.clone();
                    tokio::spawn(async move {
                        let _ = connection.call(Call::Unsubscribe { stream }).await;
                    });
                }
            }
            Ok(Some(ToClient::Item { stream, item })) => {
                let Some((tx, before)) = connection.route_item(stream, &item) else {
                    continue;
                };
                match tx.try_send(item) {
                    Ok(()) => {}
                    // Let go here: the owner stops pumping it.
                    Err(mpsc::error::TrySendError::Closed(_)) => connection.forget(stream, None),
                    // Read too slowly: dropped as a session drops a slow reader, so one feed
                    // never holds up the replies and the other feeds of the connection.
                    Err(mpsc::error::TrySendError::Full(_)) => {
                        connection.forget(stream, Some((tx, before)));
                    }
                }
            }
            Ok(None) => {
                connection.left();
                return;
            }
            Err(err) => {
                tracing::warn!(%err, "the owner's frame could not be read; leaving it");
                connection.left();
                return;
            }
        }
    }
}

/// Opens the store in this process, serves it and warms up what was drained: `Ok(None)` when
/// another process holds the store's lock.
pub type Takeover = Arc<
    dyn Fn() -> Pin<Box<dyn Future<Output = Result<Option<SessionService>, String>> + Send>>
        + Send
        + Sync,
>;
/// Tells the person, in one line, who owns the sessions now.
pub type Notify = Arc<dyn Fn(String) + Send + Sync>;

/// Who answers a client's calls now.
#[derive(Clone)]
pub(super) enum Route {
    Owner(Arc<Connection>),
    /// This process took the store over.
    Here(Arc<Local>),
}

/// The service of a client: its connection, and how it finds the next owner.
pub(super) struct Remote {
    me: std::sync::Weak<Remote>,
    socket: PathBuf,
    route: tokio::sync::Mutex<Route>,
    takeover: Takeover,
    notify: Notify,
    /// Where the lifecycle events followed from whoever owns the store go, once asked for.
    pub lifecycle: Mutex<Option<tokio::sync::broadcast::Sender<LifecycleEvent>>>,
}

impl Remote {
    pub fn new(
        socket: PathBuf,
        connection: Arc<Connection>,
        takeover: Takeover,
        notify: Notify,
    ) -> Arc<Self> {
        let remote = Arc::new_cyclic(|me| Remote {
            me: me.clone(),
            socket,
            route: tokio::sync::Mutex::new(Route::Owner(connection.clone())),
            takeover,
            notify,
            lifecycle: Mutex::new(None),
        });
        remote.watch(connection);
        remote
    }

    /// Whether this process took the store over: its sessions, when it did.
    pub async fn taken_over(&self) -> Option<Arc<Local>> {
        match &*self.route.lock().await {
            Route::Here(local) => Some(local.clone()),
            Route::Owner(_) => None,
        }
    }

    /// The owner that answers now, found again when the last one left.
    pub async fn route(&self) -> Result<Route, ServiceError> {
        let mut route = self.route.lock().await;
        if let Route::Owner(connection) = &*route
            && connection.is_closed()
        {
            *route = self.find_owner().await?;
        }
        Ok(route.clone())
    }

    /// Once `connection`'s owner leaves, finds the next one at once, so what it drained is
    /// warmed up even when nothing here was asking.
    fn watch(&self, connection: Arc<Connection>) {
        let me = self.me.clone();
        tokio::spawn(async move {
            connection.closed().await;
            drop(connection);
            let Some(remote) = me.upgrade() else {
                return;
            };
            if let Err(err) = remote.route().await {
                (remote.notify)(err.message);
            }
        });
    }

    /// Connects to whichever process owns the store, or takes it over: the store's lock
    /// decides between the clients that try at once.
    async fn find_owner(&self) -> Result<Route, ServiceError> {
        let deadline = Instant::now() + HANDOVER_WAIT;
        let mut pause = Duration::from_millis(10);
        loop {
            match connect(&self.socket).await {
                Ok(connection) => {
                    (self.notify)(format!(
                        "{OWNER_LEFT}; tern (pid {}) owns them now",
                        connection.owner.pid
                    ));
                    self.watch(connection.clone());
                    return Ok(Route::Owner(connection));
                }
                Err(Unreached::OtherVersion(message)) => return Err(ServiceError::new(message)),
                Err(Unreached::NoOwner | Unreached::Failed(_)) => {}
            }
            match (self.takeover)().await {
                Ok(Some(service)) => {
                    if let Some(local) = service.local_part() {
                        (self.notify)(format!("{OWNER_LEFT}; this tern owns them now"));
                        return Ok(Route::Here(local));
                    }
                }
                Ok(None) => {}
                Err(message) => return Err(ServiceError::new(message)),
            }
            if Instant::now() >= deadline {
                return Err(ServiceError::new(format!(
                    "{OWNER_LEFT}, and no tern took them over within {} s: the store is still \
                     locked. Quit the tern process holding it, then start tern again",
                    HANDOVER_WAIT.as_secs()
                )));
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(200));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::{SessionEvent, Stamped};

    fn event(at: u64, journaled: bool) -> FeedItem {
        let event = if journaled {
            SessionEvent::TitleChanged { title: "t".into() }
        } else {
            SessionEvent::TextDelta { text: "x".into() }
        };
        FeedItem::Event(Stamped { at, event })
    }

    #[test]
    fn a_feed_resumes_from_the_last_position_whose_records_all_came() {
        let (tx, _rx) = mpsc::channel(1);
        let mut stream = Stream::new(tx, 0);
        stream.sent(&FeedItem::Live { at: 10 });
        assert_eq!(stream.resume_at(), 10);
        // Records one after another: the last one's position may have more to come.
        for at in [11, 12, 13] {
            stream.sent(&event(at, true));
        }
        assert_eq!(stream.resume_at(), 12);
        // What is not journaled comes after a position's records: 13 is whole.
        stream.sent(&event(13, false));
        assert_eq!(stream.resume_at(), 13);
        // An item of a later position that cannot be delivered: nothing of 13 is missing.
        stream.sent(&event(14, true));
        assert_eq!(stream.resume_before(&event(15, true)), 14);
        assert_eq!(stream.resume_before(&event(14, true)), 13);
    }
}
