//! What the operator records besides the sync's own status: the self-update decision in
//! ClusterVersion, the status metrics of a pass, and whether `spec.desiredUpdate` forces the
//! release.

use kube::api::DynamicObject;
use serde_json::Value;

use super::metrics::Metrics;
use crate::cluster::Cluster;
use crate::status::clusterversion;
use crate::status::conditions::RELEASE_ACCEPTED;
use crate::status::spec::DesiredUpdate;
use crate::status::{Condition, ConditionStatus};
use crate::sync::SyncOutcome;

/// Records what [`SelfUpdate`] decided in ClusterVersion (nothing when there is nothing to say,
/// no write when it is already recorded); a failure is logged, not fatal.
pub(super) async fn write_move_conditions(
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
pub(super) async fn record_status(
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

/// `ReleaseAccepted` reason when the release in the image asked for is not the version asked
/// for (the CVO's step name).
pub const VERIFY_VERSION: &str = "VerifyPayloadVersion";

/// `spec.desiredUpdate` forces this release: `force: true`, and the operator runs the image it
/// asks for (`runs_desired`: by `image`, or the image its `version` resolved to) — whatever
/// that image's release is.
pub fn forced_by_spec(desired: &DesiredUpdate, runs_desired: bool) -> bool {
    desired.force && runs_desired
}

/// `ReleaseAccepted=False` when the operator runs the image asked for but its release is not
/// the version asked for, worded as the CVO words it.
pub fn version_mismatch(desired: &DesiredUpdate, version: &str) -> Condition {
    Condition::new(
        RELEASE_ACCEPTED,
        ConditionStatus::False,
        VERIFY_VERSION,
        desired.version_mismatch(version),
    )
}

/// `Progressing=False` for a pass that applies nothing of `release` (`release 1.1.0`, say):
/// refused, or a conflict. The cluster stays at the version it is at, and the message says
/// why. Written by every such pass, so that no earlier leader's Progressing (a move, an
/// update under way) outlives it.
pub fn not_progressing(cv: Option<&DynamicObject>, release: &str, reason: &str) -> Condition {
    let current = cv.and_then(clusterversion::current_version);
    let message = match current {
        Some(current) => format!(
            "Cluster version is {current}: {release} is not accepted, nothing of it is applied (see ReleaseAccepted)"
        ),
        None => format!("Nothing is applied: {release} is not accepted (see ReleaseAccepted)"),
    };
    Condition::new("Progressing", ConditionStatus::False, reason, message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_a_forced_request_for_the_image_the_operator_runs_forces() {
        let d = |force: bool| DesiredUpdate {
            image: "img:2".into(),
            force,
            ..DesiredUpdate::default()
        };
        assert!(forced_by_spec(&d(true), true));
        assert!(!forced_by_spec(&d(true), false));
        assert!(!forced_by_spec(&d(false), true));
    }

    #[test]
    fn a_pass_that_applies_nothing_is_not_progressing_and_says_why() {
        let cv: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "config.openshift.io/v1", "kind": "ClusterVersion",
            "metadata": {"name": "version"},
            "status": {"history": [{"state": "Completed", "version": "1.0.0"}]}}))
        .unwrap();
        let c = not_progressing(Some(&cv), "release 1.1.0", "UpgradeableFalse");
        assert_eq!(
            (c.status, c.reason.as_str()),
            (ConditionStatus::False, "UpgradeableFalse")
        );
        assert!(
            c.message
                .starts_with("Cluster version is 1.0.0: release 1.1.0 is not accepted"),
            "{}",
            c.message
        );
        let c = not_progressing(None, "release 1.1.0", "x");
        assert!(
            c.message
                .starts_with("Nothing is applied: release 1.1.0 is not accepted"),
            "{}",
            c.message
        );
        let m = version_mismatch(
            &DesiredUpdate {
                version: "9.9.9".into(),
                image: "img:1".into(),
                ..DesiredUpdate::default()
            },
            "1.0.0",
        );
        assert_eq!(
            m.message,
            "Verifying payload failed version=\"9.9.9\" image=\"img:1\" failure=release image version 1.0.0 does not match the expected upstream version 9.9.9"
        );
    }
}
