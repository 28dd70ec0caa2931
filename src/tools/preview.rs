//! What a person asked to approve a call is shown: a one-line summary and the detail (the
//! command, the diff a change would make), worked out by the tool without side effects.

use super::output::{cap_head_tail, group_digits};
use crate::domain::ApprovalDetail;
use similar::TextDiff;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

/// A diff shown for approval is capped at this many bytes, head and tail kept.
pub const MAX_PREVIEW_DIFF_BYTES: usize = 32 * 1024;

/// How a tool describes one of its calls to the person deciding on it.
#[derive(Debug, Clone, PartialEq)]
pub struct Preview {
    /// One line, such as "Run `cargo test`" or "Edit src/main.rs".
    pub summary: String,
    pub detail: ApprovalDetail,
}

/// A boxed future of a preview, so that `Tool` stays object-safe.
pub type PreviewFuture<'a> = Pin<Box<dyn Future<Output = Option<Preview>> + Send + 'a>>;

/// A unified diff with `a/` and `b/` headers (an absolute path stands as it is) and three
/// lines of context; `before` is `None` for a file that does not exist yet (the diff is then
/// from `/dev/null`).
pub(crate) fn unified_diff(before: Option<&[u8]>, after: &[u8], shown: &str) -> String {
    diff_within(before, after, shown, Duration::from_secs(2))
}

/// How long the diff a person is shown may take: past it the diff is coarser (whole runs of
/// lines replaced) but still right, so the box shows up at once even for a file of megabytes.
const PREVIEW_DIFF_WITHIN: Duration = Duration::from_millis(150);

/// The diff a change would make as a person deciding on it is shown: the text capped (head
/// and tail kept, [`MAX_PREVIEW_DIFF_BYTES`]), the lines added and removed counted over all of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DiffPreview {
    pub text: String,
    pub added: usize,
    pub removed: usize,
}

impl DiffPreview {
    /// `summary` with the counts: `Replace src/x.rs (+12 -3 lines)`.
    pub fn summarise(&self, summary: &str) -> String {
        let lines = match self.added + self.removed {
            1 => "line",
            _ => "lines",
        };
        format!(
            "{summary} (+{} -{} {lines})",
            group_digits(self.added as u64),
            group_digits(self.removed as u64)
        )
    }
}

/// [`unified_diff`] for a preview: bounded in time and in size, counted whole.
pub(crate) fn diff_preview(before: Option<&[u8]>, after: &[u8], shown: &str) -> DiffPreview {
    let diff = diff_within(before, after, shown, PREVIEW_DIFF_WITHIN);
    let (added, removed) = changed_lines(&diff);
    DiffPreview {
        text: capped_diff(&diff),
        added,
        removed,
    }
}

/// The lines a unified diff adds and removes. Each hunk's header says how many old and new
/// lines it holds, so a changed line that itself starts with `--- ` is not taken for a file's
/// header.
fn changed_lines(diff: &str) -> (usize, usize) {
    let (mut added, mut removed) = (0, 0);
    let (mut old_left, mut new_left) = (0u64, 0u64);
    for line in diff.lines() {
        if old_left == 0 && new_left == 0 {
            if let Some((old, new)) = hunk_sizes(line) {
                (old_left, new_left) = (old, new);
            }
            continue;
        }
        match line.as_bytes().first() {
            Some(b'+') => {
                added += 1;
                new_left = new_left.saturating_sub(1);
            }
            Some(b'-') => {
                removed += 1;
                old_left = old_left.saturating_sub(1);
            }
            // "\ No newline at end of file" belongs to the line before it.
            Some(b'\\') => {}
            _ => {
                old_left = old_left.saturating_sub(1);
                new_left = new_left.saturating_sub(1);
            }
        }
    }
    (added, removed)
}

/// The old and new line counts of a hunk header, `@@ -1,3 +1,4 @@` (a count left out is 1).
fn hunk_sizes(line: &str) -> Option<(u64, u64)> {
    let ranges = line.strip_prefix("@@ -")?;
    let (old, rest) = ranges.split_once(" +")?;
    let (new, _) = rest.split_once(" @@")?;
    let count = |range: &str| match range.split_once(',') {
        Some((_, count)) => count.parse().ok(),
        None => Some(1),
    };
    Some((count(old)?, count(new)?))
}

fn diff_within(before: Option<&[u8]>, after: &[u8], shown: &str, within: Duration) -> String {
    let old = String::from_utf8_lossy(before.unwrap_or_default());
    let new = String::from_utf8_lossy(after);
    let side = |prefix: &str| match shown.starts_with('/') {
        true => shown.to_owned(),
        false => format!("{prefix}/{shown}"),
    };
    let old_header = match before {
        Some(_) => side("a"),
        None => "/dev/null".to_owned(),
    };
    TextDiff::configure()
        // Bounded so a pathological file cannot stall the tool; past it the diff is coarser.
        .timeout(within)
        .diff_lines(old.as_ref(), new.as_ref())
        .unified_diff()
        .context_radius(3)
        .header(&old_header, &side("b"))
        .to_string()
}

/// `diff` capped for showing to a person.
fn capped_diff(diff: &str) -> String {
    cap_head_tail(diff, MAX_PREVIEW_DIFF_BYTES)
}

/// Runs blocking preview work (reading the file a change would touch) off the async threads.
pub(crate) async fn blocking<F>(work: F) -> Option<Preview>
where
    F: FnOnce() -> Option<Preview> + Send + 'static,
{
    tokio::task::spawn_blocking(work).await.ok().flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_preview_counts_every_line_of_a_diff_it_caps() {
        let content: String = (0..60_000).map(|i| format!("line {i}\n")).collect();
        let preview = diff_preview(None, content.as_bytes(), "big.txt");
        assert_eq!((preview.added, preview.removed), (60_000, 0));
        assert!(preview.text.len() <= MAX_PREVIEW_DIFF_BYTES + 200);
        assert!(
            preview
                .text
                .starts_with("--- /dev/null\n+++ b/big.txt\n@@ -0,0 +1,60000 @@\n+line 0\n")
        );
        assert!(
            preview.text.ends_with("+line 59999\n"),
            "the last lines are kept"
        );
        assert_eq!(
            preview.summarise("Create big.txt"),
            "Create big.txt (+60,000 -0 lines)"
        );
    }

    #[test]
    fn changed_lines_that_look_like_headers_are_counted() {
        let preview = diff_preview(Some(b"--- a\nkeep\n"), b"+++ b\nkeep\n", "n.txt");
        assert_eq!((preview.added, preview.removed), (1, 1));
        let two_files = "--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n--- old\n+++ new\n same\n\
                         --- a/y\n+++ b/y\n@@ -3 +3,2 @@\n keep\n+one\n";
        assert_eq!(changed_lines(two_files), (2, 1));
        assert_eq!(
            preview.summarise("Replace n.txt"),
            "Replace n.txt (+1 -1 lines)"
        );
    }

    #[test]
    fn a_new_file_is_diffed_from_dev_null() {
        let diff = unified_diff(None, b"one\ntwo\n", "n.txt");
        assert_eq!(
            diff,
            "--- /dev/null\n+++ b/n.txt\n@@ -0,0 +1,2 @@\n+one\n+two\n"
        );
    }

    #[test]
    fn an_absolute_path_is_not_prefixed() {
        let diff = unified_diff(Some(b"a\n"), b"b\n", "/etc/x.conf");
        assert!(
            diff.starts_with("--- /etc/x.conf\n+++ /etc/x.conf\n"),
            "{diff}"
        );
    }
}
