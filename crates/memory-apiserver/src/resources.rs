//! The type registry: which resources the server serves, under which group/versions, with which
//! kind, plural, scope, verbs and subresources. Built-in kinds are a static table; custom kinds
//! are derived from established CustomResourceDefinitions.

use std::sync::Arc;

use serde_json::Value;

/// Everything the server needs to know about one served resource type.
#[derive(Debug, Clone, PartialEq)]
pub struct ResourceInfo {
    /// API group ("" for core).
    pub group: String,
    /// Served versions, preferred first.
    pub versions: Vec<String>,
    /// Kind, e.g. `ConfigMap`.
    pub kind: String,
    /// Plural resource name, e.g. `configmaps`.
    pub plural: String,
    /// Singular name, e.g. `configmap`.
    pub singular: String,
    /// Namespaced or cluster-scoped.
    pub namespaced: bool,
    /// Has a `status` subresource (writes to the main resource ignore `status`).
    pub status_subresource: bool,
    /// Has an `autoscaling/v1` `scale` subresource (`spec.replicas`).
    pub scale: bool,
    /// Sets and bumps `metadata.generation`.
    pub generation: bool,
    /// Short names for discovery.
    pub short_names: Vec<String>,
    /// Categories for discovery (e.g. `all`).
    pub categories: Vec<String>,
    /// Comes from a CRD (changes some update/validation rules).
    pub custom: bool,
    /// PUT of a missing object creates it (kube's AllowCreateOnUpdate).
    pub create_on_update: bool,
    /// PUT without `metadata.resourceVersion` is allowed.
    pub unconditional_update: bool,
    /// Structural schema per served version (custom resources only).
    pub schemas: Vec<(String, Arc<Value>)>,
}

impl ResourceInfo {
    /// `(group, plural)`: the version-independent storage key of this type.
    pub fn key(&self) -> ResKey {
        ResKey {
            group: self.group.clone(),
            resource: self.plural.clone(),
        }
    }
    /// `apiVersion` string for `version`.
    pub fn api_version(&self, version: &str) -> String {
        if self.group.is_empty() {
            version.to_string()
        } else {
            format!("{}/{version}", self.group)
        }
    }
    /// The structural schema of `version`, if any.
    pub fn schema(&self, version: &str) -> Option<&Value> {
        self.schemas
            .iter()
            .find(|(v, _)| v == version)
            .map(|(_, s)| s.as_ref())
    }
}

/// Version-independent storage key of a resource type.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ResKey {
    /// API group.
    pub group: String,
    /// Plural resource.
    pub resource: String,
}

/// Verbs every served resource supports (Pods are stored only: no exec/logs).
pub const VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

struct B {
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    plural: &'static str,
    namespaced: bool,
    status: bool,
    generation: bool,
    short: &'static [&'static str],
}

#[allow(clippy::too_many_arguments)]
const fn b(
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    plural: &'static str,
    namespaced: bool,
    status: bool,
    generation: bool,
    short: &'static [&'static str],
) -> B {
    B {
        group,
        version,
        kind,
        plural,
        namespaced,
        status,
        generation,
        short,
    }
}

const BUILTINS: &[B] = &[
    b(
        "",
        "v1",
        "Namespace",
        "namespaces",
        false,
        true,
        false,
        &["ns"],
    ),
    b(
        "",
        "v1",
        "ConfigMap",
        "configmaps",
        true,
        false,
        false,
        &["cm"],
    ),
    b("", "v1", "Secret", "secrets", true, false, false, &[]),
    b(
        "",
        "v1",
        "ServiceAccount",
        "serviceaccounts",
        true,
        false,
        false,
        &["sa"],
    ),
    b("", "v1", "Service", "services", true, true, false, &["svc"]),
    b("", "v1", "Event", "events", true, false, false, &["ev"]),
    // The same events through events.k8s.io (what kube-runtime's Recorder writes). Stored
    // apart from core/v1 Events here; kube-apiserver serves both from one resource.
    b(
        "events.k8s.io",
        "v1",
        "Event",
        "events",
        true,
        false,
        false,
        &[],
    ),
    b("", "v1", "Pod", "pods", true, true, true, &["po"]),
    b(
        "apps",
        "v1",
        "Deployment",
        "deployments",
        true,
        true,
        true,
        &["deploy"],
    ),
    b(
        "apps",
        "v1",
        "DaemonSet",
        "daemonsets",
        true,
        true,
        true,
        &["ds"],
    ),
    b(
        "apps",
        "v1",
        "StatefulSet",
        "statefulsets",
        true,
        true,
        true,
        &["sts"],
    ),
    b("batch", "v1", "Job", "jobs", true, true, true, &[]),
    b(
        "batch",
        "v1",
        "CronJob",
        "cronjobs",
        true,
        true,
        true,
        &["cj"],
    ),
    b(
        "rbac.authorization.k8s.io",
        "v1",
        "Role",
        "roles",
        true,
        false,
        false,
        &[],
    ),
    b(
        "rbac.authorization.k8s.io",
        "v1",
        "RoleBinding",
        "rolebindings",
        true,
        false,
        false,
        &[],
    ),
    b(
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRole",
        "clusterroles",
        false,
        false,
        false,
        &[],
    ),
    b(
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRoleBinding",
        "clusterrolebindings",
        false,
        false,
        false,
        &[],
    ),
    b(
        "networking.k8s.io",
        "v1",
        "NetworkPolicy",
        "networkpolicies",
        true,
        false,
        true,
        &["netpol"],
    ),
    b(
        "policy",
        "v1",
        "PodDisruptionBudget",
        "poddisruptionbudgets",
        true,
        true,
        true,
        &["pdb"],
    ),
    b(
        "coordination.k8s.io",
        "v1",
        "Lease",
        "leases",
        true,
        false,
        false,
        &[],
    ),
    b(
        "admissionregistration.k8s.io",
        "v1",
        "ValidatingWebhookConfiguration",
        "validatingwebhookconfigurations",
        false,
        false,
        true,
        &[],
    ),
    b(
        "admissionregistration.k8s.io",
        "v1",
        "MutatingWebhookConfiguration",
        "mutatingwebhookconfigurations",
        false,
        false,
        true,
        &[],
    ),
    b(
        "admissionregistration.k8s.io",
        "v1",
        "ValidatingAdmissionPolicy",
        "validatingadmissionpolicies",
        false,
        true,
        true,
        &[],
    ),
    b(
        "admissionregistration.k8s.io",
        "v1",
        "ValidatingAdmissionPolicyBinding",
        "validatingadmissionpolicybindings",
        false,
        false,
        true,
        &[],
    ),
    // Aggregated APIs are registered here; this server proxies to none of them (a group an
    // APIService names is served only when something else serves it, e.g. a CRD).
    b(
        "apiregistration.k8s.io",
        "v1",
        "APIService",
        "apiservices",
        false,
        true,
        true,
        &[],
    ),
    b(
        "apiregistration.k8s.io",
        "v1",
        "APIService",
        "apiservices",
        false,
        true,
        false,
        &[],
    ),
    b(
        "apiextensions.k8s.io",
        "v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
        false,
        true,
        true,
        &["crd", "crds"],
    ),
];

/// The built-in resource types.
pub fn builtins() -> Vec<ResourceInfo> {
    BUILTINS
        .iter()
        .map(|b| ResourceInfo {
            group: b.group.into(),
            versions: vec![b.version.into()],
            kind: b.kind.into(),
            plural: b.plural.into(),
            singular: b.kind.to_lowercase(),
            namespaced: b.namespaced,
            status_subresource: b.status,
            generation: b.generation,
            short_names: b.short.iter().map(|s| s.to_string()).collect(),
            categories: if matches!(
                b.kind,
                "Pod" | "Service" | "Deployment" | "DaemonSet" | "StatefulSet" | "Job" | "CronJob"
            ) {
                vec!["all".into()]
            } else {
                vec![]
            },
            scale: matches!(
                (b.group, b.kind),
                ("apps", "Deployment") | ("apps", "StatefulSet")
            ),
            custom: false,
            create_on_update: b.group == "rbac.authorization.k8s.io"
                || matches!(
                    (b.group, b.kind),
                    ("coordination.k8s.io", "Lease") | ("", "Service") | ("", "Event")
                ),
            unconditional_update: true,
            schemas: Vec::new(),
        })
        .collect()
}

/// Sort key of a version name by kube's version priority: GA above beta above alpha, higher
/// numbers first; names that are not kube-like (`v1`, `v2beta1`, …) sort last.
pub fn version_priority(v: &str) -> (u8, u64, u64) {
    let Some(rest) = v.strip_prefix('v') else {
        return (0, 0, 0);
    };
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let Ok(major) = digits.parse::<u64>() else {
        return (0, 0, 0);
    };
    let tail = &rest[digits.len()..];
    if tail.is_empty() {
        return (3, major, 0);
    }
    for (label, rank) in [("beta", 2u8), ("alpha", 1u8)] {
        if let Some(n) = tail.strip_prefix(label)
            && let Ok(minor) = n.parse::<u64>()
        {
            return (rank, major, minor);
        }
    }
    (0, 0, 0)
}

/// The resource type a CRD object defines, if its spec is usable.
pub fn from_crd(crd: &Value) -> Option<ResourceInfo> {
    let spec = crd.get("spec")?;
    let names = spec.get("names")?;
    let plural = names.get("plural")?.as_str()?.to_string();
    let kind = names.get("kind")?.as_str()?.to_string();
    let group = spec.get("group")?.as_str()?.to_string();
    let versions = spec.get("versions")?.as_array()?;
    let mut served: Vec<(String, bool, bool)> = versions
        .iter()
        .filter(|v| v.get("served").and_then(Value::as_bool).unwrap_or(false))
        .filter_map(|v| {
            Some((
                v.get("name")?.as_str()?.to_string(),
                v.get("storage").and_then(Value::as_bool).unwrap_or(false),
                v.pointer("/subresources/status").is_some(),
            ))
        })
        .collect();
    if served.is_empty() {
        return None;
    }
    // Preferred version first, in kube's version priority order (v2 > v1 > v1beta2 > v1alpha1 >
    // non-kube-like names).
    served.sort_by(|a, b| {
        version_priority(&b.0)
            .cmp(&version_priority(&a.0))
            .then_with(|| a.0.cmp(&b.0))
    });
    let strs = |p: &str| strings(names.get(p));
    Some(ResourceInfo {
        group,
        versions: served.iter().map(|(v, _, _)| v.clone()).collect(),
        singular: names
            .get("singular")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| kind.to_lowercase()),
        kind,
        plural,
        namespaced: spec.get("scope").and_then(Value::as_str) != Some("Cluster"),
        status_subresource: served.iter().any(|(_, _, s)| *s),
        generation: true,
        short_names: strs("shortNames"),
        categories: strs("categories"),
        scale: false,
        custom: true,
        create_on_update: false,
        unconditional_update: false,
        schemas: versions
            .iter()
            .filter_map(|v| {
                Some((
                    v.get("name")?.as_str()?.to_string(),
                    Arc::new(v.pointer("/schema/openAPIV3Schema")?.clone()),
                ))
            })
            .collect(),
    })
}

/// The string items of a JSON array; empty if `v` is missing or not an array.
pub(crate) fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::version_priority as p;

    #[test]
    fn kube_version_priority() {
        let mut vs = vec![
            "v1alpha1", "foo", "v1", "v2beta1", "v1beta2", "v2", "v1beta1",
        ];
        vs.sort_by_key(|v| std::cmp::Reverse(p(v)));
        assert_eq!(
            vs,
            vec![
                "v2", "v1", "v2beta1", "v1beta2", "v1beta1", "v1alpha1", "foo"
            ]
        );
    }
}
