//! The real binary in a real terminal: tmux runs `tern` against the mock provider, keys go in
//! with `send-keys` and the screen comes back with `capture-pane`. `.ci/run` installs tmux.

use super::Cli;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// A tmux server of the test's own (its own socket), running one window.
pub struct Tmux {
    socket: String,
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
        static STARTED: AtomicUsize = AtomicUsize::new(0);
        let socket = format!(
            "tern-test-{}-{}-{}",
            std::process::id(),
            cli.home.root().file_name().unwrap().to_string_lossy(),
            STARTED.fetch_add(1, Ordering::Relaxed)
        );
        let tern = crate::support::tern_binary().display().to_string();
        let quoted: Vec<String> = args.iter().map(|a| format!("'{a}'")).collect();
        // The shell stays after tern exits, so its last words can still be read.
        let script = format!(
            "{tern} {}; echo \"[tern exited $?]\"; sleep 60",
            quoted.join(" ")
        );
        let tmux = Self { socket };
        let mut command = Command::new("tmux");
        command
            .args([
                "-L",
                &tmux.socket,
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
        let status = command.arg(script).status().unwrap_or_else(|err| {
            panic!("tmux could not start ({err}); it is needed for this test: apt-get install tmux")
        });
        assert!(status.success(), "tmux new-session failed");
        tmux
    }

    pub fn keys(&self, keys: &[&str]) {
        let status = Command::new("tmux")
            .args(["-L", &self.socket, "send-keys"])
            .args(keys)
            .status()
            .expect("tmux send-keys");
        assert!(status.success());
    }

    pub fn type_text(&self, text: &str) {
        self.keys(&["-l", text]);
    }

    pub fn screen(&self) -> String {
        let out = Command::new("tmux")
            .args(["-L", &self.socket, "capture-pane", "-p", "-J"])
            .output()
            .expect("tmux capture-pane");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Waits until the screen shows `wanted`; returns the screen.
    pub fn wait_for(&self, wanted: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let screen = self.screen();
            if screen.contains(wanted) {
                return screen;
            }
            if Instant::now() > deadline {
                panic!("the screen never showed {wanted:?}; it shows:\n{screen}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn resize(&self, width: u16, height: u16) {
        let status = Command::new("tmux")
            .args([
                "-L",
                &self.socket,
                "resize-window",
                "-x",
                &width.to_string(),
                "-y",
                &height.to_string(),
            ])
            .status()
            .expect("tmux resize-window");
        assert!(status.success());
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.socket, "kill-server"])
            .status();
    }
}
