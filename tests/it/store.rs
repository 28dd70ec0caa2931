//! The session store against a real redb file in a temp dir: journal order and seq, index
//! upkeep, listing and lookup, reopening, the lock (in this process and from a second one),
//! and damaged files, which must be refused and left byte-for-byte as they were.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use tern::domain::{Audience, ContentBlock, ErrorCategory, Sender, SessionId, SessionKey, Usage};
use tern::store::{JournalEvent, SessionMeta, Store, StoreError};

/// A temp dir with the database path inside a not-yet-existing folder, so `open` must create it.
struct Db {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

impl Db {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("data").join("tern.redb");
        Self { _dir: dir, path }
    }

    fn open(&self) -> Store {
        Store::open(&self.path).expect("open store")
    }
}

fn meta(id: &str, project: &str, updated_at_ms: i64) -> SessionMeta {
    let id = SessionId::from_string(id);
    SessionMeta::new(
        id.clone(),
        SessionKey::cli(&id),
        PathBuf::from(project),
        updated_at_ms,
    )
}

fn input(text: &str) -> JournalEvent {
    JournalEvent::InputAccepted {
        sender: Sender {
            id: "local".into(),
            name: "dev".into(),
            automated: false,
            trusted: true,
        },
        audience: Audience::Personal,
        kind: tern::domain::InputKind::Person,
        text: text.into(),
    }
}

fn reply(model: &str, text: &str) -> JournalEvent {
    JournalEvent::AssistantMessage {
        model: model.into(),
        content: vec![ContentBlock::Text { text: text.into() }],
    }
}

fn id(text: &str) -> SessionId {
    SessionId::from_string(text)
}

/// Ids of `metas`, in order, for compact assertions.
fn ids(metas: &[SessionMeta]) -> Vec<&str> {
    metas.iter().map(|m| m.id.as_str()).collect()
}

/// The events of a session's journal with their seqs.
fn check_journal(store: &Store, session: &str, expected: &[(u64, &JournalEvent)]) {
    let records = store.load(&id(session)).expect("load");
    let got: Vec<(u64, &JournalEvent)> = records.iter().map(|r| (r.seq, &r.event)).collect();
    assert_eq!(got, expected, "journal of {session}");
}

/// Opening `path` fails as `Corrupt` with a message a user can act on, and the file keeps
/// exactly the bytes it had.
fn check_refused_untouched(path: &Path, detail_part: &str) {
    let before = std::fs::read(path).expect("read before");
    let err = Store::open(path).expect_err("a damaged file must be refused");
    let StoreError::Corrupt { detail, .. } = &err else {
        panic!("expected Corrupt, got {err:?}");
    };
    assert!(
        detail.contains(detail_part),
        "detail {detail:?} lacks {detail_part:?}"
    );
    let message = err.to_string();
    for part in [
        "is damaged or is not a tern database",
        "left untouched",
        &format!("mv {} {}.bak", path.display(), path.display()),
    ] {
        assert!(message.contains(part), "message {message:?} lacks {part:?}");
    }
    let after = std::fs::read(path).expect("read after");
    assert!(before == after, "the file's bytes changed");
    assert!(
        !path.with_extension("redb.owner").exists(),
        "a refused open must not claim ownership"
    );
}

#[test]
fn append_assigns_seq_from_one_and_load_returns_seq_order() {
    let db = Db::new();
    let store = db.open();
    store
        .create_session(&meta("s-one", "/p", 1_000))
        .expect("create");
    let events = [input("hello"), reply("m1", "hi"), JournalEvent::completed()];
    for (i, event) in events.iter().enumerate() {
        let record = store.append(&id("s-one"), event).expect("append");
        assert_eq!(record.seq, i as u64 + 1);
        assert_eq!(&record.event, event);
        assert!(record.at_ms >= 1_000);
    }
    let batch = [
        input("second"),
        JournalEvent::Usage {
            model: "m2".into(),
            usage: Usage::default(),
        },
    ];
    let records = store.append_batch(&id("s-one"), &batch).expect("batch");
    assert_eq!(records.iter().map(|r| r.seq).collect::<Vec<_>>(), [4, 5]);
    assert!(
        store
            .append_batch(&id("s-one"), &[])
            .expect("empty")
            .is_empty()
    );
    check_journal(
        &store,
        "s-one",
        &[
            (1, &events[0]),
            (2, &events[1]),
            (3, &events[2]),
            (4, &batch[0]),
            (5, &batch[1]),
        ],
    );
}

#[test]
fn sessions_keep_separate_journals() {
    let db = Db::new();
    let store = db.open();
    // "s-a" is a prefix of "s-ab": tuple keys must still keep their journals apart.
    for session in ["s-a", "s-ab", "s-b"] {
        store
            .create_session(&meta(session, "/p", 1))
            .expect("create");
    }
    let (a, ab, b) = (input("a"), input("ab"), input("b"));
    store.append(&id("s-ab"), &ab).expect("append");
    store.append(&id("s-a"), &a).expect("append");
    store.append(&id("s-b"), &b).expect("append");
    store.append(&id("s-a"), &a).expect("append");
    check_journal(&store, "s-a", &[(1, &a), (2, &a)]);
    check_journal(&store, "s-ab", &[(1, &ab)]);
    check_journal(&store, "s-b", &[(1, &b)]);
}

#[test]
fn append_keeps_the_index_entry_current() {
    let db = Db::new();
    let store = db.open();
    store
        .create_session(&meta("s-meta", "/p", 1_000))
        .expect("create");
    let long = "Please look at why the release build of the terminal client fails on arm64 today\n\
                and then fix it";
    store.append(&id("s-meta"), &input(long)).expect("append");
    store
        .append(&id("s-meta"), &reply("model-a", "ok"))
        .expect("append");
    store
        .append(&id("s-meta"), &input("another question"))
        .expect("append");
    let last = store
        .append(
            &id("s-meta"),
            &JournalEvent::Usage {
                model: "model-b".into(),
                usage: Usage::default(),
            },
        )
        .expect("append");
    let got = store.meta(&id("s-meta")).expect("meta").expect("present");
    assert_eq!(
        got.title,
        "Please look at why the release build of the terminal client…"
    );
    assert_eq!(got.event_count, 4);
    assert_eq!(got.input_count, 2);
    assert_eq!(got.model, "model-b");
    assert_eq!(got.updated_at_ms, last.at_ms);
    assert_eq!(got.created_at_ms, 1_000);

    // A chosen title wins over later inputs.
    store
        .append(
            &id("s-meta"),
            &JournalEvent::TitleChanged {
                title: "arm64 build".into(),
            },
        )
        .expect("append");
    store
        .append(&id("s-meta"), &input("third"))
        .expect("append");
    let got = store.meta(&id("s-meta")).expect("meta").expect("present");
    assert_eq!(got.title, "arm64 build");
    assert_eq!((got.event_count, got.input_count), (6, 3));
}

#[test]
fn a_title_chosen_before_the_first_input_is_kept() {
    let db = Db::new();
    let store = db.open();
    store.create_session(&meta("s-t", "/p", 1)).expect("create");
    let events = [
        JournalEvent::TitleChanged {
            title: "named".into(),
        },
        input("first words"),
    ];
    store.append_batch(&id("s-t"), &events).expect("batch");
    let got = store.meta(&id("s-t")).expect("meta").expect("present");
    assert_eq!((got.title.as_str(), got.input_count), ("named", 1));
}

#[test]
fn unknown_and_duplicate_sessions_are_errors() {
    let db = Db::new();
    let store = db.open();
    store
        .create_session(&meta("s-dup", "/p", 1))
        .expect("create");
    let err = store
        .create_session(&meta("s-dup", "/q", 2))
        .expect_err("duplicate");
    assert!(matches!(err, StoreError::SessionExists { .. }), "{err:?}");
    assert_eq!(
        store
            .meta(&id("s-dup"))
            .expect("meta")
            .map(|m| m.project_dir),
        Some(PathBuf::from("/p")),
        "the failed create must not overwrite"
    );

    let err = store
        .append(&id("s-none"), &input("x"))
        .expect_err("unknown");
    assert!(matches!(err, StoreError::UnknownSession { .. }), "{err:?}");
    assert!(err.to_string().contains("tern sessions"), "{err}");
    let err = store.load(&id("s-none")).expect_err("unknown");
    assert!(matches!(err, StoreError::UnknownSession { .. }), "{err:?}");
    assert_eq!(store.meta(&id("s-none")).expect("meta"), None);
}

#[test]
fn list_is_newest_updated_first() {
    let db = Db::new();
    let store = db.open();
    store
        .create_session(&meta("s-old", "/p", 1_000))
        .expect("create");
    store
        .create_session(&meta("s-mid", "/p", 2_000))
        .expect("create");
    store
        .create_session(&meta("s-new", "/p", 3_000))
        .expect("create");
    assert_eq!(
        ids(&store.list().expect("list")),
        ["s-new", "s-mid", "s-old"]
    );
    // An append stamps the current time, far later than the fixed times above.
    store.append(&id("s-old"), &input("bump")).expect("append");
    assert_eq!(
        ids(&store.list().expect("list")),
        ["s-old", "s-new", "s-mid"]
    );
}

#[test]
fn latest_for_project_picks_the_most_recent_in_that_folder() {
    let db = Db::new();
    let store = db.open();
    store
        .create_session(&meta("s-p1", "/work/a", 1_000))
        .expect("create");
    store
        .create_session(&meta("s-p2", "/work/a", 2_000))
        .expect("create");
    store
        .create_session(&meta("s-q1", "/work/b", 3_000))
        .expect("create");
    let latest = |dir: &str| {
        store
            .latest_for_project(Path::new(dir))
            .expect("latest")
            .map(|m| m.id.as_str().to_owned())
    };
    assert_eq!(latest("/work/a").as_deref(), Some("s-p2"));
    assert_eq!(latest("/work/b").as_deref(), Some("s-q1"));
    assert_eq!(latest("/work/c"), None);
    store.append(&id("s-p1"), &input("again")).expect("append");
    assert_eq!(latest("/work/a").as_deref(), Some("s-p1"));
}

#[test]
fn resolve_takes_a_full_id_or_a_unique_prefix() {
    let db = Db::new();
    let store = db.open();
    for session in ["0190aaaa-1", "0190aaab-2", "0190bbbb-3", "0190"] {
        store
            .create_session(&meta(session, "/p", 1))
            .expect("create");
    }
    let resolved = |text: &str| store.resolve(text).map(|m| m.id.as_str().to_owned());
    assert_eq!(resolved("0190bbbb-3").expect("full id"), "0190bbbb-3");
    assert_eq!(resolved("0190b").expect("prefix"), "0190bbbb-3");
    assert_eq!(resolved(" 0190aaab ").expect("trimmed"), "0190aaab-2");
    // An exact id wins even when it is also a prefix of others.
    assert_eq!(resolved("0190").expect("exact short id"), "0190");

    match resolved("0190aaa") {
        Err(StoreError::AmbiguousSession { prefix, candidates }) => {
            assert_eq!(prefix, "0190aaa");
            assert_eq!(ids_of(&candidates), ["0190aaaa-1", "0190aaab-2"]);
        }
        other => panic!("expected AmbiguousSession, got {other:?}"),
    }
    let err = resolved("0190a").expect_err("ambiguous");
    assert!(err.to_string().contains("0190aaaa-1, 0190aaab-2"), "{err}");
    assert!(matches!(
        resolved("0191"),
        Err(StoreError::UnknownSession { .. })
    ));
    assert!(matches!(
        resolved("019"),
        Err(StoreError::PrefixTooShort { .. })
    ));
    assert!(matches!(
        resolved(""),
        Err(StoreError::PrefixTooShort { .. })
    ));
}

fn ids_of(candidates: &[SessionId]) -> Vec<&str> {
    candidates.iter().map(SessionId::as_str).collect()
}

#[test]
fn everything_survives_a_reopen() {
    let db = Db::new();
    let events = [
        input("remember me"),
        reply("m", "I will"),
        JournalEvent::TurnFailed {
            category: ErrorCategory::ModelBehavior,
            message: "cut off".into(),
            stop: Some(tern::domain::TurnStop::OutputLimit),
        },
        JournalEvent::FileTouched {
            path: PathBuf::from("src/main.rs"),
        },
    ];
    let (records, stored_meta) = {
        let store = db.open();
        store
            .create_session(&meta("s-keep", "/p", 5))
            .expect("create");
        let records = store.append_batch(&id("s-keep"), &events).expect("batch");
        (records, store.meta(&id("s-keep")).expect("meta"))
    };
    let store = db.open();
    assert_eq!(store.load(&id("s-keep")).expect("load"), records);
    assert_eq!(store.meta(&id("s-keep")).expect("meta"), stored_meta);
    // Seq continues after the reopen.
    let next = store.append(&id("s-keep"), &input("more")).expect("append");
    assert_eq!(next.seq, 5);
}

#[test]
fn a_second_open_in_this_process_is_locked_and_names_the_pid() {
    let db = Db::new();
    let store = db.open();
    let err = Store::open(&db.path).expect_err("second open");
    let StoreError::Locked { path, owner } = &err else {
        panic!("expected Locked, got {err:?}");
    };
    assert_eq!(path, &db.path);
    let owner = owner.as_ref().expect("the holder is named");
    assert_eq!(owner.pid, std::process::id());
    let message = err.to_string();
    for part in [
        format!("the session database {} is in use by", db.path.display()),
        format!("pid {}", std::process::id()),
        "Wait for it to finish or stop it; or set TERN_HOME".to_owned(),
    ] {
        assert!(
            message.contains(&part),
            "message {message:?} lacks {part:?}"
        );
    }
    // The failed open must not have disturbed the holder.
    store
        .create_session(&meta("s-still", "/p", 1))
        .expect("still usable");
    drop(store);
    let store = db.open();
    assert!(store.meta(&id("s-still")).expect("meta").is_some());
}

#[test]
fn a_stale_owner_sidecar_does_not_confuse_the_next_open() {
    let db = Db::new();
    drop(db.open());
    let sidecar = PathBuf::from(format!("{}.owner", db.path.display()));
    assert!(!sidecar.exists(), "a clean close removes the sidecar");
    std::fs::write(
        &sidecar,
        r#"{"pid":2147483646,"command":"tern gone","since_ms":0}"#,
    )
    .expect("plant stale sidecar");
    let _store = db.open();
    let err = Store::open(&db.path).expect_err("locked");
    let StoreError::Locked { owner, .. } = err else {
        panic!("expected Locked, got {err:?}");
    };
    assert_eq!(owner.map(|o| o.pid), Some(std::process::id()));
}

/// Environment variable that turns `holder_process` into a database holder.
const HOLD_ENV: &str = "TERN_TEST_HOLD_DB";

/// Not a test on its own: run by `a_second_process_is_locked_out…` in a child process, it
/// opens the database named by `TERN_TEST_HOLD_DB`, says so, and holds it until stdin closes.
#[test]
#[ignore = "helper run as a child process by another test"]
fn holder_process() {
    let Some(path) = std::env::var_os(HOLD_ENV) else {
        return;
    };
    let store = Store::open(Path::new(&path)).expect("holder open");
    println!("holder ready");
    let mut line = String::new();
    while std::io::stdin()
        .read_line(&mut line)
        .map(|n| n > 0)
        .unwrap_or(false)
    {}
    drop(store);
}

/// A child process running `holder_process`. Dropping it kills and reaps the child, so a
/// failing test leaves no process behind.
struct Holder {
    child: Child,
    /// Kept open (and drained at the end): closing it early would fail the child's final
    /// output.
    output: BufReader<ChildStdout>,
}

impl Holder {
    /// Starts the child and waits until it holds the database.
    fn spawn(path: &Path) -> Self {
        let mut child = Command::new(std::env::current_exe().expect("test binary"))
            .args([
                "store::holder_process",
                "--exact",
                "--ignored",
                "--nocapture",
            ])
            .env(HOLD_ENV, path)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn holder");
        let stdout = child.stdout.take().expect("piped stdout");
        let mut holder = Holder {
            child,
            output: BufReader::new(stdout),
        };
        let mut line = String::new();
        loop {
            line.clear();
            let read = holder.output.read_line(&mut line).unwrap_or(0);
            assert!(read > 0, "the holder process did not open the database");
            if line.trim() == "holder ready" {
                return holder;
            }
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Lets the holder finish normally and reports whether it succeeded.
    fn finish(mut self) -> bool {
        drop(self.child.stdin.take());
        std::io::copy(&mut self.output, &mut std::io::sink()).expect("drain holder output");
        self.child.wait().expect("wait").success()
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_second_process_is_locked_out_and_told_who_holds_it() {
    let db = Db::new();
    drop(db.open());

    let holder = Holder::spawn(&db.path);
    let err = Store::open(&db.path).expect_err("held by the child");
    let StoreError::Locked { owner, .. } = &err else {
        panic!("expected Locked, got {err:?}");
    };
    let owner = owner.as_ref().expect("the holder is named");
    assert_eq!(owner.pid, holder.pid());
    assert!(owner.command.contains("holder_process"), "{owner:?}");
    assert!(
        err.to_string()
            .contains(&format!("another tern process (pid {}: `", holder.pid())),
        "{err}"
    );

    // A holder that finishes releases the lock and removes its sidecar.
    let sidecar = PathBuf::from(format!("{}.owner", db.path.display()));
    assert!(holder.finish(), "the holder process failed");
    assert!(!sidecar.exists(), "a finished holder removes its sidecar");
    drop(db.open());

    // A holder killed outright releases the lock too, leaving only a stale sidecar behind.
    drop(Holder::spawn(&db.path));
    assert!(
        sidecar.exists(),
        "a killed holder cannot remove its sidecar"
    );
    let store = db.open();
    store
        .create_session(&meta("s-after", "/p", 1))
        .expect("usable");
}

#[test]
fn a_file_that_is_not_a_database_is_refused_untouched() {
    let db = Db::new();
    std::fs::create_dir_all(db.path.parent().expect("parent")).expect("mkdir");
    let garbage: Vec<u8> = (0..20_000u32).map(|i| (i * 7 + 3) as u8).collect();
    std::fs::write(&db.path, &garbage).expect("write garbage");
    check_refused_untouched(&db.path, "does not start with a redb database header");

    std::fs::write(&db.path, b"redb").expect("write short file");
    check_refused_untouched(&db.path, "only 4 bytes long");
}

#[test]
fn a_truncated_database_is_refused_untouched() {
    let db = Db::new();
    {
        let store = db.open();
        store
            .create_session(&meta("s-big", "/p", 1))
            .expect("create");
        let text = "x".repeat(2_000);
        let events: Vec<_> = (0..200).map(|_| input(&text)).collect();
        store.append_batch(&id("s-big"), &events).expect("batch");
    }
    let full = std::fs::read(&db.path).expect("read");
    for keep in [full.len() / 2, full.len() / 4, 4096 + 17, 600] {
        std::fs::write(&db.path, &full[..keep]).expect("truncate");
        check_refused_untouched(&db.path, "");
    }
    // The intact file still opens and holds everything.
    std::fs::write(&db.path, &full).expect("restore");
    let store = db.open();
    assert_eq!(store.load(&id("s-big")).expect("load").len(), 200);
}

#[test]
fn damage_after_a_clean_close_is_still_caught() {
    let db = Db::new();
    let needle = "needle-7f3a9c-in-the-journal";
    {
        let store = db.open();
        store.create_session(&meta("s-n", "/p", 1)).expect("create");
        store.append(&id("s-n"), &input(needle)).expect("append");
    }
    // Overwrite every copy of the record's text with the same number of other bytes, as bit
    // rot or a stray write would, keeping the file's length.
    let mut bytes = std::fs::read(&db.path).expect("read");
    let mut hits = 0;
    for start in 0..bytes.len().saturating_sub(needle.len()) {
        if bytes[start..].starts_with(needle.as_bytes()) {
            bytes[start] = b'N';
            hits += 1;
        }
    }
    assert!(hits > 0, "the record's text is stored verbatim");
    std::fs::write(&db.path, &bytes).expect("write damaged");
    check_refused_untouched(&db.path, "the storage engine reports");
}

#[test]
fn an_empty_file_becomes_a_new_database() {
    let db = Db::new();
    std::fs::create_dir_all(db.path.parent().expect("parent")).expect("mkdir");
    std::fs::write(&db.path, b"").expect("empty file");
    let store = db.open();
    assert_eq!(store.list().expect("list"), []);
}

#[test]
fn a_fresh_database_is_private_to_the_user() {
    use std::os::unix::fs::PermissionsExt;
    let db = Db::new();
    drop(db.open());
    let mode = |p: &Path| std::fs::metadata(p).expect("metadata").permissions().mode() & 0o777;
    assert_eq!(mode(&db.path), 0o600);
    assert_eq!(mode(db.path.parent().expect("parent")), 0o700);
}

/// The first byte of each of redb's two commit slots: the file format version that wrote it.
const REDB_VERSION_OFFSETS: [usize; 2] = [64, 192];

#[test]
fn a_database_in_a_newer_redb_file_format_is_refused_as_unsupported_not_damaged() {
    let db = Db::new();
    {
        let store = db.open();
        store
            .create_session(&meta("s-future", "/p", 1))
            .expect("create");
    }
    let mut bytes = std::fs::read(&db.path).expect("read");
    for offset in REDB_VERSION_OFFSETS {
        assert_eq!(
            bytes[offset], 3,
            "redb 4.6 writes file format 3 at {offset}"
        );
        bytes[offset] = 4;
    }
    std::fs::write(&db.path, &bytes).expect("write patched");

    let err = Store::open(&db.path).expect_err("a newer format must be refused");
    assert!(
        matches!(err, StoreError::UnsupportedFormat { found: 4, .. }),
        "expected UnsupportedFormat, got {err:?}"
    );
    let message = err.to_string();
    for part in [
        "written by a newer version of tern",
        "upgrade tern to open it",
        "the file was left untouched",
    ] {
        assert!(message.contains(part), "message {message:?} lacks {part:?}");
    }
    assert!(!message.contains("damaged"), "{message}");
    assert!(
        std::fs::read(&db.path).expect("read after") == bytes,
        "the file's bytes changed"
    );
}

/// A path that is not valid UTF-8, as Linux file names may be.
fn non_utf8_path() -> PathBuf {
    use std::os::unix::ffi::OsStrExt;
    PathBuf::from(std::ffi::OsStr::from_bytes(b"/work/caf\xE9/notes.txt"))
}

#[track_caller]
fn check_non_utf8_refused(err: StoreError) {
    assert!(
        matches!(&err, StoreError::NonUtf8Path { path } if *path == non_utf8_path()),
        "expected NonUtf8Path, got {err:?}"
    );
    let message = err.to_string();
    assert!(
        message.contains(
            "the path /work/caf\u{FFFD}/notes.txt is not valid UTF-8 and cannot be recorded"
        ),
        "{message}"
    );
}

#[test]
fn a_non_utf8_path_is_refused_up_front_and_nothing_is_stored() {
    let db = Db::new();
    let store = db.open();
    store
        .create_session(&meta("s-bytes", "/p", 1))
        .expect("create");
    for event in [
        JournalEvent::FileTouched {
            path: non_utf8_path(),
        },
        JournalEvent::WorkingDirectoryChanged {
            path: non_utf8_path(),
        },
    ] {
        check_non_utf8_refused(
            store
                .append_batch(&id("s-bytes"), &[input("before"), event])
                .expect_err("refused"),
        );
    }
    assert_eq!(store.load(&id("s-bytes")).expect("load"), []);
    // The store is still usable afterwards.
    store
        .append(&id("s-bytes"), &input("after"))
        .expect("append");

    let mut bad = meta("s-bad-dir", "/p", 1);
    bad.project_dir = non_utf8_path();
    check_non_utf8_refused(store.create_session(&bad).expect_err("refused"));
    assert_eq!(store.meta(&id("s-bad-dir")).expect("meta"), None);
}

#[test]
fn the_most_recently_used_sessions_come_first_a_page_at_a_time() {
    let db = Db::new();
    let store = db.open();
    for (id, updated) in [("a", 10), ("b", 30), ("c", 20)] {
        store.create_session(&meta(id, "/p", updated)).unwrap();
    }
    let ids = |metas: Vec<SessionMeta>| -> Vec<String> {
        metas
            .into_iter()
            .map(|m| m.id.as_str().to_owned())
            .collect()
    };
    assert_eq!(ids(store.recent(10, |_| true).unwrap()), ["b", "c", "a"]);
    assert_eq!(ids(store.recent(2, |_| true).unwrap()), ["b", "c"]);
    // An append makes a session the most recent.
    store
        .append(&SessionId::from_string("a"), &input("again"))
        .unwrap();
    assert_eq!(ids(store.recent(1, |_| true).unwrap()), ["a"]);
    assert_eq!(
        ids(store.recent(5, |m| m.id.as_str() != "a").unwrap()),
        ["b", "c"]
    );
    // A removed session leaves the index too.
    store.delete_session(&SessionId::from_string("b")).unwrap();
    assert_eq!(ids(store.recent(10, |_| true).unwrap()), ["a", "c"]);
    assert!(store.load(&SessionId::from_string("b")).is_err());
}

#[test]
fn a_database_from_before_the_activity_index_gets_one_when_opened() {
    let db = Db::new();
    {
        let store = db.open();
        store.create_session(&meta("old", "/p", 5)).unwrap();
        store.create_session(&meta("new", "/p", 7)).unwrap();
    }
    // What an earlier tern wrote: the same tables without the index.
    {
        let raw = redb::Database::create(&db.path).unwrap();
        let txn = raw.begin_write().unwrap();
        let activity: redb::TableDefinition<(i64, &str), ()> =
            redb::TableDefinition::new("activity");
        assert!(
            txn.delete_table(activity).unwrap(),
            "the index was there to remove"
        );
        txn.commit().unwrap();
    }
    let store = db.open();
    let listed: Vec<_> = store
        .recent(10, |_| true)
        .unwrap()
        .into_iter()
        .map(|m| m.id.as_str().to_owned())
        .collect();
    assert_eq!(listed, ["new", "old"]);
}
