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
//! not an install), so does a FeatureGate `cluster` that exists but cannot be read (which
//! manifests its gates leave out cannot be told: [`feature_gates`]), so does an object that
//! cannot be read while judging what the update enables implicitly ([`implicit`]), and a
//! delete manifest whose object cannot be read makes `Upgradeable` Unknown, which refuses a
//! minor update exactly as False does.
//!
//! An update that has not started yet (ClusterVersion's newest history entry is another
//! release) first has its preflight ([`crate::preflight`], in `risks`): a dry run of every
//! manifest and the checks of the risk catalogue; it goes ahead only when every risk that
//! applies is accepted ([`SyncOptions::accept_risks`], `spec.desiredUpdate.acceptRisks`), and
//! [`preflight`] runs that preflight alone.
//!
//! [`sync`] is a short sequence of named phases, each documented with what is true after it;
//! the walk of the graph with its progress lives in `pass`, the `Upgradeable` gate closed in
//! ClusterVersion as soon as a deletion is requested (before any wait) in `gate`, the deletion
//! bookkeeping (stale delete targets, unfinished deletions, the deletion record) in
//! `deletions`.

mod deletions;
pub mod feature_gates;
mod gate;
pub mod implicit;
mod pass;
pub mod report;
mod risks;

use std::time::Duration;

use kube::api::DynamicObject;

use crate::apply::{Action, Applier, Options, PassReport, PendingDeletion};
use crate::cluster::Cluster;
use crate::cluster::retry::Retries;
use crate::exit::Exit;
use crate::health::WaitMode;
use crate::release::capability::{self, Capabilities};
use crate::release::feature_gate::{EnabledGates, GateSource};
use crate::release::left_out::{Exclusions, exclusions};
use crate::release::{LeftOut, ObjectId, Release, Verification};
use crate::status::clusterversion::{self, ClusterVersionError, WriteOutcome};
use crate::status::conditions::{self, Grace};
use crate::status::record;
use crate::status::spec::{Spec, cluster_capabilities, upgradeable_with_overrides};
use crate::status::update::{Versions, name_list, update_type};
use crate::status::{Condition, ConditionStatus, Precondition, PreconditionFailure, UpdateType};
use deletions::{Absent, RecordRead, Settled};

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
    /// Risks the administrator accepted for this update besides the preconditions `force`
    /// overrides (`spec.desiredUpdate.acceptRisks`), recorded in its history entry.
    pub accepted_risks: Option<String>,
    /// The preflight risks accepted for this update (`--accept-risks`,
    /// `spec.desiredUpdate.acceptRisks`): an update proceeds when every risk that applies is
    /// among them ([`crate::preflight`]).
    pub accept_risks: Vec<String>,
    /// Where the deletion record lives (`status::record`); `None` keeps none, and then every
    /// absent delete target counts as deleted earlier (a minor update shipping its manifest is
    /// refused).
    pub record: Option<record::Location>,
    /// What the release the cluster is at applies, when this sync updates from it and it is
    /// at hand (the release the operator applied last; `cvo apply --updating-from`): an
    /// object it applies that the new release gates behind a disabled capability enables that
    /// capability implicitly ([`capability::implicitly_enabled`]). Without it, the release
    /// ClusterVersion's history names is read ([`Self::previous_release`]), else the cluster
    /// is asked ([`implicit`]).
    pub updating_from: Option<std::sync::Arc<capability::Gates>>,
    /// Reads the release ClusterVersion's newest history entry names, when this sync moves
    /// the cluster from it and [`Self::updating_from`] is not given ([`implicit`], judgement
    /// (a)); `None`: the cluster is asked (judgement (b)).
    pub previous_release: Option<std::sync::Arc<dyn implicit::PreviousRelease>>,
    /// The feature gates, when given (`--feature-gates`, `--feature-gates-file`); `None`:
    /// the cluster's FeatureGate `cluster` says ([`feature_gates`]).
    pub feature_gates: Option<GateSource>,
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
            accepted_risks: None,
            accept_risks: Vec::new(),
            record: None,
            updating_from: None,
            previous_release: None,
            feature_gates: None,
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
    /// The preflight of the update (`None` for an install, and for an update already under
    /// way): every risk, whether it applies and whether it was accepted.
    pub preflight: Option<crate::preflight::Assessment>,
    pub report: Option<PassReport>,
    pub mode: Mode,
    /// When each pass over the graph ran (1 for updates, one per round of an install; none
    /// when refused), its nodes and tasks (`--timings`).
    pub passes: Vec<crate::apply::PassTimeline>,
    pub conditions: Vec<Condition>,
    pub warnings: Vec<String>,
    /// What happened to ClusterVersion status (`None` for dry runs, and for a refused sync
    /// that records no `ReleaseAccepted`).
    pub cluster_version: Option<Result<WriteOutcome, StatusNotWritten>>,
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
    /// The cluster's capabilities for this release (what decided `excluded` results), as
    /// written to ClusterVersion `status.capabilities`.
    pub capabilities: Capabilities,
    /// The feature gates enabled for this release (what decided `excluded` results with the
    /// capabilities).
    pub feature_gates: EnabledGates,
    /// What the release leaves out on this cluster, counted by reason: the loader's filters,
    /// then the feature gates and capabilities above.
    pub left_out: LeftOut,
}

impl SyncOutcome {
    /// Passes over the graph: 1 for updates, the rounds an install took, 0 when refused.
    pub fn rounds(&self) -> usize {
        self.passes.len()
    }

    /// How the sync ended (README, "Exit codes"): [`Exit::Refused`] when a precondition
    /// refused it, [`Exit::Failed`] when a manifest failed or was skipped or ClusterVersion
    /// status could not be written (the cluster would not say what was applied),
    /// [`Exit::InProgress`] when deletions are unfinished or not known to be finished
    /// (`Upgradeable` not True for another reason than overrides), else [`Exit::Success`].
    pub fn exit(&self) -> Exit {
        let Some(report) = &self.report else {
            return Exit::Refused;
        };
        let summary = report.summary();
        let upgradeable = self.conditions.iter().find(|c| c.type_ == "Upgradeable");
        let status_not_written = matches!(self.cluster_version, Some(Err(_)));
        if summary.failed > 0 || summary.skipped > 0 || status_not_written {
            Exit::Failed
        } else if upgradeable.is_some_and(|c| {
            // Overrides alone are the administrator's choice, not unfinished work.
            c.status != ConditionStatus::True && c.reason != crate::status::spec::OVERRIDES_REASON
        }) {
            Exit::InProgress
        } else {
            Exit::Success
        }
    }

    /// [`Self::exit`] as the process exit code.
    pub fn exit_code(&self) -> u8 {
        self.exit() as u8
    }
}

/// Why a sync did not run: nothing was applied.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    /// ClusterVersion (or its kind) could not be read: install and update cannot be told
    /// apart (fail closed: an unreadable cluster is not an install).
    #[error(transparent)]
    ClusterVersion(#[from] ClusterVersionError),
    /// The cluster's FeatureGate (or the given one) could not be read: which manifests the
    /// release's feature gates leave out cannot be told, and nothing was applied.
    #[error(transparent)]
    FeatureGate(#[from] feature_gates::FeatureGateError),
    /// An object of the release could not be read while judging which capabilities the
    /// update enables implicitly ([`implicit`]): nothing was applied.
    #[error(transparent)]
    Capabilities(#[from] implicit::CapabilityError),
}

/// ClusterVersion status could not be written; the sync itself went on (its report says what
/// was applied). Two are equal when they say the same.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct StatusNotWritten(#[from] ClusterVersionError);

impl PartialEq for StatusNotWritten {
    fn eq(&self, other: &Self) -> bool {
        self.to_string() == other.to_string()
    }
}

/// Runs one sync of `release` against `cluster`; `on_result` sees each manifest's final
/// result (an install reports a failure only once no round is left to retry it).
///
/// The phases, in order, each a type of this module: `Observed` (what the cluster is at),
/// `Checked` (the preconditions), for an update not under way yet its preflight (`risks`:
/// a dry run of every manifest, the risks and which are accepted; a refusal by a
/// precondition or a risk ends the sync in `refuse`), `Announced` (the
/// update made visible), the pass with its progress (`pass`), the deletions read back and
/// recorded (`deletions::settle`), and the `Concluded` status.
///
/// # Errors
///
/// [`SyncError::ClusterVersion`] when ClusterVersion (or the discovery of its kind) cannot be
/// read: install and update cannot be told apart, and nothing was applied;
/// [`SyncError::FeatureGate`] when the feature gates cannot be told, [`SyncError::Capabilities`]
/// when what the update enables implicitly cannot be told (nothing applied either). Everything after
/// that is reported in the [`SyncOutcome`], not as an error: failed manifests in its report,
/// a refusal in `refused`, a status that could not be written in `cluster_version`, a
/// deletion record that could not be read or written in `warnings`.
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
    let pre = Observed::read(cluster, release, options).await?;
    let done = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let (apply_options, gate) = pre.apply_options(cluster, release, options, &done);
    let applier = Applier::new(cluster.clone(), release, apply_options);
    let mut checked = Checked::run(cluster, &applier, options, &pre).await;
    // The preflight of an update not under way yet; in a dry run its pass is the plan.
    let mut planned = None;
    let mut preflight = None;
    if pre.gated() {
        let assessed = risks::assess(
            cluster,
            release,
            options,
            applier.options(),
            (&pre, &checked),
            |r: &crate::apply::ManifestResult| {
                if options.apply.dry_run {
                    on_result(r);
                }
            },
        )
        .await;
        checked.refused = risks::refusals(&checked.refused, &pre, &assessed.assessment);
        if options.apply.dry_run {
            planned = Some((assessed.report, assessed.passes));
        }
        preflight = Some(assessed.assessment);
    }
    if !checked.refused.is_empty() && !options.force {
        return Ok(refuse(cluster, options, pre, checked, preflight).await);
    }
    let announced = Announced::run(
        cluster,
        &applier,
        options,
        &pre,
        &mut checked,
        preflight.as_ref(),
    )
    .await;
    let (report, passes) = match planned {
        Some(planned) => planned,
        None => {
            pass::run(
                &applier,
                options,
                pre.mode,
                pass::Progress {
                    version: &pre.version,
                    gate: gate.as_deref(),
                    done: &done,
                },
                on_result,
            )
            .await
        }
    };
    let mut warnings = checked.warnings;
    warnings.extend(pass_warnings(release, &report, &pre, &checked.record));
    let settled = deletions::settle(cluster, &applier, &report, options, &pre.version).await;
    warnings.extend(settled.warnings.iter().cloned());
    let after = AfterPass {
        release,
        options,
        pre: &pre,
        announced: &announced,
        report: &report,
        settled: &settled,
    };
    let concluded = Concluded::run(cluster, &after).await;
    Ok(SyncOutcome {
        update: pre.update,
        refused: checked.refused,
        preflight,
        report: Some(report),
        mode: pre.mode,
        passes,
        conditions: concluded.conditions,
        warnings,
        cluster_version: concluded.cluster_version,
        retries: options.apply.retry.retries() + cluster.discovery().retries() - retries_before,
        reappeared: settled.reappeared,
        deletions: settled.pending,
        deletions_completed: settled.completed,
        left_out: pre.left_out,
        capabilities: pre.capabilities,
        feature_gates: pre.feature_gates,
    })
}

/// The preflight of an update to `release`, and nothing else: what `cvo operator` runs for
/// `spec.desiredUpdate.mode: Preflight` ([`crate::preflight`]). It reads the cluster and
/// dry-runs every manifest; nothing is written. `Ok(None)`: the cluster has no completed
/// release, so there is no update to check (an install).
///
/// # Errors
///
/// What [`sync`] fails with before anything is applied: ClusterVersion, the feature gates or
/// an object judged for implicit capabilities could not be read.
pub async fn preflight(
    cluster: &Cluster,
    release: &Release,
    options: &SyncOptions,
) -> Result<Option<crate::preflight::Assessment>, SyncError> {
    let mut options = options.clone();
    options.apply.dry_run = true;
    let pre = Observed::read(cluster, release, &options).await?;
    if pre.update == UpdateType::Install {
        return Ok(None);
    }
    let done = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let (apply_options, _) = pre.apply_options(cluster, release, &options, &done);
    let applier = Applier::new(cluster.clone(), release, apply_options);
    let checked = Checked::run(cluster, &applier, &options, &pre).await;
    let assessed = risks::assess(
        cluster,
        release,
        &options,
        applier.options(),
        (&pre, &checked),
        |_| {},
    )
    .await;
    Ok(Some(assessed.assessment))
}

/// Phase 1, observed: what the cluster is at, from its ClusterVersion.
///
/// After it, the ClusterVersion is known to exist or known to be absent — one that cannot be
/// read ends the sync before it ([`SyncError`]; fail closed: an unreadable cluster is not an
/// install) — and so are the update type, the mode, the spec's overrides, the feature gates
/// (one FeatureGate that cannot be read ends the sync too) and the cluster's capabilities,
/// with those the update enables implicitly ([`implicit`]; an object that cannot be read for
/// it ends the sync too), and what the gates and capabilities leave out of this release.
struct Observed {
    cv: Option<DynamicObject>,
    /// The spec generation this sync acts on: its status writes answer it.
    generation: Option<i64>,
    update: UpdateType,
    spec: Spec,
    /// The cluster's capabilities: enabled by the spec, before, or implicitly by this update.
    capabilities: Capabilities,
    /// What is wrong with `spec.capabilities` for this release (warnings).
    capability_problems: Vec<String>,
    /// What this update enabled implicitly, and how that was judged ([`implicit`]), with
    /// what the user should know of it (warnings).
    implicit: implicit::Judgement,
    /// The feature gates enabled for this release ([`feature_gates`]).
    feature_gates: EnabledGates,
    /// Manifests the feature gates or the capabilities leave out, with why.
    excluded: Exclusions,
    /// What the release leaves out, counted by reason (the loader's filters and `excluded`).
    left_out: LeftOut,
    /// The cluster's Upgradeable before this sync, overrides included (they make the cluster
    /// not upgradeable from the pass that sees them on).
    previous_upgradeable: Option<Condition>,
    mode: Mode,
    /// The release as status names it ([`conditions::version_text`]).
    version: String,
}

impl Observed {
    async fn read(
        cluster: &Cluster,
        release: &Release,
        options: &SyncOptions,
    ) -> Result<Self, SyncError> {
        let cv = clusterversion::read(cluster, &options.apply.retry).await?;
        let feature_gates = feature_gates::enabled(
            cluster,
            &options.apply.retry,
            release,
            options.feature_gates.as_ref(),
        )
        .await?;
        let generation = cv.as_ref().and_then(|cv| cv.metadata.generation);
        let current = cv.as_ref().and_then(clusterversion::current_version);
        let update = update_type(current.as_ref(), release.version());
        let spec = cv.as_ref().map(Spec::of).unwrap_or_default();
        // An install: the capabilities are those the release's own ClusterVersion asks for
        // (this pass creates it), never "everything" for want of a spec.
        let shipped = cv
            .is_none()
            .then(|| clusterversion::shipped_object(release))
            .flatten();
        let (mut capabilities, capability_problems) = match &shipped {
            Some(own) => cluster_capabilities(&release.capabilities, &Spec::of(own), Some(own)),
            None => cluster_capabilities(&release.capabilities, &spec, cv.as_ref()),
        };
        let version = conditions::version_text(release);
        let implicit = implicit::judge(
            cluster,
            release,
            options,
            cv.as_ref(),
            &capabilities,
            &feature_gates,
            &version,
        )
        .await?;
        if let Some(by) = &implicit.by_update {
            capabilities.enable_implicitly(by.enabled.clone());
        }
        let excluded = exclusions(release, &capabilities, Some(&feature_gates));
        let left_out = LeftOut::counted(release, None, &excluded);
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
            None if cv
                .as_ref()
                .is_some_and(|cv| clusterversion::completed(cv, &version)) =>
            {
                Mode::Reconciling
            }
            None => Mode::Updating,
        };
        Ok(Observed {
            cv,
            generation,
            update,
            spec,
            capabilities,
            capability_problems,
            implicit,
            feature_gates,
            excluded,
            left_out,
            previous_upgradeable,
            mode,
            version,
        })
    }

    /// The per-manifest options of this sync — an install's health rules, the spec's
    /// unmanaged objects, and (not in a dry run) the `Upgradeable` gate closed as soon as a
    /// deletion is requested — and that gate, which also writes the pass's progress (`gate`;
    /// `done` counts the manifests the pass has done, for its Progressing message). The gate
    /// finds ClusterVersion when it writes: one the release creates gets it too.
    fn apply_options(
        &self,
        cluster: &Cluster,
        release: &Release,
        options: &SyncOptions,
        done: &std::sync::Arc<std::sync::atomic::AtomicUsize>,
    ) -> (Options, Option<std::sync::Arc<gate::Gate>>) {
        let mut apply = options.apply.clone();
        apply.health.initializing = self.mode == Mode::Initializing;
        apply.unmanaged = self.spec.unmanaged.clone();
        apply.excluded = self
            .excluded
            .iter()
            .map(|(i, (_, why))| (*i, why.clone()))
            .collect();
        let gate = (!options.apply.dry_run).then(|| {
            gate::Gate::new(
                gate::Inputs {
                    cluster,
                    version: &self.version,
                    total: release.manifests.len(),
                    done: done.clone(),
                    in_progress: self.writes_progress(options),
                    spec: &self.spec,
                    stored: self
                        .cv
                        .as_ref()
                        .and_then(|cv| clusterversion::condition(cv, "Upgradeable")),
                },
                &options.apply.retry,
                options.stuck_after,
            )
        });
        apply.on_deletion_requested = gate.as_ref().map(gate::Gate::hook);
        (apply, gate)
    }

    /// The update needs a preflight: it is an update (not an install) that is not under way
    /// (ClusterVersion's newest history entry is another release).
    fn gated(&self) -> bool {
        self.update != UpdateType::Install
            && self
                .cv
                .as_ref()
                .and_then(|cv| cv.data.get("status"))
                .is_none_or(|status| {
                    clusterversion::newest_version(status) != Some(self.version.as_str())
                })
    }

    /// The release or the cluster has capabilities: ClusterVersion gets
    /// `status.capabilities` and the `ImplicitlyEnabledCapabilities` condition (a release and
    /// cluster without any get neither).
    fn capabilities_in_play(&self) -> bool {
        !self.capabilities.known.is_empty()
            || !self.capabilities.enabled.is_empty()
            || self.spec.capabilities.is_some()
    }

    /// The pass writes Progressing: not a dry run, and this release is not the completed one
    /// (an install — whose ClusterVersion may only come with the release — or an update).
    fn writes_progress(&self, options: &SyncOptions) -> bool {
        !options.apply.dry_run
            && self
                .cv
                .as_ref()
                .is_none_or(|cv| !clusterversion::completed(cv, &self.version))
    }

    /// ClusterVersion does not record this release as completed (an install or update under
    /// way): progress is written.
    fn in_progress(&self, options: &SyncOptions) -> bool {
        !options.apply.dry_run
            && self
                .cv
                .as_ref()
                .is_some_and(|cv| !clusterversion::completed(cv, &self.version))
    }
}

/// Phase 2, the preconditions: the deletion record and, for a minor or major update, the
/// delete manifests' objects are read, and [`Precondition::check`] decides.
///
/// After it, `refused` holds every precondition that refuses the update. Fail closed: an
/// Upgradeable that is Unknown refuses a minor update exactly as False does; a deletion record
/// that cannot be read counts every absent delete target as stale; a delete target that cannot
/// be read refuses.
struct Checked {
    record: RecordRead,
    refused: Vec<PreconditionFailure>,
    /// The warnings so far (a record that cannot be read, delete targets never deleted).
    warnings: Vec<String>,
}

impl Checked {
    async fn run(
        cluster: &Cluster,
        applier: &Applier<'_>,
        options: &SyncOptions,
        pre: &Observed,
    ) -> Self {
        let release = applier.release();
        let record = deletions::read_record(cluster, release, options).await;
        // Stale delete manifests only refuse minor/major updates: looked up only then.
        let absent = Absent::before(applier, &pre.update, &record).await;
        let record_error = record
            .as_ref()
            .and_then(|r| r.as_ref().err())
            .map(ToString::to_string);
        let (current_target, previous) = pre
            .cv
            .as_ref()
            .map(clusterversion::current_and_previous)
            .unwrap_or_default();
        let refused = Precondition {
            update: pre.update.clone(),
            upgradeable: pre.previous_upgradeable.as_ref(),
            stale_deletes: &absent.stale,
            record_error: record_error.as_deref(),
            unknown_deletes: &absent.unreadable,
            versions: Versions {
                current: current_target.as_ref(),
                previous: previous.as_ref(),
                target: release.version(),
            },
        }
        .check();
        let warnings = record_error
            .into_iter()
            .chain(absent.never_deleted_warning())
            .collect();
        Checked {
            record,
            refused,
            warnings,
        }
    }
}

/// The end of a refused sync: nothing is applied. With [`SyncOptions::release_accepted`]
/// and a ClusterVersion (not in a dry run), only `ReleaseAccepted=False` with the
/// precondition's reason is written; the outcome's conditions are the previous Upgradeable
/// and one `Failing=True` per refusal.
async fn refuse(
    cluster: &Cluster,
    options: &SyncOptions,
    pre: Observed,
    checked: Checked,
    preflight: Option<crate::preflight::Assessment>,
) -> SyncOutcome {
    let cluster_version = if options.release_accepted && pre.cv.is_some() && !options.apply.dry_run
    {
        let accepted = conditions::release_accepted(&pre.version, &checked.refused, false);
        let written = clusterversion::write_update(
            cluster,
            &options.apply.retry,
            clusterversion::Update::Conditions {
                conditions: std::slice::from_ref(&accepted),
                observed: pre.generation,
            },
        )
        .await;
        Some(written.map_err(StatusNotWritten::from))
    } else {
        None
    };
    let mut conds: Vec<Condition> = pre.previous_upgradeable.into_iter().collect();
    conds.extend(checked.refused.iter().map(|f| {
        Condition::new(
            "Failing",
            ConditionStatus::True,
            f.reason,
            f.message.clone(),
        )
    }));
    SyncOutcome {
        update: pre.update,
        refused: checked.refused,
        preflight,
        report: None,
        mode: pre.mode,
        passes: Vec::new(),
        conditions: conds,
        warnings: checked.warnings,
        cluster_version,
        retries: Retries::default(),
        reappeared: Vec::new(),
        deletions: Vec::new(),
        deletions_completed: Vec::new(),
        left_out: pre.left_out,
        capabilities: pre.capabilities,
        feature_gates: pre.feature_gates,
    }
}

/// Phase 3, the announcement of an accepted (or forced) sync.
///
/// After it, an update or unfinished install in a cluster with a ClusterVersion is visible
/// before its first manifest — desired, a Partial history entry with its real start time,
/// Progressing=True (a failed write is a warning: the pass still runs) — and, when health is
/// waited for, the release's ClusterOperators exist so that their operators can report. The
/// preconditions a `--force` overrode are warnings, and recorded as the history entry's
/// accepted risks.
struct Announced {
    /// The refusals `--force` overrode, for the history entry.
    accepted_risks: Option<String>,
    /// `ReleaseAccepted=True`, when the sync records it.
    accepted: Option<Condition>,
    /// When the update started (the history entry's start, or now).
    update_started: jiff::Timestamp,
}

impl Announced {
    async fn run(
        cluster: &Cluster,
        applier: &Applier<'_>,
        options: &SyncOptions,
        pre: &Observed,
        checked: &mut Checked,
        preflight: Option<&crate::preflight::Assessment>,
    ) -> Self {
        let release = applier.release();
        let refused = &checked.refused;
        let warnings = &mut checked.warnings;
        // A forced update records what it overrode in its history entry, as the CVO does.
        let accepted_risks = (!refused.is_empty()).then(|| {
            refused
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; ")
        });
        // And, as the CVO does, a release image whose signature did not verify.
        let unverified = match &release.verification {
            Verification::Forced(risk) => Some(risk.clone()),
            _ => None,
        };
        // And the preflight risks that apply and were accepted, as OpenShift words them.
        let accepted_by_admin = preflight.and_then(|a| {
            let names: Vec<&str> = a.applying().filter(|r| r.accepted).map(|r| r.name).collect();
            (!names.is_empty()).then(|| {
                format!(
                    "The target release {} is exposed to the risks [{}] which were all explicitly accepted by the cluster administrator.",
                    if a.image.is_empty() { &a.version } else { &a.image },
                    names.join(",")
                )
            })
        });
        let accepted_risks = [
            unverified,
            accepted_risks,
            accepted_by_admin,
            options.accepted_risks.clone(),
        ]
        .into_iter()
        .flatten()
        .reduce(|a, b| format!("{a}; {b}"));
        warnings.extend(
            refused
                .iter()
                .map(|f| format!("precondition overridden by --force: {f}")),
        );
        if pre.cv.is_none() && !options.apply.dry_run && !ships_cluster_version(release) {
            warnings.push(format!(
                "the cluster has no ClusterVersion {}: without its history every apply is an install (all manifests at once, failures retried); ship one in the release (see manifests-example) so that updates keep the run-level order",
                clusterversion::NAME
            ));
        }
        let accepted = options
            .release_accepted
            .then(|| conditions::release_accepted(&pre.version, refused, true));
        let update_started = pre
            .cv
            .as_ref()
            .and_then(|cv| clusterversion::started(cv, &pre.version))
            .unwrap_or_else(jiff::Timestamp::now);
        let in_progress = pre.in_progress(options);
        let announced = Announced {
            accepted_risks,
            accepted,
            update_started,
        };
        if in_progress && let Err(e) = announced.write_start(cluster, release, options, pre).await {
            warnings.push(format!("could not record the start of the update: {e}"));
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
        announced
    }

    /// Writes desired, the Partial history entry and Progressing=True at 0 done; the other
    /// conditions stay as they are (the write merges these into them).
    async fn write_start(
        &self,
        cluster: &Cluster,
        release: &Release,
        options: &SyncOptions,
        pre: &Observed,
    ) -> Result<WriteOutcome, ClusterVersionError> {
        let mut starting = vec![Condition::new(
            "Progressing",
            ConditionStatus::True,
            "",
            conditions::progress_message(&pre.version, 0, release.manifests.len()),
        )];
        starting.extend(self.accepted.clone());
        let update = clusterversion::Update::Pass {
            version: &pre.version,
            image: release.image.as_deref().unwrap_or(""),
            version_hash: &release.version_hash,
            verified: release.verification == Verification::Verified,
            conditions: &starting,
            complete: false,
            accepted_risks: self.accepted_risks.as_deref(),
            observed: pre.generation,
            started: Some(self.update_started),
            capabilities: pre.capabilities_in_play().then_some(&pre.capabilities),
        };
        clusterversion::write_update(cluster, &options.apply.retry, update).await
    }
}

/// The release ships `ClusterVersion version` itself (as manifests-example does): a cluster
/// without one gets it from this sync, so its absence is no reason to warn.
fn ships_cluster_version(release: &Release) -> bool {
    clusterversion::shipped(release).is_some()
}

/// What the pass's results tell the user, in order: each manifest's warnings, the objects
/// left alone as unmanaged, the spec's invalid overrides, delete manifests whose objects
/// were already absent.
fn pass_warnings(
    release: &Release,
    report: &PassReport,
    pre: &Observed,
    record: &RecordRead,
) -> Vec<String> {
    let mut warnings = Vec::new();
    for r in &report.results {
        let m = &release.manifests[r.index];
        for w in &r.warnings {
            warnings.push(format!("{} ({}): {w}", m.id, m.location));
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
    for invalid in &pre.spec.invalid {
        warnings.push(format!("ClusterVersion {invalid} (ignored)"));
    }
    for problem in &pre.capability_problems {
        warnings.push(format!("ClusterVersion {problem}"));
    }
    warnings.extend(pre.implicit.warnings.iter().cloned());
    warnings.extend(deletions::already_absent_warning(
        release,
        report,
        &pre.update,
        record,
    ));
    warnings
}

/// Phase 5, the final status.
///
/// After it, the conditions are derived from the pass and the deletions read back — fail
/// closed: a deletion that is unfinished, stuck or cannot be read makes Upgradeable False or
/// Unknown, and overrides make it False — and, unless this is a dry run, ClusterVersion
/// status holds them with the history entry (Completed only when nothing failed or was
/// skipped); a write that failed is in `cluster_version`.
struct Concluded {
    conditions: Vec<Condition>,
    cluster_version: Option<Result<WriteOutcome, StatusNotWritten>>,
}

/// What the final status is derived from: the phases before it.
struct AfterPass<'a> {
    release: &'a Release,
    options: &'a SyncOptions,
    pre: &'a Observed,
    announced: &'a Announced,
    report: &'a PassReport,
    settled: &'a Settled,
}

impl Concluded {
    async fn run(cluster: &Cluster, after: &AfterPass<'_>) -> Self {
        let AfterPass {
            release,
            options,
            pre,
            announced,
            report,
            ..
        } = *after;
        let conditions = Self::conditions(after);
        let cluster_version = if options.apply.dry_run {
            None
        } else {
            let summary = report.summary();
            let complete = summary.failed == 0 && summary.skipped == 0;
            let update = clusterversion::Update::Pass {
                version: &pre.version,
                image: release.image.as_deref().unwrap_or(""),
                version_hash: &release.version_hash,
                verified: release.verification == Verification::Verified,
                conditions: &conditions,
                complete,
                accepted_risks: announced.accepted_risks.as_deref(),
                observed: pre.generation,
                started: Some(announced.update_started),
                capabilities: pre.capabilities_in_play().then_some(&pre.capabilities),
            };
            Some(
                clusterversion::write_update(cluster, &options.apply.retry, update)
                    .await
                    .map_err(StatusNotWritten::from),
            )
        };
        Concluded {
            conditions,
            cluster_version,
        }
    }

    /// Upgradeable from the deletions, the pass's conditions, ReleaseAccepted, and Invalid
    /// from the spec (False again where it was True).
    fn conditions(after: &AfterPass<'_>) -> Vec<Condition> {
        let AfterPass {
            release,
            options,
            pre,
            announced,
            report,
            settled,
        } = *after;
        let pending_refs: Vec<&PendingDeletion> = settled.pending.iter().collect();
        let upgradeable = upgradeable_with_overrides(
            conditions::upgradeable(
                &pending_refs,
                &settled.unknown,
                options.stuck_after,
                jiff::Timestamp::now(),
            ),
            &pre.spec,
        );
        let completed = pre
            .cv
            .as_ref()
            .and_then(clusterversion::current_version)
            .map(|v| v.to_string());
        let standing = conditions::Standing {
            completed: completed.as_deref(),
            reconciling: pre.mode == Mode::Reconciling,
        };
        let grace = Grace {
            elapsed: jiff::Timestamp::now()
                .duration_since(announced.update_started)
                .unsigned_abs(),
            period: options.failing_after,
        };
        let mut conds =
            conditions::after_pass(release, &report.results, upgradeable, standing, grace);
        conds.extend(announced.accepted.clone());
        if pre.capabilities_in_play() {
            conds.push(conditions::implicitly_enabled_by(
                &pre.capabilities,
                pre.implicit.by_update.as_ref(),
            ));
        }
        match pre.spec.invalid_condition() {
            Some(invalid) => conds.push(invalid),
            // Valid again: say so where Invalid=True was.
            None if pre
                .cv
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
        conds
    }
}
