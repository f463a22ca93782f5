//! A whole sync of a release: preconditions (read from the cluster), one pass over the task
//! graph, the resulting conditions, and the ClusterVersion status write.

use std::time::Duration;

use super::{Action, Applier, ManifestResult, Options, PassReport, PendingDeletion, run_pass};
use crate::cluster::Cluster;
use crate::release::{ObjectId, Release};
use crate::status::clusterversion::{self, ClusterVersionError, WriteOutcome};
use crate::status::update::update_type;
use crate::status::{Condition, Precondition, PreconditionFailure, UpdateType, conditions};

/// Knobs of a sync beyond the per-manifest [`Options`].
#[derive(Clone, Debug)]
pub struct SyncOptions {
    pub apply: Options,
    pub parallelism: usize,
    /// A pending deletion older than this (from its deletionTimestamp) is stuck.
    pub stuck_after: Duration,
    /// Apply even when a precondition refuses the update.
    pub force: bool,
}

impl Default for SyncOptions {
    fn default() -> Self {
        SyncOptions {
            apply: Options::default(),
            parallelism: crate::graph::DEFAULT_PARALLELISM,
            stuck_after: Duration::from_secs(600),
            force: false,
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
    pub conditions: Vec<Condition>,
    pub warnings: Vec<String>,
    /// What happened to ClusterVersion status (`None` for dry runs).
    pub cluster_version: Option<Result<WriteOutcome, String>>,
}

impl SyncOutcome {
    /// DESIGN.md §2: 4 refused, 1 failed, 3 deletions unfinished, 0 otherwise.
    pub fn exit_code(&self) -> u8 {
        let Some(report) = &self.report else {
            return 4;
        };
        let summary = report.summary();
        if summary.failed > 0 || summary.skipped > 0 {
            1
        } else if !report.pending_deletions().is_empty() {
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

/// Runs one sync of `release` against `cluster`; `on_result` sees each manifest's result.
pub async fn sync<F>(
    cluster: &Cluster,
    release: &Release,
    options: &SyncOptions,
    on_result: F,
) -> Result<SyncOutcome, SyncError>
where
    F: Fn(&super::ManifestResult),
{
    let cv = clusterversion::read(cluster).await?;
    let current = cv.as_ref().and_then(clusterversion::current_version);
    let update = update_type(current.as_ref(), release.version());
    let previous_upgradeable = cv
        .as_ref()
        .and_then(|cv| clusterversion::condition(cv, "Upgradeable"));
    let applier = Applier::new(cluster.clone(), release, options.apply.clone());

    // Stale delete manifests only refuse minor/major updates: look them up only then.
    let mut absent = Vec::new();
    if update == UpdateType::MinorOrMajor {
        absent = absent_deletes(&applier).await;
    }
    let (refused, mut warnings) = Precondition {
        update: update.clone(),
        upgradeable: previous_upgradeable.as_ref(),
        absent_deletes: &absent,
    }
    .check();
    if !refused.is_empty() && !options.force {
        let mut conds: Vec<Condition> = previous_upgradeable.into_iter().collect();
        conds.extend(refused.iter().map(|f| {
            Condition::new(
                "Failing",
                crate::status::ConditionStatus::True,
                f.reason,
                f.message.clone(),
            )
        }));
        return Ok(SyncOutcome {
            update,
            refused,
            report: None,
            conditions: conds,
            warnings,
            cluster_version: None,
        });
    }
    if !refused.is_empty() {
        warnings.extend(
            refused
                .iter()
                .map(|f| format!("precondition overridden by --force: {f}")),
        );
    }

    let graph = release.task_graph();
    let report = run_pass(&applier, &graph, options.parallelism, on_result).await;
    for r in &report.results {
        let m = &release.manifests[r.index];
        for w in &r.warnings {
            warnings.push(format!("{} ({}): {w}", m.id, m.location));
        }
        if r.action == Action::AlreadyAbsent && update != UpdateType::MinorOrMajor {
            warnings.push(format!(
                "{} ({}): delete manifest, but the object is already absent",
                m.id, m.location
            ));
        }
    }
    let mut pending: Vec<PendingDeletion> =
        report.pending_deletions().into_iter().cloned().collect();
    pending.extend(unvisited_deletions(&applier, &report).await);
    let pending_refs: Vec<&PendingDeletion> = pending.iter().collect();
    let upgradeable =
        conditions::upgradeable(&pending_refs, options.stuck_after, jiff::Timestamp::now());
    let ever = cv.as_ref().is_some_and(clusterversion::ever_completed);
    let conds = conditions::after_pass(release, &report.results, upgradeable, ever);
    let cluster_version = if options.apply.dry_run {
        None
    } else {
        let summary = report.summary();
        let complete = summary.failed == 0 && summary.skipped == 0;
        let version = conditions::version_text(release);
        Some(
            clusterversion::write(cluster, &version, &conds, complete)
                .await
                .map_err(|e| e.to_string()),
        )
    };
    Ok(SyncOutcome {
        update,
        refused,
        report: Some(report),
        conditions: conds,
        warnings,
        cluster_version,
    })
}

/// Deletions in progress for delete manifests the pass did not reach (skipped after a
/// failure): read from the cluster, so Upgradeable still reflects them.
async fn unvisited_deletions(applier: &Applier<'_>, report: &PassReport) -> Vec<PendingDeletion> {
    let cluster = applier.cluster();
    let mut out = Vec::new();
    for r in report
        .results
        .iter()
        .filter(|r| r.action == Action::Skipped)
    {
        let m = &applier.release().manifests[r.index];
        if !m.is_delete() {
            continue;
        }
        let Ok(resolved) = cluster
            .discovery()
            .resolve(&m.api_version, &m.id.kind)
            .await
        else {
            continue;
        };
        if let Ok(Some(obj)) = cluster
            .get(&resolved, m.id.namespace.as_deref(), &m.id.name)
            .await
            && let Some(since) = &obj.metadata.deletion_timestamp
        {
            out.push(PendingDeletion {
                id: m.id.clone(),
                since: Some(since.0),
                finalizers: obj.metadata.finalizers.clone().unwrap_or_default(),
            });
        }
    }
    out
}

/// Delete manifests of the release whose objects are absent (read from the cluster).
async fn absent_deletes(applier: &Applier<'_>) -> Vec<ObjectId> {
    let cluster = applier.cluster();
    let mut out = Vec::new();
    for m in applier.release().manifests.iter().filter(|m| m.is_delete()) {
        let Ok(resolved) = cluster
            .discovery()
            .resolve(&m.api_version, &m.id.kind)
            .await
        else {
            out.push(m.id.clone());
            continue;
        };
        if let Ok(None) = cluster
            .get(&resolved, m.id.namespace.as_deref(), &m.id.name)
            .await
        {
            out.push(m.id.clone());
        }
    }
    out
}

/// Creates what a previous release would have left behind: every object the release deletes
/// (its delete manifest turned into an ordinary one, finalizers included), with the release's
/// Namespace and CRD manifests those objects need, so that the next sync has real deletions to
/// do and still creates everything else. Used by `cvo apply --in-memory` on its fresh server;
/// the results are not reported and failures are ignored (a delete manifest may carry only the
/// object's identity, which not every kind accepts).
pub async fn seed_previous_state(cluster: &Cluster, release: &Release, parallelism: usize) {
    let deleted: Vec<&ObjectId> = release
        .manifests
        .iter()
        .filter(|m| m.is_delete())
        .map(|m| &m.id)
        .collect();
    let needed = |m: &crate::release::Manifest| {
        deleted.iter().any(|d| {
            **d == m.id
                || (m.id.group.is_empty()
                    && m.id.kind == "Namespace"
                    && d.namespace.as_deref() == Some(m.id.name.as_str()))
                || (m.id.kind == "CustomResourceDefinition"
                    && m.object["spec"]["group"] == d.group.as_str()
                    && m.object["spec"]["names"]["kind"] == d.kind.as_str())
        })
    };
    let mut previous = release.clone();
    previous.manifests.retain(|m| needed(m));
    for m in &mut previous.manifests {
        if m.is_delete() {
            m.intent = crate::release::DeleteIntent::Apply;
            if let Some(a) = m
                .object
                .pointer_mut("/metadata/annotations")
                .and_then(|a| a.as_object_mut())
            {
                a.remove(crate::release::DELETE_ANNOTATION);
            }
        }
    }
    let applier = Applier::new(cluster.clone(), &previous, Options::default());
    let graph = previous.task_graph();
    let report = run_pass(&applier, &graph, parallelism, |_| {}).await;
    // A failed seed must not keep the others from being seeded: try the skipped ones alone.
    let mut failed: Vec<ManifestResult> = report.failed().cloned().collect();
    for r in report
        .results
        .iter()
        .filter(|r| r.action == Action::Skipped)
    {
        let retried = applier.run(r.index).await;
        if retried.action == Action::Failed {
            failed.push(retried);
        }
    }
    for r in failed {
        tracing::debug!(manifest = %previous.manifests[r.index].id, error = ?r.error, "seeding failed");
    }
}
