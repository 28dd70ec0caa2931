//! Wrapping: widths, breaks, prefixes, graphemes wider than a cell, and properties over
//! random text.

use ratatui::style::{Color, Modifier};

use super::*;

fn plain(lines: &[Line<'_>]) -> Vec<String> {
    lines
        .iter()
        .map(|l| l.spans.iter().map(|s| s.content.as_ref()).collect())
        .collect()
}

fn check(input: &str, width: u16, expected: &[&str]) {
    let lines = wrap(&[Span::raw(input)], width);
    assert_eq!(plain(&lines), expected, "input {input:?} at width {width}");
}

fn check_prefixed(input: &str, width: u16, first: &str, rest: &str, expected: &[&str]) {
    let lines = wrap_prefixed(
        &[Span::raw(input)],
        width,
        &Line::from(first.to_string()),
        &Line::from(rest.to_string()),
    );
    assert_eq!(plain(&lines), expected, "input {input:?} at width {width}");
}

fn check_hard(input: &str, width: u16, expected: &[&str]) {
    let lines = hard_wrap(
        &[Span::raw(input)],
        width,
        &Line::default(),
        &Line::default(),
    );
    assert_eq!(plain(&lines), expected, "input {input:?} at width {width}");
}

#[test]
fn breaks_at_spaces() {
    check("the quick brown fox", 10, &["the quick", "brown fox"]);
    check("the quick brown fox", 9, &["the quick", "brown fox"]);
    check("the quick brown fox", 8, &["the", "quick", "brown", "fox"]);
    check("the quick brown fox", 80, &["the quick brown fox"]);
    check("a  b", 80, &["a  b"]);
    check("a    b", 3, &["a", "b"]);
}

#[test]
fn long_words_are_cut_only_when_longer_than_a_line() {
    check("abcdefghij", 4, &["abcd", "efgh", "ij"]);
    check(
        "see https://example.com/x",
        10,
        &["see", "https://ex", "ample.com/", "x"],
    );
    check("ab cdefgh", 4, &["ab", "cdef", "gh"]);
}

#[test]
fn empty_and_degenerate_widths() {
    check("", 10, &[""]);
    check("anything", 0, &[]);
    check("ab cd", 1, &["a", "b", "c", "d"]);
    check("   ", 10, &[""]);
}

#[test]
fn newlines_end_lines_and_keep_indentation() {
    check("one\ntwo", 10, &["one", "two"]);
    check("one\n\ntwo\n", 10, &["one", "", "two"]);
    check("one\r\ntwo", 10, &["one", "two"]);
    check("  indented line here", 10, &["  indented", "line here"]);
    check("\tx", 10, &["    x"]);
    check("ab\tx", 10, &["ab  x"]);
}

#[test]
fn control_characters_are_dropped() {
    check("a\u{1b}[31mb\u{7}c", 10, &["a[31mbc"]);
    check("a\rb", 10, &["ab"]);
}

#[test]
fn wide_characters_count_two_cells_and_break_anywhere() {
    check("日本語のテキスト", 6, &["日本語", "のテキ", "スト"]);
    check("日本語のテキスト", 5, &["日本", "語の", "テキ", "スト"]);
    check("ok 🎉🎉 done", 5, &["ok 🎉", "🎉", "done"]);
    // A wide character in a single column cannot fit: it gets a line of its own.
    check("日本", 1, &["日", "本"]);
}

#[test]
fn zero_width_marks_stay_with_their_letter() {
    // "e" + combining acute accent is one cell.
    check("caf\u{65}\u{301} noir", 5, &["cafe\u{301}", "noir"]);
    // A ZWJ family is one grapheme of two cells.
    check(
        "family 👨\u{200d}👩\u{200d}👧 ok",
        9,
        &["family 👨\u{200d}👩\u{200d}👧", "ok"],
    );
    // A joiner that joins nothing is dropped, as are other invisible format characters.
    check("xx\u{200d}漢漢漢", 10, &["xx漢漢漢"]);
    check("a\u{ad}b\u{200e}c\u{feff}", 10, &["abc"]);
    // The zero-width space is a break opportunity without a visible space.
    check("alpha\u{200b}beta", 6, &["alpha", "beta"]);
    // The no-break space is not.
    check("a b\u{a0}c", 3, &["a", "b\u{a0}c"]);
}

#[test]
fn graphemes_wider_than_two_cells_are_cut_between_their_characters() {
    // A wide letter with a spacing mark: one grapheme of three cells.
    let wide = "𠀀\u{1c24}";
    check_hard(wide, 1, &["𠀀", "\u{1c24}"]);
    check(wide, 2, &["𠀀", "\u{1c24}"]);
    // Kept whole where it fits, on a line of its own if need be.
    check_hard(&format!("ab{wide}"), 4, &["ab", wide]);
    check(&format!("ab {wide}"), 5, &["ab", wide]);
    // Its characters are drawn in spans of their own, each measured as drawn.
    let lines = hard_wrap(&[Span::raw(wide)], 3, &Line::default(), &Line::default());
    assert_eq!(lines[0].spans, vec![Span::raw("𠀀"), Span::raw("\u{1c24}")]);
    // Hangul leading jamo make one grapheme however many there are; accents stay with
    // their letter.
    check(
        "\u{1100}\u{1100}\u{1100} ok",
        4,
        &["\u{1100}\u{1100}", "\u{1100}", "ok"],
    );
    check_hard(
        "A\u{301}\u{11302}\u{1134b}",
        2,
        &["A\u{301}\u{11302}", "\u{1134b}"],
    );
    // The Khmer sign beyyal is one character of three cells: a mark where it does not
    // fit.
    check_hard("\u{17d8}", 3, &["\u{17d8}"]);
    check_hard("a\u{17d8}", 2, &["a", "…"]);
    check_prefixed("\u{17d8}", 3, "• ", "  ", &["• …"]);
    assert_eq!(narrowest_width(&[Span::raw("ab")]), 1);
    assert_eq!(narrowest_width(&[Span::raw(format!("a{wide}"))]), 2);
    assert_eq!(narrowest_width(&[]), 0);
}

#[test]
fn graphemes_are_measured_as_drawn() {
    // The bell is dropped, and the selector then makes the heart two cells wide.
    let hearts = "❤\u{7}\u{fe0f}".repeat(3);
    check(&hearts, 4, &["❤\u{fe0f}❤\u{fe0f}", "❤\u{fe0f}"]);
    check_hard(&hearts, 4, &["❤\u{fe0f}❤\u{fe0f}", "❤\u{fe0f}"]);
    // Spans of one style are drawn as one text, whatever their boundaries.
    let split = [
        Span::raw("❤"),
        Span::raw("\u{fe0f}"),
        Span::raw("❤\u{fe0f}"),
    ];
    let lines = wrap(&split, 2);
    assert_eq!(plain(&lines), vec!["❤\u{fe0f}", "❤\u{fe0f}"]);
    // After a tab's spaces a grapheme starts a span of its own, as it stood apart in the
    // text.
    let lines = hard_wrap(&[Span::raw("a\tb")], 8, &Line::default(), &Line::default());
    assert_eq!(
        lines[0].spans,
        vec![Span::raw("a"), Span::raw("   "), Span::raw("b")]
    );
}

#[test]
fn prefixes_first_and_rest() {
    check_prefixed(
        "one two three four",
        10,
        "• ",
        "  ",
        &["• one two", "  three", "  four"],
    );
    check_prefixed("a b", 10, "│ ", "│ ", &["│ a b"]);
    check_prefixed("", 10, "│ ", "│ ", &["│ "]);
    check_prefixed("x\ny", 10, "1. ", "   ", &["1. x", "   y"]);
    // A prefix as wide as the line is cut to leave one cell for the text.
    check_prefixed("ab", 3, "> > > ", "> > > ", &["> a", "> b"]);
    check_prefixed("ab", 1, "> ", "> ", &["a", "b"]);
}

#[test]
fn styles_survive_breaks_and_merge() {
    let bold = Style::new().add_modifier(Modifier::BOLD);
    let red = Style::new().fg(Color::Red);
    let spans = [
        Span::styled("bold words", bold),
        Span::styled("tail", red),
        Span::styled(" more", bold),
    ];
    let lines = wrap(&spans, 9);
    assert_eq!(plain(&lines), vec!["bold", "wordstail", "more"]);
    assert_eq!(lines[0].spans, vec![Span::styled("bold", bold)]);
    assert_eq!(
        lines[1].spans,
        vec![Span::styled("words", bold), Span::styled("tail", red)]
    );
    assert_eq!(lines[2].spans, vec![Span::styled("more", bold)]);
}

#[test]
fn prefix_styles_are_kept() {
    let bar = Style::new().fg(Color::Blue);
    let prefix = Line::from(Span::styled("│ ", bar));
    let lines = wrap_prefixed(&[Span::raw("aa bb")], 4, &prefix, &prefix);
    assert_eq!(plain(&lines), vec!["│ aa", "│ bb"]);
    assert!(lines.iter().all(|l| l.spans[0].style == bar));
}

#[test]
fn hard_wrap_keeps_spaces_and_cuts_exactly() {
    check_hard("    let x = 1;", 6, &["    le", "t x = ", "1;"]);
    check_hard("", 6, &[""]);
    check_hard("ab", 0, &[]);
    check_hard("日本語", 3, &["日", "本", "語"]);
    check_hard("\tx", 1, &[" ", " ", " ", " ", "x"]);
    let lines = hard_wrap(
        &[Span::raw("abcdef")],
        4,
        &Line::from("+ "),
        &Line::from("  "),
    );
    assert_eq!(plain(&lines), vec!["+ ab", "  cd", "  ef"]);
}

#[test]
fn widths_are_measured_as_drawn() {
    assert_eq!(str_width("abc"), 3);
    assert_eq!(str_width("日本"), 4);
    assert_eq!(str_width("e\u{301}"), 1);
    assert_eq!(str_width("a\u{1b}b"), 2);
    assert_eq!(
        line_width(&Line::from(vec![Span::raw("ab"), Span::raw("日")])),
        4
    );
}

#[test]
fn cache_renders_once_per_generation_and_width() {
    let mut cache = WrapCache::new();
    let mut calls = 0;
    let mut render = |generation: u64, width: u16, cache: &mut WrapCache| {
        cache
            .get_or_render(generation, width, |w| {
                calls += 1;
                wrap(&[Span::raw("some words to wrap")], w)
            })
            .len()
    };
    assert_eq!(render(1, 10, &mut cache), 2);
    assert_eq!(render(1, 10, &mut cache), 2);
    assert_eq!(render(1, 40, &mut cache), 1);
    assert_eq!(render(2, 40, &mut cache), 1);
    assert!(cache.is_current(2, 40));
    assert!(!cache.is_current(2, 10));
    cache.invalidate();
    assert!(!cache.is_current(2, 40));
    assert_eq!(render(2, 40, &mut cache), 1);
    assert_eq!(calls, 4);
}

mod properties {
    use proptest::prelude::*;

    use super::*;

    fn text() -> impl Strategy<Value = String> {
        // Words, spaces, newlines, tabs, wide and zero-width characters, graphemes wider
        // than two cells, control bytes (one between a heart and its widening selector).
        proptest::collection::vec(
            prop_oneof![
                "[a-z]{1,12}",
                Just(" ".to_string()),
                Just("\n".to_string()),
                Just("\t".to_string()),
                Just("日本".to_string()),
                Just("🎉".to_string()),
                Just("e\u{301}".to_string()),
                Just("\u{200b}".to_string()),
                Just("\u{1b}".to_string()),
                Just("𠀀\u{1c24}".to_string()),
                Just("\u{1100}\u{1100}\u{1100}".to_string()),
                Just("❤\u{7}\u{fe0f}".to_string()),
                Just("\u{17d8}".to_string()),
                any::<char>().prop_map(String::from),
            ],
            0..40,
        )
        .prop_map(|parts| parts.concat())
    }

    /// The text without what may be dropped: spaces, control and invisible format
    /// characters, joiners that join nothing, and the parts of
    /// graphemes wider than two cells that show as `…` where they do not fit.
    fn words(s: &str) -> String {
        without_loose_joiners(drawable(s, true))
            .graphemes(true)
            .flat_map(grapheme_parts)
            .filter(|part| str_width(part) <= 2)
            .flat_map(str::chars)
            .filter(|c| !c.is_whitespace() && !matches!(c, '\u{200b}' | '…'))
            .collect()
    }

    proptest! {
        // Failures are turned into named unit tests rather than kept in a file, and the
        // seed is fixed so that every run tries the same cases.
        #![proptest_config(crate::testing::fixed_cases())]

        #[test]
        fn wrap_never_panics_fits_and_loses_nothing(input in text(), width in 0u16..30) {
            let lines = wrap_prefixed(
                &[Span::raw(input.clone())],
                width,
                &Line::from("• "),
                &Line::from("  "),
            );
            if width == 0 {
                prop_assert!(lines.is_empty());
            } else {
                prop_assert!(!lines.is_empty());
                for line in &lines {
                    // Only a wide character alone on a line may pass the width.
                    prop_assert!(line_width(line) <= usize::from(width).max(4));
                }
                let joined: String = lines
                    .iter()
                    .flat_map(|l| l.spans.iter().skip(usize::from(width > 2)))
                    .map(|s| s.content.to_string())
                    .collect();
                if width > 2 {
                    prop_assert_eq!(words(&joined), words(&input));
                }
            }
        }

        #[test]
        fn hard_wrap_never_panics_and_fits(input in text(), width in 0u16..30) {
            let lines = hard_wrap(&[Span::raw(input)], width, &Line::default(), &Line::default());
            for line in &lines {
                prop_assert!(line_width(line) <= usize::from(width).max(2));
            }
        }
    }
}
