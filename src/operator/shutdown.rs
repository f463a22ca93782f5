//! Shutdown of the leader: work in flight gets a grace period and no more, and a full pass
//! abandoned at its end leaves a final status saying so (`Progressing=True`, reason
//! [`INTERRUPTED`]), so that the next leader resumes it from what it reads back.

use std::time::Duration;

use tokio::sync::watch;

use super::Options;
use crate::cluster::Cluster;
use crate::release::Release;
use crate::status::clusterversion;
use crate::status::{Condition, ConditionStatus};

/// A full pass did not end because the operator is stopping: an abandoned one gets the final
/// status write ([`record_interrupted`]).
pub(super) async fn pass_stopped(
    cluster: &Cluster,
    release: &Release,
    options: &Options,
    stopped: Stopped,
) {
    if stopped == Stopped::Abandoned {
        let version = crate::status::conditions::version_text(release);
        record_interrupted(cluster, &options.sync.apply.retry, release, &version).await;
    }
}

/// Why [`until_stopped`] gave no output: the operator is stopping.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Stopped {
    /// Stopping already: the work did not start.
    Before,
    /// The work finished within the grace period (its status written as usual).
    Finished,
    /// The grace period ran out: the work was dropped midway.
    Abandoned,
}

/// Awaits `work`; when `stop` turns true meanwhile, gives it `grace` more and says how it ended.
pub(super) async fn until_stopped<T>(
    work: impl std::future::Future<Output = T>,
    stop: &mut watch::Receiver<bool>,
    grace: Duration,
) -> Result<T, Stopped> {
    tokio::pin!(work);
    if *stop.borrow() {
        return Err(Stopped::Before);
    }
    tokio::select! {
        out = &mut work => Ok(out),
        _ = stop.wait_for(|s| *s) => {
            match tokio::time::timeout(grace, work).await {
                Ok(_) => {
                    tracing::info!("the work in flight finished");
                    Err(Stopped::Finished)
                }
                Err(_) => {
                    tracing::warn!(?grace, "the work in flight did not finish within the shutdown grace period; abandoned");
                    Err(Stopped::Abandoned)
                }
            }
        }
    }
}

/// How long the final status write after an abandoned pass may take: with the default
/// 20 s grace period and the Lease release, the operator still exits within 30 s of SIGTERM.
const FINAL_WRITE_TIMEOUT: Duration = Duration::from_secs(5);

/// `Progressing` reason after a pass the operator abandoned at shutdown.
pub const INTERRUPTED: &str = "Interrupted";

/// The final status write after a full pass was abandoned at shutdown, unless ClusterVersion
/// already records `version` as completed (a steady-state pass: nothing to say) or does not
/// exist: `Progressing=True` (reason [`INTERRUPTED`]) keeping the last progress it reported,
/// and the `Partial` history entry of `version` (added if the pass had not written it yet).
/// Bounded by [`FINAL_WRITE_TIMEOUT`]; a failure is logged (the next leader's first pass
/// rewrites the status from what it reads back).
async fn record_interrupted(
    cluster: &Cluster,
    retry: &crate::apply::RetryPolicy,
    release: &Release,
    version: &str,
) {
    let write = async {
        let Some(cv) = clusterversion::read(cluster, retry).await? else {
            return Ok(false);
        };
        if clusterversion::completed(&cv, version) {
            return Ok(false);
        }
        let last = clusterversion::condition(&cv, "Progressing")
            .filter(|c| c.status == ConditionStatus::True)
            .map(|c| c.message)
            .unwrap_or_default();
        let condition = [Condition::new(
            "Progressing",
            ConditionStatus::True,
            INTERRUPTED,
            interrupted_message(version, &last),
        )];
        let update = clusterversion::Update::Pass {
            capabilities: None,
            version,
            image: release.image.as_deref().unwrap_or(""),
            version_hash: &release.version_hash,
            verified: release.verification == crate::release::Verification::Verified,
            conditions: &condition,
            complete: false,
            accepted_risks: None,
            observed: None,
            started: None,
        };
        clusterversion::write_update(cluster, retry, update)
            .await
            .map(|written| written == clusterversion::WriteOutcome::Written)
    };
    match tokio::time::timeout(FINAL_WRITE_TIMEOUT, write).await {
        Ok(Ok(true)) => {
            tracing::info!("recorded in ClusterVersion that the pass was interrupted")
        }
        Ok(Ok(false)) => {}
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "could not record in ClusterVersion that the pass was interrupted")
        }
        Err(_) => tracing::warn!(
            timeout = ?FINAL_WRITE_TIMEOUT,
            "could not record in ClusterVersion that the pass was interrupted: no answer in time"
        ),
    }
}

/// Progressing's message after an interrupted pass towards `version`: the last progress it
/// reported (`last`, when it was about `version`), then what happened — said once, however
/// often the operator is stopped.
fn interrupted_message(version: &str, last: &str) -> String {
    let last = last.split(INTERRUPTED_SUFFIX).next().unwrap_or_default();
    let towards = format!("Working towards {version}");
    let last = if last.starts_with(&towards) {
        last.to_owned()
    } else {
        towards
    };
    format!("{last}{INTERRUPTED_SUFFIX}")
}

const INTERRUPTED_SUFFIX: &str = ". Interrupted: the operator stopped before this pass finished; the next operator to lead resumes it";

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::time::Instant;

    #[tokio::test(start_paused = true)]
    async fn work_in_flight_gets_the_grace_period_and_no_more() {
        let (tx, mut rx) = watch::channel(false);
        let finished = std::sync::atomic::AtomicBool::new(false);
        let work = async {
            tokio::time::sleep(Duration::from_secs(5)).await;
            finished.store(true, std::sync::atomic::Ordering::Relaxed);
        };
        let stopper = async {
            tokio::time::sleep(Duration::from_secs(1)).await;
            let _ = tx.send(true);
        };
        let (out, ()) = tokio::join!(
            until_stopped(work, &mut rx, Duration::from_secs(10)),
            stopper
        );
        assert_eq!(out, Err(Stopped::Finished));
        assert!(finished.load(std::sync::atomic::Ordering::Relaxed));
        let slow = tokio::time::sleep(Duration::from_secs(100));
        let started = Instant::now();
        assert_eq!(
            until_stopped(slow, &mut rx, Duration::from_secs(10)).await,
            Err(Stopped::Before)
        );
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "already stopped: nothing starts"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn work_past_the_grace_period_is_abandoned() {
        let (tx, mut rx) = watch::channel(false);
        let work = tokio::time::sleep(Duration::from_secs(100));
        let stopper = async {
            tokio::time::sleep(Duration::from_secs(1)).await;
            let _ = tx.send(true);
        };
        let started = Instant::now();
        let (out, ()) = tokio::join!(
            until_stopped(work, &mut rx, Duration::from_secs(3)),
            stopper
        );
        assert_eq!(out, Err(Stopped::Abandoned));
        assert_eq!(started.elapsed(), Duration::from_secs(4));
    }

    #[test]
    fn an_interrupted_pass_keeps_its_last_progress_and_says_so_once() {
        let last =
            "Working towards 1.0.1: 1 of 3 done (33% complete), waiting on Deployment ns/web";
        let once = interrupted_message("1.0.1", last);
        assert!(once.starts_with(last), "{once}");
        assert!(
            once.contains(". Interrupted: the operator stopped"),
            "{once}"
        );
        assert_eq!(interrupted_message("1.0.1", &once), once, "said once");
        assert!(interrupted_message("1.0.1", "").starts_with("Working towards 1.0.1. Interrupted"));
        assert!(
            interrupted_message("1.0.2", last).starts_with("Working towards 1.0.2. Interrupted"),
            "progress towards another version is not kept"
        );
    }
}
