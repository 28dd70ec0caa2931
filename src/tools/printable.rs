//! Making what a command printed fit to read, for the model and the transcript alike.
//!
//! Binary data is summarised instead of shown: as text it would be thousands of replacement
//! characters, raw NULs and terminal escapes that cost tokens and say nothing. It is told
//! apart from text as git and grep do, by a NUL byte, and also by a high share of bytes that
//! are neither text nor whitespace; the summary gives the size, a guess at the kind from the
//! first bytes ([`binary_kind`]), a short hex dump and how to look further.
//!
//! Text keeps tabs and newlines. A carriage return is what a terminal would make of it: a
//! `\r` before a newline ends the line (Windows line ends), and a line redrawn with `\r`
//! (progress bars) keeps what was drawn last, the part after its last `\r`. Every other
//! control character, and each byte that is not UTF-8, is written as an escape (`\x1b`,
//! `\x00`, `\xe9`; C1 controls as `\u{9b}`), so no raw terminal escape reaches the model or
//! the transcript. A backslash in the output itself is left alone, so `\x1b` may also be
//! four characters the command printed; as with `cat -v`, the escapes are for reading.

use super::output::{group_digits, human_bytes};
use std::fmt::Write;

/// How much of a part is looked at to tell text from binary.
const SNIFF_BYTES: usize = 8 * 1024;

/// Above this share of bytes that are neither text nor whitespace, in percent, data is
/// binary. Coloured text stays well below it (one ESC in each escape sequence), random or
/// compressed bytes are far above (about two thirds are not UTF-8), and text in a legacy
/// encoding such as Latin-1 stays below (only its accented letters are invalid).
const BINARY_PERCENT: usize = 30;

/// Bytes shown in hex for binary output.
const PREVIEW_BYTES: usize = 64;

/// Whether `bytes` are binary data rather than text: a NUL byte among the first 8 KiB, or
/// more than 30% of them neither text nor whitespace.
pub fn is_binary(bytes: &[u8]) -> bool {
    let sample = whole_chars(&bytes[..bytes.len().min(SNIFF_BYTES)]);
    if sample.contains(&0) {
        return true;
    }
    let mut odd = 0;
    for chunk in sample.utf8_chunks() {
        odd += chunk.invalid().len();
        odd += chunk
            .valid()
            .chars()
            .filter(|&c| c.is_control() && !matches!(c, '\t' | '\n' | '\r' | '\x1b' | '\x0c'))
            .count();
    }
    odd * 100 > sample.len() * BINARY_PERCENT
}

/// `bytes` without a partial character at either end, where a cut may have split one.
fn whole_chars(bytes: &[u8]) -> &[u8] {
    let continuation = |b: u8| b & 0xC0 == 0x80;
    let start = bytes
        .iter()
        .take(3)
        .take_while(|&&b| continuation(b))
        .count();
    let bytes = &bytes[start..];
    for back in 1..=bytes.len().min(3) {
        let b = bytes[bytes.len() - back];
        if continuation(b) {
            continue;
        }
        // The lead byte of the last character: does it announce more bytes than follow?
        let length = match b {
            0xF0.. => 4,
            0xE0.. => 3,
            0xC0.. => 2,
            _ => 1,
        };
        if length > back {
            return &bytes[..bytes.len() - back];
        }
        break;
    }
    bytes
}

/// Signatures of common binary formats: the bytes, where they stand, and what they mean.
const SIGNATURES: &[(&[u8], usize, &str)] = &[
    (b"\x7fELF", 0, "an ELF executable or library"),
    (b"\x89PNG\r\n\x1a\n", 0, "a PNG image"),
    (b"\xff\xd8\xff", 0, "a JPEG image"),
    (b"GIF87a", 0, "a GIF image"),
    (b"GIF89a", 0, "a GIF image"),
    (b"WEBP", 8, "a WebP image"),
    (b"%PDF-", 0, "a PDF document"),
    (b"\x1f\x8b", 0, "gzip-compressed data"),
    (b"PK\x03\x04", 0, "a zip archive (or jar, docx, xlsx…)"),
    (b"PK\x05\x06", 0, "an empty zip archive"),
    (b"BZh", 0, "bzip2-compressed data"),
    (b"\xfd7zXZ\x00", 0, "xz-compressed data"),
    (b"\x28\xb5\x2f\xfd", 0, "zstd-compressed data"),
    (b"7z\xbc\xaf\x27\x1c", 0, "a 7-Zip archive"),
    (b"ustar", 257, "a tar archive"),
    (b"\0asm", 0, "a WebAssembly module"),
    (b"SQLite format 3\0", 0, "an SQLite database"),
    (
        b"\xca\xfe\xba\xbe",
        0,
        "a Java class file or a Mach-O universal binary",
    ),
    (b"\xcf\xfa\xed\xfe", 0, "a Mach-O executable"),
    (b"\xce\xfa\xed\xfe", 0, "a Mach-O executable"),
    (b"MZ", 0, "a Windows executable"),
    (b"ftyp", 4, "an MP4 or QuickTime video"),
    (b"OggS", 0, "Ogg audio or video"),
    (b"ID3", 0, "an MP3 file"),
    (b"WAVE", 8, "a WAV sound"),
];

/// A guess at the kind of binary data that starts with `bytes`, from the signatures of common
/// formats; `"binary data"` when none matches.
pub fn binary_kind(bytes: &[u8]) -> &'static str {
    SIGNATURES
        .iter()
        .find(|(magic, at, _)| bytes.get(*at..at + magic.len()) == Some(*magic))
        .map_or("binary data", |(_, _, kind)| kind)
}

/// What the model is shown instead of binary output of `total` bytes that starts with
/// `head`: the size, the kind, the first bytes in hex, and how to look further.
pub fn binary_summary(head: &[u8], total: u64) -> String {
    let shown = &head[..head.len().min(PREVIEW_BYTES)];
    let mut out = format!(
        "Binary output, {} ({} bytes): it looks like {}. It is not shown as text; its first {} \
         bytes:\n",
        human_bytes(total),
        group_digits(total),
        binary_kind(head),
        shown.len()
    );
    out.push_str(&hex_dump(shown));
    out.push_str(
        "[to look into it, write it to a file and use `file FILE`, `xxd FILE | head` or \
         `strings FILE | head`; text separated by NUL bytes (find -print0, /proc/*/environ) \
         reads well through `tr '\\0' '\\n'`]\n",
    );
    out
}

/// The note standing for the kept end of an output that turned binary after a text start.
pub fn binary_tail_note(kept: usize) -> String {
    format!(
        "[the last {} kept of the output are binary data and not shown; write the output to a \
         file and look at it with `xxd FILE | tail`]\n",
        human_bytes(kept as u64)
    )
}

/// `bytes` as lines of `xxd`: offset, sixteen bytes in hex, and those bytes as characters
/// where printable.
fn hex_dump(bytes: &[u8]) -> String {
    let mut out = String::new();
    for (row, line) in bytes.chunks(16).enumerate() {
        let _ = write!(out, "{:08x}: ", row * 16);
        for at in 0..16 {
            match line.get(at) {
                Some(b) => {
                    let _ = write!(out, "{b:02x}");
                }
                None => out.push_str("  "),
            }
            if at % 2 == 1 {
                out.push(' ');
            }
        }
        out.push(' ');
        out.extend(line.iter().map(|&b| {
            if b.is_ascii_graphic() || b == b' ' {
                b as char
            } else {
                '.'
            }
        }));
        out.push('\n');
    }
    out
}

/// `bytes` as text: carriage returns applied as a terminal would, other control characters
/// and bytes that are not UTF-8 escaped.
pub fn text(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for line in bytes.split_inclusive(|&b| b == b'\n') {
        let (body, newline) = match line.strip_suffix(b"\n") {
            Some(body) => (body, true),
            None => (line, false),
        };
        let mut body = body;
        while let Some(rest) = body.strip_suffix(b"\r") {
            body = rest;
        }
        if let Some(last) = body.iter().rposition(|&b| b == b'\r') {
            body = &body[last + 1..];
        }
        escape_into(&mut out, body);
        if newline {
            out.push('\n');
        }
    }
    out
}

/// Appends `bytes` to `out`, escaping what is not printable text.
fn escape_into(out: &mut String, bytes: &[u8]) {
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '\t' => out.push(c),
                '\0'..='\x1f' | '\x7f' => {
                    let _ = write!(out, "\\x{:02x}", c as u32);
                }
                // C1 controls: U+009B, for one, starts an escape sequence in some terminals.
                '\u{80}'..='\u{9f}' => {
                    let _ = write!(out, "\\u{{{:x}}}", c as u32);
                }
                _ => out.push(c),
            }
        }
        for b in chunk.invalid() {
            let _ = write!(out, "\\x{b:02x}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[track_caller]
    fn check_text(input: &[u8], expected: &str) {
        assert_eq!(text(input), expected, "input: {input:?}");
    }

    #[track_caller]
    fn check_binary(input: &[u8], expected: bool) {
        assert_eq!(is_binary(input), expected, "input: {input:?}");
    }

    #[test]
    fn plain_text_tabs_and_newlines_are_kept() {
        check_text(b"a\tb\nc\n", "a\tb\nc\n");
        check_text("héllo — 世界\n".as_bytes(), "héllo — 世界\n");
        check_text(b"no newline", "no newline");
        check_text(b"", "");
    }

    #[test]
    fn control_characters_are_escaped() {
        check_text(b"\x1b[31mred\x1b[0m\n", "\\x1b[31mred\\x1b[0m\n");
        check_text(b"a\x00b\x07c\x7f", "a\\x00b\\x07c\\x7f");
        check_text("x\u{9b}31m".as_bytes(), "x\\u{9b}31m");
        check_text(b"page\x0cbreak", "page\\x0cbreak");
    }

    #[test]
    fn bytes_that_are_not_utf8_are_escaped() {
        check_text(b"caf\xe9\n", "caf\\xe9\n");
        check_text(b"\xff\xfe", "\\xff\\xfe");
    }

    #[test]
    fn carriage_returns_keep_what_a_terminal_shows_last() {
        check_text(b"windows\r\nline\r\n", "windows\nline\n");
        check_text(b" 10%\r 50%\r100%\ndone\n", "100%\ndone\n");
        check_text(b" 10%\r 50%\r", " 50%");
        check_text(b"\r\r\n", "\n");
    }

    #[test]
    fn nul_bytes_make_data_binary() {
        check_binary(b"text\0more", true);
        check_binary(b"\x7fELF\x02\x01\x01\0\0\0", true);
    }

    #[test]
    fn a_high_share_of_odd_bytes_makes_data_binary() {
        let random: Vec<u8> = (0..4096u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8 | 0x80)
            .collect();
        check_binary(&random, true);
        check_binary(b"\x01\x02\x03\x04abc", true);
    }

    #[test]
    fn text_with_a_few_odd_bytes_stays_text() {
        check_binary(b"", false);
        check_binary(b"plain text\n", false);
        check_binary(b"\x1b[1;32m   Compiling\x1b[0m tern v0.1.0\n", false);
        check_binary(b"caf\xe9 au lait, cr\xe8me br\xfbl\xe9e\n", false);
        check_binary(b"a\tb\r\nc\x0c\n", false);
        check_binary("日本語のテキスト\n".as_bytes(), false);
    }

    #[test]
    fn characters_split_by_a_cut_do_not_count() {
        let text = "ééééé".as_bytes();
        check_binary(&text[1..text.len() - 1], false);
        check_binary(&text[..3], false);
        check_binary(b"\xa9", false);
    }

    #[test]
    fn kinds_are_guessed_from_signatures() {
        for (bytes, kind) in [
            (&b"\x7fELF\x02\x01"[..], "an ELF executable or library"),
            (b"\x89PNG\r\n\x1a\n\0\0", "a PNG image"),
            (b"\xff\xd8\xff\xe0\0\x10JFIF", "a JPEG image"),
            (b"GIF89a\x01\0", "a GIF image"),
            (b"%PDF-1.7\n", "a PDF document"),
            (b"\x1f\x8b\x08\0", "gzip-compressed data"),
            (b"PK\x03\x04\x14\0", "a zip archive (or jar, docx, xlsx…)"),
            (b"RIFF\x24\0\0\0WEBPVP8 ", "a WebP image"),
            (b"\0\x01\x02\x03", "binary data"),
            (b"", "binary data"),
        ] {
            assert_eq!(binary_kind(bytes), kind, "{bytes:?}");
        }
        let mut tar = vec![0u8; 512];
        tar[257..262].copy_from_slice(b"ustar");
        assert_eq!(binary_kind(&tar), "a tar archive");
    }

    #[test]
    fn the_summary_names_size_kind_and_first_bytes() {
        let mut elf = b"\x7fELF\x02\x01\x01".to_vec();
        elf.resize(100, 0);
        let summary = binary_summary(&elf, 4096);
        assert!(
            summary.starts_with(
                "Binary output, 4.0 KB (4,096 bytes): it looks like an ELF executable or \
                 library. It is not shown as text; its first 64 bytes:\n\
                 00000000: 7f45 4c46 0201 0100 0000 0000 0000 0000  .ELF............\n"
            ),
            "{summary}"
        );
        assert_eq!(summary.lines().filter(|l| l.starts_with('0')).count(), 4);
        assert!(summary.contains("xxd FILE | head"), "{summary}");
    }

    #[test]
    fn a_short_last_row_is_padded() {
        let padding = " ".repeat(40 - "6162 63".len() + 1);
        assert_eq!(hex_dump(b"abc"), format!("00000000: 6162 63{padding}abc\n"));
    }
}
