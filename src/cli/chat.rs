//! `tern` with no subcommand: a conversation in this terminal, one line per message.
//!
//! It talks to its session through the session manager under a `cli:` key, so resets, the
//! maintenance checks and lifecycle events apply as for every other front end. A signal to
//! stop or a changed `config.toml` drains the session (see `lifecycle.rs`); after a config
//! change tern starts again in the same process on the same session.

use super::Outcome;
use super::lifecycle::{self, DRAIN_BOUND, Stop, Stops};
use super::render::{OutputFormat, Renderer, print_out};
use super::setup::{self, ModelArgs};
use super::tui::LaunchArgs;
use crate::domain::{ContentBlock, Role, SessionId, SessionKey};
use crate::gateway::{SendUserMessage, SessionManager, WarmedUp};
use crate::llm::ModelRoute;
use crate::session::{OutputFilter, Subscription, UserInput};
use crate::store::Store;
use crate::tools::ApprovalMode;
use anyhow::Context;
use futures_util::FutureExt;
use std::path::PathBuf;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::signal::unix::{SignalKind, signal};

/// The conversation's place: its key, where it works, and the model it talks to.
struct Conversation {
    manager: SessionManager,
    key: SessionKey,
    project_dir: PathBuf,
    route: ModelRoute,
}

pub async fn run(launch: LaunchArgs) -> anyhow::Result<Outcome> {
    let args = launch.model.clone();
    let loaded = setup::load()?;
    let store = setup::open_store(&loaded.paths)?;
    let attached = find(&launch, &store)?;
    let client = setup::model_client(
        &loaded,
        &args.or_session(attached.as_ref()),
        setup::KeyCheck::Required,
    )?;
    // The banner names the model, and the first turn needs its window: wait (within the
    // asking's bound) for what the server says.
    client.primary.ready().await;
    let route = client.primary.clone();
    let model = route.model();
    // A person is present, but asking is not built into the line mode: edits are allowed,
    // commands are refused with a note the model can act on.
    let deps = setup::session_deps(
        &loaded,
        store.clone(),
        client,
        ApprovalMode::Edits,
        args.overrides(),
    );
    let manager = SessionManager::new(deps);
    let warmed = manager.warm_up().await?;
    let (key, project_dir) = match &attached {
        Some(meta) => (meta.key.clone(), meta.project_dir.clone()),
        None => (
            SessionKey::cli(&SessionId::generate()),
            setup::project_dir()?,
        ),
    };
    let chat = Conversation {
        manager,
        key,
        project_dir,
        route,
    };
    let id = chat.session().await?;
    report_warm_up(&store, &warmed, &id)?;
    if launch.restarted_from.is_some() {
        print_out(&format!(
            "tern restarted with the changed configuration · {model} · session {}\n",
            id.short()
        ))?;
        // A turn the restart stopped goes on by itself; its answer comes before the prompt.
        if warmed.iter().any(|w| w.id == id && w.resumed) {
            let handle = chat.manager.handle(&chat.key, &chat.project_dir).await?;
            let state = handle.state().await?;
            if let Some(text) = last_answer(&state.messages) {
                print_out(&format!("{text}\n"))?;
            }
        }
    } else {
        print_out(&format!(
            "tern · {model} · session {} · /compact to shrink the history · /status · /exit \
             or Ctrl-D to leave\n",
            id.short()
        ))?;
    }
    converse(&chat, &loaded.config, &args, launch.prompt).await
}

/// Compacts the session now and shows what happened (`/compact`).
async fn compact(
    handle: &crate::session::SessionHandle,
    events: &mut Subscription,
    renderer: &mut Renderer,
) -> anyhow::Result<()> {
    let changed = handle.compact().await?;
    // Once the session is idle, every event of the compaction has been published.
    handle.state().await?;
    while let Some(event) = events.try_recv() {
        renderer.event(&event);
    }
    if !changed {
        eprintln!("tern: nothing to compact: the conversation is already short");
    }
    Ok(())
}

/// The stored session to go on with, if any: a restart's, `-r ID`, or `-c` (the latest here).
fn find(args: &LaunchArgs, store: &Store) -> anyhow::Result<Option<crate::store::SessionMeta>> {
    if let Some(id) = args.restarted_from.as_deref().or(args.resume.as_deref()) {
        return Ok(Some(store.resolve(id)?));
    }
    if !args.r#continue {
        return Ok(None);
    }
    let here = setup::project_dir()?;
    match store.latest_for_project(&here)? {
        Some(meta) => Ok(Some(meta)),
        None => anyhow::bail!(
            "there is no earlier session for {} to continue; start one with `tern`",
            here.display()
        ),
    }
}

/// The prompt loop, until the person leaves or something stops tern.
async fn converse(
    chat: &Conversation,
    config: &crate::config::Config,
    args: &ModelArgs,
    mut first: Option<String>,
) -> anyhow::Result<Outcome> {
    let mut interrupts = signal(SignalKind::interrupt()).context("could not listen for Ctrl-C")?;
    // The line mode owns no screen: a config file that cannot be used is said on stderr.
    let rejected = Box::new(|text: String| eprintln!("tern: {text}"));
    let mut stops = Stops::listen(config, rejected).context("could not listen for stop signals")?;
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    loop {
        // A Ctrl-C that stopped the last turn must not also end the conversation.
        while interrupts.recv().now_or_never().is_some() {}
        print_out("› ")?;
        let line = match first.take() {
            // `tern "…"`: the first message came with the command.
            Some(prompt) => {
                print_out(&format!("{prompt}\n"))?;
                Some(prompt)
            }
            None => tokio::select! {
                line = lines.next_line() => line?,
                _ = interrupts.recv() => None,
                stop = stops.next() => return chat.stop(stop, None, args).await,
            },
        };
        let Some(line) = line else { break };
        let text = line.trim();
        if text.is_empty() {
            continue;
        }
        if matches!(text, "/exit" | "/quit") {
            break;
        }
        if matches!(text, "/new" | "/reset") {
            // The conversation so far is archived with its transcript; a new one starts.
            let old = chat.session().await?;
            let new = chat
                .manager
                .reset(chat.key.as_str(), chat.project_dir.clone())
                .await?;
            print_out(&format!(
                "archived session {}; new session {} (see `tern sessions list --archived`)\n",
                old.short(),
                new.short()
            ))?;
            continue;
        }
        if text == "/status" {
            print_out(&format!("{}\n", chat.status().await?))?;
            continue;
        }
        if text == "/compact" {
            let mut events = chat.subscribe().await?;
            let handle = chat.manager.handle(&chat.key, &chat.project_dir).await?;
            let mut renderer = Renderer::new(OutputFormat::Text);
            compact(&handle, &mut events, &mut renderer).await?;
            continue;
        }
        let message = SendUserMessage {
            key: chat.key.as_str().to_owned(),
            input: UserInput::local(text),
            project_dir: chat.project_dir.clone(),
        };
        let (delivered, mut events) =
            match chat.manager.send_watched(message, OutputFilter::ALL).await {
                Ok(sent) => sent,
                // Nothing of a refused input was kept; the conversation goes on.
                Err(err) => {
                    eprintln!("tern: {err}");
                    continue;
                }
            };
        if let Some((old, why)) = &delivered.reset {
            print_out(&format!(
                "({} reset: session {} is archived; this message starts session {})\n",
                why.as_str(),
                old.short(),
                delivered.session.short()
            ))?;
        }
        let mut renderer = Renderer::new(OutputFormat::Text);
        loop {
            tokio::select! {
                event = events.recv() => match event {
                    Some(event) => if renderer.event(&event).is_some() { break },
                    None => break,
                },
                _ = interrupts.recv() => {
                    chat.manager.handle(&chat.key, &chat.project_dir).await?.cancel().await?;
                }
                stop = stops.next() => {
                    return chat.stop(stop, Some((&mut events, &mut renderer)), args).await;
                }
            }
        }
        chat.manager
            .handle(&chat.key, &chat.project_dir)
            .await?
            .state()
            .await?;
    }
    let id = chat.session().await?;
    chat.manager.close_all().await;
    let _ = print_out(&format!(
        "\nContinue this conversation with: tern run --session {id} \"…\"\n"
    ));
    Ok(Outcome::Success)
}

impl Conversation {
    /// The session, the model and its context window, and where the window came from.
    async fn status(&self) -> anyhow::Result<String> {
        let id = self.session().await?;
        let limits = self.route.limits();
        Ok(format!(
            "session {id} · {} ({}) · context window {} tokens ({}) · replies up to {} tokens",
            limits.model,
            self.route.provider.name(),
            limits.context_window,
            limits.window_source,
            limits.max_output_tokens
        ))
    }

    /// The session the key talks to now (created or resumed if need be).
    async fn session(&self) -> anyhow::Result<SessionId> {
        let handle = self.manager.handle(&self.key, &self.project_dir).await?;
        Ok(handle.id().clone())
    }

    async fn subscribe(&self) -> anyhow::Result<Subscription> {
        Ok(self
            .manager
            .subscribe(
                self.key.as_str(),
                self.project_dir.clone(),
                OutputFilter::ALL,
            )
            .await?)
    }

    /// Drains the session for `stop`, showing the end of a running turn through `turn`, then
    /// either ends (a signal) or starts tern again on the same session (a config change).
    async fn stop(
        &self,
        stop: Stop,
        turn: Option<(&mut Subscription, &mut Renderer)>,
        args: &ModelArgs,
    ) -> anyhow::Result<Outcome> {
        eprintln!("\ntern: {}", stop.notice());
        let id = self.session().await?;
        let drain = self.manager.drain(DRAIN_BOUND);
        tokio::pin!(drain);
        let mut open = true;
        let drained = match turn {
            Some((events, renderer)) => loop {
                tokio::select! {
                    biased;
                    event = events.recv(), if open => match event {
                        Some(event) => {
                            renderer.event(&event);
                        }
                        None => open = false,
                    },
                    drained = &mut drain => {
                        while let Some(event) = events.try_recv() {
                            renderer.event(&event);
                        }
                        break drained;
                    }
                }
            },
            None => drain.await,
        };
        if let Err(err) = drained {
            eprintln!("tern: the drain did not finish cleanly: {err}");
        }
        match stop {
            Stop::Signal(_) => {
                let _ = print_out(&format!(
                    "\nContinue this conversation with: tern run --session {id} \"…\"\n"
                ));
                Ok(Outcome::Success)
            }
            Stop::ConfigChanged => {
                // Whatever still holds the store lets go as the process image is replaced.
                let err = lifecycle::restart(&id, args);
                anyhow::bail!("could not start tern again after the config change: {err}")
            }
        }
    }
}

/// Tells the person about sessions the last stop interrupted, other than `current`.
fn report_warm_up(store: &Store, warmed: &[WarmedUp], current: &SessionId) -> anyhow::Result<()> {
    for session in warmed.iter().filter(|w| &w.id != current) {
        let title = store
            .meta(&session.id)?
            .map(|m| m.title)
            .unwrap_or_default();
        let line = if session.resumed {
            format!(
                "tern stopped in the middle of session {} ({title}); it has carried on by \
                 itself: see `tern sessions show {}`\n",
                session.id.short(),
                session.id.short()
            )
        } else {
            format!(
                "tern stopped in the middle of session {} ({title}); it waits for you: \
                 continue it with `tern run --session {} \"…\"`\n",
                session.id.short(),
                session.id.short()
            )
        };
        print_out(&line)?;
    }
    Ok(())
}

/// The text of the last assistant message, if it has any.
fn last_answer(messages: &[crate::domain::Message]) -> Option<String> {
    let last = messages.iter().rev().find(|m| m.role == Role::Assistant)?;
    let text: String = last
        .content
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    (!text.trim().is_empty()).then_some(text)
}
