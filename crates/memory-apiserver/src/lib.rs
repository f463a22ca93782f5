//! An embedded, in-memory Kubernetes API server with real kube-apiserver semantics, for testing
//! kube-rs clients and controllers without a cluster.
//!
//! It answers the Kubernetes REST API in-process as a `tower::Service` (so a normal
//! [`kube::Client`] talks to it with no sockets, see [`MemoryServer::client`]) or over plain HTTP
//! on loopback ([`serve`], for kubectl or a process under test, with a [`kubeconfig`]). Its value
//! is fidelity (the crate's `README.md` lists what is implemented and what is not):
//! 404/409/410/422/403 where the real server sends them, finalizers that hold objects, namespace
//! and CRD lifecycles, garbage collection, server-side apply ownership, watch with bookmarks,
//! workload status as kube-controller-manager writes it on a control plane without nodes.
//! [`Faults`] injects errors and delays, and decides when finalizers are released.
//!
//! A controller test gets its client like this:
//!
//! ```
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kube::api::{Api, DeleteParams, Patch, PatchParams};
//! use memory_apiserver::{Config, FaultAction, FaultRule, MemoryServer};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), kube::Error> {
//! let server = MemoryServer::start(Config::default()); // inside a tokio runtime
//! let client: kube::Client = server.client();
//! let cms: Api<ConfigMap> = Api::namespaced(client, "default");
//!
//! let cm = serde_json::json!({
//!     "apiVersion": "v1", "kind": "ConfigMap",
//!     "metadata": {"name": "settings", "finalizers": ["example.com/cleanup"]},
//!     "data": {"mode": "fast"},
//! });
//! cms.patch("settings", &PatchParams::apply("my-controller"), &Patch::Apply(&cm))
//!     .await?;
//!
//! // As on a real cluster, nobody removes a finalizer the test's controller owns: DELETE only
//! // marks the object.
//! cms.delete("settings", &DeleteParams::default()).await?;
//! assert!(cms.get("settings").await?.metadata.deletion_timestamp.is_some());
//!
//! // The next patch of a ConfigMap gets a 503, once.
//! server.faults().add(FaultRule::new(FaultAction::Status(503)).verb("patch").kind("ConfigMap").times(1));
//! let refused = cms.patch("settings", &PatchParams::apply("my-controller"), &Patch::Apply(&cm)).await;
//! assert!(matches!(refused, Err(kube::Error::Api(s)) if s.code == 503));
//! # Ok(())
//! # }
//! ```
//!
//! Module map (one concept each):
//! - `store`: objects, global resourceVersion, watch history
//! - `resources` / `discovery`: served types and discovery documents
//! - `handler`: verb semantics (validation, finalizers, propagation, status, generation)
//! - `ssa` / `patch`: server-side apply and field ownership / other patch types
//! - `selectors`, `validation`, `schema`, `errors`: list filters, names & immutable
//!   fields, CRD structural schemas, `Status`
//! - `roundtrip`: what storage does to built-in objects (empty lists dropped), and what
//!   bumps their generation
//! - `router`: HTTP request → verb, the `tower::Service`, the loopback HTTP server
//! - `status_rules`: what kube-apiserver checks on writes to a Job's `/status`
//! - `watch`: watch streams; `controllers`: namespace, CRD, GC, workload status, fake
//!   finalizer operator
//! - [`faults`](Faults): fault injection; `rng`: seeded randomness

mod controllers;
mod discovery;
mod errors;
mod faults;
mod handler;
mod patch;
mod protobuf;
mod resources;
mod rng;
mod roundtrip;
mod router;
mod schema;
mod selectors;
mod ssa;
mod status_rules;
mod store;
#[cfg(test)]
mod test_support;
#[cfg(feature = "testing")]
pub mod testing;
mod validation;
mod watch;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use kube::config::{
    AuthInfo, Cluster, Context, Kubeconfig, NamedAuthInfo, NamedCluster, NamedContext,
};
use serde_json::json;
use tokio::sync::Notify;

pub use faults::{FaultAction, FaultId, FaultRule, Faults};

use handler::{State, Target, WriteOpts};
use store::Store;

/// Server configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// How long after creation a CRD becomes `Established=True` (its kind is served only then).
    /// Non-zero by default so clients must wait, like on a real cluster.
    pub establish_delay: Duration,
    /// Number of watch events kept; watching from an older resourceVersion gets 410 Gone.
    pub watch_history: usize,
    /// Interval of BOOKMARK events on watches that allow them.
    pub bookmark_interval: Duration,
    /// Seed for uids, generated names and fault probabilities.
    pub seed: u64,
    /// Namespaces that exist at start.
    pub namespaces: Vec<String>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            establish_delay: Duration::from_millis(50),
            watch_history: 10_000,
            bookmark_interval: Duration::from_secs(1),
            seed: 0x5eed,
            namespaces: ["default", "kube-system", "kube-public", "kube-node-lease"]
                .map(String::from)
                .to_vec(),
        }
    }
}

pub(crate) struct Shared {
    state: Mutex<State>,
    faults: Faults,
    config: Config,
    changed: Arc<Notify>,
}

impl Shared {
    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock must not take the whole server down.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Handle to a running in-memory API server (cheap to clone; all clones share the cluster).
#[derive(Clone)]
pub struct MemoryServer {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for MemoryServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryServer")
            .field("config", &self.shared.config)
            .finish_non_exhaustive()
    }
}

impl MemoryServer {
    /// Start a server: creates the initial namespaces and spawns the controllers. Must be called
    /// inside a tokio runtime.
    pub fn start(config: Config) -> MemoryServer {
        let changed = Arc::new(Notify::new());
        let mut state = State::new(
            Store::new(config.watch_history, changed.clone()),
            config.seed,
        );
        for ns in &config.namespaces {
            if let Some(info) = state.lookup("", "v1", "namespaces") {
                let t = Target {
                    info,
                    version: "v1".into(),
                    namespace: String::new(),
                    name: ns.clone(),
                    subresource: None,
                };
                let _ = state.create(
                    &t,
                    json!({"metadata": {"name": ns}}),
                    &WriteOpts {
                        default_manager: "kube-apiserver".into(),
                        ..Default::default()
                    },
                    false,
                );
            }
        }
        let shared = Arc::new(Shared {
            state: Mutex::new(state),
            faults: Faults::new(config.seed ^ 0xfa17),
            config,
            changed,
        });
        controllers::spawn(Arc::downgrade(&shared), shared.changed.clone());
        MemoryServer { shared }
    }

    /// A `kube::Client` talking to this server in-process (default namespace `default`).
    pub fn client(&self) -> kube::Client {
        kube::Client::new(router::ApiService::new(self.shared.clone()), "default")
    }

    /// The fault-injection and finalizer-behaviour handle.
    pub fn faults(&self) -> Faults {
        self.shared.faults.clone()
    }

    /// The configuration the server runs with.
    pub fn config(&self) -> &Config {
        &self.shared.config
    }

    /// The current global resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.shared.lock().store.rv()
    }
}

/// Serve `server` over plain HTTP/1.1 on `addr`, which must be a loopback address. Runs until
/// the listener fails.
pub async fn serve(server: MemoryServer, addr: SocketAddr) -> std::io::Result<()> {
    router::serve(server.shared.clone(), addr).await
}

/// Serve `server` on `addr` (loopback only, like [`serve`]) and, once the port is bound, write a
/// kubeconfig for it to `kubeconfig_out` (if given). Port 0 works: the kubeconfig names the bound
/// port. The file is written whole (write, then rename), so a reader polling for it never sees
/// half of it. Runs until the listener fails.
pub async fn serve_with_kubeconfig(
    server: MemoryServer,
    addr: SocketAddr,
    kubeconfig_out: Option<&Path>,
) -> std::io::Result<()> {
    if !addr.ip().is_loopback() {
        // Same refusal as `serve`, before anything is written.
        return serve(server, addr).await;
    }
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    if let Some(path) = kubeconfig_out {
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, kubeconfig_yaml(bound))?;
        std::fs::rename(&tmp, path)?;
    }
    router::serve_listener(server.shared.clone(), listener).await
}

/// The name of the cluster, user and context in [`kubeconfig`].
const KUBECONFIG_NAME: &str = "memory-apiserver";

/// A kubeconfig pointing kubectl (or any kube-rs program) at a server listening on `addr`
/// (plain HTTP, no credentials, namespace `default`).
pub fn kubeconfig(addr: SocketAddr) -> Kubeconfig {
    Kubeconfig {
        clusters: vec![NamedCluster {
            name: KUBECONFIG_NAME.into(),
            cluster: Some(Cluster {
                server: Some(format!("http://{addr}")),
                ..Default::default()
            }),
            ..Default::default()
        }],
        auth_infos: vec![NamedAuthInfo {
            name: KUBECONFIG_NAME.into(),
            auth_info: Some(AuthInfo::default()),
            ..Default::default()
        }],
        contexts: vec![NamedContext {
            name: KUBECONFIG_NAME.into(),
            context: Some(Context {
                cluster: KUBECONFIG_NAME.into(),
                user: Some(KUBECONFIG_NAME.into()),
                namespace: Some("default".into()),
                ..Default::default()
            }),
            ..Default::default()
        }],
        current_context: Some(KUBECONFIG_NAME.into()),
        api_version: Some("v1".into()),
        kind: Some("Config".into()),
        ..Default::default()
    }
}

/// [`kubeconfig`] as YAML, ready to be written to a file.
pub fn kubeconfig_yaml(addr: SocketAddr) -> String {
    // Serializing plain strings and options cannot fail.
    serde_saphyr::to_string(&kubeconfig(addr)).expect("a kubeconfig serializes to YAML")
}

#[cfg(test)]
mod tests {
    #[test]
    fn kubeconfig_yaml_reads_back_as_the_kubeconfig() {
        let addr = "127.0.0.1:6443".parse().unwrap();
        let yaml = super::kubeconfig_yaml(addr);
        let read = kube::config::Kubeconfig::from_yaml(&yaml).unwrap();
        let server = read.clusters[0]
            .cluster
            .as_ref()
            .and_then(|c| c.server.clone());
        assert_eq!(server.as_deref(), Some("http://127.0.0.1:6443"), "{yaml}");
        let context = read.contexts[0].context.as_ref().unwrap();
        assert_eq!(context.namespace.as_deref(), Some("default"), "{yaml}");
        assert_eq!(
            read.current_context.as_deref(),
            Some(read.contexts[0].name.as_str())
        );
        assert_eq!(read.auth_infos.len(), 1, "{yaml}");
    }
}
