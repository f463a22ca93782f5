//! Operator steady-state benchmark (not a timed test): `cvo operator` (the real binary) keeps a
//! release with nothing drifting; measured from its `/metrics` and `/proc`: requests and writes
//! per resync pass and per hour, operator CPU per pass, RSS, and how long a drifted object takes
//! to be put back.
//!
//! Releases: the generated 5,000-manifest release, `manifests-example` and the OpenShift corpus
//! (`../shared/corpus/openshift-release`, prepared as an installer would, with what a bare
//! cluster rejects left out: see `corpus_release`), each with
//! ClusterVersion (CRD and object from `manifests-example`) so that passes run in the
//! operator's steady state, not as installs. The cluster: the embedded API server served on
//! loopback, or with `CVO_BENCH_KUBECONFIG=FILE` that real cluster (a fresh one:
//! `../shared/realk8s`).
//!
//! `cargo bench --bench operator` (a plain `main`: each run is one measurement; results go in
//! docs/performance.md). On a real cluster one release per run: the generated one, or
//! `BENCH_RELEASE=example` or `BENCH_RELEASE=corpus`. `BENCH_PASSES=N` steady passes to average (default 5),
//! `BENCH_RESYNC=DUR` the resync interval (default 10s). `BENCH_MANIFESTS=N` sizes the generated
//! release (default 5,000; issue 41's point is 50,000). Under `cargo test` it does nothing.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

/// The namespace of the operator's Lease and deletion record.
const NAMESPACE: &str = "cvo-bench";

/// A running operator; killed when dropped.
struct Operator {
    child: Child,
    port: u16,
}

impl Drop for Operator {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Operator {
    fn start(kubeconfig: &Path, release: &Path, resync: &str, log: &Path) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("free port")
            .port();
        let child = Command::new(env!("CARGO_BIN_EXE_cvo"))
            .env_remove("KUBECONFIG")
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(["operator", "--release"])
            .arg(release)
            .args(["--namespace", NAMESPACE, "--wait", "none"])
            .args(["--resync-interval", resync])
            .args(["--metrics-addr", &format!("127.0.0.1:{port}")])
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(log).expect("log"))
            .spawn()
            .expect("start cvo operator");
        Operator { child, port }
    }

    fn scrape(&self) -> Option<String> {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(("127.0.0.1", self.port)).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
        s.write_all(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n")
            .ok()?;
        let mut text = String::new();
        s.read_to_string(&mut text).ok()?;
        Some(text.split_once("\r\n\r\n")?.1.to_owned())
    }

    /// Scrapes until `ok` holds (at most `timeout`).
    fn scrape_until(&self, what: &str, timeout: Duration, ok: impl Fn(&str) -> bool) -> String {
        let started = Instant::now();
        loop {
            if let Some(text) = self.scrape().filter(|t| ok(t)) {
                return text;
            }
            assert!(started.elapsed() < timeout, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// CPU time (user + system) of the process so far, and its RSS and peak RSS in KiB.
    fn usage(&self) -> (Duration, u64, u64) {
        let pid = self.child.id();
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
        // Fields after the parenthesised command name: utime and stime are 14 and 15.
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .expect("stat")
            .1
            .split_whitespace()
            .collect();
        let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
        let hz = 100; // USER_HZ on Linux
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
        let kib = |key: &str| {
            status
                .lines()
                .find(|l| l.starts_with(key))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
                .unwrap_or(0)
        };
        (
            Duration::from_millis(ticks * 1000 / hz),
            kib("VmRSS:"),
            kib("VmHWM:"),
        )
    }
}

/// Sum of the samples of `name` whose labels include `labels`.
fn metric(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let (n, label_text) = series.split_once('{').unwrap_or((series, ""));
            let all = labels
                .iter()
                .all(|(k, v)| label_text.contains(&format!("{k}=\"{v}\"")));
            (n == name && all)
                .then(|| value.parse::<f64>().ok())
                .flatten()
        })
        .sum()
}

/// Requests by verb so far.
fn requests(text: &str) -> BTreeMap<String, f64> {
    let mut by_verb = BTreeMap::new();
    for verb in ["GET", "LIST", "WATCH", "PATCH", "PUT", "POST", "DELETE"] {
        by_verb.insert(
            verb.to_owned(),
            metric(text, "cvo_api_requests_total", &[("verb", verb)]),
        );
    }
    by_verb
}

fn passes(text: &str) -> f64 {
    metric(text, "cvo_sync_passes_total", &[])
}

/// `dir` with ClusterVersion's CRD and object copied in from `manifests-example` (with their
/// cluster-profile annotations only when `profiles`: a release that names profiles keeps only
/// the manifests of the one it is read in).
fn with_cluster_version(dir: &Path, profiles: bool) {
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests-example");
    for entry in std::fs::read_dir(&example).expect("manifests-example") {
        let path = entry.expect("entry").path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with("0000_00_cluster-version-operator_")
            && name.contains("clusterversion")
            && !dir.join(&name).exists()
        {
            let text: String = std::fs::read_to_string(&path)
                .expect("read")
                .lines()
                .filter(|l| profiles || !l.contains("include.release.openshift.io/"))
                .map(|l| format!("{l}\n"))
                .collect();
            std::fs::write(dir.join(&name), text).expect("write");
        }
    }
    if !dir.join("release-metadata").exists() {
        std::fs::write(
            dir.join("release-metadata"),
            r#"{"kind": "cincinnati-metadata-v0", "version": "1.0.0"}"#,
        )
        .expect("write");
    }
}

/// The OpenShift corpus as the operator can keep it on a bare cluster, in a directory of its
/// own, after the installer's preparation (`common::install_prerequisites`) on the cluster of
/// `kubeconfig`. Left out, and returned: files with load errors (the operator refuses a release
/// with errors), and files with manifests the cluster rejects for good (found by one install
/// run here; on a bare cluster, two SecurityContextConstraints the real SCC CRD rejects), so
/// that the operator's install completes and its passes run in steady state.
async fn corpus_release(kubeconfig: &Path) -> (tempfile::TempDir, Vec<String>) {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus/openshift-release");
    let mut options = cvo::release::LoadOptions::default();
    options.filters.profile = Some(cvo::release::DEFAULT_CLUSTER_PROFILE.to_owned());
    let release = cvo::release::load(&corpus, &options).expect("load the corpus");
    let mut left_out: std::collections::BTreeSet<PathBuf> = release
        .diagnostics
        .iter()
        .filter(|d| d.severity == cvo::diagnostic::Severity::Error)
        .map(|d| d.location.file.clone())
        .collect();
    let client = client(kubeconfig).await;
    common::install_prerequisites(&client, &release).await;
    let mut probe = cvo::sync::SyncOptions {
        install_timeout: Duration::from_secs(60),
        ..Default::default()
    };
    probe.apply.health.wait = cvo::health::WaitMode::None;
    let out = cvo::sync::sync(
        &cvo::cluster::Cluster::new(client),
        &release,
        &probe,
        |_| {},
    )
    .await
    .expect("install probe");
    for r in &out.report.expect("a pass").results {
        if r.action == cvo::apply::Action::Failed {
            left_out.insert(release.manifests[r.index].location.file.clone());
        }
    }
    let dir = tempfile::tempdir().expect("tempdir");
    for entry in std::fs::read_dir(&corpus).expect("corpus") {
        let path = entry.expect("entry").path();
        let name = path.file_name().expect("name").to_owned();
        if path.is_file() && !left_out.iter().any(|f| f.file_name() == Some(&name)) {
            std::fs::copy(&path, dir.path().join(&name)).expect("copy");
        }
    }
    with_cluster_version(dir.path(), true);
    let names = left_out
        .iter()
        .filter_map(|f| f.file_name())
        .map(|n| n.to_string_lossy().into_owned())
        .collect();
    (dir, names)
}

async fn client(kubeconfig: &Path) -> kube::Client {
    let config = kube::config::Kubeconfig::read_from(kubeconfig).expect("kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(config, &Default::default())
        .await
        .expect("kubeconfig");
    cvo::cluster::client(config).expect("client")
}

/// The namespace and name of a managed ConfigMap to drift.
type Drift<'a> = (&'a str, &'a str);

/// One measured release.
async fn measure(name: &str, release: &Path, kubeconfig: &Path, drift_target: Option<Drift<'_>>) {
    let client = client(kubeconfig).await;
    let nss: Api<Namespace> = Api::all(client.clone());
    let body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}});
    nss.patch(
        NAMESPACE,
        &PatchParams::apply("bench"),
        &Patch::Apply(&body),
    )
    .await
    .expect("namespace");
    let resync = std::env::var("BENCH_RESYNC").unwrap_or_else(|_| "10s".to_owned());
    let resync_secs = humantime::parse_duration(&resync)
        .expect("BENCH_RESYNC")
        .as_secs_f64();
    let steady: f64 = std::env::var("BENCH_PASSES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5.0);
    let log = std::env::temp_dir().join(format!("cvo-bench-operator-{}.log", std::process::id()));
    let op = Operator::start(kubeconfig, release, &resync, &log);
    let started = Instant::now();
    let long = Duration::from_secs(600);
    // The initial pass (an install), then one resync pass to settle.
    let first = tokio::task::block_in_place(|| {
        op.scrape_until("the initial pass", long, |t| passes(t) >= 1.0)
    });
    let install = started.elapsed();
    let settled = tokio::task::block_in_place(|| {
        op.scrape_until("a resync pass", long, |t| passes(t) >= 2.0)
    });
    let (cpu0, _, _) = op.usage();
    let base = passes(&settled);
    let sum0 = metric(&settled, "cvo_sync_pass_duration_seconds_sum", &[]);
    let req0 = requests(&settled);
    let mut max_writes = 0.0f64;
    let mut last = settled;
    while passes(&last) < base + steady {
        let n = passes(&last);
        last = tokio::task::block_in_place(|| {
            op.scrape_until("the next pass", long, |t| passes(t) > n)
        });
        max_writes = max_writes.max(metric(&last, "cvo_sync_pass_writes", &[]));
    }
    let (cpu1, rss, peak) = op.usage();
    let n = passes(&last) - base;
    let req1 = requests(&last);
    let per_pass: BTreeMap<&String, f64> = req1
        .iter()
        .map(|(verb, v)| (verb, (v - req0[verb]) / n))
        .filter(|(_, v)| *v > 0.0)
        .collect();
    let total: f64 = per_pass.values().sum();
    let writes: f64 = ["PATCH", "PUT", "POST", "DELETE"]
        .iter()
        .map(|v| (req1[*v] - req0[*v]) / n)
        .sum();
    let pass_seconds = (metric(&last, "cvo_sync_pass_duration_seconds_sum", &[]) - sum0) / n;
    let cpu_per_pass = (cpu1 - cpu0).as_secs_f64() / n;
    let per_hour = 3600.0 / resync_secs;
    let verbs: Vec<String> = per_pass
        .iter()
        .map(|(v, c)| format!("{v} {c:.0}"))
        .collect();

    // Drift repair: edit a managed ConfigMap, time until it is back.
    let mut repairs = Vec::new();
    if let Some((ns, cm)) = drift_target {
        let cms: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
        let original = cms
            .get(cm)
            .await
            .expect("managed ConfigMap")
            .data
            .unwrap_or_default();
        let (key, value) = original.iter().next().expect("a data key");
        for i in 0..10 {
            let edit = json!({"data": {key: format!("drift-{i}")}});
            cms.patch(cm, &PatchParams::default(), &Patch::Merge(&edit))
                .await
                .expect("edit");
            let t = Instant::now();
            loop {
                let now = cms.get(cm).await.expect("get").data.unwrap_or_default();
                if now.get(key) == Some(value) {
                    break;
                }
                assert!(t.elapsed() < Duration::from_secs(60), "not repaired");
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            repairs.push(t.elapsed());
        }
    }
    repairs.sort();
    let repair = if repairs.is_empty() {
        "—".to_owned()
    } else {
        format!(
            "{:.0} ms / {:.0} ms",
            repairs[repairs.len() / 2].as_secs_f64() * 1000.0,
            repairs[repairs.len() - 1].as_secs_f64() * 1000.0
        )
    };
    let _ = first;
    println!(
        "| {name} | {:.1} s | {n:.0} | {total:.0} ({}) | {writes:.0} (last-pass gauge max {max_writes:.0}) | {:.0} / {:.0} | {:.2} s | {:.0} ms | {:.1} / {:.1} MiB | {repair} |",
        install.as_secs_f64(),
        verbs.join(", "),
        total * per_hour,
        writes * per_hour,
        pass_seconds,
        cpu_per_pass * 1000.0,
        rss as f64 / 1024.0,
        peak as f64 / 1024.0,
    );
    drop(op);
    // With CVO_LOG set (e.g. `cvo::operator::metrics=debug`: every write request), the
    // operator's log is kept for reading.
    if std::env::var_os("CVO_LOG").is_some() {
        eprintln!("operator log: {}", log.display());
    } else {
        let _ = std::fs::remove_file(&log);
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    // `cargo bench` passes --bench; `cargo test --all-targets` runs bench targets without it.
    if !std::env::args().any(|a| a == "--bench") {
        println!("operator benchmark: run it with `cargo bench --bench operator`");
        return;
    }
    let size = common::generated_size();
    let generated = common::generated(size);
    with_cluster_version(generated.path(), false);
    let generated_name = format!("generated, {size} manifests");
    let example: PathBuf = Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests-example");
    // The corpus is prepared on the cluster it is measured on (`None`: see below).
    let sets: [(&str, Option<&Path>, Option<Drift>); 3] = [
        (
            &generated_name,
            Some(generated.path()),
            Some(("ns-comp0", "cm-0")),
        ),
        (
            "manifests-example",
            Some(&example),
            Some(("cluster-config", "cluster-settings")),
        ),
        (
            "openshift corpus",
            None,
            Some(("openshift-etcd-operator", "etcd-operator-config")),
        ),
    ];
    println!(
        "| release | install | steady passes | requests per pass (by verb) | writes per pass | requests / writes per hour | pass wall | operator CPU per pass | RSS / peak | drift repaired (median / max of 10) |"
    );
    println!("|---|---:|---:|---|---:|---:|---:|---:|---:|---:|");
    // A real cluster is used as it is given: one release per run (`BENCH_RELEASE=example` for
    // manifests-example, `corpus` for the OpenShift corpus; the generated one by default), as
    // the second would be an update of the first.
    let real = std::env::var_os("CVO_BENCH_KUBECONFIG").is_some();
    let only = std::env::var("BENCH_RELEASE").ok();
    for (name, dir, drift) in sets {
        let wanted = match only.as_deref() {
            Some("example") => name == "manifests-example",
            Some("corpus") => name == "openshift corpus",
            Some(_) => name.starts_with("generated"),
            None => !real || name.starts_with("generated"),
        };
        if !wanted {
            continue;
        }
        // A fresh cluster per release: the embedded server, or the real one given.
        let tmp = tempfile::tempdir().expect("tempdir");
        let (_server, kubeconfig) = common::cluster(tmp.path());
        match dir {
            Some(dir) => measure(name, dir, &kubeconfig, drift).await,
            None => {
                let (dir, left_out) = corpus_release(&kubeconfig).await;
                eprintln!("corpus files left out: {left_out:?}");
                let name = format!("{name} (without {} files, see below)", left_out.len());
                measure(&name, dir.path(), &kubeconfig, drift).await;
            }
        }
    }
}
