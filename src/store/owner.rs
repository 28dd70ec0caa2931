//! The owner sidecar: a small file next to the database naming the process that holds it.
//!
//! redb's file lock says only that the database is in use, not by whom. The holder writes
//! `<db>.owner` (pid, command line, open time) right after opening, so a second process that
//! finds the database locked can tell the user which process to wait for or stop. The sidecar is
//! advisory: it is trusted only while the process it names is alive (and, on Linux, started at
//! the recorded time, so a recycled pid is not mistaken for the holder).

use serde::{Deserialize, Serialize};
use std::fmt;
use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// Longest command line kept in the sidecar; enough to recognise the process.
const MAX_COMMAND_CHARS: usize = 120;

/// Largest sidecar read back; anything bigger was not written by tern.
const MAX_SIDECAR_BYTES: u64 = 16 * 1024;

/// The process holding the session database, as recorded in its owner sidecar.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockOwner {
    /// Process id of the holder.
    pub pid: u32,
    /// The holder's command line, shortened.
    pub command: String,
    /// When the holder opened the database, in milliseconds since the Unix epoch.
    pub since_ms: i64,
    /// The holder's start time in clock ticks since boot (Linux), to detect a recycled pid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_ticks: Option<u64>,
}

impl LockOwner {
    /// Describes the current process, to be written into the sidecar.
    pub(super) fn current(now_ms: i64) -> Self {
        Self {
            pid: std::process::id(),
            command: current_command(),
            since_ms: now_ms,
            start_ticks: start_ticks(std::process::id()),
        }
    }

    /// True while the recorded process still runs and is the same process that wrote it.
    pub(super) fn is_alive(&self) -> bool {
        let Ok(pid) = libc::pid_t::try_from(self.pid) else {
            return false;
        };
        if pid <= 0 {
            return false;
        }
        // SAFETY: kill with signal 0 sends nothing; it only checks that the pid exists.
        let exists = unsafe { libc::kill(pid, 0) } == 0
            || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
        if !exists {
            return false;
        }
        match (self.start_ticks, start_ticks(self.pid)) {
            (Some(recorded), Some(actual)) => recorded == actual,
            _ => true,
        }
    }
}

impl fmt::Display for LockOwner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "pid {}", self.pid)?;
        if !self.command.is_empty() {
            write!(f, ": `{}`", self.command)?;
        }
        if let Some(since) = format_since(self.since_ms) {
            write!(f, ", since {since}")?;
        }
        Ok(())
    }
}

/// Where the sidecar of the database at `db_path` lives.
pub(super) fn sidecar_path(db_path: &Path) -> PathBuf {
    super::db::beside(db_path, ".owner")
}

/// Writes the sidecar atomically (temp file, then rename), readable by the user only.
pub(super) fn write(sidecar: &Path, owner: &LockOwner) -> std::io::Result<()> {
    let json = serde_json::to_vec(owner).map_err(std::io::Error::other)?;
    let mut tmp_name = sidecar.as_os_str().to_owned();
    tmp_name.push(format!(".{}.tmp", owner.pid));
    let tmp = PathBuf::from(tmp_name);
    let mut options = fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let result = options
        .open(&tmp)
        .and_then(|mut file| file.write_all(&json))
        .and_then(|()| fs::rename(&tmp, sidecar));
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// Reads the sidecar and returns its owner if that process is still alive. A missing,
/// unreadable or stale sidecar yields `None`: it names nobody.
pub(super) fn read_live(sidecar: &Path) -> Option<LockOwner> {
    let file = fs::File::open(sidecar).ok()?;
    let mut bytes = Vec::new();
    file.take(MAX_SIDECAR_BYTES).read_to_end(&mut bytes).ok()?;
    let owner: LockOwner = serde_json::from_slice(&bytes).ok()?;
    owner.is_alive().then_some(owner)
}

/// Removes the sidecar if it names this process. Best effort: a leftover sidecar is harmless
/// because readers check that the named process is alive.
pub(super) fn remove_own(sidecar: &Path) {
    let Ok(bytes) = fs::read(sidecar) else {
        return;
    };
    let ours = serde_json::from_slice::<LockOwner>(&bytes)
        .map(|owner| owner.pid == std::process::id())
        .unwrap_or(false);
    if ours && let Err(err) = fs::remove_file(sidecar) {
        tracing::debug!(path = %sidecar.display(), %err, "could not remove the owner sidecar");
    }
}

/// This process's command line, arguments separated by spaces and shortened.
fn current_command() -> String {
    let raw = fs::read("/proc/self/cmdline")
        .ok()
        .map(|bytes| {
            bytes
                .split(|b| *b == 0)
                .filter(|part| !part.is_empty())
                .map(|part| String::from_utf8_lossy(part).into_owned())
                .collect::<Vec<_>>()
        })
        .unwrap_or_else(|| std::env::args().collect());
    shorten(&raw.join(" "), MAX_COMMAND_CHARS)
}

/// Cuts `text` to at most `max` characters, marking the cut with an ellipsis.
fn shorten(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// The start time of process `pid` in clock ticks since boot, from `/proc/<pid>/stat`.
fn start_ticks(pid: u32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may itself contain spaces or
    // parentheses, so count fields from the last closing parenthesis: the state is field 3
    // and the start time field 22.
    let after_name = &stat[stat.rfind(')')? + 1..];
    after_name.split_whitespace().nth(22 - 3)?.parse().ok()
}

/// The local wall-clock time of `ms`, with the date when it is not today.
fn format_since(ms: i64) -> Option<String> {
    let tz = jiff::tz::TimeZone::system();
    let at = jiff::Timestamp::from_millisecond(ms)
        .ok()?
        .to_zoned_datetime(tz.clone());
    let today = jiff::Timestamp::now().to_zoned_datetime(tz).date();
    let format = if at.date() == today {
        "%H:%M:%S"
    } else {
        "%Y-%m-%d %H:%M:%S"
    };
    Some(at.strftime(format).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn current_process_is_alive_and_a_dead_pid_is_not() {
        let me = LockOwner::current(0);
        assert!(me.is_alive());
        let recycled = LockOwner {
            start_ticks: me.start_ticks.map(|t| t + 1),
            ..me.clone()
        };
        if me.start_ticks.is_some() {
            assert!(!recycled.is_alive());
        }
        let dead = LockOwner {
            pid: i32::MAX as u32,
            ..me
        };
        assert!(!dead.is_alive());
    }

    #[test]
    fn shorten_marks_the_cut() {
        assert_eq!(shorten("tern run", 20), "tern run");
        assert_eq!(shorten("abcdef", 4), "abc…");
    }

    #[test]
    fn display_names_pid_and_command() {
        let owner = LockOwner {
            pid: 1234,
            command: "tern run hi".into(),
            since_ms: jiff::Timestamp::now().as_millisecond(),
            start_ticks: None,
        };
        let text = owner.to_string();
        assert!(
            text.starts_with("pid 1234: `tern run hi`, since "),
            "{text}"
        );
    }
}
