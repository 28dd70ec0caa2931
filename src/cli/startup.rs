//! What tern does first, while the process is still a single thread: it closes itself to
//! other processes of the same user, takes the one snapshot of the environment that
//! everything later reads, and removes the provider keys from its own environment.
//!
//! - Undumpable (Linux, `prctl(PR_SET_DUMPABLE, 0)`): `/proc/<tern>/environ`, `/proc/<tern>/mem`
//!   and a debugger's attach are refused to processes of the same user, the commands tern runs
//!   included; tern itself still reads its own `/proc/self` files where it needs them
//!   (`cmdline`, `stat`, `exe`). Root is not kept out. Core dumps are off as a consequence,
//!   which also keeps keys out of core files. A command tern starts is an ordinary process
//!   again, since `execve` resets the flag. Other platforms are not covered: there a process of
//!   the same user may still inspect tern.
//! - One snapshot ([`environment`]): the config is loaded from it, and so are its reloads
//!   after a change (`lifecycle::ConfigWatch`); after the scrub below the process environment
//!   no longer holds the keys.
//! - The scrub: every variable the config uses as a provider's key (`api_key_env`) is removed
//!   from the process environment, and on Linux the bytes of its original `NAME=value` are
//!   overwritten in the initial environment block, which is what `/proc/<pid>/environ` shows
//!   whatever `unsetenv` did; so even root reading that file finds no key. Starting tern again
//!   (`exec` after a config change) hands the keys back to the new process
//!   ([`restore_credentials`]), which scrubs them again. Other variables (a `DATABASE_URL`)
//!   stay in tern's environment: the commands never get them ([`crate::tools::child_env`]),
//!   and being undumpable keeps them out of reach of processes of the same user.

use crate::config::{self, Environment};
use std::sync::OnceLock;

/// The environment as tern started, and the variables removed from the process since.
struct Startup {
    env: Environment,
    scrubbed: Vec<String>,
}

static STARTUP: OnceLock<Startup> = OnceLock::new();

/// Closes the process to others, takes the snapshot and scrubs the keys. Must be called
/// before any thread starts (the async runtime included).
pub fn prepare() {
    make_undumpable();
    let env = Environment::from_process();
    // A config that cannot be loaded names no keys; the command reports the error and stops
    // before it runs anything.
    let scrubbed: Vec<String> = match config::load(&env) {
        Ok((_, config)) => config
            .credential_vars()
            .into_iter()
            .filter(|name| env.get(name).is_some())
            .collect(),
        Err(_) => Vec::new(),
    };
    // SAFETY: `main` calls this before it builds the runtime or starts any thread, so nothing
    // else reads or changes the environment meanwhile.
    unsafe { scrub(&scrubbed) };
    let _ = STARTUP.set(Startup { env, scrubbed });
}

/// The environment as tern started, keys included; taken now if [`prepare`] was not called.
pub fn environment() -> &'static Environment {
    &startup().env
}

/// Gives `command` (tern starting itself again) the keys this process removed from its own
/// environment.
pub fn restore_credentials(command: &mut std::process::Command) {
    let startup = startup();
    for name in &startup.scrubbed {
        if let Some(value) = startup.env.get(name) {
            command.env(name, value);
        }
    }
}

fn startup() -> &'static Startup {
    STARTUP.get_or_init(|| Startup {
        env: Environment::from_process(),
        scrubbed: Vec::new(),
    })
}

/// Keeps processes of the same user out of `/proc/<tern>/environ` and `/proc/<tern>/mem`.
fn make_undumpable() {
    #[cfg(target_os = "linux")]
    // SAFETY: PR_SET_DUMPABLE takes plain integers and touches no memory of ours. The
    // arguments are passed as the unsigned longs the kernel reads; it cannot fail for 0.
    unsafe {
        let off: libc::c_ulong = 0;
        libc::prctl(libc::PR_SET_DUMPABLE, off, off, off, off);
    }
}

/// Removes each of `names` from the process environment and, on Linux, overwrites its
/// original `NAME=value` in the initial environment block with zeros.
///
/// # Safety
///
/// No other thread may exist: changing the environment while another thread reads it is
/// undefined behaviour, and the block's strings are written through raw pointers.
unsafe fn scrub(names: &[String]) {
    if names.is_empty() {
        return;
    }
    // Found before `remove_var`, which drops the entries from `environ`; the strings
    // themselves stay where they are.
    #[cfg(target_os = "linux")]
    // SAFETY: single-threaded, as this function requires.
    let originals = unsafe { initial_entries(names) };
    for name in names {
        // SAFETY: single-threaded, as this function requires.
        unsafe { std::env::remove_var(name) };
    }
    #[cfg(target_os = "linux")]
    for (at, len) in originals {
        // SAFETY: `at..at + len` is a `NAME=value` string inside the initial environment block
        // (checked against the kernel's bounds), which is writable memory of this process, and
        // nothing points to it any more after `remove_var`.
        unsafe { std::ptr::write_bytes(at, 0, len) };
    }
}

/// Where the entries of `names` lie in the initial environment block: each `NAME=value`
/// string's start and length, only for strings within the block's bounds from
/// `/proc/self/stat` (an entry set later lives elsewhere and does not show in
/// `/proc/self/environ`).
///
/// # Safety
///
/// No other thread may exist, since `environ` is read without the standard library's lock.
#[cfg(target_os = "linux")]
unsafe fn initial_entries(names: &[String]) -> Vec<(*mut u8, usize)> {
    use std::ffi::{CStr, c_char};
    unsafe extern "C" {
        static mut environ: *mut *mut c_char;
    }
    let Some(block) = std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|stat| env_block(&stat))
    else {
        return Vec::new();
    };
    let mut found = Vec::new();
    // SAFETY: single-threaded, as this function requires; `environ` is a null-terminated
    // array of pointers to NUL-terminated strings, as the C runtime keeps it.
    unsafe {
        let mut entry = environ;
        while !entry.is_null() && !(*entry).is_null() {
            let text = CStr::from_ptr(*entry).to_bytes();
            let start = *entry as usize;
            let inside = block.0 <= start && start + text.len() < block.1;
            if inside && names.iter().any(|name| is_entry_of(text, name)) {
                found.push((*entry as *mut u8, text.len()));
            }
            entry = entry.add(1);
        }
    }
    found
}

/// Whether the `NAME=value` string `entry` sets `name`.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
fn is_entry_of(entry: &[u8], name: &str) -> bool {
    entry
        .strip_prefix(name.as_bytes())
        .is_some_and(|rest| rest.first() == Some(&b'='))
}

/// The bounds of the initial environment block, `env_start` and `env_end` (fields 50 and 51 of
/// `/proc/<pid>/stat`).
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
fn env_block(stat: &str) -> Option<(usize, usize)> {
    // The command name (field 2) may hold spaces and parentheses: count from its end, where
    // field 3 begins.
    let mut fields = stat[stat.rfind(')')? + 1..].split_whitespace().skip(50 - 3);
    let start = fields.next()?.parse().ok()?;
    let end = fields.next()?.parse().ok()?;
    (start < end).then_some((start, end))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environment_block_is_read_from_stat() {
        let mut fields: Vec<String> = (3..=49).map(|n| n.to_string()).collect();
        fields.extend(["140730000000000", "140730000004096", "0"].map(String::from));
        let stat = format!("4242 (tern (x) y) {}", fields.join(" "));
        assert_eq!(
            env_block(&stat),
            Some((140_730_000_000_000, 140_730_000_004_096))
        );
        assert_eq!(env_block("4242 (tern) S 1 2"), None);
        assert_eq!(env_block("no parenthesis"), None);
    }

    #[test]
    fn an_entry_belongs_to_its_exact_name() {
        assert!(is_entry_of(b"MY_KEY=abc", "MY_KEY"));
        assert!(is_entry_of(b"MY_KEY=", "MY_KEY"));
        assert!(!is_entry_of(b"MY_KEY_2=abc", "MY_KEY"));
        assert!(!is_entry_of(b"MY_KE=abc", "MY_KEY"));
        assert!(!is_entry_of(b"MY_KEY", "MY_KEY"));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_process_environment_block_has_bounds() {
        let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
        let (start, end) = env_block(&stat).expect("env_start and env_end");
        assert!(end - start > 0);
    }
}
