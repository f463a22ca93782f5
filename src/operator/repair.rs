//! Drift repair: a managed object changed or deleted by someone else is put back by
//! re-applying its one manifest (one GET, at most one write), with the [`Applier`] the passes
//! use; a failed repair is tried again with backoff, not only at the next full pass.

use std::collections::HashMap;
use std::time::Duration;

use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream::FuturesUnordered;
use tokio::sync::watch;

use super::drift::Known;
use super::metrics::Metrics;
use super::shutdown::{Stopped, until_stopped};
use crate::apply::{Action, Applier};
use crate::cluster::Cluster;
use crate::health::WaitMode;
use crate::release::Release;

/// The applier of repairs: no health wait (health is judged by the passes), and one GET per
/// object rather than a LIST of its kind.
pub(super) fn repairer<'a>(
    cluster: &Cluster,
    release: &'a Release,
    options: &super::Options,
) -> Applier<'a> {
    let mut repair_options = options.sync.apply.clone();
    repair_options.health.wait = WaitMode::None;
    repair_options.health.observer = None;
    repair_options.list_objects = false;
    Applier::new(cluster.clone(), release, repair_options)
}

/// Failed repairs waiting for their next try.
#[derive(Default)]
pub(super) struct Repairs {
    /// The current backoff of each manifest whose last repair failed.
    retries: HashMap<usize, u32>,
    /// Each resolves to its manifest when its backoff is over.
    delayed: FuturesUnordered<BoxFuture<'static, usize>>,
}

impl Repairs {
    /// No repair is waiting.
    pub(super) fn is_empty(&self) -> bool {
        self.delayed.is_empty()
    }

    /// The next manifest whose backoff is over (pending forever when none waits: poll it only
    /// when [`Self::is_empty`] is false).
    pub(super) async fn next_due(&mut self) -> Option<usize> {
        self.delayed.next().await
    }

    /// Repairs each of `queue` in turn; a failure is tried again after its backoff. Stops
    /// (with how) when the operator is stopping and the repair in flight did not end within
    /// `grace`.
    pub(super) async fn run(
        &mut self,
        repairer: &Applier<'_>,
        known: &Known,
        metrics: &Metrics,
        queue: impl IntoIterator<Item = usize>,
        stop: &mut watch::Receiver<bool>,
        grace: Duration,
    ) -> Result<(), Stopped> {
        for index in queue {
            let repaired =
                until_stopped(repair_one(repairer, known, metrics, index), stop, grace).await?;
            if repaired {
                self.retries.remove(&index);
            } else {
                let failed = self.retries.entry(index).or_insert(0);
                *failed += 1;
                let wait = crate::retry::Backoff::REPAIR.delay(*failed);
                self.delayed.push(Box::pin(async move {
                    tokio::time::sleep(wait).await;
                    index
                }));
            }
        }
        Ok(())
    }
}

/// Re-applies manifest `index` after drift (one GET, at most one write); false when it failed.
async fn repair_one(
    repairer: &Applier<'_>,
    known: &Known,
    metrics: &Metrics,
    index: usize,
) -> bool {
    repairer.new_pass();
    let result = repairer.run(index).await;
    let manifest = &repairer.release().manifests[index];
    metrics.count_action(&metrics.repairs, result.action);
    metrics.count_action(&metrics.manifests, result.action);
    known.set(index, result.resource_version.clone());
    match result.action {
        Action::Created | Action::Updated => {
            tracing::info!(manifest = %manifest.id, action = %result.action, "repaired drift")
        }
        Action::Failed => {
            tracing::warn!(manifest = %manifest.id, error = ?result.error, "could not repair drift; trying again")
        }
        _ => tracing::debug!(manifest = %manifest.id, action = %result.action, "no drift"),
    }
    result.action != Action::Failed
}
