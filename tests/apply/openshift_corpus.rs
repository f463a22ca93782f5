//! The real OpenShift corpus (`../shared/corpus/openshift-release`), unedited, as a payload
//! (its files in `release-manifests/`, a `release-metadata` naming version 4.21.0), applied
//! with `cvo apply` on both servers as OpenShift's CVO would take it: its feature-gated
//! manifests are left out while FeatureGate `cluster` enables none of their gates, and come in
//! as the cluster's FeatureGate status — the corpus's own rendered `Default`, then
//! `TechPreviewNoUpgrade` gate lists — enables them. Every failure is one the corpus causes
//! by being part of a payload (kinds and namespaces other components ship), never a problem
//! reading or applying what it holds (and two SecurityContextConstraints that rely on the
//! defaults OpenShift's own API server fills in).
//!
//! On a real cluster the test removes what the corpus installed cluster-wide (admission
//! webhooks and policies, flow control, CRDs, namespaces) and puts the stand-in CRDs back.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use kube::api::{ApiResource, DeleteParams, Patch, PatchParams};
use kube::core::GroupVersionKind;
use serde_json::{Value, json};

const VERSION: &str = "4.21.0";

/// The corpus's rendered FeatureGate of feature set `set` (self-managed HA profile).
fn rendered_gates(corpus: &Path, set: &str) -> Value {
    let file = corpus.join(format!(
        "0000_50_cluster-config-api_featureGate-4-10-SelfManagedHA-{set}.yaml"
    ));
    let object: Value =
        serde_json::from_str(&std::fs::read_to_string(&file).expect("rendered FeatureGate"))
            .expect("rendered FeatureGate is JSON");
    object["status"]["featureGates"][0].clone()
}

/// The payload: every regular file of the corpus, byte for byte, in `release-manifests/`.
fn payload(corpus: &Path, dest: &Path) {
    let manifests = dest.join("release-manifests");
    std::fs::create_dir_all(&manifests).expect("release-manifests");
    for entry in std::fs::read_dir(corpus).expect("corpus") {
        let path = entry.expect("entry").path();
        if path.is_file() {
            std::fs::copy(&path, manifests.join(path.file_name().expect("name"))).expect("copy");
        }
    }
    std::fs::write(
        manifests.join("release-metadata"),
        format!(r#"{{"kind": "cincinnati-metadata-v0", "version": "{VERSION}"}}"#),
    )
    .expect("release-metadata");
}

/// The feature gate each gated manifest of the corpus needs, by file (its annotation).
fn gated_files(corpus: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(corpus).expect("corpus") {
        let path = entry.expect("entry").path();
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        for line in text.lines() {
            if let Some(value) = line
                .trim()
                .strip_prefix("release.openshift.io/feature-gate:")
            {
                let gate = value.trim().trim_matches('"').to_owned();
                out.insert(file_name(&path), gate);
            }
        }
    }
    out
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .and_then(|n| n.to_str())
        .expect("file name")
        .to_owned()
}

/// `cvo apply -o json` of the payload: its JSON report.
async fn apply(kubeconfig: &Path, release: &Path) -> Value {
    let (code, stdout, stderr) = common::run_cvo(
        kubeconfig,
        &[
            "apply",
            "--release",
            release.to_str().expect("utf-8 path"),
            "-o",
            "json",
            "--install-timeout",
            "10s",
            // Some 200 CRDs at once: a real server takes its time to establish them.
            "--health-timeout",
            "3m",
        ],
    )
    .await;
    // Failures (exit 1): the kinds and namespaces of components the corpus does not hold.
    assert!(code == 0 || code == 1, "exit {code}\n{stderr}");
    let report: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}\n{stderr}"));
    for r in report["results"].as_array().expect("results") {
        if r["action"] == "failed" {
            let error = r["error"].as_str().unwrap_or_default();
            // OpenShift's API server defaults these SCC fields in an admission plugin a plain
            // kube-apiserver lacks: its schema then requires them.
            let scc_defaults = r["kind"] == "SecurityContextConstraints"
                && error.contains("(422 Invalid)")
                && error.contains("Required value");
            // A kind whose CRD another component ships.
            let no_crd = error.starts_with("the server does not serve kind")
                || (error.starts_with("CustomResourceDefinition ")
                    && error.contains("it must be applied at an earlier run level"));
            // No kubelet runs the corpus's workloads (a real cluster's Deployments time out).
            let no_kubelet =
                r["kind"] == "Deployment" && r["health"]["reason"] == "WorkloadNotProgressing";
            assert!(
                no_crd
                    || no_kubelet
                    || error.contains("does not exist (create it earlier in the release)")
                    || scc_defaults,
                "a failure the corpus's partial payload does not explain: {r:#}"
            );
        }
    }
    report
}

/// The files the report says are left out by a feature gate, with the reason.
fn gate_excluded(report: &Value) -> BTreeMap<String, String> {
    report["results"]
        .as_array()
        .expect("results")
        .iter()
        .filter(|r| r["action"] == "excluded")
        .filter_map(|r| {
            let reason = r["reason"]
                .as_str()
                .filter(|r| r.starts_with("feature gate "))?;
            Some((file_name(Path::new(r["file"].as_str()?)), reason.to_owned()))
        })
        .collect()
}

/// What the report says of the manifests of `files`: file → action.
fn actions_of(report: &Value, files: &BTreeSet<&String>) -> BTreeMap<String, String> {
    report["results"]
        .as_array()
        .expect("results")
        .iter()
        .filter_map(|r| {
            let file = file_name(Path::new(r["file"].as_str()?));
            files
                .contains(&file)
                .then(|| (file, r["action"].as_str().unwrap_or_default().to_owned()))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the shared OpenShift corpus (../shared/corpus, or CVO_TEST_CORPUS): run with --include-ignored (.ci/run does)"]
async fn the_corpus_applies_unedited_and_feature_gates_decide_what_comes_in() {
    let corpus = common::needs::corpus("openshift-release");
    let tc = common::cluster().await;
    let (_guard, _) = common::cluster_version(&tc).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let release = dir.path().join("payload");
    payload(&corpus, &release);
    let gated = gated_files(&corpus);
    assert_eq!(
        gated.len(),
        7,
        "the corpus's feature-gated files: {gated:?}"
    );
    let kubeconfig = tc.kubeconfig_file(dir.path()).await;
    // The corpus ships no ClusterOperator CRD: on a real cluster, the stand-in other tests
    // installed goes (they hold the same lock; `common::openshift_kind` brings it back), so
    // that the kind is not served, as on a cluster that holds only the corpus.
    let crds = tc.dynamic(
        &ApiResource::from_gvk(&GroupVersionKind::gvk(
            "apiextensions.k8s.io",
            "v1",
            "CustomResourceDefinition",
        )),
        None,
    );
    let co_crd = "clusteroperators.config.openshift.io";
    if crds.get_opt(co_crd).await.expect("get CRD").is_some() {
        crds.delete(co_crd, &DeleteParams::default())
            .await
            .expect("delete the ClusterOperator CRD");
        common::wait_gone(&tc, &crds, co_crd, "the ClusterOperator CRD").await;
    }

    // The namespaces an earlier run of this test deleted are gone (an apply into one still
    // terminating would fail).
    let namespaces = tc.dynamic(
        &ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", "Namespace")),
        None,
    );
    common::poll_until(
        "no openshift- namespace terminating",
        tc.deadline(),
        || async {
            let list = namespaces
                .list(&Default::default())
                .await
                .map_err(|e| e.to_string())?;
            let terminating: Vec<String> = list
                .items
                .iter()
                .filter(|n| n.data["status"]["phase"] == "Terminating")
                .filter_map(|n| n.metadata.name.clone())
                .filter(|n| n.starts_with("openshift-"))
                .collect();
            if terminating.is_empty() {
                Ok(())
            } else {
                Err(terminating.join(", "))
            }
        },
    )
    .await;

    // No FeatureGate status: every gated manifest is left out, with the CVO's reason.
    let report = apply(&kubeconfig, &release).await;
    let installed = report.clone();
    assert_eq!(
        report["excluded"]["featureGate"], 7,
        "{:#}",
        report["excluded"]
    );
    let excluded = gate_excluded(&report);
    assert_eq!(
        excluded.keys().collect::<Vec<_>>(),
        gated.keys().collect::<Vec<_>>()
    );
    for (file, reason) in &excluded {
        assert_eq!(
            reason,
            &format!("feature gate {} is required but not enabled", gated[file]),
            "{file}"
        );
    }
    assert_eq!(report["featureGates"], json!([]));

    // The config operator's part, done by hand: FeatureGate `cluster` (created by the corpus)
    // gets the corpus's rendered gates of feature set `set` for this version.
    let fgs = tc.dynamic(
        &ApiResource::from_gvk(&GroupVersionKind::gvk(
            "config.openshift.io",
            "v1",
            "FeatureGate",
        )),
        None,
    );
    let set_status = |set: &str| {
        let mut entry = rendered_gates(&corpus, set);
        entry["version"] = json!(VERSION);
        json!({"status": {"featureGates": [entry]}})
    };
    fgs.patch_status(
        "cluster",
        &PatchParams::default(),
        &Patch::Merge(set_status("Default")),
    )
    .await
    .expect("FeatureGate status: Default");
    let report = apply(&kubeconfig, &release).await;
    let still_out: BTreeSet<&str> = gate_excluded(&report)
        .keys()
        .map(|f| gated[f].as_str())
        .collect();
    assert_eq!(
        still_out,
        BTreeSet::from([
            "CRDCompatibilityRequirementOperator",
            "ClusterAPIMachineManagement",
            "ClusterUpdateAcceptRisks"
        ]),
        "Default enables CRIOCredentialProviderConfig, GatewayAPIWithoutOLM and InsightsConfig"
    );

    fgs.patch_status(
        "cluster",
        &PatchParams::default(),
        &Patch::Merge(set_status("TechPreviewNoUpgrade")),
    )
    .await
    .expect("FeatureGate status: TechPreviewNoUpgrade");
    let report = apply(&kubeconfig, &release).await;
    assert_eq!(
        report["excluded"]["featureGate"], 0,
        "{:#}",
        report["excluded"]
    );
    let actions = actions_of(&report, &gated.keys().collect());
    assert_eq!(actions.len(), 7, "{actions:?}");
    // The CRDs and RBAC gated on them are applied; kinds other components ship (PrometheusRule,
    // InsightsDataGather) fail as every other manifest of theirs does.
    for (file, action) in &actions {
        assert_ne!(action, "excluded", "{file}");
    }
    for file in [
        "0000_20_crd-compatibility-checker_01_compatibilityrequirements.crd.yaml",
        "0000_30_cluster-api_01_clusterapis.crd.yaml",
        "0000_50_cluster-ingress-operator_00-cluster-role-sail-library.yaml",
    ] {
        assert!(
            matches!(actions[file].as_str(), "created" | "updated" | "unchanged"),
            "{file}: {}",
            actions[file]
        );
    }

    // The CRDs the cluster now serves are the release's: `validate --live` compares each with
    // the cluster's as the server stores it (a real server drops unknown schema keys and
    // empty values the corpus writes), in the profile it was applied in, and finds nothing.
    let payload = release.display().to_string();
    let (code, stdout, stderr) = common::run_cvo(
        &kubeconfig,
        &[
            "validate",
            "--release",
            &payload,
            "--live",
            "--profile",
            "self-managed-high-availability",
            "--format",
            "json",
        ],
    )
    .await;
    let validated: Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("validate --live: {e} (exit {code}): {stdout}\n{stderr}"));
    let crd_findings: Vec<&Value> = validated["diagnostics"]
        .as_array()
        .expect("diagnostics")
        .iter()
        .filter(|d| d["rule"].as_str().is_some_and(|r| r.starts_with("crd-")))
        .collect();
    assert!(crd_findings.is_empty(), "{crd_findings:#?}");

    clean_up(&tc, &installed, &report).await;
}

/// What the corpus installed cluster-wide, removed on a real cluster (the in-memory server goes
/// with the test): admission and flow-control objects, the CRDs and namespaces it created
/// (tracked), FeatureGate `cluster`; the stand-in CRDs are put back.
async fn clean_up(tc: &common::TestCluster, first: &Value, last: &Value) {
    const CLUSTER_WIDE: [&str; 6] = [
        "ValidatingWebhookConfiguration",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
        "FlowSchema",
        "PriorityLevelConfiguration",
        "PriorityClass",
    ];
    // The stand-ins other tests expect stay (put back below), not deleted.
    const STAND_INS: [&str; 3] = [
        "clusterversions.config.openshift.io",
        "clusteroperators.config.openshift.io",
        "featuregates.config.openshift.io",
    ];
    let created = [first, last].into_iter().flat_map(|r| {
        r["results"]
            .as_array()
            .expect("results")
            .iter()
            .filter(|r| r["action"] == "created")
    });
    for r in created {
        let (kind, name) = (r["kind"].as_str().unwrap_or_default(), r["name"].as_str());
        let Some(name) = name else { continue };
        match kind {
            "Namespace" => tc.track_namespace(name),
            "CustomResourceDefinition" if !STAND_INS.contains(&name) => tc.track_crd(name),
            kind if CLUSTER_WIDE.contains(&kind) => {
                let (group, version) = r["apiVersion"]
                    .as_str()
                    .and_then(|v| v.split_once('/'))
                    .expect("group/version");
                let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, kind));
                tc.track_cluster_object(&resource, name);
            }
            _ => {}
        }
    }
    let fgs = tc.dynamic(
        &common::TestCrd::in_group("config.openshift.io", "FeatureGate", false, true).resource(),
        None,
    );
    common::remove_feature_gate(tc, &fgs).await;
    common::example::restore_stand_in_crds(tc).await;
}
