//! `cvo uninstall` against an API server — the embedded one, or a real one with
//! `CVO_TEST_KUBECONFIG` (`tests/common`): the plan (owned CRDs and APIServices, what is kept
//! and why), the order of deletions (operands while the operator runs and only in the target
//! namespaces, the Subscription before the CSV), a finalizer that never clears (exit 3,
//! nothing after), dry-run and refusals. CLI cases run the real binary.
//!
//! Every test builds its own world: unique CRD groups, namespaces and package name.

use crate::common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use common::{TestCluster, TestCrd, poll_until};
use common::{ensure_olm_crds, object, run_cvo};
use cvo::lifecycle::uninstall::{self, Options, Outcome};
use cvo::olm::types::{
    ApiServiceDefinitions, ApiServiceDescription, ClusterServiceVersion, CrdDescription,
    OperatorGroup, OperatorGroupSpec, Subscription,
};
use futures::StreamExt;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

const CSV: &str = common::olm::WIDGET_CSV;

struct World {
    tc: TestCluster,
    package: String,
    op_ns: String,
    /// The OperatorGroup's one target namespace.
    target_ns: String,
    /// A namespace outside the targets.
    outside_ns: String,
    /// Owned by the CSV, with CRs in both namespaces.
    widgets: TestCrd,
    /// Owned by the CSV; with `shared`, also required by another CSV.
    gadgets: TestCrd,
    /// Owned by the CSV through `apiservicedefinitions` (its APIService `v1.<group>`).
    things: TestCrd,
    apiservice: String,
    operator: String,
}

fn operator_kind() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("operators.coreos.com", "v1", "Operator"),
        "operators",
    )
}

fn apiservices() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("apiregistration.k8s.io", "v1", "APIService"),
        "apiservices",
    )
}

async fn world(shared: bool, opted_in: bool) -> World {
    let tc = common::cluster().await;
    ensure_olm_crds(&tc).await;
    let widgets = TestCrd::new("Widget", true, false);
    let gadgets = TestCrd::new("Gadget", true, false);
    let things = TestCrd::new("Thing", true, false);
    for c in [&widgets, &gadgets, &things] {
        c.install(&tc).await;
    }
    let op_ns = tc.namespace("uninst-op").await;
    let target_ns = tc.namespace("uninst-target").await;
    let outside_ns = tc.namespace("uninst-outside").await;
    let package = common::unique("widget-operator");
    let operator = format!("{package}.{op_ns}");
    let label = format!("operators.coreos.com/{operator}");
    let c = &tc.client;

    // The APIService of the Things' group: a real server registers it for the CRD itself
    // (automanaged); elsewhere the test creates it.
    let apiservice = format!("v1.{}", things.group);
    let svcs = tc.dynamic(&apiservices(), None);
    if svcs.get_opt(&apiservice).await.unwrap().is_none() {
        svcs.create(
            &PostParams::default(),
            &object(json!({
                "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
                "metadata": {"name": apiservice},
                "spec": {"group": things.group, "version": "v1",
                    "groupPriorityMinimum": 1000, "versionPriority": 15}})),
        )
        .await
        .unwrap();
        tc.track_cluster_object(&apiservices(), &apiservice);
    }

    Api::<OperatorGroup>::namespaced(c.clone(), &op_ns)
        .create(
            &PostParams::default(),
            &OperatorGroup::new(
                &op_ns,
                "og",
                OperatorGroupSpec {
                    target_namespaces: Some(vec![target_ns.clone()]),
                    ..Default::default()
                },
            ),
        )
        .await
        .unwrap();
    let subs: Api<Subscription> = Api::namespaced(c.clone(), &op_ns);
    let sub: Subscription = serde_json::from_value(json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
        "metadata": {"name": "widgets", "namespace": op_ns, "labels": {label.clone(): ""}},
        "spec": {"name": package, "channel": "stable", "source": "catalog",
            "sourceNamespace": "olm"}}))
    .unwrap();
    subs.create(&PostParams::default(), &sub).await.unwrap();
    subs.patch_status(
        "widgets",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"installedCSV": CSV}})),
    )
    .await
    .unwrap();

    let mut spec = common::olm::csv_spec(
        "Widgets",
        &[
            (&widgets.name, &widgets.kind),
            (&gadgets.name, &gadgets.kind),
        ],
        opted_in,
    );
    spec.apiservicedefinitions = Some(ApiServiceDefinitions {
        owned: vec![ApiServiceDescription::new(
            &things.group,
            "v1",
            "Thing",
            "things",
        )],
        ..Default::default()
    });
    common::olm::create_csv(&tc.client, &op_ns, CSV, spec, &[&label], opted_in).await;
    if shared {
        // Another operator, elsewhere, requires the Gadget CRD.
        let other_ns = tc.namespace("uninst-other").await;
        let mut spec = common::olm::csv_spec("Other", &[], false);
        spec.customresourcedefinitions
            .required
            .push(CrdDescription::new(&gadgets.name, "v1", "Gadget"));
        common::olm::create_csv(
            &tc.client,
            &other_ns,
            "other.v1",
            spec,
            &["other-label"],
            false,
        )
        .await;
    }

    // The Operator object, and a ConfigMap that also carries its label.
    tc.dynamic(&operator_kind(), None)
        .create(
            &PostParams::default(),
            &object(
                json!({"apiVersion": "operators.coreos.com/v1", "kind": "Operator",
                "metadata": {"name": operator}}),
            ),
        )
        .await
        .unwrap();
    tc.track_cluster_object(&operator_kind(), &operator);
    tc.dynamic(&common::configmaps(), Some(&op_ns))
        .create(
            &PostParams::default(),
            &object(json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "widget-settings", "namespace": op_ns,
                    "labels": {label.clone(): ""}}})),
        )
        .await
        .unwrap();

    let w = World {
        tc,
        package,
        op_ns,
        target_ns,
        outside_ns,
        widgets,
        gadgets,
        things,
        apiservice,
        operator,
    };
    // Operands: a Widget in the target namespace (held by the operator's finalizer), one
    // outside the targets, and a Gadget in the target namespace.
    w.cr(&w.widgets, &w.target_ns, "w1", true).await;
    w.cr(&w.widgets, &w.outside_ns, "w-out", false).await;
    w.cr(&w.gadgets, &w.target_ns, "g1", false).await;
    w
}

impl World {
    async fn cr(&self, crd: &TestCrd, ns: &str, name: &str, hold: bool) {
        let rest = if hold {
            json!({"metadata": {"finalizers": [common::TEST_FINALIZER]}})
        } else {
            json!({})
        };
        self.tc
            .dynamic(&crd.resource(), Some(ns))
            .create(&PostParams::default(), &crd.object(name, Some(ns), rest))
            .await
            .unwrap();
        if hold {
            self.tc.hold(&crd.resource(), Some(ns), name);
        }
    }

    fn options(&self) -> Options {
        Options::new(&self.package, &self.op_ns)
    }

    async fn exists(&self, ar: &ApiResource, ns: Option<&str>, name: &str) -> bool {
        self.tc
            .dynamic(ar, ns)
            .get_opt(name)
            .await
            .unwrap()
            .is_some()
    }

    fn csvs(&self) -> Api<ClusterServiceVersion> {
        Api::namespaced(self.tc.client.clone(), &self.op_ns)
    }

    fn subs(&self) -> Api<Subscription> {
        Api::namespaced(self.tc.client.clone(), &self.op_ns)
    }

    /// `Kind ns/name → resourceVersion` of every object of this world the uninstall could
    /// touch (cluster-scoped ones by name: other tests change theirs meanwhile).
    async fn versions(&self) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        let crds = common::builtin(
            "apiextensions.k8s.io",
            "v1",
            "CustomResourceDefinition",
            "customresourcedefinitions",
        );
        let mut listed: Vec<(ApiResource, String)> = Vec::new();
        for ns in [&self.op_ns, &self.target_ns, &self.outside_ns] {
            for ar in [
                ApiResource::erase::<Subscription>(&()),
                ApiResource::erase::<ClusterServiceVersion>(&()),
                ApiResource::erase::<OperatorGroup>(&()),
                common::configmaps(),
                self.widgets.resource(),
                self.gadgets.resource(),
                self.things.resource(),
            ] {
                listed.push((ar, ns.clone()));
            }
        }
        for (ar, ns) in listed {
            for o in self
                .tc
                .dynamic(&ar, Some(&ns))
                .list(&Default::default())
                .await
                .unwrap()
                .items
            {
                out.insert(
                    format!("{} {ns}/{}", ar.kind, o.name_any()),
                    o.resource_version().unwrap_or_default(),
                );
            }
        }
        for (ar, name) in [
            (crds.clone(), self.widgets.name.clone()),
            (crds.clone(), self.gadgets.name.clone()),
            (crds, self.things.name.clone()),
            (apiservices(), self.apiservice.clone()),
            (operator_kind(), self.operator.clone()),
        ] {
            let o = self
                .tc
                .dynamic(&ar, None)
                .get(&name)
                .await
                .unwrap_or_else(|e| panic!("{} {name}: {e}", ar.kind));
            out.insert(
                format!("{} {name}", ar.kind),
                o.resource_version().unwrap_or_default(),
            );
        }
        out
    }
}

/// A fake operator: releases its finalizer from every Widget being deleted, and records
/// whether the CSV still existed then (the operator runs as long as its CSV does).
fn fake_operator(
    client: Client,
    w: &World,
) -> (tokio::task::JoinHandle<()>, Arc<Mutex<Vec<bool>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    let widgets: Api<DynamicObject> = Api::all_with(client.clone(), &w.widgets.resource());
    let csvs: Api<ClusterServiceVersion> = Api::namespaced(client, &w.op_ns);
    let task = tokio::spawn(async move {
        let mut events = watcher(widgets.clone(), watcher::Config::default())
            .default_backoff()
            .applied_objects()
            .boxed();
        while let Some(Ok(obj)) = events.next().await {
            if obj.metadata.deletion_timestamp.is_none()
                || !obj.finalizers().iter().any(|f| f == common::TEST_FINALIZER)
            {
                continue;
            }
            let csv_present = csvs.get_opt(CSV).await.ok().flatten().is_some();
            record.lock().unwrap().push(csv_present);
            let api: Api<DynamicObject> = Api::namespaced_with(
                widgets.clone().into_client(),
                &obj.namespace().unwrap_or_default(),
                &kube::api::ApiResource::from_gvk(&obj.types.clone().unwrap().try_into().unwrap()),
            );
            let _ = api
                .patch(
                    &obj.name_any(),
                    &PatchParams::default(),
                    &Patch::Merge(json!({"metadata": {"finalizers": null}})),
                )
                .await;
        }
    });
    (task, seen)
}

fn position(log: &[String], what: &str) -> usize {
    log.iter()
        .position(|l| l.starts_with("DELETE") && l.contains(what))
        .unwrap_or_else(|| panic!("no DELETE of {what} in {log:#?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_shows_owned_crds_and_apiservices_and_why_each_is_kept_and_dry_run_changes_nothing() {
    let w = world(true, false).await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = w.tc.kubeconfig_file(dir.path()).await;
    let before = w.versions().await;

    let (code, out, err) = run_cvo(
        &kubeconfig,
        &[
            "uninstall",
            &w.package,
            "-n",
            &w.op_ns,
            "--delete-crds",
            "--dry-run",
        ],
    )
    .await;
    assert_eq!(code, 0, "dry run: {out}{err}");
    let line = |needle: &str| {
        out.lines()
            .find(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no line with {needle:?} in:\n{out}"))
            .to_owned()
    };
    assert!(line(&format!("Subscription {}/widgets", w.op_ns)).contains("delete"));
    assert!(line(&format!("ClusterServiceVersion {}/{CSV}", w.op_ns)).contains("delete"));
    let gadget_crd = line(&format!("CustomResourceDefinition {}", w.gadgets.name));
    assert!(gadget_crd.contains("keep"), "{gadget_crd}");
    assert!(
        gadget_crd.contains("required by CSV"),
        "says why: {gadget_crd}"
    );
    assert!(
        gadget_crd.contains("other.v1"),
        "names the other CSV: {gadget_crd}"
    );
    let widget_crd = line(&format!("CustomResourceDefinition {}", w.widgets.name));
    assert!(widget_crd.contains("keep"), "{widget_crd}");
    assert!(
        widget_crd.contains("custom resource(s) of it remain"),
        "{widget_crd}"
    );
    let svc = line(&format!("APIService {}", w.apiservice));
    assert!(svc.contains("delete"), "no Thing exists: {svc}");
    assert!(line(&format!("Widget {}/w1", w.target_ns)).contains("--delete-operands not given"));
    let op = line(&format!("Operator {}", w.operator));
    assert!(
        op.contains("keep") && op.contains("--remove-labels"),
        "{op}"
    );
    assert!(
        op.contains(&format!("ConfigMap {}/widget-settings", w.op_ns)),
        "{op}"
    );
    assert!(line("OperatorGroup").contains("--delete-operator-group not given"));
    assert!(out.contains("dry run: nothing was changed"), "{out}");

    // JSON: the same plan.
    let (code, out, err) = run_cvo(
        &kubeconfig,
        &[
            "uninstall",
            &w.package,
            "-n",
            &w.op_ns,
            "--delete-crds",
            "--dry-run",
            "-o",
            "json",
        ],
    )
    .await;
    assert_eq!(code, 0, "{out}{err}");
    let v: Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(v["dryRun"], true);
    assert_eq!(v["plan"]["csv"], CSV);
    let items = v["plan"]["items"].as_array().unwrap();
    let find = |kind: &str, name: &str| {
        items
            .iter()
            .find(|i| i["kind"] == kind && i["name"] == name)
            .unwrap_or_else(|| panic!("no {kind} {name} in {items:#?}"))
            .clone()
    };
    assert_eq!(
        find("CustomResourceDefinition", &w.gadgets.name)["action"],
        "keep"
    );
    assert_eq!(find("APIService", &w.apiservice)["action"], "delete");
    assert_eq!(find("APIService", &w.apiservice)["step"], "crds");
    assert_eq!(find("Widget", "w-out")["action"], "keep");

    // Operands of a CRD another CSV requires: refused (exit 4), nothing changed.
    let (code, out, err) = run_cvo(
        &kubeconfig,
        &[
            "uninstall",
            &w.package,
            "-n",
            &w.op_ns,
            "--delete-operands",
            "--dry-run",
        ],
    )
    .await;
    assert_eq!(code, 4, "refused: {out}{err}");
    assert!(
        out.contains("refused:") && out.contains(&w.gadgets.name),
        "{out}"
    );

    // Not a dry run, but no --yes and no terminal: refused, nothing changed.
    let (code, out, err) = run_cvo(&kubeconfig, &["uninstall", &w.package, "-n", &w.op_ns]).await;
    assert_eq!(code, 4, "no confirmation: {out}{err}");
    assert!(out.contains("not a terminal"), "{out}");

    assert_eq!(
        w.versions().await,
        before,
        "every resourceVersion is unchanged"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operands_go_first_while_the_operator_runs_only_in_target_namespaces_then_subscription_then_csv()
 {
    let w = world(false, false).await;
    let (client, log) = common::recording_client(w.tc.client.clone());
    let (operator, seen) = fake_operator(w.tc.client.clone(), &w);
    let opts = Options {
        delete_operands: true,
        delete_crds: true,
        remove_labels: true,
        delete_operator_group: true,
        timeout: w.tc.deadline(),
        ..w.options()
    };
    let (plan, inv) = uninstall::plan(&client, &opts).await.expect("plan");
    assert!(plan.refusals.is_empty(), "{:?}", plan.refusals);
    let report = uninstall::execute(&client, &opts, &plan, &inv, &mut |_| {}).await;
    operator.abort();
    assert_eq!(report.outcome, Outcome::Done, "{report:#?}");

    let log = log.lock().unwrap().clone();
    let w1 = position(&log, &format!("/namespaces/{}/widgets/w1", w.target_ns));
    let g1 = position(&log, &format!("/namespaces/{}/gadgets/g1", w.target_ns));
    let sub = position(&log, "/subscriptions/widgets");
    let csv = position(&log, &format!("/clusterserviceversions/{CSV}"));
    assert!(
        w1 < sub && g1 < sub,
        "operands before the Subscription: {log:#?}"
    );
    assert!(sub < csv, "Subscription before the CSV: {log:#?}");
    assert!(
        !log.iter()
            .any(|l| l.starts_with("DELETE") && l.contains(&w.outside_ns)),
        "nothing deleted outside the target namespaces: {log:#?}"
    );
    assert_eq!(
        *seen.lock().unwrap(),
        vec![true],
        "the operator finalized its Widget while its CSV still existed"
    );

    // What is left: the Widget outside the targets, so its CRD; not the Gadget CRD.
    assert!(
        w.exists(&w.widgets.resource(), Some(&w.outside_ns), "w-out")
            .await
    );
    let crds = common::builtin(
        "apiextensions.k8s.io",
        "v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
    );
    let kept = report
        .performed
        .iter()
        .find(|p| p.name == w.widgets.name)
        .expect("the Widget CRD in the report");
    assert_eq!(kept.result, "kept");
    assert!(kept.reason.contains("w-out"), "{kept:?}");
    let gadget_crd = report
        .performed
        .iter()
        .find(|p| p.name == w.gadgets.name)
        .expect("the Gadget CRD in the report");
    assert!(
        matches!(gadget_crd.result.as_str(), "deleted" | "deletion-started"),
        "{gadget_crd:?}"
    );
    poll_until("the Gadget CRD to be gone", w.tc.deadline(), || async {
        match w.tc.dynamic(&crds, None).get_opt(&w.gadgets.name).await {
            Ok(None) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    assert!(w.subs().get_opt("widgets").await.unwrap().is_none());
    assert!(w.csvs().get_opt(CSV).await.unwrap().is_none());
    // The label was removed from the ConfigMap, so the Operator object could go.
    let cm =
        w.tc.dynamic(&common::configmaps(), Some(&w.op_ns))
            .get("widget-settings")
            .await
            .unwrap();
    assert!(cm.labels().is_empty(), "{:?}", cm.labels());
    assert!(!w.exists(&operator_kind(), None, &w.operator).await);
    // Nothing else remained in the namespace: the OperatorGroup went too.
    assert!(
        !w.exists(
            &ApiResource::erase::<OperatorGroup>(&()),
            Some(&w.op_ns),
            "og"
        )
        .await
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finalizer_that_never_clears_times_out_with_exit_3_and_nothing_after_is_deleted() {
    let w = world(false, false).await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = w.tc.kubeconfig_file(dir.path()).await;
    let sub_rv = w.subs().get("widgets").await.unwrap().resource_version();
    let csv_rv = w.csvs().get(CSV).await.unwrap().resource_version();

    let (code, out, err) = run_cvo(
        &kubeconfig,
        &[
            "uninstall",
            &w.package,
            "-n",
            &w.op_ns,
            "--delete-operands",
            "--delete-crds",
            "--remove-labels",
            "--delete-operator-group",
            "--yes",
            "--timeout",
            "2s",
        ],
    )
    .await;
    assert_eq!(code, 3, "timed out: {out}{err}");
    assert!(out.contains("timed out in step operands"), "{out}");
    assert!(
        out.contains(&format!(
            "Widget {}/w1 (finalizers: {})",
            w.target_ns,
            common::TEST_FINALIZER
        )),
        "names the object and its finalizer: {out}"
    );
    // The operands were deleted (one is held); nothing after that step was touched.
    let w1 =
        w.tc.dynamic(&w.widgets.resource(), Some(&w.target_ns))
            .get("w1")
            .await
            .unwrap();
    assert!(w1.metadata.deletion_timestamp.is_some());
    assert_eq!(
        w.subs().get("widgets").await.unwrap().resource_version(),
        sub_rv
    );
    assert_eq!(w.csvs().get(CSV).await.unwrap().resource_version(), csv_rv);
    assert!(w.exists(&operator_kind(), None, &w.operator).await);
    assert!(
        w.exists(
            &ApiResource::erase::<OperatorGroup>(&()),
            Some(&w.op_ns),
            "og"
        )
        .await
    );
    assert!(
        w.exists(&w.widgets.resource(), Some(&w.outside_ns), "w-out")
            .await
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_opted_in_csv_is_refused_without_delete_operands_and_left_to_olm_cleanup_with_it() {
    let w = world(false, true).await;
    let opts = w.options();
    let (plan, inv) = uninstall::plan(&w.tc.client, &opts).await.expect("plan");
    assert!(
        plan.refusals.iter().any(|r| r.contains("opted in")),
        "{:?}",
        plan.refusals
    );
    let report = uninstall::execute(&w.tc.client, &opts, &plan, &inv, &mut |_| {}).await;
    assert!(matches!(report.outcome, Outcome::Refused { .. }));
    assert!(w.subs().get_opt("widgets").await.unwrap().is_some());

    // With --delete-operands: the operand-cleanup reconciler deletes them when the CSV goes.
    let (stop, rx) = tokio::sync::oneshot::channel::<()>();
    let reconciler = tokio::spawn({
        let client = w.tc.client.clone();
        let config = cvo::olm::Config {
            namespace: Some(w.op_ns.clone()),
            min_backoff: std::time::Duration::from_millis(50),
            max_backoff: std::time::Duration::from_millis(400),
            ..Default::default()
        };
        async move {
            cvo::olm::run_with_config(client, config, async move {
                let _ = rx.await;
            })
            .await
        }
    });
    let (operator, _) = fake_operator(w.tc.client.clone(), &w);
    let opts = Options {
        delete_operands: true,
        timeout: w.tc.deadline(),
        ..w.options()
    };
    let (plan, inv) = uninstall::plan(&w.tc.client, &opts).await.expect("plan");
    assert!(plan.refusals.is_empty(), "{:?}", plan.refusals);
    assert!(plan.olm_operand_cleanup);
    let report = uninstall::execute(&w.tc.client, &opts, &plan, &inv, &mut |_| {}).await;
    operator.abort();
    let _ = stop.send(());
    let _ = reconciler.await;
    assert_eq!(report.outcome, Outcome::Done, "{report:#?}");
    assert!(w.csvs().get_opt(CSV).await.unwrap().is_none());
    assert!(
        !w.exists(&w.widgets.resource(), Some(&w.target_ns), "w1")
            .await
    );
    assert!(
        !w.exists(&w.gadgets.resource(), Some(&w.target_ns), "g1")
            .await
    );
    assert!(
        w.exists(&w.widgets.resource(), Some(&w.outside_ns), "w-out")
            .await
    );
}
