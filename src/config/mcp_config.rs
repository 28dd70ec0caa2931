//! Validation of `[mcp]`: how long a first prompt waits for the servers, and each
//! `[mcp.servers.NAME]`. The keys of the transport a server does not use are refused (as the
//! channels refuse another platform's keys), so `headers` on a program or `args` on an
//! address is an error rather than a setting silently ignored.

use std::collections::BTreeMap;

use super::env::Environment;
use super::error::ConfigError;
use super::load::Validator;
use super::mcp::{
    CALL_TIMEOUT, Expander, IDLE_STOP, McpApprove, McpOrigin, McpServer, McpSettings,
    STARTUP_TIMEOUT, check_name, http, stdio,
};
use super::raw::{RawMcp, RawMcpServer};

impl Validator<'_> {
    /// `[mcp]`, with the variables its servers' secrets name.
    pub(super) fn mcp(
        &self,
        raw: RawMcp,
        env: &Environment,
    ) -> Result<(McpSettings, Vec<String>), ConfigError> {
        // Zero is meaningful: the first prompt does not wait for any server.
        let startup_timeout = self.duration(
            &["mcp", "startup_timeout"],
            raw.startup_timeout,
            STARTUP_TIMEOUT,
            true,
        )?;
        // Zero is meaningful: servers are never stopped for going unused.
        let idle_stop = self.duration(&["mcp", "idle_stop"], raw.idle_stop, IDLE_STOP, true)?;
        let mut servers = Vec::with_capacity(raw.servers.len());
        let mut credential_vars = Vec::new();
        // A BTreeMap, so the servers come out sorted by name.
        for (name, raw) in raw.servers {
            let (server, vars) = self.mcp_server(&name, raw, env)?;
            servers.push(server);
            credential_vars.extend(vars);
        }
        Ok((
            McpSettings {
                startup_timeout,
                idle_stop,
                servers,
            },
            credential_vars,
        ))
    }

    fn mcp_server(
        &self,
        name: &str,
        raw: RawMcpServer,
        env: &Environment,
    ) -> Result<(McpServer, Vec<String>), ConfigError> {
        let at = ["mcp", "servers", name];
        let error = |key: &[&str], problem: String| {
            let path: Vec<&str> = at.iter().chain(key).copied().collect();
            self.error(&path, problem)
        };
        check_name(name).map_err(|problem| error(&[], problem))?;
        let enabled = raw.enabled.unwrap_or(true);
        let mut x = Expander::new(env, !enabled);
        let transport = match (&raw.command, &raw.url) {
            (Some(_), Some(_)) => {
                return Err(error(
                    &[],
                    "has both `command` and `url`; a server is either a program tern starts \
                     (command, args, env, cwd) or an address it connects to (url, headers, \
                     transport): keep one"
                        .to_owned(),
                ));
            }
            (None, None) => {
                return Err(error(
                    &[],
                    "has neither `command` nor `url`; write command = \"npx\" (with args) for \
                     a server tern starts, or url = \"https://…\" for one it connects to"
                        .to_owned(),
                ));
            }
            (Some(command), None) => {
                let misplaced = [
                    ("headers", raw.headers.is_some()),
                    ("transport", raw.transport.is_some()),
                ];
                if let Some((key, _)) = misplaced.iter().find(|(_, set)| *set) {
                    return Err(error(
                        &[key],
                        format!(
                            "is for servers reached at a `url`; [{}] is a program tern \
                             starts with its `command`",
                            at.join(".")
                        ),
                    ));
                }
                stdio(
                    &mut x,
                    command,
                    raw.args.as_deref().unwrap_or_default(),
                    &raw.env.unwrap_or_default(),
                    raw.cwd.as_deref(),
                )
            }
            (None, Some(url)) => {
                let misplaced = [
                    ("args", raw.args.is_some()),
                    ("env", raw.env.is_some()),
                    ("cwd", raw.cwd.is_some()),
                ];
                if let Some((key, _)) = misplaced.iter().find(|(_, set)| *set) {
                    return Err(error(
                        &[key],
                        format!(
                            "is for servers tern starts with a `command`; [{}] is reached at \
                             its `url`",
                            at.join(".")
                        ),
                    ));
                }
                let legacy_sse = match raw.transport.as_deref() {
                    None | Some("http") => false,
                    Some("sse") => true,
                    Some(other) => {
                        return Err(error(
                            &["transport"],
                            format!(
                                "{other:?} is not a transport; it takes \"http\" (Streamable \
                                 HTTP, the default) or \"sse\" (the legacy HTTP+SSE transport)"
                            ),
                        ));
                    }
                };
                http(&mut x, url, &raw.headers.unwrap_or_default(), legacy_sse)
            }
        }
        .map_err(|problem| {
            let key: Vec<&str> = problem.key.iter().map(String::as_str).collect();
            error(&key, problem.message)
        })?;

        let timeout = self.duration(
            &["mcp", "servers", name, "timeout"],
            raw.timeout,
            CALL_TIMEOUT,
            false,
        )?;
        let tools = raw.tools.unwrap_or_default();
        for (list, tools) in [("allow", &tools.allow), ("deny", &tools.deny)] {
            for tool in tools.iter().flatten() {
                check_tool_name(tool).map_err(|problem| error(&["tools", list], problem))?;
            }
        }
        let approve = |key: &[&str], text: &str| {
            McpApprove::parse(text).ok_or_else(|| {
                error(
                    key,
                    format!(
                        "{text:?} is not an approval; it takes \"never\" (run without asking), \
                         \"ask\" (the default) or \"always\" (ask before every call)"
                    ),
                )
            })
        };
        let server_approve = match raw.approve.as_deref() {
            None => McpApprove::default(),
            Some(text) => approve(&["approve"], text)?,
        };
        let mut approve_tools = BTreeMap::new();
        for (tool, text) in raw.approve_tools.unwrap_or_default() {
            check_tool_name(&tool).map_err(|problem| error(&["approve_tools", &tool], problem))?;
            let value = approve(&["approve_tools", &tool], &text)?;
            approve_tools.insert(tool, value);
        }
        let server = McpServer {
            name: name.to_owned(),
            transport,
            enabled,
            timeout,
            allow: tools.allow,
            deny: tools.deny.unwrap_or_default(),
            approve: server_approve,
            approve_tools,
            public: raw.public.unwrap_or(false),
            origin: McpOrigin::Config,
        };
        Ok((server, x.credential_vars))
    }
}

/// Why a tool name in `tools` or `approve_tools` cannot be right, if it cannot.
fn check_tool_name(tool: &str) -> Result<(), String> {
    if tool.trim().is_empty() {
        return Err("holds an empty tool name".to_owned());
    }
    if tool.starts_with("mcp__") {
        return Err(format!(
            "holds {tool:?}; write the tool's name as the server gives it, without \
             mcp__NAME__ (like \"create_issue\")"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::mcp::McpTransport;
    use crate::config::{Config, load_from_str};
    use std::path::{Path, PathBuf};
    use std::time::Duration;

    fn load(text: &str, env: &[(&str, &str)]) -> Result<Config, String> {
        let env = Environment::from_pairs(env.iter().copied());
        load_from_str(text, Path::new("/c/config.toml"), &env).map_err(|err| err.to_string())
    }

    /// The only server of `text`.
    fn server(text: &str, env: &[(&str, &str)]) -> McpServer {
        let mut servers = load(text, env).unwrap().mcp.servers;
        assert_eq!(servers.len(), 1);
        servers.remove(0)
    }

    /// The error `text` gives, checked to hold each of `parts`.
    fn check_error(text: &str, env: &[(&str, &str)], parts: &[&str]) -> String {
        let err = load(text, env).unwrap_err();
        for part in parts {
            assert!(err.contains(part), "`{part}` missing from: {err}");
        }
        err
    }

    #[test]
    fn no_section_is_no_server() {
        let config = load("", &[]).unwrap();
        assert_eq!(config.mcp, McpSettings::default());
        assert_eq!(config.mcp.startup_timeout, Duration::from_secs(5));
        assert_eq!(
            config.credential_vars(),
            ["ANTHROPIC_API_KEY", "OPENAI_API_KEY"]
        );
        let config = load("[mcp]\nstartup_timeout = \"500ms\"\n", &[]).unwrap();
        assert_eq!(config.mcp.startup_timeout, Duration::from_millis(500));
        assert!(config.render().contains("startup_timeout = \"500ms\""));
        assert_eq!(config.mcp.idle_stop, Duration::from_secs(600));
        let config = load("[mcp]\nidle_stop = \"90s\"\n", &[]).unwrap();
        assert_eq!(config.mcp.idle_stop, Duration::from_secs(90));
        assert!(config.render().contains("idle_stop = \"90s\""));
        let never = load("[mcp]\nidle_stop = 0\n", &[]).unwrap();
        assert_eq!(never.mcp.idle_stop, Duration::ZERO);
        assert!(never.render().contains("idle_stop = 0  # never"));
        let config = load("[mcp]\nstartup_timeout = 0\n", &[]).unwrap();
        assert!(config.mcp.startup_timeout.is_zero());
    }

    #[test]
    fn a_program_with_defaults() {
        let text = "[mcp.servers.files]\ncommand = \"npx\"\nargs = [\"-y\", \"@mcp/files\", \"${HOME}/src\"]\nenv = { LOG = \"${LEVEL:-info}\" }\ncwd = \"/srv\"\n";
        let s = server(text, &[("HOME", "/home/me")]);
        assert_eq!(s.name, "files");
        assert_eq!(
            s.transport,
            McpTransport::Stdio {
                command: "npx".into(),
                args: vec!["-y".into(), "@mcp/files".into(), "/home/me/src".into()],
                env: BTreeMap::from([("LOG".into(), "info".into())]),
                cwd: Some(PathBuf::from("/srv")),
            }
        );
        assert!(s.enabled);
        assert_eq!(s.timeout, CALL_TIMEOUT);
        assert_eq!(s.allow, None);
        assert!(s.deny.is_empty());
        assert_eq!(s.approve, McpApprove::Ask);
        assert!(!s.public);
        assert_eq!(s.origin, McpOrigin::Config);
    }

    #[test]
    fn an_address_whose_header_names_a_variable() {
        let text = "[mcp.servers.github]\nurl = \"https://api.githubcopilot.com/mcp/\"\nheaders = { Authorization = \"Bearer ${GITHUB_PAT}\" }\ntimeout = \"30s\"\npublic = true\n";
        let env = [("GITHUB_PAT", "ghp_0123456789abcdefghijABCDEFGHIJ")];
        let config = load(text, &env).unwrap();
        let s = &config.mcp.servers[0];
        let McpTransport::Http {
            url,
            headers,
            legacy_sse,
        } = &s.transport
        else {
            panic!("{s:?}");
        };
        assert_eq!(url, "https://api.githubcopilot.com/mcp/");
        assert_eq!(
            headers["Authorization"],
            "Bearer ghp_0123456789abcdefghijABCDEFGHIJ"
        );
        assert!(!legacy_sse);
        assert_eq!(s.timeout, Duration::from_secs(30));
        assert!(s.public);
        assert!(config.credential_vars().contains(&"GITHUB_PAT".to_owned()));
        // Neither Debug nor doctor shows the token.
        for text in [format!("{config:?}"), config.render()] {
            assert!(!text.contains("ghp_0123"), "{text}");
        }
        assert!(
            config
                .render()
                .contains("headers = { Authorization = \"<not shown>\" }")
        );
    }

    #[test]
    fn header_values_name_credentials_and_other_keys_do_not() {
        let text = "[mcp.servers.a]\ncommand = \"${BIN}\"\nargs = [\"${ARG}\"]\nenv = { T = \"${SECRET}\" }\n[mcp.servers.b]\nurl = \"https://${HOST}/mcp\"\nheaders = { X-Key = \"${KEY}\" }\n";
        let env = [
            ("BIN", "srv"),
            ("ARG", "x"),
            ("SECRET", "s"),
            ("HOST", "h.example"),
            ("KEY", "k"),
        ];
        assert_eq!(
            load(text, &env).unwrap().credential_vars(),
            // The built-in providers' key variables are always there. An env value's
            // variable (often PATH or HOME) is not taken for a credential.
            ["ANTHROPIC_API_KEY", "KEY", "OPENAI_API_KEY"]
        );
    }

    #[test]
    fn an_unset_variable_names_server_key_and_variable_but_no_value() {
        let text = "[mcp.servers.github]\nurl = \"https://x.example/mcp\"\nheaders = { Authorization = \"Bearer ${GITHUB_PAT}-sk-ant-literal\" }\n";
        let err = check_error(
            text,
            &[],
            &[
                "/c/config.toml at line 3",
                "mcp.servers.github.headers.Authorization",
                "${GITHUB_PAT}, which is not set",
            ],
        );
        assert!(!err.contains("Bearer") && !err.contains("literal"), "{err}");
        let text = "[mcp.servers.a]\ncommand = \"x\"\nargs = [\"ok\", \"${NOPE}\"]\n";
        check_error(text, &[], &["mcp.servers.a.args", "entry 2 names ${NOPE}"]);
        // A disabled server never runs, so what it would need may be missing.
        let text = "[mcp.servers.a]\nenabled = false\nurl = \"https://${HOST}/mcp\"\nheaders = { K = \"${KEY}\" }\n";
        let s = server(text, &[]);
        assert!(!s.enabled);
        assert!(
            matches!(&s.transport, McpTransport::Http { url, .. } if url == "https://${HOST}/mcp")
        );
    }

    #[test]
    fn exactly_one_of_command_and_url() {
        let both = "[mcp.servers.a]\ncommand = \"x\"\nurl = \"https://x.example\"\n";
        check_error(
            both,
            &[],
            &["line 1", "mcp.servers.a`", "has both `command` and `url`"],
        );
        check_error("[mcp.servers.a]\nenabled = true\n", &[], &["has neither"]);
        let text = "[mcp.servers.a]\ncommand = \"x\"\nheaders = { A = \"b\" }\n";
        check_error(
            text,
            &[],
            &["mcp.servers.a.headers", "is for servers reached at a `url`"],
        );
        let text = "[mcp.servers.a]\nurl = \"https://x.example\"\nargs = []\n";
        check_error(
            text,
            &[],
            &["mcp.servers.a.args", "tern starts with a `command`"],
        );
        let text = "[mcp.servers.a]\nurl = \"ftp://x.example\"\n";
        check_error(
            text,
            &[],
            &["mcp.servers.a.url", "not an http:// or https://"],
        );
        check_error("[mcp.servers.a]\ncommand = \"\"\n", &[], &["is empty"]);
    }

    #[test]
    fn names_fit_tool_names() {
        check_error(
            "[mcp.servers.a__b]\ncommand = \"x\"\n",
            &[],
            &["`__` separates"],
        );
        check_error(
            "[mcp.servers.\"a b\"]\ncommand = \"x\"\n",
            &[],
            &["letters, digits"],
        );
    }

    #[test]
    fn transports() {
        let text = "[mcp.servers.old]\nurl = \"http://127.0.0.1:3000/sse\"\ntransport = \"sse\"\n";
        assert!(matches!(
            server(text, &[]).transport,
            McpTransport::Http {
                legacy_sse: true,
                ..
            }
        ));
        let text = "[mcp.servers.a]\nurl = \"https://x.example\"\ntransport = \"ws\"\n";
        check_error(
            text,
            &[],
            &["mcp.servers.a.transport", "\"http\"", "\"sse\""],
        );
        let text = "[mcp.servers.a]\ncommand = \"x\"\ntransport = \"sse\"\n";
        check_error(text, &[], &["mcp.servers.a.transport"]);
    }

    #[test]
    fn approvals() {
        let text = "[mcp.servers.a]\ncommand = \"x\"\napprove = \"never\"\napprove_tools = { push = \"always\", read = \"ask\" }\n";
        let s = server(text, &[]);
        assert_eq!(s.approve, McpApprove::Never);
        assert_eq!(s.approve_for("list"), McpApprove::Never);
        assert_eq!(s.approve_for("push"), McpApprove::Always);
        assert_eq!(s.approve_for("read"), McpApprove::Ask);
        let text = "[mcp.servers.a]\ncommand = \"x\"\napprove = \"yes\"\n";
        check_error(text, &[], &["mcp.servers.a.approve", "\"never\""]);
        let text = "[mcp.servers.a]\ncommand = \"x\"\napprove_tools = { push = \"no\" }\n";
        check_error(text, &[], &["mcp.servers.a.approve_tools.push"]);
    }

    #[test]
    fn allow_and_deny_lists() {
        let text = "[mcp.servers.a]\ncommand = \"x\"\ntools = { allow = [\"read\", \"write\"], deny = [\"write\"] }\n";
        let s = server(text, &[]);
        assert_eq!(s.allow, Some(vec!["read".to_owned(), "write".to_owned()]));
        assert!(s.allows("read") && !s.allows("write") && !s.allows("other"));
        let text = "[mcp.servers.a]\ncommand = \"x\"\ntools = { deny = [\"mcp__a__write\"] }\n";
        check_error(
            text,
            &[],
            &["mcp.servers.a.tools.deny", "without mcp__NAME__"],
        );
        let text = "[mcp.servers.a]\ncommand = \"x\"\ntools = { only = [] }\n";
        check_error(text, &[], &["unknown key `only`", "`allow` or `deny`"]);
    }

    #[test]
    fn unknown_keys_are_refused_with_their_line() {
        let text = "[mcp]\n\n[mcp.servers.a]\ncommand = \"x\"\nargv = [\"y\"]\n";
        check_error(
            text,
            &[],
            &[
                "/c/config.toml at line 5",
                "key `mcp.servers.a.argv`",
                "unknown key `argv`",
            ],
        );
        check_error(
            "[mcp]\ntimeout = 3\n",
            &[],
            &["line 2", "unknown key `timeout`"],
        );
    }

    #[test]
    fn wrongly_typed_values_are_not_repeated() {
        let text = "[mcp.servers.a]\nurl = \"https://x.example\"\nheaders = \"Bearer sk-ant-0123456789abcdef\"\n";
        let err = check_error(text, &[], &["mcp.servers.a.headers", "expected a table"]);
        assert!(!err.contains("sk-ant") && !err.contains("Bearer"), "{err}");
        let text = "[mcp.servers.a]\ncommand = \"x\"\nargs = \"--token=abc\"\n";
        let err = check_error(text, &[], &["expected an array"]);
        assert!(!err.contains("abc"), "{err}");
    }
}
