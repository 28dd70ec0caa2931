//! The model client: one call to "the model", whatever it takes. It drives a provider's
//! stream to the end while watching the prefill, first-token and no-progress timeouts,
//! assembles the reply, retries what retrying can fix, fails over to the fallback model when
//! the primary keeps failing, and refuses to hand back a reply cut off at the output limit or
//! by a full context window, telling the two apart by the usage the server reported.
//!
//! One of those timeouts ends the call at once, without a retry or the fallback: each costs
//! the whole timeout, which is long, and the error names which one fired so the person can
//! raise it or simply send the message again.
//!
//! Everything streamed is passed to a [`StreamObserver`] as it arrives, so the interface can
//! show the reply growing. A retry or a failover means what was shown is void; the observer
//! is told so before the next attempt starts.

use super::assemble::ReplyAssembler;
use super::cutoff::{CutOff, cut_off, cut_off_error};
use super::error::connection_cut;
use super::retry::{RetryDecision, RetryPolicy, next_delay};
use super::served::{ModelLimits, RouteLimits};
use super::text_calls::{Ending, read_calls_in_text};
use super::{ChatRequest, LlmError, Provider, StopReason, StreamEvent, provider_for};
use crate::config::ProviderProfile;
use crate::domain::{ContentBlock, ErrorCategory, Usage, Watchdog};
use futures_util::StreamExt;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::{Instant, sleep, sleep_until};
use tokio_util::sync::CancellationToken;

/// A model on a provider, with the limits to call it with. The limits may still change once:
/// when the server, asked in the background, says which model it serves and how large its
/// window is ([`super::served::learn`]); every clone sees the change.
#[derive(Clone)]
pub struct ModelRoute {
    /// The endpoint that serves the model.
    pub provider: Arc<dyn Provider>,
    limits: watch::Receiver<RouteLimits>,
}

impl ModelRoute {
    /// A route with fixed limits: `model`, asked for at most `max_output_tokens`, in a
    /// window of `context_window` tokens.
    pub fn new(
        provider: Arc<dyn Provider>,
        model: impl Into<String>,
        max_output_tokens: u32,
        context_window: u64,
    ) -> Self {
        let limits = ModelLimits::fixed(model, max_output_tokens, context_window);
        Self::learned(
            provider,
            watch::channel(RouteLimits {
                limits,
                asking: false,
            })
            .1,
        )
    }

    /// A route whose limits come from [`super::served::learn`].
    pub fn learned(provider: Arc<dyn Provider>, limits: watch::Receiver<RouteLimits>) -> Self {
        Self { provider, limits }
    }

    /// The route to `model` (or the profile's default model) on the profile's provider, with
    /// the profile's limits as they stand (nothing is asked of the server).
    pub fn for_profile(profile: &ProviderProfile, model: Option<&str>) -> Self {
        Self::new(
            provider_for(profile),
            model.unwrap_or(&profile.default_model),
            profile.max_output_tokens,
            profile.context_window,
        )
    }

    /// The model, its limits and where its window came from, as known now.
    pub fn limits(&self) -> ModelLimits {
        self.limits.borrow().limits.clone()
    }

    /// The model name as the provider knows it.
    pub fn model(&self) -> String {
        self.limits.borrow().limits.model.clone()
    }

    /// The largest reply to ask this model for.
    pub fn max_output_tokens(&self) -> u32 {
        self.limits.borrow().limits.max_output_tokens
    }

    /// The model's context window in tokens: where compaction starts from.
    pub fn context_window(&self) -> u64 {
        self.limits.borrow().limits.context_window
    }

    /// The limits as they change, for a front end that shows them.
    pub fn watch(&self) -> watch::Receiver<RouteLimits> {
        self.limits.clone()
    }

    /// Returns once the server is no longer being asked. The asking is bounded
    /// ([`super::served::ASK_BOUND`]), so this is too; a route that asks nothing returns at once.
    pub async fn ready(&self) {
        let mut limits = self.limits.clone();
        // An error means the asking task is gone, and with it any wait.
        let _ = limits.wait_for(|now| !now.asking).await;
    }
}

impl fmt::Debug for ModelRoute {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let limits = self.limits();
        f.debug_struct("ModelRoute")
            .field("provider", &self.provider.name())
            .field("model", &limits.model)
            .field("max_output_tokens", &limits.max_output_tokens)
            .field("context_window", &limits.context_window)
            .finish()
    }
}

/// A complete reply.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelReply {
    /// Text, thinking (with signatures) and tool calls, in the order the model produced them.
    pub content: Vec<ContentBlock>,
    pub usage: Usage,
    pub stop_reason: StopReason,
    /// The model that answered (the fallback's, after a failover).
    pub model: String,
    /// The provider profile that answered.
    pub provider: String,
    /// Call id → why its arguments could not be read (the parse error and an excerpt of the
    /// raw text). Such a call's input is an empty object.
    pub malformed_tool_args: BTreeMap<String, String>,
}

/// Watches a model call as it happens.
pub trait StreamObserver: Send {
    /// Every event of the current attempt, as it arrives.
    fn on_event(&mut self, event: &StreamEvent);

    /// Attempt number `attempt - 1` failed with `error`; attempt `attempt` starts after
    /// `delay`. Everything shown from the failed attempt must be discarded.
    fn on_retry(&mut self, attempt: u32, delay: Duration, error: &LlmError);

    /// The primary route gave up with `error`; the fallback model `route_model` is tried
    /// next. Everything shown so far must be discarded.
    fn on_fallback(&mut self, route_model: &str, error: &LlmError);

    /// The text of the attempt just ended was read as tool calls: the text shown must be
    /// discarded (its thinking stays).
    fn on_text_read_as_calls(&mut self) {}
}

/// The observer that ignores everything, for calls nobody watches.
impl StreamObserver for () {
    fn on_event(&mut self, _event: &StreamEvent) {}
    fn on_retry(&mut self, _attempt: u32, _delay: Duration, _error: &LlmError) {}
    fn on_fallback(&mut self, _route_model: &str, _error: &LlmError) {}
}

/// Calls the model with retries, timeouts and failover.
#[derive(Debug, Clone)]
pub struct ModelClient {
    /// The model asked first.
    pub primary: ModelRoute,
    /// The model asked when the primary keeps failing with errors that retrying could fix.
    pub fallback: Option<ModelRoute>,
    /// Retries and timeouts, applied to each route alike.
    pub policy: RetryPolicy,
}

impl ModelClient {
    /// A client over the given routes and policy.
    pub fn new(primary: ModelRoute, fallback: Option<ModelRoute>, policy: RetryPolicy) -> Self {
        Self {
            primary,
            fallback,
            policy,
        }
    }

    /// Sends `request` and returns the complete reply. The request's `model` is replaced by
    /// the route's; its `max_output_tokens` is capped at the route's (zero means the route's).
    ///
    /// Fails with category `ModelBehavior` when the reply was cut at the output limit and
    /// `ContextOverflow` when it was cut because the context window filled up (nothing partial
    /// is returned either way), `Cancelled` promptly when `cancel` fires, and otherwise with
    /// the last attempt's classified error.
    pub async fn complete(
        &self,
        request: ChatRequest,
        observer: &mut dyn StreamObserver,
        cancel: &CancellationToken,
    ) -> Result<ModelReply, LlmError> {
        let error = match self
            .run_route(&self.primary, &request, observer, cancel)
            .await
        {
            Ok(reply) => return Ok(reply),
            Err(error) => error,
        };
        let Some(fallback) = &self.fallback else {
            return Err(error);
        };
        if !error.is_retryable() || error.watchdog.is_some() {
            return Err(error);
        }
        observer.on_fallback(&fallback.model(), &error);
        self.run_route(fallback, &request, observer, cancel)
            .await
            .map_err(|fallback_error| {
                if fallback_error.category == ErrorCategory::Cancelled {
                    return fallback_error;
                }
                let primary = format!(
                    "the fallback model was tried after `{}` failed: {}",
                    self.primary.model(),
                    error.message
                );
                fallback_error.with_hint(&primary)
            })
    }

    /// Runs attempts on one route until one succeeds or the retry policy gives up.
    async fn run_route(
        &self,
        route: &ModelRoute,
        request: &ChatRequest,
        observer: &mut dyn StreamObserver,
        cancel: &CancellationToken,
    ) -> Result<ModelReply, LlmError> {
        let limits = route.limits();
        let mut request = request.clone();
        request.model = limits.model.clone();
        request.max_output_tokens = match (request.max_output_tokens, limits.max_output_tokens) {
            (0, limit) | (limit, 0) => limit,
            (asked, limit) => asked.min(limit),
        };
        request.context_window = limits.context_window;
        request.images = route.provider.takes_images();
        let mut attempt = 1;
        loop {
            let error = match self.attempt(route, &request, observer, cancel).await {
                Ok(reply) => return Ok(reply),
                Err(error) if error.category == ErrorCategory::Cancelled => return Err(error),
                // A watchdog already waited its whole (long) time: the turn ends here.
                Err(error) if error.watchdog.is_some() => return Err(error),
                Err(error) => error,
            };
            match next_delay(attempt, &error, &self.policy, fastrand::f64()) {
                RetryDecision::Retry(delay) => {
                    tracing::warn!(
                        provider = route.provider.name(),
                        model = %request.model,
                        attempt,
                        delay_ms = delay.as_millis() as u64,
                        "model call failed, retrying: {error}"
                    );
                    attempt += 1;
                    observer.on_retry(attempt, delay, &error);
                    tokio::select! {
                        biased;
                        _ = cancel.cancelled() => return Err(cancelled()),
                        _ = sleep(delay) => {}
                    }
                }
                RetryDecision::GiveUp if attempt > 1 => {
                    return Err(error.with_hint(&format!("gave up after {attempt} attempts")));
                }
                RetryDecision::GiveUp => return Err(error),
                RetryDecision::WaitTooLong(wait) => {
                    let advice = format!(
                        "the provider asks to wait {}; try again after {}",
                        human_duration(wait),
                        local_clock_after(wait)
                    );
                    return Err(error.with_hint(&advice));
                }
            }
        }
    }

    /// One attempt: request, stream, assemble.
    async fn attempt(
        &self,
        route: &ModelRoute,
        request: &ChatRequest,
        observer: &mut dyn StreamObserver,
        cancel: &CancellationToken,
    ) -> Result<ModelReply, LlmError> {
        let policy = &self.policy;
        let provider = route.provider.name();
        let mut stream = tokio::select! {
            biased;
            _ = cancel.cancelled() => return Err(cancelled()),
            opened = tokio::time::timeout(policy.prefill_timeout, route.provider.stream(request)) => {
                match opened {
                    Ok(stream) => stream?,
                    Err(_) => return Err(watchdog_error(Watchdog::Prefill, policy, provider)),
                }
            }
        };
        let mut assembler = ReplyAssembler::new();
        let opened_at = Instant::now();
        // When the last event arrived, counted from the first piece of the reply itself (text,
        // thinking or a tool call): until then only the first-token timeout applies, however
        // much bookkeeping (Anthropic's opening usage) arrives.
        let mut last_event: Option<Instant> = None;
        // When the current run of thinking-only output began; any text or tool call ends it.
        let mut thinking_since: Option<Instant> = None;
        let stop_reason = loop {
            let (deadline, watchdog) = match (last_event, thinking_since) {
                (None, _) => (opened_at + policy.first_token_timeout, Watchdog::FirstToken),
                (Some(last), Some(since))
                    if since + policy.thinking_timeout() < last + policy.no_progress_timeout =>
                {
                    (since + policy.thinking_timeout(), Watchdog::ThinkingOnly)
                }
                (Some(last), _) => (last + policy.no_progress_timeout, Watchdog::NoProgress),
            };
            let next = tokio::select! {
                biased;
                _ = cancel.cancelled() => {
                    let text = assembler.text_so_far();
                    return Err(LlmError {
                        interrupted_text: (!text.trim().is_empty()).then_some(text),
                        ..cancelled()
                    });
                }
                item = stream.next() => item,
                _ = sleep_until(deadline) => return Err(watchdog_error(watchdog, policy, provider)),
            };
            let event = match next {
                Some(Ok(event)) => event,
                Some(Err(error)) => return Err(error),
                None => return Err(connection_cut("")),
            };
            let now = Instant::now();
            match &event {
                StreamEvent::ThinkingDelta(_) | StreamEvent::ThinkingSignature(_) => {
                    thinking_since.get_or_insert(now);
                    last_event = Some(now);
                }
                StreamEvent::TextDelta(_)
                | StreamEvent::ToolCallStart { .. }
                | StreamEvent::ToolCallArgsDelta { .. }
                | StreamEvent::ToolCallEnd { .. } => {
                    thinking_since = None;
                    last_event = Some(now);
                }
                _ if last_event.is_some() => last_event = Some(now),
                _ => {}
            }
            observer.on_event(&event);
            match event {
                StreamEvent::Stop(reason) => break reason,
                StreamEvent::Error(error) => return Err(error),
                other => assembler.push(other),
            }
        };
        if let StopReason::Other(reason) = &stop_reason {
            tracing::debug!(
                provider,
                model = %request.model,
                reason = %reason,
                "the model stopped for a reason tern does not know; keeping the reply"
            );
        }
        // The same stop reason covers a full window: the usage tells which it was.
        let (limit, window) = (request.max_output_tokens, route.context_window());
        let cut = (stop_reason == StopReason::MaxTokens).then(|| {
            let usage = assembler.usage();
            (cut_off(&usage, limit, window), usage)
        });
        if let Some((CutOff::WindowFull { filled }, _)) = &cut {
            tracing::info!(
                provider,
                model = %request.model,
                filled,
                window,
                "the reply stopped because the context window filled up"
            );
        }
        let mut assembled = assembler.finish();
        let mut stop_reason = stop_reason;
        let window_full = matches!(cut, Some((CutOff::WindowFull { .. }, _)));
        if route.provider.reads_calls_in_text() && !window_full {
            let offered: Vec<&str> = request.tools.iter().map(|t| t.name.as_str()).collect();
            let ending = match cut {
                Some(_) => Ending::Cut,
                None => Ending::Whole,
            };
            let read = read_calls_in_text(&mut assembled.content, &offered, ending);
            if read > 0 {
                tracing::info!(
                    provider,
                    calls = read,
                    cut_off = cut.is_some(),
                    "read tool calls the model wrote as text"
                );
                observer.on_text_read_as_calls();
                stop_reason = StopReason::ToolUse;
            }
        }
        if let Some((cause, usage)) = cut
            && stop_reason == StopReason::MaxTokens
        {
            return Err(cut_off_error(cause, &usage, limit, window));
        }
        Ok(ModelReply {
            content: assembled.content,
            usage: assembled.usage,
            stop_reason,
            model: request.model.clone(),
            provider: provider.to_string(),
            malformed_tool_args: assembled.malformed_tool_args,
        })
    }
}

/// The error a watchdog's firing ends the call with.
fn watchdog_error(watchdog: Watchdog, policy: &RetryPolicy, provider: &str) -> LlmError {
    let message = match watchdog {
        Watchdog::Prefill => format!(
            "{provider}: no reply within {} of sending the request (prefill_timeout); the \
             provider may be overloaded, or raise [session] prefill_timeout",
            human_duration(policy.prefill_timeout)
        ),
        Watchdog::FirstToken => format!(
            "{provider}: the reply started but nothing arrived within {} \
             (first_token_timeout); raise [session] first_token_timeout for slow models",
            human_duration(policy.first_token_timeout)
        ),
        Watchdog::NoProgress => format!(
            "{provider}: the reply stalled, nothing arrived for {} (no_progress_timeout)",
            human_duration(policy.no_progress_timeout)
        ),
        Watchdog::ThinkingOnly => format!(
            "{provider}: the model thought for {} without writing an answer or calling a \
             tool (3x no_progress_timeout)",
            human_duration(policy.thinking_timeout())
        ),
        Watchdog::ToolExecution | Watchdog::SidecarLlm => {
            format!("{provider}: the {watchdog} timeout fired")
        }
    };
    LlmError {
        watchdog: Some(watchdog),
        ..LlmError::new(ErrorCategory::Timeout, message)
    }
}

fn cancelled() -> LlmError {
    LlmError::new(ErrorCategory::Cancelled, "the model call was cancelled")
}

/// A duration for people: `750 ms`, `42 s`, `3 min 5 s`, `2 h 10 min`.
fn human_duration(duration: Duration) -> String {
    let secs = duration.as_secs();
    match secs {
        0 => format!("{} ms", duration.as_millis()),
        1..60 => format!("{secs} s"),
        60..3600 if secs.is_multiple_of(60) => format!("{} min", secs / 60),
        60..3600 => format!("{} min {} s", secs / 60, secs % 60),
        _ => format!("{} h {} min", secs / 3600, secs % 3600 / 60),
    }
}

/// The local wall-clock time `wait` from now, as `HH:MM:SS` (or `HH:MM:SS on YYYY-MM-DD` when
/// it is not today).
fn local_clock_after(wait: Duration) -> String {
    let now = jiff::Timestamp::now();
    let Ok(wait) = jiff::SignedDuration::try_from(wait) else {
        return "a long while".to_string();
    };
    let Ok(then) = now.checked_add(wait) else {
        return "a long while".to_string();
    };
    let tz = jiff::tz::TimeZone::system();
    let then = then.to_zoned_datetime(tz.clone());
    if then.date() == now.to_zoned_datetime(tz).date() {
        then.strftime("%H:%M:%S").to_string()
    } else {
        then.strftime("%H:%M:%S on %Y-%m-%d").to_string()
    }
}

#[cfg(test)]
#[path = "client_tests.rs"]
mod tests;
