//! How text cut from the middle is told: the note the tools put where they cut, which a
//! front end reads back to count what a capped text leaves out, and counts grouped by
//! thousands as every message shows them.

/// The note that marks a cut.
pub fn cut_note(cut_bytes: u64, cut_lines: u64) -> String {
    let lines = if cut_lines == 1 { "line" } else { "lines" };
    format!(
        "[… {} bytes ({} {lines}) cut from the middle …]",
        group_digits(cut_bytes),
        group_digits(cut_lines)
    )
}

/// The lines a [`cut_note`] says were cut, if `line` is one.
pub fn lines_cut(line: &str) -> Option<u64> {
    let inner = line
        .strip_prefix("[… ")?
        .strip_suffix(" cut from the middle …]")?;
    let (_, lines) = inner.split_once(" bytes (")?;
    let (count, _) = lines.split_once(' ')?;
    count.replace(',', "").parse().ok()
}

/// `1234567` → `1,234,567`, so large counts read at a glance.
pub fn group_digits(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `n` and `noun`, in the plural unless `n` is one, its digits grouped: `1,234 more lines`.
pub fn count_of(n: usize, noun: &str) -> String {
    let plural = if n == 1 { "" } else { "s" };
    format!("{} {noun}{plural}", group_digits(n as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_read_in_the_singular_only_for_one() {
        assert_eq!(count_of(1, "more line"), "1 more line");
        assert_eq!(count_of(0, "line"), "0 lines");
        assert_eq!(count_of(12_345, "more line"), "12,345 more lines");
    }

    #[test]
    fn a_cut_note_says_how_many_lines_it_stands_for() {
        assert_eq!(lines_cut(&cut_note(4_800_000, 58_123)), Some(58_123));
        assert_eq!(lines_cut(&cut_note(10, 1)), Some(1));
        assert_eq!(
            lines_cut("+[… 10 bytes (1 line) cut from the middle …]"),
            None
        );
        assert_eq!(lines_cut("plain text"), None);
    }
}
