//! An embedded, in-memory Kubernetes API server with real kube-apiserver semantics.
//!
//! It answers the Kubernetes REST API in-process as a `tower::Service` (so a normal
//! [`kube::Client`] talks to it with no sockets, see [`MemoryServer::client`]) or over plain HTTP
//! on loopback ([`serve`], for kubectl and `cvo dev-apiserver`). Its value is fidelity to
//! `docs/in-memory-apiserver.md` / DESIGN.md §3: 404/409/410/422/403 where the real server sends
//! them, finalizers that hold objects, namespace and CRD lifecycles, garbage collection,
//! server-side apply ownership, watch with bookmarks.
//!
//! Module map (one concept each):
//! - [`store`]: objects, global resourceVersion, watch history
//! - [`resources`] / [`discovery`]: served types and discovery documents
//! - [`handler`]: verb semantics (validation, finalizers, propagation, status, generation)
//! - [`ssa`] / [`patch`]: server-side apply and field ownership / other patch types
//! - [`selectors`], [`validation`], [`schema`], [`errors`]: list filters, names & immutable
//!   fields, CRD structural schemas, `Status`
//! - [`roundtrip`]: what storage does to built-in objects (empty lists dropped), and what
//!   bumps their generation
//! - [`router`]: HTTP request → verb, the `tower::Service`, the loopback HTTP server
//! - [`status_rules`]: what kube-apiserver checks on writes to a Job's `/status`
//! - [`watch`]: watch streams; [`controllers`]: namespace, CRD, GC, workload status, fake
//!   finalizer operator
//! - [`faults`]: fault injection; [`rng`]: seeded randomness

pub mod controllers;
pub mod discovery;
pub mod errors;
pub mod faults;
pub mod handler;
pub mod patch;
pub mod resources;
pub mod rng;
pub mod roundtrip;
pub mod router;
pub mod schema;
pub mod selectors;
pub mod ssa;
pub mod status_rules;
pub mod store;
#[cfg(test)]
pub(crate) mod test_support;
pub mod validation;
pub mod watch;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

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

/// Everything `cvo dev-apiserver --listen ADDR [--kubeconfig-out FILE]` does: check the address
/// is loopback, start a server, write the kubeconfig (if asked) once the port is bound, and serve
/// until the listener fails. The CLI only parses flags and calls this.
pub async fn dev_apiserver(
    config: Config,
    addr: SocketAddr,
    kubeconfig_out: Option<&std::path::Path>,
) -> std::io::Result<()> {
    if !addr.ip().is_loopback() {
        // Same refusal as `serve`, before anything is written.
        return serve(MemoryServer::start(config), addr).await;
    }
    let server = MemoryServer::start(config);
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    if let Some(path) = kubeconfig_out {
        // Write-then-rename, so a reader polling for the file never sees half of it.
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, kubeconfig_yaml(bound))?;
        std::fs::rename(&tmp, path)?;
    }
    router::serve_listener(server.shared.clone(), listener).await
}

/// A kubeconfig pointing kubectl (or `cvo --kubeconfig`) at a server listening on `addr`.
pub fn kubeconfig_yaml(addr: SocketAddr) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: cvo-memory\n  cluster:\n    server: http://{addr}\ncontexts:\n- name: cvo-memory\n  context:\n    cluster: cvo-memory\n    user: cvo-memory\n    namespace: default\ncurrent-context: cvo-memory\nusers:\n- name: cvo-memory\n  user: {{}}\npreferences: {{}}\n"
    )
}
