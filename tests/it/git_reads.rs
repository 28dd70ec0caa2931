//! Reading git for a turn: the budget that keeps a slow read from holding up a turn, and
//! the reads that turns asking at once share.

use pretty_assertions::assert_eq;
use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;
use tern::context::{GitContext, GitUnavailable, shared_git_with, working_git, working_git_with};

/// Taken by each test here: they hold places among the reads that may run at once (two in
/// the process), so one test's held places must not starve another's reads.
static PLACES: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Long enough for a read's thread to start on a loaded machine, short for a test.
const SHORT: Duration = Duration::from_millis(300);

#[tokio::test]
async fn working_git_outside_git_degrades_to_a_reason() {
    let _places = PLACES.lock().await;
    let root = tempfile::tempdir().expect("a temp dir");
    let dir = root.path().join("plain");
    std::fs::create_dir_all(&dir).expect("creating a plain dir");
    let context = working_git(&dir, Duration::from_secs(30)).await;
    assert_eq!(context.render(), "git: unavailable: not a git repository");
}

#[tokio::test]
async fn a_read_that_overruns_its_budget_is_abandoned() {
    let _places = PLACES.lock().await;
    // The stand-in read blocks until the test releases it, so it cannot finish within any
    // budget; the context must come back without it.
    let (release, released) = mpsc::channel::<()>();
    let (finished, read_finished) = mpsc::channel::<()>();
    let context = working_git_with(Path::new("/stand-in/overrun"), SHORT, move |_| {
        let _ = released.recv();
        let _ = finished.send(());
        Err(GitUnavailable::NotARepository)
    })
    .await;
    assert_eq!(
        context,
        GitContext::Unavailable {
            reason: "timed out after 300 ms".to_owned()
        }
    );
    assert_eq!(context.render(), "git: unavailable: timed out after 300 ms");
    // The read was still running when the context came back; let it go.
    assert!(read_finished.try_recv().is_err());
    release.send(()).expect("releasing the read");
    read_finished
        .recv()
        .expect("the read finishes once released");
}

#[tokio::test]
async fn a_zero_budget_does_not_wait_for_the_read() {
    let _places = PLACES.lock().await;
    let (release, released) = mpsc::channel::<()>();
    let context = working_git_with(Path::new("/stand-in/zero"), Duration::ZERO, move |_| {
        let _ = released.recv();
        Err(GitUnavailable::NotARepository)
    })
    .await;
    assert_eq!(context.render(), "git: unavailable: timed out after 0 ms");
    drop(release);
}

#[tokio::test]
async fn a_read_that_panics_degrades_to_a_reason() {
    let _places = PLACES.lock().await;
    let context = working_git_with(
        Path::new("/stand-in/panic"),
        Duration::from_secs(30),
        |_| panic!("stand-in read failing"),
    )
    .await;
    assert_eq!(context.render(), "git: unavailable: reading git panicked");
}

#[tokio::test]
async fn a_repository_whose_read_overran_is_not_read_again_until_it_ends() {
    let _places = PLACES.lock().await;
    let dir = Path::new("/stand-in/piling-up");
    let (release, released) = mpsc::channel::<()>();
    let (finished, read_finished) = mpsc::channel::<()>();
    let first = working_git_with(dir, SHORT, move |_| {
        let _ = released.recv();
        let _ = finished.send(());
        Err(GitUnavailable::NotARepository)
    })
    .await;
    assert_eq!(first.render(), "git: unavailable: timed out after 300 ms");
    // The abandoned read still runs: the next turn does not start another thread.
    let second = working_git_with(dir, SHORT, |_| {
        panic!("a second read must not start while the first is still running")
    })
    .await;
    let GitContext::Unavailable { reason } = &second else {
        panic!("{second:?}")
    };
    assert!(
        reason.starts_with("skipped: an earlier read of this repository is still running"),
        "{reason}"
    );
    release.send(()).expect("releasing the read");
    read_finished
        .recv()
        .expect("the read finishes once released");
    // Once it has ended (its thread drops the ticket right after), reads resume.
    let mut third = second;
    for _ in 0..1000 {
        third = working_git_with(dir, Duration::from_secs(30), |_| {
            Err(GitUnavailable::NotARepository)
        })
        .await;
        if third.render() == "git: unavailable: not a git repository" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    assert_eq!(third.render(), "git: unavailable: not a git repository");
}

/// Two reads of other repositories that take the two places of reads that may run at once,
/// for turns that wait `budget` for them, until released (or the test ends).
struct Holding {
    release: tokio::sync::watch::Sender<bool>,
    turns: Vec<tokio::task::JoinHandle<GitContext>>,
}

impl Holding {
    async fn start(name: &str, budget: Duration) -> Holding {
        let (release, released) = tokio::sync::watch::channel(false);
        let (started, mut both_started) = tokio::sync::mpsc::unbounded_channel::<()>();
        let turns = (1..=2)
            .map(|n| {
                let (started, released) = (started.clone(), released.clone());
                let dir = format!("/stand-in/{name}-holding-{n}");
                tokio::spawn(async move {
                    shared_git_with(Path::new(&dir), budget, move |_| {
                        let _ = started.send(());
                        // Also let go if the test ends early (the sender dropped), so a
                        // failing test does not hold both places for the tests after it.
                        while !*released.borrow() && released.has_changed().is_ok() {
                            std::thread::sleep(Duration::from_millis(1));
                        }
                        Err(GitUnavailable::NotARepository)
                    })
                    .await
                })
            })
            .collect();
        drop(started);
        for _ in 0..2 {
            tokio::time::timeout(Duration::from_secs(30), both_started.recv())
                .await
                .expect("a holding read starts within 30 s")
                .expect("a holding read starts, not skipped");
        }
        Holding { release, turns }
    }

    async fn release(self) -> Vec<GitContext> {
        self.release
            .send(true)
            .expect("releasing the holding reads");
        let mut ended = Vec::new();
        for turn in self.turns {
            ended.push(turn.await.expect("a holding turn"));
        }
        ended
    }
}

#[tokio::test]
async fn turns_that_ask_while_a_read_waits_to_start_share_it() {
    let _places = PLACES.lock().await;
    let reads = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let holding = Holding::start("sharing", Duration::from_secs(30)).await;
    // Both ask while the read of their repository waits for a place: one read serves both.
    let dir = Path::new("/stand-in/shared");
    let counted = reads.clone();
    let mut second = Box::pin(shared_git_with(dir, Duration::from_secs(30), move |_| {
        counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Err(GitUnavailable::BareRepository)
    }));
    let mut third = Box::pin(shared_git_with(dir, Duration::from_secs(30), |_| {
        panic!("a turn that joined a read does not read")
    }));
    std::future::poll_fn(|cx| {
        assert!(second.as_mut().poll(cx).is_pending());
        assert!(third.as_mut().poll(cx).is_pending());
        std::task::Poll::Ready(())
    })
    .await;
    for held in holding.release().await {
        assert_eq!(held.render(), "git: unavailable: not a git repository");
    }
    let (second, third) = tokio::join!(second, third);
    assert_eq!(
        second.render(),
        "git: unavailable: bare repository, no working tree"
    );
    assert_eq!(third, second);
    assert_eq!(reads.load(std::sync::atomic::Ordering::SeqCst), 1);
}

#[tokio::test]
async fn reads_past_their_budget_hold_no_place() {
    let _places = PLACES.lock().await;
    // Two reads stall (a hung repository); their turns go on once their budget passes.
    let holding = Holding::start("stalled", SHORT).await;
    tokio::time::sleep(SHORT).await;
    let context = working_git_with(
        Path::new("/stand-in/beside-the-stalled"),
        Duration::from_secs(30),
        |_| Err(GitUnavailable::BareRepository),
    )
    .await;
    assert_eq!(
        context.render(),
        "git: unavailable: bare repository, no working tree"
    );
    holding.release().await;
}

#[tokio::test]
async fn a_turn_that_joined_a_read_waits_on_when_the_turn_that_started_it_gives_up() {
    let _places = PLACES.lock().await;
    let holding = Holding::start("giving-up", Duration::from_secs(30)).await;
    let dir = Path::new("/stand-in/given-up");
    // Nobody waits for this read once the hasty turn gave up: it is not run (had it run,
    // the patient turn, which joined it, would get its result).
    let mut hasty = Box::pin(shared_git_with(dir, Duration::from_millis(1), |_| {
        Err(GitUnavailable::NotARepository)
    }));
    let mut patient = Box::pin(shared_git_with(dir, Duration::from_secs(30), |_| {
        Err(GitUnavailable::BareRepository)
    }));
    std::future::poll_fn(|cx| {
        assert!(hasty.as_mut().poll(cx).is_pending());
        assert!(patient.as_mut().poll(cx).is_pending());
        std::task::Poll::Ready(())
    })
    .await;
    assert_eq!(
        hasty.await.render(),
        "git: unavailable: timed out after 1 ms"
    );
    holding.release().await;
    // Neither the hasty turn's timeout nor the read it would have run: a read of its own, once
    // the first went without a result.
    assert_eq!(
        patient.await.render(),
        "git: unavailable: bare repository, no working tree"
    );
}
