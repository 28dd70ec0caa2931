//! What a large written file costs the requests after it, measured on the real binary: `tern
//! run --approve edits` against the mock provider, whose model writes a 5 MB file with
//! `file_write` and then answers. Printed: the size of the request before the write and of
//! the one after it (the call and its result in its history), the turn's wall time, and the
//! first request of a second `tern run --continue` in the same session (its history read
//! back from the journal). Then the same with `[session] max_argument_bytes = "1GB"`, where
//! only the compaction before the next call keeps the content out.
//!
//! `cargo bench --bench large_arguments`. `TERN_BIN=/path/to/tern` measures another build.

#[allow(dead_code, unused_imports)]
#[path = "../tests/support/mock_provider/mod.rs"]
mod mock_provider;

use mock_provider::{MockProvider, Reply};
use serde_json::json;
use std::process::Command;
use std::time::Instant;

/// The binary measured: this build's, or `TERN_BIN`.
fn tern_bin() -> String {
    std::env::var("TERN_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_tern").to_owned())
}

fn main() {
    // 5 MiB: 65,536 lines of 80 bytes.
    let content: String = (0..65_536)
        .map(|i| format!("row {i:06}: {}\n", "generated cell ".repeat(4) + "and pad"))
        .map(|line| format!("{line:>80}"))
        .collect();
    measure(&content, None);
    measure(&content, Some("1GB"));
}

/// One session of two `tern run`s: the write, then a question after it.
fn measure(content: &str, max_argument_bytes: Option<&str>) {
    let dir = tempfile::tempdir().expect("temp dir");
    let home = dir.path().join("tern");
    let project = dir.path().join("project");
    std::fs::create_dir_all(&home).expect("home");
    std::fs::create_dir_all(&project).expect("project");
    if let Some(limit) = max_argument_bytes {
        let config = format!("[session]\nmax_argument_bytes = \"{limit}\"\n");
        std::fs::write(home.join("config.toml"), config).expect("config");
    }
    let mock = MockProvider::start_blocking();
    mock.push(Reply::tool_call(
        "file_write",
        json!({"path": "gen/table.txt", "content": content}),
    ));
    mock.push(Reply::text("Written."));
    mock.push(Reply::text("It holds the table."));
    let run = |args: &[&str]| {
        let status = Command::new(tern_bin())
            .args(args)
            .current_dir(&project)
            .env("TERN_HOME", &home)
            .env("ANTHROPIC_API_KEY", "bench-key")
            .env("ANTHROPIC_BASE_URL", mock.base_url())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .expect("tern");
        assert!(status.success(), "tern {args:?} failed");
    };
    let started = Instant::now();
    run(&["run", "--approve", "edits", "write the table"]);
    let wall = started.elapsed();
    run(&["run", "--continue", "what is in it?"]);
    let written = std::fs::read(project.join("gen/table.txt")).expect("the file");
    assert_eq!(written.len(), content.len(), "the whole file was written");

    let sizes: Vec<usize> = mock
        .model_requests()
        .iter()
        .map(|r| r.raw_body.len())
        .collect();
    let kib = |bytes: usize| bytes as f64 / 1024.0;
    let setting = max_argument_bytes.map_or("default (32KiB)".to_owned(), |v| format!("\"{v}\""));
    println!(
        "max_argument_bytes {setting}: a {:.1} MiB file_write",
        kib(content.len()) / 1024.0
    );
    println!(
        "  request before the write {:.1} KiB; after it {:.1} KiB ({:+.1} KiB); the next \
         tern run's first {:.1} KiB ({:+.1} KiB); the write's turn {:.0} ms, whole process",
        kib(sizes[0]),
        kib(sizes[1]),
        kib(sizes[1]) - kib(sizes[0]),
        kib(sizes[2]),
        kib(sizes[2]) - kib(sizes[0]),
        wall.as_secs_f64() * 1000.0
    );
}
