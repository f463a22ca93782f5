//! The support module of every integration test binary (`mod common;`, or
//! `#[path = "../common/mod.rs"] mod common;` in a `tests/<area>/main.rs`), and the one way
//! integration tests get a cluster. Its parts: [`cli`] (the `cvo` binary with one scrubbed
//! environment), [`release`] (release directories and ConfigMap manifests), [`example`]
//! (manifests-example on a cluster, and with OpenShift's own CRDs), [`report`] (what a
//! sync did), [`graph`] (an update service on loopback), [`olm`] (OLM's CRDs and CSVs),
//! [`lifecycle`] (the shipped lifecycle component), [`operator`] (`cvo operator` processes
//! and the operator tests' `Env`), [`registry`] (a real OCI registry on loopback), [`token`]
//! (a token server for its bearer-token auth), [`needs`] (what a test needs that a plain
//! `cargo test` may not have: such tests are `#[ignore]`d with the reason).
//!
//! [`cluster`] returns a [`TestCluster`] (the embedded server's `memory_apiserver::testing`):
//! by default a fresh embedded in-memory API server, or, when the environment variable
//! `CVO_TEST_KUBECONFIG` names a kubeconfig file, a client for that real cluster. Tests only
//! ever use `TestCluster::client`, so the same test runs against both. `testing` also gives
//! [`unique`] names, [`poll_until`] (polling with backoff up to a deadline: tests never sleep a
//! fixed time to wait for state), assertions on API errors, small CRD helpers, and the cleanup
//! guard (namespaces, CRDs and held finalizers are removed when the `TestCluster` drops).
#![allow(dead_code)]

pub mod cli;
pub mod dockerfile;
pub mod example;
pub mod graph;
pub mod lifecycle;
pub mod needs;
pub mod olm;
pub mod operator;
pub mod registry;
pub mod release;
pub mod report;
pub mod steps;
pub mod token;

// Shortcuts to what most tests use; each test binary uses some of them.
#[allow(unused_imports)]
pub use olm::ensure_olm_crds;
#[allow(unused_imports)]
pub use release::{DELETE_ANNOTATION, configmap, release, release_metadata, write_release};

// The cluster guard, polling, API-error and CRD helpers: the embedded server's test support,
// shared with its own semantics suite.
pub use memory_apiserver::testing::*;

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, PostParams};
use memory_apiserver::Config as MemoryConfig;
use serde_json::json;

/// Environment variable naming a kubeconfig: run against that cluster instead of in-memory.
pub const KUBECONFIG_ENV: &str = "CVO_TEST_KUBECONFIG";

/// A cluster with the default in-memory configuration (or the real one, see the module doc).
pub async fn cluster() -> TestCluster {
    cluster_with(MemoryConfig::default()).await
}

/// The embedded in-memory server, even when `CVO_TEST_KUBECONFIG` names a real cluster: for a
/// case a shared real cluster cannot hold (a kind that must not be served, where other tests
/// and the cluster itself install it). The test runs, on this server, in both passes.
pub async fn memory_cluster() -> TestCluster {
    cluster_from_env(&[], MemoryConfig::default()).await
}

/// Like [`cluster`], with a custom in-memory configuration; `config` is ignored on a real
/// cluster.
pub async fn cluster_with(config: MemoryConfig) -> TestCluster {
    cluster_from_env(&[KUBECONFIG_ENV], config).await
}

/// Sync options whose retries start after `initial`, so tests do not wait long. They walk
/// the run-level graph once (`Mode::Updating`) whatever the ClusterVersion says, as most
/// engine tests are about update ordering; install-mode tests set `mode` back to `None`.
pub fn sync_options(initial: Duration) -> cvo::sync::SyncOptions {
    cvo::sync::SyncOptions {
        apply: cvo::apply::Options {
            retry: cvo::apply::RetryPolicy {
                initial,
                ..Default::default()
            },
            ..cvo::apply::Options::default()
        },
        mode: Some(cvo::sync::Mode::Updating),
        ..cvo::sync::SyncOptions::default()
    }
}

/// Runs `cvo --kubeconfig FILE ARGS…` off the runtime (the in-memory server must keep
/// answering it): exit code, stdout, stderr. Stdin is not a terminal.
pub async fn run_cvo(kubeconfig: &std::path::Path, args: &[&str]) -> (i32, String, String) {
    let kubeconfig = kubeconfig.to_owned();
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    tokio::task::spawn_blocking(move || {
        let out = cli::cvo()
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args(&args)
            .write_stdin("")
            .output()
            .expect("run cvo");
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    })
    .await
    .expect("join")
}

/// A fault injected between a client and its cluster, so that fault tests run against the
/// real server too: requests with this HTTP method whose path contains `path` are answered
/// by the test itself with `status` (a Kubernetes `Status` body), `times` times (or always).
#[derive(Clone, Debug)]
pub struct Fault {
    pub method: &'static str,
    pub path: String,
    pub status: u16,
    pub retry_after_secs: Option<u32>,
    pub times: Option<usize>,
}

impl Fault {
    pub fn new(method: &'static str, path: impl Into<String>, status: u16) -> Self {
        Fault {
            method,
            path: path.into(),
            status,
            retry_after_secs: None,
            times: None,
        }
    }

    pub fn times(mut self, n: usize) -> Self {
        self.times = Some(n);
        self
    }

    pub fn retry_after(mut self, secs: u32) -> Self {
        self.retry_after_secs = Some(secs);
        self
    }
}

/// `inner` with `faults` injected (see [`Fault`]).
pub fn faulty_client(inner: Client, faults: Vec<Fault>) -> Client {
    let faults = std::sync::Arc::new(Mutex::new(faults));
    let service = tower::service_fn(move |req: http::Request<kube::client::Body>| {
        let inner = inner.clone();
        let faults = faults.clone();
        async move {
            let hit = {
                let mut faults = faults.lock().unwrap_or_else(|e| e.into_inner());
                let path = req.uri().path();
                faults
                    .iter_mut()
                    .find(|f| {
                        f.method == req.method().as_str()
                            && path.contains(&f.path)
                            && f.times != Some(0)
                    })
                    .map(|f| {
                        f.times = f.times.map(|n| n - 1);
                        f.clone()
                    })
            };
            let Some(fault) = hit else {
                return inner.send(req).await;
            };
            let body = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                "message": format!("injected by the test: {} {}", fault.method, fault.path),
                "reason": "InjectedFault", "code": fault.status,
                "details": {"retryAfterSeconds": fault.retry_after_secs}});
            let mut response = http::Response::builder()
                .status(fault.status)
                .header("content-type", "application/json");
            if let Some(secs) = fault.retry_after_secs {
                response = response.header("retry-after", secs.to_string());
            }
            Ok::<_, kube::Error>(
                response
                    .body(kube::client::Body::from(body.to_string().into_bytes()))
                    .expect("response"),
            )
        }
    });
    Client::new(service, "default")
}

/// One test at a time (per test binary) may use the cluster-wide `ClusterVersion version`.
static CLUSTER_VERSION: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// For tests of ClusterVersion status: holds the per-binary lock, makes sure the
/// `config.openshift.io` ClusterVersion kind is served (a stand-in CRD, left in place on a real
/// cluster so that the next test does not race its deletion) and that no `version` object
/// exists yet. Returns the guard and the kind's API resource. The test deletes `version` when
/// it is done, so that later test binaries on a real cluster see no ClusterVersion.
pub async fn cluster_version(
    tc: &TestCluster,
) -> (tokio::sync::MutexGuard<'static, ()>, ApiResource) {
    let guard = CLUSTER_VERSION.lock().await;
    let resource = openshift_kind(tc, "ClusterVersion").await;
    let cvs = tc.dynamic(&resource, None);
    if cvs.get_opt("version").await.expect("get cv").is_some() {
        cvs.delete("version", &DeleteParams::default())
            .await
            .expect("delete cv");
        wait_gone(tc, &cvs, "version", "ClusterVersion version").await;
    }
    (guard, resource)
}

/// Makes sure the cluster-scoped `config.openshift.io/v1` kind `kind` (with a status
/// subresource) is served, through a stand-in CRD left in place on a real cluster (another
/// test may be using it), and returns its API resource.
pub async fn openshift_kind(tc: &TestCluster, kind: &str) -> ApiResource {
    let crd = TestCrd::in_group("config.openshift.io", kind, false, true);
    let crds = Api::<CustomResourceDefinition>::all(tc.client.clone());
    if crds.get_opt(&crd.name).await.expect("get CRD").is_none() {
        match crds.create(&PostParams::default(), &crd.manifest()).await {
            Ok(_) => {}
            // Another test of this binary created it first.
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => panic!("create the {kind} CRD: {e}"),
        }
    }
    wait_established(tc, &crd.name).await;
    // A real server's discovery lags behind Established.
    cvo::cluster::Discovery::new(tc.client.clone())
        .resolve_within("config.openshift.io/v1", kind, tc.deadline())
        .await
        .unwrap_or_else(|e| panic!("{kind} not served: {e}"));
    crd.resource()
}

/// FeatureGate `cluster`'s API (the stand-in kind served), with no FeatureGate `cluster` left
/// by an earlier, interrupted test. Hold the ClusterVersion lock: the object is cluster-wide.
pub async fn feature_gates(tc: &TestCluster) -> kube::Api<DynamicObject> {
    let fgs = tc.dynamic(&openshift_kind(tc, "FeatureGate").await, None);
    remove_feature_gate(tc, &fgs).await;
    fgs
}

/// Deletes FeatureGate `cluster` (through `fgs`) and waits until it is gone; nothing when
/// absent.
pub async fn remove_feature_gate(tc: &TestCluster, fgs: &kube::Api<DynamicObject>) {
    match fgs.delete("cluster", &DeleteParams::default()).await {
        Ok(_) => wait_gone(tc, fgs, "cluster", "FeatureGate cluster").await,
        Err(kube::Error::Api(s)) if s.code == 404 => {}
        Err(e) => panic!("delete FeatureGate cluster: {e}"),
    }
}

/// Creates FeatureGate `cluster` (empty spec) with `status.featureGates` = `entries`.
pub async fn create_feature_gate(fgs: &kube::Api<DynamicObject>, entries: serde_json::Value) {
    let fg: DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": "config.openshift.io/v1", "kind": "FeatureGate",
        "metadata": {"name": "cluster"}, "spec": {}}))
    .expect("FeatureGate object");
    fgs.create(&PostParams::default(), &fg)
        .await
        .expect("create FeatureGate cluster");
    fgs.patch_status(
        "cluster",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(serde_json::json!({"status": {"featureGates": entries}})),
    )
    .await
    .expect("FeatureGate status");
}

/// For every test that runs a sync on a cluster shared with other tests of its binary: a sync
/// reads and writes the cluster-wide `ClusterVersion version`, so it must not run while
/// another test owns that object. Holds the same lock as [`cluster_version`] and makes sure no
/// `version` exists.
pub async fn sync_turn(tc: &TestCluster) -> tokio::sync::MutexGuard<'static, ()> {
    cluster_version(tc).await.0
}

/// Creates `ClusterVersion version` (no status yet) and returns the kind's API.
pub async fn create_cluster_version(
    tc: &TestCluster,
    resource: &ApiResource,
) -> Api<DynamicObject> {
    let cvs = tc.dynamic(resource, None);
    let cv: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "config.openshift.io/v1", "kind": "ClusterVersion",
        "metadata": {"name": "version"}, "spec": {"clusterID": "x"}}))
    .expect("cv");
    cvs.create(&PostParams::default(), &cv)
        .await
        .expect("create cv");
    cvs
}

/// The condition `type_` of a ClusterVersion object's status, if it has one.
pub fn cv_condition<'a>(cv: &'a DynamicObject, type_: &str) -> Option<&'a serde_json::Value> {
    cv.data["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

/// The condition `type_` of the stored `ClusterVersion version`, as `(status, reason,
/// message)`; an error (for [`poll_until`]) when it cannot be read or has no such condition.
pub async fn stored_condition(
    cvs: &Api<DynamicObject>,
    type_: &str,
) -> Result<(String, String, String), String> {
    let cv = cvs.get("version").await.map_err(|e| e.to_string())?;
    let found =
        cv_condition(&cv, type_).ok_or_else(|| format!("no {type_} in {}", cv.data["status"]))?;
    let text = |k: &str| found[k].as_str().unwrap_or_default().to_owned();
    Ok((text("status"), text("reason"), text("message")))
}

/// Waits up to `timeout` until the stored `ClusterVersion version` says `Upgradeable=False`
/// (then check what it says with [`assert_gate_closed`]).
pub async fn gate_closed(cvs: &Api<DynamicObject>, timeout: Duration) {
    poll_until(
        "Upgradeable=False in the stored ClusterVersion",
        timeout,
        || async {
            match stored_condition(cvs, "Upgradeable").await? {
                (status, ..) if status == "False" => Ok(()),
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await
}

/// Asserts that the stored `ClusterVersion version` keeps the gate closed for `object`
/// (`kind ns/name`): `Upgradeable=False ResourceDeletionInProgress` naming it, and
/// `Progressing=True` working towards `version`.
pub async fn assert_gate_closed(cvs: &Api<DynamicObject>, object: &str, version: &str) {
    let (status, reason, message) = stored_condition(cvs, "Upgradeable")
        .await
        .expect("Upgradeable");
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "ResourceDeletionInProgress"),
        "{message}"
    );
    assert!(
        message.contains(&format!("Deletion in progress: {object}")),
        "{message}"
    );
    let (status, _, message) = stored_condition(cvs, "Progressing")
        .await
        .expect("Progressing");
    assert_eq!(status, "True", "{message}");
    assert!(
        message.starts_with(&format!("Working towards {version}: ")),
        "{message}"
    );
}

/// `inner`, counting the requests that may write (every method but GET).
pub fn counting_client(inner: Client) -> (Client, std::sync::Arc<AtomicU64>) {
    let count = std::sync::Arc::new(AtomicU64::new(0));
    let counter = count.clone();
    let service = tower::service_fn(move |req: http::Request<kube::client::Body>| {
        let inner = inner.clone();
        if req.method() != http::Method::GET {
            counter.fetch_add(1, Ordering::Relaxed);
        }
        async move { inner.send(req).await }
    });
    (Client::new(service, "default"), count)
}

/// `inner`, recording every request as `METHOD path` in order (`METHOD path (dry run)` for a
/// server-side dry run).
pub fn recording_client(inner: Client) -> (Client, std::sync::Arc<Mutex<Vec<String>>>) {
    let log = std::sync::Arc::new(Mutex::new(Vec::new()));
    let writer = log.clone();
    let service = tower::service_fn(move |req: http::Request<kube::client::Body>| {
        let inner = inner.clone();
        writer
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(format!(
                "{} {}{}",
                req.method(),
                req.uri().path(),
                if req.uri().query().is_some_and(|q| q.contains("dryRun=All")) {
                    " (dry run)"
                } else {
                    ""
                }
            ));
        async move { inner.send(req).await }
    });
    (Client::new(service, "default"), log)
}

/// GET `path` on loopback `port` (HTTP/1.0, so the server closes): status code and body.
pub async fn http_get(port: u16, path: &str) -> Result<(u16, String), String> {
    http_get_addr(([127, 0, 0, 1], port).into(), path).await
}

/// GET `path` on `addr` (HTTP/1.0, so the server closes): status code and body.
pub async fn http_get_addr(
    addr: std::net::SocketAddr,
    path: &str,
) -> Result<(u16, String), String> {
    let path = path.to_owned();
    tokio::task::spawn_blocking(move || {
        use std::io::{Read, Write};
        let mut stream = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(5))
            .map_err(|e| format!("connect: {e}"))?;
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .map_err(|e| e.to_string())?;
        stream
            .write_all(format!("GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").as_bytes())
            .map_err(|e| format!("send: {e}"))?;
        let mut response = String::new();
        stream
            .read_to_string(&mut response)
            .map_err(|e| format!("read: {e}"))?;
        let code = response
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .ok_or_else(|| format!("no status line: {response:?}"))?;
        let body = response
            .split_once("\r\n\r\n")
            .map(|(_, b)| b.to_owned())
            .unwrap_or_default();
        Ok((code, body))
    })
    .await
    .map_err(|e| e.to_string())?
}

/// A dynamic object from JSON.
pub fn object(v: serde_json::Value) -> DynamicObject {
    serde_json::from_value(v).expect("object")
}

/// Whether `text` holds the HTTP status `code` (e.g. `"422"`) as a number of its own (an API
/// server's refusal), not as digits of another number (`"next_pass_in":"169.204224804s"` once
/// failed a plain `contains("422")`).
pub fn mentions_status(text: &str, code: &str) -> bool {
    let part_of_number = |c: char| c.is_ascii_digit() || c == '.';
    text.match_indices(code).any(|(i, _)| {
        !text[..i].chars().next_back().is_some_and(part_of_number)
            && !text[i + code.len()..]
                .chars()
                .next()
                .is_some_and(part_of_number)
    })
}
