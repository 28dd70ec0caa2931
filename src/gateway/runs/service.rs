//! The subagent runs and background jobs through the session service: what a front end asks
//! of them, in the owner or over its socket.

use super::super::service::{SessionService, unexpected};
use super::super::wire::{Call, Reply};
use crate::domain::{RunId, SessionId};
use crate::gateway::ServiceError;
use crate::tools::jobs::JobView;
use serde_json::Value;

impl SessionService {
    /// How many subagent runs session `id` sent that have not reported to it yet.
    pub async fn pending_runs(&self, id: &SessionId) -> Result<u64, ServiceError> {
        match self.ask(Call::PendingRuns { id: id.clone() }).await? {
            Reply::Count { count } => Ok(count),
            other => Err(unexpected(&other)),
        }
    }

    /// The runs of session `parent` still queued or working, oldest first.
    pub async fn live_runs(&self, parent: &SessionId) -> Result<Vec<RunId>, ServiceError> {
        let call = Call::LiveRuns {
            parent: parent.clone(),
        };
        match self.ask(call).await? {
            Reply::Runs { runs } => Ok(runs),
            other => Err(unexpected(&other)),
        }
    }

    /// Where run `run` of session `parent` stands (its state, agent, elapsed seconds, its
    /// session once started, its branch and `result.md`); with `cancel`, cancelled first.
    pub async fn run_status(
        &self,
        parent: &SessionId,
        run: &RunId,
        cancel: bool,
    ) -> Result<Value, ServiceError> {
        let call = Call::Run {
            parent: parent.clone(),
            run: run.clone(),
            cancel,
        };
        match self.ask(call).await? {
            Reply::Status { status } => Ok(status),
            other => Err(unexpected(&other)),
        }
    }

    /// The background jobs of session `id`, each with its log's ends when `with_output`.
    pub async fn jobs(
        &self,
        id: &SessionId,
        with_output: bool,
    ) -> Result<Vec<JobView>, ServiceError> {
        let call = Call::Jobs {
            id: id.clone(),
            with_output,
        };
        match self.ask(call).await? {
            Reply::Jobs { jobs } => Ok(jobs),
            other => Err(unexpected(&other)),
        }
    }
}
