//! Capping tool output: whole texts cut to a head and a tail ([`cap_head_tail`]), and unbounded
//! byte streams captured in bounded memory ([`OutputCap`]).
//!
//! The head and tail are kept rather than just the head because the end of an output (the
//! failing test, the compiler's summary, the exit message) is usually what matters most. Every
//! cut leaves a note in the middle saying how much was removed, so the model never mistakes a
//! capped output for the whole. A captured stream becomes text through [`super::printable`]:
//! binary data is summarised, judged on the kept head (and the kept tail on its own), and
//! control characters are escaped.

use super::printable;
pub use crate::domain::cut::{cut_note, group_digits, lines_cut};

/// Cuts `text` to at most `max_bytes` of kept text (half head, half tail) plus a one-line note
/// of what was cut. Cuts fall on char boundaries and, when one is near, on line boundaries.
pub fn cap_head_tail(text: &str, max_bytes: usize) -> String {
    if text.len() <= max_bytes {
        return text.to_string();
    }
    let head_budget = max_bytes / 2;
    let tail_budget = max_bytes - head_budget;
    let head_end = head_cut(text, head_budget);
    let tail_start = tail_cut(text, text.len() - tail_budget).max(head_end);
    let cut = &text[head_end..tail_start];
    join_with_note(
        &text[..head_end],
        cut.len() as u64,
        count_lines(cut.as_bytes()),
        &text[tail_start..],
    )
}

/// The end of the head: at most `budget` bytes, backed off to a char boundary, and to just
/// after a newline when one lies in the second half of the head.
fn head_cut(text: &str, budget: usize) -> usize {
    let mut end = budget.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    match text[..end].rfind('\n') {
        Some(nl) if nl + 1 >= end / 2 => nl + 1,
        _ => end,
    }
}

/// The start of the tail: at least `start`, moved forward to a char boundary, and to just
/// after a newline when one lies in the first half of the tail.
fn tail_cut(text: &str, start: usize) -> usize {
    let mut start = start.min(text.len());
    while !text.is_char_boundary(start) {
        start += 1;
    }
    let tail_len = text.len() - start;
    match text[start..].find('\n') {
        Some(nl) if nl < tail_len / 2 => start + nl + 1,
        _ => start,
    }
}

/// `head`, the note on a line of its own, then `tail`.
fn join_with_note(head: &str, cut_bytes: u64, cut_lines: u64, tail: &str) -> String {
    let mut out = String::with_capacity(head.len() + tail.len() + 80);
    out.push_str(head);
    if !head.is_empty() && !head.ends_with('\n') {
        out.push('\n');
    }
    out.push_str(&cut_note(cut_bytes, cut_lines));
    out.push('\n');
    out.push_str(tail);
    out
}

/// A byte count for people: `512 bytes`, `14.6 KB`, `47.7 MB`.
pub fn human_bytes(n: u64) -> String {
    const KB: f64 = 1024.0;
    let f = n as f64;
    if f < KB {
        format!("{n} bytes")
    } else if f < KB * KB {
        format!("{:.1} KB", f / KB)
    } else if f < KB * KB * KB {
        format!("{:.1} MB", f / (KB * KB))
    } else {
        format!("{:.1} GB", f / (KB * KB * KB))
    }
}

/// Newlines in `bytes`, counted a word at a time: this runs over every byte a command prints,
/// and a plain per-byte loop is slow in unoptimised builds.
fn count_lines(bytes: &[u8]) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    const NEWLINES: u64 = ONES * b'\n' as u64;
    let mut chunks = bytes.chunks_exact(8);
    let mut count = 0u64;
    for chunk in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        // Bytes equal to '\n' become zero; the classic has-zero-byte trick flags exactly those
        // (`x ^ '\n'` has no false positives once the high bit of the input is masked back in).
        let x = u64::from_ne_bytes(word) ^ NEWLINES;
        let zero = !(((x & !HIGHS).wrapping_add(!HIGHS)) | x) & HIGHS;
        count += u64::from(zero.count_ones());
    }
    count + chunks.remainder().iter().filter(|&&b| b == b'\n').count() as u64
}

/// Captures an unbounded byte stream in bounded memory: the first `head_limit` bytes, the last
/// `tail_limit` bytes, and counts of everything seen.
#[derive(Debug)]
pub struct OutputCap {
    head_limit: usize,
    tail_limit: usize,
    head: Vec<u8>,
    /// The latest bytes after the head; grows to twice `tail_limit` before the front is dropped,
    /// so trimming costs amortised O(1) per byte.
    tail: Vec<u8>,
    /// Bytes that went into the tail buffer and were later dropped from its front.
    dropped_bytes: u64,
    total_bytes: u64,
    total_lines: u64,
}

impl OutputCap {
    /// A capture keeping at most `head_limit + tail_limit` bytes of text.
    pub fn new(head_limit: usize, tail_limit: usize) -> Self {
        Self {
            head_limit,
            tail_limit,
            head: Vec::new(),
            tail: Vec::new(),
            dropped_bytes: 0,
            total_bytes: 0,
            total_lines: 0,
        }
    }

    /// Adds the next chunk of the stream.
    pub fn push(&mut self, mut bytes: &[u8]) {
        self.total_bytes += bytes.len() as u64;
        self.total_lines += count_lines(bytes);
        let head_room = self.head_limit - self.head.len();
        if head_room > 0 {
            let take = head_room.min(bytes.len());
            self.head.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
        }
        if bytes.is_empty() {
            return;
        }
        if bytes.len() > self.tail_limit {
            let skip = bytes.len() - self.tail_limit;
            self.dropped_bytes += (self.tail.len() + skip) as u64;
            self.tail.clear();
            bytes = &bytes[skip..];
        }
        self.tail.extend_from_slice(bytes);
        if self.tail.len() > 2 * self.tail_limit.max(1) {
            let excess = self.tail.len() - self.tail_limit;
            self.dropped_bytes += excess as u64;
            self.tail.drain(..excess);
        }
    }

    /// Every byte pushed so far.
    pub fn total_bytes(&self) -> u64 {
        self.total_bytes
    }

    /// True once more was pushed than the capture keeps.
    pub fn is_cut(&self) -> bool {
        self.total_bytes > (self.head_limit + self.tail_limit) as u64
    }

    /// True when the stream is binary data (judged on its kept head), which [`into_text`]
    /// summarises instead of showing.
    ///
    /// [`into_text`]: Self::into_text
    pub fn is_binary(&self) -> bool {
        printable::is_binary(&self.head)
    }

    /// The captured stream for reading: binary data summarised; text with control characters
    /// escaped (see [`printable::text`]) and a note in the middle when anything was cut; a
    /// kept tail that is binary after a text head replaced by a note.
    pub fn into_text(mut self) -> String {
        if self.tail.len() > self.tail_limit {
            let excess = self.tail.len() - self.tail_limit;
            self.dropped_bytes += excess as u64;
            self.tail.drain(..excess);
        }
        if printable::is_binary(&self.head) {
            return printable::binary_summary(&self.head, self.total_bytes);
        }
        let tail_is_binary = printable::is_binary(&self.tail);
        if self.dropped_bytes == 0 {
            if tail_is_binary {
                let mut text = printable::text(&self.head);
                if !text.is_empty() && !text.ends_with('\n') {
                    text.push('\n');
                }
                text.push_str(&printable::binary_tail_note(self.tail.len()));
                return text;
            }
            let mut all = self.head;
            all.extend_from_slice(&self.tail);
            return printable::text(&all);
        }
        // A character split by the cut is dropped whole; a newline byte is never part of a
        // longer character, so the line boundaries below can be found in the bytes.
        let head = &self.head[..utf8_prefix_len(&self.head)];
        let tail = &self.tail[utf8_skip_continuation(&self.tail)..];
        let head = &head[..head_cut_bytes(head)];
        let tail = &tail[tail_cut_bytes(tail)..];
        let kept = (head.len() + tail.len()) as u64;
        let kept_lines = count_lines(head) + count_lines(tail);
        let tail_text = if tail_is_binary {
            printable::binary_tail_note(tail.len())
        } else {
            printable::text(tail)
        };
        join_with_note(
            &printable::text(head),
            self.total_bytes.saturating_sub(kept),
            self.total_lines.saturating_sub(kept_lines),
            &tail_text,
        )
    }
}

/// [`head_cut`] for bytes: the whole head, or up to just after a newline when one lies in its
/// second half.
fn head_cut_bytes(bytes: &[u8]) -> usize {
    match bytes.iter().rposition(|&b| b == b'\n') {
        Some(nl) if nl + 1 >= bytes.len() / 2 => nl + 1,
        _ => bytes.len(),
    }
}

/// [`tail_cut`] for bytes: the whole tail, or from just after a newline when one lies in its
/// first half.
fn tail_cut_bytes(bytes: &[u8]) -> usize {
    match bytes.iter().position(|&b| b == b'\n') {
        Some(nl) if nl < bytes.len() / 2 => nl + 1,
        _ => 0,
    }
}

/// The length of `bytes` without a UTF-8 sequence cut off at its end.
fn utf8_prefix_len(bytes: &[u8]) -> usize {
    match std::str::from_utf8(bytes) {
        Ok(_) => bytes.len(),
        Err(err) if err.error_len().is_none() => err.valid_up_to(),
        Err(_) => bytes.len(),
    }
}

/// How many continuation bytes open `bytes` (the rest of a char whose start was dropped).
fn utf8_skip_continuation(bytes: &[u8]) -> usize {
    bytes
        .iter()
        .take(3)
        .take_while(|&&b| b & 0xC0 == 0x80)
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_text_is_unchanged() {
        assert_eq!(cap_head_tail("abc\n", 10), "abc\n");
    }

    #[test]
    fn long_text_keeps_head_and_tail_on_line_boundaries() {
        let text: String = (1..=100).map(|i| format!("line {i:03}\n")).collect();
        let capped = cap_head_tail(&text, 100);
        assert!(capped.starts_with("line 001\nline 002\n"), "{capped}");
        assert!(capped.ends_with("line 099\nline 100\n"), "{capped}");
        assert!(capped.contains("lines) cut from the middle"), "{capped}");
        for line in capped.lines() {
            assert!(
                line.starts_with("line ") || line.starts_with("[…"),
                "{line}"
            );
        }
        // Kept text plus the cut equals the whole.
        let kept: usize = capped
            .lines()
            .filter(|l| l.starts_with("line"))
            .map(|l| l.len() + 1)
            .sum();
        let note = capped.lines().find(|l| l.starts_with("[…")).unwrap();
        let cut: usize = note["[… ".len()..]
            .split(' ')
            .next()
            .unwrap()
            .replace(',', "")
            .parse()
            .unwrap();
        assert_eq!(kept + cut, text.len());
    }

    #[test]
    fn cuts_fall_on_char_boundaries() {
        let text = "é".repeat(1000);
        let capped = cap_head_tail(&text, 101);
        assert!(capped.len() < 300);
        assert!(capped.starts_with('é') && capped.ends_with('é'));
    }

    #[test]
    fn count_lines_matches_naive_count() {
        let text: Vec<u8> = (0..1000u32).map(|i| (i * 7 % 13) as u8).collect();
        let naive = text.iter().filter(|&&b| b == b'\n').count() as u64;
        assert_eq!(count_lines(&text), naive);
        assert_eq!(count_lines(b"\n\n\xff\x8a\n"), 3);
    }

    #[test]
    fn stream_capture_is_bounded_and_reports_totals() {
        let mut cap = OutputCap::new(20, 20);
        for i in 0..10_000 {
            cap.push(format!("row {i}\n").as_bytes());
            assert!(cap.head.len() <= 20 && cap.tail.len() <= 40 + 10);
        }
        assert!(cap.is_cut());
        let total = cap.total_bytes();
        let text = cap.into_text();
        assert!(text.starts_with("row 0\nrow 1\n"), "{text}");
        assert!(text.ends_with("row 9999\n"), "{text}");
        assert!(text.contains("lines) cut from the middle"), "{text}");
        assert!(total > 80_000);
    }

    #[test]
    fn stream_capture_without_cut_is_verbatim() {
        let mut cap = OutputCap::new(4, 4);
        cap.push(b"abc");
        cap.push(b"defgh");
        assert!(!cap.is_cut());
        assert_eq!(cap.into_text(), "abcdefgh");
    }

    #[test]
    fn stream_capture_drops_split_chars_at_the_cut() {
        let mut cap = OutputCap::new(3, 3);
        cap.push("ééééééé".as_bytes());
        let text = cap.into_text();
        assert!(!text.contains('\u{FFFD}'), "{text}");
        assert!(text.starts_with('é') && text.ends_with('é'), "{text}");
    }

    #[test]
    fn stream_capture_escapes_control_characters() {
        let mut cap = OutputCap::new(8, 8);
        cap.push(b"\x1b[31mred\x1b[0m\n");
        assert!(!cap.is_binary());
        assert_eq!(cap.into_text(), "\\x1b[31mred\\x1b[0m\n");
    }

    #[test]
    fn binary_stream_capture_is_summarised_from_its_head() {
        let mut cap = OutputCap::new(64, 64);
        let mut elf = b"\x7fELF\x02\x01\x01".to_vec();
        elf.resize(1000, 0);
        cap.push(&elf);
        assert!(cap.is_binary());
        let text = cap.into_text();
        assert!(
            text.starts_with("Binary output, 1000 bytes (1,000 bytes): it looks like an ELF"),
            "{text}"
        );
        assert!(!text.contains('\0'), "{text}");
    }

    #[test]
    fn a_binary_tail_after_a_text_head_becomes_a_note() {
        let binary = [0u8, 1, 2, 3, 0xff, 0xfe].repeat(20);
        // Cut in the middle, and whole (the tail buffer holding all after the head).
        for (head_lines, tail_limit) in [(9, 60), (200, 60), (9, 200)] {
            let mut cap = OutputCap::new(60, tail_limit);
            for i in 0..head_lines {
                cap.push(format!("line {i}\n").as_bytes());
            }
            cap.push(&binary);
            assert!(!cap.is_binary());
            let text = cap.into_text();
            assert!(text.starts_with("line 0\nline 1\n"), "{text}");
            assert!(
                text.contains("kept of the output are binary data"),
                "{text}"
            );
            assert!(!text.contains('\0') && !text.contains("\\x00"), "{text}");
        }
    }

    #[test]
    fn digits_are_grouped() {
        assert_eq!(group_digits(0), "0");
        assert_eq!(group_digits(999), "999");
        assert_eq!(group_digits(1000), "1,000");
        assert_eq!(group_digits(50_000_000), "50,000,000");
    }
}
