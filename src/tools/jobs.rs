//! Background shell jobs: `shell_execute { background: true }` starts a command that goes on
//! while the session does, and `job_output` and `job_kill` ask after it and stop it.
//!
//! A job runs as `shell_execute`'s commands do (`bash -c`, a session of its own, the
//! environment without credentials), its output going to a log file in the session's
//! `logs/jobs/`. Jobs belong to their session: the session's rest kills them, and so does
//! tern's exit (the registry kills every job it still runs when it goes).

use super::args::Args;
use super::output::cap_head_tail;
use super::{ApprovalNeed, Tool, ToolContext, ToolFuture, ToolOutput};
use crate::domain::{Audience, SessionId};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// The most of a job's log `job_output` returns: its start and its end.
const SHOWN_BYTES: usize = 16 * 1024;

/// How long a job told to stop (SIGTERM) has before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(2);

/// One job.
struct Job {
    session: SessionId,
    command: String,
    /// The process group it leads (it called setsid).
    group: i32,
    log: PathBuf,
    started: Instant,
    /// How it ended, once it has.
    ended: Option<String>,
}

/// The background jobs of every session of this process.
#[derive(Default)]
pub struct Jobs {
    table: Mutex<BTreeMap<u64, Job>>,
    next: Mutex<u64>,
}

impl fmt::Debug for Jobs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Jobs").finish_non_exhaustive()
    }
}

impl Jobs {
    fn table(&self) -> MutexGuard<'_, BTreeMap<u64, Job>> {
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Starts `command` for `session` in `ctx`'s working directory and environment, its
    /// output to a log in `log_dir`; the job's id.
    pub fn start(
        self: &Arc<Self>,
        session: &SessionId,
        command: &str,
        ctx: &ToolContext,
        log_dir: &Path,
    ) -> Result<u64, String> {
        let id = {
            let mut next = self.next.lock().unwrap_or_else(PoisonError::into_inner);
            *next += 1;
            *next
        };
        std::fs::create_dir_all(log_dir)
            .map_err(|err| format!("cannot create {}: {err}", log_dir.display()))?;
        // Ids start again with each tern: the log of an earlier one's job stays.
        let (log, out) = (0..1000)
            .find_map(|again| {
                let name = match again {
                    0 => format!("job-{id}.log"),
                    n => format!("job-{id}.{n}.log"),
                };
                let path = log_dir.join(name);
                let file = std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .open(&path)
                    .ok()?;
                Some((path, file))
            })
            .ok_or_else(|| format!("cannot create a log for job {id} in {}", log_dir.display()))?;
        let err_out = out
            .try_clone()
            .map_err(|err| format!("cannot open {}: {err}", log.display()))?;
        let mut std_command = std::process::Command::new(super::shell_execute::shell_program().0);
        ctx.child_env.apply(&mut std_command);
        std_command
            .arg("-c")
            .arg(command)
            .current_dir(&ctx.cwd)
            .env("TMPDIR", &ctx.temp_dir)
            .env("TMP", &ctx.temp_dir)
            .env("TEMP", &ctx.temp_dir)
            .stdin(Stdio::null())
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err_out));
        // SAFETY: the closure runs in the forked child before exec and only calls setsid, which
        // is async-signal-safe and touches no memory of the parent.
        unsafe {
            use std::os::unix::process::CommandExt;
            std_command.pre_exec(|| {
                if libc::setsid() == -1 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let mut child = tokio::process::Command::from(std_command)
            .spawn()
            .map_err(|err| format!("cannot start the command: {err}"))?;
        let group = child
            .id()
            .and_then(|pid| i32::try_from(pid).ok())
            .unwrap_or(0);
        self.table().insert(
            id,
            Job {
                session: session.clone(),
                command: command.to_owned(),
                group,
                log,
                started: Instant::now(),
                ended: None,
            },
        );
        let jobs = Arc::downgrade(self);
        tokio::spawn(async move {
            let ended = match child.wait().await {
                Ok(status) => match (
                    status.code(),
                    std::os::unix::process::ExitStatusExt::signal(&status),
                ) {
                    (Some(code), _) => format!("exited with code {code}"),
                    (None, Some(signal)) => format!("killed by signal {signal}"),
                    (None, None) => "ended".to_owned(),
                },
                Err(err) => format!("lost: {err}"),
            };
            if let Some(jobs) = jobs.upgrade()
                && let Some(job) = jobs.table().get_mut(&id)
            {
                job.ended = Some(ended);
            }
        });
        Ok(id)
    }

    /// Job `id` of `session` as `job_output` shows it: its state and its log, cut in the
    /// middle when long.
    pub fn output(&self, session: &SessionId, id: u64) -> Result<String, String> {
        let (state, log, command) = {
            let table = self.table();
            let job = table
                .get(&id)
                .filter(|job| &job.session == session)
                .ok_or_else(|| format!("This session has no job {id}."))?;
            let state = match &job.ended {
                Some(ended) => ended.clone(),
                None => format!("running for {} s", job.started.elapsed().as_secs()),
            };
            (state, job.log.clone(), job.command.clone())
        };
        let shown =
            read_ends(&log).map_err(|err| format!("cannot read {}: {err}", log.display()))?;
        Ok(format!(
            "job {id} ({command}): {state}\nlog: {}\n\n{shown}",
            log.display()
        ))
    }

    /// Stops job `id` of `session`: SIGTERM to its process group, SIGKILL after a grace.
    pub fn kill(&self, session: &SessionId, id: u64) -> Result<String, String> {
        let table = self.table();
        let job = table
            .get(&id)
            .filter(|job| &job.session == session)
            .ok_or_else(|| format!("This session has no job {id}."))?;
        if let Some(ended) = &job.ended {
            return Ok(format!("job {id} had already {ended}"));
        }
        stop_group(job.group);
        Ok(format!(
            "job {id} told to stop (killed after {} s if it does not)",
            STOP_GRACE.as_secs()
        ))
    }

    /// Stops every running job of `session` (it goes to rest).
    pub fn kill_session(&self, session: &SessionId) {
        for job in self.table().values() {
            if &job.session == session && job.ended.is_none() {
                stop_group(job.group);
            }
        }
    }

    /// Stops every running job (tern is closing).
    pub fn kill_all(&self) {
        for job in self.table().values() {
            if job.ended.is_none() {
                stop_group(job.group);
            }
        }
    }

    /// The running jobs of `session`, a line each, for the prompt's nudge.
    pub fn running(&self, session: &SessionId) -> Vec<String> {
        self.table()
            .iter()
            .filter(|(_, job)| &job.session == session && job.ended.is_none())
            .map(|(id, job)| {
                format!(
                    "job {id}: {} (running for {} s; job_output to read it)",
                    job.command.lines().next().unwrap_or(""),
                    job.started.elapsed().as_secs()
                )
            })
            .collect()
    }
}

impl Drop for Jobs {
    /// A job does not outlive the tern that started it.
    fn drop(&mut self) {
        let table = self.table.get_mut().unwrap_or_else(PoisonError::into_inner);
        for job in table.values().filter(|job| job.ended.is_none()) {
            if job.group > 0 {
                // SAFETY: killpg only sends a signal.
                unsafe {
                    libc::killpg(job.group, libc::SIGKILL);
                }
            }
        }
    }
}

/// A log as shown: whole when short, else its first and last half of [`SHOWN_BYTES`] with a
/// note of what is left out between; never more of the file read than that.
fn read_ends(log: &Path) -> std::io::Result<String> {
    use std::io::{Read, Seek, SeekFrom};
    let mut file = std::fs::File::open(log)?;
    let len = file.metadata()?.len();
    let half = (SHOWN_BYTES / 2) as u64;
    if len <= 2 * half {
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        return Ok(cap_head_tail(&String::from_utf8_lossy(&bytes), SHOWN_BYTES));
    }
    let mut head = vec![0; half as usize];
    file.read_exact(&mut head)?;
    file.seek(SeekFrom::Start(len - half))?;
    let mut tail = Vec::with_capacity(half as usize);
    file.take(half).read_to_end(&mut tail)?;
    Ok(format!(
        "{}\n[… {} bytes left out; the whole log is in the file …]\n{}",
        String::from_utf8_lossy(&head),
        len - 2 * half,
        String::from_utf8_lossy(&tail)
    ))
}

/// SIGTERM to `group`, and SIGKILL after [`STOP_GRACE`].
fn stop_group(group: i32) {
    if group <= 0 {
        return;
    }
    // SAFETY: killpg only sends a signal.
    unsafe {
        libc::killpg(group, libc::SIGTERM);
    }
    std::thread::spawn(move || {
        std::thread::sleep(STOP_GRACE);
        // SAFETY: as above; a group that has gone makes this fail harmlessly.
        unsafe {
            libc::killpg(group, libc::SIGKILL);
        }
    });
}

/// The jobs a batch's calls may reach: this process's, for this session.
#[derive(Clone)]
pub struct JobContext {
    pub jobs: Arc<Jobs>,
    pub session: SessionId,
    /// Where their logs go (`logs/jobs/` of the session folder).
    pub log_dir: PathBuf,
}

impl fmt::Debug for JobContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JobContext")
            .field("session", &self.session)
            .finish_non_exhaustive()
    }
}

fn job_id(tool: &'static str, input: &Value) -> Result<u64, ToolOutput> {
    let args = Args::new(tool, input).map_err(ToolOutput::from)?;
    match args.opt_u64("job_id", 1).map_err(ToolOutput::from)? {
        Some(id) => Ok(id),
        None => Err(ToolOutput::error(format!(
            "{tool}: `job_id` is missing; shell_execute with background returned it."
        ))),
    }
}

/// `job_output` (a job's output and state) or `job_kill` (stopping it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobTool {
    Output,
    Kill,
}

impl Tool for JobTool {
    fn name(&self) -> &'static str {
        match self {
            Self::Output => "job_output",
            Self::Kill => "job_kill",
        }
    }

    fn summary(&self) -> &str {
        match self {
            Self::Output => "Read a background job's output and state.",
            Self::Kill => "Stop a background job.",
        }
    }

    fn description(&self) -> &str {
        match self {
            Self::Output => {
                "Read what a background job (shell_execute with background: true) has printed \
                 so far, and whether it still runs or how it ended. A long log comes as its \
                 start and its end; the whole of it is in the log file named."
            }
            Self::Kill => {
                "Stop a background job (shell_execute with background: true) and every process \
                 it started: it is asked to stop, and killed two seconds later if it has not."
            }
        }
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {"job_id": {"type": "integer", "description": "The job_id shell_execute returned."}},
            "required": ["job_id"],
            "additionalProperties": false
        })
    }

    fn min_audience(&self) -> Audience {
        Audience::Team
    }

    /// Reading runs beside other reads; stopping changes what runs.
    fn is_read_only(&self) -> bool {
        *self == Self::Output
    }

    fn approval_need(&self, _input: &Value, _ctx: &ToolContext) -> ApprovalNeed {
        ApprovalNeed::None
    }

    fn execute<'a>(
        &'a self,
        input: Value,
        ctx: &'a ToolContext,
        _cancel: CancellationToken,
    ) -> ToolFuture<'a> {
        Box::pin(async move {
            let Some(jobs) = &ctx.jobs else {
                return ToolOutput::error("Background jobs are not available in this session.");
            };
            let id = match job_id(self.name(), &input) {
                Ok(id) => id,
                Err(err) => return err,
            };
            let done = match self {
                Self::Output => jobs.jobs.output(&jobs.session, id),
                Self::Kill => jobs.jobs.kill(&jobs.session, id),
            };
            match done {
                Ok(text) => ToolOutput::ok(text),
                Err(why) => ToolOutput::error(why),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_log_is_shown_by_its_ends_without_reading_the_middle() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("job-1.log");
        let line = "a line of output from a chatty watcher\n";
        let text = format!("FIRST\n{}LAST\n", line.repeat(200_000 / line.len()));
        std::fs::write(&log, &text).unwrap();
        let shown = read_ends(&log).unwrap();
        assert!(shown.starts_with("FIRST\n"), "{}", &shown[..40]);
        assert!(shown.trim_end().ends_with("LAST"));
        assert!(shown.contains("bytes left out"));
        assert!(shown.len() < SHOWN_BYTES + 200, "{}", shown.len());
        std::fs::write(&log, "short\n").unwrap();
        assert_eq!(read_ends(&log).unwrap(), "short\n");
    }
}
