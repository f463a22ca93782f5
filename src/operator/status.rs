//! What the operator records besides the sync's own status: the self-update decision in
//! ClusterVersion, the status metrics of a pass, and whether `spec.desiredUpdate` forces the
//! release.

use serde_json::Value;

use super::metrics::Metrics;
use crate::cluster::Cluster;
use crate::status::clusterversion;
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
}
