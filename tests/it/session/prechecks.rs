//! Checks before asking: in approval mode `ask`, a call that cannot work (a missing file, an
//! edit that changes nothing or whose text is absent, a directory to write, malformed
//! arguments) is answered at once with the reason, and nobody is asked about it; a check
//! never reads a file outside the project to decide.

use super::approvals::{ask, asking_world, was_asked};
use super::*;
use pretty_assertions::assert_eq;
use tern::domain::{Answer, ApprovalDetail};

#[tokio::test]
async fn calls_that_cannot_work_fail_with_the_reason_and_nobody_is_asked() {
    let world = asking_world();
    world.home.write_file("a.txt", "hello\n");
    let outside = world.home.root().join("no-such-dir");
    let edit = |path: &str, old: &str, new: &str| json!({"path": path, "old_string": old, "new_string": new});
    let calls = [
        ("file_edit", edit("missing.txt", "a", "b")),
        ("file_edit", edit("a.txt", "hello", "hello")),
        ("file_edit", edit("a.txt", "absent", "x")),
        ("file_edit", json!({"path": "a.txt", "old_string": "hello"})),
        ("file_write", json!({"path": ".", "content": "x"})),
        (
            "set_working_directory",
            json!({"path": outside.to_str().unwrap()}),
        ),
        (
            "file_read",
            json!({"path": outside.join("f.txt").to_str().unwrap()}),
        ),
        ("shell_execute", json!({"command": "  "})),
    ];
    world.mock.push(Reply::tool_calls(calls));
    world.mock.push(Reply::text("None of that worked."));
    let handle = world.create();
    let events = turn(&handle, "try things").await;

    assert_eq!(completed(&events).as_deref(), Some("None of that worked."));
    assert!(!was_asked(&events), "nobody was asked: {events:?}");
    let journal = journal(&world, handle.id());
    assert!(
        !journal
            .iter()
            .any(|e| matches!(e, JournalEvent::ApprovalRequested { .. })),
        "no request journaled"
    );
    let results = results(&events);
    let expected = [
        "missing.txt does not exist.",
        "`old_string` and `new_string` are the same, so there is nothing to change",
        "`old_string` was not found in a.txt",
        "missing required argument `new_string`",
        ". is a directory, not a file",
        "no-such-dir does not exist.",
        "f.txt does not exist.",
        "`command` is empty",
    ];
    assert_eq!(results.len(), expected.len());
    for ((content, is_error), reason) in results.iter().zip(expected) {
        assert!(
            *is_error && content.contains(reason),
            "{reason:?} in {content:?}"
        );
    }
    assert_eq!(world.home.read_file("a.txt"), "hello\n", "nothing changed");
}

#[tokio::test]
async fn a_call_that_can_work_is_still_asked_after_one_that_cannot() {
    let world = asking_world();
    world.home.write_file("a.txt", "hello\n");
    world.mock.push(Reply::tool_calls([
        (
            "file_edit",
            json!({"path": "a.txt", "old_string": "absent", "new_string": "x"}),
        ),
        (
            "file_edit",
            json!({"path": "a.txt", "old_string": "hello", "new_string": "hi"}),
        ),
    ]));
    world.mock.push(Reply::text("Edited."));
    let handle = world.create();
    let (mut events, asked) = ask(&handle, "edit").await;
    assert_eq!(asked.summary, "Edit a.txt (+1 -1 lines)");
    handle.answer(&asked.call_id, Answer::Once).await.unwrap();
    until_turns_end(&mut events, 1).await;
    assert_eq!(world.home.read_file("a.txt"), "hi\n");
}

/// The model may not read a file outside the project without approval, so the check tells
/// it nothing about what such a file holds: the person is asked, and the box says the edit
/// will fail.
#[tokio::test]
async fn a_check_never_reads_a_file_outside_the_project() {
    let world = asking_world();
    let secret = world.home.root().join("secret.txt");
    std::fs::write(&secret, "the real password\n").unwrap();
    world.mock.push(Reply::tool_call(
        "file_edit",
        json!({"path": secret.to_str().unwrap(), "old_string": "a guess", "new_string": "x"}),
    ));
    world.mock.push(Reply::text("Declined."));
    let handle = world.create();
    let (mut events, asked) = ask(&handle, "edit it").await;
    assert_eq!(asked.tool, "file_edit");
    assert!(
        asked
            .summary
            .contains("which will fail: `old_string` was not found in"),
        "{}",
        asked.summary
    );
    assert!(
        asked.summary.ends_with("(outside the project)"),
        "{}",
        asked.summary
    );
    let ApprovalDetail::Edit { diff, .. } = &asked.detail else {
        panic!("an edit shows a diff: {:?}", asked.detail);
    };
    assert!(diff.contains("-a guess") && diff.contains("+x"), "{diff}");
    handle
        .answer(&asked.call_id, Answer::Deny { reason: None })
        .await
        .unwrap();
    until_turns_end(&mut events, 1).await;
    let results = tool_result_texts(&world.mock.model_requests()[1].body);
    assert!(results[0].contains("declined"), "{results:?}");
}
