//! The session service: the one door every front end goes through. A [`SessionService`] is a
//! cloneable handle holding nothing a front end could reach past it: commands (send an input,
//! answer an approval, cancel, compact, reset, set the approval mode, run a `!` line, close),
//! queries served off the actors on blocking threads (a session's meta, the picker's
//! [`Catalog`], the git branch, the project's files), and subscriptions from a journal
//! position ([`Feed`]).
//!
//! The process that owns the store answers in place ([`SessionService::local`]); every other
//! tern process is a client of it over its socket ([`SessionService::connect`]), with the
//! same calls. A client whose owner leaves finds the next one, or becomes it.
//!
//! Every session is named by its id except where a key picks it (an input to a key, a reset);
//! an approval names the session and the call.

use super::asked::Asked;
use super::catalog::Catalog;
use super::drain::{DrainedSession, WarmedUp};
use super::events::LifecycleEvent;
use super::feed::Feed;
use super::local::Local;
use super::maintenance::Cleanup;
use super::manager::{Delivered, GatewayError, ModelShown, SessionManager};
use super::map::MapShown;
use super::remote::{self, Connection, Notify, Remote, Route, Takeover, Unreached};
use super::wire::{Call, Reply};
use crate::channels::{ChannelStatus, Channels};
use crate::config::ChannelSettings;
use crate::domain::{Answer, SessionId};
use crate::session::{OutputFilter, SUBSCRIBER_BACKLOG, SessionError, UserInput};
use crate::store::{Overrides, SessionMeta};
use crate::tools::ApprovalMode;
use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError};
use std::time::Duration;
use tokio::sync::{broadcast, mpsc};

/// Why the service could not do what was asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ServiceError {
    pub message: String,
}

impl ServiceError {
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
        }
    }
}

impl From<GatewayError> for ServiceError {
    fn from(err: GatewayError) -> Self {
        Self::new(err.to_string())
    }
}

impl From<SessionError> for ServiceError {
    fn from(err: SessionError) -> Self {
        Self::new(err.to_string())
    }
}

/// What a `!` line printed, with the credentials the sessions know replaced.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ShellRun {
    pub output: String,
    pub ok: bool,
}

/// The request a turn would send first, and where its nudge sits (`--print-prompt`).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Preview {
    pub request: crate::domain::ChatRequest,
    pub nudge_at: Option<usize>,
}

/// Who answers a client when it connects: an owner, or nobody (the caller may open the
/// store itself).
pub enum Reached {
    Owner(SessionService),
    NoOwner,
}

/// The handle every front end holds.
#[derive(Clone)]
pub struct SessionService {
    backend: Backend,
}

#[derive(Clone)]
enum Backend {
    Local(Arc<Local>),
    Remote(Arc<Remote>),
}

impl SessionService {
    /// The service over the sessions `manager` runs, in this process.
    pub fn local(manager: Arc<SessionManager>) -> Self {
        manager.enable_subagents();
        Self {
            backend: Backend::Local(Arc::new(Local::new(manager))),
        }
    }

    /// The service of the owner serving `socket`, if one does. `takeover` opens the store
    /// here when that owner leaves and no other process took it; `notify` tells the person
    /// who owns the sessions after such a change.
    pub async fn connect(
        socket: &Path,
        takeover: Takeover,
        notify: Notify,
    ) -> Result<Reached, ServiceError> {
        match remote::connect(socket).await {
            Ok(connection) => Ok(Reached::Owner(Self {
                backend: Backend::Remote(Remote::new(
                    socket.to_path_buf(),
                    connection,
                    takeover,
                    notify,
                )),
            })),
            Err(Unreached::NoOwner) => Ok(Reached::NoOwner),
            Err(Unreached::OtherVersion(message)) => Err(ServiceError::new(message)),
            Err(Unreached::Failed(why)) => Err(ServiceError::new(format!(
                "the tern owning the sessions did not answer at {}: {why}",
                socket.display()
            ))),
        }
    }

    /// Serves this process's sessions to other tern processes at `socket`. Only the process
    /// holding the store calls this.
    pub fn serve(&self, socket: &Path) -> std::io::Result<()> {
        let Backend::Local(local) = &self.backend else {
            return Err(std::io::Error::other("only the store's owner serves it"));
        };
        let serving = super::serve::serve(Arc::downgrade(local), socket)?;
        *local
            .serving
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(serving);
        Ok(())
    }

    /// Whether this process owns the store (now: a client may have taken it over).
    pub async fn owns_store(&self) -> bool {
        matches!(self.via().await, Ok(Via::Here(_)))
    }

    /// Whether no other tern process shares these sessions: this one owns the store and no
    /// client is connected. Only then may leaving stop a running turn.
    pub async fn alone(&self) -> bool {
        let local = match &self.backend {
            Backend::Local(local) => Some(local.clone()),
            Backend::Remote(remote) => remote.taken_over().await,
        };
        local.is_some_and(|local| local.clients() == 0)
    }

    pub(super) fn local_part(&self) -> Option<Arc<Local>> {
        match &self.backend {
            Backend::Local(local) => Some(local.clone()),
            Backend::Remote(_) => None,
        }
    }

    /// Who answers now.
    async fn via(&self) -> Result<Via, ServiceError> {
        match &self.backend {
            Backend::Local(local) => Ok(Via::Here(local.clone())),
            Backend::Remote(remote) => Ok(match remote.route().await? {
                Route::Owner(connection) => Via::Owner(connection),
                Route::Here(local) => Via::Here(local),
            }),
        }
    }

    /// Asks `call` of whoever answers now. A call that changes nothing is asked again of
    /// the next owner when the owner leaves while it waits.
    pub(super) async fn ask(&self, call: Call) -> Result<Reply, ServiceError> {
        loop {
            let connection = match self.via().await? {
                Via::Here(local) => return local.dispatch(call).await,
                Via::Owner(connection) => connection,
            };
            match connection.call(call.clone()).await {
                Err(err) if call.changes_nothing() && owner_leaving(&connection, &err).await => {
                    continue;
                }
                answered => return answered,
            }
        }
    }

    /// Delivers an input to the session `key` talks to (see [`SessionManager::send`]).
    pub async fn send(
        &self,
        key: &str,
        project_dir: &Path,
        input: UserInput,
    ) -> Result<Delivered, ServiceError> {
        let call = Call::Send {
            key: key.to_owned(),
            project_dir: project_dir.to_path_buf(),
            input,
        };
        match self.ask(call).await? {
            Reply::Delivered(delivered) => Ok(delivered),
            other => Err(unexpected(&other)),
        }
    }

    /// Delivers an input to the session `id`, whichever key it has.
    pub async fn send_to(&self, id: &SessionId, input: UserInput) -> Result<u64, ServiceError> {
        match self
            .ask(Call::SendTo {
                id: id.clone(),
                input,
            })
            .await?
        {
            Reply::Seq { seq } => Ok(seq),
            other => Err(unexpected(&other)),
        }
    }

    /// The session `key` talks to, started (or created) when needed.
    pub async fn open_key(&self, key: &str, project_dir: &Path) -> Result<SessionId, ServiceError> {
        let call = Call::OpenKey {
            key: key.to_owned(),
            project_dir: project_dir.to_path_buf(),
        };
        session_of(self.ask(call).await?)
    }

    /// Makes the stored session `id` the one its key talks to, started; returns its meta.
    pub async fn open(&self, id: &SessionId) -> Result<SessionMeta, ServiceError> {
        meta_of(self.ask(Call::Open { id: id.clone() }).await?)
    }

    /// Follows session `id` from journal position `from` (the records after it first;
    /// `None`: from now), with the kinds of event `filter` admits, `backlog` items at most
    /// left unread before the session drops the feed.
    pub async fn subscribe(
        &self,
        id: &SessionId,
        from: Option<u64>,
        filter: OutputFilter,
        backlog: usize,
    ) -> Result<Feed, ServiceError> {
        match self.via().await? {
            Via::Here(local) => local.subscribe(id, from, filter, backlog).await,
            Via::Owner(connection) => {
                let call = Call::Subscribe {
                    id: id.clone(),
                    from,
                    filter,
                    backlog,
                };
                match connection.open_feed(call, from, backlog).await {
                    // The owner left meanwhile: follow the session at the next one.
                    Err(err) if owner_leaving(&connection, &err).await => {
                        Box::pin(self.subscribe(id, from, filter, backlog)).await
                    }
                    opened => Ok(opened?.1),
                }
            }
        }
    }

    /// [`SessionService::send`], with a feed attached to the session the input goes to
    /// before it is sent, so none of the turn it starts is missed, even when a reset gave the
    /// key a new session.
    pub async fn send_followed(
        &self,
        key: &str,
        project_dir: &Path,
        input: UserInput,
        filter: OutputFilter,
    ) -> Result<(Delivered, Feed), ServiceError> {
        match self.via().await? {
            Via::Here(local) => local.send_followed(key, project_dir, input, filter).await,
            Via::Owner(connection) => {
                let call = Call::SendFollowed {
                    key: key.to_owned(),
                    project_dir: project_dir.to_path_buf(),
                    input,
                    filter,
                };
                match connection.open_feed(call, None, SUBSCRIBER_BACKLOG).await? {
                    (Reply::Followed(delivered), feed) => Ok((delivered, feed)),
                    (other, _) => Err(unexpected(&other)),
                }
            }
        }
    }

    /// Answers the approval request for `call_id` in session `id`. The first answer wins: a
    /// second one finds nothing waiting.
    pub async fn answer(
        &self,
        id: &SessionId,
        call_id: &str,
        answer: Answer,
    ) -> Result<(), ServiceError> {
        let call = Call::Answer {
            id: id.clone(),
            call_id: call_id.to_owned(),
            answer,
        };
        done(self.ask(call).await?)
    }

    /// Stops the running turn of session `id`, if it runs.
    pub async fn cancel(&self, id: &SessionId) -> Result<(), ServiceError> {
        done(self.ask(Call::Cancel { id: id.clone() }).await?)
    }

    /// Compacts session `id` now; whether anything changed.
    pub async fn compact(&self, id: &SessionId) -> Result<bool, ServiceError> {
        match self.ask(Call::Compact { id: id.clone() }).await? {
            Reply::Changed { changed } => Ok(changed),
            other => Err(unexpected(&other)),
        }
    }

    /// Gives `key` a new session (`/new`); its id.
    pub async fn reset(&self, key: &str, project_dir: &Path) -> Result<SessionId, ServiceError> {
        let call = Call::Reset {
            key: key.to_owned(),
            project_dir: project_dir.to_path_buf(),
        };
        session_of(self.ask(call).await?)
    }

    /// From its next turn on, session `id` asks (or not) as `mode` says, and goes on doing so
    /// whenever it is opened again (an input may still carry a mode for its own turn); other
    /// sessions keep theirs.
    pub async fn set_approval(
        &self,
        id: &SessionId,
        mode: ApprovalMode,
    ) -> Result<(), ServiceError> {
        done(
            self.ask(Call::SetApproval {
                id: id.clone(),
                mode,
            })
            .await?,
        )
    }

    /// From its next turn on, session `id` calls the provider and model `overrides` names
    /// (what it leaves out stays as the session had it), and keeps them when opened again;
    /// other sessions keep theirs. No process starts again. What the session calls now.
    pub async fn set_model(
        &self,
        id: &SessionId,
        overrides: Overrides,
    ) -> Result<ModelShown, ServiceError> {
        let call = Call::SetModel {
            id: id.clone(),
            overrides,
        };
        match self.ask(call).await? {
            Reply::Model(shown) => Ok(shown),
            other => Err(unexpected(&other)),
        }
    }

    /// The name of the provider session `id` calls and the models it lists (`None`: it
    /// lists none), asked of the provider now.
    pub async fn listed_models(
        &self,
        id: &SessionId,
    ) -> Result<(String, Option<Vec<String>>), ServiceError> {
        match self.ask(Call::ListedModels { id: id.clone() }).await? {
            Reply::ListedModels { provider, models } => Ok((provider, models)),
            other => Err(unexpected(&other)),
        }
    }

    /// Plans a cleanup of the stored sessions (never a running one) and carries it out when
    /// `enforce` says so (`None`: as the owner's config says).
    pub async fn clean_up(&self, enforce: Option<bool>) -> Result<Cleanup, ServiceError> {
        match self.ask(Call::Cleanup { enforce }).await? {
            Reply::Cleanup(cleanup) => Ok(*cleanup),
            other => Err(unexpected(&other)),
        }
    }

    /// A copy of the database as of a durable commit made now, written by the owner with
    /// every write held off meanwhile, for `tern doctor` to check while the file is in use:
    /// its path and size. The caller removes it.
    pub async fn copy_store(&self) -> Result<(PathBuf, u64), ServiceError> {
        match self.ask(Call::CopyStore).await? {
            Reply::Copied { path, bytes } => Ok((path, bytes)),
            other => Err(unexpected(&other)),
        }
    }

    /// From its next turn on, session `id` is offered and runs only the tools `names` names
    /// (`None`: every tool), and whenever it is opened again; other sessions keep theirs. An
    /// unknown name is refused, naming the tools there are.
    pub async fn set_tools(
        &self,
        id: &SessionId,
        names: Option<Vec<String>>,
    ) -> Result<(), ServiceError> {
        done(
            self.ask(Call::SetTools {
                id: id.clone(),
                tools: names,
            })
            .await?,
        )
    }

    /// The request a turn for `input` would send first in stored session `id` (a new
    /// session in `project_dir` when `None`), built by whoever owns the store with the
    /// session's own model: nothing is sent or saved.
    pub async fn preview(
        &self,
        id: Option<&SessionId>,
        project_dir: &Path,
        input: UserInput,
    ) -> Result<Preview, ServiceError> {
        let call = Call::Preview {
            id: id.cloned(),
            project_dir: project_dir.to_path_buf(),
            input,
        };
        match self.ask(call).await? {
            Reply::Preview(preview) => Ok(*preview),
            other => Err(unexpected(&other)),
        }
    }

    /// Waits until session `id` runs no turn, so its journal holds the whole of the last.
    pub async fn idle(&self, id: &SessionId) -> Result<(), ServiceError> {
        done(self.ask(Call::Idle { id: id.clone() }).await?)
    }

    /// Runs a `!` line in `cwd` through the sessions' own shell tool: its own process group,
    /// no credentials in its environment, its output capped and its credentials replaced.
    pub async fn shell(&self, cwd: &Path, command: &str) -> Result<ShellRun, ServiceError> {
        let call = Call::Shell {
            cwd: cwd.to_path_buf(),
            command: command.to_owned(),
        };
        match self.ask(call).await? {
            Reply::Shell(run) => Ok(run),
            other => Err(unexpected(&other)),
        }
    }

    /// A stored session's meta, read on a blocking thread.
    pub async fn meta(&self, id: &SessionId) -> Result<SessionMeta, ServiceError> {
        meta_of(self.ask(Call::Meta { id: id.clone() }).await?)
    }

    /// The stored session an id or a unique prefix of one names.
    pub async fn resolve(&self, prefix: &str) -> Result<SessionMeta, ServiceError> {
        let call = Call::Resolve {
            prefix: prefix.to_owned(),
        };
        meta_of(self.ask(call).await?)
    }

    /// The latest session started in `project_dir`, if any.
    pub async fn latest(&self, project_dir: &Path) -> Result<Option<SessionMeta>, ServiceError> {
        let call = Call::Latest {
            project_dir: project_dir.to_path_buf(),
        };
        match self.ask(call).await? {
            Reply::MaybeMeta { meta } => Ok(meta.map(|meta| *meta)),
            other => Err(unexpected(&other)),
        }
    }

    /// Reading stored sessions from a front end's own threads (the picker's), never from an
    /// async thread.
    pub fn catalog(&self) -> Arc<dyn Catalog> {
        match &self.backend {
            Backend::Local(local) => local.deps.store.clone(),
            Backend::Remote(_) => Arc::new(Asked {
                service: self.clone(),
                runtime: tokio::runtime::Handle::current(),
            }),
        }
    }

    /// The branch `dir` is on (`(detached)` for a detached head), or `None` outside a
    /// repository; looked for within two seconds.
    pub async fn git_branch(&self, dir: &Path) -> Option<String> {
        let call = Call::GitBranch {
            dir: dir.to_path_buf(),
        };
        match self.ask(call).await {
            Ok(Reply::Branch { branch }) => branch,
            _ => None,
        }
    }

    /// The files of the project at `root` that a walk respecting `.gitignore` finds, for
    /// completion; read on a blocking thread.
    pub async fn files(&self, root: PathBuf) -> Vec<String> {
        match self.ask(Call::Files { root }).await {
            Ok(Reply::Files { files }) => files,
            _ => Vec::new(),
        }
    }

    /// The repository map of session `id`'s project (or of `project_dir` without one), made
    /// now, centred where the session's map is and on `focus` (`/map`).
    pub async fn repo_map(
        &self,
        id: Option<&SessionId>,
        project_dir: &Path,
        focus: Vec<String>,
    ) -> Result<MapShown, ServiceError> {
        let call = Call::RepoMap {
            id: id.cloned(),
            project_dir: project_dir.to_path_buf(),
            focus,
        };
        match self.ask(call).await? {
            Reply::Map(map) => Ok(*map),
            other => Err(unexpected(&other)),
        }
    }

    /// The MCP servers of `project_dir` as the owner runs them, in lines (`/mcp`, `tern mcp
    /// list`), after approving the server `approve` of its `.mcp.json`, if named.
    pub async fn mcp(
        &self,
        project_dir: &Path,
        approve: Option<&str>,
    ) -> Result<Vec<String>, ServiceError> {
        let call = Call::Mcp {
            project_dir: project_dir.to_path_buf(),
            approve: approve.map(str::to_owned),
        };
        match self.ask(call).await? {
            Reply::Lines { lines } => Ok(lines),
            other => Err(unexpected(&other)),
        }
    }

    /// What to tell a person opening `project_dir` about servers of its `.mcp.json` that are
    /// not approved to run there; nothing when all are.
    pub async fn mcp_unapproved(&self, project_dir: &Path) -> Result<Vec<String>, ServiceError> {
        let call = Call::McpUnapproved {
            project_dir: project_dir.to_path_buf(),
        };
        match self.ask(call).await? {
            Reply::Lines { lines } => Ok(lines),
            other => Err(unexpected(&other)),
        }
    }

    /// Lifecycle events of every session from now on. A client follows them from whoever
    /// owns the store, through changes of owner (events while it changes are missed).
    pub fn lifecycle(&self) -> broadcast::Receiver<LifecycleEvent> {
        match &self.backend {
            Backend::Local(local) => local.manager.lifecycle(),
            Backend::Remote(remote) => {
                let mut forwarding = remote
                    .lifecycle
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                if let Some(tx) = forwarding.as_ref() {
                    return tx.subscribe();
                }
                let (tx, rx) = broadcast::channel(LIFECYCLE_BACKLOG);
                *forwarding = Some(tx.clone());
                let (service, remote) = (self.clone(), remote.clone());
                tokio::spawn(async move {
                    forward_lifecycle(service, tx).await;
                    // The next reader starts following again.
                    *remote
                        .lifecycle
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner) = None;
                });
                rx
            }
        }
    }

    /// This front end is leaving. The owner with no client lets every session finish what
    /// it accepted, then stops them; the owner with clients hands over: it drains its
    /// sessions, which the next owner warms up, and stops serving. A client leaves the
    /// owner's sessions running.
    pub async fn close_all(&self) {
        // A client leaving looks for no new owner: it has nothing to close unless it took
        // the store over.
        let local = match &self.backend {
            Backend::Local(local) => local.clone(),
            Backend::Remote(remote) => match remote.taken_over().await {
                Some(local) => local,
                None => return,
            },
        };
        local.stop_channels().await;
        if local.clients() == 0 {
            local.manager.close_all().await;
            return;
        }
        if let Err(err) = local.hand_over(super::DRAIN_BOUND).await {
            tracing::warn!(%err, "the handover's drain did not finish cleanly");
        }
    }

    /// Stops every session of this owner for a restart (see [`SessionManager::drain`]), or
    /// hands them over when clients are connected; a client has none.
    pub async fn drain(&self, bound: Duration) -> Result<Vec<DrainedSession>, ServiceError> {
        if let Via::Here(local) = self.via().await? {
            local.stop_channels().await;
        }
        match self.via().await? {
            Via::Here(local) if local.clients() > 0 => local.hand_over(bound).await,
            Via::Here(local) => Ok(local.manager.drain(bound).await?),
            Via::Owner(_) => Ok(Vec::new()),
        }
    }

    /// Starts the chat channels `settings` configures in this process, which owns the store
    /// (a client's owner runs its own); their sessions work in `default_dir` unless a channel
    /// names its own, and where their replies stand is kept in `data_dir`. Channels already
    /// running are left as they are.
    pub fn start_channels(
        &self,
        settings: &ChannelSettings,
        default_dir: PathBuf,
        data_dir: &Path,
    ) {
        let Backend::Local(local) = &self.backend else {
            return;
        };
        let mut running = local
            .channels
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if running.is_none() && settings.any() {
            *running = Some(Arc::new(Channels::start(
                self,
                settings,
                default_dir,
                data_dir,
            )));
        }
    }

    /// The status of each channel the owner of the store runs (none when it runs none).
    pub async fn channels(&self) -> Result<Vec<ChannelStatus>, ServiceError> {
        match self.ask(Call::Channels).await? {
            Reply::Channels { channels } => Ok(channels),
            other => Err(unexpected(&other)),
        }
    }

    /// Resumes what the last drain stopped (see [`SessionManager::warm_up`]).
    pub async fn warm_up(&self) -> Result<Vec<WarmedUp>, ServiceError> {
        match self.via().await? {
            Via::Here(local) => Ok(local.manager.warm_up().await?),
            Via::Owner(_) => Ok(Vec::new()),
        }
    }
}

/// Who answers a call now.
enum Via {
    Here(Arc<Local>),
    Owner(Arc<Connection>),
}

/// Whether `err` came of the owner leaving; if so, returns once it has gone (within
/// [`remote::HANDOVER_WAIT`]), so the call can be asked of the next owner.
async fn owner_leaving(connection: &Connection, err: &ServiceError) -> bool {
    if connection.is_closed() {
        return true;
    }
    if err.message != remote::OWNER_LEFT {
        return false;
    }
    // Refused by an owner handing over: its connection closes once it is done.
    tokio::time::timeout(remote::HANDOVER_WAIT, connection.closed())
        .await
        .is_ok()
}

pub(super) fn unexpected(reply: &Reply) -> ServiceError {
    ServiceError::new(format!("the owner answered out of turn: {reply:?}"))
}

fn done(reply: Reply) -> Result<(), ServiceError> {
    match reply {
        Reply::Done => Ok(()),
        other => Err(unexpected(&other)),
    }
}

fn session_of(reply: Reply) -> Result<SessionId, ServiceError> {
    match reply {
        Reply::Session { id } => Ok(id),
        other => Err(unexpected(&other)),
    }
}

fn meta_of(reply: Reply) -> Result<SessionMeta, ServiceError> {
    match reply {
        Reply::Meta(meta) => Ok(*meta),
        other => Err(unexpected(&other)),
    }
}

/// Lifecycle events a client keeps for a reader that is behind.
const LIFECYCLE_BACKLOG: usize = 256;

/// Where a client's lifecycle events come from: this process's own sessions, once it took
/// the store over, or the owner's stream.
enum LifecycleSource {
    Here(broadcast::Receiver<LifecycleEvent>),
    Owner(mpsc::Receiver<LifecycleEvent>),
}

impl LifecycleSource {
    /// The next event; `None` once the source is gone (the owner left).
    async fn next(&mut self) -> Option<LifecycleEvent> {
        match self {
            LifecycleSource::Here(events) => loop {
                match events.recv().await {
                    Ok(event) => return Some(event),
                    Err(broadcast::error::RecvError::Lagged(_)) => {}
                    Err(broadcast::error::RecvError::Closed) => return None,
                }
            },
            LifecycleSource::Owner(events) => events.recv().await,
        }
    }
}

/// Hands `tx` the lifecycle events of whoever owns the store now, following it through
/// changes of owner, until nothing reads them.
async fn forward_lifecycle(service: SessionService, tx: broadcast::Sender<LifecycleEvent>) {
    while tx.receiver_count() > 0 {
        let opened = match service.via().await {
            Ok(Via::Here(local)) => Ok(LifecycleSource::Here(local.manager.lifecycle())),
            Ok(Via::Owner(connection)) => {
                match connection.open_lifecycle(LIFECYCLE_BACKLOG).await {
                    Ok(events) => Ok(LifecycleSource::Owner(events)),
                    // The owner left meanwhile: follow the next one.
                    Err(err) if owner_leaving(&connection, &err).await => continue,
                    Err(err) => Err(err),
                }
            }
            Err(err) => Err(err),
        };
        let mut source = match opened {
            Ok(source) => source,
            Err(err) => {
                tracing::debug!(%err, "could not follow the lifecycle events");
                return;
            }
        };
        loop {
            let event = tokio::select! {
                () = tx.closed() => return,
                event = source.next() => event,
            };
            match event {
                Some(event) => {
                    let _ = tx.send(event);
                }
                None => break,
            }
        }
    }
}
