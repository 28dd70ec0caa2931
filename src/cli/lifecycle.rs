//! What ends a long-lived front end other than the person leaving: a signal to stop
//! (SIGTERM, or SIGHUP when the terminal goes away) or a change to `config.toml` that the
//! running process cannot take in. Either way the sessions are drained (running turns end
//! after their current tool batch, the whole stop bounded to 30 s) so the next start can
//! warm them up; a config change then starts tern again in the same process (`exec`), on the
//! same session, with the new configuration. Both the comparison and the restart work from
//! the environment as tern started (`startup`), since the process's own no longer holds the
//! provider keys.
//!
//! A changed file that does not load changes nothing; the front end is told through the
//! [`Rejected`] callback it gave, because only it knows where a message may go: the line mode
//! prints it, the full-screen interface shows it as a notice (nothing may write to a terminal
//! the interface is drawing on).

use super::setup::ModelArgs;
use super::startup;
use crate::config::{self, Config};
use crate::domain::SessionId;
use std::path::PathBuf;
use std::time::{Duration, SystemTime};
use tokio::signal::unix::{Signal, SignalKind, signal};

pub use crate::gateway::DRAIN_BOUND;

/// How often the config file is looked at.
const CONFIG_POLL: Duration = Duration::from_secs(1);

/// Why the front end stops.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stop {
    /// A signal asked tern to stop.
    Signal(&'static str),
    /// `config.toml` changed in a way that takes a restart.
    ConfigChanged,
}

impl Stop {
    /// What the person is told as the drain begins.
    pub fn notice(&self) -> String {
        match self {
            Self::Signal(name) => format!(
                "tern is stopping ({name}): a running turn ends after its current tool batch; \
                 the next start picks it up"
            ),
            Self::ConfigChanged => "config.toml changed: tern is restarting to apply it; a \
                                    running turn ends after its current tool batch and goes on \
                                    after the restart"
                .to_owned(),
        }
    }
}

/// Hears of a changed config file that cannot be used, with the sentence to show.
pub type Rejected = Box<dyn FnMut(String) + Send>;

/// Watches for the signals and the config changes that stop a front end.
pub struct Stops {
    terminate: Signal,
    hangup: Signal,
    config: ConfigWatch,
    rejected: Rejected,
}

impl Stops {
    /// Starts listening. `config` is the configuration the process runs with; `rejected`
    /// hears of a changed file that does not load (tern goes on as it was).
    pub fn listen(config: &Config, rejected: Rejected) -> std::io::Result<Self> {
        Ok(Self {
            terminate: signal(SignalKind::terminate())?,
            hangup: signal(SignalKind::hangup())?,
            config: ConfigWatch::new(config),
            rejected,
        })
    }

    /// The next reason to stop; pending until there is one.
    pub async fn next(&mut self) -> Stop {
        let mut poll = tokio::time::interval(CONFIG_POLL);
        poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = self.terminate.recv() => return Stop::Signal("SIGTERM"),
                _ = self.hangup.recv() => return Stop::Signal("SIGHUP"),
                _ = poll.tick() => match self.config.changed() {
                    Change::None => {}
                    Change::Usable => return Stop::ConfigChanged,
                    Change::Unusable(err) => (self.rejected)(format!(
                        "config.toml changed but cannot be used, so tern goes on with the \
                         configuration it started with: {err}"
                    )),
                },
            }
        }
    }
}

/// What a look at the config file found.
enum Change {
    /// Nothing that matters to the running process.
    None,
    /// A valid configuration that differs from the running one.
    Usable,
    /// A changed file that does not load.
    Unusable(config::ConfigError),
}

/// The config file as last seen, and the configuration the process runs with.
struct ConfigWatch {
    path: PathBuf,
    running: Config,
    seen: Option<(SystemTime, u64)>,
}

impl ConfigWatch {
    fn new(running: &Config) -> Self {
        let path = running.config_file.clone();
        Self {
            seen: stamp(&path),
            path,
            running: running.clone(),
        }
    }

    /// Whether the file now holds a different, valid configuration, or a changed one that
    /// does not load (reported once: the next look sees the same file).
    fn changed(&mut self) -> Change {
        let now = stamp(&self.path);
        if now == self.seen {
            return Change::None;
        }
        self.seen = now;
        // The environment as tern started: the process's own no longer holds the keys.
        match config::load(startup::environment()) {
            Ok((_, new)) if new == self.running => Change::None,
            Ok(_) => Change::Usable,
            Err(err) => Change::Unusable(err),
        }
    }
}

/// When the file was last written and its length; `None` when it does not exist.
fn stamp(path: &std::path::Path) -> Option<(SystemTime, u64)> {
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.modified().ok()?, meta.len()))
}

/// Replaces this process with tern started again on `session`, with these model flags.
/// Returns only if that fails.
pub fn restart(session: &SessionId, model: &ModelArgs) -> std::io::Error {
    exec_tern(Some(session), model)
}

/// Replaces this process with a fresh `tern` (after the first-run screen wrote a config).
pub fn start_again(model: &ModelArgs) -> std::io::Error {
    exec_tern(None, model)
}

/// Replaces this process with `tern serve` started again (its config changed).
pub fn serve_again(model: &ModelArgs) -> std::io::Error {
    exec_command(Some("serve"), None, model)
}

fn exec_tern(session: Option<&SessionId>, model: &ModelArgs) -> std::io::Error {
    exec_command(None, session, model)
}

fn exec_command(
    subcommand: Option<&str>,
    session: Option<&SessionId>,
    model: &ModelArgs,
) -> std::io::Error {
    use std::os::unix::process::CommandExt;
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(err) => return err,
    };
    let mut command = std::process::Command::new(exe);
    command.args(subcommand);
    if let Some(session) = session {
        command.arg("--restarted-from").arg(session.as_str());
    }
    if let Some(provider) = &model.provider {
        command.arg("--provider").arg(provider);
    }
    if let Some(name) = &model.model {
        command.arg("--model").arg(name);
    }
    // This process removed the keys from its environment; the new one reads them again.
    startup::restore_credentials(&mut command);
    command.exec()
}
