//! Object identity: (group, kind, namespace, name). The API version is deliberately not part
//! of it — `apps/v1` and `apps/v1beta1` Deployments of the same name are one object.

use std::fmt;

use serde::{Deserialize, Serialize};

// `PartialEq` compares every field, as the derive would: `Hash` and `Ord` agree with it.
#[allow(clippy::derived_hash_with_manual_eq)]
#[derive(Clone, Debug, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ObjectId {
    /// API group; empty for the core group.
    pub group: String,
    pub kind: String,
    /// `None` for cluster-scoped objects (and for namespaced ones written without a
    /// namespace, which the server would default).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub name: String,
}

/// Field by field, as a derived `PartialEq` (so consistent with `Ord` and `Hash`); each
/// comparison is counted for the loader's linearity tests ([`super::work`]).
impl PartialEq for ObjectId {
    fn eq(&self, other: &Self) -> bool {
        super::work::compared();
        self.name == other.name
            && self.kind == other.kind
            && self.namespace == other.namespace
            && self.group == other.group
    }
}

impl ObjectId {
    pub fn new(
        group: impl Into<String>,
        kind: impl Into<String>,
        namespace: Option<&str>,
        name: impl Into<String>,
    ) -> Self {
        ObjectId {
            group: group.into(),
            kind: kind.into(),
            namespace: namespace.map(str::to_owned),
            name: name.into(),
        }
    }

    /// True for a CustomResourceDefinition (of `apiextensions.k8s.io`).
    pub fn is_crd(&self) -> bool {
        self.group == "apiextensions.k8s.io" && self.kind == "CustomResourceDefinition"
    }

    /// Group of an `apiVersion` (`apps/v1` → `apps`, `v1` → ``).
    pub fn group_of(api_version: &str) -> &str {
        api_version
            .rsplit_once('/')
            .map(|(g, _)| g)
            .unwrap_or_default()
    }

    /// `kind.group` (`Deployment.apps`, `ConfigMap`), kubectl's fully qualified kind.
    pub fn qualified_kind(&self) -> String {
        if self.group.is_empty() {
            self.kind.clone()
        } else {
            format!("{}.{}", self.kind, self.group)
        }
    }
}

impl fmt::Display for ObjectId {
    /// `Kind ns/name` for namespaced objects, `Kind name` for cluster-scoped ones.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{} {}/{}", self.kind, ns, self.name),
            None => write!(f, "{} {}", self.kind, self.name),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_of_core_and_named_groups() {
        assert_eq!(ObjectId::group_of("v1"), "");
        assert_eq!(ObjectId::group_of("apps/v1"), "apps");
        assert_eq!(
            ObjectId::group_of("config.openshift.io/v1"),
            "config.openshift.io"
        );
    }

    #[test]
    fn display_names_kind_and_namespace() {
        let ns = ObjectId::new("apps", "Deployment", Some("ns"), "web");
        assert_eq!(ns.to_string(), "Deployment ns/web");
        let cluster = ObjectId::new("", "Namespace", None, "ns");
        assert_eq!(cluster.to_string(), "Namespace ns");
        assert_eq!(ns.qualified_kind(), "Deployment.apps");
    }
}
