//! `tern doctor`: where tern keeps its files, whether the session database is healthy, the
//! configuration it resolved, and whether each provider answers, with the model and context
//! window each would use and where the window came from (configured, from the server, or
//! assumed). The paths and the database need no config file, so a broken one is reported
//! beside them, not instead of them, and `--repair` works whatever the config says.

use super::Outcome;
use super::render::print_out;
use super::{door, repair, setup};
use crate::config::Paths;
use crate::llm;
use crate::llm::served::{self, Asking, ModelLimits, ServedCache};
use std::fmt::Write;
use std::path::PathBuf;
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
    let paths = setup::load_paths()?;
    if args.repair {
        let deep = args.deep;
        return tokio::task::spawn_blocking(move || repair::repair(&paths.db_file, deep)).await?;
    }
    let mut out = String::new();
    let exists = |p: &std::path::Path| if p.exists() { "" } else { " (not created yet)" };
    writeln!(out, "Paths")?;
    writeln!(
        out,
        "  config file  {}{}",
        paths.config_file.display(),
        exists(&paths.config_file)
    )?;
    writeln!(
        out,
        "  data dir     {}{}",
        paths.data_dir.display(),
        exists(&paths.data_dir)
    )?;
    writeln!(
        out,
        "  database     {}{}",
        paths.db_file.display(),
        exists(&paths.db_file)
    )?;
    writeln!(
        out,
        "  log file     {}",
        paths.log_dir.join("tern.log").display()
    )?;
    writeln!(out)?;
    let (health, db_ok) = database_health(&paths, args.deep).await?;
    write!(out, "Database\n  {health}")?;
    writeln!(out)?;
    writeln!(out, "Configuration")?;
    let loaded = match setup::load() {
        Ok(loaded) => loaded,
        Err(err) => {
            writeln!(out, "  {err:#}")?;
            print_out(&out)?;
            return Ok(Outcome::TurnFailed);
        }
    };
    for line in loaded.config.render().lines() {
        writeln!(out, "  {line}")?;
    }
    writeln!(out)?;
    writeln!(out, "Providers")?;
    if loaded.config.providers.is_empty() {
        writeln!(out, "  none configured")?;
    }
    let mut any_ok = false;
    let cache = ServedCache::in_dir(&loaded.paths.data_dir);
    let mut limits_of = std::collections::BTreeMap::new();
    for profile in loaded.config.providers.values() {
        let chosen = profile.written.model.then(|| profile.default_model.clone());
        let (status, limits) = match profile.require_key() {
            Err(err) => {
                let asked =
                    served::learn(profile, chosen, Some(cache.clone()), Asking::RememberedOnly);
                let limits = asked.borrow().limits.clone();
                (format!("skipped: {err}"), limits)
            }
            Ok(()) => {
                let provider = llm::provider_for(profile);
                let probe = tokio::time::timeout(PROBE_TIMEOUT, provider.probe());
                let asked = served::ask_now(profile, chosen.as_deref(), Some(&cache));
                let (probed, limits) = tokio::join!(probe, asked);
                let status = match probed {
                    Ok(Ok(what)) => {
                        any_ok = true;
                        format!("ok: {what}")
                    }
                    Ok(Err(err)) => format!("error: {err}"),
                    Err(_) => format!("error: no answer within {}s", PROBE_TIMEOUT.as_secs()),
                };
                (status, limits)
            }
        };
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
        Err(err) => writeln!(out, "\n{err}")?,
    }
    print_out(&out)?;
    Ok(if any_ok && db_ok {
        Outcome::Success
    } else {
        Outcome::TurnFailed
    })
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
