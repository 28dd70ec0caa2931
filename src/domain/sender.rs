//! Who sent an input and which audience it is answered for.

use serde::{Deserialize, Serialize};

/// How much of the prompt stack and which tools an input's answer may use.
///
/// Ordered from least to most trusted, so `audience >= Audience::Team` reads naturally.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Audience {
    /// Strangers: a thin prompt and no tool that can touch the host.
    Public,
    /// Trusted colleagues: the full stack without personal shell details.
    Team,
    /// The machine's owner at their own terminal.
    Personal,
}

/// The author of an input.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sender {
    /// Stable identifier within its channel (`local` for the terminal user).
    pub id: String,
    /// Name shown in transcripts.
    pub name: String,
    /// True for reminders, webhooks and other input no person typed.
    #[serde(default)]
    pub automated: bool,
    /// Whether this person may end an automated turn by writing (the machine's owner, a
    /// team member); an untrusted external person never ends a turn.
    #[serde(default = "yes")]
    pub trusted: bool,
}

fn yes() -> bool {
    true
}

/// What produced an input: a person, or one of the automations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InputKind {
    /// Somebody typed it.
    #[default]
    Person,
    /// A reminder the session set itself.
    Reminder,
    /// A background job finished and reports.
    JobResult,
    /// A webhook delivered it.
    Webhook,
    /// A subagent reports to its parent.
    ChildNotice,
    /// A parent session hands its subagent the task it runs.
    SubagentTask,
}

impl InputKind {
    /// Whether no person typed this input.
    pub fn is_automation(self) -> bool {
        self != Self::Person
    }
}

impl Sender {
    /// The person at this terminal.
    pub fn local_user() -> Self {
        let name = std::env::var("USER").unwrap_or_else(|_| "you".to_owned());
        Self {
            id: "local".to_owned(),
            name,
            automated: false,
            trusted: true,
        }
    }
}
