//! The terminal UI's state and what input does to it. Pure: keys, pastes, session events
//! and the results of background work come in; changed state and [`Action`]s for the runner
//! to carry out (send a message, cancel the turn, run a command…) come out. Only the runner
//! (`runner.rs`) touches the terminal, the session manager or the clock.

use super::approval::{Asking, FromRun};
use super::composer::{Composer, Edit};
use super::export::Overwrite;
use super::panes::Panes;
use super::popup::{self, Choices, FileIndex};
use super::status::Status;
use super::theme::Theme;
use super::transcript::{CellKind, Transcript};
use crate::domain::{Answer, RunId, SessionId};
use crate::session::{Phase, SessionEvent};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers, MouseEvent, MouseEventKind};
use std::collections::VecDeque;
use std::path::PathBuf;
use std::time::Duration;
use tokio::time::Instant;

mod commands;

/// How close two Ctrl-C presses must be to quit.
pub(crate) const QUIT_WINDOW: Duration = Duration::from_secs(1);
/// How long a flash message stays in the status line.
const FLASH: Duration = Duration::from_secs(3);
/// Lines the mouse wheel scrolls.
const WHEEL_LINES: usize = 3;

/// Work for the runner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Send a message to the session.
    Send(String),
    /// Stop the running turn.
    Cancel,
    /// Run a command the person typed after `!`.
    Shell(String),
    Compact,
    /// Archive this conversation and start a new one.
    Reset,
    /// Open the session picker.
    Pick,
    /// Have this session call another model from its next turn on.
    SwitchModel(String),
    /// Write the transcript as markdown to this file; over an existing one only when
    /// `overwrite` (the person said yes).
    Export {
        path: PathBuf,
        overwrite: bool,
    },
    /// The person answered an approval, of the session shown or (`session`) of one of its
    /// runs.
    Answer {
        call_id: String,
        answer: Answer,
        session: Option<SessionId>,
    },
    /// Cancel this subagent run of the session.
    CancelRun(RunId),
    /// Show this run's `result.md`.
    ShowResult(PathBuf),
    /// Show the session's background jobs and what they printed.
    ShowJobs,
    /// Show the repository map, centred also on these paths and names.
    ShowMap(Vec<String>),
    /// `/mcp`, approving the named server of the project's `.mcp.json` first.
    ShowMcp(Option<String>),
    Quit,
}

/// Results of background work, for the app.
#[derive(Debug, Clone, PartialEq)]
pub enum AppEvent {
    /// Where a subagent run stands, as its owner says.
    RunStatus {
        run: RunId,
        status: serde_json::Value,
    },
    /// A run's session as journaled so far, when its pane opens.
    RunHistory {
        run: RunId,
        records: Vec<crate::gateway::catalog::JournalRecord>,
    },
    /// A live event of a run's session.
    RunEvent {
        run: RunId,
        event: SessionEvent,
    },
    /// A message could not be delivered; it was not kept.
    NotSent {
        text: String,
        error: String,
    },
    /// A `!` command finished.
    ShellDone {
        command: String,
        output: String,
        ok: bool,
    },
    /// A compaction on demand ended: whether it changed anything, or why it failed.
    Compacted(Result<bool, String>),
    /// The key talks to a new session now.
    Renewed {
        old: Option<SessionId>,
        new: SessionId,
    },
    Branch(Option<String>),
    /// The chat channels the owner runs, as the status line shows them (empty: none).
    Channels(String),
    Exported(Result<PathBuf, String>),
    /// The file `/export` names exists: the person is asked before it is written over.
    ExportExists(PathBuf),
    /// Something the person should read, shown as a notice.
    Notice(String),
    /// The runs of `session` that were queued or working when it was opened.
    LiveRuns {
        session: SessionId,
        runs: Vec<RunId>,
    },
    /// How many background jobs of `session` run, as the poll chain `chain` found.
    Jobs {
        session: SessionId,
        chain: u64,
        running: usize,
    },
    /// The model and its window as the server said them (or why they are only assumed).
    Model {
        model: String,
        context_window: u64,
        window_source: String,
    },
    /// The session calls this model from its next turn on (`/model`).
    Switched(crate::gateway::ModelShown),
}

/// An open popup.
#[derive(Debug, Clone)]
enum Popup {
    Slash(Choices),
    Files(Choices),
}

/// Everything on screen.
pub struct App {
    pub transcript: Transcript,
    pub composer: Composer,
    pub status: Status,
    pub theme: Theme,
    /// Where user themes live, and the terminal's colour depth.
    themes_dir: PathBuf,
    files: FileIndex,
    popup: Option<Popup>,
    /// Output of `!` commands, added to the next message so the model sees it.
    shell_context: Vec<String>,
    last_ctrl_c: Option<Instant>,
    pub session: Option<SessionId>,
    /// Calls waiting for the person's approval, the first one shown.
    pub asking: VecDeque<Asking>,
    /// The file `/export` would write over, while the person is asked.
    pub overwrite: Option<Overwrite>,
    /// The panes of the subagent runs the session sent.
    pub panes: Panes,
    /// Runs the session just sent, for the runner to follow.
    new_runs: Vec<RunId>,
    /// For the session of a subagent run (`tern -r` on it): the parent; nothing is sent to
    /// it from here.
    pub read_only_for: Option<SessionId>,
}

impl App {
    pub fn new(theme: Theme, themes_dir: PathBuf, files: FileIndex, status: Status) -> Self {
        Self {
            transcript: Transcript::default(),
            composer: Composer::default(),
            status,
            theme,
            themes_dir,
            files,
            popup: None,
            shell_context: Vec::new(),
            last_ctrl_c: None,
            session: None,
            asking: VecDeque::new(),
            overwrite: None,
            panes: Panes::default(),
            new_runs: Vec::new(),
            read_only_for: None,
        }
    }

    /// The runs the session sent since the last call, each to be followed in its pane.
    pub fn take_new_runs(&mut self) -> Vec<RunId> {
        std::mem::take(&mut self.new_runs)
    }

    /// Handles a key press.
    pub fn key(&mut self, key: KeyEvent, now: Instant) -> Vec<Action> {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        if let Some(asking) = self.asking.front_mut()
            && !(ctrl && key.code == KeyCode::Char('c'))
        {
            return match asking.key(key) {
                Some(answer) => {
                    let call_id = asking.call_id.clone();
                    let session = asking.from_run.as_ref().map(|from| from.session.clone());
                    self.asking.pop_front();
                    vec![Action::Answer {
                        call_id,
                        answer,
                        session,
                    }]
                }
                None => Vec::new(),
            };
        }
        if let Some(actions) = self.overwrite_key(key) {
            return actions;
        }
        if self.popup.is_some()
            && let Some(actions) = self.popup_key(key)
        {
            return actions;
        }
        match key.code {
            KeyCode::Char('c') if ctrl => return self.ctrl_c(now),
            KeyCode::Char('d') if ctrl && self.composer.is_empty() => return vec![Action::Quit],
            KeyCode::Esc if self.busy() => return vec![Action::Cancel],
            KeyCode::Esc => return Vec::new(),
            KeyCode::Char('t') if ctrl => {
                self.transcript.view.thinking_open = !self.transcript.view.thinking_open;
                return Vec::new();
            }
            KeyCode::Char('o') if ctrl => {
                self.transcript.view.tools_open = !self.transcript.view.tools_open;
                return Vec::new();
            }
            KeyCode::Char('n') if ctrl => {
                self.panes.focus_next();
                return Vec::new();
            }
            KeyCode::Char('p') if ctrl => {
                self.panes.focus_prev();
                return Vec::new();
            }
            KeyCode::Char('f') if ctrl => {
                self.panes.toggle_full();
                return Vec::new();
            }
            KeyCode::Char('x') if ctrl => {
                return match self.panes.focused() {
                    Some(pane) => vec![Action::CancelRun(pane.run.clone())],
                    None => Vec::new(),
                };
            }
            KeyCode::Char('b') if ctrl => return vec![Action::ShowJobs],
            KeyCode::Char('r') if ctrl => {
                return match self.panes.result() {
                    Some(path) => vec![Action::ShowResult(path)],
                    None => {
                        self.notice("no subagent run has a result yet");
                        Vec::new()
                    }
                };
            }
            KeyCode::PageUp => {
                let page = self.transcript.page();
                self.transcript.scroll_up(page, &self.theme);
                return Vec::new();
            }
            KeyCode::PageDown => {
                let page = self.transcript.page();
                self.transcript.scroll_down(page, &self.theme);
                return Vec::new();
            }
            KeyCode::Home if ctrl || self.composer.is_empty() => {
                self.transcript.to_top();
                return Vec::new();
            }
            KeyCode::End if ctrl || self.composer.is_empty() => {
                self.transcript.to_bottom();
                return Vec::new();
            }
            _ => {}
        }
        let actions = match self.composer.key(key) {
            Edit::Submit(text) => self.submit(text),
            Edit::Changed | Edit::Ignored => Vec::new(),
        };
        self.update_popup();
        actions
    }

    /// A bracketed paste goes into the composer.
    pub fn paste(&mut self, text: impl Into<String>) {
        let text = text.into();
        if let Some(asking) = self.asking.front_mut() {
            asking.paste(&text);
            return;
        }
        self.composer.paste(text);
        self.update_popup();
    }

    pub fn mouse(&mut self, event: MouseEvent) {
        match event.kind {
            MouseEventKind::ScrollUp => self.transcript.scroll_up(WHEEL_LINES, &self.theme),
            MouseEventKind::ScrollDown => self.transcript.scroll_down(WHEEL_LINES, &self.theme),
            _ => {}
        }
    }

    /// Ctrl-C clears the composer; a second one within a second quits.
    fn ctrl_c(&mut self, now: Instant) -> Vec<Action> {
        if !self.composer.is_empty() {
            self.composer.clear();
            self.popup = None;
            self.last_ctrl_c = None;
            return Vec::new();
        }
        if self
            .last_ctrl_c
            .is_some_and(|at| now.saturating_duration_since(at) <= QUIT_WINDOW)
        {
            return vec![Action::Quit];
        }
        self.last_ctrl_c = Some(now);
        self.flash("press Ctrl-C again to quit", now);
        Vec::new()
    }

    fn flash(&mut self, text: &str, now: Instant) {
        self.status.flash = Some((text.to_owned(), now));
    }

    /// Sends `text` as if it had been typed and sent (`tern "…"`).
    pub fn submit_text(&mut self, text: String) -> Vec<Action> {
        self.composer.remember(&text);
        self.submit(text)
    }

    /// What the composer's text asks for.
    fn submit(&mut self, text: String) -> Vec<Action> {
        let trimmed = text.trim();
        if let Some(command) = trimmed.strip_prefix('/')
            && !command.starts_with('/')
        {
            return self.slash(command);
        }
        if let Some(command) = trimmed.strip_prefix('!') {
            let command = command.trim();
            if command.is_empty() {
                return Vec::new();
            }
            return vec![Action::Shell(command.to_owned())];
        }
        self.send_text(text)
    }

    /// Sends `text`, after the output of the `!` lines run since the last message; not in
    /// a subagent's session, which is shown read-only.
    fn send_text(&mut self, text: String) -> Vec<Action> {
        if let Some(parent) = &self.read_only_for {
            self.composer.set(&text);
            self.notice(format!(
                "this is the session of a subagent run of session {}: it is shown read-only; \
                 /new starts a conversation of your own, /resume picks another",
                parent.short()
            ));
            return Vec::new();
        }
        self.transcript.sent(&text);
        self.transcript.to_bottom();
        // The text is moved on, not copied again: a paste may be megabytes.
        let message = match std::mem::take(&mut self.shell_context) {
            context if context.is_empty() => text,
            context => format!("{}\n\n{text}", context.join("\n\n")),
        };
        vec![Action::Send(message)]
    }

    /// Completion for another project's files.
    pub fn set_files(&mut self, files: FileIndex) {
        self.files = files;
    }

    /// Empties the view for another conversation.
    pub fn reset_view(&mut self) {
        self.transcript = Transcript::default();
        self.asking.clear();
        // The runs of the session left behind are not this one's.
        self.panes = Panes::default();
        self.read_only_for = None;
        self.new_runs.clear();
        self.session = None;
        self.status.working = None;
        self.status.tokens = Default::default();
        self.status.context_tokens = 0;
        self.status.title.clear();
    }

    pub fn notice(&mut self, text: impl Into<String>) {
        self.transcript.push(CellKind::Notice { text: text.into() });
    }

    /// Opens, updates or closes the popup from the composer's text.
    fn update_popup(&mut self) {
        if let Some(typed) = self.composer.command() {
            self.popup = Some(Popup::Slash(popup::slash_choices(typed)));
            return;
        }
        let (_, word) = self.composer.current_word();
        if let Some(query) = word.strip_prefix('@') {
            self.popup = Some(Popup::Files(self.files.choices(query)));
            return;
        }
        self.popup = None;
    }

    /// Keys while a popup is open; `None` lets the key through to the composer.
    fn popup_key(&mut self, key: KeyEvent) -> Option<Vec<Action>> {
        let popup = self.popup.as_mut()?;
        let choices = match popup {
            Popup::Slash(c) | Popup::Files(c) => c,
        };
        match key.code {
            KeyCode::Up => choices.up(),
            KeyCode::Down => choices.down(),
            KeyCode::Esc => self.popup = None,
            KeyCode::Tab | KeyCode::Enter if !choices.is_empty() => {
                let chosen = choices.chosen().unwrap_or_default().to_owned();
                let is_slash = matches!(popup, Popup::Slash(_));
                self.popup = None;
                if is_slash {
                    if key.code == KeyCode::Enter {
                        self.composer.clear();
                        return Some(self.submit(chosen));
                    }
                    self.composer.set(&format!("{chosen} "));
                } else {
                    self.composer.replace_current_word(&format!("{chosen} "));
                }
            }
            _ => return None,
        }
        Some(Vec::new())
    }

    /// Applies an event of the session.
    pub fn session_event(&mut self, event: &SessionEvent, now: Instant) {
        match event {
            SessionEvent::PhaseChanged { phase } => match phase {
                Phase::Processing => self.working(now, "working"),
                Phase::Compacting => self.working(now, "compacting"),
                Phase::Ready | Phase::Passivating => {
                    self.status.working = None;
                }
                Phase::Recovering => {}
            },
            SessionEvent::Usage { usage, .. } => {
                self.status.tokens.add(usage);
                self.status.set_context(usage);
            }
            SessionEvent::TurnCompleted { .. } | SessionEvent::TurnFailed { .. } => {
                self.status.working = None;
                // A turn that ended cannot wait for answers any more (its runs' may).
                self.asking.retain(|asking| asking.from_run.is_some());
            }
            SessionEvent::ApprovalRequested { .. } | SessionEvent::ApprovalDecided { .. } => {
                self.approval_event(event, None);
            }
            SessionEvent::TitleChanged { title } => self.status.title = title.clone(),
            SessionEvent::ToolResult {
                name,
                content,
                is_error: false,
                ..
            } if name == "spawn_agent" => {
                let run = serde_json::from_str::<serde_json::Value>(content)
                    .ok()
                    .and_then(|value| RunId::parse(value["run_id"].as_str()?));
                if let Some(run) = run
                    && self.panes.started(run.clone(), now)
                {
                    self.new_runs.push(run);
                }
            }
            _ => {}
        }
        self.transcript.apply(event, now);
    }

    /// An approval asked or answered in the session shown, or in one of its runs' (`from`).
    fn approval_event(&mut self, event: &SessionEvent, from: Option<FromRun>) {
        match event {
            SessionEvent::ApprovalRequested {
                call_id,
                tool,
                summary,
                detail,
                always,
            } => self.asking.push_back(Asking {
                call_id: call_id.clone(),
                tool: tool.clone(),
                summary: summary.clone(),
                detail: detail.clone(),
                always: always.clone(),
                reason: None,
                from_run: from,
            }),
            // Answered (here, or by another front end): no longer asked.
            SessionEvent::ApprovalDecided { call_id, .. } => {
                let session = from.map(|from| from.session);
                self.asking.retain(|a| {
                    a.call_id != *call_id
                        || a.from_run.as_ref().map(|f| &f.session) != session.as_ref()
                });
            }
            _ => {}
        }
    }

    fn working(&mut self, now: Instant, what: &'static str) {
        if self.status.working.map(|(_, w)| w) != Some(what) {
            self.status.working = Some((now, what));
        }
    }

    /// Applies the result of background work.
    pub fn app_event(&mut self, event: AppEvent) {
        let now = Instant::now();
        match event {
            AppEvent::RunStatus { run, status } => self.panes.status(&run, &status, now),
            AppEvent::LiveRuns { session, runs } => {
                if self.session.as_ref() == Some(&session) {
                    for run in runs {
                        if self.panes.started(run.clone(), now) {
                            self.new_runs.push(run);
                        }
                    }
                }
            }
            AppEvent::Jobs {
                session, running, ..
            } => {
                if self.session.as_ref() == Some(&session) && running != usize::MAX {
                    self.status.jobs = running;
                }
            }
            AppEvent::RunHistory { run, records } => {
                // A request made before the pane followed the run still waits for an answer.
                if let Some(from) = self.panes.asker(&run)
                    && let Some(asking) = super::approval::still_waiting(&records, from)
                    && !self.asking.iter().any(|a| a.call_id == asking.call_id)
                {
                    self.asking.push_back(asking);
                }
                self.panes.history(&run, &records);
            }
            AppEvent::RunEvent { run, event } => {
                if let Some(from) = self.panes.asker(&run) {
                    self.approval_event(&event, Some(from));
                }
                self.panes.event(&run, &event, now);
            }
            AppEvent::NotSent { text, error } => {
                self.transcript.unsent(&text);
                self.transcript.push(CellKind::Error {
                    category: "not sent".into(),
                    message: format!("{error} (your message is back in the composer)"),
                });
                // As a paste: a long message comes back behind its marker again, and after
                // whatever was typed since.
                self.composer.paste(text);
            }
            AppEvent::ShellDone {
                command,
                output,
                ok,
            } => {
                self.shell_context.push(format!(
                    "[I ran `{command}` in the project; its output follows, for context]\n```\n{}\n```",
                    output.trim_end()
                ));
                self.transcript.push(CellKind::Shell {
                    command,
                    output,
                    ok,
                });
            }
            AppEvent::Compacted(Ok(false)) => {
                self.notice("nothing to compact: the conversation is already short")
            }
            AppEvent::Compacted(Ok(true)) => {}
            AppEvent::Compacted(Err(err)) => self.notice(format!("compaction failed: {err}")),
            AppEvent::Renewed { old, new } => {
                self.transcript = Transcript::default();
                self.panes = Panes::default();
                let note = match old {
                    Some(old) => format!(
                        "new session {}; session {} is archived (tern sessions list --archived)",
                        new.short(),
                        old.short()
                    ),
                    None => format!("new session {}", new.short()),
                };
                self.notice(note);
                self.session = Some(new);
                self.status.tokens = Default::default();
                self.status.context_tokens = 0;
                self.status.title.clear();
            }
            AppEvent::Branch(branch) => self.status.branch = branch,
            AppEvent::Channels(channels) => self.status.channels = channels,
            AppEvent::Exported(Ok(path)) => {
                self.notice(format!("transcript written to {}", path.display()))
            }
            AppEvent::Exported(Err(err)) => self.notice(format!("export failed: {err}")),
            AppEvent::ExportExists(path) => self.overwrite = Some(Overwrite { path }),
            AppEvent::Notice(text) => self.notice(text),
            AppEvent::Model {
                model,
                context_window,
                window_source,
            } => {
                self.status.model = model;
                self.status.context_window = context_window;
                self.status.window_source = window_source;
            }
            AppEvent::Switched(shown) => {
                self.notice(format!(
                    "this session talks to {} ({}) from its next turn on",
                    shown.model, shown.provider
                ));
                self.status.model = shown.model;
                self.status.provider = shown.provider;
                self.status.context_window = shown.context_window;
                self.status.window_source = shown.window_source;
            }
        }
    }

    /// Per-frame upkeep: streamed text committed, old flashes cleared. Returns whether the
    /// screen needs frames to keep coming (something moves by itself).
    pub fn tick(&mut self, now: Instant) -> bool {
        self.transcript.commit_pending();
        let panes_moving = self.panes.tick(now);
        if self
            .status
            .flash
            .as_ref()
            .is_some_and(|(_, at)| now.saturating_duration_since(*at) > FLASH)
        {
            self.status.flash = None;
        }
        self.status.scrolled = !self.transcript.at_bottom();
        self.busy()
            || panes_moving
            || self.status.flash.is_some()
            || self.transcript.cells.last().is_some_and(|c| c.is_live())
            || self.transcript.has_pending()
    }

    /// Whether a turn (or a compaction) is running.
    pub fn busy(&self) -> bool {
        self.status.working.is_some()
    }

    /// The open popup's title and choices, for drawing.
    pub fn popup(&self) -> Option<(&'static str, &Choices)> {
        match &self.popup {
            Some(Popup::Slash(c)) => Some(("commands", c)),
            Some(Popup::Files(c)) => Some(("files", c)),
            None => None,
        }
    }

    /// What the empty composer says.
    pub fn hint(&self) -> &'static str {
        if !self.asking.is_empty() {
            "answer above: y yes · a always · n no · esc no"
        } else if self.overwrite.is_some() {
            "answer above: y overwrites the file · n keeps it"
        } else if self.busy() {
            "write to add to this turn · esc interrupts"
        } else {
            "message tern · / commands · @ files · ! shell · ctrl+c ctrl+c quits"
        }
    }
}
