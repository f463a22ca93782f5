//! How long every retry loop of `cvo` waits between attempts: one exponential [`Backoff`],
//! the one backoff of requests to API servers ([`crate::cluster::retry`], which also says
//! which of their errors are retried) and to registries ([`crate::oci`]), of watches started
//! again, install rounds, repairs and restarts.
//!
//! A backoff is built on `backon`'s `ExponentialBuilder`: a first wait, multiplied by a factor
//! per retry up to a cap, no jitter (the waits are the same on every run; only the operator's
//! full-pass timer is jittered, `operator::resync`), and a number of attempts or none (then a
//! deadline, a stop signal or success ends the loop). Requests use [`Backoff::REQUEST`]:
//! 200 ms, ×2 per attempt, capped at 5 s, at most 6 attempts in all (about 6 s of waiting
//! before giving up). The other loops wait longer or shorter for documented reasons; each is
//! a named variant of the same policy, listed on [`Backoff`].
//!
//! CVO retries 3 steps of 10 s ×1.3; we start lower because most transient answers from a
//! healthy server clear in well under a second, and cap lower so a pass fails in seconds, not
//! minutes — the next pass retries anyway.
//!
//! It knows nothing of the product nor of Kubernetes (src/import_rules.rs), so that every
//! side may use it.

use std::time::Duration;

/// One exponential backoff: the wait before each retry of a loop. See the module doc; the
/// named variants are every backoff `cvo` uses.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Backoff {
    /// Wait before the first retry.
    pub initial: Duration,
    /// Multiplier per retry.
    pub factor: f32,
    /// Longest wait between two attempts.
    pub max: Duration,
    /// Attempts in all, the first included; `None`: the loop ends otherwise (a deadline, a
    /// stop signal, success).
    pub attempts: Option<u32>,
}

impl Backoff {
    /// Every request to an API server ([`crate::cluster::retry::RetryPolicy::default`]) or a
    /// registry: 200 ms, doubling, capped at 5 s, 6 attempts.
    pub const REQUEST: Backoff = Backoff {
        attempts: Some(6),
        ..Backoff::doubling(Duration::from_millis(200), Duration::from_secs(5))
    };
    /// Asking discovery again for a kind a real server does not list yet (a new CRD's kind
    /// lags its `Established` condition by a moment): 20 ms, ×1.5, capped at 500 ms, until a
    /// deadline. Discovery has no watch, so this is the one wait that polls; short steps,
    /// as the lag is short.
    pub const DISCOVERY_LAG: Backoff = Backoff {
        factor: 1.5,
        ..Backoff::doubling(Duration::from_millis(20), Duration::from_millis(500))
    };
    /// Starting a broken watch again while waiting for an object's state: 100 ms, doubling,
    /// capped at 2 s, until the wait's deadline.
    pub const WATCH_RESTART: Backoff =
        Backoff::doubling(Duration::from_millis(100), Duration::from_secs(2));
    /// Between two install rounds of the initial install (docs/apply.md): 1 s, doubling,
    /// capped at 30 s, until the install timeout.
    pub const INSTALL_ROUND: Backoff =
        Backoff::doubling(Duration::from_secs(1), Duration::from_secs(30));
    /// A failed repair of a drifted object tried again (a namespace being recreated, say;
    /// docs/operator.md): 2 s, doubling, capped at 60 s, until it succeeds or the next pass.
    pub const REPAIR: Backoff = Backoff::doubling(Duration::from_secs(2), Duration::from_secs(60));
    /// Resolving a kind to watch for drift that the server does not serve yet (its CRD not
    /// installed yet): 5 s, doubling, capped at 60 s, for as long as the operator runs.
    pub const RESOLVE_KIND: Backoff =
        Backoff::doubling(Duration::from_secs(5), Duration::from_secs(60));
    /// `cvo operator` asking a server it has not reached yet for its version, at start-up
    /// (docs/operator.md, "Start-up"): 1 s, doubling, capped at 30 s, for as long as the
    /// process lives — an operator never gives up on its cluster.
    pub const CONNECT: Backoff = Backoff::doubling(Duration::from_secs(1), Duration::from_secs(30));
    /// Starting the operand-cleanup reconciler again in the operator when OLM's types are not
    /// served (OLM not installed yet; docs/operator.md): 10 s, doubling, capped at 5 min.
    pub const RECONCILER_RESTART: Backoff =
        Backoff::doubling(Duration::from_secs(10), Duration::from_secs(300));

    /// The operator trying again to pull a release `spec.desiredUpdate.image` names that it
    /// could not retrieve or load (docs/operator.md): not before 10 s, doubling, capped at
    /// 5 min, at the next full pass; a spec change tries at once.
    pub const RELEASE_PULL: Backoff =
        Backoff::doubling(Duration::from_secs(10), Duration::from_secs(300));

    /// `initial`, doubling up to `max`, with no limit on the attempts. (The OLM reconciler's
    /// requeue is one, from its `Config`: 1 s to 60 s by default.)
    pub const fn doubling(initial: Duration, max: Duration) -> Backoff {
        Backoff {
            initial,
            factor: 2.0,
            max,
            attempts: None,
        }
    }

    /// The waits in order: one per retry, ending after `attempts - 1` of them (never when
    /// `attempts` is `None`).
    pub fn delays(&self) -> Delays {
        let builder = backon::ExponentialBuilder::new()
            .with_min_delay(self.initial)
            .with_factor(self.factor)
            .with_max_delay(self.max);
        let builder = match self.attempts {
            Some(n) => builder.with_max_times(n.saturating_sub(1) as usize),
            None => builder.without_max_times(),
        };
        Delays {
            inner: backon::BackoffBuilder::build(builder),
            max: self.max,
        }
    }

    /// The wait after attempt `attempt` failed (counting from 1; 0 reads as 1), whatever the
    /// limit on attempts.
    pub fn delay(&self, attempt: u32) -> Duration {
        // Past 128 steps every wait is at the cap (or beyond any realistic one).
        let retries = attempt.clamp(1, 128) as usize;
        Backoff {
            attempts: None,
            ..*self
        }
        .delays()
        .nth(retries - 1)
        .unwrap_or(self.max)
    }
}

/// The waits of a [`Backoff`], in order (to the microsecond).
#[derive(Debug)]
pub struct Delays {
    inner: backon::ExponentialBackoff,
    max: Duration,
}

impl Delays {
    /// The next wait of a loop without a limit on attempts (the cap once a limit is used up).
    pub fn next_wait(&mut self) -> Duration {
        self.next().unwrap_or(self.max)
    }
}

impl Iterator for Delays {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        // `backon` multiplies in f32: 200 ms doubled is 400.000006 ms. Rounded to whole
        // microseconds, the waits are the numbers the docs give.
        let d = self.inner.next()?;
        let micros = (d.as_nanos() + 500) / 1000;
        Some(Duration::from_micros(
            u64::try_from(micros).unwrap_or(u64::MAX),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_backoff_ends_after_its_attempts_or_never() {
        let waits: Vec<_> = Backoff::REQUEST.delays().map(|d| d.as_millis()).collect();
        assert_eq!(waits, [200, 400, 800, 1600, 3200], "6 attempts: 5 waits");
        let mut round = Backoff::INSTALL_ROUND.delays();
        let secs: Vec<_> = (0..8).map(|_| round.next_wait().as_secs()).collect();
        assert_eq!(secs, [1, 2, 4, 8, 16, 30, 30, 30]);
        assert_eq!(
            Backoff::INSTALL_ROUND.delay(1_000_000),
            Duration::from_secs(30)
        );
        assert_eq!(Backoff::INSTALL_ROUND.delay(0), Duration::from_secs(1));
    }

    #[test]
    fn a_backoff_may_grow_by_a_fraction() {
        let waits: Vec<_> = Backoff::DISCOVERY_LAG
            .delays()
            .take(9)
            .map(|d| d.as_micros())
            .collect();
        assert_eq!(
            waits,
            [
                20_000, 30_000, 45_000, 67_500, 101_250, 151_875, 227_813, 341_719, 500_000
            ]
        );
    }
}
