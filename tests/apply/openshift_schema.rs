//! ClusterVersion status against OpenShift's own schema: with OpenShift's ClusterVersion and
//! ClusterOperator CRDs (the corpus) in place of manifests-example's, `cvo apply` writes a
//! status the server accepts — `desired {version, image}`, `history[].image`, `versionHash`,
//! `observedGeneration`, `availableUpdates` — and the printer columns `kubectl get
//! clusterversion` shows are filled in; a status the server refuses fails `cvo apply` with
//! the server's message; a superseded Partial history entry gets its completion time. On a
//! real cluster each test puts the stand-in CRDs back when it is done, and `kubectl` must be
//! installed (it prints the server's table). The test with the corpus's CRDs is ignored by
//! default (`common::needs`).

use crate::common;
use crate::common::example::StatusSchema;

use std::path::Path;
use std::time::Duration;

use cvo::cluster::Cluster;
use cvo::release::LoadOptions;
use cvo::sync::{SyncOptions, sync};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};

/// A digest-pinned release image, as `--release-image` takes it.
const IMAGE: &str = "quay.io/cvo-project/release@sha256:4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945";

/// OpenShift's ClusterVersion printer columns: (name, jsonPath).
const CV_COLUMNS: [(&str, &str); 5] = [
    (
        "Version",
        r#".status.history[?(@.state=="Completed")].version"#,
    ),
    (
        "Available",
        r#".status.conditions[?(@.type=="Available")].status"#,
    ),
    (
        "Progressing",
        r#".status.conditions[?(@.type=="Progressing")].status"#,
    ),
    (
        "Since",
        r#".status.conditions[?(@.type=="Progressing")].lastTransitionTime"#,
    ),
    (
        "Status",
        r#".status.conditions[?(@.type=="Progressing")].message"#,
    ),
];

/// The printer columns the server serves for CRD `name`: (name, jsonPath).
async fn served_columns(tc: &common::TestCluster, name: &str) -> Vec<(String, String)> {
    let crd = Api::<CustomResourceDefinition>::all(tc.client.clone())
        .get(name)
        .await
        .unwrap_or_else(|e| panic!("get CRD {name}: {e}"));
    crd.spec.versions[0]
        .additional_printer_columns
        .iter()
        .flatten()
        .map(|c| (c.name.clone(), c.json_path.clone()))
        .collect()
}

/// The condition `type_` of a ClusterVersion status.
fn condition<'a>(status: &'a Value, type_: &str) -> &'a Value {
    status["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == type_))
        .unwrap_or_else(|| panic!("no {type_} condition in {status}"))
}

/// Deletes `version`, puts the stand-in CRDs back and removes what the example left.
async fn clean_up(tc: &common::TestCluster, cvs: &Api<DynamicObject>) {
    if cvs.get_opt("version").await.expect("get cv").is_some() {
        cvs.delete("version", &Default::default())
            .await
            .expect("delete cv");
        common::wait_gone(tc, cvs, "version", "ClusterVersion version").await;
    }
    common::example::restore_stand_in_crds(tc).await;
    common::example::remove_guard(tc).await;
}

#[tokio::test]
#[ignore = "needs the shared OpenShift corpus (../shared/corpus, or CVO_TEST_CORPUS): run with --include-ignored (.ci/run does)"]
async fn cvo_apply_with_openshifts_crds_writes_status_the_server_accepts() {
    let tc = common::cluster().await;
    let (_guard, cv_resource) = common::cluster_version(&tc).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let release = dir.path().join("release");
    common::example::with_openshift_crds(&release, "1.4.0", "1.3.0");
    common::example::prepare(&tc).await;
    let cvs = tc.dynamic(&cv_resource, None);
    let kubeconfig = tc.kubeconfig_file(dir.path()).await;
    let release_arg = release.to_str().expect("utf-8 path");
    let (code, stdout, stderr) = common::run_cvo(
        &kubeconfig,
        &["apply", "--release", release_arg, "--release-image", IMAGE],
    )
    .await;
    assert_eq!(code, 0, "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(
        !stderr.contains(" 422 ") && !stderr.contains("ClusterVersion version status"),
        "{stderr}"
    );

    // What OpenShift's schema requires is there, with the values it means.
    let cv = cvs.get("version").await.expect("cv");
    let status = &cv.data["status"];
    assert_eq!(
        status["desired"],
        json!({"version": "1.4.0", "image": IMAGE}),
        "{status}"
    );
    let history = status["history"].as_array().expect("history");
    assert_eq!(history.len(), 1, "{status}");
    assert_eq!(history[0]["state"], "Completed");
    assert_eq!(history[0]["image"], IMAGE);
    assert_eq!(history[0]["verified"], false);
    assert!(history[0]["completionTime"].is_string(), "{status}");
    let loaded = cvo::release::load(&release, &LoadOptions::default()).expect("load");
    assert_eq!(status["versionHash"], loaded.version_hash.as_str());
    assert_eq!(status["versionHash"].as_str().map(str::len), Some(64));
    assert_eq!(
        status["observedGeneration"].as_i64(),
        cv.metadata.generation,
        "answers the spec it created: {status}"
    );
    assert!(
        status
            .as_object()
            .expect("status")
            .contains_key("availableUpdates")
            && status["availableUpdates"].is_null(),
        "availableUpdates null without an update source: {status}"
    );

    // `kubectl get clusterversion`: OpenShift's columns are served, and each has its value.
    let columns = served_columns(&tc, "clusterversions.config.openshift.io").await;
    let expected: Vec<(String, String)> = CV_COLUMNS
        .iter()
        .map(|(n, p)| (n.to_string(), p.to_string()))
        .collect();
    assert_eq!(columns, expected);
    assert_eq!(condition(status, "Available")["status"], "True");
    let progressing = condition(status, "Progressing");
    assert_eq!(progressing["status"], "False");
    assert!(
        progressing["lastTransitionTime"].is_string(),
        "{progressing}"
    );
    assert!(
        progressing["message"]
            .as_str()
            .is_some_and(|m| m.contains("1.4.0")),
        "{progressing}"
    );
    let co_columns = served_columns(&tc, "clusteroperators.config.openshift.io").await;
    let names: Vec<&str> = co_columns.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        ["Version", "Available", "Progressing", "Degraded", "Since"]
    );
    if !tc.is_memory() {
        kubectl_shows_the_columns(&kubeconfig);
    }
    clean_up(&tc, &cvs).await;
}

/// On a real server, where kubectl prints the server's table: the ClusterVersion row has its
/// columns filled in, and `kubectl get co` works (the kind is served).
fn kubectl_shows_the_columns(kubeconfig: &Path) {
    let kubectl = |args: &[&str]| {
        std::process::Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(args)
            .output()
    };
    let out = kubectl(&["get", "clusterversion", "version"]).unwrap_or_else(|e| {
        common::needs::missing(
            &format!("kubectl, to check the table a real server prints ({e})"),
            "install kubectl",
        )
    });
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    let mut lines = text.lines();
    let header: Vec<&str> = lines
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(
        header,
        [
            "NAME",
            "VERSION",
            "AVAILABLE",
            "PROGRESSING",
            "SINCE",
            "STATUS"
        ],
        "{text}"
    );
    let row: Vec<&str> = lines
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(row[..4], ["version", "1.4.0", "True", "False"], "{text}");
    assert!(row.len() > 5, "SINCE and STATUS filled in: {text}");
    let co = kubectl(&["get", "co"]).expect("kubectl");
    assert!(
        co.status.success(),
        "{}",
        String::from_utf8_lossy(&co.stderr)
    );
}

#[tokio::test]
async fn a_status_the_server_refuses_fails_cvo_apply_with_the_servers_message() {
    let tc = common::cluster().await;
    let (_guard, cv_resource) = common::cluster_version(&tc).await;
    let cvs = tc.dynamic(&cv_resource, None);
    // A ClusterVersion CRD whose status needs a field cvo never writes.
    let stand_in = common::TestCrd::in_group("config.openshift.io", "ClusterVersion", false, true);
    let mut crd = serde_json::to_value(stand_in.manifest()).expect("CRD");
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"] = json!({
        "type": "object", "x-kubernetes-preserve-unknown-fields": true,
        "required": ["neverWritten"], "properties": {"neverWritten": {"type": "string"}}});
    // Served before cvo runs (its apply of the same CRD changes nothing), so that the status
    // cvo writes meets this schema and not, a moment late, the stand-in's.
    let crds = Api::<CustomResourceDefinition>::all(tc.client.clone());
    let strict: CustomResourceDefinition = serde_json::from_value(crd.clone()).expect("CRD");
    crds.patch(
        &stand_in.name,
        &PatchParams::apply("cvo-test").force(),
        &Patch::Apply(&strict),
    )
    .await
    .expect("serve the strict ClusterVersion CRD");
    common::example::wait_status_schema(&tc, &cv_resource, StatusSchema::Refuses).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let release = dir.path().join("release");
    common::write_release(
        &release,
        Some("1.0.0"),
        &[
            ("0000_00_cv_00_crd.json", crd.to_string()),
            (
                "0000_00_cv_01_version.yaml",
                "apiVersion: config.openshift.io/v1\nkind: ClusterVersion\nmetadata:\n  name: version\n  annotations:\n    release.openshift.io/create-only: \"true\"\nspec:\n  clusterID: x\n".into(),
            ),
        ],
    );
    let kubeconfig = tc.kubeconfig_file(dir.path()).await;
    let (code, stdout, stderr) = common::run_cvo(
        &kubeconfig,
        &["apply", "--release", release.to_str().expect("utf-8 path")],
    )
    .await;
    assert_eq!(code, 1, "stdout:\n{stdout}\nstderr:\n{stderr}");
    let line = stderr
        .lines()
        .find(|l| l.starts_with("error: writing ClusterVersion version status"))
        .unwrap_or_else(|| panic!("{stderr}"));
    assert!(
        line.contains("422") && line.contains("status.neverWritten: Required value"),
        "{line}"
    );
    clean_up(&tc, &cvs).await;
}

#[tokio::test]
async fn a_superseded_partial_entry_gets_the_time_it_was_superseded() {
    let tc = common::cluster().await;
    let (_guard, cv_resource) = common::cluster_version(&tc).await;
    let cvs = common::create_cluster_version(&tc, &cv_resource).await;
    let ns = tc.namespace("superseded").await;
    let cluster = Cluster::new(tc.client.clone());
    let options: SyncOptions = common::sync_options(Duration::from_millis(10));
    let sync_release = |version: &'static str, files: Vec<(&'static str, String)>| {
        let cluster = cluster.clone();
        let options = options.clone();
        async move {
            let (_dir, rel) = common::release(Some(version), &files);
            sync(&cluster, &rel, &options, |_| {}).await.expect("sync")
        }
    };
    // 1.0.0 fails one manifest (its namespace does not exist): Partial.
    let failed = sync_release(
        "1.0.0",
        vec![
            (
                "0000_10_a_00_ok.yaml",
                common::configmap(&ns, "ok", "", &[]),
            ),
            (
                "0000_10_a_01_bad.yaml",
                common::configmap("no-such-namespace-superseded", "bad", "", &[]),
            ),
        ],
    )
    .await;
    assert_eq!(failed.exit_code(), 1);
    let partial = cvs.get("version").await.expect("cv").data["status"].clone();
    assert_eq!(partial["history"][0]["state"], "Partial", "{partial}");
    assert!(partial["history"][0]["completionTime"].is_null());
    // 1.0.1 supersedes it and completes.
    let done = sync_release(
        "1.0.1",
        vec![(
            "0000_10_a_00_ok.yaml",
            common::configmap(&ns, "ok", "", &[]),
        )],
    )
    .await;
    assert_eq!(done.exit_code(), 0, "{:?}", done.refused);
    let status = cvs.get("version").await.expect("cv").data["status"].clone();
    let history = status["history"].as_array().expect("history");
    assert_eq!(
        (history[0]["version"].clone(), history[0]["state"].clone()),
        (json!("1.0.1"), json!("Completed")),
        "{status}"
    );
    assert_eq!(history[1]["version"], "1.0.0");
    assert_eq!(history[1]["state"], "Partial", "never completed");
    assert_eq!(
        history[1]["completionTime"], history[0]["startedTime"],
        "superseded when 1.0.1 started: {status}"
    );
    cvs.delete("version", &Default::default())
        .await
        .expect("delete cv");
    common::wait_gone(&tc, &cvs, "version", "ClusterVersion version").await;
}
