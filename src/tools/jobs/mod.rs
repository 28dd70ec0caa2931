//! Background shell jobs: `shell_execute { background: true }` starts a command that goes on
//! while the session does, and `job_output` and `job_kill` ask after it and stop it.
//!
//! A job runs as `shell_execute`'s commands do (`bash -c`, a session of its own, the
//! environment without credentials), its output pumped into a log file in the session's
//! `logs/jobs/`. Jobs belong to their session: the session's rest kills them, and so does
//! tern's exit (the registry kills every job it still runs when it goes). Each start is
//! journaled, so a later wake of the session knows its jobs and reports those a tern that
//! stopped left unfinished as reaped, their logs still there.

mod group;

use super::args::Args;
use super::output::cap_head_tail;
use super::{ApprovalNeed, Tool, ToolContext, ToolFuture, ToolOutput};
use crate::domain::{Audience, JobRecord, SessionId};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// The most of a job's log `job_output` returns: its start and its end.
const SHOWN_BYTES: usize = 16 * 1024;

/// How often a job whose shell has ended is looked at until nothing of its group is left.
const ORPHAN_POLL: Duration = Duration::from_secs(1);

/// How long a job told to stop (SIGTERM) has before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(2);

/// One job.
struct Job {
    record: JobRecord,
    /// When this process started it; `None` for a job of an earlier tern.
    started: Option<Instant>,
    /// How its leading shell ended, once it has.
    ended: Option<String>,
    /// Why tern stopped it, when tern did.
    stopped: Option<&'static str>,
    /// Its end is journaled (a turn was told of it).
    told: bool,
    /// Its leader was reaped and nothing of its group was left: nothing of it runs, whatever
    /// takes its numbers later.
    gone: bool,
    /// What its processes carry in their environment ([`group::JOB_MARK`]).
    mark: String,
}

impl Job {
    /// Whether what its shell left in its group still runs (its shell has ended). Looks
    /// through `/proc` while that may be so.
    fn orphans(&self) -> bool {
        self.started.is_some()
            && self.ended.is_some()
            && !self.gone
            && group::orphans_live(self.record.group, &self.mark)
    }

    /// Whether any process of it still runs: its leader, or what the leader left in its group.
    fn lives(&self) -> bool {
        self.started.is_some() && (self.ended.is_none() || self.orphans())
    }

    /// Its state in words.
    fn state(&self) -> String {
        self.status().1
    }

    /// Whether it runs, and its state in words, from one look at its processes.
    fn status(&self) -> (bool, String) {
        let ended = match (&self.started, &self.ended) {
            (Some(started), None) => {
                return (
                    true,
                    format!("running for {} s", started.elapsed().as_secs()),
                );
            }
            (Some(_), Some(ended)) if self.orphans() => {
                return (
                    true,
                    format!("its shell {ended}; processes it started still run"),
                );
            }
            (_, Some(ended)) => ended.as_str(),
            (None, None) => "ended",
        };
        let words = match self.stopped {
            Some(why) => format!("{why} ({ended})"),
            None => ended.to_owned(),
        };
        (false, words)
    }
}

/// A job's end, for the journal and the turn that is told of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobEnd {
    pub id: u64,
    pub how: String,
    /// The line the nudge gives it.
    pub line: String,
}

/// A job as a front end shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobView {
    pub id: u64,
    pub command: String,
    pub state: String,
    pub running: bool,
    pub log: PathBuf,
    /// Its log as `job_output` shows it, when asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
}

/// The background jobs of every session of this process, by session and number.
#[derive(Default)]
pub struct Jobs {
    table: Mutex<BTreeMap<(SessionId, u64), Job>>,
}

impl fmt::Debug for Jobs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Jobs").finish_non_exhaustive()
    }
}

impl Jobs {
    fn table(&self) -> MutexGuard<'_, BTreeMap<(SessionId, u64), Job>> {
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes in the jobs of session `session`, at its wake: those its journal records and
    /// those whose record lies beside their log in `log_dir` (a crash may have lost the
    /// journal's latest events). A job this process does not know was started by an earlier
    /// tern, which stopped before it: if that tern died and the job's leader still runs (the
    /// same process, by its start time), it is killed, and so is what it left in its group
    /// (each process carries the job's mark in its environment); either way the session's
    /// next turn hears it was reaped, unless an earlier turn heard how it ended.
    pub fn adopt(&self, session: &SessionId, journaled: &[JobRecord], log_dir: &Path) {
        let mut records = journaled.to_vec();
        for record in records_beside_logs(log_dir) {
            if records.iter().all(|known| known.id != record.id) {
                records.push(record);
            }
        }
        // The processes are looked at without the registry held: a scan of /proc is slow.
        let fresh: Vec<JobRecord> = {
            let table = self.table();
            records
                .into_iter()
                .filter(|record| !table.contains_key(&(session.clone(), record.id)))
                .collect()
        };
        let adopted: Vec<(JobRecord, String, bool)> = fresh
            .into_iter()
            .map(|record| {
                let (ended, told) = reap(session, &record);
                (record, ended, told)
            })
            .collect();
        let mut table = self.table();
        for (record, ended, told) in adopted {
            table.entry((session.clone(), record.id)).or_insert(Job {
                record,
                started: None,
                ended: Some(ended),
                stopped: None,
                told,
                gone: true,
                mark: String::new(),
            });
        }
    }

    /// Starts `command` for `session` in `ctx`'s working directory and environment, its
    /// output to a log in `log_dir`; what the journal keeps of it.
    pub fn start(
        self: &Arc<Self>,
        session: &SessionId,
        command: &str,
        ctx: &ToolContext,
        log_dir: &Path,
    ) -> Result<JobRecord, String> {
        std::fs::create_dir_all(log_dir)
            .map_err(|err| format!("cannot create {}: {err}", log_dir.display()))?;
        // The number is taken under the table's lock, so two starts never share one; a log of
        // that name left by something else is never written over.
        let mut table = self.table();
        let id = table
            .range(of(session))
            .next_back()
            .map_or(Some(1), |((_, id), _)| id.checked_add(1))
            .ok_or("this session has no job number left")?;
        let (log, file) = (0..1000)
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
        let (reader, writer) =
            std::io::pipe().map_err(|err| format!("cannot make a pipe for its output: {err}"))?;
        let err_writer = writer
            .try_clone()
            .map_err(|err| format!("cannot make a pipe for its output: {err}"))?;
        let mut std_command = std::process::Command::new(super::shell_execute::shell_program().0);
        ctx.child_env.apply(&mut std_command);
        std_command
            .arg("-c")
            .arg(command)
            .current_dir(&ctx.cwd)
            .env("TMPDIR", &ctx.temp_dir)
            .env("TMP", &ctx.temp_dir)
            .env("TEMP", &ctx.temp_dir)
            .env(group::JOB_MARK, group::mark(session, id))
            .stdin(Stdio::null())
            .stdout(Stdio::from(writer))
            .stderr(Stdio::from(err_writer));
        // SAFETY: the closure runs in the forked child before exec and only makes system calls
        // (setsid, the scheduling slice), which are async-signal-safe and touch no memory of
        // the parent.
        unsafe {
            use std::os::unix::process::CommandExt;
            std_command.pre_exec(|| {
                if libc::setsid() == -1 {
                    return Err(std::io::Error::last_os_error());
                }
                // A job runs long: the default slice, whichever thread started it.
                crate::priority::ordinary_slice();
                Ok(())
            });
        }
        // The command, holding the pipe's writing ends, goes with this statement: the log's
        // pump ends when the job's processes have all closed theirs.
        let mut child = tokio::process::Command::from(std_command)
            .spawn()
            .map_err(|err| format!("cannot start the command: {err}"))?;
        let group = child
            .id()
            .and_then(|pid| i32::try_from(pid).ok())
            .unwrap_or(0);
        let pumped = log.clone();
        std::thread::Builder::new()
            .name(format!("job-{id}-log"))
            .spawn(move || group::pump(reader, pumped, file, group::LOG_CAP))
            .map_err(|err| {
                // Nothing would read its output: it does not run on unseen.
                group::signal(group, libc::SIGKILL);
                format!("cannot start its log: {err}")
            })?;
        let record = JobRecord {
            id,
            command: command.to_owned(),
            log,
            group,
            leader_start: group::identity(group),
            ended: None,
            rested: false,
        };
        // Beside its log too: what a later tern reaps if this one dies before the journal
        // has the start. Not synced: a crash of the machine ends the job as well.
        if let Ok(json) = serde_json::to_vec(&record) {
            let _ = std::fs::write(record_path(&record.log), json);
        }
        table.insert(
            (session.clone(), id),
            Job {
                record: record.clone(),
                started: Some(Instant::now()),
                ended: None,
                stopped: None,
                told: false,
                gone: false,
                mark: group::mark(session, id),
            },
        );
        drop(table);
        let jobs = Arc::downgrade(self);
        let key = (session.clone(), id);
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
                && let Some(job) = jobs.table().get_mut(&key)
            {
                job.ended = Some(ended);
            }
            // What the shell left in its group holds the group's number; once that has gone
            // too, the job is over for good, before the number can go to anything else.
            let mark = group::mark(&key.0, key.1);
            while group::orphans_live(group, &mark) {
                tokio::time::sleep(ORPHAN_POLL).await;
            }
            if let Some(jobs) = jobs.upgrade()
                && let Some(job) = jobs.table().get_mut(&key)
            {
                job.gone = true;
            }
        });
        Ok(record)
    }

    /// Job `id` of `session` as `job_output` shows it: its state and its log, cut in the
    /// middle when long.
    pub fn output(&self, session: &SessionId, id: u64) -> Result<String, String> {
        let (state, log, command) = {
            let table = self.table();
            let job = table
                .get(&(session.clone(), id))
                .ok_or_else(|| format!("This session has no job {id}."))?;
            (
                job.state(),
                job.record.log.clone(),
                job.record.command.clone(),
            )
        };
        Ok(format!(
            "job {id} ({command}): {state}\nlog: {}\n\n{}",
            log.display(),
            shown_log(&log)
        ))
    }

    /// Stops job `id` of `session`: SIGTERM to its process group, SIGKILL after a grace.
    pub fn kill(self: &Arc<Self>, session: &SessionId, id: u64) -> Result<String, String> {
        let table = self.table();
        let job = table
            .get(&(session.clone(), id))
            .ok_or_else(|| format!("This session has no job {id}."))?;
        if let (false, state) = job.status() {
            return Ok(format!("job {id} had already ended: {state}"));
        }
        self.stop(job.record.group, (session.clone(), id));
        Ok(format!(
            "job {id} told to stop (killed after {} s if it does not)",
            STOP_GRACE.as_secs()
        ))
    }

    /// Stops every running job of `session` (it rests or closes); its next turn hears so.
    pub fn kill_session(self: &Arc<Self>, session: &SessionId) {
        let mut table = self.table();
        for (key, job) in table.range_mut(of(session)) {
            if job.lives() {
                self.stop(job.record.group, key.clone());
                job.stopped = Some("stopped when its session went to rest or closed");
            }
        }
    }

    /// Stops every running job (tern is closing).
    pub fn kill_all(self: &Arc<Self>) {
        let table = self.table();
        for (key, job) in table.iter() {
            if job.lives() {
                self.stop(job.record.group, key.clone());
            }
        }
    }

    /// SIGTERM to `group`, and SIGKILL after [`STOP_GRACE`] to whatever of the job is left:
    /// its leader while this process has not reaped it (its pid is then still its own), or
    /// the rest of its group when that lives on.
    fn stop(self: &Arc<Self>, group: i32, key: (SessionId, u64)) {
        group::signal(group, libc::SIGTERM);
        let jobs: Weak<Self> = Arc::downgrade(self);
        std::thread::spawn(move || {
            std::thread::sleep(STOP_GRACE);
            let reaped = jobs
                .upgrade()
                .and_then(|jobs| jobs.table().get(&key).map(|job| job.ended.is_some()))
                .unwrap_or(true);
            if !reaped || group::orphans_live(group, &group::mark(&key.0, key.1)) {
                group::signal(group, libc::SIGKILL);
            }
        });
    }

    /// The running jobs of `session`, a line each, for the prompt's nudge.
    pub fn running(&self, session: &SessionId) -> Vec<String> {
        self.table()
            .range(of(session))
            .filter_map(|((_, id), job)| {
                let (runs, state) = job.status();
                runs.then(|| {
                    format!(
                        "job {id}: {} ({state}; job_output to read it)",
                        job.record.command.lines().next().unwrap_or("")
                    )
                })
            })
            .collect()
    }

    /// Jobs `ids` of `session` were told to a turn, their ends journaled: no later turn is
    /// told again, nor a later tern, which finds each end beside its log too.
    pub fn mark_told(&self, session: &SessionId, ids: &[u64]) {
        let mut records = Vec::new();
        for id in ids {
            if let Some(job) = self.table().get_mut(&(session.clone(), *id)) {
                job.told = true;
                records.push(JobRecord {
                    ended: Some(job.state()),
                    ..job.record.clone()
                });
            }
        }
        for record in records {
            if let Ok(json) = serde_json::to_vec(&record) {
                let _ = std::fs::write(record_path(&record.log), json);
            }
        }
    }

    /// The jobs of `session` that have ended since its turns last heard, for the next turn
    /// to be told and to journal.
    pub fn ended_untold(&self, session: &SessionId) -> Vec<JobEnd> {
        self.table()
            .range(of(session))
            .filter(|(_, job)| !job.told)
            .filter_map(|((_, id), job)| {
                let (runs, how) = job.status();
                let line = format!(
                    "job {id}: {} ({how}; its log: {})",
                    job.record.command.lines().next().unwrap_or(""),
                    job.record.log.display()
                );
                (!runs).then_some(JobEnd { id: *id, how, line })
            })
            .collect()
    }

    /// Every job of `session`, with its log as `job_output` shows it when `with_output`.
    pub fn views(&self, session: &SessionId, with_output: bool) -> Vec<JobView> {
        let views: Vec<JobView> = self
            .table()
            .range(of(session))
            .map(|((_, id), job)| {
                let (running, state) = job.status();
                JobView {
                    id: *id,
                    command: job.record.command.clone(),
                    state,
                    running,
                    log: job.record.log.clone(),
                    output: None,
                }
            })
            .collect();
        match with_output {
            false => views,
            // The logs are read outside the table's lock.
            true => views
                .into_iter()
                .map(|view| JobView {
                    output: Some(shown_log(&view.log)),
                    ..view
                })
                .collect(),
        }
    }
}

impl Drop for Jobs {
    /// A job does not outlive the tern that started it.
    fn drop(&mut self) {
        let table = self.table.get_mut().unwrap_or_else(PoisonError::into_inner);
        for job in table.values().filter(|job| job.lives()) {
            group::signal(job.record.group, libc::SIGKILL);
        }
    }
}

/// What a job of an earlier tern left running is killed: its leader if it still is the same
/// process, and whatever in its group carries its mark. How it ended, in words, and whether
/// a turn was told already.
fn reap(session: &SessionId, record: &JobRecord) -> (String, bool) {
    let leader = record.ended.is_none()
        && record
            .leader_start
            .as_ref()
            .is_some_and(|identity| group::same_process(record.group, identity));
    if leader {
        group::signal(record.group, libc::SIGKILL);
    }
    let left = match record.ended {
        None => group::kill_leftovers(record.group, &group::mark(session, record.id)),
        Some(_) => 0,
    };
    let leftover = leader || left > 0;
    match &record.ended {
        Some(how) => (how.clone(), true),
        None if record.rested => (
            "stopped when its session went to rest, if it had not ended before".to_owned(),
            false,
        ),
        None if leftover => (
            "reaped: the tern that started it stopped without ending it, so it was \
             killed at the next start"
                .to_owned(),
            false,
        ),
        None => (
            "reaped: it ended with the tern that started it".to_owned(),
            false,
        ),
    }
}

/// The keys of every job of `session`.
fn of(session: &SessionId) -> std::ops::RangeInclusive<(SessionId, u64)> {
    (session.clone(), 0)..=(session.clone(), u64::MAX)
}

/// Where a job's record lies beside its log: `job-3.log` → `job-3.json`.
fn record_path(log: &Path) -> PathBuf {
    log.with_extension("json")
}

/// The job records beside the logs in `log_dir`; none when it does not exist.
fn records_beside_logs(log_dir: &Path) -> Vec<JobRecord> {
    let Ok(entries) = std::fs::read_dir(log_dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|entry| entry.path().extension().is_some_and(|ext| ext == "json"))
        .filter_map(|entry| {
            use std::io::Read;
            let (file, _) = super::regular_file::open_for_reading(&entry.path()).ok()?;
            let mut bytes = Vec::new();
            file.take(64 * 1024).read_to_end(&mut bytes).ok()?;
            serde_json::from_slice::<JobRecord>(&bytes).ok()
        })
        // A number no tern gives (a damaged or hand-made record) is not taken in.
        .filter(|record| (1..=u64::from(u32::MAX)).contains(&record.id))
        .collect()
}

/// A job's log as shown, with a note where an older part was moved aside or it cannot be read.
fn shown_log(log: &Path) -> String {
    let mut shown = match read_ends(log) {
        Ok(text) => text,
        Err(err) => return format!("(cannot read {}: {err})", log.display()),
    };
    let older = group::older_log(log);
    if older.exists() {
        shown.insert_str(
            0,
            &format!(
                "[earlier output, past {} MiB, is in {}]\n",
                group::LOG_CAP >> 20,
                older.display()
            ),
        );
    }
    shown
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
