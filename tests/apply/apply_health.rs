//! Health gates, on both servers: a node is done when what it applied is healthy. The real
//! control plane has no kubelet, so a test plays the operator or controller and writes the
//! status subresource itself (ClusterOperator versions and conditions, a Job's failure).

use crate::common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::api::{ApiResource, Patch, PatchParams};
use serde_json::{Value, json};

use common::TestCluster;
use common::report::result;
use cvo::apply::Action;
use cvo::cluster::Cluster;
use cvo::health::{Observer, Reason, WaitMode};
use cvo::release::Release;
use cvo::status::ConditionStatus;
use cvo::sync::{Mode, SyncOptions, SyncOutcome, sync};

/// The ClusterOperator kind (served) and a unique operator name, deleted at the end.
async fn operator_name(tc: &TestCluster, prefix: &str) -> (ApiResource, String) {
    let co = common::openshift_kind(tc, "ClusterOperator").await;
    let op = common::unique(prefix);
    tc.track_cluster_object(&co, &op);
    (co, op)
}

fn configmap(ns: &str, name: &str) -> String {
    common::configmap(ns, name, "", &[])
}

fn cluster_operator(name: &str) -> String {
    format!(
        "apiVersion: config.openshift.io/v1\nkind: ClusterOperator\nmetadata:\n  name: {name}\nspec: {{}}\nstatus:\n  versions:\n  - name: operator\n    version: 1.0.0\n"
    )
}

/// Options for an update with `wait` and a health timeout; the observer records every
/// summary of what the pass waits on.
fn health_options(wait: WaitMode, timeout: Duration) -> (SyncOptions, Arc<Mutex<Vec<String>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let mut options = SyncOptions {
        mode: Some(Mode::Updating),
        ..common::sync_options(Duration::from_millis(10))
    };
    options.apply.health.wait = wait;
    options.apply.health.timeout = timeout;
    let record = seen.clone();
    options.apply.health.observer = Some(Observer(Arc::new(move |waiting| {
        record
            .lock()
            .expect("seen")
            .push(cvo::health::waiting_summary(waiting));
    })));
    (options, seen)
}

fn run(
    tc: &TestCluster,
    rel: &Release,
    options: &SyncOptions,
) -> tokio::task::JoinHandle<SyncOutcome> {
    let (client, rel, options) = (tc.client.clone(), rel.clone(), options.clone());
    tokio::spawn(async move {
        sync(&Cluster::new(client), &rel, &options, |_| {})
            .await
            .expect("sync")
    })
}

/// Waits until the pass says it waits on `what`.
async fn waiting_on(seen: &Mutex<Vec<String>>, what: &str) {
    common::poll_until(
        &format!("waiting on {what}"),
        Duration::from_secs(60),
        || async {
            let seen = seen.lock().expect("seen");
            if seen.iter().any(|s| s.contains(what)) {
                Ok(())
            } else {
                Err(format!("{seen:?}"))
            }
        },
    )
    .await
}

async fn co_status(tc: &TestCluster, resource: &ApiResource, name: &str, status: Value) {
    tc.dynamic(resource, None)
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(&json!({"status": status})),
        )
        .await
        .unwrap_or_else(|e| panic!("status of ClusterOperator {name}: {e}"));
}

fn co_conditions(available: &str, degraded: &str, version: &str) -> Value {
    json!({
        "versions": [{"name": "operator", "version": version}],
        "conditions": [
            {"type": "Available", "status": available, "reason": "AsExpected", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"},
            {"type": "Degraded", "status": degraded, "reason": "DiskFull", "message": "disk is full", "lastTransitionTime": "2026-01-01T00:00:00Z"},
        ],
    })
}

async fn configmap_exists(tc: &TestCluster, ns: &str, name: &str) -> bool {
    tc.dynamic(&common::configmaps(), Some(ns))
        .get_opt(name)
        .await
        .expect("get configmap")
        .is_some()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_level_waits_until_its_cluster_operator_reports_the_release() {
    let tc = common::cluster().await;
    let _turn = common::sync_turn(&tc).await;
    let (co, op) = operator_name(&tc, "op").await;
    let ns = tc.namespace("health-co").await;
    let (_dir, rel) = common::release(
        Some("1.0.0"),
        &[
            ("0000_10_op_00_operator.yaml", cluster_operator(&op)),
            ("0000_20_next_00_cm.yaml", configmap(&ns, "after-operator")),
        ],
    );
    let (options, seen) = health_options(WaitMode::Failures, Duration::from_secs(120));
    let pass = run(&tc, &rel, &options);
    waiting_on(&seen, &format!("cluster operator {op}")).await;
    // The operator exists (precreated) but has not reported: run level 20 has not started.
    assert!(
        tc.dynamic(&co, None)
            .get_opt(&op)
            .await
            .expect("get")
            .is_some()
    );
    assert!(!configmap_exists(&tc, &ns, "after-operator").await);

    // Available and not degraded, but still at the old version: still waiting.
    co_status(&tc, &co, &op, co_conditions("True", "False", "0.9.0")).await;
    assert!(!configmap_exists(&tc, &ns, "after-operator").await);
    co_status(&tc, &co, &op, co_conditions("True", "False", "1.0.0")).await;
    let out = pass.await.expect("join");
    let summary = out.report.as_ref().expect("pass").summary();
    assert_eq!(summary.failed + summary.skipped, 0, "{:?}", out.report);
    assert!(configmap_exists(&tc, &ns, "after-operator").await);
    assert_eq!(out.exit_code(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_degraded_operator_fails_its_node_and_blocks_only_its_descendants() {
    let tc = common::cluster().await;
    let _turn = common::sync_turn(&tc).await;
    let co = common::openshift_kind(&tc, "ClusterOperator").await;
    let ns = tc.namespace("health-degraded").await;
    let (a, b) = (common::unique("op-a"), common::unique("op-b"));
    let (_dir, rel) = common::release(
        Some("1.0.0"),
        &[
            ("0000_10_a_00_operator.yaml", cluster_operator(&a)),
            ("0000_10_b_00_operator.yaml", cluster_operator(&b)),
            ("0000_10_c_00_cm.yaml", configmap(&ns, "sibling")),
            ("0000_20_d_00_cm.yaml", configmap(&ns, "descendant")),
        ],
    );
    for name in [&a, &b] {
        tc.track_cluster_object(&co, name);
        let obj = json!({"apiVersion": "config.openshift.io/v1", "kind": "ClusterOperator", "metadata": {"name": name}, "spec": {}});
        tc.dynamic(&co, None)
            .patch(name, &PatchParams::apply("test"), &Patch::Apply(&obj))
            .await
            .expect("create operator");
        co_status(&tc, &co, name, co_conditions("True", "True", "1.0.0")).await;
    }

    // Within the grace period: not Failing yet, Progressing says what it waits on.
    let (options, _) = health_options(WaitMode::Failures, Duration::from_secs(2));
    let out = run(&tc, &rel, &options).await.expect("join");
    for name in [&a, &b] {
        let r = result(&out, &rel, name);
        assert_eq!(r.action, Action::Failed, "{r:?}");
        let finding = r.health.as_ref().expect("health finding");
        assert_eq!(finding.reason, Reason::ClusterOperatorDegraded);
        assert!(
            r.error
                .as_deref()
                .unwrap_or("")
                .contains("Degraded=True: DiskFull: disk is full"),
            "{r:?}"
        );
    }
    assert_eq!(result(&out, &rel, "sibling").action, Action::Created);
    let blocked = result(&out, &rel, "descendant");
    assert_eq!(blocked.action, Action::Skipped);
    assert!(!configmap_exists(&tc, &ns, "descendant").await);
    let condition = |out: &SyncOutcome, type_: &str| {
        out.conditions
            .iter()
            .find(|c| c.type_ == type_)
            .cloned()
            .unwrap_or_else(|| panic!("no {type_}"))
    };
    assert_eq!(condition(&out, "Failing").status, ConditionStatus::False);
    let progressing = condition(&out, "Progressing");
    let mut names = [a.clone(), b.clone()];
    names.sort();
    assert!(
        progressing.message.ends_with(&format!(
            "waiting on cluster operators {}, {}",
            names[0], names[1]
        )),
        "{progressing:?}"
    );
    assert_eq!(out.exit_code(), 1);

    // Past the grace period: Failing, condensed with the CVO's plural reason.
    let (mut options, _) = health_options(WaitMode::Failures, Duration::from_secs(2));
    options.failing_after = Duration::ZERO;
    let out = run(&tc, &rel, &options).await.expect("join");
    let failing = condition(&out, "Failing");
    assert_eq!(failing.status, ConditionStatus::True);
    assert_eq!(failing.reason, "ClusterOperatorsDegraded", "{failing:?}");
    assert!(
        failing
            .message
            .contains(&format!("Cluster operators {}, {} are degraded", a, b))
            || failing
                .message
                .contains(&format!("Cluster operators {}, {} are degraded", b, a)),
        "{failing:?}"
    );

    // The operators recover: the next pass completes.
    for name in [&a, &b] {
        co_status(&tc, &co, name, co_conditions("True", "False", "1.0.0")).await;
    }
    let out = run(&tc, &rel, &options).await.expect("join");
    assert_eq!(out.exit_code(), 0, "{:?}", out.report);
    assert!(configmap_exists(&tc, &ns, "descendant").await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_ready_waits_for_a_rollout_and_names_what_it_lacks() {
    let tc = common::cluster().await;
    let _turn = common::sync_turn(&tc).await;
    let ns = tc.namespace("health-ready").await;
    let deployment = |name: &str, replicas: u32| {
        format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\n  namespace: {ns}\nspec:\n  replicas: {replicas}\n  selector:\n    matchLabels:\n      app: {name}\n  template:\n    metadata:\n      labels:\n        app: {name}\n    spec:\n      containers:\n      - name: c\n        image: registry.example/app:1\n"
        )
    };
    let (_dir, rel) = common::release(
        Some("1.0.0"),
        &[
            ("0000_10_web_00_deployment.yaml", deployment("web", 1)),
            ("0000_20_next_00_cm.yaml", configmap(&ns, "after-web")),
        ],
    );
    // No kubelet runs pods: the rollout never completes.
    let (options, _) = health_options(WaitMode::Ready, Duration::from_secs(3));
    let out = run(&tc, &rel, &options).await.expect("join");
    let web = result(&out, &rel, "web");
    assert_eq!(web.action, Action::Failed, "{web:?}");
    assert_eq!(
        web.health.as_ref().map(|f| f.reason),
        Some(Reason::RolloutInProgress)
    );
    let error = web.error.as_deref().unwrap_or("");
    assert!(
        error.contains(&format!("Deployment {ns}/web is rolling out")),
        "{error}"
    );
    assert!(error.contains("health timeout (3s)"), "{error}");
    assert_eq!(result(&out, &rel, "after-web").action, Action::Skipped);

    // The CVO's default does not wait for the rollout.
    let (options, _) = health_options(WaitMode::Failures, Duration::from_secs(3));
    let out = run(&tc, &rel, &options).await.expect("join");
    assert_eq!(out.exit_code(), 0, "{:?}", out.report);

    // A deployment scaled to zero has rolled out once its controller has seen it.
    let (_dir, zero) = common::release(
        Some("1.0.0"),
        &[("0000_10_idle_00_deployment.yaml", deployment("idle", 0))],
    );
    let (options, _) = health_options(WaitMode::Ready, Duration::from_secs(60));
    let out = run(&tc, &zero, &options).await.expect("join");
    assert_eq!(out.exit_code(), 0, "{:?}", out.report);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_job_blocks_its_chain() {
    let tc = common::cluster().await;
    let _turn = common::sync_turn(&tc).await;
    let ns = tc.namespace("health-job").await;
    // managedBy: the built-in Job controller leaves it to the test, which plays the controller.
    let job = format!(
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: migrate\n  namespace: {ns}\nspec:\n  managedBy: example.com/test-controller\n  backoffLimit: 0\n  template:\n    spec:\n      restartPolicy: Never\n      containers:\n      - name: c\n        image: registry.example/migrate:1\n"
    );
    let (_dir, rel) = common::release(
        Some("1.0.0"),
        &[
            ("0000_10_db_00_job.yaml", job),
            ("0000_10_db_01_cm.yaml", configmap(&ns, "after-job")),
            ("0000_10_other_00_cm.yaml", configmap(&ns, "elsewhere")),
        ],
    );
    let (options, seen) = health_options(WaitMode::Failures, Duration::from_secs(120));
    let pass = run(&tc, &rel, &options);
    waiting_on(&seen, &format!("Job {ns}/migrate")).await;
    // A Job is a barrier: what comes after it in its chain waits.
    assert!(!configmap_exists(&tc, &ns, "after-job").await);
    let now = jiff::Timestamp::now().to_string();
    let failed = json!({"status": {
        "startTime": now,
        "failed": 1,
        "conditions": [
            {"type": "FailureTarget", "status": "True", "reason": "BackoffLimitExceeded", "message": "Job has reached the specified backoff limit", "lastTransitionTime": now},
            {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded", "message": "Job has reached the specified backoff limit", "lastTransitionTime": now},
        ],
    }});
    tc.dynamic(&common::builtin("batch", "v1", "Job", "jobs"), Some(&ns))
        .patch_status("migrate", &PatchParams::default(), &Patch::Merge(&failed))
        .await
        .expect("job status");
    let out = pass.await.expect("join");
    let job = result(&out, &rel, "migrate");
    assert_eq!(job.action, Action::Failed, "{job:?}");
    assert_eq!(
        job.health.as_ref().map(|f| f.reason),
        Some(Reason::JobFailed)
    );
    assert!(
        job.error
            .as_deref()
            .unwrap_or("")
            .contains("BackoffLimitExceeded"),
        "{job:?}"
    );
    assert_eq!(result(&out, &rel, "after-job").action, Action::Skipped);
    assert_eq!(result(&out, &rel, "elsewhere").action, Action::Created);
    assert!(!configmap_exists(&tc, &ns, "after-job").await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_api_service_that_is_not_available_fails() {
    let tc = common::cluster().await;
    let _turn = common::sync_turn(&tc).await;
    let ns = tc.namespace("health-apisvc").await;
    let group = format!("{}.example.test", common::unique("agg"));
    let name = format!("v1.{group}");
    tc.track_cluster_object(
        &common::builtin("apiregistration.k8s.io", "v1", "APIService", "apiservices"),
        &name,
    );
    // Its service does not exist: the aggregator reports Available=False.
    let api_service = format!(
        "apiVersion: apiregistration.k8s.io/v1\nkind: APIService\nmetadata:\n  name: {name}\nspec:\n  group: {group}\n  version: v1\n  groupPriorityMinimum: 1000\n  versionPriority: 15\n  insecureSkipTLSVerify: true\n  service:\n    name: missing\n    namespace: {ns}\n    port: 443\n"
    );
    let (_dir, rel) = common::release(
        Some("1.0.0"),
        &[
            ("0000_10_agg_00_apiservice.yaml", api_service),
            (
                "0000_20_next_00_cm.yaml",
                configmap(&ns, "after-apiservice"),
            ),
        ],
    );
    let (options, _) = health_options(WaitMode::Failures, Duration::from_secs(5));
    let out = run(&tc, &rel, &options).await.expect("join");
    let svc = result(&out, &rel, &name);
    assert_eq!(svc.action, Action::Failed, "{svc:?}");
    assert_eq!(
        svc.health.as_ref().map(|f| f.reason),
        Some(Reason::APIServiceNotAvailable)
    );
    assert_eq!(
        result(&out, &rel, "after-apiservice").action,
        Action::Skipped
    );
    let failing = out
        .conditions
        .iter()
        .find(|c| c.type_ == "Failing")
        .expect("Failing");
    // Not an operator still updating: Failing at once.
    assert_eq!(failing.status, ConditionStatus::True, "{failing:?}");
    assert_eq!(failing.reason, "APIServiceNotAvailable");
}

#[tokio::test]
async fn wait_none_does_not_look_at_health() {
    let tc = common::cluster().await;
    let _turn = common::sync_turn(&tc).await;
    let (_, op) = operator_name(&tc, "op-none").await;
    let (_dir, rel) = common::release(
        Some("1.0.0"),
        &[("0000_10_op_00_operator.yaml", cluster_operator(&op))],
    );
    let (options, seen) = health_options(WaitMode::None, Duration::from_secs(60));
    let out = run(&tc, &rel, &options).await.expect("join");
    assert_eq!(out.exit_code(), 0, "{:?}", out.report);
    assert!(seen.lock().expect("seen").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_reports_what_a_timed_out_node_lacks() {
    let tc = common::cluster().await;
    let _turn = common::sync_turn(&tc).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = tc.kubeconfig_file(dir.path()).await;
    let ns = tc.namespace("health-cli").await;
    let (release_dir, _) = common::release(
        Some("1.0.0"),
        &[(
            "0000_10_web_00_deployment.yaml",
            format!(
                "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: {ns}\nspec:\n  selector:\n    matchLabels:\n      app: web\n  template:\n    metadata:\n      labels:\n        app: web\n    spec:\n      containers:\n      - name: c\n        image: registry.example/app:1\n"
            ),
        )],
    );
    let mut cmd = common::cli::process();
    cmd.arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["apply", "--release"])
        .arg(release_dir.path())
        .args([
            "--wait",
            "ready",
            "--health-timeout",
            "2s",
            "--install-timeout",
            "2s",
        ])
        .args(["-o", "json"]);
    // The in-memory server answers from this process: wait for the child off its threads.
    let out = tokio::task::spawn_blocking(move || cmd.output())
        .await
        .expect("join")
        .expect("run cvo");
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).expect("json report");
    let web = &report["results"][0];
    assert_eq!(web["action"], "failed", "{web}");
    assert_eq!(web["health"]["reason"], "RolloutInProgress", "{web}");
    let message = web["health"]["message"].as_str().unwrap_or("");
    assert!(
        message.contains(&format!("Deployment {ns}/web is rolling out")),
        "{message}"
    );
    assert!(message.contains("health timeout (2s)"), "{message}");
}

#[tokio::test]
async fn cluster_operators_are_created_before_the_pass_reaches_them() {
    let tc = common::cluster().await;
    let _turn = common::sync_turn(&tc).await;
    let (co, op) = operator_name(&tc, "op-early").await;
    // Run level 10 fails (its namespace does not exist), so the pass never reaches 50.
    let (_dir, rel) = common::release(
        Some("1.0.0"),
        &[
            (
                "0000_10_a_00_cm.yaml",
                configmap(&common::unique("absent"), "cm"),
            ),
            ("0000_50_op_00_operator.yaml", cluster_operator(&op)),
        ],
    );
    let (options, _) = health_options(WaitMode::Failures, Duration::from_secs(60));
    let out = run(&tc, &rel, &options).await.expect("join");
    assert_eq!(result(&out, &rel, &op).action, Action::Skipped);
    // As the CVO does, the operator's ClusterOperator exists anyway, ready for its status.
    assert!(
        tc.dynamic(&co, None)
            .get_opt(&op)
            .await
            .expect("get")
            .is_some()
    );
}
