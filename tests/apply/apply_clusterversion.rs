//! ClusterVersion status and update preconditions: patch vs minor updates, Upgradeable,
//! StaleDeleteManifest, write-only-on-change. On a real cluster the test gives it a stand-in
//! ClusterVersion kind (`common::cluster_version`; never point the tests at an OpenShift
//! cluster, whose own ClusterVersion they would rewrite).

use crate::common;

use std::path::Path;
use std::time::Duration;

use common::{TEST_FINALIZER, configmaps};
use cvo::cluster::Cluster;
use cvo::release::LoadOptions;
use cvo::status::clusterversion::{self, WriteOutcome};
use cvo::status::{ConditionStatus, UpdateType};
use cvo::sync::{SyncOptions, SyncOutcome, sync};
use kube::api::{Patch, PatchParams};
use serde_json::json;

fn options() -> SyncOptions {
    common::sync_options(Duration::from_millis(10))
}

fn write(dir: &Path, version: &str, files: &[(&str, String)]) {
    common::write_release(dir, Some(version), files);
}

async fn sync_dir(cluster: &Cluster, dir: &Path, options: &SyncOptions) -> SyncOutcome {
    let rel = cvo::release::load(dir, &LoadOptions::default()).expect("load");
    assert!(!rel.has_errors(), "{:?}", rel.diagnostics);
    sync(cluster, &rel, options, |_| {}).await.expect("sync")
}

#[tokio::test]
async fn status_history_and_update_preconditions() {
    let tc = common::cluster().await;
    let (_guard, cv_resource) = common::cluster_version(&tc).await;
    let cvs = common::create_cluster_version(&tc, &cv_resource).await;

    let ns = tc.namespace("cv").await;
    let cm = |name: &str, annotations: &str| {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {ns}\n{annotations}"
        )
    };
    let delete = "  annotations:\n    release.openshift.io/delete: \"true\"\n";
    let cluster = Cluster::new(tc.client.clone());

    // Install 1.0.0.
    let v100 = tempfile::tempdir().expect("tempdir");
    write(
        v100.path(),
        "1.0.0",
        &[("0000_10_a_cm.yaml", cm("keep", ""))],
    );
    let out = sync_dir(&cluster, v100.path(), &options()).await;
    assert_eq!(
        (out.update.clone(), out.exit_code()),
        (UpdateType::Install, 0)
    );
    assert_eq!(out.cluster_version, Some(Ok(WriteOutcome::Written)));
    let stored = cvs.get("version").await.expect("cv");
    let status = &stored.data["status"];
    assert_eq!(status["desired"]["version"], "1.0.0");
    assert_eq!(status["history"][0]["state"], "Completed");
    // Same pass again: nothing to write.
    let again = sync_dir(&cluster, v100.path(), &options()).await;
    assert_eq!(again.cluster_version, Some(Ok(WriteOutcome::Unchanged)));
    assert_eq!(
        cvs.get("version")
            .await
            .expect("cv")
            .metadata
            .resource_version,
        stored.metadata.resource_version
    );

    // Patch update 1.0.1 deletes an object whose finalizer is held: Upgradeable=False.
    let held = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "old", "namespace": ns, "finalizers": [TEST_FINALIZER]}});
    tc.dynamic(&configmaps(), Some(&ns))
        .patch("old", &PatchParams::apply("test"), &Patch::Apply(&held))
        .await
        .expect("held");
    let v101 = tempfile::tempdir().expect("tempdir");
    write(
        v101.path(),
        "1.0.1",
        &[
            ("0000_10_a_cm.yaml", cm("keep", "")),
            ("0000_20_a_old.yaml", cm("old", delete)),
        ],
    );
    let out = sync_dir(&cluster, v101.path(), &options()).await;
    assert_eq!(
        (out.update.clone(), out.exit_code()),
        (UpdateType::Patch, 3)
    );
    let cv_now = cvs.get("version").await.expect("cv");
    let up = clusterversion::condition(&cv_now, "Upgradeable").expect("Upgradeable written");
    assert_eq!(
        (up.status, up.reason.as_str()),
        (ConditionStatus::False, "ResourceDeletionInProgress")
    );
    assert_eq!(cv_now.data["status"]["history"][0]["version"], "1.0.1");
    assert_eq!(cv_now.data["status"]["history"][1]["version"], "1.0.0");

    // Minor update 1.1.0 while Upgradeable=False: refused, nothing written.
    let v110 = tempfile::tempdir().expect("tempdir");
    write(
        v110.path(),
        "1.1.0",
        &[
            ("0000_10_a_cm.yaml", cm("keep", "")),
            ("0000_10_a_new.yaml", cm("new", "")),
        ],
    );
    let out = sync_dir(&cluster, v110.path(), &options()).await;
    assert_eq!(
        (out.update.clone(), out.exit_code()),
        (UpdateType::MinorOrMajor, 4)
    );
    assert_eq!(out.refused[0].reason, "UpgradeableFalse");
    assert!(
        tc.dynamic(&configmaps(), Some(&ns))
            .get_opt("new")
            .await
            .expect("get")
            .is_none()
    );

    // The deletion finishes; a minor update that still carries the delete manifest is stale.
    common::strip_finalizers(&tc, &ns, "old").await;
    common::wait_gone(
        &tc,
        &tc.dynamic(&configmaps(), Some(&ns)),
        "old",
        "old gone",
    )
    .await;
    let out = sync_dir(&cluster, v101.path(), &options()).await;
    assert_eq!(out.exit_code(), 0);
    assert!(
        out.warnings.iter().any(|w| w.contains("already absent")),
        "{:?}",
        out.warnings
    );
    let stale = tempfile::tempdir().expect("tempdir");
    write(
        stale.path(),
        "1.1.0",
        &[
            ("0000_10_a_cm.yaml", cm("keep", "")),
            ("0000_20_a_old.yaml", cm("old", delete)),
        ],
    );
    let out = sync_dir(&cluster, stale.path(), &options()).await;
    assert_eq!(out.exit_code(), 4);
    assert_eq!(out.refused[0].reason, "StaleDeleteManifest");
    // --force overrides.
    let mut forced = options();
    forced.force = true;
    let out = sync_dir(&cluster, stale.path(), &forced).await;
    assert_eq!(out.exit_code(), 0, "{:?}", out.report);
    let cv_now = cvs.get("version").await.expect("cv");
    assert_eq!(cv_now.data["status"]["history"][0]["version"], "1.1.0");
    assert_eq!(
        cv_now.data["status"]["history"].as_array().map(Vec::len),
        Some(3)
    );
    // Leave no ClusterVersion behind for the next test binary on a real cluster.
    cvs.delete("version", &Default::default())
        .await
        .expect("delete cv");
}
