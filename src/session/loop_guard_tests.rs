//! The loop guard driven directly: rounds planned, "run" with scripted outcomes and
//! recorded, as the turn does.

use super::*;
use serde_json::json;
use std::sync::atomic::{AtomicU32, Ordering};

fn call(name: &str, input: Value) -> ToolCall {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let id = format!("call_{}", NEXT.fetch_add(1, Ordering::Relaxed));
    ToolCall {
        id,
        name: name.to_owned(),
        input,
    }
}

fn read(path: &str) -> ToolCall {
    call("read", json!({ "path": path }))
}

fn glob(pattern: &str) -> ToolCall {
    call("glob", json!({ "pattern": pattern }))
}

/// A guard with the default ceiling of 60 rounds.
fn guard() -> LoopGuard {
    LoopGuard::new(60)
}

/// What a call that runs does in a scripted round.
#[derive(Clone)]
enum Does {
    Succeed,
    FindNothing,
    Fail(String),
}

/// Plans a round, "runs" it (each call that runs does what `does` says; refusals get their
/// text) and records it. Returns the plan and the note for the model.
fn round(
    guard: &mut LoopGuard,
    calls: &[ToolCall],
    does: impl Fn(&ToolCall) -> Does,
) -> (Plan, Option<String>) {
    let plan = guard.plan(calls);
    if plan.stop.is_some() {
        return (plan, None);
    }
    let outcomes: Vec<Outcome> = calls
        .iter()
        .zip(&plan.verdicts)
        .map(|(c, verdict)| match (verdict, does(c)) {
            (Verdict::Refuse(text), _) => Outcome::of(true, true, false, text),
            (Verdict::Run, Does::Succeed) => Outcome::of(false, false, false, "fine"),
            (Verdict::Run, Does::FindNothing) => Outcome::of(false, false, true, "no matches"),
            (Verdict::Run, Does::Fail(text)) => Outcome::of(false, true, false, &text),
        })
        .collect();
    let note = guard.record(&outcomes);
    (plan, note)
}

fn succeed(_: &ToolCall) -> Does {
    Does::Succeed
}

/// One round of one new call failing with `error`.
fn fail(guard: &mut LoopGuard, n: u32, error: &str) -> Option<String> {
    let calls = [read(&format!("missing{n}"))];
    let (plan, nudge) = round(guard, &calls, |_| Does::Fail(error.to_owned()));
    assert_eq!(plan.verdicts, [Verdict::Run]);
    nudge
}

/// Which of `calls` run this round.
fn runs(guard: &mut LoopGuard, calls: &[ToolCall]) -> Vec<bool> {
    let (plan, _) = round(guard, calls, succeed);
    plan.verdicts.iter().map(|v| *v == Verdict::Run).collect()
}

fn check_verdicts(guard: &mut LoopGuard, calls: &[ToolCall], expected: &[bool]) {
    assert_eq!(runs(guard, calls), expected, "{calls:?}");
}

#[test]
fn third_equal_round_is_refused_not_earlier_nor_after_a_gap() {
    let mut guard = guard();
    check_verdicts(&mut guard, &[read("a")], &[true]);
    check_verdicts(&mut guard, &[read("a"), read("b")], &[true, true]);
    check_verdicts(&mut guard, &[read("a"), read("b")], &[false, true]);
    check_verdicts(&mut guard, &[read("c")], &[true]);
    // "a" was in rounds 1 to 3 but not in round 4, and no set of calls repeats.
    check_verdicts(&mut guard, &[read("a"), read("c")], &[true, true]);
}

#[test]
fn argument_key_order_does_not_matter_but_the_tool_does() {
    let mut guard = guard();
    let first = json!({"path": "x", "range": {"start": 1, "end": 9}});
    let second = json!({"range": {"end": 9, "start": 1}, "path": "x"});
    check_verdicts(&mut guard, &[call("read", first.clone())], &[true]);
    check_verdicts(&mut guard, &[call("read", second.clone())], &[true]);
    check_verdicts(&mut guard, &[call("grep", first.clone())], &[true]);
    check_verdicts(&mut guard, &[call("grep", second)], &[true]);
    check_verdicts(&mut guard, &[call("grep", first)], &[false]);
}

#[test]
fn refusals_escalate_then_the_turn_stops() {
    let mut guard = guard();
    check_verdicts(&mut guard, &[read("a")], &[true]);
    check_verdicts(&mut guard, &[read("a")], &[true]);
    let plain = correction("read", &Repeat::Identical, false);
    for _ in 0..4 {
        let (plan, nudge) = round(&mut guard, &[read("a")], succeed);
        assert_eq!(plan.verdicts, [Verdict::Refuse(plain.clone())]);
        assert_eq!(nudge, None);
    }
    let (plan, _) = round(&mut guard, &[read("a")], succeed);
    let last = correction("read", &Repeat::Identical, true);
    assert_eq!(plan.verdicts, [Verdict::Refuse(last.clone())]);
    assert!(last.contains("The next repetition ends the turn"), "{last}");
    assert!(plain.contains("in each of the last two rounds"), "{plain}");
    let (plan, _) = round(&mut guard, &[read("b"), read("a")], succeed);
    assert_eq!(plan.stop, Some(GuardCause::RepeatedCalls));
    assert!(plan.verdicts.is_empty());
}

#[test]
fn an_alternation_is_refused_once_it_has_gone_round_twice() {
    let mut guard = guard();
    let (a, b) = (glob("src/**"), read("src/**"));
    // A, B, A, B run; the fifth round would start the cycle a third time.
    for calls in [&a, &b, &a, &b] {
        check_verdicts(&mut guard, std::slice::from_ref(calls), &[true]);
    }
    let (plan, _) = round(&mut guard, std::slice::from_ref(&a), succeed);
    let [Verdict::Refuse(text)] = plan.verdicts.as_slice() else {
        panic!("the cycle's next call is refused: {plan:?}");
    };
    assert!(
        text.contains("the last 4 rounds made the same calls (`glob`, `read`) twice over"),
        "{text}"
    );
    // Going on with the cycle is refused call after call, and ends the turn after five.
    for calls in [&b, &a, &b, &a] {
        check_verdicts(&mut guard, std::slice::from_ref(calls), &[false]);
    }
    assert_eq!(
        guard.plan(std::slice::from_ref(&b)).stop,
        Some(GuardCause::RepeatedCalls)
    );
}

#[test]
fn a_repeated_set_of_three_calls_is_a_cycle_in_any_order() {
    let mut guard = guard();
    let (x, y, z) = (
        read("x"),
        glob("*.rs"),
        call("grep", json!({"pattern": "fn"})),
    );
    for calls in [&x, &y, &z, &y, &x, &z] {
        check_verdicts(&mut guard, std::slice::from_ref(calls), &[true]);
    }
    // Any of the three, next to a new call, is refused; the new call runs.
    check_verdicts(&mut guard, &[y.clone(), read("new")], &[false, true]);
    // A set spread over rounds with several calls each repeats as well.
    let mut guard = self::guard();
    for calls in [vec![x.clone(), y.clone()], vec![z.clone()]] {
        check_verdicts(&mut guard, &calls, &[true; 2][..calls.len()]);
    }
    for calls in [vec![z.clone(), x.clone()], vec![y.clone()]] {
        check_verdicts(&mut guard, &calls, &[true; 2][..calls.len()]);
    }
    check_verdicts(&mut guard, std::slice::from_ref(&x), &[false]);
}

#[test]
fn work_that_moves_on_is_no_cycle() {
    let mut guard = guard();
    // Reading a file, editing it, reading it again: the edits differ, so nothing repeats.
    let edit = |n: u32| call("file_edit", json!({"path": "a.rs", "new": n}));
    for n in 0..6 {
        check_verdicts(&mut guard, &[read("a.rs")], &[true]);
        check_verdicts(&mut guard, &[edit(n)], &[true]);
    }
    // Tests run after each different fix, by commands.
    let shell = |command: &str| call("shell_execute", json!({ "command": command }));
    for n in 0..6 {
        check_verdicts(
            &mut guard,
            &[shell(&format!("sed -i s/{n}// a.rs"))],
            &[true],
        );
        check_verdicts(&mut guard, &[shell("cargo test")], &[true]);
    }
}

#[test]
fn the_glob_and_read_alternation_of_the_report_ends_within_a_dozen_rounds() {
    // glob finds nothing (a success that changes nothing), file_read fails on the pattern.
    let mut guard = guard();
    let (a, b) = (glob("src/**"), call("file_read", json!({"path": "src/**"})));
    let mut rounds = 0;
    loop {
        let calls = [if rounds % 2 == 0 {
            a.clone()
        } else {
            b.clone()
        }];
        let (plan, _) = round(&mut guard, &calls, |c| {
            if c.name == "glob" {
                Does::FindNothing
            } else {
                Does::Fail("src/** does not exist.".into())
            }
        });
        if let Some(cause) = plan.stop {
            assert_eq!(cause, GuardCause::RepeatedCalls);
            break;
        }
        rounds += 1;
        assert!(rounds < 12, "still going after {rounds} rounds");
    }
    assert_eq!(guard.rounds(), 9, "4 rounds run, 5 refused");
}

#[test]
fn refusals_are_not_failures() {
    let mut guard = guard();
    let calls = [read("a")];
    for _ in 0..7 {
        round(&mut guard, &calls, |_| {
            Does::Fail("no such file".to_owned())
        });
    }
    // Two real failures with one cause (1 + 2), five refusals that add nothing.
    assert_eq!(guard.score, 3);
    assert_eq!(guard.refusals, 5);
    let nudge = fail(&mut guard, 1, "permission denied").unwrap();
    assert!(nudge.starts_with("3 tool calls have failed"), "{nudge}");
    assert!(nudge.contains("\"no such file\" (2 times)"), "{nudge}");
}

#[test]
fn failure_nudges_once_each_at_4_and_6_then_stop_at_8() {
    let mut guard = guard();
    let mut nudges = Vec::new();
    for n in 1..=8 {
        nudges.push(fail(&mut guard, n, &"x".repeat(n as usize)));
        assert_eq!(guard.plan(&[]), Plan::default(), "no calls, no stop");
        let stop = guard.clone().plan(&[read("probe")]).stop;
        assert_eq!(stop.is_some(), n >= 8, "after {n} failures");
    }
    let given: Vec<usize> = (0..8).filter(|&i| nudges[i].is_some()).collect();
    assert_eq!(given, [3, 5], "nudges after the 4th and 6th failures");
    let first = nudges[3].as_deref().unwrap();
    assert!(first.starts_with("4 tool calls have failed"), "{first}");
    assert!(first.contains("\"x\" (once)"), "{first}");
    let strong = nudges[5].as_deref().unwrap();
    assert!(strong.contains("Stop retrying blindly"), "{strong}");
    let stop = guard.plan(&[read("c")]).stop;
    assert_eq!(stop, Some(GuardCause::RepeatedFailures));
}

#[test]
fn crossing_both_thresholds_at_once_gives_only_the_strong_nudge() {
    let mut guard = guard();
    let calls: Vec<ToolCall> = ["a", "b", "c", "d", "e", "f", "g"].map(read).into();
    let (_, nudge) = round(&mut guard, &calls, |c| {
        Does::Fail(format!("bad {}", c.input))
    });
    assert!(nudge.unwrap().contains("Stop retrying blindly"));
    assert_eq!(guard.score, 7);
    assert_eq!(fail(&mut guard, 1, "another"), None);
}

#[test]
fn repeated_causes_weigh_two_ignoring_digits() {
    let mut guard = guard();
    assert_eq!(fail(&mut guard, 1, "  bad line 12\nmore"), None);
    assert_eq!(fail(&mut guard, 2, "bad line 13"), None);
    assert_eq!(guard.score, 3);
    let nudge = fail(&mut guard, 3, "timeout").unwrap();
    assert!(nudge.contains("\"bad line 12\" (2 times)"), "{nudge}");
    let (key, example) = cause(&format!("{} 42", "e".repeat(200)));
    assert_eq!((key.chars().count(), example.chars().count()), (120, 120));
    assert_eq!(cause(" exit 127 \nmore").0, "exit ###");
}

#[test]
fn one_success_in_a_batch_resets_the_score() {
    let mut guard = guard();
    assert_eq!(fail(&mut guard, 1, "no such file"), None);
    assert_eq!(fail(&mut guard, 2, "no such file"), None);
    assert_eq!(guard.score, 3);
    let calls = [read("x"), read("y")];
    round(&mut guard, &calls, |c| {
        if c.input["path"] == "x" {
            Does::Fail("no such file".to_owned())
        } else {
            Does::Succeed
        }
    });
    assert_eq!(guard.score, 0);
    // The cause is new again, and the nudges can be given again.
    assert_eq!(fail(&mut guard, 4, "no such file"), None);
    assert_eq!(guard.score, 1);
    assert_eq!(fail(&mut guard, 5, "no such file"), None);
    assert!(fail(&mut guard, 6, "no such file").is_some());
}

#[test]
fn successes_that_find_nothing_do_not_reset_the_score() {
    let mut guard = guard();
    for n in 1..=4 {
        // Each round: a search that finds nothing beside a read that fails.
        let calls = [glob(&format!("*.{n}")), read(&format!("missing{n}"))];
        let (_, nudge) = round(&mut guard, &calls, |c| {
            if c.name == "glob" {
                Does::FindNothing
            } else {
                Does::Fail("no such file".into())
            }
        });
        // 1, 3, 5, 7: the nudges at 4 and 6 come in rounds 3 and 4.
        assert_eq!(nudge.is_some(), n >= 3, "round {n}: score {}", guard.score);
    }
    assert_eq!(guard.score, 7);
    fail(&mut guard, 9, "no such file");
    assert_eq!(
        guard.plan(&[read("next")]).stop,
        Some(GuardCause::RepeatedFailures)
    );
    // A search that finds something is progress.
    let mut guard = self::guard();
    fail(&mut guard, 1, "no such file");
    round(&mut guard, &[glob("*.rs")], succeed);
    assert_eq!(guard.score, 0);
}

#[test]
fn the_round_ceiling_warns_on_the_last_round_then_ends_the_turn() {
    let mut guard = LoopGuard::new(3);
    for n in 1..=3 {
        let (plan, note) = round(&mut guard, &[read(&format!("file{n}"))], succeed);
        assert_eq!(plan.verdicts, [Verdict::Run]);
        assert_eq!(note.is_some(), n == 3, "round {n}");
        if let Some(note) = note {
            assert!(note.contains("last of the 3 rounds"), "{note}");
            assert!(note.contains("sum up what you did"), "{note}");
        }
    }
    let plan = guard.plan(&[read("file4")]);
    assert_eq!(plan.stop, Some(GuardCause::MaxRounds));
    assert_eq!(guard.rounds(), 3);
    assert!(not_run(GuardCause::MaxRounds, 3).contains("its 3 rounds of tool calls"));
    // An answer without calls is no round.
    assert_eq!(guard.plan(&[]), Plan::default());
    // A person's input joining the turn starts the count again.
    guard.reset();
    assert_eq!(runs(&mut guard, &[read("file5")]), [true]);
}

#[test]
fn a_last_round_that_also_crosses_a_threshold_carries_both_notes() {
    let mut guard = LoopGuard::new(4);
    for n in 1..=3 {
        fail(&mut guard, n, "no such file");
    }
    let note = fail(&mut guard, 4, "no such file").expect("notes");
    assert!(note.contains("Stop retrying blindly"), "{note}");
    assert!(note.contains("last of the 4 rounds"), "{note}");
}

#[test]
fn reset_clears_rounds_refusals_and_score() {
    let mut guard = guard();
    for _ in 0..6 {
        round(&mut guard, &[read("a")], |_| Does::Fail("boom".to_owned()));
    }
    assert!(guard.refusals > 0 && guard.score > 0);
    guard.reset();
    assert_eq!((guard.refusals, guard.score, guard.rounds.len()), (0, 0, 0));
    check_verdicts(&mut guard, &[read("a")], &[true]);
    check_verdicts(&mut guard, &[read("a")], &[true]);
    check_verdicts(&mut guard, &[read("a")], &[false]);
}

#[test]
fn new_calls_run_up_to_the_ceiling() {
    let mut guard = guard();
    for n in 0..60 {
        check_verdicts(&mut guard, &[read(&format!("file{n}"))], &[true]);
    }
    assert_eq!(
        guard.plan(&[read("file60")]).stop,
        Some(GuardCause::MaxRounds)
    );
}
