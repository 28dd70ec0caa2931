//! `tern doctor`: where tern keeps its files, whether the session database is healthy, the
//! configuration it resolved, and whether each provider answers. The paths and the database
//! need no config file, so a broken one is reported beside them, not instead of them, and
//! `--repair` works whatever the config says.

use super::Outcome;
use super::render::print_out;
use super::{repair, setup};
use crate::llm;
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
    let db_file = paths.db_file.clone();
    let deep = args.deep;
    let (health, db_ok) =
        tokio::task::spawn_blocking(move || repair::health(&db_file, deep)).await?;
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
    for profile in loaded.config.providers.values() {
        let status = match profile.require_key() {
            Err(err) => format!("skipped: {err}"),
            Ok(()) => {
                let provider = llm::provider_for(profile);
                match tokio::time::timeout(PROBE_TIMEOUT, provider.probe()).await {
                    Ok(Ok(what)) => {
                        any_ok = true;
                        format!("ok: {what}")
                    }
                    Ok(Err(err)) => format!("error: {err}"),
                    Err(_) => format!("error: no answer within {}s", PROBE_TIMEOUT.as_secs()),
                }
            }
        };
        writeln!(
            out,
            "  {:<12} {:<9} {}  {status}",
            profile.name,
            profile.kind.as_str(),
            profile.base_url
        )?;
    }
    match loaded.config.default_provider() {
        Ok(profile) => writeln!(
            out,
            "\nDefault provider: {} (model {})",
            profile.name, profile.default_model
        )?,
        Err(err) => writeln!(out, "\n{err}")?,
    }
    print_out(&out)?;
    Ok(if any_ok && db_ok {
        Outcome::Success
    } else {
        Outcome::TurnFailed
    })
}
