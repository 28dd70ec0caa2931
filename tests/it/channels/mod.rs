//! Chat channels end to end: the real `tern serve` against fake platforms on 127.0.0.1 and
//! the mock provider.

mod discord;
mod fakes;
mod mattermost;
mod slack;
mod webhook;

pub use crate::support::free_port;
use crate::support::{MockProvider, TernHome};
use std::io::{BufRead, BufReader};
use std::process::{Child, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// `tern serve` running in an isolated home, its stderr gathered.
pub struct Served {
    pub home: TernHome,
    pub mock: MockProvider,
    env: Vec<(String, String)>,
    child: Option<Child>,
    stderr: Arc<Mutex<String>>,
}

impl Served {
    /// Writes `config` and starts `tern serve` with `env` besides the mock's.
    pub fn start(config: &str, env: &[(&str, &str)]) -> Self {
        let home = TernHome::new();
        let mock = MockProvider::start_blocking();
        home.write_config(config);
        let mut env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        env.push(("ANTHROPIC_API_KEY".into(), "test-key".into()));
        env.push(("ANTHROPIC_BASE_URL".into(), mock.base_url()));
        let mut served = Self {
            home,
            mock,
            env,
            child: None,
            stderr: Arc::new(Mutex::new(String::new())),
        };
        served.spawn();
        served
    }

    fn spawn(&mut self) {
        let mut command = self.home.tern_process();
        command
            .arg("serve")
            .current_dir(self.home.project())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        for (name, value) in &self.env {
            command.env(name, value);
        }
        let mut child = command.spawn().expect("tern serve starts");
        let stderr = child.stderr.take().expect("its stderr");
        let gathered = self.stderr.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let mut all = gathered.lock().unwrap();
                all.push_str(&line);
                all.push('\n');
            }
        });
        self.child = Some(child);
    }

    /// Starts `tern serve` again in the same home, after [`Served::stop`].
    pub fn start_again(&mut self) {
        self.stderr.lock().unwrap().clear();
        self.spawn();
    }

    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Waits until `tern serve` said `needle`.
    pub fn wait_said(&self, needle: &str, within: Duration) {
        let deadline = Instant::now() + within;
        while !self.stderr().contains(needle) {
            assert!(
                Instant::now() < deadline,
                "tern serve never said {needle:?}; it said:\n{}",
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Runs another tern command beside the server.
    pub fn tern(&self, args: &[&str]) -> Output {
        let mut command = self.home.tern();
        command.args(args).current_dir(self.home.project());
        for (name, value) in &self.env {
            command.env(name, value);
        }
        command.output().expect("tern runs")
    }

    /// SIGTERM, and the exit status.
    pub fn stop(&mut self) -> std::process::ExitStatus {
        let mut child = self.child.take().expect("running");
        // SAFETY: signalling a child process this test started.
        unsafe {
            libc::kill(child.id() as i32, libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(status) = child.try_wait().expect("waits") {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "tern serve did not stop on SIGTERM:\n{}",
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

pub fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}
