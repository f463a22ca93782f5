//! The Open Cluster Management kinds and labels the fleet names on the hub (OCM v1.3: the
//! `cluster.open-cluster-management.io` and `work.open-cluster-management.io` groups), as
//! [`ApiResource`]s for [`DynamicObject`](kube::api::DynamicObject) requests: cvo holds no
//! typed copy of OCM's API, it reads the few fields it needs.

use kube::core::{ApiResource, GroupVersionKind};

/// A cluster the hub manages (cluster-scoped); its conditions say whether its agent reaches
/// the hub.
pub fn managed_cluster() -> ApiResource {
    resource("cluster.open-cluster-management.io", "v1", "ManagedCluster")
}

/// Which clusters a workload goes to, in ordered decision groups (the waves).
pub fn placement() -> ApiResource {
    resource("cluster.open-cluster-management.io", "v1beta1", "Placement")
}

/// A slice of a Placement's decisions: the clusters of (part of) one decision group.
pub fn placement_decision() -> ApiResource {
    resource(
        "cluster.open-cluster-management.io",
        "v1beta1",
        "PlacementDecision",
    )
}

/// What the hub asks one cluster's work agent to apply (in the cluster's namespace on the
/// hub), and the feedback the agent reports back.
pub fn manifest_work() -> ApiResource {
    resource("work.open-cluster-management.io", "v1", "ManifestWork")
}

/// One ManifestWork template rolled out to a Placement's clusters, group by group (alpha).
pub fn manifest_work_replica_set() -> ApiResource {
    resource(
        "work.open-cluster-management.io",
        "v1alpha1",
        "ManifestWorkReplicaSet",
    )
}

fn resource(group: &str, version: &str, kind: &str) -> ApiResource {
    let plural = format!("{}s", kind.to_ascii_lowercase());
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), &plural)
}

/// PlacementDecision label: the Placement it belongs to.
pub const PLACEMENT_LABEL: &str = "cluster.open-cluster-management.io/placement";
/// PlacementDecision label: the index of its decision group (`0` is the first wave).
pub const DECISION_GROUP_INDEX_LABEL: &str =
    "cluster.open-cluster-management.io/decision-group-index";
/// PlacementDecision label: the name of its decision group (empty for an unnamed group).
pub const DECISION_GROUP_NAME_LABEL: &str =
    "cluster.open-cluster-management.io/decision-group-name";
/// ManifestWork label set by the ManifestWorkReplicaSet controller: `NAMESPACE.NAME` of the
/// set the work belongs to.
pub const REPLICA_SET_LABEL: &str = "work.open-cluster-management.io/manifestworkreplicaset";

/// The value of [`REPLICA_SET_LABEL`] for the set `namespace/name`, refused when it is not a
/// valid label value (at most 63 characters): OCM could not label its works, and cvo could
/// not find them.
pub fn replica_set_label_value(namespace: &str, name: &str) -> Result<String, String> {
    let value = format!("{namespace}.{name}");
    if value.len() > 63 {
        return Err(format!(
            "ManifestWorkReplicaSet {namespace}/{name}: `{value}` is longer than the 63 characters of a label value, which OCM puts on its ManifestWorks; use a shorter Placement or namespace name"
        ));
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plurals_are_the_crds() {
        assert_eq!(
            manifest_work_replica_set().plural,
            "manifestworkreplicasets"
        );
        assert_eq!(placement_decision().plural, "placementdecisions");
        assert_eq!(
            managed_cluster().api_version,
            "cluster.open-cluster-management.io/v1"
        );
    }

    #[test]
    fn a_label_value_longer_than_63_characters_is_refused() {
        assert_eq!(
            replica_set_label_value("fleet", "cvo-rollout-waves").unwrap(),
            "fleet.cvo-rollout-waves"
        );
        let long = "x".repeat(60);
        assert!(
            replica_set_label_value("fleet", &long)
                .unwrap_err()
                .contains("63")
        );
    }
}
