//! `tern` with no subcommand: a conversation in this terminal, one line per message.

use super::Outcome;
use super::render::{OutputFormat, Renderer, print_out};
use super::setup::{self, ModelArgs};
use crate::session::{OutputFilter, SessionHandle, UserInput};
use crate::tools::ApprovalMode;
use anyhow::Context;
use futures_util::FutureExt;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::signal::unix::{SignalKind, signal};

pub async fn run(args: ModelArgs) -> anyhow::Result<Outcome> {
    let loaded = setup::load()?;
    let client = setup::model_client(&loaded.config, &args, setup::KeyCheck::Required)?;
    let store = setup::open_store(&loaded.paths)?;
    let model = client.primary.model.to_owned();
    // A person is present, but asking is not built into the line mode: edits are allowed,
    // commands are refused with a note the model can act on.
    let deps = setup::session_deps(
        &loaded,
        store.clone(),
        client,
        ApprovalMode::Edits,
        args.overrides(),
    );
    let project_dir = setup::project_dir()?;
    let mut handle = SessionHandle::create(deps.clone(), project_dir.clone())?;
    print_out(&format!(
        "tern · {model} · session {} · /compact to shrink the history · /exit or Ctrl-D to \
         leave\n",
        handle.id().short()
    ))?;

    let mut interrupts = signal(SignalKind::interrupt()).context("could not listen for Ctrl-C")?;
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    loop {
        // A Ctrl-C that stopped the last turn must not also end the conversation.
        while interrupts.recv().now_or_never().is_some() {}
        print_out("› ")?;
        let line = tokio::select! {
            line = lines.next_line() => line?,
            _ = interrupts.recv() => None,
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
            let old = handle.id().clone();
            handle.clone().close().await;
            store.archive_session(&old, jiff::Timestamp::now().as_millisecond())?;
            handle = SessionHandle::create(deps.clone(), project_dir.clone())?;
            print_out(&format!(
                "archived session {}; new session {} (see `tern sessions list --archived`)\n",
                old.short(),
                handle.id().short()
            ))?;
            continue;
        }
        if text == "/compact" {
            let mut events = handle.subscribe(OutputFilter::ALL).await?;
            let mut renderer = Renderer::new(OutputFormat::Text);
            super::run::compact(&handle, &mut events, &mut renderer).await?;
            continue;
        }
        let mut events = handle.subscribe(OutputFilter::ALL).await?;
        handle.send(UserInput::local(text)).await?;
        let mut renderer = Renderer::new(OutputFormat::Text);
        loop {
            tokio::select! {
                event = events.recv() => match event {
                    Some(event) => if renderer.event(&event).is_some() { break },
                    None => break,
                },
                _ = interrupts.recv() => handle.cancel().await?,
            }
        }
        handle.state().await?;
    }
    let _ = print_out(&format!(
        "\nContinue this conversation with: tern run --session {} \"…\"\n",
        handle.id()
    ));
    Ok(Outcome::Success)
}
