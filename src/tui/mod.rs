//! The rendering primitives of the full-screen terminal UI: themes, wrapping, markdown, code
//! highlighting and diffs, all pure functions from text to ratatui [`Line`]s.
//!
//! Nothing here draws or reads the terminal; the app, its event loop and its views sit on top.
//! Only this module imports ratatui (and, later, crossterm): the rest of tern never sees a
//! terminal type.
//!
//! [`Line`]: ratatui::text::Line

pub mod color;
pub mod highlight;
pub mod theme;
mod theme_file;
pub mod wrap;

pub use color::ColorDepth;
pub use highlight::{HighlightedLine, highlight};
pub use theme::{Theme, ThemeError};
pub use wrap::{WrapCache, hard_wrap, wrap, wrap_prefixed};
