use super::*;
use crate::tui::transcript::{Cell, CellKind};

fn text_of(lines: &[Line<'_>]) -> Vec<String> {
    lines
        .iter()
        .map(|l| l.spans.iter().map(|s| s.content.as_ref()).collect())
        .collect()
}

/// `text` laid out whole, as the finished reply is drawn.
fn finished(text: &str, width: u16) -> Vec<Line<'static>> {
    let mut cell = Cell::new(CellKind::Assistant {
        text: text.into(),
        streaming: false,
        interrupted: false,
    });
    cell.lines(width, View::default(), &Theme::default())
        .to_vec()
}

/// A reply streamed `chunk` bytes at a time, laid out after each piece at the width
/// `width_at` gives for the text so far.
struct Streamed {
    growing: Growing,
    out: Vec<Line<'static>>,
    /// Pieces after which a line of the paragraph being written was settled.
    settlings: usize,
}

impl Streamed {
    fn new() -> Self {
        Streamed {
            growing: Growing::default(),
            out: Vec::new(),
            settlings: 0,
        }
    }

    fn frame(&mut self, text: &str, width: u16) {
        let before = self.growing.settled;
        let theme = Theme::default();
        self.growing
            .render(text, width, View::default(), &theme, &mut self.out);
        if self.growing.is_inside_block() && self.growing.settled != before {
            self.settlings += 1;
        }
    }
}

/// Streams `text` in pieces of `chunk` bytes; after every piece the lines are exactly those of
/// the text so far laid out whole. Returns how many times a line was settled.
fn check(text: &str, chunk: usize, width_at: impl Fn(usize) -> u16) -> usize {
    let mut streamed = Streamed::new();
    let mut end = 0;
    while end < text.len() {
        end = (end + chunk).min(text.len());
        while !text.is_char_boundary(end) {
            end += 1;
        }
        let width = width_at(end);
        streamed.frame(&text[..end], width);
        let whole = finished(&text[..end], width);
        assert_eq!(
            streamed.out,
            whole,
            "after {end} bytes at width {width}:\n{}",
            text_of(&streamed.out).join("\n")
        );
    }
    streamed.settlings
}

fn words(n: usize, each: impl Fn(usize) -> String) -> String {
    (0..n).map(each).collect::<Vec<_>>().join(" ")
}

#[test]
fn a_long_paragraph_streamed_in_pieces_is_laid_out_as_it_would_be_at_once() {
    let plain = words(600, |n| format!("word{n}"));
    let settled = check(&plain, 37, |_| 60);
    assert!(settled > 10, "lines were settled only {settled} times");
    // One byte at a time, and at a width too narrow for a bullet and a word.
    check(&words(150, |n| format!("w{n}")), 1, |_| 60);
    check(&words(150, |n| format!("w{n}")), 5, |_| 5);
    // Wide characters, which break a line without a space, and a word longer than a line.
    let wide = words(300, |n| match n % 7 {
        0 => "漢字かな交じり文".to_owned(),
        3 => "a".repeat(70 + n % 5),
        4 => format!("混ざる{n}word"),
        _ => format!("word{n}"),
    });
    assert!(check(&wide, 23, |_| 50) > 5);
    // A line of it that wraps at other lengths after the width changed.
    assert!(check(&plain, 41, |end| if end < 2000 { 60 } else { 47 }) > 10);
}

#[test]
fn inline_styles_across_a_settled_line_are_laid_out_as_at_once() {
    let cases = [
        // Emphasis, strikethrough, code spans and links held open over many lines, closed
        // much later.
        format!("*{}* after", words(200, |n| format!("it{n}"))),
        format!(
            "**{}** after {}",
            words(200, |n| format!("b{n}")),
            words(200, |n| format!("w{n}"))
        ),
        format!("~~{}~~ after", words(150, |n| format!("s{n}"))),
        format!(
            "`{}` after {}",
            words(150, |n| format!("c{n}")),
            words(100, |n| format!("w{n}"))
        ),
        format!(
            "[{}](https://example.com/x) after",
            words(150, |n| format!("l{n}"))
        ),
        // Styles that close soon, between plain words, and delimiters that open nothing.
        words(500, |n| match n % 9 {
            0 => format!("**bold{n}**"),
            1 => format!("*it{n}*"),
            2 => format!("`code{n}`"),
            3 => format!("[link{n}](https://e.com/{n})"),
            4 => "snake_case_name".to_owned(),
            5 => "2 * 3".to_owned(),
            6 => "&amp;".to_owned(),
            _ => format!("word{n}"),
        }),
        // An opener that never closes.
        format!("some *{}", words(300, |n| format!("w{n}"))),
        format!("a <span {}", words(300, |n| format!("w{n}"))),
    ];
    let mut settled = 0;
    for text in &cases {
        settled += check(text, 29, |_| 64);
    }
    assert!(settled > 10, "lines were settled only {settled} times");
}

#[test]
fn what_changes_a_paragraph_as_a_whole_has_it_laid_out_again() {
    let many = words(300, |n| format!("word{n}"));
    let cases = [
        // A setext underline makes the whole paragraph a heading.
        format!("{many}\n---\nthen more {many}"),
        format!("{many}\n=\nthen more"),
        // A table's delimiter row under its last line.
        format!("{many}\nx | y\n--|--\n1 | 2\n{many}"),
        // A tab is as wide as the column it starts at leaves.
        format!("{many}\tafter a tab {many}"),
        // Blocks that interrupt it, and line breaks inside it.
        format!("{many}\n- an item {many}\n- another\n\nafter"),
        format!("{many}  \nhard break {many}\\\nand more\n# heading\n{many}"),
        format!("{many}\n```rust\nfn main() {{}}\n```\n{many}"),
        format!("> {many}\n{many}"),
    ];
    for text in &cases {
        check(text, 31, |_| 70);
    }
}

#[test]
fn the_work_per_piece_does_not_grow_with_the_paragraph() {
    // 20,000 words streamed 40 at a time: what each frame lays out (text wrapped for the
    // screen and for finding a line to settle) stays about what a few lines hold.
    let text = words(20_000, |n| format!("word{n}"));
    let mut streamed = Streamed::new();
    let mut most_late = 0;
    let mut most_early = 0;
    let mut last = 0;
    for (piece, end) in text
        .char_indices()
        .filter(|(_, c)| *c == ' ')
        .map(|(at, _)| at)
        .step_by(40)
        .enumerate()
    {
        streamed.frame(&text[..end], 80);
        last = end;
        let laid_out = streamed.growing.laid_out;
        match piece {
            10..100 => most_early = most_early.max(laid_out),
            400.. => most_late = most_late.max(laid_out),
            _ => {}
        }
    }
    assert!(
        most_late <= 4_000,
        "{most_late} bytes laid out in one frame"
    );
    assert!(most_late <= 2 * most_early, "{most_early} then {most_late}");
    assert_eq!(streamed.out, finished(&text[..last], 80));
}

#[test]
fn the_scan_finds_paragraph_ends_outside_code_blocks() {
    let cut = |text: &str| Scan::default().advance(text);
    assert_eq!(cut("a\n\nb"), 3);
    assert_eq!(
        cut("```\na\n\nb"),
        0,
        "a blank line in a code block is not a cut"
    );
    assert_eq!(cut("no blank"), 0);
    // Fed piece by piece as it streams, the scan finds the same ends.
    let text = "one\n\ntwo\n```\nx\n\ny\n```\n\nthree";
    let mut scan = Scan::default();
    for end in 1..=text.len() {
        scan.advance(&text[..end]);
    }
    assert_eq!(scan.cut, cut(text));
    assert_eq!(&text[scan.cut..], "three");
}

#[test]
fn a_long_code_block_streamed_in_pieces_is_laid_out_as_it_would_be_at_once() {
    let items: String = (0..120)
        .map(|n| match n % 10 {
            // Constructs over several lines, inside which the highlighter carries a state.
            0 => format!("/* a comment\n   over lines {n} */\n"),
            1 => format!("fn f{n}() {{\n    let s = \"text\";\n}}\n"),
            2 => format!("let long{n} = \"{}\";\n", "x".repeat(90)),
            3 => format!("let wide{n} = \"漢字かな交じり文です\";\n"),
            4 => "\tlet tabbed = 1;\n".to_owned(),
            5 => "\n".to_owned(),
            _ => format!("let x{n} = {n};\n"),
        })
        .collect();
    let text = format!(
        "Here:\n```rust\n{items}```\nAfter the block, {}",
        words(100, |n| format!("w{n}"))
    );
    let settled = check(&text, 29, |_| 60);
    assert!(settled > 20, "code lines were settled only {settled} times");
    // With no language, and in a block quote, which is not settled.
    check(&format!("```\n{items}"), 23, |_| 60);
    check(
        &format!("> ```\n> {}", items.replace('\n', "\n> ")),
        31,
        |_| 60,
    );
}

#[test]
fn the_work_per_piece_does_not_grow_with_a_code_block() {
    let code: String = (0..6000).map(|n| format!("let x{n} = {n};\n")).collect();
    let text = format!("```rust\n{code}");
    let mut streamed = Streamed::new();
    let mut most_late = 0;
    let mut ends = (1..text.len()).step_by(40);
    for (piece, end) in ends.by_ref().enumerate() {
        streamed.frame(&text[..end], 80);
        if piece >= 400 {
            most_late = most_late.max(streamed.growing.laid_out);
        }
    }
    assert!(
        most_late <= 4_000,
        "{most_late} bytes laid out in one frame"
    );
    streamed.frame(&text, 80);
    assert_eq!(streamed.out, finished(&text, 80));
}

#[test]
fn each_line_of_a_streamed_code_block_is_highlighted_about_once() {
    let lines = 600;
    let code: String = (0..lines).map(|n| format!("let y{n} = {n};\n")).collect();
    let text = format!("```rust\n{code}```\n");
    let mut streamed = Streamed::new();
    // What the memo keeps must not be evicted by another test meanwhile.
    let _memo = crate::tui::highlight::hold_memo();
    let before = crate::tui::highlight::lines_highlighted();
    for end in (1..text.len()).step_by(120).chain([text.len()]) {
        streamed.frame(&text[..end], 80);
    }
    let highlighted = crate::tui::highlight::lines_highlighted() - before;
    eprintln!("{highlighted} lines highlighted for {lines}");
    assert!(
        highlighted <= lines * 3 / 2,
        "{highlighted} lines handed to the highlighter for a block of {lines}"
    );
}

#[test]
fn a_code_line_settles_only_where_the_line_before_it_alone_leaves_the_highlighter_as_all() {
    let theme = Theme::default().syntax_theme;
    let ends = |code: &str, line: &str| ends_as_alone(code, line, "rust", &theme);
    assert!(ends("let a = 1;\nlet b = 2;\n", "let b = 2;\n"));
    // Inside a comment or a string the line alone reads as code.
    assert!(!ends("/* one\n two\n", " two\n"));
    assert!(!ends("let s = \"one\ntwo\n", "two\n"));
    // Text shown plain has no state.
    assert!(ends_as_alone("/* one\n two\n", " two\n", "", &theme));
}
