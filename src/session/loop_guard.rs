//! The loop guard: notices a turn that goes round in circles and steers or ends it.
//!
//! Three signals are watched over one turn. Repetition: a call the model already made, with
//! the same arguments, in each of the two previous rounds is refused with a correction
//! instead of run, and so is a call that continues a cycle, where the last rounds made the
//! same set of calls twice over (A, B, A, B, or any few calls in any order within up to
//! [`MAX_PERIOD`] rounds); after five refusals the next one ends the turn. Failures: failing
//! calls add to a score (more when a cause repeats); crossing 4 and 6 yields a nudge for the
//! model, and at 8 the turn ends. Only a call that found or changed something resets the
//! score: a search without a match, a glob without a file or a read of no line
//! ([`Outcome::Empty`]) leave it as it was, or such calls alternating with failing ones would
//! never let it grow. Length: a turn runs at most `[session] max_rounds` rounds of calls; the
//! model is told when its last one has run, so that it answers with a summary.
//!
//! Ending is quiet: the model's text of that response stands as the answer
//! ([`crate::domain::TurnStop::LoopGuard`], with its [`GuardCause`]). Everything here is pure;
//! the turn performs the effects.

use crate::domain::{GuardCause, ToolCall};
use serde_json::Value;
use std::collections::{BTreeSet, HashSet, VecDeque};

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
/// The longest cycle looked for, in rounds: a set of calls repeated over twice as many rounds
/// is a cycle.
pub const MAX_PERIOD: usize = 4;
/// Rounds remembered: enough to see the longest cycle twice.
const WINDOW: usize = 2 * MAX_PERIOD;

/// Watches one turn's tool rounds; [`LoopGuard::reset`] starts over.
#[derive(Debug, Clone)]
pub struct LoopGuard {
    /// The signatures of the last [`WINDOW`] rounds, oldest first.
    rounds: VecDeque<HashSet<Signature>>,
    /// Calls refused since the last reset.
    refusals: u32,
    /// Weighted failures since the last reset or the last call that made progress.
    score: u32,
    /// Failure causes since the score was last reset, in first-seen order.
    causes: Vec<Cause>,
    /// Nudges already given since the score was last reset: 0, 1 or 2.
    nudges: u8,
    /// Rounds of calls planned since the last reset, refused calls included.
    planned: u32,
    /// The most rounds of calls a turn may run (`[session] max_rounds`).
    max_rounds: u32,
}

/// What to do with a batch of calls, decided before it runs.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Plan {
    /// One verdict per call, in call order; empty when `stop` is set.
    pub verdicts: Vec<Verdict>,
    /// Set when nothing should run and the turn should end quietly.
    pub stop: Option<GuardCause>,
}

/// Whether one call runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Run the call as usual.
    Run,
    /// Do not run; answer the call with this text as an error result.
    Refuse(String),
}

/// How one call of a round turned out, as the guard weighs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The guard refused it; it neither failed nor made progress.
    Refused,
    /// It failed, or could not run; its result, whose first line names the cause.
    Failed(String),
    /// It succeeded but found and changed nothing.
    Empty,
    /// It succeeded with something to show.
    Done,
}

/// A call's identity for repetition: the tool's name and its arguments with keys sorted.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct Signature(String, String);

/// How a call repeats what the turn did already.
enum Repeat {
    /// The same call in each of the two previous rounds.
    Identical,
    /// The last `2 * period` rounds made the same set of calls twice over, this call among
    /// them; `tools` names them.
    Cycle { period: usize, tools: Vec<String> },
}

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
    /// A guard for a fresh turn that may run `max_rounds` rounds of calls (at least one).
    pub fn new(max_rounds: u32) -> Self {
        Self {
            rounds: VecDeque::new(),
            refusals: 0,
            score: 0,
            causes: Vec::new(),
            nudges: 0,
            planned: 0,
            max_rounds: max_rounds.max(1),
        }
    }

    /// Rounds of calls planned since the turn began (or the last reset).
    pub fn rounds(&self) -> u32 {
        self.planned
    }

    /// Decides which of the model's calls run, or that the turn ends instead.
    pub fn plan(&mut self, calls: &[ToolCall]) -> Plan {
        if calls.is_empty() {
            return Plan::default();
        }
        if self.score >= STOP_SCORE {
            return Plan::stopped(GuardCause::RepeatedFailures);
        }
        if self.planned >= self.max_rounds {
            return Plan::stopped(GuardCause::MaxRounds);
        }
        let signatures: Vec<Signature> = calls.iter().map(signature).collect();
        let mut refusals = self.refusals;
        let mut verdicts = Vec::with_capacity(calls.len());
        for (call, signature) in calls.iter().zip(&signatures) {
            let Some(repeat) = self.repeat(signature) else {
                verdicts.push(Verdict::Run);
                continue;
            };
            refusals += 1;
            if refusals > PLAIN_REFUSALS + 1 {
                // The state is left as it was, so asking again stops again.
                return Plan::stopped(GuardCause::RepeatedCalls);
            }
            let last = refusals == PLAIN_REFUSALS + 1;
            verdicts.push(Verdict::Refuse(correction(&call.name, &repeat, last)));
        }
        self.refusals = refusals;
        self.planned += 1;
        // Refused calls belong to the round too, so refusing cannot make a repetition new.
        self.rounds.push_back(signatures.into_iter().collect());
        if self.rounds.len() > WINDOW {
            self.rounds.pop_front();
        }
        Plan {
            verdicts,
            stop: None,
        }
    }

    /// Weighs a round's outcomes (in call order, refusals included) and returns a note for
    /// the model: a nudge when the failure score first crosses 4 or 6, and word that the
    /// round was the last the turn allows.
    pub fn record(&mut self, outcomes: &[Outcome]) -> Option<String> {
        let mut progress = false;
        for outcome in outcomes {
            match outcome {
                Outcome::Refused | Outcome::Empty => {}
                Outcome::Done => progress = true,
                Outcome::Failed(content) => self.fail(content),
            }
        }
        // When one round crosses both thresholds only the stronger nudge is worth giving.
        let nudge = if self.score >= STRONG_NUDGE_SCORE && self.nudges < 2 {
            self.nudges = 2;
            Some(self.nudge(true))
        } else if self.score >= NUDGE_SCORE && self.nudges < 1 {
            self.nudges = 1;
            Some(self.nudge(false))
        } else {
            None
        };
        if progress {
            (self.score, self.nudges) = (0, 0);
            self.causes.clear();
        }
        let last_round = (self.planned == self.max_rounds).then(|| last_round(self.max_rounds));
        match (nudge, last_round) {
            (Some(nudge), Some(last)) => Some(format!("{nudge} {last}")),
            (nudge, last) => nudge.or(last),
        }
    }

    /// Forgets everything but the limit: called when a person's input joins the turn.
    pub fn reset(&mut self) {
        *self = Self::new(self.max_rounds);
    }

    /// Whether, and how, a call with `signature` repeats the rounds before it.
    fn repeat(&self, signature: &Signature) -> Option<Repeat> {
        let n = self.rounds.len();
        if n >= 2 && self.rounds.range(n - 2..).all(|r| r.contains(signature)) {
            return Some(Repeat::Identical);
        }
        for period in 2..=MAX_PERIOD {
            if n < 2 * period {
                break;
            }
            let recent = union(self.rounds.range(n - period..));
            if !recent.contains(signature) {
                continue;
            }
            if recent == union(self.rounds.range(n - 2 * period..n - period)) {
                let tools: BTreeSet<&str> = recent.iter().map(|s| s.0.as_str()).collect();
                let tools = tools.into_iter().map(str::to_owned).collect();
                return Some(Repeat::Cycle { period, tools });
            }
        }
        None
    }

    /// Adds a failure with result `content` to the score.
    fn fail(&mut self, content: &str) {
        let (key, example) = cause(content);
        if let Some(seen) = self.causes.iter_mut().find(|c| c.key == key) {
            seen.count += 1;
            self.score += 2;
        } else {
            self.causes.push(Cause {
                key,
                example,
                count: 1,
            });
            self.score += 1;
        }
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
            "{failed} tool calls have failed since the last one that found or changed \
             something, most often with \"{cause}\" ({times})."
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
    fn stopped(cause: GuardCause) -> Self {
        Self {
            verdicts: Vec::new(),
            stop: Some(cause),
        }
    }
}

impl Outcome {
    /// The outcome of a call whose result is `content`: refused by the guard, failed, or
    /// succeeded with (`empty`) nothing found or changed.
    pub fn of(refused: bool, is_error: bool, empty: bool, content: &str) -> Self {
        match (refused, is_error, empty) {
            (true, ..) => Self::Refused,
            (false, true, _) => Self::Failed(content.to_owned()),
            (false, false, true) => Self::Empty,
            (false, false, false) => Self::Done,
        }
    }
}

/// The result given to the calls of the response the guard ended the turn at.
pub fn not_run(cause: GuardCause, max_rounds: u32) -> String {
    match cause {
        GuardCause::MaxRounds => format!(
            "not run: this turn has run its {max_rounds} rounds of tool calls ([session] \
             max_rounds), so tern ended it here"
        ),
        cause => format!("not run: tern ended the turn because {}", cause.words()),
    }
}

/// The note after the last round of calls a turn allows.
fn last_round(max_rounds: u32) -> String {
    format!(
        "That was the last of the {max_rounds} rounds of tool calls this turn allows ([session] \
         max_rounds): further calls will not run. Answer now: sum up what you did, what you \
         found and what is left to do."
    )
}

/// The text answering a refused call; `last` for the 5th refusal, after which the next
/// repetition ends the turn.
fn correction(tool: &str, repeat: &Repeat, last: bool) -> String {
    let what = match repeat {
        Repeat::Identical => format!(
            "you already made this exact `{tool}` call in each of the last two rounds, with the \
             same outcome"
        ),
        Repeat::Cycle { period, tools } => {
            let tools: Vec<String> = tools.iter().map(|t| format!("`{t}`")).collect();
            format!(
                "the last {} rounds made the same calls ({}) twice over, and this `{tool}` call \
                 starts them a third time",
                2 * period,
                tools.join(", ")
            )
        }
    };
    if last {
        format!(
            "not run: {what}; this is the 5th repeated call refused in this turn. The next \
             repetition ends the turn. Change the arguments or the approach, or answer now with \
             what you have."
        )
    } else {
        format!(
            "not run: {what}. Change the arguments or the approach, or answer with what you \
             have."
        )
    }
}

/// Every signature of `rounds`.
fn union<'a>(rounds: impl Iterator<Item = &'a HashSet<Signature>>) -> HashSet<&'a Signature> {
    rounds.flatten().collect()
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
#[path = "loop_guard_tests.rs"]
mod tests;
