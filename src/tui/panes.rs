//! The panes of the subagent runs the session sent: one per run, beside the transcript when
//! the terminal is wide and as a strip of tabs above the composer when it is narrow, each
//! showing its run's session live (thinking folded, tool calls, text) under a header with its
//! state, time, tokens and branch. A pane can be focused, opened full screen, its run
//! cancelled, and its `result.md` shown; a pane whose run ended folds away after a moment,
//! into the notice its parent's transcript shows.
//!
//! Pure: the runs' news come in as plain data, drawing goes to a buffer.

use super::approval::FromRun;
use super::theme::Theme;
use super::transcript::{Transcript, cells_from_history, format_duration};
use crate::domain::{RunId, SessionId};
use crate::gateway::catalog::JournalRecord;
use crate::session::SessionEvent;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use serde_json::Value;
use std::path::PathBuf;
use std::time::Duration;
use tokio::time::Instant;

/// How long a pane stays once its run ended, before it folds away.
pub const FOLD_AFTER: Duration = Duration::from_secs(8);

/// The narrowest terminal that shows panes beside the transcript; narrower ones get tabs.
pub const SIDE_BY_SIDE_WIDTH: u16 = 120;

/// How often a pane's body is laid out again while its run streams: text moving beside the
/// conversation 20 times a second reads as smoothly as 60, at a third of the cost, which
/// eight streaming runs would otherwise take from the frames of the session the person
/// talks to.
pub const RELAYOUT_EVERY: Duration = Duration::from_millis(50);

/// One run's pane.
pub struct Pane {
    pub run: RunId,
    pub agent: String,
    /// `queued`, `running`, `completed`, … as the owner last said.
    pub state: String,
    /// Seconds the run has taken, as the owner last said, and when it said so.
    elapsed: (u64, Instant),
    pub session: Option<SessionId>,
    pub branch: Option<String>,
    pub result_path: Option<PathBuf>,
    /// Output tokens of its model calls.
    pub tokens: u64,
    pub transcript: Transcript,
    /// When the run was seen to end.
    ended_at: Option<Instant>,
    /// Whether the body changed since it was last laid out.
    changed: bool,
    /// The body as last laid out, drawn again until it is laid out anew.
    drawn: Option<Drawn>,
}

/// A pane's body as it was drawn: where, when, and its cells row by row.
struct Drawn {
    area: Rect,
    at: Instant,
    cells: Vec<ratatui::buffer::Cell>,
}

impl Pane {
    fn new(run: RunId, now: Instant) -> Self {
        // A pane shows the end of what its run writes (laid out for its height when drawn).
        let mut transcript = Transcript::default();
        transcript.view.live_tail = Some(0);
        Self {
            run,
            agent: String::new(),
            state: "queued".to_owned(),
            elapsed: (0, now),
            session: None,
            branch: None,
            result_path: None,
            tokens: 0,
            transcript,
            ended_at: None,
            changed: true,
            drawn: None,
        }
    }

    fn ended(&self) -> bool {
        !matches!(self.state.as_str(), "queued" | "running" | "cancelling")
    }

    /// `explorer · running 12s · 340 tok · tern/run-…`
    fn header(&self, now: Instant, theme: &Theme, focused: bool) -> Line<'static> {
        let (mark, style) = match self.state.as_str() {
            "completed" => ("✓", theme.success),
            "queued" => ("…", theme.dim),
            "running" | "cancelling" => ("●", theme.tool_running),
            _ => ("✗", theme.failure),
        };
        let elapsed = match self.ended_at {
            Some(_) => Duration::from_secs(self.elapsed.0),
            None if self.state == "running" => {
                Duration::from_secs(self.elapsed.0) + now.saturating_duration_since(self.elapsed.1)
            }
            None => Duration::from_secs(self.elapsed.0),
        };
        let name = if self.agent.is_empty() {
            self.run.as_str()
        } else {
            &self.agent
        };
        let mut parts = vec![
            Span::styled(format!("{mark} "), style),
            Span::styled(
                name.to_owned(),
                if focused {
                    theme.accent
                } else {
                    theme.tool_name
                },
            ),
            Span::styled(
                format!(" · {} {}", self.state, format_duration(elapsed)),
                theme.dim,
            ),
        ];
        if self.tokens > 0 {
            parts.push(Span::styled(format!(" · {} tok", self.tokens), theme.dim));
        }
        if let Some(branch) = &self.branch {
            parts.push(Span::styled(format!(" · {branch}"), theme.dim));
        }
        Line::from(parts)
    }
}

/// The panes of the session shown.
#[derive(Default)]
pub struct Panes {
    pub list: Vec<Pane>,
    /// The focused pane; `None`: the main transcript has the focus.
    pub focus: Option<usize>,
    /// Whether the focused pane fills the transcript's place.
    pub full: bool,
    /// The results of the runs that ended, latest last, for the key that shows one.
    results: Vec<PathBuf>,
    /// Set for a frame that must be drawn at once (the first word of the answer the person
    /// waits for): no pane drawn before in the same place is laid out in it, each shows what
    /// it showed a frame ago.
    pub hold: bool,
    /// When a pane whose body changed is next laid out, if one waits for that.
    next_layout: Option<Instant>,
    /// When the panes were last drawn beside the transcript.
    last_side: Option<Instant>,
}

impl Panes {
    /// A run the session just sent; `false` when it has a pane already.
    pub fn started(&mut self, run: RunId, now: Instant) -> bool {
        if self.list.iter().any(|pane| pane.run == run) {
            return false;
        }
        self.list.push(Pane::new(run, now));
        true
    }

    fn pane(&mut self, run: &RunId) -> Option<&mut Pane> {
        self.list.iter_mut().find(|pane| &pane.run == run)
    }

    /// What the owner says of the run (`check_agent_run`'s status).
    pub fn status(&mut self, run: &RunId, status: &Value, now: Instant) {
        let Some(pane) = self.pane(run) else {
            return;
        };
        let text = |key: &str| status[key].as_str().map(str::to_owned);
        if let Some(state) = text("state") {
            pane.state = state;
        }
        if let Some(agent) = text("agent") {
            pane.agent = agent;
        }
        if let Some(secs) = status["elapsed_s"].as_u64() {
            pane.elapsed = (secs, now);
        }
        pane.session = text("session")
            .map(SessionId::from_string)
            .or(pane.session.take());
        pane.branch = text("branch").or(pane.branch.take());
        if let Some(path) = text("result_path") {
            pane.result_path = Some(PathBuf::from(path));
        }
        if pane.ended() && pane.ended_at.is_none() {
            pane.ended_at = Some(now);
            if let Some(path) = pane.result_path.clone() {
                self.results.push(path);
            }
        }
    }

    /// The run's session as journaled so far, when its pane opens.
    pub fn history(&mut self, run: &RunId, records: &[JournalRecord]) {
        if let Some(pane) = self.pane(run) {
            let mut cells = cells_from_history(records);
            cells.append(&mut pane.transcript.cells);
            pane.transcript = Transcript::with_cells(cells);
            pane.transcript.view.live_tail = Some(0);
            pane.changed = true;
        }
    }

    /// A live event of the run's session.
    pub fn event(&mut self, run: &RunId, event: &SessionEvent, now: Instant) {
        if let Some(pane) = self.pane(run) {
            if let SessionEvent::Usage { usage, .. } = event {
                pane.tokens += usage.output_tokens;
            }
            pane.transcript.apply(event, now);
            pane.changed = true;
        }
    }

    /// Who asks, when run `run`'s session asks a person to approve a call: its session and
    /// a label naming it.
    pub fn asker(&self, run: &RunId) -> Option<FromRun> {
        let pane = self.list.iter().find(|pane| &pane.run == run)?;
        Some(FromRun {
            session: pane.session.clone()?,
            label: format!("{} ({run})", pane.agent),
        })
    }

    /// Per-frame upkeep: streamed text committed, ended panes folded. Whether anything moves
    /// by itself.
    pub fn tick(&mut self, now: Instant) -> bool {
        let focused = self.focused().map(|pane| pane.run.clone());
        let before = self.list.len();
        self.list.retain(|pane| {
            pane.ended_at
                .is_none_or(|at| now.saturating_duration_since(at) < FOLD_AFTER)
        });
        if self.list.len() != before {
            self.focus = focused.and_then(|run| self.list.iter().position(|p| p.run == run));
            if self.focus.is_none() {
                self.full = false;
            }
        }
        let mut moving = false;
        for pane in &mut self.list {
            pane.changed |= pane.transcript.commit_pending();
            moving |= !pane.ended() || pane.transcript.has_pending();
        }
        moving || !self.list.is_empty()
    }

    /// Moves the focus to the next pane, and from the last back to the transcript.
    pub fn focus_next(&mut self) {
        self.focus = match self.focus {
            None if !self.list.is_empty() => Some(0),
            Some(at) if at + 1 < self.list.len() => Some(at + 1),
            _ => None,
        };
        self.full &= self.focus.is_some();
    }

    /// Moves the focus to the previous pane, and from the first back to the transcript.
    pub fn focus_prev(&mut self) {
        self.focus = match self.focus {
            None if !self.list.is_empty() => Some(self.list.len() - 1),
            Some(at) if at > 0 => Some(at - 1),
            _ => None,
        };
        self.full &= self.focus.is_some();
    }

    /// Opens the focused pane full screen, or closes it.
    pub fn toggle_full(&mut self) {
        self.full = self.focus.is_some() && !self.full;
    }

    /// Whether a run is queued or running still, its pane to be written.
    pub fn any_running(&self) -> bool {
        self.list.iter().any(|pane| !pane.ended())
    }

    pub fn focused(&self) -> Option<&Pane> {
        self.focus.and_then(|at| self.list.get(at))
    }

    /// The result to show: the focused run's, else the latest that ended.
    pub fn result(&self) -> Option<PathBuf> {
        match self.focused() {
            Some(pane) => pane.result_path.clone(),
            None => self.results.last().cloned(),
        }
    }

    /// The theme changed: every pane is drawn anew in it.
    pub fn theme_changed(&mut self) {
        for pane in &mut self.list {
            pane.transcript.view.theme_epoch += 1;
            pane.drawn = None;
        }
    }

    /// How old a changed body's layout may be before it is laid out again; `None` in a frame
    /// that lays out none.
    fn relayout(&self) -> Option<Duration> {
        (!self.hold).then_some(RELAYOUT_EVERY)
    }

    /// When run `run`'s pane can next show what its run wrote: when its layout is due beside
    /// the transcript, at once where it has none yet or fills the screen.
    pub fn shows_news_at(&self, run: &RunId, now: Instant) -> Instant {
        let Some((at, pane)) = self.list.iter().enumerate().find(|(_, p)| &p.run == run) else {
            return now;
        };
        match &pane.drawn {
            Some(drawn) if !(self.full && self.focus == Some(at)) => {
                (drawn.at + RELAYOUT_EVERY).max(now)
            }
            _ => now,
        }
    }

    /// When a frame should be drawn for a pane whose body changed but was not laid out again
    /// in the last one.
    pub fn next_layout(&self) -> Option<Instant> {
        self.next_layout
    }

    /// Draws the panes stacked in `area` (beside the transcript).
    pub fn render_side(&mut self, area: Rect, buf: &mut Buffer, theme: &Theme, now: Instant) {
        self.next_layout = None;
        if area.width < 3 || area.height == 0 || self.list.is_empty() {
            return;
        }
        // A rule on the left divides them from the transcript.
        for y in area.y..area.y + area.height {
            buf.set_string(area.x, y, "│", theme.dim);
        }
        let inner = Rect {
            x: area.x + 2,
            width: area.width - 2,
            ..area
        };
        let count = self.list.len() as u16;
        let each = (inner.height / count).max(2);
        // The panes' share of the time since the last frame, in layouts (a third of them at
        // 60 frames a second), so that the cost of streaming panes spreads over the frames
        // between two layouts of each; the longest unchanged go first, so however the frames
        // come every pane gets its turn.
        let since = self
            .last_side
            .map_or(RELAYOUT_EVERY, |last| now.saturating_duration_since(last));
        // Rounded up, less a hair so that a frame of exactly a third of the interval gets a
        // third of the panes; a held frame's time goes to the next.
        let every = RELAYOUT_EVERY.as_micros();
        let earned = self.list.len() as u128 * since.as_micros();
        let mut budget = usize::try_from((earned + every - 1 - every / 100) / every)
            .unwrap_or(usize::MAX)
            .max(1);
        if !self.hold {
            self.last_side = Some(now);
        }
        let relayout = self.relayout();
        let mut order: Vec<usize> = (0..self.list.len()).collect();
        order.sort_by_key(|&at| self.list[at].drawn.as_ref().map(|drawn| drawn.at));
        for at in order {
            let y = inner.y + at as u16 * each;
            if y >= inner.y + inner.height {
                continue;
            }
            let height = each.min(inner.y + inner.height - y);
            let slot = Rect { y, height, ..inner };
            let focused = self.focus == Some(at);
            let layout = Layout {
                every: relayout,
                allowed: budget > 0,
            };
            let pane = &mut self.list[at];
            match draw_pane(pane, slot, buf, theme, now, focused, layout) {
                Body::LaidOut => budget = budget.saturating_sub(1),
                Body::Refused => self.next_layout = Some(now),
                Body::Kept { wants } => self.next_layout = earliest(self.next_layout, wants),
            }
        }
    }

    /// Draws the focused pane over `area` (full screen).
    pub fn render_full(&mut self, area: Rect, buf: &mut Buffer, theme: &Theme, now: Instant) {
        self.next_layout = None;
        if let Some(at) = self.focus
            && let Some(pane) = self.list.get_mut(at)
        {
            buf.set_style(area, theme.base);
            // The pane the person watches full screen moves as often as frames are drawn.
            let relayout = (!self.hold).then_some(Duration::ZERO);
            let layout = Layout {
                every: relayout,
                allowed: true,
            };
            if let Body::Kept { wants } = draw_pane(pane, area, buf, theme, now, true, layout) {
                self.next_layout = wants;
            }
        }
    }

    /// Draws one row of tabs, one per pane, in `area` (a narrow terminal).
    pub fn render_tabs(&mut self, area: Rect, buf: &mut Buffer, theme: &Theme, now: Instant) {
        self.next_layout = None;
        if area.height == 0 || self.list.is_empty() {
            return;
        }
        let mut spans = Vec::new();
        for (at, pane) in self.list.iter().enumerate() {
            let header = pane.header(now, theme, self.focus == Some(at));
            // The mark and the name: the rest does not fit a tab.
            spans.push(Span::styled("[", theme.dim));
            spans.extend(header.spans.into_iter().take(2));
            spans.push(Span::styled("] ", theme.dim));
        }
        buf.set_line(area.x, area.y, &Line::from(spans), area.width);
    }
}

fn earliest(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// What became of a pane's body in a frame.
enum Body {
    LaidOut,
    /// Drawn as it was, though due: the frame had no layout left for it.
    Refused,
    /// Drawn as it was; `wants` a layout then, when it changed.
    Kept {
        wants: Option<Instant>,
    },
}

/// When a pane's changed body may be laid out again in a frame.
#[derive(Debug, Clone, Copy)]
struct Layout {
    /// How old its last layout must be; `None`: not in this frame.
    every: Option<Duration>,
    /// Whether the frame has a layout left to give it.
    allowed: bool,
}

/// Draws a pane: its header fresh, its body laid out again only when it changed and `layout`
/// lets it, else as it was drawn.
fn draw_pane(
    pane: &mut Pane,
    area: Rect,
    buf: &mut Buffer,
    theme: &Theme,
    now: Instant,
    focused: bool,
    layout: Layout,
) -> Body {
    buf.set_style(area, Style::default());
    buf.set_line(
        area.x,
        area.y,
        &pane.header(now, theme, focused),
        area.width,
    );
    if area.height <= 1 {
        return Body::Kept { wants: None };
    }
    let body = Rect {
        y: area.y + 1,
        height: area.height - 1,
        ..area
    };
    // A running tool's clock moves without news.
    let changed = pane.changed || pane.transcript.cells.last().is_some_and(|c| c.is_live());
    if let Some(drawn) = pane.drawn.as_ref().filter(|drawn| drawn.area == body) {
        let due = layout.every.map(|every| drawn.at + every);
        let ready = changed && due.is_some_and(|due| due <= now);
        if ready && !layout.allowed {
            copy_cells(&drawn.cells, body, buf);
            return Body::Refused;
        }
        if !ready {
            copy_cells(&drawn.cells, body, buf);
            let wants = changed.then(|| due.unwrap_or(now).max(now));
            return Body::Kept { wants };
        }
    }
    // Enough of a streaming paragraph for the pane's height, and no more.
    pane.transcript.view.live_tail = Some(body.height);
    pane.transcript.render(body, buf, theme, now);
    pane.changed = false;
    let mut cells = Vec::with_capacity(usize::from(body.width) * usize::from(body.height));
    for y in body.top()..body.bottom() {
        for x in body.left()..body.right() {
            cells.push(buf[(x, y)].clone());
        }
    }
    pane.drawn = Some(Drawn {
        area: body,
        at: now,
        cells,
    });
    Body::LaidOut
}

/// Puts `cells` (row by row) back over `area`.
fn copy_cells(cells: &[ratatui::buffer::Cell], area: Rect, buf: &mut Buffer) {
    let width = usize::from(area.width);
    if width == 0 {
        return;
    }
    for (row, y) in cells.chunks(width).zip(area.top()..area.bottom()) {
        for (cell, x) in row.iter().zip(area.left()..) {
            buf[(x, y)] = cell.clone();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(n: u64) -> RunId {
        RunId::parse(&format!("run-{n:012x}")).unwrap()
    }

    #[test]
    fn a_run_is_followed_from_queued_to_folded_away() {
        let now = Instant::now();
        let mut panes = Panes::default();
        assert!(panes.started(run(1), now));
        assert!(!panes.started(run(1), now), "one pane per run");
        panes.status(
            &run(1),
            &json!({"state": "running", "agent": "explorer", "elapsed_s": 3, "session": "s-1"}),
            now,
        );
        let pane = &panes.list[0];
        assert_eq!(
            (pane.state.as_str(), pane.agent.as_str()),
            ("running", "explorer")
        );
        assert_eq!(pane.session.as_ref().map(SessionId::as_str), Some("s-1"));
        panes.status(
            &run(1),
            &json!({"state": "completed", "elapsed_s": 9, "result_path": "/r/result.md"}),
            now,
        );
        assert_eq!(panes.result(), Some(PathBuf::from("/r/result.md")));
        assert!(panes.tick(now + Duration::from_secs(1)));
        assert_eq!(panes.list.len(), 1, "it stays a moment");
        panes.tick(now + FOLD_AFTER);
        assert!(panes.list.is_empty(), "then folds away");
        assert_eq!(panes.result(), Some(PathBuf::from("/r/result.md")));
    }

    fn screen(buf: &Buffer) -> String {
        buf.content().iter().map(|cell| cell.symbol()).collect()
    }

    #[test]
    fn a_streaming_pane_is_laid_out_again_at_most_every_interval_and_never_in_a_held_frame() {
        let start = Instant::now();
        let theme = Theme::default();
        let area = Rect::new(0, 0, 40, 6);
        let mut panes = Panes::default();
        panes.started(run(1), start);
        panes.status(&run(1), &json!({"state": "running", "elapsed_s": 0}), start);
        let draw = |panes: &mut Panes, at: Instant| {
            panes.tick(at);
            let mut buf = Buffer::empty(area);
            panes.render_side(area, &mut buf, &theme, at);
            screen(&buf)
        };
        let say = |panes: &mut Panes, text: &str, at: Instant| {
            let delta = SessionEvent::TextDelta { text: text.into() };
            panes.event(&run(1), &delta, at);
            draw(panes, at)
        };
        assert!(say(&mut panes, "alpha", start).contains("alpha"));
        assert_eq!(panes.next_layout(), None);
        // News within the interval waits for it, and the frame it wants is named.
        let soon = start + RELAYOUT_EVERY / 5;
        assert!(!say(&mut panes, " beta", soon).contains("beta"));
        assert_eq!(panes.next_layout(), Some(start + RELAYOUT_EVERY));
        let later = start + RELAYOUT_EVERY;
        assert!(say(&mut panes, " gamma", later).contains("beta gamma"));
        assert_eq!(panes.next_layout(), None);
        // A held frame lays out nothing however old the layout, and asks for the next frame.
        let much_later = later + 4 * RELAYOUT_EVERY;
        panes.hold = true;
        let held = say(&mut panes, " delta", much_later);
        assert!(held.contains("gamma") && !held.contains("delta"));
        assert_eq!(panes.next_layout(), Some(much_later));
        panes.hold = false;
        assert!(draw(&mut panes, much_later).contains("delta"));
        // A pane with nothing new is drawn as it was, wanting no frame, its header current.
        let quiet = start + Duration::from_secs(4);
        let shown = draw(&mut panes, quiet);
        assert!(
            shown.contains("delta") && shown.contains("running 4.0s"),
            "{shown}"
        );
        assert_eq!(panes.next_layout(), None);
    }

    #[test]
    fn streaming_panes_are_laid_out_a_third_at_a_time() {
        let start = Instant::now();
        let theme = Theme::default();
        let area = Rect::new(0, 0, 40, 18);
        let mut panes = Panes::default();
        let draw = |panes: &mut Panes, word: &str, at: Instant| {
            panes.tick(at);
            let mut buf = Buffer::empty(area);
            panes.render_side(area, &mut buf, &theme, at);
            screen(&buf).matches(word).count()
        };
        for n in 0..6 {
            panes.started(run(n), start);
            let delta = SessionEvent::TextDelta {
                text: "first".into(),
            };
            panes.event(&run(n), &delta, start);
        }
        assert_eq!(
            draw(&mut panes, "first", start),
            6,
            "each pane's first drawing"
        );
        let say = |panes: &mut Panes, text: &str, at: Instant| {
            for n in 0..6 {
                let delta = SessionEvent::TextDelta { text: text.into() };
                panes.event(&run(n), &delta, at);
            }
        };
        // Frames as far apart as a layout's interval lay every pane out.
        say(&mut panes, " second", start);
        let mut at = start + RELAYOUT_EVERY;
        assert_eq!(draw(&mut panes, "second", at), 6);
        assert_eq!(panes.shows_news_at(&run(0), at), at + RELAYOUT_EVERY);
        // At 60 frames a second, a third of those due in each.
        say(&mut panes, " third", at);
        for shown in [0, 0, 2, 4, 6] {
            at += Duration::from_micros(16_667);
            assert_eq!(draw(&mut panes, "third", at), shown);
        }
        assert_eq!(panes.next_layout(), None);
        // Frames slower than the interval lay out everything that changed.
        say(&mut panes, " fourth", at);
        at += 3 * RELAYOUT_EVERY;
        assert_eq!(draw(&mut panes, "fourth", at), 6);
    }

    #[test]
    fn the_focus_cycles_through_the_panes_and_back_to_the_transcript() {
        let now = Instant::now();
        let mut panes = Panes::default();
        panes.focus_next();
        assert_eq!(panes.focus, None, "no pane, nothing to focus");
        panes.started(run(1), now);
        panes.started(run(2), now);
        panes.focus_next();
        panes.toggle_full();
        assert!(panes.full);
        panes.focus_next();
        assert_eq!(panes.focus, Some(1));
        panes.focus_next();
        assert_eq!((panes.focus, panes.full), (None, false));
        panes.focus_prev();
        assert_eq!(panes.focus, Some(1));
        // The focused pane folding away gives the focus back.
        panes.status(&run(2), &json!({"state": "failed"}), now);
        panes.tick(now + FOLD_AFTER);
        assert_eq!(panes.focus, None);
    }
}
