//! The composer's popups: `/` lists the slash commands, `@` completes file names of the
//! project (fuzzy, over the `.gitignore`-respecting walk, gathered once in the background).
//! Both are pure state plus a drawing function; the app decides when they open.

use crate::tui::theme::Theme;
use nucleo_matcher::pattern::{CaseMatching, Normalization, Pattern};
use nucleo_matcher::{Config, Matcher};
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Widget};
use std::sync::{Arc, OnceLock};

/// Rows a popup shows at most.
pub const ROWS: usize = 8;

/// A slash command as the popup and `/help` list it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlashCommand {
    pub name: &'static str,
    pub args: &'static str,
    pub help: &'static str,
}

/// Every slash command, in the order `/help` shows them.
pub const COMMANDS: &[SlashCommand] = &[
    SlashCommand {
        name: "new",
        args: "",
        help: "archive this conversation and start a new one",
    },
    SlashCommand {
        name: "reset",
        args: "",
        help: "the same as /new",
    },
    SlashCommand {
        name: "resume",
        args: "",
        help: "pick an earlier session to go on with",
    },
    SlashCommand {
        name: "compact",
        args: "",
        help: "shrink the history the model sees now",
    },
    SlashCommand {
        name: "model",
        args: "[name]",
        help: "show the model, or switch to another (tern restarts on this session)",
    },
    SlashCommand {
        name: "status",
        args: "",
        help: "session, model, tokens, context and paths",
    },
    SlashCommand {
        name: "map",
        args: "[focus]",
        help: "the repository map, centred on this chat and on any paths or names given",
    },
    SlashCommand {
        name: "mcp",
        args: "",
        help: "MCP servers, tools and prompts; /mcp approve NAME lets a .mcp.json one run",
    },
    SlashCommand {
        name: "theme",
        args: "[name]",
        help: "list the themes, or switch to one",
    },
    SlashCommand {
        name: "export",
        args: "[file]",
        help: "write the transcript to a markdown file",
    },
    SlashCommand {
        name: "help",
        args: "",
        help: "keys and commands",
    },
    SlashCommand {
        name: "quit",
        args: "",
        help: "leave tern",
    },
];

/// What a popup lists, and which entry is selected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choices {
    /// Shown text of each entry, and what choosing it inserts.
    pub entries: Vec<(String, String)>,
    pub selected: usize,
}

impl Choices {
    pub fn up(&mut self) {
        self.selected = self
            .selected
            .checked_sub(1)
            .unwrap_or(self.entries.len().saturating_sub(1));
    }

    pub fn down(&mut self) {
        self.selected = if self.selected + 1 >= self.entries.len() {
            0
        } else {
            self.selected + 1
        };
    }

    /// What choosing the selected entry inserts.
    pub fn chosen(&self) -> Option<&str> {
        self.entries
            .get(self.selected)
            .map(|(_, insert)| insert.as_str())
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// The slash commands whose names match `typed` (the text after `/`), best first.
pub fn slash_choices(typed: &str) -> Choices {
    let names: Vec<&str> = COMMANDS.iter().map(|c| c.name).collect();
    let ranked: Vec<&str> = if typed.is_empty() {
        names
    } else {
        let mut matcher = Matcher::new(Config::DEFAULT);
        let pattern = Pattern::parse(typed, CaseMatching::Ignore, Normalization::Smart);
        let mut prefixed: Vec<&str> = names
            .iter()
            .copied()
            .filter(|n| n.starts_with(typed))
            .collect();
        for (name, _) in pattern.match_list(names, &mut matcher) {
            if !prefixed.contains(&name) {
                prefixed.push(name);
            }
        }
        prefixed
    };
    let entries = ranked
        .into_iter()
        .filter_map(|name| COMMANDS.iter().find(|c| c.name == name))
        .map(|c| {
            let shown = format!("/{:<8} {:<7} {}", c.name, c.args, c.help);
            (shown, format!("/{}", c.name))
        })
        .collect();
    Choices {
        entries,
        selected: 0,
    }
}

/// The project's files, gathered once in the background by whoever holds a clone.
#[derive(Debug, Clone)]
pub struct FileIndex {
    files: Arc<OnceLock<Vec<String>>>,
}

impl FileIndex {
    /// An index whose files are still being gathered: empty until [`FileIndex::fill`].
    pub fn pending() -> Self {
        Self {
            files: Arc::new(OnceLock::new()),
        }
    }

    /// The files gathered; only the first fill counts.
    pub fn fill(&self, files: Vec<String>) {
        let _ = self.files.set(files);
    }

    /// An index of exactly `files`, for tests.
    pub fn of(files: Vec<String>) -> Self {
        let lock = OnceLock::new();
        let _ = lock.set(files);
        Self {
            files: Arc::new(lock),
        }
    }

    /// Whether the walk has finished.
    pub fn ready(&self) -> bool {
        self.files.get().is_some()
    }

    /// Files matching `query` (fuzzy, path-aware), best first.
    pub fn choices(&self, query: &str) -> Choices {
        let files = self.files.get().map_or(&[][..], Vec::as_slice);
        let entries: Vec<(String, String)> = if query.is_empty() {
            files
                .iter()
                .take(ROWS * 4)
                .map(|f| (f.clone(), f.clone()))
                .collect()
        } else {
            let mut matcher = Matcher::new(Config::DEFAULT.match_paths());
            let pattern = Pattern::parse(query, CaseMatching::Smart, Normalization::Smart);
            pattern
                .match_list(files.iter(), &mut matcher)
                .into_iter()
                .take(ROWS * 4)
                .map(|(f, _)| (f.clone(), f.clone()))
                .collect()
        };
        Choices {
            entries,
            selected: 0,
        }
    }
}

/// Draws `choices` in a box whose bottom edge sits just above `anchor` (the composer).
pub fn render(choices: &Choices, title: &str, anchor: Rect, buf: &mut Buffer, theme: &Theme) {
    let rows = choices.entries.len().clamp(1, ROWS) as u16;
    let height = (rows + 2).min(anchor.y);
    if height < 3 || anchor.width < 10 {
        return;
    }
    let area = Rect {
        x: anchor.x,
        y: anchor.y - height,
        width: anchor.width,
        height,
    };
    Clear.render(area, buf);
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(theme.popup_border)
        .title(Span::styled(format!(" {title} "), theme.dim));
    let inner = block.inner(area);
    block.render(area, buf);
    if choices.entries.is_empty() {
        buf.set_line(
            inner.x,
            inner.y,
            &Line::styled("no match", theme.dim),
            inner.width,
        );
        return;
    }
    // Scroll so the selected row is visible.
    let visible = inner.height as usize;
    let first = (choices.selected + 1).saturating_sub(visible);
    for (i, (shown, _)) in choices.entries.iter().enumerate().skip(first).take(visible) {
        let style = if i == choices.selected {
            theme.selection
        } else {
            theme.base
        };
        let line = Line::from(Span::styled(
            format!("{shown:<width$}", width = inner.width as usize),
            style,
        ));
        buf.set_line(inner.x, inner.y + (i - first) as u16, &line, inner.width);
    }
}

/// `/help`.
pub fn help_text() -> String {
    let mut out = String::from("commands:");
    for c in COMMANDS {
        out.push_str(&format!("\n/{} {} — {}", c.name, c.args, c.help));
    }
    out.push_str(
        "\nkeys: enter sends · shift+enter, alt+enter or ctrl+j: new line · up/down: history · \
         esc: interrupt · ctrl+c: clear, twice quits · ctrl+d: quit · pgup/pgdn, wheel, \
         home/end: scroll · ctrl+t: thinking · ctrl+o: tool output · @: files · !cmd: run a \
         command (its output goes with your next message) · shift+drag selects text · \
         subagent panes: ctrl+n/ctrl+p focus, ctrl+f full screen, ctrl+x cancels its run, \
         ctrl+r shows the latest result · ctrl+b: background jobs and their output",
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slash_commands_match_by_prefix_first_then_fuzzily() {
        let names = |typed: &str| -> Vec<String> {
            slash_choices(typed)
                .entries
                .into_iter()
                .map(|(_, insert)| insert)
                .collect()
        };
        assert_eq!(names("").len(), COMMANDS.len());
        assert_eq!(names("re")[..2], ["/reset", "/resume"]);
        assert_eq!(names("q"), ["/quit"]);
        assert!(names("cmpct").contains(&"/compact".to_owned()));
        assert!(names("zzz").is_empty());
    }

    #[test]
    fn files_match_fuzzily_by_path() {
        let index = FileIndex::of(vec![
            "src/main.rs".into(),
            "src/tui/app.rs".into(),
            "README.md".into(),
            "tests/it/main.rs".into(),
        ]);
        assert!(index.ready());
        let choices = index.choices("tuiapp");
        assert_eq!(choices.chosen(), Some("src/tui/app.rs"));
        let mains: Vec<_> = index
            .choices("main")
            .entries
            .into_iter()
            .map(|e| e.1)
            .collect();
        assert_eq!(mains.len(), 2);
        assert_eq!(index.choices("").entries.len(), 4);
    }

    #[test]
    fn the_selection_wraps_around() {
        let mut choices = slash_choices("");
        choices.up();
        assert_eq!(choices.chosen(), Some("/quit"));
        choices.down();
        assert_eq!(choices.chosen(), Some("/new"));
    }
}
