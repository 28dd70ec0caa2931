//! The first run with no usable provider, in a terminal: the setup screen says what is
//! missing and offers the local model servers that answer; choosing one writes a minimal
//! `config.toml` for it and starts tern again, and `c` writes the example config to fill
//! in. Neither is ever written over an existing file. Leaving without a provider fails as
//! `tern run` does, with the same message and exit code.

use super::Outcome;
use super::lifecycle;
use super::setup::{Loaded, ModelArgs};
use crate::config::EXAMPLE_CONFIG;
use crate::llm::local::find_local_servers;
use crate::tui::setup::{FoundServer, Note, SetupAction, SetupScreen, SetupTerminal};
use crate::tui::{ColorDepth, Theme};
use anyhow::Context;
use std::io::Write;
use std::path::Path;

/// Shows the setup screen for `problem` until the person chooses a server (tern starts
/// again) or leaves (`problem` is the error).
pub async fn run(loaded: &Loaded, problem: anyhow::Error) -> anyhow::Result<Outcome> {
    let config_file = loaded.config.config_file.clone();
    // A config that exists is the person's: only a missing one is offered to be written.
    let config_exists = config_file.exists();
    let servers = if config_exists {
        Vec::new()
    } else {
        find_local_servers().await
    };
    let theme = Theme::default().for_depth(ColorDepth::detect(|name| std::env::var(name).ok()));
    let mut screen = SetupScreen::new(
        format!("{problem:#}"),
        config_file.clone(),
        config_exists,
        servers
            .iter()
            .map(|server| FoundServer {
                name: server.name.to_owned(),
                base_url: server.base_url.clone(),
                model: server.model.clone(),
            })
            .collect(),
    );
    let mut terminal = SetupTerminal::enter(theme).context("the setup screen stopped")?;
    // Everything is reported on the screen while it is up: nothing else may print over it.
    let server = loop {
        let action = terminal
            .next(&mut screen)
            .await
            .context("the setup screen stopped")?;
        match action {
            SetupAction::Quit => {
                drop(terminal);
                return Err(problem);
            }
            SetupAction::WriteExample => {
                let written = write_new(&config_file, EXAMPLE_CONFIG);
                let there_now = match &written {
                    Ok(()) => true,
                    Err(not) => not.exists,
                };
                if there_now {
                    screen.config_written();
                }
                screen.note(example_note(&config_file, &written));
            }
            SetupAction::Use(index) => {
                let Some(server) = servers.get(index) else {
                    continue;
                };
                match write_new(&config_file, &server.config()) {
                    Ok(()) => break server,
                    Err(not) => {
                        if not.exists {
                            screen.config_written();
                        }
                        screen.note(Note::Problem(not.said));
                    }
                }
            }
        }
    };
    drop(terminal);
    eprintln!(
        "tern: wrote {} for the {} at {}",
        config_file.display(),
        server.name,
        server.base_url
    );
    let err = lifecycle::start_again(&ModelArgs::default());
    anyhow::bail!("could not start tern again: {err}")
}

/// Why a config file was not written.
#[derive(Debug)]
struct NotWritten {
    /// A file (or anything) is there already, and was left alone.
    exists: bool,
    /// What the screen says.
    said: String,
}

/// Writes `text` to `path`, creating its folder, unless something is there already.
fn write_new(path: &Path, text: &str) -> Result<(), NotWritten> {
    let failed = |what: &Path, err: std::io::Error| NotWritten {
        exists: false,
        said: format!("Could not write {}: {err}.", what.display()),
    };
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|err| failed(parent, err))?;
    }
    let mut file = match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
    {
        Ok(file) => file,
        Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => {
            return Err(NotWritten {
                exists: true,
                said: format!(
                    "{} already exists, so it was left as it is.",
                    path.display()
                ),
            });
        }
        Err(err) => return Err(failed(path, err)),
    };
    file.write_all(text.as_bytes())
        .map_err(|err| failed(path, err))
}

/// What the screen says after `c`.
fn example_note(path: &Path, written: &Result<(), NotWritten>) -> Note {
    match written {
        Ok(()) => Note::Done(format!(
            "Wrote an example config to {}: remove the # in front of one provider's lines \
             there, then run tern again.",
            path.display()
        )),
        Err(not) => Note::Problem(not.said.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_example_config_is_written_in_a_new_folder_and_never_over_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("not/yet/config.toml");
        let written = write_new(&path, EXAMPLE_CONFIG);
        assert_eq!(
            example_note(&path, &written),
            Note::Done(format!(
                "Wrote an example config to {}: remove the # in front of one provider's lines \
                 there, then run tern again.",
                path.display()
            ))
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), EXAMPLE_CONFIG);

        std::fs::write(&path, "# mine\n").unwrap();
        let written = write_new(&path, EXAMPLE_CONFIG);
        assert!(written.as_ref().is_err_and(|not| not.exists));
        assert_eq!(
            example_note(&path, &written),
            Note::Problem(format!(
                "{} already exists, so it was left as it is.",
                path.display()
            ))
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "# mine\n");

        // A file where its folder should be: said, not panicked on.
        let blocked = dir.path().join("a-file");
        std::fs::write(&blocked, "").unwrap();
        let written = write_new(&blocked.join("config.toml"), EXAMPLE_CONFIG);
        let Err(not) = written else {
            panic!("written under a file")
        };
        assert!(!not.exists);
        assert!(
            not.said
                .starts_with(&format!("Could not write {}: ", blocked.display())),
            "{}",
            not.said
        );
    }
}
