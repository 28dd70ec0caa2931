//! `tern doctor`: where tern keeps its files, whether the session database is healthy, the
//! configuration it resolved (as TOML), whether each configured provider answers, with the
//! model and context window each would use and where the window came from (configured, from
//! the server, or assumed), and which local model servers answer on their default ports. The
//! paths and the database need no config file, so a broken one is reported beside them, not
//! instead of them, and `--repair` works whatever the config says.
//!
//! Only the providers the config file or the environment set up are asked: a built-in
//! profile nobody configured is no error. The local servers the first-run screen offers
//! (`llm::local`) are shown found or not running. It exits 0 when a configured provider
//! answered (and the database is healthy), else 1, after saying what to do next.

use super::Outcome;
use super::render::print_out;
use super::setup::{self, Loaded};
use super::{door, repair, startup};
use crate::config::{self, ConfigError, Paths, ProviderProfile};
use crate::llm;
use crate::llm::local::{LOOKED_FOR, LocalServer, find_local_servers};
use crate::llm::served::{self, Asking, ModelLimits, ServedCache};
use std::fmt::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long one provider gets to answer the probe.
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// Options of `tern doctor`.
#[derive(Debug, clap::Args)]
pub struct DoctorArgs {
    /// Repair a damaged session database: move it aside (it is never deleted) and copy
    /// everything still readable in it into a fresh one. Needs no valid config file.
    #[arg(long)]
    repair: bool,
    /// Check the database fully: also decode every journal record and index entry and
    /// compare their counts (the default check reads every page's checksum). With
    /// `--repair`, damage this check finds is repaired too.
    #[arg(long)]
    deep: bool,
    /// Runs the storage engine's worker on a file (internal).
    #[arg(long, hide = true, num_args = 2, value_names = ["TASK", "FILE"])]
    worker: Option<Vec<PathBuf>>,
}

pub async fn run(args: DoctorArgs) -> anyhow::Result<Outcome> {
    if let Some([task, file]) = args.worker.as_deref() {
        return repair::worker(&task.to_string_lossy(), file);
    }
    if args.repair {
        let paths = setup::load_paths()?;
        let deep = args.deep;
        return tokio::task::spawn_blocking(move || repair::repair(&paths.db_file, deep)).await?;
    }
    // The report only looks: it starts no log, so the log file's line says whether any tern
    // has written one.
    let paths = Paths::from_env(startup::environment())?;
    let mut out = String::new();
    let exists = |p: &std::path::Path| if p.exists() { "" } else { " (not created yet)" };
    let log_file = paths.log_dir.join("tern.log");
    writeln!(out, "Paths")?;
    for (name, path) in [
        ("config file", &paths.config_file),
        ("data dir", &paths.data_dir),
        ("database", &paths.db_file),
        ("log file", &log_file),
    ] {
        writeln!(out, "  {name:<12} {}{}", path.display(), exists(path))?;
    }
    writeln!(out)?;
    let (health, db_ok) = database_health(&paths, args.deep).await?;
    write!(out, "Database\n  {health}")?;
    writeln!(out)?;
    writeln!(out, "Configuration")?;
    let loaded = match config::load(startup::environment()) {
        Ok((paths, config)) => Loaded { paths, config },
        Err(err) => {
            writeln!(out, "  {:#}", anyhow::Error::from(err))?;
            print_out(&out)?;
            return Ok(Outcome::TurnFailed);
        }
    };
    indented(&mut out, &loaded.config.render())?;
    writeln!(out)?;
    // Asked while the configured providers are: a local server answers at once or not at all.
    let local = tokio::spawn(find_local_servers());
    writeln!(out, "Providers")?;
    let configured: Vec<&ProviderProfile> = loaded.config.configured_providers().collect();
    if configured.is_empty() {
        writeln!(out, "  none configured")?;
    }
    let mut any_ok = false;
    let cache = ServedCache::in_dir(&loaded.paths.data_dir);
    let mut limits_of = std::collections::BTreeMap::new();
    for profile in &configured {
        let (status, limits, ok) = probe(profile, &cache).await;
        any_ok |= ok;
        writeln!(
            out,
            "  {:<12} {:<9} {}  {status}",
            profile.name,
            profile.kind.as_str(),
            profile.base_url
        )?;
        writeln!(out, "  {:<12} {}", "", describe(&limits))?;
        limits_of.insert(profile.name.clone(), limits);
    }
    let found = local.await.unwrap_or_default();
    let tried: Vec<&str> = configured.iter().map(|p| p.base_url.as_str()).collect();
    let local_lines = local_lines(&found, &tried);
    if !local_lines.is_empty() {
        writeln!(out, "\nLocal model servers (on their default ports)")?;
        for line in local_lines {
            writeln!(out, "  {line}")?;
        }
    }
    writeln!(
        out,
        "\nMCP servers of this project (each started as a turn would)"
    )?;
    let mcp = match setup::project_dir() {
        Ok(project) => super::mcp::server_lines(&loaded, &project).await,
        Err(err) => Err(err),
    };
    match mcp {
        Ok(lines) => {
            for line in lines {
                writeln!(out, "  {line}")?;
            }
        }
        Err(err) => writeln!(out, "  {err:#}")?,
    }
    match loaded.config.default_provider() {
        Ok(profile) => {
            let line = match limits_of.get(&profile.name) {
                Some(limits) => format!("{} ({})", profile.name, describe(limits)),
                None => format!("{} (model {})", profile.name, profile.default_model),
            };
            writeln!(out, "\nDefault provider: {line}")?;
        }
        // With nothing configured, the next step below says what to do.
        Err(ConfigError::NoProvider { .. }) if configured.is_empty() => {}
        Err(ConfigError::NoProvider { config_file }) => {
            let names: Vec<&str> = configured.iter().map(|p| p.name.as_str()).collect();
            writeln!(
                out,
                "\nNo default provider: {} are configured and none is chosen. Choose one with \
                 [models] provider = \"NAME\" in {}, or name it each time with --provider NAME.",
                names.join(", "),
                config_file.display()
            )?;
        }
        Err(err) => writeln!(out, "\n{err}")?,
    }
    if !any_ok {
        let unused: Vec<&LocalServer> = found
            .iter()
            .filter(|server| !tried.iter().any(|url| same_server(url, &server.base_url)))
            .collect();
        let file = &loaded.config.config_file;
        writeln!(out, "\nNext step")?;
        let step = next_step(file, file.exists(), !configured.is_empty(), &unused);
        indented(&mut out, &step)?;
    }
    print_out(&out)?;
    Ok(if any_ok && db_ok {
        Outcome::Success
    } else {
        Outcome::TurnFailed
    })
}

/// Asks one configured provider whether it answers (a profile without its key is not
/// asked), and its server for the model and window it would use. Returns the status, the
/// limits, and whether it answered.
async fn probe(profile: &ProviderProfile, cache: &ServedCache) -> (String, ModelLimits, bool) {
    let chosen = profile.written.model.then(|| profile.default_model.clone());
    if let Err(err) = profile.require_key() {
        let asked = served::learn(profile, chosen, Some(cache.clone()), Asking::RememberedOnly);
        let limits = asked.borrow().limits.clone();
        return (format!("skipped: {err}"), limits, false);
    }
    let provider = llm::provider_for(profile);
    let probe = tokio::time::timeout(PROBE_TIMEOUT, provider.probe());
    let asked = served::ask_now(profile, chosen.as_deref(), Some(cache));
    let (probed, limits) = tokio::join!(probe, asked);
    match probed {
        Ok(Ok(what)) => (format!("ok: {what}"), limits, true),
        Ok(Err(err)) => (format!("error: {err}"), limits, false),
        Err(_) => {
            let status = format!("error: no answer within {}s", PROBE_TIMEOUT.as_secs());
            (status, limits, false)
        }
    }
}

/// One line per local server looked for on its default port: found (with the model it
/// serves) or not running, never an error, as nobody asked for it. A server at the address
/// of a configured profile is left out: that profile's line says how it did.
fn local_lines(found: &[LocalServer], tried: &[&str]) -> Vec<String> {
    let mut lines = Vec::new();
    for (name, kind, url) in LOOKED_FOR {
        let server = found.iter().find(|server| server.kind == kind);
        let url = server.map_or(url, |server| server.base_url.as_str());
        if tried.iter().any(|tried| same_server(tried, url)) {
            continue;
        }
        let (name, state) = match server {
            Some(server) => (
                server.name,
                match &server.model {
                    Some(model) => format!("found, serving {model}"),
                    None => "found".to_owned(),
                },
            ),
            None => (name, "not running".to_owned()),
        };
        lines.push(format!("{name:<17} {url:<26} {state}"));
    }
    lines
}

/// Whether two base URLs name the same server, `localhost` and a trailing `/` aside.
fn same_server(a: &str, b: &str) -> bool {
    let plain = |url: &str| {
        url.trim_end_matches('/')
            .to_ascii_lowercase()
            .replacen("://localhost", "://127.0.0.1", 1)
    };
    plain(a) == plain(b)
}

/// What to do when no provider answered: use a local server found answering, fix the
/// configured ones, or configure one.
fn next_step(
    config_file: &Path,
    file_exists: bool,
    any_configured: bool,
    unused: &[&LocalServer],
) -> String {
    let mut text = String::new();
    for server in unused {
        let serving = server
            .model
            .as_ref()
            .map_or_else(String::new, |model| format!(" (serving {model})"));
        let how = if file_exists {
            format!(
                "add a profile for it to {}, for example:",
                config_file.display()
            )
        } else {
            format!(
                "run `tern` in a terminal and choose it, or write this to {}:",
                config_file.display()
            )
        };
        let _ = writeln!(
            text,
            "The {} at {} answers{serving}, but no profile uses it: {how}\n",
            server.name, server.base_url
        );
        for line in server.config().lines() {
            let _ = writeln!(text, "  {line}");
        }
        text.push('\n');
    }
    if any_configured {
        let _ = writeln!(
            text,
            "No configured provider answered. Do what its line under Providers says: set its \
             key (export VARIABLE=<key>), start its server, or correct its address (base_url \
             in {}, or the variable the line names); then run `tern doctor` again.",
            config_file.display()
        );
    } else if unused.is_empty() {
        let none = ConfigError::NoProvider {
            config_file: config_file.to_path_buf(),
        };
        let _ = writeln!(
            text,
            "{none}\n\nOr start a model server on this machine, which tern finds on its \
             default port: llama.cpp's `llama-server -m MODEL.gguf --port 8080`, or `ollama \
             serve`; then run `tern doctor` again."
        );
    }
    text
}

/// `text` with each line indented by two spaces, empty lines left empty.
fn indented(out: &mut String, text: &str) -> std::fmt::Result {
    for line in text.lines() {
        if line.is_empty() {
            writeln!(out)?;
        } else {
            writeln!(out, "  {line}")?;
        }
    }
    Ok(())
}

/// The database's health. A tern process that owns it keeps the file open and writing, so
/// it is asked for a copy as of a durable commit, made with its writes held off, and the
/// copy is checked here.
async fn database_health(paths: &Paths, deep: bool) -> anyhow::Result<(String, bool)> {
    let copy = match door::owner(paths).await {
        Ok(Some(service)) => service.copy_store().await.map_err(|err| err.to_string()),
        Ok(None) => {
            let db_file = paths.db_file.clone();
            return Ok(tokio::task::spawn_blocking(move || repair::health(&db_file, deep)).await?);
        }
        Err(err) => Err(format!("{err:#}")),
    };
    let (copy, _) = match copy {
        Ok(copy) => copy,
        Err(err) => return Ok((format!("in use, not checked: {err}\n"), true)),
    };
    let db_file = paths.db_file.clone();
    let copy = Removed(copy);
    let checked =
        tokio::task::spawn_blocking(move || repair::health_of_copy(&copy.0, &db_file, deep))
            .await?;
    Ok(checked)
}

/// A file removed when dropped, however its check ended.
struct Removed(PathBuf);

impl Drop for Removed {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// The model, its window and where the window came from, and the output limit, in a line.
fn describe(limits: &ModelLimits) -> String {
    format!(
        "model {}, context window {} tokens ({}), replies up to {} tokens",
        limits.model, limits.context_window, limits.window_source, limits.max_output_tokens
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ProviderKind;

    fn llama_cpp(model: Option<&str>) -> LocalServer {
        LocalServer {
            name: "llama.cpp server",
            kind: ProviderKind::OpenAi,
            base_url: "http://127.0.0.1:8080/v1".to_owned(),
            model: model.map(str::to_owned),
        }
    }

    #[test]
    fn local_servers_are_found_or_not_running_and_left_to_a_profile_at_their_address() {
        let found = [llama_cpp(Some("qwen2.5-coder"))];
        let lines = local_lines(&found, &[]);
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(
            lines[0].starts_with("llama.cpp server")
                && lines[0].contains("http://127.0.0.1:8080/v1")
                && lines[0].ends_with("found, serving qwen2.5-coder"),
            "{lines:?}"
        );
        assert!(
            lines[1].starts_with("Ollama")
                && lines[1].contains("http://127.0.0.1:11434")
                && lines[1].ends_with("not running"),
            "{lines:?}"
        );
        assert!(!lines.iter().any(|line| line.contains("error")));
        let lines = local_lines(&[], &["http://localhost:11434/"]);
        assert_eq!(
            lines.len(),
            1,
            "the profile's own line covers Ollama: {lines:?}"
        );
        assert!(lines[0].starts_with("llama.cpp server") && lines[0].ends_with("not running"));
        assert!(
            local_lines(
                &found,
                &["http://127.0.0.1:8080/v1", "http://127.0.0.1:11434"]
            )
            .is_empty()
        );
    }

    #[test]
    fn the_next_step_fits_what_was_found() {
        let file = Path::new("/home/me/.config/tern/config.toml");
        let server = llama_cpp(Some("qwen"));
        let step = next_step(file, false, false, &[&server]);
        assert!(
            step.contains(
                "The llama.cpp server at http://127.0.0.1:8080/v1 answers (serving qwen)"
            ) && step.contains("run `tern` in a terminal and choose it")
                && step.contains("/home/me/.config/tern/config.toml")
                && step.contains("provider = \"local\""),
            "{step}"
        );
        assert!(!step.contains("export ANTHROPIC_API_KEY"), "{step}");
        let step = next_step(file, true, false, &[&server]);
        assert!(step.contains("add a profile for it to /home/me/"), "{step}");

        let step = next_step(file, false, false, &[]);
        assert!(
            step.contains("export ANTHROPIC_API_KEY=<key>")
                && step.contains("export OLLAMA_HOST")
                && step.contains("write /home/me/.config/tern/config.toml")
                && step.contains("llama-server")
                && step.contains("ollama serve"),
            "{step}"
        );

        let step = next_step(file, true, true, &[]);
        assert!(
            step.contains("No configured provider answered")
                && step.contains("base_url in /home/me/.config/tern/config.toml"),
            "{step}"
        );
    }
}
