//! The database half of `tern doctor`: the health check, `--repair` and its report, and the
//! hidden worker the storage engine runs in (a damaged file can make it hang or crash, which
//! must cost the worker, never the report).

use super::Outcome;
use super::render::print_out;
use crate::store::{
    self, Health, HealthState, Repair, RepairOptions, Salvage, Source, Task, Worker,
};
use std::fmt::Write;
use std::path::Path;

/// The hidden flag that makes tern a worker: `tern doctor --worker TASK FILE`.
pub const WORKER_FLAG: &str = "--worker";

/// Most sessions listed one by one in a repair's report.
const LISTED: usize = 40;

/// Runs as the storage engine's worker: `task` on `file`, the stream on stdout.
pub fn worker(task: &str, file: &Path) -> anyhow::Result<Outcome> {
    let Some(task) = Task::parse(task) else {
        anyhow::bail!("unknown worker task `{task}`");
    };
    // Panics on a damaged file are expected here; the caller reports them.
    std::panic::set_hook(Box::new(|_| {}));
    let mut out = std::io::stdout().lock();
    store::serve(task, file, &mut out)?;
    Ok(Outcome::Success)
}

/// This executable as the worker.
pub fn this_worker() -> Worker {
    match std::env::current_exe() {
        Ok(program) => Worker::Process {
            program,
            args: vec!["doctor".into(), WORKER_FLAG.into()],
        },
        // Without a path to itself tern can still read in a thread; a hang is then abandoned.
        Err(_) => Worker::Thread,
    }
}

/// The database's health in a line or a few, for `tern doctor`.
pub fn health(db_file: &Path, deep: bool) -> (String, bool) {
    if let Some(moved) = store::unfinished_repair(db_file) {
        let text = format!(
            "NOT IN PLACE: a repair moved the damaged file to {} and did not finish; run `tern \
             doctor --repair` again to finish it\n",
            moved.display()
        );
        return (text, false);
    }
    if let Some(folders) = store::lost_with_folders(db_file) {
        let text = format!(
            "LOST: the database is {} but {folders} session folders exist beside it; run \
             `tern doctor --repair` to give them their index entries again\n",
            if db_file.exists() { "empty" } else { "missing" },
        );
        return (text, false);
    }
    let len = std::fs::metadata(db_file).map_or(0, |m| m.len());
    let limits = store::Limits::for_file(len);
    let health = store::check(db_file, deep, &this_worker(), limits);
    describe(&health, deep)
}

/// The health of `db_file`, which a running tern holds, read from `copy`, the copy it made
/// as of a durable commit: what the check says of the copy, said of the file.
pub fn health_of_copy(copy: &Path, db_file: &Path, deep: bool) -> (String, bool) {
    let len = std::fs::metadata(copy).map_or(0, |m| m.len());
    let health = store::check(copy, deep, &this_worker(), store::Limits::for_file(len));
    let (text, ok) = describe(&health, deep);
    let text = text.replace(&copy.display().to_string(), &db_file.display().to_string());
    let text = if ok {
        let said = text.trim_end();
        match said.strip_suffix(')') {
            Some(open) => format!("{open}; checked on a copy the running tern made)\n"),
            None => format!("{said} (checked on a copy the running tern made)\n"),
        }
    } else {
        format!("{text}    The repair needs the file to itself: quit every running tern first.\n")
    };
    (text, ok)
}

/// The text for a check's outcome and whether it is good news.
fn describe(health: &Health, deep: bool) -> (String, bool) {
    let what = if deep {
        "every page's checksum, every record and index entry decoded and counted"
    } else {
        "every page's checksum; --deep also decodes every record"
    };
    match health.state {
        HealthState::Healthy if deep => (
            format!(
                "healthy ({what}: {} sessions, {} records)\n",
                health.sessions, health.records
            ),
            true,
        ),
        HealthState::Healthy => (format!("healthy ({what})\n"), true),
        HealthState::Absent => ("not created yet\n".to_owned(), true),
        HealthState::Damaged => {
            let mut text = String::from("DAMAGED");
            if !health.detail.is_empty() {
                text.push_str(&format!(": {}", health.detail));
            }
            text.push('\n');
            for problem in &health.problems {
                let _ = writeln!(text, "    - {problem}");
            }
            // Damage only the deep check sees needs the deep check to decide the repair too.
            let command = if deep && health.detail.is_empty() {
                "tern doctor --repair --deep"
            } else {
                "tern doctor --repair"
            };
            text.push_str(&format!(
                "    Run `{command}`: the file is moved aside (kept) and everything readable \
                 in it goes into a fresh database.\n"
            ));
            (text, false)
        }
        HealthState::Locked => (format!("in use, not checked: {}\n", health.detail), true),
        HealthState::Newer | HealthState::Unknown => {
            (format!("could not be checked: {}\n", health.detail), false)
        }
    }
}

/// `tern doctor --repair`.
pub fn repair(db_file: &Path, deep: bool) -> anyhow::Result<Outcome> {
    let mut options = RepairOptions::new(this_worker());
    options.deep = deep;
    let text = match store::repair(db_file, &options)? {
        Repair::Healthy => format!(
            "The session database {} is healthy; nothing was changed.\n",
            db_file.display()
        ),
        Repair::Rebuilt(salvage) => report(db_file, &salvage),
    };
    print_out(&text)?;
    Ok(Outcome::Success)
}

/// The report of a rebuild: where the damaged file went, counts that add up, per session.
pub fn report(db_file: &Path, salvage: &Salvage) -> String {
    let mut text = match &salvage.moved_to {
        Some(moved) if salvage.earlier => format!(
            "The session database {} was missing; an earlier repair that did not finish had \
             moved the damaged file to {}, and what it holds was recovered again.\n",
            db_file.display(),
            moved.display()
        ),
        Some(moved) => format!(
            "The session database {} was damaged. It was moved to {} and is kept there.\n",
            db_file.display(),
            moved.display()
        ),
        None => format!(
            "The session database {} was missing; its index was built again from the session \
             folders.\n",
            db_file.display()
        ),
    };
    let _ = writeln!(
        text,
        "Recovered {} sessions: {} journal records found, {} recovered, {} lost.",
        salvage.sessions.len(),
        salvage.found(),
        salvage.recovered(),
        salvage.lost()
    );
    let mut sessions: Vec<_> = salvage.sessions.iter().collect();
    // Sessions that lost something first: those are what the reader needs to see.
    sessions.sort_by_key(|s| (s.lost() == 0, s.index == Source::Table, s.id.clone()));
    let shorts = super::sessions::unique_prefixes(sessions.iter().map(|s| s.id.as_str()));
    let width = shorts.iter().map(|s| s.len()).max().unwrap_or(8);
    for (session, short) in sessions.iter().zip(&shorts).take(LISTED) {
        let title: String = session.title.chars().take(40).collect();
        let mut line = format!(
            "  {short:<width$}  {title:<40}  {} of {} records",
            session.recovered, session.found
        );
        let mut notes = Vec::new();
        if session.lost() > 0 {
            notes.push(format!("{} lost", session.lost()));
        }
        if session.from_pages > 0 {
            notes.push(format!("{} found in the file's pages", session.from_pages));
        }
        match session.index {
            Source::Table => {}
            Source::Pages => notes.push("index entry from an older copy".to_owned()),
            Source::Records => notes.push("index entry made from its records".to_owned()),
            Source::Folder => notes.push("only its folder was left".to_owned()),
        }
        if !notes.is_empty() {
            line.push_str(&format!(" ({})", notes.join("; ")));
        }
        let _ = writeln!(text, "{}", line.trim_end());
    }
    if sessions.len() > LISTED {
        let _ = writeln!(text, "  … and {} more", sessions.len() - LISTED);
    }
    if !salvage.problems.is_empty() {
        text.push_str("What could not be read:\n");
        for problem in &salvage.problems {
            let _ = writeln!(text, "  - {problem}");
        }
    }
    if salvage.damaged_copies > 0 {
        let _ = writeln!(
            text,
            "{} damaged copies of records were passed over.",
            salvage.damaged_copies
        );
    }
    if salvage.ignored_deleted > 0 {
        let _ = writeln!(
            text,
            "{} old copies of deleted sessions' records were found and left deleted.",
            salvage.ignored_deleted
        );
    }
    let _ = writeln!(text, "Took {:.1} s.", salvage.took.as_secs_f64());
    text
}
