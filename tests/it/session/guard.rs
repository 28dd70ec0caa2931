//! The loop guard through a real session: repeated calls and cycles refused and then the
//! turn ended quietly, failures nudged and then ended, and the ceiling on rounds.

use super::*;
use pretty_assertions::assert_eq;
use tern::domain::{GuardCause, TurnStop};

fn guard_end(cause: GuardCause, rounds: u32) -> TurnStop {
    TurnStop::LoopGuard {
        cause: Some(cause),
        rounds,
    }
}

#[tokio::test]
async fn repeating_the_same_call_is_refused_then_ends_the_turn_quietly() {
    let world = World::anthropic();
    for _ in 0..8 {
        world
            .mock
            .push(Reply::tool_call("glob", json!({"pattern": "*.rs"})).with_text("Looking again."));
    }
    let handle = world.create();
    let events = turn(&handle, "find the rust files").await;
    assert_eq!(
        stops(&events),
        [(
            guard_end(GuardCause::RepeatedCalls, 7),
            "Looking again.".to_owned()
        )]
    );
    let results = results(&events);
    // Two rounds run, five are refused (the fifth more sharply), the eighth ends the turn
    // and its call is answered as not run.
    assert_eq!(results.len(), 8);
    assert!(!results[0].1 && !results[1].1);
    for (content, is_error) in &results[2..6] {
        assert!(
            *is_error && content.contains("in each of the last two rounds"),
            "{content}"
        );
    }
    assert!(
        results[6].0.contains("The next repetition ends the turn"),
        "{}",
        results[6].0
    );
    assert!(
        results[7]
            .0
            .starts_with("not run: tern ended the turn because it kept repeating"),
        "{}",
        results[7].0
    );
    assert_eq!(world.mock.model_requests().len(), 8);
    // Quietly: the turn completed, no error was journaled.
    let journal = journal(&world, handle.id());
    assert!(
        !journal
            .iter()
            .any(|e| matches!(e, JournalEvent::TurnFailed { .. }))
    );
    assert_eq!(
        journal.last().and_then(JournalEvent::turn_stop),
        Some(guard_end(GuardCause::RepeatedCalls, 7))
    );
    // The session goes on.
    world.mock.push(Reply::text("fine"));
    let events = turn(&handle, "stop searching").await;
    assert_eq!(completed(&events).as_deref(), Some("fine"));
}

#[tokio::test]
async fn calls_that_keep_failing_get_nudges_then_end_the_turn_quietly() {
    let world = World::anthropic();
    for i in 0..6 {
        world.mock.push(
            Reply::tool_call("file_read", json!({"path": format!("missing{i}.txt")}))
                .with_text(format!("Trying file {i}.")),
        );
    }
    let handle = world.create();
    let events = turn(&handle, "read the missing files").await;
    assert_eq!(
        stops(&events),
        [(
            guard_end(GuardCause::RepeatedFailures, 5),
            "Trying file 5.".to_owned()
        )]
    );
    // The nudges went into the history, so the model saw them.
    let requests = world.mock.model_requests();
    let nudges_seen = |i: usize| {
        requests[i]
            .texts()
            .iter()
            .filter(|t| t.contains("failed"))
            .count()
    };
    assert_eq!(requests.len(), 6);
    assert_eq!(nudges_seen(2), 0);
    assert_eq!(nudges_seen(3), 1);
    assert_eq!(nudges_seen(4), 2);
}

/// What the report saw with a small local model: `glob src/**`, which finds nothing and so
/// "succeeds", alternating with `file_read src/**`, which fails. The empty success reset the
/// failure score every other round and the turn ran some 40 rounds.
#[tokio::test]
async fn a_glob_that_finds_nothing_alternating_with_a_failing_read_ends_quickly() {
    let world = World::anthropic();
    for _ in 0..20 {
        let glob = Reply::tool_call("glob", json!({"pattern": "src/**"}));
        world.mock.push(glob.with_text("Let me find the sources."));
        let read = Reply::tool_call("file_read", json!({"path": "src/**"}));
        world.mock.push(read.with_text("Reading them."));
    }
    let handle = world.create();
    let events = turn(&handle, "what does this project do?").await;
    // Four rounds run; the cycle's next five calls are refused; the tenth reply ends it.
    assert_eq!(
        stops(&events),
        [(
            guard_end(GuardCause::RepeatedCalls, 9),
            "Reading them.".to_owned()
        )]
    );
    assert_eq!(world.mock.model_requests().len(), 10);
    let results = results(&events);
    assert_eq!(results.len(), 10);
    assert!(
        results[0].0.starts_with("No files match"),
        "{}",
        results[0].0
    );
    assert!(results[1].1, "the read fails: {}", results[1].0);
    for (content, is_error) in &results[4..9] {
        assert!(*is_error && content.contains("twice over"), "{content}");
    }
    assert!(
        results[9].0.starts_with("not run: tern ended the turn"),
        "{}",
        results[9].0
    );
    let journal = journal(&world, handle.id());
    assert!(
        !journal
            .iter()
            .any(|e| matches!(e, JournalEvent::TurnFailed { .. })),
        "a quiet end"
    );
}

#[tokio::test]
async fn a_turn_ends_quietly_at_its_most_rounds_after_the_model_was_told() {
    let mut world = World::anthropic();
    world.settings.max_rounds = 3;
    world.home.write_file("a.txt", &"line\n".repeat(10));
    let read = |n: u32| Reply::tool_call("file_read", json!({"path": "a.txt", "offset": n}));
    for n in 1..=3 {
        world.mock.push(read(n));
    }
    // Told that its last round has run, the model sums up.
    world.mock.push(Reply::text("Summary: read lines 1 to 10."));
    let handle = world.create();
    let events = turn(&handle, "read a.txt").await;
    assert_eq!(
        stops(&events),
        [(
            TurnStop::Completed,
            "Summary: read lines 1 to 10.".to_owned()
        )]
    );
    let requests = world.mock.model_requests();
    let told = |i: usize| {
        requests[i]
            .texts()
            .iter()
            .any(|t| t.contains("last of the 3 rounds of tool calls"))
    };
    assert!(!told(2) && told(3));

    // A model that calls on regardless has its calls answered as not run, and its text
    // stands.
    for n in 4..=6 {
        world.mock.push(read(n));
    }
    world.mock.push(read(7).with_text("One more look."));
    let events = turn(&handle, "again").await;
    assert_eq!(
        stops(&events),
        [(
            guard_end(GuardCause::MaxRounds, 3),
            "One more look.".to_owned()
        )]
    );
    let last = results(&events).pop().expect("a result for the last call");
    assert!(
        last.1
            && last
                .0
                .contains("has run its 3 rounds of tool calls ([session] max_rounds)"),
        "{}",
        last.0
    );
    assert_eq!(world.mock.model_requests().len(), 8);
}
