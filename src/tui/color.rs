//! How many colours the terminal can show, and how a theme's colours are brought down to that.
//!
//! Themes are written in 24-bit colour. A terminal that only knows the xterm 256-colour palette
//! gets the nearest palette entry; one that only knows the 16 ANSI colours gets the ANSI colour
//! of the same hue, so that a muted red stays red rather than turning into the grey that is
//! nearest in plain RGB distance; one with no colour at all (`NO_COLOR`, `TERM=dumb`) keeps
//! only the modifiers (bold, italic, reversed, underlined), which the built-in themes use to
//! stay legible without colour.

use ratatui::style::{Color, Style};

/// The colour capability of a terminal, from richest to none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ColorDepth {
    /// 24-bit RGB colour.
    #[default]
    TrueColor,
    /// The xterm 256-colour palette.
    Ansi256,
    /// The 16 ANSI colours, whose exact shades the terminal's own palette decides.
    Ansi16,
    /// No colour: modifiers only.
    NoColor,
}

impl ColorDepth {
    /// Decides the depth from environment variables read through `env` (pass
    /// `|k| std::env::var(k).ok()` in the app, a map in tests).
    ///
    /// `NO_COLOR` set to anything non-empty wins (no-color.org), then `TERM=dumb`; then
    /// `COLORTERM=truecolor|24bit` or a `TERM` ending in `-direct` means 24-bit, a `TERM`
    /// naming `256color` the 256 palette, and anything else the 16 ANSI colours.
    pub fn detect(env: impl Fn(&str) -> Option<String>) -> ColorDepth {
        if env("NO_COLOR").is_some_and(|v| !v.is_empty()) {
            return ColorDepth::NoColor;
        }
        let term = env("TERM").unwrap_or_default().to_ascii_lowercase();
        if term == "dumb" {
            return ColorDepth::NoColor;
        }
        let colorterm = env("COLORTERM").unwrap_or_default().to_ascii_lowercase();
        if colorterm == "truecolor" || colorterm == "24bit" || term.ends_with("-direct") {
            return ColorDepth::TrueColor;
        }
        if term.contains("256color") {
            return ColorDepth::Ansi256;
        }
        ColorDepth::Ansi16
    }

    /// A colour as this depth can show it; `None` means "leave the terminal's default".
    pub fn color(self, color: Color) -> Option<Color> {
        match self {
            ColorDepth::TrueColor => Some(color),
            ColorDepth::NoColor => None,
            ColorDepth::Ansi256 => Some(match color {
                Color::Rgb(r, g, b) => Color::Indexed(nearest_xterm256(r, g, b)),
                other => other,
            }),
            ColorDepth::Ansi16 => Some(match color {
                Color::Rgb(r, g, b) => nearest_ansi16(r, g, b),
                Color::Indexed(i) if i < 16 => ANSI16[usize::from(i)],
                Color::Indexed(i) => {
                    let (r, g, b) = xterm256_rgb(i);
                    nearest_ansi16(r, g, b)
                }
                other => other,
            }),
        }
    }

    /// A style with its colours brought down to this depth; modifiers are kept as they are.
    pub fn style(self, style: Style) -> Style {
        let mut out = style;
        out.fg = style.fg.and_then(|c| self.color(c));
        out.bg = style.bg.and_then(|c| self.color(c));
        out
    }
}

/// The 16 ANSI colours in palette order, as ratatui names them (ratatui's `Gray` is ANSI
/// white, `DarkGray` bright black and `White` bright white).
const ANSI16: [Color; 16] = [
    Color::Black,
    Color::Red,
    Color::Green,
    Color::Yellow,
    Color::Blue,
    Color::Magenta,
    Color::Cyan,
    Color::Gray,
    Color::DarkGray,
    Color::LightRed,
    Color::LightGreen,
    Color::LightYellow,
    Color::LightBlue,
    Color::LightMagenta,
    Color::LightCyan,
    Color::White,
];

/// xterm's default shades for the 16 system colours, used only to place an index 0–15 when
/// it has to be converted to RGB; real terminals vary.
const ANSI16_RGB: [(u8, u8, u8); 16] = [
    (0, 0, 0),
    (205, 0, 0),
    (0, 205, 0),
    (205, 205, 0),
    (0, 0, 238),
    (205, 0, 205),
    (0, 205, 205),
    (229, 229, 229),
    (127, 127, 127),
    (255, 0, 0),
    (0, 255, 0),
    (255, 255, 0),
    (92, 92, 255),
    (255, 0, 255),
    (0, 255, 255),
    (255, 255, 255),
];

/// The channel levels of the xterm 6×6×6 colour cube (indexes 16–231).
const CUBE_LEVELS: [u8; 6] = [0, 95, 135, 175, 215, 255];

/// The RGB value of an xterm-256 palette index.
pub fn xterm256_rgb(index: u8) -> (u8, u8, u8) {
    match index {
        0..=15 => ANSI16_RGB[usize::from(index)],
        16..=231 => {
            let i = index - 16;
            (
                CUBE_LEVELS[usize::from(i / 36)],
                CUBE_LEVELS[usize::from(i / 6 % 6)],
                CUBE_LEVELS[usize::from(i % 6)],
            )
        }
        _ => {
            let v = 8 + 10 * (index - 232);
            (v, v, v)
        }
    }
}

/// The nearest xterm-256 index to an RGB colour, from the colour cube or the grey ramp.
///
/// The 16 system colours are left out on purpose: their shades are whatever the user's
/// terminal palette says, so "nearest" would be a guess; the cube and ramp are fixed.
pub fn nearest_xterm256(r: u8, g: u8, b: u8) -> u8 {
    let level = |c: u8| -> usize {
        let mut best = 0;
        for (i, l) in CUBE_LEVELS.iter().enumerate() {
            if c.abs_diff(*l) < c.abs_diff(CUBE_LEVELS[best]) {
                best = i;
            }
        }
        best
    };
    let (ri, gi, bi) = (level(r), level(g), level(b));
    // At most 16 + 5·36 + 5·6 + 5 = 231, so the cast cannot truncate.
    let cube_index = (16 + 36 * ri + 6 * gi + bi) as u8;
    let cube = (CUBE_LEVELS[ri], CUBE_LEVELS[gi], CUBE_LEVELS[bi]);

    let mean = (u16::from(r) + u16::from(g) + u16::from(b)) / 3;
    // The ramp runs 8, 18, …, 238 in steps of 10.
    let step = (mean.saturating_sub(3) / 10).min(23) as u8;
    let grey_index = 232 + step;
    let grey = xterm256_rgb(grey_index);

    if distance((r, g, b), grey) < distance((r, g, b), cube) {
        grey_index
    } else {
        cube_index
    }
}

/// The ANSI colour of the same hue and brightness class as an RGB colour.
///
/// Plain RGB distance to xterm's 16 shades sends most muted theme colours (a soft red, a
/// pastel green) to grey, which loses the meaning a diff or an error colour carries; going
/// by hue keeps red red.
pub fn nearest_ansi16(r: u8, g: u8, b: u8) -> Color {
    let max = r.max(g).max(b);
    let min = r.min(g).min(b);
    let chroma = max - min;
    let lightness = (u16::from(max) + u16::from(min)) / 2;
    if chroma < 30 {
        return match lightness {
            0..64 => Color::Black,
            64..150 => Color::DarkGray,
            150..220 => Color::Gray,
            _ => Color::White,
        };
    }
    let (rf, gf, bf) = (f32::from(r), f32::from(g), f32::from(b));
    let c = f32::from(chroma);
    let hue = if max == r {
        60.0 * ((gf - bf) / c).rem_euclid(6.0)
    } else if max == g {
        60.0 * ((bf - rf) / c + 2.0)
    } else {
        60.0 * ((rf - gf) / c + 4.0)
    };
    // Sector 0 is red (330°–30°), then yellow, green, cyan, blue, magenta.
    let sector = (((hue + 30.0) / 60.0) as usize) % 6;
    // Fully saturated primaries (#ff0000) are xterm's bright shades; pastels are bright too.
    let bright = max >= 240 || lightness > 160;
    match (sector, bright) {
        (0, false) => Color::Red,
        (0, true) => Color::LightRed,
        (1, false) => Color::Yellow,
        (1, true) => Color::LightYellow,
        (2, false) => Color::Green,
        (2, true) => Color::LightGreen,
        (3, false) => Color::Cyan,
        (3, true) => Color::LightCyan,
        (4, false) => Color::Blue,
        (4, true) => Color::LightBlue,
        (_, false) => Color::Magenta,
        (_, true) => Color::LightMagenta,
    }
}

/// Squared Euclidean distance in RGB: crude, but enough to choose between the two
/// candidates (cube and ramp) that are already close.
fn distance(a: (u8, u8, u8), b: (u8, u8, u8)) -> u32 {
    let d = |x: u8, y: u8| u32::from(x.abs_diff(y)).pow(2);
    d(a.0, b.0) + d(a.1, b.1) + d(a.2, b.2)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use ratatui::style::Modifier;

    use super::*;

    fn detect(vars: &[(&str, &str)]) -> ColorDepth {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        ColorDepth::detect(|k| map.get(k).cloned())
    }

    #[test]
    fn detect_follows_no_color_term_and_colorterm() {
        assert_eq!(detect(&[]), ColorDepth::Ansi16);
        assert_eq!(
            detect(&[("NO_COLOR", "1"), ("COLORTERM", "truecolor")]),
            ColorDepth::NoColor
        );
        // An empty NO_COLOR does not count (no-color.org).
        assert_eq!(
            detect(&[("NO_COLOR", ""), ("TERM", "xterm-256color")]),
            ColorDepth::Ansi256
        );
        assert_eq!(
            detect(&[("TERM", "dumb"), ("COLORTERM", "truecolor")]),
            ColorDepth::NoColor
        );
        assert_eq!(
            detect(&[("TERM", "xterm"), ("COLORTERM", "24bit")]),
            ColorDepth::TrueColor
        );
        assert_eq!(
            detect(&[("TERM", "xterm"), ("COLORTERM", "TrueColor")]),
            ColorDepth::TrueColor
        );
        assert_eq!(detect(&[("TERM", "xterm-direct")]), ColorDepth::TrueColor);
        assert_eq!(detect(&[("TERM", "screen-256color")]), ColorDepth::Ansi256);
        assert_eq!(detect(&[("TERM", "linux")]), ColorDepth::Ansi16);
    }

    #[test]
    fn xterm256_palette_round_trips_through_nearest() {
        for index in 16..=255u8 {
            let (r, g, b) = xterm256_rgb(index);
            let back = nearest_xterm256(r, g, b);
            // Cube greys (16, 59, 102, …) and ramp greys can coincide in value; either is right.
            assert_eq!(xterm256_rgb(back), (r, g, b), "index {index}");
        }
    }

    #[test]
    fn nearest_xterm256_picks_cube_or_ramp() {
        assert_eq!(nearest_xterm256(255, 0, 0), 196);
        assert_eq!(nearest_xterm256(0, 0, 0), 16);
        assert_eq!(nearest_xterm256(128, 128, 128), 244);
        assert_eq!(nearest_xterm256(0x2b, 0x30, 0x3b), 236);
    }

    #[test]
    fn nearest_ansi16_keeps_hue_of_muted_colours() {
        assert_eq!(nearest_ansi16(0xbf, 0x61, 0x6a), Color::Red);
        assert_eq!(nearest_ansi16(0xa3, 0xbe, 0x8c), Color::LightGreen);
        assert_eq!(nearest_ansi16(0x00, 0xaf, 0x00), Color::Green);
        assert_eq!(nearest_ansi16(0xff, 0x55, 0x55), Color::LightRed);
        assert_eq!(nearest_ansi16(0x8f, 0xa1, 0xb3), Color::LightBlue);
        assert_eq!(nearest_ansi16(0x00, 0x00, 0xcd), Color::Blue);
        assert_eq!(nearest_ansi16(0xeb, 0xcb, 0x8b), Color::LightYellow);
        assert_eq!(nearest_ansi16(0xb4, 0x8e, 0xad), Color::LightMagenta);
        assert_eq!(nearest_ansi16(0, 0, 0), Color::Black);
        assert_eq!(nearest_ansi16(0xc0, 0xc5, 0xce), Color::Gray);
        assert_eq!(nearest_ansi16(0xff, 0xff, 0xff), Color::White);
        assert_eq!(nearest_ansi16(0x65, 0x73, 0x7e), Color::DarkGray);
    }

    #[test]
    fn style_mapping_per_depth() {
        let style = Style::new()
            .fg(Color::Rgb(255, 0, 0))
            .bg(Color::Indexed(236))
            .add_modifier(Modifier::BOLD | Modifier::REVERSED);
        assert_eq!(ColorDepth::TrueColor.style(style), style);
        let s256 = ColorDepth::Ansi256.style(style);
        assert_eq!(s256.fg, Some(Color::Indexed(196)));
        assert_eq!(s256.bg, Some(Color::Indexed(236)));
        let s16 = ColorDepth::Ansi16.style(style);
        assert_eq!(s16.fg, Some(Color::LightRed));
        assert_eq!(s16.bg, Some(Color::Black));
        let none = ColorDepth::NoColor.style(style);
        assert_eq!((none.fg, none.bg), (None, None));
        assert_eq!(none.add_modifier, Modifier::BOLD | Modifier::REVERSED);
        // Named colours and the reset survive the ANSI depths untouched.
        assert_eq!(ColorDepth::Ansi16.color(Color::Reset), Some(Color::Reset));
        assert_eq!(
            ColorDepth::Ansi256.color(Color::LightBlue),
            Some(Color::LightBlue)
        );
        assert_eq!(
            ColorDepth::Ansi16.color(Color::Indexed(9)),
            Some(Color::LightRed)
        );
    }
}
