//! The resume picker with 100,000 sessions in 40 projects, against the goals: first frame
//! ≤ 50 ms, a query matching one session 90,000 deep shown ≤ 50 ms after its last
//! keystroke, RSS with the picker open ≤ 30 MiB.
//!
//! - `first frame`: `Picker::open` and the first render into a 120x40 `TestBackend`, in a
//!   project with 2,500 of the sessions, and in one with none.
//! - `index`: one scan of the search table into the in-memory index (what the picker's
//!   background thread does after opening), and its heap size.
//! - `match`: the unique query against the built index alone, on this thread.
//! - `query, warm`: the index built, in a picker that has not searched yet; the query typed
//!   in one burst (every keystroke but the last cancelled by the next, so the last one
//!   searches every session), then the time from the last keystroke until the matching row
//!   is in a rendered frame, the app woken by the picker's waker as a real one would be.
//! - `query, typed`: the same query typed at 60 ms a keystroke, a frame drawn after each
//!   (each keystroke's search finishes, and the next looks only at what it matched).
//! - `query, cold`: typed the moment the picker opens, so the index is built first.
//! - `rss`: VmRSS of the process with the store open, then with the picker open, its index
//!   built and the query's results on screen; VmHWM, the peak.
//!
//! The first run builds the database under `target/bench-data/picker-100000/` (100,000
//! durable commits, a few minutes) and then measures in a fresh process, so building leaves
//! nothing in the RSS. Run with `cargo bench --bench picker` (`-- --runs N`, default 15).

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};
use tern::domain::{Audience, ContentBlock, InputKind, Sender, SessionId, SessionKey};
use tern::store::{JournalEvent, SearchEntry, SearchSink, SessionMeta, Store, title_from_input};
use tern::tui::Theme;
use tern::tui::picker::index::{IndexBuilder, Scope, Search, run};
use tern::tui::picker::{Picker, PickerOutcome};

const SESSIONS: usize = 100_000;
const PROJECTS: usize = 40;
/// The position, counted from the most recent, of the one session the query matches.
const DEEP: usize = 90_000;
const QUERY: &str = "kumquat";
/// Part of the deep session's title that only its row shows.
const DEEP_TEXT: &str = "the kumquat";
/// Bump when the generated data changes, so an old database is built again.
const DATA_VERSION: &str = "1";

fn main() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/bench-data/picker-100000");
    let path = dir.join("tern.redb");
    let ready = dir.join("ready");
    if std::fs::read_to_string(&ready).ok().as_deref() != Some(DATA_VERSION) {
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("bench dir");
        eprintln!(
            "building a {SESSIONS}-session database under {} (once)",
            dir.display()
        );
        let started = Instant::now();
        build(&path);
        std::fs::write(&ready, DATA_VERSION).expect("mark ready");
        eprintln!("built in {:.0} s", started.elapsed().as_secs_f64());
        // Measure in a process that did not build, so the build's memory is not counted.
        let status = std::process::Command::new(std::env::current_exe().expect("own path"))
            .args(std::env::args().skip(1))
            .status()
            .expect("run the measurement");
        std::process::exit(status.code().unwrap_or(1));
    }
    let runs = std::env::args()
        .skip_while(|arg| arg != "--runs")
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(15);
    measure(&path, runs);
}

// --- the data ---------------------------------------------------------------------------

const VERBS: &[&str] = &[
    "fix",
    "add",
    "refactor",
    "investigate",
    "speed up",
    "document",
    "port",
    "remove",
    "rename",
    "test",
    "debug",
    "review",
    "explain",
    "migrate",
    "upgrade",
    "simplify",
    "split",
    "profile",
    "harden",
    "clean up",
];
const THINGS: &[&str] = &[
    "the flaky scheduler test",
    "retries in the provider client",
    "the markdown renderer",
    "the session index",
    "error messages for a bad config",
    "the login form",
    "the release workflow",
    "the cache eviction",
    "the websocket reconnect",
    "the CSV export",
    "the dark theme",
    "the build on macOS",
    "the database migration",
    "the rate limiter",
    "the search endpoint",
    "the onboarding emails",
    "the payment webhook",
    "the image upload",
    "the audit log",
    "the CLI help text",
    "the tree view",
    "the billing report",
    "the health check",
    "the memory leak in the worker",
    "the retry backoff",
];
const WHERE: &[&str] = &[
    "in src/session/actor.rs",
    "in the API server",
    "on the settings page",
    "in the nightly pipeline",
    "for the mobile app",
    "in the admin tool",
    "behind the feature flag",
    "in the shared library",
    "",
    "",
];
const DETAILS: &[&str] = &[
    "It fails about one run in ten on CI and never locally.",
    "The error says: thread 'main' panicked at 'called `Option::unwrap()` on a `None` value'.",
    "Keep the public API as it is; only the internals may change.",
    "We need this before the release on Friday.",
    "Here is the stack trace from production, it started after the last deploy.",
    "Add tests that cover the edge cases, in particular empty input and very long lines.",
    "The current version takes several seconds on a large account.",
    "Please explain what you change and why before editing files.",
    "It works on Linux but the Windows build breaks with a path error.",
    "Users report that the page hangs when they click twice.",
    "Look at how the other modules handle this and follow the same pattern.",
    "Measure before and after and tell me the numbers.",
];
const TITLES: &[&str] = &[
    "Scheduler race on CI",
    "Provider retries",
    "Markdown tables",
    "Index performance",
    "Config errors",
    "Release workflow",
    "Cache eviction bug",
    "Websocket reconnect",
    "Theme colours",
    "Migration plan",
];
const PROJECT_NAMES: &[&str] = &[
    "tern",
    "parser",
    "webapp",
    "infra",
    "billing",
    "mobile",
    "docs",
    "website",
    "cli",
    "analytics",
    "auth",
    "gateway",
    "worker",
    "scheduler",
    "search",
    "notifications",
    "payments",
    "admin",
    "reports",
    "design-system",
    "sdk-python",
    "sdk-rust",
    "ml-models",
    "data-pipeline",
    "monitoring",
    "terraform",
    "helm-charts",
    "blog",
    "landing",
    "experiments",
    "dotfiles",
    "game",
    "compiler",
    "editor",
    "plugins",
    "api",
    "frontend",
    "backend",
    "shared",
    "tools",
];

fn project(i: usize) -> String {
    format!("/home/dev/src/{}", PROJECT_NAMES[i % PROJECTS])
}

/// A first input and its title: most titles are taken from the input, some chosen.
fn texts(rng: &mut fastrand::Rng) -> (String, String) {
    let mut input = format!(
        "{} {} {}",
        VERBS[rng.usize(..VERBS.len())],
        THINGS[rng.usize(..THINGS.len())],
        WHERE[rng.usize(..WHERE.len())],
    )
    .trim()
    .to_owned();
    input.push('.');
    for _ in 0..rng.usize(0..4) {
        input.push(' ');
        input.push_str(DETAILS[rng.usize(..DETAILS.len())]);
    }
    let input = format!("{}{}", input[..1].to_uppercase(), &input[1..]);
    let title = if rng.usize(0..10) < 3 {
        TITLES[rng.usize(..TITLES.len())].to_owned()
    } else {
        title_from_input(&input)
    };
    (input, title)
}

fn build(path: &Path) {
    for word in VERBS
        .iter()
        .chain(THINGS)
        .chain(WHERE)
        .chain(DETAILS)
        .chain(TITLES)
    {
        assert!(
            !word.contains(['q', 'Q']),
            "the unique query must match only the deep session: {word}"
        );
    }
    let store = Store::open(path).expect("open store");
    let mut rng = fastrand::Rng::with_seed(7);
    let deep = SESSIONS - 1 - DEEP;
    let base = jiff::Timestamp::now().as_millisecond() - SESSIONS as i64 * 60_000;
    for i in 0..SESSIONS {
        let id = SessionId::from_string(format!("0190a000-0000-7000-8000-{i:012}"));
        let (input, title) = if i == deep {
            let input = "Where did the kumquat feature flag go? It was in the settings \
                         module last week."
                .to_owned();
            let title = title_from_input(&input);
            (input, title)
        } else {
            texts(&mut rng)
        };
        let at = base + i as i64 * 60_000;
        store
            .create_session(&SessionMeta {
                title,
                first_input: input,
                updated_at_ms: at,
                last_activity_ms: at,
                event_count: 40,
                input_count: 6,
                message_count: 12 + (i % 30) as u64,
                transcript_bytes: 48_000,
                provider: "anthropic".into(),
                model: "claude-sonnet-4-5".into(),
                ..SessionMeta::new(
                    id.clone(),
                    SessionKey::cli(&id),
                    PathBuf::from(project(i)),
                    at - 3_600_000,
                )
            })
            .expect("create session");
        if i % 10_000 == 0 {
            eprintln!("  {i} sessions");
        }
    }
    // The newest sessions get a conversation, for the preview.
    for i in SESSIONS - 30..SESSIONS {
        let id = SessionId::from_string(format!("0190a000-0000-7000-8000-{i:012}"));
        let events = [
            JournalEvent::InputAccepted {
                sender: Sender::local_user(),
                audience: Audience::Personal,
                kind: InputKind::Person,
                text: "Can you also add a test for the empty case?".into(),
            },
            JournalEvent::AssistantMessage {
                model: "claude-sonnet-4-5".into(),
                content: vec![ContentBlock::Text {
                    text: "Done: the new test covers an empty list and a list of one.".into(),
                }],
            },
            JournalEvent::completed(),
        ];
        store.append_batch(&id, &events).expect("append");
    }
}

// --- the measurements -------------------------------------------------------------------

fn measure(path: &Path, runs: usize) {
    let rss_before_store = rss_kib("VmRSS");
    let store = Arc::new(Store::open(path).expect("open store"));
    let rss_store = rss_kib("VmRSS");
    let deep = SESSIONS - 1 - DEEP;
    let deep_project = PathBuf::from(project(deep));
    println!(
        "picker: {SESSIONS} sessions in {PROJECTS} projects; the query `{QUERY}` matches one, \
         {DEEP} deep"
    );

    // RSS first, before the timing runs leave anything behind.
    let mut picker = open(&store, &deep_project);
    assert!(picker.settle(Duration::from_secs(60)), "index built");
    let (wake, woken) = waker(&mut picker);
    type_burst(&mut picker, QUERY);
    let shown = until_shown(&mut picker, &woken);
    let rss_open = rss_kib("VmRSS");
    let index_bytes = picker.search_index_bytes().unwrap_or(0);
    println!(
        "rss: {:.1} MiB with the store open ({:.1} MiB before), {:.1} MiB with the picker open \
         and the query's results shown (+{:.1} MiB; the index holds {:.1} MiB); peak {:.1} MiB",
        mib(rss_store),
        mib(rss_before_store),
        mib(rss_open),
        mib(rss_open.saturating_sub(rss_store)),
        index_bytes as f64 / (1024.0 * 1024.0),
        mib(rss_kib("VmHWM")),
    );
    println!("  (first query in this process shown after {})", ms(shown));
    drop(wake);
    drop(picker);

    let mut first_frames = Vec::new();
    for _ in 0..runs {
        let started = Instant::now();
        let mut picker = open(&store, &deep_project);
        let frame = draw(&mut picker);
        first_frames.push(started.elapsed());
        assert!(frame.contains("Resume a session"), "{frame}");
        drop(picker);
    }
    report("first frame (open + render 120x40)", &mut first_frames);
    // A project with no sessions: the first page looks at its bounded share of the index
    // and the frame says it is still loading.
    let mut empty_frames = Vec::new();
    let nowhere = PathBuf::from("/home/dev/src/brand-new");
    for _ in 0..runs {
        let started = Instant::now();
        let mut picker = open(&store, &nowhere);
        let frame = draw(&mut picker);
        empty_frames.push(started.elapsed());
        assert!(frame.contains("Resume a session"), "{frame}");
        drop(picker);
    }
    report(
        "first frame in a project without sessions",
        &mut empty_frames,
    );

    let mut builds = Vec::new();
    let mut index = None;
    for _ in 0..runs.min(7) {
        let started = Instant::now();
        let mut builder = Builder(IndexBuilder::new());
        assert!(store.scan_search(&mut builder).expect("scan"));
        let built = builder.0.finish();
        builds.push(started.elapsed());
        index = Some(built);
    }
    let index = index.expect("built");
    report(
        &format!(
            "index: scan and build ({} entries, {:.1} MiB)",
            index.len(),
            index.heap_bytes() as f64 / (1024.0 * 1024.0)
        ),
        &mut builds,
    );

    let mut matches = Vec::new();
    let scope = Scope::default();
    for _ in 0..runs {
        let started = Instant::now();
        let mut search = Search::new(&index, QUERY, &scope, None);
        assert!(run(&mut search, &index, || false, |_| {}));
        let (hits, _) = search.finish();
        matches.push(started.elapsed());
        assert_eq!(hits.len(), 1);
    }
    report("match: the query against the index alone", &mut matches);
    let mut common = Vec::new();
    let mut found = 0;
    for _ in 0..runs.min(7) {
        let started = Instant::now();
        let mut search = Search::new(&index, "fix test", &scope, None);
        assert!(run(&mut search, &index, || false, |_| {}));
        found = search.finish().0.len();
        common.push(started.elapsed());
    }
    report(
        &format!("match: `fix test`, a common query ({found} matches)"),
        &mut common,
    );
    drop(index);

    // A picker of its own for each run, so no earlier search narrows this one.
    let mut warm = Vec::new();
    for _ in 0..runs {
        let mut picker = open(&store, &deep_project);
        assert!(picker.settle(Duration::from_secs(60)));
        let (_wake, woken) = waker(&mut picker);
        picker.handle_key(key(KeyCode::Tab));
        draw(&mut picker);
        type_burst(&mut picker, QUERY);
        warm.push(until_shown(&mut picker, &woken));
    }
    report("query, warm: last keystroke to row on screen", &mut warm);
    let mut picker = open(&store, &deep_project);
    assert!(picker.settle(Duration::from_secs(60)));
    let (_wake, woken) = waker(&mut picker);
    picker.handle_key(key(KeyCode::Tab));
    let mut typed = Vec::new();
    for _ in 0..runs.min(7) {
        clear(&mut picker);
        for c in QUERY.chars().take(QUERY.len() - 1) {
            picker.handle_key(key(KeyCode::Char(c)));
            let until = Instant::now() + Duration::from_millis(60);
            while Instant::now() < until {
                let _ = woken.recv_timeout(until.saturating_duration_since(Instant::now()));
                if picker.poll() {
                    draw(&mut picker);
                }
            }
        }
        let last = QUERY.chars().last().expect("a query");
        picker.handle_key(key(KeyCode::Char(last)));
        let started = Instant::now();
        wait_for_row(&mut picker, &woken);
        typed.push(started.elapsed());
    }
    report(
        "query, typed at 60 ms a key: last keystroke to row",
        &mut typed,
    );
    drop(picker);

    let mut cold = Vec::new();
    for _ in 0..runs.min(7) {
        let mut picker = open(&store, &deep_project);
        let (_wake, woken) = waker(&mut picker);
        draw(&mut picker);
        picker.handle_key(key(KeyCode::Tab));
        type_burst(&mut picker, QUERY);
        let shown = until_shown(&mut picker, &woken);
        cold.push(shown);
        assert!(matches!(
            picker.handle_key(key(KeyCode::Enter)),
            PickerOutcome::Resume(_)
        ));
    }
    report(
        "query, cold (typed as the picker opens): last keystroke to row",
        &mut cold,
    );
}

/// Hands a scan to an index builder (the bench's own, to time the build alone).
struct Builder(IndexBuilder);

impl SearchSink for Builder {
    fn begin(&mut self, sessions: u64) {
        self.0.begin(sessions);
    }
    fn entry(&mut self, entry: SearchEntry<'_>) -> ControlFlow<()> {
        self.0.entry(entry)
    }
    fn activity(&mut self, at_ms: i64, id: &str) -> ControlFlow<()> {
        self.0.activity(at_ms, id)
    }
}

fn open(store: &Arc<Store>, project: &Path) -> Picker {
    Picker::open(store.clone(), project.to_owned(), jiff::Timestamp::now())
}

/// A waker that wakes this thread, as an app's event loop would be woken.
fn waker(picker: &mut Picker) -> (Arc<mpsc::SyncSender<()>>, mpsc::Receiver<()>) {
    let (tx, rx) = mpsc::sync_channel(1);
    let tx = Arc::new(tx);
    let sender = tx.clone();
    picker.set_waker(Arc::new(move || {
        let _ = sender.try_send(());
    }));
    (tx, rx)
}

fn key(code: KeyCode) -> KeyEvent {
    KeyEvent::new(code, KeyModifiers::NONE)
}

fn clear(picker: &mut Picker) {
    picker.handle_key(KeyEvent::new(KeyCode::Char('u'), KeyModifiers::CONTROL));
    assert!(picker.settle(Duration::from_secs(60)));
    draw(picker);
}

fn type_burst(picker: &mut Picker, text: &str) {
    for c in text.chars() {
        picker.handle_key(key(KeyCode::Char(c)));
    }
}

/// Time from now (the last keystroke) until the deep session's row is drawn.
fn until_shown(picker: &mut Picker, woken: &mpsc::Receiver<()>) -> Duration {
    let started = Instant::now();
    wait_for_row(picker, woken);
    started.elapsed()
}

fn wait_for_row(picker: &mut Picker, woken: &mpsc::Receiver<()>) {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut frame = draw(picker);
    while !frame.contains(DEEP_TEXT) {
        assert!(Instant::now() < deadline, "the row never showed:\n{frame}");
        let _ = woken.recv_timeout(Duration::from_millis(100));
        if picker.poll() {
            frame = draw(picker);
        }
    }
}

/// Renders a 120x40 frame and returns it as text.
fn draw(picker: &mut Picker) -> String {
    let mut terminal = Terminal::new(TestBackend::new(120, 40)).expect("terminal");
    let theme = Theme::default();
    terminal
        .draw(|frame| picker.render(frame, frame.area(), &theme))
        .expect("draw");
    let buffer = terminal.backend().buffer();
    buffer.content().iter().map(|cell| cell.symbol()).collect()
}

fn rss_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

fn ms(duration: Duration) -> String {
    format!("{:.2} ms", duration.as_secs_f64() * 1000.0)
}

fn report(what: &str, samples: &mut [Duration]) {
    samples.sort();
    let median = samples[samples.len() / 2];
    let (min, max) = (samples[0], samples[samples.len() - 1]);
    println!(
        "{what}: median {} (min {}, max {}, {} runs)",
        ms(median),
        ms(min),
        ms(max),
        samples.len()
    );
}
