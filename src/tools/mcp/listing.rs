//! What `tern mcp list`, `tern doctor` and `/mcp` in the interface show of a project's
//! servers, and a person's approval of a server of its `.mcp.json`, as lines of text: the
//! same words whether the process asked runs the sessions itself or is their owner's client.

use super::hub::McpHub;
use super::server::ServerState;
use crate::config::{self, MCP_PROJECT_FILE, McpOrigin, McpServer, McpTransport};
use std::path::Path;

/// The servers of `project`, each started as a turn would start it (waiting at most `[mcp]
/// startup_timeout`), in two lines or more: what it is and runs, then its state and tools
/// (or why it failed), then its prompts and resources when it has any.
pub async fn lines(hub: &McpHub, project: &Path) -> Result<Vec<String>, String> {
    let servers = hub.servers_for(project)?;
    if servers.is_empty() {
        return Ok(vec![format!(
            "No MCP server is configured for this project. Add one with `tern mcp add NAME -- \
             COMMAND ARGS…`, in [mcp.servers.NAME] of the config file (`tern doctor` names \
             it), or in {}.",
            project.join(MCP_PROJECT_FILE).display()
        )]);
    }
    hub.tools_for(project).await;
    hub.listings_of(project).await;
    let mut lines = Vec::new();
    for (server, state) in &hub.states(project)? {
        let what = what_runs(server);
        lines.push(format!(
            "{}  {}  {what}",
            server.name,
            origin(server, project)
        ));
        lines.push(format!("    {}", shown(server, state)));
        if let ServerState::Ready {
            prompts, resources, ..
        } = state
        {
            if !prompts.is_empty() {
                let commands: Vec<String> = prompts
                    .iter()
                    .map(|(name, usage)| format!("/mcp__{}__{name}{}", server.name, spaced(usage)))
                    .collect();
                lines.push(format!("    prompts: {}", commands.join(", ")));
            }
            if !resources.is_empty() {
                lines.push(format!("    resources: {}", resources.join(", ")));
            }
        }
    }
    Ok(lines)
}

fn spaced(usage: &str) -> String {
    match usage {
        "" => String::new(),
        usage => format!(" {usage}"),
    }
}

/// What to tell a person opening `project` whose `.mcp.json` names servers not approved
/// to run there (none when all are, or none is named): which, what each runs, and how to
/// let one run.
pub fn unapproved(hub: &McpHub, project: &Path) -> Result<Vec<String>, String> {
    let waiting: Vec<McpServer> = hub
        .servers_for(project)?
        .into_iter()
        .filter(|(server, ok)| !ok && server.enabled)
        .map(|(server, _)| server)
        .collect();
    if waiting.is_empty() {
        return Ok(Vec::new());
    }
    let mut lines = vec![format!(
        "This project's {MCP_PROJECT_FILE} names MCP servers not approved to run here (or \
         changed since); their tools are not offered until you approve them:"
    )];
    for server in &waiting {
        lines.push(format!("  {}: {}", server.name, what_runs(server)));
        lines.extend(particulars(server));
    }
    lines.push("/mcp approve NAME lets one run, remembered until its entry changes.".to_owned());
    Ok(lines)
}

/// Lets the server `name` of `project`'s `.mcp.json` run there, remembered until its entry
/// changes; says what it runs. A server of the config file needs no approval.
pub fn approve(hub: &McpHub, project: &Path, name: &str) -> Result<Vec<String>, String> {
    let servers = hub.servers_for(project)?;
    let Some((server, _)) = servers.iter().find(|(server, _)| server.name == name) else {
        return Err(format!(
            "no server {name} in this project's {MCP_PROJECT_FILE} or the config file; `tern mcp \
             list` (or /mcp) shows them"
        ));
    };
    if server.origin == McpOrigin::Config {
        return Ok(vec![format!(
            "{name} is in the config file: it runs without approval."
        )]);
    }
    hub.approve(project, server)
        .map_err(|err| format!("could not remember the approval: {err}"))?;
    let mut lines = vec![format!(
        "{name} may run in {}. It runs: {}",
        project.display(),
        what_runs(server)
    )];
    lines.extend(particulars(server));
    Ok(lines)
}

/// What a person approving `server` should know beyond its command line: the variables it
/// gets and where it runs, the headers it sends, and whether an argument is not shown
/// (one that looks like a secret), so that nothing it runs is hidden from them.
fn particulars(server: &McpServer) -> Vec<String> {
    let mut lines = Vec::new();
    match &server.transport {
        McpTransport::Stdio { args, env, cwd, .. } => {
            if args.iter().any(|arg| config::shown_arg(arg) != arg) {
                lines.push(format!(
                    "    an argument looks like a secret and is not shown: read {MCP_PROJECT_FILE} \
                     before approving"
                ));
            }
            if !env.is_empty() {
                let names: Vec<&str> = env.keys().map(String::as_str).collect();
                lines.push(format!("    with the variables {}", names.join(", ")));
            }
            if let Some(cwd) = cwd {
                lines.push(format!("    in {}", cwd.display()));
            }
        }
        McpTransport::Http { headers, .. } if !headers.is_empty() => {
            let names: Vec<&str> = headers.keys().map(String::as_str).collect();
            lines.push(format!("    sending the headers {}", names.join(", ")));
        }
        McpTransport::Http { .. } => {}
    }
    lines
}

fn origin(server: &McpServer, project: &Path) -> String {
    match &server.origin {
        McpOrigin::Config => "config".to_owned(),
        McpOrigin::Project(file) => file
            .strip_prefix(project)
            .unwrap_or(file)
            .display()
            .to_string(),
    }
}

/// The command and arguments, or the transport and address, with secrets left out.
pub fn what_runs(server: &McpServer) -> String {
    match &server.transport {
        McpTransport::Stdio { command, args, .. } => {
            let mut line = config::shown_arg(command).to_owned();
            for arg in args {
                line.push(' ');
                line.push_str(config::shown_arg(arg));
            }
            line
        }
        McpTransport::Http {
            url, legacy_sse, ..
        } => {
            let kind = if *legacy_sse { "sse" } else { "http" };
            format!("{kind} {}", config::shown_url(url))
        }
    }
}

fn shown(server: &McpServer, state: &ServerState) -> String {
    match state {
        ServerState::Ready { tools, .. } if tools.is_empty() => "ready, no tools".to_owned(),
        ServerState::Ready { tools, .. } => format!(
            "ready, {} tool{}: {}",
            tools.len(),
            if tools.len() == 1 { "" } else { "s" },
            tools.join(", ")
        ),
        ServerState::Starting => "still starting after the startup timeout; a session's next \
                                  turn will have it if it comes up"
            .to_owned(),
        ServerState::NotStarted => "not started".to_owned(),
        ServerState::Resting { tools } => format!(
            "resting: stopped after going unused for [mcp] idle_stop; its {tools} tools are \
             still offered, and a call of one starts it again"
        ),
        ServerState::Failed { reason } => format!("failed: {reason}"),
        ServerState::NeedsApproval => format!(
            "not approved for this project (or changed since): run `tern mcp approve {0}` \
             (or `/mcp approve {0}` in the interface) to let it run",
            server.name
        ),
        ServerState::Disabled => "disabled (enabled = false)".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_a_server_runs_is_hidden_from_the_person_approving_it() {
        let text = "[mcp.servers.s]\ncommand = \"python3\"\n\
                    args = [\"-c\", \"print(1) # ghp_abcdefghijklmnopqrstuvwxyz0123456789\"]\n\
                    env = { NODE_OPTIONS = \"--require x\" }\ncwd = \"/srv\"\n";
        let env = crate::config::Environment::default();
        let server = crate::config::load_from_str(text, Path::new("c.toml"), &env)
            .expect("a valid config")
            .mcp
            .servers
            .remove(0);
        let lines = particulars(&server).join("\n");
        assert!(
            lines.contains("an argument looks like a secret and is not shown"),
            "{lines}"
        );
        assert!(lines.contains("with the variables NODE_OPTIONS"), "{lines}");
        assert!(lines.contains("in /srv"), "{lines}");
    }
}
