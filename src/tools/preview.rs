//! What a person asked to approve a call is shown: a one-line summary and the detail (the
//! command, the diff a change would make), worked out by the tool without side effects.

use super::output::cap_head_tail;
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
        .timeout(Duration::from_secs(2))
        .diff_lines(old.as_ref(), new.as_ref())
        .unified_diff()
        .context_radius(3)
        .header(&old_header, &side("b"))
        .to_string()
}

/// `diff` capped for showing to a person.
pub(crate) fn capped_diff(diff: &str) -> String {
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
