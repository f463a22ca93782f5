//! Minimal CustomResourceDefinitions for the OLM kinds the reconciler reads, so that
//! `cvo operand-cleanup --in-memory` can run against an empty embedded API server.
//!
//! The real CRDs (in OLM's manifests) carry full OpenAPI schemas; these keep every field
//! (`x-kubernetes-preserve-unknown-fields`) and declare the same names, scopes, versions and
//! status subresources, which is all the reconciler relies on.

use serde_json::{Value, json};

use super::types::GROUP;

/// (kind, plural, singular, short names, version).
const KINDS: [(&str, &str, &str, &[&str], &str); 3] = [
    (
        "ClusterServiceVersion",
        "clusterserviceversions",
        "clusterserviceversion",
        &["csv", "csvs"],
        "v1alpha1",
    ),
    (
        "OperatorGroup",
        "operatorgroups",
        "operatorgroup",
        &["og"],
        "v1",
    ),
    (
        "Subscription",
        "subscriptions",
        "subscription",
        &["sub", "subs"],
        "v1alpha1",
    ),
];

/// The three CRDs as JSON objects (`apiextensions.k8s.io/v1`).
pub fn minimal_crds() -> Vec<Value> {
    KINDS
        .iter()
        .map(|(kind, plural, singular, short, version)| {
            json!({
                "apiVersion": "apiextensions.k8s.io/v1",
                "kind": "CustomResourceDefinition",
                "metadata": {"name": format!("{plural}.{GROUP}")},
                "spec": {
                    "group": GROUP,
                    "scope": "Namespaced",
                    "names": {
                        "kind": kind,
                        "listKind": format!("{kind}List"),
                        "plural": plural,
                        "singular": singular,
                        "shortNames": short,
                        "categories": ["olm"],
                    },
                    "versions": [{
                        "name": version,
                        "served": true,
                        "storage": true,
                        "subresources": {"status": {}},
                        "schema": {"openAPIV3Schema": {
                            "type": "object",
                            "x-kubernetes-preserve-unknown-fields": true,
                        }},
                    }],
                },
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::olm::types::{ClusterServiceVersion, OperatorGroup, Subscription};
    use kube::Resource;

    #[test]
    fn crds_match_the_types_the_reconciler_uses() {
        let crds = minimal_crds();
        let names: Vec<&str> = crds
            .iter()
            .map(|c| c["metadata"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            [
                format!("{}.{GROUP}", ClusterServiceVersion::plural(&())),
                format!("{}.{GROUP}", OperatorGroup::plural(&())),
                format!("{}.{GROUP}", Subscription::plural(&())),
            ]
        );
        let versions: Vec<String> = crds
            .iter()
            .map(|c| {
                format!(
                    "{GROUP}/{}",
                    c["spec"]["versions"][0]["name"].as_str().unwrap()
                )
            })
            .collect();
        assert_eq!(
            versions,
            [
                ClusterServiceVersion::api_version(&()).to_string(),
                OperatorGroup::api_version(&()).to_string(),
                Subscription::api_version(&()).to_string(),
            ]
        );
    }
}
