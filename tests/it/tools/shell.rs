//! shell_execute against real child processes: exit codes, output capture and caps, binary
//! and control characters in the output, the environment, the inactivity and hard time limits
//! (configured and asked for), cancel, and killing the whole group.

use super::{Project, call_with, check_error, child_report, in_child, run_in_child};
use serde_json::{Value, json};
use std::ffi::OsStr;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use tern::tools::shell_execute::ShellExecute;
use tern::tools::{ApprovalNeed, ShellLimits, Tool, ToolOutput};
use tokio_util::sync::CancellationToken;

// ---- shell_execute ---------------------------------------------------------------------

#[tokio::test]
async fn shell_reports_exit_codes_and_interleaved_output() {
    let p = Project::new();
    let out = p
        .call(
            "shell_execute",
            json!({"command": "echo out; echo err >&2; exit 3"}),
        )
        .await;
    assert!(
        !out.is_error,
        "a failing command is a result, not a tool error"
    );
    assert!(
        out.content.starts_with("Exit code 3 after "),
        "{}",
        out.content
    );
    assert!(out.content.ends_with("\nout\nerr\n"), "{}", out.content);

    let out = p.call("shell_execute", json!({"command": "true"})).await;
    assert!(
        out.content.starts_with("Exit code 0 after "),
        "{}",
        out.content
    );
    assert!(out.content.ends_with("\n(no output)\n"), "{}", out.content);

    let out = p
        .call("shell_execute", json!({"command": "kill -9 $$"}))
        .await;
    assert!(
        out.content.starts_with("Killed by signal 9 (SIGKILL)"),
        "{}",
        out.content
    );
}

#[tokio::test]
async fn shell_runs_in_cwd_with_tmpdir_and_no_stdin() {
    let p = Project::new();
    let out = p
        .call(
            "shell_execute",
            json!({"command": "pwd; echo \"$TMPDIR\"; echo \"$TMP $TEMP\"; test -d \"$TMPDIR\" && echo made; cat; echo end"}),
        )
        .await;
    let temp = p.ctx.temp_dir.display();
    let expected = format!("{}\n{temp}\n{temp} {temp}\nmade\nend\n", p.dir.display());
    assert!(out.content.ends_with(&expected), "{}", out.content);
}

#[tokio::test]
async fn shell_stops_a_silent_command_at_the_inactivity_limit() {
    let mut p = Project::new();
    p.ctx.tool_timeout = Duration::from_millis(300);
    let started = Instant::now();
    let out = p
        .call("shell_execute", json!({"command": "echo begun; sleep 5"}))
        .await;
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    check_error(&out, &["Timed out after 0.3 s without output", "begun"]);
}

#[tokio::test]
async fn shell_output_resets_the_inactivity_limit() {
    let mut p = Project::new();
    p.ctx.tool_timeout = Duration::from_secs(1);
    let out = p
        .call(
            "shell_execute",
            json!({"command": "for i in 1 2 3 4 5; do echo $i; sleep 0.3; done"}),
        )
        .await;
    assert!(out.content.starts_with("Exit code 0"), "{}", out.content);
    assert!(out.content.ends_with("1\n2\n3\n4\n5\n"), "{}", out.content);
}

#[tokio::test]
async fn shell_hard_limit_stops_a_chatty_command() {
    let p = Project::new();
    let started = Instant::now();
    let out = p
        .call(
            "shell_execute",
            json!({"command": "while true; do echo tick; sleep 0.05; done", "timeout_secs": 1}),
        )
        .await;
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
    check_error(&out, &["timeout_secs limit of 1.0 s", "tick"]);
}

/// Runs `input` through a shell tool held to `max_duration` seconds in all by default and
/// `ceiling` at most.
async fn call_limited(p: &Project, max_duration: u64, ceiling: u64, input: Value) -> ToolOutput {
    let tool = ShellExecute::new(ShellLimits {
        max_duration: Duration::from_secs(max_duration),
        ceiling: Duration::from_secs(ceiling),
    });
    tool.execute(input, &p.ctx, CancellationToken::new()).await
}

#[tokio::test]
async fn shell_max_duration_stops_a_command_that_never_stops_printing() {
    let p = Project::new();
    let out = call_limited(&p, 1, 2, json!({"command": "yes"})).await;
    check_error(
        &out,
        &[
            "the limit of 1.0 s for a command without timeout_secs",
            "give timeout_secs (at most 2)",
            "y\ny\ny\n",
        ],
    );
}

#[tokio::test]
async fn shell_timeout_secs_above_the_ceiling_is_lowered_and_says_so() {
    let p = Project::new();
    let out = call_limited(
        &p,
        1,
        1,
        json!({"command": "while true; do echo tick; done", "timeout_secs": 30}),
    )
    .await;
    check_error(
        &out,
        &[
            "the timeout_secs limit of 1.0 s",
            "tick",
            "[timeout_secs 30 was lowered to the maximum of 1]",
        ],
    );
}

#[tokio::test]
async fn shell_binary_output_is_summarised_not_shown() {
    let p = Project::new();
    let out = p
        .call("shell_execute", json!({"command": "head -c 4096 /bin/ls"}))
        .await;
    assert!(!out.is_error, "{}", out.content);
    assert!(
        out.content
            .contains("Binary output, 4.0 KB (4,096 bytes): it looks like an ELF executable"),
        "{}",
        out.content
    );
    assert!(
        out.content.contains("00000000: 7f45 4c46"),
        "{}",
        out.content
    );
    assert!(out.content.len() < 1500, "{}", out.content);
    assert!(
        !out.content.contains(['\0', '\u{FFFD}', '\x1b']),
        "{}",
        out.content
    );
}

#[tokio::test]
async fn shell_control_characters_are_escaped() {
    let p = Project::new();
    let out = p
        .call(
            "shell_execute",
            json!({"command": "printf '\\x1b[31mred\\x1b[0m\\n'; printf '10%%\\r100%%\\n'"}),
        )
        .await;
    assert!(
        out.content.ends_with("\n\\x1b[31mred\\x1b[0m\n100%\n"),
        "{}",
        out.content
    );
    assert!(!out.content.contains(['\x1b', '\r']), "{}", out.content);
}

#[tokio::test]
async fn shell_kill_reaches_the_whole_process_group() {
    let mut p = Project::new();
    p.ctx.tool_timeout = Duration::from_millis(300);
    let pid_file = p.dir.join("child.pid");
    let command = format!("sleep 30 & echo $! > '{}'; wait", pid_file.display());
    let out = p.call("shell_execute", json!({"command": command})).await;
    check_error(&out, &["Timed out"]);
    let pid = std::fs::read_to_string(&pid_file).expect("the pid file");
    let stat = PathBuf::from(format!("/proc/{}/stat", pid.trim()));
    // Signals are delivered asynchronously; give the kernel a moment.
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let gone = match std::fs::read_to_string(&stat) {
            Err(_) => true,
            // A zombie is dead, waiting for whoever adopted it to reap it.
            Ok(s) => s
                .rsplit(')')
                .next()
                .is_some_and(|rest| rest.trim_start().starts_with('Z')),
        };
        if gone {
            break;
        }
        assert!(Instant::now() < deadline, "the background sleep survived");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[tokio::test]
async fn shell_caps_50_mb_of_output_in_bounded_time() {
    let p = Project::new();
    let started = Instant::now();
    let out = p
        .call(
            "shell_execute",
            json!({"command": "yes | head -c 50000000; echo; echo last line"}),
        )
        .await;
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    assert!(!out.is_error, "{}", &out.content[..200]);
    assert!(out.content.len() < 40 * 1024, "{}", out.content.len());
    assert!(
        out.content.starts_with("Exit code 0 after "),
        "{}",
        &out.content[..100]
    );
    assert!(out.content.contains("y\ny\ny\n"));
    assert!(out.content.contains("cut from the middle"));
    assert!(
        out.content.contains("[the output was 47.7 MB"),
        "{}",
        out.content
    );
    assert!(out.content.contains("y\n\nlast line\n"), "the tail is kept");
}

#[tokio::test]
async fn shell_cancel_stops_the_command_promptly() {
    let p = Project::new();
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        trigger.cancel();
    });
    let started = Instant::now();
    let out = call_with(
        "shell_execute",
        json!({"command": "echo waiting; sleep 30"}),
        &p.ctx,
        cancel,
    )
    .await;
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    check_error(&out, &["Cancelled after", "waiting"]);
}

#[tokio::test]
async fn shell_refuses_a_missing_working_directory() {
    let mut p = Project::new();
    p.ctx.cwd = p.dir.join("gone");
    let out = p.call("shell_execute", json!({"command": "true"})).await;
    check_error(&out, &["does not exist", "set_working_directory"]);
    assert_eq!(
        p.need("shell_execute", json!({"command": "ls"})),
        ApprovalNeed::Exec
    );
}

#[test]
fn shell_commands_do_not_see_secrets_from_the_environment() {
    let set: &[(&str, &str)] = &[
        ("ANTHROPIC_API_KEY", "sk-ant-test-0001"),
        ("OPENAI_API_KEY", "sk-openai-test-0002"),
        ("MY_SERVICE_TOKEN", "token-test-0003"),
        ("db_password", "password-test-0004"),
        ("Aws_Secret_Access_Key", "secret-test-0005"),
        ("DATABASE_URL", "postgres://u:password-test-0006@host/db"),
        ("GH_PAT", "pat-test-0007"),
        ("MY_PASSWD", "passwd-test-0008"),
        ("FOO", "sk-proj-0123456789abcdefghij0009"),
        ("TOKENIZERS_PARALLELISM", "false"),
        ("TERN_HARMLESS", "kept"),
        ("GIT_AUTHOR_NAME", "Ada"),
    ];
    let env: Vec<(&str, &OsStr)> = set
        .iter()
        .map(|(name, value)| (*name, OsStr::new(*value)))
        .collect();
    let shown = run_in_child("shell::child_prints_its_environment", "", &env);
    for (name, value) in &set[..9] {
        assert!(
            !shown.contains(value),
            "{name} reached the command: {shown}"
        );
        assert!(!shown.contains(&format!("{name}=")), "{name}: {shown}");
    }
    for kept in [
        "TOKENIZERS_PARALLELISM=false",
        "TERN_HARMLESS=kept",
        "GIT_AUTHOR_NAME=Ada",
        "PATH=",
    ] {
        assert!(shown.contains(kept), "{kept} missing: {shown}");
    }
    if let Some(home) = std::env::var_os("HOME") {
        let home = format!("HOME={}", home.to_string_lossy());
        assert!(shown.contains(&home), "{home} missing: {shown}");
    }
}

#[tokio::test]
#[ignore = "run in a child process by shell_commands_do_not_see_secrets_from_the_environment"]
async fn child_prints_its_environment() {
    if !in_child() {
        return;
    }
    let p = Project::new();
    let out = p.call("shell_execute", json!({"command": "env"})).await;
    assert!(!out.is_error, "{}", out.content);
    child_report(&out.content);
}

/// The time slice (nanoseconds) `/proc/self/sched` reports for a command `shell_execute`
/// starts from a thread that asked for a short one; `None` where the kernel has no slices.
async fn slice_of_a_command(p: &Project) -> Option<u64> {
    let out = p
        .call(
            "shell_execute",
            json!({"command": "grep '^se.slice' /proc/self/sched"}),
        )
        .await;
    out.content
        .lines()
        .find(|line| line.starts_with("se.slice"))
        .and_then(|line| line.split(':').nth(1))
        .and_then(|value| value.trim().parse().ok())
}

#[cfg(target_os = "linux")]
#[test]
fn a_command_started_from_a_thread_that_wants_a_core_soon_gets_the_ordinary_slice() {
    use tern::priority::{favour_latency, slice};
    // On a thread of its own: the slice is inherited by all this thread starts.
    std::thread::spawn(|| {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let p = Project::new();
        let ordinary = runtime.block_on(slice_of_a_command(&p));
        if ordinary.is_none() || !favour_latency() {
            // No slices to ask for or to see on this kernel.
            return;
        }
        let short = slice().expect("a slice");
        let theirs = runtime.block_on(slice_of_a_command(&p));
        assert!(
            theirs == ordinary && theirs != Some(short),
            "the command ran with a slice of {theirs:?} ns, the ordinary one {ordinary:?}, \
             the thread's {short}"
        );
    })
    .join()
    .expect("the thread ran");
}
