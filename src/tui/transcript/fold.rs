//! A diff folded to what a transcript cell shows, made without laying out the rest: a
//! `file_write` of megabytes costs a cell no more than its first lines (collapsed) or its
//! first and last lines (open, past [`MAX_OUTPUT_LINES`]).

use super::cell::{COLLAPSED_DIFF_LINES, MAX_OUTPUT_LINES, View};

/// A diff cut to what a cell shows: its head, and when open and long its tail, with the
/// count of the lines in between; `total` is the whole diff's line count.
pub struct Folded {
    pub head: String,
    /// The lines in `head`.
    pub head_lines: usize,
    pub tail: String,
    pub hidden: usize,
    pub total: usize,
}

impl Folded {
    /// `diff` as shown in `view`: collapsed, its first lines; open, all of it up to
    /// [`MAX_OUTPUT_LINES`], past that its first and last halves of them.
    pub fn of(diff: &str, view: View) -> Self {
        Self::from_lines(diff.lines(), diff.lines().count(), "", view)
    }

    /// The same for a diff given as `prefix` and then `count` lines, made on the way.
    fn from_lines<'a>(
        lines: impl DoubleEndedIterator<Item = &'a str> + Clone,
        count: usize,
        prefix: &str,
        view: View,
    ) -> Self {
        let joined = |lines: &mut dyn Iterator<Item = &'a str>| {
            let mut out = String::new();
            for line in lines {
                out.push_str(prefix);
                out.push_str(line);
                out.push('\n');
            }
            out
        };
        let keep = if view.tools_open {
            MAX_OUTPUT_LINES
        } else {
            COLLAPSED_DIFF_LINES
        };
        if count <= keep || !view.tools_open {
            return Self {
                head: joined(&mut lines.take(keep)),
                head_lines: count.min(keep),
                tail: String::new(),
                hidden: 0,
                total: count,
            };
        }
        let tail_len = keep / 2;
        let mut tail: Vec<&str> = lines.clone().rev().take(tail_len).collect();
        tail.reverse();
        Self {
            head: joined(&mut lines.take(keep - tail_len)),
            head_lines: keep - tail_len,
            tail: joined(&mut tail.into_iter()),
            hidden: count - keep,
            total: count,
        }
    }
}

/// What `file_write` wrote, as a diff that adds every line, folded as shown in `view`.
pub fn written_as_diff(input: &serde_json::Value, view: View) -> Option<Folded> {
    let path = input.get("path")?.as_str()?;
    let content = input.get("content")?.as_str()?;
    let count = content.lines().count();
    let header = format!("+++ b/{path}\n@@ -0,0 +1,{count} @@\n");
    let mut folded = Folded::from_lines(content.lines(), count, "+", view);
    folded.head.insert_str(0, &header);
    folded.head_lines += 2;
    folded.total += 2;
    Some(folded)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open() -> View {
        View {
            tools_open: true,
            ..View::default()
        }
    }

    fn content(lines: usize) -> serde_json::Value {
        let text: String = (1..=lines).map(|n| format!("line {n}\n")).collect();
        serde_json::json!({"path": "big.txt", "content": text})
    }

    #[test]
    fn a_large_write_collapsed_is_made_of_its_first_lines_only() {
        let folded = written_as_diff(&content(60_000), View::default()).unwrap();
        assert_eq!(folded.head.lines().count(), 2 + COLLAPSED_DIFF_LINES);
        assert!(
            folded
                .head
                .starts_with("+++ b/big.txt\n@@ -0,0 +1,60000 @@\n+line 1\n")
        );
        assert_eq!(
            (folded.head_lines, folded.total),
            (2 + COLLAPSED_DIFF_LINES, 60_002)
        );
        assert!(folded.tail.is_empty());
    }

    #[test]
    fn a_large_write_open_keeps_its_first_and_last_lines() {
        let folded = written_as_diff(&content(60_000), open()).unwrap();
        let half = MAX_OUTPUT_LINES / 2;
        assert_eq!(folded.head.lines().count(), 2 + half);
        assert_eq!(folded.tail.lines().count(), half);
        assert!(folded.tail.ends_with("+line 60000\n"));
        assert!(
            folded
                .tail
                .starts_with(&format!("+line {}\n", 60_000 - half + 1))
        );
        assert_eq!(folded.hidden, 60_000 - MAX_OUTPUT_LINES);
    }

    #[test]
    fn a_short_diff_is_kept_whole() {
        let diff = "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n";
        let folded = Folded::of(diff, open());
        assert_eq!(folded.head, diff);
        assert_eq!((folded.total, folded.hidden), (5, 0));
        assert!(folded.tail.is_empty());
    }
}
