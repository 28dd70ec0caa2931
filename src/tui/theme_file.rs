//! Reading a theme file: TOML text into validated plain data, every mistake reported with its
//! line, its key and a way to fix it.
//!
//! The file is parsed with spans (`toml::de::DeTable`) rather than through serde, so that an
//! error in a value (a colour that is not one, an unknown modifier) can point at the line it
//! is on, not just at the file. Nothing is applied here; [`super::theme::Theme`] lays the
//! result over the theme the file extends.
//!
//! The format:
//!
//! ```toml
//! extends = "dark"                  # optional: where missing styles come from
//! syntax-theme = "base16-ocean.dark"
//!
//! [styles]
//! accent = "#8fa1b3"                # a colour alone sets the foreground
//! error = { fg = "bright-red", bg = "reset", modifiers = ["bold", "underlined"] }
//! selection = { bg = 238 }          # 0–255: an xterm palette index
//! ```

use std::ops::Range;

use ratatui::style::{Color, Modifier, Style};
use toml::Spanned;
use toml::de::{DeTable, DeValue};

use super::highlight::SYNTAX_THEMES;
use super::theme::Theme;

/// A theme file's contents, validated.
#[derive(Debug, Default)]
pub(super) struct ThemeSpec {
    /// The built-in theme the file extends, with the line it was named on.
    pub extends: Option<Located>,
    /// The syntect theme to highlight code with.
    pub syntax_theme: Option<String>,
    /// The styles the file sets, by key.
    pub styles: Vec<(&'static str, Style)>,
}

/// A string value with the line it was found on.
#[derive(Debug)]
pub(super) struct Located {
    pub value: String,
    pub line: usize,
}

/// What is wrong with a theme file, where, and how to fix it.
#[derive(Debug, PartialEq)]
pub(super) struct SpecError {
    pub line: usize,
    pub key: String,
    pub problem: String,
    pub fix: String,
}

const COLOR_FIX: &str = "Write a colour as \"#rrggbb\", an ANSI name (black, red, green, yellow, \
    blue, magenta, cyan, white, each also as bright-<name>), \"reset\" for the terminal's own, \
    or an xterm palette index 0-255";

const MODIFIERS: &[(&str, Modifier)] = &[
    ("bold", Modifier::BOLD),
    ("dim", Modifier::DIM),
    ("italic", Modifier::ITALIC),
    ("underlined", Modifier::UNDERLINED),
    ("underline", Modifier::UNDERLINED),
    ("reversed", Modifier::REVERSED),
    ("reverse", Modifier::REVERSED),
    ("crossed-out", Modifier::CROSSED_OUT),
    ("strikethrough", Modifier::CROSSED_OUT),
];

/// Reads and validates a theme file.
pub(super) fn parse(text: &str) -> Result<ThemeSpec, SpecError> {
    let reader = Reader { text };
    let document = DeTable::parse(text).map_err(|e| {
        let offset = e.span().map_or(0, |s| s.start);
        let message = e.message().lines().next().unwrap_or("invalid TOML").trim();
        SpecError {
            line: reader.line(offset),
            key: reader.key_on_line(offset),
            problem: format!("the file is not valid TOML ({message})"),
            fix: "Fix the syntax on that line; a style is written `key = { fg = \"#rrggbb\" }`"
                .to_string(),
        }
    })?;
    let mut spec = ThemeSpec::default();
    for (key, value) in document.get_ref() {
        match key.get_ref().as_ref() {
            "extends" => {
                let name = reader.string(value, "extends", "Name a built-in theme")?;
                spec.extends = Some(Located {
                    value: name.to_string(),
                    line: reader.line(value.span().start),
                });
            }
            "syntax-theme" => {
                let fix = format!("Name one of {}", quoted_list(SYNTAX_THEMES));
                let name = reader.string(value, "syntax-theme", &fix)?;
                if !SYNTAX_THEMES.contains(&name) {
                    return Err(reader.error(
                        value.span(),
                        "syntax-theme",
                        format!("`{name}` is not a syntax theme tern knows"),
                        fix,
                    ));
                }
                spec.syntax_theme = Some(name.to_string());
            }
            "styles" => {
                let DeValue::Table(styles) = value.get_ref() else {
                    return Err(reader.error(
                        value.span(),
                        "styles",
                        "`styles` must be a table".to_string(),
                        "Start the styles with a `[styles]` line".to_string(),
                    ));
                };
                for (name, style) in styles {
                    spec.styles.push(reader.style(name, style)?);
                }
            }
            other => {
                return Err(reader.error(
                    key.span(),
                    other,
                    format!("unknown key `{other}`"),
                    format!(
                        "The top level takes `extends`, `syntax-theme` and the `[styles]` table{}",
                        suggestion(other, &["extends", "syntax-theme", "styles"])
                    ),
                ));
            }
        }
    }
    Ok(spec)
}

/// The text being read, for turning spans into line numbers.
struct Reader<'t> {
    text: &'t str,
}

impl Reader<'_> {
    /// The 1-based line of a byte offset.
    fn line(&self, offset: usize) -> usize {
        let end = offset.min(self.text.len());
        self.text.as_bytes()[..end]
            .iter()
            .filter(|b| **b == b'\n')
            .count()
            + 1
    }

    /// The key written on the line holding `offset`, for errors where TOML could not say.
    fn key_on_line(&self, offset: usize) -> String {
        let line = self.line(offset);
        let text = self.text.lines().nth(line.saturating_sub(1)).unwrap_or("");
        let key = text.split('=').next().unwrap_or("").trim();
        if key.is_empty() {
            "(syntax)".to_string()
        } else {
            key.to_string()
        }
    }

    fn error(&self, span: Range<usize>, key: &str, problem: String, fix: String) -> SpecError {
        SpecError {
            line: self.line(span.start),
            key: key.to_string(),
            problem,
            fix,
        }
    }

    fn string<'v>(
        &self,
        value: &'v Spanned<DeValue<'_>>,
        key: &str,
        fix: &str,
    ) -> Result<&'v str, SpecError> {
        value.get_ref().as_str().ok_or_else(|| {
            self.error(
                value.span(),
                key,
                format!("expected a string, found {}", value.get_ref().type_str()),
                fix.to_string(),
            )
        })
    }

    /// One entry of `[styles]`: a colour alone (the foreground) or a `{ fg, bg, modifiers }`
    /// table.
    fn style(
        &self,
        name: &Spanned<std::borrow::Cow<'_, str>>,
        value: &Spanned<DeValue<'_>>,
    ) -> Result<(&'static str, Style), SpecError> {
        let key_name = name.get_ref().as_ref();
        let Some(key) = Theme::STYLE_KEYS.iter().find(|k| **k == key_name) else {
            return Err(self.error(
                name.span(),
                &format!("styles.{key_name}"),
                format!("there is no style called `{key_name}`"),
                format!(
                    "Remove it{}; the styles are {}",
                    suggestion(key_name, Theme::STYLE_KEYS),
                    Theme::STYLE_KEYS.join(", ")
                ),
            ));
        };
        let path = format!("styles.{key}");
        let style = match value.get_ref() {
            DeValue::Table(fields) => {
                let mut style = Style::new();
                for (field, field_value) in fields {
                    let field_name = field.get_ref().as_ref();
                    let field_path = format!("{path}.{field_name}");
                    match field_name {
                        "fg" => style = style.fg(self.color(field_value, &field_path)?),
                        "bg" => style = style.bg(self.color(field_value, &field_path)?),
                        "modifiers" => {
                            style = style.add_modifier(self.modifiers(field_value, &field_path)?)
                        }
                        other => {
                            return Err(self.error(
                                field.span(),
                                &field_path,
                                format!("unknown field `{other}`"),
                                format!(
                                    "A style takes `fg`, `bg` and `modifiers`{}",
                                    suggestion(other, &["fg", "bg", "modifiers"])
                                ),
                            ));
                        }
                    }
                }
                style
            }
            DeValue::String(_) | DeValue::Integer(_) => Style::new().fg(self.color(value, &path)?),
            other => {
                return Err(self.error(
                    value.span(),
                    &path,
                    format!("expected a colour or a table, found {}", other.type_str()),
                    "Write `key = \"#rrggbb\"` or `key = { fg = \"#rrggbb\", modifiers = [\"bold\"] }`"
                        .to_string(),
                ));
            }
        };
        Ok((key, style))
    }

    fn color(&self, value: &Spanned<DeValue<'_>>, path: &str) -> Result<Color, SpecError> {
        let parsed = match value.get_ref() {
            DeValue::String(s) => parse_color(s),
            DeValue::Integer(i) => u8::from_str_radix(&i.as_str().replace('_', ""), i.radix())
                .ok()
                .map(Color::Indexed),
            _ => None,
        };
        parsed.ok_or_else(|| {
            let shown = match value.get_ref() {
                DeValue::String(s) => format!("`{s}` is not a colour"),
                DeValue::Integer(i) => format!("{i} is not a palette index (0-255)"),
                other => format!("expected a colour, found {}", other.type_str()),
            };
            self.error(value.span(), path, shown, COLOR_FIX.to_string())
        })
    }

    fn modifiers(&self, value: &Spanned<DeValue<'_>>, path: &str) -> Result<Modifier, SpecError> {
        let names: Vec<&str> = MODIFIERS.iter().map(|(n, _)| *n).collect();
        let fix = format!("Use a list of {}", names.join(", "));
        let DeValue::Array(items) = value.get_ref() else {
            return Err(self.error(
                value.span(),
                path,
                format!("expected a list, found {}", value.get_ref().type_str()),
                format!("{fix}, e.g. modifiers = [\"bold\"]"),
            ));
        };
        let mut out = Modifier::empty();
        for item in items {
            let name = self.string(item, path, &fix)?;
            let normal = name.trim().to_ascii_lowercase().replace('_', "-");
            match MODIFIERS.iter().find(|(n, _)| *n == normal) {
                Some((_, m)) => out |= *m,
                None => {
                    return Err(self.error(
                        item.span(),
                        path,
                        format!("unknown modifier `{name}`"),
                        format!("{fix}{}", suggestion(&normal, &names)),
                    ));
                }
            }
        }
        Ok(out)
    }
}

/// A colour from its text: `#rrggbb`, an ANSI name, `reset`, or a palette index in digits.
pub(super) fn parse_color(text: &str) -> Option<Color> {
    let text = text.trim().to_ascii_lowercase().replace('_', "-");
    if let Some(hex) = text.strip_prefix('#') {
        if hex.len() != 6 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
            return None;
        }
        let value = u32::from_str_radix(hex, 16).ok()?;
        return Some(Color::from_u32(value));
    }
    if let Ok(index) = text.parse::<u8>() {
        return Some(Color::Indexed(index));
    }
    let color = match text.as_str() {
        "reset" | "default" => Color::Reset,
        "black" => Color::Black,
        "red" => Color::Red,
        "green" => Color::Green,
        "yellow" => Color::Yellow,
        "blue" => Color::Blue,
        "magenta" => Color::Magenta,
        "cyan" => Color::Cyan,
        "white" => Color::Gray,
        "bright-black" => Color::DarkGray,
        "bright-red" => Color::LightRed,
        "bright-green" => Color::LightGreen,
        "bright-yellow" => Color::LightYellow,
        "bright-blue" => Color::LightBlue,
        "bright-magenta" => Color::LightMagenta,
        "bright-cyan" => Color::LightCyan,
        "bright-white" => Color::White,
        _ => return None,
    };
    Some(color)
}

/// `" (did you mean `x`?)"` when a candidate is a small edit away, else nothing.
fn suggestion(word: &str, candidates: &[&str]) -> String {
    candidates
        .iter()
        .map(|c| (edit_distance(word, c), *c))
        .filter(|(d, c)| *d <= 2.max(c.len() / 4))
        .min()
        .map(|(_, c)| format!(" (did you mean `{c}`?)"))
        .unwrap_or_default()
}

fn quoted_list(items: &[&str]) -> String {
    items
        .iter()
        .map(|s| format!("\"{s}\""))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Levenshtein distance over characters; the inputs are short key names.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut current = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous[j] + usize::from(ca != *cb);
            current[j + 1] = substitution.min(previous[j + 1] + 1).min(current[j] + 1);
        }
        previous = current;
    }
    previous[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check_error(text: &str, line: usize, key: &str, problem_has: &str) {
        let error = parse(text).expect_err("the file should be refused");
        assert_eq!(error.line, line, "{error:?}");
        assert_eq!(error.key, key, "{error:?}");
        assert!(
            error.problem.contains(problem_has),
            "problem {:?} should mention {problem_has:?}",
            error.problem
        );
        assert!(!error.fix.is_empty());
    }

    #[test]
    fn colours_in_every_notation() {
        assert_eq!(parse_color("#ff8000"), Some(Color::Rgb(255, 128, 0)));
        assert_eq!(parse_color("#FF8000"), Some(Color::Rgb(255, 128, 0)));
        assert_eq!(parse_color("red"), Some(Color::Red));
        assert_eq!(parse_color("Bright_Black"), Some(Color::DarkGray));
        assert_eq!(parse_color("white"), Some(Color::Gray));
        assert_eq!(parse_color("bright-white"), Some(Color::White));
        assert_eq!(parse_color("reset"), Some(Color::Reset));
        assert_eq!(parse_color("42"), Some(Color::Indexed(42)));
        assert_eq!(parse_color("#fff"), None);
        assert_eq!(parse_color("#gg0000"), None);
        assert_eq!(parse_color("256"), None);
        assert_eq!(parse_color("purple"), None);
        assert_eq!(parse_color("#ÿÿÿÿÿÿ"), None);
    }

    #[test]
    fn styles_as_colour_or_table() {
        let spec = parse(
            "extends = \"light\"\nsyntax-theme = \"InspiredGitHub\"\n[styles]\naccent = \"#010203\"\n\
             dim = 8\nerror = { fg = \"red\", bg = 0x10, modifiers = [\"bold\", \"Underline\"] }\n",
        )
        .expect("valid file");
        assert_eq!(
            spec.extends.map(|e| (e.value, e.line)),
            Some(("light".to_string(), 1))
        );
        assert_eq!(spec.syntax_theme.as_deref(), Some("InspiredGitHub"));
        assert_eq!(
            spec.styles,
            vec![
                ("accent", Style::new().fg(Color::Rgb(1, 2, 3))),
                ("dim", Style::new().fg(Color::Indexed(8))),
                (
                    "error",
                    Style::new()
                        .fg(Color::Red)
                        .bg(Color::Indexed(16))
                        .add_modifier(Modifier::BOLD | Modifier::UNDERLINED)
                ),
            ]
        );
    }

    #[test]
    fn errors_name_line_key_and_fix() {
        check_error(
            "[styles]\naccent = \"#12345\"\n",
            2,
            "styles.accent",
            "`#12345`",
        );
        check_error(
            "[styles]\n\nacent = \"red\"\n",
            3,
            "styles.acent",
            "no style",
        );
        check_error(
            "[styles]\nerror = { fg = \"red\", modifiers = [\"blod\"] }\n",
            2,
            "styles.error.modifiers",
            "`blod`",
        );
        check_error(
            "[styles]\nerror = { colour = \"red\" }\n",
            2,
            "styles.error.colour",
            "unknown field",
        );
        check_error("[styles]\ndim = 300\n", 2, "styles.dim", "0-255");
        check_error("[styles]\ndim = true\n", 2, "styles.dim", "boolean");
        check_error(
            "[styles]\ndim = { modifiers = \"bold\" }\n",
            2,
            "styles.dim.modifiers",
            "list",
        );
        check_error(
            "syntax-theme = \"Monokai\"\n",
            1,
            "syntax-theme",
            "`Monokai`",
        );
        check_error("syntax-theme = 3\n", 1, "syntax-theme", "expected a string");
        check_error("\n\ncolours = 1\n", 3, "colours", "unknown key");
        check_error("styles = 1\n", 1, "styles", "must be a table");
        check_error("[styles]\naccent = \n", 2, "accent", "not valid TOML");
        check_error("[styles\n", 1, "[styles", "not valid TOML");
    }

    #[test]
    fn suggestions_for_near_misses() {
        let error = parse("[styles]\nacent = \"red\"\n").expect_err("unknown key");
        assert!(
            error.fix.contains("did you mean `accent`?"),
            "{}",
            error.fix
        );
        let error = parse("[styles]\nerror = { fgg = \"red\" }\n").expect_err("unknown field");
        assert!(error.fix.contains("did you mean `fg`?"), "{}", error.fix);
        assert_eq!(suggestion("zzzzzz", &["fg", "bg"]), "");
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("", "abc"), 3);
    }
}
