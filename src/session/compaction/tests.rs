//! The compaction's pure steps, each checked on small histories spelt out letter by letter,
//! and the whole of it on random ones.

use super::notes::{BLOCK_LIMIT, NOTES_INSTRUCTIONS, TRANSCRIPT_LIMIT};
use super::*;
use crate::domain::{ToolCall, ToolResult};
use crate::prompt::pair_tool_calls;
use crate::testing::fixed_cases;
use proptest::prelude::*;
use serde_json::json;
use std::collections::HashSet;

/// An assistant message calling `name` once per id, from `c{first}` on.
fn calls(first: usize, count: usize, name: &str) -> Message {
    let call = |i| {
        ContentBlock::ToolUse(ToolCall {
            id: format!("c{i}"),
            name: name.into(),
            input: json!({"path": "src/a.rs"}),
        })
    };
    let content = (first..first + count).map(call).collect();
    Message {
        role: Role::Assistant,
        content,
    }
}

/// A user message answering the calls from `c{first}` on with results of `sizes` bytes.
fn results(first: usize, sizes: &[usize]) -> Message {
    let result = |(i, size): (usize, &usize)| {
        ContentBlock::ToolResult(ToolResult::ok(format!("c{}", first + i), "x".repeat(*size)))
    };
    let content = sizes.iter().enumerate().map(result).collect();
    Message {
        role: Role::User,
        content,
    }
}

/// A history from one letter per message: `u` a user text, `a` an assistant text, `c` a
/// call with the letter's index as id, `r` the result of the call just before.
fn history(spec: &str) -> Vec<Message> {
    let message = |(i, letter)| match letter {
        'u' => Message::user_text(format!("question {i:0>396}")),
        'c' => calls(i, 1, "glob"),
        'r' => results(i - 1, &[10]),
        _ => Message::assistant_text(format!("answer {i:0>398}")),
    };
    spec.chars().enumerate().map(message).collect()
}

fn contents(messages: &[Message]) -> Vec<String> {
    let results = messages.iter().flat_map(Message::tool_results);
    results.map(|r| r.content.clone()).collect()
}

/// Reduces `history` and checks from which index on it is kept, and the keep count.
fn check_reduce(history: &[Message], keep: usize, budget: u64, kept_from: usize, used: usize) {
    let out = reduce(history, keep, budget, None);
    assert_eq!(out.kept, history[kept_from..], "kept");
    assert_eq!(out.dropped, history[..kept_from], "dropped");
    assert_eq!(out.keep, used, "keep count");
}

#[test]
fn the_keep_count_halves_as_the_budget_shrinks_and_stops_at_two() {
    // User messages only, so nothing but the budget moves the cut.
    let history = history("uuuuuuuuuu");
    let cost = |keep: usize| estimate_tokens(&history[10 - keep..]);
    check_reduce(&history, 6, u64::MAX, 4, 6);
    check_reduce(&history, 6, cost(6), 4, 6);
    check_reduce(&history, 6, cost(6) - 1, 7, 3);
    check_reduce(&history, 6, cost(3), 7, 3);
    check_reduce(&history, 6, cost(3) - 1, 8, 2);
    check_reduce(&history, 6, 0, 8, 2);
    check_reduce(&history, 1, u64::MAX, 8, 2);
    check_reduce(&history[..4], 6, u64::MAX, 0, 4);
    check_reduce(&history[..4], 6, cost(3) - 1, 2, 2);
    check_reduce(&[], 6, 0, 0, 0);
}

#[test]
fn a_kept_reply_takes_its_input_along_when_that_fits() {
    let history = history("uauaua");
    check_reduce(&history, 3, u64::MAX, 2, 3);
    check_reduce(&history, 3, estimate_tokens(&history[3..]), 3, 3);
}

#[test]
fn results_whose_calls_are_dropped_are_dropped_too() {
    check_reduce(&history("ucraua"), 4, u64::MAX, 3, 4);
}

#[test]
fn a_cut_that_would_leave_one_message_takes_the_calls_in_instead() {
    for spec in ["ucra", "ucrc"] {
        let history = history(spec);
        check_reduce(&history, 2, estimate_tokens(&history[1..]), 1, 2);
        check_reduce(&history, 2, u64::MAX, 0, 2);
    }
}

#[test]
fn old_results_are_cleared_with_tool_and_size_and_recent_ones_stay() {
    let mut history = vec![Message::user_text("read them")];
    for (i, size) in [12_595, 4096, 40, 5000, 6000].into_iter().enumerate() {
        history.extend([calls(i, 1, "file_read"), results(i, &[size])]);
    }
    if let ContentBlock::ToolResult(first) = &mut history[2].content[0] {
        first.is_error = true;
    }
    let out = clear_tool_results(&history, 3);
    let first = "[output of file_read cleared to save context: 12.3 KiB]";
    let second = "[output of file_read cleared to save context: 4.0 KiB]";
    let mut expected = vec![first.to_owned(), second.to_owned()];
    expected.extend(contents(&history)[2..].iter().cloned());
    assert_eq!(contents(&out.messages), expected);
    assert_eq!(out.results_cleared, 2);
    assert_eq!(out.bytes_freed, 12_595 + 4096 - first.len() - second.len());
    assert!(out.messages[2].tool_results().all(|r| r.is_error));
    let unchanged = |(a, b): (&Message, &Message)| a.tool_results().count() > 0 || a == b;
    assert!(history.iter().zip(&out.messages).all(unchanged));
    assert_eq!(out.messages.len(), history.len());

    // Cleared results do not count among the kept ones when clearing again.
    let mut more = out.messages.clone();
    more.extend([calls(9, 1, "grep"), results(9, &[4000])]);
    let again = clear_tool_results(&more, 3);
    assert_eq!(again.results_cleared, 0, "the 40-byte result is left whole");
    let again = clear_tool_results(&again.messages, 2);
    assert_eq!(again.results_cleared, 1);
    let third = "[output of file_read cleared to save context: 4.9 KiB]";
    assert_eq!(
        contents(&again.messages)[..4],
        [first, second, "x".repeat(40).as_str(), third]
    );

    let orphan = clear_tool_results(&[results(7, &[2048])], 0);
    let expected = "[output of a tool cleared to save context: 2.0 KiB]";
    assert_eq!(contents(&orphan.messages), [expected]);
}

/// An assistant message making call `c{i}` of `name` with `input`.
fn call_with(i: usize, name: &str, input: serde_json::Value) -> Message {
    Message {
        role: Role::Assistant,
        content: vec![ContentBlock::ToolUse(ToolCall {
            id: format!("c{i}"),
            name: name.into(),
            input,
        })],
    }
}

/// The arguments of every call in `messages`, in order.
fn inputs(messages: &[Message]) -> Vec<serde_json::Value> {
    let calls = messages.iter().flat_map(Message::tool_calls);
    calls.map(|call| call.input.clone()).collect()
}

#[test]
fn old_calls_lose_their_large_arguments_with_their_results() {
    let edit = json!({"path": "a.rs", "old_string": "o".repeat(20 * 1024), "new_string": "n"});
    let write = json!({"path": "b.rs", "content": "w".repeat(5 * 1024)});
    let mut history = vec![Message::user_text("change them")];
    history.extend([call_with(0, "file_edit", edit.clone()), results(0, &[40])]);
    history.extend([call_with(1, "file_write", write.clone()), results(1, &[40])]);
    for i in 2..5 {
        history.extend([call_with(i, "file_edit", edit.clone()), results(i, &[40])]);
    }
    let out = clear_tool_results(&history, 3);
    let expected_old = json!({
        "path": "a.rs",
        "old_string": "[old_string of 20.0 KiB for file_edit on a.rs, cleared from the history \
                       to save context]",
        "new_string": "n",
    });
    let expected_write = json!({
        "path": "b.rs",
        "content": "[content of 5.0 KiB written to b.rs by file_write; read the file to see it]",
    });
    assert_eq!(
        inputs(&out.messages),
        [
            expected_old,
            expected_write,
            edit.clone(),
            edit.clone(),
            edit
        ]
    );
    assert_eq!((out.results_cleared, out.arguments_cleared), (0, 2));
    let saved = json_len(&inputs(&history)[0]) + json_len(&inputs(&history)[1])
        - json_len(&inputs(&out.messages)[0])
        - json_len(&inputs(&out.messages)[1]);
    assert_eq!(out.bytes_freed, saved);
    assert!(estimate_tokens(&out.messages) < estimate_tokens(&history) - 6_000);
    // Once cleared, a call's arguments are not cleared again.
    let again = clear_tool_results(&out.messages, 3);
    assert_eq!(again.arguments_cleared, 0);
}

/// A call's argument under `max_argument_bytes` stays in the history until the window needs
/// the room: then compaction clears it, even in the turn being answered, and the calls stay
/// paired with their results.
#[test]
fn a_turn_too_large_for_its_budget_has_its_calls_arguments_cleared() {
    let write = json!({"path": "gen.txt", "content": "g".repeat(20 * 1024)});
    let history = vec![
        Message::user_text("write the table"),
        call_with(0, "file_write", write),
        results(0, &[40]),
        call_with(1, "file_read", json!({"path": "gen.txt", "limit": 5})),
        results(1, &[40]),
    ];
    let plan = plan(&history, &AT_4K, KEEP, Some(0));
    assert!(plan.saves && plan.fits(), "{plan:?}");
    assert_eq!((plan.arguments_cleared, plan.results_changed), (1, 0));
    assert_eq!(
        inputs(&plan.extractive)[0]["content"],
        "[content of 20.0 KiB written to gen.txt by file_write; read the file to see it]"
    );
    assert_eq!(inputs(&plan.extractive)[1], inputs(&history)[1]);
    check_paired(&plan.extractive).unwrap();
}

#[test]
fn an_images_weight_is_estimated_and_clearing_its_result_drops_it() {
    let mut history = vec![Message::user_text("shoot")];
    history.extend([calls(0, 1, "mcp__web__shot"), results(0, &[40])]);
    history.extend([calls(1, 1, "file_read"), results(1, &[40])]);
    let text_only = estimate_tokens(&history);
    if let ContentBlock::ToolResult(shot) = &mut history[2].content[0] {
        shot.images.push(crate::domain::Attachment {
            media_type: "image/png".into(),
            path: "/tmp/shot.png".into(),
            bytes: 90_000,
        });
    }
    assert_eq!(
        estimate_tokens(&history),
        text_only + crate::domain::Attachment::TOKENS
    );
    // A short text with an image is worth clearing; the same text alone is not.
    let out = clear_tool_results(&history, 1);
    assert_eq!(out.results_cleared, 1);
    let cleared: Vec<_> = out.messages[2].tool_results().collect();
    assert!(cleared[0].images.is_empty());
    assert_eq!(
        cleared[0].content,
        "[output of mcp__web__shot cleared to save context: 40 B]"
    );
    // The placeholder's 16 bytes more than the text, and the image's weight gone.
    assert_eq!(estimate_tokens(&out.messages), text_only + 4);
}

#[test]
fn the_estimate_counts_bytes_and_blocks() {
    assert_eq!(estimate_tokens(&[]), 0);
    let text = Message::user_text("x".repeat(400));
    assert_eq!(
        estimate_tokens(&[text]),
        100 + MESSAGE_TOKENS + BLOCK_TOKENS
    );
    let args = json!({"path": "src/a.rs"}).to_string().len() as u64;
    let expected = (4 + args).div_ceil(4) + MESSAGE_TOKENS + BLOCK_TOKENS;
    assert_eq!(estimate_tokens(&[calls(0, 1, "glob")]), expected);
}

#[test]
fn the_notes_go_first_and_the_kept_messages_follow_in_order() {
    let reduction = reduce(&history("uaua"), 2, u64::MAX, None);
    let history = compacted_history(Some("  the task is X\n"), &reduction);
    let first = Message::user_text(format!("{NOTES_HEADING}\n\nthe task is X"));
    assert_eq!(history[0], first);
    assert_eq!(history[1..], reduction.kept);
    // Notes could repeat text from tool output; none of it may pass for tern's own note.
    let history = compacted_history(Some(&format!("{NUDGE_OPENING}\nrm -rf")), &reduction);
    assert!(!history[0].text().contains(NUDGE_OPENING));
}

#[test]
fn missing_or_blank_notes_give_the_marker() {
    let reduction = reduce(&history("uaua"), 2, u64::MAX, None);
    let marker = "[compaction: 2 earlier messages of this conversation were removed to fit \
                  the context window; their details are no longer available]";
    for notes in [None, Some(""), Some(" \n ")] {
        let history = compacted_history(notes, &reduction);
        assert_eq!(history[0], Message::user_text(marker));
        assert_eq!(history[1..], reduction.kept);
    }
    assert!(removed_marker(1).contains("1 earlier message of this conversation was"));
}

#[test]
fn the_notes_request_shows_calls_cut_results_and_no_nudges() {
    let dropped = vec![
        Message::user_text(format!("{NUDGE_OPENING}\n\n[current-time]\nnow")),
        Message::user_text("fix the bug"),
        calls(0, 1, "file_read"),
        results(0, &[5000]),
    ];
    let text = notes_request_text(&dropped, TRANSCRIPT_LIMIT, 100);
    assert!(text.starts_with(NOTES_INSTRUCTIONS), "{text}");
    assert!(!text.contains("[current-time]"), "{text}");
    assert!(text.contains("[user]\nfix the bug\n"), "{text}");
    assert!(
        text.contains("[tool call: file_read]\n{\"path\":\"src/a.rs\"}\n"),
        "{text}"
    );
    let shown = format!("[tool result: file_read]\n{}\n", "x".repeat(BLOCK_LIMIT));
    assert!(text.contains(&shown), "{text}");
    assert!(
        text.contains("[cut: the first 2.0 KiB of 4.9 KiB are shown]"),
        "{text}"
    );
}

#[test]
fn an_oversize_transcript_keeps_its_most_recent_part() {
    let dropped: Vec<_> = (0..300)
        .map(|i| Message::user_text(format!("{i:>04}{}", "y".repeat(1020))))
        .collect();
    let text = notes_request_text(&dropped, TRANSCRIPT_LIMIT, 100);
    assert!(text.len() < TRANSCRIPT_LIMIT + 4096, "{}", text.len());
    assert!(text.contains("0299yyy") && !text.contains("0000yyy"));
    assert!(text.contains("earliest part of the transcript is left out"));
    let huge = notes_request_text(
        &[Message::user_text("z".repeat(TRANSCRIPT_LIMIT * 2))],
        TRANSCRIPT_LIMIT,
        100,
    );
    assert!(huge.len() < TRANSCRIPT_LIMIT + 4096, "{}", huge.len());
}

/// One step of a random history.
#[derive(Debug, Clone)]
enum Step {
    Input(String),
    Nudge,
    /// An assistant message with a call per entry, each answered by a result of that size
    /// in the next message; a plain reply when empty.
    Reply(Vec<usize>),
}

fn step() -> impl Strategy<Value = Step> {
    let size = prop_oneof![4 => 0usize..300, 1 => 3_000usize..40_000];
    prop_oneof![
        "[a-z ]{0,30}".prop_map(Step::Input),
        Just(Step::Nudge),
        prop::collection::vec(size, 0..=3).prop_map(Step::Reply),
    ]
}

/// The history `steps` make, ending with `unanswered` calls not answered yet.
fn build(steps: &[Step], unanswered: usize) -> Vec<Message> {
    let mut history = Vec::new();
    let mut next = 0;
    extend(&mut history, steps, &mut next);
    if unanswered > 0 {
        history.push(calls(next, unanswered, "shell"));
    }
    history
}

/// Appends what `steps` make to `history`, numbering calls from `next` on.
fn extend(history: &mut Vec<Message>, steps: &[Step], next: &mut usize) {
    for step in steps {
        match step {
            Step::Input(text) => history.push(Message::user_text(text.clone())),
            Step::Nudge => history.push(Message::user_text(format!("{NUDGE_OPENING}\n\nx"))),
            Step::Reply(sizes) if sizes.is_empty() => {
                history.push(Message::assistant_text("done"));
            }
            Step::Reply(sizes) => {
                history.extend([calls(*next, sizes.len(), "shell"), results(*next, sizes)]);
                *next += sizes.len();
            }
        }
    }
}

/// Every result in `history` has its call before it, and every call but the last message's
/// its result.
fn check_paired(history: &[Message]) -> Result<(), TestCaseError> {
    let mut seen_calls = HashSet::new();
    for message in history {
        for result in message.tool_results() {
            prop_assert!(seen_calls.contains(&result.tool_use_id), "orphan result");
        }
        seen_calls.extend(message.tool_calls().map(|c| c.id.clone()));
    }
    let answered: HashSet<_> = history
        .iter()
        .flat_map(Message::tool_results)
        .map(|r| &r.tool_use_id)
        .collect();
    for message in &history[..history.len().saturating_sub(1)] {
        for call in message.tool_calls() {
            prop_assert!(answered.contains(&call.id), "unanswered call {}", call.id);
        }
    }
    Ok(())
}

proptest! {
    // Failures are turned into named unit tests rather than kept in a file, and the seed is
    // fixed so that every run tries the same cases.
    #![proptest_config(fixed_cases())]

    #[test]
    fn compaction_keeps_every_call_with_its_result(
        steps in prop::collection::vec(step(), 0..30),
        unanswered in 0usize..3,
        keep_recent in 0usize..5,
        keep in 0usize..10,
        budget in 0u64..20_000,
        notes in prop::option::of("[a-z \n]{0,20}"),
    ) {
        let original = build(&steps, unanswered);
        let cleared = clear_tool_results(&original, keep_recent);
        prop_assert_eq!(cleared.messages.len(), original.len());
        let reduction = reduce(&cleared.messages, keep, budget, None);
        let mut whole = reduction.dropped.clone();
        whole.extend(reduction.kept.iter().cloned());
        prop_assert_eq!(&whole, &cleared.messages);
        prop_assert!(reduction.kept.len() >= reduction.keep.min(2));
        if estimate_tokens(&reduction.kept) > budget {
            prop_assert!(reduction.keep <= 2);
        }

        let history = compacted_history(notes.as_deref(), &reduction);
        prop_assert_eq!(history[0].role, Role::User);
        check_paired(&history)?;
        if unanswered == 0 {
            prop_assert_eq!(pair_tool_calls(&history), history);
        }
    }
}

#[test]
fn a_cut_input_is_repeated_in_the_head() {
    let dropped = vec![
        Message::user_text(format!("{NUDGE_OPENING}\n\n[current-time]\nutc: now")),
        Message::user_text("THE TASK: fix the build"),
        Message::assistant_text("looking"),
    ];
    let mut history = vec![
        Message::user_text("[compaction notes: …]\n\nnotes"),
        Message::assistant_text("still looking"),
    ];
    keep_the_task(&mut history, &dropped);
    let head = history[0].text();
    assert!(
        head.ends_with(
            "\n\n[the latest message, which is being answered now]\nTHE TASK: fix the build"
        ),
        "{head}"
    );
    // When the kept part still holds an input, the head stays as it was.
    let mut kept = vec![
        Message::user_text("[compaction notes: …]"),
        Message::user_text("a newer message"),
    ];
    keep_the_task(&mut kept, &dropped);
    assert_eq!(kept[0].text(), "[compaction notes: …]");
}

#[test]
fn notes_nudges_and_guard_notes_are_not_inputs() {
    assert!(is_input(&Message::user_text("hello")));
    for text in [
        format!("{NUDGE_OPENING}\n\nx"),
        "[compaction notes: …]".to_owned(),
        format!("{GUARD_NOTE} 4 tool calls have failed"),
    ] {
        assert!(!is_input(&Message::user_text(text)));
    }
    assert!(is_compaction_head(&Message::user_text(
        "[compaction: 3 earlier"
    )));
}

/// A budget for a 4k window with a compact prompt and a 1,024-token reply.
const AT_4K: Budget = Budget {
    window: 4096,
    overhead: 800,
    reply: 1024,
};

const KEEP: Keep = Keep {
    results: 3,
    messages: 6,
};

#[test]
fn the_budget_is_a_share_of_the_window() {
    assert_eq!(AT_4K.target(), 2048 - 800);
    assert_eq!(AT_4K.limit(), 4096 - 800 - 1024);
    assert_eq!(AT_4K.whole_results(), 512);
    assert_eq!(AT_4K.notes_tokens(), 256);
    assert_eq!(AT_4K.kept_tokens(), 2048 - 800 - 256);
    let large = Budget {
        window: 200_000,
        overhead: 2_600,
        reply: 8_192,
    };
    assert_eq!(large.notes_tokens(), NOTES_MAX_TOKENS);
    assert_eq!(large.limit(), 200_000 - 2_600 - 8_192);
    // A reply limit over a quarter of the window keeps only a quarter's room.
    let greedy = Budget {
        reply: 4_000,
        ..AT_4K
    };
    assert_eq!(greedy.limit(), 4096 - 800 - 1024);
}

#[test]
fn the_notes_call_fits_its_window_and_takes_a_share_of_the_timeout() {
    let sidecar = std::time::Duration::from_secs(90);
    let call = notes_call(&AT_4K, 4096, sidecar).expect("a 4k window has room for notes");
    assert_eq!(call.max_output_tokens, 256);
    assert_eq!(call.words, 128);
    assert_eq!(call.timeout, std::time::Duration::from_secs(20));
    // However long the cut part, the request and the notes fit the window together.
    let dropped: Vec<Message> = (0..200)
        .flat_map(|i| {
            [
                Message::user_text(format!("question {i} {}", "q".repeat(300))),
                calls(i, 1, "file_read"),
                results(i, &[3_000]),
            ]
        })
        .collect();
    let text = notes_request_text(&dropped, call.transcript_bytes, call.words);
    let request = [Message::user_text(NOTES_SYSTEM), Message::user_text(&text)];
    let input = estimate_tokens(&request);
    assert!(
        input + u64::from(call.max_output_tokens) <= 4096,
        "{input} + {} tokens",
        call.max_output_tokens
    );
    assert!(text.contains("Keep the notes under 128 words."), "{text}");
    assert!(text.contains("question 199"), "the newest part is kept");

    let at = |window: u64| {
        let budget = Budget {
            window,
            overhead: 2_600,
            reply: 8_192,
        };
        let call = notes_call(&budget, window, sidecar).expect("room for notes");
        (call.max_output_tokens, call.timeout.as_secs())
    };
    assert_eq!(at(32_768), (2_048, 45));
    assert_eq!(at(200_000), (4_096, 90));
    // A shorter sidecar_llm_timeout is kept as it is.
    let short = notes_call(&AT_4K, 4096, std::time::Duration::from_secs(5)).unwrap();
    assert_eq!(short.timeout, std::time::Duration::from_secs(5));
    // A notes model with a window too small for instructions, transcript and notes: no call,
    // the extractive cut stands.
    assert_eq!(notes_call(&AT_4K, 500, sidecar), None);
    let tiny = Budget {
        window: 512,
        overhead: 100,
        reply: 100,
    };
    assert_eq!(notes_call(&tiny, 512, sidecar), None);
}

/// A history of `turns` earlier turns reading files, then the turn being answered: its nudge,
/// its input and `rounds` rounds of 1–2 KB results. Returns it and where the turn starts.
fn turn_after(turns: usize, rounds: usize) -> (Vec<Message>, usize) {
    let mut history = Vec::new();
    let mut next = 0;
    for i in 0..turns {
        history.push(Message::user_text(format!(
            "{NUDGE_OPENING}\n\n[current-time]\nnow"
        )));
        history.push(Message::user_text(format!("earlier request {i}")));
        extend(&mut history, &[Step::Reply(vec![1_500])], &mut next);
        history.push(Message::assistant_text(format!("earlier answer {i}")));
    }
    let start = history.len();
    history.push(Message::user_text(format!(
        "{NUDGE_OPENING}\n\n[current-time]\nnow"
    )));
    history.push(Message::user_text("THE REQUEST: fix the build"));
    for round in 0..rounds {
        extend(
            &mut history,
            &[Step::Reply(vec![1_024 + round * 100])],
            &mut next,
        );
    }
    (history, start)
}

#[test]
fn the_turn_being_answered_keeps_its_input_and_rounds_with_older_output_cleared() {
    let (history, start) = turn_after(6, 10);
    assert_eq!(turn_start(&history), Some(start));
    let plan = plan(&history, &AT_4K, KEEP, Some(start));
    assert!(
        plan.saves && plan.fits(),
        "{} tokens after",
        plan.tokens_after
    );
    let new = &plan.extractive;
    let at = plan.turn_start.expect("the turn is still there");
    assert_eq!(at, 1, "everything before the turn made way for the marker");
    assert_eq!(new[at..], plan.reduction.kept[..]);
    assert_eq!(new[at + 1].text(), "THE REQUEST: fix the build");
    // Every round is still there; only the latest result is whole.
    let calls_kept = new.iter().flat_map(Message::tool_calls).count();
    assert_eq!(calls_kept, 10);
    let whole: Vec<usize> = new
        .iter()
        .flat_map(Message::tool_results)
        .filter(|r| !r.content.starts_with("[output of"))
        .map(|r| r.content.len())
        .collect();
    assert_eq!(whole, [1_024 + 900]);
    // After it there is real room: a quarter of the window at least.
    assert!(
        plan.tokens_after + 1024 <= 3072,
        "{} tokens leave no room before the threshold",
        plan.tokens_after
    );
}

#[test]
fn a_latest_result_too_large_for_the_window_is_shortened_and_a_too_large_input_does_not_fit() {
    let mut history = vec![
        Message::user_text(format!("{NUDGE_OPENING}\n\nx")),
        Message::user_text("read the log"),
        calls(0, 1, "file_read"),
        results(0, &[40_000]),
    ];
    let plan = plan(&history, &AT_4K, KEEP, Some(0));
    assert!(plan.saves && plan.fits(), "{} tokens", plan.tokens_after);
    let result = &contents(&plan.extractive)[0];
    assert!(result.len() < 9_000, "{}", result.len());
    assert!(
        result.contains("from the middle of this output to fit the 4096-token context window"),
        "{result}"
    );
    assert!(result.starts_with("xxx") && result.ends_with("xxx"));

    history[1] = Message::user_text("y".repeat(20_000));
    let plan = super::plan(&history, &AT_4K, KEEP, Some(0));
    assert!(!plan.fits(), "a 5,000-token request cannot fit a 4k window");
    assert_eq!(
        plan.extractive[1], history[1],
        "the input itself is never cut"
    );
}

#[test]
fn notes_that_would_make_the_history_larger_are_left_out() {
    let (history, start) = turn_after(3, 1);
    let plan = plan(&history, &AT_4K, KEEP, Some(start));
    assert!(plan.cuts_something());
    let short = plan.with_notes("the person asked for three files; each was read.");
    assert!(short.is_some());
    let rambling = "and then ".repeat(2_000);
    assert_eq!(plan.with_notes(&rambling), None);
    assert_eq!(plan.with_notes("  \n"), None);
}

#[test]
fn an_earlier_compaction_s_notes_are_not_cut_alone() {
    let (mut history, _) = turn_after(0, 8);
    history.insert(
        0,
        Message::user_text("[compaction notes: the earlier part]\n\nNOTES: the task is X."),
    );
    let plan = plan(&history, &AT_4K, KEEP, Some(1));
    assert!(plan.saves, "older output of the turn is cleared");
    assert!(plan.reduction.dropped.is_empty());
    assert_eq!(plan.extractive[0], history[0], "the notes stay");
    assert_eq!(plan.turn_start, Some(1));
    assert!(!plan.cuts_something(), "no notes call for nothing cut");
}

#[test]
fn a_history_opening_with_a_reply_and_nothing_to_save_is_kept_as_it_is() {
    let history = vec![
        Message::assistant_text("done"),
        Message::user_text(format!("{NUDGE_OPENING}\n\nnow")),
        Message::user_text("a"),
    ];
    let budget = Budget {
        overhead: 948,
        ..AT_4K
    };
    let keep = Keep {
        results: 3,
        messages: 9,
    };
    let plan = plan(&history, &budget, keep, Some(1));
    assert!(!plan.saves);
    assert_eq!(plan.with_notes(&"notes ".repeat(500)), None);
    assert_eq!(plan.extractive, history);
}

#[test]
fn a_history_opening_with_a_tool_round_keeps_its_opening_when_only_output_is_cleared() {
    let history = vec![
        calls(0, 1, "shell"),
        results(0, &[48]),
        Message::user_text(format!("{NUDGE_OPENING}\n\nnow")),
        Message::user_text("a   a"),
    ];
    let budget = Budget {
        overhead: 973,
        ..AT_4K
    };
    let keep = Keep {
        results: 0,
        messages: 4,
    };
    let plan = plan(&history, &budget, keep, Some(2));
    assert!(plan.saves, "the old result is cleared");
    assert!(plan.reduction.dropped.is_empty(), "nothing is cut");
    assert_eq!(
        plan.extractive[0], history[0],
        "the history opens as it did"
    );
    assert_eq!(plan.turn_start, Some(2));
    assert_eq!(
        plan.with_notes(&"notes ".repeat(500)),
        None,
        "no notes for no cut"
    );
}

/// A step of the turn being answered: mostly tool rounds of up to 2 KB, now and then a
/// large one.
fn round() -> impl Strategy<Value = Step> {
    let size = prop_oneof![6 => 0usize..2_048, 1 => 2_048usize..12_000];
    prop_oneof![
        6 => prop::collection::vec(size, 1..=2).prop_map(Step::Reply),
        1 => Just(Step::Reply(Vec::new())),
    ]
}

proptest! {
    // Failures are turned into named unit tests rather than kept in a file, and the seed is
    // fixed so that every run tries the same cases.
    #![proptest_config(fixed_cases())]

    #[test]
    fn at_a_4k_window_a_compaction_never_grows_the_history_nor_cuts_the_turn(
        before in prop::collection::vec(step(), 0..20),
        rounds in prop::collection::vec(round(), 0..12),
        input in "[a-z][a-z ]{0,40}",
        notes in "[a-z \n]{0,3000}",
        keep_results in 0usize..5,
        keep_messages in 0usize..10,
        overhead in 600u64..1_000,
    ) {
        let mut history = Vec::new();
        let mut next = 0;
        extend(&mut history, &before, &mut next);
        let start = history.len();
        history.push(Message::user_text(format!("{NUDGE_OPENING}\n\nnow")));
        history.push(Message::user_text(input.clone()));
        extend(&mut history, &rounds, &mut next);
        let budget = Budget { overhead, ..AT_4K };
        let keep = Keep { results: keep_results, messages: keep_messages };
        let plan = plan(&history, &budget, keep, Some(start));
        let new = plan.with_notes(&notes).unwrap_or_else(|| plan.extractive.clone());
        let after = overhead + estimate_tokens(&new);
        prop_assert!(after <= plan.tokens_before, "{after} > {}", plan.tokens_before);
        if plan.saves {
            prop_assert!(after < plan.tokens_before);
            // A cut puts a user message first; a history kept whole (older output cleared)
            // opens as it did.
            if !plan.reduction.dropped.is_empty() || history[0].role == Role::User {
                prop_assert_eq!(new[0].role, Role::User);
            }
        } else {
            prop_assert_eq!(&new, &history);
        }
        // The turn survives whole: its nudge, its input, and every call it made.
        let at = plan.turn_start.expect("the turn is kept");
        prop_assert_eq!(&new[at], &history[start]);
        prop_assert_eq!(&new[at + 1], &history[start + 1]);
        let calls = |messages: &[Message]| {
            messages.iter().flat_map(Message::tool_calls).cloned().collect::<Vec<_>>()
        };
        prop_assert_eq!(calls(&new[at..]), calls(&history[start..]));
        check_paired(&new)?;
    }
}
