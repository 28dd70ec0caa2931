//! A cell's laid-out lines packed for keeping off screen: all their text in one string, each
//! span as where it ends and which of the cell's few styles it has, each line as where its
//! spans end; a fraction of what the lines themselves take. Unpacking is a copy, with no
//! wrapping or highlighting to do again, so a reply of thousands of lines scrolled back into
//! view draws at once rather than being laid out anew.

use ratatui::layout::Alignment;
use ratatui::style::Style;
use ratatui::text::{Line, Span};

#[derive(Debug, Clone, Default)]
pub struct Packed {
    text: String,
    /// The distinct styles of the spans and lines, which refer to them by place.
    styles: Vec<Style>,
    /// Each span: the end of its text in `text`, and its style's place in `styles`.
    spans: Vec<(u32, u16)>,
    lines: Vec<PackedLine>,
}

#[derive(Debug, Clone)]
struct PackedLine {
    /// Its style's place in `styles`.
    style: u16,
    alignment: Option<Alignment>,
    /// The end of its spans in `spans`.
    spans_end: u32,
}

impl Packed {
    /// `lines` packed; `None` when their text is beyond what the offsets can address (4 GiB)
    /// or they hold more styles than a place can name.
    pub fn pack(lines: &[Line<'static>]) -> Option<Self> {
        let mut packed = Packed {
            text: String::with_capacity(
                lines
                    .iter()
                    .flat_map(|l| &l.spans)
                    .map(|s| s.content.len())
                    .sum(),
            ),
            styles: Vec::new(),
            spans: Vec::with_capacity(lines.iter().map(|l| l.spans.len()).sum()),
            lines: Vec::with_capacity(lines.len()),
        };
        // Styles seen so far, by their place: a cell has a few dozen at most.
        let mut places = std::collections::HashMap::new();
        let mut place_of = |styles: &mut Vec<Style>, style: Style| -> Option<u16> {
            if let Some(&place) = places.get(&style) {
                return Some(place);
            }
            let place = u16::try_from(styles.len()).ok()?;
            styles.push(style);
            places.insert(style, place);
            Some(place)
        };
        for line in lines {
            for span in &line.spans {
                packed.text.push_str(&span.content);
                let end = u32::try_from(packed.text.len()).ok()?;
                let style = place_of(&mut packed.styles, span.style)?;
                packed.spans.push((end, style));
            }
            packed.lines.push(PackedLine {
                style: place_of(&mut packed.styles, line.style)?,
                alignment: line.alignment,
                spans_end: u32::try_from(packed.spans.len()).ok()?,
            });
        }
        packed.styles.shrink_to_fit();
        Some(packed)
    }

    /// The lines as they were packed.
    pub fn unpack(&self) -> Vec<Line<'static>> {
        let style = |place: u16| self.styles[usize::from(place)];
        let mut out = Vec::with_capacity(self.lines.len());
        let (mut span, mut at) = (0usize, 0usize);
        for line in &self.lines {
            let end = line.spans_end as usize;
            let spans = self.spans[span..end]
                .iter()
                .map(|&(stop, place)| {
                    let stop = stop as usize;
                    let content = self.text[at..stop].to_owned();
                    at = stop;
                    Span::styled(content, style(place))
                })
                .collect();
            span = end;
            out.push(Line {
                style: style(line.style),
                alignment: line.alignment,
                spans,
            });
        }
        out
    }

    /// How many lines it holds.
    pub fn len(&self) -> usize {
        self.lines.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::style::{Color, Modifier};

    #[test]
    fn lines_unpack_as_they_were_packed() {
        let lines = vec![
            Line::from(vec![
                Span::styled("• ", Style::default().fg(Color::DarkGray)),
                Span::styled("let", Style::default().add_modifier(Modifier::BOLD)),
                Span::raw(" v = 漢字;"),
            ]),
            Line::default(),
            Line::from(Span::raw("")).alignment(Alignment::Right),
            Line::styled("whole line", Style::default().bg(Color::Rgb(1, 2, 3))),
        ];
        let packed = Packed::pack(&lines).expect("packed");
        assert_eq!(packed.len(), 4);
        assert_eq!(packed.unpack(), lines);
        assert_eq!(
            Packed::pack(&[]).expect("packed").unpack(),
            Vec::<Line>::new()
        );
    }

    #[test]
    fn lines_of_more_styles_than_a_place_can_name_are_not_packed() {
        let colour = |n: u32| Color::Rgb((n >> 16) as u8, (n >> 8) as u8, n as u8);
        let line = |from: u32| -> Line<'static> {
            (from..from + 1000)
                .map(|n| Span::styled("x", Style::default().fg(colour(n))))
                .collect::<Vec<_>>()
                .into()
        };
        let few: Vec<_> = (0..60).map(|n| line(n * 1000)).collect();
        assert_eq!(Packed::pack(&few).expect("packed").unpack(), few);
        let many: Vec<_> = (0..70).map(|n| line(n * 1000)).collect();
        assert!(Packed::pack(&many).is_none());
    }
}
