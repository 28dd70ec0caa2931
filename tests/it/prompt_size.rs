//! The fixed part of every request, per context window: the tools, tier A, tier B and the
//! turn's first nudge, before any conversation. Counted as tern counts tokens for compaction
//! (four bytes a token, plus framing per message), printed for docs/performance.md
//! (`cargo test --test it prompt_size -- --nocapture`), and held to 30% of a small window, so
//! a 4k model keeps most of its window for the work.

use tern::config::{ProviderKind, ProviderProfile};
use tern::context::{
    AheadBehind, Branch, CurrentTime, DurableContext, GitContext, GitSnapshot, Head, IdentityFiles,
    PromptFile, ShellInfo, StatusCounts, Upstream, WorkingContext,
};
use tern::domain::{Audience, Message};
use tern::llm::provider_for;
use tern::prompt::{
    self, MEMORY_OFF, NudgeSources, PromptSize, RequestFrame, SessionPaths, StaticSources,
    SystemSources, TurnNotes,
};
use tern::session::compaction::{estimate_tokens, prefix_tokens};
use tern::tools::ToolRegistry;

/// A session folder as tern names it: the session id and the key's hash.
const SESSION_DIR: &str = "/home/ada/.local/share/tern/sessions/\
                           0192f7a4-5c3e-7b21-9d4e-3f6a8b2c1d0e-1a2b3c4d";
const SESSION_ID: &str = "0192f7a4-5c3e-7b21-9d4e-3f6a8b2c1d0e";

/// A busy working context: ten recent files and a branch that tracks its upstream.
fn working() -> WorkingContext {
    let project = "/home/ada/src/shop";
    let files = [
        "src/cart.rs",
        "src/cart/totals.rs",
        "src/money.rs",
        "tests/cart_totals.rs",
        "Cargo.toml",
        "src/checkout/mod.rs",
        "src/checkout/tax.rs",
        "README.md",
        "src/lib.rs",
        "src/main.rs",
    ];
    WorkingContext::with_git(
        DurableContext {
            project_dir: project.into(),
            cwd: project.into(),
            recent_files: files
                .iter()
                .map(|f| format!("{project}/{f}").into())
                .collect(),
        },
        Some(ShellInfo {
            platform: "linux x86_64".into(),
            executable: "/usr/bin/bash".into(),
            grammar: "bash".into(),
        }),
        GitContext::Repo(GitSnapshot {
            worktree: project.into(),
            common_dir: format!("{project}/.git").into(),
            branch: Branch::Named("cart-totals".into()),
            head: Head::Commit {
                short_id: "1a2b3c4".into(),
                subject: "Round cart totals to whole cents".into(),
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

/// The fixed part of a request, in estimated tokens, layer by layer.
#[derive(Debug)]
struct Fixed {
    tools: u64,
    tier_a: u64,
    tier_b: u64,
    nudge: u64,
    /// All of it as the turn counts it (the tools and both tiers as the request's overhead,
    /// the nudge as a message).
    total: u64,
    /// The OpenAI-format body of the first request (the fixed part and a one-word input),
    /// bytes / 4: what goes on the wire, JSON and all.
    wire: u64,
}

/// The fixed part of a Personal request (the fullest: the shell is named) for `window`.
fn fixed(window: u64, instructions: Option<&PromptFile>) -> Fixed {
    let size = PromptSize::for_window(window);
    let audience = Audience::Personal;
    let identity = IdentityFiles::default();
    // What a session in this window is offered.
    let registry = match size.is_compact() {
        true => ToolRegistry::builtin().without(&tern::tools::NOT_IN_SMALL_WINDOW),
        false => ToolRegistry::builtin(),
    };
    let tier_a = prompt::system_prompt(
        audience,
        SystemSources {
            identity: &identity,
            instructions,
            size,
        },
    );
    let paths = SessionPaths {
        session_dir: SESSION_DIR.into(),
        temp_dir: format!("/tmp/tern-1000/cli:{SESSION_ID}/p").into(),
        artifact_dir: format!("{SESSION_DIR}/artifacts").into(),
        worktree_dir: format!("{SESSION_DIR}/worktrees").into(),
        log_path: format!("{SESSION_DIR}/logs/session.log").into(),
    };
    let tier_b = prompt::static_context(
        audience,
        StaticSources {
            session_id: SESSION_ID,
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
    let working = working();
    let nudge = prompt::nudge(
        audience,
        NudgeSources {
            time: &time,
            working: Some(&working),
            notes: &TurnNotes::default(),
            size,
        },
    )
    .expect("the time is always there");
    let tools = prompt::tool_specs(&registry, audience, size);
    let nudge = Message::user_text(nudge);
    let request = prompt::build_request(
        vec![tier_a.clone(), tier_b.clone()],
        &[nudge.clone(), Message::user_text("hi")],
        tools.clone(),
        &RequestFrame {
            model: "local",
            max_output_tokens: 1024,
            cache_key: SESSION_ID,
        },
    );
    let provider = provider_for(&ProviderProfile {
        name: "local".into(),
        kind: ProviderKind::OpenAi,
        base_url: "http://127.0.0.1:8080/v1".into(),
        api_key_env: None,
        api_key: None,
        default_model: "local".into(),
        context_window: window,
        max_output_tokens: 1024,
        written: Default::default(),
        images: false,
    });
    let wire = provider.wire_body(&request).to_string().len() as u64 / 4;
    let nudge = estimate_tokens(std::slice::from_ref(&nudge));
    Fixed {
        tools: prefix_tokens([], &tools),
        tier_a: prefix_tokens([tier_a.as_str()], &[]),
        tier_b: prefix_tokens([tier_b.as_str()], &[]),
        nudge,
        total: prefix_tokens([tier_a.as_str(), tier_b.as_str()], &tools) + nudge,
        wire,
    }
}

#[test]
fn the_fixed_prompt_takes_at_most_30_percent_of_a_small_window() {
    // A project's instruction file of 4 KB, cut to a twentieth of a small window.
    let rules = "- Money is integer cents, never floats; round only when displaying.\n";
    let instructions = PromptFile {
        file: "CLAUDE.md".into(),
        text: rules.repeat(4096 / rules.len()),
        cut_from: None,
    };
    println!(
        "window   | tools | tier A | tier B | nudge | fixed | share | wire | with a 4 KB CLAUDE.md"
    );
    for window in [4_096u64, 8_192, 32_768, 200_000] {
        let bare = fixed(window, None);
        let with_rules = fixed(window, Some(&instructions));
        let share = bare.total as f64 / window as f64;
        println!(
            "{window:>8} | {:>5} | {:>6} | {:>6} | {:>5} | {:>5} | {:>4.1}% | {:>4} | {} ({:.1}%)",
            bare.tools,
            bare.tier_a,
            bare.tier_b,
            bare.nudge,
            bare.total,
            share * 100.0,
            bare.wire,
            with_rules.total,
            with_rules.total as f64 / window as f64 * 100.0,
        );
        if window <= 8_192 {
            for (what, fixed) in [("bare", &bare), ("with a CLAUDE.md", &with_rules)] {
                assert!(
                    fixed.total * 10 <= window * 3,
                    "{what}: {fixed:?} is over 30% of a {window}-token window"
                );
            }
            // Even as JSON on the wire, tern's own part stays under 30%.
            assert!(
                bare.wire * 10 <= window * 3,
                "the wire body {bare:?} is over 30% of a {window}-token window"
            );
        }
    }
    // At 4k that is at most 1,228 tokens, the tools being the largest part.
    let at_4k = fixed(4_096, None);
    assert!(at_4k.total <= 1_228, "{at_4k:?}");
    // A large window keeps the whole guidance.
    let full = fixed(200_000, None);
    assert!(full.tools > 2 * at_4k.tools, "{full:?} against {at_4k:?}");
}
