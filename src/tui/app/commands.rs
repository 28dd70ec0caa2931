//! The slash commands typed in the composer: what each one asks of the runner, or the
//! notice it shows at once. Split from the app's key handling, whose state it changes.

use super::{Action, App};
use crate::tui::model_name;
use crate::tui::popup;
use crate::tui::theme::Theme;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use std::path::PathBuf;

impl App {
    /// Runs a slash command.
    pub(super) fn slash(&mut self, line: &str) -> Vec<Action> {
        let (name, arg) = match line.split_once(char::is_whitespace) {
            Some((name, arg)) => (name, arg.trim()),
            None => (line, ""),
        };
        match name {
            "new" | "reset" => vec![Action::Reset],
            "resume" => vec![Action::Pick],
            "compact" => vec![Action::Compact],
            "quit" | "exit" => vec![Action::Quit],
            "model" if arg.is_empty() => {
                self.notice(format!(
                    "model: {} ({}); `/model NAME` switches (tern restarts on this session)",
                    self.status.model, self.status.provider
                ));
                Vec::new()
            }
            "model" => match model_name::check(arg) {
                Ok(()) => vec![Action::SwitchModel(arg.to_owned())],
                Err(why) => {
                    self.notice(why);
                    Vec::new()
                }
            },
            "theme" => {
                self.theme_command(arg);
                Vec::new()
            }
            "export" => {
                let path = if arg.is_empty() {
                    let id = self.session.as_ref().map_or("new", |id| id.short());
                    PathBuf::from(format!("tern-{id}.md"))
                } else {
                    PathBuf::from(arg)
                };
                vec![Action::Export {
                    path,
                    overwrite: false,
                }]
            }
            "status" => {
                self.notice(self.status_text());
                Vec::new()
            }
            "map" => vec![Action::ShowMap(
                arg.split_whitespace().map(str::to_owned).collect(),
            )],
            "mcp" => match arg.split_once(char::is_whitespace) {
                None if arg.is_empty() => vec![Action::ShowMcp(None)],
                Some(("approve", name)) if !name.trim().is_empty() => {
                    vec![Action::ShowMcp(Some(name.trim().to_owned()))]
                }
                _ => {
                    self.notice("/mcp lists the project's MCP servers; /mcp approve NAME lets one of its .mcp.json run");
                    Vec::new()
                }
            },
            // A server's prompt: the session asks the server for its text.
            // Sent alone (the `!` output waits for the next message): the session knows the
            // command only at the start of an input.
            prompt if prompt.starts_with("mcp__") => {
                let context = std::mem::take(&mut self.shell_context);
                let sent = self.send_text(format!("/{line}"));
                self.shell_context = context;
                sent
            }
            "help" => {
                self.notice(popup::help_text());
                Vec::new()
            }
            other => {
                self.notice(format!("unknown command /{other}; /help lists them"));
                Vec::new()
            }
        }
    }

    fn theme_command(&mut self, name: &str) {
        if name.is_empty() {
            let names: Vec<&str> = Theme::names().collect();
            self.notice(format!(
                "theme: {}; built in: {}; your own go in {} as NAME.toml",
                self.theme.name,
                names.join(", "),
                self.themes_dir.display()
            ));
            return;
        }
        match Theme::load(name, &self.themes_dir) {
            Ok(theme) => {
                self.theme = theme.for_depth(self.theme.depth);
                self.transcript.view.theme_epoch += 1;
                self.panes.theme_changed();
                self.notice(format!("theme: {name}"));
            }
            Err(err) => self.notice(err.to_string()),
        }
    }

    fn status_text(&self) -> String {
        let s = &self.status;
        let t = &s.tokens;
        let source = if s.window_source.is_empty() {
            String::new()
        } else {
            format!(" (window {})", s.window_source)
        };
        format!(
            "session {} · {} ({}) · context {} of {} tokens{source} · session tokens: input {}, \
             output {}, cache read {}, cache write {}{}",
            self.session.as_ref().map_or("(none yet)", |id| id.as_str()),
            s.model,
            s.provider,
            s.context_tokens,
            s.context_window,
            t.input_tokens,
            t.output_tokens,
            t.cache_read_input_tokens,
            t.cache_creation_input_tokens,
            s.branch
                .as_ref()
                .map_or(String::new(), |b| format!(" · branch {b}"))
        )
    }

    /// Keys while the person is asked whether `/export` may write over a file; `None`
    /// when nothing is asked (or for Ctrl-C, which keeps its meaning).
    pub(super) fn overwrite_key(&mut self, key: KeyEvent) -> Option<Vec<Action>> {
        let question = self.overwrite.as_ref()?;
        if key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('c') {
            return None;
        }
        match question.key(key) {
            Some(true) => {
                let path = question.path.clone();
                self.overwrite = None;
                Some(vec![Action::Export {
                    path,
                    overwrite: true,
                }])
            }
            Some(false) => {
                let kept = question.kept();
                self.overwrite = None;
                self.notice(kept);
                Some(Vec::new())
            }
            None => Some(Vec::new()),
        }
    }
}
