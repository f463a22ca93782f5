//! manifests-example on a test cluster: what applying it leaves behind (tracked for cleanup),
//! its deletion guard removed at the end, copies of it at other versions and with OpenShift's
//! own ClusterVersion and ClusterOperator CRDs in place of the example's, and the stand-in
//! CRDs of `common::openshift_kind` put back afterwards.

use std::path::{Path, PathBuf};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::discovery::ApiResource;
use serde_json::json;

use super::{TestCluster, TestCrd};

/// The example's ClusterVersion CRD file (and OpenShift's payload's name for it).
pub const CV_CRD_FILE: &str = "0000_00_cluster-version-operator_01_clusterversions.crd.yaml";
/// The example's ClusterOperator CRD file (and OpenShift's payload's name for it).
pub const CO_CRD_FILE: &str = "0000_00_cluster-version-operator_01_clusteroperators.crd.yaml";
/// The OpenShift ClusterVersion CRD in the corpus for a feature set (`Default` or
/// `DevPreviewNoUpgrade`, the variants the corpus holds).
fn openshift_cv_crd(feature_set: &str) -> String {
    format!("0000_00_cluster-version-operator_01_clusterversions-{feature_set}.crd.yaml")
}

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

/// The end of a test that applied the example with its ClusterVersion `version` (the
/// kind's API `cvs`): deletes `version` and waits until it is gone, puts back the stand-in CRDs
/// the example replaced, and removes its admission guard.
pub async fn clean_up(tc: &TestCluster, cvs: &kube::Api<kube::api::DynamicObject>) {
    cvs.delete("version", &Default::default())
        .await
        .expect("delete ClusterVersion version");
    super::wait_gone(tc, cvs, "version", "ClusterVersion version").await;
    restore_stand_in_crds(tc).await;
    remove_guard(tc).await;
}

/// [`clean_up`], then deletes what [`prepare`] tracked (the example's namespaces, CRDs and
/// cluster-scoped RBAC) and waits until it is gone: the cleanup guard deletes them only once
/// the test's cluster drops, after the ClusterVersion lock is released, so that the next test
/// of the binary to apply the example on a real cluster could see its objects deleted under it.
pub async fn clean_up_and_wait(tc: &TestCluster, cvs: &kube::Api<kube::api::DynamicObject>) {
    clean_up(tc, cvs).await;
    let gone = |api: Api<DynamicObject>, name: &'static str| async move {
        match api.delete(name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => panic!("delete {name}: {e}"),
        }
        super::wait_gone(tc, &api, name, name).await;
    };
    let rbac =
        |kind: &str, plural: &str| super::builtin("rbac.authorization.k8s.io", "v1", kind, plural);
    gone(
        tc.dynamic(&rbac("ClusterRole", "clusterroles"), None),
        "widget-operator",
    )
    .await;
    for binding in ["widget-operator", "cvo-operator"] {
        let bindings = rbac("ClusterRoleBinding", "clusterrolebindings");
        gone(tc.dynamic(&bindings, None), binding).await;
    }
    let crds = super::builtin(
        "apiextensions.k8s.io",
        "v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
    );
    for crd in ["widgets.example.com", "alives.lifecycle.cvo.io"] {
        gone(tc.dynamic(&crds, None), crd).await;
    }
    let namespaces = super::builtin("", "v1", "Namespace", "namespaces");
    for ns in NAMESPACES {
        gone(tc.dynamic(&namespaces, None), ns).await;
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
/// in place of the example's. The test fails without the corpus: it is
/// `#[ignore = "needs the shared OpenShift corpus …"]`.
pub fn with_openshift_crds(dest: &Path, version: &str, previous: &str) {
    with_openshift_crds_of(dest, version, previous, "Default");
}

/// [`with_openshift_crds`] with the ClusterVersion CRD of OpenShift's feature set
/// `feature_set`: `Default`, or `DevPreviewNoUpgrade` (the one with `spec.desiredUpdate.mode`
/// and `acceptRisks`, `status.conditionalUpdateRisks` and `conditionalUpdates[].riskNames`:
/// feature gates ClusterUpdatePreflight and ClusterUpdateAcceptRisks). The CRD keeps its
/// `release.openshift.io/feature-set` annotation, so the release is read with `--feature-set
/// FEATURE_SET` (the default `Default` leaves the DevPreviewNoUpgrade CRD out).
pub fn with_openshift_crds_of(dest: &Path, version: &str, previous: &str, feature_set: &str) {
    let corpus = super::needs::corpus("openshift-api");
    std::fs::create_dir_all(dest).expect("release directory");
    for entry in std::fs::read_dir(dir()).expect("manifests-example") {
        let path = entry.expect("entry").path();
        if path.is_file() {
            std::fs::copy(&path, dest.join(path.file_name().expect("name"))).expect("copy");
        }
    }
    std::fs::copy(
        corpus.join(openshift_cv_crd(feature_set)),
        dest.join(CV_CRD_FILE),
    )
    .expect("CV CRD");
    std::fs::copy(corpus.join(CO_CRD_FILE), dest.join(CO_CRD_FILE)).expect("CO CRD");
    std::fs::write(
        dest.join("release-metadata"),
        format!(
            r#"{{"kind": "cincinnati-metadata-v0", "version": "{version}", "previous": ["{previous}"]}}"#
        ),
    )
    .expect("release-metadata");
}

/// Puts the stand-in ClusterVersion, ClusterOperator and FeatureGate CRDs (those of
/// `common::openshift_kind`) back in place of whatever a test's release installed under their
/// names, so that later tests on a real cluster find the kinds as they expect. Hold the
/// ClusterVersion lock (and delete `version` first).
pub async fn restore_stand_in_crds(tc: &TestCluster) {
    let crds = Api::<CustomResourceDefinition>::all(tc.client.clone());
    for kind in ["ClusterVersion", "ClusterOperator", "FeatureGate"] {
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
            wait_status_schema(tc, &stand_in.resource(), StatusSchema::KeepsUnknownFields).await;
        }
    }
}

/// How the server judges a status write of a kind, as [`wait_status_schema`] probes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusSchema {
    /// A field the schema does not name is kept (the stand-in CRDs' schema).
    KeepsUnknownFields,
    /// A field the schema does not name is dropped (a schema with properties, OpenShift's).
    PrunesUnknownFields,
    /// The write is refused (422: a required field is missing).
    Refuses,
}

/// Waits until the server judges status writes of the cluster-scoped kind `resource` (with a
/// status subresource) as `expected`. A real API server serves an updated CRD's schema a
/// moment after the update is stored (its handler follows the CRD through an informer), so a
/// status written right after a test swaps a CRD may still meet the old schema; this asks a
/// probe object with a dry-run status patch until the answer is the new schema's.
pub async fn wait_status_schema(tc: &TestCluster, resource: &ApiResource, expected: StatusSchema) {
    const PROBE: &str = "cvo-test-schema-probe";
    let api = Api::<DynamicObject>::all_with(tc.client.clone(), resource);
    let mut probe = DynamicObject::new(PROBE, resource);
    probe.data = json!({"spec": {"clusterID": "probe"}});
    let dry_run = PatchParams {
        dry_run: true,
        ..PatchParams::default()
    };
    let patch = Patch::Merge(json!({"status": {"cvoTestProbe": "x"}}));
    super::poll_until(
        &format!("{} status judged as {expected:?}", resource.kind),
        tc.deadline(),
        || async {
            if api
                .get_opt(PROBE)
                .await
                .map_err(|e| e.to_string())?
                .is_none()
            {
                match api.create(&PostParams::default(), &probe).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(s)) if s.code == 409 => {}
                    Err(e) => return Err(format!("create the probe: {e}")),
                }
            }
            let seen = match api.patch_status(PROBE, &dry_run, &patch).await {
                Ok(o) if o.data["status"]["cvoTestProbe"] == "x" => {
                    StatusSchema::KeepsUnknownFields
                }
                Ok(_) => StatusSchema::PrunesUnknownFields,
                Err(kube::Error::Api(s)) if s.code == 422 => StatusSchema::Refuses,
                Err(e) => return Err(e.to_string()),
            };
            if seen == expected {
                Ok(())
            } else {
                Err(format!("{seen:?}"))
            }
        },
    )
    .await;
    match api.delete(PROBE, &DeleteParams::default()).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 404 => {}
        Err(e) => panic!("delete the {} probe: {e}", resource.kind),
    }
    super::wait_gone(tc, &api, PROBE, "the schema probe").await;
}

/// The image of `cvo operator` in the release [`least_privilege_update`] writes.
pub const LEAST_PRIVILEGE_IMAGE: &str = "ghcr.io/cvo-project/cvo:1.5.0";
/// manifests-example's file of `ClusterRoleBinding cvo-operator` (to `cluster-admin`); in the
/// 1.5.0 release it holds `cvo rbac`'s output instead.
pub const RBAC_FILE: &str = "0000_00_cluster-version-operator_04_rbac.yaml";
/// The 1.5.0 release's delete manifest of `ClusterRoleBinding cvo-operator`: the same
/// component as [`RBAC_FILE`] and a later file name, so it runs after the new RBAC is applied.
pub const OLD_BINDING_DELETE_FILE: &str =
    "0000_00_cluster-version-operator_04_rbac_cluster-admin.delete.yaml";
/// The name of the least-privilege RBAC objects `cvo rbac` prints by default.
pub const LEAST_PRIVILEGE_NAME: &str = "cvo-operator-least-privilege";

/// Writes into `dest` release 1.5.0, the update from manifests-example (1.4.0) that moves the
/// operator from `cluster-admin` to least privilege, and returns its directory (`dest`); `cvo`
/// is the binary that prints the RBAC (`common::cli::binary()`). See
/// [`least_privilege_update_with_image`].
pub fn least_privilege_update(dest: &Path, cvo: &Path) -> PathBuf {
    least_privilege_update_with_image(dest, cvo, LEAST_PRIVILEGE_IMAGE)
}

/// [`least_privilege_update`] with the operator's image `image` (a node test tier runs an
/// image of its own). The release, as docs/operator.md ("Least-privilege RBAC") tells a
/// release author to write it:
///
/// - manifests-example as `1.5.0` (`previous: ["1.4.0"]`), the `cvo-operator` Deployment's
///   image `image`, and without 1.4.0's delete manifests (carried into a minor update they are
///   stale: every cluster that went through 1.4.0 deleted their objects);
/// - [`RBAC_FILE`]: `cvo rbac --release DEST --self-deployment cluster-version/cvo-operator`
///   printed by the real binary (ClusterRole, Role and their bindings, all named
///   [`LEAST_PRIVILEGE_NAME`], annotated for the example's profiles), printed a second time
///   once it is in the release so that its rules also cover keeping those objects applied,
///   and checked to be a fixed point;
/// - [`OLD_BINDING_DELETE_FILE`]: the delete manifest of `ClusterRoleBinding cvo-operator`,
///   with the old binding's profile annotations, ordered after the new bindings (checked).
///
/// Panics, saying why, when a step fails.
pub fn least_privilege_update_with_image(dest: &Path, cvo: &Path, image: &str) -> PathBuf {
    std::fs::create_dir_all(dest).expect("release directory");
    for entry in std::fs::read_dir(dir()).expect("manifests-example") {
        let path = entry.expect("entry").path();
        let name = path
            .file_name()
            .expect("name")
            .to_str()
            .expect("UTF-8 name");
        if path.is_file() && !name.ends_with(".delete.yaml") && name != RBAC_FILE {
            std::fs::copy(&path, dest.join(name)).expect("copy");
        }
    }
    std::fs::write(
        dest.join("release-metadata"),
        r#"{"kind": "cincinnati-metadata-v0", "version": "1.5.0", "previous": ["1.4.0"]}"#,
    )
    .expect("release-metadata");
    let deployment = dest.join("0000_00_cluster-version-operator_05_deployment.yaml");
    let text = std::fs::read_to_string(&deployment).expect("the operator's Deployment");
    let old_image = "image: ghcr.io/cvo-project/cvo:1.4.0";
    assert_eq!(
        text.matches(old_image).count(),
        1,
        "manifests-example's Deployment runs ghcr.io/cvo-project/cvo:1.4.0 once"
    );
    std::fs::write(
        &deployment,
        text.replace(old_image, &format!("image: {image}")),
    )
    .expect("Deployment");

    // The delete manifest of the old binding, with its profile annotations.
    let old: serde_json::Value = serde_saphyr::from_str(
        &std::fs::read_to_string(dir().join(RBAC_FILE)).expect("the shipped RBAC file"),
    )
    .expect("the shipped RBAC file is YAML");
    assert_eq!(old["kind"], "ClusterRoleBinding");
    assert_eq!(old["roleRef"]["name"], "cluster-admin");
    let mut annotations = String::new();
    for (key, value) in old["metadata"]["annotations"]
        .as_object()
        .expect("profile annotations")
    {
        annotations.push_str(&format!("    {key}: {value}\n"));
    }
    std::fs::write(
        dest.join(OLD_BINDING_DELETE_FILE),
        format!(
            "# The operator ran as cluster-admin through this binding until 1.4.0. Deleted after\n\
             # {RBAC_FILE} (a later file name in the same component) has bound its\n\
             # least-privilege role, so the operator is never without a role.\n\
             apiVersion: rbac.authorization.k8s.io/v1\n\
             kind: ClusterRoleBinding\n\
             metadata:\n  name: {}\n  annotations:\n{annotations}    release.openshift.io/delete: \"true\"\n",
            old["metadata"]["name"].as_str().expect("name")
        ),
    )
    .expect("delete manifest");

    print_rbac(dest, cvo);

    // The order: each new binding in the same component as the delete manifest, before it.
    let release = cvo::release::load(dest, &Default::default()).expect("load 1.5.0");
    assert!(!release.has_errors(), "{:?}", release.diagnostics);
    let deletes: Vec<&cvo::release::Manifest> =
        release.manifests.iter().filter(|m| m.is_delete()).collect();
    assert_eq!(deletes.len(), 1, "only the old binding is deleted");
    let delete = deletes[0];
    assert_eq!(delete.id.to_string(), "ClusterRoleBinding cvo-operator");
    let bindings: Vec<&cvo::release::Manifest> = release
        .manifests
        .iter()
        .filter(|m| m.id.kind.ends_with("Binding") && m.id.name == LEAST_PRIVILEGE_NAME)
        .collect();
    assert_eq!(bindings.len(), 2, "ClusterRoleBinding and RoleBinding");
    for binding in bindings {
        assert_eq!(
            binding.order, delete.order,
            "{} in the same component",
            binding.id
        );
        assert!(
            binding.file_name() < delete.file_name(),
            "{} applied before the old binding is deleted",
            binding.id
        );
    }
    dest.to_path_buf()
}

/// Writes [`RBAC_FILE`] of the release `dest`: `cvo rbac --release DEST --self-deployment
/// cluster-version/cvo-operator` printed by the binary `cvo`, again until its output no
/// longer changes (the second run covers its own objects, now in the release; checked to be a
/// fixed point).
pub fn print_rbac(dest: &Path, cvo: &Path) {
    let print = || {
        let mut cmd = std::process::Command::new(cvo);
        for var in super::cli::SCRUBBED_ENV {
            cmd.env_remove(var);
        }
        let out = cmd
            .args(["rbac", "--release"])
            .arg(dest)
            .args(["--self-deployment", "cluster-version/cvo-operator"])
            .output()
            .expect("run cvo rbac");
        assert!(
            out.status.success(),
            "cvo rbac: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8(out.stdout).expect("UTF-8");
        std::fs::write(dest.join(RBAC_FILE), &text).expect("RBAC file");
        text
    };
    print();
    let second = print();
    assert_eq!(
        print(),
        second,
        "cvo rbac's output in the release is a fixed point"
    );
}
