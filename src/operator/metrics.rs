//! What the operator tells Prometheus and the kubelet: the metrics (prometheus-client, text
//! exposition), the request counter wrapped around the operator's client, and the HTTP
//! endpoints `/metrics`, `/healthz`, `/readyz` and `/timings` (the last full pass's
//! `--timings` page; hyper).
//!
//! | metric | type | labels |
//! |---|---|---|
//! | `cvo_sync_pass_duration_seconds` | histogram | `trigger` (initial, resync, clusterversion) |
//! | `cvo_sync_passes_total` | counter | `trigger`, `result` (applied, failed, refused, error, handed-over, switched) |
//! | `cvo_sync_pass_writes` | gauge | — writes the last full pass sent (0 in steady state) |
//! | `cvo_manifests_total` | counter | `action` (created, updated, unchanged, …), of passes and repairs |
//! | `cvo_drift_repairs_total` | counter | `action`: one manifest re-applied after a watch event |
//! | `cvo_api_requests_total` | counter | `verb` (GET, LIST, WATCH, PATCH, PUT, POST, DELETE) |
//! | `cvo_deletions_in_progress` | gauge | — deletions requested and not finished |
//! | `cvo_cluster_version` | gauge (1) | `type` (current, desired), `version` |
//! | `cvo_capability` | gauge | `name`, `enabled` (true, false): 1 per capability the release knows or the cluster enables |
//! | `cvo_upgradeable` | gauge | — 1 only when Upgradeable=True (Unknown is 0: fail closed) |
//! | `cvo_leader` | gauge | — 1 while this process holds the Lease |
//!
//! The Lease traffic goes through its own client and is not counted: requests here are the
//! release's.
//!
//! ## Probes
//!
//! The endpoints are served from the first moment, before the API server is reached
//! (docs/operator.md, "Start-up"), so the kubelet's probes never meet a closed port:
//!
//! - `/healthz` and `/livez`: 200 while the process serves. Nothing else: an operator waiting
//!   for its API server is alive, and restarting it would not bring the server back.
//! - `/startupz` (the startup probe's): 200 once ready, or after holding the request for
//!   [`STARTUP_HOLD`] without becoming ready (started, but not ready: see [`started`]).
//! - `/readyz` ([`Readiness`]): 200 when the process has reached the API server **and** the
//!   last leader-election attempt got an answer (this process leads, or stands by behind
//!   another leader); 503 before that, while the elector's attempts fail (the server cannot be
//!   reached: the elector asks it every `--lease-retry`, which is the heartbeat — no other
//!   polling), and from the stop signal on. It never waits for a full pass: the release
//!   includes the operator's own Deployment, whose rollout a pass may wait for (readiness
//!   waiting for the pass would wait for itself), and during a move to a new image the new
//!   pod is a standby that must become Ready for the old pod to be replaced. The operator of
//!   a release that cannot be used follows the same rule.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, Response, StatusCode};
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::apply::Action;

type Labels = Vec<(&'static str, String)>;

/// Pass durations: 50 ms to about 27 minutes.
fn pass_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.05, 2.0, 16))
}

/// Every metric of the operator, and the readiness the endpoints report.
pub struct Metrics {
    registry: Registry,
    pub pass_duration: Family<Labels, Histogram>,
    pub passes: Family<Labels, Counter>,
    pub pass_writes: Gauge,
    pub pass_requests: Gauge,
    pub manifests: Family<Labels, Counter>,
    pub repairs: Family<Labels, Counter>,
    pub requests: Family<Labels, Counter>,
    pub deletions_in_progress: Gauge,
    pub deletions_stuck: Gauge,
    pub deletions_reappeared: Counter,
    pub deletion_duration: Histogram,
    pub cluster_version: Family<Labels, Gauge>,
    pub capability: Family<Labels, Gauge>,
    pub upgradeable: Gauge,
    pub leader: Gauge,
    /// Writes sent so far (every verb but GET, LIST and WATCH), for per-pass deltas.
    writes: AtomicU64,
    /// Requests sent so far, for per-pass deltas.
    sent: AtomicU64,
    /// What `/readyz` answers.
    pub readiness: Readiness,
    /// Where the last full pass's time went, drawn by `/timings`.
    timings: std::sync::Mutex<Option<Arc<crate::timings::Timings>>>,
}

/// The last leader-election attempt, as [`Readiness`] sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LeaseAttempt {
    /// None yet.
    None,
    /// The server answered: this process leads, or stands by.
    Answered,
    /// The Lease could not be read or written (the server cannot be reached, or refused).
    Failed,
}

/// What `/readyz` answers (the module doc's rule): whether the API server was reached, how
/// the last leader-election attempt went, and whether the process is stopping.
#[derive(Debug, Default)]
pub struct Readiness {
    connected: AtomicBool,
    /// [`LeaseAttempt`] as 0 (none), 1 (answered), 2 (failed).
    lease: AtomicU8,
    stopping: AtomicBool,
    /// Woken at every change, for [`Readiness::wait`].
    changed: tokio::sync::Notify,
}

impl Readiness {
    /// The API server answered at start-up.
    pub fn connected(&self) {
        self.connected.store(true, Ordering::Relaxed);
        self.changed.notify_waiters();
    }

    /// A leader-election attempt ended: `answered` when the Lease could be read (and taken or
    /// renewed, or found held by another), false when it failed.
    pub fn lease_attempt(&self, answered: bool) {
        self.lease
            .store(if answered { 1 } else { 2 }, Ordering::Relaxed);
        self.changed.notify_waiters();
    }

    /// The stop signal came: not ready from now on.
    pub fn stopping(&self) {
        self.stopping.store(true, Ordering::Relaxed);
        self.changed.notify_waiters();
    }

    /// [`Readiness::check`] once it is `Ok` or the process is stopping, or when `hold` has
    /// passed, whichever comes first.
    pub async fn wait(&self, hold: std::time::Duration) -> Result<(), &'static str> {
        let deadline = tokio::time::Instant::now() + hold;
        loop {
            // Registered before the check, so a change between the two is not missed.
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            let now = self.check();
            if now.is_ok() || self.stopping.load(Ordering::Relaxed) {
                return now;
            }
            if tokio::time::timeout_at(deadline, changed).await.is_err() {
                return self.check();
            }
        }
    }

    /// `Ok` when ready, else why not (the body of a 503).
    pub fn check(&self) -> Result<(), &'static str> {
        let lease = match self.lease.load(Ordering::Relaxed) {
            0 => LeaseAttempt::None,
            1 => LeaseAttempt::Answered,
            _ => LeaseAttempt::Failed,
        };
        ready(
            self.connected.load(Ordering::Relaxed),
            lease,
            self.stopping.load(Ordering::Relaxed),
        )
    }
}

/// The readiness rule (module doc): connected, the last Lease attempt answered, not stopping.
pub fn ready(connected: bool, lease: LeaseAttempt, stopping: bool) -> Result<(), &'static str> {
    if stopping {
        return Err("stopping");
    }
    if !connected {
        return Err("waiting for the API server to answer");
    }
    match lease {
        LeaseAttempt::Answered => Ok(()),
        LeaseAttempt::None => Err("waiting for the first leader-election attempt"),
        LeaseAttempt::Failed => Err(
            "the leader Lease cannot be read or written (is the API server reachable? see the log)",
        ),
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("cvo");
        let m = Metrics {
            registry: Registry::default(),
            pass_duration: Family::new_with_constructor(pass_histogram as fn() -> Histogram),
            passes: Family::default(),
            pass_writes: Gauge::default(),
            pass_requests: Gauge::default(),
            manifests: Family::default(),
            repairs: Family::default(),
            requests: Family::default(),
            deletions_in_progress: Gauge::default(),
            deletions_stuck: Gauge::default(),
            deletions_reappeared: Counter::default(),
            deletion_duration: pass_histogram(),
            cluster_version: Family::default(),
            capability: Family::default(),
            upgradeable: Gauge::default(),
            leader: Gauge::default(),
            writes: AtomicU64::new(0),
            sent: AtomicU64::new(0),
            readiness: Readiness::default(),
            timings: std::sync::Mutex::default(),
        };
        m.register(&mut registry);
        Metrics { registry, ..m }
    }

    /// Registers every metric in `registry` with its name and help text.
    fn register(&self, registry: &mut Registry) {
        registry.register(
            "sync_pass_duration_seconds",
            "Duration of full sync passes",
            self.pass_duration.clone(),
        );
        registry.register("sync_passes", "Full sync passes", self.passes.clone());
        registry.register(
            "sync_pass_writes",
            "Write requests sent by the last full sync pass (0 when nothing drifted)",
            self.pass_writes.clone(),
        );
        registry.register(
            "sync_pass_requests",
            "Requests sent by the last full sync pass (watches and repairs meanwhile included)",
            self.pass_requests.clone(),
        );
        registry.register(
            "manifests",
            "Manifests handled, by action",
            self.manifests.clone(),
        );
        registry.register(
            "drift_repairs",
            "Single manifests re-applied after a watch saw a change the operator did not make",
            self.repairs.clone(),
        );
        registry.register(
            "api_requests",
            "Requests sent to the API server for the release, by verb",
            self.requests.clone(),
        );
        registry.register(
            "deletions_in_progress",
            "Deletions requested by the release and not finished",
            self.deletions_in_progress.clone(),
        );
        registry.register(
            "deletions_stuck",
            "Deletions pending for longer than --stuck-after",
            self.deletions_stuck.clone(),
        );
        registry.register(
            "deletions_reappeared",
            "Objects of delete manifests found again after their deletion had completed (deleted again)",
            self.deletions_reappeared.clone(),
        );
        registry.register(
            "deletion_duration_seconds",
            "From the request of a deletion to the pass that saw the object gone",
            self.deletion_duration.clone(),
        );
        registry.register(
            "cluster_version",
            "The release versions of ClusterVersion (1 per type and version)",
            self.cluster_version.clone(),
        );
        registry.register(
            "capability",
            "The capabilities of the last full pass (1 per capability, labelled enabled or not)",
            self.capability.clone(),
        );
        registry.register(
            "upgradeable",
            "1 when Upgradeable=True, else 0 (False or Unknown)",
            self.upgradeable.clone(),
        );
        registry.register(
            "leader",
            "1 while this process holds the leader Lease",
            self.leader.clone(),
        );
    }

    /// Keeps where the last full pass's time went, for `/timings`.
    pub fn set_timings(&self, timings: crate::timings::Timings) {
        *self
            .timings
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(Arc::new(timings));
    }

    /// The `/timings` page of the last full pass, `None` before the first one.
    fn timings_page(&self) -> Option<String> {
        let last = self
            .timings
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        last.map(|t| crate::timings::page(&t))
    }

    /// The text exposition of every metric.
    pub fn render(&self) -> String {
        let mut out = String::new();
        if encode(&mut out, &self.registry).is_err() {
            out.clear();
        }
        out
    }

    /// Whether `/readyz` answers 200 ([`Readiness::check`]).
    pub fn is_ready(&self) -> bool {
        self.readiness.check().is_ok()
    }

    /// Write requests sent so far.
    pub fn writes(&self) -> u64 {
        self.writes.load(Ordering::Relaxed)
    }

    /// Requests sent so far.
    pub fn sent(&self) -> u64 {
        self.sent.load(Ordering::Relaxed)
    }

    /// The deletions of a pass: in progress and stuck (pending longer than `stuck_after`),
    /// deletion durations, and objects that came back.
    pub fn record_deletions(
        &self,
        outcome: &crate::sync::SyncOutcome,
        stuck_after: std::time::Duration,
    ) {
        let count = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
        let now = jiff::Timestamp::now();
        let stuck = outcome
            .deletions
            .iter()
            .filter_map(|d| d.since)
            .filter(|since| now.duration_since(*since).unsigned_abs() > stuck_after)
            .count();
        self.deletions_in_progress
            .set(count(outcome.deletions.len()));
        self.deletions_stuck.set(count(stuck));
        self.deletions_reappeared
            .inc_by(outcome.reappeared.len() as u64);
        for (_, took) in &outcome.deletions_completed {
            self.deletion_duration.observe(took.as_secs_f64());
        }
    }

    pub fn count_action(&self, family: &Family<Labels, Counter>, action: Action) {
        family
            .get_or_create(&vec![("action", action.as_str().to_owned())])
            .inc();
    }

    /// Records a full pass.
    pub fn pass(&self, trigger: &str, result: &str, seconds: f64) {
        self.pass_duration
            .get_or_create(&vec![("trigger", trigger.to_owned())])
            .observe(seconds);
        self.passes
            .get_or_create(&vec![
                ("trigger", trigger.to_owned()),
                ("result", result.to_owned()),
            ])
            .inc();
    }

    /// Sets `cvo_capability` to exactly the capabilities `caps` knows or enables.
    pub fn set_capabilities(&self, caps: &crate::release::capability::Capabilities) {
        self.capability.clear();
        for name in caps.known.union(&caps.enabled) {
            let enabled = caps.enabled.contains(name);
            self.capability
                .get_or_create(&vec![
                    ("name", name.clone()),
                    ("enabled", enabled.to_string()),
                ])
                .set(1);
        }
    }

    /// Sets `cvo_cluster_version` to exactly these (type, version) pairs.
    pub fn set_cluster_version(&self, versions: &[(&'static str, String)]) {
        self.cluster_version.clear();
        for (type_, version) in versions {
            self.cluster_version
                .get_or_create(&vec![
                    ("type", (*type_).to_owned()),
                    ("version", version.clone()),
                ])
                .set(1);
        }
    }

    fn request(&self, verb: &'static str) {
        self.requests
            .get_or_create(&vec![("verb", verb.to_owned())])
            .inc();
        self.sent.fetch_add(1, Ordering::Relaxed);
        if !matches!(verb, "GET" | "LIST" | "WATCH") {
            self.writes.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// The verb of a request as the API server counts it: GET of a collection is LIST, with
/// `watch=true` WATCH.
fn verb(req: &http::Request<kube::client::Body>) -> &'static str {
    let query = req.uri().query().unwrap_or("");
    let watch = query
        .split('&')
        .any(|kv| kv == "watch=true" || kv == "watch=1");
    match *req.method() {
        http::Method::GET if watch => "WATCH",
        http::Method::GET => {
            // /api/v1/… or /apis/group/v1/…, then [namespaces/NS/]plural[/name[/sub]]: a
            // plural alone is a LIST.
            let path = req.uri().path().trim_matches('/');
            let segments: Vec<&str> = path.split('/').collect();
            let prefix = if segments.first() == Some(&"api") {
                2
            } else {
                3
            };
            let mut rest = segments.get(prefix..).unwrap_or_default();
            if rest.len() >= 3 && rest[0] == "namespaces" {
                rest = &rest[2..];
            }
            if rest.len() == 1 { "LIST" } else { "GET" }
        }
        http::Method::PATCH => "PATCH",
        http::Method::PUT => "PUT",
        http::Method::POST => "POST",
        http::Method::DELETE => "DELETE",
        _ => "OTHER",
    }
}

/// `client`, counting every request it sends in `metrics`.
pub fn instrument(client: kube::Client, metrics: Arc<Metrics>) -> kube::Client {
    let namespace = client.default_namespace().to_owned();
    let service = tower::service_fn(move |req: http::Request<kube::client::Body>| {
        let verb = verb(&req);
        metrics.request(verb);
        if !matches!(verb, "GET" | "LIST" | "WATCH") {
            tracing::debug!(verb, path = %req.uri().path(), "write request");
        }
        let client = client.clone();
        async move { client.send(req).await }
    });
    kube::Client::new(service, namespace)
}

/// Serves `/metrics`, `/timings`, `/healthz` and `/livez` (the process answers) and `/readyz`
/// ([`Readiness`]: connected, placed by the election, the Lease still answered, not
/// stopping) on `listener` until the process ends.
pub async fn serve(metrics: Arc<Metrics>, listener: tokio::net::TcpListener) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            // Out of file descriptors, say: do not spin.
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            continue;
        };
        let metrics = metrics.clone();
        tokio::spawn(async move {
            let io = hyper_util::rt::TokioIo::new(stream);
            let service = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                let metrics = metrics.clone();
                async move {
                    let path = req.uri().path();
                    let response = if path == "/startupz" {
                        started(&metrics).await
                    } else {
                        respond(&metrics, path)
                    };
                    Ok::<_, std::convert::Infallible>(response)
                }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(io, service)
                .await;
        });
    }
}

/// Binds the metrics address.
///
/// # Errors
///
/// [`ListenError`] (naming the address) when it cannot be bound: in use, not local, not
/// allowed.
pub async fn bind(addr: SocketAddr) -> Result<tokio::net::TcpListener, ListenError> {
    tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| ListenError { addr, source })
}

/// The metrics address cannot be bound.
#[derive(Debug, thiserror::Error)]
#[error("cannot listen on {addr} for /metrics: {source}")]
pub struct ListenError {
    pub addr: SocketAddr,
    #[source]
    pub source: std::io::Error,
}

/// How long `/startupz` holds a request for the operator to become ready. The shipped
/// Deployment's startup probe waits longer (`timeoutSeconds: 25`).
pub const STARTUP_HOLD: std::time::Duration = std::time::Duration::from_secs(20);

/// `/startupz`, the startup probe's: 200 once the operator is ready ([`Readiness`]), or once
/// [`STARTUP_HOLD`] passed with the request held — it is started either way (an API server
/// that cannot be reached is no reason to restart it), but readiness, probed only after the
/// startup probe succeeded, has had its chance: a normal start fails no probe, also on a
/// busy node where reaching the server and the first Lease attempt take seconds.
async fn started(metrics: &Metrics) -> Response<Full<Bytes>> {
    let body = match metrics.readiness.wait(STARTUP_HOLD).await {
        Ok(()) => "ok\n".to_owned(),
        Err(why) => format!("started; not ready: {why}\n"),
    };
    text(StatusCode::OK, "text/plain", body)
}

fn text(status: StatusCode, content_type: &str, body: String) -> Response<Full<Bytes>> {
    Response::builder()
        .status(status)
        .header(http::header::CONTENT_TYPE, content_type)
        .body(Full::new(Bytes::from(body)))
        .unwrap_or_else(|_| Response::new(Full::new(Bytes::new())))
}

fn respond(metrics: &Metrics, path: &str) -> Response<Full<Bytes>> {
    let (status, content_type, body) = match path {
        "/metrics" => (
            StatusCode::OK,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
            metrics.render(),
        ),
        "/healthz" | "/livez" => (StatusCode::OK, "text/plain", "ok\n".to_owned()),
        "/timings" => match metrics.timings_page() {
            Some(page) => (StatusCode::OK, "text/html; charset=utf-8", page),
            None => (
                StatusCode::NOT_FOUND,
                "text/plain",
                "no full pass has run yet\n".to_owned(),
            ),
        },
        "/readyz" => match metrics.readiness.check() {
            Ok(()) => (StatusCode::OK, "text/plain", "ok\n".to_owned()),
            Err(why) => (
                StatusCode::SERVICE_UNAVAILABLE,
                "text/plain",
                format!("not ready: {why}\n"),
            ),
        },
        _ => (
            StatusCode::NOT_FOUND,
            "text/plain",
            "not found\n".to_owned(),
        ),
    };
    text(status, content_type, body)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(method: http::Method, uri: &str) -> http::Request<kube::client::Body> {
        http::Request::builder()
            .method(method)
            .uri(uri)
            .body(kube::client::Body::empty())
            .unwrap()
    }

    #[test]
    fn verbs_tell_get_list_and_watch_apart() {
        use http::Method;
        for (method, uri, want) in [
            (Method::GET, "/api/v1/namespaces/ns/configmaps", "LIST"),
            (Method::GET, "/api/v1/namespaces/ns/configmaps/a", "GET"),
            (Method::GET, "/api/v1/namespaces", "LIST"),
            (Method::GET, "/api/v1/namespaces/ns", "GET"),
            (Method::GET, "/apis/apps/v1/deployments?watch=true", "WATCH"),
            (
                Method::GET,
                "/apis/apps/v1/namespaces/n/deployments",
                "LIST",
            ),
            (
                Method::GET,
                "/apis/apps/v1/namespaces/n/deployments/d",
                "GET",
            ),
            (
                Method::GET,
                "/apis/config.openshift.io/v1/clusterversions/version",
                "GET",
            ),
            (Method::PATCH, "/api/v1/namespaces/ns/configmaps/a", "PATCH"),
        ] {
            assert_eq!(verb(&request(method, uri)), want, "{uri}");
        }
    }

    #[test]
    fn the_exposition_has_every_family_and_counts_writes() {
        let m = Metrics::new();
        m.request("GET");
        m.request("PATCH");
        assert_eq!(m.writes(), 1);
        m.pass("initial", "applied", 0.2);
        m.count_action(&m.manifests, Action::Created);
        m.set_cluster_version(&[("current", "1.0.0".into())]);
        m.set_cluster_version(&[("current", "1.1.0".into())]);
        m.upgradeable.set(1);
        let text = m.render();
        for line in [
            "cvo_api_requests_total{verb=\"PATCH\"} 1",
            "cvo_manifests_total{action=\"created\"} 1",
            "cvo_sync_passes_total{trigger=\"initial\",result=\"applied\"} 1",
            "cvo_cluster_version{type=\"current\",version=\"1.1.0\"} 1",
            "cvo_upgradeable 1",
            "cvo_leader 0",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} in\n{text}");
        }
        assert!(!text.contains("1.0.0"), "old versions are cleared: {text}");
        assert!(text.contains("cvo_sync_pass_duration_seconds_bucket"));
        assert_eq!(
            respond(&m, "/readyz").status(),
            StatusCode::SERVICE_UNAVAILABLE
        );
        m.readiness.connected();
        m.readiness.lease_attempt(true);
        assert_eq!(respond(&m, "/readyz").status(), StatusCode::OK);
        assert_eq!(respond(&m, "/healthz").status(), StatusCode::OK);
        assert_eq!(respond(&m, "/livez").status(), StatusCode::OK);
        assert_eq!(respond(&m, "/nope").status(), StatusCode::NOT_FOUND);
    }

    #[test]
    fn ready_once_connected_and_placed_by_the_election_and_not_after() {
        use LeaseAttempt::{Answered, Failed, None};
        // Not before the server answered, whatever else.
        for lease in [None, Answered, Failed] {
            assert!(ready(false, lease, false).is_err(), "{lease:?}");
        }
        // Connected: ready once the election placed this process (leader or standby: the
        // attempt answered), not while its attempts fail.
        assert!(ready(true, None, false).is_err());
        assert_eq!(ready(true, Answered, false), Ok(()));
        assert!(
            ready(true, Failed, false)
                .unwrap_err()
                .contains("cannot be read or written")
        );
        // Stopping: never ready again.
        for lease in [None, Answered, Failed] {
            assert_eq!(ready(true, lease, true), Err("stopping"));
        }
    }

    #[tokio::test(start_paused = true)]
    async fn startupz_answers_when_ready_or_once_the_hold_has_passed() {
        use std::time::Duration;
        let m = Arc::new(Metrics::new());
        // Held until the operator is ready, answered at once then.
        let probe = tokio::spawn({
            let m = m.clone();
            async move { (tokio::time::Instant::now(), started(&m).await) }
        });
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert!(!probe.is_finished(), "answered before ready");
        m.readiness.connected();
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(!probe.is_finished(), "connected is not ready yet");
        m.readiness.lease_attempt(true);
        let (asked, response) = probe.await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(asked.elapsed(), Duration::from_secs(4));
        // Never ready (no API server): started after the hold, saying why it is not ready.
        let m = Metrics::new();
        let asked = tokio::time::Instant::now();
        let response = started(&m).await;
        assert_eq!(asked.elapsed(), STARTUP_HOLD);
        assert_eq!(response.status(), StatusCode::OK);
        let body = http_body_util::BodyExt::collect(response.into_body())
            .await
            .unwrap()
            .to_bytes();
        assert_eq!(
            &body[..],
            b"started; not ready: waiting for the API server to answer\n"
        );
        // Stopping ends the hold at once.
        let m = Metrics::new();
        m.readiness.stopping();
        let asked = tokio::time::Instant::now();
        started(&m).await;
        assert_eq!(asked.elapsed(), Duration::ZERO);
    }

    #[test]
    fn readiness_follows_the_lease_heartbeat_and_says_why_not() {
        let m = Metrics::new();
        let status = |m: &Metrics| respond(m, "/readyz").status();
        assert_eq!(status(&m), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(
            m.readiness.check(),
            Err("waiting for the API server to answer")
        );
        m.readiness.connected();
        assert!(!m.is_ready(), "connected, not placed yet");
        m.readiness.lease_attempt(true);
        assert!(m.is_ready());
        // The server went away: the next Lease attempt fails.
        m.readiness.lease_attempt(false);
        assert!(!m.is_ready());
        assert_eq!(status(&m), StatusCode::SERVICE_UNAVAILABLE);
        // Back: the next attempt answers.
        m.readiness.lease_attempt(true);
        assert_eq!(status(&m), StatusCode::OK);
        m.readiness.stopping();
        m.readiness.lease_attempt(true);
        assert_eq!(m.readiness.check(), Err("stopping"));
    }

    #[test]
    fn timings_are_the_last_full_passs_page() {
        let m = Metrics::new();
        assert_eq!(respond(&m, "/timings").status(), StatusCode::NOT_FOUND);
        m.set_timings(crate::timings::Timings {
            release: Some("1.2.3".into()),
            seconds: 1.5,
            cpu_seconds: None,
            parallelism: 16,
            passes: Vec::new(),
        });
        let page = respond(&m, "/timings");
        assert_eq!(page.status(), StatusCode::OK);
        assert_eq!(
            page.headers()[http::header::CONTENT_TYPE],
            "text/html; charset=utf-8"
        );
    }
}
