//! The rendering primitives of the full-screen terminal UI: themes, wrapping, markdown, code
//! highlighting and diffs, all pure functions from text to ratatui [`Line`]s.
//!
//! Nothing here draws or reads the terminal; the app, its event loop and its views sit on top.
//! Only this module imports ratatui (and, later, crossterm): the rest of tern never sees a
//! terminal type.
//!
//! - [`theme`]: named styles from TOML theme files, brought down to the terminal's
//!   [`ColorDepth`].
//! - [`wrap`](mod@wrap): styled text wrapped to a width in cells, with prefixes; [`WrapCache`].
//! - [`markdown`]: a reply rendered as a terminal markdown viewer would.
//! - [`highlight`](mod@highlight): syntect highlighting of code, memoised.
//! - [`diff`]: unified diffs in colour.
//! - [`picker`]: the full-screen resume picker, with its search over every session.
//!
//! [`Line`]: ratatui::text::Line

pub mod app;
pub mod approval;
pub mod color;
pub mod composer;
mod composer_rows;
pub mod diff;
pub mod export;
pub mod highlight;
mod input;
mod jobs;
mod link;
mod map;
pub mod markdown;
mod mcp;
pub mod model_name;
pub mod panes;
pub mod picker;
pub mod popup;
pub mod runner;
mod runs;
pub mod schedule;
pub mod setup;
pub mod status;
mod table;
pub mod terminal;
pub mod theme;
mod theme_file;
pub mod transcript;
pub mod view;
pub mod wrap;

pub use color::ColorDepth;
pub use diff::{DiffOptions, diff_stats, render_diff, render_diff_with};
pub use highlight::{HighlightedLine, highlight};
pub use markdown::render_markdown;
pub use theme::{Theme, ThemeError};
pub use wrap::{WrapCache, hard_wrap, wrap, wrap_prefixed};

/// Hands memory freed after a big one-off job (building the picker's index, loading a long
/// session) back to the system, so the process's size follows what it keeps rather than
/// what it once read. Only glibc keeps freed pages this way; elsewhere nothing is done.
pub fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns unused heap pages to the system; it has no
    // preconditions and touches no memory in use.
    unsafe {
        libc::malloc_trim(0);
    }
}
