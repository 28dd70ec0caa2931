//! Who joins a running turn: the rule, as a pure function of the running turn and the new
//! input, so the actor only carries it out.
//!
//! A new message from the turn's own person joins it at the next tool-batch boundary (it is
//! added to the history before the next model call). Anyone else's message, and any
//! automated input, waits for its own turn. A trusted person writing during an automated turn
//! ends that turn after its current tool batch and goes next; an untrusted person never ends
//! a turn.

use super::input::UserInput;
use crate::domain::Audience;

/// Who a running turn is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnOwner {
    /// The sender id of the input that started it.
    pub sender_id: String,
    /// The audience it answers; a message for another audience needs its own turn.
    pub audience: Audience,
    /// Whether that input was automated (reminder, job result, webhook, child notice).
    pub automated: bool,
}

impl TurnOwner {
    /// The owner of a turn started by `input`.
    pub fn of(input: &UserInput) -> Self {
        Self {
            sender_id: input.sender.id.clone(),
            audience: input.audience,
            automated: input.is_automation(),
        }
    }
}

/// What to do with an input that arrives while a turn runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// Add it to the running turn at its next tool-batch boundary.
    Join,
    /// End the running (automated) turn after its current batch, and run this one next.
    Interrupt,
    /// Wait for its own turn, after those already waiting.
    Wait,
}

/// Where `input` goes while `running` runs.
pub fn route(running: &TurnOwner, input: &UserInput) -> Route {
    if input.is_automation() {
        return Route::Wait;
    }
    if running.automated {
        return if input.sender.trusted {
            Route::Interrupt
        } else {
            Route::Wait
        };
    }
    if input.sender.id == running.sender_id && input.audience == running.audience {
        Route::Join
    } else {
        Route::Wait
    }
}

/// The note the next turn's first model call carries after a person ended an automated one.
pub fn interrupted_note(kind: &str) -> String {
    format!(
        "The automated turn before this one ({kind}) was stopped unfinished after its last \
         tool batch, because this message came in. Its results so far are above; pick it up \
         again later only if it still matters."
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{InputKind, Sender};

    fn input(id: &str, kind: InputKind, trusted: bool) -> UserInput {
        UserInput {
            sender: Sender {
                id: id.into(),
                name: id.into(),
                automated: false,
                trusted,
            },
            kind,
            ..UserInput::local("x")
        }
    }

    fn person_turn(id: &str) -> TurnOwner {
        TurnOwner {
            sender_id: id.into(),
            audience: Audience::Personal,
            automated: false,
        }
    }

    const AUTOMATION: TurnOwner = TurnOwner {
        sender_id: String::new(),
        audience: Audience::Personal,
        automated: true,
    };

    #[test]
    fn the_same_person_joins_and_others_wait() {
        assert_eq!(
            route(&person_turn("ada"), &input("ada", InputKind::Person, true)),
            Route::Join
        );
        assert_eq!(
            route(&person_turn("ada"), &input("bob", InputKind::Person, true)),
            Route::Wait
        );
    }

    #[test]
    fn automated_input_always_waits() {
        for kind in [
            InputKind::Reminder,
            InputKind::JobResult,
            InputKind::Webhook,
            InputKind::ChildNotice,
        ] {
            assert_eq!(
                route(&person_turn("ada"), &input("ada", kind, true)),
                Route::Wait
            );
            assert_eq!(route(&AUTOMATION, &input("ada", kind, true)), Route::Wait);
        }
    }

    #[test]
    fn a_trusted_person_interrupts_automation_and_an_untrusted_one_waits() {
        assert_eq!(
            route(&AUTOMATION, &input("ada", InputKind::Person, true)),
            Route::Interrupt
        );
        assert_eq!(
            route(&AUTOMATION, &input("eve", InputKind::Person, false)),
            Route::Wait
        );
    }

    #[test]
    fn the_same_person_writing_for_another_audience_waits() {
        let public = UserInput {
            audience: Audience::Public,
            ..input("ada", InputKind::Person, true)
        };
        assert_eq!(route(&person_turn("ada"), &public), Route::Wait);
    }

    #[test]
    fn an_untrusted_person_still_joins_their_own_turn() {
        assert_eq!(
            route(&person_turn("eve"), &input("eve", InputKind::Person, false)),
            Route::Join
        );
    }
}
