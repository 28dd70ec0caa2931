//! Prompt assembly: what every model call of a turn pays before the request leaves.
//!
//! The inputs are built once, outside the timed loops: tier A (the embedded persona and
//! rules plus a 4 KiB project instruction file), tier B (the built-in tools' index and the
//! session's paths), the built-in tool schemas, and a 500-message history shaped like a real
//! session: every turn opens with a nudge and the person's message, the model calls
//! `file_read` and `grep` over a few rounds, each call answered by 200 B to 4 KiB of output,
//! and the turn closes with a text reply. The last turn is still running, so the history ends
//! on a user message, as it does when a request is assembled.
//!
//! Criterion's `prompt` group measures:
//! - `assemble_500`: `prompt::build_request` with the tier clones and the tool clone a turn
//!   makes per call (`session::layers::request`);
//! - `assemble_and_encode_anthropic_500`: the same, then the Anthropic wire body and its
//!   serialization to bytes, the whole cost up to the bytes on the wire;
//! - `render_layers`: tier A, tier B and one nudge rendered from their sources, the per-turn
//!   work of `session::layers::prepare_turn` without the file and git IO.
//!
//! Before criterion runs, one line gives the history's shape and the serialized request size.
//!
//! Run with `cargo bench --bench prompt`. Under `cargo test` (no `--bench` flag) criterion
//! runs each benchmark once, as a smoke test.

use criterion::Criterion;
use std::hint::black_box;
use std::path::PathBuf;
use std::time::Duration;
use tern::config::{ProviderKind, ProviderProfile};
use tern::context::{
    AheadBehind, Branch, CurrentTime, DurableContext, GitContext, GitSnapshot, Head, IdentityFiles,
    PromptFile, ShellInfo, StatusCounts, Upstream, WorkingContext,
};
use tern::domain::{Audience, ContentBlock, Message, Role, ToolCall, ToolResult};
use tern::llm::{ChatRequest, Provider, ToolSpec};
use tern::prompt::{
    self, IndexEntry, MEMORY_OFF, NudgeSources, PromptSize, RequestFrame, SessionPaths,
    StaticSources, SystemSources, TurnNotes,
};
use tern::tools::ToolRegistry;

/// Messages in the benchmark history.
const HISTORY_LEN: usize = 500;
/// Size of the project instruction file in tier A.
const INSTRUCTIONS_BYTES: usize = 4096;
/// Tool output sizes, inclusive.
const RESULT_MIN_BYTES: usize = 200;
const RESULT_MAX_BYTES: usize = 4096;

const AUDIENCE: Audience = Audience::Personal;
const SESSION_ID: &str = "019a6f3e-8c2d-7b41-9e5a-3f0c2d1b4a67";
const PROJECT_DIR: &str = "/home/dev/src/tern";
const MODEL: &str = "claude-sonnet-4-5";
const MAX_OUTPUT_TOKENS: u32 = 32_000;
/// The first turn's start; each later turn starts a few minutes after.
const FIRST_TURN_AT: &str = "2026-03-14T09:26:53Z";

/// A small deterministic generator (64-bit LCG), so every run sees the same history.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }

    /// A value in `low..=high`.
    fn range(&mut self, low: usize, high: usize) -> usize {
        low + (self.next() as usize) % (high - low + 1)
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.range(0, items.len() - 1)]
    }
}

const FILES: &[&str] = &[
    "src/session/actor.rs",
    "src/session/layers.rs",
    "src/prompt/request.rs",
    "src/llm/anthropic.rs",
    "src/llm/client.rs",
    "src/store/db.rs",
    "src/tools/grep.rs",
    "src/context/git.rs",
    "src/config/load.rs",
    "tests/session_replay.rs",
];

const PATTERNS: &[&str] = &[
    "fn build_request",
    "cache_breakpoints",
    "JournalEvent::NudgeAdded",
    "impl Provider for",
    "max_output_tokens",
    "TODO|FIXME",
    "pair_tool_calls",
    "struct SessionState",
];

const REQUESTS: &[&str] = &[
    "The resume path replays the journal twice when the snapshot is stale. Can you find out \
     why and fix it without changing the journal format?",
    "Add a test that a tool call without a result is answered before the next user text.",
    "Why does the Anthropic request lose its cache hit after a compaction? Look at where the \
     breakpoints land.",
    "Rename `max_output_tokens` in the profile to `max_reply_tokens` everywhere, config file \
     key included, and keep the old key working with a deprecation warning.",
    "grep for every place we build a ChatRequest by hand and tell me which ones skip \
     pair_tool_calls.",
    "ok, go ahead",
];

const SOURCE_LINES: &[&str] = &[
    "    let messages = pair_tool_calls(messages);",
    "    let cache_breakpoints = history_breakpoints(&messages);",
    "/// The last message of the run before the final one, and the final message.",
    "fn history_breakpoints(messages: &[Message]) -> Vec<usize> {",
    "    for event in prepare_turn(deps, dirs, &temp_dir, &state, audience, time).await {",
    "        state.apply(&event);",
    "    }",
    "    match turns.last_mut() {",
    "        Some(turn) if turn.role == message.role => turn.blocks.extend(blocks),",
    "#[derive(Debug, Clone, PartialEq, serde::Serialize)]",
    "pub struct ToolSpec {",
    "}",
    "",
    "        let tools = prompt::tool_index(&deps.tools, audience);",
    "    let frame = RequestFrame { model: &route.model, cache_key: state.id.as_str() };",
];

/// About `bytes` of tool output: numbered source lines (`file_read`) or `path:line:` matches
/// (`grep`).
fn tool_output(rng: &mut Lcg, tool: &str, bytes: usize) -> String {
    let mut out = String::with_capacity(bytes + 128);
    let mut line_no = rng.range(1, 400);
    while out.len() < bytes {
        let line = rng.pick(SOURCE_LINES);
        if tool == "grep" {
            out.push_str(&format!("{}:{line_no}:{line}\n", rng.pick(FILES)));
            line_no += rng.range(1, 90);
        } else {
            out.push_str(&format!("{line_no:>6}\t{line}\n"));
            line_no += 1;
        }
    }
    out.truncate(bytes); // ASCII only, so any length is a char boundary
    out
}

/// An Anthropic-style tool call id.
fn call_id(rng: &mut Lcg) -> String {
    const ALPHABET: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    let mut id = String::from("toolu_01");
    for _ in 0..22 {
        id.push(ALPHABET[rng.range(0, ALPHABET.len() - 1)] as char);
    }
    id
}

/// One round of tool use: an assistant message with one or two calls (sometimes after a line
/// of text) and the user message answering them.
fn tool_round(rng: &mut Lcg) -> [Message; 2] {
    let mut calls = Vec::new();
    let mut results = Vec::new();
    if rng.range(0, 2) == 0 {
        calls.push(ContentBlock::Text {
            text: "Let me look at how that is wired before changing anything.".into(),
        });
    }
    for _ in 0..rng.range(1, 2) {
        let id = call_id(rng);
        let (name, input) = if rng.range(0, 1) == 0 {
            let offset = rng.range(1, 300);
            let input = serde_json::json!({
                "path": rng.pick(FILES),
                "offset": offset,
                "limit": rng.range(40, 200),
            });
            ("file_read", input)
        } else {
            let input = serde_json::json!({
                "pattern": rng.pick(PATTERNS),
                "path": "src",
                "glob": "*.rs",
                "context": rng.range(0, 3),
            });
            ("grep", input)
        };
        let bytes = rng.range(RESULT_MIN_BYTES, RESULT_MAX_BYTES);
        results.push(ContentBlock::ToolResult(ToolResult::ok(
            id.clone(),
            tool_output(rng, name, bytes),
        )));
        calls.push(ContentBlock::ToolUse(ToolCall {
            id,
            name: name.into(),
            input,
        }));
    }
    [
        Message {
            role: Role::Assistant,
            content: calls,
        },
        Message {
            role: Role::User,
            content: results,
        },
    ]
}

/// A final reply of a few hundred bytes.
fn reply(rng: &mut Lcg) -> Message {
    let sentence = "The breakpoint moved because the nudge is merged into the user turn before \
                    the tool results are sorted to its front, so the cached prefix ends one \
                    block earlier than the previous request's. ";
    let mut text = String::from("Done. ");
    text.push_str(&sentence.repeat(rng.range(1, 4)));
    text.push_str("Tests pass (`cargo test prompt::`).");
    Message::assistant_text(text)
}

/// The git half of the working context, as a clean-ish feature branch reports it.
fn git_snapshot() -> GitContext {
    GitContext::Repo(GitSnapshot {
        worktree: PROJECT_DIR.into(),
        common_dir: format!("{PROJECT_DIR}/.git").into(),
        branch: Branch::Named("feature/prompt-cache".into()),
        head: Head::Commit {
            short_id: "3f9c2e1".into(),
            subject: "Keep the nudge out of the cached prefix".into(),
        },
        upstream: Some(Upstream {
            name: "origin/feature/prompt-cache".into(),
            ahead_behind: Some(AheadBehind {
                ahead: 2,
                behind: 0,
            }),
        }),
        counts: StatusCounts {
            staged: 1,
            modified: 3,
            untracked: 1,
            conflicted: 0,
        },
    })
}

/// The working context of a turn, without reading git or the shell from this machine.
fn working_context(recent: &[&str]) -> WorkingContext {
    WorkingContext::with_git(
        DurableContext {
            project_dir: PROJECT_DIR.into(),
            cwd: PROJECT_DIR.into(),
            recent_files: recent
                .iter()
                .map(|file| PathBuf::from(PROJECT_DIR).join(file))
                .collect(),
        },
        Some(ShellInfo {
            platform: "linux x86_64".into(),
            executable: "/usr/bin/bash".into(),
            grammar: "bash".into(),
        }),
        git_snapshot(),
    )
}

/// The nudge of turn `turn`: its time and the files touched so far.
fn turn_nudge(turn: usize) -> String {
    let start: jiff::Timestamp = FIRST_TURN_AT.parse().expect("timestamp");
    let at = start + jiff::SignedDuration::from_secs(turn as i64 * 217);
    let time = CurrentTime::at(at, jiff::tz::TimeZone::UTC);
    let recent = &FILES[..(turn + 1).min(FILES.len())];
    prompt::nudge(
        AUDIENCE,
        NudgeSources {
            time: &time,
            working: Some(&working_context(recent)),
            notes: &TurnNotes::default(),
            size: PromptSize::Full,
        },
    )
    .expect("the time is always there")
}

/// A history of exactly `len` messages: finished turns of nudge, request, one to five tool
/// rounds and a reply, then a turn in progress that ends on a user message.
fn history(len: usize) -> Vec<Message> {
    assert!(len >= 2, "a turn in progress needs a nudge and a request");
    let mut rng = Lcg(0x7465_726e);
    let mut messages = Vec::with_capacity(len);
    let mut turn = 0;
    loop {
        let rounds = rng.range(1, 5);
        // nudge, request, the rounds, reply; leave at least two for the turn in progress.
        let size = 2 + 2 * rounds + 1;
        if messages.len() + size + 2 > len {
            break;
        }
        messages.push(Message::user_text(turn_nudge(turn)));
        messages.push(Message::user_text(rng.pick(REQUESTS)));
        for _ in 0..rounds {
            messages.extend(tool_round(&mut rng));
        }
        messages.push(reply(&mut rng));
        turn += 1;
    }
    // The turn in progress: the model has answered some rounds and is about to be called again.
    messages.push(Message::user_text(turn_nudge(turn)));
    messages.push(Message::user_text(rng.pick(REQUESTS)));
    while len - messages.len() >= 2 {
        messages.extend(tool_round(&mut rng));
    }
    if messages.len() < len {
        // A message the person sent while the tools ran; it joins the results' turn.
        messages.push(Message::user_text(
            "also keep the old behaviour behind a flag",
        ));
    }
    assert_eq!(messages.len(), len);
    messages
}

/// About `bytes` of project instructions, as an AGENTS.md holds them.
fn instructions(bytes: usize) -> PromptFile {
    let section = "## Conventions\n\n\
                   - Run `cargo fmt` and `cargo clippy --all-targets -- -D warnings` before \
                   calling a change done.\n\
                   - Tests live next to the code in `mod tests`; integration tests in `tests/` \
                   drive the binary with assert_cmd.\n\
                   - Never block the session actor: IO goes through `spawn_blocking` or async \
                   APIs, with a budget.\n\
                   - Errors name the file, line and key the user has to change.\n\
                   - The journal format is append-only; add event variants, never change \
                   existing ones.\n\n";
    let mut text = String::from("# Working on tern\n\n");
    while text.len() < bytes {
        text.push_str(section);
    }
    text.truncate(bytes);
    PromptFile {
        file: "AGENTS.md".into(),
        text,
        cut_from: None,
    }
}

fn session_paths() -> SessionPaths {
    let session_dir = PathBuf::from(format!("/home/dev/.local/share/tern/sessions/{SESSION_ID}"));
    SessionPaths {
        temp_dir: format!("/tmp/tern-{SESSION_ID}").into(),
        artifact_dir: session_dir.join("artifacts"),
        worktree_dir: session_dir.join("worktrees"),
        log_path: session_dir.join("logs/session.log"),
        session_dir,
    }
}

fn anthropic() -> std::sync::Arc<dyn Provider> {
    tern::llm::provider_for(&ProviderProfile {
        name: "anthropic".into(),
        kind: ProviderKind::Anthropic,
        base_url: "https://api.anthropic.com".into(),
        api_key_env: Some("ANTHROPIC_API_KEY".into()),
        api_key: None,
        default_model: MODEL.into(),
        context_window: 200_000,
        max_output_tokens: MAX_OUTPUT_TOKENS,
        written: Default::default(),
        images: false,
    })
}

/// Everything the benchmarks read, built once.
struct Inputs {
    identity: IdentityFiles,
    instructions: PromptFile,
    registry: ToolRegistry,
    paths: SessionPaths,
    working: WorkingContext,
    time: CurrentTime,
    tier_a: String,
    tier_b: String,
    tools: Vec<ToolSpec>,
    history: Vec<Message>,
}

impl Inputs {
    fn new() -> Self {
        let identity = IdentityFiles::default();
        let instructions = instructions(INSTRUCTIONS_BYTES);
        let registry = ToolRegistry::builtin();
        let paths = session_paths();
        let tier_a = prompt::system_prompt(
            AUDIENCE,
            SystemSources {
                identity: &identity,
                instructions: Some(&instructions),
                size: PromptSize::Full,
            },
        );
        let index = prompt::tool_index(&registry, AUDIENCE);
        let tier_b = static_context(&index, &paths);
        let tools = prompt::tool_specs(&registry, AUDIENCE, PromptSize::Full);
        let start: jiff::Timestamp = FIRST_TURN_AT.parse().expect("timestamp");
        Self {
            identity,
            instructions,
            paths,
            working: working_context(&FILES[..4]),
            time: CurrentTime::at(start, jiff::tz::TimeZone::UTC),
            tier_a,
            tier_b,
            tools,
            history: history(HISTORY_LEN),
            registry,
        }
    }

    /// What `session::layers::request` does for one model call.
    fn assemble(&self) -> ChatRequest {
        prompt::build_request(
            vec![self.tier_a.clone(), self.tier_b.clone()],
            &self.history,
            self.tools.clone(),
            &RequestFrame {
                model: MODEL,
                max_output_tokens: MAX_OUTPUT_TOKENS,
                cache_key: SESSION_ID,
            },
        )
    }

    /// Tier A, tier B and a nudge rendered from their sources.
    fn render_layers(&self) -> (String, String, Option<String>) {
        let tier_a = prompt::system_prompt(
            AUDIENCE,
            SystemSources {
                identity: &self.identity,
                instructions: Some(&self.instructions),
                size: PromptSize::Full,
            },
        );
        let index = prompt::tool_index(&self.registry, AUDIENCE);
        let tier_b = static_context(&index, &self.paths);
        let nudge = prompt::nudge(
            AUDIENCE,
            NudgeSources {
                time: &self.time,
                working: Some(&self.working),
                notes: &TurnNotes::default(),
                size: PromptSize::Full,
            },
        );
        (tier_a, tier_b, nudge)
    }
}

fn static_context(tools: &[IndexEntry], paths: &SessionPaths) -> String {
    prompt::static_context(
        AUDIENCE,
        StaticSources {
            session_id: SESSION_ID,
            tools,
            skills: &[],
            memory: MEMORY_OFF,
            paths,
            size: PromptSize::Full,
            repo_map: None,
        },
    )
}

/// Serializes the Anthropic wire body of `request`.
fn encode(provider: &dyn Provider, request: &ChatRequest) -> Vec<u8> {
    serde_json::to_vec(&provider.wire_body(request)).expect("a JSON value serializes")
}

/// One line on what the benchmarks work on.
fn describe(inputs: &Inputs, provider: &dyn Provider) {
    let request = inputs.assemble();
    let body = encode(provider, &request);
    let blocks = |pick: fn(&ContentBlock) -> bool| {
        inputs
            .history
            .iter()
            .flat_map(|m| &m.content)
            .filter(|b| pick(b))
            .count()
    };
    let result_bytes: usize = inputs
        .history
        .iter()
        .flat_map(Message::tool_results)
        .map(|r| r.content.len())
        .sum();
    println!(
        "prompt/inputs: {} messages ({} tool calls, {} results of {:.0} KiB in all), tier A {} B, \
         tier B {} B, {} tools; Anthropic request body {} bytes ({:.2} MiB)",
        inputs.history.len(),
        blocks(|b| matches!(b, ContentBlock::ToolUse(_))),
        blocks(|b| matches!(b, ContentBlock::ToolResult(_))),
        result_bytes as f64 / 1024.0,
        inputs.tier_a.len(),
        inputs.tier_b.len(),
        inputs.tools.len(),
        body.len(),
        body.len() as f64 / (1024.0 * 1024.0),
    );
}

fn criterion_group(c: &mut Criterion, inputs: &Inputs, provider: &dyn Provider) {
    let mut group = c.benchmark_group("prompt");
    group
        .warm_up_time(Duration::from_secs(2))
        .measurement_time(Duration::from_secs(8))
        .sample_size(60);
    group.bench_function("assemble_500", |b| b.iter(|| black_box(inputs.assemble())));
    group.bench_function("assemble_and_encode_anthropic_500", |b| {
        b.iter(|| {
            let request = inputs.assemble();
            black_box(encode(provider, black_box(&request)))
        })
    });
    group.bench_function("render_layers", |b| {
        b.iter(|| black_box(inputs.render_layers()))
    });
    group.finish();
}

fn main() {
    let inputs = Inputs::new();
    let provider = anthropic();
    describe(&inputs, provider.as_ref());
    let mut criterion = Criterion::default().configure_from_args();
    criterion_group(&mut criterion, &inputs, provider.as_ref());
    criterion.final_summary();
}
