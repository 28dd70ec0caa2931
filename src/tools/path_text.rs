//! Paths as text the model can hand back. A file name on Linux is any bytes but `/` and NUL,
//! while the model reads and writes text, so a name that is not valid UTF-8 is shown in an
//! escaped form that every tool taking a path reads back to the exact bytes.
//!
//! The rule applies to each name of a path (the text between slashes) on its own:
//!
//! - **Shown.** A name that is valid UTF-8 appears as it is, unless it would be read as
//!   escaped (below). Any other name appears with each byte that is not part of valid UTF-8
//!   as `\xhh` (two lowercase hex digits) and each backslash as `\x5c`; everything else as
//!   it is.
//! - **Read.** A name is read as escaped when every backslash in it begins `\x` and two hex
//!   digits (either case), none of which stands for NUL or `/`, and the bytes these stand for
//!   are not valid UTF-8, or are valid UTF-8 that would itself be read as escaped. Any other
//!   name means itself.
//!
//! So ordinary names, backslashes and all, are untouched; `a\x41.txt` is the file of that
//! name, since its escape stands for a plain `A` that nobody would have escaped; and
//! `caf\xe9.txt` is `caf`, the byte E9 (Latin-1 `é`) and `.txt`. The one name shown
//! differently from how it is spelt is a UTF-8 name that reads as escaped, such as a real
//! `caf\xe9.txt` with a backslash in it: it is shown as `caf\x5cxe9.txt`, so that what is
//! shown always reads back as the file it came from. Which file a typed name means when both
//! readings exist on disk is settled by [`super::paths::resolve`].

use std::borrow::Cow;
use std::ffi::OsString;
use std::fmt::Write as _;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

/// `path` as the tools show it: as it is when that reads back as the same bytes, escaped
/// name by name otherwise.
pub fn encode(path: &Path) -> Cow<'_, str> {
    let bytes = path.as_os_str().as_bytes();
    if let Ok(text) = std::str::from_utf8(bytes)
        && !text.split('/').any(|name| escaped_bytes(name).is_some())
    {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(bytes.len() + 16);
    for (i, name) in bytes.split(|&b| b == b'/').enumerate() {
        if i > 0 {
            out.push('/');
        }
        encode_name(name, &mut out);
    }
    Cow::Owned(out)
}

/// Appends one name, shown by the rule in the module's documentation.
fn encode_name(name: &[u8], out: &mut String) {
    if let Ok(text) = std::str::from_utf8(name)
        && escaped_bytes(text).is_none()
    {
        out.push_str(text);
        return;
    }
    for chunk in name.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '\\' => out.push_str("\\x5c"),
                c => out.push(c),
            }
        }
        for byte in chunk.invalid() {
            let _ = write!(out, "\\x{byte:02x}");
        }
    }
}

/// The path `text` stands for when at least one of its names reads as escaped; `None` when
/// the text means itself.
pub fn decode(text: &str) -> Option<PathBuf> {
    if !text.contains('\\') {
        return None;
    }
    let mut escaped = false;
    let mut bytes = Vec::with_capacity(text.len());
    for (i, name) in text.split('/').enumerate() {
        if i > 0 {
            bytes.push(b'/');
        }
        match escaped_bytes(name) {
            Some(decoded) => {
                escaped = true;
                bytes.extend(decoded);
            }
            None => bytes.extend_from_slice(name.as_bytes()),
        }
    }
    escaped.then(|| PathBuf::from(OsString::from_vec(bytes)))
}

/// The longest file name Linux file systems allow, in bytes.
const NAME_MAX: usize = 255;

/// The bytes `name` stands for when it reads as escaped.
fn escaped_bytes(name: &str) -> Option<Vec<u8>> {
    // A name's escaped form spends at most four characters on each of its bytes, so longer
    // text stands for no real name: it means itself, which also bounds the rounds below.
    if name.len() > 4 * NAME_MAX {
        return None;
    }
    let decoded = unescape(name)?;
    // UTF-8 bytes count only when they would be read as escaped themselves: those are the
    // UTF-8 names `encode` escapes. Each round is shorter, so this ends.
    let mut layer = decoded.clone();
    loop {
        match std::str::from_utf8(&layer) {
            Err(_) => return Some(decoded),
            Ok(text) => layer = unescape(text)?,
        }
    }
}

/// `name` with every `\xhh` replaced by its byte; `None` when it has no backslash, or one
/// that does not begin such an escape, or an escape for NUL or `/`, which no name holds.
fn unescape(name: &str) -> Option<Vec<u8>> {
    if !name.contains('\\') {
        return None;
    }
    let bytes = name.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if b != b'\\' {
            out.push(b);
            i += 1;
            continue;
        }
        let [b'x', high, low] = *bytes.get(i + 1..i + 4)? else {
            return None;
        };
        let byte = hex_digit(high)? << 4 | hex_digit(low)?;
        if byte == 0 || byte == b'/' {
            return None;
        }
        out.push(byte);
        i += 4;
    }
    Some(out)
}

fn hex_digit(b: u8) -> Option<u8> {
    char::from(b).to_digit(16).map(|d| d as u8)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::ffi::OsStr;

    fn path(bytes: &[u8]) -> &Path {
        Path::new(OsStr::from_bytes(bytes))
    }

    /// What the tools would reach given the text `encode` showed.
    fn read_back(text: &str) -> PathBuf {
        decode(text).unwrap_or_else(|| PathBuf::from(text))
    }

    #[test]
    fn names_are_shown_and_read_by_the_documented_rule() {
        let check = |bytes: &[u8], shown: &str| {
            assert_eq!(encode(path(bytes)), shown, "{bytes:?}");
            assert_eq!(read_back(shown), path(bytes), "{shown}");
        };
        check(b"src/main.rs", "src/main.rs");
        check(b"caf\xc3\xa9.txt", "café.txt");
        check(b"caf\xe9.txt", "caf\\xe9.txt");
        check(b"/p/caf\xe9/\xff\xfe", "/p/caf\\xe9/\\xff\\xfe");
        // A cut multi-byte character: the valid prefix stays, the rest is escaped.
        check(b"\xe2\x82", "\\xe2\\x82");
        // Backslashes in a name that is not UTF-8 are escaped too, so they read back.
        check(b"a\\b\xe9", "a\\x5cb\\xe9");
        check(b"a\\xe9\xe9", "a\\x5cxe9\\xe9");
        // Ordinary names with backslashes are untouched.
        check(b"a\\b", "a\\b");
        check(b"dir\\", "dir\\");
        check(b"a\\x41.txt", "a\\x41.txt");
        check(b"a\\xzz", "a\\xzz");
        // A UTF-8 name that would read as the byte E9 is shown with its backslash escaped.
        check(b"caf\\xe9.txt", "caf\\x5cxe9.txt");
        check(b"\\x5cxe9", "\\x5cx5cxe9");
    }

    #[test]
    fn only_escapes_of_bytes_that_cannot_be_utf8_make_a_name_escaped() {
        assert_eq!(decode("plain/name.rs"), None);
        assert_eq!(decode("a\\x41.txt"), None, "stands for plain ASCII");
        assert_eq!(decode("caf\\xc3\\xa9"), None, "stands for valid UTF-8");
        assert_eq!(
            decode("a\\b\\xe9"),
            None,
            "a backslash that begins no escape"
        );
        assert_eq!(decode("\\x2f\\xe9"), None, "no escape stands for a slash");
        assert_eq!(decode("\\x00\\xe9"), None, "nor for NUL");
        assert_eq!(decode("\\x+f\\xe9"), None, "hex digits only");
        assert_eq!(decode("caf\\xE9"), Some(path(b"caf\xe9").to_path_buf()));
        // Text too long to be any real name's escaped form means itself.
        let long = format!("{}\\xe9", "a".repeat(4 * NAME_MAX));
        assert_eq!(decode(&long), None);
        // Each name is read on its own.
        assert_eq!(
            decode("we\\ird/caf\\xe9"),
            Some(path(b"we\\ird/caf\xe9").to_path_buf())
        );
    }

    /// Names built from the characters the rule turns on, so escapes, near-escapes and
    /// invalid bytes meet often.
    fn tricky_name() -> impl Strategy<Value = Vec<u8>> {
        let piece = prop_oneof![
            Just(b"\\".to_vec()),
            Just(b"x".to_vec()),
            Just(b"5c".to_vec()),
            Just(b"e9".to_vec()),
            Just(b"c3".to_vec()),
            Just(b"a".to_vec()),
            Just("é".as_bytes().to_vec()),
            (0x80u8..=0xff).prop_map(|b| vec![b]),
            (b'0'..=b'f').prop_map(|b| vec![b]),
        ];
        proptest::collection::vec(piece, 0..12).prop_map(|pieces| pieces.concat())
    }

    fn any_name() -> impl Strategy<Value = Vec<u8>> {
        proptest::collection::vec(
            any::<u8>().prop_filter("not / or NUL", |b| *b != 0 && *b != b'/'),
            0..16,
        )
    }

    fn joined(names: Vec<Vec<u8>>) -> Vec<u8> {
        names.join(&b'/')
    }

    proptest! {
        // The seed is fixed so that every run tries the same cases; failures become named
        // unit tests rather than a file.
        #![proptest_config(crate::testing::fixed_cases())]

        #[test]
        fn every_path_reads_back_as_itself(
            names in proptest::collection::vec(prop_oneof![tricky_name(), any_name()], 1..4)
        ) {
            let bytes = joined(names);
            let shown = encode(path(&bytes));
            prop_assert_eq!(read_back(&shown), path(&bytes));
        }

        #[test]
        fn utf8_without_escapes_is_shown_as_it_is(text in "[a-zé\\\\/. ]{0,20}") {
            prop_assume!(!text.contains("\\x"));
            prop_assert_eq!(encode(Path::new(&text)), text.as_str());
            prop_assert_eq!(decode(&text), None);
        }
    }
}
