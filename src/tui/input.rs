//! The terminal's input (keys, pastes, mouse, resizes), read by one thread of the process and
//! handed to whichever screen is up.
//!
//! crossterm's own async stream checks for input under a lock that its waiting thread holds
//! while it waits, so every poll of it spins and yields the core before giving up; the
//! interface's loop polls input on every pass, which under eight streaming runs cost an
//! eighth of the process's time. Here the thread waits in crossterm's blocking read and the
//! loop polls a channel.
//!
//! The thread reads the terminal through crossterm's poll(2) source (its `use-dev-tty`
//! feature): the default mio source waits for the terminal to become readable again while
//! bytes of a burst it has not read yet are still waiting, so a burst of typed keys of more
//! than a kilobyte or so stopped half-way until another key came.

use crossterm::event::Event;
use std::sync::{Mutex, OnceLock};
use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};

type Events = UnboundedReceiver<std::io::Result<Event>>;

/// The receiving end of the reading thread's channel while no screen holds it.
static IDLE: OnceLock<Mutex<Option<Events>>> = OnceLock::new();

/// The terminal's input, held by one screen at a time; dropping it gives it back.
pub struct Input {
    events: Option<Events>,
}

impl Input {
    /// Takes the process's input, starting its reading thread the first time. Events that
    /// came while no screen held it are kept for the next one.
    pub fn take() -> Self {
        let idle = IDLE.get_or_init(|| Mutex::new(Some(start())));
        let events = idle.lock().unwrap_or_else(|p| p.into_inner()).take();
        // Taken twice at once (which no screen does): the second gets no events at all
        // rather than half of them.
        Self { events }
    }

    /// The next event; `None` once the terminal can no longer be read.
    pub async fn next(&mut self) -> Option<std::io::Result<Event>> {
        match &mut self.events {
            Some(events) => events.recv().await,
            None => std::future::pending().await,
        }
    }

    /// How many events the reading thread has handed over and no one has taken yet.
    pub fn waiting(&self) -> usize {
        self.events.as_ref().map_or(0, |events| events.len())
    }

    /// An event already handed over, without waiting; `None` when there is none yet (or the
    /// terminal can no longer be read, which [`Input::next`] then says).
    pub fn ready(&mut self) -> Option<std::io::Result<Event>> {
        self.events.as_mut()?.try_recv().ok()
    }
}

impl Drop for Input {
    fn drop(&mut self) {
        if let (Some(events), Some(idle)) = (self.events.take(), IDLE.get()) {
            *idle.lock().unwrap_or_else(|p| p.into_inner()) = Some(events);
        }
    }
}

/// Starts the thread that reads the terminal until it fails; the process's end stops it.
fn start() -> Events {
    let (tx, rx) = unbounded_channel();
    let started = std::thread::Builder::new()
        .name("tern-input".into())
        .spawn(move || {
            loop {
                let event = crossterm::event::read();
                let failed = event.is_err();
                if tx.send(event).is_err() || failed {
                    break;
                }
            }
        });
    if let Err(err) = started {
        // No thread, no input: the screen hears why and ends.
        let (tx, rx) = unbounded_channel();
        let _ = tx.send(Err(err));
        return rx;
    }
    rx
}
