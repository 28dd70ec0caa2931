//! The map as text within a token budget: the top-ranked definitions, grouped by file (the
//! file with the best of them first), each as its numbered signature line, with `⋮` where
//! lines are left out. How many definitions fit is found by binary search on the rendered
//! text's estimate, so the map is never over its budget.

use super::rank::RankedTag;
use super::scan::ScannedFile;
use crate::domain::estimate_tokens;
use std::collections::BTreeMap;
use std::fmt::Write;

/// The count of definitions the search tries first.
const FIRST_PROBE: usize = 32;

/// The map of the `ranked` definitions of `files` that fits in `budget` tokens (by
/// [`estimate_tokens`]); empty when not even one does.
pub fn render(files: &[ScannedFile], ranked: &[RankedTag], budget: u64) -> String {
    let fits = |count: usize| {
        let text = text_of(files, &ranked[..count]);
        (estimate_tokens(&text) <= budget).then_some(text)
    };
    // The most definitions whose map fits: adding one never makes the text shorter by more
    // than an elision mark, so the search lands on the largest count or next to it, and
    // only a measured text is ever returned. Counts double from a few until one does not
    // fit, so a map of thousands of definitions never renders them all to find its size.
    let (mut low, mut high) = (0usize, ranked.len());
    let mut best = String::new();
    let mut probe = FIRST_PROBE.min(high);
    while probe > low {
        match fits(probe) {
            Some(text) => {
                best = text;
                low = probe;
                probe = (probe * 2).min(high);
            }
            None => {
                high = probe - 1;
                break;
            }
        }
    }
    while low < high {
        let mid = low + (high - low).div_ceil(2);
        match fits(mid) {
            Some(text) => {
                best = text;
                low = mid;
            }
            None => high = mid - 1,
        }
    }
    best
}

/// The text of the map of `chosen`.
fn text_of(files: &[ScannedFile], chosen: &[RankedTag]) -> String {
    // Files in the order of their best definition; each file's lines in order, once each.
    let mut order: Vec<usize> = Vec::new();
    let mut lines: BTreeMap<usize, BTreeMap<u32, &str>> = BTreeMap::new();
    for tag in chosen {
        let def = &files[tag.file].tags.definitions[tag.definition];
        let file_lines = lines.entry(tag.file).or_insert_with(|| {
            order.push(tag.file);
            BTreeMap::new()
        });
        file_lines.entry(def.line).or_insert(def.signature.as_str());
    }
    let mut text = String::new();
    for file in order {
        let file_lines = &lines[&file];
        let _ = writeln!(text, "{}:", files[file].candidate.path);
        let width = file_lines
            .keys()
            .next_back()
            .map_or(1, |last| (last + 1).to_string().len());
        let mut previous: Option<u32> = None;
        for (line, signature) in file_lines {
            if previous.is_some_and(|p| p + 1 != *line) {
                let _ = writeln!(text, "{:>width$}", "⋮");
            }
            let _ = writeln!(text, "{:>width$}│{signature}", line + 1);
            previous = Some(*line);
        }
    }
    text
}
