//! Rendering a typical assistant reply as markdown: ~200 lines of prose, lists, tables and two
//! highlighted code blocks (Rust, Python) at width 100.
//!
//! "cold" is the first render in the process, timed by hand since it happens once: syntect's
//! syntax and theme sets are decoded and the Rust and Python patterns compiled, and nothing is
//! memoised yet. It is timed twice, in two child processes of this benchmark: once as it is,
//! once after `highlight::warm_up` (as the app does for the likely languages when a turn starts). "warm" renders the same reply again, its code blocks coming from
//! the highlight memo as they do on every redraw; "warm, fresh code" changes the first line of
//! each code block every iteration, so both are highlighted from scratch; "streaming" renders
//! the reply as it grows, 16 bytes more each time, the cost of one tick while a reply arrives.

use std::hint::black_box;
use std::time::Instant;

use criterion::{Criterion, criterion_group, criterion_main};
use tern::tui::{Theme, highlight, markdown::render_markdown};

const REPLY: &str = include_str!("../src/tui/markdown/sample_reply.md");

/// Set in the child processes that time a cold render: `plain` or `warmed`.
const COLD_VAR: &str = "TERN_BENCH_MARKDOWN_COLD";

/// In a child process: one cold render, printed, then exit.
fn cold_child(mode: &str) -> ! {
    let theme = Theme::default();
    let start = Instant::now();
    if mode == "warmed" {
        highlight::warm_up();
    }
    let warm_up = start.elapsed();
    let lines = render_markdown(REPLY, 100, &theme);
    let render = start.elapsed() - warm_up;
    if mode == "warmed" {
        println!(
            "markdown/cold after warm_up: warm_up {:.1} ms, then the first render {:.2} ms",
            ms(warm_up),
            ms(render)
        );
    } else {
        println!(
            "markdown/cold: first render {:.1} ms ({} lines in, {} lines out)",
            ms(render),
            REPLY.lines().count(),
            lines.len()
        );
    }
    std::process::exit(0);
}

fn ms(d: std::time::Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn bench(c: &mut Criterion) {
    if let Ok(mode) = std::env::var(COLD_VAR) {
        cold_child(&mode);
    }
    for mode in ["plain", "warmed"] {
        // A fresh process each, since the syntect load and the memo last for the process.
        let child = std::env::current_exe().and_then(|exe| {
            std::process::Command::new(exe)
                .env(COLD_VAR, mode)
                .arg("--bench")
                .output()
        });
        match child {
            Ok(out) => print!("{}", String::from_utf8_lossy(&out.stdout)),
            Err(error) => println!("markdown/cold ({mode}): could not run: {error}"),
        }
    }

    let theme = Theme::default();
    let mut group = c.benchmark_group("markdown");
    group.bench_function("warm", |b| {
        b.iter(|| render_markdown(black_box(REPLY), black_box(100), &theme))
    });
    let mut counter = 0u64;
    group.bench_function("warm, fresh code", |b| {
        b.iter(|| {
            counter += 1;
            // A different comment in each code block defeats the highlight memo.
            let reply = REPLY.replace("impl Store {", &format!("impl Store {{ // {counter}"));
            let reply = reply.replace("import os", &format!("import os  # {counter}"));
            render_markdown(black_box(&reply), black_box(100), &theme)
        })
    });
    group.bench_function("streaming", |b| {
        let cuts: Vec<&str> = (0..REPLY.len())
            .step_by(16)
            .filter(|i| REPLY.is_char_boundary(*i))
            .map(|i| &REPLY[..i])
            .collect();
        let mut next = 0;
        b.iter(|| {
            next = (next + 1) % cuts.len();
            render_markdown(black_box(cuts[next]), black_box(100), &theme)
        })
    });
    group.bench_function("prose only, width 60", |b| {
        let prose: String = REPLY.split("```").step_by(2).collect::<Vec<_>>().join("\n");
        b.iter(|| render_markdown(black_box(&prose), black_box(60), &theme))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
