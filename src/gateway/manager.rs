//! The session manager: one child actor per session, created on demand. An input arrives as
//! [`SendUserMessage`] with a session key; the key is checked (an invalid one is an error, never
//! a new session), mapped to its current session in the store (a new one is created for a
//! key seen for the first time), and the session's actor is started (resumed from its journal)
//! if it is not running. An actor that has stopped is logged and started again from its
//! journal; the other sessions are not touched.
//!
//! The manager also owns what concerns all sessions at once: automatic resets (a person's
//! first message after the daily boundary or after `idle_minutes` starts a new session for
//! the key), lifecycle events, and maintenance, checked on every write (see
//! [`super::maintenance`]). Drain and warm-up are in `drain.rs`.
//!
//! No lock is held across a slow await that concerns one key only: the map of running
//! sessions is locked for a lookup or an update, and each key's own lock keeps its steps in
//! order, so a reset waiting for one session's turn to finish holds up no other key.

use super::events::{LifecycleBus, LifecycleEvent};
use super::maintenance::{self, BudgetWatch, Check};
use super::reset::{self, ResetReason};
use super::runs::Runs;
use crate::config::MaintenanceMode;
use crate::domain::{ApprovalMode, InvalidSessionKey, SessionId, SessionKey};
use crate::llm::ModelClient;
use crate::session::{
    OutputFilter, SessionDeps, SessionError, SessionHandle, Subscription, UserInput,
};
use crate::store::{Overrides, Permissions, Plan, SessionMeta, StoreChange};
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError};
use tokio::sync::{Mutex, Notify, broadcast};

/// An input for the session a key talks to.
#[derive(Debug, Clone, PartialEq)]
pub struct SendUserMessage {
    /// `cli:<id>`, `slack:<team>/<channel>/<thread_ts>`, ….
    pub key: String,
    pub input: UserInput,
    /// Where a session created for this message works.
    pub project_dir: PathBuf,
}

/// Where an input went.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Delivered {
    pub session: SessionId,
    /// The input's journal position.
    pub seq: u64,
    /// Set when the key was given a new session first (a daily or idle reset): the one it
    /// left, now archived, and why.
    pub reset: Option<(SessionId, ResetReason)>,
}

/// Why the manager could not deliver an input.
#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    #[error(transparent)]
    InvalidKey(#[from] InvalidSessionKey),
    #[error(transparent)]
    Session(#[from] SessionError),
    #[error("that model cannot be used: {0}")]
    Model(String),
    /// A tool set naming a tool there is not (the message lists those there are).
    #[error("{0}")]
    Tools(String),
}

/// The manager's clock: the time resets are measured at. Tests pass a fixed one.
pub type Clock = Arc<dyn Fn() -> jiff::Timestamp + Send + Sync>;

/// The model a session calls, as a front end shows it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ModelShown {
    pub model: String,
    pub provider: String,
    pub context_window: u64,
    /// Where the window comes from (configured, the server, assumed).
    pub window_source: String,
}

/// Builds the model client of a session that asked for another provider or model than the
/// process's.
pub type Models = Arc<dyn Fn(&Overrides) -> Result<ModelClient, String> + Send + Sync>;

/// The running sessions, by key.
pub(super) type Live = Arc<Mutex<HashMap<SessionKey, SessionHandle>>>;

/// Routes inputs by session key to the sessions' actors.
pub struct SessionManager {
    pub(super) deps: Arc<SessionDeps>,
    /// Held only for a lookup, an insert or a removal, never across an await.
    pub(super) live: Live,
    /// One lock per key, held across a key's slow steps (starting its session, closing it
    /// for a reset or a pick), so the key's operations keep their order and one key's slow
    /// close holds up no other key.
    keys: std::sync::Mutex<HashMap<SessionKey, Arc<Mutex<()>>>>,
    bus: Arc<LifecycleBus>,
    watch: Arc<BudgetWatch>,
    /// Wakes the maintenance task.
    due: Arc<Notify>,
    clock: Clock,
    zone: jiff::tz::TimeZone,
    /// Set by a drain: from then on nothing is delivered and no session is started again.
    pub(super) stopping: AtomicBool,
    /// Builds the clients of sessions with a model of their own; none: every session calls
    /// the process's.
    models: std::sync::Mutex<Option<Models>>,
    /// The dependencies of each model asked for, built once.
    by_model: std::sync::Mutex<HashMap<Overrides, Arc<SessionDeps>>>,
    /// The subagent runs the sessions send.
    pub(super) runs: Arc<Runs>,
}

impl SessionManager {
    /// A manager over `deps`, on the system clock and time zone. Must be called inside a
    /// tokio runtime: it starts the maintenance task, which runs one pass at once.
    pub fn new(deps: Arc<SessionDeps>) -> Self {
        Self::with_clock(
            deps,
            Arc::new(jiff::Timestamp::now),
            jiff::tz::TimeZone::system(),
        )
    }

    /// [`SessionManager::new`] with the clock and zone resets are measured in.
    pub fn with_clock(deps: Arc<SessionDeps>, clock: Clock, zone: jiff::tz::TimeZone) -> Self {
        let bus = Arc::new(LifecycleBus::default());
        let watch = Arc::new(BudgetWatch::new(deps.settings.maintenance.clone()));
        let due = Arc::new(Notify::new());
        let config_agents = deps.agents_dir();
        let runs = Arc::new(Runs::new(
            deps.settings.subagents.max_concurrent,
            config_agents,
        ));
        let manager = Self {
            runs,
            live: Arc::new(Mutex::new(HashMap::new())),
            keys: std::sync::Mutex::default(),
            bus,
            watch,
            due,
            clock,
            zone,
            deps,
            stopping: AtomicBool::new(false),
            models: std::sync::Mutex::new(None),
            by_model: std::sync::Mutex::default(),
        };
        manager.observe_writes();
        manager.start_maintenance();
        manager
    }

    /// Delivers `message` and returns the session it went to and the input's journal
    /// position. A person's message after a reset boundary first gives the key a new
    /// session. An actor found stopped is started again from its journal and the input sent
    /// once more.
    pub async fn send(&self, message: SendUserMessage) -> Result<Delivered, GatewayError> {
        Ok(self.deliver(message, None).await?.0)
    }

    /// [`SessionManager::send`], with a subscriber attached (`filter`) to the session the
    /// input goes to before it is sent, so none of the turn it starts is missed, even when a
    /// reset gave the key a new session.
    pub async fn send_watched(
        &self,
        message: SendUserMessage,
        filter: OutputFilter,
    ) -> Result<(Delivered, Subscription), GatewayError> {
        let (delivered, events) = self.deliver(message, Some(filter)).await?;
        match events {
            Some(events) => Ok((delivered, events)),
            None => Err(SessionError::Closed.into()),
        }
    }

    async fn deliver(
        &self,
        message: SendUserMessage,
        filter: Option<OutputFilter>,
    ) -> Result<(Delivered, Option<Subscription>), GatewayError> {
        let key = SessionKey::parse(&message.key)?;
        if self.stopping.load(Ordering::Acquire) {
            return Err(SessionError::Closed.into());
        }
        let person = !message.input.kind.is_automation() && !message.input.sender.automated;
        let reset = match self.reset_due(&key, person)? {
            Some((from, why)) => {
                self.renew(&key, message.project_dir.clone(), why).await?;
                Some((from, why))
            }
            None => None,
        };
        let mut restarted = false;
        let mut input = message.input;
        let mut expanded = false;
        loop {
            let handle = self.handle(&key, &message.project_dir).await?;
            let may_restart = !restarted && !self.stopping.load(Ordering::Acquire);
            let events = match filter {
                Some(filter) => match handle.subscribe(filter).await {
                    Ok(events) => Some(events),
                    Err(SessionError::Closed) if may_restart => {
                        self.forget_stopped(&key, &handle).await;
                        restarted = true;
                        continue;
                    }
                    Err(err) => return Err(err.into()),
                },
                None => None,
            };
            // Given back, the input has had its prompt expanded: it is not expanded again.
            let sent = if expanded {
                handle.hand_over(input).await
            } else {
                handle.offer(input).await
            };
            match sent {
                Ok(seq) => {
                    let delivered = Delivered {
                        session: handle.id().clone(),
                        seq,
                        reset,
                    };
                    return Ok((delivered, events));
                }
                // Given back unread: it goes to the actor started in its place.
                Err((SessionError::Closed, Some(back))) if may_restart => {
                    input = back;
                    expanded = true;
                    self.forget_stopped(&key, &handle).await;
                    restarted = true;
                }
                Err((err, _)) => return Err(err.into()),
            }
        }
    }

    /// Drops the stopped actor `handle` from the live sessions, so the next look at `key`
    /// starts the session again from its journal.
    async fn forget_stopped(&self, key: &SessionKey, handle: &SessionHandle) {
        tracing::error!(session = %handle.id(), %key, "the session's actor had stopped; restarting it from its journal");
        let mut live = self.live.lock().await;
        // Only the stopped one: a reset may have put a new session in its place.
        if live.get(key).is_some_and(|now| now.id() == handle.id()) {
            live.remove(key);
        }
    }

    /// The key's current session and why it is due for a reset, when a person writes to a
    /// session that has had a conversation and a boundary passed since a person last wrote.
    fn reset_due(
        &self,
        key: &SessionKey,
        person: bool,
    ) -> Result<Option<(SessionId, ResetReason)>, SessionError> {
        let settings = &self.deps.settings.reset;
        if !person || (!settings.daily && settings.idle.is_none()) {
            return Ok(None);
        }
        let Some(meta) = self.deps.store.session_for_key(key)? else {
            return Ok(None);
        };
        if meta.input_count == 0 {
            return Ok(None);
        }
        let why = reset::due(settings, meta.freshness_ms(), (self.clock)(), &self.zone);
        Ok(why.map(|why| (meta.id, why)))
    }

    /// Attaches a subscriber to the session `key` talks to (starting it if needed).
    pub async fn subscribe(
        &self,
        key: &str,
        project_dir: PathBuf,
        filter: OutputFilter,
    ) -> Result<Subscription, GatewayError> {
        let key = SessionKey::parse(key)?;
        let handle = self.handle(&key, &project_dir).await?;
        Ok(handle.subscribe(filter).await?)
    }

    /// Lifecycle events of every session from now on (see [`LifecycleEvent`]).
    pub fn lifecycle(&self) -> broadcast::Receiver<LifecycleEvent> {
        self.bus.subscribe()
    }

    /// The running session for `key`: the live one, else its current session resumed from the
    /// journal, else a new one.
    pub async fn handle(
        &self,
        key: &SessionKey,
        project_dir: &std::path::Path,
    ) -> Result<SessionHandle, SessionError> {
        let lock = self.key_lock(key);
        let _key = lock.lock().await;
        if let Some(handle) = self.live.lock().await.get(key) {
            return Ok(handle.clone());
        }
        let handle = match self.deps.store.session_for_key(key)? {
            Some(meta) => SessionHandle::resume(self.deps_of(&meta), &meta)?,
            None => SessionHandle::create_with_key(
                self.deps.clone(),
                key.clone(),
                project_dir.to_path_buf(),
            )?,
        };
        self.live.lock().await.insert(key.clone(), handle.clone());
        Ok(handle)
    }

    /// Lets sessions call a model of their own, built by `models`.
    pub fn set_models(&self, models: Models) {
        *self.models.lock().unwrap_or_else(PoisonError::into_inner) = Some(models);
    }

    /// The dependencies of a session that asked for `overrides`: the process's own, unless
    /// it asked for another model and that model's client can be built.
    pub(super) fn deps_for(&self, overrides: &Overrides) -> Arc<SessionDeps> {
        if overrides.is_empty() || overrides == &self.deps.overrides {
            return self.deps.clone();
        }
        let mut built = self.by_model.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(deps) = built.get(overrides) {
            return deps.clone();
        }
        let models = self
            .models
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let Some(models) = models else {
            return self.deps.clone();
        };
        match models(overrides) {
            Ok(client) => {
                let mut deps = (*self.deps).clone();
                deps.client = client;
                deps.notes_client = None;
                deps.overrides = overrides.clone();
                let deps = Arc::new(deps);
                built.insert(overrides.clone(), deps.clone());
                deps
            }
            Err(err) => {
                tracing::warn!(%err, "a session's own model could not be used; it calls the default one");
                self.deps.clone()
            }
        }
    }

    /// The dependencies stored session `meta` runs with: its own model's (see `deps_for`),
    /// with the approval mode and tool set it was given for itself.
    pub(super) fn deps_of(&self, meta: &SessionMeta) -> Arc<SessionDeps> {
        let deps = self.deps_for(&meta.overrides);
        if meta.permissions.is_empty() {
            return deps;
        }
        let Permissions { approval, tools } = &meta.permissions;
        let mut own = (*deps).clone();
        if let Some(mode) = approval {
            own.approval = *mode;
        }
        if let Some(names) = tools {
            // A tool the config no longer has is left out; the session keeps the others.
            let known: Vec<String> = names
                .iter()
                .filter(|name| self.deps.tools.get(name).is_some())
                .cloned()
                .collect();
            if known.len() < names.len() {
                tracing::warn!(session = %meta.id, "some of the session's own tools are no longer configured");
            }
            if let Ok(only) = self.deps.tools.only(&known) {
                own.tools = only;
            }
        }
        Arc::new(own)
    }

    /// Session `id` runs with approval `mode` from its next turn on (an input may still carry
    /// a mode for its own turn), now and whenever it is opened again.
    pub async fn set_approval(
        &self,
        id: &SessionId,
        mode: ApprovalMode,
    ) -> Result<(), GatewayError> {
        self.set_permissions(id, |permissions| permissions.approval = Some(mode))?;
        if let Some(handle) = self.live_handle(id).await {
            handle.set_approval(mode).await?;
        }
        Ok(())
    }

    /// From its next turn on, session `id` is offered and runs only the tools `names` names
    /// (`None`: every tool), now and whenever it is opened again. An unknown name is refused,
    /// naming the tools there are.
    pub async fn set_tools(
        &self,
        id: &SessionId,
        names: Option<Vec<String>>,
    ) -> Result<(), GatewayError> {
        let tools = match &names {
            None => self.deps.tools.clone(),
            Some(names) => self.deps.tools.only(names).map_err(GatewayError::Tools)?,
        };
        self.set_permissions(id, |permissions| permissions.tools = names.clone())?;
        if let Some(handle) = self.live_handle(id).await {
            handle.set_tools(tools).await?;
        }
        Ok(())
    }

    /// Changes what session `id` was allowed for itself, durably.
    fn set_permissions(
        &self,
        id: &SessionId,
        change: impl Fn(&mut Permissions),
    ) -> Result<(), GatewayError> {
        self.deps
            .store
            .change_permissions(id, change)
            .map_err(SessionError::from)?;
        Ok(())
    }

    /// Session `id` calls the model `overrides` names from its next turn on, now and when
    /// it is opened again (a provider or model it leaves out stays as the session had it);
    /// what the session calls now.
    pub async fn set_model(
        &self,
        id: &SessionId,
        overrides: Overrides,
    ) -> Result<ModelShown, GatewayError> {
        let had = self.overrides_of(id)?;
        let overrides = Overrides {
            provider: overrides.provider.or(had.provider),
            model: overrides.model.or(had.model),
        };
        let models = self
            .models
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        if let Some(models) = models
            && !overrides.is_empty()
            && let Err(err) = models(&overrides)
        {
            return Err(GatewayError::Model(err));
        }
        self.deps
            .store
            .set_overrides(id, &overrides)
            .map_err(SessionError::from)?;
        let deps = self.deps_for(&overrides);
        if let Some(handle) = self.live_handle(id).await {
            handle.set_model(deps.clone()).await?;
        }
        let route = &deps.client.primary;
        let limits = route.limits();
        Ok(ModelShown {
            model: limits.model,
            provider: route.provider.name().to_owned(),
            context_window: limits.context_window,
            window_source: limits.window_source.to_string(),
        })
    }

    /// The name of the provider session `id` calls (as its overrides say) and the models
    /// that provider lists (`None`: it lists none).
    pub async fn listed_models(
        &self,
        id: &SessionId,
    ) -> Result<(String, Option<Vec<String>>), GatewayError> {
        let overrides = self.overrides_of(id)?;
        let provider = self.deps_for(&overrides).client.primary.provider.clone();
        let models = provider
            .list_models()
            .await
            .map_err(|err| GatewayError::Model(err.to_string()))?;
        Ok((provider.name().to_owned(), models))
    }

    /// The provider and model session `id` asked for itself (none: the process's).
    fn overrides_of(&self, id: &SessionId) -> Result<Overrides, GatewayError> {
        Ok(self
            .deps
            .store
            .meta(id)
            .map_err(SessionError::from)?
            .map(|meta| meta.overrides)
            .unwrap_or_default())
    }

    /// The running session `id`, if it runs.
    pub async fn live_handle(&self, id: &SessionId) -> Option<SessionHandle> {
        let live = self.live.lock().await;
        live.values().find(|handle| handle.id() == id).cloned()
    }

    /// The lock that keeps `key`'s operations in order.
    fn key_lock(&self, key: &SessionKey) -> Arc<Mutex<()>> {
        let mut keys = self.keys.lock().unwrap_or_else(PoisonError::into_inner);
        keys.entry(key.clone()).or_default().clone()
    }

    /// The running session of a stored one, made the one its key talks to: a past session
    /// picked to go on with, which the key may have left behind (a reset archived it).
    pub async fn attach(&self, meta: &SessionMeta) -> Result<SessionHandle, SessionError> {
        let lock = self.key_lock(&meta.key);
        let _key = lock.lock().await;
        let other = {
            let mut live = self.live.lock().await;
            match live.get(&meta.key) {
                Some(handle) if handle.id() == &meta.id => return Ok(handle.clone()),
                Some(_) => live.remove(&meta.key),
                None => None,
            }
        };
        if let Some(other) = other {
            other.close().await;
        }
        let current = self.deps.store.session_for_key(&meta.key)?.map(|m| m.id);
        if current.as_ref() != Some(&meta.id) || meta.archived_at_ms.is_some() {
            self.deps.store.point_key(&meta.key, &meta.id)?;
        }
        let handle = SessionHandle::resume(self.deps_of(meta), meta)?;
        self.live
            .lock()
            .await
            .insert(meta.key.clone(), handle.clone());
        Ok(handle)
    }

    /// Gives `key` a new session (`/new`, `/reset`): the current one finishes what it
    /// accepted, is archived with its transcript, and the next input starts afresh. Returns
    /// the new session's id.
    pub async fn reset(&self, key: &str, project_dir: PathBuf) -> Result<SessionId, GatewayError> {
        let key = SessionKey::parse(key)?;
        Ok(self.renew(&key, project_dir, ResetReason::Manual).await?)
    }

    async fn renew(
        &self,
        key: &SessionKey,
        project_dir: PathBuf,
        why: ResetReason,
    ) -> Result<SessionId, SessionError> {
        let lock = self.key_lock(key);
        let _key = lock.lock().await;
        let current = self.live.lock().await.remove(key);
        if let Some(handle) = current {
            // The current session finishes what it accepted; other keys go on meanwhile.
            handle.close().await;
        }
        let old = self.deps.store.session_for_key(key)?;
        if let Some(meta) = &old {
            let now = jiff::Timestamp::now().as_millisecond();
            self.deps.store.archive_session(&meta.id, now)?;
        }
        let handle = SessionHandle::create_with_key(self.deps.clone(), key.clone(), project_dir)?;
        let id = handle.id().clone();
        self.live.lock().await.insert(key.clone(), handle);
        if let Some(meta) = old {
            self.bus.emit(LifecycleEvent::reset(
                key.as_str(),
                meta.id,
                id.clone(),
                why,
            ));
        }
        Ok(id)
    }

    /// Runs a whole maintenance pass now, around the sessions in use, and returns its plan
    /// (carried out in `enforce` mode, reported in `warn` mode).
    pub async fn maintain(&self) -> Result<Plan, GatewayError> {
        run_pass(&self.deps, &self.watch, &self.bus, &self.live).await
    }

    /// How many sessions have a running actor.
    pub async fn live_sessions(&self) -> usize {
        self.live.lock().await.len()
    }

    /// Lets every session finish what it accepted, then stops them all. Nothing new starts
    /// from then on (a subagent run waiting for a place, a run's notice).
    pub async fn close_all(&self) {
        self.stopping.store(true, Ordering::Release);
        // Background jobs do not outlive the tern that started them.
        self.deps.jobs.kill_all();
        let handles: Vec<SessionHandle> = self.live.lock().await.drain().map(|(_, h)| h).collect();
        for handle in handles {
            handle.close().await;
        }
        // Nor do the MCP servers it started.
        if let Some(mcp) = &self.deps.mcp {
            mcp.stop_all().await;
        }
    }

    /// Tells the bus of every committed store change and checks the limits after each.
    fn observe_writes(&self) {
        let bus = self.bus.clone();
        let watch = self.watch.clone();
        let due = self.due.clone();
        self.deps.store.observe(Arc::new(move |change, totals| {
            if let Some(event) = LifecycleEvent::from_change(change) {
                bus.emit(event);
            }
            if matches!(
                change,
                StoreChange::Created(_) | StoreChange::Appended { .. }
            ) && watch.check(totals) == Check::Crossed
            {
                due.notify_one();
            }
        }));
    }

    /// The maintenance task: a pass at start (ages and counts may be over since the last
    /// run), then one each time a write crosses a limit. In `warn` mode these passes only
    /// report, from the totals; in `enforce` mode they take the inventory and remove. Ends
    /// with the manager.
    fn start_maintenance(&self) {
        let deps = Arc::downgrade(&self.deps);
        let watch = self.watch.clone();
        let bus = self.bus.clone();
        let due = self.due.clone();
        let live = Arc::downgrade(&self.live);
        tokio::spawn(async move {
            loop {
                let (Some(deps), Some(live)) = (deps.upgrade(), live.upgrade()) else {
                    return;
                };
                let passed = match watch.limits().mode {
                    MaintenanceMode::Warn => {
                        let (deps, watch, bus) = (deps.clone(), watch.clone(), bus.clone());
                        tokio::task::spawn_blocking(move || {
                            let reported = maintenance::report(&deps.store, &watch, &bus);
                            watch.settle(deps.store.totals());
                            reported
                        })
                        .await
                        .map_err(|err| err.to_string())
                        .and_then(|done| done.map_err(|err| err.to_string()))
                    }
                    MaintenanceMode::Enforce => run_pass(&deps, &watch, &bus, &live)
                        .await
                        .map(|_| ())
                        .map_err(|err| err.to_string()),
                };
                if let Err(err) = passed {
                    tracing::warn!(%err, "maintenance pass failed");
                }
                drop((deps, live));
                due.notified().await;
            }
        });
    }
}

impl Drop for SessionManager {
    fn drop(&mut self) {
        // Lets the maintenance task see the manager is gone.
        self.due.notify_one();
    }
}

impl SessionManager {
    /// The ids of the sessions running now.
    pub async fn running_ids(&self) -> HashSet<SessionId> {
        self.live
            .lock()
            .await
            .values()
            .map(|h| h.id().clone())
            .collect()
    }
}

/// One maintenance pass on a blocking thread, never removing a running session.
async fn run_pass(
    deps: &Arc<SessionDeps>,
    watch: &Arc<BudgetWatch>,
    bus: &Arc<LifecycleBus>,
    live: &Live,
) -> Result<Plan, GatewayError> {
    let in_use: HashSet<SessionId> = live.lock().await.values().map(|h| h.id().clone()).collect();
    let (deps, watch, bus) = (deps.clone(), watch.clone(), bus.clone());
    let passed = tokio::task::spawn_blocking(move || {
        let planned = maintenance::pass(&deps.store, &deps.data_dir, &watch, &bus, &in_use);
        watch.settle(deps.store.totals());
        planned
    })
    .await
    .map_err(|err| SessionError::Io(format!("the maintenance pass stopped: {err}")))?;
    passed.map_err(|err| GatewayError::Session(SessionError::Io(err.to_string())))
}
