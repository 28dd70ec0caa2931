//! The real binary in a real terminal: tmux runs `tern` against the mock provider, keys go in
//! with `send-keys` and the screen comes back with `capture-pane`. `.ci/run` installs tmux.
//!
//! Each [`Tmux`] is a tmux server of its own, its socket in a temporary folder of its own:
//! stopped once when dropped and its socket removed, and nothing tmux says on stderr reaches
//! the test run's output (a failing command's words go into the test's panic instead).

use super::Cli;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// A tmux server of the test's own (its own socket), running one window.
pub struct Tmux {
    socket: PathBuf,
    /// Holds the socket; removed after the server stops.
    _folder: tempfile::TempDir,
}

impl Tmux {
    /// Starts `tern args…` in a 100x30 window, in the project, with the mock as its provider.
    pub fn start(cli: &Cli, args: &[&str]) -> Self {
        Self::start_with(cli, args, true)
    }

    /// [`Tmux::start`], with or without a provider in the environment.
    pub fn start_with(cli: &Cli, args: &[&str], provider: bool) -> Self {
        let anthropic = [
            ("ANTHROPIC_API_KEY", "test-key".to_owned()),
            ("ANTHROPIC_BASE_URL", cli.mock.base_url()),
        ];
        Self::start_env(cli, args, if provider { &anthropic } else { &[] })
    }

    /// [`Tmux::start`] with `provider_env` as the only provider settings.
    pub fn start_env(cli: &Cli, args: &[&str], provider_env: &[(&str, String)]) -> Self {
        let tern = crate::support::tern_binary().display().to_string();
        let quoted: Vec<String> = args.iter().map(|a| format!("'{a}'")).collect();
        // The shell stays after tern exits, so its last words can still be read.
        let script = format!(
            "{tern} {}; echo \"[tern exited $?]\"; sleep 60",
            quoted.join(" ")
        );
        Self::launch(cli, &script, provider_env)
    }

    /// An interactive shell with job control (bash, its prompt `shell$ `) in the project,
    /// the mock as its provider, for what needs a shell around tern: Ctrl-Z and `fg`.
    pub fn start_shell(cli: &Cli) -> Self {
        let provider = [
            ("ANTHROPIC_API_KEY", "test-key".to_owned()),
            ("ANTHROPIC_BASE_URL", cli.mock.base_url()),
        ];
        let tmux = Self::launch(cli, "bash --norc --noprofile -i", &provider);
        // Set as a command, as bash takes no prompt from its environment here; the command
        // as echoed does not read `shell$`.
        tmux.type_text("PS1='sh''ell$ '");
        tmux.keys(&["Enter"]);
        tmux.wait_for("shell$");
        tmux
    }

    /// Starts `script` in the window, with `provider_env` besides tern's home.
    fn launch(cli: &Cli, script: &str, provider_env: &[(&str, String)]) -> Self {
        require_tmux();
        let folder = tempfile::Builder::new()
            .prefix("tern-tmux-")
            .tempdir()
            .expect("a temp dir for the tmux socket");
        let tmux = Self {
            socket: folder.path().join("socket"),
            _folder: folder,
        };
        let mut command = tmux.command();
        command
            .args([
                "-f",
                "/dev/null",
                "new-session",
                "-d",
                "-x",
                "100",
                "-y",
                "30",
            ])
            .arg("-c")
            .arg(cli.home.project())
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", std::env::var_os("HOME").unwrap_or_default())
            .env("TERM", "xterm-256color");
        let mut env = vec![
            ("TERN_HOME", cli.home.home().display().to_string()),
            ("TERM", "xterm-256color".to_owned()),
        ];
        env.extend(provider_env.iter().cloned());
        for (name, value) in env {
            command.arg("-e").arg(format!("{name}={value}"));
        }
        command.arg(script);
        tmux.run(command, "new-session");
        tmux
    }

    pub fn keys(&self, keys: &[&str]) {
        let mut command = self.command();
        command.arg("send-keys").args(keys);
        self.run(command, "send-keys");
    }

    pub fn type_text(&self, text: &str) {
        self.keys(&["-l", text]);
    }

    /// `text` as the terminal's bracketed paste (tmux's buffer, pasted with `-p`).
    pub fn paste(&self, text: &str) {
        let file = self.socket.with_extension("paste");
        std::fs::write(&file, text).expect("writing the text to paste");
        let mut command = self.command();
        command.args(["load-buffer", "-b", "paste"]).arg(&file);
        self.run(command, "load-buffer");
        let mut command = self.command();
        command.args(["paste-buffer", "-p", "-d", "-b", "paste"]);
        self.run(command, "paste-buffer");
        let _ = std::fs::remove_file(&file);
    }

    pub fn screen(&self) -> String {
        let mut command = self.command();
        command.args(["capture-pane", "-p", "-J"]);
        let out = self.run(command, "capture-pane");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Waits until the screen shows `wanted`; returns the screen.
    pub fn wait_for(&self, wanted: &str) -> String {
        self.wait_until(&format!("the screen to show {wanted:?}"), |screen| {
            screen.contains(wanted)
        })
    }

    /// Waits until `done` holds for the screen (which `what` names); returns the screen.
    pub fn wait_until(&self, what: &str, done: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let screen = self.screen();
            if done(&screen) {
                return screen;
            }
            if Instant::now() > deadline {
                panic!("waited in vain for {what}; the screen shows:\n{screen}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn resize(&self, width: u16, height: u16) {
        let mut command = self.command();
        command.args([
            "resize-window",
            "-x",
            &width.to_string(),
            "-y",
            &height.to_string(),
        ]);
        self.run(command, "resize-window");
    }

    /// `tmux` on this test's server.
    fn command(&self) -> Command {
        let mut command = Command::new("tmux");
        command.arg("-S").arg(&self.socket);
        command
    }

    /// Runs `command` with its output gathered; a failure panics with what tmux said.
    fn run(&self, mut command: Command, what: &str) -> Output {
        let out = command
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|err| panic!("tmux {what} could not run: {err}"));
        assert!(
            out.status.success(),
            "tmux {what} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
        out
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        // The server may have ended by itself; either way it is gone after this, and its
        // socket with it.
        let _ = self
            .command()
            .arg("kill-server")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        let _ = std::fs::remove_file(&self.socket);
    }
}

/// Panics at once when tmux cannot run, having said once, outside any test's captured
/// output, how to install it.
fn require_tmux() {
    static FOUND: OnceLock<Result<(), String>> = OnceLock::new();
    let found = FOUND.get_or_init(|| {
        let ran = Command::new("tmux")
            .arg("-V")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        let problem = match ran {
            Ok(status) if status.success() => return Ok(()),
            Ok(status) => format!("`tmux -V` failed ({status})"),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                "tmux is not installed".to_owned()
            }
            Err(err) => format!("tmux could not be run ({err})"),
        };
        let _ = writeln!(
            std::io::stderr(),
            "\n{problem}: the tests that drive tern in a terminal need tmux. \
             Install it (apt-get install tmux) and run them again.\n"
        );
        Err(problem)
    });
    if let Err(problem) = found {
        panic!("{problem}: install tmux (apt-get install tmux)");
    }
}
