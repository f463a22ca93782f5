//! The shipped lifecycle component (`manifests-example`): its documents as JSON, and its
//! cluster-wide parts installed where missing (the `Alive` CRD and its deletion guard).

use std::path::Path;

use kube::api::{ApiResource, GroupVersionKind, Patch, PatchParams};
use serde_json::Value;

use super::{self as common, TestCluster};

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
