//! Where the storage engine reads a database that may be damaged: a worker that can be
//! stopped.
//!
//! A damaged file can make redb loop for ever, panic, or abort while it walks a tree, so the
//! checks and the table reading of `tern doctor` never run in the process that reports or
//! repairs. A worker (tern itself, started again with a hidden flag; or a thread, in tests)
//! does the reading and streams what it finds to a pipe. The caller takes entries as they
//! come and stops the worker when it goes quiet for too long or overruns its deadline;
//! whatever arrived before stays usable.
//!
//! The stream is a sequence of `tag u8 | key_len u32 | key | value_len u32 | value`; the
//! tags belong to the task (`dump`, `check`), and [`END`] closes every stream.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The tag of the last entry of every stream.
pub(super) const END: u8 = 0xFF;

/// Largest entry the reader accepts; a larger length is a broken stream.
const MAX_ENTRY: u32 = 512 * 1024 * 1024;

/// Where the worker runs.
#[derive(Debug, Clone)]
pub enum Worker {
    /// A process: `program` with `args`, then the task's name and the file's path; its
    /// standard output is the stream. tern passes itself with its hidden worker flag.
    Process {
        program: PathBuf,
        args: Vec<std::ffi::OsString>,
    },
    /// A thread of this process. A thread cannot be stopped: one that hangs is abandoned
    /// and ends with the process. For tests of the library.
    Thread,
}

/// What a worker does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Task {
    /// Stream every readable entry of the tables (see `dump`).
    Dump,
    /// redb's integrity check of every page (see `check`).
    Check,
    /// The integrity check, then every record and index entry decoded and compared.
    CheckDeep,
}

impl Task {
    pub fn as_str(self) -> &'static str {
        match self {
            Task::Dump => "dump",
            Task::Check => "check",
            Task::CheckDeep => "check-deep",
        }
    }

    pub fn parse(name: &str) -> Option<Task> {
        [Task::Dump, Task::Check, Task::CheckDeep]
            .into_iter()
            .find(|task| task.as_str() == name)
    }
}

/// How long a worker may take.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Longest wait for the next entry.
    pub stall: Duration,
    /// Longest the whole task may take, whatever it got to.
    pub total: Duration,
}

impl Limits {
    /// Limits for a file of `len` bytes: a stall of 20 s, and a minute plus a second for every
    /// 20 MB (redb reads far faster; this only bounds a worker that went astray).
    pub fn for_file(len: u64) -> Limits {
        Limits {
            stall: Duration::from_secs(20),
            total: Duration::from_secs(60 + len / 20_000_000),
        }
    }
}

/// The worker's side: runs `task` on the database at `path`, streaming to `out`.
pub fn serve(task: Task, path: &Path, out: &mut dyn Write) -> std::io::Result<()> {
    match task {
        Task::Dump => super::dump::write(path, out)?,
        Task::Check => super::check::write(path, false, out)?,
        Task::CheckDeep => super::check::write(path, true, out)?,
    }
    entry(out, END, b"", b"")?;
    out.flush()
}

/// Writes one stream entry.
pub(super) fn entry(out: &mut dyn Write, tag: u8, key: &[u8], value: &[u8]) -> std::io::Result<()> {
    let len = |n: usize| u32::try_from(n).unwrap_or(u32::MAX).to_le_bytes();
    out.write_all(&[tag])?;
    out.write_all(&len(key.len()))?;
    out.write_all(key)?;
    out.write_all(&len(value.len()))?;
    out.write_all(value)
}

/// Why a worker's stream ended before its END entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Stopped {
    /// The worker could not be started: nothing was learnt about the file.
    Start(String),
    /// Its output broke off mid-entry or made no sense: nothing was learnt about the file.
    Garbled,
    /// It died before it finished (a panic or an abort on the damage).
    Died,
    /// It sent nothing for the stall limit (a loop on the damage), in seconds.
    Quiet(u64),
    /// It ran past the deadline.
    Late,
}

impl Stopped {
    /// Whether the storage engine itself failed on the file, which is damage; otherwise
    /// the worker failed for reasons of its own and nothing is known about the file.
    pub fn is_damage(&self) -> bool {
        matches!(self, Stopped::Died | Stopped::Quiet(_) | Stopped::Late)
    }
}

impl std::fmt::Display for Stopped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Stopped::Start(why) => write!(f, "the worker could not start: {why}"),
            Stopped::Garbled => f.write_str("the worker's output made no sense"),
            Stopped::Died => {
                f.write_str("it ended unexpectedly (the storage engine failed on the damage)")
            }
            Stopped::Quiet(secs) => write!(f, "it made no progress for {secs} s and was stopped"),
            Stopped::Late => f.write_str("it did not finish in time and was stopped"),
        }
    }
}

/// Runs `task` on `path` in `worker` and hands each entry to `take` until the stream ends;
/// `Err` says why it stopped before its end.
pub(super) fn run(
    worker: &Worker,
    task: Task,
    path: &Path,
    limits: Limits,
    mut take: impl FnMut(u8, Vec<u8>, Vec<u8>),
) -> Result<(), Stopped> {
    let (reader, mut stop) =
        start(worker, task, path).map_err(|err| Stopped::Start(err.to_string()))?;
    type Read = Result<(u8, Vec<u8>, Vec<u8>), Stopped>;
    let (tx, rx) = mpsc::sync_channel::<Read>(256);
    std::thread::spawn(move || {
        let mut reader = std::io::BufReader::new(reader);
        loop {
            let read = read_entry(&mut reader);
            let last = !matches!(read, Ok((tag, _, _)) if tag != END);
            if tx.send(read).is_err() || last {
                break;
            }
        }
    });
    let deadline = Instant::now() + limits.total;
    let outcome = loop {
        // Checked after every entry too: a worker that keeps sending does not run for ever.
        if Instant::now() >= deadline {
            break Err(Stopped::Late);
        }
        let wait = limits
            .stall
            .min(deadline.saturating_duration_since(Instant::now()));
        match rx.recv_timeout(wait) {
            Ok(Ok((END, _, _))) => break Ok(()),
            Ok(Ok((tag, key, value))) => take(tag, key, value),
            Ok(Err(why)) => break Err(why),
            Err(_) if Instant::now() >= deadline => break Err(Stopped::Late),
            Err(_) => break Err(Stopped::Quiet(limits.stall.as_secs())),
        }
    };
    stop();
    outcome
}

type Started = (Box<dyn Read + Send>, Box<dyn FnMut()>);

/// Starts the worker; returns its stream and how to stop it.
fn start(worker: &Worker, task: Task, path: &Path) -> std::io::Result<Started> {
    match worker {
        Worker::Process { program, args } => {
            let mut command = std::process::Command::new(program);
            command
                .args(args)
                .arg(task.as_str())
                .arg(path)
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::piped())
                // A worker that panics on a damaged file must not print over the report.
                .stderr(std::process::Stdio::null());
            // SAFETY: the closure runs in the forked child before exec and only makes system
            // calls (the scheduling slice), which are async-signal-safe and touch no memory
            // of the parent.
            unsafe {
                use std::os::unix::process::CommandExt;
                command.pre_exec(|| {
                    // It reads a whole database: the default slice, whichever thread asked.
                    crate::priority::ordinary_slice();
                    Ok(())
                });
            }
            let mut child = command.spawn()?;
            let stdout = child
                .stdout
                .take()
                .ok_or_else(|| std::io::Error::other("the worker has no output"))?;
            let stop = move || {
                let _ = child.kill();
                let _ = child.wait();
            };
            Ok((Box::new(stdout), Box::new(stop)))
        }
        Worker::Thread => {
            let (reader, mut writer) = std::io::pipe()?;
            let path = path.to_owned();
            std::thread::spawn(move || {
                // A panic ends the stream without its END entry, which the reader reports.
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    serve(task, &path, &mut writer)
                }));
            });
            Ok((Box::new(reader), Box::new(|| {})))
        }
    }
}

/// Reads one entry; an error when the stream ends or breaks before an END entry.
fn read_entry(reader: &mut impl Read) -> Result<(u8, Vec<u8>, Vec<u8>), Stopped> {
    let mut tag = [0u8; 1];
    reader.read_exact(&mut tag).map_err(|_| Stopped::Died)?;
    let key = read_part(reader)?;
    let value = read_part(reader)?;
    Ok((tag[0], key, value))
}

fn read_part(reader: &mut impl Read) -> Result<Vec<u8>, Stopped> {
    let mut len = [0u8; 4];
    reader.read_exact(&mut len).map_err(|_| Stopped::Died)?;
    let len = u32::from_le_bytes(len);
    if len > MAX_ENTRY {
        return Err(Stopped::Garbled);
    }
    let mut bytes = vec![0u8; len as usize];
    reader.read_exact(&mut bytes).map_err(|_| Stopped::Died)?;
    Ok(bytes)
}
