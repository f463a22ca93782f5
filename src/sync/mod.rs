//! One sync of a release against a cluster — the orchestration both `cvo apply` and the
//! in-cluster operator run: read the ClusterVersion (install or update?), check the
//! preconditions, run the pass(es) over the task graph, read back every unfinished deletion,
//! derive the conditions, write ClusterVersion status, and hand back a [`SyncOutcome`] that
//! [`report`] renders.
//!
//! Modes, as OpenShift's CVO: an **install** (no completed history) runs the flattened graph
//! — no node waits for another — and retries what failed in further rounds, with backoff,
//! until everything is done or [`SyncOptions::install_timeout`] passes; an **update** walks
//! the run-level graph once (run level N+1 only after N succeeded); **reconciling** (the
//! release is already the newest Completed history entry) walks the flattened graph once, so
//! that one failing component does not hold up the others.
//!
//! Fails closed: a ClusterVersion that cannot be read stops the sync (an unreadable cluster is
//! not an install), and a delete manifest whose object cannot be read makes `Upgradeable`
//! Unknown, which refuses a minor update exactly as False does.

pub mod report;

use std::time::Duration;

use futures::StreamExt;

use crate::apply::deletions::{self, Observed};
use crate::apply::{
    Action, Applier, Options, PassReport, PendingDeletion, flattened_graph, run_level_graph,
    run_pass,
};
use crate::cluster::Cluster;
use crate::cluster::retry::Retries;
use crate::health::WaitMode;
use crate::release::{ObjectId, Release};
use crate::status::clusterversion::{self, ClusterVersionError, WriteOutcome};
use crate::status::conditions::{self, Grace, UnknownDeletion};
use crate::status::record::{self, Record, Seen};
use crate::status::spec::{Spec, upgradeable_with_overrides};
use crate::status::update::{Versions, name_list, update_type};
use crate::status::{Condition, ConditionStatus, Precondition, PreconditionFailure, UpdateType};

/// Knobs of a sync beyond the per-manifest [`Options`].
#[derive(Clone, Debug)]
pub struct SyncOptions {
    pub apply: Options,
    pub parallelism: usize,
    /// A pending deletion older than this (from its deletionTimestamp) is stuck.
    pub stuck_after: Duration,
    /// Apply even when a precondition refuses the update.
    pub force: bool,
    /// How long an install keeps retrying failed manifests in further rounds.
    pub install_timeout: Duration,
    /// How to walk the graph; `None` decides from the ClusterVersion history (no completed
    /// entry: initializing).
    pub mode: Option<Mode>,
    /// While the pass runs, log (warn) what it is waiting for this often — for output that is
    /// not a terminal, where no progress bar shows a stall.
    pub heartbeat: Option<Duration>,
    /// How long ClusterOperators may stay degraded or updating (from the start of the
    /// update) before `Failing` turns True; other failures are Failing at once.
    pub failing_after: Duration,
    /// Record `ReleaseAccepted` in ClusterVersion (`cvo operator`): True from the start of
    /// the pass, or False with the precondition's reason when refused (then only that
    /// condition is written).
    pub release_accepted: bool,
    /// Where the deletion record lives (`status::record`); `None` keeps none, and then every
    /// absent delete target counts as deleted earlier (a minor update shipping its manifest is
    /// refused).
    pub record: Option<record::Location>,
}

/// How a sync walks the task graph (OpenShift CVO's names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Install: the flattened graph, failures retried in rounds until the install timeout.
    Initializing,
    /// Update: the run-level graph once; a failure blocks what depends on it.
    Updating,
    /// Steady state (the newest history entry is this release, Completed): the flattened
    /// graph once, so that one failing component does not hold up the others' reconciliation.
    Reconciling,
}

impl Default for SyncOptions {
    fn default() -> Self {
        SyncOptions {
            apply: Options::default(),
            parallelism: crate::graph::DEFAULT_PARALLELISM,
            stuck_after: Duration::from_secs(600),
            force: false,
            install_timeout: Duration::from_secs(600),
            mode: None,
            heartbeat: None,
            failing_after: Duration::from_secs(30 * 60),
            release_accepted: false,
            record: None,
        }
    }
}

/// What a sync did.
#[derive(Debug)]
pub struct SyncOutcome {
    pub update: UpdateType,
    /// Preconditions that failed. When non-empty and not forced, nothing was written and
    /// `report` is `None`.
    pub refused: Vec<PreconditionFailure>,
    pub report: Option<PassReport>,
    pub mode: Mode,
    /// Passes over the graph: 1 for updates, the rounds an install took.
    pub rounds: u32,
    pub conditions: Vec<Condition>,
    pub warnings: Vec<String>,
    /// What happened to ClusterVersion status (`None` for dry runs).
    pub cluster_version: Option<Result<WriteOutcome, String>>,
    /// Requests retried by the retry policy during the sync (discovery included).
    pub retries: Retries,
    /// Objects of delete manifests that exist again after the deletion record saw them
    /// deleted (deleted again by this pass).
    pub reappeared: Vec<ObjectId>,
    /// Deletions the release asked for that are not finished (read back after the pass).
    pub deletions: Vec<PendingDeletion>,
    /// Deletions the record saw complete in this pass, and how long each took from its
    /// request.
    pub deletions_completed: Vec<(ObjectId, Duration)>,
}

impl SyncOutcome {
    /// DESIGN.md §2: 4 refused, 1 failed, 3 deletions unfinished (or not known to be
    /// finished), 0 otherwise.
    pub fn exit_code(&self) -> u8 {
        let Some(report) = &self.report else {
            return 4;
        };
        let summary = report.summary();
        let upgradeable = self.conditions.iter().find(|c| c.type_ == "Upgradeable");
        if summary.failed > 0 || summary.skipped > 0 {
            1
        } else if upgradeable.is_some_and(|c| {
            // Overrides alone are the administrator's choice, not unfinished work.
            c.status != ConditionStatus::True && c.reason != crate::status::spec::OVERRIDES_REASON
        }) {
            3
        } else {
            0
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    #[error(transparent)]
    ClusterVersion(#[from] ClusterVersionError),
}

/// Runs one sync of `release` against `cluster`; `on_result` sees each manifest's final
/// result (an install reports a failure only once no round is left to retry it).
pub async fn sync<F>(
    cluster: &Cluster,
    release: &Release,
    options: &SyncOptions,
    on_result: F,
) -> Result<SyncOutcome, SyncError>
where
    F: Fn(&crate::apply::ManifestResult),
{
    let retries_before = options.apply.retry.retries() + cluster.discovery().retries();
    let cv = clusterversion::read(cluster, &options.apply.retry).await?;
    // The spec this pass acts on: its status writes answer this generation.
    let generation = cv.as_ref().and_then(|cv| cv.metadata.generation);
    let current = cv.as_ref().and_then(clusterversion::current_version);
    let update = update_type(current.as_ref(), release.version());
    let spec = cv.as_ref().map(Spec::of).unwrap_or_default();
    // Overrides make the cluster not upgradeable from the pass that sees them on.
    let previous_upgradeable = cv
        .as_ref()
        .and_then(|cv| clusterversion::condition(cv, "Upgradeable"))
        .or_else(|| {
            (!spec.unmanaged.is_empty())
                .then(|| Condition::new("Upgradeable", ConditionStatus::True, "", ""))
        })
        .map(|c| upgradeable_with_overrides(c, &spec));
    let mode = match options.mode {
        Some(mode) => mode,
        None if update == UpdateType::Install && !options.apply.dry_run => Mode::Initializing,
        None if cv.as_ref().is_some_and(|cv| {
            clusterversion::completed(cv, &conditions::version_text(release))
        }) =>
        {
            Mode::Reconciling
        }
        None => Mode::Updating,
    };
    let mut apply_options = options.apply.clone();
    apply_options.health.initializing = mode == Mode::Initializing;
    apply_options.unmanaged = spec.unmanaged.clone();
    let applier = Applier::new(cluster.clone(), release, apply_options);

    let deletes = release.manifests.iter().any(|m| m.is_delete());
    let record = match &options.record {
        Some(at) if deletes => Some(
            record::read(cluster, &options.apply.retry, at)
                .await
                .map_err(|e| e.to_string()),
        ),
        _ => None,
    };
    // Stale delete manifests only refuse minor/major updates: look them up only then.
    let (mut stale, mut unreadable) = (Vec::new(), Vec::new());
    let mut never_deleted = Vec::new();
    if update == UpdateType::MinorOrMajor {
        let absent;
        (absent, unreadable) = delete_targets(&applier).await;
        (stale, never_deleted) = match (&record, release.version()) {
            (Some(Ok(r)), Some(target)) => absent
                .into_iter()
                .partition(|id| r.completed_before_minor(id, target)),
            // No record, or one that cannot be read: each could have been deleted earlier.
            _ => (absent, Vec::new()),
        };
    }
    let (current_target, previous) = cv
        .as_ref()
        .map(clusterversion::current_and_previous)
        .unwrap_or_default();
    let refused = Precondition {
        update: update.clone(),
        upgradeable: previous_upgradeable.as_ref(),
        stale_deletes: &stale,
        record_error: record
            .as_ref()
            .and_then(|r| r.as_ref().err())
            .map(String::as_str),
        unknown_deletes: &unreadable,
        versions: Versions {
            current: current_target.as_ref(),
            previous: previous.as_ref(),
            target: release.version(),
        },
    }
    .check();
    let mut warnings = Vec::new();
    if let Some(Err(e)) = &record {
        warnings.push(e.clone());
    }
    if !never_deleted.is_empty() {
        let names: Vec<String> = never_deleted.iter().map(ToString::to_string).collect();
        warnings.push(format!(
            "{} delete manifests whose objects are absent and were never deleted by cvo on this cluster (per the deletion record; not stale): {}",
            names.len(),
            name_list(&names)
        ));
    }
    let status_version = conditions::version_text(release);
    if !refused.is_empty() && !options.force {
        let cluster_version = if options.release_accepted && cv.is_some() && !options.apply.dry_run
        {
            let accepted = conditions::release_accepted(&status_version, &refused, false);
            let written = clusterversion::write_update(
                cluster,
                &options.apply.retry,
                clusterversion::Update::Conditions {
                    conditions: std::slice::from_ref(&accepted),
                    observed: generation,
                },
            )
            .await;
            Some(written.map_err(|e| e.to_string()))
        } else {
            None
        };
        let mut conds: Vec<Condition> = previous_upgradeable.into_iter().collect();
        conds.extend(refused.iter().map(|f| {
            Condition::new(
                "Failing",
                ConditionStatus::True,
                f.reason,
                f.message.clone(),
            )
        }));
        return Ok(SyncOutcome {
            update,
            refused,
            report: None,
            mode,
            rounds: 0,
            conditions: conds,
            warnings,
            cluster_version,
            retries: Retries::default(),
            reappeared: Vec::new(),
            deletions: Vec::new(),
            deletions_completed: Vec::new(),
        });
    }
    // A forced update records what it overrode in its history entry, as the CVO does.
    let accepted_risks = (!refused.is_empty()).then(|| {
        refused
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; ")
    });
    if !refused.is_empty() {
        warnings.extend(
            refused
                .iter()
                .map(|f| format!("precondition overridden by --force: {f}")),
        );
    }

    if cv.is_none() && !options.apply.dry_run {
        warnings.push(format!(
            "the cluster has no ClusterVersion {}: without its history every apply is an install (all manifests at once, failures retried); ship one in the release (see manifests-example) so that updates keep the run-level order",
            clusterversion::NAME
        ));
    }
    let accepted = options
        .release_accepted
        .then(|| conditions::release_accepted(&status_version, &refused, true));
    let now = jiff::Timestamp::now();
    let update_started = cv
        .as_ref()
        .and_then(|cv| clusterversion::started(cv, &status_version))
        .unwrap_or(now);
    // An update (or an unfinished install) in a cluster with a ClusterVersion is visible before
    // its first manifest — desired, a Partial history entry with the real start time,
    // Progressing=True — and its Progressing message is kept current while it runs.
    let in_progress = !options.apply.dry_run
        && cv
            .as_ref()
            .is_some_and(|cv| !clusterversion::completed(cv, &status_version));
    if in_progress {
        // The other conditions stay as they are: the write merges these into them.
        let mut starting = vec![Condition::new(
            "Progressing",
            ConditionStatus::True,
            "",
            conditions::progress_message(&status_version, 0, release.manifests.len()),
        )];
        starting.extend(accepted.clone());
        let update = clusterversion::Update::Pass {
            version: &status_version,
            conditions: &starting,
            complete: false,
            accepted_risks: accepted_risks.as_deref(),
            observed: generation,
        };
        if let Err(e) = clusterversion::write_update(cluster, &options.apply.retry, update).await {
            warnings.push(format!("could not record the start of the update: {e}"));
        }
    }
    if !options.apply.dry_run && options.apply.health.wait != WaitMode::None {
        let created = applier.precreate_cluster_operators().await;
        if created > 0 {
            tracing::info!(
                created,
                "precreated ClusterOperators so that their operators can report status"
            );
        }
    }
    let done = std::sync::atomic::AtomicUsize::new(0);
    let counted = |r: &crate::apply::ManifestResult| {
        done.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        on_result(r)
    };
    let pass = async {
        match mode {
            Mode::Initializing => install(&applier, options, &counted).await,
            Mode::Updating => {
                let graph = run_level_graph(release);
                (
                    run_pass(&applier, &graph, options.parallelism, None, &counted).await,
                    1,
                )
            }
            // One round of the install's walk: a failure stops nothing after it, not even in
            // its node (adjacent run levels share one there).
            Mode::Reconciling => {
                let graph = flattened_graph(release);
                (
                    run_pass(&applier, &graph, options.parallelism, Some(None), &counted).await,
                    1,
                )
            }
        }
    };
    // While the pass runs: say what it waits for (heartbeat), and keep ClusterVersion's
    // Progressing message current.
    let tick = || {
        let waiting = applier.waiting();
        let done = done.load(std::sync::atomic::Ordering::Relaxed);
        if options.heartbeat.is_some() {
            let on = if !waiting.is_empty() {
                waiting
                    .iter()
                    .map(|f| f.message.as_str())
                    .collect::<Vec<_>>()
                    .join("; ")
            } else {
                let in_flight: Vec<String> = applier
                    .in_flight()
                    .iter()
                    .map(|&i| release.manifests[i].id.to_string())
                    .collect();
                if in_flight.is_empty() {
                    "the next install round".to_owned()
                } else {
                    name_list(&in_flight)
                }
            };
            tracing::warn!(
                "still working towards {status_version}: {done} of {} done; waiting on {on}",
                release.manifests.len(),
            );
        }
        let message =
            conditions::waiting_message(&status_version, done, release.manifests.len(), &waiting);
        async move {
            if in_progress {
                progressing(cluster, &options.apply.retry, message).await;
            }
        }
    };
    let every = options.heartbeat.unwrap_or(PROGRESS_EVERY);
    let (report, rounds) = heartbeat(pass, every, tick).await;
    let mut already_absent = Vec::new();
    for r in &report.results {
        let m = &release.manifests[r.index];
        for w in &r.warnings {
            warnings.push(format!("{} ({}): {w}", m.id, m.location));
        }
        if r.action == Action::AlreadyAbsent && update != UpdateType::MinorOrMajor {
            let earlier = record
                .as_ref()
                .and_then(|r| r.as_ref().ok())
                .and_then(|r| r.get(&m.id))
                .and_then(|e| e.completed.map(|t| (t, e.release.clone())));
            match earlier {
                // Deleted by an earlier pass: what a delete manifest is for.
                Some((at, under)) => {
                    tracing::debug!(manifest = %m.id, %at, release = %under, "delete manifest: deleted earlier");
                }
                None => {
                    tracing::info!(manifest = %m.id, location = %m.location, "delete manifest, but the object is already absent");
                    already_absent.push(m.id.to_string());
                }
            }
        }
    }
    let unmanaged: Vec<String> = report
        .results
        .iter()
        .filter(|r| r.action == Action::Unmanaged)
        .map(|r| release.manifests[r.index].id.to_string())
        .collect();
    if !unmanaged.is_empty() {
        warnings.push(format!(
            "{} objects left alone because ClusterVersion spec.overrides marks them unmanaged: {}",
            unmanaged.len(),
            name_list(&unmanaged)
        ));
    }
    for invalid in &spec.invalid {
        warnings.push(format!("ClusterVersion {invalid} (ignored)"));
    }
    if !already_absent.is_empty() {
        let why = if matches!(record, Some(Ok(_))) {
            "absent and never deleted by cvo on this cluster (per the deletion record)"
        } else {
            "already absent"
        };
        // One line, however many: each is logged with -v.
        warnings.push(format!(
            "{} delete manifests whose objects are {why} (each is logged with -v): {}",
            already_absent.len(),
            name_list(&already_absent)
        ));
    }
    let (pending, unknown, gone) = unfinished_deletions(&applier, &report).await;
    let (mut reappeared, mut deletions_completed) = (Vec::new(), Vec::new());
    if let Some(at) = options
        .record
        .as_ref()
        .filter(|_| deletes && !options.apply.dry_run)
    {
        let seen = deletions_seen(release, &report, &pending, &gone);
        let now = jiff::Timestamp::now();
        let updated = record::update(cluster, &options.apply.retry, at, |r| {
            remember(r, &seen, now, &status_version)
        })
        .await;
        match updated {
            Ok(Remembered { back, completed }) => {
                deletions_completed = completed;
                for (id, entry) in back {
                    warnings.push(format!(
                        "{id} exists again although cvo saw it deleted on {} (under release {}); it was deleted again",
                        entry.completed.map(|t| t.to_string()).unwrap_or_default(),
                        entry.release
                    ));
                    reappeared.push(id);
                }
            }
            Err(e) => warnings.push(format!(
                "{e}; after a restart cvo will not know which of these deletions it did"
            )),
        }
    }
    let pending_refs: Vec<&PendingDeletion> = pending.iter().collect();
    let upgradeable = upgradeable_with_overrides(
        conditions::upgradeable(
            &pending_refs,
            &unknown,
            options.stuck_after,
            jiff::Timestamp::now(),
        ),
        &spec,
    );
    let ever = cv.as_ref().is_some_and(clusterversion::ever_completed);
    let grace = Grace {
        elapsed: jiff::Timestamp::now()
            .duration_since(update_started)
            .unsigned_abs(),
        period: options.failing_after,
    };
    let mut conds = conditions::after_pass(release, &report.results, upgradeable, ever, grace);
    conds.extend(accepted);
    match spec.invalid_condition() {
        Some(invalid) => conds.push(invalid),
        // Valid again: say so where Invalid=True was.
        None if cv
            .as_ref()
            .and_then(|cv| clusterversion::condition(cv, "Invalid"))
            .is_some() =>
        {
            conds.push(Condition::new(
                "Invalid",
                ConditionStatus::False,
                "AsExpected",
                "",
            ));
        }
        None => {}
    }
    let cluster_version = if options.apply.dry_run {
        None
    } else {
        let summary = report.summary();
        let complete = summary.failed == 0 && summary.skipped == 0;
        Some(
            clusterversion::write_update(
                cluster,
                &options.apply.retry,
                clusterversion::Update::Pass {
                    version: &status_version,
                    conditions: &conds,
                    complete,
                    accepted_risks: accepted_risks.as_deref(),
                    observed: generation,
                },
            )
            .await
            .map_err(|e| e.to_string()),
        )
    };
    Ok(SyncOutcome {
        update,
        refused,
        report: Some(report),
        mode,
        rounds,
        conditions: conds,
        warnings,
        cluster_version,
        retries: options.apply.retry.retries() + cluster.discovery().retries() - retries_before,
        reappeared,
        deletions: pending,
        deletions_completed,
    })
}

/// How often a pass refreshes ClusterVersion's Progressing message when no heartbeat
/// interval is set.
const PROGRESS_EVERY: Duration = Duration::from_secs(10);

/// Awaits `work`, calling `tick` every `every` while it runs (a run stalled on the server still
/// says what it is waiting for). The futures `tick` returns run beside `work`, never in its way;
/// those still running when `work` ends are dropped.
async fn heartbeat<T, Fut>(
    work: impl std::future::Future<Output = T>,
    every: Duration,
    tick: impl Fn() -> Fut,
) -> T
where
    Fut: std::future::Future<Output = ()>,
{
    tokio::pin!(work);
    let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    let mut side = futures::stream::FuturesUnordered::new();
    loop {
        tokio::select! {
            out = &mut work => return out,
            _ = ticker.tick() => side.push(tick()),
            Some(()) = side.next(), if !side.is_empty() => {}
        }
    }
}

/// Writes Progressing=True with `message` to ClusterVersion; the write merges it into the
/// other conditions and skips an unchanged status. A failure is logged, the pass goes on.
async fn progressing(cluster: &Cluster, retry: &crate::apply::RetryPolicy, message: String) {
    let progressing = [Condition::new(
        "Progressing",
        ConditionStatus::True,
        "",
        message,
    )];
    let update = clusterversion::Update::Conditions {
        conditions: &progressing,
        observed: None,
    };
    if let Err(e) = clusterversion::write_update(cluster, retry, update).await {
        tracing::debug!(error = %e, "could not refresh the progress in ClusterVersion");
    }
}

/// An install: the flattened graph, then further rounds over what failed or was not reached
/// until nothing is left or the install timeout passes. Each round starts from a fresh view
/// of the cluster.
async fn install<F>(
    applier: &Applier<'_>,
    options: &SyncOptions,
    on_result: &F,
) -> (PassReport, u32)
where
    F: Fn(&crate::apply::ManifestResult),
{
    let deadline = tokio::time::Instant::now() + options.install_timeout;
    let graph = flattened_graph(applier.release());
    let report_final = |r: &crate::apply::ManifestResult| {
        if r.is_final() {
            on_result(r)
        }
    };
    let mut report = run_pass(
        applier,
        &graph,
        options.parallelism,
        Some(None),
        &report_final,
    )
    .await;
    let mut rounds = 1;
    // 1 s between rounds, doubling up to 30 s.
    let mut delays = crate::cluster::retry::Backoff::INSTALL_ROUND.delays();
    let mut delay = delays.next_wait();
    loop {
        let left = report.results.iter().filter(|r| !r.is_final()).count();
        if left == 0 || tokio::time::Instant::now() + delay >= deadline {
            break;
        }
        tracing::info!(round = rounds, left, retry_in = ?delay, "install: manifests not done yet; retrying");
        tokio::time::sleep(delay).await;
        delay = delays.next_wait();
        applier.new_pass();
        report = run_pass(
            applier,
            &graph,
            options.parallelism,
            Some(Some(&report)),
            &report_final,
        )
        .await;
        rounds += 1;
    }
    for r in report.results.iter().filter(|r| !r.is_final()) {
        on_result(r);
    }
    (report, rounds)
}

/// Every deletion the release asked for that the cluster has not finished, and those the
/// engine cannot tell about. A task's own answer counts when it is definite (deleted, absent,
/// in progress); a delete manifest that failed or was not reached is read back from the
/// cluster, so an object that still exists counts whatever its task did.
async fn unfinished_deletions(
    applier: &Applier<'_>,
    report: &PassReport,
) -> (Vec<PendingDeletion>, Vec<UnknownDeletion>, Vec<ObjectId>) {
    let release = applier.release();
    let mut pending: Vec<PendingDeletion> =
        report.pending_deletions().into_iter().cloned().collect();
    let unread: Vec<usize> = report
        .results
        .iter()
        .filter(|r| release.manifests[r.index].is_delete() && r.pending.is_none())
        .filter(|r| {
            !matches!(
                r.action,
                Action::Deleted | Action::AlreadyAbsent | Action::Unmanaged
            )
        })
        .map(|r| r.index)
        .collect();
    let (mut unknown, mut gone) = (Vec::new(), Vec::new());
    for (index, observed) in observe_all(applier, &unread).await {
        match observed {
            Observed::Gone => gone.push(release.manifests[index].id.clone()),
            Observed::Present(p) => pending.push(p),
            Observed::Unknown(error) => unknown.push(UnknownDeletion {
                id: release.manifests[index].id.clone(),
                error,
            }),
        }
    }
    (pending, unknown, gone)
}

/// What this pass saw of each delete manifest's object, for the deletion record.
#[derive(Debug)]
enum Saw {
    /// Deleted by this pass, and gone.
    Deleted,
    /// Being deleted (a deletionTimestamp), by this pass or an earlier one.
    Deleting(Option<jiff::Timestamp>),
    /// Absent.
    Gone,
}

fn deletions_seen(
    release: &Release,
    report: &PassReport,
    pending: &[PendingDeletion],
    gone: &[ObjectId],
) -> Vec<(ObjectId, Saw)> {
    let mut seen: Vec<(ObjectId, Saw)> = report
        .results
        .iter()
        .filter(|r| release.manifests[r.index].is_delete())
        .filter_map(|r| {
            let saw = match r.action {
                Action::Deleted => Saw::Deleted,
                Action::AlreadyAbsent => Saw::Gone,
                _ => return None,
            };
            Some((release.manifests[r.index].id.clone(), saw))
        })
        .collect();
    // Present without a deletionTimestamp means no deletion was requested (it failed first).
    seen.extend(
        pending
            .iter()
            .filter(|p| p.since.is_some())
            .map(|p| (p.id.clone(), Saw::Deleting(p.since))),
    );
    seen.extend(gone.iter().map(|id| (id.clone(), Saw::Gone)));
    seen
}

/// What [`remember`] learned.
#[derive(Debug, Default)]
struct Remembered {
    /// Objects that came back after a completed deletion, with the entry that recorded it.
    back: Vec<(ObjectId, record::Entry)>,
    /// Deletions completed now, and how long they took from the request.
    completed: Vec<(ObjectId, Duration)>,
}

/// Writes what was seen into the record.
fn remember(
    record: &mut Record,
    seen: &[(ObjectId, Saw)],
    now: jiff::Timestamp,
    release: &str,
) -> Remembered {
    let mut out = Remembered::default();
    for (id, saw) in seen {
        let open = record
            .get(id)
            .filter(|e| e.completed.is_none())
            .map(|e| e.requested);
        let noticed = match saw {
            Saw::Deleted => record.saw_deleted(id, now, release),
            Saw::Deleting(since) => record.saw_deleting(id, since.unwrap_or(now), release),
            Saw::Gone => {
                record.saw_gone(id, now, release);
                Seen::Noted
            }
        };
        if let Seen::Reappeared(entry) = noticed {
            out.back.push((id.clone(), entry));
        }
        let requested = match saw {
            Saw::Deleted => Some(open.unwrap_or(now)),
            Saw::Gone => open,
            Saw::Deleting(_) => None,
        };
        if let Some(requested) = requested {
            let took = now.duration_since(requested).unsigned_abs();
            out.completed.push((id.clone(), took));
        }
    }
    out
}

/// Delete manifests of the release whose objects are absent, and those that could not be
/// read (for the minor-update preconditions).
async fn delete_targets(applier: &Applier<'_>) -> (Vec<ObjectId>, Vec<ObjectId>) {
    let release = applier.release();
    let unmanaged = &applier.options().unmanaged;
    let deletes: Vec<usize> = (0..release.manifests.len())
        .filter(|&i| release.manifests[i].is_delete())
        .filter(|&i| !unmanaged.contains(&release.manifests[i].id))
        .collect();
    let (mut absent, mut unknown) = (Vec::new(), Vec::new());
    for (index, observed) in observe_all(applier, &deletes).await {
        let id = release.manifests[index].id.clone();
        match observed {
            Observed::Gone => absent.push(id),
            Observed::Present(_) => {}
            Observed::Unknown(_) => unknown.push(id),
        }
    }
    (absent, unknown)
}

/// Reads the objects of the delete manifests `indices` back, 16 at a time, in order.
async fn observe_all(applier: &Applier<'_>, indices: &[usize]) -> Vec<(usize, Observed)> {
    futures::stream::iter(indices.iter().copied())
        .map(|i| async move {
            (
                i,
                deletions::observe(applier, &applier.release().manifests[i]).await,
            )
        })
        .buffered(16)
        .collect()
        .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test(start_paused = true)]
    async fn a_long_pass_says_what_it_waits_for_every_interval() {
        let said = AtomicUsize::new(0);
        let work = tokio::time::sleep(Duration::from_secs(35));
        heartbeat(work, Duration::from_secs(10), || {
            said.fetch_add(1, Ordering::Relaxed);
            std::future::ready(())
        })
        .await;
        assert_eq!(said.load(Ordering::Relaxed), 3);
        let quick = async { 7 };
        assert_eq!(
            heartbeat(
                quick,
                Duration::from_secs(10),
                || -> std::future::Ready<()> { panic!("too early") }
            )
            .await,
            7
        );
        // What a tick starts runs beside the work and does not hold it up.
        let slow_ticks = AtomicUsize::new(0);
        let work = tokio::time::sleep(Duration::from_secs(25));
        let started = tokio::time::Instant::now();
        heartbeat(work, Duration::from_secs(10), || {
            slow_ticks.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep(Duration::from_secs(100))
        })
        .await;
        assert_eq!(started.elapsed(), Duration::from_secs(25));
        assert_eq!(slow_ticks.load(Ordering::Relaxed), 2);
    }
}
