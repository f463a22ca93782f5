//! Minimal CustomResourceDefinitions for the OLM kinds the reconciler reads, and
//! [`install`] to put them on a server, so that `cvo operand-cleanup --in-memory` (and the tests)
//! can run against an empty embedded API server, or a cluster without OLM.
//!
//! The real CRDs (in OLM's manifests) carry full OpenAPI schemas; these keep every field
//! (`x-kubernetes-preserve-unknown-fields`) and declare the same names, scopes, versions and
//! status subresources, which is all the reconciler relies on.

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};

use crate::cluster::crd::{CrdWaitError, wait_established};
use crate::olm::types::{GROUP, OPERATOR_KIND, OPERATOR_PLURAL, OPERATOR_VERSION};

/// Field manager of [`install`]'s server-side apply.
pub const FIELD_MANAGER: &str = "cvo";

/// How long [`install`] waits for each CRD to be established.
pub const ESTABLISH_TIMEOUT: Duration = Duration::from_secs(30);

/// Why [`install`] failed.
#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    #[error("applying CRD {name}: {source}")]
    Apply {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error(transparent)]
    NotEstablished(#[from] CrdWaitError),
}

/// (kind, plural, singular, short names, version, scope).
type Kind = (
    &'static str,
    &'static str,
    &'static str,
    &'static [&'static str],
    &'static str,
    &'static str,
);

const KINDS: [Kind; 4] = [
    (
        "ClusterServiceVersion",
        "clusterserviceversions",
        "clusterserviceversion",
        &["csv", "csvs"],
        "v1alpha1",
        "Namespaced",
    ),
    (
        "OperatorGroup",
        "operatorgroups",
        "operatorgroup",
        &["og"],
        "v1",
        "Namespaced",
    ),
    (
        "Subscription",
        "subscriptions",
        "subscription",
        &["sub", "subs"],
        "v1alpha1",
        "Namespaced",
    ),
    (
        OPERATOR_KIND,
        OPERATOR_PLURAL,
        "operator",
        &[],
        OPERATOR_VERSION,
        "Cluster",
    ),
];

/// The four CRDs (CSV, OperatorGroup, Subscription, Operator) as JSON objects (`apiextensions.k8s.io/v1`).
pub fn minimal_crds() -> Vec<Value> {
    KINDS
        .iter()
        .map(|(kind, plural, singular, short, version, scope)| {
            json!({
                "apiVersion": "apiextensions.k8s.io/v1",
                "kind": "CustomResourceDefinition",
                "metadata": {"name": format!("{plural}.{GROUP}")},
                "spec": {
                    "group": GROUP,
                    "scope": scope,
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

/// Server-side applies the [`minimal_crds`] (forcing, as field manager [`FIELD_MANAGER`]) and
/// waits until every one is established, so the OLM kinds are served when it returns.
pub async fn install(client: &Client) -> Result<(), InstallError> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let mut names = Vec::new();
    for crd in minimal_crds() {
        let name = crd["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        api.patch(&name, &params, &Patch::Apply(&crd))
            .await
            .map_err(|source| InstallError::Apply {
                name: name.clone(),
                source,
            })?;
        names.push(name);
    }
    for name in names {
        wait_established(client, &name, ESTABLISH_TIMEOUT).await?;
    }
    Ok(())
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
                format!("{OPERATOR_PLURAL}.{GROUP}"),
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
                format!("{GROUP}/{OPERATOR_VERSION}"),
            ]
        );
    }

    #[tokio::test]
    async fn install_makes_the_olm_kinds_served() {
        let server = memory_apiserver::MemoryServer::start(Default::default());
        let client = server.client();
        install(&client).await.expect("install");
        install(&client).await.expect("install again is harmless");
        let csvs: Api<ClusterServiceVersion> = Api::all(client);
        assert!(
            csvs.list(&Default::default())
                .await
                .unwrap()
                .items
                .is_empty()
        );
    }
}
