//! Asking a person about a call (`ApprovalMode::Ask`): the batch parks the call, the request
//! is journaled and published, and the turn waits, with no time limit, for the answer the
//! actor delivers from `SessionHandle::answer`, for a cancel, or for tern stopping. The
//! decision is journaled (with the grant an "always" leaves) before the call runs or is
//! answered as declined. The rules themselves are pure, in [`approvals`](super::approvals).

use super::approvals::{
    self, CANCEL_REASON, CANCELLED_WAITING, STOP_REASON, STOPPED_BEFORE, STOPPED_WAITING,
};
use super::batch::{Approver, CallOutcome, NOT_RECORDED, NOT_STARTED, Ruling};
use super::calls::Recorder;
use super::events::SessionEvent;
use crate::domain::{Answer, ApprovalNeed, ToolCall};
use crate::store::JournalEvent;
use crate::tools::{Tool, ToolContext};
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::oneshot;

/// A call waiting for a person: its id and where its answer goes.
type Waiting = (String, oneshot::Sender<Answer>);

/// The call waiting for a person, shared by the turn that parks it and the actor that
/// delivers the answer.
#[derive(Debug, Clone, Default)]
pub struct ApprovalSlot(Arc<Mutex<Option<Waiting>>>);

impl ApprovalSlot {
    fn lock(&self) -> MutexGuard<'_, Option<Waiting>> {
        // The slot holds no invariant a panicking holder could break halfway.
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Parks `call_id`; its answer arrives on the returned receiver.
    fn park(&self, call_id: &str) -> oneshot::Receiver<Answer> {
        let (reply, answer) = oneshot::channel();
        *self.lock() = Some((call_id.to_owned(), reply));
        answer
    }

    /// No call waits any more.
    fn clear(&self) {
        self.lock().take();
    }

    /// Hands `answer` to the call waiting as `call_id`; false when no call waits under that id
    /// (unknown, answered already, or its turn has moved on).
    pub fn deliver(&self, call_id: &str, answer: Answer) -> bool {
        let mut slot = self.lock();
        match slot.take() {
            Some((waiting, reply)) if waiting == call_id => reply.send(answer).is_ok(),
            other => {
                *slot = other;
                false
            }
        }
    }
}

/// How a wait for a person ended.
enum Settled {
    Answered(Answer),
    Cancelled,
    Stopped,
}

/// The turn's [`Approver`]: grants from the session state, questions through the journal.
pub(super) struct Asker<'r, 't> {
    recorder: Recorder<'r, 't>,
}

impl<'r, 't> Asker<'r, 't> {
    pub fn new(recorder: Recorder<'r, 't>) -> Self {
        Self { recorder }
    }

    pub fn into_recorder(self) -> Recorder<'r, 't> {
        self.recorder
    }

    async fn ask_person(
        &mut self,
        call: &ToolCall,
        tool: &dyn Tool,
        need: ApprovalNeed,
        ctx: &ToolContext,
        done: &[CallOutcome],
    ) -> Ruling {
        let turn = self.recorder.turn;
        let preview = tool.preview(&call.input, ctx).await;
        let (summary, detail) = approvals::describe(call, tool.is_read_only(), &need, preview);
        let always = approvals::grant_for(call, &need);
        // Parked before anyone can hear of it, so an answer can never come too early.
        let answer = turn.approvals.park(&call.id);
        let requested = JournalEvent::ApprovalRequested {
            call_id: call.id.clone(),
            tool: call.name.clone(),
            need,
            prompt: summary.clone(),
        };
        // The calls before this one are final: their results go first, in the same commit.
        if let Err(err) = self.recorder.record(done, false, vec![requested]) {
            turn.approvals.clear();
            return self.failed(err);
        }
        turn.emit(SessionEvent::ApprovalRequested {
            call_id: call.id.clone(),
            tool: call.name.clone(),
            summary,
            detail,
            always: always.clone(),
        });
        let settled = tokio::select! {
            biased;
            () = turn.cancel.cancelled() => Settled::Cancelled,
            () = turn.stop_after_batch.stopping() => Settled::Stopped,
            answer = answer => match answer {
                Ok(answer) => Settled::Answered(answer),
                // The actor let go of the question: it is stopping.
                Err(_) => Settled::Stopped,
            },
        };
        turn.approvals.clear();
        let (answer, ruling) = match settled {
            Settled::Answered(answer) => {
                let ruling = match &answer {
                    Answer::Once | Answer::Always => Ruling::Run,
                    Answer::Deny { reason } => {
                        Ruling::Decline(approvals::declined(reason.as_deref()))
                    }
                };
                (answer, ruling)
            }
            Settled::Cancelled => (
                denied(CANCEL_REASON),
                Ruling::Halt {
                    result: CANCELLED_WAITING.to_owned(),
                    rest: NOT_STARTED.to_owned(),
                },
            ),
            Settled::Stopped => (
                denied(STOP_REASON),
                Ruling::Halt {
                    result: STOPPED_WAITING.to_owned(),
                    rest: STOPPED_BEFORE.to_owned(),
                },
            ),
        };
        let grant = match answer {
            Answer::Always => always,
            _ => None,
        };
        let decided = JournalEvent::ApprovalDecided {
            call_id: call.id.clone(),
            answer: answer.clone(),
            grant,
        };
        if let Err(err) = turn.record(self.recorder.state, vec![decided]) {
            return self.failed(err);
        }
        turn.emit(SessionEvent::ApprovalDecided {
            call_id: call.id.clone(),
            answer,
        });
        ruling
    }

    /// Ends the batch on a journal write that failed; the round fails with `err`.
    fn failed(&mut self, err: crate::llm::LlmError) -> Ruling {
        self.recorder.failed = Some(err);
        Ruling::Halt {
            result: NOT_RECORDED.to_owned(),
            rest: NOT_RECORDED.to_owned(),
        }
    }
}

fn denied(reason: &str) -> Answer {
    Answer::Deny {
        reason: Some(reason.to_owned()),
    }
}

impl Approver for Asker<'_, '_> {
    fn granted(&self, call: &ToolCall, need: &ApprovalNeed) -> bool {
        approvals::covered(&self.recorder.state.grants, call, need)
    }

    fn starting(&mut self, calls: &[ToolCall], done: &[CallOutcome]) -> bool {
        match self.recorder.starting(calls, done) {
            Ok(()) => true,
            Err(err) => {
                self.failed(err);
                false
            }
        }
    }

    fn ask<'a>(
        &'a mut self,
        call: &'a ToolCall,
        tool: &'a dyn Tool,
        need: ApprovalNeed,
        ctx: &'a ToolContext,
        done: &'a [CallOutcome],
    ) -> impl Future<Output = Ruling> + Send + 'a {
        self.ask_person(call, tool, need, ctx, done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_reaches_only_the_call_that_waits() {
        let slot = ApprovalSlot::default();
        assert!(!slot.deliver("a", Answer::Once), "nothing waits");
        let mut answer = slot.park("a");
        assert!(!slot.deliver("b", Answer::Once), "another call");
        assert!(slot.deliver("a", Answer::Always));
        assert_eq!(answer.try_recv(), Ok(Answer::Always));
        assert!(!slot.deliver("a", Answer::Once), "answered already");
        let answer = slot.park("c");
        drop(answer);
        assert!(!slot.deliver("c", Answer::Once), "its turn moved on");
    }
}
