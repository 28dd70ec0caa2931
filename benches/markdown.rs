//! Rendering a typical assistant reply as markdown: ~200 lines of prose, lists, tables and two
//! highlighted code blocks (Rust, Python) at width 100.
//!
//! "cold" is the very first render in the process, which also decodes syntect's syntax and
//! theme sets; it is measured once, by hand, since criterion can only repeat. "warm" renders
//! the same reply again (highlighted code blocks come from the highlight memo, as they do
//! while a reply streams); "warm, fresh code" changes the code every iteration so that it is
//! highlighted each time, the cost of the block being streamed.

use std::hint::black_box;
use std::time::Instant;

use criterion::{Criterion, criterion_group, criterion_main};
use tern::tui::{Theme, markdown::render_markdown};

const REPLY: &str = include_str!("../src/tui/markdown/sample_reply.md");

fn bench(c: &mut Criterion) {
    let theme = Theme::default();

    let start = Instant::now();
    let lines = render_markdown(REPLY, 100, &theme);
    let cold = start.elapsed();
    println!(
        "markdown/cold (first render, syntect load included): {:.2} ms, {} lines out of {} in",
        cold.as_secs_f64() * 1000.0,
        lines.len(),
        REPLY.lines().count()
    );

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
    group.bench_function("prose only, width 60", |b| {
        let prose: String = REPLY.split("```").step_by(2).collect::<Vec<_>>().join("\n");
        b.iter(|| render_markdown(black_box(&prose), black_box(60), &theme))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
