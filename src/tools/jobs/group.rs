//! A job's processes: a process group in a session of its own, its output pumped into a log
//! that never grows past [`LOG_CAP`]; whether the group still runs once its leading shell has
//! gone; and, at a later wake, whether what a tern that died left running is still there.

use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// How large a job's log grows before it is moved aside (to [`older_log`], replacing the one
/// before) and started afresh: at most twice this on disk per job, its latest output always in
/// the log itself.
pub const LOG_CAP: u64 = 16 * 1024 * 1024;

/// Where a job's log goes when it reaches [`LOG_CAP`]: `job-3.log` → `job-3.old.log`.
pub fn older_log(log: &Path) -> PathBuf {
    let name = log
        .file_name()
        .and_then(|name| name.to_str())
        .unwrap_or("job.log");
    let stem = name.strip_suffix(".log").unwrap_or(name);
    log.with_file_name(format!("{stem}.old.log"))
}

/// Copies a job's output from `from` into `log` (open as `file`) until every process holding
/// the pipe has closed it. A log that reaches `cap` is moved to [`older_log`] and begun again;
/// a log that cannot be written (a full disk) drops output rather than stall the job, and is
/// tried again after each further MiB.
pub fn pump(mut from: impl Read, log: PathBuf, file: File, cap: u64) {
    const RETRY_AFTER: u64 = 1024 * 1024;
    let mut file = Some(file);
    let mut written = 0u64;
    let mut dropped = 0u64;
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => n,
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return,
        };
        if written + n as u64 > cap && written > 0 {
            // The full log is closed before it moves.
            drop(file.take());
            let _ = std::fs::rename(&log, older_log(&log));
            file = File::create(&log).ok();
            written = 0;
        }
        if file.is_none() && dropped >= RETRY_AFTER {
            dropped = 0;
            file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&log)
                .ok();
        }
        match file.as_mut().map(|out| out.write_all(&buf[..n])) {
            Some(Ok(())) => written += n as u64,
            Some(Err(_)) => {
                file = None;
                dropped += n as u64;
            }
            None => dropped += n as u64,
        }
    }
}

/// The boot this machine is in, which start times are counted from.
fn boot_id() -> Option<&'static str> {
    static BOOT: OnceLock<Option<String>> = OnceLock::new();
    BOOT.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
            .ok()
            .map(|id| id.trim().to_owned())
    })
    .as_deref()
}

/// What `/proc/<pid>/stat` says of a process.
struct Stat {
    /// It has not exited (it is not only waiting to be reaped).
    runs: bool,
    group: i32,
    /// When it started, in clock ticks after boot.
    start: u64,
}

fn stat(pid: i32) -> Option<Stat> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The name (field 2) is in parentheses and may hold anything, spaces and parentheses
    // too: the fields after it count from its last ')', the state being field 3, the group
    // field 5 and the start time field 22.
    let fields: Vec<&str> = stat[stat.rfind(')')? + 1..].split_whitespace().collect();
    Some(Stat {
        runs: !matches!(*fields.first()?, "Z" | "X" | "x"),
        group: fields.get(2)?.parse().ok()?,
        start: fields.get(19)?.parse().ok()?,
    })
}

/// Process `pid`'s boot and start time, which tell it apart from a later process given the
/// same pid.
pub fn identity(pid: i32) -> Option<(String, u64)> {
    Some((boot_id()?.to_owned(), stat(pid)?.start))
}

/// Whether the process `identity` names still runs (a process that exited and waits to be
/// reaped does not).
pub fn same_process(pid: i32, identity: &(String, u64)) -> bool {
    pid > 0
        && boot_id() == Some(identity.0.as_str())
        && stat(pid).is_some_and(|stat| stat.runs && stat.start == identity.1)
}

/// Whether group `group`, whose leader this process has reaped, still has processes of the
/// job marked `mark` that run (not ones that exited and wait to be reaped, nor a later group
/// given the same number).
pub fn orphans_live(group: i32, mark: &str) -> bool {
    // SAFETY: killpg with signal 0 only checks that the group exists and may be signalled.
    group > 0 && unsafe { libc::killpg(group, 0) } == 0 && !marked_members(group, mark).is_empty()
}

/// The environment variable every process of a job carries: its mark, [`mark`].
pub const JOB_MARK: &str = "TERN_JOB";

/// What job `id` of `session` marks its processes with.
pub fn mark(session: &crate::domain::SessionId, id: u64) -> String {
    format!("{session}:{id}")
}

/// Kills every process of group `group` that carries `mark` in its environment (what a job
/// left running when the tern that started it died); how many there were.
pub fn kill_leftovers(group: i32, mark: &str) -> usize {
    let members = marked_members(group, mark);
    for pid in &members {
        // SAFETY: kill only sends a signal, to a process shown to be the job's.
        unsafe {
            libc::kill(*pid, libc::SIGKILL);
        }
    }
    members.len()
}

/// The processes of group `group` that run (not exited, waiting to be reaped) and carry
/// `mark` in their environment.
fn marked_members(group: i32, mark: &str) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let wanted = format!("{JOB_MARK}={mark}");
    let mut members = Vec::new();
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        if !stat(pid).is_some_and(|stat| stat.runs && stat.group == group) {
            continue;
        }
        let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        if environ
            .split(|&b| b == 0)
            .any(|var| var == wanted.as_bytes())
        {
            members.push(pid);
        }
    }
    members
}

/// Sends `signal` to every process of `group`.
pub fn signal(group: i32, signal: i32) {
    if group > 0 {
        // SAFETY: killpg only sends a signal; a group that has gone makes it fail harmlessly.
        unsafe {
            libc::killpg(group, signal);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_past_its_cap_moves_aside_and_the_latest_output_stays_in_it() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("job-3.log");
        let file = File::create(&log).unwrap();
        // A pipe hands its output over in pieces: here a line at a time.
        struct Lines(Vec<String>);
        impl Read for Lines {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                let Some(line) = self.0.pop() else {
                    return Ok(0);
                };
                buf[..line.len()].copy_from_slice(line.as_bytes());
                Ok(line.len())
            }
        }
        let lines = (0..100).rev().map(|n| format!("line {n:03}\n")).collect();
        pump(Lines(lines), log.clone(), file, 300);
        let latest = std::fs::read_to_string(&log).unwrap();
        let older = std::fs::read_to_string(dir.path().join("job-3.old.log")).unwrap();
        assert!(latest.ends_with("line 099\n"), "{latest}");
        assert!(latest.len() <= 300 && older.len() <= 300);
        assert!(older.ends_with(&format!("line {:03}\n", 99 - latest.len() / 9)));
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
    }

    #[test]
    fn a_process_is_told_apart_from_a_later_one_with_its_pid() {
        let me = std::process::id() as i32;
        let identity = identity(me).expect("this process has a start time");
        assert!(same_process(me, &identity));
        let earlier = (identity.0.clone(), identity.1.wrapping_sub(1));
        assert!(!same_process(me, &earlier));
        assert!(!same_process(me, &("another boot".to_owned(), identity.1)));
    }
}
