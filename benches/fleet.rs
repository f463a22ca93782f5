//! Fleet status benchmark (not a timed test): `cvo fleet status` (the real binary) against an
//! Open Cluster Management hub of N ManagedClusters (default 1,000; `BENCH_CLUSTERS=N`) and
//! their ManifestWorks, with no agents: a stand-in writes, through the status subresource,
//! what each cluster's work agent would report (ClusterVersion feedback, conditions).
//!
//! The hub: OCM's hub CRDs (`../shared/ocm/crds/hub`), Placement `fleet/waves` with three
//! decision groups (`canary`: 10 clusters, `early`: the next 90, `rest`) and its
//! PlacementDecisions as OCM's scheduler writes them (at most 100 clusters each), the
//! ManagedClusters (1 % unreachable), a namespace per cluster holding the two ManifestWorks of
//! cvo's observe and rollout sets (named and labelled as OCM's ManifestWorkReplicaSet
//! controller makes them, their spec the sets' template), and the sets themselves, in the
//! middle of a rollout: the canary done, a third of `early` done and the rest of it
//! progressing, `rest` not asked yet.
//!
//! Measured for a smaller fleet first (`BENCH_SMALL`, default 100) and then, the same hub
//! grown, for N: the wall time of `cvo fleet status --placement fleet/waves -o json`
//! (`BENCH_CVO=PATH` another build of it, e.g. a release build's;
//! `BENCH_RUNS` runs after one warm-up, default 5; CPU time and peak RSS by `/usr/bin/time`
//! when it is there); the requests the same read sends (`cvo::fleet::status::read` through a
//! client that records each request), with the time of read, judge and JSON encoding
//! in-process; and the time of its LIST pages fetched as text (the server's share), as sent
//! and from kube-apiserver's watch cache. The hub: the embedded API server served on loopback,
//! or with `CVO_BENCH_KUBECONFIG=FILE` that real cluster (a fresh one: `../shared/realk8s`).
//!
//! `cargo bench --bench fleet` (a plain `main`: each run is one measurement; results go in
//! docs/performance.md). Under `cargo test` it does nothing.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::ApiResource;
use serde_json::{Value, json};

use cvo::fleet::{ocm, work};

// Only the cluster to measure against is used here.
#[allow(dead_code)]
mod common;

/// The Placement's namespace and name.
const NS: &str = "fleet";
const PLACEMENT: &str = "waves";
/// The field manager of the setup's server-side applies.
const SETUP: &str = "bench-setup";
/// Writes in flight at once during setup.
const CONCURRENCY: usize = 24;
/// The first two decision groups: clusters `0..CANARY` and `CANARY..EARLY_END`.
const CANARY: usize = 10;
const EARLY_END: usize = 100;
/// OCM's scheduler puts at most this many clusters in one PlacementDecision.
const PER_DECISION: usize = 100;
/// The label the Placement's decision groups select on.
const WAVE_LABEL: &str = "fleet.cvo.io/bench-wave";

/// The release the fleet is at, the one it rolls out to, and the one before.
const OLD: &str = "4.18.3";
const NEW: &str = "4.18.5";
const OLDER: &str = "4.18.1";

fn image(version: &str) -> String {
    let fill = match version {
        NEW => "5e",
        OLD => "3c",
        _ => "1a",
    };
    format!("quay.example.com/cvo/release@sha256:{}", fill.repeat(32))
}

fn cluster_name(i: usize) -> String {
    format!("cluster-{i:04}")
}

/// Cluster `i`'s decision group: index and name.
fn wave(i: usize) -> (usize, &'static str) {
    match i {
        _ if i < CANARY => (0, "canary"),
        _ if i < EARLY_END => (1, "early"),
        _ => (2, "rest"),
    }
}

/// One cluster in 100 does not reach the hub (its agent stopped renewing its lease).
fn unreachable(i: usize) -> bool {
    i % 100 == 50
}

/// Where cluster `i` is in the rollout.
#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    /// Its rollout work asks for NEW, which its ClusterVersion completed.
    Done,
    /// Asked for NEW, updating.
    Progressing,
    /// Its rollout work still asks for OLD (a later wave), which it is at.
    Pending,
}

fn state(i: usize) -> State {
    match wave(i).0 {
        0 => State::Done,
        1 if i.is_multiple_of(3) => State::Done,
        1 => State::Progressing,
        _ => State::Pending,
    }
}

/// Times of the status written: the rollout's `Progressing` turned True ten minutes ago
/// (well within its `progressDeadline`), everything else a day ago.
struct Times {
    recent: String,
    old: String,
}

impl Times {
    fn now() -> Times {
        let now = jiff::Timestamp::now().as_second();
        let at = |s| jiff::Timestamp::from_second(s).expect("time").to_string();
        Times {
            recent: at(now - 600),
            old: at(now - 86_400),
        }
    }
}

fn condition(type_: &str, status: bool, reason: &str, message: &str, at: &str) -> Value {
    json!({"type": type_, "status": if status { "True" } else { "False" },
        "reason": reason, "message": message, "lastTransitionTime": at})
}

// ---------------------------------------------------------------------------------------------
// The hub's objects.

fn managed_cluster(i: usize, t: &Times) -> Value {
    let name = cluster_name(i);
    // A CA bundle of a real cluster's size (base64 of 1.2 KB).
    let ca = "QkVOQ0hD".repeat(200);
    json!({
        "apiVersion": ocm::managed_cluster().api_version, "kind": "ManagedCluster",
        "metadata": {"name": name, "labels": {
            WAVE_LABEL: wave(i).1, "name": name, "vendor": "OpenShift",
            "cluster.open-cluster-management.io/clusterset": "default",
        }},
        "spec": {"hubAcceptsClient": true, "leaseDurationSeconds": 60,
            "managedClusterClientConfigs": [{"url": format!("https://api.{name}.example.com:6443"), "caBundle": ca}],
            "taints": if unreachable(i) { json!([{"key": "cluster.open-cluster-management.io/unreachable",
                "effect": "NoSelect", "timeAdded": t.recent}]) } else { json!([]) }},
    })
}

fn managed_cluster_status(i: usize, t: &Times) -> Value {
    let available = if unreachable(i) {
        condition(
            "ManagedClusterConditionAvailable",
            false,
            "ManagedClusterLeaseUpdateStopped",
            "Registration agent stopped updating its lease.",
            &t.recent,
        )
    } else {
        condition(
            "ManagedClusterConditionAvailable",
            true,
            "ManagedClusterAvailable",
            "Managed cluster is available",
            &t.old,
        )
    };
    let resources = json!({"cpu": "24", "memory": "98765432Ki", "pods": "750"});
    json!({
        "conditions": [
            condition("HubAcceptedManagedCluster", true, "HubClusterAdminAccepted", "Accepted by hub cluster admin", &t.old),
            condition("ManagedClusterJoined", true, "ManagedClusterJoined", "Managed cluster joined", &t.old),
            available,
            condition("ManagedClusterConditionClockSynced", true, "ManagedClusterClockSynced", "The clock of the managed cluster is synced with the hub.", &t.old),
        ],
        "version": {"kubernetes": "v1.31.6"},
        "capacity": resources, "allocatable": resources,
        "clusterClaims": [
            {"name": "id.k8s.io", "value": format!("6f1c2b9e-0000-4000-8000-{i:012}")},
            {"name": "kubeversion.open-cluster-management.io", "value": "v1.31.6"},
            {"name": "platform.open-cluster-management.io", "value": "AWS"},
            {"name": "product.open-cluster-management.io", "value": "OpenShift"},
        ],
    })
}

fn placement() -> Value {
    let group = |name: &str| json!({"groupName": name, "groupClusterSelector": {"labelSelector": {"matchLabels": {WAVE_LABEL: name}}}});
    json!({
        "apiVersion": ocm::placement().api_version, "kind": "Placement",
        "metadata": {"name": PLACEMENT, "namespace": NS},
        "spec": {
            "clusterSets": ["default"],
            "tolerations": [{"key": "cluster.open-cluster-management.io/unreachable", "operator": "Exists"}],
            "decisionStrategy": {"groupStrategy": {
                "clustersPerDecisionGroup": "100%",
                "decisionGroups": [group("canary"), group("early"), group("rest")],
            }},
        },
    })
}

/// The PlacementDecisions of `n` clusters as OCM's scheduler writes them: per decision group,
/// slices of at most [`PER_DECISION`] clusters, named `PLACEMENT-decision-K` (K from 1);
/// each `(object, status)`.
fn decisions(n: usize) -> Vec<(Value, Value)> {
    let mut out = Vec::new();
    let groups = [
        (0, CANARY.min(n)),
        (CANARY.min(n), EARLY_END.min(n)),
        (EARLY_END.min(n), n),
    ];
    for (start, end) in groups.into_iter().filter(|(s, e)| s < e) {
        let (index, group) = wave(start);
        for chunk in (start..end).step_by(PER_DECISION) {
            let name = format!("{PLACEMENT}-decision-{}", out.len() + 1);
            let object = json!({
                "apiVersion": ocm::placement_decision().api_version, "kind": "PlacementDecision",
                "metadata": {"name": name, "namespace": NS, "labels": {
                    ocm::PLACEMENT_LABEL: PLACEMENT,
                    ocm::DECISION_GROUP_INDEX_LABEL: index.to_string(),
                    ocm::DECISION_GROUP_NAME_LABEL: group,
                }},
            });
            let chosen: Vec<Value> = (chunk..end.min(chunk + PER_DECISION))
                .map(|i| json!({"clusterName": cluster_name(i), "reason": ""}))
                .collect();
            out.push((object, json!({"decisions": chosen})));
        }
    }
    out
}

/// The Placement's status: its decision groups, each naming its PlacementDecisions.
fn placement_status(n: usize, decisions: &[(Value, Value)], t: &Times) -> Value {
    let mut groups: Vec<Value> = Vec::new();
    for (d, status) in decisions {
        let labels = &d["metadata"]["labels"];
        let index: usize = labels[ocm::DECISION_GROUP_INDEX_LABEL]
            .as_str()
            .and_then(|i| i.parse().ok())
            .expect("index");
        if groups.len() <= index {
            groups.push(json!({"decisionGroupIndex": index,
                "decisionGroupName": labels[ocm::DECISION_GROUP_NAME_LABEL], "decisions": [], "clusterCount": 0}));
        }
        let g = &mut groups[index];
        g["decisions"]
            .as_array_mut()
            .expect("list")
            .push(d["metadata"]["name"].clone());
        let count = g["clusterCount"].as_u64().expect("count");
        g["clusterCount"] =
            json!(count + status["decisions"].as_array().expect("list").len() as u64);
    }
    json!({
        "numberOfSelectedClusters": n,
        "decisionGroups": groups,
        "conditions": [
            condition("PlacementMisconfigured", false, "Succeedconfigured", "Placement configurations check pass", &t.old),
            condition("PlacementSatisfied", true, "AllDecisionsScheduled", "All cluster decisions scheduled", &t.old),
        ],
    })
}

fn rollout(version: &str, n: usize) -> work::Rollout {
    work::Rollout {
        namespace: NS.to_owned(),
        placement: PLACEMENT.to_owned(),
        version: version.to_owned(),
        image: image(version),
        clusters: (0..n).map(cluster_name).collect(),
        max_failures: work::MaxFailures::Percent(5),
        progress_deadline: Some(Duration::from_secs(2 * 3600)),
        min_success_time: Duration::from_secs(300),
        forced: None,
        accept_risks: Vec::new(),
    }
}

/// The ManifestWork OCM's controller makes for `set` in the namespace of cluster `i`.
fn manifest_work(set: &Value, i: usize) -> Value {
    let name = set["metadata"]["name"].as_str().expect("name");
    json!({
        "apiVersion": ocm::manifest_work().api_version, "kind": "ManifestWork",
        "metadata": {"name": name, "namespace": cluster_name(i), "labels": {
            ocm::REPLICA_SET_LABEL: format!("{NS}.{name}"),
            "work.open-cluster-management.io/placementname": PLACEMENT,
        }},
        "spec": set["spec"]["manifestWorkTemplate"],
    })
}

/// What ClusterVersion `version` of cluster `i` reports, as the feedback values its work
/// agent writes (`cvo::fleet::feedback::paths`).
fn feedback(i: usize) -> Vec<Value> {
    let s =
        |name: &str, v: &str| json!({"name": name, "fieldValue": {"type": "String", "string": v}});
    let int =
        |name: &str, v: i64| json!({"name": name, "fieldValue": {"type": "Integer", "integer": v}});
    let boolean = |name: &str, v: bool| json!({"name": name, "fieldValue": {"type": "Boolean", "boolean": v}});
    let (asked, generation, newest, previous) = match state(i) {
        State::Done => (NEW, 3, (NEW, "Completed"), (OLD, "Completed")),
        State::Progressing => (NEW, 3, (NEW, "Partial"), (OLD, "Completed")),
        State::Pending => (OLD, 2, (OLD, "Completed"), (OLDER, "Completed")),
    };
    let mut values = vec![
        int("generation", generation),
        int("observedGeneration", generation),
        s("requestedVersion", asked),
        s("requestedImage", &image(asked)),
        s("desiredVersion", asked),
        s("desiredImage", &image(asked)),
    ];
    for (k, (version, st)) in [newest, previous].into_iter().enumerate() {
        values.push(s(&format!("history{k}.version"), version));
        values.push(s(&format!("history{k}.state"), st));
        values.push(s(&format!("history{k}.image"), &image(version)));
        values.push(boolean(&format!("history{k}.verified"), true));
    }
    let updating = state(i) == State::Progressing;
    let progressing = if updating {
        format!(
            "Working towards {NEW}: {} of 871 done ({}% complete), waiting on etcd, kube-apiserver",
            500 + i % 300,
            (500 + i % 300) * 100 / 871
        )
    } else {
        format!("Cluster version is {}", newest.0)
    };
    let conditions: [(&str, &str, &str, String); 5] = [
        (
            "Available",
            "True",
            "AsExpected",
            format!("Done applying {}", newest.0),
        ),
        (
            "Progressing",
            if updating { "True" } else { "False" },
            if updating {
                "ClusterOperatorsUpdating"
            } else {
                "AsExpected"
            },
            progressing,
        ),
        ("Failing", "False", "AsExpected", String::new()),
        ("Upgradeable", "True", "AsExpected", String::new()),
        (
            "ReleaseAccepted",
            "True",
            "PayloadLoaded",
            format!(
                "Payload loaded version=\"{asked}\" image=\"{}\" architecture=\"amd64\"",
                image(asked)
            ),
        ),
    ];
    for (type_, status, reason, message) in conditions {
        values.push(s(&format!("{type_}.status"), status));
        values.push(s(&format!("{type_}.reason"), reason));
        values.push(s(&format!("{type_}.message"), &message));
    }
    values
}

/// The status the work agent of cluster `i` writes on its ManifestWork of cvo's observe set, or
/// with `rollout` of its rollout set.
fn work_status(i: usize, rollout: bool, t: &Times) -> Value {
    let updating = rollout && state(i) == State::Progressing;
    let mut manifest_conditions = vec![
        condition(
            "Applied",
            true,
            "AppliedManifestComplete",
            "Apply manifest complete",
            &t.old,
        ),
        condition(
            "Available",
            true,
            "ResourceAvailable",
            "Resource is available",
            &t.old,
        ),
        condition(
            "StatusFeedbackSynced",
            true,
            "StatusFeedbackSynced",
            "",
            &t.recent,
        ),
    ];
    let mut work_conditions = vec![
        condition(
            "Applied",
            true,
            "AppliedManifestWorkComplete",
            "Apply manifest work complete",
            &t.old,
        ),
        condition(
            "Available",
            true,
            "ResourcesAvailable",
            "All resources are available",
            &t.old,
        ),
    ];
    if rollout {
        let message = if updating {
            format!("updating to {NEW}")
        } else {
            "not progressing".to_owned()
        };
        let at = if updating { &t.recent } else { &t.old };
        for conditions in [&mut manifest_conditions, &mut work_conditions] {
            conditions.push(condition(
                "Progressing",
                updating,
                "ConditionRulesEvaluated",
                &message,
                at,
            ));
            conditions.push(condition(
                "Degraded",
                false,
                "ConditionRulesEvaluated",
                "not failing",
                &t.old,
            ));
        }
    }
    json!({
        "conditions": work_conditions,
        "resourceStatus": {"manifests": [{
            "resourceMeta": {"ordinal": 0, "group": "config.openshift.io", "version": "v1",
                "kind": "ClusterVersion", "resource": "clusterversions", "name": "version", "namespace": ""},
            "conditions": manifest_conditions,
            "statusFeedback": {"values": feedback(i)},
        }]},
    })
}

// ---------------------------------------------------------------------------------------------
// Writing them.

/// Creates `object` (of kind `ar`; server-side applied when it exists: the hub grows) and,
/// with `status`, writes that through the status subresource, as OCM's controllers and agents
/// do (a create and a status patch, cheaper for the server than an apply).
async fn put(client: &kube::Client, ar: &ApiResource, object: &Value, status: Option<&Value>) {
    let name = object["metadata"]["name"].as_str().expect("name");
    let api = match object["metadata"]["namespace"].as_str() {
        Some(ns) => Api::<DynamicObject>::namespaced_with(client.clone(), ns, ar),
        None => Api::<DynamicObject>::all_with(client.clone(), ar),
    };
    let what = format!("{} {name}", ar.kind);
    let typed: DynamicObject = serde_json::from_value(object.clone()).expect("an object");
    match api.create(&PostParams::default(), &typed).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 409 => {
            let params = PatchParams::apply(SETUP).force();
            api.patch(name, &params, &Patch::Apply(object))
                .await
                .unwrap_or_else(|e| panic!("{what}: {e}"));
        }
        Err(e) => panic!("{what}: {e}"),
    }
    if let Some(status) = status {
        let body = json!({"status": status});
        api.patch_status(name, &PatchParams::default(), &Patch::Merge(&body))
            .await
            .unwrap_or_else(|e| panic!("{what} status: {e}"));
    }
}

/// OCM's hub CRDs, applied and waited for.
async fn apply_crds(client: &kube::Client) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/ocm/crds/hub");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("entry").path())
        .collect();
    files.sort();
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut names = Vec::new();
    for path in files {
        let text = std::fs::read_to_string(&path).expect("read a CRD");
        let crd: Value =
            serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let name = crd["metadata"]["name"].as_str().expect("name").to_owned();
        api.patch(
            &name,
            &PatchParams::apply(SETUP).force(),
            &Patch::Apply(&crd),
        )
        .await
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        names.push(name);
    }
    for name in names {
        cvo::cluster::crd::wait_established(client, &name, Duration::from_secs(60))
            .await
            .unwrap_or_else(|e| panic!("CRD {name}: {e}"));
    }
}

fn namespace(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
}

fn namespaces() -> ApiResource {
    ApiResource::erase::<k8s_openapi::api::core::v1::Namespace>(&())
}

/// Grows the hub from `from` clusters to `n`: the Placement, its decisions and cvo's sets for
/// `n`, and each new cluster with its namespace and ManifestWorks.
async fn grow(client: &kube::Client, from: usize, n: usize) {
    let t = Times::now();
    put(client, &namespaces(), &namespace(NS), None).await;
    let decisions = decisions(n);
    put(
        client,
        &ocm::placement(),
        &placement(),
        Some(&placement_status(n, &decisions, &t)),
    )
    .await;
    for (d, status) in &decisions {
        put(client, &ocm::placement_decision(), d, Some(status)).await;
    }
    let observe = work::observe(NS, PLACEMENT);
    let (new, old) = (rollout(NEW, n).manifest(), rollout(OLD, n).manifest());
    for set in [&observe, &new] {
        cvo::fleet::write(client, set)
            .await
            .expect("a set of cvo's");
    }
    futures::stream::iter(from..n)
        .for_each_concurrent(CONCURRENCY, |i| {
            let (observe, new, old, t) = (&observe, &new, &old, &t);
            async move {
                put(
                    client,
                    &ocm::managed_cluster(),
                    &managed_cluster(i, t),
                    Some(&managed_cluster_status(i, t)),
                )
                .await;
                put(client, &namespaces(), &namespace(&cluster_name(i)), None).await;
                let asked = if state(i) == State::Pending { old } else { new };
                let mw = ocm::manifest_work();
                for (set, rollout) in [(observe, false), (asked, true)] {
                    let status = work_status(i, rollout, t);
                    put(client, &mw, &manifest_work(set, i), Some(&status)).await;
                }
            }
        })
        .await;
}

// ---------------------------------------------------------------------------------------------
// Measuring.

/// Requests as sent: `METHOD PATH?QUERY`, in order.
type Log = Arc<Mutex<Vec<String>>>;

async fn config(kubeconfig: &Path) -> kube::Config {
    let config = kube::config::Kubeconfig::read_from(kubeconfig).expect("kubeconfig");
    kube::Config::from_custom_kubeconfig(config, &Default::default())
        .await
        .expect("kubeconfig")
}

/// A client as cvo makes it (no retry layer of kube's) that records every request in `log`.
async fn recording_client(kubeconfig: &Path, log: Log) -> kube::Client {
    let mut config = config(kubeconfig).await;
    config.default_retry = false;
    let layer = tower::util::MapRequestLayer::new(move |req: http::Request<kube::client::Body>| {
        let target = req.uri().path_and_query().map_or("", |p| p.as_str());
        log.lock()
            .expect("log")
            .push(format!("{} {target}", req.method()));
        req
    });
    kube::client::ClientBuilder::try_from(config)
        .expect("client")
        .with_layer(&layer)
        .build()
}

/// Whether `request` (`GET /apis/GROUP/VERSION[/namespaces/NS]/PLURAL[/NAME]`) is a LIST.
fn is_list(request: &str) -> bool {
    let Some(path) = request.strip_prefix("GET /apis/") else {
        return false;
    };
    let path = path.split('?').next().unwrap_or_default();
    // GROUP/VERSION/PLURAL (3) or GROUP/VERSION/namespaces/NS/PLURAL (5): an odd count.
    path.trim_matches('/').split('/').count() % 2 == 1
}

/// What one in-process read of the fleet sent and took.
struct Counted {
    requests: Vec<String>,
    read: Duration,
    judge: Duration,
    encode: Duration,
    /// Hub objects decoded (PlacementDecisions, ManagedClusters, ManifestWorks), each into a
    /// narrow typed view.
    listed_objects: usize,
}

impl Counted {
    fn lists(&self) -> usize {
        self.requests
            .iter()
            .filter(|r| is_list(r) && !r.contains("continue="))
            .count()
    }
    fn pages(&self) -> usize {
        self.requests.iter().filter(|r| is_list(r)).count()
    }
}

/// `cvo::fleet::status::read` and `judge` in-process, `runs` times: the requests of the
/// first, the median times.
async fn count(kubeconfig: &Path, n: usize, runs: usize) -> Counted {
    let mut samples = Vec::new();
    let mut first: Option<(Vec<String>, usize)> = None;
    for _ in 0..runs.max(1) {
        let log = Log::default();
        let client = recording_client(kubeconfig, log.clone()).await;
        let t = Instant::now();
        let view = cvo::fleet::status::read(&client, NS, PLACEMENT)
            .await
            .expect("read the hub");
        let read = t.elapsed();
        let t = Instant::now();
        let st = cvo::fleet::status::judge(&view, jiff::Timestamp::now());
        let judge = t.elapsed();
        let t = Instant::now();
        let text =
            serde_json::to_string_pretty(&json!({"status": st, "exitCode": st.exit() as i32}))
                .expect("json");
        let encode = t.elapsed();
        assert_eq!(st.clusters.len(), n, "clusters judged");
        assert!(!text.is_empty());
        samples.push((read, judge, encode));
        if first.is_none() {
            let objects = view.decisions.len() + view.managed_clusters.len() + view.works.len();
            first = Some((log.lock().expect("log").clone(), objects));
        }
    }
    let median = |f: fn(&(Duration, Duration, Duration)) -> Duration| {
        let mut v: Vec<Duration> = samples.iter().map(f).collect();
        v.sort();
        v[v.len() / 2]
    };
    let (requests, listed_objects) = first.expect("a run");
    Counted {
        requests,
        read: median(|s| s.0),
        judge: median(|s| s.1),
        encode: median(|s| s.2),
        listed_objects,
    }
}

/// A page of a LIST, its items skipped.
#[derive(serde::Deserialize)]
struct Page {
    metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ListMeta,
}

/// Wall time to fetch every page of the LISTs among `requests` as text, nothing decoded but
/// the continue token (the server's and the transfer's share of a read); with `cache`, the
/// first page asks for `resourceVersion=0` (kube-apiserver then answers from its watch cache,
/// not from etcd). The median of `runs`.
async fn raw_lists(kubeconfig: &Path, requests: &[String], cache: bool, runs: usize) -> Duration {
    let client = cvo::cluster::client(config(kubeconfig).await).expect("client");
    let firsts: Vec<&str> = requests
        .iter()
        .filter(|r| is_list(r) && !r.contains("continue="))
        .filter_map(|r| r.strip_prefix("GET "))
        .collect();
    let mut samples = Vec::new();
    for _ in 0..runs.max(1) {
        let t = Instant::now();
        for first in &firsts {
            let mut url = first.to_string();
            if cache {
                url.push_str("&resourceVersion=0&resourceVersionMatch=NotOlderThan");
            }
            loop {
                let request = http::Request::get(&url).body(Vec::new()).expect("request");
                let text = client.request_text(request).await.expect("a LIST page");
                let page: Page = serde_json::from_str(&text).expect("a list");
                let Some(token) = page.metadata.continue_.filter(|c| !c.is_empty()) else {
                    break;
                };
                let token: String = form_urlencoded::byte_serialize(token.as_bytes()).collect();
                // A continued page names no resourceVersion.
                url = format!("{first}&continue={token}");
            }
        }
        samples.push(t.elapsed());
    }
    samples.sort();
    samples[samples.len() / 2]
}

/// The binary's runs: wall times (after a warm-up), with `/usr/bin/time` the process's CPU
/// times (user + system) and peak RSS in KiB, the output's size, and how the clusters stand.
struct Timed {
    walls: Vec<Duration>,
    cpus: Vec<Duration>,
    peak_kib: Option<u64>,
    output_bytes: usize,
    tally: String,
}

/// Runs `cvo fleet status --placement fleet/waves -o json` `runs` times after one warm-up;
/// checks each names all `n` clusters and exits 3 (in progress).
fn time_status(kubeconfig: &Path, n: usize, runs: usize) -> Timed {
    let time = Path::new("/usr/bin/time");
    let rss = tempfile::NamedTempFile::new().expect("tempfile");
    let mut timed = Timed {
        walls: Vec::new(),
        cpus: Vec::new(),
        peak_kib: None,
        output_bytes: 0,
        tally: String::new(),
    };
    // `BENCH_CVO=PATH`: another build of the binary (e.g. `cargo build --release`'s).
    let binary = std::env::var_os("BENCH_CVO")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_cvo")));
    for run in 0..=runs {
        let mut cmd = if time.exists() {
            let mut c = Command::new(time);
            c.args(["-f", "%U %S %M", "-o"])
                .arg(rss.path())
                .arg(&binary);
            c
        } else {
            Command::new(&binary)
        };
        cmd.env_remove("KUBECONFIG")
            .arg("--kubeconfig")
            .arg(kubeconfig);
        cmd.args([
            "fleet",
            "status",
            "--placement",
            &format!("{NS}/{PLACEMENT}"),
            "-o",
            "json",
        ]);
        let t = Instant::now();
        let out = cmd.output().expect("run cvo fleet status");
        let wall = t.elapsed();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(3),
            "exit code (3: in progress); stderr: {stderr}"
        );
        let doc: Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
        let clusters = doc["status"]["clusters"].as_array().expect("clusters");
        assert_eq!(clusters.len(), n, "clusters listed");
        assert_eq!(doc["exitCode"], 3);
        if run == 0 {
            timed.output_bytes = out.stdout.len();
            timed.tally = tally(clusters);
            continue;
        }
        timed.walls.push(wall);
        // GNU time writes "Command exited with non-zero status 3" first, then the format.
        let text = std::fs::read_to_string(rss.path()).unwrap_or_default();
        let fields: Vec<f64> = text
            .lines()
            .last()
            .unwrap_or_default()
            .split_whitespace()
            .filter_map(|f| f.parse().ok())
            .collect();
        if let [user, system, kib] = fields[..] {
            timed.cpus.push(Duration::from_secs_f64(user + system));
            timed.peak_kib = timed.peak_kib.max(Some(kib as u64));
        }
    }
    timed.walls.sort();
    timed.cpus.sort();
    timed
}

/// How many clusters are in each rollout state, and how many are unreachable.
fn tally(clusters: &[Value]) -> String {
    let mut by_state = std::collections::BTreeMap::<String, usize>::new();
    for c in clusters {
        let s = c["rollout"]["state"].as_str().unwrap_or("?");
        *by_state.entry(s.to_owned()).or_default() += 1;
    }
    let unreachable = clusters
        .iter()
        .filter(|c| c["reachable"]["state"] != "reachable")
        .count();
    let states: Vec<String> = by_state.iter().map(|(s, k)| format!("{k} {s}")).collect();
    format!("{}; {unreachable} unreachable", states.join(", "))
}

fn ms(d: Duration) -> String {
    format!("{:.0} ms", d.as_secs_f64() * 1000.0)
}

/// The request, its long continue token and label values shortened.
fn short(request: &str) -> String {
    let mut out = request
        .replace("%2F", "/")
        .replace("%2C", ",")
        .replace("%3D", "=");
    if let Some(at) = out.find("continue=") {
        let end = out[at..].find('&').map_or(out.len(), |e| at + e);
        out.replace_range(at..end, "continue=…");
    }
    out
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    // `cargo bench` passes --bench; `cargo test --all-targets` runs bench targets without it.
    if !std::env::args().any(|a| a == "--bench") {
        println!("fleet benchmark: run it with `cargo bench --bench fleet`");
        return;
    }
    let env = |name: &str, default: usize| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let n = env("BENCH_CLUSTERS", 1_000);
    let small = env("BENCH_SMALL", 100).min(n);
    let runs = env("BENCH_RUNS", 5).max(1);
    let tmp = tempfile::tempdir().expect("tempdir");
    let (server, kubeconfig) = common::cluster(tmp.path());
    let hub = if server.is_some() {
        "in-memory"
    } else {
        "real"
    };
    let client = cvo::cluster::client(config(&kubeconfig).await).expect("client");
    let t = Instant::now();
    apply_crds(&client).await;
    eprintln!("hub CRDs established in {}", ms(t.elapsed()));
    let mut sizes = vec![small, n];
    sizes.dedup();
    let mut made = 0;
    let mut rows = Vec::new();
    for size in sizes {
        let t = Instant::now();
        grow(&client, made, size).await;
        made = size;
        let setup = t.elapsed();
        eprintln!("{size} clusters set up in {:.1} s", setup.as_secs_f64());
        let counted = count(&kubeconfig, size, runs).await;
        let raw = (
            raw_lists(&kubeconfig, &counted.requests, false, runs).await,
            raw_lists(&kubeconfig, &counted.requests, true, runs).await,
        );
        let timed = tokio::task::block_in_place(|| time_status(&kubeconfig, size, runs));
        rows.push(Row {
            clusters: size,
            setup,
            counted,
            raw,
            timed,
        });
    }
    print_rows(hub, runs, &rows);
}

/// One measured fleet size.
struct Row {
    clusters: usize,
    setup: Duration,
    counted: Counted,
    /// LIST pages as text: as cvo sends them, and from the watch cache.
    raw: (Duration, Duration),
    timed: Timed,
}

fn print_rows(hub: &str, runs: usize, rows: &[Row]) {
    println!(
        "| hub | clusters | setup | requests (LISTs, pages) | `fleet status` wall, min / median of {runs} | CPU (median) / peak RSS | in-process read / judge / JSON | LIST pages as text: as sent / from the watch cache | objects decoded | output | clusters judged |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|");
    for Row {
        clusters,
        setup,
        counted: c,
        raw,
        timed: t,
    } in rows
    {
        let cpu = match (t.cpus.get(t.cpus.len() / 2), t.peak_kib) {
            (Some(cpu), Some(k)) => format!("{} / {:.0} MiB", ms(*cpu), k as f64 / 1024.0),
            _ => "—".to_owned(),
        };
        println!(
            "| {hub} | {clusters} | {:.1} s | {} ({}, {}) | {} / {} | {cpu} | {} / {} / {} | {} / {} | {} | {:.0} KB | {} |",
            setup.as_secs_f64(),
            c.requests.len(),
            c.lists(),
            c.pages(),
            ms(t.walls[0]),
            ms(t.walls[t.walls.len() / 2]),
            ms(c.read),
            ms(c.judge),
            ms(c.encode),
            ms(raw.0),
            ms(raw.1),
            c.listed_objects,
            t.output_bytes as f64 / 1e3,
            t.tally,
        );
    }
    for row in rows {
        println!("\nrequests of one read at {} clusters:", row.clusters);
        for r in &row.counted.requests {
            println!("  {}", short(r));
        }
    }
}
