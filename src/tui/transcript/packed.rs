//! A cell's laid-out lines packed for keeping off screen: all their text in one string and
//! each span as where it ends and its style, about a third of what the lines themselves
//! take. Unpacking is a copy, with no wrapping or highlighting to do again, so a reply of
//! thousands of lines scrolled back into view draws at once rather than being laid out anew.

use ratatui::layout::Alignment;
use ratatui::style::Style;
use ratatui::text::{Line, Span};

#[derive(Debug, Clone, Default)]
pub struct Packed {
    text: String,
    /// Each span: the end of its text in `text`, and its style.
    spans: Vec<(u32, Style)>,
    lines: Vec<PackedLine>,
}

#[derive(Debug, Clone)]
struct PackedLine {
    style: Style,
    alignment: Option<Alignment>,
    /// The end of its spans in `spans`.
    spans_end: u32,
}

impl Packed {
    /// `lines` packed; `None` when their text is beyond what the offsets can address (4 GiB).
    pub fn pack(lines: &[Line<'static>]) -> Option<Self> {
        let mut packed = Packed {
            text: String::with_capacity(
                lines
                    .iter()
                    .flat_map(|l| &l.spans)
                    .map(|s| s.content.len())
                    .sum(),
            ),
            spans: Vec::with_capacity(lines.iter().map(|l| l.spans.len()).sum()),
            lines: Vec::with_capacity(lines.len()),
        };
        for line in lines {
            for span in &line.spans {
                packed.text.push_str(&span.content);
                let end = u32::try_from(packed.text.len()).ok()?;
                packed.spans.push((end, span.style));
            }
            packed.lines.push(PackedLine {
                style: line.style,
                alignment: line.alignment,
                spans_end: u32::try_from(packed.spans.len()).ok()?,
            });
        }
        Some(packed)
    }

    /// The lines as they were packed.
    pub fn unpack(&self) -> Vec<Line<'static>> {
        let mut out = Vec::with_capacity(self.lines.len());
        let (mut span, mut at) = (0usize, 0usize);
        for line in &self.lines {
            let end = line.spans_end as usize;
            let spans = self.spans[span..end]
                .iter()
                .map(|&(stop, style)| {
                    let stop = stop as usize;
                    let content = self.text[at..stop].to_owned();
                    at = stop;
                    Span::styled(content, style)
                })
                .collect();
            span = end;
            out.push(Line {
                style: line.style,
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
}
