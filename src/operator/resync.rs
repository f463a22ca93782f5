//! The full-pass timer: every `--resync-interval`, jittered by ±[`JITTER`] so that passes of
//! many clusters (or a restarted operator) do not fall in step.

use std::time::Duration;

/// Fraction of the interval a pass may come earlier or later.
pub const JITTER: f64 = 0.25;

/// The wait before the next full pass: `interval` ± up to [`JITTER`] of it (drawn from
/// `fastrand`'s per-thread generator, seeded at random: not for cryptography).
pub fn next_delay(interval: Duration) -> Duration {
    jittered(interval, fastrand::u64(..))
}

/// `interval` scaled by a factor in [1 − JITTER, 1 + JITTER] chosen by `random`.
fn jittered(interval: Duration, random: u64) -> Duration {
    let unit = (random >> 11) as f64 / (1u64 << 53) as f64; // [0, 1)
    interval.mul_f64(1.0 - JITTER + 2.0 * JITTER * unit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jitter_stays_within_a_quarter_either_way() {
        let interval = Duration::from_secs(180);
        assert_eq!(jittered(interval, 0), Duration::from_secs(135));
        assert!(jittered(interval, u64::MAX) <= Duration::from_secs(225));
        assert!(jittered(interval, u64::MAX) > Duration::from_secs(224));
        for _ in 0..1000 {
            let d = next_delay(interval);
            assert!(
                d >= Duration::from_secs(135) && d <= Duration::from_secs(225),
                "{d:?}"
            );
        }
    }
}
