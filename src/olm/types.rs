//! Hand-written serde subsets of the OLM types the operand-cleanup reconciler reads and writes.
//!
//! Only the fields the reconciler needs are typed; everything else is kept verbatim in an
//! `extra` map (`#[serde(flatten)]`) so an object read and serialized again loses nothing.
//! The reconciler still never writes whole objects back: it sends patches (a merge patch of
//! `status` on the status subresource, a JSON patch on `metadata.finalizers`).
//!
//! Note that OLM's CSV condition is *not* `metav1.Condition`: it records a phase transition
//! (`phase`, `reason`, `message`, `lastUpdateTime`, `lastTransitionTime`), see [`CsvCondition`].

use std::borrow::Cow;

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use kube::Resource;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The API group of all OLM types here.
pub const GROUP: &str = "operators.coreos.com";

/// The kind of OLM's `Operator` (`operators.coreos.com/v1`, cluster-scoped): the per-package view
/// OLM keeps of everything labelled `operators.coreos.com/<name>`.
pub const OPERATOR_KIND: &str = "Operator";
/// Plural of [`OPERATOR_KIND`].
pub const OPERATOR_PLURAL: &str = "operators";
/// Version of [`OPERATOR_KIND`].
pub const OPERATOR_VERSION: &str = "v1";

/// Unknown fields of an object, kept so they survive a round trip.
pub type Extra = Map<String, Value>;

macro_rules! olm_resource {
    ($ty:ident, $version:literal, $kind:literal, $plural:literal, $scope:ty) => {
        impl Resource for $ty {
            type DynamicType = ();
            type Scope = $scope;

            fn kind(_: &()) -> Cow<'_, str> {
                Cow::Borrowed($kind)
            }
            fn group(_: &()) -> Cow<'_, str> {
                Cow::Borrowed(GROUP)
            }
            fn version(_: &()) -> Cow<'_, str> {
                Cow::Borrowed($version)
            }
            fn api_version(_: &()) -> Cow<'_, str> {
                Cow::Borrowed(concat!("operators.coreos.com/", $version))
            }
            fn plural(_: &()) -> Cow<'_, str> {
                Cow::Borrowed($plural)
            }
            fn meta(&self) -> &ObjectMeta {
                &self.metadata
            }
            fn meta_mut(&mut self) -> &mut ObjectMeta {
                &mut self.metadata
            }
        }

        impl $ty {
            /// `apiVersion` of this type.
            pub const API_VERSION: &'static str = concat!("operators.coreos.com/", $version);
            /// `kind` of this type.
            pub const KIND: &'static str = $kind;
        }
    };
}

/// Metadata with just `namespace` and `name` set.
fn named(namespace: &str, name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_string()),
        namespace: Some(namespace.to_string()),
        ..ObjectMeta::default()
    }
}

fn csv_api_version() -> String {
    ClusterServiceVersion::API_VERSION.to_string()
}
fn csv_kind() -> String {
    ClusterServiceVersion::KIND.to_string()
}
fn og_api_version() -> String {
    OperatorGroup::API_VERSION.to_string()
}
fn og_kind() -> String {
    OperatorGroup::KIND.to_string()
}
fn sub_api_version() -> String {
    Subscription::API_VERSION.to_string()
}
fn sub_kind() -> String {
    Subscription::KIND.to_string()
}

// ---------------------------------------------------------------------------------------------
// ClusterServiceVersion v1alpha1
// ---------------------------------------------------------------------------------------------

/// `operators.coreos.com/v1alpha1` `ClusterServiceVersion` (subset).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterServiceVersion {
    #[serde(default = "csv_api_version")]
    pub api_version: String,
    #[serde(default = "csv_kind")]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: CsvSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<CsvStatus>,
    #[serde(flatten)]
    pub extra: Extra,
}
olm_resource!(
    ClusterServiceVersion,
    "v1alpha1",
    "ClusterServiceVersion",
    "clusterserviceversions",
    NamespaceResourceScope
);

impl ClusterServiceVersion {
    /// A CSV with `apiVersion`/`kind` set, the given name and namespace, and `spec`.
    pub fn new(namespace: &str, name: &str, spec: CsvSpec) -> Self {
        ClusterServiceVersion {
            api_version: csv_api_version(),
            kind: csv_kind(),
            metadata: named(namespace, name),
            spec,
            status: None,
            extra: Extra::new(),
        }
    }

    /// `status.phase`, empty when there is no status.
    pub fn phase(&self) -> &str {
        self.status.as_ref().map(|s| s.phase.as_str()).unwrap_or("")
    }
}

/// `spec` of a CSV (subset).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CsvSpec {
    #[serde(default, skip_serializing_if = "CustomResourceDefinitions::is_empty")]
    pub customresourcedefinitions: CustomResourceDefinitions,
    /// An `Option`, so that a CSV's `apiservicedefinitions: {}` survives a round trip.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub apiservicedefinitions: Option<ApiServiceDefinitions>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub install_modes: Vec<InstallMode>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaces: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cleanup: Option<CleanupSpec>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// `spec.customresourcedefinitions`: the CRDs an operator owns and the ones it requires.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CustomResourceDefinitions {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub owned: Vec<CrdDescription>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub required: Vec<CrdDescription>,
    #[serde(flatten)]
    pub extra: Extra,
}

impl CustomResourceDefinitions {
    /// No owned, no required, nothing else.
    pub fn is_empty(&self) -> bool {
        self.owned.is_empty() && self.required.is_empty() && self.extra.is_empty()
    }
}

/// One entry of `owned` / `required`: `name` is the CRD's name, `<plural>.<group>`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CrdDescription {
    pub name: String,
    #[serde(default)]
    pub version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(flatten)]
    pub extra: Extra,
}

impl CrdDescription {
    /// A description with just `name`, `version` and `kind`.
    pub fn new(name: &str, version: &str, kind: &str) -> Self {
        CrdDescription {
            name: name.to_string(),
            version: version.to_string(),
            kind: kind.to_string(),
            extra: Extra::new(),
        }
    }
}

impl CsvSpec {
    /// `apiservicedefinitions.owned` (empty when absent).
    pub fn owned_apiservices(&self) -> &[ApiServiceDescription] {
        self.apiservicedefinitions
            .as_ref()
            .map_or(&[], |d| d.owned.as_slice())
    }

    /// `apiservicedefinitions.required` (empty when absent).
    pub fn required_apiservices(&self) -> &[ApiServiceDescription] {
        self.apiservicedefinitions
            .as_ref()
            .map_or(&[], |d| d.required.as_slice())
    }
}

/// `spec.apiservicedefinitions`: the aggregated APIs an operator owns and the ones it requires.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApiServiceDefinitions {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub owned: Vec<ApiServiceDescription>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub required: Vec<ApiServiceDescription>,
    #[serde(flatten)]
    pub extra: Extra,
}

impl ApiServiceDefinitions {
    /// No owned, no required, nothing else.
    pub fn is_empty(&self) -> bool {
        self.owned.is_empty() && self.required.is_empty() && self.extra.is_empty()
    }
}

/// One entry of `apiservicedefinitions.owned` / `required`: `name` is the resource's plural;
/// the APIService object is named `<version>.<group>`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApiServiceDescription {
    #[serde(default)]
    pub group: String,
    #[serde(default)]
    pub version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub name: String,
    #[serde(flatten)]
    pub extra: Extra,
}

impl ApiServiceDescription {
    /// A description of `kind` (plural `name`) in `group`/`version`.
    pub fn new(group: &str, version: &str, kind: &str, name: &str) -> Self {
        ApiServiceDescription {
            group: group.to_string(),
            version: version.to_string(),
            kind: kind.to_string(),
            name: name.to_string(),
            extra: Extra::new(),
        }
    }

    /// The name of the APIService object: `<version>.<group>`.
    pub fn apiservice_name(&self) -> String {
        format!("{}.{}", self.version, self.group)
    }
}

/// `spec.installModes[]`: `{type: OwnNamespace|SingleNamespace|MultiNamespace|AllNamespaces, supported}`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct InstallMode {
    #[serde(rename = "type")]
    pub type_: String,
    #[serde(default)]
    pub supported: bool,
}

/// `spec.cleanup`: the opt-in to operand cleanup.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CleanupSpec {
    #[serde(default)]
    pub enabled: bool,
}

/// CSV `status.phase` values.
pub mod phase {
    pub const PENDING: &str = "Pending";
    pub const INSTALL_READY: &str = "InstallReady";
    pub const INSTALLING: &str = "Installing";
    pub const SUCCEEDED: &str = "Succeeded";
    pub const FAILED: &str = "Failed";
    pub const UNKNOWN: &str = "Unknown";
    pub const REPLACING: &str = "Replacing";
    pub const DELETING: &str = "Deleting";
    /// Every phase OLM defines.
    pub const ALL: [&str; 8] = [
        PENDING,
        INSTALL_READY,
        INSTALLING,
        SUCCEEDED,
        FAILED,
        UNKNOWN,
        REPLACING,
        DELETING,
    ];
}

/// `status` of a CSV (subset).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CsvStatus {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub phase: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<CsvCondition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cleanup: Option<CleanupStatus>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// One entry of a CSV's `status.conditions`: a record of a phase transition (not `metav1.Condition`).
/// Times are kept as the RFC 3339 text the server sent.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CsvCondition {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub phase: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_update_time: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<String>,
}

/// `status.cleanup`: progress of a cleanup while the CSV waits for deletion.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CleanupStatus {
    #[serde(default)]
    pub pending_deletion: Vec<ResourceList>,
}

/// Custom resources of one group/kind still pending deletion.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ResourceList {
    pub group: String,
    pub kind: String,
    pub instances: Vec<ResourceInstance>,
}

/// One pending object; `namespace` is absent for cluster-scoped ones.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ResourceInstance {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

// ---------------------------------------------------------------------------------------------
// OperatorGroup v1
// ---------------------------------------------------------------------------------------------

/// `operators.coreos.com/v1` `OperatorGroup` (subset).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OperatorGroup {
    #[serde(default = "og_api_version")]
    pub api_version: String,
    #[serde(default = "og_kind")]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: OperatorGroupSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<OperatorGroupStatus>,
    #[serde(flatten)]
    pub extra: Extra,
}
olm_resource!(
    OperatorGroup,
    "v1",
    "OperatorGroup",
    "operatorgroups",
    NamespaceResourceScope
);

impl OperatorGroup {
    /// An OperatorGroup with `apiVersion`/`kind` set.
    pub fn new(namespace: &str, name: &str, spec: OperatorGroupSpec) -> Self {
        OperatorGroup {
            api_version: og_api_version(),
            kind: og_kind(),
            metadata: named(namespace, name),
            spec,
            status: None,
            extra: Extra::new(),
        }
    }
}

/// `spec` of an OperatorGroup (subset).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OperatorGroupSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_namespaces: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// `status` of an OperatorGroup (subset). OLM writes the resolved namespaces here; the
/// reconciler does not trust it and resolves targets itself from `spec`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OperatorGroupStatus {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub namespaces: Vec<String>,
    #[serde(flatten)]
    pub extra: Extra,
}

// ---------------------------------------------------------------------------------------------
// Subscription v1alpha1
// ---------------------------------------------------------------------------------------------

/// `operators.coreos.com/v1alpha1` `Subscription` (subset).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Subscription {
    #[serde(default = "sub_api_version")]
    pub api_version: String,
    #[serde(default = "sub_kind")]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: SubscriptionSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<SubscriptionStatus>,
    #[serde(flatten)]
    pub extra: Extra,
}
olm_resource!(
    Subscription,
    "v1alpha1",
    "Subscription",
    "subscriptions",
    NamespaceResourceScope
);

/// `spec` of a Subscription (subset): `name` is the package name.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionSpec {
    #[serde(default)]
    pub name: String,
    #[serde(flatten)]
    pub extra: Extra,
}

/// `status` of a Subscription (subset).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionStatus {
    #[serde(
        rename = "installedCSV",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub installed_csv: Option<String>,
    #[serde(flatten)]
    pub extra: Extra,
}
