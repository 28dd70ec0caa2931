//! MCP (Model Context Protocol) servers: the types that `[mcp]` in the config file (see
//! `mcp_config.rs`) and a project's `.mcp.json` (see `mcp_file.rs`) both resolve to, and the
//! checks they share: names, and transports built from values as written.
//!
//! A server is either a program tern starts and speaks to over stdin and stdout, or an address
//! it connects to over HTTP. Its name becomes part of its tools' names (`mcp__NAME__tool`),
//! which is why names are restricted. String values may name environment variables as
//! `${VAR}` (see `expand.rs`). Header and env values often are tokens: `Debug` and
//! `tern doctor` show only their keys. The variables headers name count as credentials
//! (scrubbed from tern's own environment and kept from the commands it runs), as the
//! channels' tokens do; those env values name (often `PATH` or `HOME`) do not.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use sha2::{Digest, Sha256};

use super::env::Environment;
use super::expand::{Expanded, expand};
use super::providers::redact_url;
use super::tools::is_variable_name;
use crate::domain::secret_shapes::holds_token;

/// How long a session's first prompt waits for the servers to start, by default.
pub const STARTUP_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a server no session has used is kept running, by default.
pub const IDLE_STOP: Duration = Duration::from_secs(600);
/// How long one tool call may take, by default.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// `[mcp]`: the MCP servers whose tools sessions get.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpSettings {
    /// How long a session's first prompt waits for the servers to start; zero waits not at all.
    pub startup_timeout: Duration,
    /// How long a server no session has used (no turn needing its tools, no call) keeps
    /// running before it is stopped (its tools still offered; a call starts it again);
    /// zero: never stopped.
    pub idle_stop: Duration,
    /// `[mcp.servers.*]`, sorted by name.
    pub servers: Vec<McpServer>,
}

impl Default for McpSettings {
    fn default() -> Self {
        Self {
            startup_timeout: STARTUP_TIMEOUT,
            idle_stop: IDLE_STOP,
            servers: Vec::new(),
        }
    }
}

/// One MCP server, from the config file or a project's `.mcp.json`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpServer {
    /// `[A-Za-z0-9_-]+`, without `__` and not ending in `_`: the middle of its tools' names,
    /// `mcp__NAME__tool`.
    pub name: String,
    /// How tern reaches it, with every `${VAR}` expanded.
    pub transport: McpTransport,
    /// A disabled server is not started; its `${VAR}`s may be left unexpanded.
    pub enabled: bool,
    /// How long one tool call may take.
    pub timeout: Duration,
    /// The tools offered, as the server names them; `None` offers all.
    pub allow: Option<Vec<String>>,
    /// Tools never offered, even when `allow` lists them.
    pub deny: Vec<String>,
    /// Whether its tools' calls need the person's approval.
    pub approve: McpApprove,
    /// `approve` for single tools, by the server's name for them.
    pub approve_tools: BTreeMap<String, McpApprove>,
    /// Whether the Public audience may see its tools.
    pub public: bool,
    /// Where it was configured.
    pub origin: McpOrigin,
}

/// How tern reaches a server.
#[derive(Clone, PartialEq, Eq)]
pub enum McpTransport {
    /// A program tern starts, speaking JSON-RPC over its stdin and stdout.
    Stdio {
        command: String,
        args: Vec<String>,
        /// Added to the environment the program starts with.
        env: BTreeMap<String, String>,
        /// Where it runs; a relative path is taken from the session's project directory.
        cwd: Option<PathBuf>,
    },
    /// An address tern connects to.
    Http {
        /// `http://` or `https://`.
        url: String,
        /// Sent with every request (usually `Authorization`).
        headers: BTreeMap<String, String>,
        /// The legacy HTTP+SSE transport (`transport = "sse"`) instead of Streamable HTTP.
        legacy_sse: bool,
    },
}

/// Whether a tool call needs the person's approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum McpApprove {
    /// Never ask: the tool runs without approval.
    Never,
    /// Ask as for tern's own tools that change things.
    #[default]
    Ask,
    /// Ask a person before every call, whatever the session's approval mode; an "always"
    /// answer covers nothing, and where no one is asked (`tern run`) the call is refused.
    Always,
}

impl McpApprove {
    /// Reads the config file's word for it.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "never" => Some(Self::Never),
            "ask" => Some(Self::Ask),
            "always" => Some(Self::Always),
            _ => None,
        }
    }

    /// The config file's word for it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Never => "never",
            Self::Ask => "ask",
            Self::Always => "always",
        }
    }
}

/// Where a server was configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum McpOrigin {
    /// `[mcp.servers.NAME]` in tern's config file.
    Config,
    /// A project's `.mcp.json`, by its path.
    Project(PathBuf),
}

impl McpServer {
    /// Whether the server's tool `tool` (its own name, without `mcp__NAME__`) is offered.
    pub fn allows(&self, tool: &str) -> bool {
        let listed = |list: &[String]| list.iter().any(|t| t == tool);
        self.allow.as_deref().is_none_or(listed) && !listed(&self.deny)
    }

    /// Whether a call of `tool` needs approval: its own setting, else the server's.
    pub fn approve_for(&self, tool: &str) -> McpApprove {
        self.approve_tools
            .get(tool)
            .copied()
            .unwrap_or(self.approve)
    }

    /// A SHA-256 (hex) of what runs or is reached: the transport's fields, so an approval
    /// given for one entry does not carry over to a changed one. Header values are left out:
    /// they are credentials, which change without the server changing; env values are in,
    /// since a variable like `NODE_OPTIONS` can change what a program does.
    pub fn fingerprint(&self) -> String {
        let mut hash = Sha256::new();
        // Each field length-prefixed, so no two different entries give the same bytes.
        let mut field = |bytes: &[u8]| {
            hash.update((bytes.len() as u64).to_le_bytes());
            hash.update(bytes);
        };
        match &self.transport {
            McpTransport::Stdio {
                command,
                args,
                env,
                cwd,
            } => {
                field(b"stdio");
                field(command.as_bytes());
                field(&(args.len() as u64).to_le_bytes());
                args.iter().for_each(|arg| field(arg.as_bytes()));
                field(&(env.len() as u64).to_le_bytes());
                for (name, value) in env {
                    field(name.as_bytes());
                    field(value.as_bytes());
                }
                match cwd {
                    Some(cwd) => field(cwd.as_os_str().as_encoded_bytes()),
                    None => field(b"\0no cwd"),
                }
            }
            McpTransport::Http {
                url,
                headers,
                legacy_sse,
            } => {
                field(if *legacy_sse { b"sse" } else { b"http" });
                field(url.as_bytes());
                field(&(headers.len() as u64).to_le_bytes());
                headers.keys().for_each(|name| field(name.as_bytes()));
            }
        }
        hash.finalize()
            .iter()
            .map(|byte| format!("{byte:02x}"))
            .collect()
    }
}

/// Shows keys but never the values of headers and env, which usually hold tokens.
impl fmt::Debug for McpTransport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Stdio {
                command,
                args,
                env,
                cwd,
            } => f
                .debug_struct("Stdio")
                .field("command", command)
                .field(
                    "args",
                    &args.iter().map(|a| shown_arg(a)).collect::<Vec<_>>(),
                )
                .field("env", &env.keys().collect::<Vec<_>>())
                .field("cwd", cwd)
                .finish(),
            Self::Http {
                url,
                headers,
                legacy_sse,
            } => f
                .debug_struct("Http")
                .field("url", &shown_url(url))
                .field("headers", &headers.keys().collect::<Vec<_>>())
                .field("legacy_sse", legacy_sse)
                .finish(),
        }
    }
}

/// An argument as shown to people: hidden when it looks like a token (`--key=sk-…`, often
/// from a `${VAR}`).
pub fn shown_arg(arg: &str) -> &str {
    if holds_token(arg) { "<not shown>" } else { arg }
}

/// A URL as shown to people: without its password and query, and without its path when that
/// looks like it holds a token.
pub fn shown_url(url: &str) -> String {
    let url = redact_url(url);
    // `/` is part of a token's alphabet, so each segment is looked at on its own.
    if !url.split('/').any(holds_token) {
        return url;
    }
    let authority_end = url
        .find("://")
        .and_then(|at| url[at + 3..].find('/').map(|slash| at + 3 + slash))
        .unwrap_or(url.len());
    format!("{}/…", &url[..authority_end])
}

/// Why a server's name cannot be used, if it cannot.
pub(super) fn check_name(name: &str) -> Result<(), String> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
    if name.is_empty() || !name.chars().all(allowed) {
        return Err(format!(
            "{name:?} cannot name an MCP server; use letters, digits, `-` and `_` (the name \
             becomes part of its tools' names, mcp__NAME__tool)"
        ));
    }
    // A trailing `_` would make `___` with the separator, which splits the wrong way.
    if name.contains("__") || name.ends_with('_') {
        return Err(format!(
            "{name:?} cannot name an MCP server; `__` separates the parts of its tools' names \
             (mcp__NAME__tool), so a name may not hold two `_` in a row or end with `_`"
        ));
    }
    Ok(())
}

/// A problem with one server's entry: the key it concerns (below the server's own key, empty
/// for the server as a whole) and what is wrong, said of that key.
#[derive(Debug)]
pub(super) struct Problem {
    pub key: Vec<String>,
    pub message: String,
}

impl Problem {
    fn new(key: &[&str], message: impl Into<String>) -> Self {
        Self {
            key: key.iter().map(|&k| k.to_owned()).collect(),
            message: message.into(),
        }
    }
}

/// Expands the `${VAR}`s of one server's values, keeping the variables its secrets name.
pub(super) struct Expander<'a> {
    env: &'a Environment,
    keep_unset: bool,
    /// Variables named in header values.
    pub credential_vars: Vec<String>,
}

impl<'a> Expander<'a> {
    /// With `keep_unset` (for a disabled server), an unset variable is left as written.
    pub(super) fn new(env: &'a Environment, keep_unset: bool) -> Self {
        Self {
            env,
            keep_unset,
            credential_vars: Vec::new(),
        }
    }

    fn value(&mut self, key: &[&str], text: &str, secret: bool) -> Result<String, Problem> {
        let Expanded { text, vars } = expand(text, self.env, self.keep_unset)
            .map_err(|err| Problem::new(key, err.message()))?;
        if secret {
            for var in vars {
                if !self.credential_vars.contains(&var) {
                    self.credential_vars.push(var);
                }
            }
        }
        Ok(text)
    }
}

/// A program to start, from values as written.
pub(super) fn stdio(
    x: &mut Expander<'_>,
    command: &str,
    args: &[String],
    env: &BTreeMap<String, String>,
    cwd: Option<&str>,
) -> Result<McpTransport, Problem> {
    let command = x.value(&["command"], command, false)?;
    if command.trim().is_empty() {
        return Err(Problem::new(
            &["command"],
            "is empty; write the program that starts the server, like \"npx\"",
        ));
    }
    let args = args
        .iter()
        .enumerate()
        .map(|(at, arg)| {
            x.value(&["args"], arg, false).map_err(|mut problem| {
                problem.message = format!("entry {} {}", at + 1, problem.message);
                problem
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut vars = BTreeMap::new();
    for (name, value) in env {
        if !is_variable_name(name, false) {
            return Err(Problem::new(
                &["env"],
                format!(
                    "has {name:?}, which is not an environment variable name; use letters, \
                     digits and `_`, not starting with a digit"
                ),
            ));
        }
        // A variable named here (PATH, HOME) is often no secret: only headers name credentials.
        vars.insert(name.clone(), x.value(&["env", name], value, false)?);
    }
    let cwd = match cwd {
        None => None,
        Some(cwd) => {
            let cwd = x.value(&["cwd"], cwd, false)?;
            if cwd.trim().is_empty() {
                return Err(Problem::new(
                    &["cwd"],
                    "is empty; name a directory, or leave cwd out",
                ));
            }
            Some(PathBuf::from(cwd))
        }
    };
    Ok(McpTransport::Stdio {
        command,
        args,
        env: vars,
        cwd,
    })
}

/// An address to connect to, from values as written.
pub(super) fn http(
    x: &mut Expander<'_>,
    url: &str,
    headers: &BTreeMap<String, String>,
    legacy_sse: bool,
) -> Result<McpTransport, Problem> {
    let url = x.value(&["url"], url, false)?;
    // A disabled server's URL may still hold a `${VAR}`; it is checked once it can be used.
    let unexpanded = x.keep_unset && url.contains("${");
    if !unexpanded && !is_http_url(&url) {
        return Err(Problem::new(
            &["url"],
            "is not an http:// or https:// address with a host, like \
             \"https://mcp.example.com/mcp\"",
        ));
    }
    let mut values = BTreeMap::new();
    for (name, value) in headers {
        if name.is_empty() || !name.chars().all(is_header_name_char) {
            return Err(Problem::new(
                &["headers"],
                format!("has {name:?}, which is not a header name (like \"Authorization\")"),
            ));
        }
        let value = x.value(&["headers", name], value, true)?;
        if value.contains(['\r', '\n', '\0']) {
            return Err(Problem::new(
                &["headers", name],
                "holds a line break, which a header value cannot (check the variable it names)",
            ));
        }
        values.insert(name.clone(), value);
    }
    Ok(McpTransport::Http {
        url,
        headers: values,
        legacy_sse,
    })
}

/// An `http://` or `https://` address with a host (after any `user:password@`), and nothing
/// a URL cannot hold.
fn is_http_url(url: &str) -> bool {
    let Some(rest) = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
    else {
        return false;
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = authority.rsplit('@').next().unwrap_or("");
    let host = host.rsplit_once(':').map_or(host, |(host, port)| {
        if port.chars().all(|c| c.is_ascii_digit()) {
            host
        } else {
            ""
        }
    });
    !host.is_empty() && !url.chars().any(|c| c.is_whitespace() || c.is_control())
}

/// A character of an HTTP header name (a `tchar` of RFC 9110).
fn is_header_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(transport: McpTransport) -> McpServer {
        McpServer {
            name: "github".to_owned(),
            transport,
            enabled: true,
            timeout: CALL_TIMEOUT,
            allow: None,
            deny: Vec::new(),
            approve: McpApprove::Ask,
            approve_tools: BTreeMap::new(),
            public: false,
            origin: McpOrigin::Config,
        }
    }

    fn program(args: &[&str]) -> McpServer {
        server(McpTransport::Stdio {
            command: "npx".to_owned(),
            args: args.iter().map(|&a| a.to_owned()).collect(),
            env: BTreeMap::from([("GITHUB_TOKEN".to_owned(), "ghp_value".to_owned())]),
            cwd: None,
        })
    }

    fn address(token: &str) -> McpServer {
        server(McpTransport::Http {
            url: "https://mcp.example.com/mcp".to_owned(),
            headers: BTreeMap::from([("Authorization".to_owned(), format!("Bearer {token}"))]),
            legacy_sse: false,
        })
    }

    #[test]
    fn allow_and_deny() {
        let mut s = program(&[]);
        assert!(s.allows("anything"));
        s.deny = vec!["delete_repo".into()];
        assert!(!s.allows("delete_repo"));
        assert!(s.allows("create_issue"));
        s.allow = Some(vec!["create_issue".into(), "delete_repo".into()]);
        assert!(s.allows("create_issue"));
        assert!(!s.allows("list_issues"));
        // Deny wins over allow.
        assert!(!s.allows("delete_repo"));
    }

    #[test]
    fn a_tool_setting_overrides_the_servers() {
        let mut s = program(&[]);
        assert_eq!(s.approve_for("x"), McpApprove::Ask);
        s.approve = McpApprove::Never;
        s.approve_tools.insert("push".into(), McpApprove::Always);
        assert_eq!(s.approve_for("x"), McpApprove::Never);
        assert_eq!(s.approve_for("push"), McpApprove::Always);
    }

    #[test]
    fn fingerprint_follows_what_runs() {
        let base = program(&["-y", "server-github"]).fingerprint();
        assert_eq!(base.len(), 64);
        assert_eq!(program(&["-y", "server-github"]).fingerprint(), base);
        assert_ne!(program(&["-y", "server-gitlab"]).fingerprint(), base);
        // Argument boundaries count: ["a b"] is not ["a", "b"].
        assert_ne!(
            program(&["a b"]).fingerprint(),
            program(&["a", "b"]).fingerprint()
        );
        // Settings of tern's own do not change what runs.
        let mut s = program(&["-y", "server-github"]);
        s.timeout = Duration::from_secs(5);
        s.approve = McpApprove::Never;
        s.enabled = false;
        assert_eq!(s.fingerprint(), base);
        // A rotated token is the same server.
        assert_eq!(address("one").fingerprint(), address("two").fingerprint());
        assert_ne!(address("one").fingerprint(), base);
    }

    #[test]
    fn debug_shows_keys_never_values() {
        let text = format!("{:?} {:?}", program(&[]), address("sk-ant-secret"));
        assert!(
            text.contains("GITHUB_TOKEN") && text.contains("Authorization"),
            "{text}"
        );
        assert!(
            !text.contains("ghp_value") && !text.contains("secret"),
            "{text}"
        );
        let token_arg = program(&["--token=ghp_0123456789abcdefghijABCDEFGHIJ"]);
        assert!(!format!("{token_arg:?}").contains("ghp_0123"));
    }

    #[test]
    fn urls_are_shown_without_secrets() {
        assert_eq!(
            shown_url("https://u:pw@mcp.example.com/mcp?key=abc"),
            "https://…@mcp.example.com/mcp?…"
        );
        assert_eq!(
            shown_url("https://mcp.example.com/sk-ant-0123456789abcdefghij/mcp"),
            "https://mcp.example.com/…"
        );
    }

    #[test]
    fn names() {
        for good in ["github", "my-server", "a_b", "_x", "A1"] {
            assert_eq!(check_name(good), Ok(()), "{good}");
        }
        for bad in ["", "a b", "a.b", "a/b", "é"] {
            let err = check_name(bad).unwrap_err();
            assert!(err.contains("letters, digits, `-` and `_`"), "{err}");
        }
        for bad in ["a__b", "a_"] {
            let err = check_name(bad).unwrap_err();
            assert!(err.contains("mcp__NAME__tool"), "{err}");
            assert!(err.contains("two `_` in a row"), "{err}");
        }
    }
}
