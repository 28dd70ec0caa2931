//! Taking over the terminal and giving it back: raw mode, the alternate screen, bracketed
//! paste, mouse reporting and a hidden cursor on the way in; all of it undone on the way
//! out, whether tern leaves normally, returns an error, or panics.
//!
//! [`TerminalGuard`] undoes the setup when dropped, and a panic hook does the same before the
//! panic message is printed, so the message lands on a usable terminal.

use crossterm::event::{
    DisableBracketedPaste, DisableFocusChange, DisableMouseCapture, EnableBracketedPaste,
    EnableFocusChange, EnableMouseCapture,
};
use crossterm::terminal::{
    EnterAlternateScreen, LeaveAlternateScreen, disable_raw_mode, enable_raw_mode,
};
use crossterm::{cursor, execute};
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use std::io::{Stdout, stdout};
use std::sync::Once;
use std::sync::atomic::{AtomicBool, Ordering};

/// The terminal tern draws on.
pub type Screen = Terminal<CrosstermBackend<Stdout>>;

/// Whether the terminal is currently set up, so restoring twice does nothing.
static ACTIVE: AtomicBool = AtomicBool::new(false);
static HOOK: Once = Once::new();

/// Owns the terminal's setup; dropping it restores the terminal.
pub struct TerminalGuard {
    pub screen: Screen,
}

impl TerminalGuard {
    /// Sets the terminal up for the full-screen UI.
    pub fn enter() -> std::io::Result<Self> {
        install_panic_hook();
        enable_raw_mode()?;
        ACTIVE.store(true, Ordering::SeqCst);
        let setup = execute!(
            stdout(),
            EnterAlternateScreen,
            EnableBracketedPaste,
            EnableMouseCapture,
            EnableFocusChange,
            cursor::Hide
        );
        if let Err(err) = setup {
            restore();
            return Err(err);
        }
        let screen = match Terminal::new(CrosstermBackend::new(stdout())) {
            Ok(screen) => screen,
            Err(err) => {
                restore();
                return Err(err);
            }
        };
        Ok(Self { screen })
    }
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        restore();
    }
}

/// Gives the terminal back as it was; safe to call more than once.
pub fn restore() {
    if !ACTIVE.swap(false, Ordering::SeqCst) {
        return;
    }
    // Raw mode goes first: it has the most effect on what the person sees next.
    let _ = disable_raw_mode();
    let _ = execute!(
        stdout(),
        DisableMouseCapture,
        DisableBracketedPaste,
        DisableFocusChange,
        LeaveAlternateScreen,
        cursor::Show
    );
}

/// Restores the terminal before any panic message is printed.
fn install_panic_hook() {
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore();
            previous(info);
        }));
    });
}
