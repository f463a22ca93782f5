//! Integration tests of the operand-cleanup reconciler against an API server: the embedded
//! in-memory one by default, a real cluster with `CVO_TEST_KUBECONFIG` (see `tests/common`).
//!
//! The first seven are the test plan of OLM's "olm-deletes-operands" enhancement; the rest
//! cover the safety rules, abort, pagination, the status bound and selector-based groups.
//! Every test uses its own CRD group and namespaces, and runs its own reconciler scoped to its
//! operator namespace, so tests never see each other's objects.

use crate::common;
use crate::model;

use std::time::Duration;

use common::{TestCluster, TestCrd, poll_until};
use cvo::olm::plan::FINALIZER;
use cvo::olm::types::{
    CleanupSpec, ClusterServiceVersion, CrdDescription, CsvSpec, OperatorGroup, OperatorGroupSpec,
};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

// ---------------------------------------------------------------------------------------------
// Fixture helpers
// ---------------------------------------------------------------------------------------------

/// A reconciler running in the background; dropping it stops it gracefully.
struct Running {
    _stop: tokio::sync::oneshot::Sender<()>,
}

fn start(tc: &TestCluster, op_ns: &str, page_size: u32) -> Running {
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let config = cvo::olm::Config {
        namespace: Some(op_ns.to_string()),
        page_size,
        min_backoff: Duration::from_millis(50),
        max_backoff: Duration::from_millis(400),
        blocked_requeue: Duration::from_millis(300),
        ..cvo::olm::Config::default()
    };
    let client = tc.client.clone();
    tokio::spawn(async move {
        cvo::olm::run_with_config(client, config, async move {
            let _ = rx.await;
        })
        .await
        .expect("reconciler");
    });
    Running { _stop: tx }
}

struct Env {
    tc: TestCluster,
    crd: TestCrd,
    op_ns: String,
}

async fn env(crd_namespaced: bool) -> Env {
    let tc = common::cluster().await;
    common::ensure_olm_crds(&tc).await;
    let crd = TestCrd::new("Widget", crd_namespaced, false);
    crd.install(&tc).await;
    let op_ns = tc.namespace("olm-op").await;
    Env { tc, crd, op_ns }
}

impl Env {
    fn csvs(&self) -> Api<ClusterServiceVersion> {
        Api::namespaced(self.tc.client.clone(), &self.op_ns)
    }

    fn crs(&self, ns: Option<&str>) -> Api<DynamicObject> {
        self.tc.dynamic(&self.crd.resource(), ns)
    }

    async fn operator_group(&self, name: &str, spec: OperatorGroupSpec) {
        let og = OperatorGroup::new(&self.op_ns, name, spec);
        Api::<OperatorGroup>::namespaced(self.tc.client.clone(), &self.op_ns)
            .create(&PostParams::default(), &og)
            .await
            .unwrap_or_else(|e| panic!("create OperatorGroup {name}: {e}"));
    }

    async fn targets(&self, namespaces: &[&str]) {
        self.operator_group(
            "og",
            OperatorGroupSpec {
                target_namespaces: Some(namespaces.iter().map(|s| s.to_string()).collect()),
                ..Default::default()
            },
        )
        .await;
    }

    async fn all_namespaces(&self) {
        self.operator_group("og", OperatorGroupSpec::default())
            .await;
    }

    /// Create a CSV owning (and requiring) the given CRDs, with the finalizer, `cleanup`, and
    /// `status.phase`; returns its name.
    #[allow(clippy::too_many_arguments)]
    async fn csv_in(
        &self,
        ns: &str,
        name: &str,
        owned: &[&TestCrd],
        required: &[&TestCrd],
        cleanup: Option<bool>,
        phase: &str,
        finalizer: bool,
        labels: serde_json::Value,
    ) -> String {
        let mut spec = CsvSpec::default();
        for c in owned {
            spec.customresourcedefinitions
                .owned
                .push(CrdDescription::new(&c.name, "v1", &c.kind));
        }
        for c in required {
            spec.customresourcedefinitions
                .required
                .push(CrdDescription::new(&c.name, "v1", &c.kind));
        }
        spec.cleanup = cleanup.map(|enabled| CleanupSpec { enabled });
        spec.extra.insert("displayName".into(), json!(name));
        spec.extra.insert(
            "install".into(),
            json!({"strategy": "deployment", "spec": {"deployments": []}}),
        );
        let mut csv = ClusterServiceVersion::new(ns, name, spec);
        if finalizer {
            csv.metadata.finalizers = Some(vec![FINALIZER.to_string()]);
        }
        csv.metadata.labels = serde_json::from_value(labels).ok();
        let api: Api<ClusterServiceVersion> = Api::namespaced(self.tc.client.clone(), ns);
        api.create(&PostParams::default(), &csv)
            .await
            .unwrap_or_else(|e| panic!("create CSV {name}: {e}"));
        api.patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": phase}})),
        )
        .await
        .unwrap_or_else(|e| panic!("CSV {name} status: {e}"));
        name.to_string()
    }

    /// The usual CSV: owns `self.crd`, has the finalizer, in the operator namespace.
    async fn csv(&self, cleanup: Option<bool>, phase: &str) -> String {
        self.csv_in(
            &self.op_ns,
            "widget-operator.v1",
            &[&self.crd],
            &[],
            cleanup,
            phase,
            true,
            json!(null),
        )
        .await
    }

    async fn cr(&self, ns: Option<&str>, name: &str, hold: bool) {
        let rest = if hold {
            json!({"metadata": {"finalizers": [common::TEST_FINALIZER]}})
        } else {
            json!({})
        };
        self.crs(ns)
            .create(&PostParams::default(), &self.crd.object(name, ns, rest))
            .await
            .unwrap_or_else(|e| panic!("create CR {name}: {e}"));
        if hold {
            self.tc.hold(&self.crd.resource(), ns, name);
        }
    }

    async fn release(&self, ns: Option<&str>, name: &str) {
        self.crs(ns)
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"finalizers": null}})),
            )
            .await
            .unwrap_or_else(|e| panic!("release CR {name}: {e}"));
    }

    async fn names(&self, ns: Option<&str>) -> Vec<String> {
        let mut v: Vec<String> = self
            .crs(ns)
            .list(&ListParams::default())
            .await
            .expect("list CRs")
            .items
            .into_iter()
            .map(|o| o.metadata.name.unwrap_or_default())
            .collect();
        v.sort();
        v
    }

    async fn delete_csv(&self, name: &str) {
        self.csvs()
            .delete(name, &DeleteParams::background())
            .await
            .unwrap_or_else(|e| panic!("delete CSV {name}: {e}"));
    }

    async fn wait_csv_gone(&self, name: &str) {
        let api = self.csvs();
        poll_until(&format!("CSV {name} gone"), self.tc.deadline(), || async {
            match api.get_opt(name).await {
                Ok(None) => Ok(()),
                Ok(Some(c)) => Err(format!(
                    "finalizers={:?} status={:?}",
                    c.metadata.finalizers, c.status
                )),
                Err(e) => Err(e.to_string()),
            }
        })
        .await
    }

    /// Wait until the CSV's latest condition has `reason`; returns the CSV.
    /// Starts the reconciler, deletes CSV `name` and waits until it is gone. Returns the running
    /// reconciler.
    async fn clean_up(&self, name: &str) -> Running {
        let r = start(&self.tc, &self.op_ns, 500);
        self.delete_csv(name).await;
        self.wait_csv_gone(name).await;
        r
    }

    async fn wait_condition(&self, name: &str, reason: &str) -> ClusterServiceVersion {
        let api = self.csvs();
        poll_until(
            &format!("CSV {name} condition {reason}"),
            self.tc.deadline(),
            || async {
                let c = api.get(name).await.map_err(|e| e.to_string())?;
                let last = c.status.as_ref().and_then(|s| s.conditions.last().cloned());
                if last.as_ref().is_some_and(|l| l.reason == reason) {
                    Ok(c)
                } else {
                    Err(format!("last condition {last:?}"))
                }
            },
        )
        .await
    }

    async fn set_cleanup(&self, name: &str, enabled: bool) {
        self.csvs()
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"cleanup": {"enabled": enabled}}})),
            )
            .await
            .unwrap_or_else(|e| panic!("set cleanup on {name}: {e}"));
    }

    async fn label_namespace(&self, ns: &str, key: &str, value: &str) {
        Api::<Namespace>::all(self.tc.client.clone())
            .patch(
                ns,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"labels": {key: value}}})),
            )
            .await
            .unwrap_or_else(|e| panic!("label namespace {ns}: {e}"));
    }
}

/// How long the "nothing happens" assertions watch: several reconciler passes at the tests'
/// short requeue delays.
const SETTLE: Duration = Duration::from_millis(800);

/// For the "nothing happens" assertions, where no event marks the right outcome: `check` must
/// hold on every poll during [`SETTLE`]; the test fails at the first poll where it does not.
async fn consistently<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), String>>,
{
    let start = std::time::Instant::now();
    loop {
        if let Err(state) = check().await {
            panic!("{what}: after {:?}: {state}", start.elapsed());
        }
        if start.elapsed() >= SETTLE {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await; // poll interval within SETTLE
    }
}

/// `Ok` when `actual == expected`, else both, for [`consistently`].
fn same<T: PartialEq + std::fmt::Debug>(actual: T, expected: T) -> Result<(), String> {
    if actual == expected {
        Ok(())
    } else {
        Err(format!("{actual:?}, expected {expected:?}"))
    }
}

// ---------------------------------------------------------------------------------------------
// The enhancement's test plan
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn cleanup_unspecified_or_false_keeps_all_crs() {
    for cleanup in [None, Some(false)] {
        let e = env(true).await;
        let a = e.tc.namespace("olm-a").await;
        e.targets(&[&a]).await;
        e.cr(Some(&a), "w1", false).await;
        let csv = e.csv(cleanup, "Succeeded").await;
        let _r = e.clean_up(&csv).await;
        assert_eq!(e.names(Some(&a)).await, vec!["w1"], "cleanup {cleanup:?}");
    }
}

#[tokio::test]
async fn cleanup_true_removes_all_crs() {
    let e = env(true).await;
    let a = e.tc.namespace("olm-a").await;
    e.targets(&[&a]).await;
    for i in 0..3 {
        e.cr(Some(&a), &format!("w{i}"), false).await;
    }
    let csv = e.csv(Some(true), "Succeeded").await;
    let _r = e.clean_up(&csv).await;
    assert!(e.names(Some(&a)).await.is_empty());
    // Events (events.k8s.io/v1, which both servers serve).
    let events: Api<k8s_openapi::api::events::v1::Event> =
        Api::namespaced(e.tc.client.clone(), &e.op_ns);
    let list = events
        .list(&ListParams::default())
        .await
        .expect("list events.k8s.io/v1 Events");
    let reasons: Vec<String> = list
        .items
        .iter()
        .filter(|ev| ev.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(&csv))
        .filter_map(|ev| ev.reason.clone())
        .collect();
    for want in ["CleanupStarted", "CleanupFinished"] {
        assert!(
            reasons.iter().any(|r| r == want),
            "{want} missing: {reasons:?}"
        );
    }
}

#[tokio::test]
async fn pending_crs_are_listed_in_status_while_a_finalizer_is_held() {
    let e = env(true).await;
    let a = e.tc.namespace("olm-a").await;
    e.targets(&[&a]).await;
    e.cr(Some(&a), "held", true).await;
    e.cr(Some(&a), "free", false).await;
    let csv = e.csv(Some(true), "Succeeded").await;
    let _r = start(&e.tc, &e.op_ns, 500);
    e.delete_csv(&csv).await;
    let api = e.csvs();
    let seen = poll_until(
        "pendingDeletion lists only the held CR",
        e.tc.deadline(),
        || async {
            let c = api.get(&csv).await.map_err(|e| e.to_string())?;
            let pending = c
                .status
                .as_ref()
                .and_then(|s| s.cleanup.as_ref())
                .map(|c| c.pending_deletion.clone())
                .unwrap_or_default();
            let names: Vec<String> = pending
                .iter()
                .flat_map(|l| l.instances.iter().map(|i| i.name.clone()))
                .collect();
            if names == vec!["held".to_string()] {
                Ok(c)
            } else {
                Err(format!("pending {pending:?}"))
            }
        },
    )
    .await;
    let status = seen.status.unwrap();
    let list = &status.cleanup.unwrap().pending_deletion[0];
    assert_eq!(
        (list.group.as_str(), list.kind.as_str()),
        (e.crd.group.as_str(), "Widget")
    );
    assert_eq!(list.instances[0].namespace.as_deref(), Some(a.as_str()));
    let last = status.conditions.last().unwrap();
    assert_eq!(
        (
            last.phase.as_str(),
            last.reason.as_str(),
            last.message.as_str()
        ),
        (
            "Deleting",
            "WaitingOnCleanup",
            "waiting for operator to finish cleanup for 1 CRs"
        )
    );
    assert!(
        seen.metadata
            .finalizers
            .unwrap()
            .contains(&FINALIZER.to_string())
    );
    e.release(Some(&a), "held").await;
    e.wait_csv_gone(&csv).await;
    assert!(e.names(Some(&a)).await.is_empty());
}

#[tokio::test]
async fn csv_replaced_by_an_upgrade_does_not_clean_up() {
    let e = env(true).await;
    let a = e.tc.namespace("olm-a").await;
    e.targets(&[&a]).await;
    e.cr(Some(&a), "w1", false).await;
    let csv = e.csv(Some(true), "Replacing").await;
    let _r = e.clean_up(&csv).await;
    assert_eq!(e.names(Some(&a)).await, vec!["w1"]);
}

/// A cluster-scoped `Gadget` CRD in the test's group, installed.
async fn gadget_crd(e: &Env) -> TestCrd {
    let gadget = TestCrd::in_group(&e.crd.group, "Gadget", false, false);
    gadget.install(&e.tc).await;
    gadget
}

/// Creates the cluster-scoped Gadget `g` and a Succeeded, cleanup-enabled CSV owning the widget
/// and gadget CRDs, starts the reconciler, deletes the CSV and waits until it is gone. Returns
/// the running reconciler.
async fn clean_up_with_gadget(e: &Env, gadget: &TestCrd) -> Running {
    e.tc.dynamic(&gadget.resource(), None)
        .create(&PostParams::default(), &gadget.object("g", None, json!({})))
        .await
        .expect("cluster-scoped CR");
    let csv = e
        .csv_in(
            &e.op_ns,
            "widget-operator.v1",
            &[&e.crd, gadget],
            &[],
            Some(true),
            "Succeeded",
            true,
            json!(null),
        )
        .await;
    e.clean_up(&csv).await
}

/// The cluster-scoped Gadgets.
async fn gadgets(e: &Env, gadget: &TestCrd) -> kube::core::ObjectList<DynamicObject> {
    e.tc.dynamic(&gadget.resource(), None)
        .list(&ListParams::default())
        .await
        .unwrap()
}

#[tokio::test]
async fn all_namespaces_operator_removes_crs_in_every_namespace() {
    let e = env(true).await;
    let cluster_crd = gadget_crd(&e).await;
    let a = e.tc.namespace("olm-a").await;
    let b = e.tc.namespace("olm-b").await;
    e.all_namespaces().await;
    for ns in [&a, &b, &e.op_ns] {
        e.cr(Some(ns), "w", false).await;
    }
    let _r = clean_up_with_gadget(&e, &cluster_crd).await;
    assert!(e.names(None).await.is_empty());
    let gadgets = gadgets(&e, &cluster_crd).await;
    assert!(gadgets.items.is_empty(), "cluster-scoped CRs remain");
}

#[tokio::test]
async fn single_namespace_removes_only_its_targets_crs() {
    let e = env(true).await;
    let cluster_crd = gadget_crd(&e).await;
    let a = e.tc.namespace("olm-a").await;
    let b = e.tc.namespace("olm-b").await;
    e.targets(&[&a]).await;
    e.cr(Some(&a), "w", false).await;
    e.cr(Some(&b), "w", false).await;
    let _r = clean_up_with_gadget(&e, &cluster_crd).await;
    assert!(e.names(Some(&a)).await.is_empty());
    assert_eq!(e.names(Some(&b)).await, vec!["w"]);
    let gadgets = gadgets(&e, &cluster_crd).await;
    assert_eq!(gadgets.items.len(), 1, "cluster-scoped CRs are kept");
}

#[tokio::test]
async fn multi_namespace_removes_only_the_targeted_namespaces_crs() {
    let e = env(true).await;
    let a = e.tc.namespace("olm-a").await;
    let b = e.tc.namespace("olm-b").await;
    let c = e.tc.namespace("olm-c").await;
    e.targets(&[&a, &b]).await;
    for ns in [&a, &b, &c] {
        e.cr(Some(ns), "w", false).await;
    }
    let csv = e.csv(Some(true), "Succeeded").await;
    let _r = e.clean_up(&csv).await;
    assert!(e.names(Some(&a)).await.is_empty());
    assert!(e.names(Some(&b)).await.is_empty());
    assert_eq!(e.names(Some(&c)).await, vec!["w"]);
}

// ---------------------------------------------------------------------------------------------
// Safety rules and the rest
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn copied_csvs_are_ignored() {
    let e = env(true).await;
    let a = e.tc.namespace("olm-a").await;
    e.targets(&[&a]).await;
    e.cr(Some(&a), "w", false).await;
    // The copy (in the operator namespace here, so the scoped reconciler sees it) is released
    // without cleanup, and does not count as another owner for the real CSV.
    let copy = e
        .csv_in(
            &e.op_ns,
            "widget-operator.copy",
            &[&e.crd],
            &[],
            Some(true),
            "Succeeded",
            true,
            json!({"olm.copiedFrom": "elsewhere"}),
        )
        .await;
    let _r = start(&e.tc, &e.op_ns, 500);
    e.delete_csv(&copy).await;
    e.wait_csv_gone(&copy).await;
    assert_eq!(e.names(Some(&a)).await, vec!["w"]);
    // A non-deleted copy does not block the real CSV.
    e.csv_in(
        &e.op_ns,
        "widget-operator.copy2",
        &[&e.crd],
        &[],
        None,
        "Succeeded",
        false,
        json!({"olm.copiedFrom": "elsewhere"}),
    )
    .await;
    let csv = e.csv(Some(true), "Succeeded").await;
    e.delete_csv(&csv).await;
    e.wait_csv_gone(&csv).await;
    assert!(e.names(Some(&a)).await.is_empty());
}

async fn blocked_then_unblocked(e: &Env, csv: &str, a: &str, expect_in_message: &str) {
    let _r = start(&e.tc, &e.op_ns, 500);
    e.delete_csv(csv).await;
    let c = e.wait_condition(csv, "CleanupBlocked").await;
    let msg = c
        .status
        .clone()
        .unwrap()
        .conditions
        .last()
        .unwrap()
        .message
        .clone();
    assert!(msg.contains(expect_in_message), "{msg}");
    assert!(
        c.metadata
            .finalizers
            .unwrap()
            .contains(&FINALIZER.to_string())
    );
    consistently("nothing deleted while blocked", || async {
        same(e.names(Some(a)).await, vec!["w".to_string()])
    })
    .await;
    // The admin unblocks by disabling cleanup: released, nothing deleted.
    e.set_cleanup(csv, false).await;
    e.wait_csv_gone(csv).await;
    assert_eq!(e.names(Some(a)).await, vec!["w"]);
}

#[tokio::test]
async fn another_csv_owning_the_crd_blocks() {
    let e = env(true).await;
    let a = e.tc.namespace("olm-a").await;
    e.targets(&[&a]).await;
    e.cr(Some(&a), "w", false).await;
    let other_ns = e.tc.namespace("olm-other").await;
    e.csv_in(
        &other_ns,
        "other.v1",
        &[&e.crd],
        &[],
        None,
        "Succeeded",
        false,
        json!(null),
    )
    .await;
    let csv = e.csv(Some(true), "Succeeded").await;
    let expect = format!("{other_ns}/other.v1 owns CRD {}", e.crd.name);
    blocked_then_unblocked(&e, &csv, &a, &expect).await;
}

#[tokio::test]
async fn another_csv_requiring_the_crd_blocks() {
    let e = env(true).await;
    let a = e.tc.namespace("olm-a").await;
    e.targets(&[&a]).await;
    e.cr(Some(&a), "w", false).await;
    let other_ns = e.tc.namespace("olm-other").await;
    e.csv_in(
        &other_ns,
        "user.v1",
        &[],
        &[&e.crd],
        None,
        "Succeeded",
        false,
        json!(null),
    )
    .await;
    let csv = e.csv(Some(true), "Succeeded").await;
    let expect = format!("{other_ns}/user.v1 requires CRD {}", e.crd.name);
    blocked_then_unblocked(&e, &csv, &a, &expect).await;
}

#[tokio::test]
async fn zero_operator_groups_block() {
    let e = env(true).await;
    let a = e.tc.namespace("olm-a").await;
    e.cr(Some(&a), "w", false).await;
    let csv = e.csv(Some(true), "Succeeded").await;
    blocked_then_unblocked(&e, &csv, &a, "no OperatorGroup").await;
}

#[tokio::test]
async fn two_operator_groups_block() {
    let e = env(true).await;
    let a = e.tc.namespace("olm-a").await;
    e.targets(&[&a]).await;
    e.operator_group("og2", OperatorGroupSpec::default()).await;
    e.cr(Some(&a), "w", false).await;
    let csv = e.csv(Some(true), "Succeeded").await;
    blocked_then_unblocked(&e, &csv, &a, "2 OperatorGroups").await;
}

#[tokio::test]
async fn abort_mid_cleanup_deletes_nothing_more() {
    let e = env(true).await;
    let a = e.tc.namespace("olm-a").await;
    e.targets(&[&a]).await;
    e.cr(Some(&a), "held", true).await;
    let csv = e.csv(Some(true), "Succeeded").await;
    let _r = start(&e.tc, &e.op_ns, 500);
    e.delete_csv(&csv).await;
    e.wait_condition(&csv, "WaitingOnCleanup").await;
    // Abort: the finalizer goes, and a CR created afterwards survives.
    e.set_cleanup(&csv, false).await;
    e.wait_csv_gone(&csv).await;
    e.cr(Some(&a), "after", false).await;
    consistently("a CR created after the abort survives", || async {
        let names = e.names(Some(&a)).await;
        if names.contains(&"after".to_string()) {
            Ok(())
        } else {
            Err(format!("{names:?}"))
        }
    })
    .await;
    e.release(Some(&a), "held").await;
}

#[tokio::test]
async fn more_crs_than_one_list_page_are_all_removed() {
    let e = env(true).await;
    let a = e.tc.namespace("olm-a").await;
    e.targets(&[&a]).await;
    for i in 0..23 {
        e.cr(Some(&a), &format!("w{i:02}"), true).await;
    }
    let csv = e.csv(Some(true), "Succeeded").await;
    // Pages of 5, and every CR held by a finalizer: a reconciler that ignored `continue` would
    // only ever see the first page (already deleting), report 5 CRs and never delete the rest.
    let _r = start(&e.tc, &e.op_ns, 5);
    e.delete_csv(&csv).await;
    let c = e.wait_condition(&csv, "WaitingOnCleanup").await;
    let crs = e.crs(Some(&a));
    poll_until(
        "all 23 CRs deleting and counted",
        e.tc.deadline(),
        || async {
            let c = e.csvs().get(&csv).await.map_err(|e| e.to_string())?;
            let msg = c.status.unwrap().conditions.last().unwrap().message.clone();
            let list = crs
                .list(&ListParams::default())
                .await
                .map_err(|e| e.to_string())?;
            let deleting = list
                .items
                .iter()
                .filter(|o| o.metadata.deletion_timestamp.is_some())
                .count();
            if deleting == 23 && msg == "waiting for operator to finish cleanup for 23 CRs" {
                Ok(())
            } else {
                Err(format!("{deleting} deleting; {msg}"))
            }
        },
    )
    .await;
    assert!(
        c.metadata
            .finalizers
            .unwrap()
            .contains(&FINALIZER.to_string())
    );
    for i in 0..23 {
        e.release(Some(&a), &format!("w{i:02}")).await;
    }
    e.wait_csv_gone(&csv).await;
    assert!(e.names(Some(&a)).await.is_empty());
}

#[tokio::test]
async fn pending_deletion_lists_at_most_100_instances() {
    let e = env(true).await;
    let a = e.tc.namespace("olm-a").await;
    e.targets(&[&a]).await;
    for i in 0..120 {
        e.cr(Some(&a), &format!("w{i:03}"), true).await;
    }
    let csv = e.csv(Some(true), "Succeeded").await;
    let _r = start(&e.tc, &e.op_ns, 50);
    e.delete_csv(&csv).await;
    let api = e.csvs();
    let c = poll_until("bounded pendingDeletion", e.tc.deadline(), || async {
        let c = api.get(&csv).await.map_err(|e| e.to_string())?;
        let msg = c
            .status
            .as_ref()
            .and_then(|s| s.conditions.last())
            .map(|l| l.message.clone())
            .unwrap_or_default();
        if msg.contains("120 CRs") {
            Ok(c)
        } else {
            Err(msg)
        }
    })
    .await;
    let status = c.status.unwrap();
    let listed: usize = status
        .cleanup
        .unwrap()
        .pending_deletion
        .iter()
        .map(|l| l.instances.len())
        .sum();
    assert_eq!(listed, 100);
    assert_eq!(
        status.conditions.last().unwrap().message,
        "waiting for operator to finish cleanup for 120 CRs (20 not listed in status.cleanup.pendingDeletion)"
    );
    for i in 0..120 {
        e.release(Some(&a), &format!("w{i:03}")).await;
    }
    e.wait_csv_gone(&csv).await;
}

#[tokio::test]
async fn selector_based_operator_group() {
    let e = env(true).await;
    let a = e.tc.namespace("olm-a").await;
    let b = e.tc.namespace("olm-b").await;
    let key = format!("{}/pick", e.crd.group);
    e.label_namespace(&a, &key, "yes").await;
    e.label_namespace(&b, &key, "no").await;
    e.operator_group(
        "og",
        OperatorGroupSpec {
            selector: Some(LabelSelector {
                match_labels: Some([(key.clone(), "yes".to_string())].into()),
                ..Default::default()
            }),
            ..Default::default()
        },
    )
    .await;
    e.cr(Some(&a), "w", false).await;
    e.cr(Some(&b), "w", false).await;
    let csv = e.csv(Some(true), "Succeeded").await;
    let _r = e.clean_up(&csv).await;
    assert!(e.names(Some(&a)).await.is_empty());
    assert_eq!(e.names(Some(&b)).await, vec!["w"]);
}

#[tokio::test]
async fn csv_without_the_finalizer_is_never_touched() {
    let e = env(true).await;
    let a = e.tc.namespace("olm-a").await;
    e.targets(&[&a]).await;
    e.cr(Some(&a), "w", false).await;
    let csv = e
        .csv_in(
            &e.op_ns,
            "widget-operator.v1",
            &[&e.crd],
            &[],
            Some(true),
            "Succeeded",
            false,
            json!(null),
        )
        .await;
    let _r = start(&e.tc, &e.op_ns, 500);
    consistently("never adds the finalizer", || async {
        let c = e.csvs().get(&csv).await.map_err(|e| e.to_string())?;
        same(c.metadata.finalizers.unwrap_or_default(), vec![])
    })
    .await;
    e.delete_csv(&csv).await;
    e.wait_csv_gone(&csv).await;
    consistently("no CR deleted", || async {
        same(e.names(Some(&a)).await, vec!["w".to_string()])
    })
    .await;
}

#[tokio::test]
async fn run_fails_fast_without_the_csv_type() {
    // The CSV type is cluster-wide: on a shared real cluster the other tests (or OLM itself)
    // install it, and a test must not delete it from under them. An API server without it is
    // the embedded one, in both passes.
    let tc = common::memory_cluster().await;
    let err = cvo::olm::run(tc.client.clone(), None, std::future::pending())
        .await
        .expect_err("no CSV CRD");
    assert!(matches!(err, cvo::olm::Error::NotInstalled), "{err}");
}

// ---------------------------------------------------------------------------------------------
// Random worlds replayed on the API server
// ---------------------------------------------------------------------------------------------

type Outcome = (
    std::collections::BTreeSet<(String, String, bool)>,
    std::collections::BTreeSet<(String, Option<String>, String)>,
);

/// Existing CSVs (namespace, name, still has our finalizer) and CRs (CRD, namespace, name).
fn model_outcome(w: &model::World) -> Outcome {
    let csvs = w
        .csvs
        .iter()
        .map(|c| {
            (
                c.metadata.namespace.clone().unwrap(),
                c.metadata.name.clone().unwrap(),
                model::has_finalizer(c),
            )
        })
        .collect();
    let crs = w
        .crs
        .iter()
        .map(|c| (c.crd.clone(), c.namespace.clone(), c.name.clone()))
        .collect();
    (csvs, crs)
}

async fn live_outcome(tc: &TestCluster, w: &model::World, crds: &[TestCrd]) -> Outcome {
    let namespaces: std::collections::BTreeSet<&str> =
        w.namespaces.iter().map(|n| n.name.as_str()).collect();
    let csvs = Api::<ClusterServiceVersion>::all(tc.client.clone())
        .list(&ListParams::default())
        .await
        .expect("list CSVs")
        .items
        .into_iter()
        .filter(|c| namespaces.contains(c.metadata.namespace.as_deref().unwrap_or("")))
        .map(|c| {
            (
                c.metadata.namespace.clone().unwrap(),
                c.metadata.name.clone().unwrap(),
                model::has_finalizer(&c),
            )
        })
        .collect();
    let mut crs = std::collections::BTreeSet::new();
    for crd in crds {
        for o in tc
            .dynamic(&crd.resource(), None)
            .list(&ListParams::default())
            .await
            .expect("list CRs")
            .items
        {
            crs.insert((
                crd.name.clone(),
                o.metadata.namespace.clone(),
                o.metadata.name.clone().unwrap(),
            ));
        }
    }
    (csvs, crs)
}

/// Create the world's objects, CSVs last, then delete the CSVs the model marks as deleted.
async fn materialize(tc: &TestCluster, w: &model::World) -> Vec<TestCrd> {
    for ns in &w.namespaces {
        let mut labels = ns.labels.clone();
        labels.insert(common::TEST_LABEL.to_string(), "olm".to_string());
        let obj: Namespace =
            serde_json::from_value(json!({"metadata": {"name": ns.name, "labels": labels}}))
                .unwrap();
        Api::<Namespace>::all(tc.client.clone())
            .create(&PostParams::default(), &obj)
            .await
            .unwrap_or_else(|e| panic!("namespace {}: {e}", ns.name));
        tc.track_namespace(&ns.name);
    }
    let mut crds = Vec::new();
    for info in &w.crds {
        let crd = TestCrd::in_group(&info.group, &info.kind, !info.cluster_scoped, false);
        assert_eq!(crd.name, info.name);
        crd.install(tc).await;
        crds.push(crd);
    }
    for cr in &w.crs {
        let crd = crds.iter().find(|c| c.name == cr.crd).unwrap();
        tc.dynamic(&crd.resource(), cr.namespace.as_deref())
            .create(
                &PostParams::default(),
                &crd.object(&cr.name, cr.namespace.as_deref(), json!({})),
            )
            .await
            .unwrap_or_else(|e| panic!("CR {}: {e}", cr.name));
    }
    for og in &w.ogs {
        Api::<OperatorGroup>::namespaced(
            tc.client.clone(),
            og.metadata.namespace.as_deref().unwrap(),
        )
        .create(&PostParams::default(), og)
        .await
        .unwrap_or_else(|e| panic!("OperatorGroup: {e}"));
    }
    for model in &w.csvs {
        let ns = model.metadata.namespace.clone().unwrap();
        let name = model.metadata.name.clone().unwrap();
        let mut csv = model.clone();
        csv.metadata.deletion_timestamp = None;
        csv.metadata.uid = None;
        let status = csv.status.take().unwrap_or_default();
        csv.spec.extra.insert("displayName".into(), json!(name));
        csv.spec.extra.insert(
            "install".into(),
            json!({"strategy": "deployment", "spec": {"deployments": []}}),
        );
        let api: Api<ClusterServiceVersion> = Api::namespaced(tc.client.clone(), &ns);
        api.create(&PostParams::default(), &csv)
            .await
            .unwrap_or_else(|e| panic!("CSV {name}: {e}"));
        api.patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": status.phase, "reason": status.reason}})),
        )
        .await
        .unwrap_or_else(|e| panic!("CSV {name} status: {e}"));
    }
    for model in w
        .csvs
        .iter()
        .filter(|c| c.metadata.deletion_timestamp.is_some())
    {
        Api::<ClusterServiceVersion>::namespaced(
            tc.client.clone(),
            model.metadata.namespace.as_deref().unwrap(),
        )
        .delete(
            model.metadata.name.as_deref().unwrap(),
            &DeleteParams::background(),
        )
        .await
        .expect("delete CSV");
    }
    crds
}

/// Random worlds (the safety test's generator, without CR finalizers) replayed on the API
/// server, each with reconcilers watching its namespaces (so that, on a shared real cluster,
/// they never touch other tests' CSVs): the cluster must settle exactly where the oracle's
/// fixpoint says, and stay there.
#[tokio::test]
async fn random_worlds_settle_where_the_oracle_says() {
    let tc = common::cluster().await;
    common::ensure_olm_crds(&tc).await;
    let cases: u64 = std::env::var("CVO_OLM_LIVE_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(12);
    let seed: u64 = std::env::var("CVO_OLM_SAFETY_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x0C0F_FEE5);
    for case in 0..cases {
        let mut rng = model::Rng::for_case(seed, case);
        let prefix = common::unique("w");
        let group = format!("{prefix}.{}", common::TEST_GROUP_SUFFIX);
        let max_csvs = if case % 3 == 2 { 6 } else { 2 };
        let mut world = model::gen_world_with(&mut rng, &prefix, &group, max_csvs);
        if case % 3 != 2 {
            model::bias_towards_cleanup(&mut world, &mut rng);
        }
        let expected = model_outcome(&model::expected_outcome(&world));
        let _reconcilers: Vec<Running> = world
            .namespaces
            .iter()
            .map(|ns| start(&tc, &ns.name, 500))
            .collect();
        let crds = materialize(&tc, &world).await;
        eprintln!(
            "case {case}: {} CSVs, {} CRs -> expect {} CSVs, {} CRs",
            world.csvs.len(),
            world.crs.len(),
            expected.0.len(),
            expected.1.len()
        );
        poll_until(
            &format!("case {case} settles as the oracle says"),
            tc.deadline(),
            || async {
                let live = live_outcome(&tc, &world, &crds).await;
                if live == expected {
                    Ok(())
                } else {
                    Err(format!("live {live:?}\nexpected {expected:?}"))
                }
            },
        )
        .await;
        consistently(&format!("case {case} stays where it settled"), || async {
            same(live_outcome(&tc, &world, &crds).await, expected.clone())
        })
        .await;
    }
}
