//! The node tier's steps, in the order they run (see `main.rs`). Each one is a named test;
//! `needs` names the steps whose outcome it builds on.

use std::path::Path;
use std::time::{Duration, Instant};

use futures::FutureExt as _;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Container, Namespace, Pod};
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::Tier;
use crate::common;
use crate::pods::{self, NAMESPACE, PORT, SELECTOR};

pub type Step = common::steps::Step<Tier>;

crate::steps! {
    Tier;
    image_is_built_from_the_dockerfile needs [];
    install_as_the_docs_say needs [image_is_built_from_the_dockerfile];
    pod_ready_without_restarts_or_warning_events needs [install_as_the_docs_say];
    in_cluster_config_and_service_account_token needs [install_as_the_docs_say];
    every_log_line_is_json needs [install_as_the_docs_say];
    release_synced_and_cluster_version_completed needs [install_as_the_docs_say];
    drift_is_repaired needs [install_as_the_docs_say];
    api_server_down_while_the_pod_runs needs [install_as_the_docs_say];
    api_server_down_while_a_pod_starts needs [install_as_the_docs_say];
    self_update_to_least_privilege needs [install_as_the_docs_say];
    least_privilege_operator_repairs_drift needs [self_update_to_least_privilege];
    release_of_5000_manifests_within_the_memory_limit needs [self_update_to_least_privilege];
    no_restarts_at_the_end needs [install_as_the_docs_say];
}

/// The images of manifests-example: the operator's (from its Deployment manifest) and the
/// widget operator's, whose stand-in is this binary.
const OPERATOR_IMAGE: &str = "ghcr.io/cvo-project/cvo:1.4.0";
const WIDGET_IMAGE: &str = "registry.example.com/widget-operator:1.4.0";
/// The example's cluster settings, restored by the operator when changed.
const SETTINGS: (&str, &str) = ("cluster-config", "cluster-settings");

/// How long each API-server outage lasts (`CVO_TEST_OUTAGE_SECONDS`, default 60).
fn outage() -> Duration {
    let seconds = std::env::var("CVO_TEST_OUTAGE_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    Duration::from_secs(seconds)
}

async fn image_is_built_from_the_dockerfile(tier: &Tier) {
    let example = common::example::dir();
    for (file, image) in [
        (
            "0000_00_cluster-version-operator_05_deployment.yaml",
            OPERATOR_IMAGE,
        ),
        ("0000_50_widget-operator_04_deployment.yaml", WIDGET_IMAGE),
    ] {
        let text = std::fs::read_to_string(example.join(file)).expect("manifest");
        assert!(
            text.contains(&format!("image: {image}")),
            "{file} no longer names {image}: update tests/node"
        );
    }
    pods::build_operator_image(tier, OPERATOR_IMAGE, &example);
    pods::build_standin_image(tier, WIDGET_IMAGE);
}

async fn install_as_the_docs_say(tier: &Tier) {
    let namespaces: Api<Namespace> = Api::all(tier.client.clone());
    assert!(
        namespaces
            .get_opt(NAMESPACE)
            .await
            .expect("read namespaces")
            .is_none(),
        "namespace {NAMESPACE} exists: the node tier needs a fresh cluster"
    );
    let example = common::example::dir();
    let (code, stdout, stderr) = tier
        .cvo(&["apply", "--release", example.to_str().expect("utf-8")])
        .await;
    assert_eq!(code, 0, "cvo apply:\n{stdout}\n{stderr}");
    let pod = pods::rolled_out(tier, Duration::from_secs(120)).await;
    println!("operator pod {}", pods::summary(&pod));
    let widgets: Api<Deployment> = Api::namespaced(tier.client.clone(), "widget-operator");
    common::poll_until(
        "the widget operator (stand-in) available",
        Duration::from_secs(120),
        || async {
            let d = widgets
                .get("widget-operator")
                .await
                .map_err(|e| e.to_string())?;
            let status = d.status.unwrap_or_default();
            (status.available_replicas == Some(1))
                .then_some(())
                .ok_or(format!("{status:?}"))
        },
    )
    .await;
}

async fn pod_ready_without_restarts_or_warning_events(tier: &Tier) {
    let pod = pods::rolled_out(tier, Duration::from_secs(60)).await;
    // Probes run every few seconds: give them time to fail if they would, by waiting for a
    // full pass of the pod (counted in its metrics) and then one readiness period (5 s).
    let addr = pods::address(&pod, PORT);
    common::poll_until(
        "a full pass of the pod",
        Duration::from_secs(60),
        || async {
            (pods::passes(addr).await? >= 1)
                .then_some(())
                .ok_or_else(|| "no pass yet".to_owned())
        },
    )
    .await;
    tokio::time::sleep(Duration::from_secs(6)).await;
    let pod = pods::rolled_out(tier, Duration::from_secs(60)).await;
    assert_eq!(pods::restarts(&pod), 0, "{}", pods::summary(&pod));
    let warnings = pods::warnings(tier, &pod).await;
    assert!(
        warnings.is_empty(),
        "Warning events for {}: {warnings:#?}",
        pods::summary(&pod)
    );
}

async fn in_cluster_config_and_service_account_token(tier: &Tier) {
    let pod = pods::rolled_out(tier, Duration::from_secs(60)).await;
    let spec = pod.spec.clone().expect("spec");
    let container = spec
        .containers
        .iter()
        .find(|c| c.name == "operator")
        .expect("operator container");
    // No kubeconfig: the only way to the API server is the one kubelet gives every pod.
    assert!(
        !container
            .args
            .iter()
            .flatten()
            .any(|a| a.contains("kubeconfig")),
        "{:?}",
        container.args
    );
    assert!(
        !container
            .env
            .iter()
            .flatten()
            .any(|e| e.name == "KUBECONFIG"),
        "{:?}",
        container.env
    );
    assert_ne!(spec.automount_service_account_token, Some(false));
    // It reached the API server at the `kubernetes` Service address kubelet injects
    // (KUBERNETES_SERVICE_HOST), the server took it for its service account (the mounted
    // token: the image holds no other credentials), and it holds the Lease under its pod's
    // name.
    let log = pods::log(tier, &pod).await;
    let connected = log
        .lines()
        .find(|l| l.contains("connected to the API server"))
        .unwrap_or_else(|| panic!("no connection logged:\n{log}"));
    assert!(connected.contains("https://10.0.0.1"), "{connected}");
    assert!(
        log.contains(
            "authenticates this operator as system:serviceaccount:cluster-version:cvo-operator"
        ),
        "not its service account:\n{log}"
    );
    let name = pod.metadata.name.clone().expect("name");
    leads(tier, &name, Duration::from_secs(30)).await;
}

async fn every_log_line_is_json(tier: &Tier) {
    let pod = pods::rolled_out(tier, Duration::from_secs(60)).await;
    let log = pods::log(tier, &pod).await;
    assert!(!log.trim().is_empty(), "empty log");
    for line in log.lines().filter(|l| !l.trim().is_empty()) {
        let value: serde_json::Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {line}\n--- log ---\n{log}"));
        assert!(
            value.get("level").is_some() && value.get("fields").is_some(),
            "not a log event: {line}"
        );
    }
}

async fn release_synced_and_cluster_version_completed(tier: &Tier) {
    let pod = pods::rolled_out(tier, Duration::from_secs(60)).await;
    let addr = pods::address(&pod, PORT);
    common::poll_until(
        "an applied pass of the pod",
        Duration::from_secs(60),
        || async {
            let (_, text) = pods::get(addr, "/metrics").await?;
            text.lines()
                .any(|l| {
                    l.starts_with("cvo_sync_passes_total{")
                        && l.contains("result=\"applied\"")
                        && !l.ends_with(" 0")
                })
                .then_some(())
                .ok_or_else(|| "no applied pass".to_owned())
        },
    )
    .await;
    let cv = cluster_version(tier).await;
    let history = &cv.data["status"]["history"][0];
    assert_eq!(history["state"], "Completed", "{history}");
    assert_eq!(history["version"], "1.4.0", "{history}");
    for (type_, status) in [
        ("Available", "True"),
        ("Failing", "False"),
        ("Progressing", "False"),
    ] {
        let condition = common::cv_condition(&cv, type_).unwrap_or_else(|| panic!("no {type_}"));
        assert_eq!(condition["status"], status, "{condition}");
    }
}

async fn drift_is_repaired(tier: &Tier) {
    repairs_drift(tier).await;
}

/// An edited and a deleted managed ConfigMap are repaired by the operator pod.
async fn repairs_drift(tier: &Tier) {
    let configmaps: Api<ConfigMap> = Api::namespaced(tier.client.clone(), SETTINGS.0);
    let original = configmaps.get(SETTINGS.1).await.expect("settings");
    let data = original.data.clone().expect("settings data");
    let key = data.keys().next().expect("a key").clone();
    let edited = configmaps
        .patch(
            SETTINGS.1,
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {&key: "drifted"}})),
        )
        .await
        .expect("edit settings");
    assert_eq!(
        edited
            .data
            .as_ref()
            .and_then(|d| d.get(&key))
            .map(String::as_str),
        Some("drifted"),
        "the edit was made"
    );
    let started = Instant::now();
    common::poll_until("the edit repaired", Duration::from_secs(30), || async {
        let now = configmaps
            .get(SETTINGS.1)
            .await
            .map_err(|e| e.to_string())?;
        (now.data == Some(data.clone()))
            .then_some(())
            .ok_or(format!("{:?}", now.data))
    })
    .await;
    println!("edit repaired in {:?}", started.elapsed());
    configmaps
        .delete(SETTINGS.1, &DeleteParams::default())
        .await
        .expect("delete settings");
    let started = Instant::now();
    common::poll_until("the deletion repaired", Duration::from_secs(30), || async {
        match configmaps
            .get_opt(SETTINGS.1)
            .await
            .map_err(|e| e.to_string())?
        {
            // A new object: the deleted one's uid is gone with it.
            Some(now)
                if now.data == Some(data.clone()) && now.metadata.uid != original.metadata.uid =>
            {
                Ok(())
            }
            other => Err(format!("{:?}", other.map(|c| c.data))),
        }
    })
    .await;
    println!("deletion repaired in {:?}", started.elapsed());
}

/// Starts the API server again when dropped, so a failing step leaves a working cluster.
struct Outage<'a> {
    tier: &'a Tier,
    began: Instant,
    over: bool,
}

impl<'a> Outage<'a> {
    fn begin(tier: &'a Tier) -> Self {
        pods::apiserver(tier, "kill");
        println!("kube-apiserver killed");
        Outage {
            tier,
            began: Instant::now(),
            over: false,
        }
    }

    fn remaining(&self) -> Option<Duration> {
        outage().checked_sub(self.began.elapsed())
    }

    /// Starts the API server again (`fault.sh start` returns once it is ready); returns when.
    fn end(mut self) -> (Instant, jiff::Timestamp) {
        self.over = true;
        pods::apiserver(self.tier, "start");
        println!("kube-apiserver ready after {:?}", self.began.elapsed());
        (Instant::now(), jiff::Timestamp::now())
    }
}

impl Drop for Outage<'_> {
    fn drop(&mut self) {
        if !self.over {
            pods::apiserver(self.tier, "start");
        }
    }
}

/// What the pod's endpoints answered during an outage, sampled every second.
#[derive(Debug, Default)]
struct Answers {
    healthz_ok: u32,
    healthz_other: Vec<String>,
    readyz_ok: u32,
    readyz_unavailable: u32,
}

/// Samples `/healthz` and `/readyz` at `addr` every second until the outage is over.
async fn sample_until_over(addr: std::net::SocketAddr, outage: &Outage<'_>) -> Answers {
    let mut answers = Answers::default();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    while outage.remaining().is_some() {
        tick.tick().await;
        match pods::get(addr, "/healthz").await {
            Ok((200, _)) => answers.healthz_ok += 1,
            Ok((code, body)) => answers.healthz_other.push(format!("{code} {body}")),
            Err(e) => answers.healthz_other.push(e),
        }
        match pods::get(addr, "/readyz").await {
            Ok((200, _)) => answers.readyz_ok += 1,
            Ok((503, _)) => answers.readyz_unavailable += 1,
            _ => {}
        }
    }
    answers
}

async fn api_server_down_while_the_pod_runs(tier: &Tier) {
    let pod = pods::rolled_out(tier, Duration::from_secs(60)).await;
    let addr = pods::address(&pod, PORT);
    let before = pods::passes(addr).await.expect("metrics");
    let outage = Outage::begin(tier);
    let answers = sample_until_over(addr, &outage).await;
    let (back, since) = outage.end();
    println!("during the outage: {answers:?}");
    assert!(
        answers.healthz_other.is_empty() && answers.healthz_ok > 0,
        "/healthz failed during the outage: {answers:?}"
    );
    assert!(
        answers.readyz_unavailable > 0,
        "/readyz never said 503 during the outage: {answers:?}"
    );
    common::poll_until("/readyz 200 again", Duration::from_secs(60), || async {
        match pods::get(addr, "/readyz").await? {
            (200, _) => Ok(()),
            (code, body) => Err(format!("{code} {body}")),
        }
    })
    .await;
    println!("ready again {:?} after the API server", back.elapsed());
    common::poll_until(
        "a full pass after the outage",
        Duration::from_secs(60),
        || async {
            let now = pods::passes(addr).await?;
            (now > before)
                .then_some(())
                .ok_or(format!("{now} passes, {before} before"))
        },
    )
    .await;
    println!("a full pass done {:?} after the API server", back.elapsed());
    pods::node_back(tier, since, Duration::from_secs(180)).await;
    let pods_api: Api<Pod> = Api::namespaced(tier.client.clone(), NAMESPACE);
    let now = pods_api
        .get(pod.metadata.name.as_deref().expect("name"))
        .await
        .expect("the pod");
    assert_eq!(pods::restarts(&now), 0, "{}", pods::summary(&now));
}

/// A second operator pod (a standby beside the Deployment's) whose operator container starts
/// while the API server is down: an init container holds its start until the outage began.
async fn api_server_down_while_a_pod_starts(tier: &Tier) {
    let pods_api: Api<Pod> = Api::namespaced(tier.client.clone(), NAMESPACE);
    // Whatever happens, the second pod goes: a standby with this release would take over.
    let result = std::panic::AssertUnwindSafe(starts_in_outage(tier, &pods_api))
        .catch_unwind()
        .await;
    let _ = pods_api
        .delete(STARTS_IN_OUTAGE, &DeleteParams::default())
        .await;
    let deadline = Instant::now() + Duration::from_secs(180);
    let gone = loop {
        match pods_api.get_opt(STARTS_IN_OUTAGE).await {
            Ok(None) => break Ok(()),
            Ok(Some(p)) if Instant::now() > deadline => break Err(pods::summary(&p)),
            Err(e) if Instant::now() > deadline => break Err(e.to_string()),
            _ => tokio::time::sleep(Duration::from_millis(500)).await,
        }
    };
    if let Err(panic) = result {
        if let Err(left) = gone {
            eprintln!("{STARTS_IN_OUTAGE} not removed: {left}");
        }
        std::panic::resume_unwind(panic);
    }
    if let Err(left) = gone {
        panic!("{STARTS_IN_OUTAGE} not removed within 180 s: {left}");
    }
}

/// The second operator pod of [`api_server_down_while_a_pod_starts`].
const STARTS_IN_OUTAGE: &str = "cvo-operator-starts-in-outage";

async fn starts_in_outage(tier: &Tier, pods_api: &Api<Pod>) {
    const NAME: &str = STARTS_IN_OUTAGE;
    // The init container holds the start until a quarter of the outage has passed.
    let hold_seconds = (outage().as_secs() / 4).max(3);
    let deployments: Api<Deployment> = Api::namespaced(tier.client.clone(), NAMESPACE);
    let deployment = deployments.get(pods::DEPLOYMENT).await.expect("deployment");
    let template = deployment.spec.expect("spec").template;
    let mut spec = template.spec.expect("pod spec");
    let operator = spec.containers[0].clone();
    spec.init_containers = Some(vec![Container {
        name: "hold".to_owned(),
        image: Some(WIDGET_IMAGE.to_owned()),
        args: Some(vec![format!("--exit-after={hold_seconds}")]),
        security_context: operator.security_context.clone(),
        ..Container::default()
    }]);
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {
            "name": NAME,
            "namespace": NAMESPACE,
            // Not the Deployment's selector: its ReplicaSet leaves this pod alone.
            "labels": {"app.kubernetes.io/name": "cvo-operator-node-test"},
        },
        "spec": spec,
    }))
    .expect("pod");
    pods_api
        .create(&PostParams::default(), &pod)
        .await
        .expect("create the pod");
    // Scheduling is the kube-scheduler's, not the operator's: after the previous step's outage
    // its informers list again with client-go's reflector backoff (up to a minute, jittered),
    // and until its pod informer has synced it schedules nothing. Its own deadline, then.
    common::poll_until(
        "the pod scheduled (kube-scheduler back after the previous outage)",
        Duration::from_secs(180),
        || async {
            let pod = pods_api.get(NAME).await.map_err(|e| e.to_string())?;
            pod.spec
                .as_ref()
                .and_then(|s| s.node_name.as_ref())
                .map(|_| ())
                .ok_or(format!("{:?}", pod.status.unwrap_or_default().conditions))
        },
    )
    .await;
    let pod = common::poll_until(
        "the init container running",
        Duration::from_secs(60),
        || async {
            let pod = pods_api.get(NAME).await.map_err(|e| e.to_string())?;
            let status = pod.status.clone().unwrap_or_default();
            let holding = status
                .init_container_statuses
                .iter()
                .flatten()
                .any(|c| c.state.as_ref().is_some_and(|s| s.running.is_some()));
            (holding && status.pod_ip.is_some())
                .then_some(pod)
                .ok_or(format!("{status:?}"))
        },
    )
    .await;
    let addr = pods::address(&pod, PORT);
    let outage = Outage::begin(tier);
    let answers = sample_until_over(addr, &outage).await;
    let (back, since) = outage.end();
    println!("during the outage: {answers:?}");
    // It started during the outage and answered /healthz then, never ready without a server.
    assert!(
        answers.healthz_ok > 0,
        "the operator did not serve /healthz during the outage: {answers:?}"
    );
    assert_eq!(
        answers.readyz_ok, 0,
        "ready without an API server: {answers:?}"
    );
    common::poll_until("/readyz 200", Duration::from_secs(60), || async {
        match pods::get(addr, "/readyz").await? {
            (200, _) => Ok(()),
            (code, body) => Err(format!("{code} {body}")),
        }
    })
    .await;
    println!("ready {:?} after the API server", back.elapsed());
    pods::node_back(tier, since, Duration::from_secs(180)).await;
    let pod = common::poll_until("the pod Ready", Duration::from_secs(90), || async {
        let pod = pods_api.get(NAME).await.map_err(|e| e.to_string())?;
        pods::ready(&pod)
            .then_some(pod.clone())
            .ok_or(pods::summary(&pod))
    })
    .await;
    assert_eq!(pods::restarts(&pod), 0, "{}", pods::summary(&pod));
    let log = pods::log(tier, &pod).await;
    let failures = log
        .lines()
        .filter(|l| l.contains("10.0.0.1") && l.contains("\"WARN\""))
        .count();
    assert!(
        failures >= 2,
        "expected the failed attempts logged (one per backoff step):\n{log}"
    );
}

/// The least-privilege release (docs/operator.md, "Least-privilege RBAC") and its image.
const LEAST_PRIVILEGE: (&str, &str) = ("1.5.0", "ghcr.io/cvo-project/cvo:1.5.0");
/// 1.5.0 with 5,000 more ConfigMaps, and its image.
const BULK: (&str, &str) = ("1.5.1", "ghcr.io/cvo-project/cvo:1.5.1");
const BULK_CONFIGMAPS: usize = 5_000;

async fn self_update_to_least_privilege(tier: &Tier) {
    let release = tier.work.path().join("release-1.5.0");
    common::example::least_privilege_update_with_image(
        &release,
        &common::cli::binary(),
        LEAST_PRIVILEGE.1,
    );
    pods::build_operator_image(tier, LEAST_PRIVILEGE.1, &release);
    let new = self_update(tier, LEAST_PRIVILEGE).await;
    // The old binding is gone, the least-privilege ones are there, and nothing was refused.
    let bindings: Api<ClusterRoleBinding> = Api::all(tier.client.clone());
    assert!(
        bindings
            .get_opt("cvo-operator")
            .await
            .expect("bindings")
            .is_none(),
        "the cluster-admin binding is still there"
    );
    let binding = bindings
        .get(common::example::LEAST_PRIVILEGE_NAME)
        .await
        .expect("the least-privilege binding");
    assert_eq!(binding.role_ref.name, common::example::LEAST_PRIVILEGE_NAME);
    let log = pods::log(tier, &new).await;
    assert!(
        !common::mentions_status(&log, "422") && !log.contains("roleRef"),
        "refused writes in the new pod's log:\n{log}"
    );
}

async fn least_privilege_operator_repairs_drift(tier: &Tier) {
    repairs_drift(tier).await;
}

async fn release_of_5000_manifests_within_the_memory_limit(tier: &Tier) {
    let release = tier.work.path().join("release-1.5.1");
    bulk_release(
        &tier.work.path().join("release-1.5.0"),
        &release,
        BULK,
        BULK_CONFIGMAPS,
    );
    pods::build_operator_image(tier, BULK.1, &release);
    let started = Instant::now();
    let pod = self_update(tier, BULK).await;
    println!(
        "{BULK_CONFIGMAPS} more manifests applied in {:?}",
        started.elapsed()
    );
    let configmaps: Api<ConfigMap> = Api::namespaced(tier.client.clone(), "node-bulk");
    let count = configmaps
        .list_metadata(&ListParams::default())
        .await
        .expect("bulk ConfigMaps")
        .items
        .len();
    assert!(count >= BULK_CONFIGMAPS, "{count} ConfigMaps in node-bulk");
    let limit = pod.spec.as_ref().expect("spec").containers[0]
        .resources
        .as_ref()
        .and_then(|r| r.limits.as_ref())
        .and_then(|l| l.get("memory"))
        .map(|q| q.0.clone())
        .expect("a memory limit");
    let (rss, cgroup) = pods::peak_memory(&pod, "operator");
    println!(
        "peak memory of the operator with {} manifests: RSS {} MiB, cgroup {} MiB (limit {limit})",
        BULK_CONFIGMAPS,
        rss >> 20,
        cgroup >> 20
    );
    assert_eq!(
        limit, "512Mi",
        "the Deployment's limit changed: update this step"
    );
    assert!(rss < 512 << 20, "peak RSS {rss} over the limit");
    assert_eq!(pods::restarts(&pod), 0, "{}", pods::summary(&pod));
}

/// Moves the operator to `version` and `image` through ClusterVersion `spec.desiredUpdate`,
/// as an administrator does, and checks the hand-over: the old pod's operator exits 0 on
/// SIGTERM, the new pod leads with no restart and no Warning event, ClusterVersion ends
/// `Completed` at `version`, and after the new pod's first full pass nothing moved back.
/// Returns the new pod.
async fn self_update(tier: &Tier, (version, image): (&str, &str)) -> Pod {
    let old = pods::rolled_out(tier, Duration::from_secs(180)).await;
    let old_name = old.metadata.name.clone().expect("name");
    let pods_api: Api<Pod> = Api::namespaced(tier.client.clone(), NAMESPACE);
    let exit = tokio::spawn(final_exit_code(pods_api.clone(), old_name.clone()));
    let cvs = cluster_versions(tier);
    cvs.patch(
        "version",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"desiredUpdate": {"version": version, "image": image}}})),
    )
    .await
    .expect("set spec.desiredUpdate");
    let started = Instant::now();
    let exit = tokio::time::timeout(Duration::from_secs(300), exit)
        .await
        .unwrap_or_else(|_| panic!("{old_name} still there after 300 s"))
        .expect("watch the old pod");
    assert_eq!(exit, Ok(0), "the old operator's exit on SIGTERM");
    let new = pods::rolled_out(tier, Duration::from_secs(240)).await;
    let new_name = new.metadata.name.clone().expect("name");
    assert_ne!(new_name, old_name);
    assert_eq!(
        new.spec.as_ref().expect("spec").containers[0]
            .image
            .as_deref(),
        Some(image)
    );
    leads(tier, &new_name, Duration::from_secs(60)).await;
    let cv = common::poll_until(
        "ClusterVersion Completed at the new version",
        Duration::from_secs(600),
        || async {
            let cv = cvs.get("version").await.map_err(|e| e.to_string())?;
            let entry = &cv.data["status"]["history"][0];
            (entry["version"] == version && entry["state"] == "Completed")
                .then_some(cv.clone())
                .ok_or(format!("{entry}"))
        },
    )
    .await;
    println!(
        "{old_name} → {new_name}: {version} Completed in {:?}",
        started.elapsed()
    );
    let failing = common::cv_condition(&cv, "Failing").expect("Failing");
    assert_eq!(failing["status"], "False", "{failing}");
    let addr = pods::address(&new, PORT);
    common::poll_until(
        "a full pass of the new pod",
        Duration::from_secs(120),
        || async {
            (pods::passes(addr).await? >= 1)
                .then_some(())
                .ok_or_else(|| "no pass yet".to_owned())
        },
    )
    .await;
    // Nothing moved back: the Deployment and ClusterVersion still name the new release.
    let deployments: Api<Deployment> = Api::namespaced(tier.client.clone(), NAMESPACE);
    let deployment = deployments.get(pods::DEPLOYMENT).await.expect("deployment");
    let containers = deployment
        .spec
        .expect("spec")
        .template
        .spec
        .expect("pod")
        .containers;
    assert_eq!(containers[0].image.as_deref(), Some(image));
    let cv = cvs.get("version").await.expect("ClusterVersion");
    assert_eq!(cv.data["status"]["desired"]["version"], version);
    let new = pods::rolled_out(tier, Duration::from_secs(60)).await;
    assert_eq!(new.metadata.name.as_deref(), Some(new_name.as_str()));
    assert_eq!(pods::restarts(&new), 0, "{}", pods::summary(&new));
    let warnings = pods::warnings(tier, &new).await;
    assert!(
        warnings.is_empty(),
        "Warning events for {new_name}: {warnings:#?}"
    );
    new
}

/// The exit code of the operator container of pod `name` when the pod is gone, from a watch
/// of it (the kubelet posts the terminated state before it removes the pod); `Err` with what
/// was seen when it ended without one.
async fn final_exit_code(pods_api: Api<Pod>, name: String) -> Result<i32, String> {
    use futures::StreamExt as _;
    use kube::runtime::watcher::{self, Event};
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mut stream = watcher::watcher(pods_api, config).boxed();
    let mut exit = None;
    while let Some(event) = stream.next().await {
        let (pod, gone) = match event.map_err(|e| e.to_string())? {
            Event::Apply(p) | Event::InitApply(p) => (p, false),
            Event::Delete(p) => (p, true),
            Event::Init | Event::InitDone => continue,
        };
        let terminated = pod
            .status
            .and_then(|s| s.container_statuses)
            .into_iter()
            .flatten()
            .filter(|c| c.name == "operator")
            .find_map(|c| c.state.and_then(|s| s.terminated));
        if let Some(t) = terminated {
            exit = Some(t.exit_code);
        }
        if gone {
            return exit.ok_or_else(|| "deleted without a terminated state".to_owned());
        }
    }
    Err(format!("the watch ended; exit code seen: {exit:?}"))
}

/// `base` (the 1.5.0 release) as `version` with `count` more ConfigMaps (namespace
/// `node-bulk`, run level 60, 100 per file), its operator image `image`, and the
/// least-privilege RBAC printed again for it.
fn bulk_release(base: &Path, dest: &Path, (version, image): (&str, &str), count: usize) {
    std::fs::create_dir_all(dest).expect("release directory");
    for entry in std::fs::read_dir(base).expect("base release") {
        let path = entry.expect("entry").path();
        std::fs::copy(&path, dest.join(path.file_name().expect("name"))).expect("copy");
    }
    let annotations = "  annotations:\n    include.release.openshift.io/self-managed-high-availability: \"true\"\n    include.release.openshift.io/single-node-developer: \"true\"\n";
    std::fs::write(
        dest.join("0000_60_node-bulk_00_namespace.yaml"),
        format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: node-bulk\n{annotations}"),
    )
    .expect("namespace");
    for file in 0..count.div_ceil(100) {
        let docs: Vec<String> = (file * 100..((file + 1) * 100).min(count))
            .map(|i| {
                format!(
                    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bulk-{i:05}\n  namespace: node-bulk\n{annotations}data:\n  index: \"{i}\"\n"
                )
            })
            .collect();
        std::fs::write(
            dest.join(format!("0000_60_node-bulk_01_configmaps-{file:03}.yaml")),
            docs.join("---\n"),
        )
        .expect("configmaps");
    }
    let metadata = dest.join("release-metadata");
    let mut meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&metadata).expect("metadata")).expect("JSON");
    let previous = meta["version"].clone();
    meta["version"] = json!(version);
    meta["previous"] = json!([previous]);
    std::fs::write(&metadata, meta.to_string()).expect("release-metadata");
    let deployment = dest.join("0000_00_cluster-version-operator_05_deployment.yaml");
    let text = std::fs::read_to_string(&deployment).expect("Deployment");
    let text = text.replace(LEAST_PRIVILEGE.1, image);
    assert!(text.contains(image));
    std::fs::write(&deployment, text).expect("Deployment");
    common::example::print_rbac(dest, &common::cli::binary());
}

async fn no_restarts_at_the_end(tier: &Tier) {
    for namespace in [NAMESPACE, "widget-operator"] {
        let pods_api: Api<Pod> = Api::namespaced(tier.client.clone(), namespace);
        for pod in pods_api
            .list(&ListParams::default())
            .await
            .expect("pods")
            .items
        {
            assert_eq!(pods::restarts(&pod), 0, "{}", pods::summary(&pod));
        }
    }
    let pods_api: Api<Pod> = Api::namespaced(tier.client.clone(), NAMESPACE);
    let operators = pods_api
        .list(&ListParams::default().labels(SELECTOR))
        .await
        .expect("pods");
    assert_eq!(operators.items.len(), 1, "one operator pod");
}

/// Waits until the pod `pod` holds the operator's Lease.
async fn leads(tier: &Tier, pod: &str, timeout: Duration) {
    let leases: Api<Lease> = Api::namespaced(tier.client.clone(), NAMESPACE);
    common::poll_until(&format!("{pod} leads"), timeout, || async {
        let lease = leases
            .get("cvo-operator")
            .await
            .map_err(|e| e.to_string())?;
        let holder = lease
            .spec
            .and_then(|s| s.holder_identity)
            .unwrap_or_default();
        holder
            .starts_with(pod)
            .then_some(())
            .ok_or(format!("holder {holder:?}"))
    })
    .await;
}

/// ClusterVersion `version`.
async fn cluster_version(tier: &Tier) -> DynamicObject {
    cluster_versions(tier)
        .get("version")
        .await
        .expect("ClusterVersion version")
}

/// The ClusterVersion API.
fn cluster_versions(tier: &Tier) -> Api<DynamicObject> {
    Api::all_with(
        tier.client.clone(),
        &kube::api::ApiResource {
            group: "config.openshift.io".to_owned(),
            version: "v1".to_owned(),
            api_version: "config.openshift.io/v1".to_owned(),
            kind: "ClusterVersion".to_owned(),
            plural: "clusterversions".to_owned(),
        },
    )
}
