//! The corruption harness: a store with sessions, journals, an archive, snapshots and a deleted
//! session is damaged at random (one page, or the tail overwritten, or the header
//! overwritten, or the file cut short), then the real binary's `tern doctor --repair` runs
//! under a deadline. Every case must end in time, without a panic, with counts that add up,
//! and with at least 95% of the records whose bytes are still intact in the damaged file
//! (counted here, independently, by looking for each record's exact bytes) back in the
//! repaired store; no record may come back changed, and no deleted session may come back.
//!
//! CI runs 40 cases. `TERN_CORRUPT_CASES=1000 cargo test --test it corruption -- --nocapture`
//! runs a long one; `TERN_CORRUPT_SEED` replays a given run.

use crate::support::{TernHome, tern_binary};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use tern::domain::{
    Audience, ContentBlock, InputKind, Message, Sender, SessionId, SessionKey, ToolCall,
    ToolResult, TurnStop, Usage,
};
use tern::store::{JournalEvent, JournalRecord, SessionMeta, Store};

/// Cases in a default run.
const CASES: usize = 40;

/// How long one repair may take before it counts as a hang.
const DEADLINE: Duration = Duration::from_secs(60);

/// redb's page size.
const PAGE: usize = 4096;

/// The store every case starts from, and what it holds.
struct Template {
    db: Vec<u8>,
    /// `tern.redb.deleted`, the list of deleted sessions kept beside the database.
    deleted_list: Vec<u8>,
    /// Every record of every live session, as stored.
    records: HashMap<(String, u64), JournalRecord>,
    deleted: String,
}

fn person(text: &str) -> JournalEvent {
    JournalEvent::InputAccepted {
        sender: Sender::local_user(),
        audience: Audience::Personal,
        kind: InputKind::Person,
        text: text.into(),
    }
}

/// A turn as the journal records one: the input, a note, a tool round, the answer.
fn turn(session: usize, n: usize, rng: &mut fastrand::Rng) -> Vec<JournalEvent> {
    let call = format!("call-{session}-{n}");
    let output: String = (0..rng.usize(10..3000))
        .map(|i| format!("line {i} of the output of turn {n} in session {session}\n"))
        .collect();
    vec![
        person(&format!(
            "session {session} question {n}: what is in file {n}?"
        )),
        JournalEvent::NudgeAdded {
            text: format!("[system: [working-context]\nproject_dir: /work/p{session}\n]"),
        },
        JournalEvent::AssistantMessage {
            model: "model-x".into(),
            content: vec![ContentBlock::ToolUse(ToolCall {
                id: call.clone(),
                name: "file_read".into(),
                input: serde_json::json!({"path": format!("f{n}.txt")}),
            })],
        },
        JournalEvent::ToolResults {
            results: vec![ToolResult::ok(call, output)],
            took_ms: None,
        },
        JournalEvent::Usage {
            model: "model-x".into(),
            usage: Usage {
                input_tokens: 100 + n as u64,
                output_tokens: 20,
                cache_creation_input_tokens: 0,
                cache_read_input_tokens: 50,
            },
        },
        JournalEvent::AssistantMessage {
            model: "model-x".into(),
            content: vec![ContentBlock::Text {
                text: format!("Answer {n} of session {session}."),
            }],
        },
        JournalEvent::TurnCompleted {
            stop: TurnStop::Completed,
        },
    ]
}

/// Builds the template store through the library: six sessions of a few turns each, one
/// compacted, one archived, snapshots, and a seventh deleted after it was written.
fn template(rng: &mut fastrand::Rng) -> Template {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("tern.redb");
    let store = Store::open(&path).expect("open");
    let mut records = HashMap::new();
    let mut deleted = String::new();
    for session in 0..7 {
        let id = SessionId::from_string(format!("0198aaaa-0000-7000-8000-00000000000{session}"));
        let meta = SessionMeta::new(
            id.clone(),
            SessionKey::cli(&id),
            PathBuf::from(format!("/work/p{session}")),
            1_700_000_000_000 + session as i64,
        );
        store.create_session(&meta).expect("create");
        for n in 0..rng.usize(2..5) {
            store
                .append_batch(&id, &turn(session, n, rng))
                .expect("append");
            if session == 2 && n == 1 {
                store
                    .append(
                        &id,
                        &JournalEvent::Compacted {
                            messages: vec![Message::user_text("notes of the earlier turns")],
                            dropped: 6,
                            results_cleared: 1,
                            notes: Some("notes".into()),
                        },
                    )
                    .expect("compact");
            }
        }
        store
            .append(
                &id,
                &JournalEvent::TitleChanged {
                    title: format!("Session {session}"),
                },
            )
            .expect("title");
        if session % 2 == 0 {
            let last = store.load(&id).expect("load").len() as u64;
            store
                .save_snapshot(&id, last, format!("state of {session}").as_bytes())
                .expect("snapshot");
        }
        if session == 6 {
            store.delete_session(&id).expect("delete");
            deleted = id.as_str().to_owned();
            continue;
        }
        if session == 4 {
            store
                .archive_session(&id, 1_700_000_100_000)
                .expect("archive");
        }
        for record in store.load(&id).expect("load") {
            records.insert((id.as_str().to_owned(), record.seq), record);
        }
    }
    drop(store);
    Template {
        db: std::fs::read(&path).expect("read the template"),
        deleted_list: std::fs::read(dir.path().join("tern.redb.deleted")).expect("deleted list"),
        records,
        deleted,
    }
}

/// One way of damaging a file.
#[derive(Debug, Clone, Copy)]
enum Damage {
    /// 256 random bytes somewhere in one page.
    Bytes { page: usize, at: usize },
    /// A whole page of random bytes.
    Page { page: usize },
    /// The last 16 KB overwritten.
    Tail,
    /// The first 4 KB (the header) overwritten.
    Head,
    /// The file cut short at `len`.
    Truncate { len: usize },
}

fn pick(rng: &mut fastrand::Rng, len: usize) -> Damage {
    let pages = len / PAGE;
    match rng.usize(0..10) {
        0..=4 => Damage::Bytes {
            page: rng.usize(0..pages),
            at: rng.usize(0..PAGE - 256),
        },
        5 | 6 => Damage::Page {
            page: rng.usize(0..pages),
        },
        7 => Damage::Tail,
        8 => Damage::Head,
        _ => Damage::Truncate {
            len: rng.usize(0..len),
        },
    }
}

fn apply(damage: Damage, bytes: &mut Vec<u8>, rng: &mut fastrand::Rng) {
    let mut noise = |range: std::ops::Range<usize>, bytes: &mut Vec<u8>| {
        for b in &mut bytes[range] {
            *b = rng.u8(..);
        }
    };
    let len = bytes.len();
    match damage {
        Damage::Bytes { page, at } => noise(page * PAGE + at..page * PAGE + at + 256, bytes),
        Damage::Page { page } => noise(page * PAGE..(page + 1) * PAGE, bytes),
        Damage::Tail => noise(len.saturating_sub(16 * 1024)..len, bytes),
        Damage::Head => noise(0..PAGE.min(len), bytes),
        Damage::Truncate { len } => bytes.truncate(len),
    }
}

/// What one case found.
struct Outcome {
    intact: usize,
    recovered: usize,
    took: Duration,
}

fn run_case(
    template: &Template,
    damage: Damage,
    rng: &mut fastrand::Rng,
) -> Result<Outcome, String> {
    let home = TernHome::new();
    let data = home.home().join("data");
    std::fs::create_dir_all(&data).map_err(|e| e.to_string())?;
    let db = data.join("tern.redb");
    let mut bytes = template.db.clone();
    apply(damage, &mut bytes, rng);
    std::fs::write(&db, &bytes).map_err(|e| e.to_string())?;
    std::fs::write(data.join("tern.redb.deleted"), &template.deleted_list)
        .map_err(|e| e.to_string())?;

    // The records whose bytes are still whole somewhere in the damaged file.
    let intact: HashSet<&(String, u64)> = template
        .records
        .iter()
        .filter(|(_, record)| {
            let json = serde_json::to_vec(record).expect("json");
            memchr::memmem::find(&bytes, &json).is_some()
        })
        .map(|(key, _)| key)
        .collect();

    let started = Instant::now();
    let mut child = Command::new(tern_binary())
        .args(["doctor", "--repair"])
        .env("TERN_HOME", home.home())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())?;
    let status = loop {
        if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
            break status;
        }
        if started.elapsed() > DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!(
                "{damage:?}: the repair hung for {} s",
                DEADLINE.as_secs()
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let took = started.elapsed();
    let output = child.wait_with_output().map_err(|e| e.to_string())?;
    let said = String::from_utf8_lossy(&output.stdout).into_owned();
    let errors = String::from_utf8_lossy(&output.stderr).into_owned();
    if !status.success() || errors.contains("panicked") {
        return Err(format!(
            "{damage:?}: exit {status}, stderr: {errors}\nstdout: {said}"
        ));
    }
    let reported = reported_counts(&said).map_err(|why| format!("{damage:?}: {why}\n{said}"))?;

    let store = Store::open(&db).map_err(|e| format!("{damage:?}: reopening: {e}"))?;
    let mut recovered = 0;
    for meta in store.list().map_err(|e| e.to_string())? {
        if meta.id.as_str() == template.deleted {
            return Err(format!("{damage:?}: the deleted session came back\n{said}"));
        }
        let records = store.load(&meta.id).map_err(|e| e.to_string())?;
        if meta.event_count != records.len() as u64 {
            return Err(format!(
                "{damage:?}: session {} counts {} records, its journal has {}",
                meta.id,
                meta.event_count,
                records.len()
            ));
        }
        for record in records {
            let key = (meta.id.as_str().to_owned(), record.seq);
            match template.records.get(&key) {
                Some(original) if *original == record => recovered += 1,
                _ => {
                    return Err(format!(
                        "{damage:?}: record {key:?} came back different from what was written"
                    ));
                }
            }
        }
    }
    // The report says what the repaired store holds, and its parts add up to its whole.
    if let Some((found, back, lost)) = reported
        && (back != recovered as u64 || found != back + lost || found < back)
    {
        return Err(format!(
            "{damage:?}: the report says {found} found, {back} recovered, {lost} lost; the \
             store holds {recovered}\n{said}"
        ));
    }
    let kept = intact.len();
    if (recovered as f64) < 0.95 * kept as f64 {
        return Err(format!(
            "{damage:?}: recovered {recovered} of {kept} intact records\n{said}"
        ));
    }
    Ok(Outcome {
        intact: kept,
        recovered,
        took,
    })
}

/// The counts a report gives: records found, recovered and lost; `None` for a database
/// found healthy.
fn reported_counts(said: &str) -> Result<Option<(u64, u64, u64)>, String> {
    if said.contains("is healthy; nothing was changed") {
        return Ok(None);
    }
    let line = said
        .lines()
        .find(|l| l.starts_with("Recovered "))
        .ok_or("no counts in the report")?;
    let numbers: Vec<u64> = line
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().unwrap_or(0))
        .collect();
    match numbers.as_slice() {
        [_, found, recovered, lost] => Ok(Some((*found, *recovered, *lost))),
        _ => Err(format!("unexpected counts: {line}")),
    }
}

#[test]
fn a_damaged_store_gives_back_what_is_still_readable() {
    let cases = std::env::var("TERN_CORRUPT_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(CASES);
    let seed = std::env::var("TERN_CORRUPT_SEED")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| fastrand::u64(..));
    eprintln!("corruption harness: {cases} cases, seed {seed}");
    let mut rng = fastrand::Rng::with_seed(seed);
    let template = template(&mut rng);
    let mut failures = Vec::new();
    let (mut intact, mut recovered) = (0, 0);
    let mut times = Vec::new();
    for _ in 0..cases {
        let damage = pick(&mut rng, template.db.len());
        match run_case(&template, damage, &mut rng) {
            Ok(outcome) => {
                intact += outcome.intact;
                recovered += outcome.recovered;
                times.push(outcome.took);
            }
            Err(why) => failures.push(why),
        }
    }
    times.sort();
    let median = times.get(times.len() / 2).copied().unwrap_or_default();
    let slowest = times.last().copied().unwrap_or_default();
    eprintln!(
        "corruption harness: {} of {cases} cases passed; {recovered} records recovered of \
         {intact} intact ({} records in the store); repair median {median:?}, slowest {slowest:?}",
        cases - failures.len(),
        template.records.len()
    );
    assert!(
        failures.is_empty(),
        "seed {seed}: {} failures:\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

/// Whether `path` is a file left by a repair beside the database.
fn is_left_over(path: &Path) -> bool {
    let name = path.to_string_lossy();
    name.ends_with(".rebuilding") || name.ends_with(".repairing")
}

#[test]
fn a_repair_leaves_no_scratch_file_and_the_damaged_file_untouched() {
    let mut rng = fastrand::Rng::with_seed(7);
    let template = template(&mut rng);
    let home = TernHome::new();
    let data = home.home().join("data");
    std::fs::create_dir_all(&data).expect("data dir");
    let mut bytes = template.db.clone();
    apply(Damage::Page { page: 4 }, &mut bytes, &mut rng);
    std::fs::write(data.join("tern.redb"), &bytes).expect("write");
    let output = Command::new(tern_binary())
        .args(["doctor", "--repair"])
        .env("TERN_HOME", home.home())
        .output()
        .expect("run");
    assert!(output.status.success(), "{output:?}");
    let files: Vec<PathBuf> = std::fs::read_dir(&data)
        .expect("list")
        .map(|e| e.expect("entry").path())
        .collect();
    assert!(!files.iter().any(|p| is_left_over(p)), "{files:?}");
    let moved = files
        .iter()
        .find(|p| {
            p.to_string_lossy().contains(".damaged-") && p.extension().is_none_or(|e| e != "wal")
        })
        .expect("moved aside");
    assert_eq!(
        std::fs::read(moved).expect("read"),
        bytes,
        "kept byte for byte"
    );
}
