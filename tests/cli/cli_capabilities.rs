//! `cvo capabilities` end to end: the release's default, a ClusterVersion file, the live
//! ClusterVersion of the test cluster (both servers), an update from `--previous`, what fails
//! closed (exit code 2), and the OpenShift corpus with `baselineCapabilitySet: None`.

use crate::common;

use std::path::{Path, PathBuf};

use kube::api::{Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::common::needs::corpus;
use crate::common::release::{configmap, write_release};

const CAP: &str = "capability.openshift.io/name";

fn cap_meta(caps: &str) -> String {
    format!("  annotations:\n    {CAP}: \"{caps}\"\n")
}

/// A release with a catalogue (Console, Insights, Storage; set v1 = Console) and a manifest
/// per capability, one needing two, one naming an unknown capability, one with none.
fn release(dir: &Path) {
    write_release(
        dir,
        None,
        &[
            (
                "capabilities.yaml",
                "known: [Console, Insights, Storage]\nsets:\n  None: []\n  v1: [Console]\n".into(),
            ),
            (
                "0000_10_app_00_namespace.yaml",
                "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: app\n".into(),
            ),
            (
                "0000_50_app_01_console.yaml",
                configmap("app", "console", &cap_meta("Console"), &[]),
            ),
            (
                "0000_50_app_02_insights.yaml",
                configmap("app", "insights", &cap_meta("Insights"), &[]),
            ),
            (
                "0000_50_app_03_storage.yaml",
                configmap("app", "storage", &cap_meta("Storage+Console"), &[]),
            ),
            (
                "0000_50_app_04_bogus.yaml",
                configmap("app", "bogus", &cap_meta("Bogus"), &[]),
            ),
            (
                "0000_50_app_05_plain.yaml",
                configmap("app", "plain", "", &[]),
            ),
        ],
    );
}

/// `cvo capabilities ARGS -o json` that must succeed: the report and stderr.
fn json_of(args: &[&str]) -> (Value, String) {
    let out = common::cli::cvo()
        .arg("capabilities")
        .args(args)
        .args(["-o", "json"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    (
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {stderr}")),
        stderr,
    )
}

fn row<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["capabilities"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == name)
        .unwrap_or_else(|| panic!("no row {name}: {report:#}"))
}

fn cluster_version(spec: Value, status: Value) -> String {
    serde_json::to_string(&json!({
        "apiVersion": "config.openshift.io/v1",
        "kind": "ClusterVersion",
        "metadata": {"name": "version"},
        "spec": spec,
        "status": status,
    }))
    .unwrap()
}

#[test]
fn the_release_default_enables_every_known_capability() {
    let dir = tempfile::tempdir().unwrap();
    release(dir.path());
    let rel = dir.path().display().to_string();
    let (report, _) = json_of(&["--release", &rel]);
    assert_eq!(report["cluster"]["source"], "default");
    assert_eq!(report["catalogue"]["declared"], true);
    assert_eq!(report["enabled"], json!(["Console", "Insights", "Storage"]));
    let console = row(&report, "Console");
    assert_eq!(console["known"], true);
    assert_eq!(console["enabled"], true);
    assert_eq!(console["sets"], json!(["v1", "vCurrent"]));
    assert_eq!(console["manifests"], 2);
    assert_eq!(console["files"].as_array().unwrap().len(), 2, "{report:#}");
    let bogus = row(&report, "Bogus");
    assert_eq!(
        (&bogus["known"], &bogus["enabled"]),
        (&json!(false), &json!(false))
    );
    assert_eq!(bogus["sets"], json!([]));
    // Only the unknown name leaves a manifest out.
    assert_eq!(
        report["excluded"],
        json!({"profile": 0, "featureSet": 0, "featureGate": 0, "majorVersion": 0, "capability": 1, "exclude": 0})
    );
    assert_eq!(report["manifests"], 6);
    assert_eq!(report["condition"]["status"], "False");

    // Text: a row per capability, the condition, the excluded line.
    let text = common::cli::stdout(common::cli::cvo().args(["capabilities", "--release", &rel]));
    assert!(text.contains("cluster: the release's default"), "{text}");
    for want in [
        "CAPABILITY  KNOWN  ENABLED     SETS         MANIFESTS",
        "Console     yes    yes         v1,vCurrent  2  0000_50_app_01_console.yaml, 0000_50_app_03_storage.yaml",
        "Bogus       no     no          -            1  0000_50_app_04_bogus.yaml",
        "ImplicitlyEnabledCapabilities: False (AsExpected): Capabilities match configured spec",
        "excluded: 1 of 6 manifests (profile 0, feature set 0, feature gate 0, major version 0, capability 1, exclude 0)",
    ] {
        assert!(text.contains(want), "{want:?} missing from\n{text}");
    }
}

#[test]
fn a_cluster_version_file_baseline_additional_and_what_was_enabled_before() {
    let dir = tempfile::tempdir().unwrap();
    release(dir.path());
    let rel = dir.path().display().to_string();
    let cv = dir.path().join("cv.yaml");
    std::fs::write(
        &cv,
        cluster_version(
            json!({"capabilities": {"baselineCapabilitySet": "None", "additionalEnabledCapabilities": ["Insights"]}}),
            json!({"capabilities": {"enabledCapabilities": ["Storage"]}}),
        ),
    )
    .unwrap();
    let cv_arg = cv.display().to_string();
    let (report, stderr) = json_of(&["--release", &rel, "--cluster-version", &cv_arg]);
    assert!(!stderr.contains("warning"), "{stderr}");
    assert_eq!(report["cluster"]["source"], "file");
    assert_eq!(report["cluster"]["baselineCapabilitySet"], "None");
    assert_eq!(report["enabled"], json!(["Insights", "Storage"]));
    assert_eq!(report["implicitlyEnabled"], json!(["Storage"]));
    assert_eq!(row(&report, "Storage")["implicitlyEnabled"], true);
    assert_eq!(row(&report, "Console")["enabled"], false);
    // Console, Storage+Console (Console is off) and Bogus are left out.
    assert_eq!(report["excluded"]["capability"], 3);
    assert_eq!(report["condition"]["status"], "True");
    assert_eq!(
        report["condition"]["message"],
        "The following capabilities could not be disabled: Storage"
    );

    // A set and a capability the release does not have: warnings, read as the CVO reads them.
    std::fs::write(
        &cv,
        cluster_version(
            json!({"capabilities": {"baselineCapabilitySet": "v9", "additionalEnabledCapabilities": ["Nope"]}}),
            json!({}),
        ),
    )
    .unwrap();
    let (report, stderr) = json_of(&["--release", &rel, "--cluster-version", &cv_arg]);
    assert_eq!(
        report["warnings"].as_array().unwrap().len(),
        2,
        "{report:#}"
    );
    assert!(
        stderr.contains("warning: spec.capabilities.baselineCapabilitySet: `v9` is not a capability set of this release"),
        "{stderr}"
    );
    assert!(
        stderr.contains("not capabilities of this release (enabled all the same): Nope"),
        "{stderr}"
    );
    assert_eq!(report["enabled"], json!(["Nope"]));
    assert_eq!(report["excluded"]["capability"], 4);
}

#[test]
fn what_cannot_be_read_is_exit_code_2_never_all_enabled() {
    let dir = tempfile::tempdir().unwrap();
    release(dir.path());
    let rel = dir.path().display().to_string();
    let not_cv = dir.path().join("cm.yaml");
    std::fs::write(&not_cv, configmap("app", "x", "", &[])).unwrap();
    let broken = dir.path().join("broken.yaml");
    std::fs::write(&broken, "kind: [\n").unwrap();
    for (file, words) in [
        (not_cv, "expected a ClusterVersion"),
        (broken, "not one YAML or JSON document"),
        (dir.path().join("absent.yaml"), "absent.yaml"),
    ] {
        let out = common::cli::cvo()
            .args(["capabilities", "--release", &rel, "--cluster-version"])
            .arg(&file)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(out.stdout.is_empty());
        assert!(stderr.contains(words), "{words}: {stderr}");
        assert!(
            stderr.contains("cannot tell which capabilities the cluster enables"),
            "{stderr}"
        );
    }
    // --live where no cluster answers.
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: http://127.0.0.1:1\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\ncurrent-context: c\nusers:\n- name: u\n  user: {}\n",
    )
    .unwrap();
    let out = common::cli::cvo()
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["capabilities", "--release", &rel, "--live"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("127.0.0.1:1"), "{stderr}");
    assert!(stderr.contains("nothing is assumed"), "{stderr}");
}

#[test]
fn an_update_that_moves_an_object_into_a_capability_enables_it() {
    let dir = tempfile::tempdir().unwrap();
    let new = dir.path().join("new");
    release(&new);
    let previous = dir.path().join("previous");
    write_release(
        &previous,
        None,
        &[
            (
                "0000_50_app_02_insights.yaml",
                configmap("app", "insights", "", &[]),
            ),
            (
                "0000_50_app_01_console.yaml",
                configmap("app", "console", &cap_meta("Console"), &[]),
            ),
        ],
    );
    let cv = dir.path().join("cv.json");
    std::fs::write(
        &cv,
        cluster_version(
            json!({"capabilities": {"baselineCapabilitySet": "None"}}),
            json!({}),
        ),
    )
    .unwrap();
    let args = [
        "--release",
        new.to_str().unwrap(),
        "--cluster-version",
        cv.to_str().unwrap(),
        "--previous",
        previous.to_str().unwrap(),
    ];
    let (report, _) = json_of(&args);
    // ConfigMap app/insights was applied without a capability: Insights is enabled by the
    // update. Console gated console before and after: nothing to enable.
    assert_eq!(report["enabledByUpdate"], json!(["Insights"]));
    assert_eq!(report["enabled"], json!(["Insights"]));
    assert_eq!(row(&report, "Insights")["enabledByUpdate"], true);
    assert_eq!(report["condition"]["status"], "True");
    let text = common::cli::stdout(common::cli::cvo().arg("capabilities").args(args));
    assert!(
        text.contains("enabled implicitly by the update from --previous: Insights"),
        "{text}"
    );
    assert!(text.contains("Insights    yes    by update"), "{text}");
}

/// `--live` reads ClusterVersion `version` of the test cluster (in-memory, or the real one
/// with `CVO_TEST_KUBECONFIG`): spec through the object, status through its subresource.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_reads_the_clusters_cluster_version() {
    let tc = common::cluster().await;
    let (_guard, resource) = common::cluster_version(&tc).await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = tc.kubeconfig_file(dir.path()).await;
    let rel = dir.path().join("release");
    release(&rel);
    let rel = rel.display().to_string();

    // No ClusterVersion: fail closed, not "every capability".
    let (code, out, err) =
        common::run_cvo(&kubeconfig, &["capabilities", "--release", &rel, "--live"]).await;
    assert_eq!(code, 2, "{out}\n{err}");
    assert!(
        err.contains("the cluster has no ClusterVersion version"),
        "{err}"
    );

    let cvs = tc.dynamic(&resource, None);
    let cv: kube::api::DynamicObject = serde_json::from_value(json!({
        "apiVersion": "config.openshift.io/v1", "kind": "ClusterVersion",
        "metadata": {"name": "version"},
        "spec": {"clusterID": "x", "capabilities": {
            "baselineCapabilitySet": "None",
            "additionalEnabledCapabilities": ["Console"]}}}))
    .unwrap();
    cvs.create(&PostParams::default(), &cv)
        .await
        .expect("create cv");
    cvs.patch_status(
        "version",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"capabilities": {
            "enabledCapabilities": ["Insights"],
            "knownCapabilities": ["Console", "Insights", "Storage"]}}})),
    )
    .await
    .expect("status");

    let (code, out, err) = common::run_cvo(
        &kubeconfig,
        &["capabilities", "--release", &rel, "--live", "-o", "json"],
    )
    .await;
    let result = || {
        assert_eq!(code, 0, "{out}\n{err}");
        let report: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(report["cluster"]["source"], "live");
        assert_eq!(report["cluster"]["enabledBefore"], json!(["Insights"]));
        assert_eq!(report["enabled"], json!(["Console", "Insights"]));
        assert_eq!(report["implicitlyEnabled"], json!(["Insights"]));
        // Storage+Console (Storage off) and Bogus are left out.
        assert_eq!(report["excluded"]["capability"], 2, "{report:#}");
    };
    let (code_text, text, _) =
        common::run_cvo(&kubeconfig, &["capabilities", "--release", &rel, "--live"]).await;
    cvs.delete("version", &Default::default())
        .await
        .expect("delete cv");
    common::wait_gone(&tc, &cvs, "version", "ClusterVersion version").await;
    result();
    assert_eq!(code_text, 0);
    assert!(
        text.contains("cluster: ClusterVersion version in the cluster"),
        "{text}"
    );
    assert!(
        text.contains("status.capabilities.enabledCapabilities: Insights"),
        "{text}"
    );
}

/// Counts, independently of cvo, the manifests of a flat OpenShift payload that the default
/// profile, feature set and feature gates (none enabled) keep and that name a capability
/// (every one of them is left out with `baselineCapabilitySet: None`).
fn gated_in_default_profile(dir: &Path) -> usize {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.is_file()
                && p.extension()
                    .is_some_and(|e| e == "yaml" || e == "yml" || e == "json")
        })
        .collect();
    files.sort();
    let mut count = 0;
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        // A duplicate key keeps the last value (as the CVO's reader); a file that does not
        // parse as a whole contributes nothing (cvo reports it).
        let options = serde_saphyr::options! {
            duplicate_keys: serde_saphyr::DuplicateKeyPolicy::LastWins,
        };
        let Ok(docs) = serde_saphyr::from_multiple_with_options::<Value>(&text, options) else {
            continue;
        };
        for doc in docs {
            let annotations = &doc["metadata"]["annotations"];
            let profile = annotations["include.release.openshift.io/self-managed-high-availability"]
                .as_str() == Some("true");
            let feature_set = match annotations["release.openshift.io/feature-set"].as_str() {
                None => true,
                Some(sets) => sets.split(',').any(|s| s.trim() == "Default"),
            };
            let gated = annotations[CAP].as_str().is_some_and(|c| !c.is_empty());
            // Left out by the feature gates first (none enabled), as the CVO checks them first.
            let gate_needed = annotations["release.openshift.io/feature-gate"]
                .as_str()
                .is_some_and(|g| {
                    g.split(',')
                        .any(|g| !g.trim().is_empty() && !g.trim().starts_with('-'))
                });
            if doc["kind"].is_string() && profile && feature_set && gated && !gate_needed {
                count += 1;
            }
        }
    }
    count
}

#[test]
#[ignore = "needs the shared OpenShift corpus (../shared/corpus, or CVO_TEST_CORPUS): run with --include-ignored (.ci/run does)"]
fn openshift_corpus_with_baseline_none_leaves_out_every_gated_manifest() {
    let dir = corpus("openshift-release");
    let work = tempfile::tempdir().unwrap();
    let cv = work.path().join("cv.yaml");
    std::fs::write(
        &cv,
        "apiVersion: config.openshift.io/v1\nkind: ClusterVersion\nmetadata:\n  name: version\nspec:\n  capabilities:\n    baselineCapabilitySet: None\n",
    )
    .unwrap();
    let (report, stderr) = json_of(&[
        "--release",
        dir.to_str().unwrap(),
        "--cluster-version",
        cv.to_str().unwrap(),
    ]);
    let expected = gated_in_default_profile(&dir);
    assert!(expected > 100, "the corpus gates {expected} manifests");
    assert_eq!(report["profile"], "self-managed-high-availability");
    assert_eq!(report["excluded"]["capability"], expected, "{stderr}");
    assert_eq!(report["enabled"], json!([]));
    // And it is printed.
    let text = common::cli::stdout(common::cli::cvo().args([
        "capabilities",
        "--release",
        dir.to_str().unwrap(),
        "--cluster-version",
        cv.to_str().unwrap(),
    ]));
    assert!(
        text.contains(&format!("capability {expected}, exclude 0)")),
        "{text}"
    );
}

/// A release that ships its ClusterVersion: without a cluster, `cvo capabilities` shows what
/// an install of it enables — that ClusterVersion's `spec.capabilities`, as `apply` reads it.
#[test]
fn a_release_shipping_its_cluster_version_shows_what_an_install_enables() {
    let dir = tempfile::tempdir().unwrap();
    release(dir.path());
    std::fs::write(
        dir.path().join("0000_00_cvo_00_version.yaml"),
        "apiVersion: config.openshift.io/v1\nkind: ClusterVersion\nmetadata:\n  name: version\nspec:\n  clusterID: x\n  capabilities:\n    baselineCapabilitySet: v1\n",
    )
    .unwrap();
    let rel = dir.path().display().to_string();
    let (report, _) = json_of(&["--release", &rel]);
    assert_eq!(report["cluster"]["source"], "release");
    assert_eq!(report["enabled"], json!(["Console"]));
    assert_eq!(row(&report, "Insights")["enabled"], false);
}

/// `--live` reads the feature gates the cluster's FeatureGate `cluster` enables for the
/// release's version, as a sync does: a manifest gated on one the cluster does not enable is
/// counted as left out, one it enables is not; `--feature-gates` overrides the cluster.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_reads_the_clusters_feature_gates() {
    let tc = common::cluster().await;
    let (_guard, resource) = common::cluster_version(&tc).await;
    let fgs = common::feature_gates(&tc).await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = tc.kubeconfig_file(dir.path()).await;
    let rel = dir.path().join("release");
    let gated =
        |gate: &str| format!("  annotations:\n    release.openshift.io/feature-gate: {gate}\n");
    write_release(
        &rel,
        Some("1.0.0"),
        &[
            (
                "0000_50_app_01_a.yaml",
                configmap("app", "a", &gated("A"), &[]),
            ),
            (
                "0000_50_app_02_b.yaml",
                configmap("app", "b", &gated("B"), &[]),
            ),
        ],
    );
    let rel = rel.display().to_string();
    let cvs = tc.dynamic(&resource, None);
    let cv: kube::api::DynamicObject = serde_json::from_value(json!({
        "apiVersion": "config.openshift.io/v1", "kind": "ClusterVersion",
        "metadata": {"name": "version"}, "spec": {"clusterID": "x"}}))
    .unwrap();
    cvs.create(&PostParams::default(), &cv)
        .await
        .expect("create cv");
    common::create_feature_gate(
        &fgs,
        json!([{"version": "1.0.0", "enabled": [{"name": "A"}], "disabled": [{"name": "B"}]}]),
    )
    .await;

    let live = |extra: &'static [&'static str]| {
        let mut args = vec![
            "capabilities",
            "--release",
            rel.as_str(),
            "--live",
            "-o",
            "json",
        ];
        args.extend(extra);
        let kubeconfig = kubeconfig.clone();
        async move {
            let (code, out, err) = common::run_cvo(&kubeconfig, &args).await;
            (code, out, err)
        }
    };
    let from_cluster = live(&[]).await;
    let given = live(&["--feature-gates", "A,B"]).await;
    cvs.delete("version", &Default::default())
        .await
        .expect("delete cv");
    common::wait_gone(&tc, &cvs, "version", "ClusterVersion version").await;
    common::remove_feature_gate(&tc, &fgs).await;
    for ((code, out, err), left_out) in [(from_cluster, 1), (given, 0)] {
        assert_eq!(code, 0, "{out}\n{err}");
        let report: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(report["excluded"]["featureGate"], left_out, "{report:#}");
    }
}
