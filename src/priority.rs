//! How the kernel is asked to share the cores among tern's threads.
//!
//! Two levers, each set per thread and inherited by the threads and processes a thread
//! starts. The nice value sets a thread's share of a busy core: the runs' threads take ten
//! steps less than the rest (`session::background`). The time slice sets how soon a thread
//! that wakes gets a core, not its share: on Linux 6.12 and later a thread may ask for a
//! slice shorter than the default (`sched_setattr` with `sched_runtime`, no privilege
//! needed), and the scheduler then runs it ahead of threads with longer ones when it wakes.
//! The threads of short work a person waits on (the sessions' actors acknowledging inputs,
//! the journal's commits) ask for a short slice; turns, runs and the processes tools start
//! keep the default, and lose none of their share by it. So does the interface's thread,
//! whose frames are longer work: cut into short slices they cost a fifth more CPU while a
//! reply streams. Elsewhere both are left alone.

/// The slice asked for by threads a person waits on (the kernel's floor).
const SHORT_SLICE_NS: u64 = 100_000;

/// The calling thread's nice value (on Linux a thread's nice value is its own).
pub(crate) fn nice() -> i32 {
    #[cfg(target_os = "linux")]
    // SAFETY: getpriority only reads the scheduling priority of the calling thread (`who` 0).
    unsafe {
        libc::getpriority(libc::PRIO_PROCESS, 0)
    }
    #[cfg(not(target_os = "linux"))]
    0
}

/// Sets the calling thread's nice value; whether it could.
pub(crate) fn set_nice(value: i32) -> bool {
    #[cfg(target_os = "linux")]
    // SAFETY: setpriority only changes the scheduling priority of the calling thread (`who`
    // 0); no memory is passed.
    unsafe {
        libc::setpriority(libc::PRIO_PROCESS, 0, value) == 0
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = value;
        false
    }
}

/// Asks that the calling thread get a core soon when it wakes: a short time slice. For
/// threads whose work is short and waited for (an acknowledgement, a frame). Whether the
/// kernel took it.
pub fn favour_latency() -> bool {
    // A kernel before 6.12 takes the field and ignores it: only a slice read back counts.
    set_slice(SHORT_SLICE_NS) && slice() == Some(SHORT_SLICE_NS)
}

/// Gives the calling thread the kernel's default slice again, as the threads (and, called
/// between fork and exec, the processes) it starts inherit it: for work that runs long.
/// Async-signal-safe: one system call.
pub fn ordinary_slice() -> bool {
    set_slice(0)
}

/// The calling thread's slice in nanoseconds, as the kernel reports it; `None` where it
/// does not.
pub fn slice() -> Option<u64> {
    #[cfg(target_os = "linux")]
    {
        attributes().map(|attr| attr.runtime)
    }
    #[cfg(not(target_os = "linux"))]
    None
}

/// `struct sched_attr` of the Linux system call (its first version, 56 bytes; the kernel
/// takes a shorter one from older callers).
#[cfg(target_os = "linux")]
#[repr(C)]
#[derive(Default)]
struct SchedAttr {
    size: u32,
    policy: u32,
    flags: u64,
    nice: i32,
    priority: u32,
    runtime: u64,
    deadline: u64,
    period: u64,
    util_min: u32,
    util_max: u32,
}

/// `sched_attr.sched_flags`: the children of the thread start with the default policy and
/// nice value (`chrt -R`).
#[cfg(target_os = "linux")]
const SCHED_FLAG_RESET_ON_FORK: u64 = 0x01;
/// `sched_attr.sched_flags`: keep the thread's policy (Linux 5.3 and later).
#[cfg(target_os = "linux")]
const SCHED_FLAG_KEEP_POLICY: u64 = 0x08;

/// The calling thread's scheduling attributes.
#[cfg(target_os = "linux")]
fn attributes() -> Option<SchedAttr> {
    let mut attr = SchedAttr::default();
    // SAFETY: the kernel writes at most `size_of::<SchedAttr>()` bytes into `attr`, a live
    // value of that size, about the calling thread (pid 0).
    let read = unsafe {
        libc::syscall(
            libc::SYS_sched_getattr,
            0,
            &mut attr as *mut SchedAttr,
            std::mem::size_of::<SchedAttr>() as libc::c_uint,
            0,
        )
    };
    (read == 0).then_some(attr)
}

/// Sets the calling thread's slice (0: the default), keeping its policy, its nice value
/// and whether its children start afresh. Two system calls, nothing allocated.
fn set_slice(nanoseconds: u64) -> bool {
    #[cfg(target_os = "linux")]
    {
        let Some(now) = attributes() else {
            return false;
        };
        let attr = SchedAttr {
            size: std::mem::size_of::<SchedAttr>() as u32,
            // The thread's policy stays (SCHED_BATCH or SCHED_IDLE, when the person started
            // tern under `chrt`); a real-time one takes no slice and is refused.
            flags: SCHED_FLAG_KEEP_POLICY | (now.flags & SCHED_FLAG_RESET_ON_FORK),
            nice: now.nice,
            runtime: nanoseconds,
            ..SchedAttr::default()
        };
        // SAFETY: the kernel reads `size` bytes of `attr`, a live value of that size; it
        // changes only the calling thread's (pid 0) scheduling.
        let set =
            unsafe { libc::syscall(libc::SYS_sched_setattr, 0, &attr as *const SchedAttr, 0) };
        set == 0
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = nanoseconds;
        false
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn a_thread_asks_for_a_short_slice_and_gives_it_back_keeping_its_nice_value() {
        std::thread::spawn(|| {
            let before = (slice(), nice());
            if !favour_latency() {
                // A kernel before 6.12 has no slices to ask for: nothing changed.
                assert_eq!((slice(), nice()), before);
                return;
            }
            assert_eq!(slice(), Some(SHORT_SLICE_NS));
            assert_eq!(nice(), before.1);
            // What it starts inherits it; the default comes back when asked.
            let child = std::thread::spawn(slice).join().expect("the thread ran");
            assert_eq!(child, Some(SHORT_SLICE_NS));
            assert!(ordinary_slice());
            let ordinary = slice().expect("a slice");
            assert!(ordinary > SHORT_SLICE_NS, "{ordinary} ns");
            assert_eq!(nice(), before.1);
        })
        .join()
        .expect("the thread ran");
    }

    #[test]
    fn asking_for_a_slice_keeps_the_policy_a_person_chose() {
        std::thread::spawn(|| {
            let param = libc::sched_param { sched_priority: 0 };
            // SAFETY: sets the calling thread's own policy from a live `sched_param`.
            let batch = unsafe { libc::sched_setscheduler(0, libc::SCHED_BATCH, &param) };
            assert_eq!(batch, 0, "{}", std::io::Error::last_os_error());
            favour_latency();
            ordinary_slice();
            // SAFETY: reads the calling thread's own policy.
            assert_eq!(unsafe { libc::sched_getscheduler(0) }, libc::SCHED_BATCH);
            // SAFETY: as above, with the flag that children start afresh.
            let reset = libc::SCHED_BATCH | libc::SCHED_RESET_ON_FORK;
            assert_eq!(unsafe { libc::sched_setscheduler(0, reset, &param) }, 0);
            favour_latency();
            ordinary_slice();
            // SAFETY: reads the calling thread's own policy.
            assert_eq!(unsafe { libc::sched_getscheduler(0) }, reset);
        })
        .join()
        .expect("the thread ran");
    }
}
