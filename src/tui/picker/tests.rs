//! The picker against a real store in a temp dir: what it lists and finds, the keys, and
//! snapshots of whole screens (ratatui's `TestBackend`, the buffer as text) at 80x24 and
//! 120x40, empty, searching, and squeezed into 20x5.

use super::*;
use crate::domain::{Audience, ContentBlock, InputKind, Sender, SessionKey};
use crate::gateway::catalog::JournalEvent;
use crate::gateway::catalog::filled::Filled;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::buffer::{Buffer, CellWidth};

const MINUTE: i64 = 60_000;
const HOUR: i64 = 60 * MINUTE;
const DAY: i64 = 24 * HOUR;

/// Long enough for any background step on a loaded machine; tests never wait this long
/// unless something is broken.
const SETTLE: Duration = Duration::from_secs(20);

struct Fixture {
    _dir: tempfile::TempDir,
    store: Filled,
    /// The time the picker counts "ago" from; stored sessions are placed before it.
    now_ms: i64,
}

/// A stored session as a test describes it.
struct Session<'a> {
    id: &'a str,
    project: &'a str,
    title: &'a str,
    first_input: &'a str,
    ago_ms: i64,
    messages: u64,
    model: &'a str,
    archived: bool,
    /// The session's key; a terminal's own (`cli:<id>`) when empty.
    key: &'a str,
}

impl Default for Session<'_> {
    fn default() -> Self {
        Session {
            id: "",
            project: "/work/tern",
            title: "",
            first_input: "",
            ago_ms: 0,
            messages: 0,
            model: "",
            archived: false,
            key: "",
        }
    }
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = Filled::open(&dir.path().join("tern.redb"));
        Fixture {
            _dir: dir,
            store,
            now_ms: jiff::Timestamp::now().as_millisecond(),
        }
    }

    fn add(&self, session: Session<'_>) {
        let id = SessionId::from_string(session.id);
        let at = self.now_ms - session.ago_ms;
        let meta = SessionMeta {
            title: session.title.into(),
            first_input: session.first_input.into(),
            updated_at_ms: at,
            last_activity_ms: at,
            message_count: session.messages,
            model: session.model.into(),
            archived_at_ms: session.archived.then_some(at),
            ..SessionMeta::new(
                id.clone(),
                match session.key {
                    "" => SessionKey::cli(&id),
                    key => SessionKey::parse(key).expect("a session key"),
                },
                session.project.into(),
                at - HOUR,
            )
        };
        self.store.create(&meta);
    }

    /// A conversation appended to `id`, which makes it the most recently used session
    /// ("just now", since it is appended after `now_ms`).
    fn converse(&self, id: &str, turns: &[(&str, &str)]) {
        let id = SessionId::from_string(id);
        for (question, answer) in turns {
            let events = [
                JournalEvent::InputAccepted {
                    sender: Sender::local_user(),
                    audience: Audience::Personal,
                    kind: InputKind::Person,
                    text: (*question).into(),
                },
                JournalEvent::AssistantMessage {
                    model: "claude-sonnet-4-5".into(),
                    content: vec![ContentBlock::Text {
                        text: (*answer).into(),
                    }],
                },
                JournalEvent::completed(),
            ];
            self.store.append(&id, &events);
        }
    }

    fn open(&self, project: &str) -> Picker {
        let now = jiff::Timestamp::from_millisecond(self.now_ms).expect("timestamp");
        Picker::open(self.store.catalog(), project.into(), now)
    }

    /// Opens the picker and waits until everything it started reading has arrived.
    fn settled(&self, project: &str) -> Picker {
        let mut picker = self.open(project);
        assert!(picker.settle(SETTLE), "background work finished");
        picker
    }
}

/// Sessions in two projects, one archived, one untitled, one with a wide title, and a
/// conversation in the most recent.
fn sample() -> Fixture {
    let fixture = Fixture::new();
    let sessions = [
        Session {
            id: "s-flaky",
            title: "Fix the flaky scheduler test",
            first_input: "Fix the flaky scheduler test",
            ago_ms: 30 * 1000,
            ..Session::default()
        },
        Session {
            id: "s-retries",
            title: "Add retries to the provider client",
            first_input: "Add retries to the provider client, with jitter",
            ago_ms: 5 * MINUTE,
            messages: 14,
            model: "gpt-5",
            ..Session::default()
        },
        Session {
            id: "s-markdown",
            title: "Port the markdown renderer to pulldown-cmark 0.13",
            first_input: "Port the markdown renderer to pulldown-cmark 0.13",
            ago_ms: 2 * HOUR,
            messages: 32,
            model: "claude-sonnet-4-5",
            ..Session::default()
        },
        Session {
            id: "s-parser",
            project: "/work/parser",
            title: "Handle nested comments",
            first_input: "the parser chokes on nested /* comments */",
            ago_ms: 3 * HOUR,
            messages: 6,
            model: "claude-opus-4-1",
            ..Session::default()
        },
        Session {
            id: "s-archived",
            title: "Old experiment with tokio-console",
            first_input: "try tokio-console on the actor",
            ago_ms: DAY,
            messages: 3,
            model: "claude-sonnet-4-5",
            archived: true,
            ..Session::default()
        },
        Session {
            id: "s-index",
            title: "Speed up the session index",
            first_input: "listing 100k sessions takes seconds; make it fast",
            ago_ms: 3 * DAY,
            messages: 120,
            model: "claude-sonnet-4-5",
            ..Session::default()
        },
        Session {
            id: "s-empty",
            ago_ms: 6 * DAY,
            ..Session::default()
        },
        Session {
            id: "s-wide",
            title: "日本語のタイトルと\ttabs\nand a very long tail that goes on and on past any column",
            first_input: "日本語",
            ago_ms: 70 * DAY,
            messages: 1,
            model: "a-model-name-longer-than-its-column",
            ..Session::default()
        },
    ];
    for session in sessions {
        fixture.add(session);
    }
    fixture.converse(
        "s-flaky",
        &[
            (
                "Fix the flaky scheduler test: it fails about one run in ten on CI.",
                "The race is in `Scheduler::tick`: the timer can fire before the queue is \
                 registered. I moved the registration ahead of the first await.",
            ),
            (
                "Does it still pass with --release?",
                "Yes: 500 runs in a row pass in both profiles.",
            ),
        ],
    );
    fixture
}

/// The buffer as lines of text, each cut at its last non-blank cell.
fn text(buffer: &Buffer) -> String {
    let area = buffer.area;
    let mut lines = Vec::new();
    for y in area.top()..area.bottom() {
        let mut line = String::new();
        let mut skip = 0;
        for x in area.left()..area.right() {
            if skip > 0 {
                skip -= 1;
                continue;
            }
            let symbol = buffer[(x, y)].symbol();
            skip = usize::from(symbol.cell_width()).saturating_sub(1);
            line.push_str(symbol);
        }
        lines.push(line.trim_end().to_owned());
    }
    lines.join("\n")
}

fn screen(picker: &mut Picker, width: u16, height: u16) -> String {
    let mut terminal = Terminal::new(TestBackend::new(width, height)).expect("terminal");
    let theme = Theme::default();
    terminal
        .draw(|frame| picker.render(frame, frame.area(), &theme))
        .expect("draw");
    text(terminal.backend().buffer())
}

fn key(code: KeyCode) -> KeyEvent {
    KeyEvent::new(code, KeyModifiers::NONE)
}

fn ctrl(c: char) -> KeyEvent {
    KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL)
}

fn type_text(picker: &mut Picker, text: &str) {
    for c in text.chars() {
        assert_eq!(
            picker.handle_key(key(KeyCode::Char(c))),
            PickerOutcome::Continue
        );
    }
}

/// The ids listed, top first, as far as the picker has rows (at most `limit`).
fn listed(picker: &Picker, limit: usize) -> Vec<String> {
    (0..picker.row_count().min(limit))
        .filter_map(|row| picker.row_id(row))
        .collect()
}

#[test]
fn the_list_shows_this_projects_sessions_at_80x24() {
    let fixture = sample();
    let mut picker = fixture.settled("/work/tern");
    insta::assert_snapshot!("list_80x24", screen(&mut picker, 80, 24));
}

#[test]
fn the_list_shows_this_projects_sessions_at_120x40() {
    let fixture = sample();
    let mut picker = fixture.settled("/work/tern");
    insta::assert_snapshot!("list_120x40", screen(&mut picker, 120, 40));
}

#[test]
fn a_search_shows_matches_from_every_project_at_80x24_and_120x40() {
    let fixture = sample();
    let mut picker = fixture.settled("/work/tern");
    picker.handle_key(key(KeyCode::Tab));
    type_text(&mut picker, "parser");
    assert!(picker.settle(SETTLE));
    insta::assert_snapshot!("search_80x24", screen(&mut picker, 80, 24));
    insta::assert_snapshot!("search_120x40", screen(&mut picker, 120, 40));
}

#[test]
fn a_search_with_matches_only_elsewhere_says_so() {
    let fixture = sample();
    let mut picker = fixture.settled("/work/tern");
    type_text(&mut picker, "comments");
    assert!(picker.settle(SETTLE));
    insta::assert_snapshot!("search_elsewhere_80x24", screen(&mut picker, 80, 24));
    assert_eq!(
        picker.handle_key(key(KeyCode::Enter)),
        PickerOutcome::Continue
    );
    picker.handle_key(key(KeyCode::Tab));
    assert!(picker.settle(SETTLE));
    assert_eq!(
        picker.handle_key(key(KeyCode::Enter)),
        PickerOutcome::Resume(SessionId::from_string("s-parser"))
    );
}

#[test]
fn a_chat_channels_session_is_listed_with_its_channel() {
    let fixture = Fixture::new();
    fixture.add(Session {
        id: "s-slack",
        title: "Why is CI red",
        key: "slack:T1/C1/1700000000.0001",
        messages: 4,
        ..Session::default()
    });
    fixture.add(Session {
        id: "s-local",
        title: "Typed here",
        ago_ms: MINUTE,
        ..Session::default()
    });
    let mut picker = fixture.settled("/work/tern");
    let shown = screen(&mut picker, 100, 12);
    assert!(shown.contains("slack · Why is CI red"), "{shown}");
    assert!(
        shown.contains("Typed here") && !shown.contains("· Typed here"),
        "{shown}"
    );
}

#[test]
fn an_empty_store_says_how_to_start() {
    let fixture = Fixture::new();
    let mut picker = fixture.settled("/work/tern");
    insta::assert_snapshot!("empty_80x24", screen(&mut picker, 80, 24));
    insta::assert_snapshot!("empty_120x40", screen(&mut picker, 120, 40));
    assert_eq!(
        picker.handle_key(key(KeyCode::Enter)),
        PickerOutcome::Continue
    );
    assert_eq!(picker.handle_key(ctrl('n')), PickerOutcome::New);
}

#[test]
fn a_project_without_sessions_points_to_the_others() {
    let fixture = sample();
    let mut picker = fixture.settled("/work/new-project");
    let shown = screen(&mut picker, 80, 24);
    assert!(
        shown.contains("No sessions in this project yet."),
        "{shown}"
    );
    picker.handle_key(key(KeyCode::Tab));
    assert!(picker.settle(SETTLE));
    assert_eq!(listed(&picker, 3), ["s-flaky", "s-retries", "s-markdown"]);
}

#[test]
fn a_tiny_screen_draws_without_panicking() {
    let fixture = sample();
    let mut picker = fixture.settled("/work/tern");
    insta::assert_snapshot!("tiny_20x5", screen(&mut picker, 20, 5));
    type_text(&mut picker, "flaky");
    assert!(picker.settle(SETTLE));
    for (width, height) in [(1, 1), (2, 3), (5, 2), (20, 5), (40, 8), (200, 3), (3, 60)] {
        screen(&mut picker, width, height);
    }
    // An area smaller than the frame, and one partly outside it.
    let mut terminal = Terminal::new(TestBackend::new(30, 10)).expect("terminal");
    let theme = Theme::default();
    terminal
        .draw(|frame| {
            picker.render(frame, Rect::new(5, 5, 10, 3), &theme);
            picker.render(frame, Rect::new(25, 8, 40, 40), &theme);
            picker.render(frame, Rect::new(0, 0, 0, 0), &theme);
        })
        .expect("draw");
}

#[test]
fn keys_move_toggle_and_choose() {
    let fixture = sample();
    let mut picker = fixture.settled("/work/tern");
    assert_eq!(
        listed(&picker, 10),
        [
            "s-flaky",
            "s-retries",
            "s-markdown",
            "s-index",
            "s-empty",
            "s-wide"
        ],
        "this project, archived left out, newest first"
    );
    screen(&mut picker, 80, 24);
    picker.handle_key(key(KeyCode::Down));
    picker.handle_key(key(KeyCode::Down));
    assert_eq!(
        picker.selected(),
        Some(SessionId::from_string("s-markdown"))
    );
    picker.handle_key(key(KeyCode::Up));
    assert_eq!(picker.selected(), Some(SessionId::from_string("s-retries")));
    picker.handle_key(key(KeyCode::End));
    assert_eq!(picker.selected(), Some(SessionId::from_string("s-wide")));
    picker.handle_key(key(KeyCode::Down));
    assert_eq!(
        picker.selected(),
        Some(SessionId::from_string("s-wide")),
        "stays at the end"
    );
    picker.handle_key(key(KeyCode::Home));
    picker.handle_key(key(KeyCode::PageDown));
    assert_eq!(picker.selected(), Some(SessionId::from_string("s-wide")));
    picker.handle_key(key(KeyCode::PageUp));
    assert_eq!(picker.selected(), Some(SessionId::from_string("s-flaky")));

    picker.handle_key(ctrl('a'));
    assert!(picker.settle(SETTLE));
    assert!(listed(&picker, 10).contains(&"s-archived".to_owned()));
    picker.handle_key(ctrl('a'));
    picker.handle_key(key(KeyCode::Tab));
    assert!(listed(&picker, 10).contains(&"s-parser".to_owned()));
    picker.handle_key(key(KeyCode::Tab));
    assert!(!listed(&picker, 10).contains(&"s-parser".to_owned()));

    picker.handle_key(key(KeyCode::Down));
    assert_eq!(
        picker.handle_key(key(KeyCode::Enter)),
        PickerOutcome::Resume(SessionId::from_string("s-retries"))
    );
    assert_eq!(picker.handle_key(ctrl('n')), PickerOutcome::New);
    assert_eq!(picker.handle_key(key(KeyCode::Esc)), PickerOutcome::Cancel);
    assert_eq!(picker.handle_key(ctrl('c')), PickerOutcome::Cancel);
    let release = KeyEvent::new_with_kind(KeyCode::Esc, KeyModifiers::NONE, KeyEventKind::Release);
    assert_eq!(picker.handle_key(release), PickerOutcome::Continue);
}

#[test]
fn the_query_is_edited_with_backspace_and_ctrl_w_and_ctrl_u() {
    let fixture = sample();
    let mut picker = fixture.settled("/work/tern");
    type_text(&mut picker, "flaky sched");
    picker.handle_key(key(KeyCode::Backspace));
    assert_eq!(picker.query(), "flaky sche");
    picker.handle_key(ctrl('w'));
    assert_eq!(picker.query(), "flaky ");
    picker.handle_key(ctrl('u'));
    assert_eq!(picker.query(), "");
    picker.paste("flaky\nsched");
    assert_eq!(picker.query(), "flaky sched");
    let alt_gr = KeyEvent::new(
        KeyCode::Char('@'),
        KeyModifiers::CONTROL | KeyModifiers::ALT,
    );
    picker.handle_key(alt_gr);
    picker.handle_key(KeyEvent::new(KeyCode::Char('x'), KeyModifiers::ALT));
    assert_eq!(picker.query(), "flaky sched@");
    assert!(picker.settle(SETTLE));
    assert_eq!(listed(&picker, 5), Vec::<String>::new());
    picker.handle_key(ctrl('u'));
    assert!(picker.settle(SETTLE));
    assert_eq!(
        listed(&picker, 2),
        ["s-flaky", "s-retries"],
        "back to the list"
    );
}

/// Many sessions in one project, the one at `deep` (from the newest) with a unique word.
fn many(count: usize, deep: usize) -> Fixture {
    let fixture = Fixture::new();
    for i in 0..count {
        let id = format!("m-{i:05}");
        let input = if i == deep {
            "where did the quokka go".to_owned()
        } else {
            format!("task {i}: tidy the build")
        };
        fixture.add(Session {
            id: &id,
            title: &input,
            first_input: &input,
            ago_ms: i as i64 * MINUTE,
            messages: 2,
            ..Session::default()
        });
    }
    fixture
}

#[test]
fn the_search_covers_sessions_far_below_the_first_page() {
    let fixture = many(1000, 900);
    let mut picker = fixture.open("/work/tern");
    // Typed at once, before the index is built: the query waits for it.
    type_text(&mut picker, "quokka");
    assert!(picker.settle(SETTLE));
    assert_eq!(listed(&picker, 5), ["m-00900"]);
    let shown = screen(&mut picker, 80, 24);
    assert!(shown.contains("where did the quokka go"), "{shown}");
    assert!(shown.contains("1 match"), "{shown}");
}

#[test]
fn only_the_newest_query_is_shown() {
    let fixture = many(1000, 900);
    let mut picker = fixture.settled("/work/tern");
    for query in ["t", "ta", "tas", "task 1", "task 12", "task 129"] {
        picker.handle_key(ctrl('u'));
        type_text(&mut picker, query);
        picker.poll();
    }
    assert!(picker.settle(SETTLE));
    let found = listed(&picker, 100);
    assert!(!found.is_empty());
    assert_eq!(
        found[0], "m-00129",
        "the best match of the last query first: {found:?}"
    );
    for id in &found {
        let n: usize = id[2..].parse().unwrap();
        let text = format!("task {n}: tidy the build");
        assert!(
            text.contains('1') && text.contains('2') && text.contains('9'),
            "{id} cannot match `task 129`"
        );
    }
}

#[test]
fn the_end_key_reaches_the_oldest_session_without_reading_every_entry() {
    let fixture = many(1000, 0);
    let mut picker = fixture.settled("/work/tern");
    screen(&mut picker, 80, 24);
    picker.handle_key(key(KeyCode::End));
    assert_eq!(picker.selected(), Some(SessionId::from_string("m-00999")));
    let shown = screen(&mut picker, 80, 24);
    assert!(shown.contains("task 999"), "{shown}");
    assert!(picker.metas.len() < 100, "only the rows drawn were read");
}

#[test]
fn the_first_page_is_listed_before_the_index_is_built() {
    let fixture = many(200, 0);
    let picker = fixture.open("/work/tern");
    // Whatever the search thread has done by now, the first page is there.
    assert!(picker.row_count() >= FIRST_PAGE.min(200));
    assert_eq!(listed(&picker, 2), ["m-00000", "m-00001"]);
}

#[test]
fn the_preview_follows_the_selection() {
    let fixture = sample();
    fixture.converse("s-retries", &[("and cap the backoff at 30 s", "Capped.")]);
    let mut picker = fixture.settled("/work/tern");
    assert_eq!(listed(&picker, 2), ["s-retries", "s-flaky"]);
    let shown = screen(&mut picker, 120, 40);
    assert!(
        shown.contains("you  and cap the backoff at 30 s"),
        "{shown}"
    );
    assert!(shown.contains("tern Capped."), "{shown}");
    picker.handle_key(key(KeyCode::Down));
    assert!(picker.settle(SETTLE));
    let shown = screen(&mut picker, 120, 40);
    assert!(
        shown.contains("tern Yes: 500 runs in a row pass"),
        "{shown}"
    );
    picker.handle_key(key(KeyCode::Down));
    assert!(picker.settle(SETTLE));
    let shown = screen(&mut picker, 120, 40);
    assert!(shown.contains("no messages yet"), "{shown}");
}
