//! The TUI's colours and text attributes: one named [`Style`] per part of the screen, read from
//! TOML theme files.
//!
//! Three themes are built in (`themes/*.toml`, embedded in the binary). A user's
//! `<themes dir>/<name>.toml` replaces the built-in of the same name or adds a new one; it may
//! be partial, and every style it leaves out comes from the theme it `extends` (by default the
//! built-in of the same name, else `dark`). A style given in a file replaces that style whole:
//! `accent = { fg = "red" }` drops the built-in accent's bold too. The file format is described
//! at the top of `themes/dark.toml`.
//!
//! Themes are written in 24-bit colour; [`Theme::for_depth`] brings one down to what the
//! terminal can show and records that depth, so code highlighted later for the same theme is
//! brought down the same way.

use std::path::{Path, PathBuf};

use ratatui::style::{Modifier, Style};

use super::color::ColorDepth;
use super::theme_file::{self, SpecError};

/// The built-in themes: name and file text.
const BUILTIN: &[(&str, &str)] = &[
    ("dark", include_str!("../../themes/dark.toml")),
    ("light", include_str!("../../themes/light.toml")),
    (
        "high-contrast",
        include_str!("../../themes/high-contrast.toml"),
    ),
];

/// The theme a partial user theme falls back to when it names no other.
pub const DEFAULT_THEME: &str = "dark";

/// Declares the theme's styles once, so that the struct, the list of keys a file may set, and
/// the lookup by key cannot drift apart.
macro_rules! theme_styles {
    ($( $(#[doc = $doc:literal])* $field:ident => $key:literal, )*) => {
        /// Named styles for every part of the UI, plus the syntect theme to highlight code with.
        #[derive(Debug, Clone, PartialEq)]
        pub struct Theme {
            /// The theme's name: a built-in name or the stem of the user's file.
            pub name: String,
            /// The syntect theme code blocks are highlighted with (see [`super::highlight`](mod@super::highlight)).
            pub syntax_theme: String,
            /// The colour depth the styles were brought down to by [`Theme::for_depth`].
            pub depth: ColorDepth,
            $( $(#[doc = $doc])* pub $field: Style, )*
        }

        impl Theme {
            /// The keys of a theme file's `[styles]` table.
            pub const STYLE_KEYS: &'static [&'static str] = &[$($key),*];

            /// The style stored under a `[styles]` key.
            pub fn style(&self, key: &str) -> Option<Style> {
                match key {
                    $($key => Some(self.$field),)*
                    _ => None,
                }
            }

            fn style_mut(&mut self, key: &str) -> Option<&mut Style> {
                match key {
                    $($key => Some(&mut self.$field),)*
                    _ => None,
                }
            }

            /// A theme with every style empty: the ground built-in files are read onto.
            fn blank(name: &str) -> Theme {
                Theme {
                    name: name.to_string(),
                    syntax_theme: String::new(),
                    depth: ColorDepth::TrueColor,
                    $($field: Style::new(),)*
                }
            }
        }
    };
}

theme_styles! {
    /// Ordinary text: the base foreground and background.
    base => "base",
    /// Secondary text: hints, timestamps, URLs after links.
    dim => "dim",
    /// Highlights that draw the eye: the prompt marker, key hints.
    accent => "accent",
    /// What the user wrote.
    user_message => "user-message",
    /// The assistant's prose.
    assistant_text => "assistant-text",
    /// The model's thinking, shown apart from its answer.
    thinking => "thinking",
    /// A tool's name in a tool-call line.
    tool_name => "tool-name",
    /// A tool call still running (spinner, elapsed time).
    tool_running => "tool-running",
    /// The ✓ of a call that succeeded.
    success => "success",
    /// The ✗ of a call that failed.
    failure => "failure",
    /// Error messages.
    error => "error",
    /// Warnings.
    warning => "warning",
    /// Informational notices from tern itself.
    notice => "notice",
    /// An added line in a diff.
    diff_added => "diff-added",
    /// A removed line in a diff.
    diff_removed => "diff-removed",
    /// A diff's `@@ … @@` hunk header.
    diff_hunk => "diff-hunk",
    /// An unchanged context line in a diff.
    diff_context => "diff-context",
    /// A diff's `--- a/…` / `+++ b/…` file header lines.
    diff_file_header => "diff-file-header",
    /// Code blocks: the background and the colour of unhighlighted code.
    code_block => "code-block",
    /// `inline code` in prose.
    inline_code => "inline-code",
    /// Level-1 headings.
    heading_1 => "heading-1",
    /// Level-2 headings.
    heading_2 => "heading-2",
    /// Level-3 headings.
    heading_3 => "heading-3",
    /// Headings of level 4 to 6.
    heading_4 => "heading-4",
    /// Link text.
    link => "link",
    /// The URL shown after a link's text.
    link_url => "link-url",
    /// Block quotes: the `│` bar and the quoted text.
    block_quote => "block-quote",
    /// List bullets, numbers and task boxes.
    list_marker => "list-marker",
    /// Table borders.
    table_border => "table-border",
    /// A table's header row.
    table_header => "table-header",
    /// Horizontal rules.
    rule => "rule",
    /// The selected or highlighted row of a list.
    selection => "selection",
    /// The status line.
    status_line => "status-line",
    /// Borders of popups and dialogs.
    popup_border => "popup-border",
}

/// Why a theme could not be loaded; each message says what to change.
#[derive(Debug, thiserror::Error)]
pub enum ThemeError {
    /// Neither a built-in nor a user theme has this name.
    #[error(
        "no theme named `{name}`: the built-in themes are {builtin}; a theme of your own goes in {}",
        path.display()
    )]
    NotFound {
        name: String,
        builtin: String,
        path: PathBuf,
    },
    /// The name could not be a file name in the themes directory.
    #[error("`{name}` is not a theme name: use letters, digits, `-` and `_` only")]
    BadName { name: String },
    /// The user's theme file exists but could not be read.
    #[error("cannot read the theme file {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The theme file is not valid: where, which key, what is wrong and how to fix it.
    #[error("{}, line {line}, `{key}`: {problem}. {fix}", path.display())]
    Invalid {
        path: PathBuf,
        line: usize,
        key: String,
        problem: String,
        fix: String,
    },
}

impl Default for Theme {
    fn default() -> Self {
        Theme::builtin(DEFAULT_THEME).unwrap_or_else(|| Theme::blank(DEFAULT_THEME))
    }
}

impl Theme {
    /// The names of the built-in themes.
    pub fn names() -> impl Iterator<Item = &'static str> {
        BUILTIN.iter().map(|(name, _)| *name)
    }

    /// A built-in theme by name.
    pub fn builtin(name: &str) -> Option<Theme> {
        let (_, text) = BUILTIN.iter().find(|(n, _)| *n == name)?;
        // Built-in files are complete (a test checks it), so they are read onto a blank theme;
        // one that failed to parse would be a bug caught by the tests, not a user error.
        let spec = theme_file::parse(text).ok()?;
        let mut theme = Theme::blank(name);
        theme.apply(&spec);
        Some(theme)
    }

    /// The theme `name`: the user's `<user_themes_dir>/<name>.toml` when it exists (on top of
    /// the theme it extends), else the built-in of that name.
    pub fn load(name: &str, user_themes_dir: &Path) -> Result<Theme, ThemeError> {
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_alphanumeric() || c == '-' || c == '_')
        {
            return Err(ThemeError::BadName {
                name: name.to_string(),
            });
        }
        let path = user_themes_dir.join(format!("{name}.toml"));
        match std::fs::read_to_string(&path) {
            Ok(text) => Theme::from_toml(name, &text, &path),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Theme::builtin(name)
                .ok_or_else(|| ThemeError::NotFound {
                    name: name.to_string(),
                    builtin: Theme::names().collect::<Vec<_>>().join(", "),
                    path,
                }),
            Err(source) => Err(ThemeError::Read { path, source }),
        }
    }

    /// A theme from the text of a theme file; `path` is only used to name the file in errors.
    ///
    /// Styles the file leaves out come from the built-in it `extends`, by default the built-in
    /// called `name` if there is one, else [`DEFAULT_THEME`].
    pub fn from_toml(name: &str, text: &str, path: &Path) -> Result<Theme, ThemeError> {
        let invalid = |e: SpecError| ThemeError::Invalid {
            path: path.to_path_buf(),
            line: e.line,
            key: e.key,
            problem: e.problem,
            fix: e.fix,
        };
        let spec = theme_file::parse(text).map_err(invalid)?;
        let ground = match &spec.extends {
            Some(base) => Theme::builtin(&base.value).ok_or_else(|| {
                invalid(SpecError {
                    line: base.line,
                    key: "extends".to_string(),
                    problem: format!("there is no built-in theme `{}`", base.value),
                    fix: format!(
                        "Name one of {}, or remove the line to extend `{DEFAULT_THEME}`",
                        Theme::names().collect::<Vec<_>>().join(", ")
                    ),
                })
            })?,
            None => Theme::builtin(name).unwrap_or_default(),
        };
        let mut theme = ground;
        theme.name = name.to_string();
        theme.apply(&spec);
        Ok(theme)
    }

    /// The style for a heading of `level` (1–6).
    pub fn heading(&self, level: u8) -> Style {
        match level {
            0 | 1 => self.heading_1,
            2 => self.heading_2,
            3 => self.heading_3,
            _ => self.heading_4,
        }
    }

    /// This theme with every colour brought down to `depth`.
    ///
    /// With [`ColorDepth::NoColor`] every colour is dropped and the modifiers stay; the
    /// selection and the status line, which are told apart by their background, are shown
    /// reversed instead so they remain visible.
    pub fn for_depth(&self, depth: ColorDepth) -> Theme {
        let mut theme = self.clone();
        theme.depth = depth;
        for key in Theme::STYLE_KEYS {
            if let Some(style) = theme.style_mut(key) {
                *style = depth.style(*style);
            }
        }
        if depth == ColorDepth::NoColor {
            if self.selection.bg.is_some() {
                theme.selection = theme.selection.add_modifier(Modifier::REVERSED);
            }
            if self.status_line.bg.is_some() {
                theme.status_line = theme.status_line.add_modifier(Modifier::REVERSED);
            }
        }
        theme
    }

    /// A style whose colours are brought down to this theme's depth: for styles made outside
    /// the theme, such as syntect's highlight colours.
    pub fn adapt(&self, style: Style) -> Style {
        self.depth.style(style)
    }

    fn apply(&mut self, spec: &theme_file::ThemeSpec) {
        if let Some(syntax) = &spec.syntax_theme {
            self.syntax_theme = syntax.clone();
        }
        for (key, style) in &spec.styles {
            if let Some(slot) = self.style_mut(key) {
                *slot = *style;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use ratatui::style::Color;

    use super::*;

    fn user_dir(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("temp dir");
        for (name, text) in files {
            std::fs::write(dir.path().join(name), text).expect("write theme");
        }
        dir
    }

    #[test]
    fn builtins_are_complete_and_valid() {
        assert_eq!(
            Theme::names().collect::<Vec<_>>(),
            vec!["dark", "light", "high-contrast"]
        );
        for (name, text) in BUILTIN {
            let spec = theme_file::parse(text).unwrap_or_else(|e| panic!("{name}: {e:?}"));
            let mut keys: Vec<&str> = spec.styles.iter().map(|(k, _)| *k).collect();
            keys.sort_unstable();
            let mut all = Theme::STYLE_KEYS.to_vec();
            all.sort_unstable();
            assert_eq!(keys, all, "{name} must set every style exactly once");
            let theme = Theme::builtin(name).expect("builtin");
            assert_eq!(theme.name, *name);
            assert!(
                !theme.syntax_theme.is_empty(),
                "{name} names a syntax theme"
            );
        }
        assert_eq!(
            Theme::builtin("dark").map(|t| t.syntax_theme).as_deref(),
            Some("base16-ocean.dark")
        );
        assert_eq!(
            Theme::builtin("light").map(|t| t.syntax_theme).as_deref(),
            Some("InspiredGitHub")
        );
        assert!(Theme::builtin("solarized").is_none());
        assert_eq!(Theme::default().name, "dark");
    }

    #[test]
    fn styles_that_must_stand_out_without_colour_have_modifiers() {
        // With NO_COLOR only modifiers remain: these must still be visible.
        for name in Theme::names() {
            let theme = Theme::builtin(name)
                .expect("builtin")
                .for_depth(ColorDepth::NoColor);
            for style in [
                theme.heading_1,
                theme.heading_2,
                theme.error,
                theme.success,
                theme.failure,
                theme.user_message,
                theme.table_header,
                theme.selection,
                theme.status_line,
            ] {
                assert!(!style.add_modifier.is_empty(), "{name}: {style:?}");
            }
        }
    }

    #[test]
    fn user_theme_overrides_and_falls_back() {
        let dir = user_dir(&[
            ("mine.toml", "[styles]\naccent = \"#ff0000\"\n"),
            ("light.toml", "[styles]\nerror = \"red\"\n"),
            (
                "based.toml",
                "extends = \"high-contrast\"\nsyntax-theme = \"Solarized (dark)\"\n",
            ),
        ]);
        let dark = Theme::builtin("dark").expect("dark");
        let mine = Theme::load("mine", dir.path()).expect("mine");
        assert_eq!(mine.name, "mine");
        assert_eq!(mine.accent, Style::new().fg(Color::Rgb(255, 0, 0)));
        assert_eq!(mine.error, dark.error);
        assert_eq!(mine.syntax_theme, dark.syntax_theme);

        // A file named like a built-in extends that built-in.
        let light = Theme::load("light", dir.path()).expect("light");
        let builtin_light = Theme::builtin("light").expect("light");
        assert_eq!(light.error, Style::new().fg(Color::Red));
        assert_eq!(light.accent, builtin_light.accent);

        let based = Theme::load("based", dir.path()).expect("based");
        let contrast = Theme::builtin("high-contrast").expect("high-contrast");
        assert_eq!(based.base, contrast.base);
        assert_eq!(based.syntax_theme, "Solarized (dark)");

        // No user file: the built-in.
        assert_eq!(Theme::load("dark", dir.path()).expect("dark"), dark);
    }

    #[test]
    fn load_errors_say_what_and_where() {
        let dir = user_dir(&[
            ("bad.toml", "# comment\n[styles]\naccent = \"#12\"\n"),
            ("ext.toml", "extends = \"nope\"\n"),
        ]);
        let error = Theme::load("bad", dir.path()).expect_err("bad colour");
        let message = error.to_string();
        assert!(
            message.contains("bad.toml, line 3, `styles.accent`"),
            "{message}"
        );
        assert!(message.contains("#rrggbb"), "{message}");

        let message = Theme::load("ext", dir.path())
            .expect_err("bad base")
            .to_string();
        assert!(message.contains("line 1, `extends`"), "{message}");
        assert!(message.contains("dark, light, high-contrast"), "{message}");

        let message = Theme::load("missing", dir.path())
            .expect_err("none")
            .to_string();
        assert!(message.contains("no theme named `missing`"), "{message}");
        assert!(message.contains("missing.toml"), "{message}");

        for name in ["../etc/passwd", "a/b", "", "x.toml"] {
            assert!(matches!(
                Theme::load(name, dir.path()),
                Err(ThemeError::BadName { .. })
            ));
        }
    }

    #[test]
    fn unreadable_theme_file_is_an_error_not_a_panic() {
        let dir = user_dir(&[]);
        std::fs::create_dir(dir.path().join("odd.toml")).expect("dir");
        assert!(matches!(
            Theme::load("odd", dir.path()),
            Err(ThemeError::Read { .. })
        ));
        let binary = [0xff_u8, 0xfe, 0x00, 0x41];
        std::fs::write(dir.path().join("bin.toml"), binary).expect("write");
        assert!(Theme::load("bin", dir.path()).is_err());
    }

    #[test]
    fn for_depth_maps_every_style() {
        let dark = Theme::builtin("dark").expect("dark");
        let t256 = dark.for_depth(ColorDepth::Ansi256);
        assert_eq!(t256.depth, ColorDepth::Ansi256);
        for key in Theme::STYLE_KEYS {
            let style = t256.style(key).expect("key");
            for color in [style.fg, style.bg].into_iter().flatten() {
                assert!(!matches!(color, Color::Rgb(..)), "{key}: {color:?}");
            }
        }
        let t16 = dark.for_depth(ColorDepth::Ansi16);
        assert_eq!(t16.diff_removed.fg, Some(Color::Red));
        assert!(matches!(
            t16.diff_added.fg,
            Some(Color::Green | Color::LightGreen)
        ));
        assert_eq!(
            t16.adapt(Style::new().fg(Color::Rgb(0, 0, 0))).fg,
            Some(Color::Black)
        );

        let none = dark.for_depth(ColorDepth::NoColor);
        for key in Theme::STYLE_KEYS {
            let style = none.style(key).expect("key");
            assert_eq!((style.fg, style.bg), (None, None), "{key}");
            let original = dark.style(key).expect("key");
            assert!(style.add_modifier.contains(original.add_modifier), "{key}");
        }
        assert!(none.selection.add_modifier.contains(Modifier::REVERSED));
        assert!(none.status_line.add_modifier.contains(Modifier::REVERSED));
        assert_eq!(dark.for_depth(ColorDepth::TrueColor).base, dark.base);
    }

    #[test]
    fn headings_by_level() {
        let theme = Theme::default();
        assert_eq!(theme.heading(1), theme.heading_1);
        assert_eq!(theme.heading(2), theme.heading_2);
        assert_eq!(theme.heading(3), theme.heading_3);
        assert_eq!(theme.heading(6), theme.heading_4);
        assert!(theme.heading(1).add_modifier.contains(Modifier::BOLD));
    }
}
