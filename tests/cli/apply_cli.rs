//! `cvo apply` / `cvo plan` as a user runs them: exit codes, JSON shape, kubeconfig. The
//! binary reaches the test cluster (`tests/common`) through a kubeconfig file: the real
//! cluster's, or one for the in-memory server served on loopback.

use crate::common;

use std::path::Path;

use serde_json::Value;

/// Exit code and stdout.
async fn cvo(kubeconfig: &Path, args: &[&str]) -> (i32, String) {
    let (code, stdout, _) = common::run_cvo(kubeconfig, args).await;
    (code, stdout)
}

fn release(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let files: Vec<(&str, String)> = files.iter().map(|(n, t)| (*n, t.to_string())).collect();
    common::write_release(dir.path(), Some("1.0.0"), &files);
    dir
}

/// The manifests of the test, in namespace `ns`.
struct Manifests {
    ns: String,
}

impl Manifests {
    fn namespace(&self) -> String {
        format!(
            "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {}\n  labels: {{{}: cli}}\n",
            self.ns,
            common::TEST_LABEL
        )
    }

    fn settings(&self, value: &str) -> String {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: {}\ndata:\n  a: {value}\n",
            self.ns
        )
    }

    fn held(&self, delete: Option<&str>) -> String {
        let meta = match delete {
            None => format!("  finalizers: [{}]\n", common::TEST_FINALIZER),
            Some(value) => {
                format!("  annotations:\n    release.openshift.io/delete: \"{value}\"\n")
            }
        };
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: held\n  namespace: {}\n{meta}",
            self.ns
        )
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_codes_and_json_report() {
    let tc = common::cluster().await;
    // `cvo apply` reads and writes ClusterVersion `version`, which other tests of this binary own.
    let _turn = common::sync_turn(&tc).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = tc.kubeconfig_file(dir.path()).await;
    let m = Manifests {
        ns: common::unique("cli"),
    };
    tc.track_cluster_object(&common::builtin("", "v1", "Namespace", "namespaces"), &m.ns);
    tc.hold(&common::configmaps(), Some(&m.ns), "held");
    let path = |d: &tempfile::TempDir| d.path().display().to_string();

    // 2: unreadable input.
    let (code, _) = cvo(&kubeconfig, &["apply", "--release", "/nonexistent/release"]).await;
    assert_eq!(code, 2);

    // 0: everything applied; JSON shape of docs/apply.md, "Output".
    let first = release(&[
        ("0000_10_a_ns.yaml", &m.namespace()),
        ("0000_20_a_cm.yaml", &m.settings("b")),
        ("0000_20_b_held.yaml", &m.held(None)),
    ]);
    let (code, out) = cvo(
        &kubeconfig,
        &["apply", "--release", &path(&first), "-o", "json"],
    )
    .await;
    assert_eq!(code, 0, "{out}");
    let report: Value = serde_json::from_str(&out).expect("json");
    assert_eq!(report["release"]["version"], "1.0.0");
    assert_eq!(report["summary"]["total"], 3);
    assert_eq!(report["summary"]["created"], 3);
    for key in [
        "updated",
        "unchanged",
        "deleted",
        "deletionInProgress",
        "alreadyAbsent",
        "skipped",
        "failed",
    ] {
        assert_eq!(report["summary"][key], 0, "{key}");
    }
    let r = &report["results"][1];
    for key in [
        "file",
        "document",
        "kind",
        "apiVersion",
        "namespace",
        "name",
        "action",
        "error",
    ] {
        assert!(r.get(key).is_some(), "result lacks {key}: {r}");
    }
    assert_eq!(
        (r["kind"].as_str(), r["name"].as_str(), r["action"].as_str()),
        (Some("ConfigMap"), Some("settings"), Some("created"))
    );
    let types: Vec<_> = report["conditions"]
        .as_array()
        .expect("conditions")
        .iter()
        .map(|c| c["type"].clone())
        .collect();
    assert_eq!(
        types,
        ["Available", "Progressing", "Failing", "Upgradeable"]
    );

    // plan: a changed ConfigMap is an update with a field diff; nothing is written.
    let settings = tc.dynamic(&common::configmaps(), Some(&m.ns));
    let rv = settings
        .get("settings")
        .await
        .expect("get")
        .metadata
        .resource_version;
    let changed = release(&[
        ("0000_10_a_ns.yaml", &m.namespace()),
        ("0000_20_a_cm.yaml", &m.settings("c")),
    ]);
    let (code, out) = cvo(
        &kubeconfig,
        &["plan", "--release", &path(&changed), "-o", "json"],
    )
    .await;
    assert_eq!(code, 0, "{out}");
    let plan: Value = serde_json::from_str(&out).expect("json");
    assert_eq!(plan["results"][1]["action"], "updated");
    assert_eq!(plan["results"][1]["changes"][0]["path"], "/data/a");
    let after = settings
        .get("settings")
        .await
        .expect("get")
        .metadata
        .resource_version;
    assert_eq!(after, rv, "plan wrote something");

    // 3: a deletion held by a finalizer.
    let deleting = release(&[
        ("0000_10_a_ns.yaml", &m.namespace()),
        ("0000_20_b_held.yaml", &m.held(Some("true"))),
    ]);
    let (code, out) = cvo(&kubeconfig, &["apply", "--release", &path(&deleting)]).await;
    assert_eq!(code, 3, "{out}");
    assert!(
        out.contains("Upgradeable=False ResourceDeletionInProgress"),
        "{out}"
    );
    let (code, out) = cvo(
        &kubeconfig,
        &[
            "apply",
            "--release",
            &path(&deleting),
            "--stuck-after",
            "0s",
        ],
    )
    .await;
    assert_eq!(code, 3, "{out}");
    assert!(
        out.contains("ResourceDeletionStuck")
            && out.contains(&format!(
                "ConfigMap {}/held (finalizers: {})",
                m.ns,
                common::TEST_FINALIZER
            )),
        "{out}"
    );

    // 1: a manifest failed.
    let bad = release(&[
        ("0000_10_a_ns.yaml", &m.namespace()),
        ("0000_20_c_bad.yaml", &m.held(Some("false"))),
    ]);
    let (code, out) = cvo(&kubeconfig, &["apply", "--release", &path(&bad)]).await;
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("release.openshift.io/delete must be exactly"),
        "{out}"
    );
}

#[test]
fn in_memory_quickstart_shows_the_stuck_deletion() {
    let manifests = Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests-example");
    let out = common::cli::cvo()
        .args([
            "apply",
            "--in-memory",
            "--stuck-after",
            "0s",
            "-o",
            "json",
            "--release",
        ])
        .arg(&manifests)
        .output()
        .expect("run");
    // The seeded legacy Widget keeps a finalizer nothing removes: exit 3.
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(report["summary"]["failed"], 0);
    assert_eq!(report["summary"]["deletionInProgress"], 1);
    let upgradeable = report["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "Upgradeable"))
        .expect("Upgradeable");
    assert_eq!(upgradeable["reason"], "ResourceDeletionStuck");
    assert!(
        upgradeable["message"]
            .as_str()
            .is_some_and(|m| m
                .contains("Widget widget-operator/legacy (finalizers: example.com/never-removed)")),
        "{upgradeable}"
    );
}

/// Issue 34 item 8: the quickstart's report as a newcomer reads it. Its one delete manifest
/// whose object is already absent is one manifest, in words that say what to make of it; the
/// table's `excluded` row (a capability or feature gate this cluster does not enable) and the
/// manifest the release's feature set leaves out (not in the table) are told apart.
#[test]
fn in_memory_quickstart_report_reads_plainly() {
    let manifests = Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests-example");
    let out = common::cli::cvo()
        .args(["apply", "--in-memory", "--release"])
        .arg(&manifests)
        .output()
        .expect("run");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(3), "{text}");
    assert!(
        text.contains("\nwarning: 1 delete manifest names an object that is already absent and that cvo never deleted on this cluster, according to its deletion record: Deployment widget-operator/widget-controller. Nothing to delete; check that it names the object you meant (-v logs its file)\n"),
        "{text}"
    );
    let row = |label: &str, n: usize| format!("\n{label:<22} {n:>6}\n");
    assert!(text.contains(&row("excluded", 0)), "{text}");
    assert!(
        text.contains(&format!(
            "{}1 of the release's 33 manifests is not in the table: left out by the feature set (1)\n",
            row("total", 32)
        )),
        "{text}"
    );
    assert!(!text.contains("excluded:"), "{text}");
}

/// The warnings of `cvo apply --in-memory -o json` over `release`, after asserting its exit code.
fn in_memory_warnings(release: &Path, exit: i32) -> Vec<String> {
    let out = common::cli::cvo()
        .args(["apply", "--in-memory", "-o", "json", "--release"])
        .arg(release)
        .timeout(std::time::Duration::from_secs(50))
        .output()
        .expect("run");
    assert_eq!(
        out.status.code(),
        Some(exit),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).expect("json");
    report["warnings"]
        .as_array()
        .map(|w| {
            w.iter()
                .filter_map(|w| w.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// A cluster without ClusterVersion is warned about only when the release does not ship one:
/// manifests-example ships it (the install creates it), a bare release does not.
#[test]
fn no_cluster_version_warning_only_when_the_release_ships_none() {
    let no_cv = "the cluster has no ClusterVersion version";
    let manifests = Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests-example");
    // The seeded legacy Widget keeps a finalizer nothing removes: exit 3.
    let warnings = in_memory_warnings(&manifests, 3);
    assert!(!warnings.iter().any(|w| w.contains(no_cv)), "{warnings:?}");
    let bare = release(&[(
        "0000_10_app_00_ns.yaml",
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: no-cluster-version\n",
    )]);
    let warnings = in_memory_warnings(bare.path(), 0);
    assert!(
        warnings
            .iter()
            .any(|w| w.contains(no_cv) && w.contains("manifests-example")),
        "{warnings:?}"
    );
}

/// With `--in-memory` nothing runs the release's operators, so `cvo` plays them: a release
/// whose run level 20 waits for its ClusterOperator (and whose CRD comes in the same release)
/// completes at once instead of waiting for the health timeout.
#[test]
fn in_memory_operators_report_the_release() {
    let dir = tempfile::tempdir().expect("tempdir");
    let crd = "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: clusteroperators.config.openshift.io\nspec:\n  group: config.openshift.io\n  scope: Cluster\n  names:\n    kind: ClusterOperator\n    plural: clusteroperators\n    singular: clusteroperator\n    listKind: ClusterOperatorList\n  versions:\n  - name: v1\n    served: true\n    storage: true\n    subresources:\n      status: {}\n    schema:\n      openAPIV3Schema:\n        type: object\n        x-kubernetes-preserve-unknown-fields: true\n";
    let files = [
        ("0000_00_co_00_crd.yaml", crd.to_owned()),
        (
            "0000_10_dns_00_operator.yaml",
            "apiVersion: config.openshift.io/v1\nkind: ClusterOperator\nmetadata:\n  name: dns\nstatus:\n  versions:\n  - name: operator\n    version: 4.2.0\n".to_owned(),
        ),
        (
            "0000_20_next_00_ns.yaml",
            "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: after-dns\n".to_owned(),
        ),
    ];
    for (name, text) in &files {
        std::fs::write(dir.path().join(name), text).expect("write");
    }
    let out = common::cli::cvo()
        .args([
            "apply",
            "--in-memory",
            // Shorter than the test's own timeout: a wait that does not end is reported by
            // cvo, naming what it waited on, instead of the process being killed silently.
            "--health-timeout",
            "20s",
            "-o",
            "json",
            "--release",
        ])
        .arg(dir.path())
        .timeout(std::time::Duration::from_secs(50))
        .output()
        .expect("run");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(report["summary"]["failed"], 0, "{report}");
    assert_eq!(report["summary"]["created"], 3, "{report}");
}

/// Exit code and everything printed (stdout and stderr).
async fn cvo_all(kubeconfig: &Path, args: &[&str]) -> (i32, String) {
    let (code, stdout, stderr) = common::run_cvo(kubeconfig, args).await;
    (code, stdout + &stderr)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secret_values_are_never_printed() {
    let tc = common::cluster().await;
    // `cvo apply` reads and writes ClusterVersion `version`, which other tests of this binary own.
    let _turn = common::sync_turn(&tc).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = tc.kubeconfig_file(dir.path()).await;
    let ns = tc.namespace("cli-secret").await;
    let secret = |data: &str, string: &str| {
        format!(
            "apiVersion: v1\nkind: Secret\nmetadata:\n  name: creds\n  namespace: {ns}\ndata:\n  password: {data}\nstringData:\n  token: {string}\n"
        )
    };
    let (old_plain, new_plain) = ("hunter2-old-value", "s3cr3t-new-value");
    let b64 = |s: &str| {
        use std::io::Write;
        let mut child = std::process::Command::new("base64")
            .arg("-w0")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("base64");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(s.as_bytes())
            .expect("write");
        String::from_utf8(child.wait_with_output().expect("base64").stdout).expect("utf8")
    };
    let first = release(&[(
        "0000_10_a_secret.yaml",
        &secret(&b64(old_plain), "tok-old-123"),
    )]);
    let second = release(&[(
        "0000_10_a_secret.yaml",
        &secret(&b64(new_plain), "tok-new-456"),
    )]);
    let path = |d: &tempfile::TempDir| d.path().display().to_string();
    let mut printed = String::new();
    let (code, out) = cvo_all(&kubeconfig, &["-vv", "apply", "--release", &path(&first)]).await;
    assert_eq!(code, 0, "{out}");
    printed.push_str(&out);
    for args in [
        vec!["plan", "--release"],
        vec!["-vv", "plan", "-o", "json", "--release"],
        vec!["-v", "plan", "--release"],
    ] {
        let mut args = args.clone();
        let p = path(&second);
        args.push(&p);
        let (code, out) = cvo_all(&kubeconfig, &args).await;
        assert_eq!(code, 0, "{out}");
        printed.push_str(&out);
    }
    assert!(
        printed.contains("*** (after)"),
        "the change is shown masked: {printed}"
    );
    let (code, out) = cvo_all(
        &kubeconfig,
        &["-vv", "apply", "-o", "json", "--release", &path(&second)],
    )
    .await;
    assert_eq!(code, 0, "{out}");
    printed.push_str(&out);
    for value in [old_plain, new_plain, "tok-old-123", "tok-new-456"] {
        assert!(!printed.contains(value), "{value} was printed");
        assert!(
            !printed.contains(&b64(value)),
            "{value} was printed in base64"
        );
    }
}

/// `cvo apply` killed (SIGKILL) while a synchronous deletion waits leaves the gate closed:
/// the stored ClusterVersion said `Upgradeable=False` before the wait, and still does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_killed_during_a_synchronous_deletion_leaves_the_gate_closed() {
    let tc = common::cluster().await;
    let (_guard, cv_resource) = common::cluster_version(&tc).await;
    let cvs = common::create_cluster_version(&tc, &cv_resource).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = tc.kubeconfig_file(dir.path()).await;
    let ns = tc.namespace("cli-gate").await;
    let m = Manifests { ns: ns.clone() };
    let configmaps = tc.dynamic(&common::configmaps(), Some(&ns));
    let held = common::object(serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "held", "namespace": ns, "finalizers": [common::TEST_FINALIZER]}}));
    configmaps
        .create(&Default::default(), &held)
        .await
        .expect("create held");
    tc.hold(&common::configmaps(), Some(&ns), "held");
    let deleting = release(&[("0000_20_b_held.yaml", &m.held(Some("true")))]);
    let mut child = common::cli::process()
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["apply", "--release"])
        .arg(deleting.path())
        .args([
            "--deletion-strategy",
            "synchronous",
            "--deletion-timeout",
            "60s",
        ])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn cvo");
    let object = format!("ConfigMap {ns}/held");
    common::gate_closed(&cvs, tc.deadline()).await;
    common::assert_gate_closed(&cvs, &object, "1.0.0").await;
    // Still waiting on the held object (the deletion cannot finish), then killed.
    assert_eq!(child.try_wait().expect("try_wait"), None, "cvo apply ended");
    child.kill().expect("kill -9");
    tokio::task::spawn_blocking(move || child.wait())
        .await
        .expect("join")
        .expect("wait");
    common::assert_gate_closed(&cvs, &object, "1.0.0").await;

    common::strip_finalizers(&tc, &ns, "held").await;
    cvs.delete("version", &Default::default())
        .await
        .expect("delete cv");
}

/// `cvo apply` reports `RetrievedUpdates` in its output and in the ClusterVersion it writes:
/// `False NoUpstream` without an update service, the service's answer (one request, bounded
/// in time) once `spec.upstream` and `spec.channel` name one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_reports_retrieved_updates_no_upstream_then_the_served_graph() {
    use common::graph::{CLUSTER_ID, GraphServer, Reply, example_graph};
    let tc = common::cluster().await;
    let (_guard, cv_resource) = common::cluster_version(&tc).await;
    let cvs = common::create_cluster_version(&tc, &cv_resource).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = tc.kubeconfig_file(dir.path()).await;
    let ns = tc.namespace("cli-updates").await;
    let m = Manifests { ns: ns.clone() };
    let rel = tempfile::tempdir().expect("tempdir");
    common::write_release(
        rel.path(),
        Some("1.4.0"),
        &[("0000_10_a_settings.yaml", m.settings("one"))],
    );
    let release_dir = rel.path().to_str().expect("utf-8 path");

    let (code, out) = cvo(&kubeconfig, &["apply", "--release", release_dir]).await;
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("RetrievedUpdates=False NoUpstream: No updateService server has been set to retrieve updates.\n"),
        "{out}"
    );
    let (status, reason, _) = common::stored_condition(&cvs, "RetrievedUpdates")
        .await
        .expect("stored");
    assert_eq!((status.as_str(), reason.as_str()), ("False", "NoUpstream"));
    let stored = cvs.get("version").await.expect("cv");
    assert_eq!(
        stored.data["status"].get("availableUpdates"),
        Some(&Value::Null)
    );

    let server = GraphServer::start(Reply::Json(example_graph().to_string()));
    cvs.patch(
        "version",
        &Default::default(),
        &kube::api::Patch::Merge(serde_json::json!({"spec": {
            "clusterID": CLUSTER_ID, "upstream": server.url, "channel": "stable-1"}})),
    )
    .await
    .expect("set the update service");
    let (code, out) = cvo(
        &kubeconfig,
        &["apply", "--release", release_dir, "-o", "json"],
    )
    .await;
    assert_eq!(code, 0, "{out}");
    let report: Value = serde_json::from_str(&out).expect("json report");
    let condition = report["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "RetrievedUpdates"))
        .unwrap_or_else(|| panic!("no RetrievedUpdates in {report}"));
    assert_eq!(condition["status"], "True", "{condition}");
    let stored = cvs.get("version").await.expect("cv");
    let versions: Vec<&str> = stored.data["status"]["availableUpdates"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|u| u["version"].as_str())
        .collect();
    assert_eq!(versions, ["1.5.0", "1.4.1"]);
    assert_eq!(server.requests().len(), 1, "{:?}", server.requests());

    // A service that cannot be reached, named with credentials: RemoteFailed, the password
    // neither printed nor stored, the last good list kept.
    let closed = common::operator::free_port();
    cvs.patch(
        "version",
        &Default::default(),
        &kube::api::Patch::Merge(serde_json::json!({"spec": {
            "upstream": format!("http://admin:hunter2@127.0.0.1:{closed}/graph")}})),
    )
    .await
    .expect("set the update service");
    let (code, out, err) = common::run_cvo(&kubeconfig, &["apply", "--release", release_dir]).await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("RetrievedUpdates=False RemoteFailed: Unable to retrieve available updates: Get \"http://***@127.0.0.1:"),
        "{out}"
    );
    let stored = cvs.get("version").await.expect("cv");
    for text in [out, err, stored.data["status"].to_string()] {
        assert!(!text.contains("hunter2"), "{text}");
    }
    assert_eq!(
        stored.data["status"]["availableUpdates"][0]["version"],
        "1.5.0"
    );
    cvs.delete("version", &Default::default())
        .await
        .expect("delete cv");
}

/// The new user: 3,000 ConfigMaps without profile annotations and two with them. The
/// release is read in the CVO's default profile, which leaves the 3,000 out: `apply` warns
/// before applying and reports `excluded.profile: 3000`.
#[test]
fn apply_warns_when_the_profile_leaves_out_most_of_the_release() {
    let dir = tempfile::tempdir().expect("tempdir");
    let profiled = |name: &str, profile: &str| {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: default\n  annotations:\n    include.release.openshift.io/{profile}: \"true\"\n"
        )
    };
    let mut text = String::new();
    for i in 0..3000 {
        text.push_str(&format!(
            "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-{i}\n  namespace: default\n"
        ));
    }
    std::fs::write(dir.path().join("0000_50_app_00_many.yaml"), text).unwrap();
    std::fs::write(
        dir.path().join("0000_50_app_01_ha.yaml"),
        profiled("ha", "self-managed-high-availability"),
    )
    .unwrap();
    std::fs::write(
        dir.path().join("0000_50_app_02_hs.yaml"),
        profiled("ha-too", "self-managed-high-availability"),
    )
    .unwrap();
    let out = common::cli::cvo()
        .args([
            "apply",
            "--in-memory",
            "--wait",
            "none",
            "-o",
            "json",
            "--release",
        ])
        .arg(dir.path())
        .timeout(std::time::Duration::from_secs(120))
        .output()
        .expect("run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("warning: 3000 of 3002 manifests are left out: not included in profile `self-managed-high-availability`"),
        "{stderr}"
    );
    let report: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(
        report["excluded"],
        serde_json::json!({"profile": 3000, "featureSet": 0, "featureGate": 0, "majorVersion": 0, "capability": 0, "exclude": 0})
    );
    assert_eq!(report["summary"]["total"], 2, "{}", report["summary"]);
}

/// `plan` (and `apply`) take the feature gates from `--feature-gates` when given, else from
/// the cluster's FeatureGate `cluster` (none here: no gate enabled); the report names them and
/// counts what they leave out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_takes_feature_gates_from_the_flag_or_the_cluster() {
    let tc = common::cluster().await;
    let _turn = common::sync_turn(&tc).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = tc.kubeconfig_file(dir.path()).await;
    let ns = tc.namespace("cli-gates").await;
    let gated = |name: &str, gates: &str| {
        common::configmap(
            &ns,
            name,
            &format!("  annotations:\n    release.openshift.io/feature-gate: \"{gates}\"\n"),
            &[("v", "1")],
        )
    };
    let rel = release(&[
        ("0000_20_a_needs-a.yaml", &gated("needs-a", "A")),
        ("0000_20_b_not-a.yaml", &gated("not-a", "-A")),
    ]);
    let path = rel.path().display().to_string();
    let action = |report: &Value, name: &str| {
        report["results"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == name)
            .map(|r| r["action"].as_str().unwrap().to_owned())
    };
    let (code, out) = cvo(&kubeconfig, &["plan", "--release", &path, "-o", "json"]).await;
    assert_eq!(code, 0, "{out}");
    let report: Value = serde_json::from_str(&out).expect("json");
    assert_eq!(report["featureGates"], serde_json::json!([]));
    assert_eq!(report["excluded"]["featureGate"], 1, "{report:#}");
    assert_eq!(action(&report, "needs-a").as_deref(), Some("excluded"));
    assert_eq!(action(&report, "not-a").as_deref(), Some("created"));

    let (code, out) = cvo(
        &kubeconfig,
        &[
            "plan",
            "--feature-gates",
            "A",
            "--release",
            &path,
            "-o",
            "json",
        ],
    )
    .await;
    assert_eq!(code, 0, "{out}");
    let report: Value = serde_json::from_str(&out).expect("json");
    assert_eq!(report["featureGates"], serde_json::json!(["A"]));
    assert_eq!(report["excluded"]["featureGate"], 1, "{report:#}");
    assert_eq!(action(&report, "needs-a").as_deref(), Some("created"));
    assert_eq!(action(&report, "not-a").as_deref(), Some("excluded"));
}
