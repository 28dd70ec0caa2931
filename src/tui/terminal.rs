//! Taking over the terminal and giving it back: raw mode, the alternate screen, bracketed
//! paste, mouse reporting and a hidden cursor on the way in; all of it undone on the way
//! out, whether tern leaves normally, returns an error, or panics.
//!
//! [`TerminalGuard`] undoes the setup when dropped, and a panic hook does the same before the
//! panic message is printed, so the message lands on a usable terminal.
//!
//! Ctrl-Z ([`TerminalGuard::suspend`]) gives the terminal back and stops tern as the
//! terminal's own Ctrl-Z would outside raw mode; the shell's `fg` continues it, and the
//! setup is made again and the next frame drawn whole.

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
        take_over()?;
        let screen = match Terminal::new(CrosstermBackend::new(stdout())) {
            Ok(screen) => screen,
            Err(err) => {
                restore();
                return Err(err);
            }
        };
        Ok(Self { screen })
    }

    /// Ctrl-Z: the terminal restored, tern's process group stopped with SIGTSTP (what the
    /// terminal sends for Ctrl-Z when not in raw mode, so the shell takes over and `fg`
    /// continues it); once continued, the terminal set up again and the screen cleared so
    /// the next frame draws everything.
    ///
    /// The shell may have drawn anything meanwhile and the window may have another size: the
    /// frame after this one must not count on what was on screen before.
    pub fn suspend(&mut self) -> std::io::Result<()> {
        restore();
        // The whole group, as the terminal would: whatever shares tern's job stops with it.
        // A group with no shell to continue it (an orphaned one) is not stopped by the
        // kernel, and tern simply takes the terminal again.
        // SAFETY: kill(2) with pid 0 and a valid signal number reads no memory of ours.
        let sent = unsafe { libc::kill(0, libc::SIGTSTP) };
        if sent != 0 {
            tracing::warn!(err = %std::io::Error::last_os_error(), "Ctrl-Z could not stop tern");
        }
        // Here once continued: the signal, sent to this process too, stops it before kill
        // returns.
        take_over()?;
        // Not `clear`, which asks the terminal where its cursor is, an answer that the
        // input thread, waiting on the terminal, would take.
        let area = self.screen.size()?;
        self.screen.resize(area.into())
    }
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        restore();
    }
}

/// Raw mode, the alternate screen, paste, mouse and focus reports, the cursor hidden;
/// undone again when any of it fails.
fn take_over() -> std::io::Result<()> {
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
    Ok(())
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
