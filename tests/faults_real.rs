//! Faults of the real control plane (`../shared/realk8s/fault.sh`): the API server down when a
//! run starts or restarted mid-apply, etcd stalled mid-apply, and `cvo` killed mid-update. Each
//! run, or its rerun, converges, and ClusterVersion shows an update while it is in progress.
//! `cvo operator` started with the API server down waits for it (probes answering), and after
//! an outage under a running leader leads again and runs a full pass within seconds.
//!
//! These act on processes, so they need the real control plane of `CVO_TEST_KUBECONFIG` with
//! `REALK8S_RUN_DIR` set (as `.ci/run` does): they are ignored by default, and run with
//! `--include-ignored` anywhere else they fail saying so (the in-memory server's fault
//! injection covers the same client paths in `apply_faults.rs` and `apply_sync.rs`). One
//! fault at a time: they take turns.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::TestCluster;
use cvo::cluster::Cluster;
use cvo::release::{LoadOptions, Release};
use cvo::sync::{Mode, SyncOptions, SyncOutcome, sync};

static ONE_FAULT_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The cluster, which must be one faults can be injected into (the test fails otherwise).
async fn faultable() -> TestCluster {
    let tc = common::cluster().await;
    if tc.is_memory() || std::env::var_os("REALK8S_RUN_DIR").is_none() {
        common::needs::missing(
            "a real control plane whose processes fault.sh kills and stalls",
            "run with CVO_TEST_KUBECONFIG=$KUBECONFIG and REALK8S_RUN_DIR after eval \"$(../shared/realk8s/start.sh)\"",
        );
    }
    tc
}

/// The directory of `fault.sh`: `CVO_TEST_REALK8S_DIR`, or `../shared/realk8s` beside the
/// repository.
fn realk8s_dir() -> PathBuf {
    match std::env::var_os("CVO_TEST_REALK8S_DIR").filter(|d| !d.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/realk8s"),
    }
}

/// Runs `fault.sh ACTION COMPONENT` on the test cluster (`start` waits until ready).
///
/// A SIGKILLed kube-apiserver is reported dead (its main thread a zombie) while its other
/// threads still tear down a large heap and hold the listening socket; a `start` in that window
/// fails with "address already in use". So after `kill kube-apiserver` this waits until its
/// port can be bound again, and a restart is a kill and a start.
async fn fault(action: &'static str, component: &'static str) {
    if action == "restart" {
        fault_sh("kill", component).await;
        fault_sh("start", component).await;
    } else {
        fault_sh(action, component).await;
    }
}

async fn fault_sh(action: &'static str, component: &'static str) {
    let script = realk8s_dir().join("fault.sh");
    let status = tokio::task::spawn_blocking(move || {
        std::process::Command::new("bash")
            .arg(script)
            .args([action, component])
            .status()
    })
    .await
    .expect("join")
    .expect("run fault.sh");
    assert!(status.success(), "fault.sh {action} {component}: {status}");
    if (action, component) == ("kill", "kube-apiserver") {
        let addr = apiserver_addr();
        common::poll_until(
            "the killed apiserver's port released",
            Duration::from_secs(60),
            || async {
                // std binds with SO_REUSEADDR, as the apiserver does.
                std::net::TcpListener::bind(&addr)
                    .map(drop)
                    .map_err(|e| format!("{addr}: {e}"))
            },
        )
        .await;
    }
}

/// `host:port` of the real control plane's API server (from its admin kubeconfig).
fn apiserver_addr() -> String {
    let dir = std::env::var_os("REALK8S_RUN_DIR").expect("REALK8S_RUN_DIR");
    let config = kube::config::Kubeconfig::read_from(Path::new(&dir).join("admin.kubeconfig"))
        .expect("read the admin kubeconfig");
    let server = config.clusters[0]
        .cluster
        .as_ref()
        .and_then(|c| c.server.clone())
        .expect("server");
    let uri: http::Uri = server.parse().expect("server URL");
    let authority = uri.authority().expect("host:port");
    format!(
        "{}:{}",
        authority.host(),
        authority.port_u16().unwrap_or(443)
    )
}

/// A namespace and `n` ConfigMaps in it, over several run levels.
fn release(ns: &str, n: usize, version: Option<&str>) -> (tempfile::TempDir, Release) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut files = vec![(
        "0000_05_a_ns.yaml".to_owned(),
        format!(
            "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {ns}\n  labels: {{{}: faults}}\n",
            common::TEST_LABEL
        ),
    )];
    for i in 0..n {
        files.push((
            format!("0000_{:02}_c{}_{i:04}.yaml", 10 + (i % 5) * 10, i % 4),
            common::configmap(ns, &format!("cm-{i}"), "", &[("v", version.unwrap_or("x"))]),
        ));
    }
    let files: Vec<(&str, String)> = files.iter().map(|(n, t)| (n.as_str(), t.clone())).collect();
    common::write_release(dir.path(), version, &files);
    let rel = cvo::release::load(dir.path(), &LoadOptions::default()).expect("load");
    (dir, rel)
}

fn options() -> SyncOptions {
    SyncOptions {
        mode: Some(Mode::Updating),
        ..common::sync_options(Duration::from_millis(200))
    }
}

/// Starts a sync in the background; returns it and the count of results so far.
fn start(
    tc: &TestCluster,
    rel: &Release,
) -> (tokio::task::JoinHandle<SyncOutcome>, Arc<AtomicUsize>) {
    let done = Arc::new(AtomicUsize::new(0));
    let counter = done.clone();
    let (client, rel) = (tc.client.clone(), rel.clone());
    let task = tokio::spawn(async move {
        sync(&Cluster::new(client), &rel, &options(), |_| {
            counter.fetch_add(1, Ordering::Relaxed);
        })
        .await
        .expect("sync")
    });
    (task, done)
}

/// Applies `rel` until a pass has no failure (at most 3 reruns); returns the passes needed.
async fn converge(tc: &TestCluster, rel: &Release) -> usize {
    for pass in 1..=3 {
        let out = sync(&Cluster::new(tc.client.clone()), rel, &options(), |_| {})
            .await
            .expect("sync");
        let s = out.report.as_ref().expect("pass").summary();
        if s.failed + s.skipped == 0 {
            return pass;
        }
    }
    panic!("no convergence after 3 reruns");
}

async fn after(done: &AtomicUsize, n: usize) {
    common::poll_until("results so far", Duration::from_secs(60), || async {
        let d = done.load(Ordering::Relaxed);
        if d >= n {
            Ok(())
        } else {
            Err(format!("{d} results"))
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a real control plane with fault.sh (CVO_TEST_KUBECONFIG and REALK8S_RUN_DIR from ../shared/realk8s/start.sh): run with --include-ignored (.ci/run does)"]
async fn apiserver_restarted_mid_apply() {
    let tc = faultable().await;
    let _turn = ONE_FAULT_AT_A_TIME.lock().await;
    let ns = common::unique("fault-restart");
    tc.track_cluster_object(&common::builtin("", "v1", "Namespace", "namespaces"), &ns);
    let (_dir, rel) = release(&ns, 400, None);
    let (task, done) = start(&tc, &rel);
    after(&done, 40).await;
    fault("restart", "kube-apiserver").await;
    let first = task.await.expect("join");
    assert!(first.report.is_some());
    converge(&tc, &rel).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a real control plane with fault.sh (CVO_TEST_KUBECONFIG and REALK8S_RUN_DIR from ../shared/realk8s/start.sh): run with --include-ignored (.ci/run does)"]
async fn etcd_stalled_mid_apply() {
    let tc = faultable().await;
    let _turn = ONE_FAULT_AT_A_TIME.lock().await;
    let ns = common::unique("fault-etcd");
    tc.track_cluster_object(&common::builtin("", "v1", "Namespace", "namespaces"), &ns);
    let (_dir, rel) = release(&ns, 400, None);
    let (task, done) = start(&tc, &rel);
    after(&done, 40).await;
    fault("pause", "etcd").await;
    // The length of the stall is the fault itself, not a wait for state.
    tokio::time::sleep(Duration::from_secs(8)).await;
    fault("resume", "etcd").await;
    task.await.expect("join");
    converge(&tc, &rel).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a real control plane with fault.sh (CVO_TEST_KUBECONFIG and REALK8S_RUN_DIR from ../shared/realk8s/start.sh): run with --include-ignored (.ci/run does)"]
async fn apiserver_down_when_the_run_starts() {
    let tc = faultable().await;
    let _turn = ONE_FAULT_AT_A_TIME.lock().await;
    let ns = common::unique("fault-down");
    tc.track_cluster_object(&common::builtin("", "v1", "Namespace", "namespaces"), &ns);
    let (_dir, rel) = release(&ns, 50, None);
    fault("kill", "kube-apiserver").await;
    let run = {
        let (client, rel) = (tc.client.clone(), rel.clone());
        tokio::spawn(async move { sync(&Cluster::new(client), &rel, &options(), |_| {}).await })
    };
    fault("start", "kube-apiserver").await;
    // The run may fail plainly (the outage outlasted its retries) or succeed; never hang.
    if let Err(e) = run.await.expect("join") {
        assert!(e.to_string().contains("nothing was applied"), "{e}");
    }
    converge(&tc, &rel).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a real control plane with fault.sh (CVO_TEST_KUBECONFIG and REALK8S_RUN_DIR from ../shared/realk8s/start.sh): run with --include-ignored (.ci/run does)"]
async fn cvo_killed_mid_update_leaves_the_update_visible() {
    let tc = faultable().await;
    let _turn = ONE_FAULT_AT_A_TIME.lock().await;
    let (_cv_turn, cv_resource) = common::cluster_version(&tc).await;
    let cvs = common::create_cluster_version(&tc, &cv_resource).await;
    let ns = common::unique("fault-kill");
    tc.track_cluster_object(&common::builtin("", "v1", "Namespace", "namespaces"), &ns);
    let (_d1, v100) = release(&ns, 600, Some("1.0.0"));
    converge(&tc, &v100).await;
    let (d2, v101) = release(&ns, 600, Some("1.0.1"));
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig: PathBuf = tc.kubeconfig_file(dir.path()).await;
    let mut child = common::cli::process()
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["apply", "--parallelism", "2", "--release"])
        .arg(d2.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn cvo");
    common::poll_until("the update recorded", Duration::from_secs(60), || async {
        let cv = cvs.get("version").await.map_err(|e| e.to_string())?;
        let newest = &cv.data["status"]["history"][0];
        if newest["version"] == "1.0.1" && newest["state"] == "Partial" {
            Ok(())
        } else {
            Err(format!("history[0] = {newest}"))
        }
    })
    .await;
    child.kill().expect("kill -9");
    let _ = child.wait();
    let cv = cvs.get("version").await.expect("cv");
    let status = &cv.data["status"];
    assert_eq!(status["desired"]["version"], "1.0.1", "{status}");
    let progressing = status["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "Progressing"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(progressing["status"], "True", "{status}");
    converge(&tc, &v101).await;
    let cv = cvs.get("version").await.expect("cv");
    assert_eq!(cv.data["status"]["history"][0]["state"], "Completed");
    cvs.delete("version", &Default::default())
        .await
        .expect("delete cv");
}

/// `/readyz` of the operator on `port`: its status code, or 0 when it does not answer.
async fn readyz(port: u16) -> u16 {
    common::http_get(port, "/readyz").await.map_or(0, |r| r.0)
}

/// Waits until `/readyz` of the operator on `port` answers `code`; returns how long it took.
async fn readyz_becomes(port: u16, code: u16, within: Duration) -> Duration {
    let started = std::time::Instant::now();
    common::poll_until(&format!("/readyz {code}"), within, || async {
        match readyz(port).await {
            c if c == code => Ok(()),
            c => Err(format!("/readyz {c}")),
        }
    })
    .await;
    started.elapsed()
}

/// Issue 23, on the real control plane: `cvo operator` started while kube-apiserver is down
/// stays up (`/healthz` 200, `/readyz` 503, trying again), and once the server is started
/// becomes ready and completes a full pass. Then, while it runs, the server is killed for
/// 15 s (longer than the renew deadline: the leader gives the Lease up): `/readyz` is 503
/// during the outage, 200 after it, and the same process leads again and runs a new full
/// pass within seconds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a real control plane with fault.sh (CVO_TEST_KUBECONFIG and REALK8S_RUN_DIR from ../shared/realk8s/start.sh): run with --include-ignored (.ci/run does)"]
async fn the_operator_waits_for_a_killed_apiserver_and_resumes_after_an_outage() {
    let _tc = faultable().await;
    let _turn = ONE_FAULT_AT_A_TIME.lock().await;
    let env = common::operator::Env::new("fault-operator").await;
    let ns = env.ns.clone();
    env.write_release(
        "1.0.0",
        &[(
            "0000_10_a_00_cm.yaml",
            common::configmap(&ns, "settings", "", &[("a", "one")]),
        )],
    );
    fault("kill", "kube-apiserver").await;
    let op = env.start(&["--resync-interval", "1h", "--lease-name", &env.lease]);
    let port = op.port;
    common::poll_until(
        "three failed attempts to reach the API server",
        Duration::from_secs(30),
        || async {
            let n = op
                .log()
                .lines()
                .filter(|l| l.contains("cannot reach the API server at"))
                .count();
            if n >= 3 { Ok(()) } else { Err(format!("{n}")) }
        },
    )
    .await;
    assert_eq!(
        common::http_get(port, "/healthz").await,
        Ok((200, "ok\n".into()))
    );
    assert_eq!(readyz(port).await, 503);

    let started = std::time::Instant::now();
    fault("start", "kube-apiserver").await;
    // The attempts are 1 s, 2 s, 4 s, … apart (capped at 30 s): the next one connects.
    readyz_becomes(port, 200, Duration::from_secs(60)).await;
    eprintln!(
        "ready {:?} after kube-apiserver was started",
        started.elapsed()
    );
    common::poll_until(
        "ClusterVersion history 1.0.0 Completed",
        Duration::from_secs(60),
        || async {
            let cv = env.cvs.get("version").await.map_err(|e| e.to_string())?;
            let newest = &cv.data["status"]["history"][0];
            if newest["version"] == "1.0.0" && newest["state"] == "Completed" {
                Ok(())
            } else {
                Err(format!("history[0] = {newest}"))
            }
        },
    )
    .await;
    let text = op
        .metric_at_least("cvo_sync_passes_total", &[("trigger", "initial")], 1.0)
        .await;
    let passes = common::operator::metric(&text, "cvo_sync_passes_total", &[]);
    assert!(op.log().contains("connected to the API server at"));

    // An outage under the running leader.
    fault("kill", "kube-apiserver").await;
    let down = std::time::Instant::now();
    // The elector asks every 2 s: its next attempt fails.
    readyz_becomes(port, 503, Duration::from_secs(10)).await;
    // The length of the outage is the fault itself; /readyz stays 503 all along.
    while down.elapsed() < Duration::from_secs(15) {
        assert_eq!(readyz(port).await, 503, "during the outage");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // Timed from the start of kube-apiserver (its own start-up, about 2 s, included).
    let back = std::time::Instant::now();
    fault("start", "kube-apiserver").await;
    readyz_becomes(port, 200, Duration::from_secs(30)).await;
    eprintln!(
        "ready again {:?} after kube-apiserver was started",
        back.elapsed()
    );
    // Led again: the new pass is a new leader's first ("initial"), not a timer's.
    let text = op
        .metric_at_least("cvo_sync_passes_total", &[("trigger", "initial")], 2.0)
        .await;
    assert_eq!(
        common::operator::metric(&text, "cvo_sync_passes_total", &[]),
        passes + 1.0,
        "{text}"
    );
    let resumed = back.elapsed();
    eprintln!("a new full pass {resumed:?} after kube-apiserver was started");
    assert!(
        resumed < Duration::from_secs(15),
        "the work resumes within seconds, not after {resumed:?}: {text}"
    );
    assert_eq!(common::operator::metric(&text, "cvo_leader", &[]), 1.0);
    assert!(
        op.log().contains("lost the leadership"),
        "a 15 s outage outlasts the renew deadline (10 s)"
    );
    for line in op.log().lines().filter(|l| {
        ["leader", "full pass done", "connected", "Lease"]
            .iter()
            .any(|w| l.contains(w))
    }) {
        eprintln!("{line}");
    }
    op.terminate().await;
    env.finish().await;
}
