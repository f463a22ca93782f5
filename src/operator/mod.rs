//! `cvo operator`: the in-cluster loop that keeps a cluster at its release, beside
//! [`crate::sync`] (which it runs, never forks).
//!
//! - [`leader`]: leader election on a `coordination.k8s.io/v1` Lease; only the leader writes;
//! - [`drift`]: metadata-only watches on the release's managed objects (label
//!   `cvo.io/managed=true`) and on `ClusterVersion version`;
//! - [`resync`]: the jittered full-pass timer;
//! - [`metrics`]: Prometheus metrics, `/metrics`, `/healthz`, `/readyz`;
//! - [`events`]: Kubernetes Events (a deleted object that came back).
//! - [`self_update`]: moving the operator's own Deployment to `spec.desiredUpdate.image`;
//! - [`cleanup`]: the OLM operand-cleanup reconciler, run while leading
//!   (`--components operand-cleanup`).
//!
//! As leader, the operator runs a full pass ([`crate::sync::sync`]: install or update per the
//! ClusterVersion history, preconditions, status), then waits: a watch event for a managed
//! object changed by someone else, or deleted, re-applies **that one manifest** (the same
//! [`Applier`] the passes use); a change to ClusterVersion's spec, or the resync timer
//! (`--resync-interval`, jittered ±25 %), runs a full pass. A pass with nothing drifted sends
//! no write (the engine skips up-to-date objects; statuses are written only when they change).
//!
//! A release the preconditions refuse is reported as `ReleaseAccepted=False` (reason: the
//! precondition) and nothing is applied; `spec.desiredUpdate {version: <this release>, force:
//! true}` forces it, and the history entry records the overridden preconditions
//! (`acceptedRisks`). `spec.desiredUpdate.image` naming another image than the operator's
//! moves its Deployment there, and the operator hands over: it applies nothing more (see
//! [`self_update`]).
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
pub mod drift;
pub mod events;
pub mod leader;
pub mod metrics;
pub mod resync;
pub mod self_update;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use crate::apply::{Action, Applier};
use crate::cluster::Cluster;
use crate::health::WaitMode;
use crate::release::Release;
use crate::status::clusterversion;
use crate::status::conditions::{RELEASE_ACCEPTED, release_accepted};
use crate::status::{Condition, ConditionStatus};
use crate::sync::{SyncOptions, SyncOutcome, sync};
use drift::{Kinds, Known};
use leader::{Elector, LeaseConfig};
use metrics::Metrics;
use self_update::{Decision, SelfUpdate};

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
}

/// Runs the operator until `shutdown` resolves: elects, leads while elected, stops gracefully.
/// `client` is for the release's requests (counted in `metrics` by
/// [`metrics::instrument`]); `lease_client` for the Lease.
pub async fn run(
    client: kube::Client,
    lease_client: kube::Client,
    release: &Release,
    options: &Options,
    metrics: Arc<Metrics>,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let (leader_tx, mut leader_rx) = watch::channel(false);
    let (stop_tx, stop_rx) = watch::channel(false);
    let (lease_stop_tx, lease_stop_rx) = tokio::sync::oneshot::channel::<()>();
    let elector = Elector::new(lease_client, options.lease.clone());
    let election = tokio::spawn(elector.run(leader_tx, async move {
        let _ = lease_stop_rx.await;
    }));
    // The reconciler's requests are not the release's: not counted in the metrics.
    let cleanup_client = client.clone();
    let cluster = Cluster::new(metrics::instrument(client, metrics.clone()));
    metrics.set_ready(true);
    tokio::pin!(shutdown);
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
            let work = async {
                tokio::join!(
                    lead(&cluster, release, options, &metrics, &mut stop),
                    cleanup
                )
            };
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
            metrics.set_ready(false);
            let _ = stop_tx.send(true);
            // `lead` returns once its work in flight is done (or its grace period is over).
            leading.await;
        }
    }
    metrics.leader.set(0);
    let _ = lease_stop_tx.send(());
    let _ = election.await;
    tracing::info!("stopped");
}

/// Runs the operator for a release that cannot be used (unreadable, or with errors): elects
/// as [`run`] does, and as leader reports `ReleaseAccepted=False` (reason
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
    let (leader_tx, mut leader_rx) = watch::channel(false);
    let (lease_stop_tx, lease_stop_rx) = tokio::sync::oneshot::channel::<()>();
    let elector = Elector::new(lease_client, options.lease.clone());
    let election = tokio::spawn(elector.run(leader_tx, async move {
        let _ = lease_stop_rx.await;
    }));
    let cluster = Cluster::new(metrics::instrument(client, metrics.clone()));
    let mover = SelfUpdate::new(options.self_update.clone());
    metrics.set_ready(true);
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
    metrics.set_ready(false);
    metrics.leader.set(0);
    let _ = lease_stop_tx.send(());
    let _ = election.await;
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
    let decision = mover
        .decide(
            cluster,
            cv.as_ref().and_then(self_update::desired_image),
            None,
        )
        .await;
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
            (vec![refused], "refused")
        }
    };
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

/// What the leader does until told to stop (or dropped when leadership is lost).
async fn lead(
    cluster: &Cluster,
    release: &Release,
    options: &Options,
    metrics: &Metrics,
    stop: &mut watch::Receiver<bool>,
) {
    let known = Known::default();
    let grace = options.shutdown_grace;
    let mover = SelfUpdate::new(options.self_update.clone());
    let pass = |trigger: &'static str| {
        full_pass(cluster, release, options, metrics, &known, &mover, trigger)
    };
    let first = match until_stopped(pass("initial"), stop, grace).await {
        Ok(end) => end,
        Err(stopped) => return pass_stopped(cluster, release, options, stopped).await,
    };
    let cv_generation = first.generation;
    let mut watching = first.accepted && !first.paused;
    let mut unmanaged = first.unmanaged;
    let kinds = Kinds::of(release);
    let (drift_tx, mut drift_rx) = mpsc::unbounded_channel();
    let (cv_tx, mut cv_rx) = mpsc::unbounded_channel();
    // Drift watches are polled only once the release was accepted (nothing is managed
    // before); the ClusterVersion watch always (a forced desiredUpdate must start a pass).
    let watches = kinds.watch(cluster, &known, &drift_tx);
    tokio::pin!(watches);
    // Compared with the generation the pass read: a spec change made since is not missed.
    let cv_watch = drift::watch_cluster_version(cluster, cv_generation, &cv_tx);
    tokio::pin!(cv_watch);
    let mut repair_options = options.sync.apply.clone();
    // A repair re-applies what drifted; health is judged by the passes.
    repair_options.health.wait = WaitMode::None;
    repair_options.health.observer = None;
    // One object: a GET, not a LIST of its kind in its namespace.
    repair_options.list_objects = false;
    let repairer = Applier::new(cluster.clone(), release, repair_options);
    let mut cv_watching = true;
    // Failed repairs are tried again with backoff (a namespace being recreated, say), not
    // only at the next full pass.
    // Failed repairs in a row, per object (`Backoff::REPAIR`: 2 s, doubling up to 60 s).
    let mut retries: std::collections::HashMap<usize, u32> = Default::default();
    let mut delayed = futures::stream::FuturesUnordered::new();
    let mut next_pass = Instant::now() + resync::next_delay(options.resync_interval);
    // A ClusterVersion change starts a pass no sooner than PASS_SPACING after the previous
    // one ended; changes meanwhile are taken together (status writes stay seconds apart).
    let mut last_pass_end = Instant::now();
    let mut cv_pass_at: Option<Instant> = None;
    tracing::info!(kinds = kinds.len(), next_pass_in = ?next_pass.saturating_duration_since(Instant::now()), "steady state: watching managed objects for drift");
    loop {
        let next = tokio::select! {
            _ = stop.wait_for(|s| *s) => return,
            () = &mut watches, if watching => Next::WatchesEnded,
            () = &mut cv_watch, if cv_watching => { cv_watching = false; continue }
            () = tokio::time::sleep_until(next_pass) => Next::Pass("resync"),
            () = tokio::time::sleep_until(cv_pass_at.unwrap_or(next_pass)), if cv_pass_at.is_some() => {
                Next::Pass("clusterversion")
            }
            Some(()) = cv_rx.recv() => {
                cv_pass_at.get_or_insert((last_pass_end + PASS_SPACING).max(Instant::now()));
                continue;
            }
            Some(index) = futures::StreamExt::next(&mut delayed), if !delayed.is_empty() => {
                Next::Repair(BTreeSet::from([index]))
            }
            Some(first) = drift_rx.recv(), if watching => {
                let mut queue = BTreeSet::from([first]);
                while let Ok(more) = drift_rx.try_recv() {
                    queue.insert(more);
                }
                Next::Repair(queue)
            }
        };
        let trigger = match next {
            Next::WatchesEnded => {
                watching = false;
                continue;
            }
            Next::Repair(queue) => {
                // Objects overridden as unmanaged are not put back.
                for index in queue.into_iter().filter(|i| !unmanaged.contains(i)) {
                    let repair = repair_one(&repairer, &known, metrics, index);
                    let Ok(repaired) = until_stopped(repair, stop, grace).await else {
                        return;
                    };
                    if repaired {
                        retries.remove(&index);
                    } else {
                        let failed = retries.entry(index).or_insert(0);
                        *failed += 1;
                        let wait = crate::cluster::retry::Backoff::REPAIR.delay(*failed);
                        delayed.push(async move {
                            tokio::time::sleep(wait).await;
                            index
                        });
                    }
                }
                continue;
            }
            Next::Pass(trigger) => trigger,
        };
        while cv_rx.try_recv().is_ok() {}
        cv_pass_at = None;
        let end = match until_stopped(pass(trigger), stop, grace).await {
            Ok(end) => end,
            Err(stopped) => return pass_stopped(cluster, release, options, stopped).await,
        };
        unmanaged = end.unmanaged;
        if end.paused {
            // Handed over to another image (repairing would undo that), or the release would
            // move the operator away from it.
            watching = false;
            retries.clear();
            delayed = futures::stream::FuturesUnordered::new();
        } else {
            watching |= end.accepted;
        }
        last_pass_end = Instant::now();
        next_pass = last_pass_end + resync::next_delay(options.resync_interval);
    }
}

/// The least time between the end of a full pass and the start of one a ClusterVersion change
/// asks for: a burst of spec edits makes one pass, and status writes stay seconds apart.
const PASS_SPACING: Duration = Duration::from_secs(2);

/// A full pass did not end because the operator is stopping: an abandoned one gets the final
/// status write ([`record_interrupted`]).
async fn pass_stopped(cluster: &Cluster, release: &Release, options: &Options, stopped: Stopped) {
    if stopped == Stopped::Abandoned {
        let version = crate::status::conditions::version_text(release);
        record_interrupted(cluster, &options.sync.apply.retry, &version).await;
    }
}

/// What the leader does next.
enum Next {
    WatchesEnded,
    Pass(&'static str),
    Repair(BTreeSet<usize>),
}

/// Why [`until_stopped`] gave no output: the operator is stopping.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stopped {
    /// Stopping already: the work did not start.
    Before,
    /// The work finished within the grace period (its status written as usual).
    Finished,
    /// The grace period ran out: the work was dropped midway.
    Abandoned,
}

/// Awaits `work`; when `stop` turns true meanwhile, gives it `grace` more and says how it ended.
async fn until_stopped<T>(
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
async fn record_interrupted(cluster: &Cluster, retry: &crate::apply::RetryPolicy, version: &str) {
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
            version,
            conditions: &condition,
            complete: false,
            accepted_risks: None,
            observed: None,
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

/// How a full pass ended.
#[derive(Debug, Default)]
struct PassEnd {
    /// The release was accepted (the pass ran).
    accepted: bool,
    /// The `metadata.generation` of the ClusterVersion it read.
    generation: Option<i64>,
    /// Nothing was applied, and nothing is to be repaired until a pass says otherwise: the
    /// operator handed over to another image, or its release would move it away from the one
    /// asked for.
    paused: bool,
    /// Manifests whose objects ClusterVersion overrides mark unmanaged.
    unmanaged: BTreeSet<usize>,
}

/// One full pass: first what `spec.desiredUpdate.image` asks of the operator itself, then the
/// sync (unless the operator handed over to another image).
async fn full_pass(
    cluster: &Cluster,
    release: &Release,
    options: &Options,
    metrics: &Metrics,
    known: &Known,
    mover: &SelfUpdate,
    trigger: &'static str,
) -> PassEnd {
    let end = |accepted: bool, generation: Option<i64>| PassEnd {
        accepted,
        generation,
        ..PassEnd::default()
    };
    let retry = &options.sync.apply.retry;
    let started = Instant::now();
    let (writes_before, sent_before) = (metrics.writes(), metrics.sent());
    let version = crate::status::conditions::version_text(release);
    let mut sync_options = options.sync.clone();
    let (forced, generation, decision) = match clusterversion::read(cluster, retry).await {
        Ok(cv) => (
            cv.as_ref().is_some_and(|cv| forced_by_spec(cv, &version)),
            cv.as_ref().and_then(|cv| cv.metadata.generation),
            mover
                .decide(
                    cluster,
                    cv.as_ref().and_then(self_update::desired_image),
                    Some(release),
                )
                .await,
        ),
        Err(e) => {
            tracing::error!(error = %e, "full pass not started");
            metrics.pass(trigger, "error", started.elapsed().as_secs_f64());
            return end(false, None);
        }
    };
    let move_conditions = decision.conditions(mover.deployment(), &version);
    match &decision {
        Decision::Stay => {}
        Decision::HandedOver { to, from, written } => {
            if *written {
                tracing::warn!(%to, %from, deployment = ?mover.deployment().map(ToString::to_string), "moved the operator's Deployment to the image spec.desiredUpdate names: handing over to its new pod, applying nothing more");
            } else {
                tracing::info!(%to, "the operator's Deployment already runs the image spec.desiredUpdate names: handed over, applying nothing");
            }
            write_move_conditions(cluster, retry, &move_conditions, generation).await;
            metrics.pass(trigger, "handed-over", started.elapsed().as_secs_f64());
            return PassEnd {
                generation,
                paused: true,
                ..PassEnd::default()
            };
        }
        Decision::Conflict {
            image,
            release_image,
        } => {
            tracing::error!(%image, %release_image, "the release sets the operator's Deployment to another image than the one spec.desiredUpdate names and the operator runs: nothing applied");
            write_move_conditions(cluster, retry, &move_conditions, generation).await;
            metrics.pass(trigger, "refused", started.elapsed().as_secs_f64());
            return PassEnd {
                generation,
                paused: true,
                ..PassEnd::default()
            };
        }
        Decision::CannotMove { to, why } => {
            tracing::error!(%to, %why, "cannot move the operator to the image spec.desiredUpdate names; this release stays applied");
            // The pass must not overwrite the report with ReleaseAccepted=True.
            sync_options.release_accepted = false;
        }
    }
    if forced {
        tracing::warn!(%version, "spec.desiredUpdate forces this release: preconditions are overridden");
        sync_options.force = true;
    }
    let outcome = sync(cluster, release, &sync_options, |r| {
        metrics.count_action(&metrics.manifests, r.action);
        if r.action == Action::Failed {
            let m = &release.manifests[r.index];
            tracing::warn!(manifest = %m.id, location = %m.location, error = ?r.error, "manifest failed");
        }
    })
    .await;
    write_move_conditions(cluster, retry, &move_conditions, generation).await;
    let outcome = match outcome {
        Ok(o) => o,
        Err(e) => {
            tracing::error!(error = %e, "full pass failed");
            metrics.pass(trigger, "error", started.elapsed().as_secs_f64());
            return end(false, generation);
        }
    };
    let seconds = started.elapsed().as_secs_f64();
    let Some(report) = &outcome.report else {
        let refusal = release_accepted(&version, &outcome.refused, false);
        tracing::error!(reason = %refusal.reason, message = %refusal.message, "release refused: nothing applied");
        if let Some(Err(e)) = &outcome.cluster_version {
            tracing::warn!(error = %e, "could not record {RELEASE_ACCEPTED}=False in ClusterVersion");
        }
        // Status metrics first: a scrape that sees the pass counted sees its status too.
        record_status(cluster, retry, metrics, &outcome).await;
        metrics.pass(trigger, "refused", seconds);
        return end(false, generation);
    };
    for r in &report.results {
        if !release.manifests[r.index].is_delete() {
            known.set(r.index, r.resource_version.clone());
        }
    }
    let summary = report.summary();
    let writes = metrics.writes().saturating_sub(writes_before);
    metrics
        .pass_writes
        .set(i64::try_from(writes).unwrap_or(i64::MAX));
    let sent = metrics.sent().saturating_sub(sent_before);
    metrics
        .pass_requests
        .set(i64::try_from(sent).unwrap_or(i64::MAX));
    deletion_metrics(metrics, &outcome, options.sync.stuck_after);
    for id in &outcome.reappeared {
        if let Some(m) = release
            .manifests
            .iter()
            .find(|m| m.is_delete() && &m.id == id)
        {
            events::reappeared(cluster, m).await;
        }
    }
    let result = if summary.failed + summary.skipped > 0 {
        "failed"
    } else {
        "applied"
    };
    record_status(cluster, retry, metrics, &outcome).await;
    metrics.pass(trigger, result, seconds);
    // Warnings repeat every pass: said once at warn level, then at debug.
    for w in &outcome.warnings {
        if trigger == "initial" {
            tracing::warn!("{w}");
        } else {
            tracing::debug!("{w}");
        }
    }
    if let Some(Err(e)) = &outcome.cluster_version {
        tracing::warn!(error = %e, "ClusterVersion status not written");
    }
    tracing::info!(
        trigger,
        mode = ?outcome.mode,
        created = summary.created,
        updated = summary.updated,
        unchanged = summary.unchanged,
        deleted = summary.deleted,
        failed = summary.failed,
        skipped = summary.skipped,
        writes,
        seconds,
        "full pass done"
    );
    PassEnd {
        unmanaged: report
            .results
            .iter()
            .filter(|r| r.action == Action::Unmanaged)
            .map(|r| r.index)
            .collect(),
        ..end(true, generation)
    }
}

/// Deletions in progress and stuck, deletion durations and objects that came back.
fn deletion_metrics(metrics: &Metrics, outcome: &SyncOutcome, stuck_after: Duration) {
    let count = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
    let now = jiff::Timestamp::now();
    let stuck = outcome
        .deletions
        .iter()
        .filter_map(|d| d.since)
        .filter(|since| now.duration_since(*since).unsigned_abs() > stuck_after)
        .count();
    metrics
        .deletions_in_progress
        .set(count(outcome.deletions.len()));
    metrics.deletions_stuck.set(count(stuck));
    metrics
        .deletions_reappeared
        .inc_by(outcome.reappeared.len() as u64);
    for (_, took) in &outcome.deletions_completed {
        metrics.deletion_duration.observe(took.as_secs_f64());
    }
}

/// Records what [`SelfUpdate`] decided in ClusterVersion (nothing when there is nothing to say,
/// no write when it is already recorded); a failure is logged, not fatal.
async fn write_move_conditions(
    cluster: &Cluster,
    retry: &crate::apply::RetryPolicy,
    conditions: &[Condition],
    observed: Option<i64>,
) {
    if conditions.is_empty() {
        return;
    }
    let written = clusterversion::write_update(
        cluster,
        retry,
        clusterversion::Update::Conditions {
            conditions,
            observed,
        },
    )
    .await;
    if let Err(e) = written {
        tracing::warn!(error = %e, "could not record the operator's move in ClusterVersion");
    }
}

/// Metrics from the pass's conditions and the ClusterVersion history.
async fn record_status(
    cluster: &Cluster,
    retry: &crate::apply::RetryPolicy,
    metrics: &Metrics,
    outcome: &SyncOutcome,
) {
    let upgradeable = outcome
        .conditions
        .iter()
        .find(|c| c.type_ == "Upgradeable")
        .is_some_and(|c| c.status == ConditionStatus::True);
    metrics.upgradeable.set(i64::from(upgradeable));
    if let Ok(Some(cv)) = clusterversion::read(cluster, retry).await {
        let mut versions = Vec::new();
        if let Some(current) = clusterversion::current_version(&cv) {
            versions.push(("current", current.to_string()));
        }
        if let Some(desired) = cv
            .data
            .pointer("/status/desired/version")
            .and_then(Value::as_str)
        {
            versions.push(("desired", desired.to_owned()));
        }
        metrics.set_cluster_version(&versions);
    }
}

/// `spec.desiredUpdate` names this release's version with `force: true`.
pub fn forced_by_spec(cv: &kube::api::DynamicObject, version: &str) -> bool {
    let Some(desired) = cv.data.pointer("/spec/desiredUpdate") else {
        return false;
    };
    desired.get("version").and_then(Value::as_str) == Some(version)
        && desired.get("force").and_then(Value::as_bool) == Some(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_a_forced_desired_update_for_this_version_forces() {
        let cv = |spec: Value| -> kube::api::DynamicObject {
            serde_json::from_value(
                json!({"apiVersion": "config.openshift.io/v1", "kind": "ClusterVersion",
                "metadata": {"name": "version"}, "spec": spec}),
            )
            .unwrap()
        };
        assert!(forced_by_spec(
            &cv(json!({"desiredUpdate": {"version": "1.1.0", "force": true}})),
            "1.1.0"
        ));
        assert!(!forced_by_spec(
            &cv(json!({"desiredUpdate": {"version": "1.2.0", "force": true}})),
            "1.1.0"
        ));
        assert!(!forced_by_spec(
            &cv(json!({"desiredUpdate": {"version": "1.1.0"}})),
            "1.1.0"
        ));
        assert!(!forced_by_spec(&cv(json!({})), "1.1.0"));
    }

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
