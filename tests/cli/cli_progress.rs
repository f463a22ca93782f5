//! `cvo apply`'s progress says why: run as a ServiceAccount that may read ClusterVersion but
//! nothing else (on the real server; the in-memory one does not authorize, so there every
//! ConfigMap request is refused with 403 by a fault rule of the server), the "still working
//! towards" line names the most frequent error of the last install round with its count, and
//! so do the final Failing and Progressing conditions.

use crate::common;

use std::time::Duration;

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{Api, PostParams};
use memory_apiserver::{FaultAction, FaultRule};
use serde_json::json;

const MANIFESTS: usize = 40;

/// A kubeconfig for `ns/nobody`, a ServiceAccount allowed only to get ClusterVersion (the
/// RBAC objects are created as the admin and removed with the cluster's tracked objects).
async fn nobody(tc: &common::TestCluster, ns: &str, dir: &std::path::Path) -> std::path::PathBuf {
    let admin = tc.kubeconfig_file(dir).await;
    let sas = Api::<ServiceAccount>::namespaced(tc.client.clone(), ns);
    let sa: ServiceAccount =
        serde_json::from_value(json!({"metadata": {"name": "nobody", "namespace": ns}})).unwrap();
    sas.create(&PostParams::default(), &sa)
        .await
        .expect("create sa");
    let rbac = |kind: &str| {
        common::builtin(
            "rbac.authorization.k8s.io",
            "v1",
            kind,
            &format!("{}s", kind.to_lowercase()),
        )
    };
    let name = format!("{ns}-cv-reader");
    let role = common::object(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": name},
        "rules": [{"apiGroups": ["config.openshift.io"], "resources": ["clusterversions", "featuregates"], "verbs": ["get"]}]}));
    let binding = common::object(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": "nobody", "namespace": ns}]}));
    for (kind, object) in [("ClusterRole", role), ("ClusterRoleBinding", binding)] {
        let resource = rbac(kind);
        tc.dynamic(&resource, None)
            .create(&PostParams::default(), &object)
            .await
            .unwrap_or_else(|e| panic!("create {kind}: {e}"));
        tc.track_cluster_object(&resource, &name);
    }
    let token = sas
        .create_token_request(
            "nobody",
            &PostParams::default(),
            &TokenRequest {
                spec: TokenRequestSpec {
                    expiration_seconds: Some(3600),
                    ..Default::default()
                },
                ..Default::default()
            },
        )
        .await
        .expect("token request")
        .status
        .expect("token status")
        .token;
    super::cli_rbac::token_kubeconfig(&admin, &token, dir)
}

#[tokio::test]
async fn the_progress_line_names_the_most_frequent_error_with_its_count() {
    let tc = common::cluster().await;
    let _turn = common::sync_turn(&tc).await;
    let ns = tc.namespace("why").await;
    let dir = tempfile::tempdir().unwrap();
    let release = dir.path().join("release");
    let files: Vec<(String, String)> = (0..MANIFESTS)
        .map(|i| {
            (
                format!("0000_10_c{i:02}_cm.yaml"),
                common::configmap(&ns, &format!("cm-{i}"), "", &[("a", "b")]),
            )
        })
        .collect();
    let files: Vec<(&str, String)> = files.iter().map(|(f, c)| (f.as_str(), c.clone())).collect();
    std::fs::create_dir(&release).unwrap();
    common::write_release(&release, Some("1.0.0"), &files);
    let kubeconfig = match &tc.memory {
        Some(server) => {
            server.faults().add(
                FaultRule::new(FaultAction::Status(403))
                    .kind("ConfigMap")
                    .namespace(&ns),
            );
            tc.kubeconfig_file(dir.path()).await
        }
        None => nobody(&tc, &ns, dir.path()).await,
    };
    let release = release.to_string_lossy().into_owned();
    let started = std::time::Instant::now();
    let (code, stdout, stderr) = common::run_cvo(
        &kubeconfig,
        &["apply", "--release", &release, "--install-timeout", "20s"],
    )
    .await;
    assert_eq!(code, 1, "{stdout}\n{stderr}");
    assert!(started.elapsed() >= Duration::from_secs(10), "{stderr}");
    let line = stderr
        .lines()
        .find(|l| l.contains("still working towards 1.0.0: "))
        .unwrap_or_else(|| panic!("no progress line in {stderr}"));
    // Between rounds the line waits "on the next install round", during one on the tasks in
    // flight (a busy machine's ticker can fall in either): the count and the last round's
    // errors are what it must name.
    assert!(line.contains(&format!("0 of {MANIFESTS} done; ")), "{line}");
    assert!(
        line.contains(&format!("; last round: {MANIFESTS} failed: ")),
        "{line}"
    );
    assert!(line.contains("(403 "), "{line}");
    if tc.memory.is_none() {
        assert!(
            line.contains(&format!(
                "User \"system:serviceaccount:{ns}:nobody\" cannot get resource \"configmaps\""
            )),
            "{line}"
        );
    }
    assert!(
        stdout.contains(&format!(
            "Failing=True MultipleErrors: {MANIFESTS} manifests failed (most often, {MANIFESTS} failed: "
        )),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!(
            "Progressing=True MultipleErrors: Unable to apply 1.0.0: 0 of {MANIFESTS} done; {MANIFESTS} failed: "
        )),
        "{stdout}"
    );
}
