//! Feature gates as a sync reads them, on both servers: the cluster's FeatureGate `cluster`
//! (its status entry for the release's version) decides which manifests with
//! `release.openshift.io/feature-gate` are applied; the next pass follows a change of that
//! status; no FeatureGate enables no gate; a FeatureGate that cannot be read stops the sync.

use crate::common;

use std::time::Duration;

use cvo::apply::Action;
use cvo::cluster::Cluster;
use cvo::release::Release;
use cvo::sync::{SyncError, SyncOutcome, sync};
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams};
use serde_json::json;

/// A ConfigMap manifest that needs the feature gates `gates` (`A`, `-A`).
fn needing(ns: &str, name: &str, gates: &str) -> String {
    common::configmap(
        ns,
        name,
        &format!("  annotations:\n    release.openshift.io/feature-gate: \"{gates}\"\n"),
        &[("v", "1")],
    )
}

async fn run(client: &kube::Client, rel: &Release) -> Result<SyncOutcome, SyncError> {
    let options = common::sync_options(Duration::from_millis(10));
    sync(&Cluster::new(client.clone()), rel, &options, |_| {}).await
}

fn action_of(out: &SyncOutcome, rel: &Release, name: &str) -> (Action, Option<String>) {
    let r = common::report::result(out, rel, name);
    (r.action, r.error.clone())
}

/// Sets FeatureGate `cluster`'s status: `enabled` for version 1.0.0 (and a decoy entry of
/// another version enabling everything else).
async fn set_status(fgs: &Api<DynamicObject>, enabled: &[&str]) {
    let names = |gates: &[&str]| gates.iter().map(|g| json!({"name": g})).collect::<Vec<_>>();
    let status = json!({"status": {"featureGates": [
        {"version": "0.9.0", "enabled": names(&["A", "B"]), "disabled": []},
        {"version": "1.0.0", "enabled": names(enabled), "disabled": []},
    ]}});
    fgs.patch_status("cluster", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .expect("set FeatureGate status");
}

#[tokio::test]
async fn the_clusters_feature_gate_decides_and_the_next_pass_follows() {
    let tc = common::cluster().await;
    let _turn = common::sync_turn(&tc).await;
    let fgs = common::feature_gates(&tc).await;
    let ns = tc.namespace("feature-gates").await;
    let cms = tc.dynamic(&common::configmaps(), Some(&ns));
    let (_dir, rel) = common::release(
        Some("1.0.0"),
        &[
            (
                "0000_10_a_00_plain.yaml",
                common::configmap(&ns, "plain", "", &[("v", "1")]),
            ),
            ("0000_10_a_01_needs-a.yaml", needing(&ns, "needs-a", "A")),
            ("0000_10_a_02_not-a.yaml", needing(&ns, "not-a", "-A")),
            ("0000_10_a_03_needs-b.yaml", needing(&ns, "needs-b", "A, B")),
        ],
    );

    // No FeatureGate: no gate is enabled, as the CVO takes it.
    let out = run(&tc.client, &rel).await.expect("sync");
    assert_eq!(out.exit_code(), 0, "{:?}", out.report);
    assert_eq!(
        action_of(&out, &rel, "needs-a"),
        (
            Action::Excluded,
            Some("feature gate A is required but not enabled".into())
        )
    );
    assert_eq!(action_of(&out, &rel, "not-a").0, Action::Created);
    assert_eq!(action_of(&out, &rel, "plain").0, Action::Created);
    assert!(out.feature_gates.is_empty());

    // Gate A enabled for this version: needs-a is applied, not-a left alone (not deleted).
    common::create_feature_gate(&fgs, json!([])).await;
    set_status(&fgs, &["A"]).await;
    let out = run(&tc.client, &rel).await.expect("sync");
    assert_eq!(out.exit_code(), 0, "{:?}", out.report);
    assert_eq!(action_of(&out, &rel, "needs-a").0, Action::Created);
    assert_eq!(
        action_of(&out, &rel, "not-a"),
        (
            Action::Excluded,
            Some("feature gate A is enabled but manifest requires it to be disabled".into())
        )
    );
    assert_eq!(
        action_of(&out, &rel, "needs-b"),
        (
            Action::Excluded,
            Some("feature gate B is required but not enabled".into())
        )
    );
    assert!(cms.get_opt("needs-a").await.expect("get").is_some());
    assert!(
        cms.get_opt("not-a").await.expect("get").is_some(),
        "not deleted"
    );
    assert!(cms.get_opt("needs-b").await.expect("get").is_none());
    let report = cvo::sync::report::json_report(&rel, &out);
    assert_eq!(report["excluded"]["featureGate"], 2, "{report:#}");
    assert_eq!(report["featureGates"], json!(["A"]));

    // The status changes: the next pass follows.
    set_status(&fgs, &["A", "B"]).await;
    let out = run(&tc.client, &rel).await.expect("sync");
    assert_eq!(action_of(&out, &rel, "needs-b").0, Action::Created);
    assert_eq!(action_of(&out, &rel, "not-a").0, Action::Excluded);

    // A FeatureGate whose status cannot be read as one stops the sync: nothing applied.
    let broken = json!({"status": {"featureGates": "A"}});
    fgs.patch_status("cluster", &PatchParams::default(), &Patch::Merge(&broken))
        .await
        .expect("break the status");
    cms.delete("plain", &DeleteParams::default())
        .await
        .expect("delete plain");
    common::wait_gone(&tc, &cms, "plain", "ConfigMap plain").await;
    let err = run(&tc.client, &rel).await.expect_err("stops");
    let message = err.to_string();
    assert!(matches!(err, SyncError::FeatureGate(_)), "{message}");
    assert!(
        message.starts_with("FeatureGate cluster: status.featureGates is not a list"),
        "{message}"
    );
    assert!(
        cms.get_opt("plain").await.expect("get").is_none(),
        "nothing applied"
    );

    common::remove_feature_gate(&tc, &fgs).await;
}
