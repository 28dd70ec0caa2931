//! One thread's follower: it sends the thread's inputs in order and turns what the session
//! does into the platform's messages: the reply streamed as edits within the platform's
//! budget, one line per tool call, approvals as buttons, an error as a short line, the
//! finished reply split to the platform's length and tried until it lands.

use super::deliver::{Ask, Conversations, PostError, Poster, Queued};
use super::pace::{Pace, Paces};
use super::split::split;
use crate::domain::call_text::summarize_input;
use crate::domain::{Answer, Sender, SessionId, TurnStop};
use crate::gateway::catalog::JournalEvent;
use crate::gateway::{Delivered, Feed, FeedItem, ServiceError};
use crate::session::{OutputFilter, SessionEvent, UserInput};
use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

/// How long a follower waits for more after a turn ends before it lets the thread go.
const LINGER: Duration = Duration::from_secs(30);
/// How often a follower looks whether an edit is due.
const TICK: Duration = Duration::from_millis(100);
/// Longest wait between tries of a post the platform keeps refusing for now.
const MAX_BACKOFF: Duration = Duration::from_secs(60);
/// Tool lines shown in a streamed reply at most (the latest ones).
const TOOL_LINES: usize = 12;
/// Items a follower's feed may leave unread before the session drops it.
const BACKLOG: usize = 4096;

/// A turn's reply as it is being delivered.
struct Reply<Posted> {
    /// The text streamed (or, from the journal, the last message's).
    text: String,
    /// One line per tool call.
    tools: Vec<String>,
    /// The message the reply streams into, once posted.
    posted: Option<Posted>,
    /// What that message shows now.
    shown: String,
    last_edit: Option<Instant>,
    last_typing: Option<Instant>,
}

impl<Posted> Reply<Posted> {
    fn new() -> Self {
        Self {
            text: String::new(),
            tools: Vec::new(),
            posted: None,
            shown: String::new(),
            last_edit: None,
            last_typing: None,
        }
    }

    /// The reply as shown while it streams: the latest tool lines, then the text.
    fn body(&self) -> String {
        let skip = self.tools.len().saturating_sub(TOOL_LINES);
        let mut body = String::new();
        if skip > 0 {
            body.push_str(&format!("_… {skip} earlier calls_\n"));
        }
        for line in &self.tools[skip..] {
            body.push_str(line);
            body.push('\n');
        }
        if !self.tools.is_empty() && !self.text.is_empty() {
            body.push('\n');
        }
        body.push_str(&self.text);
        body
    }

    /// Drops the last `chars` characters of the text: a failed attempt's, made void.
    fn discard(&mut self, chars: u64) {
        let keep = self.text.chars().count().saturating_sub(chars as usize);
        let at = self
            .text
            .char_indices()
            .nth(keep)
            .map_or(self.text.len(), |(at, _)| at);
        self.text.truncate(at);
    }
}

/// One thread's follower: sends its inputs in order and delivers what its session does.
pub(super) struct Follower<P: Poster> {
    conv: Conversations<P>,
    key: String,
    inbox: mpsc::UnboundedReceiver<Queued<P::Place>>,
    place: Option<P::Place>,
    session: Option<SessionId>,
    feed: Option<Feed>,
    reply: Option<Reply<P::Posted>>,
    /// Approval questions posted, by call id.
    asks: HashMap<String, P::Posted>,
    /// When the thread last had nothing going on.
    quiet_since: Instant,
    /// The journal read back ended the open reply's turn at a stop, with nothing after it
    /// yet: the next tern may take the turn up, or not.
    drained: bool,
    /// Inputs waiting to be sent, in the order they came.
    waiting: VecDeque<Queued<P::Place>>,
    /// The input on its way to the session. An input that waits for its own turn is
    /// acknowledged only when that turn starts, so sending goes on beside the delivery of
    /// the turn under way, never in its way (its approval question included).
    sending: Option<Sending>,
}

/// An input on its way: its acknowledgement, and how sending it went (with the session's
/// feed when it was the thread's first).
type Sending = tokio::task::JoinHandle<Sent>;

struct Sent {
    ack: oneshot::Sender<Result<Delivered, ServiceError>>,
    result: Result<(Delivered, Option<Feed>), ServiceError>,
}

impl<P: Poster> Follower<P> {
    pub(super) fn new(
        conv: Conversations<P>,
        key: String,
        inbox: mpsc::UnboundedReceiver<Queued<P::Place>>,
    ) -> Self {
        Self {
            conv,
            key,
            inbox,
            place: None,
            session: None,
            feed: None,
            reply: None,
            asks: HashMap::new(),
            quiet_since: Instant::now(),
            drained: false,
            waiting: VecDeque::new(),
            sending: None,
        }
    }

    fn poster(&self) -> &P {
        &self.conv.inner.poster
    }

    /// Delivers the reply of `session` read again from after `from`, then goes on as
    /// [`Follower::run`].
    pub(super) async fn resume(mut self, place: P::Place, session: SessionId, from: u64) {
        self.conv.inner.poster.bind(&place, &session);
        self.place = Some(place);
        self.feed = self
            .conv
            .inner
            .service
            .subscribe(&session, Some(from), OutputFilter::ALL, BACKLOG)
            .await
            .ok();
        self.session = Some(session);
        if self.feed.is_none() {
            // The session is gone (deleted): nothing is left to deliver.
            self.conv.inner.pending.delivered(&self.key);
        }
        self.run().await;
    }

    pub(super) async fn run(mut self) {
        let stop = self.conv.inner.stop.clone();
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                biased;
                () = stop.cancelled() => break,
                queued = self.inbox.recv() => match queued {
                    Some(queued) => {
                        self.waiting.push_back(queued);
                        self.send_next();
                    }
                    None => break,
                },
                sent = next_sent(&mut self.sending) => {
                    if let Some(sent) = sent {
                        self.sent(sent).await;
                    }
                    self.send_next();
                }
                item = next_item(&mut self.feed) => self.on_item(item).await,
                _ = tick.tick() => {
                    self.tick().await;
                    if self.reply.is_none()
                        && self.asks.is_empty()
                        && self.sending.is_none()
                        && self.waiting.is_empty()
                        && self.quiet_since.elapsed() >= LINGER
                        && self.leave()
                    {
                        return;
                    }
                }
            }
        }
        // Stopping: what is not delivered stays in the journal.
        self.conv.lock().remove(&self.key);
    }

    /// Takes this thread out of the conversations, unless an input came meanwhile.
    fn leave(&mut self) -> bool {
        let mut threads = self.conv.lock();
        if !self.inbox.is_empty() {
            return false;
        }
        threads.remove(&self.key);
        true
    }

    /// Starts sending the next waiting input, unless one is on its way.
    fn send_next(&mut self) {
        if self.sending.is_some() {
            return;
        }
        let Some(Queued { inbound, ack }) = self.waiting.pop_front() else {
            return;
        };
        self.place = Some(inbound.place.clone());
        self.quiet_since = Instant::now();
        let input = UserInput {
            sender: inbound.sender,
            audience: inbound.audience,
            kind: inbound.kind,
            text: inbound.text.into(),
            approval: Some(inbound.approval),
            touched: Vec::new(),
        };
        let service = self.conv.inner.service.clone();
        let key = self.key.clone();
        let dir = inbound.project_dir;
        // The first input brings the feed, attached before it is sent.
        let first = self.feed.is_none();
        self.sending = Some(tokio::spawn(async move {
            let result = if first {
                service
                    .send_followed(&key, &dir, input, OutputFilter::ALL)
                    .await
                    .map(|(delivered, feed)| (delivered, Some(feed)))
            } else {
                service
                    .send(&key, &dir, input)
                    .await
                    .map(|delivered| (delivered, None))
            };
            Sent { ack, result }
        }));
    }

    /// An input reached its session (or failed to): its sender is told.
    async fn sent(&mut self, sent: Sent) {
        let Sent { ack, result } = sent;
        let delivered = match result {
            Ok((delivered, Some(feed))) => {
                self.feed = Some(feed);
                self.session = Some(delivered.session.clone());
                delivered
            }
            Ok((delivered, None)) => delivered,
            Err(err) => {
                let _ = ack.send(Err(err));
                return;
            }
        };
        if let Some(place) = &self.place {
            self.conv.inner.poster.bind(place, &delivered.session);
        }
        if self.session.as_ref() != Some(&delivered.session) {
            // A reset gave the key a new session: follow that one from the input on.
            let from = delivered.seq.saturating_sub(1);
            self.session = Some(delivered.session.clone());
            self.feed = self
                .conv
                .inner
                .service
                .subscribe(&delivered.session, Some(from), OutputFilter::ALL, BACKLOG)
                .await
                .ok();
        }
        let _ = ack.send(Ok(delivered));
    }

    async fn on_item(&mut self, item: Option<FeedItem>) {
        match item {
            Some(FeedItem::Event(stamped)) => self.on_event(stamped.event).await,
            Some(FeedItem::Replay { records }) => {
                for record in records {
                    self.on_record(record.seq, record.event).await;
                }
            }
            Some(FeedItem::Live { .. }) => {
                // Read back to now: a turn cut by a stop that was not taken up is over.
                if std::mem::take(&mut self.drained)
                    && let Some(reply) = self.reply.take()
                {
                    let note = "tern stopped before this answer was finished; send it again";
                    self.finish(reply, Some(note.to_owned())).await;
                }
            }
            Some(FeedItem::Dropped(dropped)) => {
                // Fell behind, or the owner left: follow again from what was received.
                let Some(session) = self.session.clone() else {
                    self.feed = None;
                    return;
                };
                tokio::time::sleep(Duration::from_millis(100)).await;
                self.feed = self
                    .conv
                    .inner
                    .service
                    .subscribe(&session, Some(dropped.last_at), OutputFilter::ALL, BACKLOG)
                    .await
                    .ok();
            }
            Some(FeedItem::Ended) | None => {
                // The session went to rest; the next input wakes it with a new feed.
                self.feed = None;
                if let Some(reply) = self.reply.take() {
                    self.finish(reply, None).await;
                }
            }
        }
    }

    fn reply(&mut self) -> &mut Reply<P::Posted> {
        self.quiet_since = Instant::now();
        self.reply.get_or_insert_with(Reply::new)
    }

    async fn on_event(&mut self, event: SessionEvent) {
        match event {
            SessionEvent::InputAccepted { seq, sender, .. } => self.begin(seq, &sender),
            // What belongs to a turn this thread does not show (the terminal's) is passed by.
            _ if self.reply.is_none() => {}
            SessionEvent::TextDelta { text } => self.reply().text.push_str(&text),
            SessionEvent::Retry {
                discarded_chars, ..
            }
            | SessionEvent::Fallback {
                discarded_chars, ..
            }
            | SessionEvent::TextReadAsCalls { discarded_chars } => {
                self.reply().discard(discarded_chars);
            }
            SessionEvent::ToolCall { name, input, .. } => {
                self.reply().tools.push(tool_line(&name, &input));
            }
            SessionEvent::ApprovalRequested {
                call_id,
                tool,
                summary,
                ..
            } => self.ask(call_id, tool, summary).await,
            SessionEvent::ApprovalDecided { call_id, answer } => {
                self.settle(&call_id, &answer).await;
            }
            SessionEvent::TurnCompleted { text, stop, .. } => {
                if stop == TurnStop::Drained {
                    // Its owner is stopping; the next one takes the turn up.
                    return;
                }
                let mut reply = self.reply.take().unwrap_or_else(Reply::new);
                if !text.is_empty() {
                    reply.text = text;
                }
                self.finish(reply, None).await;
            }
            SessionEvent::TurnFailed { message, stop, .. } => {
                if stop == TurnStop::Drained {
                    return;
                }
                let reply = self.reply.take().unwrap_or_else(Reply::new);
                self.finish(reply, Some(message)).await;
            }
            _ => {}
        }
    }

    /// The input at `seq` from `sender` was journaled: a turn it starts is shown in the
    /// thread (and kept as pending until delivered), unless it came from a terminal, whose
    /// person sees the turn there: what they do in a chat session stays out of the chat.
    fn begin(&mut self, seq: u64, sender: &str) {
        if self.reply.is_some() {
            // It joins the turn under way.
            return;
        }
        if sender == Sender::local_user().id {
            return;
        }
        if let Some(session) = &self.session {
            self.conv
                .inner
                .pending
                .started(&self.key, session, seq.saturating_sub(1));
        }
        self.reply();
    }

    /// A journal record read back (after a drop or a reset): what it means for delivery.
    async fn on_record(&mut self, seq: u64, event: JournalEvent) {
        use JournalEvent as J;
        let drained_end = matches!(
            &event,
            J::TurnCompleted {
                stop: TurnStop::Drained
            } | J::TurnFailed {
                stop: Some(TurnStop::Drained),
                ..
            }
        );
        self.drained = drained_end;
        match event {
            J::InputAccepted { sender, .. } => self.begin(seq, &sender.id),
            _ if self.reply.is_none() => {}
            J::AssistantMessage { content, .. } => {
                let reply = self.reply();
                for block in content {
                    match block {
                        crate::domain::ContentBlock::Text { text } => reply.text = text,
                        crate::domain::ContentBlock::ToolUse(call) => {
                            let line = tool_line(&call.name, &call.input);
                            if !reply.tools.contains(&line) {
                                reply.tools.push(line);
                            }
                        }
                        _ => {}
                    }
                }
            }
            J::ApprovalRequested {
                call_id,
                tool,
                prompt,
                ..
            } => self.ask(call_id, tool, prompt).await,
            J::ApprovalDecided {
                call_id, answer, ..
            } => self.settle(&call_id, &answer).await,
            J::TurnCompleted { stop } if stop != TurnStop::Drained => {
                if let Some(reply) = self.reply.take() {
                    self.finish(reply, None).await;
                }
            }
            J::TurnFailed { message, stop, .. } if stop != Some(TurnStop::Drained) => {
                let reply = self.reply.take().unwrap_or_else(Reply::new);
                self.finish(reply, Some(message)).await;
            }
            _ => {}
        }
    }

    /// Edits the streaming message when an edit is due and the budget has room; renews the
    /// typing indicator.
    async fn tick(&mut self) {
        let Some(place) = self.place.clone() else {
            return;
        };
        let interval = self.conv.inner.edit_interval;
        let typing_every = self.poster().typing_every();
        let edits = self.poster().edits();
        let limit = self.poster().limit();
        let Some(reply) = self.reply.as_mut() else {
            return;
        };
        if let Some(every) = typing_every
            && reply.last_typing.is_none_or(|at| at.elapsed() >= every)
        {
            reply.last_typing = Some(Instant::now());
            self.conv.inner.poster.typing(&place).await;
        }
        let Some(reply) = self.reply.as_mut() else {
            return;
        };
        let body = reply.body();
        let pace = budget(&self.conv.inner.paces, reply.posted.is_none());
        if !edits
            || body.trim().is_empty()
            || body == reply.shown
            || reply.last_edit.is_some_and(|at| at.elapsed() < interval)
            || !pace.try_take_spare()
        {
            return;
        }
        // While it streams, the message shows the start; the end is split at the finish.
        let shown = clip_to(
            &body,
            limit.saturating_sub(2),
            self.conv.inner.poster.measure(),
        );
        let streaming = format!("{shown} …");
        let poster = &self.conv.inner.poster;
        let result = match &reply.posted {
            Some(posted) => poster.edit(&place, posted, &streaming).await,
            None => poster
                .post(&place, &streaming)
                .await
                .map(|posted| reply.posted = Some(posted)),
        };
        reply.last_edit = Some(Instant::now());
        match result {
            Ok(()) => {
                reply.shown = body;
                self.conv.inner.status.posted();
            }
            // Merged into a later edit; the finish waits as long as it must.
            Err(PostError::Later(wait)) => pace.pause(wait),
            Err(PostError::Failed(err)) => self.conv.inner.status.error(err),
        }
    }

    /// Delivers a finished reply whole: the streamed message edited to the first piece, the
    /// rest posted after it, each tried until it lands.
    async fn finish(&mut self, reply: Reply<P::Posted>, failed: Option<String>) {
        self.quiet_since = Instant::now();
        let Some(place) = self.place.clone() else {
            return;
        };
        let mut text = reply.body();
        if let Some(message) = failed {
            if !text.is_empty() {
                text.push_str("\n\n");
            }
            text.push_str(&format!("⚠ {message}"));
        }
        if text.trim().is_empty() {
            text = "_(no answer)_".to_owned();
        }
        let poster = &self.conv.inner.poster;
        let pieces = split(&text, poster.limit(), poster.measure());
        let mut posted = reply.posted;
        let mut cut = false;
        for piece in pieces {
            let landed = match posted.take() {
                Some(message) => {
                    let edit = || poster.edit(&place, &message, &piece);
                    self.until_landed(false, edit).await.is_some()
                }
                None => {
                    let post = || poster.post(&place, &piece);
                    self.until_landed(true, post).await.is_some()
                }
            };
            if !landed {
                cut = self.conv.inner.stop.is_cancelled();
                break;
            }
        }
        // Cut by a stop: the next tern delivers it. Otherwise it landed, or never can.
        if !cut {
            self.conv.inner.pending.delivered(&self.key);
        }
    }

    /// Runs `call` until the platform takes it, waiting out each "not now"; `None` when it
    /// was refused for good or the channel stops. `post` says which budget it counts in.
    async fn until_landed<T, F, Fut>(&self, post: bool, call: F) -> Option<T>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<T, PostError>>,
    {
        let inner = &self.conv.inner;
        let pace = budget(&inner.paces, post);
        let mut backoff = Duration::from_millis(500);
        loop {
            tokio::select! {
                () = pace.take() => {}
                () = inner.stop.cancelled() => return None,
            }
            match call().await {
                Ok(value) => {
                    inner.status.posted();
                    return Some(value);
                }
                Err(PostError::Failed(err)) => {
                    inner.status.error(err);
                    return None;
                }
                Err(PostError::Later(wait)) => {
                    pace.pause(wait);
                    let wait = wait.max(backoff);
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                    tokio::select! {
                        () = tokio::time::sleep(wait) => {}
                        () = inner.stop.cancelled() => return None,
                    }
                }
            }
        }
    }

    async fn ask(&mut self, call_id: String, tool: String, summary: String) {
        self.quiet_since = Instant::now();
        if self.asks.contains_key(&call_id) {
            return;
        }
        let (Some(place), Some(session)) = (self.place.clone(), self.session.clone()) else {
            return;
        };
        let ask = Ask {
            session,
            call_id: call_id.clone(),
            tool,
            summary,
        };
        let poster = &self.conv.inner.poster;
        let call = || poster.ask(&place, &ask);
        if let Some(posted) = self.until_landed(true, call).await {
            self.asks.insert(call_id, posted);
        }
    }

    async fn settle(&mut self, call_id: &str, answer: &Answer) {
        let (Some(posted), Some(place)) = (self.asks.remove(call_id), self.place.clone()) else {
            return;
        };
        let text = match answer {
            Answer::Once => "✅ Approved once".to_owned(),
            Answer::Always => "✅ Approved for the rest of the session".to_owned(),
            Answer::Deny { reason: None } => "❌ Denied".to_owned(),
            Answer::Deny {
                reason: Some(reason),
            } => format!("❌ Denied: {reason}"),
        };
        let poster = &self.conv.inner.poster;
        let call = || poster.settle(&place, &posted, &text);
        self.until_landed(false, call).await;
    }
}

/// A tool call as one line of a reply.
fn tool_line(name: &str, input: &serde_json::Value) -> String {
    format!("▸ `{name}` {}", summarize_input(input))
}

/// The budget a new message (`post`) or an edit is counted in.
fn budget(paces: &Paces, post: bool) -> &Pace {
    if post { &paces.posts } else { &paces.edits }
}

/// The input on its way, once it is sent (`None`: its task was lost, and its sender told
/// so by the dropped acknowledgement); never, without one.
async fn next_sent(sending: &mut Option<Sending>) -> Option<Sent> {
    match sending {
        Some(task) => {
            let sent = task.await.ok();
            *sending = None;
            sent
        }
        None => std::future::pending().await,
    }
}

/// The next item of `feed`; never, without one.
async fn next_item(feed: &mut Option<Feed>) -> Option<FeedItem> {
    match feed {
        Some(feed) => feed.next().await,
        None => std::future::pending().await,
    }
}

/// The longest start of `text` that measures at most `room`.
fn clip_to(text: &str, room: usize, measure: fn(&str) -> usize) -> &str {
    if measure(text) <= room {
        return text;
    }
    let mut end = 0;
    let mut used = 0;
    for (at, c) in text.char_indices() {
        let mut buf = [0u8; 4];
        used += measure(c.encode_utf8(&mut buf));
        if used > room {
            break;
        }
        end = at + c.len_utf8();
    }
    &text[..end]
}
