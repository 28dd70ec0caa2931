//! The resolved configuration as readable text, for `tern doctor`.
//!
//! It shows where each key would come from and whether it is there (`set (from
//! ANTHROPIC_API_KEY)`, `missing (WORK_KEY)`), never the key itself: doctor output gets pasted
//! into bug reports.

use std::fmt::Write;

use super::location::dotted;
use super::mcp::{McpServer, McpTransport, shown_arg, shown_url};
use super::providers::redact_url;
use super::settings::{Config, MaintenanceMode, ModelRef, ProviderProfile};
use super::units::{format_duration, format_size};

impl Config {
    /// The configuration after defaults and the environment, one setting per line.
    pub fn render(&self) -> String {
        let mut out = String::new();
        // Writing to a String cannot fail; the results are ignored for that reason only.
        let _ = self.write_to(&mut out);
        out
    }

    fn write_to(&self, out: &mut String) -> std::fmt::Result {
        match &self.source {
            Some(path) => writeln!(out, "config file: {}", path.display())?,
            None => writeln!(
                out,
                "config file: {} (not found; using defaults and the environment)",
                self.config_file.display()
            )?,
        }

        writeln!(out, "\n[models]")?;
        match self.default_provider() {
            Ok(profile) => writeln!(out, "provider = {}", profile.name)?,
            Err(_) => writeln!(out, "provider = (none configured)")?,
        }
        let role = |model: &Option<ModelRef>, unset: &str| {
            model
                .as_ref()
                .map_or_else(|| unset.to_owned(), ModelRef::to_string)
        };
        match self.conversation_model() {
            Ok((profile, model)) => writeln!(out, "default = {}/{model}", profile.name)?,
            Err(_) => writeln!(out, "default = {}", role(&self.models.default, "(none)"))?,
        }
        match self.compaction_model() {
            Ok((profile, model)) => writeln!(out, "compaction = {}/{model}", profile.name)?,
            Err(_) => writeln!(
                out,
                "compaction = {}",
                role(&self.models.compaction, "(none)")
            )?,
        }
        match self.fallback_model() {
            Ok(Some((profile, model))) => writeln!(out, "fallback = {}/{model}", profile.name)?,
            Ok(None) => writeln!(out, "fallback = (none)")?,
            Err(_) => writeln!(out, "fallback = {}", role(&self.models.fallback, "(none)"))?,
        }

        for profile in self.providers.values() {
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
            writeln!(out, "{name} = {}", format_duration(value))?;
        }
        writeln!(out, "sidecar_titles = {}", s.sidecar_titles)?;
        if s.idle_timeout.is_zero() {
            writeln!(out, "idle_timeout = 0 (passivation off)")?;
        } else {
            writeln!(out, "idle_timeout = {}", format_duration(s.idle_timeout))?;
        }
        writeln!(out, "compaction_threshold = {}", s.compaction_threshold)?;
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
            format_size(s.max_message_bytes as u64)
        )?;
        writeln!(out, "max_rounds = {}", s.max_rounds)?;

        let m = &s.maintenance;
        writeln!(out, "\n[session.maintenance]")?;
        let mode = match m.mode {
            MaintenanceMode::Warn => "warn",
            MaintenanceMode::Enforce => "enforce",
        };
        writeln!(out, "mode = {mode}")?;
        writeln!(out, "prune_after = {}", format_duration(m.prune_after))?;
        writeln!(out, "max_entries = {}", m.max_entries)?;
        let size = |bytes: Option<u64>| bytes.map_or_else(|| "(no limit)".to_owned(), format_size);
        writeln!(out, "max_disk_bytes = {}", size(m.max_disk_bytes))?;
        writeln!(out, "high_water_bytes = {}", size(m.high_water_bytes))?;

        let reset = &s.reset;
        writeln!(out, "\n[session.reset]")?;
        writeln!(out, "daily = {}", reset.daily)?;
        writeln!(out, "daily_at = {}", reset.daily_at.strftime("%H:%M"))?;
        match reset.idle {
            Some(idle) => writeln!(out, "idle_minutes = {}", idle.as_secs() / 60)?,
            None => writeln!(out, "idle_minutes = 0 (off)")?,
        }

        writeln!(out, "\n[subagents]")?;
        writeln!(out, "max_concurrent = {}", s.subagents.max_concurrent)?;

        writeln!(out, "\n[context]")?;
        match s.repo_map_tokens {
            0 => writeln!(out, "repo_map_tokens = 0 (no repository map)")?,
            n => writeln!(out, "repo_map_tokens = {n}")?,
        }

        let t = &self.tools;
        writeln!(out, "\n[tools]")?;
        let list = |names: &[String]| {
            if names.is_empty() {
                "[]".to_owned()
            } else {
                format!("[\"{}\"]", names.join("\", \""))
            }
        };
        writeln!(out, "pass_env = {}", list(&t.pass_env))?;
        writeln!(out, "strip_env = {}", list(&t.strip_env))?;
        writeln!(
            out,
            "shell_max_duration = {}",
            format_duration(t.shell_max_duration)
        )?;
        writeln!(
            out,
            "shell_max_duration_ceiling = {}",
            format_duration(t.shell_max_duration_ceiling)
        )?;

        writeln!(out, "\n[mcp]")?;
        let startup = self.mcp.startup_timeout;
        match startup {
            d if d.is_zero() => {
                writeln!(out, "startup_timeout = 0 (the first prompt waits for none)")?
            }
            d => writeln!(out, "startup_timeout = {}", format_duration(d))?,
        }
        match self.mcp.idle_stop {
            d if d.is_zero() => writeln!(out, "idle_stop = 0 (never)")?,
            d => writeln!(out, "idle_stop = {}", format_duration(d))?,
        }
        for server in &self.mcp.servers {
            write_mcp_server(out, server)?;
        }

        writeln!(out, "\n[ui]")?;
        writeln!(out, "theme = {}", self.ui.theme)?;

        let r = &self.retry;
        writeln!(out, "\n[retry]")?;
        writeln!(out, "max_attempts = {}", r.max_attempts)?;
        writeln!(out, "base_delay_ms = {}", r.base_delay.as_millis())?;
        writeln!(out, "max_delay_ms = {}", r.max_delay.as_millis())
    }
}

/// One `[mcp.servers.NAME]`, with the keys of its headers and env but never their values.
fn write_mcp_server(out: &mut String, server: &McpServer) -> std::fmt::Result {
    writeln!(out, "\n[mcp.servers.{}]", server.name)?;
    match &server.transport {
        McpTransport::Stdio {
            command,
            args,
            env,
            cwd,
        } => {
            writeln!(out, "command = {}", shown_arg(command))?;
            writeln!(out, "args = {}", quoted(args.iter().map(|a| shown_arg(a))))?;
            if !env.is_empty() {
                writeln!(
                    out,
                    "env = {} (values not shown)",
                    quoted(env.keys().map(String::as_str))
                )?;
            }
            if let Some(cwd) = cwd {
                writeln!(out, "cwd = {}", cwd.display())?;
            }
        }
        McpTransport::Http {
            url,
            headers,
            legacy_sse,
        } => {
            writeln!(out, "url = {}", shown_url(url))?;
            let transport = if *legacy_sse {
                "sse (legacy HTTP+SSE)"
            } else {
                "http"
            };
            writeln!(out, "transport = {transport}")?;
            if !headers.is_empty() {
                writeln!(
                    out,
                    "headers = {} (values not shown)",
                    quoted(headers.keys().map(String::as_str))
                )?;
            }
        }
    }
    writeln!(out, "enabled = {}", server.enabled)?;
    writeln!(out, "timeout = {}", format_duration(server.timeout))?;
    match &server.allow {
        Some(allow) => writeln!(
            out,
            "tools.allow = {}",
            quoted(allow.iter().map(String::as_str))
        )?,
        None => writeln!(out, "tools.allow = (all)")?,
    }
    if !server.deny.is_empty() {
        writeln!(
            out,
            "tools.deny = {}",
            quoted(server.deny.iter().map(String::as_str))
        )?;
    }
    writeln!(out, "approve = {}", server.approve.as_str())?;
    for (tool, approve) in &server.approve_tools {
        writeln!(
            out,
            "{} = {}",
            dotted(&["approve_tools", tool]),
            approve.as_str()
        )?;
    }
    writeln!(out, "public = {}", server.public)
}

/// `["a", "b"]`.
fn quoted<'a>(items: impl Iterator<Item = &'a str>) -> String {
    let items: Vec<String> = items.map(|item| format!("{item:?}")).collect();
    format!("[{}]", items.join(", "))
}

fn write_profile(out: &mut String, p: &ProviderProfile) -> std::fmt::Result {
    writeln!(out, "\n[providers.{}]", p.name)?;
    writeln!(out, "kind = {}", p.kind.as_str())?;
    // Loading refuses URLs with secrets in them; profiles built in code are redacted here too.
    writeln!(out, "base_url = {}", redact_url(&p.base_url))?;
    // What was written is shown bare; what tern assumes says so, and what the server may
    // replace at start (see `llm::served`) says that too.
    let learned = p.asks_server();
    let model_note = if !p.written.model && learned {
        " (unless the server serves another)"
    } else {
        ""
    };
    writeln!(out, "model = {}{model_note}", p.default_model)?;
    let window_note = match (p.written.context_window, learned) {
        (true, _) => "",
        (false, true) => " (assumed until the server says)",
        (false, false) => " (assumed)",
    };
    writeln!(out, "context_window = {}{window_note}", p.context_window)?;
    let output_note = if p.written.max_output_tokens {
        ""
    } else {
        " (a share of the window)"
    };
    writeln!(
        out,
        "max_output_tokens = {}{output_note}",
        p.max_output_tokens
    )?;
    writeln!(out, "images = {}", p.images)?;
    let key = match (&p.api_key_env, &p.api_key) {
        (Some(var), Some(_)) => format!("set (from {var})"),
        (Some(var), None) if p.needs_key() => format!("missing ({var})"),
        (Some(var), None) => format!("not set ({var}); not needed for a local server"),
        (None, _) if p.needs_key() => "missing (no api_key_env configured)".to_owned(),
        (None, _) => "not needed".to_owned(),
    };
    writeln!(out, "api_key = {key}")
}
