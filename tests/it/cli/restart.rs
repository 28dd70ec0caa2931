//! The long-lived `tern` stopping and restarting: SIGTERM drains the running turn after its
//! tool batch and the next start carries it on; a changed `config.toml` restarts tern in the
//! same process on the same session; an invalid one is reported and changes nothing.

use super::*;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin};
use std::sync::mpsc;

/// `tern` in line mode with its output read line by line as it comes (stdout and stderr
/// both, in arrival order per stream).
struct Conversation {
    child: Child,
    stdin: ChildStdin,
    lines: mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl Conversation {
    fn start(cli: &Cli) -> Self {
        let mut command = cli.home.tern_process();
        command
            .env("ANTHROPIC_API_KEY", "test-key")
            .env("ANTHROPIC_BASE_URL", cli.mock.base_url())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = command.spawn().expect("starting tern");
        let (tx, lines) = mpsc::channel();
        let out = child.stdout.take().unwrap();
        let err = child.stderr.take().unwrap();
        for stream in [
            Box::new(out) as Box<dyn std::io::Read + Send>,
            Box::new(err),
        ] {
            let tx = tx.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stream).lines().map_while(Result::ok) {
                    let _ = tx.send(line);
                }
            });
        }
        let stdin = child.stdin.take().unwrap();
        Self {
            child,
            stdin,
            lines,
            seen: Vec::new(),
        }
    }

    fn say(&mut self, text: &str) {
        writeln!(self.stdin, "{text}").expect("writing to tern");
        self.stdin.flush().unwrap();
    }

    /// Waits for a line containing `wanted` and returns it.
    fn expect(&mut self, wanted: &str) -> String {
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if line.contains(wanted) {
                        return line;
                    }
                }
                Err(_) => panic!("no line with {wanted:?}; saw:\n{}", self.seen.join("\n")),
            }
        }
    }

    fn signal(&self, signal: i32) {
        // SAFETY: kill has no memory-safety preconditions; the pid is our own child's.
        unsafe { libc::kill(self.child.id() as i32, signal) };
    }

    fn wait(mut self) -> std::process::ExitStatus {
        drop(self.stdin);
        self.child.wait().expect("tern exits")
    }
}

#[test]
fn sigterm_drains_the_turn_after_its_tool_batch_and_the_next_start_carries_it_on() {
    let cli = Cli::new();
    cli.home.write_file("notes.txt", "remember the milk\n");
    cli.mock.push(
        Reply::tool_call("glob", json!({"pattern": "*.txt"}))
            .delay_before(Duration::from_millis(600)),
    );
    let mut tern = Conversation::start(&cli);
    tern.expect("session ");
    tern.say("find the text files");
    cli.mock
        .wait_for_model_requests_blocking(1, Duration::from_secs(20));
    tern.signal(libc::SIGTERM);
    tern.expect("tern is stopping (SIGTERM)");
    tern.expect("Continue this conversation with");
    assert!(tern.wait().success());
    assert_eq!(
        cli.mock.model_requests().len(),
        1,
        "no call after the batch"
    );
    assert!(cli.home.home().join("data/drained.json").exists());

    // The next start carries the drained tool loop on by itself.
    cli.mock.push(Reply::text("There is notes.txt."));
    let mut tern = Conversation::start(&cli);
    tern.expect("it has carried on by itself");
    tern.say("/exit");
    assert!(tern.wait().success());
    let requests = cli.mock.model_requests();
    assert_eq!(requests.len(), 2);
    let nudge = requests[1].nudges().pop().unwrap();
    assert!(nudge.contains("[restart-notice]"), "{nudge}");
    assert!(!cli.home.home().join("data/drained.json").exists());
}

#[test]
fn a_changed_config_restarts_tern_on_the_same_session() {
    let cli = Cli::new();
    cli.home.write_config(NO_TITLES);
    cli.mock.push(Reply::text("first answer"));
    cli.mock.push(Reply::text("second answer"));
    let mut tern = Conversation::start(&cli);
    let banner = tern.expect("session ");
    tern.say("hello");
    tern.expect("first answer");
    let pid = tern.child.id();

    // A valid file that changes nothing the process uses: no restart.
    cli.home
        .write_config(&format!("{NO_TITLES}# just a comment\n"));
    // An invalid one: reported, and tern goes on as it was.
    std::thread::sleep(Duration::from_millis(1500));
    cli.home
        .write_config(&format!("{NO_TITLES}idle_timeout = \"soon\"\n"));
    tern.expect("config.toml changed but cannot be used");
    // A valid change: tern restarts itself.
    cli.home
        .write_config(&format!("{NO_TITLES}idle_timeout = 7200\n"));
    tern.expect("tern is restarting to apply it");
    let restarted = tern.expect("tern restarted with the changed configuration");
    let short = banner.split("session ").nth(1).unwrap();
    let short = short.split_whitespace().next().unwrap();
    assert!(restarted.contains(short), "{banner} / {restarted}");
    assert_eq!(tern.child.id(), pid, "the same process, started again");

    tern.say("again");
    tern.expect("second answer");
    tern.say("/exit");
    assert!(tern.wait().success());
    let requests = cli.mock.model_requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(
        requests[1].header("x-api-key"),
        Some("test-key"),
        "the restarted tern got the key it had removed from its environment"
    );
    let texts = requests[1].texts();
    assert!(
        texts.iter().any(|t| t == "hello") && texts.iter().any(|t| t == "first answer"),
        "the history went on: {texts:?}"
    );
}

/// Sets the largest file `pid` may write (RLIMIT_FSIZE) to `bytes`.
fn limit_file_size(pid: u32, bytes: u64) {
    let limit = libc::rlimit {
        rlim_cur: bytes,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: prlimit reads `limit` and writes nothing back (the old limit pointer is null).
    let done = unsafe {
        libc::prlimit(
            pid as libc::pid_t,
            libc::RLIMIT_FSIZE,
            &limit,
            std::ptr::null_mut(),
        )
    };
    assert_eq!(done, 0, "prlimit: {}", std::io::Error::last_os_error());
}

#[test]
fn a_full_disk_refuses_the_input_clearly_and_the_session_goes_on_once_there_is_room() {
    let cli = Cli::new();
    cli.home.write_config(NO_TITLES);
    cli.mock.push(Reply::text("first answer"));
    cli.mock.push(Reply::text("after the room came back"));
    let mut tern = Conversation::start(&cli);
    tern.say("hello");
    tern.expect("first answer");
    // No file may grow past what the database takes now: the next large input cannot be
    // written, as on a full disk.
    let db = cli.db();
    let size = std::fs::metadata(&db).unwrap().len();
    limit_file_size(tern.child.id(), size);
    tern.say(&format!("a long paste {}", "y".repeat(120 * 1024)));
    let refused = tern.expect("could not be written");
    assert!(
        refused.contains("free disk space") && refused.contains(db.to_str().unwrap()),
        "names the cause, the fix and the file: {refused}"
    );
    // Space comes back; the conversation goes on in the same process.
    limit_file_size(tern.child.id(), libc::RLIM_INFINITY);
    tern.say("are you there?");
    tern.expect("after the room came back");
    tern.say("/exit");
    assert!(tern.wait().success());
    let list = cli.run(&["sessions", "list", "--json"]);
    let sessions: Value = serde_json::from_str(&stdout(&list)).unwrap();
    assert_eq!(
        sessions[0]["input_count"], 2,
        "the refused input was not stored"
    );
    let requests = cli.mock.model_requests();
    assert_eq!(requests.len(), 2);
    assert!(
        !requests[1]
            .texts()
            .iter()
            .any(|t| t.starts_with("a long paste")),
        "nothing of the refused input reached the model"
    );
}
