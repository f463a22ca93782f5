//! Issue 43's preflight on both servers, one test per risk of `cvo::preflight::CATALOGUE`:
//! the condition is made on the cluster, the update is refused (exit code 4) with the risk
//! applying and named, nothing is written by the refused run (every object of the releases
//! and ClusterVersion keep their resourceVersions; the sync sends no request but reads and
//! server-side dry runs), and the update goes ahead once the risk is accepted. Three tests go
//! through the `cvo` binary (`-o json`'s `preflight` key, the text lines, `cvo plan`, and
//! `--accept-risks` recorded in ClusterVersion `spec.desiredUpdate.acceptRisks`).
//! `OperatorLacksPermission` needs a real API server (the embedded one authorizes
//! everything).

use crate::common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use common::{TEST_FINALIZER, TestCluster, configmaps};
use cvo::apply::Action;
use cvo::cluster::{Cluster, Discovery};
use cvo::preflight::{Applies, RISKS_NOT_ACCEPTED, Risk};
use cvo::release::Release;
use cvo::release::capability::Gates;
use cvo::status::PreconditionFailure;
use cvo::sync::{SyncOptions, SyncOutcome, sync};
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

/// A test's cluster: its turn at ClusterVersion `version` (created, no status yet) and a
/// namespace of its own.
struct Env {
    tc: TestCluster,
    cvs: Api<DynamicObject>,
    ns: String,
    _turn: tokio::sync::MutexGuard<'static, ()>,
}

impl Env {
    async fn new(prefix: &str) -> Env {
        let tc = common::cluster().await;
        let (turn, resource) = common::cluster_version(&tc).await;
        let cvs = common::create_cluster_version(&tc, &resource).await;
        let ns = tc.namespace(prefix).await;
        Env {
            tc,
            cvs,
            ns,
            _turn: turn,
        }
    }

    /// A sync of `rel` with the risks `accept` accepted (see [`run`]).
    async fn sync(&self, rel: &Release, accept: &[&str]) -> Run {
        run(self.tc.client.clone(), rel, options(accept)).await
    }

    /// Leaves no ClusterVersion behind for the next test binary on a real cluster.
    async fn finish(self) {
        let _ = self.cvs.delete("version", &Default::default()).await;
    }
}

/// Sync options with ClusterVersion choosing the mode and the risks `accept` accepted.
fn options(accept: &[&str]) -> SyncOptions {
    SyncOptions {
        mode: None,
        accept_risks: accept.iter().map(|a| (*a).to_owned()).collect(),
        ..common::sync_options(Duration::from_millis(10))
    }
}

/// A sync and the requests that may have written: every request but a GET and a server-side
/// dry run (`METHOD path`).
struct Run {
    out: SyncOutcome,
    writes: Vec<String>,
}

/// Runs a sync of `rel` through `client`, recording its requests.
async fn run(client: kube::Client, rel: &Release, options: SyncOptions) -> Run {
    let (client, log) = common::recording_client(client);
    let out = sync(&Cluster::new(client), rel, &options, |_| {})
        .await
        .expect("sync");
    let writes = log
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .filter(|r| !r.starts_with("GET ") && !r.ends_with("(dry run)"))
        .cloned()
        .collect();
    Run { out, writes }
}

/// The resourceVersion of every object the releases name (`None`: absent, or its kind not
/// served) and of ClusterVersion `version`.
async fn versions(tc: &TestCluster, releases: &[&Release]) -> BTreeMap<String, Option<String>> {
    let discovery = Discovery::new(tc.client.clone());
    let mut out = BTreeMap::new();
    for m in releases.iter().flat_map(|r| &r.manifests) {
        let rv = match discovery.resolve(&m.api_version, &m.id.kind).await {
            Ok(kind) => {
                let ns = m.id.namespace.as_deref().filter(|_| kind.namespaced);
                tc.dynamic(&kind.resource, ns)
                    .get_opt(&m.id.name)
                    .await
                    .unwrap_or_else(|e| panic!("read {}: {e}", m.id))
                    .and_then(|o| o.metadata.resource_version)
            }
            Err(_) => None,
        };
        out.insert(m.id.to_string(), rv);
    }
    let cv = common::openshift_kind(tc, "ClusterVersion").await;
    let rv = tc
        .dynamic(&cv, None)
        .get_opt("version")
        .await
        .expect("read ClusterVersion")
        .and_then(|o| o.metadata.resource_version);
    out.insert("ClusterVersion version".to_owned(), rv);
    out
}

/// The refusal that answers for `risk`: one naming it among the risks not accepted, or a
/// precondition the preflight counts as that risk.
fn refusal_for<'a>(out: &'a SyncOutcome, risk: &str) -> Option<&'a PreconditionFailure> {
    let upgradeable = out.conditions.iter().find(|c| c.type_ == "Upgradeable");
    out.refused.iter().find(|f| {
        if f.reason == RISKS_NOT_ACCEPTED {
            f.objects.iter().any(|o| o == risk)
        } else {
            cvo::preflight::risk_of(f, upgradeable).name == risk
        }
    })
}

/// `run` was refused by `risk`: exit code 4, no pass, nothing written (no write request, and
/// `before` — the resourceVersions of [`versions`] — is what `after` says now); the preflight
/// says the risk applies, not accepted, and a refusal names it. Returns the risk.
fn assert_refused<'a>(
    run: &'a Run,
    risk: &str,
    before: &BTreeMap<String, Option<String>>,
    after: &BTreeMap<String, Option<String>>,
) -> &'a Risk {
    let out = &run.out;
    assert_eq!(out.exit_code(), 4, "{:?} {:?}", out.refused, out.preflight);
    assert!(out.report.is_none(), "no pass after a refusal");
    assert_eq!(run.writes, Vec::<String>::new(), "the refused run wrote");
    assert_eq!(
        before, after,
        "resourceVersions moved during the refused run"
    );
    let preflight = out.preflight.as_ref().expect("a preflight ran");
    assert_eq!(preflight.risks.len(), cvo::preflight::CATALOGUE.len());
    let found = preflight
        .risks
        .iter()
        .find(|r| r.name == risk)
        .unwrap_or_else(|| panic!("no {risk} in {preflight:?}"));
    assert_eq!(
        (found.applies, found.accepted),
        (Applies::Yes, false),
        "{found:?}"
    );
    let refusal = refusal_for(out, risk)
        .unwrap_or_else(|| panic!("no refusal answers for {risk}: {:?}", out.refused));
    assert!(
        refusal.to_string().contains(risk),
        "the refusal does not name {risk}: {refusal}"
    );
    found
}

/// `run` was not refused: a pass ran, with `risk` applying and accepted.
fn assert_accepted(run: &Run, risk: &str) {
    let out = &run.out;
    assert!(out.refused.is_empty(), "{:?}", out.refused);
    assert!(out.report.is_some(), "a pass ran");
    let preflight = out.preflight.as_ref().expect("a preflight ran");
    let found = preflight
        .risks
        .iter()
        .find(|r| r.name == risk)
        .unwrap_or_else(|| panic!("no {risk} in {preflight:?}"));
    assert_eq!(
        (found.applies, found.accepted),
        (Applies::Yes, true),
        "{found:?}"
    );
}

/// The names of the risks that apply.
fn applying(out: &SyncOutcome) -> Vec<&'static str> {
    out.preflight
        .as_ref()
        .expect("a preflight ran")
        .applying()
        .map(|r| r.name)
        .collect()
}

/// The action of the manifest of `rel` whose object is `name`, with its error.
fn action_of(out: &SyncOutcome, rel: &Release, name: &str) -> (Action, Option<String>) {
    let r = common::report::result(out, rel, name);
    (r.action, r.error.clone())
}

/// The newest history entry of ClusterVersion: version and state.
async fn newest(cvs: &Api<DynamicObject>) -> (String, String) {
    let cv = cvs.get("version").await.expect("cv");
    let h = &cv.data["status"]["history"][0];
    let text = |k: &str| h[k].as_str().unwrap_or_default().to_owned();
    (text("version"), text("state"))
}

fn cm(ns: &str, name: &str, value: &str) -> String {
    common::configmap(ns, name, "", &[("v", value)])
}

fn deleted(ns: &str, name: &str) -> String {
    common::configmap(ns, name, common::DELETE_ANNOTATION, &[])
}

/// A ConfigMap with a finalizer nobody removes (the cleanup strips it).
async fn held_configmap(tc: &TestCluster, ns: &str, name: &str) {
    let held = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": ns, "finalizers": [TEST_FINALIZER]}});
    tc.dynamic(&configmaps(), Some(ns))
        .patch(name, &PatchParams::apply("test"), &Patch::Apply(&held))
        .await
        .expect("create the held ConfigMap");
    tc.hold(&configmaps(), Some(ns), name);
}

/// A delete manifest whose object a finalizer holds (nobody removes it) leaves the cluster
/// `Upgradeable=False ResourceDeletionInProgress` after a patch update; a minor update is
/// then refused until `MinorUpdateWhileDeletionInProgress` is accepted.
#[tokio::test]
async fn minor_update_while_deletion_in_progress() {
    let env = Env::new("pf-deleting").await;
    let (tc, ns) = (&env.tc, &env.ns);
    let (_d0, v100) = common::release(Some("1.0.0"), &[("0000_10_a_cm.yaml", cm(ns, "keep", "1"))]);
    assert_eq!(env.sync(&v100, &[]).await.out.exit_code(), 0);
    held_configmap(tc, ns, "old").await;
    let (_d1, v101) = common::release(
        Some("1.0.1"),
        &[
            ("0000_10_a_cm.yaml", cm(ns, "keep", "1")),
            ("0000_20_a_old.yaml", deleted(ns, "old")),
        ],
    );
    let patch = env.sync(&v101, &[]).await;
    assert_eq!(patch.out.exit_code(), 3, "{:?}", patch.out.report);
    let (status, reason, _) = common::stored_condition(&env.cvs, "Upgradeable")
        .await
        .expect("Upgradeable");
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "ResourceDeletionInProgress")
    );

    // 1.1.0 no longer ships the delete manifest: the object would stay.
    let (_d2, v110) = common::release(
        Some("1.1.0"),
        &[
            ("0000_10_a_cm.yaml", cm(ns, "keep", "2")),
            ("0000_10_b_cm.yaml", cm(ns, "new", "2")),
        ],
    );
    let risk = "MinorUpdateWhileDeletionInProgress";
    let before = versions(tc, &[&v101, &v110]).await;
    let refused = env.sync(&v110, &[]).await;
    let after = versions(tc, &[&v101, &v110]).await;
    let found = assert_refused(&refused, risk, &before, &after);
    assert!(
        found.message.contains(&format!("ConfigMap {ns}/old")),
        "{}",
        found.message
    );
    assert_eq!(applying(&refused.out), [risk]);

    let accepted = env.sync(&v110, &[risk]).await;
    assert_accepted(&accepted, risk);
    assert_eq!(accepted.out.exit_code(), 0, "{:?}", accepted.out.report);
    assert_eq!(action_of(&accepted.out, &v110, "new").0, Action::Created);
    assert_eq!(newest(&env.cvs).await, ("1.1.0".into(), "Completed".into()));
    env.finish().await;
}

/// A ClusterVersion override makes the cluster `Upgradeable=False ClusterVersionOverrides`: a
/// minor update is refused until `MinorUpdateWhileNotUpgradeable` is accepted.
#[tokio::test]
async fn minor_update_while_not_upgradeable() {
    let env = Env::new("pf-overrides").await;
    let (tc, ns) = (&env.tc, &env.ns);
    let files = |v: &str| {
        vec![
            ("0000_10_a_cm.yaml", cm(ns, "a", v)),
            ("0000_10_b_cm.yaml", cm(ns, "b", v)),
        ]
    };
    let (_d0, v100) = common::release(Some("1.0.0"), &files("1"));
    assert_eq!(env.sync(&v100, &[]).await.out.exit_code(), 0);
    let overrides = json!({"spec": {"overrides": [{"kind": "ConfigMap", "group": "",
        "namespace": ns, "name": "b", "unmanaged": true}]}});
    env.cvs
        .patch(
            "version",
            &PatchParams::default(),
            &Patch::Merge(&overrides),
        )
        .await
        .expect("spec.overrides");

    let (_d1, v110) = common::release(Some("1.1.0"), &files("2"));
    let risk = "MinorUpdateWhileNotUpgradeable";
    let before = versions(tc, &[&v110]).await;
    let refused = env.sync(&v110, &[]).await;
    let after = versions(tc, &[&v110]).await;
    let found = assert_refused(&refused, risk, &before, &after);
    assert!(
        found.message.contains("ClusterVersionOverrides"),
        "{}",
        found.message
    );
    assert_eq!(applying(&refused.out), [risk]);

    let accepted = env.sync(&v110, &[risk]).await;
    assert_accepted(&accepted, risk);
    assert_eq!(accepted.out.exit_code(), 0, "{:?}", accepted.out.report);
    assert_eq!(action_of(&accepted.out, &v110, "a").0, Action::Updated);
    assert_eq!(action_of(&accepted.out, &v110, "b").0, Action::Unmanaged);
    assert_eq!(newest(&env.cvs).await, ("1.1.0".into(), "Completed".into()));
    env.finish().await;
}

/// `cvo apply` of `release` with `extra` flags through `kubeconfig`: exit code, stdout, stderr.
async fn apply(kubeconfig: &Path, release: &Path, extra: &[&str]) -> (i32, String, String) {
    let release = release.to_str().expect("UTF-8 path");
    let mut args = vec!["apply", "--release", release, "--wait", "none"];
    args.extend(extra);
    common::run_cvo(kubeconfig, &args).await
}

/// A JSON report of `cvo`, or the test fails showing the output.
fn json_report(stdout: &str, stderr: &str) -> Value {
    serde_json::from_str(stdout).unwrap_or_else(|e| panic!("{e}: {stdout}\n{stderr}"))
}

/// The risk `name` of a JSON report's `preflight` key.
fn json_risk<'a>(report: &'a Value, name: &str) -> &'a Value {
    let risks = report["preflight"]["risks"]
        .as_array()
        .unwrap_or_else(|| panic!("no preflight risks: {report}"));
    assert_eq!(risks.len(), cvo::preflight::CATALOGUE.len());
    risks
        .iter()
        .find(|r| r["name"] == name)
        .unwrap_or_else(|| panic!("no {name} in {risks:?}"))
}

/// Through the binary: 1.0.0 ships ConfigMap `old`, 1.0.1 deletes it (the deletion record in
/// the test's namespace says so), and 1.1.0 still ships its delete manifest — refused, in
/// text and in `-o json`, until `StaleDeleteManifest` is accepted.
#[tokio::test]
async fn stale_delete_manifest() {
    let env = Env::new("pf-stale").await;
    let (tc, ns) = (&env.tc, &env.ns);
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = tc.kubeconfig_file(dir.path()).await;
    let state = ["--state-namespace", ns.as_str()];
    let (v100, v101, v110) = (
        dir.path().join("1.0.0"),
        dir.path().join("1.0.1"),
        dir.path().join("1.1.0"),
    );
    common::write_release(
        &v100,
        Some("1.0.0"),
        &[
            ("0000_10_a_cm.yaml", cm(ns, "keep", "1")),
            ("0000_20_a_old.yaml", cm(ns, "old", "1")),
        ],
    );
    let files = [
        ("0000_10_a_cm.yaml", cm(ns, "keep", "1")),
        ("0000_20_a_old.yaml", deleted(ns, "old")),
    ];
    common::write_release(&v101, Some("1.0.1"), &files);
    common::write_release(&v110, Some("1.1.0"), &files);
    for dir in [&v100, &v101] {
        let (code, stdout, stderr) = apply(&kubeconfig, dir, &state).await;
        assert_eq!(code, 0, "{stdout}{stderr}");
    }
    common::wait_gone(
        tc,
        &tc.dynamic(&configmaps(), Some(ns)),
        "old",
        "old deleted",
    )
    .await;

    let risk = "StaleDeleteManifest";
    let rel = cvo::release::load(&v110, &Default::default()).expect("load 1.1.0");
    let before = versions(tc, &[&rel]).await;
    let record = || async {
        tc.dynamic(&configmaps(), Some(ns))
            .get(cvo::status::record::NAME)
            .await
            .expect("the deletion record")
            .metadata
            .resource_version
    };
    let record_before = record().await;
    let (code, stdout, stderr) = apply(&kubeconfig, &v110, &state).await;
    assert_eq!(code, 4, "{stdout}{stderr}");
    assert!(
        stdout.contains("preflight of 1.1.0: 1 of 10 risks apply\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("  {risk} (not accepted): delete manifests for objects already deleted under an earlier minor release must not ship in a minor/major update: ConfigMap {ns}/old\n")),
        "{stdout}"
    );
    assert!(stdout.contains(&format!("refused: {risk}: ")), "{stdout}");
    let (code, stdout, stderr) =
        apply(&kubeconfig, &v110, &[&state[..], &["-o", "json"]].concat()).await;
    assert_eq!(code, 4, "{stdout}{stderr}");
    assert_eq!(
        before,
        versions(tc, &[&rel]).await,
        "the refused runs wrote"
    );
    assert_eq!(
        record_before,
        record().await,
        "the refused runs wrote the record"
    );
    let report = json_report(&stdout, &stderr);
    let found = json_risk(&report, risk);
    assert_eq!(
        (&found["applies"], &found["accepted"]),
        (&json!("True"), &json!(false)),
        "{found}"
    );
    assert_eq!(report["preflight"]["version"], "1.1.0");
    assert_eq!(
        report["preconditionFailures"][0]["reason"], risk,
        "{report}"
    );
    assert_eq!(report["results"], json!([]), "nothing applied");

    let accept = [&state[..], &["-o", "json", "--accept-risks", risk]].concat();
    let (code, stdout, stderr) = apply(&kubeconfig, &v110, &accept).await;
    assert_eq!(code, 0, "{stdout}{stderr}");
    let report = json_report(&stdout, &stderr);
    assert_eq!(json_risk(&report, risk)["accepted"], true);
    assert!(report.get("preconditionFailures").is_none(), "{report}");
    let old = report["results"]
        .as_array()
        .expect("results")
        .iter()
        .find(|r| r["name"] == "old")
        .cloned()
        .unwrap_or_default();
    assert_eq!(old["action"], "already-absent", "{report}");
    assert_eq!(newest(&env.cvs).await, ("1.1.0".into(), "Completed".into()));
    env.finish().await;
}

/// A rollback from 1.0.1 to 1.0.0 on a cluster whose history has no earlier version: refused
/// until `LowDesiredVersion` is accepted.
#[tokio::test]
async fn low_desired_version() {
    let env = Env::new("pf-rollback").await;
    let (tc, ns) = (&env.tc, &env.ns);
    let (_d1, v101) = common::release(
        Some("1.0.1"),
        &[("0000_10_a_cm.yaml", cm(ns, "a", "1.0.1"))],
    );
    assert_eq!(env.sync(&v101, &[]).await.out.exit_code(), 0);
    let (_d0, v100) = common::release(
        Some("1.0.0"),
        &[("0000_10_a_cm.yaml", cm(ns, "a", "1.0.0"))],
    );
    let risk = "LowDesiredVersion";
    let before = versions(tc, &[&v100]).await;
    let refused = env.sync(&v100, &[]).await;
    let after = versions(tc, &[&v100]).await;
    let found = assert_refused(&refused, risk, &before, &after);
    assert!(
        found
            .message
            .contains("1.0.0 is older than the current version 1.0.1"),
        "{}",
        found.message
    );
    assert_eq!(applying(&refused.out), [risk]);

    let accepted = env.sync(&v100, &[risk]).await;
    assert_accepted(&accepted, risk);
    assert_eq!(accepted.out.exit_code(), 0, "{:?}", accepted.out.report);
    assert_eq!(action_of(&accepted.out, &v100, "a").0, Action::Updated);
    assert_eq!(newest(&env.cvs).await, ("1.0.0".into(), "Completed".into()));
    env.finish().await;
}

/// 1.4.0 to 2.0.0: refused until `MajorVersionUpdate` is accepted.
#[tokio::test]
async fn major_version_update() {
    let env = Env::new("pf-major").await;
    let (tc, ns) = (&env.tc, &env.ns);
    let (_d0, v140) = common::release(Some("1.4.0"), &[("0000_10_a_cm.yaml", cm(ns, "a", "1"))]);
    assert_eq!(env.sync(&v140, &[]).await.out.exit_code(), 0);
    let (_d1, v200) = common::release(Some("2.0.0"), &[("0000_10_a_cm.yaml", cm(ns, "a", "2"))]);
    let risk = "MajorVersionUpdate";
    let before = versions(tc, &[&v200]).await;
    let refused = env.sync(&v200, &[]).await;
    let after = versions(tc, &[&v200]).await;
    let found = assert_refused(&refused, risk, &before, &after);
    assert!(
        found
            .message
            .contains("2.0.0 has a newer major version than the current version 1.4.0"),
        "{}",
        found.message
    );
    assert_eq!(applying(&refused.out), [risk]);

    let accepted = env.sync(&v200, &[risk]).await;
    assert_accepted(&accepted, risk);
    assert_eq!(accepted.out.exit_code(), 0, "{:?}", accepted.out.report);
    assert_eq!(action_of(&accepted.out, &v200, "a").0, Action::Updated);
    assert_eq!(newest(&env.cvs).await, ("2.0.0".into(), "Completed".into()));
    env.finish().await;
}

/// Through the binary: 1.0.0 to 1.2.0 skips 1.1 — refused (text and `-o json`) until
/// `MultipleMinorVersionsUpdate` is accepted.
#[tokio::test]
async fn multiple_minor_versions_update() {
    let env = Env::new("pf-skip").await;
    let (tc, ns) = (&env.tc, &env.ns);
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = tc.kubeconfig_file(dir.path()).await;
    let (v100, v120) = (dir.path().join("1.0.0"), dir.path().join("1.2.0"));
    common::write_release(
        &v100,
        Some("1.0.0"),
        &[("0000_10_a_cm.yaml", cm(ns, "a", "1"))],
    );
    common::write_release(
        &v120,
        Some("1.2.0"),
        &[
            ("0000_10_a_cm.yaml", cm(ns, "a", "2")),
            ("0000_10_b_cm.yaml", cm(ns, "b", "2")),
        ],
    );
    let (code, stdout, stderr) = apply(&kubeconfig, &v100, &[]).await;
    assert_eq!(code, 0, "{stdout}{stderr}");

    let risk = "MultipleMinorVersionsUpdate";
    let rel = cvo::release::load(&v120, &Default::default()).expect("load 1.2.0");
    let before = versions(tc, &[&rel]).await;
    let (code, stdout, stderr) = apply(&kubeconfig, &v120, &["-o", "json"]).await;
    assert_eq!(code, 4, "{stdout}{stderr}");
    let report = json_report(&stdout, &stderr);
    let found = json_risk(&report, risk);
    assert_eq!(
        (&found["applies"], &found["accepted"]),
        (&json!("True"), &json!(false)),
        "{found}"
    );
    assert_eq!(
        found["message"],
        "1.2.0 skips a minor version after 1.0.0; update to 1.1 first"
    );
    assert!(
        found["url"]
            .as_str()
            .is_some_and(|u| u.ends_with("#multipleminorversionsupdate")),
        "{found}"
    );
    let others: Vec<&Value> = report["preflight"]["risks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["name"] != risk)
        .collect();
    assert!(
        others.iter().all(|r| r["applies"] == "False"),
        "{others:#?}"
    );
    assert_eq!(
        report["preconditionFailures"][0]["reason"], risk,
        "{report}"
    );
    let (code, stdout, stderr) = apply(&kubeconfig, &v120, &[]).await;
    assert_eq!(code, 4, "{stdout}{stderr}");
    assert!(
        stdout.contains("preflight of 1.2.0: 1 of 10 risks apply\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("  {risk} (not accepted): 1.2.0 skips a minor version after 1.0.0; update to 1.1 first\n")),
        "{stdout}"
    );
    assert_eq!(
        before,
        versions(tc, &[&rel]).await,
        "the refused runs wrote"
    );
    assert!(
        tc.dynamic(&configmaps(), Some(ns))
            .get_opt("b")
            .await
            .expect("get")
            .is_none()
    );

    let (code, stdout, stderr) = apply(&kubeconfig, &v120, &["--accept-risks", risk]).await;
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(
        stdout.contains(&format!("  {risk} (accepted): ")),
        "{stdout}"
    );
    assert!(
        tc.dynamic(&configmaps(), Some(ns))
            .get_opt("b")
            .await
            .expect("get")
            .is_some()
    );
    assert_eq!(newest(&env.cvs).await, ("1.2.0".into(), "Completed".into()));
    env.finish().await;
}

/// A CRD manifest (`widgets.GROUP`) serving and storing only `version`.
fn crd(group: &str, version: &str) -> String {
    format!(
        r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.{group}
spec:
  group: {group}
  scope: Namespaced
  names: {{plural: widgets, singular: widget, kind: Widget, listKind: WidgetList}}
  versions:
  - name: {version}
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
"#
    )
}

/// 1.0.0 ships a CRD storing `v1alpha1`; 1.0.1 ships it with only `v1`, while the cluster's
/// `status.storedVersions` still lists `v1alpha1`. The preflight reports
/// `CRDStoredVersionRemoved` — and, because the API server refuses the dry run of such a CRD
/// (`status.storedVersions[0]: Invalid value: "v1alpha1": missing from spec.versions`),
/// `ManifestRejectedByServer` too. Accepting the first alone still refuses the update for the
/// second; with both accepted the update runs, and the real API server refuses the CRD: the
/// run fails (exit code 1) with the CRD `failed` (422), the cluster's CRD unchanged.
#[tokio::test]
async fn crd_stored_version_removed() {
    let env = Env::new("pf-crd").await;
    let (tc, ns) = (&env.tc, &env.ns);
    let group = format!("{}.{}", common::unique("pf"), common::TEST_GROUP_SUFFIX);
    let name = format!("widgets.{group}");
    tc.track_crd(&name);
    let (_d0, v100) = common::release(
        Some("1.0.0"),
        &[
            ("0000_10_a_crd.yaml", crd(&group, "v1alpha1")),
            ("0000_20_a_cm.yaml", cm(ns, "a", "1")),
        ],
    );
    assert_eq!(env.sync(&v100, &[]).await.out.exit_code(), 0);
    let crds = tc.dynamic(
        &common::builtin(
            "apiextensions.k8s.io",
            "v1",
            "CustomResourceDefinition",
            "customresourcedefinitions",
        ),
        None,
    );
    let live = crds.get(&name).await.expect("the CRD");
    assert_eq!(live.data["status"]["storedVersions"], json!(["v1alpha1"]));

    let (_d1, v101) = common::release(
        Some("1.0.1"),
        &[
            ("0000_10_a_crd.yaml", crd(&group, "v1")),
            ("0000_20_a_cm.yaml", cm(ns, "a", "2")),
        ],
    );
    let risk = "CRDStoredVersionRemoved";
    let before = versions(tc, &[&v101]).await;
    let refused = env.sync(&v101, &[]).await;
    let after = versions(tc, &[&v101]).await;
    let found = assert_refused(&refused, risk, &before, &after);
    assert_eq!(
        found.message,
        format!(
            "CustomResourceDefinition {name} drops v1alpha1 from spec.versions, but the cluster's status.storedVersions lists it"
        )
    );
    assert_eq!(applying(&refused.out), [risk, "ManifestRejectedByServer"]);
    let rejected = refused
        .out
        .preflight
        .as_ref()
        .and_then(|p| {
            p.risks
                .iter()
                .find(|r| r.name == "ManifestRejectedByServer")
        })
        .expect("ManifestRejectedByServer");
    assert!(
        rejected
            .message
            .contains(&format!("CustomResourceDefinition {name}")),
        "{}",
        rejected.message
    );
    assert!(
        rejected.message.contains("missing from spec.versions"),
        "{}",
        rejected.message
    );

    // Accepting the one risk leaves the other refusing.
    let before = versions(tc, &[&v101]).await;
    let partly = env.sync(&v101, &[risk]).await;
    assert_eq!(partly.out.exit_code(), 4);
    assert_eq!(partly.writes, Vec::<String>::new());
    assert_eq!(before, versions(tc, &[&v101]).await);
    let reasons: Vec<&str> = partly.out.refused.iter().map(|f| f.reason).collect();
    assert_eq!(reasons, [RISKS_NOT_ACCEPTED]);
    assert_eq!(partly.out.refused[0].objects, ["ManifestRejectedByServer"]);

    // With both accepted, the update runs and the API server itself refuses the CRD.
    let accepted = env.sync(&v101, &[risk, "ManifestRejectedByServer"]).await;
    assert_accepted(&accepted, risk);
    assert_eq!(accepted.out.exit_code(), 1, "{:?}", accepted.out.report);
    let (action, error) = action_of(&accepted.out, &v101, &name);
    assert_eq!(action, Action::Failed);
    let error = error.unwrap_or_default();
    assert!(common::mentions_status(&error, "422"), "{error}");
    assert!(error.contains("missing from spec.versions"), "{error}");
    let live = crds.get(&name).await.expect("the CRD");
    assert_eq!(
        live.data["spec"]["versions"][0]["name"], "v1alpha1",
        "the CRD is unchanged"
    );
    assert_eq!(newest(&env.cvs).await, ("1.0.1".into(), "Partial".into()));
    env.finish().await;
}

/// 1.0.0 ships an immutable ConfigMap; 1.0.1 changes its data, which the API server refuses
/// (422, `field is immutable when immutable is set`): the dry run finds it, and the update is
/// refused until `ManifestRejectedByServer` is accepted; then it runs, and that manifest
/// fails as the dry run said (exit code 1) while the others are applied.
#[tokio::test]
async fn manifest_rejected_by_server() {
    let env = Env::new("pf-rejected").await;
    let (tc, ns) = (&env.tc, &env.ns);
    let frozen = |v: &str| format!("{}immutable: true\n", cm(ns, "frozen", v));
    let files = |v: &str| {
        vec![
            ("0000_10_a_cm.yaml", cm(ns, "a", v)),
            ("0000_10_b_frozen.yaml", frozen(v)),
        ]
    };
    let (_d0, v100) = common::release(Some("1.0.0"), &files("1"));
    assert_eq!(env.sync(&v100, &[]).await.out.exit_code(), 0);
    let (_d1, v101) = common::release(Some("1.0.1"), &files("2"));
    let risk = "ManifestRejectedByServer";
    let before = versions(tc, &[&v101]).await;
    let refused = env.sync(&v101, &[]).await;
    let after = versions(tc, &[&v101]).await;
    let found = assert_refused(&refused, risk, &before, &after);
    assert!(
        found
            .message
            .starts_with(&format!("1 of 2: ConfigMap {ns}/frozen (")),
        "{}",
        found.message
    );
    assert!(
        found
            .message
            .contains("field is immutable when `immutable` is set"),
        "{}",
        found.message
    );
    assert_eq!(applying(&refused.out), [risk]);

    let accepted = env.sync(&v101, &[risk]).await;
    assert_accepted(&accepted, risk);
    assert_eq!(accepted.out.exit_code(), 1, "{:?}", accepted.out.report);
    assert_eq!(action_of(&accepted.out, &v101, "a").0, Action::Updated);
    let (action, error) = action_of(&accepted.out, &v101, "frozen");
    assert_eq!(action, Action::Failed);
    assert!(
        error
            .unwrap_or_default()
            .contains("field is immutable when `immutable` is set")
    );
    assert_eq!(newest(&env.cvs).await, ("1.0.1".into(), "Partial".into()));
    env.finish().await;
}

/// ClusterVersion `spec.capabilities` enables nothing; 1.0.1 moves ConfigMap `base`, which
/// 1.0.0 applied, into Storage: the update would enable Storage implicitly, and is refused
/// until `CapabilityImplicitlyEnabled` is accepted.
#[tokio::test]
async fn capability_implicitly_enabled() {
    let env = Env::new("pf-caps").await;
    let (tc, ns) = (&env.tc, &env.ns);
    let spec = json!({"spec": {"capabilities": {"baselineCapabilitySet": "None",
        "additionalEnabledCapabilities": []}}});
    env.cvs
        .patch("version", &PatchParams::default(), &Patch::Merge(&spec))
        .await
        .expect("spec.capabilities");
    let (_d0, v100) = common::release(
        Some("1.0.0"),
        &[("0000_10_a_base.yaml", cm(ns, "base", "1"))],
    );
    assert_eq!(env.sync(&v100, &[]).await.out.exit_code(), 0);
    let storage = "  annotations:\n    capability.openshift.io/name: Storage\n";
    let (_d1, v101) = common::release(
        Some("1.0.1"),
        &[(
            "0000_10_a_base.yaml",
            common::configmap(ns, "base", storage, &[("v", "2")]),
        )],
    );
    let from = |accept: &[&str]| SyncOptions {
        updating_from: Some(Arc::new(Gates::of(&v100))),
        ..options(accept)
    };
    let risk = "CapabilityImplicitlyEnabled";
    let before = versions(tc, &[&v101]).await;
    let refused = run(tc.client.clone(), &v101, from(&[])).await;
    let after = versions(tc, &[&v101]).await;
    let found = assert_refused(&refused, risk, &before, &after);
    assert!(
        found
            .message
            .starts_with("the update enables Storage implicitly"),
        "{}",
        found.message
    );
    assert_eq!(applying(&refused.out), [risk]);

    let accepted = run(tc.client.clone(), &v101, from(&[risk])).await;
    assert_accepted(&accepted, risk);
    assert_eq!(accepted.out.exit_code(), 0, "{:?}", accepted.out.report);
    assert_eq!(action_of(&accepted.out, &v101, "base").0, Action::Updated);
    let cv = env.cvs.get("version").await.expect("cv");
    assert_eq!(
        cv.data["status"]["capabilities"]["enabledCapabilities"],
        json!(["Storage"])
    );
    env.finish().await;
}

/// Through the binary: `cvo plan` of a refused update (1.0.0 to 2.0.0) prints the risks and
/// exits 4, writing nothing, and with the risk accepted plans the update, still writing
/// nothing; `cvo apply --accept-risks` runs it and records the names in ClusterVersion
/// `spec.desiredUpdate.acceptRisks` (field manager `cvo-accept-risks`), and the history entry
/// says which risks the administrator accepted.
#[tokio::test]
async fn plan_shows_the_risks_and_apply_records_the_accepted_ones() {
    let env = Env::new("pf-plan").await;
    let (tc, ns) = (&env.tc, &env.ns);
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = tc.kubeconfig_file(dir.path()).await;
    let (v100, v200) = (dir.path().join("1.0.0"), dir.path().join("2.0.0"));
    common::write_release(
        &v100,
        Some("1.0.0"),
        &[("0000_10_a_cm.yaml", cm(ns, "a", "1"))],
    );
    common::write_release(
        &v200,
        Some("2.0.0"),
        &[("0000_10_a_cm.yaml", cm(ns, "a", "2"))],
    );
    let (code, stdout, stderr) = apply(&kubeconfig, &v100, &[]).await;
    assert_eq!(code, 0, "{stdout}{stderr}");
    let risk = "MajorVersionUpdate";
    let rel = cvo::release::load(&v200, &Default::default()).expect("load 2.0.0");
    let before = versions(tc, &[&rel]).await;
    let plan = |extra: &'static [&'static str]| {
        let (kubeconfig, release) = (kubeconfig.clone(), v200.to_str().unwrap().to_owned());
        async move {
            let mut args = vec!["plan", "--release", release.as_str()];
            args.extend(extra);
            common::run_cvo(&kubeconfig, &args).await
        }
    };

    let (code, stdout, stderr) = plan(&[]).await;
    assert_eq!(code, 4, "{stdout}{stderr}");
    assert!(
        stdout.contains("preflight of 2.0.0: 1 of 10 risks apply\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("  {risk} (not accepted): 2.0.0 has a newer major version than the current version 1.0.0; updates stay within one major version\n")),
        "{stdout}"
    );
    assert!(stdout.contains(&format!("refused: {risk}: ")), "{stdout}");
    let (code, stdout, stderr) = plan(&["-o", "json"]).await;
    assert_eq!(code, 4, "{stdout}{stderr}");
    let report = json_report(&stdout, &stderr);
    assert_eq!(json_risk(&report, risk)["applies"], "True");
    // Accepted, the plan shows the update: still a dry run.
    let (code, stdout, stderr) = plan(&["--accept-risks", "MajorVersionUpdate"]).await;
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(
        stdout.contains(&format!("  {risk} (accepted): ")),
        "{stdout}"
    );
    assert!(stdout.contains("updated"), "{stdout}");
    assert_eq!(before, versions(tc, &[&rel]).await, "cvo plan wrote");
    let cv = env.cvs.get("version").await.expect("cv");
    assert!(
        cv.data["spec"].get("desiredUpdate").is_none(),
        "{}",
        cv.data["spec"]
    );

    let (code, stdout, stderr) = apply(&kubeconfig, &v200, &["--accept-risks", risk]).await;
    assert_eq!(code, 0, "{stdout}{stderr}");
    let cv = env.cvs.get("version").await.expect("cv");
    assert_eq!(
        cv.data["spec"]["desiredUpdate"]["acceptRisks"],
        json!([{"name": risk}]),
        "{}",
        cv.data["spec"]
    );
    let managers: Vec<&str> = cv
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .filter(|f| {
            f.fields_v1
                .as_ref()
                .is_some_and(|v| v.0.to_string().contains("acceptRisks"))
        })
        .filter_map(|f| f.manager.as_deref())
        .collect();
    assert_eq!(
        managers,
        [cvo::status::clusterversion::ACCEPT_RISKS_MANAGER]
    );
    let history = &cv.data["status"]["history"][0];
    assert_eq!(
        (&history["version"], &history["state"]),
        (&json!("2.0.0"), &json!("Completed"))
    );
    let accepted = history["acceptedRisks"].as_str().unwrap_or_default();
    assert!(
        accepted.contains(&format!("exposed to the risks [{risk}]")),
        "{history}"
    );
    env.finish().await;
}

/// A kubeconfig for the cluster of the kubeconfig `admin` that authenticates as `token`.
fn token_kubeconfig(admin: &Path, token: &str, dir: &Path) -> std::path::PathBuf {
    let config = kube::config::Kubeconfig::read_from(admin).expect("admin kubeconfig");
    let context = config
        .contexts
        .iter()
        .find(|c| Some(&c.name) == config.current_context.as_ref())
        .and_then(|c| c.context.as_ref())
        .expect("current context");
    let cluster = config
        .clusters
        .iter()
        .find(|c| c.name == context.cluster)
        .expect("cluster of the current context");
    let kubeconfig = json!({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [serde_json::to_value(cluster).unwrap()],
        "users": [{"name": "sa", "user": {"token": token}}],
        "contexts": [{"name": "sa", "context": {"cluster": cluster.name, "user": "sa"}}],
        "current-context": "sa",
    });
    let path = dir.join("sa.kubeconfig");
    std::fs::write(&path, serde_json::to_string(&kubeconfig).unwrap()).unwrap();
    path
}

/// Creates `object` (an RBAC object, or a ServiceAccount) as the admin.
async fn create(tc: &TestCluster, object: Value) {
    let kind = object["kind"].as_str().unwrap().to_owned();
    let (group, plural) = match kind.as_str() {
        "ServiceAccount" => ("", "serviceaccounts".to_owned()),
        k => (
            "rbac.authorization.k8s.io",
            format!("{}s", k.to_ascii_lowercase()),
        ),
    };
    let version = "v1";
    let resource = common::builtin(group, version, &kind, &plural);
    let name = object["metadata"]["name"].as_str().unwrap().to_owned();
    let ns = object["metadata"]["namespace"].as_str().map(str::to_owned);
    tc.dynamic(&resource, ns.as_deref())
        .create(&PostParams::default(), &common::object(object))
        .await
        .unwrap_or_else(|e| panic!("create {kind} {name}: {e}"));
    if ns.is_none() {
        tc.track_cluster_object(&resource, &name);
    }
}

/// Waits until the authorizer answers `allowed` for `verb` on `resource` `name` in `ns`
/// (`group` its API group), as `client`: RBAC changes reach its cache a moment after they are
/// written.
async fn wait_access(
    client: &kube::Client,
    (group, resource): (&str, &str),
    ns: &str,
    name: &str,
    verb: &str,
    allowed: bool,
) {
    let reviews = tc_reviews(client);
    let review = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": {"group": group, "resource": resource, "namespace": ns,
            "name": name, "verb": verb}}});
    common::poll_until(
        &format!("{verb} {resource}/{name} allowed={allowed}"),
        Duration::from_secs(30),
        || async {
            let answer = reviews
                .create(&PostParams::default(), &common::object(review.clone()))
                .await
                .map_err(|e| e.to_string())?;
            let now = answer.data["status"]["allowed"].as_bool().unwrap_or(false);
            (now == allowed)
                .then_some(())
                .ok_or(format!("allowed: {now}"))
        },
    )
    .await
}

fn tc_reviews(client: &kube::Client) -> Api<DynamicObject> {
    let resource = common::builtin(
        "authorization.k8s.io",
        "v1",
        "SelfSubjectAccessReview",
        "selfsubjectaccessreviews",
    );
    Api::all_with(client.clone(), &resource)
}

/// On a real cluster: the sync runs as a ServiceAccount that may patch ConfigMap `allowed` but
/// not `denied` (everything else it needs is granted). The dry run of 1.0.1 is refused 403 for
/// `denied`: `OperatorLacksPermission` applies and the update is refused; accepted, the update
/// runs, `allowed` is updated and `denied` fails with the same 403 (exit code 1).
#[tokio::test]
#[ignore = "needs a real cluster, which enforces RBAC (CVO_TEST_KUBECONFIG): run with --include-ignored (.ci/run does)"]
async fn operator_lacks_permission() {
    let tc = common::cluster().await;
    common::needs::real_cluster(&tc, "the in-memory API server does not enforce RBAC");
    drop(tc);
    let env = Env::new("pf-rbac").await;
    let (tc, ns) = (&env.tc, &env.ns);
    let files = |v: &str| {
        vec![
            ("0000_10_a_cm.yaml", cm(ns, "allowed", v)),
            ("0000_10_b_cm.yaml", cm(ns, "denied", v)),
        ]
    };
    let (_d0, v100) = common::release(Some("1.0.0"), &files("1"));
    assert_eq!(env.sync(&v100, &[]).await.out.exit_code(), 0);

    // The applier's identity: a ServiceAccount with what a sync of this release needs, but
    // patch on ConfigMap `denied`.
    let role = common::unique("pf-applier");
    create(
        tc,
        json!({"apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": "applier", "namespace": ns}}),
    )
    .await;
    create(tc, json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "applier", "namespace": ns},
        "rules": [
            {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"]},
            {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["allowed"], "verbs": ["patch", "update"]},
        ]})).await;
    create(
        tc,
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "applier", "namespace": ns},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "applier"},
        "subjects": [{"kind": "ServiceAccount", "name": "applier", "namespace": ns}]}),
    )
    .await;
    create(tc, json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": role},
        "rules": [
            {"apiGroups": ["config.openshift.io"], "resources": ["clusterversions", "clusterversions/status", "featuregates"], "verbs": ["*"]},
            {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get", "list", "watch"]},
        ]})).await;
    create(
        tc,
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": role},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": [{"kind": "ServiceAccount", "name": "applier", "namespace": ns}]}),
    )
    .await;
    let sas = Api::<k8s_openapi::api::core::v1::ServiceAccount>::namespaced(tc.client.clone(), ns);
    let token = sas
        .create_token_request(
            "applier",
            &PostParams::default(),
            &k8s_openapi::api::authentication::v1::TokenRequest {
                spec: k8s_openapi::api::authentication::v1::TokenRequestSpec {
                    audiences: vec![],
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
    let dir = tempfile::tempdir().expect("tempdir");
    let admin = tc.kubeconfig_file(dir.path()).await;
    let as_sa = token_kubeconfig(&admin, &token, dir.path());
    let sa_client = {
        let config = kube::Config::from_custom_kubeconfig(
            kube::config::Kubeconfig::read_from(&as_sa).unwrap(),
            &Default::default(),
        )
        .await
        .unwrap();
        kube::Client::try_from(config).unwrap()
    };
    wait_access(&sa_client, ("", "configmaps"), ns, "allowed", "patch", true).await;
    wait_access(&sa_client, ("", "configmaps"), ns, "denied", "patch", false).await;
    wait_access(
        &sa_client,
        ("config.openshift.io", "clusterversions"),
        "",
        "version",
        "get",
        true,
    )
    .await;

    let (_d1, v101) = common::release(Some("1.0.1"), &files("2"));
    let risk = "OperatorLacksPermission";
    let before = versions(tc, &[&v101]).await;
    let refused = run(sa_client.clone(), &v101, options(&[])).await;
    let after = versions(tc, &[&v101]).await;
    let found = assert_refused(&refused, risk, &before, &after);
    assert!(
        found
            .message
            .starts_with(&format!("1 of 2: ConfigMap {ns}/denied (")),
        "{}",
        found.message
    );
    assert!(
        common::mentions_status(&found.message, "403"),
        "{}",
        found.message
    );
    assert_eq!(applying(&refused.out), [risk]);

    let accepted = run(sa_client, &v101, options(&[risk])).await;
    assert_accepted(&accepted, risk);
    assert_eq!(accepted.out.exit_code(), 1, "{:?}", accepted.out.report);
    assert_eq!(
        action_of(&accepted.out, &v101, "allowed").0,
        Action::Updated
    );
    let (action, error) = action_of(&accepted.out, &v101, "denied");
    assert_eq!(action, Action::Failed);
    assert!(common::mentions_status(&error.unwrap_or_default(), "403"));
    assert_eq!(newest(&env.cvs).await, ("1.0.1".into(), "Partial".into()));
    env.finish().await;
}
