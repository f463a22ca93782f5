//! ClusterVersion true at every moment, on both servers: the conditions never contradict the
//! history (Available names the completed version, Progressing is False while reconciling),
//! progress and the gate are written during a long pass — also when the release itself
//! creates ClusterVersion — and the progress says why: the most frequent error of the last
//! round, with its count.

use crate::common;

use std::time::Duration;

use common::{Fault, TEST_FINALIZER, TestCluster, configmaps};
use cvo::apply::Strategy;
use cvo::cluster::Cluster;
use cvo::release::Release;
use cvo::status::{Condition, ConditionStatus};
use cvo::sync::{Mode, SyncOptions, SyncOutcome, sync};
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::json;

fn configmap(ns: &str, name: &str, meta: &str) -> String {
    common::configmap(ns, name, meta, &[("a", "b")])
}

/// Sync options that let the ClusterVersion choose the mode (install, update, reconciling).
fn chosen() -> SyncOptions {
    SyncOptions {
        mode: None,
        ..common::sync_options(Duration::from_millis(10))
    }
}

async fn run(client: kube::Client, rel: &Release, options: &SyncOptions) -> SyncOutcome {
    sync(&Cluster::new(client), rel, options, |_| {})
        .await
        .expect("sync")
}

fn condition<'a>(out: &'a SyncOutcome, type_: &str) -> &'a Condition {
    out.conditions
        .iter()
        .find(|c| c.type_ == type_)
        .unwrap_or_else(|| panic!("no {type_} in {:?}", out.conditions))
}

async fn stored(cvs: &Api<DynamicObject>, type_: &str) -> (String, String, String) {
    common::stored_condition(cvs, type_)
        .await
        .unwrap_or_else(|e| panic!("{type_}: {e}"))
}

/// A failed update leaves the cluster at the version it came from: Available says
/// "Done applying 1.4.0" next to history 1.5.0 Partial, Progressing says it is unable to
/// apply 1.5.0 and why, Failing is True.
#[tokio::test]
async fn available_during_a_failed_update_names_the_completed_version() {
    let tc = common::cluster().await;
    let (_guard, cv_resource) = common::cluster_version(&tc).await;
    let cvs = common::create_cluster_version(&tc, &cv_resource).await;
    let ns = tc.namespace("truth-update").await;
    let (_d1, v140) = common::release(
        Some("1.4.0"),
        &[("0000_10_a_cm.yaml", configmap(&ns, "a", ""))],
    );
    let out = run(tc.client.clone(), &v140, &chosen()).await;
    assert_eq!(out.exit_code(), 0, "{:?} {:?}", out.report, out.conditions);
    assert_eq!(stored(&cvs, "Available").await.2, "Done applying 1.4.0");

    // 1.5.0 ships a ConfigMap in a namespace that does not exist: the server refuses it.
    let missing = common::unique("truth-missing");
    let (_d2, v160) = common::release(
        Some("1.5.0"),
        &[
            ("0000_10_a_cm.yaml", configmap(&ns, "a", "")),
            ("0000_20_b_cm.yaml", configmap(&missing, "refused", "")),
        ],
    );
    // The preflight sees the refusal first: the update does not start until it is accepted.
    let out = run(tc.client.clone(), &v160, &chosen()).await;
    assert_eq!(out.exit_code(), 4, "{:?}", out.refused);
    let preflight = out.preflight.as_ref().expect("preflight");
    let applying: Vec<&str> = preflight.applying().map(|r| r.name).collect();
    assert_eq!(applying, ["ManifestRejectedByServer"], "{preflight:?}");
    assert!(
        out.refused[0]
            .message
            .contains(&format!("ConfigMap {missing}/refused")),
        "{:?}",
        out.refused
    );
    let accepted = SyncOptions {
        accept_risks: vec!["ManifestRejectedByServer".into()],
        ..chosen()
    };
    let out = run(tc.client.clone(), &v160, &accepted).await;
    assert_eq!(out.mode, Mode::Updating);
    assert_eq!(out.exit_code(), 1, "{:?}", out.report);
    let available = condition(&out, "Available");
    assert_eq!(
        (available.status, available.message.as_str()),
        (ConditionStatus::True, "Done applying 1.4.0")
    );
    let progressing = condition(&out, "Progressing");
    assert_eq!(progressing.status, ConditionStatus::True);
    assert!(
        progressing
            .message
            .starts_with("Unable to apply 1.5.0: 1 of 2 done; 1 failed: "),
        "{}",
        progressing.message
    );
    assert_eq!(condition(&out, "Failing").status, ConditionStatus::True);
    // What the cluster reads agrees: history 1.5.0 Partial over 1.4.0 Completed.
    let cv = cvs.get("version").await.expect("cv");
    let history = &cv.data["status"]["history"];
    assert_eq!(
        (&history[0]["version"], &history[0]["state"]),
        (&json!("1.5.0"), &json!("Partial"))
    );
    assert_eq!(
        (&history[1]["version"], &history[1]["state"]),
        (&json!("1.4.0"), &json!("Completed"))
    );
    assert_eq!(
        stored(&cvs, "Available").await,
        ("True".into(), String::new(), "Done applying 1.4.0".into())
    );
    assert_eq!(stored(&cvs, "Failing").await.0, "True");
    cvs.delete("version", &Default::default())
        .await
        .expect("delete cv");
}

/// Reconciling (the release is the newest Completed entry): a manifest that fails shows in
/// Failing, while Progressing stays False ("Error while reconciling V: …", the CVO's words).
#[tokio::test]
async fn reconciling_with_a_failing_manifest_keeps_progressing_false() {
    let tc = common::cluster().await;
    let (_guard, cv_resource) = common::cluster_version(&tc).await;
    let cvs = common::create_cluster_version(&tc, &cv_resource).await;
    let ns = tc.namespace("truth-reconcile").await;
    let doomed = tc.namespace("truth-doomed").await;
    let (_dir, rel) = common::release(
        Some("1.4.0"),
        &[
            ("0000_10_a_cm.yaml", configmap(&doomed, "early", "")),
            ("0000_20_b_cm.yaml", configmap(&ns, "late", "")),
        ],
    );
    let installed = run(tc.client.clone(), &rel, &chosen()).await;
    assert_eq!(installed.exit_code(), 0, "{:?}", installed.report);

    let namespaces = tc.dynamic(&common::builtin("", "v1", "Namespace", "namespaces"), None);
    namespaces
        .delete(&doomed, &Default::default())
        .await
        .expect("delete namespace");
    common::poll_until("the namespace is gone", tc.deadline(), || async {
        match namespaces.get_opt(&doomed).await {
            Ok(None) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    let out = run(tc.client.clone(), &rel, &chosen()).await;
    assert_eq!(out.mode, Mode::Reconciling);
    assert_eq!(out.exit_code(), 1, "{:?}", out.report);
    for (status, reason, message) in [
        {
            let c = condition(&out, "Progressing");
            (c.status, c.reason.clone(), c.message.clone())
        },
        {
            let (s, r, m) = stored(&cvs, "Progressing").await;
            let status = if s == "False" {
                ConditionStatus::False
            } else {
                ConditionStatus::True
            };
            (status, r, m)
        },
    ] {
        assert_eq!(status, ConditionStatus::False, "{reason}: {message}");
        assert!(
            message.starts_with("Error while reconciling 1.4.0: 1 failed: "),
            "{message}"
        );
        assert!(message.contains(&doomed), "{message}");
    }
    assert_eq!(condition(&out, "Failing").status, ConditionStatus::True);
    assert_eq!(stored(&cvs, "Failing").await.0, "True");
    assert_eq!(stored(&cvs, "Available").await.2, "Done applying 1.4.0");
    cvs.delete("version", &Default::default())
        .await
        .expect("delete cv");
}

async fn held_configmap(tc: &TestCluster, ns: &str, name: &str) {
    let obj = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": ns, "finalizers": [TEST_FINALIZER]}});
    tc.dynamic(&configmaps(), Some(ns))
        .patch(name, &PatchParams::apply("test"), &Patch::Apply(&obj))
        .await
        .expect("create held");
    tc.hold(&configmaps(), Some(ns), name);
}

/// An install whose release creates `ClusterVersion version` (as manifests-example does) and
/// then waits on a finalizer-held deletion (synchronous strategy): returns the release and
/// its options. There is no ClusterVersion when the sync starts.
fn creating_release(ns: &str) -> (tempfile::TempDir, Release, SyncOptions) {
    let cv = "apiVersion: config.openshift.io/v1\nkind: ClusterVersion\nmetadata:\n  name: version\nspec:\n  clusterID: x\n";
    let (dir, rel) = common::release(
        Some("1.0.0"),
        &[
            (
                "0000_00_cluster-version-operator_02_clusterversion.yaml",
                cv.to_owned(),
            ),
            ("0000_10_a_cm.yaml", configmap(ns, "keep", "")),
            (
                "0000_20_a_cm.yaml",
                configmap(ns, "held", common::DELETE_ANNOTATION),
            ),
        ],
    );
    let mut opts = chosen();
    opts.apply.strategy = Strategy::Synchronous;
    opts.apply.deletion_timeout = Duration::from_secs(300);
    (dir, rel, opts)
}

/// Progress is written while a long pass waits (here on a held deletion): the stored
/// ClusterVersion — created by the release itself during the pass — says "Working towards
/// 1.0.0: n of 3 done" with n > 0 before the pass ends.
#[tokio::test]
async fn progress_is_written_during_a_long_pass() {
    let tc = common::cluster().await;
    let (_guard, cv_resource) = common::cluster_version(&tc).await;
    let cvs = tc.dynamic(&cv_resource, None);
    let ns = tc.namespace("truth-progress").await;
    held_configmap(&tc, &ns, "held").await;
    let (_dir, rel, opts) = creating_release(&ns);
    let cluster = Cluster::new(tc.client.clone());
    let syncing = sync(&cluster, &rel, &opts, |_| {});
    tokio::pin!(syncing);
    let progress = common::poll_until(
        "Progressing=True with n of 3 done in the stored ClusterVersion",
        tc.deadline() + Duration::from_secs(15),
        || async {
            match common::stored_condition(&cvs, "Progressing").await? {
                (status, _, message)
                    if status == "True"
                        && message.starts_with("Working towards 1.0.0: ")
                        && !message.starts_with("Working towards 1.0.0: 0 of") =>
                {
                    Ok(message)
                }
                other => Err(format!("{other:?}")),
            }
        },
    );
    let message = tokio::select! {
        out = &mut syncing => panic!("the sync ended before its progress was written: {:?}", out.map(|o| o.conditions)),
        message = progress => message,
    };
    assert!(message.contains(" of 3 done ("), "{message}");
    assert!(
        futures::poll!(&mut syncing).is_pending(),
        "the sync no longer waits on the held ConfigMap"
    );
    common::strip_finalizers(&tc, &ns, "held").await;
    let out = syncing.await.expect("sync");
    assert_eq!(out.exit_code(), 0, "{:?}", out.report);
    assert_eq!(stored(&cvs, "Progressing").await.0, "False");
    cvs.delete("version", &Default::default())
        .await
        .expect("delete cv");
}

/// The gate closes in a ClusterVersion the release itself creates: a deletion requested
/// before (or while) it exists is written once it does, before the pass ends.
#[tokio::test]
async fn the_gate_is_written_when_the_release_creates_clusterversion() {
    let tc = common::cluster().await;
    let (_guard, cv_resource) = common::cluster_version(&tc).await;
    let cvs = tc.dynamic(&cv_resource, None);
    let ns = tc.namespace("truth-gate").await;
    held_configmap(&tc, &ns, "held").await;
    let (_dir, rel, opts) = creating_release(&ns);
    let cluster = Cluster::new(tc.client.clone());
    let syncing = sync(&cluster, &rel, &opts, |_| {});
    tokio::pin!(syncing);
    let closed = common::gate_closed(&cvs, tc.deadline() + Duration::from_secs(15));
    tokio::select! {
        out = &mut syncing => panic!("the sync ended before the gate closed: {:?}", out.map(|o| o.conditions)),
        () = closed => {}
    };
    common::assert_gate_closed(&cvs, &format!("ConfigMap {ns}/held"), "1.0.0").await;
    assert!(
        futures::poll!(&mut syncing).is_pending(),
        "the sync no longer waits on the held ConfigMap"
    );
    common::strip_finalizers(&tc, &ns, "held").await;
    let out = syncing.await.expect("sync");
    assert_eq!(out.exit_code(), 0, "{:?}", out.report);
    assert_eq!(stored(&cvs, "Upgradeable").await.0, "True");
    cvs.delete("version", &Default::default())
        .await
        .expect("delete cv");
}

/// Progress says why: with every ConfigMap refused (403), the stored Progressing names the
/// most frequent error of the last install round with its count while the install retries,
/// and the final Failing and Progressing name it too.
#[tokio::test]
async fn the_most_frequent_error_is_named_with_its_count() {
    let tc = common::cluster().await;
    let (_guard, cv_resource) = common::cluster_version(&tc).await;
    let cvs = common::create_cluster_version(&tc, &cv_resource).await;
    let ns = tc.namespace("truth-why").await;
    let files: Vec<(String, String)> = (0..30)
        .map(|i| {
            (
                format!("0000_10_c{i:02}_cm.yaml"),
                configmap(&ns, &format!("cm-{i}"), ""),
            )
        })
        .collect();
    let files: Vec<(&str, String)> = files.iter().map(|(f, c)| (f.as_str(), c.clone())).collect();
    let (_dir, rel) = common::release(Some("1.0.0"), &files);
    let client = common::faulty_client(
        tc.client.clone(),
        vec![Fault::new(
            "PATCH",
            format!("/namespaces/{ns}/configmaps/"),
            403,
        )],
    );
    let opts = SyncOptions {
        install_timeout: Duration::from_secs(25),
        ..chosen()
    };
    let cluster = Cluster::new(client);
    let syncing = sync(&cluster, &rel, &opts, |_| {});
    tokio::pin!(syncing);
    let during = common::poll_until(
        "the stored Progressing names the last round's error",
        Duration::from_secs(30),
        || async {
            match common::stored_condition(&cvs, "Progressing").await? {
                (_, _, message) if message.contains("; last round: 30 failed: ") => Ok(message),
                other => Err(format!("{other:?}")),
            }
        },
    );
    let message = tokio::select! {
        out = &mut syncing => panic!("the install ended before its progress named the error: {:?}", out.map(|o| o.conditions)),
        message = during => message,
    };
    assert!(
        message.starts_with("Working towards 1.0.0: 0 of 30 done (0% complete)"),
        "{message}"
    );
    assert!(message.contains("403"), "{message}");
    let out = syncing.await.expect("sync");
    assert_eq!(out.mode, Mode::Initializing);
    let failing = condition(&out, "Failing");
    assert_eq!(failing.reason, "MultipleErrors");
    assert!(
        failing
            .message
            .starts_with("30 manifests failed (most often, 30 failed: "),
        "{}",
        failing.message
    );
    assert!(
        failing.message.ends_with("* … and 20 more"),
        "{}",
        failing.message
    );
    let progressing = condition(&out, "Progressing");
    assert!(
        progressing
            .message
            .starts_with("Unable to apply 1.0.0: 0 of 30 done; 30 failed: "),
        "{}",
        progressing.message
    );
    assert_eq!(stored(&cvs, "Progressing").await.2, progressing.message);
    cvs.delete("version", &Default::default())
        .await
        .expect("delete cv");
}
