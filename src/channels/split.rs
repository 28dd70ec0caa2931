//! Long replies cut into messages a platform takes: at a paragraph or a line where one is
//! near the limit, a code block that would be cut closed at the end of one message and opened
//! again, with its language, at the start of the next.

/// `text` in pieces of at most `limit` as `measure` counts (characters; UTF-16 units for
/// Discord), none empty.
pub fn split(text: &str, limit: usize, measure: fn(&str) -> usize) -> Vec<String> {
    let limit = limit.max(16);
    let mut pieces = Vec::new();
    let mut rest = text.trim_end();
    // A fence open at the start of `rest`, carried from the piece before.
    let mut open: Option<String> = None;
    while !rest.is_empty() {
        let head = open
            .as_ref()
            .map(|fence| format!("{fence}\n"))
            .unwrap_or_default();
        if measure(&head) + measure(rest) <= limit {
            pieces.push(format!("{head}{rest}"));
            break;
        }
        // Room for the reopened fence before and a closing one after.
        let room = limit.saturating_sub(measure(&head) + 4).max(8);
        let cut = cut_at(rest, room, measure);
        let (piece, next) = rest.split_at(cut);
        let fence = fence_open_after(open.as_deref(), piece);
        let mut body = format!("{head}{}", piece.trim_end_matches('\n'));
        if fence.is_some() {
            body.push_str("\n```");
        }
        pieces.push(body);
        open = fence;
        rest = next.trim_start_matches('\n');
    }
    pieces.retain(|piece| !piece.trim().is_empty());
    pieces
}

/// Where to cut `text` so that the first part measures at most `room`: the last blank line
/// in its second half, else the last line end there, else the last space, else the limit.
fn cut_at(text: &str, room: usize, measure: fn(&str) -> usize) -> usize {
    // The longest prefix that fits, on a character boundary.
    let mut end = 0;
    let mut used = 0;
    for (at, c) in text.char_indices() {
        let mut buf = [0u8; 4];
        let width = measure(c.encode_utf8(&mut buf));
        if used + width > room {
            break;
        }
        used += width;
        end = at + c.len_utf8();
    }
    let fits = &text[..end];
    let half = end / 2;
    let after_half = |at: Option<usize>| at.filter(|&at| at > half);
    let anywhere = |at: Option<usize>| at.filter(|&at| at > 0);
    after_half(fits.rfind("\n\n").map(|at| at + 1))
        .or_else(|| after_half(fits.rfind('\n').map(|at| at + 1)))
        .or_else(|| after_half(fits.rfind(' ').map(|at| at + 1)))
        .or_else(|| anywhere(fits.rfind('\n').map(|at| at + 1)))
        .or_else(|| anywhere(fits.rfind(' ').map(|at| at + 1)))
        // A word longer than a message: cut it.
        .unwrap_or(end.max(text.chars().next().map_or(0, char::len_utf8)))
}

/// The fence line (like ```` ```rust ````) still open at the end of `piece`, given the one
/// open at its start.
fn fence_open_after(open: Option<&str>, piece: &str) -> Option<String> {
    let mut open = open.map(str::to_owned);
    for line in piece.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") {
            open = match open {
                Some(_) => None,
                None => Some(fence_of(trimmed)),
            };
        }
    }
    open
}

/// The fence to open a block again with: its backticks and its language, when the line
/// names one.
fn fence_of(line: &str) -> String {
    let language = line[3..].split_whitespace().next().unwrap_or("");
    let plain = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '+' | '-' | '#');
    if !language.is_empty() && language.len() <= 20 && language.chars().all(plain) {
        format!("```{language}")
    } else {
        "```".to_owned()
    }
}

/// Characters.
pub fn chars(text: &str) -> usize {
    text.chars().count()
}

/// UTF-16 code units, as Discord counts.
pub fn utf16(text: &str) -> usize {
    text.encode_utf16().count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn short_text_is_one_piece() {
        assert_eq!(split("hello", 2000, chars), ["hello"]);
        assert!(split("  \n", 2000, chars).is_empty());
    }

    #[test]
    fn paragraphs_are_kept_whole_where_they_fit() {
        let text = format!("{}\n\n{}", "a".repeat(60), "b".repeat(60));
        assert_eq!(split(&text, 100, chars), ["a".repeat(60), "b".repeat(60)]);
    }

    #[test]
    fn a_code_block_cut_is_closed_and_opened_again_with_its_language() {
        let code: String = (0..40).map(|i| format!("let x{i} = {i};\n")).collect();
        let text = format!("Here:\n```rust\n{code}```\nDone.");
        let pieces = split(&text, 200, chars);
        assert!(pieces.len() > 2, "{pieces:?}");
        for piece in &pieces {
            assert!(chars(piece) <= 200, "{piece}");
            assert_eq!(piece.matches("```").count() % 2, 0, "unbalanced: {piece}");
        }
        assert!(pieces[1].starts_with("```rust\n"), "{}", pieces[1]);
        let joined: String = pieces.concat();
        for i in 0..40 {
            assert!(joined.contains(&format!("let x{i} = {i};")));
        }
    }

    #[test]
    fn utf16_counts_what_discord_counts() {
        let text = "😀".repeat(1500);
        let pieces = split(&text, 2000, utf16);
        assert_eq!(pieces.len(), 2);
        assert!(pieces.iter().all(|p| utf16(p) <= 2000));
        assert_eq!(pieces.concat(), text);
    }

    proptest! {
        #![proptest_config(crate::testing::fixed_cases())]
        #[test]
        fn pieces_fit_and_lose_no_word(words in proptest::collection::vec("[a-zé😀]{1,12}|\n|```|```py", 0..300), limit in 40usize..400) {
            let text = words.join(" ");
            let pieces = split(&text, limit, utf16);
            for piece in &pieces {
                prop_assert!(utf16(piece) <= limit, "{} > {limit}: {piece:?}", utf16(piece));
            }
            let joined = pieces.concat();
            for word in text.split_whitespace().filter(|w| !w.starts_with("```")) {
                prop_assert!(joined.contains(word), "{word:?} lost");
            }
        }
    }
}
