//! What a running command has printed, kept in the session's `logs/calls/` as it comes, so
//! that when tern stops while it runs, the result recovery gives the call ("outcome unknown")
//! can say what it had done so far. The file of a call goes once its result is journaled.

use crate::tools::cap_head_tail;
use std::path::{Path, PathBuf};

/// Bytes of a spool shown in a recovered result, its start and its end together.
const SHOWN: usize = 8 * 1024;

/// The spool file of call `call_id` in `spool_dir`. Call ids come from the provider: any
/// character other than a letter, a digit, `_` or `-` is written as `%XX`, so every id has a
/// file name of its own and none can reach outside the folder.
pub fn file_for(spool_dir: &Path, call_id: &str) -> PathBuf {
    let mut name = String::with_capacity(call_id.len() + 4);
    for byte in call_id.bytes() {
        if byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'-' {
            name.push(char::from(byte));
        } else {
            name.push_str(&format!("%{byte:02X}"));
        }
    }
    name.push_str(".out");
    spool_dir.join(name)
}

/// What call `call_id` had printed, its start and its end, when it left a spool.
pub fn captured(spool_dir: &Path, call_id: &str) -> Option<String> {
    let bytes = std::fs::read(file_for(spool_dir, call_id)).ok()?;
    let text = String::from_utf8_lossy(&bytes);
    Some(cap_head_tail(&text, SHOWN))
}

/// Removes every spool in `spool_dir`: when a session is opened no call of it runs, so any
/// left (a crash between a result's commit and its spool's removal) is stale.
pub fn clear(spool_dir: &Path) {
    let Ok(entries) = std::fs::read_dir(spool_dir) else {
        return;
    };
    for entry in entries.flatten() {
        let _ = std::fs::remove_file(entry.path());
    }
}

/// Removes the spool of call `call_id`, if it left one.
pub fn remove(spool_dir: &Path, call_id: &str) {
    let _ = std::fs::remove_file(file_for(spool_dir, call_id));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_call_id_gets_its_own_file_inside_the_folder() {
        let dir = Path::new("/s/logs/calls");
        assert_eq!(file_for(dir, "toolu_01Ab-9"), dir.join("toolu_01Ab-9.out"));
        assert_eq!(file_for(dir, "../x"), dir.join("%2E%2E%2Fx.out"));
        assert_ne!(file_for(dir, "a/b"), file_for(dir, "a%2Fb"));
    }
}
