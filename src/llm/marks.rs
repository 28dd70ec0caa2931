//! Marks for measuring from outside: when `TERN_FRAME_LOG` names a file (the interface writes
//! its frames and the messages sent there), each request to a model is noted in it as it is
//! handed to the HTTP client (the wall-clock time in microseconds since the Unix epoch, then
//! `request`), so a benchmark can tell tern's time before a request from the provider's.

use std::fs::File;
use std::io::Write;
use std::sync::{Mutex, OnceLock};

static LOG: OnceLock<Option<Mutex<File>>> = OnceLock::new();

/// Notes a request handed to the HTTP client, if marks are asked for.
pub(super) fn request_sent() {
    let log = LOG.get_or_init(|| {
        let path = std::env::var_os("TERN_FRAME_LOG")?;
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .ok()?;
        Some(Mutex::new(file))
    });
    if let Some(Ok(mut file)) = log.as_ref().map(Mutex::lock) {
        let at = jiff::Timestamp::now().as_microsecond();
        let _ = writeln!(file, "{at} request");
    }
}
