//! A project's `.mcp.json`: the MCP servers a repository asks for, in the format Claude Code
//! reads, so that one file serves both.
//!
//! `{"mcpServers": {"NAME": {"command": "npx", "args": [...], "env": {...}}}}` names a program
//! to start; `{"type": "http" | "sse", "url": "...", "headers": {...}}` an address to connect
//! to. Keys other tools add to an entry are ignored, so the file can be shared; a `type` tern
//! does not know is an error, since guessing would reach the server another way than the file
//! means. Names and `${VAR}` expansion follow the same rules as `[mcp.servers.*]`. Whoever
//! wrote the repository chose these servers, which is why each carries a fingerprint of what
//! it runs (see [`McpServer::fingerprint`]): a changed entry needs approving again.

use crate::domain::call_text::json_kind;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::env::Environment;
use super::mcp::{
    CALL_TIMEOUT, Expander, McpApprove, McpOrigin, McpServer, McpTransport, Problem, check_name,
    http, stdio,
};

/// The file's name in a project's directory.
pub const PROJECT_FILE: &str = ".mcp.json";

/// A `.mcp.json` that cannot be read or used; the message names the file and says what to fix.
#[derive(Debug, thiserror::Error)]
pub enum McpFileError {
    /// The file exists but cannot be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// The file is not JSON.
    #[error("{} is not valid JSON at line {line}, column {column}: {problem}", path.display())]
    Syntax {
        path: PathBuf,
        /// 1-based.
        line: usize,
        /// 1-based, in characters.
        column: usize,
        problem: String,
    },

    /// The file is JSON but not shaped like `{"mcpServers": {...}}`.
    #[error(
        "{} {problem}; it takes {{\"mcpServers\": {{\"NAME\": {{\"command\": \"npx\", \
         \"args\": [...]}}}}}}",
        path.display()
    )]
    Shape { path: PathBuf, problem: String },

    /// One server's entry is not usable.
    #[error("invalid MCP server \"{server}\" in {}: {problem}", path.display())]
    Server {
        path: PathBuf,
        server: String,
        problem: String,
    },
}

/// The servers of `<project_dir>/.mcp.json`, sorted by name; none when there is no such file.
/// A server runs in the project directory unless its entry gives a `cwd`.
pub fn project_servers(
    project_dir: &Path,
    env: &Environment,
) -> Result<Vec<McpServer>, McpFileError> {
    let path = project_dir.join(PROJECT_FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) => servers_from_str(&text, &path, project_dir, env),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(source) => Err(McpFileError::Read { path, source }),
    }
}

/// Parses the text of a `.mcp.json` at `path`.
fn servers_from_str(
    text: &str,
    path: &Path,
    project_dir: &Path,
    env: &Environment,
) -> Result<Vec<McpServer>, McpFileError> {
    if text.trim().is_empty() {
        return Ok(Vec::new());
    }
    let doc: Value = serde_json::from_str(text).map_err(|err| {
        // serde_json ends its message with the position, which is given apart here.
        let full = err.to_string();
        let position = format!(" at line {} column {}", err.line(), err.column());
        McpFileError::Syntax {
            path: path.to_path_buf(),
            line: err.line(),
            column: err.column(),
            problem: full.strip_suffix(&position).unwrap_or(&full).to_owned(),
        }
    })?;
    let shape = |problem: String| McpFileError::Shape {
        path: path.to_path_buf(),
        problem,
    };
    let Value::Object(top) = doc else {
        return Err(shape(format!("holds {}, not an object", json_kind(&doc))));
    };
    let servers = match top.get("mcpServers") {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Object(servers)) => servers,
        Some(other) => {
            return Err(shape(format!(
                "has \"mcpServers\" as {}, not an object of servers by name",
                json_kind(other)
            )));
        }
    };
    let mut out = Vec::with_capacity(servers.len());
    for (name, entry) in servers {
        let server = project_server(name, entry, path, project_dir, env).map_err(|problem| {
            McpFileError::Server {
                path: path.to_path_buf(),
                server: name.clone(),
                problem,
            }
        })?;
        out.push(server);
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// Which transport an entry's `type` asks for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Stdio,
    Http,
    Sse,
}

fn project_server(
    name: &str,
    entry: &Value,
    path: &Path,
    project_dir: &Path,
    env: &Environment,
) -> Result<McpServer, String> {
    check_name(name)?;
    let Value::Object(entry) = entry else {
        return Err(format!(
            "is {}, not an object; write {{\"command\": \"npx\", \"args\": [...]}} or \
             {{\"type\": \"http\", \"url\": \"https://…\"}}",
            json_kind(entry)
        ));
    };
    let kind = match string(entry, "type")?.as_deref() {
        None => None,
        Some("stdio") => Some(Kind::Stdio),
        Some("http") => Some(Kind::Http),
        Some("sse") => Some(Kind::Sse),
        Some(other) => {
            return Err(format!(
                "has \"type\": {other:?}, which tern does not know; it takes \"stdio\" (with \
                 \"command\"), \"http\" (Streamable HTTP) or \"sse\" (the legacy HTTP+SSE \
                 transport), both with \"url\""
            ));
        }
    };
    let mut x = Expander::new(env, false);
    let transport = match (string(entry, "command")?, string(entry, "url")?) {
        (Some(_), Some(_)) => {
            return Err(
                "has both \"command\" and \"url\"; a server is either a program tern \
                 starts or an address it connects to: keep one"
                    .to_owned(),
            );
        }
        (None, None) => {
            return Err(
                "has neither \"command\" nor \"url\"; write \"command\" (with \"args\") \
                 for a server tern starts, or \"type\": \"http\" with \"url\" for one it \
                 connects to"
                    .to_owned(),
            );
        }
        (Some(_), None) if matches!(kind, Some(Kind::Http | Kind::Sse)) => {
            return Err(
                "has a \"command\" but its \"type\" is for a server reached at a \
                 \"url\"; write \"type\": \"stdio\" or leave \"type\" out"
                    .to_owned(),
            );
        }
        (None, Some(_)) if kind == Some(Kind::Stdio) => {
            return Err(
                "has \"type\": \"stdio\" but a \"url\" instead of a \"command\"; \
                 write \"type\": \"http\" (or \"sse\") for a server reached at a url"
                    .to_owned(),
            );
        }
        (Some(command), None) => stdio(
            &mut x,
            &command,
            &strings(entry, "args")?,
            &table(entry, "env")?,
            string(entry, "cwd")?.as_deref(),
        )
        .map(|transport| in_project(transport, project_dir)),
        (None, Some(url)) => http(
            &mut x,
            &url,
            &table(entry, "headers")?,
            kind == Some(Kind::Sse),
        ),
    }
    .map_err(described)?;
    Ok(McpServer {
        name: name.to_owned(),
        transport,
        enabled: true,
        timeout: CALL_TIMEOUT,
        allow: None,
        deny: Vec::new(),
        approve: McpApprove::default(),
        approve_tools: BTreeMap::new(),
        public: false,
        origin: McpOrigin::Project(path.to_path_buf()),
    })
}

/// A program's `cwd` taken from the project directory, which is also its default.
fn in_project(transport: McpTransport, project_dir: &Path) -> McpTransport {
    match transport {
        McpTransport::Stdio {
            command,
            args,
            env,
            cwd,
        } => McpTransport::Stdio {
            command,
            args,
            env,
            cwd: Some(cwd.map_or_else(|| project_dir.to_path_buf(), |cwd| project_dir.join(cwd))),
        },
        http => http,
    }
}

/// A problem with a key, in the file's words: `"headers.Authorization" names ${…}`.
fn described(problem: Problem) -> String {
    if problem.key.is_empty() {
        problem.message
    } else {
        format!("\"{}\" {}", problem.key.join("."), problem.message)
    }
}

/// A string member; `null` counts as absent.
fn string(entry: &Map<String, Value>, key: &str) -> Result<Option<String>, String> {
    match entry.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text.clone())),
        Some(other) => Err(format!(
            "\"{key}\" is {}; it takes a string",
            json_kind(other)
        )),
    }
}

/// An array of strings; absent or `null` is empty.
fn strings(entry: &Map<String, Value>, key: &str) -> Result<Vec<String>, String> {
    match entry.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(at, item)| match item {
                Value::String(text) => Ok(text.clone()),
                other => Err(format!(
                    "\"{key}\" has {} as entry {}; it takes strings (quote numbers, like \"8080\")",
                    json_kind(other),
                    at + 1
                )),
            })
            .collect(),
        Some(other) => Err(format!(
            "\"{key}\" is {}; it takes an array of strings",
            json_kind(other)
        )),
    }
}

/// An object of strings; absent or `null` is empty.
fn table(entry: &Map<String, Value>, key: &str) -> Result<BTreeMap<String, String>, String> {
    match entry.get(key) {
        None | Some(Value::Null) => Ok(BTreeMap::new()),
        Some(Value::Object(members)) => members
            .iter()
            .map(|(name, value)| match value {
                Value::String(text) => Ok((name.clone(), text.clone())),
                other => Err(format!(
                    "\"{key}.{name}\" is {}; it takes a string",
                    json_kind(other)
                )),
            })
            .collect(),
        Some(other) => Err(format!(
            "\"{key}\" is {}; it takes an object of strings",
            json_kind(other)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The servers of a `.mcp.json` holding `json`, in a project at `/p`.
    fn load(json: &str, env: &[(&str, &str)]) -> Result<Vec<McpServer>, String> {
        let env = Environment::from_pairs(env.iter().copied());
        servers_from_str(json, Path::new("/p/.mcp.json"), Path::new("/p"), &env)
            .map_err(|err| err.to_string())
    }

    /// The error `json` gives, checked to hold each of `parts`.
    fn check_error(json: &str, parts: &[&str]) -> String {
        let err = load(json, &[]).unwrap_err();
        for part in parts {
            assert!(err.contains(part), "`{part}` missing from: {err}");
        }
        err
    }

    #[test]
    fn programs_and_addresses() {
        let json = r#"{
          "mcpServers": {
            "zeta": {"type": "sse", "url": "http://127.0.0.1:9000/sse"},
            "github": {
              "type": "http",
              "url": "https://api.githubcopilot.com/mcp/",
              "headers": {"Authorization": "Bearer ${GITHUB_PAT}"}
            },
            "files": {
              "command": "npx",
              "args": ["-y", "@mcp/files", "${ROOT:-.}"],
              "env": {"LOG": "debug"}
            },
            "local": {"type": "stdio", "command": "./srv", "cwd": "tools"}
          }
        }"#;
        let servers = load(json, &[("GITHUB_PAT", "ghp_x")]).unwrap();
        let names: Vec<&str> = servers.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["files", "github", "local", "zeta"]);
        let origin = McpOrigin::Project(PathBuf::from("/p/.mcp.json"));
        assert!(servers.iter().all(|s| s.origin == origin && s.enabled));
        assert_eq!(
            servers[0].transport,
            McpTransport::Stdio {
                command: "npx".into(),
                args: vec!["-y".into(), "@mcp/files".into(), ".".into()],
                env: BTreeMap::from([("LOG".into(), "debug".into())]),
                cwd: Some(PathBuf::from("/p")),
            }
        );
        assert_eq!(
            servers[1].transport,
            McpTransport::Http {
                url: "https://api.githubcopilot.com/mcp/".into(),
                headers: BTreeMap::from([("Authorization".into(), "Bearer ghp_x".into())]),
                legacy_sse: false,
            }
        );
        assert!(matches!(
            &servers[2].transport,
            McpTransport::Stdio { cwd: Some(cwd), .. } if cwd == Path::new("/p/tools")
        ));
        assert!(matches!(
            servers[3].transport,
            McpTransport::Http {
                legacy_sse: true,
                ..
            }
        ));
        assert_eq!(servers[3].approve, McpApprove::Ask);
        assert!(!servers[3].public);
    }

    #[test]
    fn other_tools_keys_are_ignored() {
        let json = r#"{"mcpServers": {"a": {"command": "x", "disabled": false,
            "autoApprove": ["y"], "timeout": 5}}, "inputs": []}"#;
        assert_eq!(load(json, &[]).unwrap().len(), 1);
        assert!(load(r#"{"other": 1}"#, &[]).unwrap().is_empty());
        assert!(load(" \n", &[]).unwrap().is_empty());
    }

    #[test]
    fn a_missing_file_is_no_server_and_a_real_one_is_read() {
        let dir = tempfile::tempdir().unwrap();
        assert!(
            project_servers(dir.path(), &Environment::default())
                .unwrap()
                .is_empty()
        );
        std::fs::write(
            dir.path().join(PROJECT_FILE),
            r#"{"mcpServers": {"a": {"command": "x"}}}"#,
        )
        .unwrap();
        let servers = project_servers(dir.path(), &Environment::default()).unwrap();
        assert_eq!(
            servers[0].origin,
            McpOrigin::Project(dir.path().join(".mcp.json"))
        );
    }

    #[test]
    fn malformed_json_names_file_line_and_column() {
        let json = "{\n  \"mcpServers\": {\n    \"a\": {\"command\": \"x\",}\n  }\n}\n";
        let err = load(json, &[]).unwrap_err();
        assert!(
            err.starts_with("/p/.mcp.json is not valid JSON at line 3, column"),
            "{err}"
        );
        assert!(!err.contains("column 3 at line"), "{err}");
        check_error("[]", &["/p/.mcp.json holds an array, not an object"]);
        check_error(r#"{"mcpServers": []}"#, &["\"mcpServers\" as an array"]);
    }

    #[test]
    fn unknown_types_are_errors() {
        check_error(
            r#"{"mcpServers": {"a": {"type": "websocket", "url": "wss://x"}}}"#,
            &[
                "invalid MCP server \"a\" in /p/.mcp.json",
                "\"type\": \"websocket\", which tern does not know",
            ],
        );
        check_error(
            r#"{"mcpServers": {"a": {"type": "http", "command": "x"}}}"#,
            &["has a \"command\" but its \"type\""],
        );
        check_error(
            r#"{"mcpServers": {"a": {"type": "stdio", "url": "https://x"}}}"#,
            &["a \"url\" instead of a \"command\""],
        );
    }

    #[test]
    fn entries_follow_the_config_files_rules() {
        check_error(
            r#"{"mcpServers": {"a__b": {"command": "x"}}}"#,
            &["server \"a__b\"", "`__` separates"],
        );
        check_error(
            r#"{"mcpServers": {"a": {"command": "x", "url": "https://x"}}}"#,
            &["has both"],
        );
        check_error(r#"{"mcpServers": {"a": {}}}"#, &["has neither"]);
        check_error(
            r#"{"mcpServers": {"a": "npx"}}"#,
            &["is a string, not an object"],
        );
        let err = check_error(
            r#"{"mcpServers": {"a": {"url": "https://x", "headers": {"K": "sk-${TOKEN}"}}}}"#,
            &["\"headers.K\" names ${TOKEN}, which is not set"],
        );
        assert!(!err.contains("sk-"), "{err}");
        let err = check_error(
            r#"{"mcpServers": {"a": {"command": "x", "args": ["--port", 9123]}}}"#,
            &["\"args\" has a number as entry 2"],
        );
        assert!(!err.contains("9123"), "{err}");
        check_error(
            r#"{"mcpServers": {"a": {"command": "x", "env": {"T": true}}}}"#,
            &["\"env.T\" is a boolean"],
        );
    }

    #[test]
    fn fingerprints_change_with_the_entry() {
        let fingerprint = |json: &str| load(json, &[]).unwrap()[0].fingerprint();
        let before = fingerprint(r#"{"mcpServers": {"a": {"command": "x", "args": ["1"]}}}"#);
        let after = fingerprint(r#"{"mcpServers": {"a": {"command": "x", "args": ["2"]}}}"#);
        assert_ne!(before, after);
        let other_keys =
            fingerprint(r#"{"mcpServers": {"a": {"command": "x", "args": ["1"], "timeout": 9}}}"#);
        assert_eq!(before, other_keys);
    }
}
