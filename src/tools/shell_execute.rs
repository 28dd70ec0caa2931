//! `shell_execute`: runs a command with `bash -c` (or `sh -c` where bash is missing) and
//! returns its exit status and output.
//!
//! stdout and stderr share one pipe, so the captured text interleaves them exactly as a
//! terminal would show `cmd 2>&1`. The output goes through an [`OutputCap`], so a command
//! printing gigabytes costs a bounded 30 KB of memory. The command runs in a new session (and
//! so a new process group) without a controlling terminal: a password prompt fails at once
//! instead of fighting the TUI for the keyboard, and a timeout or cancel can stop the command
//! together with everything it started.
//!
//! The command gets tern's environment without anything that is or looks like a credential
//! ([`super::child_env`]): the model reads whatever a command prints, and `env` would
//! otherwise print tern's API keys. It runs for at most `[tools] shell_max_duration` in all,
//! or what the call asks for with `timeout_secs` up to `shell_max_duration_ceiling`, besides
//! the inactivity watchdog; a command that never stops printing meets that limit. Its output
//! is made fit to read ([`super::printable`]): binary data summarised, control characters
//! escaped.

use super::args::{ArgError, Args};
use super::check::CheckFuture;
use super::output::{OutputCap, human_bytes};
use super::preview::{Preview, PreviewFuture};
use super::{ApprovalNeed, Tool, ToolContext, ToolEffect, ToolFuture, ToolOutput};
use crate::config::ToolSettings;
use crate::domain::{ApprovalDetail, Audience};
use serde_json::{Value, json};
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;
use tokio::io::AsyncReadExt;
use tokio::net::unix::pipe;
use tokio::process::{Child, Command};
use tokio::time::{Instant, sleep_until, timeout};
use tokio_util::sync::CancellationToken;

/// Bytes kept from the start of the output.
pub const HEAD_BYTES: usize = 15 * 1024;
/// Bytes kept from the end of the output.
pub const TAIL_BYTES: usize = 15 * 1024;
/// Between SIGTERM and SIGKILL.
const KILL_GRACE: Duration = Duration::from_millis(1000);
/// How long output is still read after the command exits, when something it started in the
/// background keeps the pipe open.
const DRAIN_GRACE: Duration = Duration::from_millis(250);

/// How long a command may run in all, output or not (`[tools]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShellLimits {
    /// The limit of a call that asks for none (`shell_max_duration`).
    pub max_duration: Duration,
    /// The longest limit a call may ask for with `timeout_secs`
    /// (`shell_max_duration_ceiling`); more is lowered to it.
    pub ceiling: Duration,
}

impl From<&ToolSettings> for ShellLimits {
    fn from(settings: &ToolSettings) -> Self {
        Self {
            max_duration: settings.shell_max_duration,
            ceiling: settings.shell_max_duration_ceiling,
        }
    }
}

impl Default for ShellLimits {
    fn default() -> Self {
        Self::from(&ToolSettings::default())
    }
}

/// Runs a shell command.
pub struct ShellExecute {
    limits: ShellLimits,
    /// Made once from the limits, so every request carries the same bytes.
    description: String,
}

impl ShellExecute {
    /// The tool with these limits, which its description and schema tell the model.
    pub fn new(limits: ShellLimits) -> Self {
        let description = format!(
            "Run a shell command with `bash -c` in the working directory and return its exit \
             code and output (stdout and stderr interleaved). stdin is empty and there is no \
             terminal, so interactive programs and password prompts fail; pass flags that \
             avoid prompts. Long output keeps only its first and last 15 KB: redirect to a \
             file and search it when you need everything. Binary output is summarised (size, \
             kind, first bytes in hex) and control characters are shown escaped (ESC as \
             \\x1b). The command is stopped after a period without any output, and after {} \
             seconds in all unless `timeout_secs` sets another limit (at most {}). \
             Credentials are not passed: the providers' key variables, variables whose names \
             contain KEY, TOKEN, SECRET, PASSWORD, PASSWD, CREDENTIAL or AUTH or have a word \
             PAT, PASS, PWD or CRED, and variables whose values hold a URL with a password or \
             a token-shaped string are removed. Use file_read, grep and glob rather than cat, \
             grep and find.",
            limits.max_duration.as_secs(),
            limits.ceiling.as_secs()
        );
        Self {
            limits,
            description,
        }
    }
}

impl Tool for ShellExecute {
    fn name(&self) -> &'static str {
        "shell_execute"
    }

    fn summary(&self) -> &'static str {
        "Run a shell command in the working directory; returns exit code and output."
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn input_schema(&self) -> Value {
        let (max, ceiling) = (
            self.limits.max_duration.as_secs(),
            self.limits.ceiling.as_secs(),
        );
        json!({
            "type": "object",
            "properties": {
                "command": {"type": "string", "description": "The command line, run with bash -c."},
                "timeout_secs": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": ceiling,
                    "description": format!(
                        "Stop the command after this many seconds in all, even if it keeps \
                         printing. Without it the limit is {max}; at most {ceiling}."
                    )
                },
                "description": {"type": "string", "description": "A few words saying what the command does, shown to the user."},
                "background": {"type": "boolean", "description": "Start it as a background job and return its job_id at once (a server, a watcher, a long build); read it with job_output, stop it with job_kill."}
            },
            "required": ["command"],
            "additionalProperties": false
        })
    }

    fn min_audience(&self) -> Audience {
        Audience::Team
    }

    fn is_read_only(&self) -> bool {
        false
    }

    fn watches_its_own_progress(&self) -> bool {
        true
    }

    fn keeps_spool(&self) -> bool {
        true
    }

    fn approval_need(&self, _input: &Value, _ctx: &ToolContext) -> ApprovalNeed {
        ApprovalNeed::Exec
    }

    /// The arguments, and that the working directory is still there.
    fn check<'a>(&'a self, input: &'a Value, ctx: &'a ToolContext) -> CheckFuture<'a> {
        let parsed = parse(self.name(), input, &self.limits).map(drop);
        Box::pin(async move {
            parsed.map_err(|err| err.0)?;
            if ctx.cwd.is_dir() {
                Ok(())
            } else {
                Err(missing_cwd(&ctx.cwd))
            }
        })
    }

    fn preview<'a>(&'a self, input: &'a Value, ctx: &'a ToolContext) -> PreviewFuture<'a> {
        let preview = parse(self.name(), input, &self.limits)
            .ok()
            .map(|request| Preview {
                summary: format!("Run `{}`", one_line(&request.command, 80)),
                detail: ApprovalDetail::Command {
                    command: request.command,
                    cwd: ctx.cwd.clone(),
                },
            });
        Box::pin(async move { preview })
    }

    fn execute<'a>(
        &'a self,
        input: Value,
        ctx: &'a ToolContext,
        cancel: CancellationToken,
    ) -> ToolFuture<'a> {
        Box::pin(async move {
            let request = match parse(self.name(), &input, &self.limits) {
                Ok(request) => request,
                Err(err) => return err.into(),
            };
            if !ctx.cwd.is_dir() {
                return ToolOutput::error(missing_cwd(&ctx.cwd));
            }
            if let Err(err) = tokio::fs::create_dir_all(&ctx.temp_dir).await {
                return ToolOutput::error(format!(
                    "Cannot create the temporary directory {}: {err}",
                    ctx.temp_dir.display()
                ));
            }
            if request.background {
                return start_job(&request.command, ctx);
            }
            match run(&request, ctx, &cancel).await {
                Ok(output) => output,
                Err(err) => ToolOutput::error(format!("Cannot start the command: {err}")),
            }
        })
    }
}

/// Starts `command` as a background job of the session.
fn start_job(command: &str, ctx: &ToolContext) -> ToolOutput {
    let Some(jobs) = &ctx.jobs else {
        return ToolOutput::error(
            "Background jobs are not available in this session; run the command without \
             `background`.",
        );
    };
    match jobs.jobs.start(&jobs.session, command, ctx, &jobs.log_dir) {
        Ok(record) => ToolOutput::ok(
            json!({"job_id": record.id, "state": "running", "log": record.log.display().to_string()})
                .to_string(),
        )
        .with_effect(ToolEffect::JobStarted(record)),
        Err(why) => ToolOutput::error(format!("Cannot start the job: {why}")),
    }
}

/// A checked call.
struct Request {
    command: String,
    /// Started as a background job.
    background: bool,
    /// How long it may run in all.
    hard_limit: Duration,
    /// Whether the call set `hard_limit` with `timeout_secs`.
    asked: bool,
    /// The ceiling, for telling the model what it may ask for.
    ceiling: Duration,
    /// Set when `timeout_secs` was lowered to the ceiling.
    lowered_from: Option<u64>,
}

fn parse(tool: &'static str, input: &Value, limits: &ShellLimits) -> Result<Request, ArgError> {
    let args = Args::new(tool, input)?;
    let command = args.string("command")?.to_string();
    if command.trim().is_empty() {
        return Err(ArgError(format!("{tool}: `command` is empty")));
    }
    args.opt_string("description")?;
    let background = args.opt_bool("background")?.unwrap_or(false);
    let asked = args.opt_u64("timeout_secs", 1)?;
    let ceiling = limits.ceiling.as_secs();
    Ok(Request {
        command,
        background,
        hard_limit: asked.map_or(limits.max_duration, |secs| {
            Duration::from_secs(secs.min(ceiling))
        }),
        asked: asked.is_some(),
        ceiling: limits.ceiling,
        lowered_from: asked.filter(|&secs| secs > ceiling),
    })
}

/// The first line of `command`, cut to `chars` characters, with `…` where anything was left
/// out.
fn one_line(command: &str, chars: usize) -> String {
    let first = command.trim().lines().next().unwrap_or("");
    let mut shown: String = first.chars().take(chars).collect();
    if shown.len() < command.trim().len() {
        shown.push('…');
    }
    shown
}

/// Why the reading loop ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    /// The command exited and its output reached end of file.
    Finished,
    /// The command exited but something it left running still holds the output open.
    LeftRunning,
    /// No output for the inactivity limit.
    Silent,
    /// The limit on the whole run: `timeout_secs` or `[tools] shell_max_duration`.
    HardLimit,
    Cancelled,
}

async fn run(
    request: &Request,
    ctx: &ToolContext,
    cancel: &CancellationToken,
) -> io::Result<ToolOutput> {
    let (writer, mut reader) = pipe::pipe()?;
    let stdout: OwnedFd = writer.into_blocking_fd()?;
    let stderr = stdout.try_clone()?;
    let mut command = Command::new(shell());
    // First, since it clears whatever environment was set before it.
    ctx.child_env.apply(command.as_std_mut());
    command
        .arg("-c")
        .arg(&request.command)
        .current_dir(&ctx.cwd)
        .env("TMPDIR", &ctx.temp_dir)
        .env("TMP", &ctx.temp_dir)
        .env("TEMP", &ctx.temp_dir)
        .stdin(Stdio::null())
        .stdout(Stdio::from(stdout))
        .stderr(Stdio::from(stderr))
        .kill_on_drop(true);
    // SAFETY: the closure runs in the forked child before exec and only makes system calls
    // (setsid, the scheduling slice), which are async-signal-safe and touch no memory of the
    // parent.
    unsafe {
        command.pre_exec(|| {
            if libc::setsid() == -1 {
                return Err(io::Error::last_os_error());
            }
            // A command may run long: the default slice, whichever thread started it.
            crate::priority::ordinary_slice();
            Ok(())
        });
    }
    let started = Instant::now();
    let mut child = command.spawn()?;
    // The command object holds our copies of the pipe's write end; until they are closed the
    // reader never sees end of file.
    drop(command);
    let mut group = GroupGuard(child.id().and_then(|id| i32::try_from(id).ok()));

    let idle_limit = (!ctx.tool_timeout.is_zero()).then_some(ctx.tool_timeout);
    let hard_deadline = started + request.hard_limit;
    let mut capture = OutputCap::new(HEAD_BYTES, TAIL_BYTES);
    let mut spool = Spool::create(ctx.spool.as_deref());
    let mut buf = vec![0u8; 64 * 1024];
    let mut last_output = started;
    let mut status: Option<io::Result<ExitStatus>> = None;
    let mut exited_at: Option<Instant> = None;
    let mut eof = false;

    let stop = loop {
        if eof && status.is_some() {
            break Stop::Finished;
        }
        let (deadline, on_deadline) = [
            idle_limit.map(|limit| (last_output + limit, Stop::Silent)),
            Some((hard_deadline, Stop::HardLimit)),
            exited_at.map(|at| (at + DRAIN_GRACE, Stop::LeftRunning)),
        ]
        .into_iter()
        .flatten()
        .min_by_key(|(at, _)| *at)
        .unwrap_or((hard_deadline, Stop::HardLimit));
        tokio::select! {
            // Deadlines come before reads so a command that never stops printing still meets
            // its hard limit.
            biased;
            _ = cancel.cancelled() => break Stop::Cancelled,
            _ = sleep_until(deadline) => break on_deadline,
            read = reader.read(&mut buf), if !eof => match read {
                Ok(0) => eof = true,
                Ok(n) => {
                    capture.push(&buf[..n]);
                    spool.push(&buf[..n]);
                    last_output = Instant::now();
                }
                Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => eof = true,
            },
            waited = child.wait(), if status.is_none() => {
                status = Some(waited);
                exited_at = Some(Instant::now());
            }
        }
    };

    if matches!(stop, Stop::Silent | Stop::HardLimit | Stop::Cancelled) {
        if status.is_none() || !eof {
            status = Some(stop_group(&mut child, &mut group, status).await);
        }
        // Whatever the command printed while it was being stopped.
        drain(&mut reader, &mut capture, &mut spool, &mut buf).await;
    }
    // A command that exited on its own may leave daemons it started on purpose; those live on.
    group.disarm();

    let is_error = !matches!(stop, Stop::Finished | Stop::LeftRunning);
    let mut text = summarize(
        stop,
        status.as_ref(),
        started.elapsed(),
        idle_limit,
        request,
    );
    text.push('\n');
    let total = capture.total_bytes();
    let cut = capture.is_cut();
    // A binary output's summary already gives its size.
    let binary = capture.is_binary();
    if total == 0 {
        text.push_str("(no output)\n");
    } else {
        text.push_str(&capture.into_text());
        if !text.ends_with('\n') {
            text.push('\n');
        }
    }
    if cut && !binary {
        text.push_str(&format!(
            "[the output was {}; only its first and last 15 KB are shown. Redirect it to a \
             file and search that with grep to see the rest]\n",
            human_bytes(total)
        ));
    }
    if stop == Stop::LeftRunning {
        text.push_str(
            "[a process the command started is still running and holds the output open; its \
             further output is not captured]\n",
        );
    }
    if let Some(asked) = request.lowered_from {
        text.push_str(&format!(
            "[timeout_secs {asked} was lowered to the maximum of {}]\n",
            request.ceiling.as_secs()
        ));
    }
    // A command that printed nothing may still have changed things, so it is never
    // `empty`.
    Ok(ToolOutput {
        content: text,
        is_error,
        effects: Vec::new(),
        empty: false,
        images: Vec::new(),
    })
}

/// Why a command cannot start in `cwd`.
fn missing_cwd(cwd: &std::path::Path) -> String {
    format!(
        "The working directory {} does not exist; move to an existing one with \
         set_working_directory.",
        cwd.display()
    )
}

/// `bash` when it is on `PATH`, `sh` otherwise.
fn shell() -> &'static str {
    shell_program().0
}

/// The shell commands run in (`bash` when it is on `PATH`, `sh` otherwise) and where `PATH`
/// finds it, for telling the model which grammar its commands are read in.
pub fn shell_program() -> (&'static str, Option<PathBuf>) {
    let find = |name: &str| {
        std::env::var_os("PATH").and_then(|path| {
            std::env::split_paths(&path)
                .map(|dir| dir.join(name))
                .find(|candidate| candidate.is_file())
        })
    };
    match find("bash") {
        Some(path) => ("bash", Some(path)),
        None => ("sh", find("sh")),
    }
}

/// SIGTERM to the whole group, SIGKILL after a grace period, and the leader's exit status.
async fn stop_group(
    child: &mut Child,
    group: &mut GroupGuard,
    status: Option<io::Result<ExitStatus>>,
) -> io::Result<ExitStatus> {
    group.signal(libc::SIGTERM);
    let status = match status {
        Some(status) => status,
        None => match timeout(KILL_GRACE, child.wait()).await {
            Ok(status) => status,
            Err(_) => {
                group.signal(libc::SIGKILL);
                child.wait().await
            }
        },
    };
    // Stragglers that ignored SIGTERM while the leader exited.
    group.signal(libc::SIGKILL);
    status
}

/// Reads what is left in the pipe, for a short while at most.
async fn drain(
    reader: &mut pipe::Receiver,
    capture: &mut OutputCap,
    spool: &mut Spool,
    buf: &mut [u8],
) {
    let deadline = Instant::now() + Duration::from_millis(200);
    while let Ok(Ok(n)) = tokio::time::timeout_at(deadline, reader.read(buf)).await {
        if n == 0 {
            break;
        }
        capture.push(&buf[..n]);
        spool.push(&buf[..n]);
    }
}

/// Bytes of output a spool keeps, from the start; enough for what recovery shows.
const SPOOL_MAX: u64 = 1024 * 1024;

/// The command's output copied to the call's spool file as it comes, so that if tern stops
/// while it runs, recovery can say what it had printed. Best effort: a spool that cannot be
/// written is given up without failing the command.
struct Spool {
    file: Option<std::fs::File>,
    written: u64,
}

impl Spool {
    fn create(path: Option<&std::path::Path>) -> Self {
        let file = path.and_then(|path| {
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir).ok()?;
            }
            let mut options = std::fs::OpenOptions::new();
            options.write(true).create(true).truncate(true);
            std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
            options.open(path).ok()
        });
        Self { file, written: 0 }
    }

    fn push(&mut self, bytes: &[u8]) {
        let Some(file) = &mut self.file else {
            return;
        };
        let room = SPOOL_MAX.saturating_sub(self.written) as usize;
        let take = &bytes[..bytes.len().min(room)];
        if take.is_empty() || std::io::Write::write_all(file, take).is_err() {
            self.file = None;
            return;
        }
        self.written += take.len() as u64;
    }
}

/// The first line of the result: how the command ended and how long it took.
fn summarize(
    stop: Stop,
    status: Option<&io::Result<ExitStatus>>,
    elapsed: Duration,
    idle_limit: Option<Duration>,
    request: &Request,
) -> String {
    let took = seconds(elapsed);
    let stopped = "the command and the processes it started were stopped";
    match stop {
        Stop::Silent => format!(
            "Timed out after {} s without output ({took} s in all); {stopped}. If it needs \
             longer without output, run it in the background with its output in a file.",
            seconds(idle_limit.unwrap_or_default())
        ),
        Stop::HardLimit if request.asked => format!(
            "Timed out after {took} s, the timeout_secs limit of {} s; {stopped}.",
            seconds(request.hard_limit)
        ),
        Stop::HardLimit => format!(
            "Timed out after {took} s, the limit of {} s for a command without timeout_secs; \
             {stopped}. If it needs longer, give timeout_secs (at most {}), or run it in the \
             background with its output in a file.",
            seconds(request.hard_limit),
            request.ceiling.as_secs()
        ),
        Stop::Cancelled => format!("Cancelled after {took} s; {stopped}."),
        Stop::Finished | Stop::LeftRunning => match status {
            Some(Ok(status)) => match (status.code(), status.signal()) {
                (Some(code), _) => format!("Exit code {code} after {took} s."),
                (None, Some(signal)) => {
                    format!(
                        "Killed by signal {signal}{} after {took} s.",
                        signal_name(signal)
                    )
                }
                (None, None) => format!("Ended after {took} s."),
            },
            Some(Err(err)) => format!("Ended after {took} s; its exit status is unknown: {err}."),
            None => format!("Ended after {took} s."),
        },
    }
}

fn seconds(d: Duration) -> String {
    let secs = d.as_secs_f64();
    if secs < 10.0 {
        format!("{secs:.1}")
    } else {
        format!("{secs:.0}")
    }
}

fn signal_name(signal: i32) -> &'static str {
    match signal {
        libc::SIGHUP => " (SIGHUP)",
        libc::SIGINT => " (SIGINT)",
        libc::SIGABRT => " (SIGABRT)",
        libc::SIGKILL => " (SIGKILL)",
        libc::SIGSEGV => " (SIGSEGV)",
        libc::SIGPIPE => " (SIGPIPE)",
        libc::SIGTERM => " (SIGTERM)",
        _ => "",
    }
}

/// The command's process group. Kills the group if the call is dropped before it finished, so
/// an abandoned tool call never leaves a command running.
struct GroupGuard(Option<i32>);

impl GroupGuard {
    fn signal(&self, signal: i32) {
        if let Some(pgid) = self.0
            && pgid > 0
        {
            // SAFETY: kill has no memory-safety preconditions; a negative pid addresses the
            // process group the command leads (it called setsid, so pgid == its pid).
            unsafe {
                libc::kill(-pgid, signal);
            }
        }
    }

    fn disarm(&mut self) {
        self.0 = None;
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.signal(libc::SIGKILL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_is_summarised_by_its_first_line() {
        assert_eq!(one_line("  cargo test ", 80), "cargo test");
        assert_eq!(one_line("make\nmake install", 80), "make…");
        assert_eq!(one_line(&"x".repeat(100), 5), "xxxxx…");
    }

    const LIMITS: ShellLimits = ShellLimits {
        max_duration: Duration::from_secs(90),
        ceiling: Duration::from_secs(300),
    };

    /// The limit a call gets, whether it asked for it, and what it asked for above the
    /// ceiling.
    #[track_caller]
    fn check_limit(input: Value, expected: (u64, bool, Option<u64>)) {
        let request = parse("shell_execute", &input, &LIMITS).unwrap();
        assert_eq!(
            (
                request.hard_limit.as_secs(),
                request.asked,
                request.lowered_from
            ),
            expected,
            "{input}"
        );
    }

    #[test]
    fn a_call_without_timeout_secs_gets_the_configured_limit() {
        check_limit(json!({"command": "true"}), (90, false, None));
    }

    #[test]
    fn timeout_secs_may_ask_for_longer_or_shorter_up_to_the_ceiling() {
        check_limit(
            json!({"command": "true", "timeout_secs": 5}),
            (5, true, None),
        );
        check_limit(
            json!({"command": "true", "timeout_secs": 300}),
            (300, true, None),
        );
        check_limit(
            json!({"command": "true", "timeout_secs": 9999}),
            (300, true, Some(9999)),
        );
    }

    #[test]
    fn description_and_schema_tell_the_configured_limits() {
        let tool = ShellExecute::new(LIMITS);
        assert!(
            tool.description().contains(
                "after 90 seconds in all unless `timeout_secs` sets another limit (at most 300)"
            ),
            "{}",
            tool.description()
        );
        let schema = tool.input_schema();
        assert_eq!(schema["properties"]["timeout_secs"]["maximum"], 300);
        assert!(
            schema["properties"]["timeout_secs"]["description"]
                .as_str()
                .unwrap()
                .contains("Without it the limit is 90; at most 300."),
            "{schema}"
        );
        assert_eq!(
            tool.summary(),
            "Run a shell command in the working directory; returns exit code and output."
        );
    }

    #[test]
    fn empty_command_is_refused() {
        assert!(parse("shell_execute", &json!({"command": "  "}), &LIMITS).is_err());
        assert!(parse("shell_execute", &json!({"command": 3}), &LIMITS).is_err());
    }

    #[test]
    fn summary_names_exit_code_and_signal() {
        let exit = |raw| Some(Ok(ExitStatus::from_raw(raw)));
        let d = Duration::from_millis(1234);
        let request = parse("shell_execute", &json!({"command": "true"}), &LIMITS).unwrap();
        assert_eq!(
            summarize(Stop::Finished, exit(3 << 8).as_ref(), d, None, &request),
            "Exit code 3 after 1.2 s."
        );
        assert_eq!(
            summarize(Stop::Finished, exit(9).as_ref(), d, None, &request),
            "Killed by signal 9 (SIGKILL) after 1.2 s."
        );
    }

    #[test]
    fn the_hard_limit_summary_says_which_limit_fired() {
        let d = Duration::from_secs(90);
        let without = parse("shell_execute", &json!({"command": "yes"}), &LIMITS).unwrap();
        let text = summarize(Stop::HardLimit, None, d, None, &without);
        assert!(
            text.starts_with(
                "Timed out after 90 s, the limit of 90 s for a command without timeout_secs;"
            ),
            "{text}"
        );
        assert!(text.contains("give timeout_secs (at most 300)"), "{text}");
        let asked = parse(
            "shell_execute",
            &json!({"command": "yes", "timeout_secs": 2}),
            &LIMITS,
        )
        .unwrap();
        let text = summarize(Stop::HardLimit, None, d, None, &asked);
        assert!(
            text.starts_with("Timed out after 90 s, the timeout_secs limit of 2.0 s;"),
            "{text}"
        );
    }
}
