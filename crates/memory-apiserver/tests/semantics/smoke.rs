//! End-to-end smoke check of the in-memory API server through a real `kube::Client` (in memory
//! only, whatever the environment: these check the server's own API).

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams, WatchEvent,
    WatchParams,
};
use kube::core::{ApiResource, GroupVersionKind};
use kube::discovery::Discovery;
use memory_apiserver::{Config, FaultAction, FaultRule, MemoryServer};
use serde_json::json;

async fn wait_for<F, Fut>(what: &str, mut f: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !f().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn api_code<T: std::fmt::Debug>(r: kube::Result<T>) -> u16 {
    match r {
        Err(kube::Error::Api(s)) => s.code,
        other => panic!("expected an API error, got {other:?}"),
    }
}

#[tokio::test]
async fn namespace_apply_finalizers_and_errors() {
    let server = MemoryServer::start(Config::default());
    let client = server.client();
    let nss: Api<Namespace> = Api::all(client.clone());
    nss.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "smoke"}})).unwrap(),
    )
    .await
    .unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "smoke");

    // SSA twice: same resourceVersion.
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "1", "b": "2"}});
    let pp = PatchParams::apply("smoke-test");
    let first = cms.patch("c", &pp, &Patch::Apply(&cm)).await.unwrap();
    let second = cms.patch("c", &pp, &Patch::Apply(&cm)).await.unwrap();
    assert_eq!(
        first.metadata.resource_version,
        second.metadata.resource_version
    );
    // Dropping a field removes it.
    let cm2 = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "1"}});
    let third = cms.patch("c", &pp, &Patch::Apply(&cm2)).await.unwrap();
    assert_eq!(third.data.unwrap().len(), 1);
    // Another manager changing an owned field conflicts unless forced.
    let other = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "9"}});
    let err = cms
        .patch("c", &PatchParams::apply("other"), &Patch::Apply(&other))
        .await;
    assert_eq!(api_code(err), 409);
    cms.patch(
        "c",
        &PatchParams::apply("other").force(),
        &Patch::Apply(&other),
    )
    .await
    .unwrap();

    // Errors.
    assert_eq!(api_code(cms.get("missing").await), 404);
    let dup: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "c"}})).unwrap();
    assert_eq!(
        api_code(cms.create(&PostParams::default(), &dup).await),
        409
    );
    let bad: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "Bad_Name"}})).unwrap();
    assert_eq!(
        api_code(cms.create(&PostParams::default(), &bad).await),
        422
    );
    let nowhere: Api<ConfigMap> = Api::namespaced(client.clone(), "nowhere");
    assert_eq!(
        api_code(nowhere.create(&PostParams::default(), &dup).await),
        404
    );

    // Finalizers hold the object.
    let f = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "f", "finalizers": ["example.com/hold"]}});
    cms.patch("f", &pp, &Patch::Apply(&f)).await.unwrap();
    cms.delete("f", &DeleteParams::background()).await.unwrap();
    let held = cms.get("f").await.unwrap();
    assert!(held.metadata.deletion_timestamp.is_some());
    cms.patch(
        "f",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    assert_eq!(api_code(cms.get("f").await), 404);

    // Namespace deletion: terminating (held by a finalizer), 403 on create, then gone.
    let pin = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "pin", "finalizers": ["example.com/hold"]}});
    cms.patch("pin", &pp, &Patch::Apply(&pin)).await.unwrap();
    nss.delete("smoke", &DeleteParams::default()).await.unwrap();
    wait_for("NamespaceFinalizersRemaining", || async {
        let ns = nss.get("smoke").await.unwrap();
        let st = ns.status.unwrap_or_default();
        st.phase.as_deref() == Some("Terminating")
            && st
                .conditions
                .unwrap_or_default()
                .iter()
                .any(|c| c.type_ == "NamespaceFinalizersRemaining" && c.status == "True")
    })
    .await;
    assert_eq!(
        api_code(
            cms.create(
                &PostParams::default(),
                &serde_json::from_value(json!({"metadata": {"name": "late"}})).unwrap()
            )
            .await
        ),
        403
    );
    assert!(
        cms.get("c").await.is_err(),
        "content without finalizers is deleted"
    );
    cms.patch(
        "pin",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    wait_for("namespace removal", || async {
        nss.get_opt("smoke").await.unwrap().is_none()
    })
    .await;
}

#[tokio::test]
async fn discovery_crd_watch_and_faults() {
    let server = MemoryServer::start(Config::default());
    let client = server.client();
    let discovery = Discovery::new(client.clone()).run().await.unwrap();
    assert!(discovery.groups().any(|g| g.name() == "apps"));

    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.smoke.example.com"},
        "spec": {"group": "smoke.example.com", "scope": "Cluster",
                 "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
                 "versions": [{"name": "v1", "served": true, "storage": true,
                               "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
                               "subresources": {"status": {}}}]}
    });
    crds.patch(
        "widgets.smoke.example.com",
        &PatchParams::apply("smoke"),
        &Patch::Apply(&crd),
    )
    .await
    .unwrap();
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("smoke.example.com", "v1", "Widget"),
        "widgets",
    );
    let widgets: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
    let w = json!({"apiVersion": "smoke.example.com/v1", "kind": "Widget", "metadata": {"name": "w1"}, "spec": {"size": 1}});
    // Not established yet: 404.
    assert_eq!(
        api_code(
            widgets
                .patch("w1", &PatchParams::apply("smoke"), &Patch::Apply(&w))
                .await
        ),
        404
    );
    wait_for("Established", || async {
        crds.get("widgets.smoke.example.com")
            .await
            .unwrap()
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True")
    })
    .await;
    // Watch from now, then create.
    let rv = widgets
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut stream = widgets
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();
    let created = widgets
        .patch("w1", &PatchParams::apply("smoke"), &Patch::Apply(&w))
        .await
        .unwrap();
    assert_eq!(created.metadata.generation, Some(1));
    match stream.try_next().await.unwrap() {
        Some(WatchEvent::Added(o)) => assert_eq!(o.metadata.name.as_deref(), Some("w1")),
        other => panic!("expected ADDED, got {other:?}"),
    }

    // kube-runtime's watcher (list + watch with bookmarks) sees the object and its deletion.
    let mut events =
        kube::runtime::watcher(widgets.clone(), kube::runtime::watcher::Config::default()).boxed();
    let mut saw_w1 = false;
    while let Some(ev) = tokio::time::timeout(Duration::from_secs(10), events.try_next())
        .await
        .unwrap()
        .unwrap()
    {
        if let kube::runtime::watcher::Event::InitApply(o) = &ev {
            saw_w1 |= o.metadata.name.as_deref() == Some("w1");
        }
        if matches!(ev, kube::runtime::watcher::Event::InitDone) {
            break;
        }
    }
    assert!(saw_w1);

    // Faults: a 503 once, then normal service.
    server.faults().add(
        FaultRule::new(FaultAction::Status(503))
            .verb("get")
            .kind("Widget")
            .times(1),
    );
    assert_eq!(api_code(widgets.get("w1").await), 503);
    widgets.get("w1").await.unwrap();

    // Deleting the CRD deletes its CRs, then the type.
    crds.delete("widgets.smoke.example.com", &DeleteParams::default())
        .await
        .unwrap();
    wait_for("CRD removal", || async {
        crds.get_opt("widgets.smoke.example.com")
            .await
            .unwrap()
            .is_none()
    })
    .await;
    assert_eq!(api_code(widgets.list(&ListParams::default()).await), 404);
}

#[tokio::test]
async fn serves_over_loopback_http_with_its_kubeconfig() {
    let server = MemoryServer::start(Config::default());
    let refused = memory_apiserver::serve(server.clone(), "0.0.0.0:0".parse().unwrap()).await;
    assert_eq!(
        refused.unwrap_err().kind(),
        std::io::ErrorKind::InvalidInput
    );

    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    tokio::spawn(memory_apiserver::serve(server, addr));
    let kubeconfig =
        kube::config::Kubeconfig::from_yaml(&memory_apiserver::kubeconfig_yaml(addr)).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    let client = kube::Client::try_from(config).unwrap();
    let nss: Api<Namespace> = Api::all(client);
    let mut names = Vec::new();
    for _ in 0..50 {
        match nss.list(&ListParams::default()).await {
            Ok(l) => {
                names = l
                    .items
                    .into_iter()
                    .filter_map(|n| n.metadata.name)
                    .collect();
                break;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
    assert!(names.contains(&"kube-system".to_string()), "{names:?}");
}

#[tokio::test]
async fn dev_apiserver_writes_a_kubeconfig_for_the_bound_port() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kubeconfig");
    let out = path.clone();
    tokio::spawn(async move {
        memory_apiserver::serve_with_kubeconfig(
            MemoryServer::start(Config::default()),
            "127.0.0.1:0".parse().unwrap(),
            Some(&out),
        )
        .await
    });
    let mut yaml = String::new();
    for _ in 0..500 {
        match std::fs::read_to_string(&path) {
            Ok(s) if s.contains("current-context") => {
                yaml = s;
                break;
            }
            _ => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
    let kubeconfig = kube::config::Kubeconfig::from_yaml(&yaml).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    let nss: Api<Namespace> = Api::all(kube::Client::try_from(config).unwrap());
    assert!(nss.get("default").await.is_ok());
}
