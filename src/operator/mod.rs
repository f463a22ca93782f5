//! `cvo operator`: the in-cluster loop that keeps a cluster at its release, beside
//! [`crate::sync`] (which it runs, never forks).
//!
//! - [`leader`]: leader election on a `coordination.k8s.io/v1` Lease; only the leader writes;
//! - [`drift`]: metadata-only watches on the release's managed objects (label
//!   `cvo.io/managed=true`) and on `ClusterVersion version`;
//! - [`resync`]: the jittered full-pass timer;
//! - [`connect`]: reaching the API server at start-up, for as long as it takes;
//! - [`metrics`]: Prometheus metrics, `/metrics`, `/healthz`, `/startupz`, `/readyz` (and the
//!   readiness rule: connected and placed by the election, never waiting for a pass);
//! - [`events`]: Kubernetes Events (a deleted object that came back).
//! - [`self_update`]: moving the operator's own Deployment to `spec.desiredUpdate.image`;
//! - [`pull`]: pulling the release artifact `spec.desiredUpdate.image` names, to lead with it
//!   (no new pod);
//! - [`previous`]: reading the release the cluster is at (by digest), to judge what an update
//!   enables implicitly;
//! - [`cleanup`]: the OLM operand-cleanup reconciler, run while leading
//!   (`--components operand-cleanup`);
//! - `lead`: what the leader does — the first full pass, then the steady state;
//! - `pass`: one full pass (self-update, sync, its metrics and events);
//! - `repair`: drift repair of one manifest, retried with backoff;
//! - `shutdown`: the grace period, and the status of a pass abandoned at its end;
//! - `invalid`: what the leader does with a release that cannot be used;
//! - `status`: what the operator records besides the sync's own status;
//! - `updates`: available updates from the update service, after every full pass.
//!
//! As leader, the operator runs a full pass ([`crate::sync::sync`]: install or update per the
//! ClusterVersion history, preconditions, status), then waits: a watch event for a managed
//! object changed by someone else, or deleted, re-applies **that one manifest** (the same
//! [`Applier`] the passes use); a change to ClusterVersion's spec, or the resync timer
//! (`--resync-interval`, jittered ±25 %), runs a full pass. A pass with nothing drifted sends
//! no write (the engine skips up-to-date objects; statuses are written only when they change).
//!
//! `spec.desiredUpdate` is read as OpenShift's CVO reads it ([`crate::status::spec`]): a
//! `version` without an `image` names the image `status.availableUpdates` (or a
//! `status.history` entry) gives it; a request that is invalid is reported as `Invalid` and not
//! acted on. The image asked for, when it is neither the operator's nor the release it leads
//! with, is looked up in its registry ([`pull`]): a **release artifact** is pulled and loaded,
//! and the leader switches to it — `lead` ends with the new release and [`run`] enters it
//! again as a new leader would (a full pass first, watches rebuilt); the release led with is
//! kept while the process lives (a restart starts from `--release` again and pulls the spec's
//! image again). A **container image** gets the operator's Deployment moved there, and the
//! operator hands over: it applies nothing more (see [`self_update`]). An image that cannot be
//! looked up or pulled is reported (`ReleaseAccepted=False`, `RetrievePayload`) and the
//! current release stays enforced.
//!
//! A release the preconditions refuse is reported as `ReleaseAccepted=False` (reason: the
//! precondition) and `Progressing=False` saying so, and nothing is applied; a request for the
//! image the operator runs with `force: true` forces it (whatever its version), and the history
//! entry records the overridden preconditions (`acceptedRisks`). Every pass rewrites
//! `Progressing` from what this leader does, so nothing an earlier leader wrote there stays.
//!
//! Nothing that must survive a restart is kept here: a new leader starts with a full pass,
//! which reads everything back from the cluster — the objects, ClusterVersion, and the
//! deletion record ([`crate::status::record`]) that tells "deleted by us" from "never existed".
//!
//! Shutdown (SIGTERM/SIGINT): no new work starts; a pass or repair in flight may finish within
//! the shutdown grace period (its status written as usual). A pass still running then is
//! dropped, and a final status write says so (unless the cluster was already at the release):
//! `Progressing=True` with reason [`INTERRUPTED`] and the last progress, the history entry
//! `Partial`. Then the Lease is released.

pub mod cleanup;
pub mod connect;
pub mod drift;
pub mod events;
mod invalid;
mod lead;
pub mod leader;
pub mod metrics;
mod pass;
mod preflight;
pub mod previous;
pub mod pull;
mod repair;
pub mod resync;
pub mod self_update;
mod shutdown;
mod status;
mod updates;

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::cluster::Cluster;
use crate::release::Release;
use crate::release::capability::Gates;
use crate::sync::SyncOptions;
use leader::{Elector, LeaseConfig};
use metrics::Metrics;

pub use invalid::{INVALID_RELEASE, Unusable};
pub use shutdown::INTERRUPTED;
pub use status::forced_by_spec;

/// Everything the operator is told.
#[derive(Clone, Debug)]
pub struct Options {
    /// The options of each full pass (`force` also comes from `spec.desiredUpdate`).
    pub sync: SyncOptions,
    /// Between two full passes (jittered).
    pub resync_interval: Duration,
    pub lease: LeaseConfig,
    /// How long a pass in flight at shutdown may take to finish.
    pub shutdown_grace: Duration,
    /// The operator's own Deployment and image, to follow `spec.desiredUpdate.image`.
    pub self_update: self_update::Config,
    /// Also run the OLM operand-cleanup reconciler while leading (`None`: do not).
    pub operand_cleanup: Option<crate::olm::Config>,
    /// How releases `spec.desiredUpdate.image` names are pulled and loaded.
    pub pull: pull::Config,
}

/// Runs the operator until `shutdown` resolves: elects, leads while elected, stops gracefully.
/// `client` is for the release's requests (counted in `metrics` by
/// [`metrics::instrument`]); `lease_client` for the Lease. `release` reads the release given
/// at start, or says why it cannot be used: it runs once the election has started, so that
/// `/readyz` follows the election from the start, not from the end of a long read.
///
/// A release that cannot be used (unreadable, with errors, or unverified: the
/// `ReleaseAccepted` reason and message) is reported by the leader (`ReleaseAccepted=False`,
/// reason [`INVALID_RELEASE`] or `ImageVerificationFailed`), and nothing is applied — until
/// `spec.desiredUpdate.image` names a release artifact it can pull: then it leads with that
/// one (or a container image: its Deployment moves there).
///
/// # Errors
///
/// None are returned: the operator keeps running whatever fails, and says so where an
/// administrator looks. A pass that cannot read ClusterVersion applies nothing and is counted
/// as `error` (`cvo_sync_passes_total`); a refused release is `ReleaseAccepted=False`;
/// failed manifests are `Failing` and the pass is counted as `failed`; status that cannot be
/// written, a Lease that cannot be renewed (the leader stops writing), and failed repairs
/// (retried with backoff) are logged.
pub async fn run(
    client: kube::Client,
    lease_client: kube::Client,
    release: impl std::future::Future<Output = Result<Release, Unusable>>,
    options: &Options,
    metrics: Arc<Metrics>,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let (stop_tx, stop_rx) = watch::channel(false);
    let (mut leader_rx, election) = Election::start(lease_client, &options.lease, &metrics);
    tokio::pin!(shutdown);
    let start = tokio::select! {
        start = release => start,
        () = &mut shutdown => {
            tracing::info!("stopped while reading the release");
            election.stop().await;
            return;
        }
    };
    let release = start.as_ref();
    // The reconciler's requests are not the release's: not counted in the metrics.
    let cleanup_client = client.clone();
    let cluster = Cluster::new(metrics::instrument(client, metrics.clone()));
    let puller = pull::Puller::new(options.pull.clone());
    // The release pulled last (spec.desiredUpdate.image): led with while the process lives.
    let mut pulled: Option<Box<pull::Pulled>> = None;
    let leading = async {
        loop {
            // Standing by until elected (or stopping).
            let mut stop = stop_rx.clone();
            tokio::select! {
                _ = stop.wait_for(|s| *s) => return,
                r = leader_rx.wait_for(|l| *l) => if r.is_err() { return },
            }
            metrics.leader.set(1);
            let mut stop = stop_rx.clone();
            let mut lost = leader_rx.clone();
            let cleanup = async {
                if let Some(config) = &options.operand_cleanup {
                    cleanup::run_while_leading(
                        cleanup_client.clone(),
                        config.clone(),
                        stop_rx.clone(),
                        leader_rx.clone(),
                        options.shutdown_grace,
                    )
                    .await;
                }
            };
            let releases = lead_releases(
                &cluster,
                release,
                &mut pulled,
                options,
                &metrics,
                &puller,
                &mut stop,
            );
            let work = async { tokio::join!(releases, cleanup) };
            tokio::select! {
                _ = work => {}
                _ = lost.wait_for(|l| !*l) => {
                    tracing::warn!("leadership lost: work in flight abandoned, standing by");
                }
            }
            metrics.leader.set(0);
            if *stop_rx.borrow() {
                return;
            }
        }
    };
    tokio::pin!(leading);
    tokio::select! {
        () = &mut leading => {}
        () = &mut shutdown => {
            tracing::info!("stopping: finishing the work in flight");
            metrics.readiness.stopping();
            let _ = stop_tx.send(true);
            // `lead` returns once its work in flight is done (or its grace period is over).
            leading.await;
        }
    }
    metrics.leader.set(0);
    election.stop().await;
    tracing::info!("stopped");
}

/// What the leader does while elected, until told to stop: leads with the release pulled
/// last (`pulled`), else with the one given at start (`start`, or why it cannot be used);
/// when a pass switches to another release, leads again with it, as a new leader would.
/// `pulled` outlives the term: a leader elected again leads with it.
async fn lead_releases(
    cluster: &Cluster,
    start: Result<&Release, &Unusable>,
    pulled: &mut Option<Box<pull::Pulled>>,
    options: &Options,
    metrics: &Metrics,
    puller: &pull::Puller,
    stop: &mut watch::Receiver<bool>,
) {
    // What the release applied last holds: an update from it enables the capabilities its
    // objects need implicitly (`sync::SyncOptions`).
    let mut from: Option<Arc<Gates>> = None;
    loop {
        let mut options = options.clone();
        options.sync.updating_from = from.clone();
        let options = &options;
        let (next, applied) = match (pulled.as_ref(), start) {
            (Some(p), _) => {
                let current = &p.release;
                let (next, applied) =
                    lead::lead(cluster, current, true, options, metrics, puller, stop).await;
                (next, applied.then_some(current))
            }
            (None, Ok(release)) => {
                let (next, applied) =
                    lead::lead(cluster, release, false, options, metrics, puller, stop).await;
                (next, applied.then_some(release))
            }
            (None, Err(why)) => {
                let next =
                    invalid::lead_invalid(cluster, why, options, metrics, puller, stop).await;
                (next, None)
            }
        };
        // Only a release a pass applied is what the cluster has; else the one before it
        // still is.
        if let Some(applied) = applied {
            from = Some(Arc::new(Gates::of(applied)));
        }
        // Lead again with the other release, as a new leader would.
        match next {
            Some(pull::Switch::Pulled(next)) => *pulled = Some(next),
            Some(pull::Switch::Start) => *pulled = None,
            None => return,
        }
    }
}

/// The leader election, running in its own task.
struct Election {
    /// Releases the Lease and ends the election.
    release: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

impl Election {
    /// Starts electing on `lease`; the receiver says whether this process leads. Every
    /// attempt's outcome goes to `metrics`' readiness (the heartbeat `/readyz` follows).
    fn start(
        lease_client: kube::Client,
        lease: &LeaseConfig,
        metrics: &Arc<Metrics>,
    ) -> (watch::Receiver<bool>, Self) {
        let (leader_tx, leader_rx) = watch::channel(false);
        let (release, released) = tokio::sync::oneshot::channel::<()>();
        let readiness = metrics.clone();
        let elector = Elector::new(lease_client, lease.clone())
            .with_heartbeat(move |answered| readiness.readiness.lease_attempt(answered));
        let task = tokio::spawn(elector.run(leader_tx, async move {
            let _ = released.await;
        }));
        (leader_rx, Election { release, task })
    }

    /// Releases the Lease and waits for the election to end.
    async fn stop(self) {
        let _ = self.release.send(());
        let _ = self.task.await;
    }
}
