//! `tern` with no subcommand: a conversation in this terminal, one line per message.
//!
//! It talks to its session through the session service under a `cli:` key, so resets, the
//! maintenance checks and lifecycle events apply as for every other front end, and beside a
//! running tern it is that tern's client. A signal to stop or a changed `config.toml` drains
//! the session (see `lifecycle.rs`); after a config change tern starts again in the same
//! process on the same session.

use super::Outcome;
use super::door;
use super::follow;
use super::lifecycle::{self, DRAIN_BOUND, Stop, Stops};
use super::render::{OutputFormat, Renderer, print_out};
use super::setup::{self, ModelArgs};
use super::tui::LaunchArgs;
use crate::domain::{SessionId, SessionKey, text_of};
use crate::gateway::catalog::JournalEvent;
use crate::gateway::{Feed, FeedItem, SessionService, WarmedUp};
use crate::llm::ModelRoute;
use crate::session::{OutputFilter, UserInput};
use crate::tools::ApprovalMode;
use anyhow::Context;
use futures_util::FutureExt;
use std::path::PathBuf;
use std::sync::Arc;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::signal::unix::{SignalKind, signal};

/// A person is present, but asking is not built into the line mode: edits are allowed,
/// commands are refused with a note the model can act on.
const APPROVAL: ApprovalMode = ApprovalMode::Edits;

/// The conversation's place: its key, where it works, and the model it talks to.
struct Conversation {
    service: SessionService,
    key: SessionKey,
    project_dir: PathBuf,
    route: ModelRoute,
}

pub async fn run(launch: LaunchArgs) -> anyhow::Result<Outcome> {
    let args = launch.model.clone();
    let loaded = Arc::new(setup::load()?);
    let client = setup::model_client(&loaded, &args, setup::KeyCheck::Required)?;
    let build = door::build(
        loaded.clone(),
        client.clone(),
        APPROVAL,
        args.overrides(),
        true,
    );
    let said = Arc::new(|text: String| eprintln!("tern: {text}"));
    let door = door::open(&loaded.paths, build, said).await?;
    let service = door.service;
    let attached = super::tui::find(&launch, &service).await?;
    if let Some(meta) = &attached
        && !args.overrides().is_empty()
    {
        service.set_model(&meta.id, args.overrides()).await?;
    }
    let client = setup::session_client(&loaded, &args, attached.as_ref(), client)?;
    // The banner names the model, and the first turn needs its window: wait (within the
    // asking's bound) for what the server says.
    client.primary.ready().await;
    let route = client.primary.clone();
    let model = route.model();
    let (key, project_dir) = match &attached {
        Some(meta) => (meta.key.clone(), meta.project_dir.clone()),
        None => (
            SessionKey::cli(&SessionId::generate()),
            setup::project_dir()?,
        ),
    };
    let chat = Conversation {
        service,
        key,
        project_dir,
        route,
    };
    let id = chat.session().await?;
    // The owner's sessions call its model: a client's flags are this session's own.
    if attached.is_none() && !args.overrides().is_empty() && !chat.service.owns_store().await {
        chat.service.set_model(&id, args.overrides()).await?;
    }
    report_warm_up(&chat.service, &door.warmed, &id).await?;
    if launch.restarted_from.is_some() {
        print_out(&format!(
            "tern restarted with the changed configuration · {model} · session {}\n",
            id.short()
        ))?;
        // A turn the restart stopped goes on by itself; its answer comes before the prompt.
        if door.warmed.iter().any(|w| w.id == id && w.resumed) {
            chat.service.idle(&id).await?;
            if let Some(text) = last_answer(&chat.service, &id).await? {
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
                .service
                .reset(chat.key.as_str(), &chat.project_dir)
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
            let id = chat.session().await?;
            let mut renderer = Renderer::new(OutputFormat::Text);
            super::run::compact(&chat.service, &id, &mut renderer).await?;
            continue;
        }
        let mut input = UserInput::local(text);
        input.approval = Some(APPROVAL);
        let sent = chat
            .service
            .send_followed(
                chat.key.as_str(),
                &chat.project_dir,
                input,
                OutputFilter::ALL,
            )
            .await;
        let (delivered, mut feed) = match sent {
            Ok(sent) => sent,
            // Nothing of a refused input was kept; the conversation goes on.
            Err(err) => {
                eprintln!("tern: not sent: {err}");
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
        let id = delivered.session;
        let mut renderer = Renderer::new(OutputFormat::Text);
        let go_on = "say so to carry it on".to_owned();
        let mut follower = follow::Follower::new(&chat.service, &id, go_on);
        loop {
            tokio::select! {
                item = feed.next() => {
                    if follower.step(item, &mut feed, &mut renderer).await?.is_some() {
                        break;
                    }
                }
                _ = interrupts.recv() => chat.service.cancel(&id).await?,
                stop = stops.next() => {
                    return chat.stop(stop, Some((&mut feed, &mut renderer)), args).await;
                }
            }
        }
        chat.service.idle(&id).await?;
    }
    let id = chat.session().await?;
    chat.service.close_all().await;
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
        Ok(self
            .service
            .open_key(self.key.as_str(), &self.project_dir)
            .await?)
    }

    /// Drains the session for `stop`, showing the end of a running turn through `turn`, then
    /// either ends (a signal) or starts tern again on the same session (a config change).
    async fn stop(
        &self,
        stop: Stop,
        turn: Option<(&mut Feed, &mut Renderer)>,
        args: &ModelArgs,
    ) -> anyhow::Result<Outcome> {
        eprintln!("\ntern: {}", stop.notice());
        let id = self.session().await?;
        let drain = self.service.drain(DRAIN_BOUND);
        tokio::pin!(drain);
        let mut open = true;
        let drained = match turn {
            Some((feed, renderer)) => loop {
                tokio::select! {
                    biased;
                    item = feed.next(), if open => match item {
                        Some(FeedItem::Event(stamped)) => {
                            renderer.event(&stamped.event);
                        }
                        Some(_) => {}
                        None => open = false,
                    },
                    drained = &mut drain => {
                        while let Some(Some(item)) = feed.next().now_or_never() {
                            if let FeedItem::Event(stamped) = item {
                                renderer.event(&stamped.event);
                            }
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
async fn report_warm_up(
    service: &SessionService,
    warmed: &[WarmedUp],
    current: &SessionId,
) -> anyhow::Result<()> {
    for session in warmed.iter().filter(|w| &w.id != current) {
        let title = service
            .meta(&session.id)
            .await
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

/// The text of the session's last answer, if it has any.
async fn last_answer(service: &SessionService, id: &SessionId) -> anyhow::Result<Option<String>> {
    let catalog = service.catalog();
    let wanted = id.clone();
    let records = tokio::task::spawn_blocking(move || catalog.tail(&wanted, 64))
        .await?
        .map_err(anyhow::Error::msg)?;
    Ok(records.iter().rev().find_map(|record| match &record.event {
        JournalEvent::AssistantMessage { content, .. } => {
            let text = text_of(content);
            (!text.trim().is_empty()).then_some(text)
        }
        _ => None,
    }))
}
