//! ClusterVersion's spec as a sync reads it, on both servers: `spec.overrides` entries with
//! `unmanaged: true` leave their objects alone (no apply, no delete) and make the cluster
//! `Upgradeable=False ClusterVersionOverrides` (a minor update is refused); removing the override
//! brings the object back under management. An invalid spec field is reported as
//! `Invalid=True` in ClusterVersion status and ignored.

use crate::common;

use std::time::Duration;

use common::configmaps;
use cvo::apply::Action;
use cvo::cluster::Cluster;
use cvo::release::Release;
use cvo::status::ConditionStatus;
use cvo::sync::{SyncOutcome, sync};
use kube::api::{DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};

fn configmap(ns: &str, name: &str, value: &str, delete: bool) -> String {
    let meta = if delete {
        common::DELETE_ANNOTATION
    } else {
        ""
    };
    common::configmap(ns, name, meta, &[("v", value)])
}

async fn run(client: &kube::Client, rel: &Release) -> SyncOutcome {
    let options = common::sync_options(Duration::from_millis(10));
    sync(&Cluster::new(client.clone()), rel, &options, |_| {})
        .await
        .expect("sync")
}

fn condition<'a>(cv: &'a DynamicObject, type_: &str) -> &'a Value {
    common::cv_condition(cv, type_).unwrap_or_else(|| panic!("no {type_} in {}", cv.data["status"]))
}

fn override_of(ns: &str, name: &str) -> Value {
    json!({"kind": "ConfigMap", "group": "", "namespace": ns, "name": name, "unmanaged": true})
}

#[tokio::test]
async fn an_unmanaged_override_leaves_its_object_alone_and_blocks_minor_updates() {
    let tc = common::cluster().await;
    let (_guard, cv_resource) = common::cluster_version(&tc).await;
    let cvs = common::create_cluster_version(&tc, &cv_resource).await;
    let ns = tc.namespace("overrides").await;
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

    let (_d0, v100) = common::release(
        Some("1.0.0"),
        &[
            ("0000_10_a_kept.yaml", configmap(&ns, "kept", "1", false)),
            ("0000_10_b_mine.yaml", configmap(&ns, "mine", "1", false)),
            ("0000_10_c_old.yaml", configmap(&ns, "old", "1", false)),
        ],
    );
    assert_eq!(run(&tc.client, &v100).await.exit_code(), 0);
    let out = run(&tc.client, &v100).await;
    let upgradeable = out
        .conditions
        .iter()
        .find(|c| c.type_ == "Upgradeable")
        .unwrap();
    assert_eq!(upgradeable.status, ConditionStatus::True);

    // An administrator takes `mine` over, and `old` too.
    let spec = json!({"spec": {"overrides": [override_of(&ns, "mine"), override_of(&ns, "old")]}});
    cvs.patch("version", &PatchParams::default(), &Patch::Merge(&spec))
        .await
        .expect("set overrides");
    // 1.0.1 changes both and deletes `old`: neither is touched.
    let (_d1, v101) = common::release(
        Some("1.0.1"),
        &[
            ("0000_10_a_kept.yaml", configmap(&ns, "kept", "2", false)),
            ("0000_10_b_mine.yaml", configmap(&ns, "mine", "2", false)),
            ("0000_10_c_old.yaml", configmap(&ns, "old", "2", true)),
        ],
    );
    let out = run(&tc.client, &v101).await;
    // Exit 0: overrides are not unfinished work.
    assert_eq!(out.exit_code(), 0, "{:?}", out.report);
    assert_eq!(
        common::report::actions(&out),
        [Action::Updated, Action::Unmanaged, Action::Unmanaged]
    );
    assert_eq!(value("kept").await.as_deref(), Some("2"));
    assert_eq!(value("mine").await.as_deref(), Some("1"));
    assert_eq!(value("old").await.as_deref(), Some("1"));
    assert!(
        out.warnings
            .iter()
            .any(|w| w.contains("spec.overrides marks them unmanaged")),
        "{:?}",
        out.warnings
    );
    let cv = cvs.get("version").await.expect("cv");
    let upgradeable = condition(&cv, "Upgradeable");
    assert_eq!(upgradeable["status"], "False", "{upgradeable}");
    assert_eq!(upgradeable["reason"], "ClusterVersionOverrides");
    assert!(
        upgradeable["message"]
            .as_str()
            .unwrap()
            .contains(&format!("ConfigMap {ns}/mine"))
    );

    // A minor update is refused while the overrides stand.
    let (_d2, v110) = common::release(
        Some("1.1.0"),
        &[("0000_10_a_kept.yaml", configmap(&ns, "kept", "3", false))],
    );
    let out = run(&tc.client, &v110).await;
    let reasons: Vec<_> = out.refused.iter().map(|f| f.reason).collect();
    assert_eq!(reasons, ["UpgradeableFalse"]);
    assert!(
        out.refused[0].message.contains("ClusterVersionOverrides"),
        "{}",
        out.refused[0].message
    );
    assert_eq!(value("kept").await.as_deref(), Some("2"));

    // Overrides removed: managed again (`mine` back to the release, `old` deleted), upgradeable.
    let spec = json!({"spec": {"overrides": null}});
    cvs.patch("version", &PatchParams::default(), &Patch::Merge(&spec))
        .await
        .expect("remove overrides");
    let out = run(&tc.client, &v101).await;
    assert_eq!(out.exit_code(), 0, "{:?}", out.report);
    assert_eq!(value("mine").await.as_deref(), Some("2"));
    common::poll_until("old deleted", tc.deadline(), || async {
        match value("old").await {
            None => Ok(()),
            Some(v) => Err(format!("old still there ({v})")),
        }
    })
    .await;
    let cv = cvs.get("version").await.expect("cv");
    assert_eq!(condition(&cv, "Upgradeable")["status"], "True");
    cvs.delete("version", &Default::default())
        .await
        .expect("delete cv");
}

#[tokio::test]
async fn an_invalid_spec_field_is_reported_and_ignored() {
    let tc = common::cluster().await;
    let (_guard, cv_resource) = common::cluster_version(&tc).await;
    let cvs = common::create_cluster_version(&tc, &cv_resource).await;
    let ns = tc.namespace("invalid-spec").await;
    let spec = json!({"spec": {
        "desiredUpdate": {"version": "not-a-version"},
        "overrides": [{"kind": "", "group": "", "namespace": ns, "name": "a", "unmanaged": true}]}});
    cvs.patch("version", &PatchParams::default(), &Patch::Merge(&spec))
        .await
        .expect("set spec");
    let (_d, rel) = common::release(
        Some("1.0.0"),
        &[("0000_10_a.yaml", configmap(&ns, "a", "1", false))],
    );
    let out = run(&tc.client, &rel).await;
    // Values the CRD's schema accepts but that name nothing (the shipped CRD types each field,
    // so a wrongly typed one never reaches cvo). The bad override is ignored: `a` is managed.
    assert_eq!(out.exit_code(), 0, "{:?}", out.report);
    let cv = cvs.get("version").await.expect("cv");
    let invalid = condition(&cv, "Invalid");
    assert_eq!(invalid["status"], "True", "{invalid}");
    assert_eq!(invalid["reason"], "InvalidClusterVersion");
    let message = invalid["message"].as_str().unwrap();
    assert!(message.contains("spec.desiredUpdate.version"), "{message}");
    assert!(
        message.contains("spec.overrides[0]: kind must not be empty"),
        "{message}"
    );

    // Fixed: Invalid turns False.
    let spec = json!({"spec": {"desiredUpdate": null, "overrides": null}});
    cvs.patch("version", &PatchParams::default(), &Patch::Merge(&spec))
        .await
        .expect("fix spec");
    run(&tc.client, &rel).await;
    let cv = cvs.get("version").await.expect("cv");
    assert_eq!(condition(&cv, "Invalid")["status"], "False");
    cvs.delete("version", &Default::default())
        .await
        .expect("delete cv");
}
