//! Syntax highlighting of code blocks with syntect, into ratatui styles.
//!
//! syntect's syntax and theme sets are decoded from data embedded in the binary on first use
//! (a few milliseconds in a release build), and each language's patterns are compiled the
//! first time it is highlighted (tens of milliseconds per language, see `benches/markdown.rs`).
//! The syntaxes and their compiled patterns are let go when a reply ends (the `grammar`
//! submodule); call [`prepare_for_reply`] when a turn starts so its reply's code blocks
//! do not wait for them.
//!
//! Highlighting is slow next to everything else the renderer does (syntect with its
//! pure-Rust regex engine manages several thousand lines a second), and a streaming reply is
//! rendered again on every tick. So results are memoised (the `memo` submodule): a finished block is not
//! highlighted again, and a block that is still growing resumes from its last complete line.
//! The memo is a cache only; the output is a pure function of the arguments.
//!
//! The styles carry syntect's foreground colours as `Color::Rgb` and its bold, italic and
//! underline; never a background, so the caller's code-block background shows through. To
//! bring the colours down to the terminal's depth, pass each style through
//! [`super::Theme::adapt`] (the markdown renderer does).

use std::sync::{Arc, LazyLock};

use ratatui::style::{Color, Modifier, Style};
use syntect::easy::HighlightLines;
use syntect::highlighting::{FontStyle, HighlightState, Theme as SyntaxTheme, ThemeSet};
use syntect::parsing::{ParseState, SyntaxReference, SyntaxSet};
use syntect::util::LinesWithEndings;

/// The syntect themes built into the binary, by name.
pub const SYNTAX_THEMES: &[&str] = &[
    "base16-ocean.dark",
    "base16-eighties.dark",
    "base16-mocha.dark",
    "base16-ocean.light",
    "InspiredGitHub",
    "Solarized (dark)",
    "Solarized (light)",
];

/// One highlighted line: its pieces of text with their styles, without the line ending.
pub type HighlightedLine = Vec<(Style, String)>;

static THEMES: LazyLock<ThemeSet> = LazyLock::new(ThemeSet::load_defaults);

/// Fence names models use that syntect's default set knows under another name, or not at all
/// (then the nearest syntax that reads well).
const ALIASES: &[(&str, &str)] = &[
    ("ts", "js"),
    ("typescript", "js"),
    ("tsx", "js"),
    ("jsx", "js"),
    ("mjs", "js"),
    ("cjs", "js"),
    ("javascript", "js"),
    ("node", "js"),
    ("jsonc", "json"),
    ("json5", "json"),
    ("shell", "bash"),
    ("console", "bash"),
    ("shellsession", "bash"),
    ("zsh", "bash"),
    ("sh", "bash"),
    ("golang", "go"),
    ("py3", "python"),
    ("python3", "python"),
    ("c++", "cpp"),
    ("objective-c", "m"),
    ("yml", "yaml"),
    ("rs", "rust"),
];

/// Languages [`warm_up`] prepares, with a snippet that goes through their common patterns.
const WARM_UP: &[(&str, &str)] = &[
    (
        "rust",
        "use std::io;\n/// Doc.\n#[derive(Debug)]\npub struct S<'a> { x: &'a str }\nfn f(v: u8) -> Result<(), E> {\n    let s = format!(\"{v}\"); // c\n    match v { 0 => Ok(()), _ => Err(E::new(r\"x\")) }\n}\n",
    ),
    (
        "python",
        "import os\nfrom x import y\n\n@dec\nclass C(B):\n    \"\"\"Doc.\"\"\"\n    def f(self, a: int = 1) -> str:\n        return f\"{a}\" + 'b'  # c\n",
    ),
    (
        "js",
        "import { a } from 'b';\nconst f = async (x) => `t${x}`; // c\nclass C { m() { return /r/g; } }\n",
    ),
    (
        "bash",
        "#!/bin/sh\nset -e\nfor f in *.rs; do echo \"$f\" | grep -q x && exit 1; done # c\n",
    ),
    ("json", "{\"a\": [1, 2.5, true, null, \"s\"]}\n"),
];

/// Loads syntect's syntaxes and themes, and compiles the patterns of the languages replies
/// use most (Rust, Python, JavaScript, shell, JSON), which syntect otherwise does the first
/// time each is highlighted. Takes on the order of 100 ms and some 30 MiB (each language's
/// compiled patterns take 5 to 10 MiB): [`prepare_for_reply`] compiles only what is likely.
pub fn warm_up() {
    let langs: Vec<&str> = WARM_UP.iter().map(|(lang, _)| *lang).collect();
    warm_up_languages(&langs);
}

/// Loads syntect's syntaxes and themes and compiles the patterns of `langs` (fence names or
/// syntect's names of languages), each through a snippet that goes through its common
/// patterns. Call it on a background thread.
pub fn warm_up_languages(langs: &[&str]) {
    let Some(theme) = THEMES.themes.get(SYNTAX_THEMES[0]) else {
        return;
    };
    let syntaxes = grammar::syntaxes();
    for lang in langs {
        let Some(syntax) = find_syntax(&syntaxes, lang) else {
            continue;
        };
        let snippet = WARM_UP
            .iter()
            .find(|(known, _)| find_syntax(&syntaxes, known).is_some_and(|s| s.name == syntax.name))
            .map_or("x = f(1, \"s\") // c\n", |(_, snippet)| snippet);
        run_syntect(snippet, &syntaxes, syntax, theme, None);
    }
}

/// Compiles, on a thread of its own, the patterns the reply of a turn just started is likely
/// to need: those of the project's language (see [`likely_language`]) and of the languages
/// the last reply showed, unless they are compiled already. Returns at once.
pub fn prepare_for_reply(project_dir: &std::path::Path) {
    let langs = grammar::claim_for_reply(likely_language(project_dir));
    if langs.is_empty() {
        return;
    }
    let _ = std::thread::Builder::new()
        .name("tern-highlight".into())
        .spawn(move || {
            let langs: Vec<&str> = langs.iter().map(String::as_str).collect();
            warm_up_languages(&langs);
            // A reply that ended while its patterns compiled let go of them: this thread
            // held the last of them, freed as it ended, so the freed memory is handed back
            // here.
            if !grammar::loaded() {
                super::release_freed_memory();
            }
        });
}

/// The language a project is most likely written in, from the files at its root, by
/// syntect's name for it (one of the warm-up languages).
pub fn likely_language(project_dir: &std::path::Path) -> Option<&'static str> {
    let has = |name: &str| project_dir.join(name).exists();
    if has("Cargo.toml") {
        Some("Rust")
    } else if has("pyproject.toml") || has("setup.py") || has("requirements.txt") {
        Some("Python")
    } else if has("package.json") {
        Some("JavaScript")
    } else {
        None
    }
}

/// Lets go of the highlighted blocks kept for the frames to come (see the `memo` module):
/// for when a reply has ended, before freed memory is handed back.
pub fn forget_highlighted() {
    memo::clear();
}

/// Lets go of the syntaxes with their compiled patterns (see the `grammar` module), for when
/// a reply has ended and nothing streams: they are loaded again when a turn starts (see
/// [`prepare_for_reply`]) or a code block is laid out. Drop what it returns off the
/// interface's thread, then hand freed memory back.
pub fn let_go_of_grammar() -> Forgotten {
    grammar::let_go()
}

/// Whether code fenced with `lang` would be highlighted rather than shown plain.
pub fn is_known_language(lang: &str) -> bool {
    find_syntax(&grammar::syntaxes(), lang).is_some()
}

/// Highlights `code` as `lang` (a fence name such as `rust`, `py` or `ts`) with the syntect
/// theme `theme_name`: one entry per line of `code`.
///
/// An unknown language or theme gives the lines unstyled (`Style::new()`), for the caller to
/// show in its plain code style.
pub fn highlight(code: &str, lang: &str, theme_name: &str) -> Vec<HighlightedLine> {
    highlight_shared(code, lang, theme_name).to_vec()
}

/// [`highlight`] without copying the memoised result.
pub(crate) fn highlight_shared(code: &str, lang: &str, theme_name: &str) -> Arc<[HighlightedLine]> {
    let syntaxes = grammar::syntaxes();
    let Some(syntax) = find_syntax(&syntaxes, lang) else {
        return plain(code).into();
    };
    let Some(theme) = THEMES.themes.get(theme_name) else {
        return plain(code).into();
    };
    highlight_kept(code, &syntaxes, syntax, theme, theme_name).0
}

/// Highlights `code` through the memo, and keeps the result there. Also returns where a
/// longer version of it resumes.
fn highlight_kept(
    code: &str,
    syntaxes: &SyntaxSet,
    syntax: &SyntaxReference,
    theme: &SyntaxTheme,
    theme_name: &str,
) -> (Arc<[HighlightedLine]>, Option<Arc<memo::Resume>>) {
    let start = match memo::lookup(code, &syntax.name, theme_name) {
        memo::Lookup::Hit(lines, resume) => return (lines, resume),
        memo::Lookup::Resume(resume) => Some(resume),
        memo::Lookup::Miss => None,
    };
    let (lines, resume) = run_syntect(code, syntaxes, syntax, theme, start);
    let lines: Arc<[HighlightedLine]> = lines.into();
    // Where a longer version resumes shares these lines: the first `count` of them.
    let resume = resume.map(|(offset, count, highlight, parse)| {
        Arc::new(memo::Resume {
            offset,
            lines: Arc::clone(&lines),
            count,
            highlight,
            parse,
        })
    });
    memo::store(
        code,
        &syntax.name,
        theme_name,
        Arc::clone(&lines),
        resume.clone(),
    );
    (lines, resume)
}

/// Whether highlighting `code` (whole lines) as `lang` leaves the highlighter where
/// highlighting its last line `line` alone leaves it: then the lines that follow are
/// highlighted the same behind that line alone, and a block still being written can be laid
/// out from there without going back to its start.
///
/// Both states come from the memo, where the block being written and the line were
/// highlighted when they were laid out: they are not highlighted again.
pub(crate) fn ends_as_alone(code: &str, line: &str, lang: &str, theme_name: &str) -> bool {
    let syntaxes = grammar::syntaxes();
    let (Some(syntax), Some(theme)) = (find_syntax(&syntaxes, lang), THEMES.themes.get(theme_name))
    else {
        // Shown plain: each line by itself.
        return true;
    };
    let after = |code: &str| {
        highlight_kept(code, &syntaxes, syntax, theme, theme_name)
            .1
            .filter(|resume| resume.offset == code.len())
            .map(|resume| (resume.highlight.clone(), resume.parse.clone()))
    };
    after(code).is_some_and(|whole| Some(whole) == after(line))
}

fn find_syntax<'a>(syntaxes: &'a SyntaxSet, lang: &str) -> Option<&'a SyntaxReference> {
    let lang = lang.trim().to_ascii_lowercase();
    if lang.is_empty() {
        return None;
    }
    let name = ALIASES
        .iter()
        .find(|(alias, _)| *alias == lang)
        .map_or(lang.as_str(), |(_, target)| target);
    syntaxes
        .find_syntax_by_token(name)
        .filter(|s| s.name != "Plain Text")
}

/// Highlights `code`, or its part after `start` (the lines before it already highlighted).
/// Also returns where a longer version of the same code could resume: after its last
/// complete line, since an unfinished last line may still change.
fn run_syntect(
    code: &str,
    syntaxes: &SyntaxSet,
    syntax: &SyntaxReference,
    theme: &SyntaxTheme,
    start: Option<Arc<memo::Resume>>,
) -> (Vec<HighlightedLine>, Option<ResumePoint>) {
    let (mut out, mut offset, mut highlighter) = match start {
        Some(resume) => {
            let resume = Arc::unwrap_or_clone(resume);
            (
                resume.lines[..resume.count.min(resume.lines.len())].to_vec(),
                resume.offset,
                HighlightLines::from_state(theme, resume.highlight, resume.parse),
            )
        }
        None => (Vec::new(), 0, HighlightLines::new(syntax, theme)),
    };
    grammar::note_compiled(&syntax.name);
    let rest = code.get(offset..).unwrap_or("");
    let mut lines = LinesWithEndings::from(rest).peekable();
    let mut resume = None;
    while let Some(line) = lines.next() {
        if lines.peek().is_none() && !line.ends_with('\n') {
            // The unfinished last line: remember the state before it.
            let (highlight, parse) = highlighter.state();
            resume = Some((offset, highlight.clone(), parse.clone()));
            highlighter = HighlightLines::from_state(theme, highlight, parse);
        }
        count_line();
        match highlighter.highlight_line(line, syntaxes) {
            Ok(pieces) => out.push(
                pieces
                    .into_iter()
                    .map(|(style, text)| (convert(style), strip_ending(text).to_string()))
                    .filter(|(_, text)| !text.is_empty())
                    .collect(),
            ),
            Err(_) => {
                // A syntax definition that fails on this input: show the rest plain rather
                // than lose it, and let nothing resume from a broken state.
                out.push(vec![(Style::new(), strip_ending(line).to_string())]);
                out.extend(lines.map(|l| vec![(Style::new(), strip_ending(l).to_string())]));
                return (out, None);
            }
        }
        offset += line.len();
    }
    let resume = match resume {
        // Nothing complete yet: nothing worth resuming from.
        Some((0, _, _)) => return (out, None),
        Some((at, highlight, parse)) => (at, out.len().saturating_sub(1), highlight, parse),
        None if offset == 0 => return (out, None),
        None => {
            let (highlight, parse) = highlighter.state();
            (offset, out.len(), highlight, parse)
        }
    };
    (out, Some(resume))
}

/// Where a longer version of highlighted code can pick up: the byte offset after its last
/// complete line, how many lines come before it, and syntect's state there.
type ResumePoint = (usize, usize, HighlightState, ParseState);

/// The lines of `code` unstyled, split the way syntect splits them.
fn plain(code: &str) -> Vec<HighlightedLine> {
    LinesWithEndings::from(code)
        .map(|l| {
            let text = strip_ending(l);
            if text.is_empty() {
                Vec::new()
            } else {
                vec![(Style::new(), text.to_string())]
            }
        })
        .collect()
}

fn strip_ending(line: &str) -> &str {
    let line = line.strip_suffix('\n').unwrap_or(line);
    line.strip_suffix('\r').unwrap_or(line)
}

fn convert(style: syntect::highlighting::Style) -> Style {
    let fg = style.foreground;
    let mut out = Style::new().fg(Color::Rgb(fg.r, fg.g, fg.b));
    let font = style.font_style;
    if font.contains(FontStyle::BOLD) {
        out = out.add_modifier(Modifier::BOLD);
    }
    if font.contains(FontStyle::ITALIC) {
        out = out.add_modifier(Modifier::ITALIC);
    }
    if font.contains(FontStyle::UNDERLINE) {
        out = out.add_modifier(Modifier::UNDERLINED);
    }
    out
}

mod grammar;
mod memo;

pub use grammar::Forgotten;

#[cfg(test)]
pub(crate) use memo::tests::contents as hold_memo;

#[cfg(test)]
thread_local! {
    static LINES_HIGHLIGHTED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Lines this thread has handed to syntect, for the tests that a line is not highlighted
/// again and again.
#[cfg(test)]
pub(crate) fn lines_highlighted() -> usize {
    LINES_HIGHLIGHTED.get()
}

fn count_line() {
    #[cfg(test)]
    LINES_HIGHLIGHTED.set(LINES_HIGHLIGHTED.get() + 1);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text_of(lines: &[HighlightedLine]) -> Vec<String> {
        lines
            .iter()
            .map(|l| l.iter().map(|(_, t)| t.as_str()).collect())
            .collect()
    }

    fn colours(line: &HighlightedLine) -> Vec<Option<Color>> {
        line.iter().map(|(s, _)| s.fg).collect()
    }

    #[test]
    fn rust_is_coloured_and_keeps_its_text() {
        let code = "fn main() {\n    let x = \"hi\";\n}\n";
        let lines = highlight(code, "rust", "base16-ocean.dark");
        assert_eq!(
            text_of(&lines),
            vec!["fn main() {", "    let x = \"hi\";", "}"]
        );
        let distinct: std::collections::HashSet<_> = lines.iter().flat_map(colours).collect();
        assert!(
            distinct.len() >= 3,
            "expected several colours, got {distinct:?}"
        );
        assert!(lines.iter().flatten().all(|(s, _)| s.bg.is_none()));
    }

    #[test]
    fn fence_aliases_and_case() {
        for lang in [
            "rs", "Rust", "py", "python", "ts", "sh", "shell", "json", "yml", "c++",
        ] {
            assert!(is_known_language(lang), "{lang}");
        }
        for lang in ["", "klingon", "text", "plain"] {
            assert!(!is_known_language(lang), "{lang}");
        }
    }

    #[test]
    fn unknown_language_or_theme_is_plain() {
        let code = "a b\n\nc\n";
        for lines in [
            highlight(code, "klingon", "base16-ocean.dark"),
            highlight(code, "rust", "no such theme"),
        ] {
            assert_eq!(text_of(&lines), vec!["a b", "", "c"]);
            assert!(lines.iter().flatten().all(|(s, _)| *s == Style::new()));
        }
    }

    #[test]
    fn line_count_matches_the_code() {
        assert!(highlight("", "rust", "InspiredGitHub").is_empty());
        assert_eq!(highlight("x", "rust", "InspiredGitHub").len(), 1);
        assert_eq!(highlight("x\r\ny\n\n", "rust", "InspiredGitHub").len(), 3);
        assert_eq!(
            text_of(&highlight("x\r\ny", "py", "InspiredGitHub")),
            vec!["x", "y"]
        );
    }

    #[test]
    fn warm_up_languages_are_known() {
        for (lang, _) in WARM_UP {
            assert!(is_known_language(lang), "{lang}");
        }
        // The project's language goes by syntect's name, which is what is counted compiled.
        let syntaxes = grammar::syntaxes();
        for name in ["Rust", "Python", "JavaScript"] {
            let found = find_syntax(&syntaxes, name).map(|syntax| syntax.name.as_str());
            assert_eq!(found, Some(name));
        }
        warm_up();
    }

    #[test]
    fn every_listed_theme_exists() {
        let mut loaded: Vec<&str> = THEMES.themes.keys().map(String::as_str).collect();
        loaded.sort_unstable();
        let mut listed = SYNTAX_THEMES.to_vec();
        listed.sort_unstable();
        assert_eq!(loaded, listed);
    }

    #[test]
    fn memoised_result_equals_a_fresh_one() {
        let code = "def f(x):\n    return x  # memo test\n";
        let first = highlight(code, "python", "Solarized (dark)");
        let second = highlight(code, "python", "Solarized (dark)");
        assert_eq!(first, second);
        let other_theme = highlight(code, "python", "Solarized (light)");
        assert_ne!(first, other_theme);
    }

    #[test]
    fn a_growing_block_resumes_and_matches_a_fresh_highlight() {
        let full =
            "let s = \"a\nstring over\nlines\";\nfn f() {}\n/* open\ncomment */ let y = 2;\n";
        // Feed the block as a stream does, a few bytes at a time; each step may resume from
        // the one before, and must give what highlighting it from scratch gives.
        let mut cut = 0;
        while cut < full.len() {
            cut = (cut + 5).min(full.len());
            let part = &full[..cut];
            let streamed = highlight(part, "rust", "base16-mocha.dark");
            let syntaxes = grammar::syntaxes();
            let syntax = find_syntax(&syntaxes, "rust").expect("rust");
            let theme = &THEMES.themes["base16-mocha.dark"];
            let (fresh, _) = run_syntect(part, &syntaxes, syntax, theme, None);
            assert_eq!(streamed, fresh, "after {cut} bytes");
        }
    }
}
