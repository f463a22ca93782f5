//! What the benchmarks share: the cluster a benchmark runs against, a generated release, and
//! an installer's preparation of a bare cluster for a release (namespaces, the release's CRDs,
//! stand-ins for the kinds it uses but does not define).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use memory_apiserver::{Config, MemoryServer, kubeconfig_yaml, serve};

use cvo::cluster::Cluster;
use cvo::release::Release;
use cvo::sync::{SyncOptions, sync};

/// The cluster to measure against and its kubeconfig: with `CVO_BENCH_KUBECONFIG=FILE` that
/// real cluster, else a fresh embedded API server served on loopback (kept while the returned
/// server lives; its kubeconfig written into `dir`). Call it within a Tokio runtime.
pub fn cluster(dir: &Path) -> (Option<MemoryServer>, PathBuf) {
    if let Some(path) = std::env::var_os("CVO_BENCH_KUBECONFIG") {
        return (None, PathBuf::from(path));
    }
    let server = MemoryServer::start(Config::default());
    let addr: SocketAddr = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("port");
        l.local_addr().expect("addr")
    };
    let serving = server.clone();
    tokio::spawn(async move { serve(serving, addr).await });
    let path = dir.join("kubeconfig");
    std::fs::write(&path, kubeconfig_yaml(addr)).expect("kubeconfig");
    (Some(server), path)
}

/// How many manifests the generated release has: `BENCH_MANIFESTS` (for the 50,000 point:
/// `BENCH_MANIFESTS=50000`), else 5,000.
pub fn generated_size() -> usize {
    std::env::var("BENCH_MANIFESTS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(5_000)
}

/// A release of `n` ConfigMaps (40 components over 9 run levels, 10 documents per file) and
/// the 40 Namespaces they live in.
pub fn generated(n: usize) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut ns = String::new();
    for c in 0..40 {
        ns.push_str(&format!(
            "---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: ns-comp{c}\n"
        ));
    }
    std::fs::write(dir.path().join("0000_00_namespaces_00.yaml"), ns).expect("write");
    let per_file = 10;
    for file in 0..n.div_ceil(per_file) {
        let runlevel = 10 + (file % 9) * 10;
        let component = format!("comp{}", file % 40);
        let mut text = String::new();
        for doc in 0..per_file.min(n - file * per_file) {
            let i = file * per_file + doc;
            text.push_str(&format!(
                "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-{i}\n  namespace: ns-{component}\ndata:\n  key: value-{i}\n  config.yaml: |\n    replicas: 3\n    image: quay.io/example/app@sha256:{i:064}\n"
            ));
        }
        std::fs::write(
            dir.path()
                .join(format!("0000_{runlevel:02}_{component}_{file:05}.yaml")),
            text,
        )
        .expect("write");
    }
    dir
}

/// What an installer does before the release is applied, untimed: every namespace the release
/// uses, by server-side apply (OpenShift applies ConfigMaps into `openshift-config` at run
/// level 00, before its Namespace manifest); the release's CRDs (its `config.openshift.io`
/// custom resources come at run level 05, their CRDs at 10); and a stand-in CRD for each kind
/// it uses without defining it.
pub async fn install_prerequisites(client: &kube::Client, release: &Release) {
    let mut namespaces = std::collections::BTreeSet::new();
    for m in &release.manifests {
        if let Some(ns) = m.id.namespace.as_deref() {
            namespaces.insert(ns.to_owned());
        }
    }
    let nss: kube::Api<k8s_openapi::api::core::v1::Namespace> = kube::Api::all(client.clone());
    for ns in &namespaces {
        let body =
            serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
        nss.patch(
            ns,
            &kube::api::PatchParams::apply("installer"),
            &kube::api::Patch::Apply(&body),
        )
        .await
        .expect("namespace");
    }
    let mut crds = release.clone();
    crds.manifests
        .retain(|m| m.id.kind == "CustomResourceDefinition" && !m.is_delete());
    let bootstrap = Cluster::new(client.clone());
    let options = SyncOptions {
        install_timeout: Duration::from_secs(60),
        ..SyncOptions::default()
    };
    sync(&bootstrap, &crds, &options, |_| {})
        .await
        .expect("CRDs");
    stand_in_crds(&bootstrap, release).await;
}

/// Kinds the release uses whose CRDs it does not ship (OpenShift's ClusterOperator, the
/// monitoring stack's ServiceMonitor, …) exist on a real cluster before the release is
/// applied: install a schemaless stand-in CRD for each, untimed.
async fn stand_in_crds(cluster: &Cluster, release: &Release) {
    use kube::api::{Api, PostParams};
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
        Api::all(cluster.client().clone());
    let mut seen = std::collections::BTreeSet::new();
    for m in &release.manifests {
        let (group, version) = m
            .api_version
            .rsplit_once('/')
            .unwrap_or(("", &m.api_version));
        if group.is_empty() || !seen.insert((m.api_version.clone(), m.id.kind.clone())) {
            continue;
        }
        if cluster
            .discovery()
            .resolve(&m.api_version, &m.id.kind)
            .await
            .is_ok()
        {
            continue;
        }
        let lower = m.id.kind.to_ascii_lowercase();
        let plural = match lower.strip_suffix('y') {
            Some(stem) => format!("{stem}ies"),
            None if lower.ends_with('s') => format!("{lower}es"),
            None => format!("{lower}s"),
        };
        let crd = serde_json::json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": format!("{plural}.{group}"),
                // A real server protects *.k8s.io groups; this is a stand-in.
                "annotations": {"api-approved.kubernetes.io": "unapproved, benchmark stand-in"}},
            "spec": {"group": group, "scope": if m.id.namespace.is_some() { "Namespaced" } else { "Cluster" },
                "names": {"plural": plural, "singular": lower, "kind": m.id.kind, "listKind": format!("{}List", m.id.kind)},
                "versions": [{"name": version, "served": true, "storage": true,
                    "subresources": {"status": {}},
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}});
        match crds
            .create(
                &PostParams::default(),
                &serde_json::from_value(crd).expect("crd"),
            )
            .await
        {
            Ok(_) => {
                let _ = cvo::cluster::crd::wait_established(
                    cluster.client(),
                    &format!("{plural}.{group}"),
                    Duration::from_secs(10),
                )
                .await;
            }
            Err(e) => eprintln!("stand-in CRD for {} {}: {e}", m.api_version, m.id.kind),
        }
    }
}
