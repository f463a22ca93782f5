//! The deletion record (ConfigMap `cvo-deletion-record`) on both servers: what `cvo` deleted
//! is remembered with its release, so that a minor update refuses only delete manifests whose
//! deletion was completed under an earlier minor release (not those for objects this cluster
//! never had), an object that comes back after its deletion is reported and deleted again, and
//! a record that cannot be read fails closed.

use crate::common;

use std::time::Duration;

use common::{TestCluster, configmaps};
use cvo::apply::Action;
use cvo::cluster::Cluster;
use cvo::release::Release;
use cvo::status::record::{self, Location};
use cvo::sync::{SyncOptions, SyncOutcome, sync};
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};

fn configmap(ns: &str, name: &str, delete: bool) -> String {
    let meta = if delete {
        common::DELETE_ANNOTATION
    } else {
        ""
    };
    common::configmap(ns, name, meta, &[("a", "b")])
}

fn options(ns: &str) -> SyncOptions {
    SyncOptions {
        record: Some(Location {
            namespace: ns.to_owned(),
        }),
        ..common::sync_options(Duration::from_millis(10))
    }
}

async fn run(tc: &TestCluster, rel: &Release, ns: &str) -> SyncOutcome {
    sync(&Cluster::new(tc.client.clone()), rel, &options(ns), |_| {})
        .await
        .expect("sync")
}

fn reasons(out: &SyncOutcome) -> Vec<&'static str> {
    out.refused.iter().map(|f| f.reason).collect()
}

/// The record as stored in the cluster (the JSON under its key).
async fn stored(tc: &TestCluster, ns: &str) -> Value {
    let cm = tc
        .dynamic(&configmaps(), Some(ns))
        .get(record::NAME)
        .await
        .expect("the record exists");
    let text = cm.data["data"][record::KEY]
        .as_str()
        .expect("key")
        .to_owned();
    serde_json::from_str(&text).expect("JSON")
}

fn entry<'a>(record: &'a Value, name: &str) -> Option<&'a Value> {
    record["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .find(|e| e["name"] == name)
}

#[tokio::test]
async fn only_deletions_completed_under_an_earlier_minor_make_a_delete_manifest_stale() {
    let tc = common::cluster().await;
    let (_guard, cv_resource) = common::cluster_version(&tc).await;
    let cvs = common::create_cluster_version(&tc, &cv_resource).await;
    let ns = tc.namespace("record").await;

    // 1.0.0 ships ConfigMap old; 1.0.1 deletes it and ships a delete manifest for an object
    // this cluster never had.
    let (_d0, v100) = common::release(
        Some("1.0.0"),
        &[("0000_10_a_old.yaml", configmap(&ns, "old", false))],
    );
    assert_eq!(run(&tc, &v100, &ns).await.exit_code(), 0);
    let deletes = [
        ("0000_10_a_old.yaml", configmap(&ns, "old", true)),
        ("0000_10_b_never.yaml", configmap(&ns, "never", true)),
    ];
    let (_d1, v101) = common::release(Some("1.0.1"), &deletes);
    let out = run(&tc, &v101, &ns).await;
    assert_eq!(out.exit_code(), 0, "{:?}", out.report);
    assert_eq!(
        common::report::actions(&out),
        [Action::Deleted, Action::AlreadyAbsent]
    );
    assert!(
        out.warnings
            .iter()
            .any(|w| w.contains("cvo never deleted on this cluster") && w.contains("never")),
        "{:?}",
        out.warnings
    );
    let rec = stored(&tc, &ns).await;
    let old = entry(&rec, "old").expect("old recorded");
    assert_eq!(old["release"], "1.0.1", "{rec}");
    assert_eq!(old["kind"], "ConfigMap");
    assert!(old["completed"].is_string(), "{rec}");
    assert!(entry(&rec, "never").is_none(), "{rec}");
    assert_eq!(out.deletions_completed.len(), 1);

    // The same patch release again: nothing new to record, no warning for `old` (deleted by
    // us), the record is not rewritten.
    let before = tc
        .dynamic(&configmaps(), Some(&ns))
        .get(record::NAME)
        .await
        .expect("record");
    let out = run(&tc, &v101, &ns).await;
    assert_eq!(out.exit_code(), 0);
    assert!(
        out.warnings
            .iter()
            .all(|w| !w.contains("ConfigMap {ns}/old"))
    );
    let after = tc
        .dynamic(&configmaps(), Some(&ns))
        .get(record::NAME)
        .await
        .expect("record");
    assert_eq!(
        before.metadata.resource_version,
        after.metadata.resource_version
    );

    // 1.1.0 still ships both: refused for `old` only.
    let (_d2, v110) = common::release(Some("1.1.0"), &deletes);
    let out = run(&tc, &v110, &ns).await;
    assert_eq!(reasons(&out), ["StaleDeleteManifest"]);
    assert_eq!(out.refused[0].objects, [format!("ConfigMap {ns}/old")]);
    assert_eq!(out.exit_code(), 4);
    // Without `old`, the delete manifest for an object never seen here does not refuse.
    let (_d3, v110) = common::release(Some("1.1.0"), &deletes[1..]);
    let out = run(&tc, &v110, &ns).await;
    assert!(out.refused.is_empty(), "{:?}", out.refused);
    assert_eq!(out.exit_code(), 0);

    // A record that cannot be read fails closed: every absent delete target may have been
    // deleted earlier, so 1.2.0 shipping the manifest for `never` is refused, and why is said.
    let broken = json!({"data": {record::KEY: "{not json"}});
    tc.dynamic(&configmaps(), Some(&ns))
        .patch(
            record::NAME,
            &PatchParams::default(),
            &Patch::Merge(&broken),
        )
        .await
        .expect("break the record");
    let (_d4, v120) = common::release(Some("1.2.0"), &deletes[1..]);
    let out = run(&tc, &v120, &ns).await;
    assert_eq!(reasons(&out), ["StaleDeleteManifest"]);
    assert!(
        out.refused[0].message.contains("could not be read"),
        "{}",
        out.refused[0].message
    );
    assert!(
        out.warnings
            .iter()
            .any(|w| w.contains(&format!("ConfigMap {ns}/{}", record::NAME))),
        "{:?}",
        out.warnings
    );
    cvs.delete("version", &Default::default())
        .await
        .expect("delete cv");
}

#[tokio::test]
async fn an_object_that_comes_back_after_its_deletion_is_reported_and_deleted_again() {
    let tc = common::cluster().await;
    let _turn = common::sync_turn(&tc).await;
    let ns = tc.namespace("record-back").await;
    let (_d, rel) = common::release(
        Some("2.0.0"),
        &[("0000_10_a_gone.yaml", configmap(&ns, "gone", true))],
    );
    let cms = tc.dynamic(&configmaps(), Some(&ns));
    let recreate = || async {
        let obj = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "gone", "namespace": ns}});
        cms.patch(
            "gone",
            &PatchParams::apply("someone-else"),
            &Patch::Apply(&obj),
        )
        .await
        .expect("create gone");
    };
    recreate().await;
    let out = run(&tc, &rel, &ns).await;
    assert!(out.reappeared.is_empty());
    assert!(common::is_not_found(&cms.get("gone").await));

    // Someone creates it again: the next pass deletes it again and says so.
    recreate().await;
    let out = run(&tc, &rel, &ns).await;
    let back: Vec<String> = out.reappeared.iter().map(ToString::to_string).collect();
    assert_eq!(back, [format!("ConfigMap {ns}/gone")]);
    assert!(
        out.warnings
            .iter()
            .any(|w| w.contains("exists again") && w.contains("deleted again")),
        "{:?}",
        out.warnings
    );
    assert!(common::is_not_found(&cms.get("gone").await));
    // And it is recorded as completed again.
    let rec = stored(&tc, &ns).await;
    assert!(entry(&rec, "gone").unwrap()["completed"].is_string());
}
