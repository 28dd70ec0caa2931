//! `tern run`: one turn without the interactive interface, for scripts and pipelines.

use super::Outcome;
use super::door;
use super::follow;
use super::prompt::{self, PromptFormat};
use super::render::{OutputFormat, Renderer, TurnEnd};
use super::setup::{self, KeyCheck, ModelArgs, Which};
use crate::domain::RunId;
use crate::domain::{Audience, ErrorCategory};
use crate::domain::{SessionId, SessionKey};
use crate::gateway::catalog::Lifecycle;
use crate::gateway::{FeedItem, RunNews, SessionService, follow_run, has_ended};
use crate::session::{OutputFilter, Phase, SUBSCRIBER_BACKLOG, SessionEvent, UserInput};
use crate::tools::ApprovalMode;
use anyhow::{Context, bail};
use std::collections::BTreeSet;
use std::io::{IsTerminal, Read};
use std::sync::Arc;
use tokio::signal::unix::{SignalKind, signal};

/// Options of `tern run` (its help text is on `Command::Run`).
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// What to ask. Read from standard input when omitted.
    prompt: Option<String>,
    /// Continue the most recent session of this project directory.
    #[arg(short, long, conflicts_with = "session")]
    r#continue: bool,
    /// Continue the session with this id (a unique prefix is enough).
    #[arg(long, value_name = "ID")]
    session: Option<String>,
    /// How to print the answer.
    #[arg(long, value_enum, value_name = "FORMAT", default_value_t = OutputFormat::Text)]
    output_format: OutputFormat,
    /// Print the request the turn would send to the model, layer by layer, and stop: nothing
    /// is sent or saved. With --output-format json, the provider's request body.
    #[arg(long)]
    print_prompt: bool,
    /// Compact the session's history first (with --continue or --session): old tool output
    /// cleared, the oldest messages cut and summarised. Without a prompt, only that.
    #[arg(long)]
    compact: bool,
    /// What tools may do without asking. To be asked before each change or command
    /// instead, talk to tern in its interface (`tern`).
    #[arg(long, value_enum, value_name = "WHAT", default_value_t = Approve::Never)]
    approve: Approve,
    /// With --output-format stream-json, also print the events of the subagents the turn
    /// sends, each tagged with its run_id.
    #[arg(long)]
    include_subagents: bool,
    #[command(flatten)]
    model: ModelArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Approve {
    /// Refuse everything that needs approval, such as file changes and commands; reading
    /// still works.
    Never,
    /// Allow file changes inside the project; refuse the rest that needs approval.
    Edits,
    /// Allow everything, commands included.
    All,
    /// Not offered: nobody is there to answer a `tern run`. Parsed so that the refusal can
    /// say why and what to use instead.
    #[value(hide = true)]
    Ask,
}

impl From<Approve> for ApprovalMode {
    fn from(value: Approve) -> Self {
        match value {
            Approve::Never => ApprovalMode::Never,
            Approve::Edits => ApprovalMode::Edits,
            Approve::All => ApprovalMode::All,
            Approve::Ask => ApprovalMode::Ask,
        }
    }
}

pub async fn run(args: RunArgs) -> anyhow::Result<Outcome> {
    if args.approve == Approve::Ask {
        bail!(
            "--approve ask puts each write and command to a person, and `tern run` has nobody \
             to answer (it would wait for ever); choose what may run without asking instead: \
             --approve never (the default), --approve edits or --approve all"
        );
    }
    if args.print_prompt {
        let format = match args.output_format {
            OutputFormat::Text => PromptFormat::Text,
            OutputFormat::Json | OutputFormat::StreamJson => PromptFormat::Json,
        };
        let which = Which {
            r#continue: args.r#continue,
            session: args.session,
        };
        let shown = prompt::Shown {
            format,
            audience: Audience::Personal,
        };
        return prompt::print(args.prompt, which, shown, &args.model).await;
    }
    if args.compact && !args.r#continue && args.session.is_none() {
        bail!(
            "--compact works on an existing session: add --continue (the latest of this \
             folder) or --session ID"
        );
    }
    let prompt = match (&args.prompt, args.compact) {
        (None, true) => None,
        _ => Some(read_prompt(args.prompt.as_deref())?),
    };
    let mut loaded = setup::load()?;
    // The run ends with its turn: a title call after it would delay the exit or be cut off,
    // so a session this process runs keeps the title its first input gave.
    loaded.config.session.sidecar_titles = false;
    let loaded = Arc::new(loaded);
    let approval = ApprovalMode::from(args.approve);
    let client = setup::model_client(&loaded, &args.model, KeyCheck::Required)?;
    // Through the session service, as every front end: this process's own when no other tern
    // holds the store, the owner's otherwise; the same maintenance check on its writes, the
    // same lifecycle events, and the same resets of a key that is due for one.
    let build = door::build(
        loaded.clone(),
        client.clone(),
        approval,
        args.model.overrides(),
        false,
    );
    let said = Arc::new(|text: String| eprintln!("tern: {text}"));
    let service = door::open(&loaded.paths, build, said).await?.service;
    let which = Which {
        r#continue: args.r#continue,
        session: args.session.clone(),
    };
    let found = which.find(&service).await?;
    // A model asked for when continuing is the session's from now on.
    if let Some(meta) = &found
        && !args.model.overrides().is_empty()
    {
        service.set_model(&meta.id, args.model.overrides()).await?;
    }
    let client = setup::session_client(&loaded, &args.model, found.as_ref(), client)?;
    // The window decides when to compact and the served model what to ask for: a headless
    // turn waits (within the asking's bound) for what the server says before it starts.
    client.primary.ready().await;
    let model = client.primary.model();
    let (key, id, project_dir, resumed) = match found {
        Some(meta) => {
            service.open(&meta.id).await?;
            (meta.key, meta.id, meta.project_dir, true)
        }
        None => {
            let here = setup::project_dir()?;
            let key = SessionKey::cli(&SessionId::generate());
            let id = service.open_key(key.as_str(), &here).await?;
            // The owner's sessions call its model: a client's flags are this session's own.
            if !args.model.overrides().is_empty() && !service.owns_store().await {
                service.set_model(&id, args.model.overrides()).await?;
            }
            (key, id, here, false)
        }
    };

    // Listen for Ctrl-C before the turn can start, so an early one cancels it too.
    let mut interrupts = signal(SignalKind::interrupt()).context("could not listen for Ctrl-C")?;
    let mut renderer = Renderer::new(args.output_format);
    // Without a prompt there is only the compaction (checked above).
    if args.compact {
        renderer.session(&id, resumed, &model, &project_dir);
        compact(&service, &id, &mut renderer).await?;
    }
    let Some(prompt) = prompt else {
        return Ok(Outcome::Success);
    };
    let mut input = UserInput::local(prompt);
    input.approval = Some(approval);
    let (delivered, mut feed) = service
        .send_followed(key.as_str(), &project_dir, input, OutputFilter::ALL)
        .await?;
    // A key due for a reset has a new session now: the one the turn runs in is named.
    let id = delivered.session.clone();
    if !args.compact {
        let resumed = resumed && delivered.reset.is_none();
        renderer.session(&id, resumed, &model, &project_dir);
    }

    let mut interrupted = false;
    let go_on = format!("continue it with: tern run --session {id} \"…\"");
    let mut follower = follow::Follower::new(&service, &id, go_on);
    let (runs_tx, mut runs) = tokio::sync::mpsc::unbounded_channel::<(RunId, RunNews)>();
    let (mut runs_sent, mut runs_ended) = (BTreeSet::new(), BTreeSet::new());
    // The last turn's end, while more turns may come.
    let mut ended: Option<TurnEnd> = None;
    let end = loop {
        tokio::select! {
            Some((run, news)) = runs.recv() => {
                let final_status = matches!(&news, RunNews::Status(status) if has_ended(status));
                show_run(&renderer, &mut runs_ended, run, news);
                // A run that ended without a turn of its notice (one that could not be
                // delivered) leaves nothing more to wait for.
                if final_status
                    && ended.is_some()
                    && !more_to_come(&service, &id).await?
                    && let Some(end) = ended.take()
                {
                    break end;
                }
            }
            item = feed.next() => {
                if let Some(run) = sent_run(&item) {
                    renderer.subagent_started(&run);
                    runs_sent.insert(run.clone());
                    let with_session = args.include_subagents;
                    follow_run(service.clone(), id.clone(), run, with_session, runs_tx.clone());
                }
                if let Some(end) = follower.step(item, &mut feed, &mut renderer).await? {
                    // The subagents the turn sent report in turns of their own: wait for
                    // them and those turns.
                    if interrupted || !more_to_come(&service, &id).await? {
                        break end;
                    }
                    ended = Some(end);
                }
            }
            _ = interrupts.recv() => {
                if interrupted {
                    // A second Ctrl-C: stop waiting for the cancel to wind down. Everything
                    // acknowledged is already in the journal.
                    return Ok(Outcome::Interrupted);
                }
                interrupted = true;
                service.cancel(&id).await?;
            }
        }
    };
    // What the followers of the runs the turn sent still have: each run's end (its notice's
    // turn may have ended first) and, with --include-subagents, the rest of its session.
    drop(runs_tx);
    while !runs_sent.is_empty() && !interrupted {
        let Some((run, news)) = runs.recv().await else {
            break;
        };
        show_run(&renderer, &mut runs_ended, run, news);
    }
    // Wait until the session is idle, so the journal holds the whole turn.
    service.idle(&id).await?;
    service.close_all().await;
    Ok(match end {
        TurnEnd::Completed => Outcome::Success,
        TurnEnd::GuardEnded => Outcome::GuardEnded,
        TurnEnd::Failed(ErrorCategory::Cancelled) if interrupted => Outcome::Interrupted,
        TurnEnd::Failed(_) => Outcome::TurnFailed,
    })
}

/// Shows what a run the turn sent brought: its end once (`ended` holds the runs shown
/// ended), and its session's events.
fn show_run(renderer: &Renderer, ended: &mut BTreeSet<RunId>, run: RunId, news: RunNews) {
    match news {
        RunNews::Status(status) if has_ended(&status) && ended.insert(run.clone()) => {
            renderer.subagent_finished(&run, &status);
        }
        RunNews::Event(event) => renderer.subagent_event(&run, &event),
        RunNews::History(records) => renderer.subagent_history(&run, &records),
        RunNews::Status(_) => {}
    }
}

/// The run a `spawn_agent` call of the turn started, when `item` is its result.
fn sent_run(item: &Option<FeedItem>) -> Option<RunId> {
    match item {
        Some(FeedItem::Event(stamped)) => match &stamped.event {
            SessionEvent::ToolResult {
                name,
                content,
                is_error: false,
                ..
            } if name == "spawn_agent" => {
                let value: serde_json::Value = serde_json::from_str(content).ok()?;
                RunId::parse(value["run_id"].as_str()?)
            }
            _ => None,
        },
        _ => None,
    }
}

/// Whether session `id` has more turns coming on its own: subagent runs still to report, or
/// a report's turn under way. A run is reported once its notice's turn has begun, and the
/// notice is journaled before, so one of the two always shows.
async fn more_to_come(service: &SessionService, id: &SessionId) -> anyhow::Result<bool> {
    if service.pending_runs(id).await? > 0 {
        return Ok(true);
    }
    Ok(service.meta(id).await?.lifecycle == Lifecycle::Working)
}

/// Compacts the session now and shows what happened (`--compact`).
pub(super) async fn compact(
    service: &SessionService,
    id: &SessionId,
    renderer: &mut Renderer,
) -> anyhow::Result<()> {
    let mut feed = service
        .subscribe(id, None, OutputFilter::ALL, SUBSCRIBER_BACKLOG)
        .await?;
    let changed = service.compact(id).await?;
    // The compaction's events end with the session ready again.
    while let Some(item) = feed.next().await {
        let FeedItem::Event(stamped) = item else {
            continue;
        };
        renderer.event(&stamped.event);
        if let SessionEvent::PhaseChanged {
            phase: Phase::Ready,
        } = stamped.event
        {
            break;
        }
    }
    if !changed {
        eprintln!("tern: nothing to compact: the conversation is already short");
    }
    Ok(())
}

/// The prompt from the argument, or from standard input when there is none.
pub(super) fn read_prompt(arg: Option<&str>) -> anyhow::Result<String> {
    let prompt = match arg {
        Some("-") | None => {
            let stdin = std::io::stdin();
            if stdin.is_terminal() {
                bail!("no prompt given: pass it as an argument (`tern run \"…\"`) or pipe it in");
            }
            let mut text = String::new();
            stdin
                .lock()
                .read_to_string(&mut text)
                .context("could not read the prompt from standard input")?;
            text
        }
        Some(text) => text.to_owned(),
    };
    if prompt.trim().is_empty() {
        bail!("the prompt is empty: pass it as an argument (`tern run \"…\"`) or pipe it in");
    }
    Ok(prompt)
}
