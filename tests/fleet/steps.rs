//! The fleet tier's steps, in the order they run (see `main.rs`). Each one is a named test;
//! `needs` names the steps whose outcome it builds on.

use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, ServiceAccount};
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use serde_json::{Value, json};

use crate::common;
use crate::{Fleet, Managed};

pub type Step = common::steps::Step<Fleet>;

crate::steps! {
    Fleet;
    install_puts_the_operator_and_the_executor_on_every_cluster needs [];
    observe_reports_each_clusters_cluster_version needs [install_puts_the_operator_and_the_executor_on_every_cluster];
    a_release_that_does_not_verify_is_written_to_no_cluster needs [observe_reports_each_clusters_cluster_version];
    a_failing_canary_holds_the_next_wave_until_it_completes needs [observe_reports_each_clusters_cluster_version];
    a_stuck_deletion_refuses_a_minor_rollout_but_not_a_patch needs [a_failing_canary_holds_the_next_wave_until_it_completes];
    an_unreachable_cluster_is_named needs [a_stuck_deletion_refuses_a_minor_rollout_but_not_a_patch];
    a_rollout_resumes_after_its_agent_and_the_hub_work_controller_were_down needs [an_unreachable_cluster_is_named];
    a_set_naming_another_object_is_not_applied_and_status_says_why needs [a_rollout_resumes_after_its_agent_and_the_hub_work_controller_were_down];
    a_rollout_is_paused_resumed_aborted_and_a_cluster_retried_across_hub_restarts needs [a_set_naming_another_object_is_not_applied_and_status_says_why];
    preflight_names_the_cluster_with_a_stuck_deletion_and_rollout_refuses_until_it_finishes needs [a_rollout_is_paused_resumed_aborted_and_a_cluster_retried_across_hub_restarts];
    install_refuses_a_cluster_whose_cluster_version_openshift_manages needs [observe_reports_each_clusters_cluster_version];
    the_operator_pod_fleet_install_puts_on_a_node_updates_and_refuses_an_unsigned_release needs [];
    uninstall_removes_the_operator_and_keeps_the_cluster_version needs [install_puts_the_operator_and_the_executor_on_every_cluster];
    the_walkthrough_in_docs_fleet_md_is_what_this_tier_ran needs [install_puts_the_operator_and_the_executor_on_every_cluster, observe_reports_each_clusters_cluster_version, a_failing_canary_holds_the_next_wave_until_it_completes, a_rollout_is_paused_resumed_aborted_and_a_cluster_retried_across_hub_restarts];
}

const PLACEMENT: &str = "fleet/waves";
const OPERATOR_IMAGE: &str = "ghcr.io/cvo-project/cvo:1.4.0";
/// Long enough for an operator's pass, the agent's feedback and OCM's next wave.
const DEADLINE: Duration = Duration::from_secs(240);

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A test-only key of tests/fixtures/oci/keys.
fn key(name: &str) -> String {
    repo()
        .join("tests/fixtures/oci/keys")
        .join(name)
        .display()
        .to_string()
}

fn cluster_version() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("config.openshift.io", "v1", "ClusterVersion"),
        "clusterversions",
    )
}

/// The annotation that keeps a manifest in the default cluster profile: manifests-example's
/// files carry it, so the release uses profiles and a manifest without it is left out.
const PROFILE: &str =
    "  annotations:\n    include.release.openshift.io/self-managed-high-availability: \"true\"\n";

/// A release of version `version`: manifests-example's ClusterVersion CRD and object, a
/// ConfigMap `fleet-demo/settings` holding the version, and `extra` files (in the default
/// profile: [`PROFILE`]).
fn release(fleet: &Fleet, name: &str, version: &str, extra: &[(&str, String)]) -> PathBuf {
    let dir = fleet.work.path().join(name);
    let example = repo().join("manifests-example");
    let file = |f: &str| std::fs::read_to_string(example.join(f)).expect("manifests-example");
    let mut files = vec![
        (
            "0000_00_cluster-version-operator_01_clusterversions.crd.yaml",
            file("0000_00_cluster-version-operator_01_clusterversions.crd.yaml"),
        ),
        (
            "0000_00_cluster-version-operator_02_clusterversion.yaml",
            file("0000_00_cluster-version-operator_02_clusterversion.yaml"),
        ),
        (
            "0000_50_demo_00_namespace.yaml",
            format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: fleet-demo\n{PROFILE}"),
        ),
        (
            "0000_50_demo_01_settings.yaml",
            common::configmap("fleet-demo", "settings", PROFILE, &[("version", version)]),
        ),
    ];
    files.extend(extra.iter().map(|(n, t)| (*n, t.clone())));
    common::write_release(&dir, Some(version), &files);
    dir
}

/// A ConfigMap in namespace `fleet-gate`, which no release creates: a cluster without that
/// namespace fails the release (Failing=True) until someone makes it.
fn gated() -> (&'static str, String) {
    (
        "0000_60_gate_00_settings.yaml",
        common::configmap("fleet-gate", "settings", PROFILE, &[("gate", "open")]),
    )
}

/// Pushes `dir` to the registry's `fleet/release:TAG`, signed with the test key; the
/// `oci://…@sha256:…` reference.
async fn push(fleet: &Fleet, dir: &Path, tag: &str) -> String {
    push_with_output(fleet, dir, tag).await.0
}

/// [`push`], and what `cvo push` printed.
async fn push_with_output(fleet: &Fleet, dir: &Path, tag: &str) -> (String, String) {
    let target = format!("oci://{}/fleet/release:{tag}", fleet.registry.host());
    let (code, stdout, stderr) = common::run_cvo(
        &fleet.hub,
        &[
            "push",
            "--release",
            dir.to_str().expect("utf-8"),
            &target,
            "--sign-key",
            &key("p256.pem"),
        ],
    )
    .await;
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let digest = stdout
        .lines()
        .next()
        .and_then(|l| l.rsplit_once('@'))
        .expect("REPO:TAG@sha256:…")
        .1;
    (
        format!("oci://{}/fleet/release@{digest}", fleet.registry.host()),
        stdout,
    )
}

/// `cvo fleet rollout --placement fleet/waves --release REFERENCE --verify-key KEY EXTRA…`,
/// verifying with `key` (a file of tests/fixtures/oci/keys).
async fn rollout(
    fleet: &Fleet,
    reference: &str,
    key_file: &str,
    extra: &[&str],
) -> (i32, String, String) {
    let key = key(key_file);
    let cache = fleet.work.path().join("cache");
    let cache = cache.to_str().expect("utf-8");
    let mut args = vec![
        "fleet",
        "rollout",
        "--placement",
        PLACEMENT,
        "--release",
        reference,
        "--verify-key",
        &key,
        "--cache-dir",
        cache,
    ];
    args.extend(extra);
    common::run_cvo(&fleet.hub, &args).await
}

/// The risk a release whose ConfigMap goes to a namespace a cluster lacks has there: the
/// cluster's API server refuses the manifest in its preflight's dry run.
const REJECTED: &str = "ManifestRejectedByServer";

/// `cvo fleet preflight --placement PLACEMENT --release REFERENCE -o json EXTRA…`, run until
/// every cluster has answered (exit code 1 comes as soon as one answered badly); the
/// preflight and the exit code (checked against `exitCode`).
async fn preflight_answered(
    fleet: &Fleet,
    placement: &str,
    reference: &str,
    extra: &[&str],
) -> (Value, i32) {
    common::poll_until(
        &format!("every cluster of {placement} answering the preflight of {reference}"),
        DEADLINE,
        || async {
            let mut args = vec![
                "fleet",
                "preflight",
                "--placement",
                placement,
                "--release",
                reference,
                "-o",
                "json",
            ];
            args.extend(extra);
            let (code, stdout, stderr) = common::run_cvo(&fleet.hub, &args).await;
            let v: Value = serde_json::from_str(&stdout).map_err(|e| {
                format!("preflight -o json (exit code {code}): {e}\n{stdout}\n{stderr}")
            })?;
            assert_eq!(v["exitCode"], code, "{stdout}");
            let waiting = v["preflight"]["clusters"]
                .as_array()
                .is_none_or(|cs| cs.iter().any(|c| c["verdict"] == "not-reported"));
            if code == 3 || waiting {
                Err(format!("{:#}", v["preflight"]))
            } else {
                Ok((v["preflight"].clone(), code))
            }
        },
    )
    .await
}

/// [`preflight_answered`] on `fleet/waves`, verifying with the test key.
async fn preflight(fleet: &Fleet, reference: &str, extra: &[&str]) -> (Value, i32) {
    let key = key("p256.pub");
    let cache = fleet.work.path().join("cache");
    let cache = cache.to_str().expect("utf-8");
    let mut args = vec!["--verify-key", &key, "--cache-dir", cache];
    args.extend(extra);
    preflight_answered(fleet, PLACEMENT, reference, &args).await
}

/// The preflight's cluster `name`.
fn answered<'a>(pf: &'a Value, name: &str) -> &'a Value {
    pf["clusters"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["name"] == name))
        .unwrap_or_else(|| panic!("no cluster {name} in {pf:#}"))
}

/// The names of the risks that apply to cluster `name` of preflight `pf`.
fn risks_of(pf: &Value, name: &str) -> Vec<String> {
    answered(pf, name)["answer"]["risks"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["name"].as_str().map(str::to_owned))
        .collect()
}

/// The preflight set on the hub, if written.
async fn preflight_set(fleet: &Fleet) -> Option<Value> {
    sets(fleet)
        .get_opt("cvo-preflight-waves")
        .await
        .expect("get the preflight set")
        .map(|o| serde_json::to_value(o).expect("json"))
}

/// `cvo fleet status -o json`: the status and its exit code (checked against `exitCode`).
async fn status(fleet: &Fleet) -> (Value, i32) {
    let (code, stdout, stderr) = common::run_cvo(
        &fleet.hub,
        &["fleet", "status", "--placement", PLACEMENT, "-o", "json"],
    )
    .await;
    let v: Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("status -o json: {e}\n{stdout}\n{stderr}"));
    assert_eq!(v["exitCode"], code, "{stdout}");
    (v["status"].clone(), code)
}

/// Polls `cvo fleet status` until `done` holds; the status then.
async fn status_until(fleet: &Fleet, what: &str, done: impl Fn(&Value, i32) -> bool) -> Value {
    common::poll_until(what, DEADLINE, || async {
        let (st, code) = status(fleet).await;
        if done(&st, code) {
            Ok(st)
        } else {
            Err(format!("exit code {code}: {st:#}"))
        }
    })
    .await
}

fn cluster<'a>(st: &'a Value, name: &str) -> &'a Value {
    st["clusters"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["name"] == name))
        .unwrap_or_else(|| panic!("no cluster {name} in {st:#}"))
}

/// ClusterVersion `version` of `cluster`, if any.
async fn cv(cluster: &Managed) -> Option<Value> {
    Api::<DynamicObject>::all_with(cluster.client.clone(), &cluster_version())
        .get_opt("version")
        .await
        .expect("get ClusterVersion")
        .map(|o| serde_json::to_value(o).expect("json"))
}

async fn create_namespace(cluster: &Managed, name: &str) {
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}})).expect("ns");
    match Api::<Namespace>::all(cluster.client.clone())
        .create(&PostParams::default(), &ns)
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 409 => {}
        Err(e) => panic!("create namespace {name} on {}: {e}", cluster.name),
    }
}

/// `../shared/ocm/fault.sh ARGS…` (kill, start or restart an agent or a hub controller).
fn fault(fleet: &Fleet, args: &[&str]) {
    let state = fleet.ocm_state();
    if let Err(e) = crate::script(&fleet.ocm("fault.sh"), args, &[("OCM_STATE_FILE", &state)]) {
        panic!("{e}");
    }
}

/// Starts a `cvo operator` on each managed cluster, at release `at`, verifying what it pulls
/// and resyncing every 5 s.
fn operators(fleet: &Fleet, at: &Path) -> Vec<common::operator::Operator> {
    fleet
        .clusters
        .iter()
        .map(|c| {
            let dir = fleet.work.path().join(format!("operator-{}", c.name));
            std::fs::create_dir_all(&dir).expect("operator dir");
            common::operator::Operator::start(
                &c.kubeconfig,
                &dir,
                at,
                "cvo-ops",
                &["--verify-key", &key("p256.pub"), "--resync-interval", "5s"],
            )
        })
        .collect()
}

/// Polls ClusterVersion `version` of `cluster` until `done` holds; it then.
async fn cv_until(cluster: &Managed, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    common::poll_until(what, DEADLINE, || async {
        match cv(cluster).await {
            Some(v) if done(&v) => Ok(v),
            other => Err(format!("{}: {other:#?}", cluster.name)),
        }
    })
    .await
}

/// The newest update of ClusterVersion `later` started once that of `earlier` completed: the
/// later wave was not asked before the earlier one was done.
fn assert_started_after_completed(later: &Value, earlier: &Value) {
    let (l, e) = (
        &later["status"]["history"][0],
        &earlier["status"]["history"][0],
    );
    let time =
        |v: &Value| -> jiff::Timestamp { v.as_str().expect("a time").parse().expect("RFC 3339") };
    assert!(
        time(&l["startedTime"]) >= time(&e["completionTime"]),
        "started before the earlier wave completed: {l:#} {e:#}"
    );
}

/// The version ClusterVersion `v` asks to update to: `spec.desiredUpdate.version`, unless the
/// request is a preflight's (`mode: Preflight`, kept on a cluster of a later wave from the
/// preflight before the rollout, which updates nothing).
fn asked_update(v: &Value) -> Value {
    let update = &v["spec"]["desiredUpdate"];
    if update["mode"] == "Preflight" {
        Value::Null
    } else {
        update["version"].clone()
    }
}

fn completed(v: &Value, version: &str) -> bool {
    v["status"]["history"][0]["version"] == version
        && v["status"]["history"][0]["state"] == "Completed"
}

/// The ManifestWorkReplicaSets of namespace `fleet` on the hub.
fn sets(fleet: &Fleet) -> Api<DynamicObject> {
    let sets = cvo::fleet::ocm::manifest_work_replica_set();
    Api::namespaced_with(fleet.hub_client.clone(), "fleet", &sets)
}

/// The rollout set on the hub, if written.
async fn rollout_set(fleet: &Fleet) -> Option<Value> {
    sets(fleet)
        .get_opt("cvo-rollout-waves")
        .await
        .expect("get the rollout set")
        .map(|o| serde_json::to_value(o).expect("json"))
}

async fn install_puts_the_operator_and_the_executor_on_every_cluster(fleet: &Fleet) {
    let out = std::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&fleet.hub)
        .args(["apply", "-f"])
        .arg(fleet.ocm("examples/placement-waves.yaml"))
        .output()
        .expect("run kubectl");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let args = install_args(fleet);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    // The dry run shows the pull secret's size, never its content.
    let mut dry = args.clone();
    dry.push("--dry-run");
    let (code, stdout, stderr) = common::run_cvo(&fleet.hub, &dry).await;
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(stdout.contains("<redacted: "), "{stdout}");
    assert!(
        !stdout.contains(&base64_of(PULL_SECRET_JSON)),
        "the secret was printed"
    );
    // The Placement decides a moment after it is created: install names it either way.
    let (code, stdout, stderr) = common::run_cvo(&fleet.hub, &args).await;
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(stderr.contains("cvo-install-waves created"), "{stderr}");
    let note: String = stderr
        .lines()
        .filter(|l| l.contains("ManifestWorkReplicaSet"))
        .collect();
    fleet.transcript.record(
        "cvo fleet install --placement fleet/waves --image ghcr.io/cvo-project/cvo:1.4.0 --release manifests-example --verify-key p256.pub --pull-secret docker-config.json",
        &note,
    );
    assert!(
        stderr.contains("verifying what it pulls with 1 key(s), with a pull secret"),
        "{stderr}"
    );
    for c in &fleet.clusters {
        let client = c.client.clone();
        common::poll_until(
            &format!("the operator and the executor on {}", c.name),
            DEADLINE,
            || {
                let client = client.clone();
                async move {
                    let sa = Api::<ServiceAccount>::namespaced(client.clone(), "cvo-fleet")
                        .get_opt("cvo-fleet-updater")
                        .await
                        .map_err(|e| e.to_string())?;
                    let deployment =
                        Api::<Deployment>::namespaced(client.clone(), "cluster-version")
                            .get_opt("cvo-operator")
                            .await
                            .map_err(|e| e.to_string())?;
                    let binding = Api::<ClusterRoleBinding>::all(client.clone())
                        .get_opt("cvo-operator-least-privilege")
                        .await
                        .map_err(|e| e.to_string())?;
                    match (sa, deployment, binding) {
                        (Some(_), Some(d), Some(_)) => Ok(d),
                        state => Err(format!(
                            "{:?}",
                            (state.0.is_some(), state.1.is_some(), state.2.is_some())
                        )),
                    }
                }
            },
        )
        .await;
        let d = Api::<Deployment>::namespaced(c.client.clone(), "cluster-version")
            .get("cvo-operator")
            .await
            .expect("deployment");
        let container = d
            .spec
            .and_then(|s| s.template.spec)
            .map(|s| s.containers[0].clone())
            .expect("the operator container");
        assert_eq!(container.image.as_deref(), Some(OPERATOR_IMAGE));
        // The key and the pull secret, in the pull configuration its Deployment names (the
        // operator keeps its Deployment's flags as the release says).
        let container_args = container.args.unwrap_or_default();
        assert!(
            container_args
                .iter()
                .any(|a| a == "--pull-config=cvo-pull-config"),
            "{container_args:?}"
        );
        let config = Api::<ConfigMap>::namespaced(c.client.clone(), "cluster-version")
            .get("cvo-pull-config")
            .await
            .expect("the pull configuration");
        let data = config.data.expect("data");
        let pem = std::fs::read_to_string(key("p256.pub")).expect("p256.pub");
        assert_eq!(
            data["verify-keys"].trim(),
            pem.trim(),
            "the key on {}",
            c.name
        );
        assert_eq!(data["pull-secret"], "cvo-pull-secret");
        let secret = Api::<k8s_openapi::api::core::v1::Secret>::namespaced(
            c.client.clone(),
            "cluster-version",
        )
        .get("cvo-pull-secret")
        .await
        .expect("the pull secret");
        assert_eq!(
            secret.type_.as_deref(),
            Some("kubernetes.io/dockerconfigjson")
        );
        assert_eq!(
            secret.data.expect("data")[".dockerconfigjson"].0,
            PULL_SECRET_JSON.as_bytes()
        );
        // The least-privilege RBAC in place of the release's cluster-admin binding, and no
        // ClusterVersion written by the install (the operator creates its own).
        let admin = Api::<ClusterRoleBinding>::all(c.client.clone())
            .get_opt("cvo-operator")
            .await
            .expect("get binding");
        assert!(
            admin.is_none(),
            "the release's cluster-admin binding was installed on {}",
            c.name
        );
        assert!(
            cv(c).await.is_none(),
            "install wrote a ClusterVersion on {}",
            c.name
        );
    }
    let (code, _, stderr) = common::run_cvo(&fleet.hub, &args).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("cvo-install-waves unchanged"), "{stderr}");
}

async fn observe_reports_each_clusters_cluster_version(fleet: &Fleet) {
    let r100 = release(fleet, "r100", "1.0.0", &[]);
    for c in &fleet.clusters {
        let (code, stdout, stderr) = common::run_cvo(
            &c.kubeconfig,
            &["apply", "--release", r100.to_str().expect("utf-8")],
        )
        .await;
        assert_eq!(code, 0, "cvo apply on {}: {stdout}\n{stderr}", c.name);
    }
    let observe = ["fleet", "observe", "--placement", PLACEMENT];
    let (code, _, stderr) = common::run_cvo(&fleet.hub, &observe).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("cvo-observe-waves created"), "{stderr}");
    fleet
        .transcript
        .record("cvo fleet observe --placement fleet/waves", &stderr);
    let (_, _, stderr) = common::run_cvo(&fleet.hub, &observe).await;
    assert!(stderr.contains("cvo-observe-waves unchanged"), "{stderr}");
    let st = status_until(fleet, "both clusters reporting 1.0.0 Completed", |st, _| {
        ["c1", "c2"].iter().all(|c| {
            st["clusters"].as_array().into_iter().flatten().any(|x| {
                x["name"] == *c
                    && x["report"]["history"][0]["version"] == "1.0.0"
                    && x["report"]["history"][0]["state"] == "Completed"
            })
        })
    })
    .await;
    assert_eq!(
        st["waves"],
        json!([
            {"index": 0, "name": "canary", "clusters": ["c1"], "progress": "pending",
             "counts": {"done": 0, "progressing": 0, "failed": 0, "notStarted": 1}},
            {"index": 1, "name": "rest", "clusters": ["c2"], "progress": "pending",
             "counts": {"done": 0, "progressing": 0, "failed": 0, "notStarted": 1}},
        ]),
        "{st:#}"
    );
    for name in ["c1", "c2"] {
        let c = cluster(&st, name);
        assert_eq!(c["reachable"]["state"], "reachable", "{c:#}");
        assert_eq!(
            c["report"]["conditions"]["Upgradeable"]["status"], "True",
            "{c:#}"
        );
        assert_eq!(
            c["report"]["conditions"]["Available"]["status"], "True",
            "{c:#}"
        );
    }
    assert!(st["target"].is_null());
    // Without --placement: the one Placement cvo's sets name.
    let (code, text, _) = common::run_cvo(&fleet.hub, &["fleet", "status"]).await;
    fleet
        .transcript
        .record("cvo fleet status          # exit code 0", &text);
    assert_eq!(
        code, 0,
        "no rollout, every cluster reachable and none failing: {text}"
    );
    assert!(
        text.starts_with("Placement fleet/waves: no rollout"),
        "{text}"
    );
    assert!(
        text.contains("\n1.0.0    2\n"),
        "clusters by version: {text}"
    );
    assert!(text.contains("2 cluster(s), none needs a look"), "{text}");
    let (_, text, _) = common::run_cvo(&fleet.hub, &["fleet", "status", "--all"]).await;
    fleet.transcript.record("cvo fleet status --all", &text);
    assert!(
        text.contains("c1       0 (canary)  yes        1.0.0"),
        "{text}"
    );
}

async fn a_release_that_does_not_verify_is_written_to_no_cluster(fleet: &Fleet) {
    let r110 = release(fleet, "r110", "1.1.0", &[gated()]);
    let (reference, pushed) = push_with_output(fleet, &r110, "1.1.0").await;
    fleet.transcript.record(
        "cvo push --release r110 oci://127.0.0.1:5000/fleet/release:1.1.0 --sign-key p256.pem",
        &pushed,
    );
    let (code, stdout, stderr) = rollout(fleet, &reference, "other.pub", &[]).await;
    assert_eq!(code, 4, "{stdout}\n{stderr}");
    assert!(stderr.contains("failed signature verification"), "{stderr}");
    assert!(
        rollout_set(fleet).await.is_none(),
        "a rollout set was written"
    );
    for c in &fleet.clusters {
        let v = cv(c).await.expect("ClusterVersion");
        assert!(
            v["spec"]["desiredUpdate"].is_null(),
            "{}: {:#}",
            c.name,
            v["spec"]
        );
    }
}

async fn a_failing_canary_holds_the_next_wave_until_it_completes(fleet: &Fleet) {
    let r100 = fleet.work.path().join("r100");
    let r110 = release(fleet, "r110", "1.1.0", &[gated()]);
    let reference = push(fleet, &r110, "1.1.0").await;
    // c2 has the namespace the release's gated ConfigMap goes to; c1, the canary, has not.
    create_namespace(fleet.cluster("c2"), "fleet-gate").await;
    // Each cluster's own operator, on the release it is at, verifying what it pulls.
    for c in &fleet.clusters {
        create_namespace(c, "cvo-ops").await;
    }
    let operators = operators(fleet, &r100);
    // Without a preflight the canary's answer is missing: refused, nothing written.
    let (code, stdout, stderr) = rollout(fleet, &reference, "p256.pub", &[]).await;
    assert_eq!(code, 4, "{stdout}\n{stderr}");
    assert!(
        stdout.contains("c1: no answer to the preflight of this release")
            && stdout.contains("cvo fleet preflight --placement fleet/waves"),
        "{stdout}"
    );
    assert!(
        rollout_set(fleet).await.is_none(),
        "a rollout set was written"
    );
    // Every cluster asked at once: the canary's API server refuses the gated ConfigMap in its
    // dry run (no namespace fleet-gate there); c2 is clean.
    let (pf, code) = preflight(fleet, &reference, &[]).await;
    assert_eq!(code, 1, "{pf:#}");
    assert_eq!(risks_of(&pf, "c1"), [REJECTED], "{pf:#}");
    assert_eq!(answered(&pf, "c1")["verdict"], "not-accepted", "{pf:#}");
    assert_eq!(answered(&pf, "c2")["verdict"], "clean", "{pf:#}");
    let (code, text, stderr) = common::run_cvo(
        &fleet.hub,
        &[
            "fleet",
            "preflight",
            "--placement",
            PLACEMENT,
            "--release",
            &reference,
            "--verify-key",
            &key("p256.pub"),
            "--cache-dir",
            fleet.work.path().join("cache").to_str().expect("utf-8"),
        ],
    )
    .await;
    assert_eq!(code, 1, "{text}\n{stderr}");
    assert!(stderr.contains("cvo-preflight-waves unchanged"), "{stderr}");
    assert!(
        text.contains("1 of 2 cluster(s) need a look")
            && text.contains("ManifestRejectedByServer (not accepted)"),
        "{text}"
    );
    fleet
        .transcript
        .note("every cluster asked at once; the same command again once both answered");
    fleet.transcript.record(
        &format!(
            "cvo fleet preflight --placement fleet/waves --release {} --verify-key p256.pub          # exit code 1",
            crate::walkthrough::stable(&reference)
        ),
        &format!("{stderr}{text}"),
    );
    let (code, stdout, stderr) = rollout(fleet, &reference, "p256.pub", &[]).await;
    assert_eq!(code, 4, "{stdout}\n{stderr}");
    assert!(
        stdout
            .contains("c1: preflight risks apply that are not accepted: ManifestRejectedByServer"),
        "{stdout}"
    );
    // Accepted: the canary's operator applies the release anyway, and fails on it.
    let accept = ["--accept-risks", REJECTED];
    let (code, stdout, stderr) = rollout(fleet, &reference, "p256.pub", &accept).await;
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(
        stdout.contains("ManifestWorkReplicaSet fleet/cvo-rollout-waves created"),
        "{stdout}"
    );
    assert!(stderr.contains("cvo-preflight-waves deleted"), "{stderr}");
    assert!(
        preflight_set(fleet).await.is_none(),
        "the preflight set is left"
    );
    let set = rollout_set(fleet).await.expect("the rollout set");
    assert_eq!(
        set["spec"]["manifestWorkTemplate"]["workload"]["manifests"][0]["spec"]["desiredUpdate"]["acceptRisks"],
        json!([{"name": REJECTED}])
    );
    fleet.transcript.record(
        &format!(
            "cvo fleet rollout --placement fleet/waves --release {} --verify-key p256.pub --accept-risks ManifestRejectedByServer",
            crate::walkthrough::stable(&reference)
        ),
        &format!("{stderr}{stdout}"),
    );
    // The canary fails: the rollout is held there, and the next wave is never asked.
    let st = status_until(fleet, "the canary failing", |st, _| {
        cluster(st, "c1")["rollout"]["state"] == "failed"
    })
    .await;
    let (_, code) = status(fleet).await;
    assert_eq!(code, 1, "held by a failure: {st:#}");
    assert_eq!(st["heldBy"][0]["cluster"], "c1", "{st:#}");
    let reason = st["heldBy"][0]["reason"].as_str().expect("reason");
    assert!(
        reason.starts_with("Failing=True") && reason.contains("fleet-gate"),
        "{reason}"
    );
    assert_eq!(cluster(&st, "c2")["rollout"]["state"], "pending", "{st:#}");
    let (_, text, _) =
        common::run_cvo(&fleet.hub, &["fleet", "status", "--placement", PLACEMENT]).await;
    fleet.transcript.record(
        "cvo fleet status --placement fleet/waves          # exit code 1: the canary fails",
        &text,
    );
    let c2 = cv(fleet.cluster("c2")).await.expect("ClusterVersion");
    assert!(
        asked_update(&c2).is_null(),
        "the next wave was asked: {:#}",
        c2["spec"]
    );
    // Fixed on the canary: it completes, then the next wave is asked and completes.
    create_namespace(fleet.cluster("c1"), "fleet-gate").await;
    fleet
        .transcript
        .note("the fix: the namespace fleet-gate made on c1");
    status_until(fleet, "every cluster at 1.1.0", |_, code| code == 0).await;
    let (_, text, _) =
        common::run_cvo(&fleet.hub, &["fleet", "status", "--placement", PLACEMENT]).await;
    fleet.transcript.record(
        "cvo fleet status --placement fleet/waves          # exit code 0",
        &text,
    );
    let (c1, c2) = (
        cv(fleet.cluster("c1")).await.expect("cv"),
        cv(fleet.cluster("c2")).await.expect("cv"),
    );
    for v in [&c1, &c2] {
        assert_eq!(v["status"]["history"][0]["version"], "1.1.0");
        assert_eq!(v["status"]["history"][0]["state"], "Completed");
        assert_eq!(v["status"]["history"][0]["verified"], true);
    }
    assert_started_after_completed(&c2, &c1);
    let settings = Api::<ConfigMap>::namespaced(fleet.cluster("c2").client.clone(), "fleet-demo")
        .get("settings")
        .await
        .expect("settings");
    assert_eq!(settings.data.expect("data")["version"], "1.1.0");
    let (code, text, _) = common::run_cvo(
        &fleet.hub,
        &["fleet", "status", "--placement", PLACEMENT, "--watch"],
    )
    .await;
    assert_eq!(code, 0, "{text}");
    assert!(text.contains(": done"), "{text}");
    // c1's ClusterVersion: the accepted risk, and no preflight mode (the rollout's apply,
    // with the same field manager, removed it).
    let c1 = cv(fleet.cluster("c1")).await.expect("cv");
    assert_eq!(
        c1["spec"]["desiredUpdate"]["acceptRisks"],
        json!([{"name": REJECTED}])
    );
    assert!(
        c1["spec"]["desiredUpdate"]["mode"].is_null(),
        "{:#}",
        c1["spec"]
    );
    // The same release again changes nothing (no preflight needed: the rollout is this one).
    let (code, stdout, stderr) = rollout(fleet, &reference, "p256.pub", &accept).await;
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(
        stdout.contains("fleet/cvo-rollout-waves unchanged"),
        "{stdout}"
    );
    for o in operators {
        o.terminate().await;
    }
}

async fn a_stuck_deletion_refuses_a_minor_rollout_but_not_a_patch(fleet: &Fleet) {
    let c2 = fleet.cluster("c2");
    // On c2 a deletion the release asks for cannot finish (a finalizer holds the object):
    // its ClusterVersion says Upgradeable=False.
    create_namespace(c2, "fleet-held").await;
    let held: ConfigMap = serde_json::from_value(json!({"metadata": {
        "name": "held", "namespace": "fleet-held", "finalizers": [common::TEST_FINALIZER],
    }}))
    .expect("cm");
    let cms = Api::<ConfigMap>::namespaced(c2.client.clone(), "fleet-held");
    cms.create(&PostParams::default(), &held)
        .await
        .expect("create held");
    let delete = (
        "0000_70_held_00_cm.delete.yaml",
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: held\n  namespace: fleet-held\n{PROFILE}    release.openshift.io/delete: \"true\"\n"
        ),
    );
    let r110_held = release(fleet, "r110-held", "1.1.0", &[gated(), delete]);
    let (code, stdout, stderr) = common::run_cvo(
        &c2.kubeconfig,
        &["apply", "--release", r110_held.to_str().expect("utf-8")],
    )
    .await;
    assert_eq!(code, 3, "deletion in progress: {stdout}\n{stderr}");
    status_until(fleet, "c2 reporting Upgradeable=False", |st, _| {
        cluster(st, "c2")["report"]["conditions"]["Upgradeable"]["status"] == "False"
    })
    .await;
    let minor = push(fleet, &release(fleet, "r120", "1.2.0", &[gated()]), "1.2.0").await;
    let patch = push(fleet, &release(fleet, "r111", "1.1.1", &[gated()]), "1.1.1").await;
    let written_version = || async {
        rollout_set(fleet).await.expect("the rollout set")["metadata"]["annotations"]["fleet.cvo.io/version"].clone()
    };
    // No operator runs here, so no cluster answers a preflight: the canary c1 is refused for
    // that alone, c2 for its stuck deletion too.
    for extra in [&[][..], &["--dry-run"][..]] {
        let (code, stdout, stderr) = rollout(fleet, &minor, "p256.pub", extra).await;
        assert_eq!(code, 4, "{stdout}\n{stderr}");
        assert!(
            stdout.contains("c2: 1.1.0 → 1.2.0 is a minor/major update and Upgradeable=False"),
            "{stdout}"
        );
        assert!(
            stdout.contains("c1: no answer to the preflight of this release"),
            "c1 has no stuck deletion: {stdout}"
        );
        assert_eq!(written_version().await, "1.1.0", "nothing written");
    }
    let (code, stdout, stderr) = rollout(fleet, &patch, "p256.pub", &["--dry-run"]).await;
    assert_eq!(code, 4, "{stdout}\n{stderr}");
    assert!(
        stdout.contains("refused on 1 cluster(s)")
            && stdout.contains("c1: no answer to the preflight")
            && !stdout.contains("c2:"),
        "a patch update goes ahead on c2: {stdout}"
    );
    assert_eq!(written_version().await, "1.1.0", "nothing written");
    // Forced, with a deadline: no operator runs now, so the canary never progresses.
    let (code, stdout, stderr) = rollout(
        fleet,
        &minor,
        "p256.pub",
        &["--force", "--progress-deadline", "10s"],
    )
    .await;
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(stdout.contains("forced past on 2 cluster(s)"), "{stdout}");
    let set = rollout_set(fleet).await.expect("the rollout set");
    assert_eq!(
        set["metadata"]["annotations"]["fleet.cvo.io/version"],
        "1.2.0"
    );
    let forced = set["metadata"]["annotations"]["fleet.cvo.io/forced"]
        .as_str()
        .expect("forced");
    assert!(
        forced.starts_with("c2: 1.1.0 → 1.2.0") && forced.contains("Upgradeable=False"),
        "{forced}"
    );
    let (st, _) = status(fleet).await;
    assert_eq!(st["target"]["forced"], forced, "{st:#}");
    // Past the deadline the rollout is held by it (exit code 1), the canary named.
    let st = status_until(
        fleet,
        "the canary past the progress deadline",
        |st, code| code == 1 && cluster(st, "c1")["rollout"]["state"] == "failed",
    )
    .await;
    let reason = st["heldBy"][0]["reason"].as_str().expect("reason");
    assert!(
        st["heldBy"][0]["cluster"] == "c1" && reason.contains("progressDeadline (10s)"),
        "{st:#}"
    );
    // Let the held object go.
    cms.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .expect("release the finalizer");
}

async fn an_unreachable_cluster_is_named(fleet: &Fleet) {
    // The hub judges a cluster gone after 5 lease durations without a renewal: 4 s each.
    let clusters = cvo::fleet::ocm::managed_cluster();
    Api::<DynamicObject>::all_with(fleet.hub_client.clone(), &clusters)
        .patch(
            "c2",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"leaseDurationSeconds": 4}})),
        )
        .await
        .expect("shorten c2's lease");
    fault(fleet, &["kill", "agent", "c2"]);
    let st = status_until(fleet, "c2 named as unreachable", |st, code| {
        let c2 = cluster(st, "c2");
        code != 0
            && (c2["reachable"]["state"] == "unreachable"
                || c2["rollout"]["reason"]
                    .as_str()
                    .is_some_and(|r| r.contains("no longer selected")))
    })
    .await;
    let (_, text, _) =
        common::run_cvo(&fleet.hub, &["fleet", "status", "--placement", PLACEMENT]).await;
    assert!(
        text.lines().any(|l| l.starts_with("c2 ")),
        "c2 dropped from the table: {text}\n{st:#}"
    );
    fault(fleet, &["start", "agent", "c2"]);
    status_until(fleet, "c2 reachable again", |st, _| {
        cluster(st, "c2")["reachable"]["state"] == "reachable"
    })
    .await;
}

async fn a_rollout_resumes_after_its_agent_and_the_hub_work_controller_were_down(fleet: &Fleet) {
    let (c1, c2) = (fleet.cluster("c1"), fleet.cluster("c2"));
    // The operators take both clusters where the forced rollout left them (c1 asked for
    // 1.2.0), and c2's deletion, no longer held, finishes: both Upgradeable again, and the
    // forced rollout goes on to c2. Both at 1.2.0 before 1.3.0: from 1.1.0, c2's operator
    // would refuse to skip 1.2 (and so does the hub's check).
    let operators = operators(fleet, &fleet.work.path().join("r100"));
    status_until(fleet, "both at 1.2.0 and Upgradeable=True", |st, _| {
        ["c1", "c2"].iter().all(|c| {
            let report = &cluster(st, c)["report"];
            report["history"][0]["version"] == "1.2.0"
                && report["history"][0]["state"] == "Completed"
                && report["conditions"]["Upgradeable"]["status"] == "True"
        })
    })
    .await;
    // 1.3.0 needs a namespace no cluster has yet: the canary is held until it is made.
    let resume = (
        "0000_60_resume_00_settings.yaml",
        common::configmap("fleet-resume", "settings", PROFILE, &[("gate", "open")]),
    );
    let r130 = release(fleet, "r130", "1.3.0", &[gated(), resume]);
    let reference = push(fleet, &r130, "1.3.0").await;
    let (pf, code) = preflight(fleet, &reference, &[]).await;
    assert_eq!(code, 1, "{pf:#}");
    assert_eq!(risks_of(&pf, "c1"), [REJECTED], "{pf:#}");
    let (code, stdout, stderr) =
        rollout(fleet, &reference, "p256.pub", &["--accept-risks", REJECTED]).await;
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    status_until(fleet, "the canary failing on fleet-resume", |st, _| {
        let c1 = &cluster(st, "c1")["rollout"];
        c1["state"] == "failed"
            && c1["reason"]
                .as_str()
                .is_some_and(|r| r.contains("fleet-resume"))
    })
    .await;
    // c1's agent and the hub's work controller go down; meanwhile the canary completes.
    fault(fleet, &["kill", "agent", "c1"]);
    fault(fleet, &["kill", "hub-work"]);
    create_namespace(c1, "fleet-resume").await;
    create_namespace(c2, "fleet-resume").await;
    cv_until(c1, "c1 at 1.3.0, Completed", |v| completed(v, "1.3.0")).await;
    let (st, code) = status(fleet).await;
    assert_eq!(code, 1, "the hub has not heard: {st:#}");
    assert_eq!(cluster(&st, "c1")["rollout"]["state"], "failed", "{st:#}");
    assert_eq!(cluster(&st, "c2")["rollout"]["state"], "pending", "{st:#}");
    // The agent back: the hub hears c1 is done, but no controller moves the rollout on.
    fault(fleet, &["start", "agent", "c1"]);
    let st = status_until(fleet, "c1 done as the hub sees it", |st, _| {
        cluster(st, "c1")["rollout"]["state"] == "done"
    })
    .await;
    assert_eq!(cluster(&st, "c2")["rollout"]["state"], "pending", "{st:#}");
    let asked = asked_update(&cv(c2).await.expect("c2's ClusterVersion"));
    assert_ne!(
        asked, "1.3.0",
        "c2 asked while the hub's work controller was down"
    );
    // The controller back: the next wave is asked and completes.
    fault(fleet, &["start", "hub-work"]);
    status_until(fleet, "every cluster at 1.3.0", |_, code| code == 0).await;
    let (c1v, c2v) = (cv(c1).await.expect("cv"), cv(c2).await.expect("cv"));
    assert!(
        completed(&c2v, "1.3.0"),
        "{:#}",
        c2v["status"]["history"][0]
    );
    assert_started_after_completed(&c2v, &c1v);
    for o in operators {
        o.terminate().await;
    }
}

async fn a_set_naming_another_object_is_not_applied_and_status_says_why(fleet: &Fleet) {
    // Someone with write access to the hub adds a ConfigMap to the rollout set.
    let intruder = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "fleet-intruder", "namespace": "default"}, "data": {"owned": "yes"}});
    sets(fleet)
        .patch(
            "cvo-rollout-waves",
            &PatchParams {
                field_manager: Some("intruder".to_owned()),
                ..PatchParams::default()
            },
            &Patch::<()>::Json(
                serde_json::from_value(json!([{"op": "add",
                    "path": "/spec/manifestWorkTemplate/workload/manifests/-", "value": intruder}]))
                .expect("a JSON patch"),
            ),
        )
        .await
        .expect("add a manifest to the rollout set");
    // The canary's agent asks whether the executor may write it, and refuses; status says so.
    let st = status_until(fleet, "c1 failed on the intruder", |st, code| {
        code == 1
            && cluster(st, "c1")["rollout"]["reason"]
                .as_str()
                .is_some_and(|r| r.contains("ConfigMap default/fleet-intruder (not applied:"))
    })
    .await;
    assert_eq!(st["heldBy"][0]["cluster"], "c1", "{st:#}");
    let (_, text, _) =
        common::run_cvo(&fleet.hub, &["fleet", "status", "--placement", PLACEMENT]).await;
    assert!(text.contains("fleet-intruder"), "{text}");
    for c in &fleet.clusters {
        let got = Api::<ConfigMap>::namespaced(c.client.clone(), "default")
            .get_opt("fleet-intruder")
            .await
            .expect("get");
        assert!(got.is_none(), "the intruder was applied on {}", c.name);
    }
    // The same rollout again writes the set as cvo wrote it: done again.
    let reference = rollout_set(fleet).await.expect("the rollout set")["metadata"]["annotations"]
        ["fleet.cvo.io/release"]
        .as_str()
        .expect("release")
        .to_owned();
    let (code, stdout, stderr) = rollout(
        fleet,
        &format!("oci://{reference}"),
        "p256.pub",
        &["--accept-risks", REJECTED],
    )
    .await;
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(
        stdout.contains("fleet/cvo-rollout-waves configured"),
        "{stdout}"
    );
    status_until(fleet, "every cluster at 1.3.0 again", |_, code| code == 0).await;
}

async fn preflight_names_the_cluster_with_a_stuck_deletion_and_rollout_refuses_until_it_finishes(
    fleet: &Fleet,
) {
    let c1 = fleet.cluster("c1");
    let operators = operators(fleet, &fleet.work.path().join("r100"));
    // 1.5.2, a patch, deletes ConfigMap fleet-stuck/held; on the canary c1 a finalizer nobody
    // removes holds it, so c1's deletion never finishes (Upgradeable=False). c2 has no such
    // object: its deletion is done at once.
    create_namespace(c1, "fleet-stuck").await;
    let held: ConfigMap = serde_json::from_value(json!({"metadata": {
        "name": "held", "namespace": "fleet-stuck", "finalizers": [common::TEST_FINALIZER],
    }}))
    .expect("cm");
    let cms = Api::<ConfigMap>::namespaced(c1.client.clone(), "fleet-stuck");
    cms.create(&PostParams::default(), &held)
        .await
        .expect("create held");
    let delete = (
        "0000_70_stuck_00_cm.delete.yaml",
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: held\n  namespace: fleet-stuck\n{PROFILE}    release.openshift.io/delete: \"true\"\n"
        ),
    );
    let r152 = push(fleet, &release(fleet, "r152", "1.5.2", &[delete]), "1.5.2").await;
    let (pf, code) = preflight(fleet, &r152, &[]).await;
    assert_eq!(code, 0, "1.5.2 is clean everywhere: {pf:#}");
    let (code, stdout, stderr) = rollout(fleet, &r152, "p256.pub", &[]).await;
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    status_until(
        fleet,
        "every cluster at 1.5.2, c1 not Upgradeable (its deletion held)",
        |st, code| {
            code == 0
                && cluster(st, "c1")["report"]["conditions"]["Upgradeable"]["status"] == "False"
        },
    )
    .await;
    // The preflight of 1.6.0, a minor update: c1 is named with the risk, c2 is clean. The
    // done rollout of 1.5.2 makes way.
    let r160 = push(fleet, &release(fleet, "r160", "1.6.0", &[]), "1.6.0").await;
    let (pf, code) = preflight(fleet, &r160, &[]).await;
    assert_eq!(code, 1, "risks not accepted: {pf:#}");
    assert!(
        rollout_set(fleet).await.is_none(),
        "the done rollout is left"
    );
    assert_eq!(risks_of(&pf, "c1"), [STUCK], "{pf:#}");
    let risk = &answered(&pf, "c1")["answer"]["risks"][0];
    assert_eq!(risk["applies"], "True", "{pf:#}");
    assert_eq!(risk["accepted"], false, "{pf:#}");
    assert!(
        risk["message"]
            .as_str()
            .is_some_and(|m| m.contains("fleet-stuck/held")),
        "the Applies message, through a nested JSONPath filter: {pf:#}"
    );
    assert_eq!(answered(&pf, "c2")["verdict"], "clean", "{pf:#}");
    // Each cluster's own Recommended for the target, through a filter on the image
    // (`@.release.image=="HOST:PORT/REPO@sha256:…"`).
    assert_eq!(
        answered(&pf, "c1")["answer"]["recommended"],
        "False",
        "{pf:#}"
    );
    assert_eq!(
        answered(&pf, "c2")["answer"]["recommended"],
        "True",
        "{pf:#}"
    );
    assert_eq!(pf["waves"][0]["counts"]["notAccepted"], 1, "{pf:#}");
    assert_eq!(pf["waves"][1]["counts"]["clean"], 1, "{pf:#}");
    // The cluster's own word: UpdatePreflight=False on c1, its ClusterVersion asking for a
    // preflight only (no update started).
    let v = cv(c1).await.expect("c1's ClusterVersion");
    assert_eq!(
        v["spec"]["desiredUpdate"]["mode"], "Preflight",
        "{:#}",
        v["spec"]
    );
    assert!(completed(&v, "1.5.2"), "{:#}", v["status"]["history"][0]);
    // The rollout refuses the canary, naming the risk and how to accept it; nothing written.
    let (code, stdout, stderr) = rollout(fleet, &r160, "p256.pub", &[]).await;
    assert_eq!(code, 4, "{stdout}\n{stderr}");
    assert!(
        stdout.contains("c1: 1.5.2 → 1.6.0 is a minor/major update and Upgradeable=False")
            && stdout.contains(&format!("`--accept-risks {STUCK}`"))
            && stdout.contains(
                "preflight risks apply that are not accepted: MinorUpdateWhileDeletionInProgress"
            ),
        "{stdout}"
    );
    assert!(!stdout.contains("c2:"), "c2 is clean: {stdout}");
    assert!(
        rollout_set(fleet).await.is_none(),
        "a rollout set was written"
    );
    // Accepted, it would start (a dry run: nothing written).
    let (code, stdout, stderr) = rollout(
        fleet,
        &r160,
        "p256.pub",
        &["--accept-risks", STUCK, "--dry-run"],
    )
    .await;
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(
        stdout.contains("dry run: nothing written") && !stdout.contains("refused"),
        "{stdout}"
    );
    assert!(
        preflight_set(fleet).await.is_some(),
        "a dry run deleted the preflight"
    );
    // The deletion finishes (the finalizer let go): c1's next preflight is clean, and the
    // rollout starts without accepting anything.
    cms.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .expect("release the finalizer");
    // An answer is as fresh as the cluster's last pass: its operator checks again at each.
    common::poll_until(
        "c1's preflight clean once its deletion finished",
        DEADLINE,
        || async {
            match preflight(fleet, &r160, &[]).await {
                (pf, 0) if answered(&pf, "c1")["verdict"] == "clean" => Ok(()),
                (pf, code) => Err(format!("exit code {code}: {pf:#}")),
            }
        },
    )
    .await;
    let (code, stdout, stderr) = rollout(fleet, &r160, "p256.pub", &[]).await;
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(stderr.contains("cvo-preflight-waves deleted"), "{stderr}");
    status_until(fleet, "every cluster at 1.6.0", |_, code| code == 0).await;
    let v = cv(c1).await.expect("c1's ClusterVersion");
    assert!(
        v["spec"]["desiredUpdate"]["mode"].is_null(),
        "{:#}",
        v["spec"]
    );
    for o in operators {
        o.terminate().await;
    }
}

/// The risk of a minor update while a deletion the release asked for is unfinished.
const STUCK: &str = "MinorUpdateWhileDeletionInProgress";

/// A registry credential as `docker login` writes it (for a registry this tier does not use).
const PULL_SECRET_JSON: &str =
    r#"{"auths": {"registry.example:5000": {"auth": "dXNlcjpzM2NyM3Q="}}}"#;

fn base64_of(text: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(text)
}

/// `cvo fleet install` of manifests-example with the test key and a pull secret.
fn install_args(fleet: &Fleet) -> Vec<String> {
    let secret = fleet.work.path().join("docker-config.json");
    std::fs::write(&secret, PULL_SECRET_JSON).expect("write the docker config");
    let example = repo().join("manifests-example");
    [
        "fleet",
        "install",
        "--placement",
        PLACEMENT,
        "--image",
        OPERATOR_IMAGE,
        "--release",
        example.to_str().expect("utf-8"),
        "--verify-key",
        &key("p256.pub"),
        "--pull-secret",
        secret.to_str().expect("utf-8"),
    ]
    .iter()
    .map(|a| (*a).to_owned())
    .collect()
}

/// `cvo fleet VERB --placement fleet/waves ARGS…`.
async fn control(fleet: &Fleet, verb: &str, args: &[&str]) -> (i32, String, String) {
    let mut all = vec!["fleet", verb, "--placement", PLACEMENT];
    all.extend(args);
    common::run_cvo(&fleet.hub, &all).await
}

/// The rollout set's `PlacementVerified` condition reason, as OCM's controller last wrote it.
async fn set_verified_reason(fleet: &Fleet) -> Option<String> {
    let set = rollout_set(fleet).await?;
    set["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "PlacementVerified")
        .and_then(|c| c["reason"].as_str().map(str::to_owned))
}

/// Waits until OCM's set controller, after a restart, has reached cvo's stop: the set says the
/// Placement's decisions were not found (the stop ref's) — from then on it writes no work.
async fn stopped_by_the_hub(fleet: &Fleet) {
    common::poll_until(
        "the set controller stopped at cvo's stop",
        DEADLINE,
        || async {
            match set_verified_reason(fleet).await.as_deref() {
                Some("PlacementDecisionNotFound") => Ok(()),
                other => Err(format!("PlacementVerified reason {other:?}")),
            }
        },
    )
    .await;
}

/// `cluster`'s ManifestWorks of the rollout set that are not being deleted (the work agent
/// removes a deleted work's finalizer once it has let go of what it applied): (name, uid).
async fn rollout_works(fleet: &Fleet, cluster: &str) -> Vec<(String, String)> {
    let api = Api::<DynamicObject>::namespaced_with(
        fleet.hub_client.clone(),
        cluster,
        &cvo::fleet::ocm::manifest_work(),
    );
    let lp = kube::api::ListParams::default().labels(&format!(
        "{}=fleet.cvo-rollout-waves",
        cvo::fleet::ocm::REPLICA_SET_LABEL
    ));
    api.list(&lp)
        .await
        .expect("list ManifestWorks")
        .items
        .into_iter()
        .filter(|w| w.metadata.deletion_timestamp.is_none())
        .map(|w| {
            (
                w.metadata.name.unwrap_or_default(),
                w.metadata.uid.unwrap_or_default(),
            )
        })
        .collect()
}

/// Rolls out release `name` at `version` with a ConfigMap in namespace `ns`, which no cluster
/// has, and waits until the canary fails on it; the release's reference, and what `cvo fleet
/// rollout` printed on stderr.
async fn rollout_failing_on(
    fleet: &Fleet,
    name: &str,
    version: &str,
    ns: &str,
) -> (String, String) {
    let file = format!("0000_60_{ns}_00_settings.yaml");
    let text = common::configmap(ns, "settings", PROFILE, &[("gate", "open")]);
    let dir = release(fleet, name, version, &[(&file, text)]);
    let reference = push(fleet, &dir, version).await;
    // The preflight names the namespace's absence (the previous rollout, done or aborted,
    // deleted to make way); the rollout accepts it, and the canary fails on it.
    let key = key("p256.pub");
    let cache = fleet.work.path().join("cache");
    let args = [
        "fleet",
        "preflight",
        "--placement",
        PLACEMENT,
        "--release",
        &reference,
        "--verify-key",
        &key,
        "--cache-dir",
        cache.to_str().expect("utf-8"),
    ];
    let (_, _, made_way) = common::run_cvo(&fleet.hub, &args).await;
    let (pf, code) = preflight(fleet, &reference, &[]).await;
    assert_eq!(code, 1, "{pf:#}");
    assert_eq!(risks_of(&pf, "c1"), [REJECTED], "{pf:#}");
    let (code, stdout, stderr) =
        rollout(fleet, &reference, "p256.pub", &["--accept-risks", REJECTED]).await;
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    status_until(fleet, &format!("the canary failing on {ns}"), |st, _| {
        cluster(st, "c1")["rollout"]["state"] == "failed"
    })
    .await;
    (reference, format!("{made_way}{stderr}"))
}

/// With the rollout stopped (`state`): restarts OCM's hub work controller, waits until it has
/// reached cvo's stop, makes namespace `ns` on both clusters (the canary's fix) and waits
/// until the hub sees the canary done, the status exiting with `code`; the status then.
async fn canary_fixed_while_stopped(fleet: &Fleet, ns: &str, state: &str, code: i32) -> Value {
    fault(fleet, &["restart", "hub-work"]);
    stopped_by_the_hub(fleet).await;
    for c in &fleet.clusters {
        create_namespace(c, ns).await;
    }
    status_until(
        fleet,
        &format!("c1 done as the hub sees it, {state}"),
        |st, exit| cluster(st, "c1")["rollout"]["state"] == "done" && exit == code,
    )
    .await
}

async fn a_rollout_is_paused_resumed_aborted_and_a_cluster_retried_across_hub_restarts(
    fleet: &Fleet,
) {
    let (c1, c2) = (fleet.cluster("c1"), fleet.cluster("c2"));
    let operators = operators(fleet, &fleet.work.path().join("r100"));
    let asked = asked_update;

    // Pause: 1.4.0 waits on c1 for a namespace; paused meanwhile, and OCM's work controller
    // restarted, c1 (asked) completes and c2 is never asked until resumed.
    let (reference, _) = rollout_failing_on(fleet, "r140", "1.4.0", "fleet-pause").await;
    let (code, _, stderr) = control(fleet, "pause", &[]).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("paused (was running)"), "{stderr}");
    fleet
        .transcript
        .note("1.4.0 rolled out the same way; its canary fails");
    fleet
        .transcript
        .record("cvo fleet pause --placement fleet/waves", &stderr);
    let (code, _, stderr) = control(fleet, "pause", &[]).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("already paused"), "{stderr}");
    // A retry while paused is refused: OCM would not write the work again.
    let (code, _, stderr) = control(fleet, "retry", &["c1"]).await;
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("is paused"), "{stderr}");
    let st = canary_fixed_while_stopped(fleet, "fleet-pause", "paused", 3).await;
    assert_eq!(st["target"]["state"], "paused", "{st:#}");
    assert_eq!(cluster(&st, "c2")["rollout"]["state"], "pending", "{st:#}");
    assert!(
        st["heldBy"][0]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("paused")),
        "{st:#}"
    );
    let (_, text, _) =
        common::run_cvo(&fleet.hub, &["fleet", "status", "--placement", PLACEMENT]).await;
    assert!(text.contains(": paused"), "{text}");
    fleet
        .transcript
        .note("the canary fixed; paused, the next wave is not asked");
    fleet.transcript.record(
        "cvo fleet status --placement fleet/waves          # exit code 3",
        &text,
    );
    // The controller saw c1 done (the status says so) and stayed stopped: c2 not asked.
    stopped_by_the_hub(fleet).await;
    assert_ne!(
        asked(&cv(c2).await.expect("cv")),
        "1.4.0",
        "c2 asked while paused"
    );
    // Written again while paused, the rollout stays paused.
    let (code, stdout, stderr) =
        rollout(fleet, &reference, "p256.pub", &["--accept-risks", REJECTED]).await;
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(stderr.contains("stays paused"), "{stderr}");
    assert_eq!(
        rollout_set(fleet).await.expect("set")["spec"]["placementRefs"][0]["name"],
        cvo::fleet::control::PAUSED
    );
    let (code, _, stderr) = control(fleet, "resume", &[]).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("running (was paused)"), "{stderr}");
    fleet
        .transcript
        .record("cvo fleet resume --placement fleet/waves", &stderr);
    status_until(fleet, "every cluster at 1.4.0", |_, code| code == 0).await;
    let (c1v, c2v) = (cv(c1).await.expect("cv"), cv(c2).await.expect("cv"));
    assert_started_after_completed(&c2v, &c1v);

    // Abort: 1.5.0's canary fails; aborted, and the hub controller restarted, c1 completes
    // once fixed and c2 is never asked. Resume refuses an aborted rollout.
    rollout_failing_on(fleet, "r150", "1.5.0", "fleet-abort").await;
    let (code, stdout, stderr) = control(fleet, "abort", &["-o", "json"]).await;
    assert_eq!(code, 0, "{stderr}");
    fleet
        .transcript
        .note("1.5.0 rolled out the same way; its canary fails");
    fleet
        .transcript
        .record("cvo fleet abort --placement fleet/waves -o json", &stdout);
    let st = canary_fixed_while_stopped(fleet, "fleet-abort", "aborted", 1).await;
    assert_eq!(st["target"]["state"], "aborted", "{st:#}");
    assert!(
        st["heldBy"][0]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("never asked")),
        "{st:#}"
    );
    stopped_by_the_hub(fleet).await;
    assert_ne!(
        asked(&cv(c2).await.expect("cv")),
        "1.5.0",
        "c2 asked after the abort"
    );
    let (_, text, _) =
        common::run_cvo(&fleet.hub, &["fleet", "status", "--placement", PLACEMENT]).await;
    assert!(text.contains(": aborted"), "{text}");
    fleet
        .transcript
        .note("the canary fixed; aborted, the next wave is never asked");
    fleet.transcript.record(
        "cvo fleet status --placement fleet/waves          # exit code 1",
        &text,
    );
    let (code, _, stderr) = control(fleet, "resume", &[]).await;
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("was aborted"), "{stderr}");
    fleet.transcript.record(
        "cvo fleet resume --placement fleet/waves          # exit code 1",
        &stderr,
    );

    // Retry: a new rollout (1.5.1: c2, never asked for 1.5.0, would refuse to skip a minor)
    // replaces the aborted one; its canary fails. With OCM's work
    // controller down, `retry c1` deletes c1's work; back up, the controller writes it anew,
    // and once fixed c1 completes and c2 follows.
    let (_, stderr) = rollout_failing_on(fleet, "r151", "1.5.1", "fleet-retry").await;
    assert!(
        stderr.contains("cvo-rollout-waves deleted: its rollout was aborted"),
        "{stderr}"
    );
    let before = rollout_works(fleet, "c1").await;
    assert_eq!(before.len(), 1, "{before:?}");
    fault(fleet, &["kill", "hub-work"]);
    let (code, _, stderr) = control(fleet, "retry", &["c1"]).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("cluster c1 asked again"), "{stderr}");
    fleet
        .transcript
        .note("1.5.1 rolled out; its canary fails; OCM's hub work controller down");
    fleet
        .transcript
        .record("cvo fleet retry --placement fleet/waves c1", &stderr);
    assert!(rollout_works(fleet, "c1").await.is_empty());
    create_namespace(c1, "fleet-retry").await;
    create_namespace(c2, "fleet-retry").await;
    fault(fleet, &["start", "hub-work"]);
    let after = common::poll_until("c1's work written anew", DEADLINE, || async {
        match rollout_works(fleet, "c1").await.as_slice() {
            [one] => Ok(one.clone()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    assert_ne!(after.1, before[0].1, "the same work: not written anew");
    status_until(fleet, "every cluster at 1.5.1", |_, code| code == 0).await;
    for o in operators {
        o.terminate().await;
    }
}

async fn install_refuses_a_cluster_whose_cluster_version_openshift_manages(fleet: &Fleet) {
    // OpenShift's own cluster-version operator writes c2's ClusterVersion (its field manager).
    let c2 = fleet.cluster("c2");
    let cvs = Api::<DynamicObject>::all_with(c2.client.clone(), &cluster_version());
    let mark = json!({"apiVersion": "config.openshift.io/v1", "kind": "ClusterVersion",
        "metadata": {"name": "version", "annotations": {"example.com/owner": "openshift"}}});
    cvs.patch(
        "version",
        &PatchParams::apply("cluster-version-operator"),
        &Patch::Apply(&mark),
    )
    .await
    .expect("write as OpenShift's CVO");
    status_until(fleet, "c2 reporting OpenShift's manager", |st, _| {
        cluster(st, "c2")["report"]["openshiftManager"] == "cluster-version-operator"
    })
    .await;
    let args = install_args(fleet);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, stdout, stderr) = common::run_cvo(&fleet.hub, &args).await;
    assert_eq!(code, 4, "{stdout}\n{stderr}");
    assert!(
        stderr
            .contains("cluster c2: ClusterVersion version is managed by cluster-version-operator"),
        "{stderr}"
    );
    assert!(!stderr.contains("cluster c1:"), "{stderr}");
    let mut forced = args.clone();
    forced.push("--force");
    let (code, _, stderr) = common::run_cvo(&fleet.hub, &forced).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("cvo-install-waves unchanged"), "{stderr}");
    // OpenShift's operator gone again: its fields released.
    let release = json!({"apiVersion": "config.openshift.io/v1", "kind": "ClusterVersion",
        "metadata": {"name": "version"}});
    cvs.patch(
        "version",
        &PatchParams::apply("cluster-version-operator"),
        &Patch::Apply(&release),
    )
    .await
    .expect("release the fields");
}

async fn uninstall_removes_the_operator_and_keeps_the_cluster_version(fleet: &Fleet) {
    let mut had = Vec::new();
    for c in &fleet.clusters {
        had.push(cv(c).await.is_some());
    }
    let (code, stdout, stderr) = control(fleet, "uninstall", &["-o", "json"]).await;
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let done: Value = serde_json::from_str(&stdout).expect("json");
    let deleted: Vec<&str> = done["deletedSets"]
        .as_array()
        .expect("deletedSets")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(deleted.contains(&"fleet/cvo-install-waves"), "{done:#}");
    assert!(
        done["kept"]
            .as_array()
            .expect("kept")
            .iter()
            .any(|k| k == "CustomResourceDefinition clusterversions.config.openshift.io"),
        "{done:#}"
    );
    // OCM's finalizer on each set goes once its works are deleted (c3's Placement's stay).
    common::poll_until(
        "cvo's sets of fleet/waves gone from the hub",
        DEADLINE,
        || async {
            let left: Vec<String> = sets(fleet)
                .list(&Default::default())
                .await
                .map_err(|e| e.to_string())?
                .items
                .into_iter()
                .filter_map(|s| s.metadata.name)
                .filter(|n| n.ends_with("-waves"))
                .collect();
            if left.is_empty() {
                Ok(())
            } else {
                Err(format!("left: {left:?}"))
            }
        },
    )
    .await;
    for (c, had) in fleet.clusters.iter().zip(had) {
        let client = c.client.clone();
        common::poll_until(
            &format!(
                "the operator, its keys and secret, and the executor gone from {}",
                c.name
            ),
            DEADLINE,
            || {
                let client = client.clone();
                async move {
                    let left = (
                        Api::<Deployment>::namespaced(client.clone(), "cluster-version")
                            .get_opt("cvo-operator")
                            .await
                            .map_err(|e| e.to_string())?
                            .is_some(),
                        Api::<ConfigMap>::namespaced(client.clone(), "cluster-version")
                            .get_opt("cvo-pull-config")
                            .await
                            .map_err(|e| e.to_string())?
                            .is_some(),
                        Api::<k8s_openapi::api::core::v1::Secret>::namespaced(
                            client.clone(),
                            "cluster-version",
                        )
                        .get_opt("cvo-pull-secret")
                        .await
                        .map_err(|e| e.to_string())?
                        .is_some(),
                        Api::<ServiceAccount>::namespaced(client.clone(), "cvo-fleet")
                            .get_opt("cvo-fleet-updater")
                            .await
                            .map_err(|e| e.to_string())?
                            .is_some(),
                        Api::<ClusterRoleBinding>::all(client.clone())
                            .get_opt("cvo-operator-least-privilege")
                            .await
                            .map_err(|e| e.to_string())?
                            .is_some(),
                    );
                    if left == (false, false, false, false, false) {
                        Ok(())
                    } else {
                        Err(format!(
                            "still there (deployment, keys, secret, executor, binding): {left:?}"
                        ))
                    }
                }
            },
        )
        .await;
        // Kept: the ClusterVersion (its history) and its CRD, and the namespace.
        assert_eq!(
            cv(c).await.is_some(),
            had,
            "ClusterVersion deleted on {}",
            c.name
        );
        let crd = Api::<
            k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
        >::all(c.client.clone())
        .get_opt("clusterversions.config.openshift.io")
        .await
        .expect("get the CRD");
        assert!(
            crd.is_some_and(|d| d.metadata.deletion_timestamp.is_none()),
            "the ClusterVersion CRD deleted on {}",
            c.name
        );
        let ns = Api::<Namespace>::all(c.client.clone())
            .get_opt("cluster-version")
            .await
            .expect("get namespace");
        assert!(
            ns.is_some_and(|n| n.metadata.deletion_timestamp.is_none()),
            "namespace deleted on {}",
            c.name
        );
    }
    let (code, _, stderr) = control(fleet, "uninstall", &[]).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("nothing to uninstall"), "{stderr}");
}

/// c3's Placement: the clusters labelled `wave=pods`, one decision group.
const PODS: &str = "fleet/pods";

/// The release baked into the operator's image for c3, at `version`: the operator's own
/// component of manifests-example (its namespace, CRDs, ServiceAccount, RBAC, Deployment of
/// image [`OPERATOR_IMAGE`], metrics Service, ClusterVersion) and the demo ConfigMap whose
/// data says `version`. The same objects at every version: the least-privilege RBAC that
/// `fleet install` derives from the first covers the next (by name).
fn operator_release(fleet: &Fleet, name: &str, version: &str) -> PathBuf {
    let dir = release(fleet, name, version, &[]);
    let example = repo().join("manifests-example");
    for entry in std::fs::read_dir(&example).expect("manifests-example") {
        let path = entry.expect("entry").path();
        let file = path
            .file_name()
            .expect("name")
            .to_string_lossy()
            .into_owned();
        if file.starts_with("0000_00_cluster-version-operator_") && !dir.join(&file).exists() {
            std::fs::copy(&path, dir.join(&file)).expect("copy");
        }
    }
    dir
}

/// Pushes `dir` to c3's registry (on its node's bridge) as `fleet/release:TAG`, signed with
/// the test key when `signed`; the `oci://…@sha256:…` reference.
async fn push_for_pods(fleet: &Fleet, dir: &Path, tag: &str, signed: bool) -> String {
    let host = fleet.pods.registry.host();
    let target = format!("oci://{host}/fleet/release:{tag}");
    let sign_key = key("p256.pem");
    let mut args = vec![
        "push",
        "--release",
        dir.to_str().expect("utf-8"),
        &target,
        "--insecure-registry",
        &host,
    ];
    if signed {
        args.extend(["--sign-key", &sign_key]);
    }
    let (code, stdout, stderr) = common::run_cvo(&fleet.hub, &args).await;
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let digest = stdout
        .lines()
        .next()
        .and_then(|l| l.rsplit_once('@'))
        .expect("REPO:TAG@sha256:…")
        .1;
    format!("oci://{host}/fleet/release@{digest}")
}

/// `cvo fleet status --placement fleet/pods -o json` until `done` holds; the status then.
async fn pods_status_until(fleet: &Fleet, what: &str, done: impl Fn(&Value, i32) -> bool) -> Value {
    common::poll_until(what, DEADLINE, || async {
        let (code, stdout, stderr) = common::run_cvo(
            &fleet.hub,
            &["fleet", "status", "--placement", PODS, "-o", "json"],
        )
        .await;
        let v: Value = serde_json::from_str(&stdout)
            .map_err(|e| format!("status -o json: {e}\n{stdout}\n{stderr}"))?;
        if done(&v["status"], code) {
            Ok(v["status"].clone())
        } else {
            Err(format!("exit code {code}: {:#}", v["status"]))
        }
    })
    .await
}

/// Builds the operator's image (the Dockerfile's final stage: this build's `cvo`, stripped,
/// and `release` at /release) as [`OPERATOR_IMAGE`] and imports it into c3's node.
fn build_operator_image(fleet: &Fleet, release: &Path) {
    let binary = fleet.work.path().join("cvo-stripped");
    let status = std::process::Command::new("strip")
        .arg("-o")
        .arg(&binary)
        .arg(env!("CARGO_BIN_EXE_cvo"))
        .status()
        .expect("run strip");
    assert!(status.success(), "strip");
    let args = common::dockerfile::final_stage_args(&binary, release)
        .unwrap_or_else(|e| panic!("the Dockerfile's final stage: {e}"));
    let out = std::process::Command::new("python3")
        .arg(fleet.shared.join("realk8s/image.py"))
        .arg(format!("--name={OPERATOR_IMAGE}"))
        .args(&args)
        .arg("--import")
        .arg(format!("--ctr={}", fleet.pods.ctr.display()))
        .arg(format!("--address={}", fleet.pods.containerd))
        .output()
        .expect("run image.py");
    assert!(
        out.status.success(),
        "image.py: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

async fn the_operator_pod_fleet_install_puts_on_a_node_updates_and_refuses_an_unsigned_release(
    fleet: &Fleet,
) {
    let c3 = &fleet.pods.cluster;
    let registry = fleet.pods.registry.host();
    let placement = "apiVersion: cluster.open-cluster-management.io/v1beta1\nkind: Placement\nmetadata: {name: pods, namespace: fleet}\nspec:\n  clusterSets: [global]\n  predicates:\n  - requiredClusterSelector: {labelSelector: {matchLabels: {wave: pods}}}\n  decisionStrategy:\n    groupStrategy:\n      clustersPerDecisionGroup: \"100%\"\n      decisionGroups:\n      - groupName: pods\n        groupClusterSelector: {labelSelector: {matchLabels: {wave: pods}}}\n";
    let file = fleet.work.path().join("placement-pods.yaml");
    std::fs::write(&file, placement).expect("write the Placement");
    for f in [fleet.ocm("examples/placement-waves.yaml"), file] {
        let out = std::process::Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&fleet.hub)
            .args(["apply", "-f"])
            .arg(&f)
            .output()
            .expect("run kubectl");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // The image holds release A (1.0.0); fleet install lays its operator down on c3, with the
    // key it verifies with and the registry it reaches over plain HTTP.
    let a = operator_release(fleet, "pods-a", "1.0.0");
    build_operator_image(fleet, &a);
    let install = [
        "fleet",
        "install",
        "--placement",
        PODS,
        "--image",
        OPERATOR_IMAGE,
        "--release",
        a.to_str().expect("utf-8"),
        "--verify-key",
        &key("p256.pub"),
        "--insecure-registry",
        &registry,
    ];
    let (code, stdout, stderr) = common::run_cvo(&fleet.hub, &install).await;
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(stderr.contains("cvo-install-pods created"), "{stderr}");
    // Its Pod runs on the node, and installs release A: ClusterVersion 1.0.0 Completed.
    let pods: Api<k8s_openapi::api::core::v1::Pod> =
        Api::namespaced(c3.client.clone(), "cluster-version");
    common::poll_until(
        "the operator's Pod ready on c3's node",
        DEADLINE,
        || async {
            let list = pods
                .list(
                    &kube::api::ListParams::default().labels("app.kubernetes.io/name=cvo-operator"),
                )
                .await
                .map_err(|e| e.to_string())?;
            let ready = list.items.iter().any(|p| {
                p.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
            });
            if ready {
                Ok(())
            } else {
                Err(format!("{} pod(s), none ready", list.items.len()))
            }
        },
    )
    .await;
    cv_until(c3, "c3 at 1.0.0, installed by its Pod", |v| {
        completed(v, "1.0.0")
    })
    .await;
    let (code, _, stderr) =
        common::run_cvo(&fleet.hub, &["fleet", "observe", "--placement", PODS]).await;
    assert_eq!(code, 0, "{stderr}");
    pods_status_until(fleet, "c3 reporting 1.0.0", |st, code| {
        code == 0 && cluster(st, "c3")["report"]["history"][0]["version"] == "1.0.0"
    })
    .await;
    // Signed B through the Pod: pulled by digest from the registry on the node's bridge,
    // verified, completed.
    let b = operator_release(fleet, "pods-b", "1.1.0");
    let signed = push_for_pods(fleet, &b, "1.1.0", true).await;
    let key_file = key("p256.pub");
    let rollout_args = |reference: &str, verify: bool| {
        let mut args = vec![
            "fleet".to_owned(),
            "rollout".to_owned(),
            "--placement".to_owned(),
            PODS.to_owned(),
            "--release".to_owned(),
            reference.to_owned(),
            "--insecure-registry".to_owned(),
            registry.clone(),
            "--cache-dir".to_owned(),
            fleet.work.path().join("cache-pods").display().to_string(),
        ];
        if verify {
            args.extend(["--verify-key".to_owned(), key_file.clone()]);
        }
        args
    };
    // First the Pod's preflight of it (it pulls and verifies B, and checks the update).
    let args = rollout_args(&signed, true);
    let (pf, code) = preflight_answered(
        fleet,
        PODS,
        &signed,
        &args[6..].iter().map(String::as_str).collect::<Vec<_>>(),
    )
    .await;
    assert_eq!(code, 0, "{pf:#}");
    assert_eq!(answered(&pf, "c3")["verdict"], "clean", "{pf:#}");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, stdout, stderr) = common::run_cvo(&fleet.hub, &args).await;
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    pods_status_until(fleet, "c3 at 1.1.0", |_, code| code == 0).await;
    let v = cv(c3).await.expect("c3's ClusterVersion");
    assert!(completed(&v, "1.1.0"), "{:#}", v["status"]["history"][0]);
    assert_eq!(v["status"]["history"][0]["verified"], true);
    let settings = Api::<ConfigMap>::namespaced(c3.client.clone(), "fleet-demo")
        .get("settings")
        .await
        .expect("settings");
    assert_eq!(settings.data.expect("data")["version"], "1.1.0");
    // Unsigned C, written with the hub's check bypassed (no --verify-key at the hub): the
    // Pod refuses it itself, and status names c3 and the reason.
    let c = operator_release(fleet, "pods-c", "1.2.0");
    let unsigned = push_for_pods(fleet, &c, "1.2.0", false).await;
    let mut args = rollout_args(&unsigned, false);
    // No preflight answer from c3 for it: forced past that too.
    args.push("--force".to_owned());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, stdout, stderr) = common::run_cvo(&fleet.hub, &args).await;
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(stderr.contains("is not verified at the hub"), "{stderr}");
    assert!(
        stdout.contains("forced past on 1 cluster(s)")
            && stdout.contains("c3: no answer to the preflight"),
        "{stdout}"
    );
    let st = pods_status_until(fleet, "c3 refusing the unsigned release", |st, code| {
        code == 1
            && cluster(st, "c3")["rollout"]["reason"]
                .as_str()
                .is_some_and(|r| r.contains("ImageVerificationFailed"))
    })
    .await;
    assert_eq!(st["heldBy"][0]["cluster"], "c3", "{st:#}");
    let v = cv(c3).await.expect("c3's ClusterVersion");
    assert!(
        completed(&v, "1.1.0"),
        "nothing of C applied: {:#}",
        v["status"]["history"][0]
    );
    let (_, text, _) = common::run_cvo(&fleet.hub, &["fleet", "status", "--placement", PODS]).await;
    assert!(
        text.contains("c3") && text.contains("ImageVerificationFailed"),
        "{text}"
    );
}

async fn the_walkthrough_in_docs_fleet_md_is_what_this_tier_ran(fleet: &Fleet) {
    let doc = repo().join("docs/fleet.md");
    if let Err(e) = crate::walkthrough::check(&doc, &fleet.transcript.text()) {
        panic!("{e}");
    }
}
