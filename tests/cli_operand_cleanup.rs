//! `cvo operand-cleanup --in-memory --listen`: the real binary installs OLM's CRDs, runs the
//! reconciler, cleans up an opted-in CSV's custom resources created through the served API,
//! and stops gracefully on SIGTERM.

use std::net::TcpListener;
use std::time::Duration;

use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::json;

struct Child(std::process::Child);
impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
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

/// Polls `check` every 50 ms until it returns true, failing after 30 s.
async fn poll<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !check().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn cleans_up_an_opted_in_csv_and_stops_on_sigterm() {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("127.0.0.1:{port}");
    let mut child = Child(
        std::process::Command::new(assert_cmd::cargo::cargo_bin("cvo"))
            .args(["operand-cleanup", "--in-memory", "--listen", &addr])
            .spawn()
            .unwrap(),
    );
    let kubeconfig = kube::config::Kubeconfig::from_yaml(&cvo::cluster::memory::kubeconfig_yaml(
        addr.parse().unwrap(),
    ))
    .unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    let client = kube::Client::try_from(config).unwrap();
    let csvs = api(
        &client,
        ("operators.coreos.com", "v1alpha1", "ClusterServiceVersion"),
        "clusterserviceversions",
        Some("ops"),
    );
    poll("the OLM CRDs to be served", || {
        let csvs = csvs.clone();
        async move { csvs.list(&Default::default()).await.is_ok() }
    })
    .await;

    let ssa = PatchParams::apply("test");
    let namespaces = api(&client, ("", "v1", "Namespace"), "namespaces", None);
    namespaces
        .patch(
            "ops",
            &ssa,
            &Patch::Apply(
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ops"}}),
            ),
        )
        .await
        .unwrap();
    let crds = api(
        &client,
        ("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
        "customresourcedefinitions",
        None,
    );
    crds.patch("widgets.example.com", &ssa, &Patch::Apply(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"kind": "Widget", "plural": "widgets", "singular": "widget", "listKind": "WidgetList"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
    })))
    .await
    .unwrap();
    let widgets = api(
        &client,
        ("example.com", "v1", "Widget"),
        "widgets",
        Some("ops"),
    );
    poll("the Widget CRD to be established", || {
        let widgets = widgets.clone();
        async move { widgets.list(&Default::default()).await.is_ok() }
    })
    .await;
    for name in ["a", "b"] {
        widgets
            .patch(name, &ssa, &Patch::Apply(json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": name}})))
            .await
            .unwrap();
    }
    let groups = api(
        &client,
        ("operators.coreos.com", "v1", "OperatorGroup"),
        "operatorgroups",
        Some("ops"),
    );
    groups
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
                "metadata": {"name": "ops", "namespace": "ops"},
                "spec": {"targetNamespaces": ["ops"]}
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    csvs.create(&PostParams::default(), &serde_json::from_value(json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
        "metadata": {"name": "widget-operator.v1.0.0", "namespace": "ops",
            "finalizers": ["operatorframework.io/delete-custom-resources"]},
        "spec": {"displayName": "Widgets", "cleanup": {"enabled": true},
            "customresourcedefinitions": {"owned": [{"name": "widgets.example.com", "version": "v1", "kind": "Widget"}]}}
    })).unwrap())
    .await
    .unwrap();
    csvs.patch_status(
        "widget-operator.v1.0.0",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Succeeded"}})),
    )
    .await
    .unwrap();

    csvs.delete("widget-operator.v1.0.0", &DeleteParams::default())
        .await
        .unwrap();
    poll(
        "the CSV's custom resources and then the CSV to be gone",
        || {
            let (csvs, widgets) = (csvs.clone(), widgets.clone());
            async move {
                widgets
                    .list(&Default::default())
                    .await
                    .is_ok_and(|l| l.items.is_empty())
                    && csvs
                        .get_opt("widget-operator.v1.0.0")
                        .await
                        .is_ok_and(|c| c.is_none())
            }
        },
    )
    .await;

    let pid = child.0.id().to_string();
    assert!(
        std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let status = tokio::task::spawn_blocking(move || child.0.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(
        status.success(),
        "operand-cleanup exited with {status} on SIGTERM"
    );
}
