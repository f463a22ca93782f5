//! One full pass of the operator: what `spec.desiredUpdate.image` asks — a release to pull and
//! switch to ([`Puller`]), or an image to move the operator to ([`SelfUpdate`]) — then the sync
//! ([`crate::sync::sync`]), then its metrics, events and log.

use std::collections::BTreeSet;

use kube::api::DynamicObject;
use tokio::time::Instant;

use super::drift::Known;
use super::metrics::Metrics;
use super::pull::{Lookup, Meanwhile, Outcome, PullError, Puller, Switch, cluster_at};
use super::self_update::{Decision, IMAGE_CONFLICT, SelfUpdate};
use super::status::{
    VERIFY_VERSION, forced_by_spec, not_progressing, record_status, version_mismatch,
    write_move_conditions,
};
use super::{Options, events};
use crate::apply::Action;
use crate::cluster::Cluster;
use crate::release::Release;
use crate::status::Condition;
use crate::status::clusterversion;
use crate::status::conditions::{RELEASE_ACCEPTED, release_accepted};
use crate::status::spec::{DesiredUpdate, Spec, exposed_risks_accepted};
use crate::sync::{SyncOptions, SyncOutcome, sync};
use crate::timings::Timings;

/// How a full pass ended.
#[derive(Debug, Default)]
pub(super) struct PassEnd {
    /// The release was accepted (the pass ran).
    pub accepted: bool,
    /// The `metadata.generation` of the ClusterVersion it read.
    pub generation: Option<i64>,
    /// Nothing was applied, and nothing is to be repaired until a pass says otherwise: the
    /// operator handed over to another image, or its release would move it away from the one
    /// asked for.
    pub paused: bool,
    /// Manifests left alone until the next pass: ClusterVersion overrides mark their objects
    /// unmanaged, or their capabilities are not enabled.
    pub unmanaged: BTreeSet<usize>,
    /// The leader switches to another release: the one `spec.desiredUpdate.image` names,
    /// pulled, or back to its start release (nothing was applied by this pass).
    pub switch: Option<Switch>,
    /// The feature gates the sync read (`None`: it read none).
    pub feature_gates: Option<crate::release::feature_gate::EnabledGates>,
}

/// What a full pass works with: the operator and the release it leads with.
pub(super) struct Passes<'a> {
    pub cluster: &'a Cluster,
    pub release: &'a Release,
    pub options: &'a Options,
    pub metrics: &'a Metrics,
    pub known: &'a Known,
    pub mover: &'a SelfUpdate,
    pub puller: &'a Puller,
    /// The release led with was pulled (it is not the one the operator started with).
    pub pulled: bool,
}

/// What the start of a pass decided: how to sync, and what to record of the self-update.
struct Decided {
    sync_options: SyncOptions,
    generation: Option<i64>,
    /// What the operator records besides the sync's status: the self-update, `Invalid`.
    move_conditions: Vec<Condition>,
    /// The ClusterVersion the pass started from.
    cv: Option<DynamicObject>,
    /// `spec.desiredUpdate` with `mode: Preflight`: checked after the sync.
    preflight: Option<DesiredUpdate>,
}

impl Decided {
    /// `Progressing=False` with `reason`: the pass applies nothing of release `version` (no
    /// Progressing an earlier leader wrote stays).
    fn idle(&self, version: &str, reason: &str) -> Condition {
        not_progressing(self.cv.as_ref(), &format!("release {version}"), reason)
    }
}

impl Passes<'_> {
    /// One full pass: first what `spec.desiredUpdate.image` asks of the operator itself, then
    /// the sync (unless the operator handed over to another image). Fails closed: a
    /// ClusterVersion that cannot be read starts no pass (counted as `error`).
    pub(super) async fn full_pass(&self, trigger: &'static str) -> PassEnd {
        let started = Instant::now();
        let (writes_before, sent_before) = (self.metrics.writes(), self.metrics.sent());
        let decided = match self.decide(trigger, started).await {
            Ok(decided) => decided,
            Err(end) => return end,
        };
        let Decided {
            sync_options,
            generation,
            mut move_conditions,
            cv,
            preflight,
        } = decided;
        let (release, metrics) = (self.release, self.metrics);
        let outcome = sync(self.cluster, release, &sync_options, |r| {
            metrics.count_action(&metrics.manifests, r.action);
            if r.action == Action::Failed {
                let m = &release.manifests[r.index];
                tracing::warn!(manifest = %m.id, location = %m.location, error = ?r.error, "manifest failed");
            }
        })
        .await;
        let retry = &self.options.sync.apply.retry;
        if let Ok(o) = &outcome
            && o.report.is_none()
        {
            // Refused: nothing is applied, and Progressing says so.
            let version = crate::status::conditions::version_text(release);
            let refusal = release_accepted(&version, &o.refused, false);
            move_conditions.retain(|c| c.type_ != "Progressing");
            move_conditions.push(not_progressing(
                cv.as_ref(),
                &format!("release {version}"),
                &refusal.reason,
            ));
        }
        write_move_conditions(self.cluster, retry, &move_conditions, generation).await;
        if let Some(request) = &preflight {
            self.preflight(request).await;
        }
        // The preflight of an update this pass started (or refused) is recorded as well.
        if let Ok(o) = &outcome
            && let Some(assessment) = &o.preflight
            && let Err(e) = crate::preflight::status::write(self.cluster, retry, assessment).await
        {
            tracing::error!(error = %e, "the update's preflight not recorded in ClusterVersion");
        }
        let end = |accepted| PassEnd {
            accepted,
            generation,
            ..PassEnd::default()
        };
        let outcome = match outcome {
            Ok(o) => o,
            Err(e) => {
                tracing::error!(error = %e, "full pass failed");
                metrics.pass(trigger, "error", started.elapsed().as_secs_f64());
                return end(false);
            }
        };
        let feature_gates = Some(outcome.feature_gates.clone());
        if outcome.report.is_none() {
            self.refused(&outcome, trigger, started).await;
            return PassEnd {
                feature_gates,
                ..end(false)
            };
        }
        let writes = metrics.writes().saturating_sub(writes_before);
        let sent = metrics.sent().saturating_sub(sent_before);
        metrics
            .pass_writes
            .set(i64::try_from(writes).unwrap_or(i64::MAX));
        metrics
            .pass_requests
            .set(i64::try_from(sent).unwrap_or(i64::MAX));
        PassEnd {
            unmanaged: self.applied(&outcome, trigger, started, writes).await,
            feature_gates,
            ..end(true)
        }
    }

    /// Reads ClusterVersion and decides what `spec.desiredUpdate` asks (a version alone is
    /// the image `availableUpdates` or `history` gives it; an invalid request is ignored and
    /// reported as `Invalid`); `Err` is how the pass ended already: ClusterVersion unreadable,
    /// handed over, a conflict of images, or a release that is not the version asked for.
    async fn decide(&self, trigger: &'static str, started: Instant) -> Result<Decided, PassEnd> {
        let metrics = self.metrics;
        let version = crate::status::conditions::version_text(self.release);
        let cv = match clusterversion::read(self.cluster, &self.options.sync.apply.retry).await {
            Ok(cv) => cv,
            Err(e) => {
                tracing::error!(error = %e, "full pass not started");
                metrics.pass(trigger, "error", started.elapsed().as_secs_f64());
                return Err(PassEnd::default());
            }
        };
        let generation = cv.as_ref().and_then(|cv| cv.metadata.generation);
        // How the pass ended before the sync, counted as `result`.
        let ended = |result: &'static str, end: PassEnd| {
            metrics.pass(trigger, result, started.elapsed().as_secs_f64());
            PassEnd { generation, ..end }
        };
        let paused = || PassEnd {
            paused: true,
            ..PassEnd::default()
        };
        let switched = |switch: Switch| {
            ended(
                "switched",
                PassEnd {
                    switch: Some(switch),
                    ..PassEnd::default()
                },
            )
        };
        let spec = cv.as_ref().map(Spec::of).unwrap_or_default();
        let desired = spec.desired_update.as_ref();
        let image = desired.map(|d| d.image.as_str()).filter(|i| !i.is_empty());
        let cluster_image = cluster_at(cv.as_ref(), self.release.image.as_deref());
        // Leading with a pulled release the cluster never moved to (its update refused: the
        // cluster is still at the image this process runs), and no image asked for any more:
        // back to the release it started with, else every pass would refuse the pulled one.
        if image.is_none() && self.back_to_start(cv.as_ref(), &version).await {
            return Err(switched(Switch::Start));
        }
        // Without an image asked for, the image the cluster is at is looked up when this
        // operator leads with the release it started with.
        let lookup = Lookup::of(desired, cluster_image.as_deref().filter(|_| !self.pulled));
        let considered = self.consider(lookup.as_ref(), image, &version).await;
        let (decision, pull_failure) = considered.map_err(switched)?;
        let mut decided = Decided {
            sync_options: self.options.sync.clone(),
            generation,
            move_conditions: decision.conditions(self.mover.deployment(), &version),
            cv,
            preflight: spec.preflight.clone(),
        };
        // An update proceeds when every preflight risk that applies is accepted.
        decided.sync_options.accept_risks =
            desired.map(|d| d.accept_risks.clone()).unwrap_or_default();
        // A failed pull leaves this release applied only when the cluster is at it.
        let meanwhile = match &cluster_image {
            Some(at) if pull_failure.is_some() => Meanwhile::Nothing { at },
            _ => Meanwhile::Stays(&version),
        };
        if let Some(e) = &pull_failure {
            let asked_version = desired.map_or("", |d| d.version.as_str());
            let conditions = e.conditions(decided.cv.as_ref(), meanwhile, asked_version);
            decided.move_conditions.extend(conditions);
            // The pass must not overwrite the report with ReleaseAccepted=True.
            decided.sync_options.release_accepted = false;
        }
        let stored_invalid = decided
            .cv
            .as_ref()
            .and_then(|cv| clusterversion::condition(cv, "Invalid"));
        decided
            .move_conditions
            .extend(spec.invalid_update(stored_invalid.as_ref()));
        if let (Some(e), Meanwhile::Nothing { at }) = (&pull_failure, meanwhile) {
            tracing::error!(image = %e.image, cluster_at = %at, from = %version, "nothing is applied: the cluster is at a release this operator does not hold and cannot pull yet");
            self.write_conditions(&decided).await;
            return Err(ended("refused", paused()));
        }
        if let Some(result) = self.held_by(&decision, &mut decided, &version).await {
            return Err(ended(result, paused()));
        }
        // The operator runs the image asked for: its release is the one asked for.
        let runs_desired = image.is_some() && decision == Decision::Stay && pull_failure.is_none();
        if let Some(d) = desired.filter(|_| runs_desired) {
            self.runs_asked_for(d, &mut decided, &version)
                .await
                .map_err(|result| ended(result, paused()))?;
        }
        Ok(decided)
    }

    /// Leading with a pulled release the cluster never moved to (its update refused: the
    /// cluster is still at the image this process runs), with no image asked for any more:
    /// back to the release it started with, else every pass would refuse the pulled one.
    async fn back_to_start(&self, cv: Option<&DynamicObject>, version: &str) -> bool {
        let Some(at) = cv.and_then(clusterversion::desired_image) else {
            return false;
        };
        if !self.pulled
            || Some(at.as_str()) == self.release.image.as_deref()
            || !self.mover.runs(self.cluster, &at).await
        {
            return false;
        }
        tracing::warn!(image = %at, from = %version, "spec.desiredUpdate asks for no image and the cluster is at the image the operator runs: back to the release it started with; a full pass with it follows");
        true
    }

    /// What the image `lookup` names means for the operator: a release artifact is pulled and
    /// led with (`Err`: the leader switches to it, or back to its start release when asked
    /// for the image it runs); a container image moves the operator; an image that cannot be
    /// looked up or pulled is returned with [`Decision::Stay`], to be reported.
    async fn consider(
        &self,
        lookup: Option<&Lookup>,
        image: Option<&str>,
        version: &str,
    ) -> Result<(Decision, Option<PullError>), Switch> {
        let (cluster, mover) = (self.cluster, self.mover);
        let leading = self.release.image.as_deref();
        let decision = match lookup {
            Some(l) if !mover.runs(cluster, &l.image).await => {
                let repository = mover.pod_repository(cluster).await;
                match self
                    .puller
                    .consider(cluster.client(), l.asked(), leading, repository.as_deref())
                    .await
                {
                    Outcome::Lead => Decision::Stay,
                    // The cluster was at a container image's release: this one is applied, as
                    // an operator moved to a new image does.
                    Outcome::Image if l.from_status => Decision::Stay,
                    Outcome::Image => mover.decide(cluster, image, Some(self.release)).await,
                    Outcome::Switch(next) => {
                        if l.from_status {
                            tracing::warn!(image = %next.image(), from = %version, "the cluster is at the release of image {} (status.desired), pulled earlier: leading with it again; a full pass with it follows", l.image);
                        } else {
                            tracing::warn!(image = %next.image(), asked = %next.asked, from = %version, "switching to the release spec.desiredUpdate.image names: a full pass with it follows");
                        }
                        return Err(Switch::Pulled(next));
                    }
                    Outcome::Failed(e) => return Ok((Decision::Stay, Some(e))),
                }
            }
            // The image the operator runs again (a lookup from status needs `!self.pulled`).
            Some(l) if self.pulled => {
                // Its own release, as it started.
                tracing::warn!(image = %l.image, from = %version, "spec.desiredUpdate.image names the image the operator runs: back to the release it started with; a full pass with it follows");
                return Err(Switch::Start);
            }
            _ => mover.decide(cluster, image, Some(self.release)).await,
        };
        Ok((decision, None))
    }

    /// Whether the self-update `decision` holds the pass (the operator handed over to another
    /// image, or the release conflicts with the image asked for): then its conditions are
    /// written and the result to count is returned. A move that cannot be made lets the pass
    /// run, without `ReleaseAccepted=True`.
    async fn held_by(
        &self,
        decision: &Decision,
        decided: &mut Decided,
        version: &str,
    ) -> Option<&'static str> {
        let mover = self.mover;
        match decision {
            Decision::Stay => None,
            Decision::HandedOver { to, from, written } => {
                if *written {
                    tracing::warn!(%to, %from, deployment = ?mover.deployment().map(ToString::to_string), "moved the operator's Deployment to the image spec.desiredUpdate names: handing over to its new pod, applying nothing more");
                } else {
                    tracing::info!(%to, "the operator's Deployment already runs the image spec.desiredUpdate names: handed over, applying nothing");
                }
                self.write_conditions(decided).await;
                Some("handed-over")
            }
            Decision::Conflict {
                image,
                release_image,
            } => {
                tracing::error!(%image, %release_image, "the release sets the operator's Deployment to another image than the one spec.desiredUpdate names and the operator runs: nothing applied");
                let idle = decided.idle(version, IMAGE_CONFLICT);
                decided.move_conditions.push(idle);
                self.write_conditions(decided).await;
                Some("refused")
            }
            Decision::CannotMove { to, why } => {
                tracing::error!(%to, %why, "cannot move the operator to the image spec.desiredUpdate names; this release stays applied");
                // The pass must not overwrite the report with ReleaseAccepted=True.
                decided.sync_options.release_accepted = false;
                None
            }
        }
    }

    /// The operator runs the image `d` (`spec.desiredUpdate`) asks for: its release must be
    /// the version asked for (`Err`: refused, its conditions written), `force` overrides the
    /// preconditions, and the risks accepted apply while the cluster updates.
    async fn runs_asked_for(
        &self,
        d: &DesiredUpdate,
        decided: &mut Decided,
        version: &str,
    ) -> Result<(), &'static str> {
        if !d.version.is_empty() && d.version != version {
            let refusal = version_mismatch(d, version);
            tracing::error!(message = %refusal.message, "the release is not the version spec.desiredUpdate names: nothing applied");
            decided.move_conditions.push(refusal);
            let idle = decided.idle(version, VERIFY_VERSION);
            decided.move_conditions.push(idle);
            self.write_conditions(decided).await;
            return Err("refused");
        }
        if forced_by_spec(d, true) {
            tracing::warn!(%version, "spec.desiredUpdate forces this release: preconditions are overridden");
            decided.sync_options.force = true;
        }
        let cv = decided.cv.as_ref();
        if cv.is_some_and(|cv| !clusterversion::completed(cv, version)) {
            decided.sync_options.accepted_risks =
                cv.and_then(|cv| exposed_risks_accepted(cv, d, version));
        }
        Ok(())
    }

    /// Writes the conditions the start of the pass decided, before the sync or instead of it.
    async fn write_conditions(&self, decided: &Decided) {
        let retry = &self.options.sync.apply.retry;
        let Decided {
            move_conditions,
            generation,
            ..
        } = decided;
        write_move_conditions(self.cluster, retry, move_conditions, *generation).await;
    }

    /// The end of a pass the preconditions refused: logged, status metrics, counted.
    async fn refused(&self, outcome: &SyncOutcome, trigger: &'static str, started: Instant) {
        let seconds = started.elapsed().as_secs_f64();
        let version = crate::status::conditions::version_text(self.release);
        let refusal = release_accepted(&version, &outcome.refused, false);
        tracing::error!(reason = %refusal.reason, message = %refusal.message, "release refused: nothing applied");
        if let Some(Err(e)) = &outcome.cluster_version {
            tracing::error!(error = %e, "could not record {RELEASE_ACCEPTED}=False in ClusterVersion");
        }
        // Status metrics first: a scrape that sees the pass counted sees its status too.
        record_status(
            self.cluster,
            &self.options.sync.apply.retry,
            self.metrics,
            outcome,
        )
        .await;
        self.metrics.pass(trigger, "refused", seconds);
    }

    /// The end of a pass that ran: what it applied is known (for drift), its metrics, the
    /// events of objects that came back, its warnings and a summary in the log. Returns the
    /// manifests left alone (unmanaged, or excluded by capability).
    async fn applied(
        &self,
        outcome: &SyncOutcome,
        trigger: &'static str,
        started: Instant,
        writes: u64,
    ) -> BTreeSet<usize> {
        let seconds = started.elapsed().as_secs_f64();
        let (release, metrics) = (self.release, self.metrics);
        let Some(report) = &outcome.report else {
            return BTreeSet::new();
        };
        for r in &report.results {
            if !release.manifests[r.index].is_delete() {
                self.known.set(r.index, r.resource_version.clone());
            }
        }
        let summary = report.summary();
        metrics.record_deletions(outcome, self.options.sync.stuck_after);
        metrics.set_capabilities(&outcome.capabilities);
        for id in &outcome.reappeared {
            if let Some(m) = release
                .manifests
                .iter()
                .find(|m| m.is_delete() && &m.id == id)
            {
                events::reappeared(self.cluster, m).await;
            }
        }
        let status_not_written = matches!(outcome.cluster_version, Some(Err(_)));
        let result = if summary.failed + summary.skipped > 0 || status_not_written {
            "failed"
        } else {
            "applied"
        };
        let retry = &self.options.sync.apply.retry;
        record_status(self.cluster, retry, metrics, outcome).await;
        metrics.pass(trigger, result, seconds);
        let mut timings = Timings::of(release, &outcome.passes, self.options.sync.parallelism);
        timings.seconds = seconds;
        metrics.set_timings(timings);
        // Warnings repeat every pass: said once at warn level, then at debug.
        for w in &outcome.warnings {
            if trigger == "initial" {
                tracing::warn!("{w}");
            } else {
                tracing::debug!("{w}");
            }
        }
        if let Some(Err(e)) = &outcome.cluster_version {
            tracing::error!(error = %e, "ClusterVersion status not written");
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
            excluded = summary.excluded,
            writes,
            seconds,
            "full pass done"
        );
        report
            .results
            .iter()
            .filter(|r| matches!(r.action, Action::Unmanaged | Action::Excluded))
            .map(|r| r.index)
            .collect()
    }
}
