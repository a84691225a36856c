//! Choosing the next token from the model's logits: ours, so that its rules are tested here
//! and not inherited from whichever engine computes the logits.
//!
//! In order: a repetition penalty over the recent tokens (the small models otherwise loop on a
//! phrase), then either the most likely token (no temperature: greedy, reproducible) or a draw
//! at the temperature from the smallest set of tokens whose probabilities reach `top_p`.

/// How tokens are chosen; the defaults are documented in `docs/llm.md`.
#[derive(Debug, Clone, PartialEq)]
pub struct SamplingSettings {
    /// `None` or `0`: greedy.
    pub temperature: Option<f64>,
    /// Nucleus sampling: the smallest set of tokens whose probabilities sum to this.
    pub top_p: f32,
    /// A logit of a token seen in the last `repeat_window` tokens is divided by this (multiplied
    /// when negative), as in the CTRL paper and llama.cpp's `repeat_penalty`.
    pub repeat_penalty: f32,
    /// How many of the latest tokens the penalty looks at.
    pub repeat_window: usize,
    /// Seeds the draws at a temperature.
    pub seed: u64,
}

/// The defaults: greedy, a light penalty over the last 64 tokens (llama.cpp's defaults).
pub const DEFAULT_REPEAT_PENALTY: f32 = 1.1;
/// See [`DEFAULT_REPEAT_PENALTY`].
pub const DEFAULT_REPEAT_WINDOW: usize = 64;
/// The nucleus of a draw at a temperature.
pub const DEFAULT_TOP_P: f32 = 0.95;

impl SamplingSettings {
    /// The defaults at `temperature`, seeded with `seed`.
    pub fn new(temperature: Option<f64>, seed: u64) -> Self {
        Self {
            temperature: temperature.filter(|t| *t > 0.0),
            top_p: DEFAULT_TOP_P,
            repeat_penalty: DEFAULT_REPEAT_PENALTY,
            repeat_window: DEFAULT_REPEAT_WINDOW,
            seed,
        }
    }
}

/// One generation's sampler: its settings and the state of its random draws.
#[derive(Debug, Clone)]
pub struct Sampler {
    settings: SamplingSettings,
    state: u64,
}

impl Sampler {
    /// A sampler with `settings`.
    pub fn new(settings: SamplingSettings) -> Self {
        let state = settings.seed ^ 0x9E37_79B9_7F4A_7C15;
        Self { settings, state }
    }

    /// Applies the repetition penalty to `logits` in place for the tokens of `recent` (the last
    /// `repeat_window` of them), each once however often it occurs.
    pub fn penalise(&self, logits: &mut [f32], recent: &[i32]) {
        let penalty = self.settings.repeat_penalty;
        if penalty == 1.0 {
            return;
        }
        let window = &recent[recent.len().saturating_sub(self.settings.repeat_window)..];
        let mut seen: Vec<i32> = window.to_vec();
        seen.sort_unstable();
        seen.dedup();
        for token in seen {
            if let Some(logit) = usize::try_from(token).ok().and_then(|i| logits.get_mut(i)) {
                *logit = if *logit > 0.0 { *logit / penalty } else { *logit * penalty };
            }
        }
    }

    /// The next token among `candidates` (token, logit) pairs, penalties already applied.
    /// `None` when there is no candidate with a finite logit.
    pub fn choose(&mut self, candidates: &[(i32, f32)]) -> Option<i32> {
        let finite = candidates.iter().filter(|(_, l)| l.is_finite());
        let Some(temperature) = self.settings.temperature else {
            // Greedy; equal logits go to the lower id, so the choice is reproducible.
            return finite
                .fold(None::<(i32, f32)>, |best, &(t, l)| match best {
                    Some((bt, bl)) if bl > l || (bl == l && bt < t) => Some((bt, bl)),
                    _ => Some((t, l)),
                })
                .map(|(t, _)| t);
        };
        let mut scaled: Vec<(i32, f32)> = finite.map(|&(t, l)| (t, l / temperature as f32)).collect();
        if scaled.is_empty() {
            return None;
        }
        scaled.sort_unstable_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        let top = scaled[0].1;
        let mut weights: Vec<f32> = scaled.iter().map(|(_, l)| (l - top).exp()).collect();
        let total: f32 = weights.iter().sum();
        let mut cumulative = 0.0;
        let mut keep = weights.len();
        for (i, w) in weights.iter().enumerate() {
            cumulative += w / total;
            if cumulative >= self.settings.top_p {
                keep = i + 1;
                break;
            }
        }
        weights.truncate(keep);
        let nucleus: f32 = weights.iter().sum();
        let mut target = self.next_unit() * nucleus;
        for (i, w) in weights.iter().enumerate() {
            if target < *w {
                return Some(scaled[i].0);
            }
            target -= w;
        }
        Some(scaled[keep - 1].0)
    }

    /// A uniform draw in [0, 1) (splitmix64: small, fast, and seeded per generation).
    fn next_unit(&mut self) -> f32 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 40) as f32 / (1u64 << 24) as f32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn greedy() -> Sampler {
        Sampler::new(SamplingSettings::new(None, 1))
    }

    #[test]
    fn greedy_takes_the_largest_logit_and_the_lower_id_on_a_tie() {
        let mut s = greedy();
        assert_eq!(s.choose(&[(0, 1.0), (1, 3.0), (2, 2.0)]), Some(1));
        assert_eq!(s.choose(&[(5, 2.0), (3, 2.0)]), Some(3));
        assert_eq!(s.choose(&[(0, f32::NEG_INFINITY)]), None);
    }

    #[test]
    fn the_penalty_lowers_recent_tokens_once_each_whatever_their_sign() {
        let s = greedy();
        let mut logits = vec![2.2, -1.0, 1.0];
        s.penalise(&mut logits, &[0, 0, 0, 1]);
        assert!((logits[0] - 2.0).abs() < 1e-6, "{logits:?}");
        assert!((logits[1] + 1.1).abs() < 1e-6, "{logits:?}");
        assert!((logits[2] - 1.0).abs() < 1e-6, "{logits:?}");
    }

    #[test]
    fn the_penalty_looks_only_at_its_window() {
        let mut settings = SamplingSettings::new(None, 1);
        settings.repeat_window = 2;
        let s = Sampler::new(settings);
        let mut logits = vec![1.0, 1.0, 1.0];
        s.penalise(&mut logits, &[0, 1, 2]);
        assert_eq!(logits[0], 1.0);
        assert!(logits[1] < 1.0 && logits[2] < 1.0);
    }

    #[test]
    fn a_draw_at_a_temperature_is_seeded_and_stays_in_the_nucleus() {
        let candidates: Vec<(i32, f32)> = vec![(0, 5.0), (1, 4.9), (2, -20.0), (3, -20.0)];
        let draws = |seed| {
            let mut s = Sampler::new(SamplingSettings::new(Some(1.0), seed));
            (0..200).map(|_| s.choose(&candidates).unwrap()).collect::<Vec<_>>()
        };
        let first = draws(7);
        assert_eq!(first, draws(7), "the same seed draws the same tokens");
        assert_ne!(first, draws(8));
        assert!(first.iter().all(|t| *t == 0 || *t == 1), "outside the nucleus: {first:?}");
        assert!(first.contains(&0) && first.contains(&1), "both likely tokens are drawn");
    }
}
