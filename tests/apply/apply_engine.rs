//! The apply engine end to end through `kube::Client`: against the embedded in-memory API
//! server by default, or a real cluster when `CVO_TEST_KUBECONFIG` is set (see
//! `tests/common`). Every test uses its own uniquely named namespace / CRD group.

use crate::common;

use std::path::Path;
use std::time::Duration;

use common::{
    TEST_FINALIZER, TestCluster, TestCrd, configmaps, poll_until, strip_finalizers, unique,
};
use cvo::apply::{Action, Strategy};
use cvo::cluster::Cluster;
use cvo::release::{LoadOptions, Release};
use cvo::status::ConditionStatus;
use cvo::sync::{SyncOptions, SyncOutcome, sync};
use kube::api::{Patch, PatchParams};
use serde_json::json;

/// A release directory with these files (name, YAML), loaded.
fn release(files: &[(&str, String)]) -> (tempfile::TempDir, Release) {
    let dir = tempfile::tempdir().expect("tempdir");
    for (name, text) in files {
        std::fs::write(dir.path().join(name), text).expect("write manifest");
    }
    let release = load(dir.path());
    (dir, release)
}

fn load(dir: &Path) -> Release {
    let release = cvo::release::load(dir, &LoadOptions::default()).expect("load release");
    assert!(!release.has_errors(), "{:?}", release.diagnostics);
    release
}

fn metadata(version: &str) -> (&'static str, String) {
    ("release-metadata", common::release_metadata(version))
}

fn namespace_yaml(ns: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {ns}\n  labels: {{{}: apply}}\n",
        common::TEST_LABEL
    )
}

fn fast() -> SyncOptions {
    common::sync_options(Duration::from_millis(20))
}

async fn run(tc: &TestCluster, release: &Release, options: &SyncOptions) -> SyncOutcome {
    // A fresh `Cluster` (discovery cache, no memory) per sync, like a new process.
    sync(&Cluster::new(tc.client.clone()), release, options, |_| {})
        .await
        .expect("sync")
}

fn action(outcome: &SyncOutcome, release: &Release, name: &str) -> (Action, Option<String>) {
    let r = common::report::result(outcome, release, name);
    (r.action, r.error.clone())
}

fn condition<'a>(outcome: &'a SyncOutcome, type_: &str) -> &'a cvo::status::Condition {
    outcome
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .unwrap_or_else(|| panic!("no {type_} condition in {:?}", outcome.conditions))
}

/// Upgradeable is False with ResourceDeletionInProgress and names ConfigMap `ns`/`name`.
fn assert_deletion_in_progress(outcome: &SyncOutcome, ns: &str, name: &str) {
    let up = condition(outcome, "Upgradeable");
    assert_eq!(
        (up.status, up.reason.as_str()),
        (ConditionStatus::False, "ResourceDeletionInProgress")
    );
    assert!(
        up.message.contains(&format!("ConfigMap {ns}/{name}")),
        "{}",
        up.message
    );
}

#[tokio::test]
async fn create_then_second_apply_writes_nothing() {
    let tc = common::cluster().await;
    // A sync reads and writes ClusterVersion `version`, which other tests of this binary own.
    let _turn = common::sync_turn(&tc).await;
    let ns = unique("apply-create");
    let (_dir, rel) = release(&[
        metadata("1.0.0"),
        ("0000_10_a_ns.yaml", namespace_yaml(&ns)),
        (
            "0000_20_a_cm.yaml",
            common::configmap(&ns, "settings", "", &[("level", "info")]),
        ),
    ]);
    tc.track_cluster_object(&common::builtin("", "v1", "Namespace", "namespaces"), &ns);
    let first = run(&tc, &rel, &fast()).await;
    assert_eq!(first.exit_code(), 0, "{:?}", first.report);
    assert_eq!(action(&first, &rel, "settings").0, Action::Created);
    let before = tc
        .dynamic(&configmaps(), Some(&ns))
        .get("settings")
        .await
        .expect("get");
    let rv_before = tc.memory.as_ref().map(|m| m.resource_version());

    let second = run(&tc, &rel, &fast()).await;
    let summary = second.report.as_ref().expect("pass").summary();
    assert_eq!((summary.unchanged, summary.total), (2, 2), "{summary:?}");
    let after = tc
        .dynamic(&configmaps(), Some(&ns))
        .get("settings")
        .await
        .expect("get");
    assert_eq!(
        before.metadata.resource_version,
        after.metadata.resource_version
    );
    if let Some(m) = &tc.memory {
        assert_eq!(
            Some(m.resource_version()),
            rv_before,
            "the second apply wrote something"
        );
    }

    // A change is an update.
    let (_dir2, changed) = release(&[
        metadata("1.0.0"),
        ("0000_10_a_ns.yaml", namespace_yaml(&ns)),
        (
            "0000_20_a_cm.yaml",
            common::configmap(&ns, "settings", "", &[("level", "debug")]),
        ),
    ]);
    let third = run(&tc, &changed, &fast()).await;
    assert_eq!(action(&third, &changed, "settings").0, Action::Updated);
}

#[tokio::test]
async fn user_names_are_dropped_with_a_warning_and_crd_then_cr_in_one_release() {
    let tc = common::cluster().await;
    // A sync reads and writes ClusterVersion `version`, which other tests of this binary own.
    let _turn = common::sync_turn(&tc).await;
    let ns = unique("apply-crd");
    let crd = TestCrd::new("Gadget", true, false);
    let crb = unique("crb");
    let crd_yaml = serde_json::to_string(&crd.manifest()).expect("crd json");
    let cr_yaml = format!(
        "apiVersion: {}/v1\nkind: Gadget\nmetadata:\n  name: g1\n  namespace: {ns}\nspec:\n  size: 1\n",
        crd.group
    );
    let crb_yaml = format!(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: {crb}\nroleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view}}\nsubjects:\n- {{kind: ServiceAccount, name: default, namespace: {ns}}}\nuserNames: [\"system:serviceaccount:{ns}:default\"]\n"
    );
    let (_dir, rel) = release(&[
        metadata("1.0.0"),
        ("0000_10_a_ns.yaml", namespace_yaml(&ns)),
        ("0000_20_a_crd.yaml", crd_yaml),
        ("0000_20_a_gadget.yaml", cr_yaml),
        ("0000_30_a_crb.yaml", crb_yaml),
    ]);
    tc.track_cluster_object(&common::builtin("", "v1", "Namespace", "namespaces"), &ns);
    tc.track_crd(&crd.name);
    let rbac = common::builtin(
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRoleBinding",
        "clusterrolebindings",
    );
    tc.track_cluster_object(&rbac, &crb);
    let out = run(&tc, &rel, &fast()).await;
    assert_eq!(out.exit_code(), 0, "{:?}", out.report);
    assert_eq!(action(&out, &rel, "g1").0, Action::Created);
    assert_eq!(action(&out, &rel, &crb).0, Action::Created);
    assert!(
        out.warnings
            .iter()
            .any(|w| w.contains(&crb) && w.contains("/userNames")),
        "{:?}",
        out.warnings
    );
    let stored = tc.dynamic(&rbac, None).get(&crb).await.expect("crb");
    assert!(stored.data.get("userNames").is_none());
}

#[tokio::test]
async fn missing_namespace_and_invalid_delete_value_fail_only_their_manifest() {
    let tc = common::cluster().await;
    // A sync reads and writes ClusterVersion `version`, which other tests of this binary own.
    let _turn = common::sync_turn(&tc).await;
    let ns = unique("apply-ns");
    let absent_ns = unique("absent");
    let (_dir, rel) = release(&[
        metadata("1.0.0"),
        ("0000_10_a_ns.yaml", namespace_yaml(&ns)),
        (
            "0000_20_a_orphan.yaml",
            common::configmap(&absent_ns, "orphan", "", &[("a", "b")]),
        ),
        (
            "0000_20_b_bad.yaml",
            common::configmap(
                &ns,
                "bad",
                "  annotations:\n    release.openshift.io/delete: \"yes\"\n",
                &[("a", "b")],
            ),
        ),
        (
            "0000_20_c_ok.yaml",
            common::configmap(&ns, "ok", "", &[("a", "b")]),
        ),
    ]);
    tc.track_cluster_object(&common::builtin("", "v1", "Namespace", "namespaces"), &ns);
    let out = run(&tc, &rel, &fast()).await;
    assert_eq!(out.exit_code(), 1);
    let (a, err) = action(&out, &rel, "orphan");
    assert_eq!(a, Action::Failed);
    assert!(err.as_deref().unwrap_or("").contains(&absent_ns), "{err:?}");
    let (a, err) = action(&out, &rel, "bad");
    assert_eq!(a, Action::Failed);
    assert!(err.as_deref().unwrap_or("").contains("\"yes\""), "{err:?}");
    assert!(
        tc.dynamic(&configmaps(), Some(&ns))
            .get_opt("bad")
            .await
            .expect("get")
            .is_none()
    );
    assert_eq!(action(&out, &rel, "ok").0, Action::Created);
    let failing = condition(&out, "Failing");
    assert_eq!(
        (failing.status, failing.reason.as_str()),
        (ConditionStatus::True, "MultipleErrors")
    );
}

/// Creates `name` in `ns` with the test finalizer (held until the test strips it).
async fn held_configmap(tc: &TestCluster, ns: &str, name: &str) {
    let api = tc.dynamic(&configmaps(), Some(ns));
    let obj = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": ns, "finalizers": [TEST_FINALIZER]}});
    api.patch(name, &PatchParams::apply("test"), &Patch::Apply(&obj))
        .await
        .expect("create held");
    tc.hold(&configmaps(), Some(ns), name);
}

fn delete_yaml(ns: &str, name: &str, strategy: Option<&str>) -> String {
    let extra = strategy
        .map(|s| format!("    cvo.io/deletion-strategy: {s}\n"))
        .unwrap_or_default();
    common::configmap(
        ns,
        name,
        &format!("{}{extra}", common::DELETE_ANNOTATION),
        &[("a", "b")],
    )
}

#[tokio::test]
async fn non_blocking_deletion_in_progress_survives_restart_turns_stuck_then_finishes() {
    let tc = common::cluster().await;
    // A sync reads and writes ClusterVersion `version`, which other tests of this binary own.
    let _turn = common::sync_turn(&tc).await;
    let ns = tc.namespace("apply-del").await;
    held_configmap(&tc, &ns, "old").await;
    let (_dir, rel) = release(&[
        metadata("1.0.1"),
        ("0000_50_a_old.yaml", delete_yaml(&ns, "old", None)),
    ]);

    let first = run(&tc, &rel, &fast()).await;
    assert_eq!(action(&first, &rel, "old").0, Action::DeletionInProgress);
    assert_eq!(first.exit_code(), 3);
    assert_deletion_in_progress(&first, &ns, "old");

    // A new process (new client, new discovery cache) reads the deletion back from the
    // cluster; past the stuck threshold it is reported with its finalizers.
    let mut stuck = fast();
    stuck.stuck_after = Duration::ZERO;
    let restarted = run(&tc, &rel, &stuck).await;
    assert_eq!(
        action(&restarted, &rel, "old").0,
        Action::DeletionInProgress
    );
    let up = condition(&restarted, "Upgradeable");
    assert_eq!(up.reason, "ResourceDeletionStuck");
    assert!(
        up.message.contains(&format!(
            "ConfigMap {ns}/old (finalizers: {TEST_FINALIZER})"
        )),
        "{}",
        up.message
    );

    strip_finalizers(&tc, &ns, "old").await;
    common::wait_gone(
        &tc,
        &tc.dynamic(&configmaps(), Some(&ns)),
        "old",
        "old gone",
    )
    .await;
    let done = run(&tc, &rel, &fast()).await;
    assert_eq!(action(&done, &rel, "old").0, Action::AlreadyAbsent);
    assert_eq!(done.exit_code(), 0);
    assert_eq!(
        condition(&done, "Upgradeable").status,
        ConditionStatus::True
    );
}

#[tokio::test]
async fn synchronous_deletion_times_out_naming_finalizers_and_blocks_dependents() {
    let tc = common::cluster().await;
    // A sync reads and writes ClusterVersion `version`, which other tests of this binary own.
    let _turn = common::sync_turn(&tc).await;
    let ns = tc.namespace("apply-sync").await;
    held_configmap(&tc, &ns, "old").await;
    let (_dir, rel) = release(&[
        metadata("1.0.1"),
        (
            "0000_50_a_old.yaml",
            delete_yaml(&ns, "old", Some("synchronous")),
        ),
        (
            "0000_60_a_new.yaml",
            common::configmap(&ns, "new", "", &[("a", "b")]),
        ),
    ]);
    let mut options = fast();
    options.apply.deletion_timeout = Duration::from_millis(300);
    let out = run(&tc, &rel, &options).await;
    let (a, err) = action(&out, &rel, "old");
    assert_eq!(a, Action::Failed);
    assert!(
        err.as_deref().unwrap_or("").contains(TEST_FINALIZER),
        "{err:?}"
    );
    assert_eq!(action(&out, &rel, "new").0, Action::Skipped);
    assert_eq!(out.exit_code(), 1);
}

#[tokio::test]
async fn synchronous_deletion_waits_until_the_finalizer_is_released() {
    let tc = common::cluster().await;
    // A sync reads and writes ClusterVersion `version`, which other tests of this binary own.
    let _turn = common::sync_turn(&tc).await;
    let ns = tc.namespace("apply-sync2").await;
    held_configmap(&tc, &ns, "old").await;
    let (_dir, rel) = release(&[
        metadata("1.0.1"),
        ("0000_50_a_old.yaml", delete_yaml(&ns, "old", None)),
        (
            "0000_60_a_new.yaml",
            common::configmap(&ns, "new", "", &[("a", "b")]),
        ),
    ]);
    let mut options = fast();
    options.apply.strategy = Strategy::Synchronous;
    options.apply.deletion_timeout = tc.deadline();
    let api = tc.dynamic(&configmaps(), Some(&ns));
    let releaser = async {
        poll_until("deletion requested", tc.deadline(), || async {
            match api.get("old").await {
                Ok(o) if o.metadata.deletion_timestamp.is_some() => Ok(()),
                other => Err(format!("{other:?}")),
            }
        })
        .await;
        // The dependent must not have run while the deletion is pending.
        assert!(api.get_opt("new").await.expect("get").is_none());
        strip_finalizers(&tc, &ns, "old").await;
    };
    let (out, ()) = tokio::join!(run(&tc, &rel, &options), releaser);
    assert_eq!(action(&out, &rel, "old").0, Action::Deleted);
    assert_eq!(action(&out, &rel, "new").0, Action::Created);
    assert_eq!(out.exit_code(), 0);
}

#[tokio::test]
async fn job_is_deleted_with_background_propagation() {
    let tc = common::cluster().await;
    // A sync reads and writes ClusterVersion `version`, which other tests of this binary own.
    let _turn = common::sync_turn(&tc).await;
    let ns = tc.namespace("apply-job").await;
    let jobs = common::builtin("batch", "v1", "Job", "jobs");
    let job = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "once", "namespace": ns},
        "spec": {"template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9"}]}}}});
    let created = tc
        .dynamic(&jobs, Some(&ns))
        .patch("once", &PatchParams::apply("test"), &Patch::Apply(&job))
        .await
        .expect("job");
    // A dependent of the Job: Background deletes it, the Job default (orphan) would keep it.
    let dependent = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "dependent", "namespace": ns,
        "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "once",
            "uid": created.metadata.uid, "controller": true, "blockOwnerDeletion": true}]}});
    tc.dynamic(&configmaps(), Some(&ns))
        .patch(
            "dependent",
            &PatchParams::apply("test"),
            &Patch::Apply(&dependent),
        )
        .await
        .expect("dependent");
    let del = format!(
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: once\n  namespace: {ns}\n  annotations:\n    release.openshift.io/delete: \"true\"\n"
    );
    let (_dir, rel) = release(&[metadata("1.0.1"), ("0000_50_a_job.yaml", del)]);
    let out = run(&tc, &rel, &fast()).await;
    assert!(
        matches!(
            action(&out, &rel, "once").0,
            Action::Deleted | Action::DeletionInProgress
        ),
        "{:?}",
        out.report
    );
    common::wait_gone(
        &tc,
        &tc.dynamic(&configmaps(), Some(&ns)),
        "dependent",
        "dependent of the Job",
    )
    .await;
}

#[tokio::test]
async fn plan_writes_nothing_and_plans_a_crd_with_its_resources() {
    let tc = common::cluster().await;
    // A sync reads and writes ClusterVersion `version`, which other tests of this binary own.
    let _turn = common::sync_turn(&tc).await;
    let ns = unique("apply-plan");
    let crd = TestCrd::new("Doohickey", true, false);
    let cr_yaml = format!(
        "apiVersion: {}/v1\nkind: Doohickey\nmetadata:\n  name: d1\n  namespace: {ns}\nspec:\n  size: 1\n",
        crd.group
    );
    let (_dir, rel) = release(&[
        metadata("1.0.0"),
        ("0000_10_a_ns.yaml", namespace_yaml(&ns)),
        (
            "0000_20_a_crd.yaml",
            serde_json::to_string(&crd.manifest()).expect("crd json"),
        ),
        ("0000_20_a_cr.yaml", cr_yaml),
        (
            "0000_30_a_cm.yaml",
            common::configmap(&ns, "settings", "", &[("level", "info")]),
        ),
    ]);
    let mut options = fast();
    options.apply.dry_run = true;
    let rv = tc.memory.as_ref().map(|m| m.resource_version());
    let out = run(&tc, &rel, &options).await;
    let summary = out.report.as_ref().expect("pass").summary();
    assert_eq!(
        (summary.created, summary.failed),
        (4, 0),
        "{:?}",
        out.report
    );
    assert!(
        out.warnings.iter().any(|w| w.contains("not served yet")),
        "{:?}",
        out.warnings
    );
    assert_eq!(out.cluster_version, None);
    if let Some(m) = &tc.memory {
        assert_eq!(Some(m.resource_version()), rv, "plan wrote something");
    }
    let namespaces = common::builtin("", "v1", "Namespace", "namespaces");
    assert!(
        tc.dynamic(&namespaces, None)
            .get_opt(&ns)
            .await
            .expect("get")
            .is_none()
    );
}

#[tokio::test]
async fn a_deletion_behind_a_failure_still_counts_for_upgradeable() {
    let tc = common::cluster().await;
    // A sync reads and writes ClusterVersion `version`, which other tests of this binary own.
    let _turn = common::sync_turn(&tc).await;
    let ns = tc.namespace("apply-blocked").await;
    held_configmap(&tc, &ns, "old").await;
    let (_dir, rel) = release(&[
        metadata("1.0.1"),
        ("0000_50_a_old.yaml", delete_yaml(&ns, "old", None)),
    ]);
    assert_eq!(run(&tc, &rel, &fast()).await.exit_code(), 3);

    // Next pass: a failure at run level 10 keeps the delete manifest from running.
    let bad = common::configmap(
        &ns,
        "bad",
        "  annotations:\n    release.openshift.io/delete: \"no\"\n",
        &[("a", "b")],
    );
    let (_dir2, blocked) = release(&[
        metadata("1.0.1"),
        ("0000_10_a_bad.yaml", bad),
        ("0000_50_a_old.yaml", delete_yaml(&ns, "old", None)),
    ]);
    let out = run(&tc, &blocked, &fast()).await;
    assert_eq!(action(&out, &blocked, "old").0, Action::Skipped);
    assert_deletion_in_progress(&out, &ns, "old");
    strip_finalizers(&tc, &ns, "old").await;
}

/// A pass lists ahead of its tasks (`Applier::prefetch`): a create-only manifest whose object
/// someone created after that listing leaves it as it is (asked again, fresh), never writes
/// over it. On both servers.
#[tokio::test]
async fn create_only_never_writes_over_an_object_created_after_the_pass_listed() {
    use cvo::apply::{Action, Applier, Options};
    let tc = common::cluster().await;
    let ns = tc.namespace("create-only-fresh").await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("0000_20_a_cm.yaml"),
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: seeded\n  namespace: {ns}\n  annotations:\n    release.openshift.io/create-only: \"true\"\ndata:\n  from: release\n"
        ),
    )
    .unwrap();
    let release = cvo::release::load(dir.path(), &Default::default()).expect("load");
    let applier = Applier::new(
        cvo::cluster::Cluster::new(tc.client.clone()),
        &release,
        Options::default(),
    );
    applier.prefetch(4).await;
    let cms: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
        kube::Api::namespaced(tc.client.clone(), &ns);
    let theirs = k8s_openapi::api::core::v1::ConfigMap {
        metadata: kube::api::ObjectMeta {
            name: Some("seeded".into()),
            ..Default::default()
        },
        data: Some([("from".to_owned(), "someone else".to_owned())].into()),
        ..Default::default()
    };
    cms.create(&Default::default(), &theirs)
        .await
        .expect("create");
    let result = applier.run(0).await;
    assert_eq!(result.action, Action::Unchanged, "{result:?}");
    let now = cms.get("seeded").await.expect("get");
    assert_eq!(now.data.unwrap()["from"], "someone else");
}
