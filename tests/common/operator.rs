//! `cvo operator` as a process of the tests, and the fixture every operator test starts from.
//!
//! [`Env`] is the setup of `tests/operator.rs`: the cluster, the ClusterVersion lock and
//! object, a namespace, a kubeconfig for the `cvo` processes, a release directory and a Lease
//! name. [`Operator`] is one running `cvo operator` (its log kept, printed when the test
//! fails); `tests/cli/cli_rbac.rs` runs it too.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use kube::api::{Api, ApiResource, DeleteParams, DynamicObject};

use super::TestCluster;

/// What an operator test starts from, used through its fields. Fields drop in this order:
/// the operator's files first, the ClusterVersion lock and then the cluster (its cleanup
/// guard) last.
pub struct Env {
    /// `dir/release`, written by [`Env::write_release`].
    pub release: PathBuf,
    /// A kubeconfig file for the `cvo` processes (in `dir`).
    pub kubeconfig: PathBuf,
    /// A unique Lease name for `--lease-name`.
    pub lease: String,
    /// A fresh namespace: the operator's own, and the one the release's objects go to.
    pub ns: String,
    /// The API of ClusterVersion, whose `version` exists (no status yet).
    pub cvs: Api<DynamicObject>,
    /// The ClusterVersion kind.
    pub cv: ApiResource,
    /// A temporary directory for the release, the kubeconfig and the operators' logs.
    pub dir: tempfile::TempDir,
    turn: tokio::sync::MutexGuard<'static, ()>,
    pub tc: TestCluster,
}

impl Env {
    /// A cluster (see `common::cluster`), the ClusterVersion lock with `version` created, a
    /// namespace named after `prefix`, a kubeconfig, a release directory path and a Lease name.
    pub async fn new(prefix: &str) -> Env {
        let tc = super::cluster().await;
        let (turn, cv) = super::cluster_version(&tc).await;
        let cvs = super::create_cluster_version(&tc, &cv).await;
        let ns = tc.namespace(prefix).await;
        let dir = tempfile::tempdir().expect("tempdir");
        let kubeconfig = tc.kubeconfig_file(dir.path()).await;
        let release = dir.path().join("release");
        let lease = super::unique("lease");
        Env {
            release,
            kubeconfig,
            lease,
            ns,
            cvs,
            cv,
            dir,
            turn,
            tc,
        }
    }

    /// Writes release `version` of `files` into [`Env::release`].
    pub fn write_release(&self, version: &str, files: &[(&str, String)]) {
        super::write_release(&self.release, Some(version), files);
    }

    /// `cvo operator` on this cluster, namespace and release (see [`Operator::start`]).
    pub fn start(&self, extra: &[&str]) -> Operator {
        Operator::start(
            &self.kubeconfig,
            self.dir.path(),
            &self.release,
            &self.ns,
            extra,
        )
    }

    /// Deletes ClusterVersion `version` (so that the next test, or binary, on a real cluster
    /// sees none), then releases the lock.
    pub async fn finish(self) {
        let _ = self.cvs.delete("version", &DeleteParams::default()).await;
        drop(self.turn);
    }
}

/// A running `cvo operator`; killed (SIGKILL) when dropped, its log printed when the test
/// failed.
pub struct Operator {
    child: Option<std::process::Child>,
    pub port: u16,
    pub log: PathBuf,
}

impl Drop for Operator {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        if std::thread::panicking() {
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            eprintln!("--- operator log (port {}) ---\n{log}", self.port);
        }
    }
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port()
}

impl Operator {
    /// `cvo operator` on `release` in `namespace`, its log in `dir`, with `extra` arguments
    /// (and `--wait none` unless `extra` names a `--wait`).
    pub fn start(
        kubeconfig: &Path,
        dir: &Path,
        release: &Path,
        namespace: &str,
        extra: &[&str],
    ) -> Self {
        let wait: &[&str] = if extra.contains(&"--wait") {
            &[]
        } else {
            &["--wait", "none"]
        };
        let port = free_port();
        let log = dir.join(format!("operator-{port}.log"));
        let file = std::fs::File::create(&log).expect("log file");
        let child = super::cli::process()
            .env("CVO_LOG", "info,cvo::operator=debug")
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(["operator", "--release"])
            .arg(release)
            .args(["--namespace", namespace])
            .args(["--metrics-addr", &format!("127.0.0.1:{port}")])
            .args(wait)
            .args(extra)
            .stdout(std::process::Stdio::null())
            .stderr(file)
            .spawn()
            .expect("start cvo operator");
        Operator {
            child: Some(child),
            port,
            log,
        }
    }

    /// The operator's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn pid(&self) -> String {
        self.child.as_ref().expect("running").id().to_string()
    }

    /// The text of `/metrics`, or why not.
    pub async fn scrape(&self) -> Result<String, String> {
        super::http_get(self.port, "/metrics")
            .await
            .map(|(_, body)| body)
    }

    /// Waits until `/metrics` shows `name{labels}` at `value` or more.
    pub async fn metric_at_least(&self, name: &str, labels: &[(&str, &str)], value: f64) -> String {
        super::poll_until(
            &format!("{name}{labels:?} >= {value}"),
            Duration::from_secs(60),
            || async {
                let text = self.scrape().await?;
                let v = metric(&text, name, labels);
                if v >= value {
                    Ok(text)
                } else {
                    Err(format!("{name} = {v}"))
                }
            },
        )
        .await
    }

    /// SIGTERM, then the process must exit 0 within 30 s.
    pub async fn terminate(mut self) {
        let mut child = self.child.take().expect("running");
        let pid = child.id().to_string();
        let sent = std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("kill");
        assert!(sent.success());
        let started = Instant::now();
        let status = tokio::task::spawn_blocking(move || {
            loop {
                if let Some(status) = child.try_wait().expect("wait") {
                    return Some(status);
                }
                if started.elapsed() > Duration::from_secs(30) {
                    let _ = child.kill();
                    return None;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        })
        .await
        .expect("join");
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        match status {
            Some(s) => assert!(s.success(), "exit status {s} after SIGTERM; log:\n{log}"),
            None => panic!("still running 30 s after SIGTERM; log:\n{log}"),
        }
    }
}

/// The sum of the samples of `name` whose labels include `labels` (Prometheus text format).
pub fn metric(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let (metric_name, label_text) = match series.split_once('{') {
                Some((n, rest)) => (n, rest.trim_end_matches('}')),
                None => (series, ""),
            };
            if metric_name != name {
                return None;
            }
            let all = labels
                .iter()
                .all(|(k, v)| label_text.split(',').any(|kv| kv == format!("{k}=\"{v}\"")));
            all.then(|| value.parse::<f64>().ok()).flatten()
        })
        .sum()
}
