//! The full-pass timer: every `--resync-interval`, jittered by ±[`JITTER`] so that passes of
//! many clusters (or a restarted operator) do not fall in step.

use std::time::Duration;

/// Fraction of the interval a pass may come earlier or later.
pub const JITTER: f64 = 0.25;

/// The wait before the next full pass: `interval` ± up to [`JITTER`] of it.
pub fn next_delay(interval: Duration) -> Duration {
    jittered(interval, random_u64())
}

/// `interval` scaled by a factor in [1 − JITTER, 1 + JITTER] chosen by `random`.
fn jittered(interval: Duration, random: u64) -> Duration {
    let unit = (random >> 11) as f64 / (1u64 << 53) as f64; // [0, 1)
    interval.mul_f64(1.0 - JITTER + 2.0 * JITTER * unit)
}

/// A random number for jitter and identities (not for cryptography): the clock, the process
/// id and a counter, mixed with splitmix64.
pub fn random_u64() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or_default();
    let mut z = nanos
        ^ (u64::from(std::process::id()) << 32)
        ^ COUNTER
            .fetch_add(0x9e37_79b9_7f4a_7c15, Ordering::Relaxed)
            .rotate_left(17);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
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
