//! The OCM hub objects `cvo fleet status` reads, as narrow typed views: serde keeps the few
//! fields the status is judged from and skips the rest (managed fields, specs, the other
//! manifests' statuses), so that a fleet of 1,000 clusters is held in a few MiB instead of
//! JSON trees. A field the judgement needs that is missing or of the wrong type is an error
//! named in the output ([`super::status::FleetStatus::problems`]), never a default.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

/// The metadata fields read.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct Meta {
    #[serde(default)]
    pub name: String,
    pub namespace: Option<String>,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
}

/// A status condition (of a ManagedCluster, a ManifestWork or one of its manifests).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    #[serde(rename = "type")]
    pub type_: String,
    #[serde(default)]
    pub status: String,
    #[serde(default)]
    pub reason: String,
    #[serde(default)]
    pub message: String,
    pub last_transition_time: Option<String>,
}

/// The condition of type `type_` in `conditions`.
pub fn condition<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

#[derive(Clone, Debug, Default, Deserialize)]
pub struct Conditions {
    #[serde(default)]
    pub conditions: Vec<Condition>,
}

/// A PlacementDecision: its group labels and the clusters it names.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct PlacementDecision {
    #[serde(default)]
    pub metadata: Meta,
    #[serde(default)]
    pub status: DecisionStatus,
}

#[derive(Clone, Debug, Default, Deserialize)]
pub struct DecisionStatus {
    #[serde(default)]
    pub decisions: Vec<ClusterDecision>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterDecision {
    pub cluster_name: String,
}

/// A ManagedCluster: its name and conditions.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct ManagedCluster {
    #[serde(default)]
    pub metadata: Meta,
    #[serde(default)]
    pub status: Conditions,
}

/// A ManifestWork of cvo's sets: what it asks for and what its agent reported.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct ManifestWork {
    #[serde(default)]
    pub metadata: Meta,
    #[serde(default)]
    pub spec: WorkSpec,
    #[serde(default)]
    pub status: WorkStatus,
}

#[derive(Clone, Debug, Default, Deserialize)]
pub struct WorkSpec {
    #[serde(default)]
    pub workload: Workload,
}

#[derive(Clone, Debug, Default, Deserialize)]
pub struct Workload {
    #[serde(default)]
    pub manifests: Vec<WorkManifest>,
}

/// One manifest of a work: its identity, and for ClusterVersion what it asks for.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkManifest {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub metadata: Meta,
    /// Kept as written (a ClusterVersion's is `{desiredUpdate: {version, image}}`; another
    /// kind's, written on the hub by someone else, may have any shape).
    #[serde(default)]
    pub spec: Value,
}

impl WorkManifest {
    /// Whether this is ClusterVersion `version`, the one object cvo's rollout writes.
    pub fn is_cluster_version(&self) -> bool {
        self.api_version.starts_with("config.openshift.io/")
            && self.kind == "ClusterVersion"
            && self.metadata.name == "version"
    }

    /// `spec.desiredUpdate`'s version and image.
    pub fn desired_update(&self) -> (Option<&str>, Option<&str>) {
        let update = &self.spec["desiredUpdate"];
        (update["version"].as_str(), update["image"].as_str())
    }
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkStatus {
    #[serde(default)]
    pub conditions: Vec<Condition>,
    #[serde(default)]
    pub resource_status: ResourceStatus,
}

#[derive(Clone, Debug, Default, Deserialize)]
pub struct ResourceStatus {
    #[serde(default)]
    pub manifests: Vec<ManifestStatus>,
}

/// What the agent reported of one manifest: which, its conditions, its feedback.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ManifestStatus {
    #[serde(default)]
    pub resource_meta: ResourceMeta,
    #[serde(default)]
    pub conditions: Vec<Condition>,
    #[serde(default)]
    pub status_feedback: Feedback,
}

#[derive(Clone, Debug, Default, Deserialize)]
pub struct ResourceMeta {
    #[serde(default)]
    pub resource: String,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub ordinal: u64,
}

#[derive(Clone, Debug, Default, Deserialize)]
pub struct Feedback {
    #[serde(default)]
    pub values: Vec<super::feedback::FeedbackValue>,
}
