//! Steady state is write-free: the second apply of a release writes nothing — every object's
//! resourceVersion stays, and ClusterVersion status is not rewritten (but for the
//! observedGeneration of a ClusterVersion the first apply created) — on both servers; an
//! object already up to date is not even sent, and drift is still put back. Covers
//! what a real server normalizes (empty lists of built-in kinds, docs/kubernetes-semantics.md §15) and
//! re-owns (a Namespace applied with nothing but its name, §3.16).

use crate::common;

use std::path::Path;
use std::time::Duration;

use cvo::cluster::Cluster;
use cvo::release::{LoadOptions, Release};
use cvo::status::clusterversion::WriteOutcome;
use cvo::sync::{Mode, SyncOptions, SyncOutcome, sync};

fn load(dir: &Path) -> Release {
    let rel = cvo::release::load(dir, &LoadOptions::default()).expect("load");
    assert!(!rel.has_errors(), "{:?}", rel.diagnostics);
    rel
}

async fn apply(client: &kube::Client, rel: &Release, options: &SyncOptions) -> SyncOutcome {
    let out = sync(&Cluster::new(client.clone()), rel, options, |_| {})
        .await
        .expect("sync");
    let summary = out.report.as_ref().expect("pass").summary();
    assert_eq!(summary.failed + summary.skipped, 0, "{:?}", out.report);
    out
}

/// Objects the pass wrote (created or updated: the engine compares resourceVersions).
fn writes(out: &SyncOutcome) -> usize {
    let s = out.report.as_ref().expect("pass").summary();
    s.created + s.updated
}

#[tokio::test]
async fn manifests_example_second_apply_writes_nothing() {
    let tc = common::cluster().await;
    // The example ships ClusterVersion version: hold the cluster-wide ClusterVersion.
    let (_guard, cv_resource) = common::cluster_version(&tc).await;
    let rel = load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests-example"));
    // Leave nothing behind: on a real cluster its Deployments (widget-operator, and the
    // operator's own cvo-operator) never run (no kubelet) and are past their progress deadline
    // ten minutes later — unhealthy for whoever applies it next.
    common::example::prepare(&tc).await;
    let options = SyncOptions {
        mode: None,
        ..common::sync_options(Duration::from_millis(20))
    };
    let cvs = tc.dynamic(&cv_resource, None);
    let status = || async { cvs.get("version").await.expect("cv").data["status"].clone() };
    let first = apply(&tc.client, &rel, &options).await;
    assert!(writes(&first) > 0);
    let after_first = status().await;
    // The first pass created ClusterVersion (it read none): its status write already answers
    // the generation it read back then.
    assert_eq!(after_first["observedGeneration"], 1, "{after_first}");
    let second = apply(&tc.client, &rel, &options).await;
    assert_eq!(writes(&second), 0, "{:?}", second.report);
    assert_eq!(status().await, after_first);
    // Not even a no-op write is sent (a PATCH the server answers unchanged still counts).
    let (recording, log) = common::recording_client(tc.client.clone());
    let third = apply(&recording, &rel, &options).await;
    assert_eq!(writes(&third), 0, "{:?}", third.report);
    assert_eq!(third.cluster_version, Some(Ok(WriteOutcome::Unchanged)));
    let sent: Vec<String> = log
        .lock()
        .expect("log")
        .iter()
        .filter(|l| !l.starts_with("GET "))
        .cloned()
        .collect();
    assert!(sent.is_empty(), "write requests in a steady pass: {sent:?}");
    // `cvo plan` right after: nothing to change.
    let mut plan = options.clone();
    plan.apply.dry_run = true;
    let planned = apply(&tc.client, &rel, &plan).await;
    let changed: Vec<_> = planned
        .report
        .as_ref()
        .expect("pass")
        .results
        .iter()
        .filter(|r| !r.changes.is_empty() || r.action == cvo::apply::Action::Updated)
        .map(|r| (rel.manifests[r.index].id.to_string(), r.changes.clone()))
        .collect();
    assert!(changed.is_empty(), "{changed:?}");
    tc.dynamic(&cv_resource, None)
        .delete("version", &Default::default())
        .await
        .expect("delete cv");
    common::example::remove_guard(&tc).await;
}

#[tokio::test]
async fn what_the_server_normalizes_is_not_rewritten() {
    let tc = common::cluster().await;
    let _turn = common::sync_turn(&tc).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let prefix = common::unique("steady");
    let mut files = Vec::new();
    for n in 0..10 {
        let ns = format!("{prefix}-{n}");
        tc.track_cluster_object(&common::builtin("", "v1", "Namespace", "namespaces"), &ns);
        // A bare Namespace: nothing but its name.
        let mut text = format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {ns}\n");
        for i in 0..20 {
            text.push_str(&format!(
                "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-{i}\n  namespace: {ns}\ndata:\n  key: value-{i}\n"
            ));
        }
        text.push_str(&format!(
            "---\napiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata:\n  name: deny-all\n  namespace: {ns}\nspec:\n  podSelector: {{}}\n  ingress: []\n  egress: []\n  policyTypes: [Ingress, Egress]\n"
        ));
        files.push((format!("0000_{:02}_comp{n}_00.yaml", 10 + n), text));
    }
    let role = format!("{prefix}-empty");
    tc.track_cluster_object(
        &common::builtin(
            "rbac.authorization.k8s.io",
            "v1",
            "ClusterRole",
            "clusterroles",
        ),
        &role,
    );
    files.push((
        "0000_50_rbac_00.yaml".into(),
        format!("apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: {role}\nrules: []\n"),
    ));
    for (name, text) in &files {
        std::fs::write(dir.path().join(name), text).expect("write");
    }
    let rel = load(dir.path());
    let options = SyncOptions {
        mode: Some(Mode::Updating),
        ..common::sync_options(Duration::from_millis(20))
    };
    let first = apply(&tc.client, &rel, &options).await;
    assert_eq!(writes(&first), rel.manifests.len());
    let second = apply(&tc.client, &rel, &options).await;
    assert_eq!(writes(&second), 0, "{:?}", second.report);
    // Up to date objects are not even sent: no request that could write.
    let (counting, sent) = common::counting_client(tc.client.clone());
    let third = apply(&counting, &rel, &options).await;
    assert_eq!(writes(&third), 0, "{:?}", third.report);
    assert_eq!(sent.load(std::sync::atomic::Ordering::Relaxed), 0);

    // Drift on a value cvo sends is put back on the next apply.
    let ns0 = format!("{prefix}-0");
    let cms = tc.dynamic(&common::configmaps(), Some(&ns0));
    let drift = serde_json::json!({"data": {"key": "drifted"}});
    cms.patch(
        "cm-3",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(&drift),
    )
    .await
    .expect("drift");
    let fourth = apply(&tc.client, &rel, &options).await;
    assert_eq!(writes(&fourth), 1, "{:?}", fourth.report);
    let cm = cms.get("cm-3").await.expect("get");
    assert_eq!(cm.data["data"]["key"], "value-3");
}
