//! Stopping a reply that repeats itself.
//!
//! Small models under greedy decoding fall into loops ("they began to experiment with its
//! capabilities, and they began to experiment with its capabilities, ..."), and the repetition
//! penalty alone does not always pull them out. A reply whose last tokens are one block said
//! [`REPEATS`] times in a row, the block [`MIN_PERIOD`]..=[`MAX_PERIOD`] tokens long and the
//! repetition at least [`MIN_SPAN`] tokens in all, is stopped there.

/// How many times a block must follow itself.
pub const REPEATS: usize = 3;
/// The shortest block: shorter ones ("ha ha ha", "...") are language, not a loop.
pub const MIN_PERIOD: usize = 2;
/// The longest block looked for (a sentence or two).
pub const MAX_PERIOD: usize = 96;
/// The fewest tokens a loop covers before it is stopped.
pub const MIN_SPAN: usize = 24;

/// Whether `tokens` ends in a loop: its last `REPEATS × p` tokens are one block of `p`
/// repeated, for some period `p`.
pub fn ends_in_loop(tokens: &[i32]) -> bool {
    (MIN_PERIOD..=MAX_PERIOD).any(|period| {
        let span = period * REPEATS;
        span >= MIN_SPAN && tokens.len() >= span && {
            let tail = &tokens[tokens.len() - span..];
            let block = &tail[..period];
            tail.chunks(period).all(|c| c == block)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sentence_said_three_times_is_a_loop() {
        let sentence: Vec<i32> = (100..112).collect();
        let mut reply: Vec<i32> = (1..40).collect();
        for _ in 0..2 {
            reply.extend(&sentence);
            assert!(!ends_in_loop(&reply), "twice is not yet a loop");
        }
        reply.extend(&sentence);
        assert!(ends_in_loop(&reply));
    }

    #[test]
    fn a_short_repetition_is_language_until_it_goes_on() {
        let mut reply: Vec<i32> = vec![7, 8, 7, 8, 7, 8];
        assert!(!ends_in_loop(&reply), "a short span is allowed");
        for _ in 0..9 {
            reply.extend([7, 8]);
        }
        assert!(ends_in_loop(&reply), "a pair repeated for 24 tokens is a loop");
    }

    #[test]
    fn varied_text_is_not_a_loop() {
        let reply: Vec<i32> = (0..500).map(|i| (i * 7919) % 1000).collect();
        assert!(!ends_in_loop(&reply));
    }
}
