//! The status line: model and provider, what the session is doing (with a spinner and the
//! time it has taken), how full the context window is, the session's tokens, the git branch
//! and the session's title.

use crate::domain::Usage;
use crate::tui::theme::Theme;
use crate::tui::transcript::format_duration;
use crate::tui::wrap::str_width;
use ratatui::text::{Line, Span};
use tokio::time::Instant;

const SPINNER: [&str; 10] = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];

/// What the status line shows.
#[derive(Debug, Clone, Default)]
pub struct Status {
    pub model: String,
    pub provider: String,
    pub context_window: u64,
    /// Where the window came from (`configured`, `from the server: …`, `assumed: …`), for
    /// `/status`.
    pub window_source: String,
    /// Tokens of the latest request: how full the window is.
    pub context_tokens: u64,
    /// Every call of the session, summed.
    pub tokens: Usage,
    pub branch: Option<String>,
    pub title: String,
    /// Since when a turn (or a compaction) has been running, and which.
    pub working: Option<(Instant, &'static str)>,
    /// Scrolled up from the bottom.
    pub scrolled: bool,
    /// A short message that replaces the hints for a while (Ctrl-C once, errors).
    pub flash: Option<(String, Instant)>,
    /// How many background jobs of the session run.
    pub jobs: usize,
    /// The chat channels running, like `slack ✓ webhook ✗` (empty when none runs).
    pub channels: String,
}

impl Status {
    /// How full the window is after a model call that used `usage`: what it read and what it
    /// wrote, which the next request carries. A report of no input at all is a server that
    /// did not count (no request reads nothing), so the last known figure stays.
    pub fn set_context(&mut self, usage: &Usage) {
        if usage.context_tokens() > 0 {
            self.context_tokens = usage.context_tokens() + usage.output_tokens;
        }
    }

    /// The line at `width` at `now`.
    pub fn line(&self, width: u16, now: Instant, theme: &Theme) -> Line<'static> {
        let mut parts: Vec<Span<'static>> = Vec::new();
        let sep = || Span::styled(" · ", theme.dim);
        match self.working {
            Some((since, what)) => {
                let elapsed = now.saturating_duration_since(since);
                let frame = SPINNER[(elapsed.as_millis() / 80) as usize % SPINNER.len()];
                parts.push(Span::styled(format!("{frame} {what} "), theme.tool_running));
                parts.push(Span::styled(format_duration(elapsed), theme.dim));
                parts.push(Span::styled(" (esc to interrupt)", theme.dim));
            }
            None => parts.push(Span::styled("ready", theme.success)),
        }
        if self.jobs > 0 {
            let jobs = match self.jobs {
                1 => "1 job".to_owned(),
                n => format!("{n} jobs"),
            };
            parts.push(sep());
            parts.push(Span::styled(format!("{jobs} (ctrl+b)"), theme.accent));
        }
        if !self.channels.is_empty() {
            let style = if self.channels.contains('✗') {
                theme.warning
            } else {
                theme.accent
            };
            parts.push(sep());
            parts.push(Span::styled(self.channels.clone(), style));
        }
        parts.push(sep());
        parts.push(Span::styled(
            format!("{} ({})", self.model, self.provider),
            theme.status_line,
        ));
        if self.context_window > 0 {
            let pct = (self.context_tokens as f64 * 100.0 / self.context_window as f64).round();
            let style = if pct >= 75.0 {
                theme.warning
            } else {
                theme.status_line
            };
            parts.push(sep());
            parts.push(Span::styled(format!("ctx {pct:.0}%"), style));
        }
        let t = &self.tokens;
        parts.push(sep());
        parts.push(Span::styled(
            format!(
                "↑{} ↓{} cache {}",
                tokens(t.input_tokens + t.cache_creation_input_tokens),
                tokens(t.output_tokens),
                tokens(t.cache_read_input_tokens)
            ),
            theme.dim,
        ));
        if let Some(branch) = &self.branch {
            parts.push(sep());
            parts.push(Span::styled(format!("⎇ {branch}"), theme.status_line));
        }
        if !self.title.is_empty() {
            parts.push(sep());
            parts.push(Span::styled(self.title.clone(), theme.dim));
        }
        if let Some((text, _)) = &self.flash {
            parts.insert(0, Span::styled(format!("{text}  "), theme.warning));
        } else if self.scrolled {
            parts.insert(
                0,
                Span::styled("↑ scrolled · end to follow  ", theme.accent),
            );
        }
        fit(parts, width)
    }
}

/// `950`, `12.3k`, `4.5M`.
fn tokens(n: u64) -> String {
    match n {
        0..1000 => n.to_string(),
        1000..1_000_000 => format!("{:.1}k", n as f64 / 1000.0),
        _ => format!("{:.1}M", n as f64 / 1e6),
    }
}

/// The spans that fit in `width` cells, the last one cut with `…`.
fn fit(spans: Vec<Span<'static>>, width: u16) -> Line<'static> {
    let mut left = width as usize;
    let mut out = Vec::new();
    for span in spans {
        let w = str_width(&span.content);
        if w <= left {
            left -= w;
            out.push(span);
            continue;
        }
        if left > 1 {
            let cut: String = crate::domain::call_text::clip(&span.content, left - 1);
            let cut: String = cut.chars().take(left - 1).collect();
            out.push(Span::styled(format!("{cut}…"), span.style));
        }
        break;
    }
    Line::from(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn text(line: &Line<'_>) -> String {
        line.spans.iter().map(|s| s.content.as_ref()).collect()
    }

    #[test]
    fn running_channels_show_on_the_line_and_a_stopped_one_stands_out() {
        let theme = Theme::default();
        let mut status = Status {
            model: "m".into(),
            provider: "p".into(),
            ..Status::default()
        };
        let now = Instant::now();
        assert!(!text(&status.line(200, now, &theme)).contains('✓'));
        status.channels = "slack ✓ webhook ✓".into();
        let line = status.line(200, now, &theme);
        assert!(text(&line).contains("slack ✓ webhook ✓"), "{}", text(&line));
        status.channels = "slack ✗".into();
        let line = status.line(200, now, &theme);
        let span = line
            .spans
            .iter()
            .find(|s| s.content.contains("slack"))
            .unwrap();
        assert_eq!(span.style, theme.warning);
    }

    #[test]
    fn the_line_shows_model_context_tokens_branch_and_title() {
        let theme = Theme::default();
        let now = Instant::now();
        let status = Status {
            model: "claude-sonnet-4-5".into(),
            provider: "anthropic".into(),
            context_window: 200_000,
            context_tokens: 50_000,
            tokens: Usage {
                input_tokens: 1200,
                output_tokens: 340,
                cache_creation_input_tokens: 0,
                cache_read_input_tokens: 98_000,
            },
            branch: Some("main".into()),
            title: "Fix the flaky test".into(),
            ..Status::default()
        };
        assert_eq!(
            text(&status.line(200, now, &theme)),
            "ready · claude-sonnet-4-5 (anthropic) · ctx 25% · ↑1.2k ↓340 cache 98.0k · ⎇ main · \
             Fix the flaky test"
        );
        let busy = Status {
            working: Some((now - Duration::from_millis(4200), "working")),
            ..status
        };
        let line = text(&busy.line(200, now, &theme));
        assert!(line.contains("working 4.2s (esc to interrupt)"), "{line}");
        let jobs = Status {
            jobs: 2,
            ..busy.clone()
        };
        let line = text(&jobs.line(200, now, &theme));
        assert!(
            line.contains("(esc to interrupt) · 2 jobs (ctrl+b) · claude"),
            "{line}"
        );
        // Narrow terminals get a cut line, never a panic.
        let line = text(&busy.line(20, now, &theme));
        assert!(str_width(&line) <= 20, "{line}");
        assert!(busy.line(0, now, &theme).spans.is_empty());
    }
}
