//! Kind → resource: the plural an RBAC rule names for a kind of the release, found without a
//! cluster when possible.
//!
//! Three sources, in this order: the CustomResourceDefinitions in the release
//! (`spec.names.plural`), the built-in kinds k8s-openapi knows
//! ([`k8s_openapi::Resource::URL_PATH_SEGMENT`]; the plural does not depend on the version,
//! so `autoscaling/v1` and `autoscaling/v2` HorizontalPodAutoscalers are the same resource),
//! and — only when asked for — the cluster's discovery ([`Resources::discover`]). A kind none
//! of them knows is an [`UnknownKind`]: fail closed, never a guessed plural.

use std::collections::BTreeMap;

use k8s_openapi::Resource;
use serde_json::Value;

use crate::cluster::Discovery;
use crate::cluster::discovery::DiscoveryError;
use crate::diagnostic::Location;
use crate::release::{Manifest, Release};

/// (API group, kind): the plural does not depend on the version.
pub type GroupKind = (String, String);

/// Where the plural of a kind came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// A CustomResourceDefinition in the release.
    ReleaseCrd,
    /// A built-in Kubernetes kind (k8s-openapi).
    BuiltIn,
    /// The cluster's discovery (`--discover`).
    Discovery,
}

/// The plural of every kind this table knows.
#[derive(Clone, Debug, Default)]
pub struct Resources {
    plurals: BTreeMap<GroupKind, (String, Source)>,
}

/// A kind of the release whose plural is unknown.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "{location}: kind {kind} ({api_version}) is not a built-in Kubernetes kind and no CustomResourceDefinition in the release defines it, so the resource an RBAC rule must name is unknown: ship its CustomResourceDefinition in the release, or run `cvo rbac` with --discover to ask the cluster{}",
    reason.as_deref().map(|r| format!(" ({r})")).unwrap_or_default()
)]
pub struct UnknownKind {
    pub location: Location,
    pub api_version: String,
    pub kind: String,
    /// Why discovery did not know it either, when it was asked.
    pub reason: Option<String>,
}

macro_rules! built_in {
    ($($ty:ty),* $(,)?) => {
        &[$((<$ty as Resource>::GROUP, <$ty as Resource>::KIND, <$ty as Resource>::URL_PATH_SEGMENT)),*]
    };
}

/// (group, kind, plural) of the built-in kinds: one version of each (group, kind) that
/// k8s-openapi knows with the `v1_34` feature, object kinds only (no lists, no subresources,
/// no review requests, which are never objects of a release).
fn built_in_kinds() -> &'static [(&'static str, &'static str, &'static str)] {
    use k8s_openapi::api::{
        admissionregistration::v1 as adm, admissionregistration::v1beta1 as adm_beta,
        apiserverinternal::v1alpha1 as internal, apps::v1 as apps, autoscaling::v2 as autoscaling,
        batch::v1 as batch, certificates::v1 as certs, certificates::v1beta1 as certs_beta,
        coordination::v1 as coordination, coordination::v1beta1 as coordination_beta,
        core::v1 as core, discovery::v1 as discovery, events::v1 as events,
        flowcontrol::v1 as flowcontrol, networking::v1 as net, node::v1 as node,
        policy::v1 as policy, rbac::v1 as rbac, resource::v1 as resource,
        resource::v1alpha3 as resource_alpha, scheduling::v1 as scheduling, storage::v1 as storage,
        storagemigration::v1alpha1 as migration,
    };
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as ext;
    use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1 as reg;
    built_in!(
        adm::MutatingWebhookConfiguration,
        adm::ValidatingWebhookConfiguration,
        adm::ValidatingAdmissionPolicy,
        adm::ValidatingAdmissionPolicyBinding,
        adm_beta::MutatingAdmissionPolicy,
        adm_beta::MutatingAdmissionPolicyBinding,
        internal::StorageVersion,
        apps::ControllerRevision,
        apps::DaemonSet,
        apps::Deployment,
        apps::ReplicaSet,
        apps::StatefulSet,
        autoscaling::HorizontalPodAutoscaler,
        batch::CronJob,
        batch::Job,
        certs::CertificateSigningRequest,
        certs_beta::ClusterTrustBundle,
        coordination::Lease,
        coordination_beta::LeaseCandidate,
        core::ConfigMap,
        core::Endpoints,
        core::Event,
        core::LimitRange,
        core::Namespace,
        core::Node,
        core::PersistentVolume,
        core::PersistentVolumeClaim,
        core::Pod,
        core::PodTemplate,
        core::ReplicationController,
        core::ResourceQuota,
        core::Secret,
        core::Service,
        core::ServiceAccount,
        discovery::EndpointSlice,
        events::Event,
        flowcontrol::FlowSchema,
        flowcontrol::PriorityLevelConfiguration,
        net::Ingress,
        net::IngressClass,
        net::IPAddress,
        net::NetworkPolicy,
        net::ServiceCIDR,
        node::RuntimeClass,
        policy::PodDisruptionBudget,
        rbac::ClusterRole,
        rbac::ClusterRoleBinding,
        rbac::Role,
        rbac::RoleBinding,
        resource::DeviceClass,
        resource::ResourceClaim,
        resource::ResourceClaimTemplate,
        resource::ResourceSlice,
        resource_alpha::DeviceTaintRule,
        scheduling::PriorityClass,
        storage::CSIDriver,
        storage::CSINode,
        storage::CSIStorageCapacity,
        storage::StorageClass,
        storage::VolumeAttachment,
        storage::VolumeAttributesClass,
        migration::StorageVersionMigration,
        ext::CustomResourceDefinition,
        reg::APIService,
    )
}

/// The (group, kind) and plural a CRD manifest defines, when it says.
fn crd_names(manifest: &Manifest) -> Option<(GroupKind, String)> {
    if !manifest.id.is_crd() {
        return None;
    }
    let spec = manifest.object.get("spec")?;
    let text = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_owned);
    let group = text(spec.get("group"))?;
    let kind = text(spec.pointer("/names/kind"))?;
    let plural = text(spec.pointer("/names/plural"))?;
    Some(((group, kind), plural))
}

impl Resources {
    /// The built-in kinds and the kinds the release's CRDs define (every CRD the release
    /// holds, delete manifests and filtered-out ones included: they only name plurals).
    pub fn of(release: &Release) -> Self {
        let mut plurals = BTreeMap::new();
        for (group, kind, plural) in built_in_kinds() {
            plurals.insert(
                ((*group).to_owned(), (*kind).to_owned()),
                ((*plural).to_owned(), Source::BuiltIn),
            );
        }
        for (key, plural) in release.all_manifests().filter_map(crd_names) {
            plurals.insert(key, (plural, Source::ReleaseCrd));
        }
        Resources { plurals }
    }

    /// The plural of `group`/`kind`, and where it came from.
    pub fn plural(&self, group: &str, kind: &str) -> Option<(&str, Source)> {
        self.plurals
            .get(&(group.to_owned(), kind.to_owned()))
            .map(|(p, s)| (p.as_str(), *s))
    }

    /// The kinds whose plural came from the cluster's discovery: (group, kind, plural).
    pub fn discovered(&self) -> impl Iterator<Item = (&str, &str, &str)> {
        self.plurals
            .iter()
            .filter(|(_, (_, source))| *source == Source::Discovery)
            .map(|((group, kind), (plural, _))| (group.as_str(), kind.as_str(), plural.as_str()))
    }

    /// Every manifest of `release` whose kind this table does not know, in release order.
    pub fn unknown(&self, release: &Release) -> Vec<UnknownKind> {
        let mut seen = std::collections::BTreeSet::new();
        release
            .manifests
            .iter()
            .filter(|m| self.plural(&m.id.group, &m.id.kind).is_none())
            .filter(|m| seen.insert((m.id.group.clone(), m.id.kind.clone())))
            .map(|m| UnknownKind {
                location: m.location.clone(),
                api_version: m.api_version.clone(),
                kind: m.id.kind.clone(),
                reason: None,
            })
            .collect()
    }

    /// Asks the cluster's discovery for each kind of `release` this table does not know.
    /// Kinds the server does not serve either stay unknown (returned, with the reason); a
    /// discovery request that fails is returned as such, never taken for "unknown".
    pub async fn discover(
        &mut self,
        discovery: &Discovery,
        release: &Release,
    ) -> Result<Vec<UnknownKind>, DiscoveryError> {
        let mut still = Vec::new();
        for mut unknown in self.unknown(release) {
            match discovery.resolve(&unknown.api_version, &unknown.kind).await {
                Ok(resolved) => {
                    let (group, _) =
                        crate::cluster::discovery::split_api_version(&unknown.api_version);
                    self.plurals.insert(
                        (group.to_owned(), unknown.kind.clone()),
                        (resolved.resource.plural, Source::Discovery),
                    );
                }
                Err(e @ DiscoveryError::UnknownKind { .. }) => {
                    unknown.reason = Some(format!("discovery: {e}"));
                    still.push(unknown);
                }
                Err(e) => return Err(e),
            }
        }
        Ok(still)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_in_plurals_come_from_k8s_openapi() {
        let table = Resources::default();
        assert!(table.plural("", "ConfigMap").is_none(), "empty table");
        let table = Resources {
            plurals: built_in_kinds()
                .iter()
                .map(|(g, k, p)| {
                    (
                        ((*g).to_owned(), (*k).to_owned()),
                        ((*p).to_owned(), Source::BuiltIn),
                    )
                })
                .collect(),
        };
        for (group, kind, plural) in [
            ("", "ConfigMap", "configmaps"),
            ("", "Endpoints", "endpoints"),
            ("apps", "Deployment", "deployments"),
            (
                "autoscaling",
                "HorizontalPodAutoscaler",
                "horizontalpodautoscalers",
            ),
            ("networking.k8s.io", "NetworkPolicy", "networkpolicies"),
            (
                "rbac.authorization.k8s.io",
                "ClusterRoleBinding",
                "clusterrolebindings",
            ),
            ("storage.k8s.io", "CSIDriver", "csidrivers"),
            ("apiregistration.k8s.io", "APIService", "apiservices"),
            (
                "apiextensions.k8s.io",
                "CustomResourceDefinition",
                "customresourcedefinitions",
            ),
            (
                "admissionregistration.k8s.io",
                "ValidatingAdmissionPolicyBinding",
                "validatingadmissionpolicybindings",
            ),
        ] {
            assert_eq!(
                table.plural(group, kind),
                Some((plural, Source::BuiltIn)),
                "{group}/{kind}"
            );
        }
        // Another group with the same kind name is another kind.
        assert_eq!(table.plural("example.com", "Deployment"), None);
    }

    #[test]
    fn the_table_has_one_entry_per_group_and_kind() {
        let mut seen = std::collections::BTreeSet::new();
        for (group, kind, _) in built_in_kinds() {
            assert!(seen.insert((group, kind)), "{group}/{kind} listed twice");
        }
    }
}
