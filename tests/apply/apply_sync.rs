//! The sync as a whole, on both servers: install rounds, and the safety gate failing closed —
//! a deletion that timed out, or one the engine cannot read back (faults injected between the
//! client and the cluster, `common::faulty_client`), is never `Upgradeable=True`, and an
//! unreadable ClusterVersion never turns an update into an install; a release already
//! completed is reconciled over the flattened graph (one failure holds nothing back).

use crate::common;

use std::time::Duration;

use common::{Fault, TEST_FINALIZER, TestCluster, configmaps, unique};
use cvo::apply::{Action, Strategy};
use cvo::cluster::Cluster;
use cvo::release::Release;
use cvo::status::ConditionStatus;
use cvo::sync::{Mode, SyncOptions, SyncOutcome, sync};
use kube::api::{Patch, PatchParams};
use serde_json::json;

fn namespace(ns: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {ns}\n  labels: {{{}: sync}}\n",
        common::TEST_LABEL
    )
}

fn configmap(ns: &str, name: &str, meta: &str) -> String {
    common::configmap(ns, name, meta, &[("a", "b")])
}

const DELETE: &str = common::DELETE_ANNOTATION;

fn options() -> SyncOptions {
    common::sync_options(Duration::from_millis(10))
}

async fn run(client: kube::Client, rel: &Release, options: &SyncOptions) -> SyncOutcome {
    sync(&Cluster::new(client), rel, options, |_| {})
        .await
        .expect("sync")
}

fn upgradeable(outcome: &SyncOutcome) -> &cvo::status::Condition {
    outcome
        .conditions
        .iter()
        .find(|c| c.type_ == "Upgradeable")
        .unwrap_or_else(|| panic!("no Upgradeable in {:?}", outcome.conditions))
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

#[tokio::test]
async fn an_install_retries_in_rounds_until_everything_is_applied() {
    let tc = common::cluster().await;
    let _turn = common::sync_turn(&tc).await;
    let ns = unique("install");
    tc.track_cluster_object(&common::builtin("", "v1", "Namespace", "namespaces"), &ns);
    // The ConfigMap's namespace comes two run levels later: an update would fail it and
    // block everything after it; an install gets there in a later round.
    let (_dir, rel) = common::release(
        None,
        &[
            ("0000_05_a_cm.yaml", configmap(&ns, "early", "")),
            ("0000_10_b_ns.yaml", namespace(&ns)),
            ("0000_20_c_cm.yaml", configmap(&ns, "late", "")),
        ],
    );
    let updating = run(tc.client.clone(), &rel, &options()).await;
    let summary = updating.report.as_ref().expect("pass").summary();
    assert_eq!((summary.failed, summary.skipped), (1, 2), "{summary:?}");

    let install = SyncOptions {
        mode: Some(Mode::Initializing),
        ..options()
    };
    let out = run(tc.client.clone(), &rel, &install).await;
    assert_eq!(out.mode, Mode::Initializing);
    let summary = out.report.as_ref().expect("pass").summary();
    assert_eq!(summary.failed + summary.skipped, 0, "{:?}", out.report);
    assert!(out.rounds() >= 2, "rounds: {}", out.rounds());
    assert_eq!(out.exit_code(), 0);
}

#[tokio::test]
async fn an_install_does_not_retry_a_broken_manifest() {
    let tc = common::cluster().await;
    let _turn = common::sync_turn(&tc).await;
    let ns = tc.namespace("install-bad").await;
    let bad = "  annotations:\n    release.openshift.io/delete: \"yes\"\n";
    let (_dir, rel) = common::release(
        None,
        &[
            ("0000_10_a_cm.yaml", configmap(&ns, "bad", bad)),
            ("0000_10_a_cm2.yaml", configmap(&ns, "after", "")),
        ],
    );
    let install = SyncOptions {
        mode: Some(Mode::Initializing),
        ..options()
    };
    let out = run(tc.client.clone(), &rel, &install).await;
    let report = out.report.as_ref().expect("pass");
    let actions: Vec<Action> = report.results.iter().map(|r| r.action).collect();
    // The broken one fails for good; the one after it in the same chain still gets its turn.
    assert_eq!(actions, [Action::Failed, Action::Created], "{report:?}");
    assert_eq!(out.exit_code(), 1);
}

#[tokio::test]
async fn a_timed_out_synchronous_deletion_is_not_upgradeable() {
    let tc = common::cluster().await;
    let _turn = common::sync_turn(&tc).await;
    let ns = tc.namespace("sync-timeout").await;
    held_configmap(&tc, &ns, "held").await;
    let (_dir, rel) = common::release(
        None,
        &[("0000_10_a_cm.yaml", configmap(&ns, "held", DELETE))],
    );
    let mut opts = options();
    opts.apply.strategy = Strategy::Synchronous;
    opts.apply.deletion_timeout = Duration::from_secs(1);
    // On an installed cluster and during an install alike: the manifest fails once (an
    // install does not wait the same timeout again each round until --install-timeout).
    let install = SyncOptions {
        mode: Some(Mode::Initializing),
        install_timeout: Duration::from_secs(600),
        ..opts.clone()
    };
    for opts in [opts, install] {
        let out = run(tc.client.clone(), &rel, &opts).await;
        let report = out.report.as_ref().expect("pass");
        assert_eq!(report.results[0].action, Action::Failed, "{report:?}");
        assert!(
            report.results[0]
                .error
                .as_deref()
                .is_some_and(|e| e.contains("deletion did not finish within")),
            "{report:?}"
        );
        assert_eq!(out.rounds(), 1, "{:?}", opts.mode);
        let up = upgradeable(&out);
        assert_eq!(up.status, ConditionStatus::False, "{up:?}");
        assert!(
            up.message.contains(&format!("ConfigMap {ns}/held")),
            "{}",
            up.message
        );
        assert_eq!(out.exit_code(), 1);
    }
}

#[tokio::test]
async fn a_deletion_that_cannot_be_read_back_is_upgradeable_unknown() {
    let tc = common::cluster().await;
    let _turn = common::sync_turn(&tc).await;
    let ns = tc.namespace("unreadable").await;
    held_configmap(&tc, &ns, "held").await;
    let (_dir, rel) = common::release(
        None,
        &[("0000_10_a_cm.yaml", configmap(&ns, "held", DELETE))],
    );
    // Every read of ConfigMaps in the namespace answers 503.
    let path = format!("/namespaces/{ns}/configmaps");
    let client = common::faulty_client(tc.client.clone(), vec![Fault::new("GET", path, 503)]);
    let out = run(client, &rel, &options()).await;
    let up = upgradeable(&out);
    assert_eq!(
        (up.status, up.reason.as_str()),
        (ConditionStatus::Unknown, "DeletionStatusUnknown"),
        "{up:?}"
    );
    assert!(
        up.message.contains(&format!("ConfigMap {ns}/held")),
        "{}",
        up.message
    );
    assert_ne!(out.exit_code(), 0);
}

/// One ClusterVersion test (it is cluster-wide): the refusals of a minor update when the
/// engine cannot tell, and an unreadable ClusterVersion.
#[tokio::test]
async fn a_minor_update_is_refused_when_the_engine_cannot_tell() {
    let tc = common::cluster().await;
    let (_guard, cv_resource) = common::cluster_version(&tc).await;
    let cvs = common::create_cluster_version(&tc, &cv_resource).await;
    let ns = tc.namespace("cv-unknown").await;
    let cluster = || Cluster::new(tc.client.clone());

    // 1.0.0 installed: history Completed, Upgradeable True.
    let (_d1, v100) = common::release(
        Some("1.0.0"),
        &[("0000_10_a_cm.yaml", configmap(&ns, "keep", ""))],
    );
    let out = sync(&cluster(), &v100, &options(), |_| {})
        .await
        .expect("sync");
    assert_eq!(out.exit_code(), 0, "{:?}", out.report);

    // A minor update whose delete manifest's object cannot be read: refused (4), nothing
    // written; --force goes through.
    held_configmap(&tc, &ns, "held").await;
    let (_d2, v110) = common::release(
        Some("1.1.0"),
        &[
            ("0000_10_a_cm.yaml", configmap(&ns, "keep", "")),
            ("0000_10_b_cm.yaml", configmap(&ns, "held", DELETE)),
        ],
    );
    let path = format!("/namespaces/{ns}/configmaps/held");
    let faulty = common::faulty_client(tc.client.clone(), vec![Fault::new("GET", path, 503)]);
    let out = sync(&Cluster::new(faulty), &v110, &options(), |_| {})
        .await
        .expect("sync");
    let reasons: Vec<_> = out.refused.iter().map(|f| f.reason).collect();
    assert_eq!(reasons, ["DeletionStatusUnknown"]);
    assert_eq!(out.exit_code(), 4);

    // The stored Upgradeable is Unknown: a minor update is refused as for False.
    let status = json!({"status": {"conditions": [{"type": "Upgradeable", "status": "Unknown",
        "reason": "DeletionStatusUnknown", "message": "cannot tell", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
        "history": cvs.get("version").await.expect("cv").data["status"]["history"]}});
    cvs.patch_status("version", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .expect("status");
    let out = sync(&cluster(), &v110, &options(), |_| {})
        .await
        .expect("sync");
    let reasons: Vec<_> = out.refused.iter().map(|f| f.reason).collect();
    assert_eq!(reasons, ["UpgradeableUnknown"]);
    assert_eq!(out.exit_code(), 4);
    let forced = SyncOptions {
        force: true,
        ..options()
    };
    let out = sync(&cluster(), &v110, &forced, |_| {})
        .await
        .expect("sync");
    assert!(out.report.is_some());
    assert_eq!(upgradeable(&out).status, ConditionStatus::False);

    // The ClusterVersion cannot be read: the sync stops, it is not taken for an install.
    let faulty = common::faulty_client(
        tc.client.clone(),
        vec![Fault::new("GET", "/clusterversions/version", 503)],
    );
    let err = sync(&Cluster::new(faulty), &v110, &options(), |_| {})
        .await
        .expect_err("an unreadable ClusterVersion stops the sync");
    assert!(
        err.to_string().contains("cannot tell install from update"),
        "{err}"
    );
    cvs.delete("version", &Default::default())
        .await
        .expect("delete cv");
}

#[tokio::test]
async fn a_server_failing_its_first_requests_is_waited_for() {
    let tc = common::cluster().await;
    let _turn = common::sync_turn(&tc).await;
    let ns = tc.namespace("outage").await;
    let (_dir, rel) = common::release(None, &[("0000_10_a_cm.yaml", configmap(&ns, "early", ""))]);
    // The first requests of the run — discovery included — answer 503, as a server that is
    // not up yet: the run waits under the retry policy instead of failing everything.
    let client = common::faulty_client(
        tc.client.clone(),
        vec![Fault::new("GET", "/", 503).times(3)],
    );
    let out = run(client, &rel, &options()).await;
    let summary = out.report.as_ref().expect("pass").summary();
    assert_eq!(
        (summary.created, summary.failed),
        (1, 0),
        "{:?}",
        out.report
    );
}

/// A ClusterVersion test: an update is recorded (desired, a Partial history entry,
/// Progressing=True) before its first manifest is applied, so a crash mid-update leaves it
/// visible.
#[tokio::test]
async fn an_update_is_visible_before_its_first_manifest() {
    let tc = common::cluster().await;
    let (_guard, cv_resource) = common::cluster_version(&tc).await;
    let cvs = common::create_cluster_version(&tc, &cv_resource).await;
    let ns = tc.namespace("cv-progress").await;
    let (_d1, v100) = common::release(
        Some("1.0.0"),
        &[("0000_10_a_cm.yaml", configmap(&ns, "a", ""))],
    );
    let out = run(tc.client.clone(), &v100, &options()).await;
    assert_eq!(out.exit_code(), 0, "{:?}", out.report);

    let (_d2, v101) = common::release(
        Some("1.0.1"),
        &[(
            "0000_10_a_cm.yaml",
            configmap(&ns, "a", "  labels: {v: \"101\"}\n"),
        )],
    );
    let (client, log) = common::recording_client(tc.client.clone());
    let out = run(client, &v101, &options()).await;
    assert_eq!(out.exit_code(), 0, "{:?}", out.report);
    let log = log.lock().expect("log").clone();
    let first = |prefix: &str, part: &str| {
        log.iter()
            .position(|l| l.starts_with(prefix) && l.contains(part) && !l.ends_with("(dry run)"))
            .unwrap_or_else(|| panic!("no {prefix} {part} in {log:?}"))
    };
    // The update's preflight checks the manifest with a dry run first, writing nothing.
    assert!(
        log.iter()
            .position(|l| l.starts_with("PATCH") && l.ends_with("(dry run)"))
            .is_some_and(|dry| dry < first("PUT", "/clusterversions/version/status")),
        "{log:?}"
    );
    assert!(
        first("PUT", "/clusterversions/version/status") < first("PATCH", "/configmaps/"),
        "{log:?}"
    );
    let history = cvs.get("version").await.expect("cv").data["status"]["history"].clone();
    assert_eq!(history[0]["version"], "1.0.1");
    assert_eq!(history[0]["state"], "Completed");
    // A re-apply of the completed version records nothing at its start.
    let (client, log) = common::recording_client(tc.client.clone());
    run(client, &v101, &options()).await;
    let log = log.lock().expect("log").clone();
    assert!(!log.iter().any(|l| l.starts_with("PUT")), "{log:?}");
    cvs.delete("version", &Default::default())
        .await
        .expect("delete cv");
}

#[tokio::test]
async fn a_completed_release_is_reconciled_without_waiting_on_run_levels() {
    let tc = common::cluster().await;
    let (_guard, cv_resource) = common::cluster_version(&tc).await;
    let cvs = common::create_cluster_version(&tc, &cv_resource).await;
    let ns = tc.namespace("reconcile").await;
    let doomed = tc.namespace("reconcile-gone").await;
    let (_dir, rel) = common::release(
        Some("1.0.0"),
        &[
            ("0000_10_a_cm.yaml", configmap(&doomed, "early", "")),
            ("0000_20_b_cm.yaml", configmap(&ns, "late", "")),
        ],
    );
    // The ClusterVersion says how to walk: an install first, then reconciling.
    let chosen = SyncOptions {
        mode: None,
        ..options()
    };
    let installed = run(tc.client.clone(), &rel, &chosen).await;
    assert_eq!(installed.mode, Mode::Initializing);
    assert_eq!(installed.exit_code(), 0, "{:?}", installed.report);
    let history = cvs.get("version").await.expect("cv").data["status"]["history"][0].clone();
    assert_eq!(
        (&history["version"], &history["state"]),
        (&json!("1.0.0"), &json!("Completed"))
    );

    // The early run level now fails (its namespace is gone) and the late one drifted.
    let namespaces = tc.dynamic(&common::builtin("", "v1", "Namespace", "namespaces"), None);
    namespaces
        .delete(&doomed, &Default::default())
        .await
        .expect("delete namespace");
    common::poll_until("the namespace is gone", Duration::from_secs(60), || async {
        match namespaces.get_opt(&doomed).await {
            Ok(None) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    let late = tc.dynamic(&configmaps(), Some(&ns));
    let drift = || async {
        late.patch(
            "late",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"a": "drifted"}})),
        )
        .await
        .expect("drift");
    };
    drift().await;
    let action =
        |out: &SyncOutcome, index: usize| out.report.as_ref().expect("pass").results[index].action;

    // Walking run levels, the failure would hold the late one back...
    let ordered = run(tc.client.clone(), &rel, &options()).await;
    assert_eq!(
        (action(&ordered, 0), action(&ordered, 1)),
        (Action::Failed, Action::Skipped)
    );
    // ...while reconciling puts it back regardless.
    let reconciled = run(tc.client.clone(), &rel, &chosen).await;
    assert_eq!(reconciled.mode, Mode::Reconciling);
    assert_eq!(
        (action(&reconciled, 0), action(&reconciled, 1)),
        (Action::Failed, Action::Updated)
    );
    let data = late.get("late").await.expect("late").data["data"]["a"].clone();
    assert_eq!(data, "b");
    cvs.delete("version", &Default::default())
        .await
        .expect("delete cv");
}

/// The Upgradeable gate closes before a synchronous deletion waits: while the sync is still
/// waiting on the held object, the stored ClusterVersion already says
/// `Upgradeable=False ResourceDeletionInProgress` naming it, and Progressing=True.
#[tokio::test]
async fn the_gate_is_closed_in_clusterversion_before_a_synchronous_deletion_waits() {
    let tc = common::cluster().await;
    let (_guard, cv_resource) = common::cluster_version(&tc).await;
    let cvs = common::create_cluster_version(&tc, &cv_resource).await;
    let ns = tc.namespace("gate-sync").await;
    held_configmap(&tc, &ns, "held").await;
    let (_dir, rel) = common::release(
        Some("1.0.0"),
        &[
            ("0000_10_a_cm.yaml", configmap(&ns, "keep", "")),
            ("0000_20_a_cm.yaml", configmap(&ns, "held", DELETE)),
        ],
    );
    let mut opts = options();
    opts.apply.strategy = Strategy::Synchronous;
    opts.apply.deletion_timeout = Duration::from_secs(300);
    let cluster = Cluster::new(tc.client.clone());
    let syncing = sync(&cluster, &rel, &opts, |_| {});
    tokio::pin!(syncing);
    let object = format!("ConfigMap {ns}/held");
    let closed = common::gate_closed(&cvs, tc.deadline());
    tokio::select! {
        out = &mut syncing => panic!("the sync ended before the gate closed: {:?}", out.map(|o| o.conditions)),
        () = closed => {}
    };
    common::assert_gate_closed(&cvs, &object, "1.0.0").await;
    // Still waiting: the deletion has not finished.
    assert!(
        futures::poll!(&mut syncing).is_pending(),
        "the sync no longer waits on {object}"
    );

    // Released, the deletion finishes and the sync ends with the gate open.
    common::strip_finalizers(&tc, &ns, "held").await;
    let out = syncing.await.expect("sync");
    let report = out.report.as_ref().expect("pass");
    assert_eq!(report.results[1].action, Action::Deleted, "{report:?}");
    assert_eq!(upgradeable(&out).status, ConditionStatus::True);
    let (status, ..) = common::stored_condition(&cvs, "Upgradeable")
        .await
        .expect("Upgradeable");
    assert_eq!(status, "True");
    cvs.delete("version", &Default::default())
        .await
        .expect("delete cv");
}

/// A namespace the release creates, found still terminating (left by an earlier install, say):
/// its manifest is not done — the result says the object is being deleted, not "unchanged" —
/// so the next pass (or install round) creates it again once the deletion finished, and what
/// lives in it follows.
#[tokio::test]
async fn an_object_being_deleted_is_not_applied_until_it_is_gone_then_created_again() {
    let tc = common::cluster().await;
    let _turn = common::sync_turn(&tc).await;
    let ns = tc.namespace("terminating").await;
    held_configmap(&tc, &ns, "held").await;
    let namespaces = tc.dynamic(&common::builtin("", "v1", "Namespace", "namespaces"), None);
    namespaces
        .delete(&ns, &Default::default())
        .await
        .expect("delete the namespace");
    common::poll_until(
        "the namespace is terminating",
        Duration::from_secs(60),
        || async {
            match namespaces.get_opt(&ns).await {
                Ok(Some(n)) if n.metadata.deletion_timestamp.is_some() => Ok(()),
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await;
    let (_dir, rel) = common::release(
        Some("1.0.0"),
        &[
            ("0000_10_a_00_ns.yaml", namespace(&ns)),
            ("0000_10_a_01_cm.yaml", configmap(&ns, "settings", "")),
        ],
    );
    let once = SyncOptions {
        mode: Some(Mode::Reconciling),
        ..options()
    };
    let terminating = run(tc.client.clone(), &rel, &once).await;
    let report = terminating.report.as_ref().expect("a pass");
    let first = &report.results[0];
    assert_eq!(first.action, Action::Failed, "{first:?}");
    assert!(
        first
            .error
            .as_deref()
            .is_some_and(|e| e.contains("is being deleted")),
        "{first:?}"
    );
    assert_eq!(terminating.exit_code(), 1);

    common::strip_finalizers(&tc, &ns, "held").await;
    common::poll_until("the namespace is gone", Duration::from_secs(60), || async {
        match namespaces.get_opt(&ns).await {
            Ok(None) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    let again = run(tc.client.clone(), &rel, &once).await;
    assert_eq!(again.exit_code(), 0, "{:?}", again.report);
    let actions: Vec<Action> = again
        .report
        .as_ref()
        .expect("a pass")
        .results
        .iter()
        .map(|r| r.action)
        .collect();
    assert_eq!(actions, [Action::Created, Action::Created]);
}
