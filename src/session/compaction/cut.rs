//! Where a history is cut: the oldest messages go, the most recent stay, no cut ever
//! separates a tool call from its result, and nothing from the turn being answered is cut.

use super::estimate_tokens;
use crate::domain::{Message, Role};
use std::collections::{HashMap, HashSet};

/// The fewest recent messages a reduction keeps, however far over the budget they are.
pub(super) const MIN_KEEP: usize = 2;

/// The outcome of [`reduce`]: `dropped` followed by `kept` is the history it was given.
#[derive(Debug, Clone, PartialEq)]
pub struct Reduction {
    /// The most recent messages, which stay in the history as they are.
    pub kept: Vec<Message>,
    /// The older messages, which the notes (or the marker) replace.
    pub dropped: Vec<Message>,
    /// The keep count the cut was made for, after halving and capped by the history's length.
    /// `kept` may hold a message or two more or fewer, where the cut moved to keep tool calls
    /// with their results or to keep the input a reply answers.
    pub keep: usize,
}

/// Cuts the oldest messages, keeping the `keep` most recent; while those are estimated over
/// `budget_tokens`, halves the count, down to two. The cut moves so that every kept result
/// has its call kept and every kept call its result (only the last message may hold calls
/// not answered yet); and a kept part that would start with an assistant message takes the
/// user message before it too when that still fits the budget. Everything from `protect_from`
/// on (the turn being answered) is kept, whatever the budget says.
pub fn reduce(
    messages: &[Message],
    keep: usize,
    budget_tokens: u64,
    protect_from: Option<usize>,
) -> Reduction {
    let cuts = Cuts::of(messages);
    let fits = |at: usize| estimate_tokens(&messages[at..]) <= budget_tokens;
    let mut target = keep.max(MIN_KEEP);
    let (used, at) = loop {
        let used = target.min(messages.len());
        let at = cuts.cut_for(used);
        if fits(at) {
            break (used, cuts.with_prompt(messages, at, fits));
        }
        if target <= MIN_KEEP {
            break (used, at);
        }
        target = (target / 2).max(MIN_KEEP);
    };
    let at = match protect_from {
        Some(from) if from < at => cuts.at_or_before(from),
        _ => at,
    };
    Reduction {
        kept: messages[at..].to_vec(),
        dropped: messages[..at].to_vec(),
        keep: used,
    }
}

/// Where a history may be cut: index `at` is valid when `messages[at..]` holds the call of
/// every result in it and the result of every call in it but the last message's.
struct Cuts {
    /// `need[at]`: the earliest message a result in `messages[at..]` refers to.
    need: Vec<usize>,
    /// `broken[at]`: whether `messages[at..]` holds a result without any call or a call
    /// without any result (before its last message), which no cut at or before `at` can mend.
    broken: Vec<bool>,
}

impl Cuts {
    fn of(messages: &[Message]) -> Self {
        let n = messages.len();
        let mut need: Vec<usize> = (0..=n).collect();
        let mut broken = vec![false; n + 1];
        let mut call_at: HashMap<&str, usize> = HashMap::new();
        let mut answered: HashSet<(usize, &str)> = HashSet::new();
        for (i, message) in messages.iter().enumerate() {
            for result in message.tool_results() {
                let id = result.tool_use_id.as_str();
                match call_at.get(id) {
                    Some(&at) => {
                        need[i] = need[i].min(at);
                        answered.insert((at, id));
                    }
                    None => broken[i] = true,
                }
            }
            call_at.extend(message.tool_calls().map(|c| (c.id.as_str(), i)));
        }
        for (i, message) in messages.iter().enumerate().take(n.saturating_sub(1)) {
            let mut ids = message.tool_calls().map(|c| c.id.as_str());
            broken[i] |= ids.any(|id| !answered.contains(&(i, id)));
        }
        for i in (0..n).rev() {
            need[i] = need[i].min(need[i + 1]);
            broken[i] = broken[i] || broken[i + 1];
        }
        Self { need, broken }
    }

    fn valid(&self, at: usize) -> bool {
        !self.broken[at] && self.need[at] >= at
    }

    /// The latest valid cut at or before `at`; the start when there is none.
    fn at_or_before(&self, at: usize) -> usize {
        let at = at.min(self.need.len() - 1);
        (0..=at).rev().find(|&i| self.valid(i)).unwrap_or(0)
    }

    /// The cut for keeping `keep` messages: moved forward past results whose calls would be
    /// dropped, or back to take those calls in when moving forward would leave too little.
    fn cut_for(&self, keep: usize) -> usize {
        let n = self.need.len() - 1;
        let target = n - keep;
        let forward = (target..=n).find(|&at| self.valid(at)).unwrap_or(n);
        if n - forward >= keep.min(MIN_KEEP) {
            return forward;
        }
        let backward = (0..target).rev().find(|&at| self.valid(at));
        backward.unwrap_or(forward)
    }

    /// `at`, or the message before it when the kept part would start with a reply whose
    /// prompting user message can be kept too within the budget.
    fn with_prompt(&self, messages: &[Message], at: usize, fits: impl Fn(usize) -> bool) -> usize {
        let lone_reply = at > 0
            && messages.get(at).is_some_and(|m| m.role == Role::Assistant)
            && messages[at - 1].role == Role::User;
        if lone_reply && self.valid(at - 1) && fits(at - 1) {
            at - 1
        } else {
            at
        }
    }
}
