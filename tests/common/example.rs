//! manifests-example on a test cluster: what applying it leaves behind (tracked for cleanup),
//! its deletion guard removed at the end, copies of it at other versions and with OpenShift's
//! own ClusterVersion and ClusterOperator CRDs in place of the example's, and the stand-in
//! CRDs of `common::openshift_kind` put back afterwards.

use std::path::{Path, PathBuf};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, PostParams};

use super::{TestCluster, TestCrd};

/// The example's ClusterVersion CRD file (and OpenShift's payload's name for it).
pub const CV_CRD_FILE: &str = "0000_00_cluster-version-operator_01_clusterversions.crd.yaml";
/// The example's ClusterOperator CRD file (and OpenShift's payload's name for it).
pub const CO_CRD_FILE: &str = "0000_00_cluster-version-operator_01_clusteroperators.crd.yaml";
/// The OpenShift ClusterVersion CRD in the corpus (feature set Default).
const OPENSHIFT_CV_CRD: &str =
    "0000_00_cluster-version-operator_01_clusterversions-Default.crd.yaml";

/// manifests-example in the repository.
pub fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests-example")
}

/// The namespaces manifests-example creates.
const NAMESPACES: [&str; 4] = [
    "cluster-version",
    "cluster-config",
    "widget-operator",
    "cluster-lifecycle",
];

/// Makes the cluster ready for an apply of manifests-example and tracks for cleanup what it
/// creates beside ClusterVersion and its CRDs (on a real cluster its Deployments never run —
/// no kubelet — and would be unhealthy for whoever applies it next). The cleanup of an earlier
/// test deletes the example's namespaces without waiting: an apply into a namespace still
/// terminating would fail, so this waits until none is.
pub async fn prepare(tc: &TestCluster) {
    let namespaces = tc.dynamic(&super::builtin("", "v1", "Namespace", "namespaces"), None);
    for ns in NAMESPACES {
        super::poll_until(
            &format!("namespace {ns} not terminating"),
            tc.deadline(),
            || async {
                match namespaces.get_opt(ns).await {
                    Ok(Some(n)) if n.data["status"]["phase"] == "Terminating" => {
                        Err("terminating".to_owned())
                    }
                    Ok(_) => Ok(()),
                    Err(e) => Err(e.to_string()),
                }
            },
        )
        .await;
        tc.track_namespace(ns);
    }
    tc.track_crd("widgets.example.com");
    tc.track_crd("alives.lifecycle.cvo.io");
    let rbac =
        |kind: &str, plural: &str| super::builtin("rbac.authorization.k8s.io", "v1", kind, plural);
    tc.track_cluster_object(&rbac("ClusterRole", "clusterroles"), "widget-operator");
    for binding in ["widget-operator", "cvo-operator"] {
        tc.track_cluster_object(&rbac("ClusterRoleBinding", "clusterrolebindings"), binding);
    }
}

/// Deletes the example's admission guard (policy and binding), which denies deleting its
/// `Alive` object and would hold the namespace cleanup (docs/cluster-deletion.md).
pub async fn remove_guard(tc: &TestCluster) {
    for (kind, plural) in [
        (
            "ValidatingAdmissionPolicyBinding",
            "validatingadmissionpolicybindings",
        ),
        ("ValidatingAdmissionPolicy", "validatingadmissionpolicies"),
    ] {
        let api = tc.dynamic(
            &super::builtin("admissionregistration.k8s.io", "v1", kind, plural),
            None,
        );
        match api
            .delete("alive-deletion-guard.lifecycle.cvo.io", &Default::default())
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => panic!("delete the example's {kind}: {e}"),
        }
    }
}

/// Writes into `dest` a copy of manifests-example as release `version` (updating from
/// `previous`), with OpenShift's own ClusterVersion and ClusterOperator CRDs from the corpus
/// in place of the example's. `None` (the test is skipped, visibly) without the corpus.
pub fn with_openshift_crds(dest: &Path, version: &str, previous: &str) -> Option<()> {
    let corpus = super::skip::corpus("openshift-api")?;
    std::fs::create_dir_all(dest).expect("release directory");
    for entry in std::fs::read_dir(dir()).expect("manifests-example") {
        let path = entry.expect("entry").path();
        if path.is_file() {
            std::fs::copy(&path, dest.join(path.file_name().expect("name"))).expect("copy");
        }
    }
    std::fs::copy(corpus.join(OPENSHIFT_CV_CRD), dest.join(CV_CRD_FILE)).expect("CV CRD");
    std::fs::copy(corpus.join(CO_CRD_FILE), dest.join(CO_CRD_FILE)).expect("CO CRD");
    std::fs::write(
        dest.join("release-metadata"),
        format!(
            r#"{{"kind": "cincinnati-metadata-v0", "version": "{version}", "previous": ["{previous}"]}}"#
        ),
    )
    .expect("release-metadata");
    Some(())
}

/// Puts the stand-in ClusterVersion and ClusterOperator CRDs (those of
/// `common::openshift_kind`) back in place of whatever a test's release installed under their
/// names, so that later tests on a real cluster find the kinds as they expect. Hold the
/// ClusterVersion lock (and delete `version` first).
pub async fn restore_stand_in_crds(tc: &TestCluster) {
    let crds = Api::<CustomResourceDefinition>::all(tc.client.clone());
    for kind in ["ClusterVersion", "ClusterOperator"] {
        let stand_in = TestCrd::in_group("config.openshift.io", kind, false, true);
        // The server's CRD controllers write its status meanwhile: a conflict reads again.
        let replaced = super::poll_until(
            &format!("the stand-in {kind} CRD put back"),
            tc.deadline(),
            || async {
                let Some(mut current) = crds
                    .get_opt(&stand_in.name)
                    .await
                    .map_err(|e| e.to_string())?
                else {
                    return Ok(false);
                };
                current.spec = stand_in.manifest().spec;
                current.metadata.managed_fields = None;
                crds.replace(&stand_in.name, &PostParams::default(), &current)
                    .await
                    .map(|_| true)
                    .map_err(|e| e.to_string())
            },
        )
        .await;
        if replaced {
            super::wait_established(tc, &stand_in.name).await;
        }
    }
}
