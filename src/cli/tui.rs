//! `tern` in a terminal: the full-screen interface. Which session it opens (`-c`, `-r ID`, a
//! restart's `--restarted-from`, or a new one), the model, the theme and the stop signals are
//! settled here; the interface itself is `crate::tui`. With no usable provider it shows the
//! setup screen instead.

use super::Outcome;
use super::door;
use super::lifecycle::{self, Stop, Stops};
use super::setup::{self, ModelArgs};
use crate::domain::{SessionId, SessionKey};
use crate::gateway::{SessionService, WarmedUp};
use crate::llm::served::RouteLimits;
use crate::store::SessionMeta;
use crate::tools::ApprovalMode;
use crate::tui::app::{App, AppEvent};
use crate::tui::popup::FileIndex;
use crate::tui::runner::{self, Exit, Launch, Stopping};
use crate::tui::status::Status;
use crate::tui::{ColorDepth, Theme};
use anyhow::Context;
use std::sync::Arc;

/// How the interface was asked to start.
#[derive(Debug, Clone, Default)]
pub struct LaunchArgs {
    pub model: ModelArgs,
    /// `-c`: the latest session of this folder.
    pub r#continue: bool,
    /// `-r ID`: that session.
    pub resume: Option<String>,
    /// A restart's session.
    pub restarted_from: Option<String>,
    /// A first message.
    pub prompt: Option<String>,
    /// `-r` without an id: choose from the picker.
    pub pick: bool,
}

pub async fn run(args: LaunchArgs) -> anyhow::Result<Outcome> {
    let loaded = Arc::new(setup::load()?);
    // What the interface hears while it runs; nothing may print over it.
    let (news, outside) = tokio::sync::mpsc::unbounded_channel();
    // A model that cannot be used is explained by the setup screen before anything opens.
    let client = match setup::model_client(&loaded, &args.model, setup::KeyCheck::Required) {
        Ok(client) => client,
        Err(err) => return super::first_run::run(&loaded, err).await,
    };
    let notify = {
        let news = news.clone();
        Arc::new(move |text: String| {
            let _ = news.send(AppEvent::Notice(text));
        })
    };
    let door = door::open(
        &loaded.paths,
        door::build(
            loaded.clone(),
            client.clone(),
            ApprovalMode::Ask,
            args.model.overrides(),
            true,
        ),
        notify,
    )
    .await?;
    let service = door.service;
    let found = find(&args, &service).await?;
    // A model asked for when resuming (`-r ID --model …`, `/model`) is the session's from now on.
    if let Some(meta) = &found
        && !args.model.overrides().is_empty()
    {
        service.set_model(&meta.id, args.model.overrides()).await?;
    }
    let client = match setup::session_client(&loaded, &args.model, found.as_ref(), client) {
        Ok(client) => client,
        Err(err) => return super::first_run::run(&loaded, err).await,
    };
    // The status line starts from what is known now and follows what the server says, which
    // arrives in the background: the first frame never waits for it.
    let limits = client.primary.limits();
    let status = Status {
        model: limits.model,
        provider: client.primary.provider.name().to_owned(),
        context_window: limits.context_window,
        window_source: limits.window_source.to_string(),
        ..Status::default()
    };
    forward_limits(client.primary.watch(), news.clone());
    let (key, resumed, project_dir) = match &found {
        Some(meta) => (
            meta.key.clone(),
            Some(meta.id.clone()),
            meta.project_dir.clone(),
        ),
        None => {
            let key = SessionKey::cli(&SessionId::generate());
            let here = setup::project_dir()?;
            // The owner's sessions call its model: a client's flags are this session's own.
            if !args.model.overrides().is_empty() && !service.owns_store().await {
                let id = service.open_key(key.as_str(), &here).await?;
                service.set_model(&id, args.model.overrides()).await?;
            }
            (key, None, here)
        }
    };
    let themes_dir = loaded.paths.config_dir.join("themes");
    let depth = ColorDepth::detect(|name| std::env::var(name).ok());
    let (theme, theme_problem) = match Theme::load(&loaded.config.ui.theme, &themes_dir) {
        Ok(theme) => (theme, None),
        Err(err) => (
            Theme::default(),
            Some(format!("{err}; using the dark theme")),
        ),
    };
    let theme = theme.for_depth(depth);
    let mut app = App::new(theme, themes_dir, FileIndex::pending(), status);
    if let Some(problem) = theme_problem {
        app.notice(problem);
    }
    tell_warm_up(&mut app, &service, &door.warmed, resumed.as_ref()).await;
    if args.restarted_from.is_some() {
        app.notice(format!(
            "tern started again on this session, with {}",
            app.status.model
        ));
    }

    let (stop_tx, stop) = tokio::sync::oneshot::channel();
    // A config file that cannot be used is shown inside the interface, as a notice.
    let rejected = Box::new(move |text: String| {
        let _ = news.send(AppEvent::Notice(text));
    });
    let mut stops =
        Stops::listen(&loaded.config, rejected).context("could not listen for stop signals")?;
    tokio::spawn(async move {
        let reason = stops.next().await;
        let _ = stop_tx.send(Stopping {
            notice: reason.notice(),
            restart: reason == Stop::ConfigChanged,
        });
    });
    let launch = Launch {
        service,
        key,
        resumed,
        project_dir,
        prompt: args.prompt.clone(),
        pick: args.pick,
        stop,
        outside,
    };
    let exit = runner::run(app, launch)
        .await
        .context("the terminal interface stopped")?;
    match exit {
        Exit::Quit { session }
        | Exit::Drained {
            session,
            restart: false,
        } => {
            if let Some(id) = session {
                println!("Continue this conversation with: tern -r {}", id.short());
            }
            Ok(Outcome::Success)
        }
        Exit::Drained {
            session,
            restart: true,
        } => {
            let err = match &session {
                Some(id) => lifecycle::restart(id, &args.model),
                None => lifecycle::start_again(&args.model),
            };
            anyhow::bail!("could not start tern again after the config change: {err}")
        }
    }
}

/// The stored session to open, if any: a restart's, `-r ID`, or `-c` (the latest here).
pub(super) async fn find(
    args: &LaunchArgs,
    service: &SessionService,
) -> anyhow::Result<Option<SessionMeta>> {
    if let Some(id) = args.restarted_from.as_deref().or(args.resume.as_deref()) {
        return Ok(Some(service.resolve(id).await?));
    }
    if !args.r#continue {
        return Ok(None);
    }
    let here = setup::project_dir()?;
    match service.latest(&here).await? {
        Some(meta) => Ok(Some(meta)),
        None => anyhow::bail!(
            "there is no earlier session for {} to continue; start one with `tern`",
            here.display()
        ),
    }
}

/// Passes the model's limits to the interface each time they change (once, when the server
/// has been asked); ends when the asking is over or the interface is gone.
fn forward_limits(
    mut limits: tokio::sync::watch::Receiver<RouteLimits>,
    news: tokio::sync::mpsc::UnboundedSender<AppEvent>,
) {
    tokio::spawn(async move {
        while limits.changed().await.is_ok() {
            let now = limits.borrow_and_update().limits.clone();
            let event = AppEvent::Model {
                model: now.model,
                context_window: now.context_window,
                window_source: now.window_source.to_string(),
            };
            if news.send(event).is_err() {
                return;
            }
        }
    });
}

/// Tells the person about sessions the last stop interrupted, other than the one shown.
async fn tell_warm_up(
    app: &mut App,
    service: &SessionService,
    warmed: &[WarmedUp],
    shown: Option<&SessionId>,
) {
    for session in warmed.iter().filter(|w| Some(&w.id) != shown) {
        let title = service
            .meta(&session.id)
            .await
            .map(|m| m.title)
            .unwrap_or_default();
        let how = if session.resumed {
            "it has carried on by itself"
        } else {
            "it waits for you"
        };
        app.notice(format!(
            "tern stopped in the middle of session {} ({title}); {how}: tern -r {}",
            session.id.short(),
            session.id.short()
        ));
    }
}
