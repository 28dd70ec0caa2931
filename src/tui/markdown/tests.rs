//! Tests of the markdown renderer: each construct at a fixed width, compared as plain text,
//! with styles checked where they carry meaning; and properties over random input.

use ratatui::style::Color;

use super::*;
use crate::tui::color::ColorDepth;

fn plain(lines: &[Line<'_>]) -> String {
    lines
        .iter()
        .map(|l| {
            l.spans
                .iter()
                .map(|s| s.content.as_ref())
                .collect::<String>()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn render(input: &str, width: u16) -> Vec<Line<'static>> {
    render_markdown(input, width, &Theme::default())
}

/// Renders `input` at `width` and compares the text, trailing spaces of padded code lines
/// removed so expectations stay readable.
fn check(input: &str, width: u16, expected: &str) {
    let lines = render(input, width);
    let text: Vec<String> = plain(&lines)
        .lines()
        .map(|l| l.trim_end().to_string())
        .collect();
    assert_eq!(
        text.join("\n"),
        expected.trim_matches('\n'),
        "input:\n{input}"
    );
    for line in &lines {
        assert!(
            line_width(line) <= usize::from(width),
            "{line:?} is wider than {width}"
        );
    }
}

/// The first span whose text contains `needle`.
fn span_with<'a>(lines: &'a [Line<'static>], needle: &str) -> &'a Span<'static> {
    lines
        .iter()
        .flat_map(|l| l.spans.iter())
        .find(|s| s.content.contains(needle))
        .unwrap_or_else(|| panic!("no span contains {needle:?} in {lines:?}"))
}

#[test]
fn paragraphs_are_wrapped_and_separated_by_one_blank_line() {
    check(
        "The first paragraph has a few words.\nIts second line joins it.\n\n\n\nSecond.",
        20,
        "
The first paragraph
has a few words. Its
second line joins
it.

Second.",
    );
    check("line one  \nline two", 40, "line one\nline two");
    check("line one\\\nline two", 40, "line one\nline two");
}

#[test]
fn empty_input_and_tiny_widths() {
    check("", 10, "");
    check("\n\n  \n", 10, "");
    assert!(render("# Heading\n\ntext", 0).is_empty());
    check("ab", 1, "a\nb");
}

#[test]
fn headings_are_styled_per_level_without_marks() {
    let theme = Theme::default();
    let lines = render_markdown(
        "# One\n\n## Two\n\n### Three\n\n#### Four\ntext",
        40,
        &theme,
    );
    assert_eq!(plain(&lines), "One\n\nTwo\n\nThree\n\nFour\n\ntext");
    assert_eq!(
        span_with(&lines, "One").style,
        theme.assistant_text.patch(theme.heading_1)
    );
    assert!(
        span_with(&lines, "One")
            .style
            .add_modifier
            .contains(Modifier::BOLD)
    );
    assert_ne!(
        span_with(&lines, "One").style,
        span_with(&lines, "Two").style
    );
    assert_ne!(
        span_with(&lines, "Two").style,
        span_with(&lines, "Three").style
    );
    assert_ne!(
        span_with(&lines, "Three").style,
        span_with(&lines, "Four").style
    );
    assert_eq!(span_with(&lines, "text").style, theme.assistant_text);
    check("Setext\n======\nbody", 40, "Setext\n\nbody");
}

#[test]
fn inline_styles() {
    let theme = Theme::default();
    let lines = render_markdown(
        "*it* **bold** ~~gone~~ `code` ***both*** **bold `code`**",
        80,
        &theme,
    );
    assert_eq!(plain(&lines), "it bold gone code both bold code");
    let has = |text: &str, m: Modifier| span_with(&lines, text).style.add_modifier.contains(m);
    assert!(has("it", Modifier::ITALIC));
    assert!(has("bold", Modifier::BOLD));
    assert!(has("gone", Modifier::CROSSED_OUT));
    assert!(has("both", Modifier::BOLD) && has("both", Modifier::ITALIC));
    assert_eq!(span_with(&lines, "code").style.bg, theme.inline_code.bg);
    assert_eq!(span_with(&lines, "code").style.fg, theme.inline_code.fg);
    let bold_code = &lines[0].spans.last().expect("span").style;
    assert!(bold_code.add_modifier.contains(Modifier::BOLD));
    assert_eq!(bold_code.fg, theme.inline_code.fg);
}

#[test]
fn links_show_their_url_when_it_differs() {
    check(
        "See [the docs](https://docs.rs/x) and <https://a.example> or [https://b.example](https://b.example/).",
        80,
        "See the docs (https://docs.rs/x) and https://a.example or https://b.example.",
    );
    check("Mail <me@example.com>.", 80, "Mail me@example.com.");
    check(
        "[ref][r]\n\n[r]: https://r.example",
        80,
        "ref (https://r.example)",
    );
    let theme = Theme::default();
    let lines = render_markdown("[text](https://u.example)", 80, &theme);
    assert!(
        span_with(&lines, "text")
            .style
            .add_modifier
            .contains(Modifier::UNDERLINED)
    );
    assert_eq!(
        span_with(&lines, "(https://u.example)").style.fg,
        theme.link_url.fg
    );
    check("![a cat](cat.png)", 80, "[image: a cat] (cat.png)");
}

#[test]
fn unordered_lists_nest_and_indent_wrapped_lines() {
    check(
        "- one\n- two words that wrap\n  - nested item here\n    - deeper\n- three",
        16,
        "
• one
• two words that
  wrap
  ◦ nested item
    here
    ▪ deeper
• three",
    );
}

#[test]
fn ordered_lists_keep_their_numbers() {
    check(
        "3. three\n4. four\n5. five",
        40,
        "3. three\n4. four\n5. five",
    );
    check(
        "1. first item wraps here\n2. second",
        12,
        "1. first\n   item\n   wraps\n   here\n2. second",
    );
    check("1. a\n   - b\n2. c", 40, "1. a\n   • b\n2. c");
}

#[test]
fn loose_lists_have_blank_lines_between_items() {
    check("- a\n\n- b\n\n  more b", 40, "• a\n\n• b\n\n  more b");
}

#[test]
fn lists_are_set_off_from_surrounding_blocks() {
    check(
        "# Steps\n- a\n- b\n\nafter",
        40,
        "Steps\n\n• a\n• b\n\nafter",
    );
    check("text\n- a\n- b", 40, "text\n\n• a\n• b");
}

#[test]
fn task_lists() {
    check(
        "- [x] done\n- [ ] todo that wraps",
        12,
        "[x] done\n[ ] todo\n    that\n    wraps",
    );
    let theme = Theme::default();
    let lines = render_markdown("- [x] done", 40, &theme);
    assert_eq!(span_with(&lines, "[x]").style, theme.list_marker);
}

#[test]
fn empty_list_item_still_shows_its_marker() {
    check("- a\n-", 40, "• a\n•");
}

#[test]
fn block_quotes_have_a_bar_on_every_line() {
    check(
        "> quoted words that wrap\n>\n> second paragraph\n\nafter",
        14,
        "
│ quoted words
│ that wrap
│
│ second
│ paragraph

after",
    );
    check(
        "> outer\n>\n> > inner\n>\n> outer again",
        40,
        "│ outer\n│\n│ │ inner\n│\n│ outer again",
    );
    check("> - a\n> - b", 40, "│ • a\n│ • b");
    let theme = Theme::default();
    let lines = render_markdown("> quoted", 40, &theme);
    assert_eq!(lines[0].spans[0].style, theme.block_quote);
    assert!(
        span_with(&lines, "quoted")
            .style
            .add_modifier
            .contains(Modifier::ITALIC)
    );
}

#[test]
fn horizontal_rules_span_the_width() {
    check("a\n\n---\n\nb", 10, "a\n\n──────────\n\nb");
    check("> ***", 6, "│ ────");
}

#[test]
fn tables_have_borders_and_a_bold_header() {
    let input = "| Name | Size |\n|------|-----:|\n| a.rs | 10 |\n| long_file_name.rs | 2048 |";
    check(
        input,
        40,
        "
┌───────────────────┬──────┐
│ Name              │ Size │
├───────────────────┼──────┤
│ a.rs              │   10 │
│ long_file_name.rs │ 2048 │
└───────────────────┴──────┘",
    );
    check(
        input,
        20,
        "
┌───────────┬──────┐
│ Name      │ Size │
├───────────┼──────┤
│ a.rs      │   10 │
│ long_file │ 2048 │
│ _name.rs  │      │
└───────────┴──────┘",
    );
    let theme = Theme::default();
    let lines = render_markdown(input, 40, &theme);
    assert!(
        span_with(&lines, "Name")
            .style
            .add_modifier
            .contains(Modifier::BOLD)
    );
    assert!(
        !span_with(&lines, "a.rs")
            .style
            .add_modifier
            .contains(Modifier::BOLD)
    );
    assert_eq!(span_with(&lines, "┌").style, theme.table_border);
}

#[test]
fn table_columns_are_as_wide_as_their_widest_character() {
    // Columns of one cell each held a wide character: every row came out three cells wider
    // than the width. A column of wide characters squeezed to an odd width leaves a cell
    // blank rather than cutting one.
    let input = "| 日 | 日 | 日 |\n|---|---|---|\n| 日本日本日本 | 日 | 日 |";
    check(
        input,
        21,
        "
┌─────────┬────┬────┐
│ 日      │ 日 │ 日 │
├─────────┼────┼────┤
│ 日本日  │ 日 │ 日 │
│ 本日本  │    │    │
└─────────┴────┴────┘",
    );
}

#[test]
fn a_table_wider_than_the_screen_is_clipped_with_a_marker() {
    let input = "| 日本 | 日本 | 日本 |\n|---|---|---|\n| 日本 | 日本 | 日本 |";
    check(
        input,
        16,
        "
┌──────┬──────┬→
│ 日本 │ 日本 │→
├──────┼──────┼→
│ 日本 │ 日本 │→
└──────┴──────┴→",
    );
    // A wide character the edge cuts leaves its cell blank before the marker.
    check(
        input,
        13,
        "
┌──────┬────→
│ 日本 │ 日 →
├──────┼────→
│ 日本 │ 日 →
└──────┴────→",
    );
    // Narrower than a clipped grid can say anything in, the rows are shown as text.
    check(input, 7, "日本 │\n日本 │\n日本\n日本 │\n日本 │\n日本");
}

#[test]
fn graphemes_wider_than_two_cells_are_cut_to_the_width() {
    // A wide letter with a spacing mark is one grapheme of three cells.
    check("- 𠀀\u{1c24}", 4, "• 𠀀\n  \u{1c24}");
    check("> 𠀀\u{1c24}", 5, "│ 𠀀\u{1c24}");
}

#[test]
fn table_cells_keep_inline_styles() {
    let theme = Theme::default();
    let lines = render_markdown("| a |\n|---|\n| `x` **y** |", 40, &theme);
    assert_eq!(span_with(&lines, "x").style.fg, theme.inline_code.fg);
    assert!(
        span_with(&lines, "y")
            .style
            .add_modifier
            .contains(Modifier::BOLD)
    );
}

#[test]
fn code_blocks_are_highlighted_cut_and_padded() {
    let theme = Theme::default();
    let input = "```rust\nfn main() {\n    let greeting = \"hello, world\";\n}\n```";
    let lines = render_markdown(input, 24, &theme);
    assert_eq!(
        plain(&lines).lines().map(str::trim_end).collect::<Vec<_>>(),
        vec![
            "fn main() {",
            "    let greeting = \"hell",
            "↪ o, world\";",
            "}"
        ]
    );
    // Every line is padded to the width in the code background.
    for line in &lines {
        assert_eq!(line_width(line), 24);
        assert!(line.spans.iter().all(|s| s.style.bg == theme.code_block.bg));
    }
    let colours: std::collections::HashSet<_> = lines
        .iter()
        .flat_map(|l| l.spans.iter().map(|s| s.style.fg))
        .collect();
    assert!(
        colours.len() >= 3,
        "highlighted code has several colours: {colours:?}"
    );
}

#[test]
fn unknown_language_and_indented_code_are_plain() {
    let theme = Theme::default();
    for input in ["```klingon\nQapla' batlh\n```", "    Qapla' batlh"] {
        let lines = render_markdown(input, 20, &theme);
        assert_eq!(plain(&lines).trim_end(), "Qapla' batlh");
        assert!(
            lines[0].spans.iter().all(|s| s.style == theme.code_block),
            "{lines:?}"
        );
    }
    check(
        "```\n  spaced   out\n\ttab\n```",
        40,
        "  spaced   out\n    tab",
    );
}

#[test]
fn fence_info_attributes_are_ignored() {
    assert_eq!(fence_language("rust,no_run"), "rust");
    assert_eq!(fence_language(" python {linenos=true}"), "python");
    assert_eq!(fence_language("{.rust}"), "");
    assert_eq!(fence_language(".rs"), "rs");
    let theme = Theme::default();
    let lines = render_markdown("```rust,ignore\nlet x = 1;\n```", 40, &theme);
    assert!(
        lines[0]
            .spans
            .iter()
            .any(|s| s.style.fg != theme.code_block.fg)
    );
}

#[test]
fn code_in_lists_and_quotes_keeps_the_prefix() {
    check(
        "- item\n\n  ```\n  code\n  ```\n- next",
        20,
        "• item\n\n  code\n\n• next",
    );
    check(
        "- item\n  ```\n  code\n  ```\n- next",
        20,
        "• item\n  code\n• next",
    );
    check("> ```\n> quoted code\n> ```", 20, "│ quoted code");
}

#[test]
fn streaming_an_unclosed_fence_renders_code_so_far() {
    let theme = Theme::default();
    check(
        "Here:\n\n```python\ndef f(x):\n    return",
        30,
        "Here:\n\ndef f(x):\n    return",
    );
    let lines = render_markdown("Here:\n\n```python\ndef f(x):", 30, &theme);
    assert_eq!(lines[2].spans[0].style.bg, theme.code_block.bg);
    // A fence just opened is one empty code line.
    let lines = render_markdown("Here:\n\n```python\n", 30, &theme);
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[2].spans[0].style, theme.code_block);
}

#[test]
fn streaming_a_half_written_table() {
    check(
        "| a | b |\n|---|---|\n| 1 |",
        40,
        "
┌───┬───┐
│ a │ b │
├───┼───┤
│ 1 │   │
└───┴───┘",
    );
    // Before its delimiter row is complete, a table is still text.
    check("| a | b |\n|--", 40, "| a | b | |--");
}

#[test]
fn html_is_shown_as_dim_text() {
    let theme = Theme::default();
    let lines = render_markdown("<div>\nhi\n</div>\n\nafter", 40, &theme);
    assert_eq!(plain(&lines), "<div>\nhi\n</div>\n\nafter");
    assert_eq!(lines[0].spans[0].style, theme.dim);
    check("one<br>two", 40, "one\ntwo");
}

#[test]
fn colours_follow_the_theme_depth() {
    let theme = Theme::default().for_depth(ColorDepth::Ansi16);
    let lines = render_markdown("```rust\nfn main() {}\n```\n\n# H", 40, &theme);
    for span in lines.iter().flat_map(|l| l.spans.iter()) {
        for colour in [span.style.fg, span.style.bg].into_iter().flatten() {
            assert!(
                !matches!(colour, Color::Rgb(..) | Color::Indexed(_)),
                "{span:?}"
            );
        }
    }
    let none = Theme::default().for_depth(ColorDepth::NoColor);
    let lines = render_markdown("# Heading\n\n```rust\nfn main() {}\n```", 40, &none);
    assert!(
        lines
            .iter()
            .flat_map(|l| l.spans.iter())
            .all(|s| s.style.fg.is_none())
    );
    assert!(
        span_with(&lines, "Heading")
            .style
            .add_modifier
            .contains(Modifier::BOLD)
    );
}

#[test]
fn without_colour_code_keeps_its_backticks_and_blocks_are_indented() {
    let none = Theme::default().for_depth(ColorDepth::NoColor);
    let lines = render_markdown("Run `cargo test` now.\n\n```sh\ncargo test\n```", 40, &none);
    assert_eq!(plain(&lines), "Run `cargo test` now.\n\n  cargo test");
    // With colour, neither.
    check(
        "Run `cargo test` now.\n\n```sh\ncargo test\n```",
        40,
        "Run cargo test now.\n\ncargo test",
    );
}

#[test]
fn a_whole_reply() {
    let reply = "\
## Plan

I'll change **two** files:

1. `src/lib.rs`: add the module
2. `src/tui/mod.rs`: export it

| File | Lines |
|------|------:|
| lib.rs | 1 |

```rust
pub mod tui;
```

> Note: nothing is wired in yet.";
    let text: Vec<String> = plain(&render(reply, 40))
        .lines()
        .map(|l| l.trim_end().to_string())
        .collect();
    insta::assert_snapshot!(text.join("\n"), @r"
    Plan

    I'll change two files:

    1. src/lib.rs: add the module
    2. src/tui/mod.rs: export it

    ┌────────┬───────┐
    │ File   │ Lines │
    ├────────┼───────┤
    │ lib.rs │     1 │
    └────────┴───────┘

    pub mod tui;

    │ Note: nothing is wired in yet.
    ");
}

/// Every prefix of a document, as a stream delivers it, renders within the width.
#[test]
fn every_prefix_of_a_streamed_reply_renders() {
    let reply = include_str!("sample_reply.md");
    // Highlighting is syntect's business and slow in a debug build; the layout is what this
    // test is about, so code is rendered plain (an unknown syntax theme).
    let theme = Theme {
        syntax_theme: "none".to_string(),
        ..Theme::default()
    };
    let mut cut = 0;
    while cut <= reply.len() {
        if reply.is_char_boundary(cut) {
            for width in [1, 7, 40] {
                for line in render_markdown(&reply[..cut], width, &theme) {
                    assert!(
                        line_width(&line) <= usize::from(width) + 1,
                        "at {cut}: {line:?}"
                    );
                }
            }
        }
        // Every 37th byte: a few hundred cuts, landing all over the syntax, in a second or two
        // of a debug build.
        cut += 37;
    }
}

mod properties {
    use proptest::prelude::*;

    use super::*;

    /// Fragments of markdown syntax glued at random, so that the parser meets every
    /// construct half-open, nested and interleaved.
    fn markdown() -> impl Strategy<Value = String> {
        let pieces = prop_oneof![
            "[a-z ]{1,10}",
            Just("\n".to_string()),
            Just("\n\n".to_string()),
            Just("# ".to_string()),
            Just("- ".to_string()),
            Just("1. ".to_string()),
            Just("> ".to_string()),
            Just("```".to_string()),
            Just("```rust\n".to_string()),
            Just("    ".to_string()),
            Just("| a | b |\n|---|---|\n".to_string()),
            Just("|".to_string()),
            Just("*".to_string()),
            Just("**".to_string()),
            Just("~~".to_string()),
            Just("`".to_string()),
            Just("[x](y)".to_string()),
            Just("- [ ] ".to_string()),
            Just("---".to_string()),
            Just("<br>".to_string()),
            Just("日本語".to_string()),
            Just("| 日 | 本 |\n|---|---|\n".to_string()),
            Just("𠀀\u{1c24}".to_string()),
            Just("\u{1100}\u{1100}\u{1100}".to_string()),
            Just("❤\u{7}\u{fe0f}".to_string()),
            Just("\u{17d8}".to_string()),
            Just("\t".to_string()),
            any::<char>().prop_map(String::from),
        ];
        proptest::collection::vec(pieces, 0..40).prop_map(|p| p.concat())
    }

    proptest! {
        // Failures are turned into named unit tests rather than kept in a file, and the seed
        // is fixed so that every run tries the same cases.
        #![proptest_config(crate::testing::fixed_cases())]

        #[test]
        fn never_panics_and_fits(
            input in markdown(),
            // Narrow widths half the time: deep prefixes and table columns leave few cells.
            width in prop_oneof![0u16..12, 0u16..50],
        ) {
            let lines = render(&input, width);
            for line in &lines {
                // A wide character in the one cell a deep prefix leaves is the only overflow.
                prop_assert!(line_width(line) <= usize::from(width) + 1);
            }
        }

        #[test]
        fn arbitrary_text_never_panics(input in any::<String>(), width in 0u16..120) {
            render(&input, width);
        }
    }
}
