//! Apply benchmark (not a timed test): the shared OpenShift corpus and a generated
//! 5,000-manifest release, each applied twice — to the in-memory API server with an injected
//! 2 ms latency per request, or, with `CVO_BENCH_KUBECONFIG=FILE`, to that real cluster (use a
//! fresh one: `../shared/realk8s`). Reports wall time against the ideal (requests × 2 ms /
//! parallelism), requests per manifest and writes (in-memory: resourceVersion increments; real:
//! objects created or updated plus ClusterVersion status writes). The second apply must write
//! nothing. Each pass is also set against its ordered limit (`--timings`' figures; with
//! `BENCH_TIMINGS=DIR` its page is written there). With `--kubectl`, also times `kubectl apply
//! --server-side` of the same directory against the in-memory server (served on loopback);
//! with `--plain`, a plain concurrent server-side-apply client (no order, no comparison, no
//! health) applies the release twice instead of cvo (use another fresh cluster).
//! `BENCH_FAILURES=1` prints failures. `BENCH_MANIFESTS=N` sizes the generated release (default
//! 5,000; issue 41's point is 50,000).
//!
//! `cargo bench --bench apply [-- --kubectl]` (a plain `main`, not criterion: each run is one
//! measured apply); results go in docs/performance.md. Under `cargo test` it does nothing.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cvo::cluster::Cluster;
use cvo::release::{LoadOptions, Release};
use cvo::sync::{SyncOptions, sync};
use memory_apiserver::{Config, FaultAction, FaultRule, MemoryServer, kubeconfig_yaml, serve};

// The cluster of `common` is the steady-state benches'; these start servers of their own.
#[allow(dead_code)]
mod common;

use common::generated;

const LATENCY: Duration = Duration::from_millis(2);

type Counts = Arc<Mutex<BTreeMap<String, u64>>>;

/// `inner` counting requests by HTTP method (LIST counted apart from GET).
fn counting_client(inner: kube::Client, counts: Counts) -> kube::Client {
    let service = tower::service_fn(move |req: http::Request<kube::client::Body>| {
        let inner = inner.clone();
        let counts = counts.clone();
        async move {
            let method = req.method().as_str().to_owned();
            let query = req.uri().query().unwrap_or_default().to_owned();
            let path = req.uri().path().to_owned();
            let verb = if method == "GET" && (path.starts_with("/apis") || path.starts_with("/api"))
            {
                let segments = path.trim_matches('/').split('/').count();
                // /api/v1/namespaces/x/configmaps = 5 (list), /6 = get; discovery paths are short.
                let core = path.starts_with("/api/");
                let named = if core {
                    segments.is_multiple_of(2)
                } else {
                    !segments.is_multiple_of(2)
                };
                if segments <= 3 {
                    "GET (discovery)".to_owned()
                } else if named {
                    "GET".to_owned()
                } else {
                    "LIST".to_owned()
                }
            } else if query.contains("dryRun") {
                format!("{method} (dry-run)")
            } else {
                method
            };
            *counts.lock().expect("counts").entry(verb).or_default() += 1;
            inner.send(req).await
        }
    });
    kube::Client::new(service, "default")
}

struct Pass {
    wall: Duration,
    counts: BTreeMap<String, u64>,
    writes: u64,
    failed: usize,
    /// Where the time went (`--timings`): the ordered limit and critical path of each round.
    timings: Option<cvo::timings::Timings>,
}

impl Pass {
    fn requests(&self) -> u64 {
        self.counts.values().sum()
    }
}

/// One apply. `server` is the in-memory server when the target is one (its resourceVersion
/// counts every write); on a real cluster writes are the objects created or updated (the
/// engine compares resourceVersions) plus a ClusterVersion status write.
async fn pass(
    server: Option<&MemoryServer>,
    client: &kube::Client,
    release: &Release,
    parallelism: usize,
) -> Pass {
    let counts: Counts = Arc::default();
    let cluster = Cluster::new(counting_client(client.clone(), counts.clone()));
    // Manifests that can never succeed on a bare cluster would be retried for the default
    // 10 minutes of an install: a minute is plenty for those that can.
    let mut options = SyncOptions {
        parallelism,
        install_timeout: Duration::from_secs(60),
        ..SyncOptions::default()
    };
    // No operator runs on a bare cluster: its ClusterOperators never report, and the
    // benchmark measures requests and writes, not health (docs/apply.md#health).
    options.apply.health.wait = cvo::health::WaitMode::None;
    let rv = server.map(MemoryServer::resource_version);
    let start = Instant::now();
    let verbose = std::env::var_os("BENCH_FAILURES").is_some();
    let last = Mutex::new(Instant::now());
    let outcome = sync(&cluster, release, &options, |r| {
        let mut last = last.lock().expect("last");
        if verbose && last.elapsed() > Duration::from_millis(300) {
            let m = &release.manifests[r.index];
            eprintln!(
                "SLOW {:?} before {} {} {:?}",
                last.elapsed(),
                m.location,
                m.id,
                r.action
            );
        }
        *last = Instant::now();
    })
    .await
    .expect("sync");
    let wall = start.elapsed();
    let summary = outcome
        .report
        .as_ref()
        .map(|r| r.summary())
        .unwrap_or_default();
    for r in outcome.report.iter().flat_map(|r| &r.results) {
        if verbose && r.action == cvo::apply::Action::Updated {
            eprintln!(
                "UPDATED {} {}",
                release.manifests[r.index].location, release.manifests[r.index].id
            );
        }
    }
    for r in outcome.report.iter().flat_map(|r| r.failed()) {
        if verbose {
            eprintln!(
                "FAILED {} {}: {:?}",
                release.manifests[r.index].location, release.manifests[r.index].id, r.error
            );
        }
    }
    let mut timings = cvo::timings::Timings::of(release, &outcome.passes, parallelism);
    timings.seconds = wall.as_secs_f64();
    let cv_written = matches!(
        outcome.cluster_version,
        Some(Ok(cvo::status::clusterversion::WriteOutcome::Written))
    );
    let counts = counts.lock().expect("counts").clone();
    Pass {
        wall,
        counts,
        writes: match (server, rv) {
            (Some(server), Some(rv)) => server.resource_version() - rv,
            _ => (summary.created + summary.updated + usize::from(cv_written)) as u64,
        },
        failed: summary.failed + summary.skipped,
        timings: Some(timings),
    }
}

/// The pass against its ordered limit, from `--timings`' figures; with `BENCH_TIMINGS=DIR`,
/// the page too (DIR/NAME.html).
fn limit_row(name: &str, p: &Pass) {
    let Some(t) = &p.timings else { return };
    for (i, pass) in t.passes.iter().enumerate() {
        let c = &pass.critical_path;
        println!(
            "| {name}, round {} | {:.2} s | {:.2} s | {:.2}× | {:.2} s | {:.2}× | {:.2} s ({} tasks; server {:.2} s, cvo {:.2} s, between {:.2} s) | {} |",
            i + 1,
            pass.seconds,
            pass.ordered_limit_seconds,
            pass.seconds / pass.ordered_limit_seconds.max(1e-9),
            pass.ordered_limit_in_slots_seconds,
            pass.seconds / pass.ordered_limit_in_slots_seconds.max(1e-9),
            c.seconds,
            c.tasks,
            c.server_seconds,
            c.cvo_seconds,
            c.between_seconds,
            pass.longest_component
                .as_ref()
                .map(|n| format!("{} ({} tasks, {:.2} s)", n.title, n.tasks, n.seconds))
                .unwrap_or_default(),
        );
    }
    if let Some(dir) = std::env::var_os("BENCH_TIMINGS") {
        let file = Path::new(&dir).join(format!("{}.html", name.replace([' ', ','], "-")));
        std::fs::write(&file, cvo::timings::page(t)).expect("write the page");
        eprintln!("timings page: {}", file.display());
    }
}

/// A plain concurrent server-side-apply client, for comparison: every manifest of `release`
/// that is not a deletion sent as one forced apply PATCH, `parallelism` at once, in no order,
/// nothing compared, no health judged.
async fn plain(client: &kube::Client, release: &Release, parallelism: usize) -> (Duration, usize) {
    use futures::StreamExt;
    let cluster = Cluster::new(client.clone());
    let start = Instant::now();
    let failed = futures::stream::iter(release.manifests.iter().filter(|m| !m.is_delete()))
        .map(|m| {
            let cluster = &cluster;
            async move {
                let resolved = cluster
                    .discovery()
                    .resolve(&m.api_version, &m.id.kind)
                    .await
                    .ok()?;
                let api = cluster.api(&resolved, m.id.namespace.as_deref());
                let params = kube::api::PatchParams::apply("plain-ssa").force();
                api.patch(&m.id.name, &params, &kube::api::Patch::Apply(&*m.object))
                    .await
                    .ok()
            }
        })
        .buffer_unordered(parallelism)
        .filter(|r| std::future::ready(r.is_none()))
        .count()
        .await;
    (start.elapsed(), failed)
}

fn row(name: &str, manifests: usize, parallelism: usize, p: &Pass) {
    let ideal = LATENCY * p.requests() as u32 / parallelism as u32;
    println!(
        "| {name} | {manifests} | {:.2} s | {:.2} s | {} | {:.2} | {} | {} | {:?} |",
        p.wall.as_secs_f64(),
        ideal.as_secs_f64(),
        p.requests(),
        p.requests() as f64 / manifests as f64,
        p.writes,
        p.failed,
        p.counts
    );
}

async fn kubectl(dir: &Path) -> Option<Duration> {
    let server = MemoryServer::start(Config::default());
    server
        .faults()
        .add(FaultRule::new(FaultAction::Delay(LATENCY)));
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .ok()?
        .local_addr()
        .ok()?
        .port();
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    tokio::spawn(serve(server.clone(), addr));
    let cfg = tempfile::NamedTempFile::new().ok()?;
    std::fs::write(cfg.path(), kubeconfig_yaml(addr)).ok()?;
    for _ in 0..100 {
        if tokio::net::TcpStream::connect(addr).await.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let start = Instant::now();
    let (cfg_path, dir) = (cfg.path().to_owned(), dir.to_owned());
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(cfg_path)
            .args([
                "apply",
                "--server-side",
                "--force-conflicts",
                "--validate=false",
                "-R",
                "-f",
            ])
            .arg(dir)
            .output()
    })
    .await
    .ok()?
    .ok()?;
    let wall = start.elapsed();
    eprintln!(
        "kubectl exit {:?}, {} lines of output; stderr starts: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).lines().count(),
        String::from_utf8_lossy(&out.stderr)
            .chars()
            .take(600)
            .collect::<String>()
    );
    Some(wall)
}

async fn real_client(path: &Path) -> kube::Client {
    let kubeconfig = kube::config::Kubeconfig::read_from(path).expect("kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .expect("kubeconfig");
    cvo::cluster::client(config).expect("client")
}

#[tokio::main]
async fn main() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_env("CVO_LOG"))
        .with_writer(std::io::stderr)
        .try_init();
    // `cargo bench` passes --bench; `cargo test --all-targets` runs bench targets without it.
    if !std::env::args().any(|a| a == "--bench") {
        println!("apply benchmark: run it with `cargo bench --bench apply`");
        return;
    }
    let with_kubectl = std::env::args().any(|a| a == "--kubectl");
    let corpus =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus/openshift-release");
    let gen_dir = generated(common::generated_size());
    let mut sets: Vec<(String, PathBuf)> = Vec::new();
    if corpus.is_dir() && std::env::var_os("BENCH_SKIP_CORPUS").is_none() {
        sets.push(("openshift corpus".into(), corpus));
    }
    sets.push(("generated".into(), gen_dir.path().to_owned()));
    let parallelism = cvo::graph::DEFAULT_PARALLELISM;
    println!(
        "| release | manifests | wall | ideal | requests | per manifest | writes | failed | by verb |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---|");
    for (name, dir) in &sets {
        // The corpus carries manifests for several profiles: apply the default one, as CVO does.
        let mut options = LoadOptions::default();
        if name.contains("corpus") {
            options.filters.profile = Some(cvo::release::DEFAULT_CLUSTER_PROFILE.to_owned());
        }
        let release = cvo::release::load(dir, &options).expect("load");
        let real = std::env::var_os("CVO_BENCH_KUBECONFIG");
        let (server, client) = match &real {
            None => {
                let server = MemoryServer::start(Config::default());
                let client = server.client();
                (Some(server), client)
            }
            Some(path) => (None, real_client(Path::new(path)).await),
        };
        // What an installer does first, untimed: namespaces, the release's CRDs, stand-ins.
        common::install_prerequisites(&client, &release).await;
        if let Some(server) = &server {
            server
                .faults()
                .add(FaultRule::new(FaultAction::Delay(LATENCY)));
        }
        if std::env::args().any(|a| a == "--plain") {
            for round in ["first", "second"] {
                let (wall, failed) = plain(&client, &release, parallelism).await;
                println!(
                    "| {name}, plain concurrent server-side apply, {round} | {} | {:.2} s | | | | | {failed} | |",
                    release.manifests.len(),
                    wall.as_secs_f64()
                );
            }
            continue;
        }
        let first = pass(server.as_ref(), &client, &release, parallelism).await;
        row(
            &format!("{name}, first apply"),
            release.manifests.len(),
            parallelism,
            &first,
        );
        let second = pass(server.as_ref(), &client, &release, parallelism).await;
        row(
            &format!("{name}, second apply"),
            release.manifests.len(),
            parallelism,
            &second,
        );
        println!(
            "\n| pass | wall | ordered limit | wall / limit | limit with the slots | wall / that limit | critical path | longest component |"
        );
        println!("|---|---:|---:|---:|---:|---:|---|---|");
        limit_row(&format!("{name}, first apply"), &first);
        limit_row(&format!("{name}, second apply"), &second);
        println!();
        if with_kubectl && let Some(wall) = kubectl(dir).await {
            println!(
                "| {name}, kubectl apply --server-side | {} | {:.2} s | | | | | | |",
                release.manifests.len(),
                wall.as_secs_f64()
            );
        }
    }
}
