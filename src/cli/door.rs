//! Finding the session service for a front end: the owner's, when another tern process holds
//! the store, or this process's own, which then opens the store and serves it to the next
//! ones. Between processes starting at once, the store's file lock decides who owns it; the
//! others connect to the socket as soon as the owner serves it.

use super::setup::{self, Loaded};
use crate::config::{ChannelSettings, Paths};
use crate::gateway::catalog::Catalog;
use crate::gateway::remote::{Notify, Takeover};
use crate::gateway::{Models, Reached, SessionManager, SessionService, WarmedUp, socket_path};
use crate::llm::ModelClient;
use crate::session::SessionDeps;
use crate::store::Overrides;
use crate::store::{Store, StoreError};
use crate::tools::ApprovalMode;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Longest a starting front end waits for a process that holds the store to serve it.
const STARTUP_WAIT: Duration = Duration::from_secs(3);

/// What this process's sessions run with, once it owns the store.
pub struct Sessions {
    pub deps: Arc<SessionDeps>,
    /// Builds the clients of sessions that asked for a model of their own.
    pub models: Option<Models>,
    /// The chat channels to run while this process owns the store (none for a short
    /// command), where their sessions work unless a channel says, and tern's data folder.
    pub channels: Option<(ChannelSettings, PathBuf, PathBuf)>,
}

/// Builds this process's sessions' dependencies over the store it opened.
pub type BuildDeps = Arc<dyn Fn(Arc<Store>) -> anyhow::Result<Sessions> + Send + Sync>;

/// The sessions' dependencies, once this process owns the store: `client` for the sessions
/// that ask for no model of their own (and the `overrides` that name it), a client built
/// when opened for the others, and `approval` unless an input says otherwise. A long-lived
/// front end (`with_channels`) runs the configured chat channels while it owns the store.
pub fn build(
    loaded: Arc<Loaded>,
    client: ModelClient,
    approval: ApprovalMode,
    overrides: Overrides,
    with_channels: bool,
) -> BuildDeps {
    Arc::new(move |store| {
        let channels = (with_channels && loaded.config.channels.any()).then(|| {
            let here = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
            let data = loaded.paths.data_dir.clone();
            (loaded.config.channels.clone(), here, data)
        });
        Ok(Sessions {
            deps: setup::session_deps(&loaded, store, client.clone(), approval, overrides.clone()),
            models: Some(setup::models(loaded.clone())),
            channels,
        })
    })
}

/// The service a front end holds, and what opening it found.
pub struct Door {
    pub service: SessionService,
    /// Sessions an earlier stop drained, resumed now (only when this process owns the store).
    pub warmed: Vec<WarmedUp>,
}

/// The owner's service, or this process's own when no process holds the store.
pub async fn open(paths: &Paths, build: BuildDeps, notify: Notify) -> anyhow::Result<Door> {
    let socket = socket_path(&paths.data_dir);
    let takeover = takeover(paths.db_file.clone(), socket.clone(), build.clone());
    let deadline = Instant::now() + STARTUP_WAIT;
    loop {
        match SessionService::connect(&socket, takeover.clone(), notify.clone()).await? {
            Reached::Owner(service) => {
                return Ok(Door {
                    service,
                    warmed: Vec::new(),
                });
            }
            Reached::NoOwner => {}
        }
        match own(&paths.db_file, &socket, &build).await {
            Ok((service, warmed)) => {
                return Ok(Door {
                    service,
                    warmed: warmed?,
                });
            }
            // Held by a process that does not serve it (yet): it may be starting.
            Err(Owning::Locked(err)) if Instant::now() < deadline => {
                tracing::debug!(%err, "the store is held; waiting for its owner to serve it");
            }
            Err(Owning::Locked(err)) => return Err(err.into()),
            Err(Owning::Failed(err)) => return Err(err),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Why this process does not own the store.
enum Owning {
    Locked(StoreError),
    Failed(anyhow::Error),
}

/// What owning the store began with: the service, and the sessions an earlier owner drained,
/// warmed up (or why they could not be).
type Owned = (SessionService, anyhow::Result<Vec<WarmedUp>>);

/// Opens the store, starts its sessions' manager, warms up what an earlier owner drained and
/// then serves it at `socket`: a client that reaches this owner finds every drained turn it
/// takes up already resumed.
async fn own(db_file: &Path, socket: &Path, build: &BuildDeps) -> Result<Owned, Owning> {
    let db = db_file.to_path_buf();
    let opened = tokio::task::spawn_blocking(move || Store::open(&db))
        .await
        .map_err(|err| Owning::Failed(err.into()))?;
    let store = match opened {
        Ok(store) => Arc::new(store),
        Err(err @ StoreError::Locked { .. }) => return Err(Owning::Locked(err)),
        Err(err) => return Err(Owning::Failed(err.into())),
    };
    let sessions = build(store).map_err(Owning::Failed)?;
    let manager = SessionManager::new(sessions.deps);
    if let Some(models) = sessions.models {
        manager.set_models(models);
    }
    let service = SessionService::local(Arc::new(manager));
    let warmed = service.warm_up().await.map_err(anyhow::Error::from);
    if let Err(err) = service.serve(socket) {
        tracing::warn!(%err, socket = %socket.display(), "could not serve the sessions; other tern processes cannot reach them");
    }
    if let Some((channels, here, data)) = &sessions.channels {
        service.start_channels(channels, here.clone(), data);
    }
    Ok((service, warmed))
}

/// The service of the tern process that owns the store, if one runs, for a short command:
/// one that outlives its owner ends with a clear error rather than taking the store over.
pub async fn owner(paths: &Paths) -> anyhow::Result<Option<SessionService>> {
    let socket = socket_path(&paths.data_dir);
    let takeover: Takeover = Arc::new(|| {
        Box::pin(async {
            Err("the tern that owned the sessions left; run the command again".into())
        })
    });
    let quiet: Notify = Arc::new(|_| {});
    Ok(
        match SessionService::connect(&socket, takeover, quiet).await? {
            Reached::Owner(service) => Some(service),
            Reached::NoOwner => None,
        },
    )
}

/// What a command that only reads stored sessions reads them through: the owner, when a
/// tern process holds the store, or the store itself.
pub async fn catalog(paths: &Paths) -> anyhow::Result<Arc<dyn Catalog>> {
    match owner(paths).await? {
        Some(service) => Ok(service.catalog()),
        None => {
            let db = paths.db_file.clone();
            let store = tokio::task::spawn_blocking(move || Store::open(&db)).await??;
            Ok(Arc::new(store))
        }
    }
}

/// How a client takes the store over when its owner left.
fn takeover(db_file: PathBuf, socket: PathBuf, build: BuildDeps) -> Takeover {
    Arc::new(move || {
        let (db_file, socket, build) = (db_file.clone(), socket.clone(), build.clone());
        Box::pin(async move {
            match own(&db_file, &socket, &build).await {
                Ok((service, warmed)) => {
                    if let Err(err) = warmed {
                        tracing::warn!(%err, "could not warm up what the last owner drained");
                    }
                    Ok(Some(service))
                }
                Err(Owning::Locked(_)) => Ok(None),
                Err(Owning::Failed(err)) => {
                    Err(format!("could not take the sessions over: {err:#}"))
                }
            }
        })
    })
}
