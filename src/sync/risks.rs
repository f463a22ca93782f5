//! The preflight of an update inside a sync ([`crate::preflight`]): a server-side dry run of
//! every manifest (the flattened graph, so that no failure hides another manifest), the CRDs'
//! stored versions, and what the sync already read, judged into risks; the accepted ones
//! ([`SyncOptions::accept_risks`], and ClusterVersion's `spec.desiredUpdate.acceptRisks`)
//! take back the refusals they answer for.
//!
//! It runs for an update that has not started yet (ClusterVersion's newest history entry is
//! another release): once the update is under way, each pass finishes it. Nothing is written.

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;

use crate::apply::{Applier, ManifestResult, Options, PassReport, PassTimeline};
use crate::cluster::Cluster;
use crate::preflight::{self, Assessment, Evidence};
use crate::release::Release;
use crate::status::PreconditionFailure;

use super::{Checked, Mode, Observed, SyncOptions, pass};

/// The dry run, and what the preflight judged of it.
pub(super) struct Assessed {
    pub assessment: Assessment,
    pub report: PassReport,
    pub passes: Vec<PassTimeline>,
}

/// Runs the preflight of `release` with the per-manifest options `apply` (made a dry run);
/// `on_result` sees each manifest's dry-run result.
pub(super) async fn assess<F>(
    cluster: &Cluster,
    release: &Release,
    options: &SyncOptions,
    apply: &Options,
    (pre, checked): (&Observed, &Checked),
    on_result: F,
) -> Assessed
where
    F: Fn(&ManifestResult),
{
    let mut dry = apply.clone();
    dry.dry_run = true;
    dry.on_deletion_requested = None;
    let applier = Applier::new(cluster.clone(), release, dry);
    let done = Arc::new(AtomicUsize::new(0));
    let (report, passes) = pass::run(
        &applier,
        options,
        Mode::Reconciling,
        pass::Progress {
            version: &pre.version,
            gate: None,
            done: &done,
        },
        on_result,
    )
    .await;
    let stored_versions = preflight::crds::dropped(cluster, release, &options.apply.retry).await;
    let implicitly_enabled = pre
        .implicit
        .by_update
        .as_ref()
        .map(|b| b.enabled.clone())
        .unwrap_or_default();
    let mut assessment = preflight::assess(&Evidence {
        release,
        update: &pre.update,
        upgradeable: pre.previous_upgradeable.as_ref(),
        preconditions: &checked.refused,
        implicitly_enabled: &implicitly_enabled,
        dry_run: &report,
        stored_versions: &stored_versions,
    });
    // Accepted: what this run was given, and what the administrator recorded in
    // ClusterVersion (`spec.desiredUpdate.acceptRisks` stays until cleared).
    let mut accepted = options.accept_risks.clone();
    if let Some(d) = &pre.spec.desired_update {
        accepted.extend(d.accept_risks.iter().cloned());
    }
    assessment.accept(&accepted);
    Assessed {
        assessment,
        report,
        passes,
    }
}

/// The refusals left once `assessment`'s accepted risks are taken out of `preconditions`,
/// with one refusal for the risks that no precondition stands for and are not accepted.
pub(super) fn refusals(
    preconditions: &[PreconditionFailure],
    pre: &Observed,
    assessment: &Assessment,
) -> Vec<PreconditionFailure> {
    let accepted = |name: &str| {
        assessment
            .risks
            .iter()
            .any(|r| r.name == name && r.accepted)
    };
    let upgradeable = pre.previous_upgradeable.as_ref();
    let mut out: Vec<PreconditionFailure> = preconditions
        .iter()
        .filter(|f| !accepted(preflight::risk_of(f, upgradeable).name))
        .map(|f| naming_its_risk(f, upgradeable))
        .collect();
    let from_preconditions: Vec<&str> = preconditions
        .iter()
        .map(|f| preflight::risk_of(f, upgradeable).name)
        .collect();
    let mut rest = assessment.clone();
    rest.risks.retain(|r| !from_preconditions.contains(&r.name));
    out.extend(rest.refusal());
    out
}

/// `failure`, its message naming the risk it stands for when its reason does not (the
/// Upgradeable ones: `UpgradeableFalse` is `MinorUpdateWhileDeletionInProgress` or
/// `MinorUpdateWhileNotUpgradeable`), so that the refusal says what to accept.
fn naming_its_risk(
    failure: &PreconditionFailure,
    upgradeable: Option<&crate::status::Condition>,
) -> PreconditionFailure {
    let risk = preflight::risk_of(failure, upgradeable).name;
    let mut named = failure.clone();
    if named.reason != risk {
        named.message.push_str(&format!(
            " (preflight risk {risk}: accept it with --accept-risks {risk} or ClusterVersion spec.desiredUpdate.acceptRisks)"
        ));
    }
    named
}
