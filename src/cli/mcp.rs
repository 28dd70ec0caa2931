//! `tern mcp list|add|remove|approve`: the MCP servers of the project in the current folder,
//! from the config file and the project's `.mcp.json`.
//!
//! `list` starts each server that may run (as a session's first turn would, waiting at most
//! `[mcp] startup_timeout`), so what it shows is what a session would get now, and a server
//! that fails says why. `add` and `remove` edit the config file (or, with `--project`, the
//! project's `.mcp.json`) keeping everything else in it as written, and check the result
//! loads before keeping it.

use super::Outcome;
use super::setup;
use crate::config::{self, MCP_PROJECT_FILE};
use crate::tools::mcp::{McpHub, listing};
use anyhow::Context;
use std::path::Path;

#[derive(Debug, clap::Subcommand)]
pub enum McpCommand {
    /// List this project's servers (the config file's and its .mcp.json's), each started,
    /// with its state and tools.
    List,
    /// Add a server that tern starts: `tern mcp add NAME -- COMMAND ARGS…`. It goes to the
    /// config file (every project), or with --project to this project's .mcp.json.
    Add {
        /// The server's name: letters, digits, `-` and `_`; its tools are `mcp__NAME__tool`.
        name: String,
        /// Write it to this project's .mcp.json instead of the config file.
        #[arg(long)]
        project: bool,
        /// A variable the server starts with, as NAME=VALUE (repeatable); the value may
        /// name variables as ${VAR}.
        #[arg(long = "env", value_name = "NAME=VALUE")]
        env: Vec<String>,
        /// The command and its arguments, after `--`.
        #[arg(last = true, required = true, value_name = "COMMAND")]
        command: Vec<String>,
    },
    /// Remove a server from the config file, or with --project from this project's
    /// .mcp.json.
    Remove {
        /// The server's name, as `tern mcp list` shows it.
        name: String,
        /// Remove it from this project's .mcp.json instead of the config file.
        #[arg(long)]
        project: bool,
    },
    /// Let a server of this project's .mcp.json run; remembered until its entry changes.
    Approve {
        /// The server's name in .mcp.json.
        name: String,
    },
}

pub async fn run(command: McpCommand) -> anyhow::Result<Outcome> {
    let loaded = setup::load()?;
    let project = setup::project_dir()?;
    match command {
        McpCommand::List => list(&loaded, &project).await,
        McpCommand::Approve { name } => approve(&loaded, &project, &name).await,
        McpCommand::Add {
            name,
            project: in_project,
            env,
            command,
        } => {
            let env = env
                .iter()
                .map(|pair| {
                    pair.split_once('=')
                        .map(|(k, v)| (k.to_owned(), v.to_owned()))
                        .with_context(|| format!("--env {pair}: write it as NAME=VALUE"))
                })
                .collect::<anyhow::Result<Vec<_>>>()?;
            if in_project {
                edit_project_file(&project, |servers| {
                    let entry = serde_json::json!({
                        "command": command[0],
                        "args": command[1..],
                        "env": env.iter().map(|(k, v)| (k.clone(), serde_json::Value::from(v.as_str()))).collect::<serde_json::Map<_, _>>(),
                    });
                    servers.insert(name.clone(), entry).is_none()
                })?
                .then_some(())
                .with_context(|| format!("{name} is in {MCP_PROJECT_FILE} already"))?;
                println!(
                    "Added {name} to {}.",
                    project.join(MCP_PROJECT_FILE).display()
                );
                println!("Approve it to let it run: tern mcp approve {name}");
            } else {
                add_to_config(&loaded, &name, &command, &env)?;
                println!("Added {name} to {}.", loaded.config.config_file.display());
            }
            Ok(Outcome::Success)
        }
        McpCommand::Remove {
            name,
            project: in_project,
        } => {
            if in_project {
                let removed =
                    edit_project_file(&project, |servers| servers.remove(&name).is_some())?;
                anyhow::ensure!(removed, "no server {name} in {MCP_PROJECT_FILE}");
                println!(
                    "Removed {name} from {}.",
                    project.join(MCP_PROJECT_FILE).display()
                );
            } else {
                remove_from_config(&loaded, &name)?;
                println!(
                    "Removed {name} from {}.",
                    loaded.config.config_file.display()
                );
            }
            Ok(Outcome::Success)
        }
    }
}

fn hub(loaded: &setup::Loaded) -> McpHub {
    setup::mcp_hub(loaded, &setup::child_env(&loaded.config))
}

async fn list(loaded: &setup::Loaded, project: &Path) -> anyhow::Result<Outcome> {
    for line in server_lines(loaded, project).await? {
        println!("{line}");
    }
    Ok(Outcome::Success)
}

/// The servers of `project` as `tern mcp list` and `tern doctor` print them: the running
/// owner's, live, when a tern process owns the sessions; else each started here (and
/// stopped after) as a turn would start it.
pub async fn server_lines(loaded: &setup::Loaded, project: &Path) -> anyhow::Result<Vec<String>> {
    if let Ok(Some(service)) = super::door::owner(&loaded.paths).await {
        return service.mcp(project, None).await.map_err(anyhow::Error::msg);
    }
    let hub = hub(loaded);
    let lines = listing::lines(&hub, project).await;
    hub.stop_all().await;
    lines.map_err(anyhow::Error::msg)
}

/// Approves through the running owner when there is one (whose environment the entry is
/// read with, and which then shows its servers as they run), else here.
async fn approve(loaded: &setup::Loaded, project: &Path, name: &str) -> anyhow::Result<Outcome> {
    let lines = match super::door::owner(&loaded.paths).await {
        Ok(Some(service)) => service
            .mcp(project, Some(name))
            .await
            .map_err(|e| e.message),
        _ => listing::approve(&hub(loaded), project, name),
    };
    let lines = lines.map_err(anyhow::Error::msg)?;
    for line in lines {
        println!("{line}");
    }
    Ok(Outcome::Success)
}

/// Applies `change` to the `mcpServers` of the project's `.mcp.json` (made if absent),
/// keeping the rest of the file; returns what `change` returned.
fn edit_project_file(
    project: &Path,
    change: impl FnOnce(&mut serde_json::Map<String, serde_json::Value>) -> bool,
) -> anyhow::Result<bool> {
    let path = project.join(MCP_PROJECT_FILE);
    let mut file: serde_json::Value = match std::fs::read(&path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .with_context(|| format!("{} is not valid JSON; mend it first", path.display()))?,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => serde_json::json!({}),
        Err(err) => return Err(err).with_context(|| format!("could not read {}", path.display())),
    };
    let root = file
        .as_object_mut()
        .with_context(|| format!("{} does not hold a JSON object", path.display()))?;
    let servers = root
        .entry("mcpServers")
        .or_insert_with(|| serde_json::json!({}))
        .as_object_mut()
        .with_context(|| format!("`mcpServers` in {} is not an object", path.display()))?;
    let changed = change(servers);
    if changed {
        let text = serde_json::to_string_pretty(&file)? + "\n";
        std::fs::write(&path, text)
            .with_context(|| format!("could not write {}", path.display()))?;
    }
    Ok(changed)
}

fn add_to_config(
    loaded: &setup::Loaded,
    name: &str,
    command: &[String],
    env: &[(String, String)],
) -> anyhow::Result<()> {
    let path = &loaded.config.config_file;
    edit_config(path, |doc| {
        let servers = doc
            .entry("mcp")
            .or_insert(toml_edit::table())
            .as_table_mut()
            .context("`mcp` in the config file is not a table")?
            .entry("servers")
            .or_insert(toml_edit::table())
            .as_table_mut()
            .context("`mcp.servers` in the config file is not a table")?;
        servers.set_implicit(true);
        anyhow::ensure!(
            !servers.contains_key(name),
            "{name} is in the config file already; `tern mcp remove {name}` first"
        );
        let mut table = toml_edit::Table::new();
        table["command"] = toml_edit::value(command[0].as_str());
        let args: toml_edit::Array = command[1..].iter().map(String::as_str).collect();
        table["args"] = toml_edit::value(args);
        if !env.is_empty() {
            let mut vars = toml_edit::InlineTable::new();
            for (key, value) in env {
                vars.insert(key, value.as_str().into());
            }
            table["env"] = toml_edit::value(vars);
        }
        servers.insert(name, toml_edit::Item::Table(table));
        Ok(())
    })
}

fn remove_from_config(loaded: &setup::Loaded, name: &str) -> anyhow::Result<()> {
    edit_config(&loaded.config.config_file, |doc| {
        let removed = doc
            .get_mut("mcp")
            .and_then(|mcp| mcp.get_mut("servers"))
            .and_then(|servers| servers.as_table_like_mut())
            .and_then(|servers| servers.remove(name));
        anyhow::ensure!(removed.is_some(), "no server {name} in the config file");
        Ok(())
    })
}

/// Edits the config file with `change`, keeping what it does not touch as written; the
/// edited file must load, or nothing is written.
fn edit_config(
    path: &Path,
    change: impl FnOnce(&mut toml_edit::DocumentMut) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(err) => return Err(err).with_context(|| format!("could not read {}", path.display())),
    };
    let mut doc: toml_edit::DocumentMut = text
        .parse()
        .with_context(|| format!("{} is not valid TOML; mend it first", path.display()))?;
    change(&mut doc)?;
    let edited = doc.to_string();
    config::load_from_str(&edited, path, super::startup::environment())
        .map_err(|err| anyhow::anyhow!("the change was not made: {err}"))?;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(path, edited).with_context(|| format!("could not write {}", path.display()))
}
