//! Retries and fail-fast, with faults injected between the client and the test cluster
//! (`common::faulty_client`), so these run against the real server too.

use crate::common;

use std::time::Duration;

use common::Fault;
use cvo::apply::Action;
use cvo::cluster::Cluster;
use cvo::release::LoadOptions;
use cvo::sync::{SyncOptions, sync};

fn options() -> SyncOptions {
    common::sync_options(Duration::from_millis(10))
}

fn write_release(ns: &str, data: &str, immutable: bool) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("0000_10_a_ns.yaml"),
        format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {ns}\n"),
    )
    .expect("write");
    std::fs::write(
        dir.path().join("0000_20_a_cm.yaml"),
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: frozen\n  namespace: {ns}\nimmutable: {immutable}\ndata:\n  a: {data}\n"
        ),
    )
    .expect("write");
    dir
}

#[tokio::test]
async fn transient_429_and_500_are_retried() {
    let tc = common::cluster().await;
    // A sync reads and writes ClusterVersion `version`, which other tests of this binary own.
    let _turn = common::sync_turn(&tc).await;
    let client = common::faulty_client(
        tc.client.clone(),
        vec![
            Fault::new("PATCH", "/namespaces/", 429)
                .retry_after(1)
                .times(1),
            Fault::new("PATCH", "/configmaps/", 500).times(2),
        ],
    );
    let ns = common::unique("faults");
    let dir = write_release(&ns, "one", false);
    let rel = cvo::release::load(dir.path(), &LoadOptions::default()).expect("load");
    tc.track_cluster_object(&common::builtin("", "v1", "Namespace", "namespaces"), &ns);
    let started = std::time::Instant::now();
    let out = sync(&Cluster::new(client), &rel, &options(), |_| {})
        .await
        .expect("sync");
    let report = out.report.as_ref().expect("pass");
    assert!(
        report.results.iter().all(|r| r.action == Action::Created),
        "{report:?}"
    );
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "Retry-After was not honoured"
    );
    // One 429 and two 500s, each retried once, and counted in the report.
    assert_eq!((out.retries.retries, out.retries.throttled), (3, 1));
}

#[tokio::test]
async fn immutable_field_422_fails_fast_with_delete_then_recreate_advice() {
    let tc = common::cluster().await;
    // A sync reads and writes ClusterVersion `version`, which other tests of this binary own.
    let _turn = common::sync_turn(&tc).await;
    let ns = common::unique("immutable");
    let first = write_release(&ns, "one", true);
    let rel = cvo::release::load(first.path(), &LoadOptions::default()).expect("load");
    let cluster = Cluster::new(tc.client.clone());
    tc.track_cluster_object(&common::builtin("", "v1", "Namespace", "namespaces"), &ns);
    let out = sync(&cluster, &rel, &options(), |_| {})
        .await
        .expect("sync");
    assert_eq!(out.exit_code(), 0, "{:?}", out.report);

    let second = write_release(&ns, "two", true);
    let rel2 = cvo::release::load(second.path(), &LoadOptions::default()).expect("load");
    let started = std::time::Instant::now();
    let out = sync(&cluster, &rel2, &options(), |_| {})
        .await
        .expect("sync");
    let report = out.report.as_ref().expect("pass");
    let failed: Vec<_> = report.failed().collect();
    assert_eq!(failed.len(), 1, "{report:?}");
    let err = failed[0].error.as_deref().unwrap_or_default();
    assert!(
        err.contains("422") && err.contains("deleted and recreated"),
        "{err}"
    );
    // Not retried: no backoff was spent.
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(out.exit_code(), 1);
}
