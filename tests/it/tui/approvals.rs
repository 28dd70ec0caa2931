//! The approval box for a call of every built-in tool that can be asked about (and of a tool
//! tern does not know), made the way a session makes it: the tool's check passes, its
//! preview and `approvals::describe` give the summary and the detail. Each is pinned at 80x24,
//! and none shows the call's arguments as JSON.

use super::{app, events, screen, settings, started};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use tern::domain::{ApprovalDetail, ApprovalNeed, ToolCall};
use tern::session::SessionEvent;
use tern::session::approvals::{describe, grant_for};
use tern::tools::{ToolContext, ToolRegistry};
use tokio::time::Instant;

/// Where the temp dir is shown to be, so the snapshots are the same on every run.
const SHOWN_ROOT: &str = "/home/dev";

/// A project (`project/src/main.rs`) and a folder outside it (`outside/notes.txt`).
struct Place {
    _temp: tempfile::TempDir,
    root: PathBuf,
    ctx: ToolContext,
}

impl Place {
    fn new() -> Self {
        let temp = tempfile::tempdir().expect("a temp dir");
        let root = temp.path().canonicalize().expect("a canonical temp dir");
        let project = root.join("project");
        let write = |path: PathBuf, text: &str| {
            std::fs::create_dir_all(path.parent().expect("a parent")).expect("dirs");
            std::fs::write(path, text).expect("a file");
        };
        write(
            project.join("src/main.rs"),
            "fn main() {\n    println!(\"Helo\");\n}\n",
        );
        write(root.join("outside/notes.txt"), "TODO: ship it\n");
        let ctx = crate::support::tool_context(project, root.join("tmp"));
        Self {
            _temp: temp,
            root,
            ctx,
        }
    }

    /// `relative` outside the project, as the model would write it.
    fn outside(&self, relative: &str) -> String {
        self.root
            .join("outside")
            .join(relative)
            .display()
            .to_string()
    }

    /// `text` with the temp dir shown as [`SHOWN_ROOT`].
    fn fixed(&self, text: &str) -> String {
        text.replace(&self.root.display().to_string(), SHOWN_ROOT)
    }

    fn fixed_path(&self, path: &Path) -> PathBuf {
        PathBuf::from(self.fixed(&path.display().to_string()))
    }

    /// The events of a call the session would ask about, as a subscriber receives them.
    async fn asked(&self, tool: &str, input: Value) -> Vec<SessionEvent> {
        let call = ToolCall {
            id: "c1".into(),
            name: tool.into(),
            input,
        };
        let registry = ToolRegistry::builtin();
        let (need, read_only, preview) = match registry.get(tool) {
            Some(known) => {
                let checked = known.check(&call.input, &self.ctx).await;
                assert_eq!(checked, Ok(()), "{tool}: a call that can work");
                let need = known.approval_need(&call.input, &self.ctx);
                let preview = known.preview(&call.input, &self.ctx).await;
                (need, known.is_read_only(), preview)
            }
            // A tool from elsewhere (an MCP server's): nothing to preview it with.
            None => (ApprovalNeed::Exec, false, None),
        };
        assert_ne!(
            need,
            ApprovalNeed::None,
            "{tool}: a call that is asked about"
        );
        let (summary, detail) = describe(&call, read_only, &need, preview);
        let detail = match detail {
            ApprovalDetail::Command { command, cwd } => ApprovalDetail::Command {
                command,
                cwd: self.fixed_path(&cwd),
            },
            ApprovalDetail::Edit { path, diff } => ApprovalDetail::Edit {
                path: self.fixed_path(&path),
                diff: self.fixed(&diff),
            },
            ApprovalDetail::Outside { path, access } => ApprovalDetail::Outside {
                path: self.fixed_path(&path),
                access,
            },
            other => other,
        };
        let input = serde_json::from_str(&self.fixed(&call.input.to_string()))
            .expect("the arguments, shown elsewhere");
        vec![
            SessionEvent::ToolCall {
                id: call.id.clone(),
                name: call.name.clone(),
                input,
            },
            SessionEvent::ApprovalRequested {
                call_id: call.id.clone(),
                tool: call.name.clone(),
                summary: self.fixed(&summary),
                always: grant_for(&call, &need),
                detail,
            },
        ]
    }
}

#[tokio::test]
async fn every_tool_is_put_to_a_person_as_a_summary_never_as_json() {
    let place = Place::new();
    let cases = [
        (
            "shell_execute",
            json!({"command": "cargo test --workspace"}),
        ),
        (
            "file_edit",
            json!({"path": "src/main.rs", "old_string": "Helo", "new_string": "Hello"}),
        ),
        (
            "file_write",
            json!({"path": "notes/todo.md", "content": "- ship it\n- tell the team\n"}),
        ),
        ("set_working_directory", json!({"path": place.outside("")})),
        ("file_read", json!({"path": place.outside("notes.txt")})),
        (
            "glob",
            json!({"pattern": "**/*.txt", "path": place.outside("")}),
        ),
        (
            "grep",
            json!({"pattern": "TODO", "path": place.outside("")}),
        ),
        (
            "file_edit_outside",
            json!({"path": place.outside("notes.txt"), "old_string": "FIXME", "new_string": "DONE"}),
        ),
        (
            "web_fetch",
            json!({"url": "https://example.com/docs", "max_bytes": 4096, "note": "the API\nreference"}),
        ),
    ];
    for (name, input) in cases {
        let tool = name.strip_suffix("_outside").unwrap_or(name);
        let now = Instant::now();
        let mut app = app();
        started(&mut app, "go on", now);
        events(&mut app, &place.asked(tool, input).await, now);
        let shown = screen(&mut app, 80, 24, now);
        assert!(
            !shown.contains("{\"") && !shown.contains("\":"),
            "{name}: JSON on screen:\n{shown}"
        );
        settings().bind(|| {
            insta::assert_snapshot!(format!("tui_approval_box_{name}_80x24"), shown);
        });
    }
}

/// The approval box of a `file_write` of 60,000 lines `generated line N` followed by `tail`,
/// drawn at `size`.
async fn large_write_box(tail: &str, size: (u16, u16)) -> String {
    let place = Place::new();
    let content: String = (1..=60_000)
        .map(|n| format!("generated line {n}{tail}\n"))
        .collect();
    let asked = place
        .asked("file_write", json!({"path": "big.txt", "content": content}))
        .await;
    let now = Instant::now();
    let mut app = app();
    started(&mut app, "go on", now);
    events(&mut app, &asked, now);
    screen(&mut app, size.0, size.1, now)
}

#[tokio::test]
async fn a_large_write_is_put_as_its_counts_its_start_and_its_end() {
    let shown = large_write_box("", (80, 24)).await;
    for part in [
        "Create big.txt (+60,000 -0 lines)",
        "+generated line 1 ",
        "⋮ 59,994 more lines",
        "+generated line 60000",
        "y   yes, once",
    ] {
        assert!(shown.contains(part), "{part:?} is not shown:\n{shown}");
    }
    settings().bind(|| {
        insta::assert_snapshot!("tui_approval_box_large_write_80x24", shown);
    });
}

#[tokio::test]
async fn a_large_write_in_a_narrow_box_counts_lines_of_the_file_not_rows_of_the_screen() {
    // Long lines, each wrapped over several rows of a 50-column box.
    let shown = large_write_box(&format!(" {}", "x".repeat(90)), (50, 30)).await;
    let hidden: usize = shown
        .lines()
        .find_map(|line| {
            let count = line.split("⋮ ").nth(1)?.split(" more").next()?;
            count.replace(',', "").parse().ok()
        })
        .unwrap_or_else(|| panic!("no count of what is hidden:\n{shown}"));
    let starts_shown = |n: &usize| shown.contains(&format!("+generated line {n} "));
    let head_last = (1..100).rev().find(starts_shown);
    let tail_first = (100..=60_000).find(starts_shown);
    let (Some(head_last), Some(tail_first)) = (head_last, tail_first) else {
        panic!("no head or no tail:\n{shown}");
    };
    // The lines between the last one starting at the head and the first one starting at the
    // tail; the one before the tail may show only its last rows, so it may count or not.
    let expected = tail_first - head_last - 1;
    assert!(
        hidden.abs_diff(expected) <= 1,
        "{hidden} counted, {expected} hidden:\n{shown}"
    );
}
