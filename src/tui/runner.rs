//! The terminal UI's loop: the one task that owns the [`App`] and the terminal. Terminal
//! input, session events and the results of background work arrive here and change the app;
//! frames are drawn when asked for, coalesced and capped at 60 a second
//! ([`FrameScheduler`]). Slow work (sending a message, which waits for the journal; a `!`
//! command; a compaction; reading git) runs in tasks that report back through a channel, so
//! the screen never waits on it.

use super::app::{Action, App, AppEvent};
use super::picker::{Picker, PickerOutcome};
use super::popup::FileIndex;
use super::schedule::FrameScheduler;
use super::terminal::TerminalGuard;
use super::transcript::{Transcript, cells_from_history, last_usage};
use super::view;
use crate::domain::{SessionId, SessionKey};
use crate::gateway::{SendUserMessage, SessionManager};
use crate::session::{
    OutputFilter, Redactor, SessionError, SessionEvent, SessionHandle, Subscription, UserInput,
};
use crate::store::Store;
use crate::tools::{ChildEnv, ToolContext, ToolRegistry};
use crossterm::event::{Event, EventStream, KeyEventKind};
use futures_util::StreamExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Notify, mpsc, oneshot};
use tokio::time::{Instant, sleep_until};
use tokio_util::sync::CancellationToken;

/// How often moving parts (spinners, clocks) are redrawn when nothing else happens.
const ANIMATION: Duration = Duration::from_millis(80);
/// Longest a `!` command may run without output.
const SHELL_TIMEOUT: Duration = Duration::from_secs(120);
/// Cells around the view whose rendered lines stay cached.
const KEEP_RENDERED: usize = 400;

/// What the terminal UI works with.
pub struct Launch {
    pub manager: Arc<SessionManager>,
    pub store: Arc<Store>,
    /// The conversation's key, and whether a stored session already answers to it.
    pub key: SessionKey,
    pub resumed: Option<SessionId>,
    pub project_dir: PathBuf,
    /// A first message to send at once (`tern "…"`).
    pub prompt: Option<String>,
    /// Open the session picker first (`tern -r` without an id).
    pub pick: bool,
    /// Tells the UI to stop (a signal, a changed config); the reason is shown.
    pub stop: oneshot::Receiver<Stopping>,
    /// The sessions' tools, for `!` commands: the same limits as the model's commands.
    pub tools: ToolRegistry,
    /// The environment rules of the sessions' commands, for `!` commands.
    pub child_env: Arc<ChildEnv>,
    /// The credentials the sessions know, kept out of what a `!` command shows and sends.
    pub redactor: Arc<Redactor>,
    /// News from the rest of tern while the interface runs (a config file that cannot be
    /// used, what the server said about its model). Nothing else may reach the person while
    /// the interface owns the terminal, so everything goes through here.
    pub outside: mpsc::UnboundedReceiver<AppEvent>,
}

/// Why the UI is asked to stop from outside.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stopping {
    /// What the person is told.
    pub notice: String,
    /// Whether tern starts again on the same session afterwards.
    pub restart: bool,
}

/// How the UI ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exit {
    /// The person left.
    Quit { session: Option<SessionId> },
    /// Drained for a stop; `restart` says whether to start again on `session`.
    Drained {
        session: Option<SessionId>,
        restart: bool,
    },
    /// Start again on `session` with another model.
    SwitchModel {
        session: Option<SessionId>,
        model: String,
    },
}

/// The loop's moving parts besides the app.
struct Runner {
    launch_key: SessionKey,
    manager: Arc<SessionManager>,
    store: Arc<Store>,
    project_dir: PathBuf,
    events: Option<Subscription>,
    tx: mpsc::UnboundedSender<AppEvent>,
    frames: FrameScheduler,
    tools: ToolRegistry,
    child_env: Arc<ChildEnv>,
    redactor: Arc<Redactor>,
    /// The session picker, while it is open (full screen), and whether leaving it without a
    /// choice leaves tern (it was what tern opened with).
    picker: Option<(Picker, bool)>,
    /// Rung by the picker's threads when they have results.
    picker_woke: Arc<Notify>,
    /// `TERN_FRAME_LOG`: a file that gets one line per frame drawn (the wall-clock time in
    /// microseconds since the Unix epoch and the microseconds the frame took), for measuring
    /// start-up and frame rates from outside.
    frame_log: Option<std::fs::File>,
}

/// Runs the UI until the person leaves or something stops it.
pub async fn run(mut app: App, launch: Launch) -> std::io::Result<Exit> {
    let mut terminal = TerminalGuard::enter()?;
    let (tx, mut results) = mpsc::unbounded_channel();
    let mut runner = Runner {
        launch_key: launch.key,
        manager: launch.manager,
        store: launch.store,
        project_dir: launch.project_dir,
        events: None,
        tx,
        frames: FrameScheduler::default(),
        tools: launch.tools,
        child_env: launch.child_env,
        redactor: launch.redactor,
        picker: None,
        picker_woke: Arc::new(Notify::new()),
        frame_log: std::env::var_os("TERN_FRAME_LOG").and_then(|path| {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .ok()
        }),
    };
    if let Some(id) = launch.resumed {
        // A long session takes a moment to read: the screen comes first.
        app.status.flash = Some((format!("opening session {}…", id.short()), Instant::now()));
        runner.draw(&mut app, &mut terminal, Instant::now())?;
        runner.open(&mut app, id).await;
        app.status.flash = None;
    }
    runner.read_branch();
    if launch.pick {
        runner.open_picker(true);
    }
    let now = Instant::now();
    runner.frames.request(now);
    if let Some(prompt) = launch.prompt {
        let actions = app.submit_text(prompt);
        if let Some(exit) = runner.perform(&mut app, actions).await {
            return Ok(exit);
        }
    }
    let mut input = EventStream::new();
    let mut stop = Some(launch.stop);
    let mut outside = launch.outside;
    loop {
        let due = runner.frames.due();
        tokio::select! {
            event = input.next() => match event {
                Some(Ok(event)) => {
                    let now = Instant::now();
                    if runner.picker.is_some() {
                        runner.frames.request(now);
                        if let Some(exit) = runner.picker_input(&mut app, event).await {
                            return Ok(exit);
                        }
                        continue;
                    }
                    let actions = match event {
                        Event::Key(key) if key.kind != KeyEventKind::Release => app.key(key, now),
                        Event::Paste(text) => {
                            app.paste(&text);
                            Vec::new()
                        }
                        Event::Mouse(mouse) => {
                            app.mouse(mouse);
                            Vec::new()
                        }
                        _ => Vec::new(),
                    };
                    runner.frames.request(now);
                    if let Some(exit) = runner.perform(&mut app, actions).await {
                        return Ok(exit);
                    }
                }
                // The terminal went away: nothing more can be read or shown.
                Some(Err(_)) | None => {
                    runner.manager.close_all().await;
                    return Ok(Exit::Quit { session: app.session.clone() });
                }
            },
            event = next_event(&mut runner.events) => match event {
                Some(event) => {
                    let now = Instant::now();
                    if matches!(event, SessionEvent::TurnCompleted { .. } | SessionEvent::TurnFailed { .. }) {
                        runner.read_branch();
                    }
                    app.session_event(&event, now);
                    runner.frames.request(now);
                }
                // The session went to rest; the next message wakes it.
                None => runner.events = None,
            },
            Some(news) = outside.recv() => {
                app.app_event(news);
                runner.frames.request(Instant::now());
            }
            Some(result) = results.recv() => {
                if let AppEvent::Renewed { .. } = &result {
                    runner.subscribe(&mut app).await;
                }
                app.app_event(result);
                runner.frames.request(Instant::now());
            }
            _ = runner.picker_woke.notified(), if runner.picker.is_some() => {
                if let Some((picker, _)) = runner.picker.as_mut()
                    && picker.poll()
                {
                    runner.frames.request(Instant::now());
                }
            }
            stopping = next_stop(&mut stop) => {
                let Some(stopping) = stopping else {
                    continue;
                };
                app.notice(stopping.notice.clone());
                let session = app.session.clone();
                runner.drain(&mut app, &mut terminal).await;
                return Ok(Exit::Drained { session, restart: stopping.restart });
            }
            _ = sleep_until(due.unwrap_or_else(Instant::now)), if due.is_some() => {
                let now = Instant::now();
                runner.draw(&mut app, &mut terminal, now)?;
            }
        }
    }
}

impl Runner {
    /// Shows a stored session: its transcript from the journal, its totals, and its events
    /// from now on.
    async fn open(&mut self, app: &mut App, id: SessionId) {
        warm_up_highlighting(&self.project_dir);
        match self.store.load(&id) {
            Ok(records) => {
                // The history goes above whatever was said before it was read (notices).
                let mut cells = cells_from_history(&records);
                cells.append(&mut app.transcript.cells);
                app.transcript = Transcript::with_cells(cells);
                // How full the window was when the session was left, not 0% until the
                // next call.
                if let Some(usage) = last_usage(&records) {
                    app.status.set_context(&usage);
                }
            }
            Err(err) => app.notice(format!("could not read the session's journal: {err}")),
        }
        // The journal as read is dropped; its cells stay.
        super::release_freed_memory();
        let meta = match self.store.meta(&id) {
            Ok(Some(meta)) => meta,
            Ok(None) => return app.notice(format!("session {} is gone", id.short())),
            Err(err) => return app.notice(format!("could not read session {}: {err}", id.short())),
        };
        app.status.tokens = meta.tokens;
        app.status.title = meta.title.clone();
        let attached = self.manager.attach(&meta).await;
        self.follow(app, attached).await;
    }

    /// Opens the session picker; `first` when it is what tern opened with.
    fn open_picker(&mut self, first: bool) {
        let mut picker = Picker::open(
            self.store.clone(),
            self.project_dir.clone(),
            jiff::Timestamp::now(),
        );
        let woke = self.picker_woke.clone();
        picker.set_waker(Arc::new(move || woke.notify_one()));
        picker.poll();
        self.picker = Some((picker, first));
    }

    /// Input while the picker is open; `Some` when it ends the UI.
    async fn picker_input(&mut self, app: &mut App, event: Event) -> Option<Exit> {
        let (picker, first) = self.picker.as_mut()?;
        let outcome = match event {
            Event::Key(key) if key.kind != KeyEventKind::Release => picker.handle_key(key),
            Event::Paste(text) => {
                picker.paste(&text);
                PickerOutcome::Continue
            }
            _ => PickerOutcome::Continue,
        };
        let first = *first;
        match outcome {
            PickerOutcome::Continue => None,
            PickerOutcome::Cancel if first && app.session.is_none() => {
                self.picker = None;
                self.manager.close_all().await;
                Some(Exit::Quit { session: None })
            }
            PickerOutcome::Cancel => {
                self.picker = None;
                None
            }
            PickerOutcome::New => {
                self.picker = None;
                if app.session.is_some() {
                    self.switch(
                        app,
                        SessionKey::cli(&SessionId::generate()),
                        None,
                        self.project_dir.clone(),
                    )
                    .await;
                    app.notice("a new conversation");
                }
                None
            }
            PickerOutcome::Resume(id) => {
                self.picker = None;
                match self.store.meta(&id) {
                    Ok(Some(meta)) => {
                        self.switch(app, meta.key.clone(), Some(id), meta.project_dir.clone())
                            .await;
                    }
                    Ok(None) => app.notice(format!("session {} is gone", id.short())),
                    Err(err) => app.notice(format!("could not open session {}: {err}", id.short())),
                }
                None
            }
        }
    }

    /// Moves the interface to another conversation: its key, its project and its
    /// transcript (empty for a new one).
    async fn switch(
        &mut self,
        app: &mut App,
        key: SessionKey,
        session: Option<SessionId>,
        project_dir: PathBuf,
    ) {
        self.events = None;
        if project_dir != self.project_dir {
            app.set_files(FileIndex::spawn(project_dir.clone()));
        }
        self.launch_key = key;
        self.project_dir = project_dir;
        app.reset_view();
        if let Some(id) = session {
            self.open(app, id).await;
        }
        self.read_branch();
    }

    /// Attaches to the session the key talks to (starting it when needed).
    async fn subscribe(&mut self, app: &mut App) {
        let opened = self
            .manager
            .handle(&self.launch_key, &self.project_dir)
            .await;
        self.follow(app, opened).await;
    }

    /// Follows the events of a session just opened.
    async fn follow(&mut self, app: &mut App, opened: Result<SessionHandle, SessionError>) {
        match opened {
            Ok(handle) => {
                app.session = Some(handle.id().clone());
                match handle.subscribe(OutputFilter::ALL).await {
                    Ok(events) => self.events = Some(events),
                    Err(err) => app.notice(format!("could not follow the session: {err}")),
                }
            }
            Err(err) => app.notice(format!("could not open the session: {err}")),
        }
    }

    fn draw(
        &mut self,
        app: &mut App,
        terminal: &mut TerminalGuard,
        now: Instant,
    ) -> std::io::Result<()> {
        let moving = app.tick(now);
        match &mut self.picker {
            Some((picker, _)) => terminal.screen.draw(|frame| {
                let area = frame.area();
                picker.render(frame, area, &app.theme);
            })?,
            None => terminal.screen.draw(|frame| view::draw(frame, app, now))?,
        };
        self.frames.drawn(now);
        if let Some(log) = &mut self.frame_log {
            use std::io::Write;
            let took = now.elapsed().as_micros();
            let at = jiff::Timestamp::now().as_microsecond();
            let _ = writeln!(log, "{at} {took}");
        }
        if moving {
            let next = if app.transcript.has_pending() {
                now
            } else {
                now + ANIMATION
            };
            self.frames.request_at(next);
        }
        app.transcript.forget_far(KEEP_RENDERED);
        Ok(())
    }

    /// Carries out the app's actions; returns how the UI ends, when one ends it.
    async fn perform(&mut self, app: &mut App, actions: Vec<Action>) -> Option<Exit> {
        for action in actions {
            match action {
                Action::Send(text) => self.send(app, text).await,
                Action::Cancel => {
                    if let Ok(handle) = self
                        .manager
                        .handle(&self.launch_key, &self.project_dir)
                        .await
                    {
                        let _ = handle.cancel().await;
                    }
                }
                Action::Shell(command) => self.shell(command),
                Action::Compact => self.compact(app).await,
                Action::Reset => {
                    let old = app.session.clone();
                    match self
                        .manager
                        .reset(self.launch_key.as_str(), self.project_dir.clone())
                        .await
                    {
                        Ok(new) => {
                            let _ = self.tx.send(AppEvent::Renewed { old, new });
                        }
                        Err(err) => app.notice(format!("could not start a new session: {err}")),
                    }
                }
                Action::Pick => self.open_picker(false),
                Action::SwitchModel(model) => {
                    let session = app.session.clone();
                    return Some(Exit::SwitchModel { session, model });
                }
                Action::Export(path) => {
                    let path = if path.is_absolute() {
                        path
                    } else {
                        self.project_dir.join(path)
                    };
                    let text = app.transcript.to_markdown();
                    let written = std::fs::write(&path, text)
                        .map(|()| path.clone())
                        .map_err(|err| format!("{}: {err}", path.display()));
                    let _ = self.tx.send(AppEvent::Exported(written));
                }
                Action::Answer { call_id, answer } => {
                    if let Ok(handle) = self
                        .manager
                        .handle(&self.launch_key, &self.project_dir)
                        .await
                        && let Err(err) = handle.answer(&call_id, answer).await
                    {
                        app.notice(format!("the answer did not reach the session: {err}"));
                    }
                }
                Action::Quit => {
                    if app.busy()
                        && let Ok(handle) = self
                            .manager
                            .handle(&self.launch_key, &self.project_dir)
                            .await
                    {
                        let _ = handle.cancel().await;
                    }
                    self.manager.close_all().await;
                    return Some(Exit::Quit {
                        session: app.session.clone(),
                    });
                }
            }
        }
        None
    }

    /// Sends a message: subscribed first (so none of its turn is missed), then delivered by
    /// a task, since an input sent during a turn is acknowledged only when it goes in.
    async fn send(&mut self, app: &mut App, text: String) {
        warm_up_highlighting(&self.project_dir);
        if self.events.is_none() {
            self.subscribe(app).await;
        }
        let manager = self.manager.clone();
        let tx = self.tx.clone();
        let message = SendUserMessage {
            key: self.launch_key.as_str().to_owned(),
            input: UserInput::local(text.clone()),
            project_dir: self.project_dir.clone(),
        };
        tokio::spawn(async move {
            match manager.send(message).await {
                Ok(delivered) => {
                    if let Some((old, _)) = delivered.reset {
                        let _ = tx.send(AppEvent::Renewed {
                            old: Some(old),
                            new: delivered.session,
                        });
                    }
                }
                Err(err) => {
                    let _ = tx.send(AppEvent::NotSent {
                        text,
                        error: err.to_string(),
                    });
                }
            }
        });
    }

    /// Runs a `!` command through the same tool the model uses (own process group, no
    /// secrets in its environment, output capped), in a task.
    fn shell(&self, command: String) {
        let Some(tool) = self.tools.get_shared("shell_execute").cloned() else {
            return;
        };
        let ctx = ToolContext {
            project_dir: self.project_dir.clone(),
            cwd: self.project_dir.clone(),
            temp_dir: std::env::temp_dir(),
            readable_dirs: Vec::new(),
            tool_timeout: SHELL_TIMEOUT,
            child_env: self.child_env.clone(),
            spool: None,
        };
        let tx = self.tx.clone();
        let redactor = self.redactor.clone();
        tokio::spawn(async move {
            let input = serde_json::json!({ "command": command });
            let output = tool.execute(input, &ctx, CancellationToken::new()).await;
            let _ = tx.send(AppEvent::ShellDone {
                command,
                output: redactor.credentials(&output.content),
                ok: !output.is_error,
            });
        });
    }

    async fn compact(&mut self, app: &mut App) {
        if self.events.is_none() {
            self.subscribe(app).await;
        }
        let Ok(handle) = self
            .manager
            .handle(&self.launch_key, &self.project_dir)
            .await
        else {
            return;
        };
        let tx = self.tx.clone();
        tokio::spawn(async move {
            let done = handle.compact().await.map_err(|err| err.to_string());
            let _ = tx.send(AppEvent::Compacted(done));
        });
    }

    /// Reads the git branch in a task.
    fn read_branch(&self) {
        let dir = self.project_dir.clone();
        let tx = self.tx.clone();
        tokio::spawn(async move {
            let git = crate::context::git::working_git(&dir, Duration::from_secs(2)).await;
            let branch = match git {
                crate::context::git::GitContext::Repo(snapshot) => Some(match snapshot.branch {
                    crate::context::git::Branch::Named(name) => name,
                    crate::context::git::Branch::Detached => "(detached)".to_owned(),
                }),
                crate::context::git::GitContext::Unavailable { .. } => None,
            };
            let _ = tx.send(AppEvent::Branch(branch));
        });
    }

    /// Drains every session, still drawing the running turn's end as it comes.
    async fn drain(&mut self, app: &mut App, terminal: &mut TerminalGuard) {
        let manager = self.manager.clone();
        let drain = manager.drain(crate::gateway::DRAIN_BOUND);
        tokio::pin!(drain);
        let mut open = self.events.is_some();
        loop {
            let now = Instant::now();
            if self.frames.is_due(now) {
                let _ = self.draw(app, terminal, now);
            }
            tokio::select! {
                biased;
                event = next_event(&mut self.events), if open => match event {
                    Some(event) => {
                        app.session_event(&event, Instant::now());
                        self.frames.request(Instant::now());
                    }
                    None => open = false,
                },
                done = &mut drain => {
                    if let Err(err) = done {
                        tracing::warn!(%err, "the drain did not finish cleanly");
                    }
                    let _ = self.draw(app, terminal, Instant::now());
                    return;
                }
            }
        }
    }
}

/// Loads the code highlighter on a thread of its own, once: with the first message rather
/// than at start, so an idle tern stays small, and before the reply's first code block needs
/// it. Only the project's own language is compiled ahead (each takes several MiB); others
/// are compiled when a reply first shows them.
fn warm_up_highlighting(project_dir: &std::path::Path) {
    static ONCE: std::sync::Once = std::sync::Once::new();
    let lang = super::highlight::likely_language(project_dir);
    ONCE.call_once(|| {
        let _ = std::thread::Builder::new()
            .name("tern-highlight".into())
            .spawn(move || super::highlight::warm_up_languages(lang.as_slice()));
    });
}

/// The next event of the session, or pending forever when there is no subscription.
async fn next_event(events: &mut Option<Subscription>) -> Option<SessionEvent> {
    match events {
        Some(events) => events.recv().await,
        None => std::future::pending().await,
    }
}

/// The stop request, once; pending forever after it came or its sender went away.
async fn next_stop(stop: &mut Option<oneshot::Receiver<Stopping>>) -> Option<Stopping> {
    let Some(receiver) = stop.as_mut() else {
        return std::future::pending().await;
    };
    let stopping = receiver.await.ok();
    *stop = None;
    stopping
}
