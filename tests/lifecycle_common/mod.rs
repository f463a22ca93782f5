//! Shared by the lifecycle tests (`lifecycle_alive`, `lifecycle_uninstall`): running the `cvo`
//! binary against the test cluster, and installing the kinds they need where missing.
#![allow(dead_code)]

use std::path::Path;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use serde_json::Value;

pub use crate::common::run_cvo;
use crate::common::{self, TestCluster};

/// The documents of a manifests-example file, as JSON.
pub fn example_documents(file: &str) -> Vec<Value> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("manifests-example")
        .join(file);
    let text = std::fs::read_to_string(&path).expect("manifests-example file");
    text.split("\n---\n")
        .map(|doc| serde_saphyr::from_str::<Value>(doc).expect("YAML document"))
        .filter(|v| !v.is_null())
        .collect()
}

fn resource_of(doc: &Value, plural: &str) -> ApiResource {
    let api_version = doc["apiVersion"].as_str().expect("apiVersion");
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(group, version, doc["kind"].as_str().expect("kind")),
        plural,
    )
}

/// The shipped lifecycle component's cluster-wide parts — the `Alive` CRD and the deletion
/// guard (policy and binding) — applied from manifests-example (server-side apply, so running
/// twice, or beside another test, is harmless). They stay on a real cluster: other tests use
/// them at the same time.
pub async fn install_alive_component(tc: &TestCluster) {
    let ssa = PatchParams::apply("cvo-lifecycle-test").force();
    for (file, plural) in [
        (
            "0000_05_cluster-lifecycle_01_alives.crd.yaml",
            "customresourcedefinitions",
        ),
        ("0000_05_cluster-lifecycle_02_alive-deletion-guard.yaml", ""),
    ] {
        for doc in example_documents(file) {
            let plural = match doc["kind"].as_str() {
                Some("ValidatingAdmissionPolicy") => "validatingadmissionpolicies",
                Some("ValidatingAdmissionPolicyBinding") => "validatingadmissionpolicybindings",
                _ => plural,
            };
            let name = doc["metadata"]["name"].as_str().expect("name").to_owned();
            tc.dynamic(&resource_of(&doc, plural), None)
                .patch(&name, &ssa, &Patch::Apply(&doc))
                .await
                .unwrap_or_else(|e| panic!("apply {file} {name}: {e}"));
        }
    }
    common::wait_established(tc, "alives.lifecycle.cvo.io").await;
    if !tc.is_memory() {
        // The policy as applied is in effect once its controller observed this generation.
        let policies = tc.dynamic(
            &ApiResource::from_gvk_with_plural(
                &GroupVersionKind::gvk(
                    "admissionregistration.k8s.io",
                    "v1",
                    "ValidatingAdmissionPolicy",
                ),
                "validatingadmissionpolicies",
            ),
            None,
        );
        common::poll_until(
            "the Alive deletion guard to be observed",
            tc.deadline(),
            || async {
                let p = policies
                    .get("alive-deletion-guard.lifecycle.cvo.io")
                    .await
                    .map_err(|e| e.to_string())?;
                let observed = p.data["status"]["observedGeneration"].as_i64();
                if observed.is_some() && observed == p.metadata.generation {
                    Ok(())
                } else {
                    Err(format!(
                        "generation {:?}, observed {observed:?}",
                        p.metadata.generation
                    ))
                }
            },
        )
        .await;
    }
}

/// OLM's kinds, where missing: the real CSV and OperatorGroup CRDs (test fixtures, as
/// `tests/olm_cleanup.rs` installs them) and the minimal Subscription and Operator ones. Never
/// tracked for cleanup: on a real cluster they may be OLM's own, and other tests use them.
pub async fn install_olm_crds(tc: &TestCluster) {
    let api: Api<CustomResourceDefinition> = Api::all(tc.client.clone());
    let mut crds: Vec<CustomResourceDefinition> = Vec::new();
    for file in [
        "operators.coreos.com_clusterserviceversions.yaml",
        "operators.coreos.com_operatorgroups.yaml",
    ] {
        let path = format!(
            "{}/tests/fixtures/olm/crds/{file}",
            env!("CARGO_MANIFEST_DIR")
        );
        let text = std::fs::read_to_string(&path).expect("OLM CRD fixture");
        crds.push(serde_saphyr::from_str(&text).expect("OLM CRD yaml"));
    }
    for crd in cvo::dev::olm_crds::minimal_crds() {
        let name = crd["metadata"]["name"].as_str().unwrap_or_default();
        if name.starts_with("subscriptions.") || name.starts_with("operators.") {
            crds.push(serde_json::from_value(crd).expect("minimal CRD"));
        }
    }
    for crd in crds {
        let name = crd.metadata.name.clone().expect("CRD name");
        match api.create(&PostParams::default(), &crd).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => panic!("create CRD {name}: {e}"),
        }
        common::wait_established(tc, &name).await;
    }
}

/// A dynamic object from JSON.
pub fn object(v: Value) -> DynamicObject {
    serde_json::from_value(v).expect("object")
}
