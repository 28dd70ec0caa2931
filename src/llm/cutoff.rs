//! Why a reply stopped short: at the output limit it was asked for, or because the context
//! window filled up. OpenAI-compatible servers and Ollama say `length` for both: llama.cpp's
//! server ends a reply with `finish_reason: "length"` when its window is full just as when
//! `max_tokens` is reached. The usage the server reports tells them apart: a reply cut at its
//! limit is about that long, while a full window shows as prompt and reply adding up to the
//! window, or as a reply far shorter than its limit (the server's window is smaller than the
//! one configured).

use super::LlmError;
use crate::domain::{ErrorCategory, Usage};

/// What cut a reply short.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CutOff {
    /// The reply used up the output limit it was given.
    OutputLimit,
    /// The context window filled up at `filled` tokens, prompt and reply together.
    WindowFull { filled: u64 },
}

/// The cause of a `length` stop, from the reply's `usage`, the output limit the request asked
/// for (`max_output`) and the window tern counts with (`window`). Without a prompt count the
/// cause cannot be told, and it stays the output limit, as the stop reason says.
pub fn cut_off(usage: &Usage, max_output: u32, window: u64) -> CutOff {
    let (prompt, reply) = (usage.context_tokens(), usage.output_tokens);
    let max_output = u64::from(max_output);
    if prompt == 0 {
        return CutOff::OutputLimit;
    }
    // Servers stop at the limit exactly; nine tenths leaves room for counting differences.
    if max_output > 0 && reply * 10 >= max_output * 9 {
        return CutOff::OutputLimit;
    }
    let filled = prompt + reply;
    let slack = (window / 50).max(16);
    let fills_window = window > 0 && filled + slack >= window;
    let far_short = max_output > 0 && reply * 2 < max_output;
    if fills_window || far_short {
        CutOff::WindowFull { filled }
    } else {
        CutOff::OutputLimit
    }
}

/// The error a reply cut off by `cause` ends its call with. A full window is a context
/// overflow, which the turn answers by compacting and trying again; the output limit fails the
/// turn, since no compaction gives the reply more room.
pub fn cut_off_error(cause: CutOff, usage: &Usage, max_output: u32, window: u64) -> LlmError {
    let (prompt, reply) = (usage.context_tokens(), usage.output_tokens);
    match cause {
        CutOff::OutputLimit => LlmError {
            output_limit: true,
            ..LlmError::new(
                ErrorCategory::ModelBehavior,
                format!(
                    "reply was cut off at the output limit of {max_output} tokens; nothing \
                     partial was kept; raise max_output_tokens or ask for a shorter answer"
                ),
            )
        },
        CutOff::WindowFull { filled } if filled + (window / 50).max(16) >= window => LlmError {
            window_filled_at: Some(filled),
            ..LlmError::new(
                ErrorCategory::ContextOverflow,
                format!(
                    "the reply was cut off after {reply} tokens because the context window of \
                     {window} tokens is full ({prompt} tokens of prompt); nothing partial was \
                     kept"
                ),
            )
        },
        CutOff::WindowFull { filled } => LlmError {
            window_filled_at: Some(filled),
            ..LlmError::new(
                ErrorCategory::ContextOverflow,
                format!(
                    "the reply was cut off after {reply} tokens, far short of its limit of \
                     {max_output}: the server's context window filled up at about {filled} \
                     tokens ({prompt} of prompt), while tern counts with a window of {window}; \
                     nothing partial was kept; set context_window to the server's window in \
                     this provider's profile (or, if the server caps replies itself, raise its \
                     limit)"
                ),
            )
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(prompt: u64, reply: u64) -> Usage {
        Usage {
            input_tokens: prompt,
            output_tokens: reply,
            ..Usage::default()
        }
    }

    fn check(prompt: u64, reply: u64, max_output: u32, window: u64, expected: CutOff) {
        assert_eq!(
            cut_off(&usage(prompt, reply), max_output, window),
            expected,
            "prompt {prompt}, reply {reply}, limit {max_output}, window {window}"
        );
    }

    #[test]
    fn a_reply_as_long_as_its_limit_was_cut_by_the_limit() {
        check(1_000, 8_192, 8_192, 200_000, CutOff::OutputLimit);
        check(1_000, 7_500, 8_192, 200_000, CutOff::OutputLimit);
        // Even when the window happens to be full too: no compaction gives it more room.
        check(3_072, 1_024, 1_024, 4_096, CutOff::OutputLimit);
    }

    #[test]
    fn prompt_and_reply_filling_the_window_are_a_full_window() {
        check(
            4_067,
            29,
            1_024,
            4_096,
            CutOff::WindowFull { filled: 4_096 },
        );
        check(
            4_000,
            60,
            1_024,
            4_096,
            CutOff::WindowFull { filled: 4_060 },
        );
        // Cached prompt tokens count too.
        let cached = Usage {
            input_tokens: 67,
            cache_read_input_tokens: 4_000,
            output_tokens: 29,
            ..Usage::default()
        };
        assert_eq!(
            cut_off(&cached, 1_024, 4_096),
            CutOff::WindowFull { filled: 4_096 }
        );
    }

    #[test]
    fn a_reply_far_short_of_its_limit_means_the_server_s_window_is_smaller() {
        // The case: tern assumed 128,000; llama-server ran with -c 4096.
        check(
            4_067,
            29,
            8_192,
            128_000,
            CutOff::WindowFull { filled: 4_096 },
        );
    }

    #[test]
    fn without_a_prompt_count_or_in_between_it_stays_the_output_limit() {
        check(0, 29, 8_192, 4_096, CutOff::OutputLimit);
        check(1_000, 6_000, 8_192, 200_000, CutOff::OutputLimit);
    }

    #[test]
    fn the_messages_name_the_window_or_the_limit() {
        let full = cut_off_error(
            CutOff::WindowFull { filled: 4_096 },
            &usage(4_067, 29),
            1_024,
            4_096,
        );
        assert_eq!(full.category, ErrorCategory::ContextOverflow);
        assert_eq!(full.window_filled_at, Some(4_096));
        assert!(!full.output_limit);
        assert!(
            full.message
                .contains("after 29 tokens because the context window of 4096 tokens is full"),
            "{}",
            full.message
        );
        let smaller = cut_off_error(
            CutOff::WindowFull { filled: 4_096 },
            &usage(4_067, 29),
            8_192,
            128_000,
        );
        assert!(
            smaller
                .message
                .contains("filled up at about 4096 tokens (4067 of prompt), while tern counts with a window of 128000"),
            "{}",
            smaller.message
        );
        let limit = cut_off_error(CutOff::OutputLimit, &usage(1_000, 8_192), 8_192, 200_000);
        assert_eq!(limit.category, ErrorCategory::ModelBehavior);
        assert!(limit.output_limit);
        assert!(
            limit.message.contains("output limit of 8192 tokens"),
            "{}",
            limit.message
        );
    }
}
