//! `cvo operand-cleanup`, the real binary: it runs the reconciler, cleans up an opted-in CSV's
//! custom resources, and stops gracefully on SIGTERM —
//! - with `--in-memory --listen`, on its own embedded server (it installs OLM's CRDs there);
//! - with `--kubeconfig FILE --namespace NS`, on the test cluster (`tests/common`: the in-memory
//!   server served on loopback, or the real cluster named by `CVO_TEST_KUBECONFIG`).

use crate::common;

use std::net::TcpListener;
use std::path::PathBuf;
use std::time::Duration;

use common::{TestCrd, poll_until};
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use serde_json::json;

/// The operand-cleanup process; killed when the test ends, pass or fail.
struct Child(Option<std::process::Child>);
impl Drop for Child {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Child {
    fn spawn(args: &[&str]) -> Child {
        Child(Some(common::cli::process().args(args).spawn().unwrap()))
    }

    /// SIGTERM, then the process must exit successfully (waiting off the runtime: the test's
    /// in-memory server may have to answer the process while it shuts down).
    async fn terminate(mut self) {
        let mut child = self.0.take().expect("running");
        let pid = child.id().to_string();
        assert!(
            std::process::Command::new("kill")
                .args(["-TERM", &pid])
                .status()
                .unwrap()
                .success()
        );
        let status = tokio::task::spawn_blocking(move || child.wait())
            .await
            .unwrap()
            .unwrap();
        assert!(
            status.success(),
            "operand-cleanup exited with {status} on SIGTERM"
        );
    }
}

fn free_loopback_addr() -> std::net::SocketAddr {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
}

fn api(
    client: &kube::Client,
    gvk: (&str, &str, &str),
    plural: &str,
    ns: Option<&str>,
) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(gvk.0, gvk.1, gvk.2), plural);
    match ns {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
        None => Api::all_with(client.clone(), &ar),
    }
}

fn csvs(client: &kube::Client, ns: &str) -> Api<DynamicObject> {
    api(
        client,
        ("operators.coreos.com", "v1alpha1", "ClusterServiceVersion"),
        "clusterserviceversions",
        Some(ns),
    )
}

/// With a reconciler running on `ns`: two Widgets (`widget`), an OperatorGroup targeting
/// `ns`, an opted-in CSV owning the Widget CRD `crd`; deleting the CSV must remove the Widgets
/// and then the CSV.
async fn cleanup_removes_the_widgets(
    client: &kube::Client,
    ns: &str,
    crd: &str,
    widget: &ApiResource,
    deadline: Duration,
) {
    let widgets: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, widget);
    let ssa = PatchParams::apply("test");
    for name in ["a", "b"] {
        widgets
            .patch(
                name,
                &ssa,
                &Patch::Apply(json!({
                    "apiVersion": widget.api_version, "kind": widget.kind, "metadata": {"name": name}
                })),
            )
            .await
            .unwrap();
    }
    api(
        client,
        ("operators.coreos.com", "v1", "OperatorGroup"),
        "operatorgroups",
        Some(ns),
    )
    .create(
        &PostParams::default(),
        &serde_json::from_value(json!({
            "apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
            "metadata": {"name": "og", "namespace": ns},
            "spec": {"targetNamespaces": [ns]}
        }))
        .unwrap(),
    )
    .await
    .unwrap();
    let csvs = csvs(client, ns);
    let csv = common::olm::WIDGET_CSV;
    let spec = common::olm::csv_spec("Widgets", &[(crd, "Widget")], true);
    common::olm::create_csv(client, ns, csv, spec, &[], true).await;

    csvs.delete(csv, &DeleteParams::default()).await.unwrap();
    poll_until(
        "the CSV's custom resources and then the CSV to be gone",
        deadline,
        || async {
            let left = widgets.list(&Default::default()).await;
            let csv = csvs.get_opt(csv).await;
            match (&left, &csv) {
                (Ok(l), Ok(None)) if l.items.is_empty() => Ok(()),
                _ => Err(format!(
                    "widgets {:?}, CSV finalizers {:?}",
                    left.map(|l| l.items.len()),
                    csv.map(|c| c.map(|c| c.metadata.finalizers))
                )),
            }
        },
    )
    .await;
}

#[tokio::test]
async fn in_memory_server_cleans_up_and_stops_on_sigterm() {
    let addr = free_loopback_addr();
    let child = Child::spawn(&[
        "operand-cleanup",
        "--in-memory",
        "--listen",
        &addr.to_string(),
    ]);
    let kubeconfig =
        kube::config::Kubeconfig::from_yaml(&memory_apiserver::kubeconfig_yaml(addr)).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    let client = kube::Client::try_from(config).unwrap();
    let deadline = Duration::from_secs(30);
    let csvs = csvs(&client, "ops");
    poll_until("the OLM CRDs to be served", deadline, || async {
        csvs.list(&Default::default())
            .await
            .map(drop)
            .map_err(|e| e.to_string())
    })
    .await;

    let ssa = PatchParams::apply("test");
    api(&client, ("", "v1", "Namespace"), "namespaces", None)
        .patch(
            "ops",
            &ssa,
            &Patch::Apply(
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ops"}}),
            ),
        )
        .await
        .unwrap();
    let crd = TestCrd::in_group("example.com", "Widget", true, false);
    api(
        &client,
        ("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
        "customresourcedefinitions",
        None,
    )
    .patch(
        &crd.name,
        &ssa,
        &Patch::Apply(serde_json::to_value(crd.manifest()).unwrap()),
    )
    .await
    .unwrap();
    cvo::cluster::crd::wait_established(&client, &crd.name, deadline)
        .await
        .unwrap();
    cleanup_removes_the_widgets(&client, "ops", &crd.name, &crd.resource(), deadline).await;
    child.terminate().await;
}

#[tokio::test]
async fn kubeconfig_cluster_cleans_up_and_stops_on_sigterm() {
    let tc = common::cluster().await;
    let dir = tempfile::tempdir().unwrap();
    // The process reaches the test cluster through a kubeconfig file: the real cluster's, or
    // one for the in-memory server served on loopback.
    let kubeconfig: PathBuf = tc.kubeconfig_file(dir.path()).await;
    common::ensure_olm_crds(&tc).await;
    let ns = tc.namespace("olm-cli").await;
    let crd = TestCrd::new("Widget", true, false);
    let widgets = crd.install(&tc).await;

    let child = Child::spawn(&[
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
        "operand-cleanup",
        "--namespace",
        &ns,
    ]);
    cleanup_removes_the_widgets(&tc.client, &ns, &crd.name, &widgets, tc.deadline()).await;
    child.terminate().await;
}

/// `cvo operator --components release,operand-cleanup`: the leader applies its release and
/// runs the same reconciler, which cleans up an opted-in CSV as `cvo operand-cleanup` does;
/// SIGTERM stops both and exits 0.
#[tokio::test]
async fn the_operator_runs_the_reconciler_as_a_component() {
    let tc = common::cluster().await;
    // The operator's passes write ClusterVersion status: hold the cluster-wide object.
    let (_guard, _cv) = common::cluster_version(&tc).await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig: PathBuf = tc.kubeconfig_file(dir.path()).await;
    common::ensure_olm_crds(&tc).await;
    let ns = tc.namespace("olm-operator").await;
    let crd = TestCrd::new("Widget", true, false);
    let widgets = crd.install(&tc).await;
    let release = dir.path().join("release");
    common::write_release(
        &release,
        Some("1.0.0"),
        &[(
            "0000_10_a_00_marker.yaml",
            common::configmap(&ns, "marker", "", &[]),
        )],
    );
    let metrics = free_loopback_addr().to_string();
    let lease = common::unique("lease");
    let child = Child::spawn(&[
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
        "operator",
        "--release",
        release.to_str().unwrap(),
        "--namespace",
        &ns,
        "--lease-name",
        &lease,
        "--metrics-addr",
        &metrics,
        "--wait",
        "none",
        "--components",
        "release,operand-cleanup",
        "--operand-cleanup-namespace",
        &ns,
    ]);
    // Leading: the release is applied.
    let configmaps = api(&tc.client, ("", "v1", "ConfigMap"), "configmaps", Some(&ns));
    poll_until(
        "the release applied by the leader",
        tc.deadline(),
        || async {
            match configmaps.get_opt("marker").await {
                Ok(Some(_)) => Ok(()),
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await;
    cleanup_removes_the_widgets(&tc.client, &ns, &crd.name, &widgets, tc.deadline()).await;
    child.terminate().await;
}

#[test]
fn the_operator_needs_the_release_component() {
    for (components, extra) in [
        ("operand-cleanup", None),
        ("release", Some("--operand-cleanup-namespace=x")),
    ] {
        let mut cmd = common::cli::cvo();
        cmd.args([
            "operator",
            "--release",
            "manifests-example",
            "--components",
            components,
        ]);
        if let Some(e) = extra {
            cmd.arg(e);
        }
        cmd.assert()
            .code(2)
            .stderr(predicates::str::contains("--components"));
    }
}
