//! How much prompt a model's context window can carry. A small window (16k tokens or less)
//! gets the compact prompt: one-line tool descriptions and schemas without their guidance, a
//! shorter persona and operating rules, tier B and the nudge cut to what the model acts on,
//! and the person's own prompt files cut to a share of the window ([`share_budget`]). A larger window gets the
//! full prompt. The choice is a pure function of the window, so a session keeps it, and its
//! cached prefix, for as long as the window stays the same.

/// The largest window, in tokens, that gets the compact prompt.
pub const COMPACT_WINDOW: u64 = 16_384;

/// Which variant of every layer a request is built from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PromptSize {
    /// Every layer in full: the tools' guidance, the whole operating rules, tier B's notes.
    Full,
    /// For a window of `window` tokens (at most [`COMPACT_WINDOW`]).
    Compact { window: u64 },
}

impl PromptSize {
    /// The variant for a model whose context window is `window` tokens. A window of zero
    /// means unknown and gets the full prompt, as before windows were known.
    pub fn for_window(window: u64) -> Self {
        if window == 0 || window > COMPACT_WINDOW {
            Self::Full
        } else {
            Self::Compact { window }
        }
    }

    pub fn is_compact(self) -> bool {
        matches!(self, Self::Compact { .. })
    }

    /// The most bytes the person's prompt files (persona, playbook, tooling notes, project
    /// instructions) may take together in tier A: a sixteenth of the window (1 KiB at 4k), so
    /// with them the fixed prompt still leaves the conversation most of the window. `None`
    /// when only the reading cap applies.
    pub fn files_budget(self) -> Option<usize> {
        match self {
            Self::Full => None,
            // Four bytes a token, a sixteenth of the window: window / 4 bytes.
            Self::Compact { window } => Some(usize::try_from(window / 4).unwrap_or(usize::MAX)),
        }
    }
}

/// Shares `budget` bytes among files of `sizes` bytes: the smallest get all they need, the
/// rest an equal part of what is left, so no budget is wasted on a short file's behalf.
/// Returns each file's cap, in the order given.
pub fn share_budget(sizes: &[usize], budget: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..sizes.len()).collect();
    order.sort_by_key(|&i| sizes[i]);
    let mut caps = vec![0; sizes.len()];
    let mut left = budget;
    for (done, &i) in order.iter().enumerate() {
        let share = left / (sizes.len() - done);
        caps[i] = sizes[i].min(share);
        left -= caps[i];
    }
    caps
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_up_to_16k_are_compact_and_unknown_ones_full() {
        for (window, compact) in [
            (0, false),
            (2_048, true),
            (4_096, true),
            (16_384, true),
            (16_385, false),
            (32_768, false),
            (200_000, false),
        ] {
            assert_eq!(
                PromptSize::for_window(window).is_compact(),
                compact,
                "{window}"
            );
        }
        assert_eq!(
            PromptSize::for_window(4_096).files_budget(),
            Some(1024),
            "a sixteenth of the window, four bytes a token"
        );
        assert_eq!(PromptSize::Full.files_budget(), None);
    }

    #[test]
    fn short_files_get_what_they_need_and_long_ones_share_the_rest() {
        assert_eq!(share_budget(&[100, 5000, 2000], 1000), [100, 450, 450]);
        assert_eq!(share_budget(&[10, 20], 1000), [10, 20]);
        assert_eq!(share_budget(&[3000], 1000), [1000]);
        assert!(share_budget(&[], 1000).is_empty());
    }
}
