//! `tern doctor`: where tern keeps its files, the configuration it resolved, and whether
//! each provider answers.

use super::Outcome;
use super::render::print_out;
use super::setup;
use crate::llm;
use crate::store::Repair;
use std::fmt::Write;
use std::time::Duration;

/// `tern doctor --repair`.
fn repair(db_file: &std::path::Path) -> anyhow::Result<Outcome> {
    let text = match crate::store::repair(db_file)? {
        Repair::Healthy => format!(
            "The session database {} is healthy; nothing was changed.\n",
            db_file.display()
        ),
        Repair::Rebuilt {
            moved_to,
            sessions,
            records,
            unreadable,
            failure,
        } => {
            let mut text = format!(
                "The session database {} was damaged. It was moved to {} and is kept there.\n",
                db_file.display(),
                moved_to.display()
            );
            match failure {
                Some(why) => text.push_str(&format!(
                    "Nothing could be read from it ({why}); tern starts with an empty database.\n"
                )),
                None => text.push_str(&format!(
                    "Recovered {sessions} sessions and {records} journal records into a fresh \
                     database; {unreadable} entries could not be read and stay only in the moved \
                     file.\n"
                )),
            }
            text
        }
    };
    print_out(&text)?;
    Ok(Outcome::Success)
}

/// How long one provider gets to answer the probe.
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// Options of `tern doctor`.
#[derive(Debug, clap::Args)]
pub struct DoctorArgs {
    /// Repair a damaged session database: move it aside (it is never deleted) and copy what
    /// can still be read into a fresh one.
    #[arg(long)]
    repair: bool,
}

pub async fn run(args: DoctorArgs) -> anyhow::Result<Outcome> {
    let loaded = setup::load()?;
    if args.repair {
        return repair(&loaded.paths.db_file);
    }
    let mut out = String::new();
    let paths = &loaded.paths;
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
    writeln!(out, "Configuration")?;
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
    Ok(if any_ok {
        Outcome::Success
    } else {
        Outcome::TurnFailed
    })
}
