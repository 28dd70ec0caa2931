//! The loop guard: notices a turn that goes round in circles and steers or ends it.
//!
//! Two signals are watched over one turn. A call the model already made, with the same
//! arguments, in each of the two previous rounds is refused with a correction instead of run;
//! after five refusals the next one ends the turn. Failing calls add to a score (more when a
//! cause repeats); crossing 4 and 6 yields a nudge for the model, and at 8 the turn ends.
//! Ending is quiet: the model's text of that response stands as the answer
//! ([`crate::domain::TurnStop::LoopGuard`]). Everything here is pure; the turn performs the
//! effects.

use crate::domain::{ToolCall, ToolResult};
use serde_json::Value;
use std::collections::{HashSet, VecDeque};

/// Refusals that carry the plain correction; the one after them carries the last warning.
const PLAIN_REFUSALS: u32 = 4;
/// Failure score at which the first nudge is given.
const NUDGE_SCORE: u32 = 4;
/// Failure score at which the stronger nudge is given.
const STRONG_NUDGE_SCORE: u32 = 6;
/// Failure score at which the next round with calls ends the turn.
const STOP_SCORE: u32 = 8;
/// How much of an error's first line identifies its cause.
const CAUSE_CHARS: usize = 120;

/// Watches one turn's tool rounds; [`LoopGuard::reset`] starts over.
#[derive(Debug, Clone, Default)]
pub struct LoopGuard {
    /// The signatures of the last two rounds, oldest first.
    rounds: VecDeque<HashSet<Signature>>,
    /// Calls refused since the last reset.
    refusals: u32,
    /// Ids of the calls the latest plan refused, so `record` does not score them.
    refused_ids: HashSet<String>,
    /// Weighted failures since the last reset or successful batch.
    score: u32,
    /// Failure causes since the score was last reset, in first-seen order.
    causes: Vec<Cause>,
    /// Nudges already given since the score was last reset: 0, 1 or 2.
    nudges: u8,
}

/// What to do with a batch of calls, decided before it runs.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Plan {
    /// One verdict per call, in call order; empty when `stop` is set.
    pub verdicts: Vec<Verdict>,
    /// Set when nothing should run and the turn should end quietly.
    pub stop: Option<StopCause>,
}

/// Whether one call runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Run the call as usual.
    Run,
    /// Do not run; answer the call with this text as an error result.
    Refuse(String),
}

/// Why the guard ends a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopCause {
    /// The model kept repeating calls after five refusals.
    RepeatedCalls,
    /// Tool calls kept failing (failure score of 8 or more).
    RepeatedFailures,
}

/// A call's identity for repetition: the tool's name and its arguments with keys sorted.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Signature(String, String);

/// One failure cause seen since the score was last reset.
#[derive(Debug, Clone)]
struct Cause {
    /// The normalised first line, digits replaced by `#`.
    key: String,
    /// The first line as it first appeared, for the nudge text.
    example: String,
    count: u32,
}

impl LoopGuard {
    /// A guard for a fresh turn.
    pub fn new() -> Self {
        Self::default()
    }

    /// Decides which of the model's calls run, or that the turn ends instead.
    pub fn plan(&mut self, calls: &[ToolCall]) -> Plan {
        self.refused_ids.clear();
        if calls.is_empty() {
            return Plan::default();
        }
        if self.score >= STOP_SCORE {
            return Plan::stopped(StopCause::RepeatedFailures);
        }
        let signatures: Vec<Signature> = calls.iter().map(signature).collect();
        let mut refusals = self.refusals;
        let mut refused_ids = HashSet::new();
        let mut verdicts = Vec::with_capacity(calls.len());
        for (call, signature) in calls.iter().zip(&signatures) {
            let repeated =
                self.rounds.len() == 2 && self.rounds.iter().all(|r| r.contains(signature));
            if !repeated {
                verdicts.push(Verdict::Run);
                continue;
            }
            refusals += 1;
            let text = if refusals <= PLAIN_REFUSALS {
                correction(&call.name)
            } else if refusals == PLAIN_REFUSALS + 1 {
                last_correction(&call.name)
            } else {
                // The state is left as it was, so asking again stops again.
                return Plan::stopped(StopCause::RepeatedCalls);
            };
            refused_ids.insert(call.id.clone());
            verdicts.push(Verdict::Refuse(text));
        }
        self.refusals = refusals;
        self.refused_ids = refused_ids;
        // Refused calls belong to the round too, so refusing cannot make a repetition new.
        self.rounds.push_back(signatures.into_iter().collect());
        if self.rounds.len() > 2 {
            self.rounds.pop_front();
        }
        Plan {
            verdicts,
            stop: None,
        }
    }

    /// Scores a batch's results (in call order, refusals included) and returns a nudge for
    /// the model when the failure score first crosses 4 or 6.
    pub fn record(&mut self, calls: &[ToolCall], results: &[ToolResult]) -> Option<String> {
        let mut any_success = false;
        for (call, result) in calls.iter().zip(results) {
            if self.refused_ids.contains(&call.id) {
                continue;
            }
            if !result.is_error {
                any_success = true;
                continue;
            }
            let (key, example) = cause(&result.content);
            if let Some(seen) = self.causes.iter_mut().find(|c| c.key == key) {
                seen.count += 1;
                self.score += 2;
            } else {
                let count = 1;
                self.causes.push(Cause {
                    key,
                    example,
                    count,
                });
                self.score += 1;
            }
        }
        // When one batch crosses both thresholds only the stronger nudge is worth giving.
        let nudge = if self.score >= STRONG_NUDGE_SCORE && self.nudges < 2 {
            self.nudges = 2;
            Some(self.nudge(true))
        } else if self.score >= NUDGE_SCORE && self.nudges < 1 {
            self.nudges = 1;
            Some(self.nudge(false))
        } else {
            None
        };
        if any_success {
            (self.score, self.nudges) = (0, 0);
            self.causes.clear();
        }
        nudge
    }

    /// Forgets everything: called on a new turn or when a person's input joins the turn.
    pub fn reset(&mut self) {
        *self = Self::default();
    }

    fn nudge(&self, strong: bool) -> String {
        let failed: u32 = self.causes.iter().map(|c| c.count).sum();
        // `max_by_key` keeps the last maximum; reversing makes ties go to the first seen.
        let top = self.causes.iter().rev().max_by_key(|c| c.count);
        let (cause, count) = top.map_or(("", 0), |c| (c.example.as_str(), c.count));
        let times = if count == 1 {
            "once".to_owned()
        } else {
            format!("{count} times")
        };
        let head = format!(
            "{failed} tool calls have failed since the last one that succeeded, most often with \
             \"{cause}\" ({times})."
        );
        if strong {
            format!(
                "{head} Stop retrying blindly: read the relevant files or output, check your \
                 assumptions, or explain the problem to the person and ask how to proceed."
            )
        } else {
            format!("{head} Find out why before trying again: change the input or the approach.")
        }
    }
}

impl Plan {
    fn stopped(cause: StopCause) -> Self {
        Self {
            verdicts: Vec::new(),
            stop: Some(cause),
        }
    }
}

/// The text answering refusals 1 to 4.
fn correction(tool: &str) -> String {
    format!(
        "not run: you already made this exact `{tool}` call in each of the last two rounds, \
         with the same outcome. Change the arguments or the approach, or answer with what you \
         have."
    )
}

/// The text answering the 5th refusal; the next one ends the turn.
fn last_correction(tool: &str) -> String {
    format!(
        "not run: you already made this exact `{tool}` call in each of the last two rounds, \
         and this is the 5th repeated call refused in this turn. The next repetition ends the \
         turn. Change the arguments or the approach, or answer now with what you have."
    )
}

fn signature(call: &ToolCall) -> Signature {
    Signature(call.name.clone(), canonical(&call.input).to_string())
}

/// `value` with every object's keys sorted, so key order does not make two calls differ.
fn canonical(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            Value::Object(
                entries
                    .into_iter()
                    .map(|(k, v)| (k.clone(), canonical(v)))
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.iter().map(canonical).collect()),
        other => other.clone(),
    }
}

/// An error's cause as (key, example): its first line, trimmed and cut to 120 characters;
/// the key also has digits replaced by `#`, so "line 12" and "line 13" are one cause.
fn cause(content: &str) -> (String, String) {
    let first = content.lines().next().unwrap_or("").trim();
    let example: String = first.chars().take(CAUSE_CHARS).collect();
    let key = example
        .chars()
        .map(|c| if c.is_ascii_digit() { '#' } else { c })
        .collect();
    (key, example)
}

#[cfg(test)]
mod tests {
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

    /// Plans a round, "runs" it (each call that runs gets `outcome`; refusals get their
    /// text as an error) and records it. Returns the plan and the nudge.
    fn round(
        guard: &mut LoopGuard,
        calls: &[ToolCall],
        outcome: impl Fn(&ToolCall) -> Result<String, String>,
    ) -> (Plan, Option<String>) {
        let plan = guard.plan(calls);
        if plan.stop.is_some() {
            return (plan, None);
        }
        let results: Vec<ToolResult> = calls
            .iter()
            .zip(&plan.verdicts)
            .map(|(c, verdict)| match verdict {
                Verdict::Refuse(text) => ToolResult::error(&c.id, text),
                Verdict::Run => match outcome(c) {
                    Ok(text) => ToolResult::ok(&c.id, text),
                    Err(text) => ToolResult::error(&c.id, text),
                },
            })
            .collect();
        let nudge = guard.record(calls, &results);
        (plan, nudge)
    }

    fn succeed(_: &ToolCall) -> Result<String, String> {
        Ok("fine".to_owned())
    }

    /// One round of one new call failing with `error`.
    fn fail(guard: &mut LoopGuard, n: u32, error: &str) -> Option<String> {
        let calls = [read(&format!("missing{n}"))];
        let (plan, nudge) = round(guard, &calls, |_| Err(error.to_owned()));
        assert_eq!(plan.verdicts, [Verdict::Run]);
        nudge
    }

    fn check_verdicts(guard: &mut LoopGuard, calls: &[ToolCall], runs: &[bool]) {
        let (plan, _) = round(guard, calls, succeed);
        let got: Vec<bool> = plan.verdicts.iter().map(|v| *v == Verdict::Run).collect();
        assert_eq!(got, runs);
    }

    #[test]
    fn third_equal_round_is_refused_not_earlier_nor_after_a_gap() {
        let mut guard = LoopGuard::new();
        check_verdicts(&mut guard, &[read("a")], &[true]);
        check_verdicts(&mut guard, &[read("a"), read("b")], &[true, true]);
        check_verdicts(&mut guard, &[read("a"), read("b")], &[false, true]);
        check_verdicts(&mut guard, &[read("c")], &[true]);
        // "a" was in rounds 1 to 3 but not in round 4.
        check_verdicts(&mut guard, &[read("a"), read("c")], &[true, true]);
    }

    #[test]
    fn argument_key_order_does_not_matter_but_the_tool_does() {
        let mut guard = LoopGuard::new();
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
        let mut guard = LoopGuard::new();
        check_verdicts(&mut guard, &[read("a")], &[true]);
        check_verdicts(&mut guard, &[read("a")], &[true]);
        for _ in 0..4 {
            let (plan, nudge) = round(&mut guard, &[read("a")], succeed);
            assert_eq!(plan.verdicts, [Verdict::Refuse(correction("read"))]);
            assert_eq!(nudge, None);
        }
        let (plan, _) = round(&mut guard, &[read("a")], succeed);
        assert_eq!(plan.verdicts, [Verdict::Refuse(last_correction("read"))]);
        assert!(last_correction("read").contains("The next repetition ends the turn"));
        let (plan, _) = round(&mut guard, &[read("b"), read("a")], succeed);
        assert_eq!(plan.stop, Some(StopCause::RepeatedCalls));
        assert!(plan.verdicts.is_empty());
    }

    #[test]
    fn refusals_are_not_failures() {
        let mut guard = LoopGuard::new();
        let calls = [read("a")];
        for _ in 0..7 {
            round(&mut guard, &calls, |_| Err("no such file".to_owned()));
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
        let mut guard = LoopGuard::new();
        let mut nudges = Vec::new();
        for n in 1..=8 {
            nudges.push(fail(&mut guard, n, &"x".repeat(n as usize)));
            assert_eq!(guard.plan(&[]), Plan::default(), "no calls, no stop");
            let stop = guard.plan(&[read("probe")]).stop;
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
        assert_eq!(stop, Some(StopCause::RepeatedFailures));
    }

    #[test]
    fn crossing_both_thresholds_at_once_gives_only_the_strong_nudge() {
        let mut guard = LoopGuard::new();
        let calls: Vec<ToolCall> = ["a", "b", "c", "d", "e", "f", "g"].map(read).into();
        let (_, nudge) = round(&mut guard, &calls, |c| Err(format!("bad {}", c.input)));
        assert!(nudge.unwrap().contains("Stop retrying blindly"));
        assert_eq!(guard.score, 7);
        assert_eq!(fail(&mut guard, 1, "another"), None);
    }

    #[test]
    fn repeated_causes_weigh_two_ignoring_digits() {
        let mut guard = LoopGuard::new();
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
        let mut guard = LoopGuard::new();
        assert_eq!(fail(&mut guard, 1, "no such file"), None);
        assert_eq!(fail(&mut guard, 2, "no such file"), None);
        assert_eq!(guard.score, 3);
        let calls = [read("x"), read("y")];
        round(&mut guard, &calls, |c| {
            if c.input["path"] == "x" {
                Err("no such file".to_owned())
            } else {
                Ok("contents".to_owned())
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
    fn reset_clears_rounds_refusals_and_score() {
        let mut guard = LoopGuard::new();
        for _ in 0..6 {
            round(&mut guard, &[read("a")], |_| Err("boom".to_owned()));
        }
        assert!(guard.refusals > 0 && guard.score > 0);
        guard.reset();
        assert_eq!((guard.refusals, guard.score, guard.rounds.len()), (0, 0, 0));
        check_verdicts(&mut guard, &[read("a")], &[true]);
        check_verdicts(&mut guard, &[read("a")], &[true]);
        let (plan, _) = round(&mut guard, &[read("a")], succeed);
        assert_eq!(plan.verdicts, [Verdict::Refuse(correction("read"))]);
    }

    #[test]
    fn no_cap_on_rounds() {
        let mut guard = LoopGuard::new();
        for n in 0..200 {
            check_verdicts(&mut guard, &[read(&format!("file{n}"))], &[true]);
        }
    }
}
