//! What the leader does until told to stop: a full pass, then the steady state — drift
//! repaired from watches, a full pass on a ClusterVersion change, a change of the gates the
//! FeatureGate `cluster` enables, or the resync timer, each full pass followed by a look at
//! the update service. It ends when told to stop, or when a
//! pass pulled the release `spec.desiredUpdate.image` names: then it returns that release, to
//! be led with from a fresh start.

use std::collections::BTreeSet;
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use super::Options;
use super::drift::{self, Kinds, Known};
use super::metrics::Metrics;
use super::pass::{PassEnd, Passes};
use super::pull::{Puller, Switch};
use super::repair::{Repairs, repairer};
use super::resync;
use super::self_update::SelfUpdate;
use super::shutdown::{Stopped, pass_stopped, until_stopped};
use super::updates::Refresher;
use crate::apply::Applier;
use crate::cluster::Cluster;
use crate::release::Release;

/// The least time between the end of a full pass and the start of one a watch asks for (a
/// ClusterVersion or FeatureGate change): a burst of spec edits makes one pass, and status
/// writes stay seconds apart.
const PASS_SPACING: Duration = Duration::from_secs(2);

/// What the leader does next.
enum Next {
    WatchesEnded,
    Pass(&'static str),
    Repair(BTreeSet<usize>),
}

/// When the next full passes are due.
struct Schedule {
    /// The resync timer (jittered).
    next_pass: Instant,
    /// The end of the last pass.
    last_pass_end: Instant,
    /// A pass a watch asked for, no sooner than [`PASS_SPACING`] after the last one ended,
    /// and the first trigger that asked; changes meanwhile are taken together.
    asked: Option<(Instant, &'static str)>,
}

impl Schedule {
    fn new(resync_interval: Duration) -> Self {
        let now = Instant::now();
        Schedule {
            next_pass: now + resync::next_delay(resync_interval),
            last_pass_end: now,
            asked: None,
        }
    }

    /// A watch saw a change (`trigger`): a pass is due, once spaced from the last one.
    fn asked(&mut self, trigger: &'static str) {
        self.asked.get_or_insert((
            (self.last_pass_end + PASS_SPACING).max(Instant::now()),
            trigger,
        ));
    }

    /// A pass ended: the next one is a resync interval away.
    fn passed(&mut self, resync_interval: Duration) {
        self.asked = None;
        self.last_pass_end = Instant::now();
        self.next_pass = self.last_pass_end + resync::next_delay(resync_interval);
    }
}

/// What the leader does until told to stop (or dropped when leadership is lost); `Some`: a
/// pass asked to lead with another release (`pulled`: `release` is a pulled one). With it,
/// whether a pass applied `release` (an update from it is then an update from what the
/// cluster has).
pub(super) async fn lead(
    cluster: &Cluster,
    release: &Release,
    pulled: bool,
    options: &Options,
    metrics: &Metrics,
    puller: &Puller,
    stop: &mut watch::Receiver<bool>,
) -> (Option<Switch>, bool) {
    let known = Known::default();
    let mover = SelfUpdate::new(options.self_update.clone());
    let passes = Passes {
        cluster,
        release,
        options,
        metrics,
        known: &known,
        mover: &mover,
        puller,
        pulled,
    };
    let Some(mut first) = pass_or_stop(&passes, "initial", stop).await else {
        return (None, false);
    };
    if let Some(next) = first.switch.take() {
        return (Some(next), first.accepted);
    }
    steady_state(&passes, first, stop).await
}

/// The steady state after the first pass ended (`first`), until told to stop or a pass asks
/// to lead with another release: the same answer as [`lead`]'s.
async fn steady_state(
    passes: &Passes<'_>,
    mut first: PassEnd,
    stop: &mut watch::Receiver<bool>,
) -> (Option<Switch>, bool) {
    let (cluster, release, options) = (passes.cluster, passes.release, passes.options);
    let mut steady = Steady::after(&mut first, options.resync_interval);
    let mut updates = Refresher::new(cluster, release, &options.sync.apply.retry);
    updates.start();
    let kinds = Kinds::of(release);
    let (drift_tx, mut drift_rx) = mpsc::unbounded_channel();
    let (cv_tx, mut cv_rx) = mpsc::unbounded_channel();
    // Drift watches are polled only once the release was accepted (nothing is managed
    // before); the ClusterVersion watch always (a forced desiredUpdate must start a pass).
    let watches = kinds.watch(cluster, passes.known, &drift_tx);
    tokio::pin!(watches);
    // Compared with the generation the pass read: a spec change made since is not missed.
    let cv_watch = drift::watch_cluster_version(cluster, first.generation, &cv_tx);
    tokio::pin!(cv_watch);
    // Gates given on the command line are fixed; the cluster's are watched, compared with
    // what the first pass read.
    let (fg_tx, mut fg_rx) = mpsc::unbounded_channel();
    let version = release.version().map(ToString::to_string);
    let fg_watch = drift::watch_feature_gate(cluster, version, first.feature_gates.take(), &fg_tx);
    tokio::pin!(fg_watch);
    let mut fg_watching = options.sync.feature_gates.is_none();
    let repairer = repairer(cluster, release, options);
    let mut cv_watching = true;
    let next_pass_in = steady
        .schedule
        .next_pass
        .saturating_duration_since(Instant::now());
    tracing::info!(
        kinds = kinds.len(),
        ?next_pass_in,
        "steady state: watching managed objects for drift"
    );
    loop {
        let schedule = &mut steady.schedule;
        let next = tokio::select! {
            _ = stop.wait_for(|s| *s) => return (None, steady.applied),
            () = &mut watches, if steady.watching => Next::WatchesEnded,
            () = &mut cv_watch, if cv_watching => { cv_watching = false; continue }
            () = &mut fg_watch, if fg_watching => { fg_watching = false; continue }
            () = tokio::time::sleep_until(schedule.next_pass) => Next::Pass("resync"),
            () = tokio::time::sleep_until(schedule.asked.map_or(schedule.next_pass, |(at, _)| at)), if schedule.asked.is_some() => {
                Next::Pass(schedule.asked.map_or("resync", |(_, trigger)| trigger))
            }
            Some(()) = cv_rx.recv() => {
                schedule.asked("clusterversion");
                continue;
            }
            Some(()) = fg_rx.recv(), if fg_watching => {
                schedule.asked("featuregate");
                continue;
            }
            Some(index) = steady.repairs.next_due(), if !steady.repairs.is_empty() => {
                Next::Repair(BTreeSet::from([index]))
            }
            Some(first) = drift_rx.recv(), if steady.watching => {
                let mut queue = BTreeSet::from([first]);
                while let Ok(more) = drift_rx.try_recv() {
                    queue.insert(more);
                }
                Next::Repair(queue)
            }
        };
        let trigger = match next {
            Next::WatchesEnded => {
                steady.watching = false;
                continue;
            }
            Next::Repair(queue) => {
                if steady.repair(queue, &repairer, passes, stop).await.is_err() {
                    return (None, steady.applied);
                }
                continue;
            }
            Next::Pass(trigger) => trigger,
        };
        while cv_rx.try_recv().is_ok() {}
        while fg_rx.try_recv().is_ok() {}
        let Some(end) = pass_or_stop(passes, trigger, stop).await else {
            return (None, steady.applied);
        };
        if let Some(next) = steady.passed(end, options.resync_interval) {
            return (Some(next), steady.applied);
        }
        updates.start();
    }
}

/// A full pass, unless told to stop first (`None`; an abandoned pass is recorded).
async fn pass_or_stop(
    passes: &Passes<'_>,
    trigger: &'static str,
    stop: &mut watch::Receiver<bool>,
) -> Option<PassEnd> {
    let options = passes.options;
    match until_stopped(passes.full_pass(trigger), stop, options.shutdown_grace).await {
        Ok(end) => Some(end),
        Err(stopped) => {
            pass_stopped(passes.cluster, passes.release, options, stopped).await;
            None
        }
    }
}

/// What the steady state carries from one event to the next.
struct Steady {
    /// A pass applied the release.
    applied: bool,
    /// Drift watches are polled: the release was accepted, and the operator not paused.
    watching: bool,
    /// Manifests left alone until the next pass (unmanaged, or excluded by capability).
    unmanaged: BTreeSet<usize>,
    /// Repairs that failed, retried under their backoff.
    repairs: Repairs,
    schedule: Schedule,
}

impl Steady {
    /// The state after the first pass ended (`first`, whose unmanaged manifests it takes).
    fn after(first: &mut PassEnd, resync_interval: Duration) -> Steady {
        Steady {
            applied: first.accepted,
            watching: first.accepted && !first.paused,
            unmanaged: std::mem::take(&mut first.unmanaged),
            repairs: Repairs::default(),
            schedule: Schedule::new(resync_interval),
        }
    }

    /// Re-applies the drifted manifests of `queue` with `repairer`, except those left alone
    /// until the next pass (objects overridden as unmanaged are not put back); `Err`: told to
    /// stop meanwhile.
    async fn repair(
        &mut self,
        queue: BTreeSet<usize>,
        repairer: &Applier<'_>,
        passes: &Passes<'_>,
        stop: &mut watch::Receiver<bool>,
    ) -> Result<(), Stopped> {
        let queue = queue.into_iter().filter(|i| !self.unmanaged.contains(i));
        let (known, metrics) = (passes.known, passes.metrics);
        let grace = passes.options.shutdown_grace;
        self.repairs
            .run(repairer, known, metrics, queue, stop, grace)
            .await
    }

    /// A full pass ended with `end`: `Some` when it asks to lead with another release.
    fn passed(&mut self, mut end: PassEnd, resync_interval: Duration) -> Option<Switch> {
        self.applied |= end.accepted;
        if let Some(next) = end.switch.take() {
            return Some(next);
        }
        self.unmanaged = end.unmanaged;
        if end.paused {
            // Handed over to another image (repairing would undo that), or the release would
            // move the operator away from it.
            self.watching = false;
            self.repairs = Repairs::default();
        } else {
            self.watching |= end.accepted;
        }
        self.schedule.passed(resync_interval);
        None
    }
}
