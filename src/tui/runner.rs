//! The terminal UI's loop: the one task that owns the [`App`] and the terminal. Terminal
//! input, session events and the results of background work arrive here and change the app;
//! frames are drawn when asked for, coalesced and capped at 60 a second
//! ([`FrameScheduler`]). Slow work (sending a message, which waits for the journal; a `!`
//! command; a compaction; reading git) runs in tasks that report back through a channel, so
//! the screen never waits on it.

use super::app::{Action, App, AppEvent};
use super::jobs::JobPolls;
use super::link::{Fed, Link, Linked};
use super::picker::{Picker, PickerOutcome};
use super::schedule::FrameScheduler;
use super::terminal::TerminalGuard;
use super::transcript::{Transcript, cells_from_history, last_usage};
use super::view;
use crate::domain::{SessionId, SessionKey};
use crate::gateway::{Feed, FeedItem, SessionService};
use crate::session::SessionEvent;
use crossterm::event::{Event, KeyCode, KeyEventKind, KeyModifiers};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Notify, mpsc, oneshot};
use tokio::time::{Instant, sleep_until};

/// How long Ctrl-Z waits to learn whether this process may stop.
const SUSPEND_CHECK_WITHIN: Duration = Duration::from_millis(300);

/// How often moving parts (spinners, clocks) are redrawn when nothing else happens.
const ANIMATION: Duration = Duration::from_millis(80);
/// Laid-out lines kept ready to draw for cells off screen, the nearest first (a line costs
/// about a kilobyte).
const KEEP_RENDERED: usize = 3_000;
/// Laid-out lines kept packed beyond those (about a third of the cost); a cell further still
/// is laid out again when it is back in view.
const KEEP_PACKED: usize = 20_000;
/// How long after a turn's end freed memory is handed back a second time.
const RELEASE_AGAIN_AFTER: Duration = Duration::from_secs(1);
/// Laid-out lines let go at once that are worth handing the freed memory back for.
const RELEASE_AFTER_LINES: usize = 1_000;

/// What the terminal UI works with.
pub struct Launch {
    /// The one door to the sessions.
    pub service: SessionService,
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
}

/// The loop's moving parts besides the app.
struct Runner {
    link: Link,
    frames: FrameScheduler,
    /// The session picker, while it is open (full screen), and whether leaving it without a
    /// choice leaves tern (it was what tern opened with).
    picker: Option<(Picker, bool)>,
    /// Rung by the picker's threads when they have results.
    picker_woke: Arc<Notify>,
    /// `TERN_FRAME_LOG`: a file that gets one line per frame drawn (the wall-clock time in
    /// microseconds since the Unix epoch and the microseconds the frame took, then `answer`
    /// for the frame showing the first word of an answer) and one per message sent (the time,
    /// then `input`), for measuring start-up, frame rates and latency from outside.
    frame_log: Option<std::fs::File>,
    /// Keeps the status line's count of background jobs current.
    job_polls: JobPolls,
    /// A turn of the session shown began and nothing of its answer is on screen yet.
    awaiting_answer: bool,
    /// A turn ended: what it allocated is let go once the next frame is drawn.
    release_after_frame: bool,
}

/// Runs the UI until the person leaves or something stops it.
pub async fn run(mut app: App, launch: Launch) -> std::io::Result<Exit> {
    let mut terminal = TerminalGuard::enter()?;
    let (tx, mut results) = mpsc::unbounded_channel();
    let (link, mut linked) = Link::new(launch.service, launch.key, launch.project_dir, tx);
    let mut runner = Runner {
        link,
        frames: FrameScheduler::default(),
        picker: None,
        picker_woke: Arc::new(Notify::new()),
        job_polls: JobPolls::default(),
        awaiting_answer: false,
        release_after_frame: false,
        frame_log: std::env::var_os("TERN_FRAME_LOG").and_then(|path| {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .ok()
        }),
    };
    app.set_files(runner.link.files());
    if let Some(id) = launch.resumed {
        // A long session takes a moment to read: the screen comes first, the transcript
        // when it has been read.
        app.status.flash = Some((format!("opening session {}…", id.short()), Instant::now()));
        super::highlight::prepare_for_reply(&runner.link.project_dir);
        runner.link.open(id);
    }
    runner.link.read_branch();
    runner.link.watch_channels();
    super::mcp::tell_unapproved(
        runner.link.service.clone(),
        runner.link.project_dir.clone(),
        runner.link.tx.clone(),
    );
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
    let mut input = super::input::Input::take();
    let mut stop = Some(launch.stop);
    let mut outside = launch.outside;
    loop {
        let due = runner.frames.due();
        // In order: a stop (it comes once), the person's keys, the session they talk to, the
        // frame due; then the rest (runs' panes, tasks reporting back), so a flood of run
        // events never holds back what the person is waiting for.
        tokio::select! {
            biased;
            stopping = next_stop(&mut stop) => {
                let Some(stopping) = stopping else {
                    continue;
                };
                app.notice(stopping.notice.clone());
                let session = app.session.clone();
                runner.drain(&mut app, &mut terminal).await;
                return Ok(Exit::Drained { session, restart: stopping.restart });
            }
            event = input.next() => {
                // Every event read by then goes in before the next frame: a burst of keys
                // is one frame's work, however long, never a frame per key.
                let mut left = input.waiting();
                let mut event = event;
                loop {
                    let Some(Ok(read)) = event else {
                        // The terminal went away: nothing more can be read or shown.
                        runner.link.service.close_all().await;
                        return Ok(Exit::Quit { session: app.session.clone() });
                    };
                    if let Some(exit) = runner.input(&mut app, &mut terminal, read).await? {
                        return Ok(exit);
                    }
                    if left == 0 {
                        break;
                    }
                    left -= 1;
                    event = input.ready();
                }
            }
            item = next_item(&mut runner.link.feed) => {
                let fed = runner.link.fed(item);
                runner.fed(&mut app, fed);
            }
            _ = sleep_until(due.unwrap_or_else(Instant::now)), if due.is_some() => {
                let now = Instant::now();
                runner.draw(&mut app, &mut terminal, now)?;
            }
            Some(news) = linked.recv() => runner.linked(&mut app, news),
            Some(news) = outside.recv() => {
                app.app_event(news);
                runner.frames.request(Instant::now());
            }
            Some(result) = results.recv() => {
                if let AppEvent::Jobs { session, chain, running } = &result
                    && !runner.job_polls.answered(
                        &runner.link.service,
                        session,
                        (*chain, *running),
                        &runner.link.tx,
                    )
                {
                    continue;
                }
                if let AppEvent::Renewed { new, .. } = &result {
                    runner.link.session = Some(new.clone());
                    runner.link.feed = None;
                    runner.link.follow();
                }
                // A run's streamed words show when its pane is laid out next; until then
                // they need no frame.
                let now = Instant::now();
                let at = match &result {
                    AppEvent::RunEvent {
                        run,
                        event: SessionEvent::TextDelta { .. } | SessionEvent::ThinkingDelta { .. },
                    } => app.panes.shows_news_at(run, now),
                    _ => now,
                };
                app.app_event(result);
                runner.follow_new_runs(&mut app);
                runner.frames.request_at(at);
            }
            _ = runner.picker_woke.notified(), if runner.picker.is_some() => {
                if let Some((picker, _)) = runner.picker.as_mut()
                    && picker.poll()
                {
                    runner.frames.request(Instant::now());
                }
            }
        }
    }
}

impl Runner {
    /// Follows each run the app has a new pane for.
    fn follow_new_runs(&self, app: &mut App) {
        if let Some(parent) = app.session.clone() {
            for run in app.take_new_runs() {
                let tx = self.link.tx.clone();
                super::runs::watch(self.link.service.clone(), parent.clone(), run, tx);
            }
        }
    }

    /// Opens the session picker; `first` when it is what tern opened with.
    fn open_picker(&mut self, first: bool) {
        let mut picker = Picker::open(
            self.link.service.catalog(),
            self.link.project_dir.clone(),
            jiff::Timestamp::now(),
        );
        let woke = self.picker_woke.clone();
        picker.set_waker(Arc::new(move || woke.notify_one()));
        picker.poll();
        self.picker = Some((picker, first));
    }

    /// Why Ctrl-Z must not stop this process now, if it must not: a stopped process answers
    /// no one, so not in the tern that owns the store while a turn streams, other terminals
    /// work through it, or chat channels run in it. A client stops only its own screen. The
    /// questions are bounded: an owner changing hands does not hold the interface up.
    async fn why_not_suspend(&self, app: &App) -> Option<String> {
        let service = &self.link.service;
        let asked = async {
            if !service.owns_store().await {
                return None;
            }
            if app.busy() {
                return Some(
                    "Not suspended: a turn is running, and stopping tern would stop it \
                     mid-reply. Press Esc to interrupt it first, or wait for it to end."
                        .to_owned(),
                );
            }
            if !service.alone().await {
                return Some(
                    "Not suspended: other terminals reach their sessions through this tern, \
                     and stopping it would stop them. Quit this tern instead (one of them \
                     takes over), or quit them first."
                        .to_owned(),
                );
            }
            let channels = service.channels().await.unwrap_or_default();
            if channels.is_empty() {
                return None;
            }
            let names: Vec<&str> = channels.iter().map(|c| c.name.as_str()).collect();
            Some(format!(
                "Not suspended: the chat channels run in this tern ({}), and stopping it \
                 would leave them unanswered. Quit it instead, or run them in `tern serve`.",
                names.join(", ")
            ))
        };
        match tokio::time::timeout(SUSPEND_CHECK_WITHIN, asked).await {
            Ok(why) => why,
            Err(_) => Some(
                "Not suspended: this tern is taking over or handing over the sessions; press \
                 Ctrl-Z again in a moment."
                    .to_owned(),
            ),
        }
    }

    /// An event of the terminal; `Some` when it ends the UI.
    async fn input(
        &mut self,
        app: &mut App,
        terminal: &mut TerminalGuard,
        event: Event,
    ) -> std::io::Result<Option<Exit>> {
        let now = Instant::now();
        self.frames.request(now);
        if let Event::Key(key) = &event
            && key.kind != KeyEventKind::Release
            && key.code == KeyCode::Char('z')
            && key.modifiers == KeyModifiers::CONTROL
        {
            // Whatever is on screen, the picker or a question included: the terminal's
            // own meaning of Ctrl-Z, which raw mode leaves to tern; unless stopping the
            // process would stop what others wait on.
            match self.why_not_suspend(app).await {
                Some(why) => app.notice(why),
                None => terminal.suspend()?,
            }
            return Ok(None);
        }
        if self.picker.is_some() {
            return Ok(self.picker_input(app, event).await);
        }
        let actions = match event {
            Event::Key(key) if key.kind != KeyEventKind::Release => app.key(key, now),
            Event::Paste(text) => {
                app.paste(text);
                Vec::new()
            }
            Event::Mouse(mouse) => {
                app.mouse(mouse);
                Vec::new()
            }
            _ => Vec::new(),
        };
        Ok(self.perform(app, actions).await)
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
                self.link.service.close_all().await;
                Some(Exit::Quit { session: None })
            }
            PickerOutcome::Cancel => {
                self.picker = None;
                None
            }
            PickerOutcome::New => {
                self.picker = None;
                if app.session.is_some() {
                    let dir = self.link.project_dir.clone();
                    self.switch(app, SessionKey::cli(&SessionId::generate()), dir);
                    app.notice("a new conversation");
                }
                None
            }
            PickerOutcome::Resume(id) => {
                self.picker = None;
                // The key and project come with the session's meta, once it is open.
                app.reset_view();
                app.status.flash =
                    Some((format!("opening session {}…", id.short()), Instant::now()));
                super::highlight::prepare_for_reply(&self.link.project_dir);
                self.link.open(id);
                None
            }
        }
    }

    /// Moves the interface to another conversation: its key, its project and an empty
    /// transcript.
    fn switch(&mut self, app: &mut App, key: SessionKey, project_dir: PathBuf) {
        let moved = project_dir != self.link.project_dir;
        self.link.switch(key, project_dir);
        if moved {
            app.set_files(self.link.files());
        }
        app.reset_view();
        self.link.read_branch();
    }

    /// A task's news about the link: an opened session's meta, a feed, or why not.
    fn linked(&mut self, app: &mut App, news: Linked) {
        match self.link.linked(news) {
            Ok(Some(meta)) => {
                app.read_only_for = meta.parent.as_ref().map(|parent| parent.session.clone());
                if meta.project_dir != self.link.project_dir {
                    self.link.project_dir = meta.project_dir.clone();
                    app.set_files(self.link.files());
                }
                self.link.key = meta.key.clone();
                app.status.tokens = meta.tokens;
                app.status.title = meta.title.clone();
                self.link.read_branch();
            }
            Ok(None) => {}
            Err(err) => {
                app.status.flash = None;
                app.notice(err);
            }
        }
        app.session = self.link.session.clone();
        self.frames.request(Instant::now());
    }

    /// What the feed brought, into the app.
    fn fed(&mut self, app: &mut App, fed: Fed) {
        let now = Instant::now();
        match fed {
            Fed::History(records) => {
                // The history goes above whatever was said before it was read (notices).
                let mut cells = cells_from_history(&records);
                cells.append(&mut app.transcript.cells);
                app.transcript = Transcript::with_cells(cells);
                // How full the window was when the session was left, not 0% until the
                // next call.
                if let Some(usage) = last_usage(&records) {
                    app.status.set_context(&usage);
                }
                app.status.flash = None;
                drop(records);
                // Jobs and runs another terminal's turns started may run in it.
                app.status.jobs = 0;
                if let Some(session) = app.session.clone() {
                    self.job_polls
                        .renew(&self.link.service, session.clone(), &self.link.tx);
                    super::runs::find_live(
                        self.link.service.clone(),
                        session,
                        self.link.tx.clone(),
                    );
                }
                // The journal as read is dropped; its cells stay.
                super::release_freed_memory();
            }
            Fed::Missed(records) => {
                let mut cells = std::mem::take(&mut app.transcript.cells);
                cells.extend(cells_from_history(&records));
                app.transcript = Transcript::with_cells(cells);
            }
            Fed::Event(event) => {
                let ended = matches!(
                    event,
                    SessionEvent::TurnCompleted { .. } | SessionEvent::TurnFailed { .. }
                );
                if ended {
                    self.link.read_branch();
                    // What the turn allocated goes back once the next frame has laid its
                    // answer out for good.
                    self.release_after_frame = true;
                }
                app.session_event(&event, now);
                self.follow_new_runs(app);
                match event {
                    SessionEvent::InputAccepted { .. } => {
                        // Each turn, whoever sent its input (this terminal, another, automation),
                        // gets the highlighter ready for its reply while the model thinks.
                        super::highlight::prepare_for_reply(&self.link.project_dir);
                        self.awaiting_answer = true;
                    }
                    SessionEvent::TextDelta { .. }
                    | SessionEvent::ThinkingDelta { .. }
                    | SessionEvent::ToolCall { .. }
                        if self.awaiting_answer =>
                    {
                        self.awaiting_answer = false;
                        self.frames.request_urgent(now);
                    }
                    _ if ended => self.awaiting_answer = false,
                    _ => {}
                }
                // A call that may have started or stopped a job, or a turn's end, asks again;
                // while jobs run the count is kept current anyway.
                let job_call = matches!(
                    &event,
                    SessionEvent::ToolResult { name, .. } if name == "shell_execute" || name == "job_kill"
                );
                if (ended || job_call)
                    && let Some(session) = app.session.clone()
                {
                    self.job_polls
                        .renew(&self.link.service, session, &self.link.tx);
                }
            }
            Fed::Lost => app.transcript.void_streamed(),
            Fed::Nothing => {}
        }
        self.frames.request(now);
    }

    fn draw(
        &mut self,
        app: &mut App,
        terminal: &mut TerminalGuard,
        now: Instant,
    ) -> std::io::Result<()> {
        let moving = app.tick(now);
        // The frame showing the first word of an answer lays out no pane.
        app.panes.hold = self.frames.is_urgent();
        match &mut self.picker {
            Some((picker, _)) => terminal.screen.draw(|frame| {
                let area = frame.area();
                picker.render(frame, area, &app.theme);
            })?,
            None => terminal.screen.draw(|frame| view::draw(frame, app, now))?,
        };
        let answer = self.frames.is_urgent();
        self.frames.drawn(now);
        // Unless the next turn began meanwhile: it needs what the last one left.
        if std::mem::take(&mut self.release_after_frame) && !app.busy() {
            release_turn_memory(app);
        }
        if self.frame_log.is_some() {
            let took = now.elapsed().as_micros();
            // The frame that shows the first word of an answer is marked.
            let mark = if answer { " answer" } else { "" };
            self.log_line(format_args!("{took}{mark}"));
        }
        // Panes wait for their layout only where they are drawn (not under the picker).
        if self.picker.is_none()
            && let Some(at) = app.panes.next_layout()
        {
            self.frames.request_at(at);
        }
        if moving {
            let next = if app.transcript.has_pending() {
                now
            } else {
                now + ANIMATION
            };
            self.frames.request_at(next);
        }
        if app.transcript.forget_far(KEEP_RENDERED, KEEP_PACKED) >= RELEASE_AFTER_LINES {
            // A big reply scrolled away: its memory goes back now, not at the next turn's end.
            tokio::task::spawn_blocking(super::release_freed_memory);
        }
        Ok(())
    }

    /// A line of the frame log, after the wall-clock time in microseconds.
    fn log_line(&mut self, what: std::fmt::Arguments<'_>) {
        if let Some(log) = &mut self.frame_log {
            use std::io::Write;
            let at = jiff::Timestamp::now().as_microsecond();
            let _ = writeln!(log, "{at} {what}");
        }
    }

    /// Carries out the app's actions; returns how the UI ends, when one ends it.
    async fn perform(&mut self, app: &mut App, actions: Vec<Action>) -> Option<Exit> {
        for action in actions {
            match action {
                Action::Send(text) => {
                    // When the message left the composer, for the time to its answer.
                    self.log_line(format_args!("input"));
                    self.link.send(text);
                }
                Action::Cancel => self.link.cancel(),
                Action::Shell(command) => self.link.shell(command),
                Action::Compact => self.link.compact(),
                Action::Reset => self.link.reset(app.session.clone()),
                Action::Pick => self.open_picker(false),
                Action::SwitchModel(model) => self.link.switch_model(model),
                Action::Export { path, overwrite } => {
                    let markdown = app.transcript.to_markdown();
                    let written =
                        super::export::write(&self.link.project_dir, path, overwrite, &markdown);
                    let _ = self.link.tx.send(written);
                }
                Action::Answer {
                    call_id,
                    answer,
                    session,
                } => self.link.answer(session, call_id, answer),
                Action::CancelRun(run) => {
                    if let Some(parent) = app.session.clone() {
                        let tx = self.link.tx.clone();
                        super::runs::cancel(self.link.service.clone(), parent, run, tx);
                    }
                }
                Action::ShowResult(path) => super::runs::show_result(path, self.link.tx.clone()),
                Action::ShowJobs => match app.session.clone() {
                    Some(session) => {
                        super::jobs::show(self.link.service.clone(), session, self.link.tx.clone())
                    }
                    None => app.notice("no session yet, so no background jobs"),
                },
                Action::ShowMcp(approve) => super::mcp::show(
                    self.link.service.clone(),
                    self.link.project_dir.clone(),
                    approve,
                    self.link.tx.clone(),
                ),
                Action::ShowMap(focus) => super::map::show(
                    self.link.service.clone(),
                    app.session.clone(),
                    self.link.project_dir.clone(),
                    focus,
                    self.link.tx.clone(),
                ),
                Action::Quit => {
                    // Work another terminal may watch goes on: a client leaves it to its
                    // owner, an owner with clients hands it over.
                    if app.busy()
                        && let Some(id) = &app.session
                        && self.link.service.alone().await
                    {
                        let _ = self.link.service.cancel(id).await;
                    }
                    self.link.service.close_all().await;
                    return Some(Exit::Quit {
                        session: app.session.clone(),
                    });
                }
            }
        }
        None
    }

    /// Drains every session, still drawing the running turn's end as it comes.
    async fn drain(&mut self, app: &mut App, terminal: &mut TerminalGuard) {
        let service = self.link.service.clone();
        let drain = service.drain(crate::gateway::DRAIN_BOUND);
        tokio::pin!(drain);
        let mut open = self.link.feed.is_some();
        loop {
            let now = Instant::now();
            if self.frames.is_due(now) {
                let _ = self.draw(app, terminal, now);
            }
            tokio::select! {
                biased;
                item = next_item(&mut self.link.feed), if open => match item {
                    Some(FeedItem::Event(stamped)) => {
                        app.session_event(&stamped.event, Instant::now());
                        self.frames.request(Instant::now());
                    }
                    Some(_) => {}
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

/// Hands back what a turn allocated and let go (a large message sent, a long reply laid out,
/// results read) and what highlighting its code took (its blocks as they streamed, the
/// compiled patterns, unless a run's pane still streams), off the interface's task.
fn release_turn_memory(app: &App) {
    super::highlight::forget_highlighted();
    let forgotten = (!app.panes.any_running()).then(super::highlight::let_go_of_grammar);
    tokio::task::spawn_blocking(move || {
        drop(forgotten);
        super::release_freed_memory();
    });
    // Once more when the turn's last work in this process is done too (its lazy commits,
    // flushed within 100 ms, a snapshot of the session), which frees after this frame.
    tokio::spawn(async {
        tokio::time::sleep(RELEASE_AGAIN_AFTER).await;
        let _ = tokio::task::spawn_blocking(super::release_freed_memory).await;
    });
}

/// The next item of the feed, or pending forever when there is none.
async fn next_item(feed: &mut Option<Feed>) -> Option<FeedItem> {
    match feed {
        Some(feed) => feed.next().await,
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
