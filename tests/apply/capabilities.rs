//! Capabilities as a sync reads them, on both servers: ClusterVersion `spec.capabilities`
//! chooses the optional components applied; the others are excluded (never applied, their
//! delete manifests never run); an enabled capability is never disabled again; an update that
//! moves an object the cluster has into a disabled capability enables it implicitly; and
//! ClusterVersion status says so (`status.capabilities`, `ImplicitlyEnabledCapabilities`).

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::configmaps;
use cvo::apply::Action;
use cvo::cluster::Cluster;
use cvo::release::Release;
use cvo::release::capability::Gates;
use cvo::sync::{SyncOptions, SyncOutcome, sync};
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

/// A ConfigMap manifest in capabilities `caps` (`None`: no annotation).
fn gated(ns: &str, name: &str, caps: Option<&str>, value: &str, delete: bool) -> String {
    let mut meta = String::new();
    if caps.is_some() || delete {
        meta.push_str("  annotations:\n");
    }
    if let Some(c) = caps {
        meta.push_str(&format!("    capability.openshift.io/name: \"{c}\"\n"));
    }
    if delete {
        meta.push_str("    release.openshift.io/delete: \"true\"\n");
    }
    common::configmap(ns, name, &meta, &[("v", value)])
}

async fn run(client: &kube::Client, rel: &Release, from: Option<&Release>) -> SyncOutcome {
    let options = SyncOptions {
        updating_from: from.map(|f| Arc::new(Gates::of(f))),
        ..common::sync_options(Duration::from_millis(10))
    };
    sync(&Cluster::new(client.clone()), rel, &options, |_| {})
        .await
        .expect("sync")
}

fn action_of(out: &SyncOutcome, rel: &Release, name: &str) -> (Action, Option<String>) {
    let r = common::report::result(out, rel, name);
    (r.action, r.error.clone())
}

async fn set_capabilities(cvs: &Api<DynamicObject>, baseline: &str, additional: &[&str]) {
    let spec = json!({"spec": {"capabilities": {
        "baselineCapabilitySet": baseline,
        "additionalEnabledCapabilities": additional}}});
    cvs.patch("version", &PatchParams::default(), &Patch::Merge(&spec))
        .await
        .expect("set spec.capabilities");
}

fn names(v: &Value) -> Vec<&str> {
    v.as_array()
        .unwrap_or_else(|| panic!("not a list: {v}"))
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect()
}

#[tokio::test]
async fn the_spec_chooses_optional_components_and_an_enabled_one_is_never_disabled() {
    let tc = common::cluster().await;
    let (_guard, cv_resource) = common::cluster_version(&tc).await;
    let cvs = common::create_cluster_version(&tc, &cv_resource).await;
    let ns = tc.namespace("capabilities").await;
    let cms = tc.dynamic(&configmaps(), Some(&ns));
    let value = |name: &'static str| {
        let cms = cms.clone();
        async move {
            cms.get_opt(name)
                .await
                .expect("get")
                .map(|cm| cm.data["data"]["v"].as_str().unwrap_or_default().to_owned())
        }
    };
    // An object a Storage delete manifest names: a disabled capability must not delete it.
    let old: DynamicObject =
        serde_json::from_value(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "old-storage", "namespace": ns}, "data": {"v": "0"}}))
        .unwrap();
    cms.create(&PostParams::default(), &old)
        .await
        .expect("create old-storage");
    set_capabilities(&cvs, "None", &["Console"]).await;

    let files = |version: &str, base_caps: Option<&'static str>| {
        vec![
            (
                "0000_10_a_base.yaml",
                gated(&ns, "base", base_caps, version, false),
            ),
            (
                "0000_20_console_x.yaml",
                gated(&ns, "console", Some("Console"), version, false),
            ),
            (
                "0000_20_insights_x.yaml",
                gated(&ns, "insights", Some("Insights"), version, false),
            ),
            (
                "0000_20_storage_x.yaml",
                gated(&ns, "storage", Some("Storage"), version, false),
            ),
            (
                "0000_20_storage_y.yaml",
                gated(&ns, "old-storage", Some("Storage"), version, true),
            ),
        ]
    };
    let (_d0, v100) = common::release(Some("1.0.0"), &files("1", None));
    let out = run(&tc.client, &v100, None).await;
    assert_eq!(out.exit_code(), 0, "{:?}", out.report);
    assert_eq!(action_of(&out, &v100, "console").0, Action::Created);
    assert_eq!(
        action_of(&out, &v100, "insights"),
        (
            Action::Excluded,
            Some("disabled capabilities: Insights".into())
        )
    );
    assert_eq!(action_of(&out, &v100, "storage").0, Action::Excluded);
    assert_eq!(action_of(&out, &v100, "old-storage").0, Action::Excluded);
    assert_eq!(value("base").await.as_deref(), Some("1"));
    assert_eq!(value("console").await.as_deref(), Some("1"));
    assert_eq!(value("insights").await, None);
    assert_eq!(value("storage").await, None);
    assert_eq!(
        value("old-storage").await.as_deref(),
        Some("0"),
        "not deleted"
    );
    let left_out =
        cvo::release::LeftOut::of(&v100, None, &out.capabilities, Some(&out.feature_gates));
    assert_eq!(left_out.json()["capability"], 3, "{}", left_out.line());
    let cv = cvs.get("version").await.expect("cv");
    let caps = &cv.data["status"]["capabilities"];
    assert_eq!(names(&caps["enabledCapabilities"]), ["Console"]);
    assert_eq!(
        names(&caps["knownCapabilities"]),
        ["Console", "Insights", "Storage"]
    );
    let implicit = common::cv_condition(&cv, "ImplicitlyEnabledCapabilities").expect("condition");
    assert_eq!(implicit["status"], "False", "{implicit}");
    assert_eq!(implicit["reason"], "AsExpected");
    assert_eq!(implicit["message"], "Capabilities match configured spec");

    // A second capability is asked for: its objects are created by the next pass.
    set_capabilities(&cvs, "None", &["Console", "Insights"]).await;
    let out = run(&tc.client, &v100, None).await;
    assert_eq!(action_of(&out, &v100, "insights").0, Action::Created);
    assert_eq!(value("insights").await.as_deref(), Some("1"));

    // Console is dropped from the spec: it stays enabled and managed (an edit is put back),
    // and the condition says it could not be disabled.
    set_capabilities(&cvs, "None", &["Insights"]).await;
    cms.patch(
        "console",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"v": "edited"}})),
    )
    .await
    .expect("edit console");
    let out = run(&tc.client, &v100, None).await;
    assert_eq!(action_of(&out, &v100, "console").0, Action::Updated);
    assert_eq!(value("console").await.as_deref(), Some("1"));
    let cv = cvs.get("version").await.expect("cv");
    assert_eq!(
        names(&cv.data["status"]["capabilities"]["enabledCapabilities"]),
        ["Console", "Insights"]
    );
    let implicit = common::cv_condition(&cv, "ImplicitlyEnabledCapabilities").expect("condition");
    assert_eq!(implicit["status"], "True", "{implicit}");
    assert_eq!(implicit["reason"], "CapabilitiesImplicitlyEnabled");
    assert_eq!(
        implicit["message"],
        "The following capabilities could not be disabled: Console"
    );

    // 1.0.1 moves `base`, which the cluster has, into Storage: the update enables Storage
    // implicitly, and with it every Storage manifest (the delete one too).
    let (_d1, v101) = common::release(Some("1.0.1"), &files("2", Some("Storage")));
    let out = run(&tc.client, &v101, Some(&v100)).await;
    assert_eq!(out.exit_code(), 0, "{:?}", out.report);
    assert_eq!(action_of(&out, &v101, "base").0, Action::Updated);
    assert_eq!(action_of(&out, &v101, "storage").0, Action::Created);
    assert_eq!(action_of(&out, &v101, "old-storage").0, Action::Deleted);
    assert_eq!(value("base").await.as_deref(), Some("2"));
    let cv = cvs.get("version").await.expect("cv");
    assert_eq!(
        names(&cv.data["status"]["capabilities"]["enabledCapabilities"]),
        ["Console", "Insights", "Storage"]
    );
    let implicit = common::cv_condition(&cv, "ImplicitlyEnabledCapabilities").expect("condition");
    assert_eq!(
        implicit["message"],
        "The following capabilities could not be disabled: Console, Storage"
    );
    // Carried by status from now on: the next pass needs no release to update from.
    let out = run(&tc.client, &v101, None).await;
    assert_eq!(action_of(&out, &v101, "storage").0, Action::Unchanged);
    let _ = cvs.delete("version", &Default::default()).await;
}

/// An install: the cluster has no ClusterVersion yet, the release ships one whose spec asks
/// for `baselineCapabilitySet: None`. The pass reads its capabilities from that manifest —
/// never "everything" for want of a spec — and records them in the ClusterVersion it creates.
#[tokio::test]
async fn an_install_takes_its_capabilities_from_the_cluster_version_it_ships() {
    let tc = common::cluster().await;
    let (_guard, cv_resource) = common::cluster_version(&tc).await;
    let cvs = tc.dynamic(&cv_resource, None);
    let ns = tc.namespace("capabilities-install").await;
    let cms = tc.dynamic(&configmaps(), Some(&ns));
    let cv = "apiVersion: config.openshift.io/v1\nkind: ClusterVersion\nmetadata:\n  name: version\nspec:\n  clusterID: x\n  capabilities:\n    baselineCapabilitySet: None\n    additionalEnabledCapabilities: [Console]\n";
    let (_d, rel) = common::release(
        Some("1.0.0"),
        &[
            ("0000_00_cvo_00_version.yaml", cv.to_owned()),
            (
                "0000_20_console_x.yaml",
                gated(&ns, "console", Some("Console"), "1", false),
            ),
            (
                "0000_20_insights_x.yaml",
                gated(&ns, "insights", Some("Insights"), "1", false),
            ),
        ],
    );
    let out = run(&tc.client, &rel, None).await;
    assert_eq!(out.exit_code(), 0, "{:?}", out.report);
    assert_eq!(action_of(&out, &rel, "console").0, Action::Created);
    assert_eq!(action_of(&out, &rel, "insights").0, Action::Excluded);
    assert!(cms.get_opt("insights").await.expect("get").is_none());
    let cv = cvs.get("version").await.expect("cv");
    assert_eq!(
        names(&cv.data["status"]["capabilities"]["enabledCapabilities"]),
        ["Console"]
    );
    let _ = cvs.delete("version", &Default::default()).await;
}
