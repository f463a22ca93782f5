//! The operator of a release that cannot be used (unreadable, or with errors): it elects as
//! [`super::run`] does, and as leader reports `ReleaseAccepted=False` (reason
//! [`INVALID_RELEASE`]) and applies nothing.

use std::sync::Arc;

use tokio::sync::mpsc;
use tokio::time::Instant;

use super::metrics::{self, Metrics};
use super::self_update::{self, Decision, SelfUpdate};
use super::status::not_progressing;
use super::{Election, Options, drift, resync};
use crate::cluster::Cluster;
use crate::status::clusterversion;
use crate::status::conditions::RELEASE_ACCEPTED;
use crate::status::spec::Spec;
use crate::status::{Condition, ConditionStatus};

/// Runs the operator for a release that cannot be used (unreadable, or with errors): elects
/// as [`super::run`] does, and as leader reports `ReleaseAccepted=False` (reason
/// [`INVALID_RELEASE`], `why` as the message) every resync interval, applying nothing, until
/// `shutdown` resolves. A fixed release is picked up by restarting the operator, or by moving
/// it to an image with one (`spec.desiredUpdate.image`, acted on at the spec change).
pub async fn run_invalid(
    client: kube::Client,
    lease_client: kube::Client,
    why: &str,
    options: &Options,
    metrics: Arc<Metrics>,
    shutdown: impl std::future::Future<Output = ()>,
) {
    // Readiness as for a usable release: connected and placed by the election.
    let (mut leader_rx, election) = Election::start(lease_client, &options.lease, &metrics);
    let cluster = Cluster::new(metrics::instrument(client, metrics.clone()));
    let mover = SelfUpdate::new(options.self_update.clone());
    let reporting = async {
        loop {
            if leader_rx.wait_for(|l| *l).await.is_err() {
                return;
            }
            metrics.leader.set(1);
            let generation =
                report_invalid(&cluster, options, why, &mover, &metrics, "initial").await;
            // A spec change (a desiredUpdate.image naming a fixed release, say) is acted on at
            // once, not at the next resync.
            let (cv_tx, mut cv_rx) = mpsc::unbounded_channel();
            let cv_watch = drift::watch_cluster_version(&cluster, generation, &cv_tx);
            tokio::pin!(cv_watch);
            let mut cv_watching = true;
            let mut lost = leader_rx.clone();
            loop {
                let trigger = tokio::select! {
                    _ = lost.wait_for(|l| !*l) => break,
                    () = &mut cv_watch, if cv_watching => { cv_watching = false; continue }
                    Some(()) = cv_rx.recv() => "clusterversion",
                    () = tokio::time::sleep(resync::next_delay(options.resync_interval)) => "resync",
                };
                report_invalid(&cluster, options, why, &mover, &metrics, trigger).await;
            }
            metrics.leader.set(0);
        }
    };
    tokio::select! {
        () = reporting => {}
        () = shutdown => tracing::info!("stopping"),
    }
    metrics.readiness.stopping();
    metrics.leader.set(0);
    election.stop().await;
    tracing::info!("stopped");
}

/// `ReleaseAccepted` reason for a release that cannot be read or has errors.
pub const INVALID_RELEASE: &str = "InvalidRelease";

/// One report of a release that cannot be used: `ReleaseAccepted=False` ([`INVALID_RELEASE`],
/// `why`) — unless `spec.desiredUpdate.image` moved the operator to another image (a fixed
/// release, say), which is reported instead. Returns the ClusterVersion's generation.
async fn report_invalid(
    cluster: &Cluster,
    options: &Options,
    why: &str,
    mover: &SelfUpdate,
    metrics: &Metrics,
    trigger: &'static str,
) -> Option<i64> {
    let retry = &options.sync.apply.retry;
    let started = Instant::now();
    let cv = match clusterversion::read(cluster, retry).await {
        Ok(cv) => cv,
        Err(e) => {
            tracing::warn!(error = %e, "could not read ClusterVersion");
            None
        }
    };
    let generation = cv.as_ref().and_then(|cv| cv.metadata.generation);
    let desired = cv.as_ref().and_then(self_update::desired_image);
    let decision = mover.decide(cluster, desired.as_deref(), None).await;
    let (conditions, result) = match &decision {
        Decision::HandedOver { to, .. } => {
            tracing::warn!(%to, "the release cannot be used; the operator's Deployment runs the image spec.desiredUpdate names: handed over");
            (
                decision.conditions(mover.deployment(), "invalid"),
                "handed-over",
            )
        }
        Decision::Stay | Decision::CannotMove { .. } | Decision::Conflict { .. } => {
            let mut message = why.to_owned();
            if let Decision::CannotMove { to, why: cannot } = &decision {
                message.push_str(&format!(
                    "; cannot move the operator to image {to}: {cannot}"
                ));
            }
            tracing::error!(
                reason = INVALID_RELEASE,
                "the release cannot be used: nothing is applied"
            );
            let refused = Condition::new(
                RELEASE_ACCEPTED,
                ConditionStatus::False,
                INVALID_RELEASE,
                message,
            );
            // Nothing is applied: no earlier leader's Progressing stays.
            let idle = not_progressing(
                cv.as_ref(),
                "the release this operator holds",
                INVALID_RELEASE,
            );
            (vec![refused, idle], "refused")
        }
    };
    // The spec is read here too: an invalid request is said, and not acted on.
    let mut conditions = conditions;
    if let Some(cv) = &cv {
        let stored = clusterversion::condition(cv, "Invalid");
        conditions.extend(Spec::of(cv).invalid_update(stored.as_ref()));
    }
    let written = clusterversion::write_update(
        cluster,
        retry,
        clusterversion::Update::Conditions {
            conditions: &conditions,
            observed: generation,
        },
    )
    .await;
    if let Err(e) = written {
        tracing::warn!(error = %e, "could not record {RELEASE_ACCEPTED} in ClusterVersion");
    }
    metrics.pass(trigger, result, started.elapsed().as_secs_f64());
    generation
}
