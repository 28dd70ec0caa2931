//! The resolved configuration as TOML, for `tern doctor`.
//!
//! The text parses as TOML, so it can be read by a program or copied into a config file as a
//! start: every value is written as the file takes it (durations and sizes as text like
//! `"30m"` and `"2GB"`), and what tern assumed, or what a value means, is a `#` comment at
//! the end of its line. A setting with no value (no limit, no fallback) is a comment line.
//!
//! Keys are never shown, only whether they are there (`api_key = "<set>"  # from
//! ANTHROPIC_API_KEY`), and the values of an MCP server's headers and env never: doctor
//! output gets pasted into bug reports.

use std::fmt::Write;

use super::mcp::{McpServer, McpTransport, shown_arg, shown_url};
use super::providers::redact_url;
use super::settings::{Config, MaintenanceMode, ModelRef, ProviderProfile};
use super::units::{format_duration, format_size};

/// What stands for the value of a header or an environment variable of an MCP server.
const NOT_SHOWN: &str = "<not shown>";

impl Config {
    /// The configuration after defaults and the environment, as TOML: one setting per line,
    /// the profiles the file or the environment set up, notes as comments.
    pub fn render(&self) -> String {
        let mut out = String::new();
        // Writing to a String cannot fail; the results are ignored for that reason only.
        let _ = self.write_to(&mut out);
        out
    }

    fn write_to(&self, out: &mut String) -> std::fmt::Result {
        let file = self.config_file.display().to_string();
        match &self.source {
            Some(_) => writeln!(out, "# config file: {}", comment(&file))?,
            None => writeln!(
                out,
                "# config file: {} (not found; using defaults and the environment)",
                comment(&file)
            )?,
        }

        writeln!(out, "\n[models]")?;
        match self.default_provider() {
            Ok(profile) => writeln!(out, "provider = {}", string(&profile.name))?,
            Err(_) => writeln!(out, "# provider: none configured")?,
        }
        let role = |out: &mut String, name: &str, model: &Option<ModelRef>| match model {
            Some(model) => writeln!(out, "{name} = {}", string(&model.to_string())),
            None => writeln!(out, "# {name}: none"),
        };
        match self.conversation_model() {
            Ok((profile, model)) => writeln!(
                out,
                "default = {}",
                string(&format!("{}/{model}", profile.name))
            )?,
            Err(_) => role(out, "default", &self.models.default)?,
        }
        match self.compaction_model() {
            Ok((profile, model)) => writeln!(
                out,
                "compaction = {}",
                string(&format!("{}/{model}", profile.name))
            )?,
            Err(_) => role(out, "compaction", &self.models.compaction)?,
        }
        match self.fallback_model() {
            Ok(Some((profile, model))) => writeln!(
                out,
                "fallback = {}",
                string(&format!("{}/{model}", profile.name))
            )?,
            Ok(None) => writeln!(out, "# fallback: none")?,
            Err(_) => role(out, "fallback", &self.models.fallback)?,
        }

        let unused: Vec<&str> = self
            .providers
            .values()
            .filter(|profile| !self.configured.contains(&profile.name))
            .map(|profile| profile.name.as_str())
            .collect();
        if !unused.is_empty() {
            writeln!(
                out,
                "# built-in profiles nothing here sets up (usable with --provider NAME): {}",
                comment(&unused.join(", "))
            )?;
        }
        for profile in self.configured_providers() {
            write_profile(out, profile)?;
        }

        let s = &self.session;
        writeln!(out, "\n[session]")?;
        for (name, value) in [
            ("prefill_timeout", s.prefill_timeout),
            ("first_token_timeout", s.first_token_timeout),
            ("no_progress_timeout", s.no_progress_timeout),
            ("tool_execution_timeout", s.tool_execution_timeout),
            ("sidecar_llm_timeout", s.sidecar_llm_timeout),
        ] {
            writeln!(out, "{name} = {}", string(&format_duration(value)))?;
        }
        writeln!(out, "sidecar_titles = {}", s.sidecar_titles)?;
        if s.idle_timeout.is_zero() {
            writeln!(out, "idle_timeout = 0  # passivation off")?;
        } else {
            writeln!(
                out,
                "idle_timeout = {}",
                string(&format_duration(s.idle_timeout))
            )?;
        }
        writeln!(
            out,
            "compaction_threshold = {}",
            float(s.compaction_threshold)
        )?;
        writeln!(
            out,
            "keep_recent_tool_results = {}",
            s.keep_recent_tool_results
        )?;
        writeln!(out, "keep_recent_messages = {}", s.keep_recent_messages)?;
        writeln!(out, "snapshot_every = {}", s.snapshot_every)?;
        writeln!(
            out,
            "max_message_bytes = {}",
            string(&format_size(s.max_message_bytes as u64))
        )?;
        writeln!(
            out,
            "max_argument_bytes = {}",
            string(&format_size(s.max_argument_bytes as u64))
        )?;
        writeln!(out, "max_rounds = {}", s.max_rounds)?;

        let m = &s.maintenance;
        writeln!(out, "\n[session.maintenance]")?;
        let mode = match m.mode {
            MaintenanceMode::Warn => "warn",
            MaintenanceMode::Enforce => "enforce",
        };
        writeln!(out, "mode = {}", string(mode))?;
        writeln!(
            out,
            "prune_after = {}",
            string(&format_duration(m.prune_after))
        )?;
        writeln!(out, "max_entries = {}", m.max_entries)?;
        for (name, bytes) in [
            ("max_disk_bytes", m.max_disk_bytes),
            ("high_water_bytes", m.high_water_bytes),
        ] {
            match bytes {
                Some(bytes) => writeln!(out, "{name} = {}", string(&format_size(bytes)))?,
                None => writeln!(out, "# {name}: no limit")?,
            }
        }

        let reset = &s.reset;
        writeln!(out, "\n[session.reset]")?;
        writeln!(out, "daily = {}", reset.daily)?;
        writeln!(
            out,
            "daily_at = {}",
            string(&reset.daily_at.strftime("%H:%M").to_string())
        )?;
        match reset.idle {
            Some(idle) => writeln!(out, "idle_minutes = {}", idle.as_secs() / 60)?,
            None => writeln!(out, "idle_minutes = 0  # off")?,
        }

        writeln!(out, "\n[subagents]")?;
        writeln!(out, "max_concurrent = {}", s.subagents.max_concurrent)?;

        writeln!(out, "\n[context]")?;
        match s.repo_map_tokens {
            0 => writeln!(out, "repo_map_tokens = 0  # no repository map")?,
            n => writeln!(out, "repo_map_tokens = {n}")?,
        }

        let t = &self.tools;
        writeln!(out, "\n[tools]")?;
        writeln!(out, "pass_env = {}", list(&t.pass_env))?;
        writeln!(out, "strip_env = {}", list(&t.strip_env))?;
        writeln!(
            out,
            "shell_max_duration = {}",
            string(&format_duration(t.shell_max_duration))
        )?;
        writeln!(
            out,
            "shell_max_duration_ceiling = {}",
            string(&format_duration(t.shell_max_duration_ceiling))
        )?;

        writeln!(out, "\n[mcp]")?;
        match self.mcp.startup_timeout {
            d if d.is_zero() => writeln!(
                out,
                "startup_timeout = 0  # the first prompt waits for none"
            )?,
            d => writeln!(out, "startup_timeout = {}", string(&format_duration(d)))?,
        }
        match self.mcp.idle_stop {
            d if d.is_zero() => writeln!(out, "idle_stop = 0  # never")?,
            d => writeln!(out, "idle_stop = {}", string(&format_duration(d)))?,
        }
        for server in &self.mcp.servers {
            write_mcp_server(out, server)?;
        }

        writeln!(out, "\n[ui]")?;
        writeln!(out, "theme = {}", string(&self.ui.theme))?;

        let r = &self.retry;
        writeln!(out, "\n[retry]")?;
        writeln!(out, "max_attempts = {}", r.max_attempts)?;
        writeln!(out, "base_delay_ms = {}", r.base_delay.as_millis())?;
        writeln!(out, "max_delay_ms = {}", r.max_delay.as_millis())
    }
}

/// One `[mcp.servers.NAME]`, with the keys of its headers and env but never their values.
fn write_mcp_server(out: &mut String, server: &McpServer) -> std::fmt::Result {
    writeln!(out, "\n[mcp.servers.{}]", key(&server.name))?;
    match &server.transport {
        McpTransport::Stdio {
            command,
            args,
            env,
            cwd,
        } => {
            writeln!(out, "command = {}", string(shown_arg(command)))?;
            writeln!(
                out,
                "args = {}",
                list(args.iter().map(|arg| shown_arg(arg)))
            )?;
            if !env.is_empty() {
                writeln!(out, "env = {}", hidden_values(env.keys()))?;
            }
            if let Some(cwd) = cwd {
                writeln!(out, "cwd = {}", string(&cwd.display().to_string()))?;
            }
        }
        McpTransport::Http {
            url,
            headers,
            legacy_sse,
        } => {
            writeln!(out, "url = {}", string(&shown_url(url)))?;
            if *legacy_sse {
                writeln!(out, "transport = \"sse\"  # the legacy HTTP+SSE transport")?;
            } else {
                writeln!(out, "transport = \"http\"")?;
            }
            if !headers.is_empty() {
                writeln!(out, "headers = {}", hidden_values(headers.keys()))?;
            }
        }
    }
    writeln!(out, "enabled = {}", server.enabled)?;
    writeln!(
        out,
        "timeout = {}",
        string(&format_duration(server.timeout))
    )?;
    match &server.allow {
        Some(allow) => writeln!(out, "tools.allow = {}", list(allow))?,
        None => writeln!(out, "# tools.allow: every tool the server offers")?,
    }
    if !server.deny.is_empty() {
        writeln!(out, "tools.deny = {}", list(&server.deny))?;
    }
    writeln!(out, "approve = {}", string(server.approve.as_str()))?;
    for (tool, approve) in &server.approve_tools {
        writeln!(
            out,
            "approve_tools.{} = {}",
            key(tool),
            string(approve.as_str())
        )?;
    }
    writeln!(out, "public = {}", server.public)
}

fn write_profile(out: &mut String, p: &ProviderProfile) -> std::fmt::Result {
    writeln!(out, "\n[providers.{}]", key(&p.name))?;
    writeln!(out, "kind = {}", string(p.kind.as_str()))?;
    // Loading refuses URLs with secrets in them; profiles built in code are redacted here too.
    writeln!(out, "base_url = {}", string(&redact_url(&p.base_url)))?;
    // What was written stands bare; what tern assumes says so, and what the server may
    // replace at start (see `llm::served`) says that too.
    let learned = p.asks_server();
    let model_note = if !p.written.model && learned {
        "  # unless the server serves another"
    } else {
        ""
    };
    writeln!(out, "model = {}{model_note}", string(&p.default_model))?;
    let window_note = match (p.written.context_window, learned) {
        (true, _) => "",
        (false, true) => "  # assumed until the server says",
        (false, false) => "  # assumed",
    };
    writeln!(out, "context_window = {}{window_note}", p.context_window)?;
    let output_note = if p.written.max_output_tokens {
        ""
    } else {
        "  # a share of the window"
    };
    writeln!(
        out,
        "max_output_tokens = {}{output_note}",
        p.max_output_tokens
    )?;
    writeln!(out, "images = {}", p.images)?;
    // Variable names were checked at load (upper snake case), so they are safe in a comment.
    match (&p.api_key_env, &p.api_key) {
        (Some(var), Some(_)) => writeln!(out, "api_key = \"<set>\"  # from {var}"),
        (Some(var), None) if p.needs_key() => {
            writeln!(out, "api_key = \"<missing>\"  # export {var}=<key>")
        }
        (Some(var), None) => writeln!(
            out,
            "# api_key: not needed for a server on this machine or network ({var} is not set)"
        ),
        (None, _) if p.needs_key() => writeln!(
            out,
            "api_key = \"<missing>\"  # name its variable with api_key_env = \"VARIABLE_NAME\""
        ),
        (None, _) => writeln!(out, "# api_key: not needed"),
    }
}

/// `text` as a TOML basic string: quoted, with `"`, `\` and control characters escaped.
fn string(text: &str) -> String {
    let mut quoted = String::with_capacity(text.len() + 2);
    quoted.push('"');
    for c in text.chars() {
        match c {
            '"' => quoted.push_str("\\\""),
            '\\' => quoted.push_str("\\\\"),
            '\n' => quoted.push_str("\\n"),
            '\t' => quoted.push_str("\\t"),
            '\r' => quoted.push_str("\\r"),
            c if c.is_control() => {
                let _ = write!(quoted, "\\u{:04X}", u32::from(c));
            }
            c => quoted.push(c),
        }
    }
    quoted.push('"');
    quoted
}

/// A key as TOML takes it: bare when it can be, else quoted.
fn key(name: &str) -> String {
    let bare = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if bare { name.to_owned() } else { string(name) }
}

/// `["a", "b"]`.
fn list<'a>(items: impl IntoIterator<Item = &'a (impl AsRef<str> + ?Sized + 'a)>) -> String {
    let items: Vec<String> = items
        .into_iter()
        .map(|item| string(item.as_ref()))
        .collect();
    format!("[{}]", items.join(", "))
}

/// `{ NAME = "<not shown>", … }`: the names of a server's headers or variables, as the file
/// writes them, without their values.
fn hidden_values<'a>(names: impl Iterator<Item = &'a String>) -> String {
    let pairs: Vec<String> = names
        .map(|name| format!("{} = \"{NOT_SHOWN}\"", key(name)))
        .collect();
    format!("{{ {} }}", pairs.join(", "))
}

/// A float as TOML writes one: always with a point or an exponent, so it stays a float.
fn float(value: f64) -> String {
    format!("{value:?}")
}

/// Text for a comment: a comment ends at the line's end and takes no control characters.
fn comment(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

#[cfg(test)]
mod tests {
    use crate::config::{Environment, load_from_str};
    use std::path::Path;

    /// Several profiles (one with a name TOML must quote, one whose key is missing), MCP
    /// servers of both transports with secrets in their headers and env, chat channels, and
    /// every section: the rendered text must parse as TOML and keep no secret.
    const CONFIG: &str = r#"
[models]
provider = "work"
compaction = "work/claude-haiku-4-5"
fallback = "my.box/qwen"

[providers.work]
kind = "anthropic"
api_key_env = "WORK_KEY"
model = "claude-sonnet-4-5"

[providers.spare]
kind = "anthropic"
api_key_env = "SPARE_KEY"
model = "claude-haiku-4-5"

[providers."my.box"]
kind = "openai"
base_url = "http://127.0.0.1:8080/v1"

[session]
idle_timeout = 0
compaction_threshold = 0.5

[session.maintenance]
max_disk_bytes = "2GB"

[session.reset]
idle_minutes = 0

[context]
repo_map_tokens = 0

[tools]
pass_env = ["GH_PAT", "deploy_token"]

[mcp]
startup_timeout = 0

[mcp.servers.files]
command = "npx"
args = ["-y", "@mcp/files", "C:\\work\\ \"quoted\"", "tab\there"]
env = { LOG = "debug", API_TOKEN = "${GITHUB_PAT}" }
cwd = "/srv"
tools = { allow = ["read", "list"], deny = ["write"] }
approve_tools = { read = "never", "odd.tool" = "always" }

[mcp.servers.github]
url = "https://api.githubcopilot.com/mcp/"
headers = { Authorization = "Bearer ${GITHUB_PAT}", "X.Trace" = "on" }

[mcp.servers.old]
url = "http://127.0.0.1:3000/sse"
transport = "sse"
enabled = false

[channels.slack]
bot_token_env = "SLACK_BOT"
app_token_env = "SLACK_APP"

[ui]
theme = "light"
"#;

    #[test]
    fn the_rendered_config_is_toml_and_keeps_no_secret() {
        let env = Environment::from_pairs([
            ("WORK_KEY", "sk-work-SECRET"),
            ("GITHUB_PAT", "ghp_0123456789abcdefghijSECRET"),
            ("SLACK_BOT", "xoxb-SECRET"),
            ("SLACK_APP", "xapp-SECRET"),
        ]);
        let config = load_from_str(CONFIG, Path::new("/home/me/.config/tern/config.toml"), &env)
            .expect("a valid config");
        let text = config.render();
        assert!(!text.contains("SECRET"), "{text}");
        let parsed: toml::Table = match toml::from_str(&text) {
            Ok(parsed) => parsed,
            Err(err) => panic!("{err}\n{text}"),
        };
        let at = |path: &[&str]| {
            let mut value = &parsed[path[0]];
            for part in &path[1..] {
                value = value
                    .get(part)
                    .unwrap_or_else(|| panic!("no {path:?} in\n{text}"));
            }
            value.clone()
        };
        let s = |text: &str| toml::Value::String(text.to_owned());
        assert_eq!(at(&["models", "provider"]), s("work"));
        assert_eq!(at(&["models", "default"]), s("work/claude-sonnet-4-5"));
        assert_eq!(at(&["models", "fallback"]), s("my.box/qwen"));
        assert_eq!(at(&["providers", "work", "api_key"]), s("<set>"));
        assert_eq!(at(&["providers", "spare", "api_key"]), s("<missing>"));
        assert_eq!(at(&["providers", "my.box", "kind"]), s("openai"));
        assert_eq!(
            at(&["providers", "work", "context_window"]),
            toml::Value::Integer(128_000)
        );
        assert!(
            text.contains("api_key = \"<set>\"  # from WORK_KEY"),
            "{text}"
        );
        assert!(text.contains("  # export SPARE_KEY=<key>"), "{text}");
        // Unused built-ins are named, not shown as tables.
        assert!(parsed["providers"].get("ollama").is_none(), "{text}");
        assert!(text.contains("(usable with --provider NAME): anthropic, ollama, openai"));
        assert_eq!(at(&["session", "idle_timeout"]), toml::Value::Integer(0));
        assert_eq!(
            at(&["session", "compaction_threshold"]),
            toml::Value::Float(0.5)
        );
        assert_eq!(at(&["session", "prefill_timeout"]), s("30m"));
        assert_eq!(at(&["session", "maintenance", "max_disk_bytes"]), s("2GB"));
        assert_eq!(at(&["session", "reset", "daily_at"]), s("04:00"));
        assert_eq!(
            at(&["tools", "pass_env"]),
            toml::Value::Array(vec![s("GH_PAT"), s("deploy_token")])
        );
        let files = at(&["mcp", "servers", "files"]);
        assert_eq!(
            files["args"],
            toml::Value::Array(vec![
                s("-y"),
                s("@mcp/files"),
                s("C:\\work\\ \"quoted\""),
                s("tab\there")
            ])
        );
        assert_eq!(files["env"]["LOG"], s("<not shown>"));
        assert_eq!(files["env"]["API_TOKEN"], s("<not shown>"));
        assert_eq!(files["tools"]["deny"], toml::Value::Array(vec![s("write")]));
        assert_eq!(files["approve_tools"]["odd.tool"], s("always"));
        let github = at(&["mcp", "servers", "github"]);
        assert_eq!(github["headers"]["Authorization"], s("<not shown>"));
        assert_eq!(github["headers"]["X.Trace"], s("<not shown>"));
        assert_eq!(github["transport"], s("http"));
        assert!(github.get("tools").is_none(), "{text}");
        assert_eq!(at(&["mcp", "servers", "old", "transport"]), s("sse"));
        assert_eq!(at(&["ui", "theme"]), s("light"));
    }

    #[test]
    fn with_nothing_configured_the_text_is_toml_that_says_so() {
        let config = load_from_str("", Path::new("/c.toml"), &Environment::default())
            .expect("a valid config");
        let text = config.render();
        let parsed: toml::Table =
            toml::from_str(&text).unwrap_or_else(|err| panic!("{err}\n{text}"));
        assert!(parsed.get("providers").is_none(), "{text}");
        assert!(text.contains("# provider: none configured"), "{text}");
        assert!(text.contains("# default: none"), "{text}");
        assert!(text.contains("# max_disk_bytes: no limit"), "{text}");
    }

    #[test]
    fn strings_are_escaped_as_toml_reads_them() {
        for text in [
            "plain",
            "a\"b",
            "back\\slash",
            "line\nbreak",
            "bell\u{7}",
            "del\u{7f}",
            "é ✓",
        ] {
            let line = format!("v = {}", super::string(text));
            let parsed: toml::Table =
                toml::from_str(&line).unwrap_or_else(|err| panic!("{err}: {line}"));
            assert_eq!(parsed["v"].as_str(), Some(text), "{line}");
        }
    }
}
