//! The assembled request for each audience, pinned by snapshots: the labelled layers a
//! person sees with `--print-prompt`, and the Anthropic body as it goes on the wire. Every
//! input is fixed (time, paths, git, identity files), so the bytes are too.

use serde_json::json;
use std::path::PathBuf;
use tern::config::{ProviderKind, ProviderProfile};
use tern::context::{
    AheadBehind, Branch, CurrentTime, DurableContext, GitContext, GitSnapshot, Head, IdentityFiles,
    PromptFile, ShellInfo, StatusCounts, Upstream, WorkingContext,
};
use tern::domain::{Audience, ContentBlock, Message, Role, ToolCall, ToolResult};
use tern::llm::{ChatRequest, provider_for};
use tern::prompt::{
    self, MEMORY_OFF, NudgeSources, PromptSize, RequestFrame, SessionPaths, StaticSources,
    SystemSources, TurnNotes,
};
use tern::tools::ToolRegistry;

fn file(name: &str, text: &str) -> PromptFile {
    PromptFile {
        file: name.into(),
        text: text.into(),
        cut_from: None,
    }
}

fn working(shell: bool) -> WorkingContext {
    WorkingContext::with_git(
        DurableContext {
            project_dir: "/home/ada/shop".into(),
            cwd: "/home/ada/shop".into(),
            recent_files: vec!["/home/ada/shop/src/cart.rs".into()],
        },
        shell.then(|| ShellInfo {
            platform: "linux x86_64".into(),
            executable: "/usr/bin/bash".into(),
            grammar: "bash".into(),
        }),
        GitContext::Repo(GitSnapshot {
            worktree: "/home/ada/shop".into(),
            common_dir: "/home/ada/shop/.git".into(),
            branch: Branch::Named("cart-totals".into()),
            head: Head::Commit {
                short_id: "1a2b3c4".into(),
                subject: "Round cart totals".into(),
            },
            upstream: Some(Upstream {
                name: "origin/cart-totals".into(),
                ahead_behind: Some(AheadBehind {
                    ahead: 1,
                    behind: 0,
                }),
            }),
            counts: StatusCounts {
                staged: 0,
                modified: 2,
                untracked: 1,
                conflicted: 0,
            },
        }),
    )
}

/// The first request of a turn for `audience`, after one earlier turn with a tool call.
fn assembled(audience: Audience) -> (ChatRequest, Option<usize>) {
    assembled_in(audience, PromptSize::Full)
}

/// [`assembled`] in the prompt size `size`.
fn assembled_in(audience: Audience, size: PromptSize) -> (ChatRequest, Option<usize>) {
    let identity = IdentityFiles {
        soul: None,
        playbook: Some(file("identity/AGENTS.md", "Prefer small commits.")),
        tooling: Some(file(
            "identity/TOOLING.md",
            "Tests run with `cargo nextest run`.",
        )),
    };
    let instructions = file("CLAUDE.md", "Money is integer cents, never floats.");
    let tier_a = prompt::system_prompt(
        audience,
        SystemSources {
            identity: &identity,
            instructions: Some(&instructions),
            size,
        },
    );
    let registry = ToolRegistry::builtin();
    let paths = SessionPaths {
        session_dir: "/home/ada/.local/share/tern/sessions/s-1".into(),
        temp_dir: "/tmp/tern-1000/cli:s-1/p".into(),
        artifact_dir: "/home/ada/.local/share/tern/sessions/s-1/artifacts".into(),
        worktree_dir: "/home/ada/.local/share/tern/sessions/s-1/worktrees".into(),
        log_path: "/home/ada/.local/share/tern/sessions/s-1/logs/session.log".into(),
    };
    let tier_b = prompt::static_context(
        audience,
        StaticSources {
            session_id: "s-1",
            tools: &prompt::tool_index(&registry, audience),
            skills: &[],
            memory: MEMORY_OFF,
            paths: &paths,
            size,
            repo_map: None,
        },
    );
    let at: jiff::Timestamp = "2026-11-29T21:47:30Z".parse().unwrap();
    let time = CurrentTime::at(at, jiff::tz::TimeZone::get("Europe/Berlin").unwrap());
    let full = audience != Audience::Public;
    let working = full.then(|| working(audience == Audience::Personal));
    let nudge = |time: &CurrentTime| {
        prompt::nudge(
            audience,
            NudgeSources {
                time,
                working: working.as_ref(),
                notes: &TurnNotes::default(),
                size,
            },
        )
        .unwrap()
    };
    let earlier = CurrentTime::at(
        "2026-11-29T21:40:00Z".parse().unwrap(),
        jiff::tz::TimeZone::get("Europe/Berlin").unwrap(),
    );
    let mut history = vec![
        Message::user_text(nudge(&earlier)),
        Message::user_text("Why is the cart total off by a cent?"),
    ];
    if full {
        history.push(Message {
            role: Role::Assistant,
            content: vec![ContentBlock::ToolUse(ToolCall {
                id: "toolu_1".into(),
                name: "file_read".into(),
                input: json!({"path": "src/cart.rs"}),
            })],
        });
        history.push(Message {
            role: Role::User,
            content: vec![ContentBlock::ToolResult(ToolResult::ok(
                "toolu_1",
                "1\tlet total = price * 1.1;",
            ))],
        });
    }
    history.push(Message::assistant_text(
        "The total is computed in floating point.",
    ));
    history.push(Message::user_text(nudge(&time)));
    history.push(Message::user_text("Fix it."));
    let frame = RequestFrame {
        model: "claude-sonnet-4-5",
        max_output_tokens: 8192,
        cache_key: "s-1",
    };
    let tools = prompt::tool_specs(&registry, audience, size);
    let nudge_at = history.len() - 2;
    let request = prompt::build_request(vec![tier_a, tier_b], &history, tools, &frame);
    (request, Some(nudge_at))
}

fn anthropic_body(request: &ChatRequest) -> serde_json::Value {
    let provider = provider_for(&ProviderProfile {
        name: "anthropic".into(),
        kind: ProviderKind::Anthropic,
        base_url: "https://api.anthropic.com".into(),
        api_key_env: None,
        api_key: None,
        default_model: "claude-sonnet-4-5".into(),
        context_window: 200_000,
        max_output_tokens: 8192,
        written: Default::default(),
        images: false,
    });
    let mut body = provider.wire_body(request);
    // The tool schemas are pinned by the tools' own tests; here only their names and the
    // cache mark matter.
    if let Some(tools) = body.get_mut("tools").and_then(|t| t.as_array_mut()) {
        for tool in tools {
            tool["description"] = json!("…");
            tool["input_schema"] = json!("…");
        }
    }
    body
}

fn settings() -> insta::Settings {
    let mut settings = insta::Settings::clone_current();
    settings
        .set_snapshot_path(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/it/snapshots"));
    settings.set_prepend_module_to_snapshot(false);
    settings
}

fn check(audience: Audience, name: &str) {
    let (request, nudge_at) = assembled(audience);
    settings().bind(|| {
        insta::assert_snapshot!(
            format!("{name}_layers"),
            prompt::describe_request(&request, nudge_at)
        );
        let body = serde_json::to_string_pretty(&anthropic_body(&request)).unwrap();
        insta::assert_snapshot!(format!("{name}_anthropic"), body);
    });
}

/// The compact variant of the layers at a 4k window, and its tools in full: one-line
/// descriptions and schemas without guidance.
fn check_compact(audience: Audience, name: &str) {
    let (request, nudge_at) = assembled_in(audience, PromptSize::for_window(4096));
    settings().bind(|| {
        insta::assert_snapshot!(
            format!("compact_{name}_layers"),
            prompt::describe_request(&request, nudge_at)
        );
        let tools = serde_json::to_string_pretty(&request.tools).unwrap();
        insta::assert_snapshot!(format!("compact_{name}_tools"), tools);
    });
}

#[test]
fn compact_team_request() {
    check_compact(Audience::Team, "team");
}

#[test]
fn compact_public_request() {
    let (request, nudge_at) = assembled_in(Audience::Public, PromptSize::for_window(4096));
    settings().bind(|| {
        insta::assert_snapshot!(
            "compact_public_layers",
            prompt::describe_request(&request, nudge_at)
        );
    });
}

#[test]
fn public_request() {
    check(Audience::Public, "public");
}

#[test]
fn team_request() {
    check(Audience::Team, "team");
}

#[test]
fn personal_request() {
    check(Audience::Personal, "personal");
}

#[test]
fn the_cache_breakpoints_end_tier_a_tier_b_and_the_stable_history() {
    let (request, _) = assembled(Audience::Personal);
    let body = anthropic_body(&request);
    let marked = |blocks: &serde_json::Value| {
        blocks
            .as_array()
            .unwrap()
            .iter()
            .filter(|b| b.get("cache_control").is_some())
            .count()
    };
    assert_eq!(marked(&body["system"]), 2);
    assert_eq!(
        marked(&body["tools"]),
        0,
        "tier A's breakpoint covers the tools"
    );
    let messages = body["messages"].as_array().unwrap();
    let marks: Vec<(usize, usize)> = messages
        .iter()
        .enumerate()
        .flat_map(|(i, m)| {
            m["content"]
                .as_array()
                .unwrap()
                .iter()
                .enumerate()
                .filter(|(_, b)| b.get("cache_control").is_some())
                .map(move |(j, _)| (i, j))
        })
        .collect();
    // The earlier turn's final answer (the stable history) and the new input.
    let last = messages.len() - 1;
    assert_eq!(marks, [(last - 1, 0), (last, 1)]);
    assert_eq!(messages[last - 1]["role"], "assistant");
}
