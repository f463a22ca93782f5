//! What the steps look at on the node: images built from the Dockerfile and imported into the
//! node's containerd, the operator's Pod (readiness, restarts, events, logs, its endpoints on
//! the pod network), API-server faults, and a container's memory from its cgroup.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use kube::api::{Api, ListParams, LogParams};

use crate::Tier;
use crate::common;

/// The operator's namespace, Deployment and pod label (manifests-example).
pub const NAMESPACE: &str = "cluster-version";
pub const DEPLOYMENT: &str = "cvo-operator";
pub const SELECTOR: &str = "app.kubernetes.io/name=cvo-operator";
/// The operator's metrics/probe port.
pub const PORT: u16 = 9099;

/// Warning events that are not the pod's doing, by reason and a part of their message:
/// - kubelet has no cluster DNS address: the test node has none (start-node.sh), so every pod
///   with the default `dnsPolicy` gets it;
/// - the service-account volume (`kube-api-access-…`) waits for its namespace's
///   `kube-root-ca.crt`, which kube-controller-manager publishes a moment after the namespace
///   is created — the release creates the namespace and the Deployment in one pass, so a
///   first pod can be scheduled first; kubelet retries the mount (and the pod starts).
/// - the node controller's `NodeNotReady` on every pod of a node that missed heartbeats
///   (after an API-server outage).
const NOT_THE_POD: &[(&str, &str)] = &[
    ("MissingClusterDNS", ""),
    ("NodeNotReady", ""),
    ("FailedMount", "volume \"kube-api-access-"),
];

/// Builds the image the Dockerfile's final stage describes, holding `binary` and `release`,
/// as `name`, and imports it into the node.
pub fn build_operator_image(tier: &Tier, name: &str, release: &Path) {
    fresh_release_binary(&tier.cvo_release);
    let binary = stripped(tier, &tier.cvo_release, "cvo");
    let args = common::dockerfile::final_stage_args(&binary, release)
        .unwrap_or_else(|e| panic!("the Dockerfile's final stage: {e}"));
    image_py(tier, name, &args);
}

/// `binary` without its symbols and debug information, as `name` in the tier's work directory
/// (made once per run: the images share it): a test build's binary is mostly debug
/// information, which an image need not carry.
fn stripped(tier: &Tier, binary: &Path, name: &str) -> PathBuf {
    let out = tier.work.path().join(name);
    if !out.exists() {
        let status = std::process::Command::new("strip")
            .arg("-o")
            .arg(&out)
            .arg(binary)
            .status()
            .expect("run strip");
        assert!(status.success(), "strip {}", binary.display());
    }
    out
}

/// Builds the stand-in image `name` (this test binary, stripped, run as [`crate::standin`]).
pub fn build_standin_image(tier: &Tier, name: &str) {
    let exe = std::env::current_exe().expect("current exe");
    let stripped = stripped(tier, &exe, "standin");
    let args = [
        format!("--binary={}:/usr/local/bin/standin", stripped.display()),
        "--entrypoint=standin".to_owned(),
        format!("--env={}=1", crate::standin::ENV),
    ];
    image_py(tier, name, &args);
}

fn image_py(tier: &Tier, name: &str, args: &[String]) {
    let out = std::process::Command::new("python3")
        .arg(tier.realk8s.join("image.py"))
        .arg(format!("--name={name}"))
        .args(args)
        .arg("--import")
        .arg(format!("--ctr={}", tier.ctr.display()))
        .arg(format!("--address={}", tier.containerd))
        .output()
        .expect("run image.py");
    assert!(
        out.status.success(),
        "image.py {name} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Fails unless `binary` exists and is newer than every source file it is built from: the
/// image must hold the code under test (`cargo build --release --locked` first).
fn fresh_release_binary(binary: &Path) {
    let built = std::fs::metadata(binary)
        .and_then(|m| m.modified())
        .unwrap_or_else(|e| {
            panic!(
                "{}: {e}: build it first with `cargo build --release --locked`",
                binary.display()
            )
        });
    let root = Path::new(common::dockerfile::ROOT);
    // (Cargo.toml and Cargo.lock are left out: a change of dev-dependencies alone does not
    // rebuild the binary, so its time would stay older for good.)
    let newest = ["src", "crates"]
        .iter()
        .filter_map(|p| newest_file(&root.join(p)))
        .max_by_key(|(t, _)| *t);
    if let Some((changed, path)) = newest {
        assert!(
            changed <= built,
            "{} is older than {}: rebuild it with `cargo build --release --locked`",
            binary.display(),
            path.display()
        );
    }
}

/// The most recently modified file under `path` (itself if a file).
fn newest_file(path: &Path) -> Option<(SystemTime, PathBuf)> {
    let meta = std::fs::metadata(path).ok()?;
    if !meta.is_dir() {
        return Some((meta.modified().ok()?, path.to_owned()));
    }
    std::fs::read_dir(path)
        .ok()?
        .filter_map(Result::ok)
        .filter(|e| e.file_name() != "target")
        .filter_map(|e| newest_file(&e.path()))
        .max_by_key(|(t, _)| *t)
}

/// `fault.sh ACTION kube-apiserver` on the test cluster (`start` waits until it is ready).
pub fn apiserver(tier: &Tier, action: &str) {
    let out = std::process::Command::new(tier.realk8s.join("fault.sh"))
        .args([action, "kube-apiserver"])
        .output()
        .expect("run fault.sh");
    assert!(
        out.status.success(),
        "fault.sh {action} kube-apiserver: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Waits until the node is back after an API-server outage that ended at `since`: its kubelet
/// renewed its Lease after `since` (it reaches the API server again; the node controller may
/// still mark it NotReady for the heartbeats it missed, and kubelet then reports it Ready), and
/// the node is Ready without the `not-ready`/`unreachable` taints.
pub async fn node_back(tier: &Tier, since: jiff::Timestamp, timeout: Duration) {
    let nodes: Api<Node> = Api::all(tier.client.clone());
    let leases: Api<Lease> = Api::namespaced(tier.client.clone(), "kube-node-lease");
    let started = std::time::Instant::now();
    common::poll_until("the node back", timeout, || async {
        let list = nodes
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?;
        if list.items.is_empty() {
            return Err("no node".to_owned());
        }
        for n in &list.items {
            let name = n.metadata.name.clone().unwrap_or_default();
            let renewed = leases
                .get_opt(&name)
                .await
                .map_err(|e| e.to_string())?
                .and_then(|l| l.spec?.renew_time)
                .is_some_and(|t| t.0 > since);
            let ready = n
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
            let tainted = n
                .spec
                .as_ref()
                .and_then(|s| s.taints.as_ref())
                .is_some_and(|t| {
                    t.iter().any(|t| {
                        t.key == "node.kubernetes.io/not-ready"
                            || t.key == "node.kubernetes.io/unreachable"
                    })
                });
            if !renewed || !ready || tainted {
                return Err(format!(
                    "{name}: lease renewed {renewed}, ready {ready}, tainted {tainted}"
                ));
            }
        }
        Ok(())
    })
    .await;
    println!("node back after {:?}", started.elapsed());
}

/// Waits until the operator's Deployment has rolled out: every replica updated and
/// available, and exactly one operator pod, Ready and not terminating; returns that pod.
pub async fn rolled_out(tier: &Tier, timeout: Duration) -> Pod {
    let deployments: Api<Deployment> = Api::namespaced(tier.client.clone(), NAMESPACE);
    let pods: Api<Pod> = Api::namespaced(tier.client.clone(), NAMESPACE);
    common::poll_until("the operator's Deployment rolled out", timeout, || async {
        let d = deployments
            .get(DEPLOYMENT)
            .await
            .map_err(|e| e.to_string())?;
        let status = d.status.clone().unwrap_or_default();
        let want = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
        let done = status.observed_generation >= d.metadata.generation
            && status.updated_replicas == Some(want)
            && status.available_replicas == Some(want)
            && status.replicas == Some(want);
        let list = pods
            .list(&ListParams::default().labels(SELECTOR))
            .await
            .map_err(|e| e.to_string())?;
        let live: Vec<Pod> = list
            .items
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .collect();
        match &live[..] {
            [pod] if done && ready(pod) => Ok(pod.clone()),
            _ => Err(format!(
                "deployment status {status:?}; pods {:?}",
                live.iter().map(summary).collect::<Vec<_>>()
            )),
        }
    })
    .await
}

/// Whether `pod` is Ready.
pub fn ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Name, phase, readiness and restarts, for failure messages.
pub fn summary(pod: &Pod) -> String {
    format!(
        "{} {} ready={} restarts={}",
        pod.metadata.name.as_deref().unwrap_or("?"),
        pod.status
            .as_ref()
            .and_then(|s| s.phase.as_deref())
            .unwrap_or("?"),
        ready(pod),
        restarts(pod)
    )
}

/// Restarts of every container of `pod` (init containers included).
pub fn restarts(pod: &Pod) -> i32 {
    let status = pod.status.clone().unwrap_or_default();
    status
        .container_statuses
        .iter()
        .flatten()
        .chain(status.init_container_statuses.iter().flatten())
        .map(|c| c.restart_count)
        .sum()
}

/// The pod's address on the pod network (reachable from this machine, the node).
pub fn address(pod: &Pod, port: u16) -> SocketAddr {
    let ip = pod
        .status
        .as_ref()
        .and_then(|s| s.pod_ip.as_deref())
        .unwrap_or_else(|| panic!("{} has no IP", summary(pod)));
    SocketAddr::new(ip.parse().expect("pod IP"), port)
}

/// GET `path` on the pod: status code and body.
pub async fn get(addr: SocketAddr, path: &str) -> Result<(u16, String), String> {
    common::http_get_addr(addr, path).await
}

/// The count of full passes the operator at `addr` ran, of every result.
pub async fn passes(addr: SocketAddr) -> Result<u64, String> {
    let (code, text) = get(addr, "/metrics").await?;
    if code != 200 {
        return Err(format!("/metrics answered {code}"));
    }
    Ok(text
        .lines()
        .filter(|l| l.starts_with("cvo_sync_passes_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64)
}

/// Warning events about `pod` (but those [`NOT_THE_POD`]).
pub async fn warnings(tier: &Tier, pod: &Pod) -> Vec<String> {
    let namespace = pod.metadata.namespace.as_deref().expect("namespace");
    let events: Api<Event> = Api::namespaced(tier.client.clone(), namespace);
    let name = pod.metadata.name.as_deref().expect("name");
    let list = events
        .list(&ListParams::default().fields(&format!("involvedObject.name={name}")))
        .await
        .expect("list events");
    list.items
        .into_iter()
        .filter(|e| e.type_.as_deref() == Some("Warning"))
        .filter(|e| {
            let (reason, message) = (
                e.reason.as_deref().unwrap_or_default(),
                e.message.as_deref().unwrap_or_default(),
            );
            !NOT_THE_POD
                .iter()
                .any(|(r, m)| *r == reason && message.contains(m))
        })
        .map(|e| {
            format!(
                "{}: {}",
                e.reason.unwrap_or_default(),
                e.message.unwrap_or_default()
            )
        })
        .collect()
}

/// The log of the operator container of `pod`.
pub async fn log(tier: &Tier, pod: &Pod) -> String {
    let pods: Api<Pod> = Api::namespaced(tier.client.clone(), NAMESPACE);
    pods.logs(
        pod.metadata.name.as_deref().expect("name"),
        &LogParams {
            container: Some("operator".to_owned()),
            ..LogParams::default()
        },
    )
    .await
    .expect("pod log")
}

/// The peak memory of the container `container` of `pod`, from its cgroup on this node:
/// the process's peak resident set (`VmHWM`) and the cgroup's peak usage (with page cache).
pub fn peak_memory(pod: &Pod, container: &str) -> (u64, u64) {
    let uid = pod.metadata.uid.as_deref().expect("uid");
    let id = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|c| c.iter().find(|c| c.name == container))
        .and_then(|c| c.container_id.as_deref())
        .and_then(|id| id.split("://").nth(1))
        .unwrap_or_else(|| panic!("{container} of {} has no container id", summary(pod)))
        .to_owned();
    let pod_dir = find_dir(Path::new("/sys/fs/cgroup/memory"), &format!("pod{uid}"), 6)
        .or_else(|| find_dir(Path::new("/sys/fs/cgroup"), &format!("pod{uid}"), 8))
        .unwrap_or_else(|| panic!("no cgroup of pod {uid} under /sys/fs/cgroup"));
    let dir = pod_dir.join(&id);
    let read = |file: &str| std::fs::read_to_string(dir.join(file)).ok();
    let cgroup_peak = read("memory.max_usage_in_bytes")
        .or_else(|| read("memory.peak"))
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or_else(|| panic!("no peak memory in {}", dir.display()));
    let rss_peak = read("cgroup.procs")
        .unwrap_or_default()
        .lines()
        .filter_map(|pid| std::fs::read_to_string(format!("/proc/{pid}/status")).ok())
        .filter_map(|status| {
            let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
            let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
            Some(kib * 1024)
        })
        .max()
        .unwrap_or_else(|| panic!("no process with VmHWM in {}", dir.display()));
    (rss_peak, cgroup_peak)
}

/// The first directory named `name` under `root`, at most `depth` levels down.
fn find_dir(root: &Path, name: &str, depth: usize) -> Option<PathBuf> {
    if depth == 0 {
        return None;
    }
    for entry in std::fs::read_dir(root).ok()?.filter_map(Result::ok) {
        let path = entry.path();
        if !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        if entry.file_name() == name {
            return Some(path);
        }
        if let Some(found) = find_dir(&path, name, depth - 1) {
            return Some(found);
        }
    }
    None
}
