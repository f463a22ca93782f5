//! Test support for kube-rs clients and controllers (feature `testing`): one [`TestCluster`]
//! per test, which is a fresh [`MemoryServer`] by default, or a real cluster when an environment
//! variable names its kubeconfig (see [`cluster_from_env`]). A test only ever uses
//! [`TestCluster::client`], so the same test runs against both.
//!
//! ```
//! # async fn example() {
//! use memory_apiserver::testing;
//! use kube::api::{Api, PostParams};
//! use k8s_openapi::api::core::v1::ConfigMap;
//!
//! let tc = testing::cluster().await;
//! let ns = tc.namespace("example").await; // deleted again when `tc` drops
//! let cms: Api<ConfigMap> = Api::namespaced(tc.client.clone(), &ns);
//! let cm = serde_json::from_value(serde_json::json!({"metadata": {"name": "a"}})).unwrap();
//! cms.create(&PostParams::default(), &cm).await.unwrap();
//! # }
//! ```
//!
//! Also here: [`unique`] names, [`poll_until`] (polling with backoff up to a deadline: tests
//! never sleep a fixed time to wait for state), assertions on API errors, and small CRD helpers.
//! `TestCluster` is the cleanup guard: namespaces and CRDs it created, and finalizers tests
//! registered with [`TestCluster::hold`], are removed when it is dropped (on a real cluster; an
//! in-memory server simply goes away with the test).

use std::future::Future;
use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::{Config as MemoryConfig, MemoryServer};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::Status;
use kube::{Client, Config};
use serde_json::json;

/// The environment variable [`cluster`] reads: a kubeconfig file naming a real cluster to run
/// against instead of a fresh in-memory server.
pub const KUBECONFIG_ENV: &str = "MEMORY_APISERVER_TEST_KUBECONFIG";
/// Every CRD group the tests create is `<unique>.cvo-test.example.com`.
pub const TEST_GROUP_SUFFIX: &str = "cvo-test.example.com";
/// A finalizer no controller knows: it holds an object until the test removes it.
pub const TEST_FINALIZER: &str = "cvo-test.example.com/hold";
/// Label put on every namespace the tests create (handy to clean a real cluster by hand).
pub const TEST_LABEL: &str = "cvo-test.example.com/suite";

/// A cluster for one test, and the guard that cleans up what the test created.
pub struct TestCluster {
    pub client: Client,
    /// The embedded server, when not running against a real cluster.
    pub memory: Option<MemoryServer>,
    kubeconfig: Option<PathBuf>,
    created: Mutex<Vec<Created>>,
}

#[derive(Clone, Debug)]
enum Created {
    Namespace(String),
    Crd(String),
    /// A cluster-scoped object (namespaced ones go with their namespace).
    Object {
        resource: ApiResource,
        name: String,
    },
    Held {
        resource: ApiResource,
        namespace: Option<String>,
        name: String,
    },
}

/// A cluster with the default in-memory configuration, or the real one [`KUBECONFIG_ENV`] names.
pub async fn cluster() -> TestCluster {
    cluster_from_env(&[KUBECONFIG_ENV], MemoryConfig::default()).await
}

/// The real cluster whose kubeconfig the first non-empty variable of `kubeconfig_envs` names,
/// or else a fresh in-memory server started with `config`.
pub async fn cluster_from_env(kubeconfig_envs: &[&str], config: MemoryConfig) -> TestCluster {
    let kubeconfig = kubeconfig_envs
        .iter()
        .filter_map(std::env::var_os)
        .find(|path| !path.is_empty());
    match kubeconfig {
        Some(path) => {
            let path = PathBuf::from(path);
            let client = client_from_kubeconfig(&path).await;
            TestCluster {
                client,
                memory: None,
                kubeconfig: Some(path),
                created: Mutex::new(Vec::new()),
            }
        }
        None => {
            let server = MemoryServer::start(config);
            TestCluster {
                client: server.client(),
                memory: Some(server),
                kubeconfig: None,
                created: Mutex::new(Vec::new()),
            }
        }
    }
}

async fn client_from_kubeconfig(path: &std::path::Path) -> Client {
    let kubeconfig = Kubeconfig::read_from(path)
        .unwrap_or_else(|e| panic!("kubeconfig {}: {e}", path.display()));
    let mut config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .unwrap_or_else(|e| panic!("kubeconfig {}: {e}", path.display()));
    // The tests see every error the server sends: no retries behind their back.
    config.default_retry = false;
    Client::try_from(config).unwrap_or_else(|e| panic!("client for {}: {e}", path.display()))
}

impl TestCluster {
    pub fn is_memory(&self) -> bool {
        self.memory.is_some()
    }

    /// How long to wait for controllers (namespace, GC, CRD) to act. Real controllers take
    /// seconds; the embedded ones should be quick, so failures show up fast.
    pub fn deadline(&self) -> Duration {
        if self.is_memory() {
            Duration::from_secs(15)
        } else {
            Duration::from_secs(90)
        }
    }

    /// Create a uniquely named namespace, deleted when the cluster guard drops.
    pub async fn namespace(&self, prefix: &str) -> String {
        let name = unique(prefix);
        let ns: Namespace = serde_json::from_value(json!({
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": name, "labels": {TEST_LABEL: "test"}},
        }))
        .expect("namespace object");
        Api::<Namespace>::all(self.client.clone())
            .create(&PostParams::default(), &ns)
            .await
            .unwrap_or_else(|e| panic!("create namespace {name}: {e}"));
        self.track(Created::Namespace(name.clone()));
        name
    }

    /// Remember a namespace created by the test itself, to delete at the end.
    pub fn track_namespace(&self, name: &str) {
        self.track(Created::Namespace(name.to_string()));
    }

    /// Remember a CRD to delete at the end.
    pub fn track_crd(&self, name: &str) {
        self.track(Created::Crd(name.to_string()));
    }

    /// Remember a cluster-scoped object to delete at the end.
    pub fn track_cluster_object(&self, resource: &ApiResource, name: &str) {
        self.track(Created::Object {
            resource: resource.clone(),
            name: name.to_string(),
        });
    }

    /// Remember an object that carries finalizers nobody else will remove, so that cleanup
    /// strips them (otherwise it would hold its namespace or CRD forever).
    pub fn hold(&self, resource: &ApiResource, namespace: Option<&str>, name: &str) {
        self.track(Created::Held {
            resource: resource.clone(),
            namespace: namespace.map(str::to_string),
            name: name.to_string(),
        });
    }

    fn track(&self, created: Created) {
        self.created.lock().expect("cleanup list").push(created);
    }

    /// A kubeconfig file through which another process reaches this cluster: the real
    /// cluster's own, or (in-memory) one for the server served on a free loopback port, written
    /// into `dir`. Waits until the server accepts connections.
    pub async fn kubeconfig_file(&self, dir: &std::path::Path) -> PathBuf {
        let (Some(server), None) = (&self.memory, &self.kubeconfig) else {
            return self
                .kubeconfig
                .clone()
                .expect("a real cluster has a kubeconfig");
        };
        let addr = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("free loopback port");
        tokio::spawn(crate::serve(server.clone(), addr));
        let path = dir.join("kubeconfig");
        std::fs::write(&path, crate::kubeconfig_yaml(addr)).expect("kubeconfig");
        poll_until("server listening", Duration::from_secs(10), || async {
            tokio::net::TcpStream::connect(addr)
                .await
                .map(|_| ())
                .map_err(|e| e.to_string())
        })
        .await;
        path
    }

    /// A dynamic API for `resource` in `namespace` (or cluster-wide).
    pub fn dynamic(&self, resource: &ApiResource, namespace: Option<&str>) -> Api<DynamicObject> {
        match namespace {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, resource),
            None => Api::all_with(self.client.clone(), resource),
        }
    }
}

impl Drop for TestCluster {
    fn drop(&mut self) {
        let created = std::mem::take(&mut *self.created.lock().unwrap_or_else(|e| e.into_inner()));
        // The in-memory server disappears with the test: nothing to clean up.
        let Some(path) = self.kubeconfig.clone() else {
            return;
        };
        if created.is_empty() {
            return;
        }
        // Drop cannot await, and the test's runtime may be unwinding: clean up from a thread
        // with its own runtime and its own client.
        let worker = std::thread::spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            rt.block_on(async move {
                let client = client_from_kubeconfig(&path).await;
                cleanup(&client, created).await;
            });
        });
        let _ = worker.join();
    }
}

/// Best-effort cleanup: strip held finalizers, then delete CRDs and namespaces (without
/// waiting for them to finish terminating).
async fn cleanup(client: &Client, created: Vec<Created>) {
    let strip = Patch::Merge(json!({"metadata": {"finalizers": null}}));
    for item in &created {
        if let Created::Held {
            resource,
            namespace,
            name,
        } = item
        {
            let api: Api<DynamicObject> = match namespace {
                Some(ns) => Api::namespaced_with(client.clone(), ns, resource),
                None => Api::all_with(client.clone(), resource),
            };
            let _ = api.patch(name, &PatchParams::default(), &strip).await;
        }
    }
    for item in created.iter().rev() {
        match item {
            Created::Crd(name) => {
                let _ = Api::<CustomResourceDefinition>::all(client.clone())
                    .delete(name, &DeleteParams::background())
                    .await;
            }
            Created::Namespace(name) => {
                let _ = Api::<Namespace>::all(client.clone())
                    .delete(name, &DeleteParams::background())
                    .await;
            }
            Created::Object { resource, name } => {
                let _ = Api::<DynamicObject>::all_with(client.clone(), resource)
                    .delete(name, &DeleteParams::background())
                    .await;
            }
            Created::Held { .. } => {}
        }
    }
}

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// A DNS-1123 label `<prefix>-<suffix>`, unique across tests, processes and runs: the suffix
/// mixes the clock, the process id and a per-process counter.
pub fn unique(prefix: &str) -> String {
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let salt = (nanos as u64) ^ (u64::from(std::process::id()).rotate_left(32));
    let prefix: String = prefix
        .chars()
        .map(|c| c.to_ascii_lowercase())
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
        .take(40)
        .collect();
    let prefix = prefix.trim_matches('-');
    let prefix = if prefix.is_empty() { "t" } else { prefix };
    format!("{prefix}-{:08x}{n:x}", salt as u32)
}

/// Poll `check` with backoff (10 ms growing to 500 ms) until it returns `Ok`, and return that
/// value. `Err(state)` describes what was seen; at the deadline the test fails with `what` and
/// the last state.
pub async fn poll_until<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, String>>,
{
    let start = Instant::now();
    let mut delay = Duration::from_millis(10);
    loop {
        match check().await {
            Ok(value) => return value,
            Err(state) => {
                let elapsed = start.elapsed();
                if elapsed >= timeout {
                    panic!("timed out after {timeout:?} waiting for {what}; last seen: {state}");
                }
                tokio::time::sleep(delay.min(timeout - elapsed)).await;
                delay = (delay * 3 / 2).min(Duration::from_millis(500));
            }
        }
    }
}

/// The API error `Status` of `result`; fails the test when it succeeded or failed otherwise.
pub fn api_error<T: std::fmt::Debug>(result: kube::Result<T>, context: &str) -> Status {
    match result {
        Ok(value) => panic!("{context}: expected an API error, got success: {value:?}"),
        Err(kube::Error::Api(status)) => *status,
        Err(other) => panic!("{context}: expected an API error, got {other}"),
    }
}

/// Assert `result` failed with HTTP `code` and Status `reason`; returns the Status.
pub fn expect_status<T: std::fmt::Debug>(
    result: kube::Result<T>,
    code: u16,
    reason: &str,
    context: &str,
) -> Status {
    let status = api_error(result, context);
    assert_eq!(
        (status.code, status.reason.as_str()),
        (code, reason),
        "{context}: wrong error: {status:?}"
    );
    status
}

/// True when `result` is a 404 `NotFound` (the usual "gone" check while polling).
pub fn is_not_found<T>(result: &kube::Result<T>) -> bool {
    matches!(result, Err(kube::Error::Api(s)) if s.code == 404)
}

/// Removes all finalizers from ConfigMap `ns`/`name`.
pub async fn strip_finalizers(tc: &TestCluster, ns: &str, name: &str) {
    tc.dynamic(&configmaps(), Some(ns))
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await
        .expect("strip finalizers");
}

/// Wait until GET of `name` answers 404.
pub async fn wait_gone<K>(tc: &TestCluster, api: &Api<K>, name: &str, what: &str)
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned,
{
    poll_until(what, tc.deadline(), || async {
        match api.get(name).await {
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Ok(obj) => Err(format!(
                "still there: deletionTimestamp={:?} finalizers={:?}",
                obj.meta().deletion_timestamp,
                obj.meta().finalizers
            )),
            Err(e) => Err(format!("error: {e}")),
        }
    })
    .await
}

/// The ApiResource of a core/v1 or grouped built-in kind with a regular plural.
pub fn builtin(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

pub fn configmaps() -> ApiResource {
    builtin("", "v1", "ConfigMap", "configmaps")
}

/// A test CRD: `<plural>.<unique group>`, one served+stored version `v1`, an open schema.
#[derive(Clone, Debug)]
pub struct TestCrd {
    pub name: String,
    pub group: String,
    pub kind: String,
    pub plural: String,
    pub namespaced: bool,
    pub status_subresource: bool,
}

impl TestCrd {
    pub fn new(kind: &str, namespaced: bool, status_subresource: bool) -> TestCrd {
        let group = format!("{}.{TEST_GROUP_SUFFIX}", unique("g"));
        Self::in_group(&group, kind, namespaced, status_subresource)
    }

    pub fn in_group(group: &str, kind: &str, namespaced: bool, status_subresource: bool) -> Self {
        let plural = format!("{}s", kind.to_ascii_lowercase());
        TestCrd {
            name: format!("{plural}.{group}"),
            group: group.to_string(),
            kind: kind.to_string(),
            plural,
            namespaced,
            status_subresource,
        }
    }

    pub fn resource(&self) -> ApiResource {
        ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(&self.group, "v1", &self.kind),
            &self.plural,
        )
    }

    pub fn manifest(&self) -> CustomResourceDefinition {
        let mut version = json!({
            "name": "v1",
            "served": true,
            "storage": true,
            "schema": {"openAPIV3Schema": {
                "type": "object",
                "properties": {
                    "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                },
            }},
        });
        if self.status_subresource {
            version["subresources"] = json!({"status": {}});
        }
        serde_json::from_value(json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": self.name},
            "spec": {
                "group": self.group,
                "scope": if self.namespaced { "Namespaced" } else { "Cluster" },
                "names": {
                    "plural": self.plural,
                    "singular": self.kind.to_ascii_lowercase(),
                    "kind": self.kind,
                    "listKind": format!("{}List", self.kind),
                },
                "versions": [version],
            },
        }))
        .expect("CRD manifest")
    }

    /// Create the CRD (tracked for cleanup) without waiting.
    pub async fn create(&self, tc: &TestCluster) -> CustomResourceDefinition {
        let crd = Api::<CustomResourceDefinition>::all(tc.client.clone())
            .create(&PostParams::default(), &self.manifest())
            .await
            .unwrap_or_else(|e| panic!("create CRD {}: {e}", self.name));
        tc.track_crd(&self.name);
        crd
    }

    /// Create the CRD and wait for `Established=True`.
    pub async fn install(&self, tc: &TestCluster) -> ApiResource {
        self.create(tc).await;
        wait_established(tc, &self.name).await;
        self.resource()
    }

    /// A custom resource of this kind as JSON.
    pub fn object(
        &self,
        name: &str,
        namespace: Option<&str>,
        rest: serde_json::Value,
    ) -> DynamicObject {
        let mut value = json!({
            "apiVersion": format!("{}/v1", self.group),
            "kind": self.kind,
            "metadata": {"name": name},
        });
        if let Some(ns) = namespace {
            value["metadata"]["namespace"] = json!(ns);
        }
        if let (Some(target), Some(extra)) = (value.as_object_mut(), rest.as_object()) {
            for (k, v) in extra {
                if k == "metadata" {
                    if let (Some(meta), Some(extra_meta)) =
                        (target["metadata"].as_object_mut(), v.as_object())
                    {
                        meta.extend(extra_meta.clone());
                    }
                } else {
                    target.insert(k.clone(), v.clone());
                }
            }
        }
        serde_json::from_value(value).expect("custom resource")
    }
}

/// The status of condition `type_` on a CRD ("True"/"False"/"Unknown"), if present.
pub fn crd_condition(crd: &CustomResourceDefinition, type_: &str) -> Option<String> {
    crd.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| c.status.clone())
}

/// Wait until the CRD `name` has `Established=True`.
pub async fn wait_established(tc: &TestCluster, name: &str) {
    let crds = Api::<CustomResourceDefinition>::all(tc.client.clone());
    poll_until(
        &format!("CRD {name} Established"),
        tc.deadline(),
        || async {
            let crd = crds.get(name).await.map_err(|e| e.to_string())?;
            match crd_condition(&crd, "Established").as_deref() {
                Some("True") => Ok(()),
                other => Err(format!("Established={other:?}, status={:?}", crd.status)),
            }
        },
    )
    .await
}
