//! The session service in the process that owns the store: every call answered by the
//! manager, the actors and the store here. The owner's socket answers its clients' calls
//! through [`Local::dispatch`], so a client is served by exactly the code a lone tern runs.

use super::catalog::Catalog;
use super::drain::DrainedSession;
use super::feed::{self, Feed};
use super::maintenance::{Cleanup, clean_up};
use super::manager::{Delivered, SendUserMessage, SessionManager};
use super::serve::{CHECK_COPY_PREFIX, Serving, make_run_dir, run_dir};
use super::service::{Preview, ServiceError, ShellRun};
use super::wire::{Call, Reply, ScannedEntry, SearchScan};
use crate::channels::{ChannelStatus, Channels};
use crate::context::CurrentTime;
use crate::domain::{Answer, SessionId, SessionKey};
use crate::session::{
    OutputFilter, SUBSCRIBER_BACKLOG, SessionDeps, SessionDirs, SessionHandle, SessionState,
    UserInput,
};
use crate::store::{SearchEntry, SearchSink, SessionMeta};
use crate::tools::agents::AgentRuns;
use crate::tools::mcp::listing;
use crate::tools::{ApprovalMode, ToolContext};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Longest a `!` line may run without output.
pub const SHELL_TIMEOUT: Duration = Duration::from_secs(120);
/// Most items a feed may leave unread.
const MAX_BACKLOG: usize = 1 << 16;
/// Files the file completion lists at most.
const FILE_LIMIT: usize = 50_000;
/// Longest the git branch is looked for.
const GIT_BOUND: Duration = Duration::from_secs(2);

pub(super) struct Local {
    pub manager: Arc<SessionManager>,
    pub deps: Arc<SessionDeps>,
    /// The socket this process serves its clients on, once it does.
    pub serving: Mutex<Option<Serving>>,
    /// Set when this owner hands its sessions over: a feed that ends then is dropped, so
    /// its client follows the session again at the next owner.
    pub leaving: AtomicBool,
    /// The chat channels this owner runs, once started.
    pub channels: Mutex<Option<Arc<Channels>>>,
}

impl Local {
    pub fn new(manager: Arc<SessionManager>) -> Self {
        let deps = manager.deps.clone();
        Self {
            manager,
            deps,
            serving: Mutex::new(None),
            leaving: AtomicBool::new(false),
            channels: Mutex::new(None),
        }
    }

    /// The channels this owner runs, stopped: the next owner starts its own.
    pub async fn stop_channels(&self) {
        let channels = self
            .channels
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(channels) = channels {
            channels.stop().await;
        }
    }

    /// Each running channel's status.
    pub fn channel_status(&self) -> Vec<ChannelStatus> {
        self.channels
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .map(|channels| channels.status())
            .unwrap_or_default()
    }

    /// How many clients are connected to this owner now.
    pub fn clients(&self) -> usize {
        self.serving
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .map_or(0, Serving::clients)
    }

    /// Hands every session over to the clients: they are drained (a model call in flight
    /// let go), their feeds dropped rather than ended, new requests refused, and the socket
    /// closed, so a client takes the store over and warms up what was drained.
    pub async fn hand_over(&self, bound: Duration) -> Result<Vec<DrainedSession>, ServiceError> {
        self.leaving.store(true, Ordering::SeqCst);
        self.stop_channels().await;
        let drained = self.manager.hand_over(bound).await;
        self.serving
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        Ok(drained?)
    }

    /// Whether this owner is handing its sessions over.
    pub fn is_leaving(&self) -> bool {
        self.leaving.load(Ordering::SeqCst)
    }

    pub async fn send(
        &self,
        key: &str,
        project_dir: &Path,
        input: UserInput,
    ) -> Result<Delivered, ServiceError> {
        let message = SendUserMessage {
            key: key.to_owned(),
            input,
            project_dir: project_dir.to_path_buf(),
        };
        Ok(self.manager.send(message).await?)
    }

    pub async fn send_to(&self, id: &SessionId, input: UserInput) -> Result<u64, ServiceError> {
        Ok(self.running(id).await?.send(input).await?)
    }

    pub async fn open_key(&self, key: &str, project_dir: &Path) -> Result<SessionId, ServiceError> {
        let key = SessionKey::parse(key).map_err(|err| ServiceError::new(err.to_string()))?;
        let handle = self.manager.handle(&key, project_dir).await?;
        Ok(handle.id().clone())
    }

    pub async fn open(&self, id: &SessionId) -> Result<SessionMeta, ServiceError> {
        let meta = self.meta(id).await?;
        self.manager.attach(&meta).await?;
        Ok(meta)
    }

    pub async fn subscribe(
        &self,
        id: &SessionId,
        from: Option<u64>,
        filter: OutputFilter,
        backlog: usize,
    ) -> Result<Feed, ServiceError> {
        // A peer's number: within what a channel can hold.
        let backlog = backlog.clamp(1, MAX_BACKLOG);
        let handle = self.running(id).await?;
        let live = handle.subscribe_with(filter, backlog).await?;
        Ok(feed::start(
            self.deps.store.clone(),
            id.clone(),
            from,
            live,
            backlog,
        ))
    }

    pub async fn send_followed(
        &self,
        key: &str,
        project_dir: &Path,
        input: UserInput,
        filter: OutputFilter,
    ) -> Result<(Delivered, Feed), ServiceError> {
        let message = SendUserMessage {
            key: key.to_owned(),
            input,
            project_dir: project_dir.to_path_buf(),
        };
        let (delivered, live) = self.manager.send_watched(message, filter).await?;
        let feed = feed::start(
            self.deps.store.clone(),
            delivered.session.clone(),
            None,
            live,
            SUBSCRIBER_BACKLOG,
        );
        Ok((delivered, feed))
    }

    pub async fn answer(
        &self,
        id: &SessionId,
        call_id: &str,
        answer: Answer,
    ) -> Result<(), ServiceError> {
        Ok(self.live(id).await?.answer(call_id, answer).await?)
    }

    pub async fn cancel(&self, id: &SessionId) -> Result<(), ServiceError> {
        match self.manager.live_handle(id).await {
            Some(handle) => Ok(handle.cancel().await?),
            None => Ok(()),
        }
    }

    pub async fn compact(&self, id: &SessionId) -> Result<bool, ServiceError> {
        Ok(self.running(id).await?.compact().await?)
    }

    pub async fn reset(&self, key: &str, project_dir: &Path) -> Result<SessionId, ServiceError> {
        Ok(self.manager.reset(key, project_dir.to_path_buf()).await?)
    }

    pub async fn set_approval(
        &self,
        id: &SessionId,
        mode: ApprovalMode,
    ) -> Result<(), ServiceError> {
        Ok(self.manager.set_approval(id, mode).await?)
    }

    pub async fn set_tools(
        &self,
        id: &SessionId,
        names: Option<Vec<String>>,
    ) -> Result<(), ServiceError> {
        Ok(self.manager.set_tools(id, names).await?)
    }

    pub async fn idle(&self, id: &SessionId) -> Result<(), ServiceError> {
        if let Some(handle) = self.manager.live_handle(id).await {
            handle.state().await?;
        }
        Ok(())
    }

    pub async fn shell(&self, cwd: &Path, command: &str) -> Result<ShellRun, ServiceError> {
        let tool = self
            .deps
            .tools
            .get_shared("shell_execute")
            .cloned()
            .ok_or_else(|| ServiceError::new("the shell tool is not available"))?;
        let ctx = ToolContext {
            project_dir: cwd.to_path_buf(),
            cwd: cwd.to_path_buf(),
            temp_dir: std::env::temp_dir(),
            readable_dirs: Vec::new(),
            tool_timeout: SHELL_TIMEOUT,
            child_env: self.deps.child_env.clone(),
            spool: None,
            agents: None,
            jobs: None,
            repo_maps: None,
        };
        let input = serde_json::json!({ "command": command });
        let output = tool.execute(input, &ctx, CancellationToken::new()).await;
        Ok(ShellRun {
            output: self.deps.redactor.credentials(&output.content),
            ok: !output.is_error,
        })
    }

    pub async fn meta(&self, id: &SessionId) -> Result<SessionMeta, ServiceError> {
        let store = self.deps.store.clone();
        let wanted = id.clone();
        blocking(move || store.meta(&wanted))
            .await?
            .map_err(|err| ServiceError::new(err.to_string()))?
            .ok_or_else(|| ServiceError::new(format!("session {} is not stored", id.short())))
    }

    pub async fn resolve(&self, prefix: &str) -> Result<SessionMeta, ServiceError> {
        let store = self.deps.store.clone();
        let prefix = prefix.to_owned();
        blocking(move || store.resolve(&prefix))
            .await?
            .map_err(|err| ServiceError::new(err.to_string()))
    }

    pub async fn latest(&self, project_dir: &Path) -> Result<Option<SessionMeta>, ServiceError> {
        let store = self.deps.store.clone();
        let dir = project_dir.to_path_buf();
        blocking(move || store.latest_for_project(&dir))
            .await?
            .map_err(|err| ServiceError::new(err.to_string()))
    }

    /// `tern sessions cleanup` in the owner: never a running session.
    pub async fn clean_up(&self, enforce: Option<bool>) -> Result<Cleanup, ServiceError> {
        let in_use = self.manager.running_ids().await;
        let deps = self.deps.clone();
        blocking(move || {
            let limits = &deps.settings.maintenance;
            clean_up(&deps.store, &deps.data_dir, limits, enforce, &in_use)
        })
        .await?
        .map_err(|err| ServiceError::new(err.to_string()))
    }

    /// Copies the database, as of a durable commit made now, into this owner's run folder,
    /// for `tern doctor` to check while the file stays open here; the asker removes it.
    pub async fn copy_store(&self) -> Result<(PathBuf, u64), ServiceError> {
        static COPIES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = COPIES.fetch_add(1, Ordering::Relaxed);
        let dir = run_dir(&self.deps.data_dir);
        let path = dir.join(format!(
            "{CHECK_COPY_PREFIX}{}-{n}.redb",
            std::process::id()
        ));
        let store = self.deps.store.clone();
        let to = path.clone();
        let copied = blocking(move || {
            make_run_dir(&dir).map_err(|err| {
                ServiceError::new(format!("could not create {}: {err}", dir.display()))
            })?;
            store
                .copy_to(&to)
                .map_err(|err| ServiceError::new(err.to_string()))
        })
        .await?;
        match copied {
            Ok(bytes) => Ok((path, bytes)),
            Err(err) => {
                let _ = std::fs::remove_file(&path);
                Err(err)
            }
        }
    }

    /// The request a turn for `input` would send first in stored session `id` (a new
    /// session in `project_dir` when `None`), and where its nudge sits: nothing is sent or
    /// saved.
    pub async fn preview(
        &self,
        id: Option<&SessionId>,
        project_dir: &Path,
        input: UserInput,
    ) -> Result<Preview, ServiceError> {
        let (deps, dirs, state) = match id {
            Some(id) => {
                let meta = self.meta(id).await?;
                let store = self.deps.store.clone();
                let wanted = id.clone();
                let records = blocking(move || store.load(&wanted))
                    .await?
                    .map_err(|err| ServiceError::new(err.to_string()))?;
                let (dirs, _) = SessionDirs::locate(&self.deps.data_dir, &meta);
                let state =
                    SessionState::replay(meta.id.clone(), meta.project_dir.clone(), &records).state;
                (self.manager.deps_of(&meta), dirs, state)
            }
            None => {
                let id = SessionId::generate();
                let dirs = SessionDirs::new(&self.deps.data_dir, &id, &SessionKey::cli(&id));
                let state = SessionState::new(id, project_dir.to_path_buf());
                (self.deps.clone(), dirs, state)
            }
        };
        let (request, nudge_at) =
            crate::session::preview(&deps, &dirs, state, input, CurrentTime::now()).await;
        Ok(Preview { request, nudge_at })
    }

    /// The MCP servers of `project_dir` as this process runs them, each started as a turn
    /// would start it; first approving the server `approve` of its `.mcp.json`, if named.
    pub async fn mcp(
        &self,
        project_dir: &Path,
        approve: Option<String>,
    ) -> Result<Vec<String>, ServiceError> {
        let Some(hub) = self.deps.mcp.clone() else {
            return Ok(vec!["MCP servers are not run by this tern.".to_owned()]);
        };
        let mut lines = Vec::new();
        if let Some(name) = approve {
            let (hub, project) = (hub.clone(), project_dir.to_path_buf());
            let approved = blocking(move || listing::approve(&hub, &project, &name)).await?;
            lines.extend(approved.map_err(ServiceError::new)?);
        }
        lines.extend(
            listing::lines(&hub, project_dir)
                .await
                .map_err(ServiceError::new)?,
        );
        Ok(lines)
    }

    pub async fn git_branch(&self, dir: &Path) -> Option<String> {
        use crate::context::git::{Branch, GitContext, working_git};
        match working_git(dir, GIT_BOUND).await {
            GitContext::Repo(snapshot) => Some(match snapshot.branch {
                Branch::Named(name) => name,
                Branch::Detached => "(detached)".to_owned(),
            }),
            GitContext::Unavailable { .. } => None,
        }
    }

    pub async fn files(&self, root: PathBuf) -> Vec<String> {
        blocking(move || crate::tools::list_files(&root, FILE_LIMIT))
            .await
            .unwrap_or_default()
    }

    /// The running session `id`, started from its journal when it is not running.
    async fn running(&self, id: &SessionId) -> Result<SessionHandle, ServiceError> {
        if let Some(handle) = self.manager.live_handle(id).await {
            return Ok(handle);
        }
        let meta = self.meta(id).await?;
        Ok(self.manager.attach(&meta).await?)
    }

    /// The running session `id`; an error when it is not running.
    async fn live(&self, id: &SessionId) -> Result<SessionHandle, ServiceError> {
        self.manager
            .live_handle(id)
            .await
            .ok_or_else(|| ServiceError::new(format!("session {} is not running", id.short())))
    }

    /// Answers a client's call (a subscription is opened by the socket, which streams it).
    pub async fn dispatch(&self, call: Call) -> Result<Reply, ServiceError> {
        Ok(match call {
            Call::Send {
                key,
                project_dir,
                input,
            } => Reply::Delivered(self.send(&key, &project_dir, input).await?),
            Call::SendTo { id, input } => Reply::Seq {
                seq: self.send_to(&id, input).await?,
            },
            Call::OpenKey { key, project_dir } => Reply::Session {
                id: self.open_key(&key, &project_dir).await?,
            },
            Call::Open { id } => Reply::Meta(Box::new(self.open(&id).await?)),
            Call::Subscribe { .. }
            | Call::Unsubscribe { .. }
            | Call::SendFollowed { .. }
            | Call::Lifecycle => {
                return Err(ServiceError::new("feeds are opened by the socket"));
            }
            Call::Answer {
                id,
                call_id,
                answer,
            } => {
                self.answer(&id, &call_id, answer).await?;
                Reply::Done
            }
            Call::Cancel { id } => {
                self.cancel(&id).await?;
                Reply::Done
            }
            Call::Compact { id } => Reply::Changed {
                changed: self.compact(&id).await?,
            },
            Call::Reset { key, project_dir } => Reply::Session {
                id: self.reset(&key, &project_dir).await?,
            },
            Call::SetApproval { id, mode } => {
                self.set_approval(&id, mode).await?;
                Reply::Done
            }
            Call::SetModel { id, overrides } => {
                Reply::Model(self.manager.set_model(&id, overrides).await?)
            }
            Call::ListedModels { id } => {
                let (provider, models) = self.manager.listed_models(&id).await?;
                Reply::ListedModels { provider, models }
            }
            Call::Cleanup { enforce } => Reply::Cleanup(Box::new(self.clean_up(enforce).await?)),
            Call::Oversized { refused } => return Err(ServiceError::new(refused)),
            Call::Channels => Reply::Channels {
                channels: self.channel_status(),
            },
            Call::CopyStore => {
                let (path, bytes) = self.copy_store().await?;
                Reply::Copied { path, bytes }
            }
            Call::SetTools { id, tools } => {
                self.set_tools(&id, tools).await?;
                Reply::Done
            }
            Call::Preview {
                id,
                project_dir,
                input,
            } => Reply::Preview(Box::new(
                self.preview(id.as_ref(), &project_dir, input).await?,
            )),
            Call::Idle { id } => {
                self.idle(&id).await?;
                Reply::Done
            }
            Call::PendingRuns { id } => Reply::Count {
                count: self.manager.runs().pending(&id) as u64,
            },
            Call::LiveRuns { parent } => Reply::Runs {
                runs: self.manager.runs().live(&parent),
            },
            Call::Jobs { id, with_output } => Reply::Jobs {
                jobs: self.manager.jobs().views(&id, with_output),
            },
            Call::Run {
                parent,
                run,
                cancel,
            } => Reply::Status {
                status: self
                    .manager
                    .runs()
                    .check(&parent, &run, cancel)
                    .map_err(ServiceError::new)?,
            },
            Call::Shell { cwd, command } => Reply::Shell(self.shell(&cwd, &command).await?),
            Call::Meta { id } => Reply::Meta(Box::new(self.meta(&id).await?)),
            Call::Resolve { prefix } => Reply::Meta(Box::new(self.resolve(&prefix).await?)),
            Call::Latest { project_dir } => Reply::MaybeMeta {
                meta: self.latest(&project_dir).await?.map(Box::new),
            },
            Call::GitBranch { dir } => Reply::Branch {
                branch: self.git_branch(&dir).await,
            },
            Call::Files { root } => Reply::Files {
                files: self.files(root).await,
            },
            Call::RepoMap {
                id,
                project_dir,
                focus,
            } => Reply::Map(Box::new(
                self.repo_map(id.as_ref(), &project_dir, focus).await?,
            )),
            Call::Mcp {
                project_dir,
                approve,
            } => Reply::Lines {
                lines: self.mcp(&project_dir, approve).await?,
            },
            Call::McpUnapproved { project_dir } => Reply::Lines {
                lines: match self.deps.mcp.clone() {
                    Some(hub) => blocking(move || listing::unapproved(&hub, &project_dir))
                        .await?
                        .map_err(ServiceError::new)?,
                    None => Vec::new(),
                },
            },
            catalog => {
                let store = self.deps.store.clone();
                blocking(move || read_catalog(store.as_ref(), catalog)).await??
            }
        })
    }
}

/// Answers a call that reads the catalog, on a blocking thread.
fn read_catalog(catalog: &dyn Catalog, call: Call) -> Result<Reply, ServiceError> {
    let failed = ServiceError::new;
    Ok(match call {
        Call::StoredSessions => Reply::Count {
            count: catalog.stored_sessions(),
        },
        Call::RecentPage {
            filter,
            after,
            limit,
            max_scanned,
        } => Reply::Page(
            catalog
                .recent_page(&filter, after.as_ref(), limit, max_scanned)
                .map_err(failed)?,
        ),
        Call::ScanSearch => {
            let mut scan = Scanning::default();
            catalog.scan_search(&mut scan).map_err(failed)?;
            Reply::Search(scan.0)
        }
        Call::Tail { id, n } => Reply::Records {
            records: catalog.tail(&id, n).map_err(failed)?,
        },
        Call::Recent { limit, archived } => Reply::Sessions {
            sessions: catalog.recent(limit, archived).map_err(failed)?,
        },
        Call::Journal { id } => Reply::Records {
            records: catalog.journal(&id).map_err(failed)?,
        },
        Call::Lookup { id } => Reply::MaybeMeta {
            meta: catalog.meta(&id).map_err(failed)?.map(Box::new),
        },
        _ => return Err(ServiceError::new("not a catalog read")),
    })
}

/// Gathers a whole search scan, to be sent in one reply.
#[derive(Default)]
struct Scanning(SearchScan);

impl SearchSink for Scanning {
    fn begin(&mut self, _sessions: u64) {
        self.0 = SearchScan::default();
    }

    fn entry(&mut self, entry: SearchEntry<'_>) -> ControlFlow<()> {
        self.0.entries.push(ScannedEntry {
            id: entry.id.to_owned(),
            title: entry.title.to_owned(),
            first_input: entry.first_input.to_owned(),
            project_dir: entry.project_dir.to_owned(),
            archived: entry.archived,
        });
        ControlFlow::Continue(())
    }

    fn activity(&mut self, at_ms: i64, id: &str) -> ControlFlow<()> {
        self.0.activity.push((at_ms, id.to_owned()));
        ControlFlow::Continue(())
    }
}

/// Runs `work` on a blocking thread.
pub(super) async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, ServiceError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|err| ServiceError::new(format!("a query stopped: {err}")))
}
