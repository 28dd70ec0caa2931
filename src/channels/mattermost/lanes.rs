//! Inputs handed to their sessions off the socket's task, in order per thread: the socket
//! keeps reading while a session starts, and two posts in one thread reach it in the order
//! they were written. A thread's lane lives while it has inputs waiting.

use super::rest::{Place, Rest, lock};
use crate::channels::deliver::{Conversations, Inbound};
use crate::channels::status::Status;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc;

/// Each thread's waiting inputs, by session key.
pub struct Lanes {
    conversations: Conversations<Rest>,
    status: Status,
    lanes: Mutex<HashMap<String, mpsc::UnboundedSender<Inbound<Place>>>>,
}

impl Lanes {
    /// No lane yet; inputs go to `conversations`, their failures to `status`.
    pub fn new(conversations: Conversations<Rest>, status: Status) -> Arc<Self> {
        Arc::new(Self {
            conversations,
            status,
            lanes: Mutex::new(HashMap::new()),
        })
    }

    /// Queues `inbound` behind its thread's earlier inputs; returns at once.
    pub fn push(self: &Arc<Self>, inbound: Inbound<Place>) {
        let key = inbound.key.clone();
        let mut lanes = lock(&self.lanes);
        let unsent = match lanes.get(&key) {
            Some(lane) => lane.send(inbound).err().map(|back| back.0),
            None => Some(inbound),
        };
        let Some(inbound) = unsent else {
            return;
        };
        let (lane, waiting) = mpsc::unbounded_channel();
        let _ = lane.send(inbound);
        lanes.insert(key.clone(), lane);
        tokio::spawn(self.clone().drain(key, waiting));
    }

    /// Delivers a lane's inputs one after the other, and takes the lane out once it is empty.
    async fn drain(
        self: Arc<Self>,
        key: String,
        mut waiting: mpsc::UnboundedReceiver<Inbound<Place>>,
    ) {
        loop {
            // Looked at under the lock `push` sends under, so no input is left behind.
            let next = {
                let mut lanes = lock(&self.lanes);
                match waiting.try_recv() {
                    Ok(inbound) => Some(inbound),
                    Err(_) => {
                        lanes.remove(&key);
                        None
                    }
                }
            };
            let Some(inbound) = next else {
                return;
            };
            if let Err(err) = self.conversations.deliver(inbound).await {
                self.status.error(format!(
                    "an input in {key} did not reach its session: {err}"
                ));
            }
        }
    }
}
