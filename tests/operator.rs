//! `cvo operator`, the real binary as a subprocess against the test cluster (`tests/common`:
//! the in-memory server served on loopback, or the real one named by `CVO_TEST_KUBECONFIG`):
//! install → ClusterVersion history Completed; drift (an edit, a deletion; of ConfigMaps and
//! of a Secret, watched in its namespace only) repaired from watches within 5 s without a full
//! pass; passes with nothing drifted write nothing; a burst
//! of spec edits makes passes at most every 2 s; a refused
//! minor update applies nothing until `spec.desiredUpdate` forces it; metrics scraped and
//! parsed; SIGTERM exits 0 and releases the Lease (a pass still running at the end of the
//! grace period is recorded as interrupted); leader failover after kill -9;
//! `spec.desiredUpdate.image` moves the operator's own Deployment, and the instance started as
//! its new pod would be takes over and updates the cluster to its release (naming the image
//! the operator runs writes nothing to its Deployment); only the leader runs the operand-cleanup component; an
//! override stops management and makes the cluster not upgradeable; a deletion held by a
//! finalizer across a kill -9 is still reported by the next process, then recorded when it
//! completes; a change of the gates FeatureGate `cluster` enables for the release's version
//! starts a pass that applies what they let in. `spec.desiredUpdate` as OpenShift's CVO reads it: `{version}` alone resolved from
//! `availableUpdates` or `history` (else `Invalid` with the CVO's message), `{image, force}`
//! forcing the release of the image the operator runs, a version that is not the image's
//! release refused, another architecture refused, and a stale `Progressing` from an earlier
//! leader rewritten. Available updates from an update graph served on loopback
//! (`common::graph`): filled from a good graph and asked again on a channel change, the last
//! good list kept through a malformed graph and a silent server (which times out while
//! passes go on), `NoUpstream` and `NoChannel`. Start-up (issue 23): an API server that
//! cannot be reached is waited for with `/healthz` 200 and `/readyz` 503 (SIGTERM exits 0 at
//! once); in JSON mode every stderr line is JSON, fatal errors included; `/readyz` comes from
//! the election (a leader in its first pass, a standby), never from a pass.
//!
//! Releases as OCI artifacts (issue 18, a real registry from `common::registry`):
//! `spec.desiredUpdate.image` naming a release artifact is pulled and led with in the same
//! process (by digest; by tag, resolved once per spec change), an image not in the registry is
//! `RetrievePayload` while the current release stays enforced, the pull Secret's credentials
//! against an htpasswd registry, and the way out of an invalid release; images the operator
//! moves to are container images in that registry (an unreachable one moves nothing).
//!
//! Every test starts from `common::operator::Env` (it holds the ClusterVersion lock) and
//! deletes `version` when done (`Env::finish`).

mod common;

#[path = "operator/capabilities.rs"]
mod capabilities;
#[path = "operator/preflight.rs"]
mod preflight;

use std::path::Path;
use std::time::{Duration, Instant};

use common::operator::{Env, Operator, metric};
use common::{TestCluster, configmaps, cv_condition as condition, poll_until};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};

fn write_release(dir: &Path, version: &str, files: &[(&str, String)]) {
    common::write_release(dir, Some(version), files);
}

fn configmap(ns: &str, name: &str, value: &str) -> String {
    common::configmap(ns, name, "", &[("a", value)])
}

async fn cm_value(tc: &TestCluster, ns: &str, name: &str) -> Option<String> {
    tc.dynamic(&configmaps(), Some(ns))
        .get_opt(name)
        .await
        .expect("get configmap")
        .map(|cm| cm.data["data"]["a"].as_str().unwrap_or_default().to_owned())
}

/// Lease timings short enough for a standby to take over within seconds.
const FAILOVER_LEASE: [&str; 6] = [
    "--lease-duration",
    "3s",
    "--lease-renew-deadline",
    "2s",
    "--lease-retry",
    "500ms",
];

/// Waits until ClusterVersion's newest history entry is `version` in `state`.
async fn history(cvs: &Api<DynamicObject>, version: &str, state: &str) -> DynamicObject {
    poll_until(
        &format!("ClusterVersion history {version} {state}"),
        Duration::from_secs(60),
        || async {
            let cv = cvs.get("version").await.map_err(|e| e.to_string())?;
            let newest = &cv.data["status"]["history"][0];
            if newest["version"] == version && newest["state"] == state {
                Ok(cv)
            } else {
                Err(format!("status: {}", cv.data["status"]))
            }
        },
    )
    .await
}

async fn lease_holder(tc: &TestCluster, ns: &str, name: &str) -> Option<String> {
    Api::<Lease>::namespaced(tc.client.clone(), ns)
        .get_opt(name)
        .await
        .expect("get lease")
        .and_then(|l| l.spec?.holder_identity)
        .filter(|h| !h.is_empty())
}

/// Waits for `ReleaseAccepted=False` on ClusterVersion and returns that condition.
async fn release_refused(cvs: &Api<DynamicObject>) -> Value {
    poll_until("ReleaseAccepted=False", Duration::from_secs(60), || async {
        let cv = cvs.get("version").await.map_err(|e| e.to_string())?;
        match condition(&cv, "ReleaseAccepted") {
            Some(c) if c["status"] == "False" => Ok(c.clone()),
            other => Err(format!("{other:?}")),
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn installs_repairs_drift_from_watches_and_stops_on_sigterm() {
    let env = Env::new("operator").await;
    let Env {
        tc, cvs, ns, lease, ..
    } = &env;
    env.write_release("1.0.0",
        &[
            (
                "0000_10_a_00_settings.yaml",
                configmap(ns, "settings", "one"),
            ),
            ("0000_20_b_00_other.yaml", configmap(ns, "other", "two")),
            (
                "0000_20_b_01_token.yaml",
                format!(
                    "apiVersion: v1\nkind: Secret\nmetadata:\n  name: token\n  namespace: {ns}\ndata:\n  a: b25l\n"
                ),
            ),
        ],
    );
    // A long resync: only the watches can explain a repair.
    let op = env.start(&["--resync-interval", "1h", "--lease-name", lease]);

    let installed = history(cvs, "1.0.0", "Completed").await;
    let accepted = condition(&installed, "ReleaseAccepted").expect("ReleaseAccepted");
    assert_eq!(accepted["status"], "True", "{accepted}");
    assert_eq!(cm_value(tc, ns, "settings").await.as_deref(), Some("one"));
    let text = op
        .metric_at_least("cvo_sync_passes_total", &[("trigger", "initial")], 1.0)
        .await;
    assert_eq!(metric(&text, "cvo_leader", &[]), 1.0, "{text}");
    assert_eq!(
        metric(
            &text,
            "cvo_cluster_version",
            &[("type", "current"), ("version", "1.0.0")]
        ),
        1.0,
        "{text}"
    );
    assert_eq!(metric(&text, "cvo_upgradeable", &[]), 1.0, "{text}");
    assert!(
        metric(&text, "cvo_api_requests_total", &[("verb", "PATCH")]) >= 2.0,
        "{text}"
    );
    assert!(
        text.contains("cvo_sync_pass_duration_seconds_bucket"),
        "{text}"
    );
    assert_eq!(
        common::http_get(op.port, "/healthz").await,
        Ok((200, "ok\n".into()))
    );
    assert_eq!(
        common::http_get(op.port, "/readyz").await.map(|r| r.0),
        Ok(200)
    );
    assert!(
        lease_holder(tc, ns, lease).await.is_some(),
        "the leader holds the Lease"
    );

    // Someone edits a managed object: put back within 5 s, by a repair, not a pass.
    let cms = tc.dynamic(&configmaps(), Some(ns));
    cms.patch(
        "settings",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"a": "drifted"}})),
    )
    .await
    .expect("edit");
    poll_until("the edit repaired", Duration::from_secs(5), || async {
        match cm_value(tc, ns, "settings").await.as_deref() {
            Some("one") => Ok(()),
            other => Err(format!("a = {other:?}")),
        }
    })
    .await;
    // Someone deletes one: recreated within 5 s.
    cms.delete("other", &DeleteParams::default())
        .await
        .expect("delete");
    poll_until("the deletion repaired", Duration::from_secs(5), || async {
        match cm_value(tc, ns, "other").await.as_deref() {
            Some("two") => Ok(()),
            other => Err(format!("a = {other:?}")),
        }
    })
    .await;
    // The same for a Secret, watched in its namespace only (never cluster-wide).
    let secrets = tc.dynamic(&common::builtin("", "v1", "Secret", "secrets"), Some(ns));
    let secret_value = || async {
        secrets
            .get_opt("token")
            .await
            .map_err(|e| e.to_string())?
            .and_then(|s| s.data["data"]["a"].as_str().map(str::to_owned))
            .ok_or_else(|| "absent".to_owned())
    };
    assert_eq!(secret_value().await.as_deref(), Ok("b25l"));
    secrets
        .patch(
            "token",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"a": "ZHJpZnQ="}})),
        )
        .await
        .expect("edit the Secret");
    poll_until(
        "the Secret's edit repaired",
        Duration::from_secs(5),
        || async {
            match secret_value().await?.as_str() {
                "b25l" => Ok(()),
                other => Err(format!("a = {other}")),
            }
        },
    )
    .await;
    secrets
        .delete("token", &DeleteParams::default())
        .await
        .expect("delete the Secret");
    poll_until("the Secret recreated", Duration::from_secs(5), || async {
        secret_value().await.map(|_| ())
    })
    .await;
    let text = op.scrape().await.expect("metrics");
    assert!(
        metric(&text, "cvo_drift_repairs_total", &[("action", "updated")]) >= 1.0,
        "{text}"
    );
    assert!(
        metric(&text, "cvo_drift_repairs_total", &[("action", "created")]) >= 1.0,
        "{text}"
    );
    assert_eq!(
        metric(&text, "cvo_sync_passes_total", &[]),
        1.0,
        "only the initial pass ran: {text}"
    );

    op.terminate().await;
    assert_eq!(
        lease_holder(tc, ns, lease).await,
        None,
        "the Lease is released on SIGTERM"
    );
    env.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn passes_with_nothing_drifted_write_nothing() {
    let env = Env::new("operator-steady").await;
    let Env {
        tc, cvs, ns, lease, ..
    } = &env;
    env.write_release("1.0.0",
        &[
            (
                "0000_10_a_00_settings.yaml",
                configmap(ns, "settings", "one"),
            ),
            (
                "0000_10_a_01_sa.yaml",
                format!(
                    "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: worker\n  namespace: {ns}\n"
                ),
            ),
        ],
    );
    let op = env.start(&["--resync-interval", "1s", "--lease-name", lease]);
    history(cvs, "1.0.0", "Completed").await;
    let text = op
        .metric_at_least("cvo_sync_passes_total", &[("trigger", "resync")], 1.0)
        .await;
    let versions = |cm: DynamicObject, cv: DynamicObject| {
        (cm.metadata.resource_version, cv.metadata.resource_version)
    };
    let before = versions(
        tc.dynamic(&configmaps(), Some(ns))
            .get("settings")
            .await
            .expect("cm"),
        cvs.get("version").await.expect("cv"),
    );
    let passes = metric(&text, "cvo_sync_passes_total", &[("trigger", "resync")]);
    let text = op
        .metric_at_least(
            "cvo_sync_passes_total",
            &[("trigger", "resync")],
            passes + 2.0,
        )
        .await;
    assert_eq!(metric(&text, "cvo_sync_pass_writes", &[]), 0.0, "{text}");
    // Reads only: discovery is cached, one LIST per (kind, namespace), ClusterVersion.
    let requests = metric(&text, "cvo_sync_pass_requests", &[]);
    assert!(
        (1.0..=20.0).contains(&requests),
        "{requests} requests\n{text}"
    );
    assert_eq!(
        metric(&text, "cvo_sync_passes_total", &[("result", "applied")]),
        metric(&text, "cvo_sync_passes_total", &[]),
        "{text}"
    );
    let after = versions(
        tc.dynamic(&configmaps(), Some(ns))
            .get("settings")
            .await
            .expect("cm"),
        cvs.get("version").await.expect("cv"),
    );
    assert_eq!(before, after, "nothing was written by the later passes");
    op.terminate().await;
    env.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_spec_edits_makes_passes_at_most_every_two_seconds() {
    let env = Env::new("operator-burst").await;
    let Env { cvs, ns, lease, .. } = &env;
    env.write_release(
        "1.0.0",
        &[(
            "0000_10_a_00_settings.yaml",
            configmap(ns, "settings", "one"),
        )],
    );
    let op = env.start(&["--resync-interval", "1h", "--lease-name", lease]);
    history(cvs, "1.0.0", "Completed").await;
    let started = Instant::now();
    let mut generation = 0;
    for i in 0..10 {
        let edited = cvs
            .patch(
                "version",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"channel": format!("burst-{i}")}})),
            )
            .await
            .expect("edit spec");
        generation = edited.metadata.generation.expect("generation");
    }
    let edits_took = started.elapsed();
    poll_until(
        "a pass saw the last edit",
        Duration::from_secs(60),
        || async {
            let cv = cvs.get("version").await.map_err(|e| e.to_string())?;
            let observed = cv.data["status"]["observedGeneration"].as_i64();
            (observed == Some(generation)).then_some(()).ok_or(format!(
                "observedGeneration {observed:?}, want {generation}"
            ))
        },
    )
    .await;
    let text = op.scrape().await.expect("metrics");
    let passes = metric(
        &text,
        "cvo_sync_passes_total",
        &[("trigger", "clusterversion")],
    );
    // Passes start at least 2 s after the previous one ended: over the edits, and one after.
    let most = (edits_took.as_secs_f64() / 2.0).floor() + 2.0;
    assert!(
        (1.0..=most).contains(&passes),
        "{passes} passes for 10 edits in {edits_took:?} (at most {most})\n{text}"
    );
    op.terminate().await;
    env.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_minor_update_applies_nothing_until_forced() {
    let env = Env::new("operator-refused").await;
    let Env {
        tc, cvs, ns, lease, ..
    } = &env;
    // The cluster runs 1.0.0 and says it must not take a minor update.
    cvs.patch_status(
        "version",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {
            "desired": {"version": "1.0.0"},
            "history": [{"state": "Completed", "version": "1.0.0", "startedTime": "2026-01-01T00:00:00Z",
                         "completionTime": "2026-01-01T00:01:00Z", "verified": false}],
            "conditions": [{"type": "Upgradeable", "status": "False", "reason": "AdminAckRequired",
                            "message": "not yet", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
        }})),
    )
    .await
    .expect("status");
    env.write_release(
        "1.1.0",
        &[("0000_10_a_00_new.yaml", configmap(ns, "new", "x"))],
    );
    let op = env.start(&[
        "--resync-interval",
        "1h",
        "--lease-name",
        lease,
        "--release-image",
        "example.com/cvo:1.1.0",
    ]);
    let refused = release_refused(cvs).await;
    assert_eq!(refused["reason"], "UpgradeableFalse", "{refused}");
    let text = op
        .metric_at_least("cvo_sync_passes_total", &[("result", "refused")], 1.0)
        .await;
    assert_eq!(metric(&text, "cvo_upgradeable", &[]), 0.0, "{text}");
    assert_eq!(cm_value(tc, ns, "new").await, None, "nothing applied");
    let stored = cvs.get("version").await.expect("cv");
    assert_eq!(stored.data["status"]["history"][0]["version"], "1.0.0");
    assert_eq!(
        condition(&stored, "Upgradeable").expect("kept")["reason"],
        "AdminAckRequired",
        "foreign conditions are kept"
    );

    // The administrator forces this release (`oc adm upgrade --to-image=… --force`): the spec
    // change starts a pass at once.
    cvs.patch(
        "version",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"desiredUpdate": {
            "version": "1.1.0", "image": "example.com/cvo:1.1.0", "force": true}}})),
    )
    .await
    .expect("force");
    let forced = history(cvs, "1.1.0", "Completed").await;
    let risks = forced.data["status"]["history"][0]["acceptedRisks"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        risks.contains("UpgradeableFalse"),
        "{}",
        forced.data["status"]
    );
    assert_eq!(
        condition(&forced, "ReleaseAccepted").expect("accepted")["status"],
        "True"
    );
    assert_eq!(cm_value(tc, ns, "new").await.as_deref(), Some("x"));
    op.terminate().await;
    env.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_takes_over_when_the_leader_is_killed() {
    let env = Env::new("operator-ha").await;
    let Env {
        tc, cvs, ns, lease, ..
    } = &env;
    env.write_release(
        "1.0.0",
        &[(
            "0000_10_a_00_settings.yaml",
            configmap(ns, "settings", "one"),
        )],
    );
    let mut args = vec!["--resync-interval", "1h", "--lease-name", lease];
    args.extend(FAILOVER_LEASE);
    let a = env.start(&args);
    let b = env.start(&args);
    history(cvs, "1.0.0", "Completed").await;
    // Exactly one leads.
    let (leader, standby) = poll_until("one leader", Duration::from_secs(30), || async {
        let la = metric(&a.scrape().await?, "cvo_leader", &[]);
        let lb = metric(&b.scrape().await?, "cvo_leader", &[]);
        match (la, lb) {
            (1.0, 0.0) => Ok((&a, &b)),
            (0.0, 1.0) => Ok((&b, &a)),
            other => Err(format!("leader gauges {other:?}")),
        }
    })
    .await;
    let holder = lease_holder(tc, ns, lease).await.expect("held");
    assert!(
        !standby
            .scrape()
            .await
            .expect("metrics")
            .contains("cvo_sync_passes_total{"),
        "the standby ran no pass"
    );
    let killed = std::process::Command::new("kill")
        .args(["-KILL", &leader.pid()])
        .status()
        .expect("kill");
    assert!(killed.success());
    let started = Instant::now();
    standby
        .metric_at_least("cvo_sync_passes_total", &[("trigger", "initial")], 1.0)
        .await;
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "took over after {:?}",
        started.elapsed()
    );
    assert_ne!(lease_holder(tc, ns, lease).await, Some(holder));
    // The new leader repairs drift too.
    tc.dynamic(&configmaps(), Some(ns))
        .delete("settings", &DeleteParams::default())
        .await
        .expect("delete");
    poll_until("the new leader repairs", Duration::from_secs(5), || async {
        cm_value(tc, ns, "settings")
            .await
            .ok_or_else(|| "absent".to_owned())
    })
    .await;
    drop(a);
    drop(b);
    env.finish().await;
}

#[test]
fn flags_that_cannot_work_are_refused_before_connecting() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_release(
        dir.path(),
        "1.0.0",
        &[("0000_10_a_00_cm.yaml", configmap("ns", "a", "b"))],
    );
    for (args, expected) in [
        (
            vec!["--lease-duration", "5s", "--lease-renew-deadline", "10s"],
            "--lease-duration",
        ),
        (vec!["--lease-retry", "10s"], "--lease-retry"),
        (vec!["--resync-interval", "0s"], "--resync-interval"),
        (vec!["--resync-interval", "soon"], "not a duration"),
    ] {
        let out = common::cli::process()
            // No cluster at all: the flags are refused first.
            .args([
                "--kubeconfig",
                "/nonexistent/kubeconfig",
                "operator",
                "--release",
            ])
            .arg(dir.path())
            .args(&args)
            .output()
            .expect("run cvo");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pass_stuck_on_health_does_not_hold_up_shutdown() {
    let env = Env::new("operator-stuck").await;
    let Env {
        tc, cv, ns, lease, ..
    } = &env;
    // No kubelet runs pods: with --wait ready the pass waits for a rollout that never ends.
    let deployment = format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: {ns}\nspec:\n  replicas: 1\n  selector:\n    matchLabels:\n      app: web\n  template:\n    metadata:\n      labels:\n        app: web\n    spec:\n      containers:\n      - name: c\n        image: registry.example/app:1\n"
    );
    env.write_release("1.0.0", &[("0000_10_web_00_deployment.yaml", deployment)]);
    let op = env.start(&[
        "--resync-interval",
        "1h",
        "--lease-name",
        lease,
        "--wait",
        "ready",
        "--health-timeout",
        "10m",
        "--shutdown-grace",
        "2s",
    ]);
    let deployments = tc.dynamic(
        &common::builtin("apps", "v1", "Deployment", "deployments"),
        Some(ns),
    );
    poll_until(
        "the pass created the Deployment",
        Duration::from_secs(60),
        || async {
            deployments
                .get_opt("web")
                .await
                .map_err(|e| e.to_string())?
                .ok_or_else(|| "absent".to_owned())
        },
    )
    .await;
    let text = op.scrape().await.expect("metrics");
    assert_eq!(
        metric(&text, "cvo_sync_passes_total", &[]),
        0.0,
        "still in its first pass: {text}"
    );
    let started = Instant::now();
    op.terminate().await;
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "stopped after {:?}",
        started.elapsed()
    );
    assert_eq!(lease_holder(tc, ns, lease).await, None, "released");
    // The final status write: the install is still in progress, and says it was interrupted.
    let cvs = tc.dynamic(cv, None);
    let version = cvs.get("version").await.expect("ClusterVersion");
    let progressing = condition(&version, "Progressing").expect("Progressing");
    assert_eq!(progressing["status"], "True", "{progressing}");
    assert_eq!(progressing["reason"], "Interrupted", "{progressing}");
    let message = progressing["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("Working towards 1.0.0")
            && message.contains(". Interrupted: the operator stopped before this pass finished"),
        "{message}"
    );
    let newest = &version.data["status"]["history"][0];
    assert_eq!(newest["version"], "1.0.0", "{newest}");
    assert_eq!(newest["state"], "Partial", "{newest}");
    env.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs docker-registry (apt-get install docker-registry): run with --include-ignored (.ci/run does)"]
async fn an_invalid_release_is_reported_and_a_desired_image_moves_the_operator_away() {
    let (_registry, images_at) = operator_images(&["1.0.1"]).await;
    let to = format!("{images_at}1.0.1");
    let env = Env::new("operator-invalid").await;
    let Env {
        tc, cvs, ns, lease, ..
    } = &env;
    let deployments = own_deployment(tc, ns, "cvo", "example.com/cvo:1.0.0").await;
    let self_deployment = format!("{ns}/cvo");
    env.write_release(
        "1.0.0",
        &[
            ("0000_10_a_00_good.yaml", configmap(ns, "good", "x")),
            (
                "0000_10_a_01_broken.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata: [unclosed\n".to_owned(),
            ),
        ],
    );
    let op = env.start(&[
        "--resync-interval",
        "1h",
        "--lease-name",
        lease,
        "--release-image",
        "example.com/cvo:1.0.0",
        "--self-deployment",
        &self_deployment,
    ]);
    let refused = release_refused(cvs).await;
    assert_eq!(refused["reason"], "InvalidRelease", "{refused}");
    let message = refused["message"].as_str().unwrap_or_default();
    assert!(message.contains("0000_10_a_01_broken.yaml:"), "{message}");
    // Nothing is applied, and Progressing says so.
    let progressing = condition_is(cvs, "Progressing", "False", "InvalidRelease").await;
    assert!(
        progressing["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("Nothing is applied:")),
        "{progressing}"
    );
    assert_eq!(cm_value(tc, ns, "good").await, None, "nothing applied");
    let text = op
        .metric_at_least("cvo_sync_passes_total", &[("result", "refused")], 1.0)
        .await;
    assert_eq!(metric(&text, "cvo_leader", &[]), 1.0, "{text}");
    // A version no update source lists: said as the CVO says it, and not acted on.
    desire(cvs, json!({"version": "1.0.1"})).await;
    let invalid = condition_is(cvs, "Invalid", "True", "InvalidClusterVersion").await;
    assert!(
        invalid["message"].as_str().is_some_and(
            |m| m.ends_with("when image is empty the update must be an available update")
        ),
        "{invalid}"
    );
    // The way out without a restart: an image with a fixed release. The spec change is acted
    // on at once (the resync interval is an hour).
    desire(cvs, json!({"version": "", "image": to})).await;
    poll_until(
        "the operator container moved",
        Duration::from_secs(30),
        || async {
            let (images, _) = images(&deployments, "cvo").await;
            if images.contains(&("operator".to_owned(), to.clone())) {
                Ok(())
            } else {
                Err(format!("{images:?}"))
            }
        },
    )
    .await;
    condition_is(cvs, "ReleaseAccepted", "Unknown", "OperatorImageUpdating").await;
    assert_eq!(
        cm_value(tc, ns, "good").await,
        None,
        "still nothing applied"
    );
    op.terminate().await;
    assert_eq!(lease_holder(tc, ns, lease).await, None, "released");
    env.finish().await;
}

/// `cvo operator --release oci-layout:… --verify-key`: a release whose signature does not
/// verify is refused at start like any unusable release (`ReleaseAccepted=False` reason
/// `ImageVerificationFailed`, the digest and what failed in the message), nothing is applied,
/// and the operator keeps running.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unsigned_oci_release_is_refused_at_start_with_nothing_applied() {
    let env = Env::new("operator-unsigned").await;
    let Env {
        tc, cvs, ns, lease, ..
    } = &env;
    env.write_release(
        "1.0.0",
        &[("0000_10_a_00_good.yaml", configmap(ns, "good", "x"))],
    );
    let layout = env.dir.path().join("layout");
    let target = format!("oci-layout:{}:1.0.0", layout.display());
    let out = common::cli::cvo()
        .args(["push", "--release"])
        .arg(&env.release)
        .arg(&target)
        .output()
        .expect("run cvo push");
    assert!(out.status.success(), "{out:?}");
    let key = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/oci/keys/p256.pub");
    let cache = env.dir.path().join("cache");
    let op = Operator::start(
        &env.kubeconfig,
        env.dir.path(),
        Path::new(&target),
        ns,
        &[
            "--resync-interval",
            "1h",
            "--lease-name",
            lease,
            "--verify-key",
            key.to_str().unwrap(),
            "--cache-dir",
            cache.to_str().unwrap(),
        ],
    );
    let refused = release_refused(cvs).await;
    let message = refused["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("failed signature verification") && message.contains("not signed"),
        "{refused}"
    );
    assert_eq!(refused["reason"], "ImageVerificationFailed", "{refused}");
    op.metric_at_least("cvo_sync_passes_total", &[("result", "refused")], 1.0)
        .await;
    assert_eq!(cm_value(tc, ns, "good").await, None, "nothing applied");
    op.terminate().await;
    env.finish().await;
}

/// A Deployment standing for the operator's own: its `operator` container runs `image`.
async fn own_deployment(tc: &TestCluster, ns: &str, name: &str, image: &str) -> Api<Deployment> {
    let deployments = Api::<Deployment>::namespaced(tc.client.clone(), ns);
    let d: Deployment = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [
                    {"name": "sidecar", "image": "example.com/sidecar:1"},
                    {"name": "operator", "image": image, "args": ["operator", "--release", "/release"]},
                ]},
            },
        },
    }))
    .expect("deployment");
    deployments
        .create(&Default::default(), &d)
        .await
        .expect("create the operator's Deployment");
    deployments
}

/// The images of `name`'s containers, by container name, and its `metadata.generation`.
async fn images(deployments: &Api<Deployment>, name: &str) -> (Vec<(String, String)>, i64) {
    let d = deployments.get(name).await.expect("get deployment");
    let images = d
        .spec
        .and_then(|s| s.template.spec)
        .map(|s| s.containers)
        .unwrap_or_default()
        .into_iter()
        .map(|c| (c.name, c.image.unwrap_or_default()))
        .collect();
    (images, d.metadata.generation.unwrap_or_default())
}

/// Waits until ClusterVersion's condition `type_` has `status` and `reason`.
async fn condition_is(cvs: &Api<DynamicObject>, type_: &str, status: &str, reason: &str) -> Value {
    poll_until(
        &format!("{type_}={status} ({reason})"),
        Duration::from_secs(60),
        || async {
            let cv = cvs.get("version").await.map_err(|e| e.to_string())?;
            match condition(&cv, type_) {
                Some(c) if c["status"] == status && c["reason"] == reason => Ok(c.clone()),
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await
}

/// An operator for a one-ConfigMap release 1.0.0 that runs `example.com/cvo:1.0.0` and whose
/// Deployment is `ns/cvo`.
fn start_self_updating(tc_kubeconfig: &Path, dir: &Path, ns: &str, lease: &str) -> Operator {
    start_image(
        tc_kubeconfig,
        dir,
        ns,
        lease,
        "1.0.0",
        "one",
        "example.com/cvo:1.0.0",
    )
}

/// A registry holding the operator's own container images `cvo:TAG` for `tags`, and the
/// pullspec prefix `127.0.0.1:PORT/cvo:` of their names. An image `spec.desiredUpdate.image`
/// moves the operator to is looked up first (a release artifact would be pulled instead, and
/// a registry that cannot be reached moves nothing), so it must be in a registry. The test
/// fails without the registry binary (it is ignored by default).
async fn operator_images(tags: &[&str]) -> (common::registry::Registry, String) {
    let registry = common::registry::Registry::start();
    for tag in tags {
        registry.push_image("cvo", tag).await;
    }
    let prefix = registry.pullspec("cvo", ":");
    (registry, prefix)
}

/// The operator as its Deployment's pod running `image` (release `version`) would be: the
/// release baked into that image (`version`, ConfigMap `settings` = `value`), Deployment
/// `ns/cvo`, Lease `lease`.
fn start_image(
    tc_kubeconfig: &Path,
    dir: &Path,
    ns: &str,
    lease: &str,
    version: &str,
    value: &str,
    image: &str,
) -> Operator {
    let release = dir.join(format!("release-{version}"));
    write_release(
        &release,
        version,
        &[(
            "0000_10_a_00_settings.yaml",
            configmap(ns, "settings", value),
        )],
    );
    let self_deployment = format!("{ns}/cvo");
    Operator::start(
        tc_kubeconfig,
        dir,
        &release,
        ns,
        &[
            "--resync-interval",
            "1h",
            "--lease-name",
            lease,
            "--release-image",
            image,
            "--self-deployment",
            &self_deployment,
        ],
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs docker-registry (apt-get install docker-registry): run with --include-ignored (.ci/run does)"]
async fn a_desired_image_moves_the_operators_own_deployment_and_it_hands_over() {
    let (_registry, images_at) = operator_images(&["1.1.0"]).await;
    let to = format!("{images_at}1.1.0");
    let env = Env::new("operator-move").await;
    let Env {
        tc,
        cvs,
        ns,
        dir,
        kubeconfig,
        lease,
        ..
    } = &env;
    let deployments = own_deployment(tc, ns, "cvo", "example.com/cvo:1.0.0").await;
    let op = start_self_updating(kubeconfig, dir.path(), ns, lease);
    history(cvs, "1.0.0", "Completed").await;

    cvs.patch(
        "version",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"desiredUpdate": {"image": to}}})),
    )
    .await
    .expect("desired image");
    poll_until(
        "the operator container moved",
        Duration::from_secs(30),
        || async {
            let (images, _) = images(&deployments, "cvo").await;
            let want = [
                ("sidecar".to_owned(), "example.com/sidecar:1".to_owned()),
                ("operator".to_owned(), to.clone()),
            ];
            if images == want {
                Ok(())
            } else {
                Err(format!("{images:?}"))
            }
        },
    )
    .await;
    let progressing = condition_is(cvs, "Progressing", "True", "OperatorImageUpdating").await;
    let message = progressing["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(&to)
            && message.contains(&format!("{ns}/cvo"))
            && message.contains("was example.com/cvo:1.0.0"),
        "{progressing}"
    );
    let accepted = condition_is(cvs, "ReleaseAccepted", "Unknown", "OperatorImageUpdating").await;
    assert!(
        accepted["message"]
            .as_str()
            .is_some_and(|m| m.contains("applies nothing more")),
        "{accepted}"
    );
    let text = op
        .metric_at_least(
            "cvo_sync_passes_total",
            &[("trigger", "clusterversion"), ("result", "handed-over")],
            1.0,
        )
        .await;
    assert_eq!(metric(&text, "cvo_leader", &[]), 1.0, "{text}");

    // The rollout, played by hand (no kubelet here): the new pod starts with the release baked
    // into the new image and stands by; the old pod gets SIGTERM and releases the Lease; the
    // new one leads and updates the cluster to its release.
    let (_, generation) = images(&deployments, "cvo").await;
    let new_pod = start_image(kubeconfig, dir.path(), ns, lease, "1.1.0", "two", &to);
    new_pod.metric_at_least("cvo_leader", &[], 0.0).await;
    op.terminate().await;
    history(cvs, "1.1.0", "Completed").await;
    assert_eq!(
        cm_value(tc, ns, "settings").await.as_deref(),
        Some("two"),
        "the new release is applied"
    );
    condition_is(cvs, "ReleaseAccepted", "True", "PayloadLoaded").await;
    let cv_now = cvs.get("version").await.expect("ClusterVersion");
    let progressing = condition(&cv_now, "Progressing").expect("Progressing");
    assert_eq!(
        (&progressing["status"], &progressing["message"]),
        (&json!("False"), &json!("Cluster version is 1.1.0")),
        "the hand-over is over: {progressing}"
    );
    assert_eq!(
        images(&deployments, "cvo").await,
        (
            vec![
                ("sidecar".to_owned(), "example.com/sidecar:1".to_owned()),
                ("operator".to_owned(), to.clone()),
            ],
            generation
        ),
        "the new pod runs the image asked for: it writes nothing to its Deployment"
    );
    new_pod.terminate().await;
    env.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_desired_image_the_operator_already_runs_writes_nothing_to_its_deployment() {
    let env = Env::new("operator-same").await;
    let Env {
        tc,
        cvs,
        ns,
        dir,
        kubeconfig,
        lease,
        ..
    } = &env;
    let deployments = own_deployment(tc, ns, "cvo", "example.com/cvo:1.0.0").await;
    let before = images(&deployments, "cvo").await;
    let op = start_self_updating(kubeconfig, dir.path(), ns, lease);
    history(cvs, "1.0.0", "Completed").await;
    cvs.patch(
        "version",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"desiredUpdate": {"image": "example.com/cvo:1.0.0"}}})),
    )
    .await
    .expect("desired image");
    // The spec change ran a full pass, which applied the release as usual.
    op.metric_at_least(
        "cvo_sync_passes_total",
        &[("trigger", "clusterversion"), ("result", "applied")],
        1.0,
    )
    .await;
    assert_eq!(
        images(&deployments, "cvo").await,
        before,
        "the Deployment's spec was not written"
    );
    let managers: Vec<String> = deployments
        .get("cvo")
        .await
        .expect("get")
        .metadata
        .managed_fields
        .unwrap_or_default()
        .into_iter()
        .filter_map(|m| m.manager)
        .collect();
    assert!(
        !managers.iter().any(|m| m.contains("self-update")),
        "{managers:?}"
    );
    let stored = cvs.get("version").await.expect("cv");
    assert_eq!(
        condition(&stored, "ReleaseAccepted").expect("accepted")["status"],
        "True",
        "{}",
        stored.data["status"]
    );
    // Drift is still repaired: the operator did not hand over.
    tc.dynamic(&configmaps(), Some(ns))
        .delete("settings", &DeleteParams::default())
        .await
        .expect("delete");
    poll_until("the deletion repaired", Duration::from_secs(5), || async {
        cm_value(tc, ns, "settings")
            .await
            .ok_or_else(|| "absent".to_owned())
    })
    .await;
    op.terminate().await;
    env.finish().await;
}

/// `--components release,operand-cleanup`: only the Lease holder runs the OLM reconciler; the
/// standby starts it when it takes over. (What the reconciler does is tested in
/// `tests/cli/cli_operand_cleanup.rs`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_leader_runs_the_operand_cleanup_component() {
    let env = Env::new("operator-olm").await;
    let Env {
        tc, cvs, ns, lease, ..
    } = &env;
    common::ensure_olm_crds(tc).await;
    env.write_release(
        "1.0.0",
        &[(
            "0000_10_a_00_settings.yaml",
            configmap(ns, "settings", "one"),
        )],
    );
    let mut args = vec!["--resync-interval", "1h", "--lease-name", lease];
    args.extend(FAILOVER_LEASE);
    args.extend([
        "--components",
        "release,operand-cleanup",
        "--operand-cleanup-namespace",
        ns,
    ]);
    let a = env.start(&args);
    let b = env.start(&args);
    let started = |op: &Operator| {
        std::fs::read_to_string(&op.log)
            .unwrap_or_default()
            .contains("operand-cleanup reconciler starting")
    };
    let (leader, standby) = poll_until(
        "one leader running the reconciler",
        Duration::from_secs(30),
        || async {
            let la = metric(&a.scrape().await?, "cvo_leader", &[]);
            let lb = metric(&b.scrape().await?, "cvo_leader", &[]);
            let (leader, standby) = match (la, lb) {
                (1.0, 0.0) => (&a, &b),
                (0.0, 1.0) => (&b, &a),
                other => return Err(format!("leader gauges {other:?}")),
            };
            if started(leader) {
                Ok((leader, standby))
            } else {
                Err("the leader has not started the reconciler yet".into())
            }
        },
    )
    .await;
    // The leader's initial pass is done, so the standby has been standing by all along.
    history(cvs, "1.0.0", "Completed").await;
    assert!(!started(standby), "the standby runs no reconciler");
    let killed = std::process::Command::new("kill")
        .args(["-KILL", &leader.pid()])
        .status()
        .expect("kill");
    assert!(killed.success());
    poll_until(
        "the new leader starts the reconciler",
        Duration::from_secs(15),
        || async {
            if started(standby) {
                Ok(())
            } else {
                Err("not yet".to_owned())
            }
        },
    )
    .await;
    drop(a);
    drop(b);
    env.finish().await;
}

/// The operator runs the image asked for, but its release sets its own Deployment to another
/// pullspec: applying it would move the operator away and the next pod back, so nothing is
/// applied and the conflict is reported.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_that_would_move_the_operator_away_from_the_desired_image_is_refused() {
    let env = Env::new("operator-conflict").await;
    let Env {
        tc, cvs, ns, lease, ..
    } = &env;
    let deployment = format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: cvo\n  namespace: {ns}\nspec:\n  selector:\n    matchLabels:\n      app: cvo\n  template:\n    metadata:\n      labels:\n        app: cvo\n    spec:\n      containers:\n      - name: operator\n        image: example.com/cvo:1.0.0\n"
    );
    env.write_release(
        "1.0.0",
        &[
            ("0000_10_a_00_deployment.yaml", deployment),
            (
                "0000_10_a_01_settings.yaml",
                configmap(ns, "settings", "one"),
            ),
        ],
    );
    // Asked for by digest before the operator starts; the release names the tag.
    let digest =
        "example.com/cvo@sha256:0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0";
    cvs.patch(
        "version",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"desiredUpdate": {"image": digest}}})),
    )
    .await
    .expect("desired image");
    let self_deployment = format!("{ns}/cvo");
    let op = env.start(&[
        "--resync-interval",
        "1h",
        "--lease-name",
        lease,
        "--release-image",
        digest,
        "--self-deployment",
        &self_deployment,
    ]);
    let refused = condition_is(cvs, "ReleaseAccepted", "False", "OperatorImageConflict").await;
    assert!(
        refused["message"]
            .as_str()
            .is_some_and(|m| m.contains("example.com/cvo:1.0.0") && m.contains(digest)),
        "{refused}"
    );
    op.metric_at_least("cvo_sync_passes_total", &[("result", "refused")], 1.0)
        .await;
    assert_eq!(cm_value(tc, ns, "settings").await, None, "nothing applied");
    assert!(
        Api::<Deployment>::namespaced(tc.client.clone(), ns)
            .get_opt("cvo")
            .await
            .expect("get")
            .is_none(),
        "the operator's Deployment was not applied"
    );
    op.terminate().await;
    env.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_override_stops_management_and_blocks_updates() {
    let env = Env::new("operator-override").await;
    let Env {
        tc, cvs, ns, lease, ..
    } = &env;
    env.write_release(
        "1.0.0",
        &[
            ("0000_10_a_00_mine.yaml", configmap(ns, "mine", "1")),
            ("0000_10_a_01_kept.yaml", configmap(ns, "kept", "1")),
        ],
    );
    let op = env.start(&["--resync-interval", "1h", "--lease-name", lease]);
    history(cvs, "1.0.0", "Completed").await;

    // The administrator takes `mine` over: the spec change starts a pass, which says so.
    let spec = json!({"spec": {"overrides": [
        {"kind": "ConfigMap", "group": "", "namespace": ns, "name": "mine", "unmanaged": true}]}});
    cvs.patch("version", &PatchParams::default(), &Patch::Merge(&spec))
        .await
        .expect("override");
    let c = condition_is(cvs, "Upgradeable", "False", "ClusterVersionOverrides").await;
    assert!(
        c["message"].as_str().unwrap_or_default().contains("mine"),
        "{c}"
    );
    // Both are edited, `mine` first: `kept` is put back, `mine` is not (its event came first
    // on the same watch, so it was handled before `kept` was repaired).
    let cms = tc.dynamic(&configmaps(), Some(ns));
    for name in ["mine", "kept"] {
        cms.patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"a": "edited"}})),
        )
        .await
        .expect("edit");
    }
    poll_until("kept repaired", Duration::from_secs(5), || async {
        match cm_value(tc, ns, "kept").await.as_deref() {
            Some("1") => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    assert_eq!(cm_value(tc, ns, "mine").await.as_deref(), Some("edited"));
    op.terminate().await;
    env.finish().await;
}

/// Capabilities in the operator: `baselineCapabilitySet: None` with one additional
/// capability applies only its objects; asking for a second creates its objects in the pass
/// the spec change starts (and `cvo_capability` says so); an excluded object is not repaired
/// from its watch; dropping the first from the spec keeps it enabled and managed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capabilities_choose_what_the_operator_applies_and_a_second_is_created_on_the_next_pass() {
    let env = Env::new("operator-caps").await;
    let Env {
        tc, cvs, ns, lease, ..
    } = &env;
    let gated = |name: &str, cap: &str| {
        common::configmap(
            ns,
            name,
            &format!("  annotations:\n    capability.openshift.io/name: {cap}\n"),
            &[("a", "1")],
        )
    };
    let spec = |additional: &[&str]| {
        json!({"spec": {"capabilities": {
            "baselineCapabilitySet": "None", "additionalEnabledCapabilities": additional}}})
    };
    cvs.patch(
        "version",
        &PatchParams::default(),
        &Patch::Merge(spec(&["Console"])),
    )
    .await
    .expect("spec.capabilities");
    env.write_release(
        "1.0.0",
        &[
            ("0000_10_a_00_base.yaml", configmap(ns, "base", "1")),
            ("0000_20_b_00_console.yaml", gated("console", "Console")),
            ("0000_20_c_00_insights.yaml", gated("insights", "Insights")),
            ("0000_20_d_00_storage.yaml", gated("storage", "Storage")),
        ],
    );
    let op = env.start(&["--resync-interval", "1h", "--lease-name", lease]);
    history(cvs, "1.0.0", "Completed").await;
    let cms = tc.dynamic(&configmaps(), Some(ns));
    assert_eq!(cm_value(tc, ns, "console").await.as_deref(), Some("1"));
    assert_eq!(cm_value(tc, ns, "insights").await, None);
    assert_eq!(cm_value(tc, ns, "storage").await, None);
    op.metric_at_least(
        "cvo_capability",
        &[("name", "Insights"), ("enabled", "false")],
        1.0,
    )
    .await;
    // Insights is asked for: the spec change starts a pass that creates its object.
    cvs.patch(
        "version",
        &PatchParams::default(),
        &Patch::Merge(spec(&["Console", "Insights"])),
    )
    .await
    .expect("add Insights");
    poll_until("insights created", Duration::from_secs(30), || async {
        match cm_value(tc, ns, "insights").await {
            Some(v) => Ok(v),
            None => Err("absent".to_owned()),
        }
    })
    .await;
    op.metric_at_least(
        "cvo_capability",
        &[("name", "Insights"), ("enabled", "true")],
        1.0,
    )
    .await;

    // Console is dropped from the spec: still enabled, and an edit of its object is repaired.
    cvs.patch(
        "version",
        &PatchParams::default(),
        &Patch::Merge(spec(&["Insights"])),
    )
    .await
    .expect("drop Console");
    let c = condition_is(
        cvs,
        "ImplicitlyEnabledCapabilities",
        "True",
        "CapabilitiesImplicitlyEnabled",
    )
    .await;
    assert_eq!(
        c["message"],
        "The following capabilities could not be disabled: Console"
    );
    // A `storage` labelled as cvo's (Storage is not enabled), then an edit of `console`: on
    // the same watch, `storage`'s event comes first, so once `console` is repaired the
    // operator has seen `storage` change and left it alone.
    let theirs: DynamicObject = serde_json::from_value(json!({"apiVersion": "v1",
        "kind": "ConfigMap", "metadata": {"name": "storage", "namespace": ns,
            "labels": {"cvo.io/managed": "true"}},
        "data": {"a": "theirs"}}))
    .unwrap();
    cms.create(&Default::default(), &theirs)
        .await
        .expect("create storage");

    cms.patch(
        "console",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"a": "edited"}})),
    )
    .await
    .expect("edit console");
    poll_until("console repaired", Duration::from_secs(10), || async {
        match cm_value(tc, ns, "console").await.as_deref() {
            Some("1") => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    assert_eq!(cm_value(tc, ns, "storage").await.as_deref(), Some("theirs"));
    op.terminate().await;
    env.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_feature_gate_change_starts_a_pass_that_applies_what_it_lets_in() {
    let env = Env::new("operator-fg").await;
    let Env {
        tc, cvs, ns, lease, ..
    } = &env;
    let fgs = common::feature_gates(tc).await;
    let gated = common::configmap(
        ns,
        "needs-a",
        "  annotations:\n    release.openshift.io/feature-gate: A\n",
        &[("a", "1")],
    );
    env.write_release(
        "1.0.0",
        &[
            ("0000_10_a_00_base.yaml", configmap(ns, "base", "1")),
            ("0000_20_b_00_needs-a.yaml", gated),
        ],
    );
    let op = env.start(&["--resync-interval", "1h", "--lease-name", lease]);
    history(cvs, "1.0.0", "Completed").await;
    assert_eq!(cm_value(tc, ns, "base").await.as_deref(), Some("1"));
    assert_eq!(
        cm_value(tc, ns, "needs-a").await,
        None,
        "no FeatureGate: no gate"
    );

    // FeatureGate `cluster` enables A for another version only: no pass is needed.
    let entries =
        |version: &str| json!([{"version": version, "enabled": [{"name": "A"}], "disabled": []}]);
    common::create_feature_gate(&fgs, entries("0.9.0")).await;
    // Then for the release's version: the watch starts a pass (the resync is an hour away)
    // that applies the gated manifest.
    fgs.patch_status(
        "cluster",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"featureGates": entries("1.0.0")}})),
    )
    .await
    .expect("status for 1.0.0");
    poll_until("needs-a created", Duration::from_secs(30), || async {
        cm_value(tc, ns, "needs-a")
            .await
            .ok_or_else(|| "absent".to_owned())
    })
    .await;
    let metrics = op
        .metric_at_least(
            "cvo_sync_passes_total",
            &[("trigger", "featuregate"), ("result", "applied")],
            1.0,
        )
        .await;
    // One pass for the change that mattered: the entry of another version asked for none.
    assert_eq!(
        metric(
            &metrics,
            "cvo_sync_passes_total",
            &[("trigger", "featuregate")]
        ),
        1.0,
        "{metrics}"
    );
    op.terminate().await;
    common::remove_feature_gate(tc, &fgs).await;
    env.finish().await;
}

/// A ConfigMap `held` in the env's namespace that a finalizer holds (its deletion cannot finish
/// until the test says so), and release 1.0.0: ConfigMap `x` and the deletion of `held`.
async fn held_for_deletion(env: &Env) {
    let Env { tc, ns, .. } = env;
    let obj = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "held", "namespace": ns, "finalizers": [common::TEST_FINALIZER]}});
    tc.dynamic(&configmaps(), Some(ns))
        .patch("held", &PatchParams::apply("test"), &Patch::Apply(&obj))
        .await
        .expect("create held");
    tc.hold(&configmaps(), Some(ns), "held");
    let delete = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: held\n  namespace: {ns}\n  annotations:\n    release.openshift.io/delete: \"true\"\n"
    );
    env.write_release(
        "1.0.0",
        &[
            ("0000_10_a_00_x.yaml", configmap(ns, "x", "1")),
            ("0000_10_a_01_held.yaml", delete),
        ],
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deletion_held_across_a_crash_is_still_reported_then_recorded() {
    let env = Env::new("operator-crash").await;
    let Env {
        tc, cvs, ns, lease, ..
    } = &env;
    held_for_deletion(&env).await;
    let fast_lease = [
        "--lease-name",
        lease,
        "--lease-duration",
        "3s",
        "--lease-renew-deadline",
        "2s",
        "--lease-retry",
        "1s",
    ];
    let mut args = vec!["--resync-interval", "1h"];
    args.extend_from_slice(&fast_lease);
    let op = env.start(&args);
    condition_is(cvs, "Upgradeable", "False", "ResourceDeletionInProgress").await;
    // The deletion record (in the operator's namespace) has it requested, not completed.
    let entry = || async {
        let cm = tc
            .dynamic(&configmaps(), Some(ns))
            .get_opt("cvo-deletion-record")
            .await
            .map_err(|e| e.to_string())?
            .ok_or("no deletion record yet")?;
        let text = cm.data["data"]["deletions.json"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let record: Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
        record["entries"]
            .as_array()
            .and_then(|e| e.iter().find(|e| e["name"] == "held").cloned())
            .ok_or_else(|| format!("held not in {record}"))
    };
    let requested = poll_until("held recorded", Duration::from_secs(30), entry).await;
    assert!(requested["completed"].is_null(), "{requested}");

    // kill -9, then a new process: nothing was kept in memory, and it still says so.
    drop(op);
    let mut args = vec!["--resync-interval", "2s"];
    args.extend_from_slice(&fast_lease);
    let op = env.start(&args);
    op.metric_at_least("cvo_deletions_in_progress", &[], 1.0)
        .await;
    condition_is(cvs, "Upgradeable", "False", "ResourceDeletionInProgress").await;

    // The finalizer goes: the next pass sees the object gone, records the deletion as
    // completed, and the cluster is upgradeable again.
    common::strip_finalizers(tc, ns, "held").await;
    let completed = poll_until("held completed", Duration::from_secs(30), || async {
        let e = entry().await?;
        if e["completed"].is_string() {
            Ok(e)
        } else {
            Err(format!("{e}"))
        }
    })
    .await;
    assert_eq!(completed["release"], "1.0.0", "{completed}");
    assert_eq!(completed["requested"], requested["requested"]);
    condition_is(cvs, "Upgradeable", "True", "AsExpected").await;
    let text = op
        .metric_at_least("cvo_deletion_duration_seconds_count", &[], 1.0)
        .await;
    assert_eq!(metric(&text, "cvo_deletions_in_progress", &[]), 0.0);
    op.terminate().await;
    env.finish().await;
}

/// The operator closes the gate before it waits: while its pass waits on a synchronous
/// deletion held by a finalizer, the stored ClusterVersion already says
/// `Upgradeable=False ResourceDeletionInProgress` (and Progressing=True), and a kill -9 during
/// the wait leaves it so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gate_is_closed_while_a_pass_waits_on_a_synchronous_deletion() {
    let env = Env::new("operator-gate").await;
    let Env {
        tc, cvs, ns, lease, ..
    } = &env;
    held_for_deletion(&env).await;
    let op = env.start(&[
        "--resync-interval",
        "1h",
        "--lease-name",
        lease,
        "--deletion-strategy",
        "synchronous",
        "--deletion-timeout",
        "120s",
    ]);
    common::gate_closed(cvs, tc.deadline()).await;
    // Still in its pass, waiting on the held object.
    let log = op.log();
    assert!(!log.contains("full pass done"), "the pass ended: {log}");
    let object = format!("ConfigMap {ns}/held");
    common::assert_gate_closed(cvs, &object, "1.0.0").await;

    // kill -9 during the wait: the gate stays closed.
    drop(op);
    common::assert_gate_closed(cvs, &object, "1.0.0").await;
    common::strip_finalizers(tc, ns, "held").await;
    env.finish().await;
}

/// With OpenShift's own ClusterVersion and ClusterOperator CRDs in the release (manifests-
/// example with the corpus CRDs), the operator installs 1.4.0 and updates to 1.5.0 and 1.5.1
/// (each release run by a new operator, as a new pod would), and every status it writes is
/// accepted: the history ends Completed three times, each entry with its release image, and
/// desired, versionHash and observedGeneration are those of the last release.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the shared OpenShift corpus (../shared/corpus, or CVO_TEST_CORPUS): run with --include-ignored (.ci/run does)"]
async fn an_update_with_openshifts_crds_writes_only_status_the_server_accepts() {
    // Before anything is set up: the test fails here without the corpus.
    common::needs::corpus("openshift-api");
    let env = Env::new("operator-openshift-api").await;
    let Env { tc, cvs, lease, .. } = &env;
    common::example::prepare(tc).await;
    let image = |v: &str| format!("quay.io/cvo-project/release:{v}");
    let mut logs = String::new();
    for (version, previous) in [("1.4.0", "1.3.0"), ("1.5.0", "1.4.0"), ("1.5.1", "1.5.0")] {
        common::example::with_openshift_crds(&env.release, version, previous);
        let op = env.start(&[
            "--resync-interval",
            "1h",
            "--lease-name",
            lease,
            "--release-image",
            &image(version),
        ]);
        history(cvs, version, "Completed").await;
        logs.push_str(&op.log());
        op.terminate().await;
    }
    for line in logs.lines() {
        assert!(
            !line.contains(" 422 ")
                && !line.contains("status not written")
                && !line.contains("could not record"),
            "{line}"
        );
    }
    let cv = cvs.get("version").await.expect("cv");
    let status = &cv.data["status"];
    let entries: Vec<(String, String, String)> = status["history"]
        .as_array()
        .expect("history")
        .iter()
        .map(|h| {
            let text = |k: &str| h[k].as_str().unwrap_or_default().to_owned();
            (text("version"), text("state"), text("image"))
        })
        .collect();
    let expected: Vec<(String, String, String)> = ["1.5.1", "1.5.0", "1.4.0"]
        .iter()
        .map(|v| (v.to_string(), "Completed".to_owned(), image(v)))
        .collect();
    assert_eq!(entries, expected, "{status}");
    assert_eq!(
        status["desired"],
        json!({"version": "1.5.1", "image": image("1.5.1")})
    );
    let loaded = cvo::release::load(&env.release, &Default::default()).expect("load");
    assert_eq!(status["versionHash"], loaded.version_hash.as_str());
    assert_eq!(
        status["observedGeneration"].as_i64(),
        cv.metadata.generation
    );
    assert!(status["availableUpdates"].is_null(), "{status}");
    common::example::clean_up_and_wait(tc, cvs).await;
    env.finish().await;
}

/// Seeds ClusterVersion status: cluster at `1.0.0` Completed (image `example.com/cvo:1.0.0`)
/// after `0.9.0` (image `example.com/cvo:0.9.0`), with `available` as `availableUpdates`
/// and `conditions`.
async fn seed_status(cvs: &Api<DynamicObject>, available: Value, conditions: Value) {
    seed_status_at(cvs, "example.com/cvo:", available, conditions).await;
}

/// [`seed_status`] with the images named `{images_at}VERSION`.
async fn seed_status_at(
    cvs: &Api<DynamicObject>,
    images_at: &str,
    available: Value,
    conditions: Value,
) {
    cvs.patch_status(
        "version",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {
            "desired": {"version": "1.0.0", "image": format!("{images_at}1.0.0")},
            "history": [
                {"state": "Completed", "version": "1.0.0", "image": format!("{images_at}1.0.0"),
                 "startedTime": "2026-01-02T00:00:00Z", "completionTime": "2026-01-02T00:01:00Z", "verified": false},
                {"state": "Completed", "version": "0.9.0", "image": format!("{images_at}0.9.0"),
                 "startedTime": "2026-01-01T00:00:00Z", "completionTime": "2026-01-01T00:01:00Z", "verified": false},
            ],
            "availableUpdates": available,
            "conditions": conditions,
        }})),
    )
    .await
    .expect("seed status");
}

/// Sets `spec.desiredUpdate` to `desired` (a merge patch, as `oc adm upgrade` writes it) and
/// returns the new `metadata.generation`. Fails when the server dropped a field: the installed
/// ClusterVersion CRD must carry every field `oc` writes (`architecture`, `acceptRisks`).
async fn desire(cvs: &Api<DynamicObject>, desired: Value) -> i64 {
    let stored = cvs
        .patch(
            "version",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"desiredUpdate": desired}})),
        )
        .await
        .expect("desired update");
    for field in desired.as_object().into_iter().flat_map(|o| o.keys()) {
        assert!(
            stored.data["spec"]["desiredUpdate"].get(field).is_some(),
            "the server dropped spec.desiredUpdate.{field}: the installed ClusterVersion CRD \
             (kubectl get crd clusterversions.config.openshift.io) lacks it, as OpenShift's has it"
        );
    }
    stored.metadata.generation.expect("generation")
}

/// Waits until the operator container of Deployment `cvo` runs `image`.
async fn moved_to(deployments: &Api<Deployment>, image: &str) {
    poll_until(
        &format!("the operator container moved to {image}"),
        Duration::from_secs(30),
        || async {
            let (images, _) = images(deployments, "cvo").await;
            if images.contains(&("operator".to_owned(), image.to_owned())) {
                Ok(())
            } else {
                Err(format!("{images:?}"))
            }
        },
    )
    .await;
}

/// `{version}` alone (no image) that neither `availableUpdates` nor `history` lists: the CVO's
/// `Invalid` condition, word for word; the spec generation is observed; nothing moves and the
/// release stays applied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_version_alone_that_is_not_an_available_update_is_invalid_and_nothing_moves() {
    let env = Env::new("desired-invalid").await;
    let Env {
        tc,
        cvs,
        ns,
        dir,
        kubeconfig,
        lease,
        ..
    } = &env;
    let deployments = own_deployment(tc, ns, "cvo", "example.com/cvo:1.0.0").await;
    seed_status(
        cvs,
        json!([{"version": "1.2.0", "image": "example.com/cvo:1.2.0"}]),
        json!([]),
    )
    .await;
    let op = start_self_updating(kubeconfig, dir.path(), ns, lease);
    // The first pass is done: the request below is a spec change it did not see.
    op.metric_at_least("cvo_sync_passes_total", &[("trigger", "initial")], 1.0)
        .await;
    let (_, deployment_generation) = images(&deployments, "cvo").await;

    let generation = desire(
        cvs,
        json!({"version": "1.1.0", "image": "", "force": false}),
    )
    .await;
    let invalid = condition_is(cvs, "Invalid", "True", "InvalidClusterVersion").await;
    assert_eq!(
        invalid["message"],
        "The cluster version is invalid: spec.desiredUpdate.version: Invalid value: \"1.1.0\": when image is empty the update must be an available update"
    );
    poll_until("observedGeneration", Duration::from_secs(30), || async {
        let cv = cvs.get("version").await.map_err(|e| e.to_string())?;
        match cv.data["status"]["observedGeneration"].as_i64() {
            Some(g) if g >= generation => Ok(()),
            other => Err(format!("{other:?} < {generation}")),
        }
    })
    .await;
    op.metric_at_least(
        "cvo_sync_passes_total",
        &[("trigger", "clusterversion"), ("result", "applied")],
        1.0,
    )
    .await;
    assert_eq!(
        images(&deployments, "cvo").await,
        (
            vec![
                ("sidecar".to_owned(), "example.com/sidecar:1".to_owned()),
                ("operator".to_owned(), "example.com/cvo:1.0.0".to_owned()),
            ],
            deployment_generation
        ),
        "the request was not acted on"
    );
    let stored = cvs.get("version").await.expect("cv");
    assert_eq!(stored.data["status"]["history"][0]["version"], "1.0.0");
    assert_eq!(
        condition(&stored, "ReleaseAccepted").expect("accepted")["status"],
        "True"
    );

    // Clearing the request (`oc adm upgrade --clear`) makes the spec valid again.
    desire(cvs, Value::Null).await;
    condition_is(cvs, "Invalid", "False", "AsExpected").await;
    op.terminate().await;
    env.finish().await;
}

/// `{version}` alone naming an earlier release in `history` with an image (`oc adm upgrade
/// rollback`): the operator moves its Deployment back to that image.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs docker-registry (apt-get install docker-registry): run with --include-ignored (.ci/run does)"]
async fn a_rollback_to_a_version_in_history_moves_the_operator_to_its_image() {
    let (_registry, images_at) = operator_images(&["0.9.0"]).await;
    let env = Env::new("desired-rollback").await;
    let Env {
        tc,
        cvs,
        ns,
        dir,
        kubeconfig,
        lease,
        ..
    } = &env;
    let deployments = own_deployment(tc, ns, "cvo", "example.com/cvo:1.0.0").await;
    seed_status_at(cvs, &images_at, Value::Null, json!([])).await;
    let op = start_self_updating(kubeconfig, dir.path(), ns, lease);
    // The first pass is done: the request below is a spec change it did not see.
    op.metric_at_least("cvo_sync_passes_total", &[("trigger", "initial")], 1.0)
        .await;
    desire(cvs, json!({"version": "0.9.0", "image": ""})).await;
    moved_to(&deployments, &format!("{images_at}0.9.0")).await;
    condition_is(cvs, "Progressing", "True", "OperatorImageUpdating").await;
    op.terminate().await;
    env.finish().await;
}

/// `{image, force: true}` with an empty version (`oc adm upgrade --to-image=IMG --force`): the
/// operator running that image treats its release as forced — the minor update that
/// `Upgradeable=False` refuses goes through, and its history entry records what was overridden.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_forced_without_a_version_goes_through_a_refusal() {
    let env = Env::new("desired-force").await;
    let Env {
        tc, cvs, ns, lease, ..
    } = &env;
    seed_status(
        cvs,
        Value::Null,
        json!([{"type": "Upgradeable", "status": "False", "reason": "AdminAckRequired",
                "message": "not yet", "lastTransitionTime": "2026-01-01T00:00:00Z"}]),
    )
    .await;
    env.write_release(
        "1.1.0",
        &[("0000_10_a_00_new.yaml", configmap(ns, "new", "x"))],
    );
    // The update service is down (it answers 503): what it listed before stays in status.
    let service = common::graph::GraphServer::start(common::graph::Reply::Status(503));
    cvs.patch(
        "version",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"clusterID": common::graph::CLUSTER_ID,
            "upstream": service.url, "channel": "stable-1"}})),
    )
    .await
    .expect("set the update service");
    let op = env.start(&[
        "--resync-interval",
        "1h",
        "--lease-name",
        lease,
        "--release-image",
        "example.com/cvo:1.1.0",
    ]);
    let refused = release_refused(cvs).await;
    assert_eq!(refused["reason"], "UpgradeableFalse", "{refused}");
    assert_eq!(cm_value(tc, ns, "new").await, None, "nothing applied");

    // The update service listed 1.1.0 as a conditional update, with a risk the administrator
    // accepted (`oc adm upgrade accept RiskA`).
    cvs.patch_status(
        "version",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"conditionalUpdates": [
            {"release": {"version": "1.1.0", "image": "example.com/cvo:1.1.0"},
             "risks": [{"name": "RiskA", "url": "https://example.com/risk-a", "message": "m",
                        "matchingRules": [{"type": "Always"}]}]},
        ]}})),
    )
    .await
    .expect("conditional updates");
    desire(
        cvs,
        json!({"version": "", "image": "example.com/cvo:1.1.0", "force": true,
               "acceptRisks": [{"name": "RiskA"}]}),
    )
    .await;
    let forced = history(cvs, "1.1.0", "Completed").await;
    let risks = forced.data["status"]["history"][0]["acceptedRisks"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        risks.contains("UpgradeableFalse"),
        "{}",
        forced.data["status"]
    );
    assert!(
        risks.contains("The target release example.com/cvo:1.1.0 is exposed to the risks [RiskA] which were all explicitly accepted by the cluster administrator."),
        "{risks}"
    );
    assert_eq!(
        condition(&forced, "ReleaseAccepted").expect("accepted")["status"],
        "True"
    );
    assert_eq!(cm_value(tc, ns, "new").await.as_deref(), Some("x"));
    op.terminate().await;
    env.finish().await;
}

/// `{image, version}` where the release in that image is another version: refused as the CVO
/// refuses it (`VerifyPayloadVersion`), nothing applied, even with `force`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_whose_release_is_not_the_version_asked_for_is_refused() {
    let env = Env::new("desired-mismatch").await;
    let Env {
        tc, cvs, ns, lease, ..
    } = &env;
    seed_status(cvs, Value::Null, json!([])).await;
    desire(
        cvs,
        json!({"version": "1.2.0", "image": "example.com/cvo:1.1.0", "force": true}),
    )
    .await;
    env.write_release(
        "1.1.0",
        &[("0000_10_a_00_new.yaml", configmap(ns, "new", "x"))],
    );
    let op = env.start(&[
        "--resync-interval",
        "1h",
        "--lease-name",
        lease,
        "--release-image",
        "example.com/cvo:1.1.0",
    ]);
    let refused = condition_is(cvs, "ReleaseAccepted", "False", "VerifyPayloadVersion").await;
    assert_eq!(
        refused["message"],
        "Verifying payload failed version=\"1.2.0\" image=\"example.com/cvo:1.1.0\" failure=release image version 1.1.0 does not match the expected upstream version 1.2.0"
    );
    op.metric_at_least("cvo_sync_passes_total", &[("result", "refused")], 1.0)
        .await;
    assert_eq!(cm_value(tc, ns, "new").await, None, "nothing applied");
    op.terminate().await;
    env.finish().await;
}

/// `{architecture: Multi, version}` (`oc adm upgrade --to-multi-arch`): cvo releases are
/// single-architecture, so the request is `Invalid` with a clear message and not acted on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_architecture_is_refused_and_nothing_moves() {
    let env = Env::new("desired-arch").await;
    let Env {
        tc,
        cvs,
        ns,
        dir,
        kubeconfig,
        lease,
        ..
    } = &env;
    let deployments = own_deployment(tc, ns, "cvo", "example.com/cvo:1.0.0").await;
    seed_status(
        cvs,
        json!([{"version": "1.0.0", "image": "example.com/cvo-multi:1.0.0"}]),
        json!([]),
    )
    .await;
    let op = start_self_updating(kubeconfig, dir.path(), ns, lease);
    // The first pass is done: the request below is a spec change it did not see.
    op.metric_at_least("cvo_sync_passes_total", &[("trigger", "initial")], 1.0)
        .await;
    let (before, _) = images(&deployments, "cvo").await;
    desire(cvs, json!({"architecture": "Multi", "version": "1.0.0"})).await;
    let invalid = condition_is(cvs, "Invalid", "True", "InvalidClusterVersion").await;
    assert_eq!(
        invalid["message"],
        "The cluster version is invalid: spec.desiredUpdate.architecture: Unsupported value: \"Multi\": cvo releases are single-architecture, so the cluster cannot move to another architecture; leave architecture empty"
    );
    op.metric_at_least(
        "cvo_sync_passes_total",
        &[("trigger", "clusterversion"), ("result", "applied")],
        1.0,
    )
    .await;
    assert_eq!(images(&deployments, "cvo").await.0, before, "nothing moved");
    op.terminate().await;
    env.finish().await;
}

/// An old leader left `Progressing=True OperatorImageUpdating` (it moved the Deployment, then
/// stopped); the new leader refuses its release: its pass rewrites Progressing from what it
/// does (False, the version the cluster is at, why), and so does every later pass.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_progressing_from_an_old_leader_is_rewritten_by_a_refusing_leader() {
    let env = Env::new("desired-stale").await;
    let Env { cvs, ns, lease, .. } = &env;
    seed_status(
        cvs,
        Value::Null,
        json!([
            {"type": "Upgradeable", "status": "False", "reason": "AdminAckRequired",
             "message": "not yet", "lastTransitionTime": "2026-01-01T00:00:00Z"},
            {"type": "Progressing", "status": "True", "reason": "OperatorImageUpdating",
             "message": "Moving the operator to image example.com/cvo:1.1.0: Deployment x/cvo now runs it (was example.com/cvo:1.0.0)",
             "lastTransitionTime": "2026-01-01T00:00:00Z"},
        ]),
    )
    .await;
    env.write_release(
        "1.1.0",
        &[("0000_10_a_00_new.yaml", configmap(ns, "new", "x"))],
    );
    let op = env.start(&[
        "--resync-interval",
        "1h",
        "--lease-name",
        lease,
        "--release-image",
        "example.com/cvo:1.1.0",
    ]);
    let rewritten = || async {
        poll_until("Progressing rewritten", Duration::from_secs(60), || async {
            let cv = cvs.get("version").await.map_err(|e| e.to_string())?;
            match condition(&cv, "Progressing") {
                Some(c) if c["reason"] != "OperatorImageUpdating" => Ok(c.clone()),
                other => Err(format!("{other:?}")),
            }
        })
        .await
    };
    let progressing = rewritten().await;
    assert_eq!(progressing["status"], "False", "{progressing}");
    assert_eq!(progressing["reason"], "UpgradeableFalse", "{progressing}");
    assert_eq!(
        progressing["message"],
        "Cluster version is 1.0.0: release 1.1.0 is not accepted, nothing of it is applied (see ReleaseAccepted)"
    );
    assert_eq!(release_refused(cvs).await["reason"], "UpgradeableFalse");
    // A request cleared (`oc adm upgrade --clear`) runs another pass: still truthful.
    desire(cvs, json!({"image": "example.com/cvo:1.1.0"})).await;
    desire(cvs, Value::Null).await;
    op.metric_at_least(
        "cvo_sync_passes_total",
        &[("trigger", "clusterversion"), ("result", "refused")],
        1.0,
    )
    .await;
    assert_eq!(rewritten().await["status"], "False");
    op.terminate().await;
    env.finish().await;
}

/// The stored `RetrievedUpdates` once it says `status` with `reason`; returns ClusterVersion.
async fn retrieved(
    cvs: &Api<DynamicObject>,
    status: &str,
    reason: &str,
    within: Duration,
) -> DynamicObject {
    poll_until(
        &format!("RetrievedUpdates={status} {reason}"),
        within,
        || async {
            let cv = cvs.get("version").await.map_err(|e| e.to_string())?;
            match condition(&cv, "RetrievedUpdates") {
                Some(c)
                    if c["status"] == status
                        && c["reason"].as_str().unwrap_or_default() == reason =>
                {
                    Ok(cv)
                }
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await
}

/// An operator test env at release 1.4.0 whose ClusterVersion names `upstream` and `channel`
/// (empty: unset) and a valid cluster ID.
async fn graph_env(prefix: &str, upstream: &str, channel: &str) -> Env {
    let env = Env::new(prefix).await;
    let ns = env.ns.clone();
    env.write_release(
        "1.4.0",
        &[(
            "0000_10_a_00_settings.yaml",
            configmap(&ns, "settings", "one"),
        )],
    );
    let mut spec = json!({"clusterID": common::graph::CLUSTER_ID});
    if !upstream.is_empty() {
        spec["upstream"] = json!(upstream);
    }
    if !channel.is_empty() {
        spec["channel"] = json!(channel);
    }
    env.cvs
        .patch(
            "version",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": spec})),
        )
        .await
        .expect("set the update service");
    env
}

/// The versions of `status.<list>` (`release.version` for conditional updates).
fn versions_of(cv: &DynamicObject, list: &str) -> Vec<String> {
    cv.data["status"][list]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|u| {
            u.get("release").unwrap_or(u)["version"]
                .as_str()
                .map(str::to_owned)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_served_graph_fills_available_updates_and_retrieved_updates_is_true() {
    use common::graph::{CLUSTER_ID, GraphServer, Reply, example_graph, payload};
    let server = GraphServer::start(Reply::Json(example_graph().to_string()));
    let env = graph_env("operator-graph", &server.url, "stable-1").await;
    let op = env.start(&["--resync-interval", "1h", "--lease-name", &env.lease]);
    let cv = retrieved(&env.cvs, "True", "", Duration::from_secs(60)).await;
    let status = &cv.data["status"];
    assert_eq!(
        status["availableUpdates"],
        json!([
            {"version": "1.5.0", "image": payload("1.5.0"), "url": "https://example.com/releases/1.5.0",
             "channels": ["fast-1", "stable-1"]},
            {"version": "1.4.1", "image": payload("1.4.1")},
        ]),
        "{status}"
    );
    assert_eq!(versions_of(&cv, "conditionalUpdates"), ["1.6.1", "1.6.0"]);
    let recommended = |i: usize| status["conditionalUpdates"][i]["conditions"][0].clone();
    assert_eq!(recommended(1)["type"], "Recommended");
    assert_eq!(recommended(1)["status"], "False");
    assert_eq!(recommended(1)["reason"], "WidgetsBreak");
    assert_eq!(
        recommended(1)["message"],
        "Widgets stop working. https://example.com/widgets"
    );
    assert_eq!(
        recommended(0)["status"],
        "Unknown",
        "PromQL is not evaluated: never recommended"
    );
    assert_eq!(recommended(0)["reason"], "EvaluationFailed");
    assert_eq!(
        status["conditionalUpdates"][1]["risks"][0]["matchingRules"],
        json!([{"type": "Always"}])
    );
    let arch = cvo::updates::query::arch();
    assert_eq!(
        server.requests()[0],
        format!("GET /graph?arch={arch}&channel=stable-1&id={CLUSTER_ID}&version=1.4.0 HTTP/1.1")
    );
    // A new channel is asked for at once (a ClusterVersion change starts a pass).
    env.cvs
        .patch(
            "version",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"channel": "fast-1"}})),
        )
        .await
        .expect("change the channel");
    poll_until(
        "a request for channel fast-1",
        Duration::from_secs(30),
        || async {
            let requests = server.requests();
            requests
                .iter()
                .any(|r| r.contains("channel=fast-1&"))
                .then_some(())
                .ok_or(format!("{requests:?}"))
        },
    )
    .await;
    op.terminate().await;
    env.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_graph_is_response_invalid_and_the_last_good_list_is_kept() {
    use common::graph::{GraphServer, Reply, example_graph};
    let server = GraphServer::start(Reply::Json(example_graph().to_string()));
    let env = graph_env("operator-graph-bad", &server.url, "stable-1").await;
    let op = env.start(&["--resync-interval", "1s", "--lease-name", &env.lease]);
    let good = retrieved(&env.cvs, "True", "", Duration::from_secs(60)).await;
    server.set(Reply::Json(
        r#"{"nodes": [{"version": "1.4.0", "payload": "x"}], "edges": [[0, 7]]"#.into(),
    ));
    let bad = retrieved(
        &env.cvs,
        "False",
        "ResponseInvalid",
        Duration::from_secs(60),
    )
    .await;
    let c = condition(&bad, "RetrievedUpdates").expect("condition");
    assert!(
        c["message"]
            .as_str()
            .unwrap_or_default()
            .starts_with("Unable to retrieve available updates: "),
        "{c}"
    );
    assert_eq!(versions_of(&bad, "availableUpdates"), ["1.5.0", "1.4.1"]);
    assert_eq!(
        bad.data["status"]["availableUpdates"],
        good.data["status"]["availableUpdates"]
    );
    assert_eq!(
        bad.data["status"]["conditionalUpdates"],
        good.data["status"]["conditionalUpdates"]
    );
    // An edge out of range is invalid too, and nothing crashed: the operator still answers.
    server.set(Reply::Json(
        r#"{"nodes": [{"version": "1.4.0", "payload": "x"}], "edges": [[0, 7]]}"#.into(),
    ));
    poll_until(
        "ResponseInvalid naming the edge",
        Duration::from_secs(60),
        || async {
            let (_, reason, message) =
                common::stored_condition(&env.cvs, "RetrievedUpdates").await?;
            (reason == "ResponseInvalid"
                && message.contains("edge [0, 7] points outside the 1 nodes"))
            .then_some(())
            .ok_or(message)
        },
    )
    .await;
    op.scrape()
        .await
        .expect("the operator still serves its metrics");
    op.terminate().await;
    env.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_graph_server_times_out_as_remote_failed_and_passes_go_on() {
    use common::graph::{GraphServer, Reply, example_graph};
    let server = GraphServer::start(Reply::Json(example_graph().to_string()));
    let env = graph_env("operator-graph-slow", &server.url, "stable-1").await;
    let op = env.start(&["--resync-interval", "1s", "--lease-name", &env.lease]);
    let good = retrieved(&env.cvs, "True", "", Duration::from_secs(60)).await;
    server.set(Reply::Silent);
    let silent_from = server.requests().len();
    let passes = |text: &str| metric(text, "cvo_sync_passes_total", &[]);
    let before = passes(&op.scrape().await.expect("metrics"));
    let started = Instant::now();
    // The request times out (cvo::updates::TIMEOUT) and says so.
    let slow = retrieved(&env.cvs, "False", "RemoteFailed", Duration::from_secs(60)).await;
    let took = started.elapsed();
    assert!(
        took >= cvo::updates::TIMEOUT / 2,
        "failed after {took:?}, before any timeout"
    );
    let c = condition(&slow, "RetrievedUpdates").expect("condition");
    let message = c["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with(&format!(
            "Unable to retrieve available updates: Get \"{}?",
            server.url
        )) && message.ends_with("(timed out)"),
        "{message}"
    );
    assert_eq!(
        slow.data["status"]["availableUpdates"],
        good.data["status"]["availableUpdates"]
    );
    // Passes went on while the request hung (every second), and no second request was sent
    // while the first was in flight.
    let after = passes(&op.scrape().await.expect("metrics"));
    assert!(
        after >= before + 3.0,
        "{before} passes before, {after} after {took:?}"
    );
    assert!(
        server.requests().len() <= silent_from + 2,
        "{:?}",
        server.requests()
    );
    op.terminate().await;
    env.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_an_upstream_retrieved_updates_is_false_no_upstream() {
    let env = graph_env("operator-no-upstream", "", "stable-1").await;
    let op = env.start(&["--resync-interval", "1h", "--lease-name", &env.lease]);
    let cv = retrieved(&env.cvs, "False", "NoUpstream", Duration::from_secs(60)).await;
    let c = condition(&cv, "RetrievedUpdates").expect("condition");
    assert_eq!(
        c["message"],
        "No updateService server has been set to retrieve updates."
    );
    let status = cv.data["status"].as_object().expect("status");
    assert_eq!(
        status.get("availableUpdates"),
        Some(&Value::Null),
        "{status:?}"
    );
    assert!(!status.contains_key("conditionalUpdates"), "{status:?}");
    op.terminate().await;
    env.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_channel_retrieved_updates_is_false_no_channel() {
    use common::graph::{GraphServer, Reply, example_graph};
    let server = GraphServer::start(Reply::Json(example_graph().to_string()));
    let env = graph_env("operator-no-channel", &server.url, "").await;
    let op = env.start(&["--resync-interval", "1h", "--lease-name", &env.lease]);
    let cv = retrieved(&env.cvs, "False", "NoChannel", Duration::from_secs(60)).await;
    let c = condition(&cv, "RetrievedUpdates").expect("condition");
    assert_eq!(c["message"], "The update channel has not been configured.");
    assert!(cv.data["status"]["availableUpdates"].is_null());
    assert!(server.requests().is_empty(), "{:?}", server.requests());
    op.terminate().await;
    env.finish().await;
}

/// From a served graph to a completed update, as `oc adm upgrade --to=1.5.0` does it: the
/// operator at 1.4.0 fills `availableUpdates` from the update service, `{version: 1.5.0}`
/// alone selects the graph's payload for 1.5.0, the operator moves its Deployment to that
/// image, and the instance started as the new pod would be updates the cluster to 1.5.0 —
/// `desired` and the history entry name the payload.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs docker-registry (apt-get install docker-registry): run with --include-ignored (.ci/run does)"]
async fn a_version_alone_from_a_served_graph_selects_its_payload_and_updates() {
    use common::graph::{CLUSTER_ID, GraphServer, Reply};
    let (_registry, images_at) = operator_images(&["1.5.0"]).await;
    let payload = |v: &str| format!("{images_at}{v}");
    let graph = json!({
        "nodes": [
            {"version": "1.4.0", "payload": payload("1.4.0"), "metadata": {}},
            {"version": "1.5.0", "payload": payload("1.5.0"), "metadata": {}},
        ],
        "edges": [[0, 1]],
    });
    let server = GraphServer::start(Reply::Json(graph.to_string()));
    let env = Env::new("desired-from-graph").await;
    let Env {
        tc,
        cvs,
        ns,
        dir,
        kubeconfig,
        lease,
        ..
    } = &env;
    cvs.patch(
        "version",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {
            "clusterID": CLUSTER_ID, "upstream": server.url, "channel": "stable-1"}})),
    )
    .await
    .expect("set the update service");
    let deployments = own_deployment(tc, ns, "cvo", &payload("1.4.0")).await;
    let op = start_image(
        kubeconfig,
        dir.path(),
        ns,
        lease,
        "1.4.0",
        "one",
        &payload("1.4.0"),
    );
    history(cvs, "1.4.0", "Completed").await;
    let cv = retrieved(cvs, "True", "", Duration::from_secs(60)).await;
    assert_eq!(
        cv.data["status"]["availableUpdates"],
        json!([{"version": "1.5.0", "image": payload("1.5.0")}])
    );

    desire(cvs, json!({"version": "1.5.0"})).await;
    moved_to(&deployments, &payload("1.5.0")).await;
    condition_is(cvs, "Progressing", "True", "OperatorImageUpdating").await;

    // The rollout, played by hand (no kubelet here): the new pod runs the 1.5.0 image.
    let new_pod = start_image(
        kubeconfig,
        dir.path(),
        ns,
        lease,
        "1.5.0",
        "two",
        &payload("1.5.0"),
    );
    new_pod.metric_at_least("cvo_leader", &[], 0.0).await;
    op.terminate().await;
    let cv = history(cvs, "1.5.0", "Completed").await;
    assert_eq!(cm_value(tc, ns, "settings").await.as_deref(), Some("two"));
    let status = &cv.data["status"];
    assert_eq!(
        status["desired"],
        json!({"version": "1.5.0", "image": payload("1.5.0")}),
        "{status}"
    );
    assert_eq!(status["history"][0]["image"], json!(payload("1.5.0")));
    assert!(condition(&cv, "Invalid").is_none_or(|c| c["status"] != "True"));
    new_pod.terminate().await;
    env.finish().await;
}

/// A kubeconfig in `dir` whose server is a loopback port nothing listens on (token auth,
/// namespace `ns`): port 1, outside the ephemeral range — a port found free and released
/// could be handed out again as the operator's own metrics port, which then answers 404.
fn unreachable_kubeconfig(dir: &Path) -> (std::path::PathBuf, String) {
    let server = "http://127.0.0.1:1".to_owned();
    let path = dir.join("unreachable.kubeconfig");
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {{server: \"{server}\"}}\nusers:\n- name: u\n  user: {{token: not-a-secret}}\ncontexts:\n- name: x\n  context: {{cluster: c, user: u, namespace: ns}}\ncurrent-context: x\n"
        ),
    )
    .expect("write kubeconfig");
    (path, server)
}

/// Waits until `log()` has `n` lines saying an attempt to reach the API server failed;
/// returns those lines.
async fn failed_attempts(log: impl Fn() -> String, n: usize) -> Vec<String> {
    poll_until(
        &format!("{n} failed attempts logged"),
        Duration::from_secs(30),
        || async {
            let lines: Vec<String> = log()
                .lines()
                .filter(|l| l.contains("failed, trying again in"))
                .map(str::to_owned)
                .collect();
            if lines.len() >= n {
                Ok(lines)
            } else {
                Err(format!("{} so far", lines.len()))
            }
        },
    )
    .await
}

/// Issue 23: with its API server down at start, the operator serves `/healthz` (200) and
/// `/readyz` (503) at once, keeps trying (one log line per attempt naming the server) instead
/// of exiting, and SIGTERM while it waits ends it with exit code 0 at once. Needs no cluster.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_api_server_is_waited_for_with_the_probes_answering() {
    let dir = tempfile::tempdir().expect("tempdir");
    let release = dir.path().join("release");
    write_release(
        &release,
        "1.0.0",
        &[("0000_10_a_00_cm.yaml", configmap("ns", "a", "b"))],
    );
    let (kubeconfig, server) = unreachable_kubeconfig(dir.path());
    let op = Operator::start(&kubeconfig, dir.path(), &release, "ns", &[]);
    let address = server.trim_start_matches("http://");

    // The probes answer before the server does.
    poll_until("/healthz answers", Duration::from_secs(30), || async {
        common::http_get(op.port, "/healthz").await
    })
    .await;
    // 1 s, then 2 s between attempts: three failures within about 3 s.
    let lines = failed_attempts(|| op.log(), 3).await;
    for (i, line) in lines.iter().enumerate() {
        assert!(
            line.contains(&format!(
                "cannot reach the API server at {server}: connection refused"
            )) && line.contains(&format!("attempt {} failed, trying again in", i + 1))
                && line.contains(address),
            "one line per attempt, naming the server: {line}\n{}",
            op.log()
        );
    }
    // Still running after the third failure: it answers, alive and not ready.
    assert_eq!(
        common::http_get(op.port, "/healthz").await,
        Ok((200, "ok\n".into()))
    );
    assert_eq!(
        common::http_get(op.port, "/livez").await.map(|r| r.0),
        Ok(200)
    );
    assert_eq!(
        common::http_get(op.port, "/readyz").await,
        Ok((
            503,
            "not ready: waiting for the API server to answer\n".into()
        ))
    );
    let text = op.scrape().await.expect("metrics while connecting");
    assert_eq!(metric(&text, "cvo_leader", &[]), 0.0, "{text}");
    let log = op.log();
    assert!(!log.contains("error:"), "no fatal error: {log}");
    assert!(!log.contains("not-a-secret"), "{log}");

    let started = Instant::now();
    let log_path = op.log.clone();
    op.terminate().await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "SIGTERM while connecting ends it at once, not after {:?}",
        started.elapsed()
    );
    let log = std::fs::read_to_string(log_path).expect("log");
    assert!(
        log.contains("stopped before the API server answered"),
        "{log}"
    );
}

/// Every line of `stderr` as JSON; panics naming the first line that is not.
fn json_lines(stderr: &str) -> Vec<Value> {
    assert!(!stderr.trim().is_empty(), "no output at all");
    stderr
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l)
                .unwrap_or_else(|e| panic!("not a JSON line ({e}): {l}\nin:\n{stderr}"))
        })
        .collect()
}

/// The events of `lines` whose message contains `text`.
fn events<'a>(lines: &'a [Value], text: &str) -> Vec<&'a Value> {
    lines
        .iter()
        .filter(|v| {
            v["fields"]["message"]
                .as_str()
                .is_some_and(|m| m.contains(text))
        })
        .collect()
}

/// Issue 23: with `--log-format json` (or in a pod, where it is the default) every line the
/// operator writes to stderr is one JSON object: the cluster-profile note and the release's
/// diagnostics (a warning here) are events with their fields, the attempts to reach a server
/// that is down too, and a fatal error is an `error` event carrying the exit code. Text mode
/// is pinned by the other tests (`error: …`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_line_is_json_in_json_mode() {
    let dir = tempfile::tempdir().expect("tempdir");
    let release = dir.path().join("release");
    let cm = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  namespace: default\n  annotations:\n    include.release.openshift.io/self-managed-high-availability: \"true\"\ndata:\n  a: b\n";
    write_release(
        &release,
        "1.0.0",
        &[("0000_10_a_00_cm.yaml", cm.to_owned())],
    );
    // A sub-directory: the loader's warning `subdirectory-ignored`.
    std::fs::create_dir(release.join("extra")).expect("mkdir");

    // On the embedded server: start, a full pass, SIGTERM.
    let op = Operator::start(
        &dir.path().join("unused.kubeconfig"),
        dir.path(),
        &release,
        "default",
        &["--in-memory", "--log-format", "json"],
    );
    op.metric_at_least("cvo_sync_passes_total", &[("trigger", "initial")], 1.0)
        .await;
    let log_path = op.log.clone();
    op.terminate().await;
    let log = std::fs::read_to_string(&log_path).expect("log");
    let lines = json_lines(&log);
    let note = events(&lines, "the release uses cluster profiles");
    assert_eq!(note.len(), 1, "{log}");
    assert_eq!(note[0]["level"], "INFO", "{}", note[0]);
    assert_eq!(
        note[0]["fields"]["profile"], "self-managed-high-availability",
        "{}",
        note[0]
    );
    let warning = events(&lines, "sub-directories of a release are not read");
    assert_eq!(warning.len(), 1, "{log}");
    let fields = &warning[0]["fields"];
    assert_eq!(warning[0]["level"], "WARN", "{}", warning[0]);
    assert_eq!(fields["rule"], "subdirectory-ignored", "{fields}");
    assert!(
        fields["file"]
            .as_str()
            .is_some_and(|f| f.ends_with("extra")),
        "{fields}"
    );
    assert!(
        fields["help"].as_str().is_some_and(|h| !h.is_empty()),
        "{fields}"
    );
    assert_eq!(
        events(&lines, "connected to the API server at").len(),
        1,
        "{log}"
    );

    // In a pod (KUBERNETES_SERVICE_HOST set: JSON by default), with its server down.
    let (kubeconfig, server) = unreachable_kubeconfig(dir.path());
    let port = common::operator::free_port();
    let log_path = dir.path().join("in-pod.log");
    let mut child = common::cli::process()
        .env("KUBERNETES_SERVICE_HOST", "10.0.0.1")
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["operator", "--release"])
        .arg(&release)
        .args(["--metrics-addr", &format!("127.0.0.1:{port}")])
        .stderr(std::fs::File::create(&log_path).expect("log file"))
        .spawn()
        .expect("start cvo operator");
    let read = || std::fs::read_to_string(&log_path).unwrap_or_default();
    failed_attempts(read, 2).await;
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let status = tokio::task::spawn_blocking(move || child.wait())
        .await
        .expect("join")
        .expect("wait");
    let log = read();
    assert_eq!(status.code(), Some(0), "{log}");
    let lines = json_lines(&log);
    let attempts = events(&lines, "failed, trying again in");
    assert!(attempts.len() >= 2, "{log}");
    for a in &attempts {
        assert_eq!(a["level"], "WARN", "{a}");
        assert_eq!(a["fields"]["server"], server.as_str(), "{a}");
        assert!(a["fields"]["attempt"].as_u64().is_some(), "{a}");
    }

    // Fatal errors: a kubeconfig that cannot be used, a metrics address in use (exit 2).
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let taken_addr = taken.local_addr().expect("addr").to_string();
    for (args, says) in [
        (
            vec!["--kubeconfig", "/nonexistent/kubeconfig"],
            "/nonexistent/kubeconfig",
        ),
        (
            vec![
                "--kubeconfig",
                kubeconfig.to_str().expect("path"),
                "--metrics-addr",
                taken_addr.as_str(),
            ],
            "cannot listen on",
        ),
    ] {
        let out = common::cli::cvo()
            .args(["--log-format", "json", "operator", "--release"])
            .arg(&release)
            .args(&args)
            .output()
            .expect("run cvo");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        let lines = json_lines(&stderr);
        let fatal = lines.last().expect("a line");
        assert_eq!(fatal["level"], "ERROR", "{fatal}");
        assert_eq!(fatal["fields"]["exit_code"], 2, "{fatal}");
        assert!(
            fatal["fields"]["message"]
                .as_str()
                .is_some_and(|m| m.contains(says)),
            "{fatal}"
        );
    }
    drop(taken);

    // A flag clap refuses, in a pod (JSON by default): one error event too, not clap's text.
    let out = common::cli::cvo()
        .env("KUBERNETES_SERVICE_HOST", "10.0.0.1")
        .args(["operator", "--release"])
        .arg(&release)
        .args(["--lease-duration", "soon"])
        .output()
        .expect("run cvo");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    let lines = json_lines(&stderr);
    assert_eq!(lines.len(), 1, "{stderr}");
    assert_eq!(lines[0]["level"], "ERROR", "{stderr}");
    assert_eq!(lines[0]["fields"]["exit_code"], 2, "{stderr}");
    assert!(
        lines[0]["fields"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("--lease-duration")),
        "{stderr}"
    );
}

/// Issue 23: `/readyz` comes from the leader election, never from a pass. A leader whose
/// first pass waits for a rollout that never ends (no kubelet) is ready; so is a standby
/// (as the new pod of a move to another image must be, for the old one to be replaced).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_comes_from_the_election_not_from_a_pass() {
    let env = Env::new("operator-ready").await;
    let Env { ns, lease, .. } = &env;
    let deployment = format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: {ns}\nspec:\n  replicas: 1\n  selector:\n    matchLabels:\n      app: web\n  template:\n    metadata:\n      labels:\n        app: web\n    spec:\n      containers:\n      - name: c\n        image: registry.example/app:1\n"
    );
    env.write_release("1.0.0", &[("0000_10_web_00_deployment.yaml", deployment)]);
    let args = [
        "--resync-interval",
        "1h",
        "--lease-name",
        lease,
        "--wait",
        "ready",
        "--health-timeout",
        "10m",
        "--shutdown-grace",
        "1s",
    ];
    let leader = env.start(&args);
    leader.metric_at_least("cvo_leader", &[], 1.0).await;
    let ready = |port: u16| async move {
        poll_until("/readyz 200", Duration::from_secs(30), || async {
            match common::http_get(port, "/readyz").await? {
                (200, _) => Ok(()),
                other => Err(format!("{other:?}")),
            }
        })
        .await
    };
    ready(leader.port).await;
    let text = leader.scrape().await.expect("metrics");
    assert_eq!(
        metric(&text, "cvo_sync_passes_total", &[]),
        0.0,
        "ready while its first pass still waits: {text}"
    );
    let standby = env.start(&args);
    ready(standby.port).await;
    let text = standby.scrape().await.expect("metrics");
    assert_eq!(metric(&text, "cvo_leader", &[]), 0.0, "a standby: {text}");
    standby.terminate().await;
    leader.terminate().await;
    env.finish().await;
}

/// After a restart, an operator started on release A leads with the release B it pulled
/// before (`status.desired.image`), not with A — also once `spec.desiredUpdate` is cleared:
/// what must survive a restart is rebuilt from the cluster. When B cannot be pulled then
/// (the registry is down), nothing is applied (`RetrievePayload`, "nothing is applied"): A's
/// objects never come back over B's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs docker-registry (apt-get install docker-registry): run with --include-ignored (.ci/run does)"]
async fn a_restarted_operator_leads_with_the_release_it_pulled_never_its_start_release() {
    let registry = common::registry::Registry::start();
    let env = Env::new("operator-restart").await;
    let Env {
        tc,
        cvs,
        ns,
        dir,
        lease,
        ..
    } = &env;
    env.write_release(
        "1.0.0",
        &[(
            "0000_10_a_00_settings.yaml",
            configmap(ns, "settings", "one"),
        )],
    );
    let b_dir = dir.path().join("release-1.0.1");
    write_release(
        &b_dir,
        "1.0.1",
        &[(
            "0000_10_a_00_settings.yaml",
            configmap(ns, "settings", "two"),
        )],
    );
    let b = registry.push_release("cvo/release", "b", &b_dir).await;
    let b_image = registry.pullspec("cvo/release", &format!("@{b}"));
    let cache = dir.path().join("cache");
    let flags = [
        "--resync-interval",
        "2s",
        "--lease-name",
        lease,
        "--cache-dir",
        cache.to_str().expect("utf-8 path"),
        "--release-image",
        "example.com/cvo:1.0.0",
    ];
    let op = env.start(&flags);
    history(cvs, "1.0.0", "Completed").await;
    desire(cvs, json!({"image": b_image})).await;
    history(cvs, "1.0.1", "Completed").await;
    op.terminate().await;

    // Restarted on A with the request cleared: B again, from status.desired.image.
    cvs.patch(
        "version",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"desiredUpdate": null}})),
    )
    .await
    .expect("clear spec.desiredUpdate");
    let op = env.start(&flags);
    op.metric_at_least("cvo_sync_passes_total", &[("result", "switched")], 1.0)
        .await;
    op.metric_at_least("cvo_sync_passes_total", &[("trigger", "resync")], 2.0)
        .await;
    let cv = cvs.get("version").await.expect("ClusterVersion");
    assert_eq!(cv.data["status"]["history"][0]["version"], "1.0.1");
    assert_eq!(cv.data["status"]["desired"]["image"], json!(b_image));
    assert_eq!(cm_value(tc, ns, "settings").await.as_deref(), Some("two"));
    op.terminate().await;

    // Restarted on A while B's registry is down, with an empty cache (a new pod's emptyDir;
    // with B's blobs cached, no registry is needed): nothing is applied.
    drop(registry);
    let empty_cache = dir.path().join("cache-2");
    let mut flags = flags;
    flags[5] = empty_cache.to_str().expect("utf-8 path");
    let op = env.start(&flags);
    let refused = condition_is(cvs, "ReleaseAccepted", "False", "RetrievePayload").await;
    assert!(
        refused["message"]
            .as_str()
            .is_some_and(|m| m.contains("nothing is applied") && m.contains(&b_image)),
        "{refused}"
    );
    op.metric_at_least("cvo_sync_passes_total", &[("result", "refused")], 2.0)
        .await;
    assert_eq!(cm_value(tc, ns, "settings").await.as_deref(), Some("two"));
    let cv = cvs.get("version").await.expect("ClusterVersion");
    assert_eq!(cv.data["status"]["history"][0]["version"], "1.0.1");
    op.terminate().await;
    env.finish().await;
}

/// A tag in `spec.desiredUpdate.image` is resolved once per request, also across a restart:
/// the digest it named is recorded in ClusterVersion (condition `ReleaseImageResolved`), and
/// an operator restarted after the tag moved leads with that digest's release, not the tag's
/// new one; a new request (here a version added) resolves the tag again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs docker-registry (apt-get install docker-registry): run with --include-ignored (.ci/run does)"]
async fn a_restarted_operator_uses_the_digest_recorded_for_the_spec_tag() {
    let registry = common::registry::Registry::start();
    let env = Env::new("operator-tag-record").await;
    let Env {
        tc,
        cvs,
        ns,
        dir,
        lease,
        ..
    } = &env;
    let settings = |value: &str| {
        vec![(
            "0000_10_a_00_settings.yaml",
            configmap(ns, "settings", value),
        )]
    };
    env.write_release("1.0.0", &settings("one"));
    let push = |version: &str, value: &str| {
        let release = dir.path().join(format!("release-{version}"));
        write_release(&release, version, &settings(value));
        let registry = &registry;
        async move { registry.push_release("cvo/release", "next", &release).await }
    };
    let b = push("1.0.1", "two").await;
    let tag = registry.pullspec("cvo/release", ":next");
    let cache = dir.path().join("cache");
    let flags = [
        "--resync-interval",
        "2s",
        "--lease-name",
        lease,
        "--cache-dir",
        cache.to_str().expect("utf-8 path"),
        "--release-image",
        "example.com/cvo:1.0.0",
    ];
    let op = env.start(&flags);
    history(cvs, "1.0.0", "Completed").await;
    desire(cvs, json!({"image": tag})).await;
    history(cvs, "1.0.1", "Completed").await;
    let record = condition_is(cvs, "ReleaseImageResolved", "True", "TagResolved").await;
    let b_image = registry.pullspec("cvo/release", &format!("@{b}"));
    assert!(
        record["message"]
            .as_str()
            .is_some_and(|m| m.contains(&tag) && m.contains(&format!("resolved to {b_image};"))),
        "{record}"
    );
    op.terminate().await;

    // The tag moves to 1.0.2 while the operator is down; restarted on 1.0.0, it leads with
    // the recorded digest (1.0.1) again.
    let c = push("1.0.2", "three").await;
    let op = env.start(&flags);
    op.metric_at_least("cvo_sync_passes_total", &[("result", "switched")], 1.0)
        .await;
    op.metric_at_least("cvo_sync_passes_total", &[("trigger", "resync")], 2.0)
        .await;
    let cv = cvs.get("version").await.expect("ClusterVersion");
    assert_eq!(cv.data["status"]["history"][0]["version"], "1.0.1");
    assert_eq!(cv.data["status"]["desired"]["image"], json!(b_image));
    assert_eq!(cm_value(tc, ns, "settings").await.as_deref(), Some("two"));
    assert!(
        op.log().contains("ClusterVersion records it"),
        "the restarted operator did not use the record"
    );

    // Another request resolves the tag again: 1.0.2.
    desire(cvs, json!({"image": tag, "version": "1.0.2"})).await;
    let cv = history(cvs, "1.0.2", "Completed").await;
    let c_image = registry.pullspec("cvo/release", &format!("@{c}"));
    assert_eq!(cv.data["status"]["desired"]["image"], json!(c_image));
    assert_eq!(cm_value(tc, ns, "settings").await.as_deref(), Some("three"));
    let record = condition(&cv, "ReleaseImageResolved")
        .expect("the record")
        .clone();
    assert!(
        record["message"]
            .as_str()
            .is_some_and(|m| m.contains("version=\"1.0.2\"") && m.contains(&c_image)),
        "{record}"
    );
    op.terminate().await;
    env.finish().await;
}

/// `spec.desiredUpdate.image` naming a release artifact, with `--verify-key` (issue 18): the
/// operator started on a signed release A read from the registry; an unsigned release is `ReleaseAccepted=False` reason `ImageVerificationFailed` ("The update
/// cannot be verified", the CVO's words) and the current release stays; `force: true` uses it
/// anyway, its history entry `verified: false` with the failure among its `acceptedRisks`; an
/// unsigned container image is refused too; a release signed with the key is led with, its
/// history entry `verified: true`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs docker-registry (apt-get install docker-registry): run with --include-ignored (.ci/run does)"]
async fn a_desired_release_artifact_is_verified_unless_the_update_is_forced() {
    let registry = common::registry::Registry::start();
    let env = Env::new("operator-verify").await;
    let Env {
        tc,
        cvs,
        ns,
        dir,
        lease,
        ..
    } = &env;
    let keys = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/oci/keys");
    let release = |version: &str, value: &str| {
        let path = dir.path().join(format!("release-{version}"));
        let files = [(
            "0000_10_a_00_settings.yaml",
            configmap(ns, "settings", value),
        )];
        write_release(&path, version, &files);
        path
    };
    // `cvo push --sign-key`: the digest of the signed release.
    let push_signed = |dir: std::path::PathBuf, tag: &str| {
        let out = common::cli::cvo()
            .args(["push", "--release"])
            .arg(dir)
            .arg(registry.url("cvo/release", &format!(":{tag}")))
            .arg("--sign-key")
            .arg(keys.join("p256.pem"))
            .output()
            .expect("run cvo push");
        assert!(out.status.success(), "{out:?}");
        let stdout = String::from_utf8_lossy(&out.stdout);
        stdout
            .lines()
            .next()
            .and_then(|l| l.rsplit_once('@'))
            .map(|(_, d)| d.to_owned())
            .expect("the pushed digest")
    };
    let start = push_signed(release("1.0.0", "one"), "a");
    let unsigned = registry
        .push_release("cvo/release", "b", &release("1.1.0", "two"))
        .await;
    let signed = push_signed(release("1.2.0", "three"), "c");
    let cache = dir.path().join("cache");
    // Started on the signed release A, read from the registry.
    let a_image = registry.pullspec("cvo/release", &format!("@{start}"));
    let op = Operator::start(
        &env.kubeconfig,
        dir.path(),
        Path::new(&format!("oci://{a_image}")),
        ns,
        &[
            "--resync-interval",
            "2s",
            "--lease-name",
            lease,
            "--cache-dir",
            cache.to_str().expect("utf-8 path"),
            "--verify-key",
            keys.join("p256.pub").to_str().expect("utf-8 path"),
        ],
    );
    history(cvs, "1.0.0", "Completed").await;

    // Unsigned: refused, the current release stays.
    let b_image = registry.pullspec("cvo/release", &format!("@{unsigned}"));
    desire(cvs, json!({"image": b_image})).await;
    let refused = condition_is(cvs, "ReleaseAccepted", "False", "ImageVerificationFailed").await;
    let message = refused["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("The update cannot be verified")
            && message.contains("not signed")
            && message.contains(&unsigned)
            && message.contains("release 1.0.0 stays applied"),
        "{refused}"
    );
    assert_eq!(cm_value(tc, ns, "settings").await.as_deref(), Some("one"));

    // Forced: used anyway, the failure recorded.
    desire(cvs, json!({"image": b_image, "force": true})).await;
    let cv = history(cvs, "1.1.0", "Completed").await;
    let entry = &cv.data["status"]["history"][0];
    assert_eq!(entry["verified"], false, "{entry}");
    let risks = entry["acceptedRisks"].as_str().unwrap_or_default();
    assert!(
        risks.contains(&format!("image=\"{b_image}\" cannot be verified, but continuing anyway because the update was forced"))
            && risks.contains("not signed"),
        "{entry}"
    );
    assert_eq!(cm_value(tc, ns, "settings").await.as_deref(), Some("two"));

    // An unsigned container image (the operator would move its Deployment there): held to
    // the keys too.
    registry.push_image("cvo/operator", "2").await;
    let operator_image = registry.pullspec("cvo/operator", ":2");
    desire(cvs, json!({"image": operator_image, "force": false})).await;
    let refused = condition_is(cvs, "ReleaseAccepted", "False", "ImageVerificationFailed").await;
    assert!(
        refused["message"]
            .as_str()
            .is_some_and(|m| m.contains("not signed") && m.contains("release 1.1.0 stays applied")),
        "{refused}"
    );

    // Signed with the key: verified.
    let c_image = registry.pullspec("cvo/release", &format!("@{signed}"));
    desire(cvs, json!({"image": c_image, "force": false})).await;
    let cv = history(cvs, "1.2.0", "Completed").await;
    let entry = &cv.data["status"]["history"][0];
    assert!(
        entry.get("acceptedRisks").is_none_or(Value::is_null),
        "{entry}"
    );
    // History: each release by its digest, and whether its signature verified.
    let entries: Vec<(String, String, bool)> = cv.data["status"]["history"]
        .as_array()
        .expect("history")
        .iter()
        .map(|h| {
            let text = |k: &str| h[k].as_str().unwrap_or_default().to_owned();
            (text("version"), text("image"), h["verified"] == true)
        })
        .collect();
    assert_eq!(
        entries,
        [
            ("1.2.0".to_owned(), c_image.clone(), true),
            ("1.1.0".to_owned(), b_image.clone(), false),
            ("1.0.0".to_owned(), a_image.clone(), true),
        ]
    );
    condition_is(cvs, "ReleaseAccepted", "True", "PayloadLoaded").await;
    assert_eq!(cm_value(tc, ns, "settings").await.as_deref(), Some("three"));
    op.terminate().await;
    env.finish().await;
    drop(registry);
}

/// `spec.desiredUpdate.image` naming a **release artifact** in a registry (issue 18; the real
/// registry of `common::registry`): the operator started on release A (a directory) pulls
/// release B by digest and leads with it in the same process — B's objects applied, history
/// B Completed (image `HOST/REPO@sha256:…`) over A, drift of B's objects repaired; a tag
/// resolves once per spec change (the tag moved afterwards changes nothing); an image that is
/// not in the registry is `ReleaseAccepted=False` reason `RetrievePayload` naming it, while
/// the current release stays enforced.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs docker-registry (apt-get install docker-registry): run with --include-ignored (.ci/run does)"]
async fn a_desired_release_artifact_is_pulled_and_led_with_in_the_same_process() {
    let registry = common::registry::Registry::start();
    let env = Env::new("operator-pull").await;
    let Env {
        tc,
        cvs,
        ns,
        dir,
        lease,
        ..
    } = &env;
    let release = |version: &str, value: &str, extra: &str| {
        let path = dir.path().join(format!("release-{version}"));
        let mut files = vec![(
            "0000_10_a_00_settings.yaml",
            configmap(ns, "settings", value),
        )];
        if !extra.is_empty() {
            files.push(("0000_10_a_01_extra.yaml", configmap(ns, extra, value)));
        }
        write_release(&path, version, &files);
        path
    };
    env.write_release(
        "1.0.0",
        &[(
            "0000_10_a_00_settings.yaml",
            configmap(ns, "settings", "one"),
        )],
    );
    let b = registry
        .push_release("cvo/release", "b", &release("1.1.0", "two", "extra-b"))
        .await;
    let c = registry
        .push_release("cvo/release", "c", &release("1.2.0", "three", "extra-c"))
        .await;
    let cache = dir.path().join("cache");
    let op = env.start(&[
        "--resync-interval",
        "2s",
        "--lease-name",
        lease,
        "--cache-dir",
        cache.to_str().expect("utf-8 path"),
        "--release-image",
        "example.com/cvo:1.0.0",
    ]);
    let pid = op.pid();
    history(cvs, "1.0.0", "Completed").await;

    // By digest: B is pulled and led with, no new process.
    let b_image = registry.pullspec("cvo/release", &format!("@{b}"));
    desire(cvs, json!({"image": b_image})).await;
    let cv = history(cvs, "1.1.0", "Completed").await;
    let entries: Vec<(String, String, String)> = cv.data["status"]["history"]
        .as_array()
        .expect("history")
        .iter()
        .map(|h| {
            let text = |k: &str| h[k].as_str().unwrap_or_default().to_owned();
            (text("version"), text("state"), text("image"))
        })
        .collect();
    assert_eq!(
        entries,
        [
            ("1.1.0".to_owned(), "Completed".to_owned(), b_image.clone()),
            (
                "1.0.0".to_owned(),
                "Completed".to_owned(),
                "example.com/cvo:1.0.0".to_owned()
            ),
        ],
        "history: B (its digest) over A"
    );
    assert_eq!(cv.data["status"]["desired"]["image"], json!(b_image));
    assert_eq!(cm_value(tc, ns, "settings").await.as_deref(), Some("two"));
    assert_eq!(cm_value(tc, ns, "extra-b").await.as_deref(), Some("two"));
    condition_is(cvs, "ReleaseAccepted", "True", "PayloadLoaded").await;
    assert_eq!(op.pid(), pid);
    op.metric_at_least("cvo_sync_passes_total", &[("result", "switched")], 1.0)
        .await;
    // Drift of B's objects is repaired: its watches were built for it.
    tc.dynamic(&configmaps(), Some(ns))
        .delete("extra-b", &DeleteParams::default())
        .await
        .expect("delete extra-b");
    poll_until("extra-b repaired", Duration::from_secs(30), || async {
        cm_value(tc, ns, "extra-b")
            .await
            .ok_or_else(|| "absent".to_owned())
    })
    .await;

    // By tag: C is resolved once; the tag moved to another release afterwards changes nothing
    // (passes go on every ~2 s) until the spec changes.
    let c_tag = registry.pullspec("cvo/release", ":c");
    desire(cvs, json!({"image": c_tag})).await;
    let cv = history(cvs, "1.2.0", "Completed").await;
    let c_image = registry.pullspec("cvo/release", &format!("@{c}"));
    assert_eq!(cv.data["status"]["history"][0]["image"], json!(c_image));
    registry
        .push_release("cvo/release", "c", &release("1.3.0", "four", "extra-d"))
        .await;
    let text = op.scrape().await.expect("metrics");
    let resyncs = metric(&text, "cvo_sync_passes_total", &[("trigger", "resync")]);
    op.metric_at_least(
        "cvo_sync_passes_total",
        &[("trigger", "resync")],
        resyncs + 2.0,
    )
    .await;
    let cv = cvs.get("version").await.expect("ClusterVersion");
    assert_eq!(cv.data["status"]["history"][0]["version"], "1.2.0");
    assert_eq!(cm_value(tc, ns, "settings").await.as_deref(), Some("three"));
    assert_eq!(
        cm_value(tc, ns, "extra-d").await,
        None,
        "the moved tag is not read"
    );

    // Not in the registry: RetrievePayload, and C stays enforced.
    let missing = registry.pullspec("cvo/missing", &format!("@sha256:{}", "0".repeat(64)));
    desire(cvs, json!({"image": missing})).await;
    let refused = condition_is(cvs, "ReleaseAccepted", "False", "RetrievePayload").await;
    let message = refused["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(&format!("image=\"{missing}\""))
            && message.contains("not found in the registry")
            && message.contains("release 1.2.0 stays applied"),
        "{refused}"
    );
    let progressing = condition_is(cvs, "Progressing", "False", "RetrievePayload").await;
    assert!(
        progressing["message"]
            .as_str()
            .is_some_and(|m| m.contains("release 1.2.0 stays applied")),
        "{progressing}"
    );
    tc.dynamic(&configmaps(), Some(ns))
        .patch(
            "settings",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"a": "drifted"}})),
        )
        .await
        .expect("edit settings");
    poll_until("settings repaired", Duration::from_secs(30), || async {
        match cm_value(tc, ns, "settings").await.as_deref() {
            Some("three") => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    assert_eq!(op.pid(), pid);

    // The image the operator runs again (forced: it is a downgrade): back to the release it
    // started with, still in the same process.
    desire(
        cvs,
        json!({"image": "example.com/cvo:1.0.0", "force": true}),
    )
    .await;
    history(cvs, "1.0.0", "Completed").await;
    assert_eq!(cm_value(tc, ns, "settings").await.as_deref(), Some("one"));
    op.terminate().await;
    drop(registry);
    env.finish().await;
}

/// A registry asking for HTTP Basic auth (tests/fixtures/oci/htpasswd, a test-only password):
/// without the pull Secret the release is `RetrievePayload` naming the Secret; once the
/// `kubernetes.io/dockerconfigjson` Secret exists, the next retry (the backoff's, with passes
/// every ~2 s) pulls it with its credentials and leads with it; the password is never logged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs docker-registry (apt-get install docker-registry): run with --include-ignored (.ci/run does)"]
async fn the_pull_secret_gives_the_registry_credentials_and_is_never_printed() {
    use base64::Engine as _;
    const PASSWORD: &str = "not-a-secret-1";
    let htpasswd = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/oci/htpasswd");
    let registry = common::registry::Registry::start_with_htpasswd(&htpasswd);
    let auth = base64::engine::general_purpose::STANDARD.encode(format!("cvo-test:{PASSWORD}"));
    let config = json!({"auths": {registry.host(): {"auth": auth}}}).to_string();
    let env = Env::new("operator-pull-secret").await;
    let Env {
        tc,
        cvs,
        ns,
        dir,
        lease,
        ..
    } = &env;
    env.write_release(
        "1.0.0",
        &[(
            "0000_10_a_00_settings.yaml",
            configmap(ns, "settings", "one"),
        )],
    );
    let b_dir = dir.path().join("release-b");
    write_release(
        &b_dir,
        "1.1.0",
        &[(
            "0000_10_a_00_settings.yaml",
            configmap(ns, "settings", "two"),
        )],
    );
    let access = cvo::oci::Access {
        credentials: cvo::oci::Credentials::from_docker_config(config.as_bytes())
            .expect("a Docker config"),
        ..cvo::oci::Access::default()
    };
    let b = registry
        .push_release_as("cvo/private", "b", &b_dir, &access)
        .await;
    let secret_name = format!("{ns}/pull");
    let cache = dir.path().join("cache");
    let op = env.start(&[
        "--resync-interval",
        "2s",
        "--lease-name",
        lease,
        "--cache-dir",
        cache.to_str().expect("utf-8 path"),
        "--pull-secret",
        &secret_name,
    ]);
    history(cvs, "1.0.0", "Completed").await;
    let b_image = registry.pullspec("cvo/private", &format!("@{b}"));
    desire(cvs, json!({"image": b_image})).await;
    let refused = condition_is(cvs, "ReleaseAccepted", "False", "RetrievePayload").await;
    assert!(
        refused["message"]
            .as_str()
            .is_some_and(|m| m.contains(&format!(
                "the pull Secret {secret_name} (--pull-secret) does not exist"
            ))),
        "{refused}"
    );
    create_pull_secret(tc, ns, &config).await;
    let cv = history(cvs, "1.1.0", "Completed").await;
    assert_eq!(cv.data["status"]["history"][0]["image"], json!(b_image));
    assert_eq!(cm_value(tc, ns, "settings").await.as_deref(), Some("two"));
    let log = op.log();
    assert!(
        !log.contains(PASSWORD) && !log.contains(&auth),
        "the operator's log holds the credential"
    );
    op.terminate().await;
    drop(registry);
    env.finish().await;
}

/// The `kubernetes.io/dockerconfigjson` Secret `pull` in `ns` holding the Docker config
/// `config`.
async fn create_pull_secret(tc: &TestCluster, ns: &str, config: &str) {
    use base64::Engine as _;
    use k8s_openapi::api::core::v1::Secret;
    let secrets: Api<Secret> = Api::namespaced(tc.client.clone(), ns);
    secrets
        .create(
            &kube::api::PostParams::default(),
            &serde_json::from_value(json!({
                "apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": "pull", "namespace": ns},
                "type": "kubernetes.io/dockerconfigjson",
                "data": {".dockerconfigjson": base64::engine::general_purpose::STANDARD.encode(config)},
            }))
            .expect("a Secret"),
        )
        .await
        .expect("create the pull Secret");
}

/// `cvo operator --release oci://…@sha256:… --pull-secret NS/NAME` with a registry asking for
/// HTTP Basic auth (tests/fixtures/oci/htpasswd) and no Docker config credentials: the start
/// release is pulled with the Secret's credentials and applied; the password is never logged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs docker-registry (apt-get install docker-registry): run with --include-ignored (.ci/run does)"]
async fn the_pull_secret_pulls_the_oci_release_the_operator_starts_on() {
    use base64::Engine as _;
    const PASSWORD: &str = "not-a-secret-1";
    let htpasswd = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/oci/htpasswd");
    let registry = common::registry::Registry::start_with_htpasswd(&htpasswd);
    let auth = base64::engine::general_purpose::STANDARD.encode(format!("cvo-test:{PASSWORD}"));
    let config = json!({"auths": {registry.host(): {"auth": auth}}}).to_string();
    let env = Env::new("operator-start-secret").await;
    let Env {
        tc,
        cvs,
        ns,
        dir,
        lease,
        ..
    } = &env;
    env.write_release(
        "1.0.0",
        &[(
            "0000_10_a_00_settings.yaml",
            configmap(ns, "settings", "one"),
        )],
    );
    let access = cvo::oci::Access {
        credentials: cvo::oci::Credentials::from_docker_config(config.as_bytes())
            .expect("a Docker config"),
        ..cvo::oci::Access::default()
    };
    let a = registry
        .push_release_as("cvo/private", "a", &env.release, &access)
        .await;
    create_pull_secret(tc, ns, &config).await;
    let source = registry.url("cvo/private", &format!("@{a}"));
    let cache = dir.path().join("cache");
    let secret_name = format!("{ns}/pull");
    let op = Operator::start(
        &env.kubeconfig,
        dir.path(),
        Path::new(&source),
        ns,
        &[
            "--resync-interval",
            "1h",
            "--lease-name",
            lease,
            "--cache-dir",
            cache.to_str().expect("utf-8 path"),
            "--pull-secret",
            &secret_name,
        ],
    );
    history(cvs, "1.0.0", "Completed").await;
    assert_eq!(cm_value(tc, ns, "settings").await.as_deref(), Some("one"));
    let log = op.log();
    assert!(
        !log.contains(PASSWORD) && !log.contains(&auth),
        "the operator's log holds the credential"
    );
    op.terminate().await;
    drop(registry);
    env.finish().await;
}

/// An operator started on a release with errors reports it and applies nothing; a
/// `spec.desiredUpdate.image` naming a release artifact is pulled and led with in the same
/// process (the way out without a new pod), and a pull that fails is said in the report.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs docker-registry (apt-get install docker-registry): run with --include-ignored (.ci/run does)"]
async fn an_operator_on_an_invalid_release_pulls_a_desired_release_artifact() {
    let registry = common::registry::Registry::start();
    let env = Env::new("operator-invalid-pull").await;
    let Env {
        tc,
        cvs,
        ns,
        dir,
        lease,
        ..
    } = &env;
    env.write_release(
        "1.0.0",
        &[(
            "0000_10_a_01_broken.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata: [unclosed\n".to_owned(),
        )],
    );
    let fixed = dir.path().join("release-fixed");
    write_release(
        &fixed,
        "1.0.1",
        &[(
            "0000_10_a_00_settings.yaml",
            configmap(ns, "settings", "fixed"),
        )],
    );
    let digest = registry.push_release("cvo/release", "1.0.1", &fixed).await;
    let cache = dir.path().join("cache");
    let op = env.start(&[
        "--resync-interval",
        "1h",
        "--lease-name",
        lease,
        "--cache-dir",
        cache.to_str().expect("utf-8 path"),
    ]);
    assert_eq!(release_refused(cvs).await["reason"], "InvalidRelease");
    // A tag that is not there: the pull failure's reason (RetrievePayload), and the report
    // says both why the start release cannot be used and why the image was not.
    let missing = registry.pullspec("cvo/release", ":9.9.9");
    desire(cvs, json!({"image": missing})).await;
    poll_until(
        "the pull failure reported",
        Duration::from_secs(60),
        || async {
            let cv = cvs.get("version").await.map_err(|e| e.to_string())?;
            match condition(&cv, "ReleaseAccepted") {
                Some(c)
                    if c["reason"] == "RetrievePayload"
                        && c["message"].as_str().is_some_and(|m| {
                            m.contains("The release has 1 errors")
                                && m.contains(&format!("cannot use the release image {missing}"))
                        }) =>
                {
                    Ok(())
                }
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await;
    let image = registry.pullspec("cvo/release", &format!("@{digest}"));
    desire(cvs, json!({"image": image})).await;
    let cv = history(cvs, "1.0.1", "Completed").await;
    assert_eq!(cv.data["status"]["history"][0]["image"], json!(image));
    assert_eq!(cm_value(tc, ns, "settings").await.as_deref(), Some("fixed"));
    condition_is(cvs, "ReleaseAccepted", "True", "PayloadLoaded").await;
    op.terminate().await;
    drop(registry);
    env.finish().await;
}
