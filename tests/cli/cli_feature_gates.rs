//! `--feature-gates`, `--feature-gates-file` and `--major-version` on the commands that read a
//! release without a cluster (validate, graph, capabilities): which manifests they leave out,
//! counted as `featureGate` and `majorVersion`; and the OpenShift corpus with no gate enabled.

use crate::common;

use std::path::{Path, PathBuf};

use common::cli::cvo;
use serde_json::{Value, json};

fn cm(name: &str, annotations: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: openshift-config\n  annotations:\n{annotations}data:\n  v: \"1\"\n"
    )
}

fn crd(plural: &str, major: &str) -> String {
    format!(
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: {plural}.example.com\n  annotations:\n    release.openshift.io/major-version: \"{major}\"\nspec:\n  group: example.com\n  names: {{kind: {plural}, plural: {plural}, singular: {plural}, listKind: {plural}List}}\n  scope: Cluster\n  versions:\n  - name: v1\n    served: true\n    storage: true\n    schema:\n      openAPIV3Schema: {{type: object, x-kubernetes-preserve-unknown-fields: true}}\n"
    )
}

/// A release at 4.19.0 with gated, both-annotated and major-version manifests.
fn fixture() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let gate = |g: &str| format!("    release.openshift.io/feature-gate: \"{g}\"\n");
    common::write_release(
        dir.path(),
        Some("4.19.0"),
        &[
            ("0000_10_a_00_needs-a.yaml", cm("needs-a", &gate("A"))),
            ("0000_10_a_01_not-a.yaml", cm("not-a", &gate("-A"))),
            (
                "0000_10_a_02_both.yaml",
                cm(
                    "both",
                    &format!(
                        "{}    release.openshift.io/feature-set: Default\n",
                        gate("A")
                    ),
                ),
            ),
            ("0000_10_a_03_four.yaml", crd("fours", "4")),
            ("0000_10_a_04_five.yaml", crd("fives", "5,-4")),
            (
                "0000_10_a_05_cm-major.yaml",
                cm(
                    "cm-major",
                    "    release.openshift.io/major-version: \"4\"\n",
                ),
            ),
        ],
    );
    dir
}

/// `cvo validate -o json` with `args`: its exit code and `summary.excluded`.
fn excluded(release: &Path, args: &[&str]) -> (i32, Value, String) {
    let out = cvo()
        .args(["validate", "--format", "json", "--release"])
        .arg(release)
        .args(args)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}\n{stderr}",
            String::from_utf8_lossy(&out.stdout)
        )
    });
    (
        out.status.code().unwrap(),
        report["summary"]["excluded"].clone(),
        stderr,
    )
}

fn counts(gate: u64, major: u64) -> Value {
    json!({"profile": 0, "featureSet": 0, "featureGate": gate, "majorVersion": major, "capability": 0, "exclude": 0})
}

#[test]
fn feature_gates_and_major_version_from_flags() {
    let dir = fixture();
    // No gate enabled: needs-a and both left out; the release's major 4: fives and the
    // ConfigMap (major-version only on CRDs and FeatureGates).
    let (code, ex, stderr) = excluded(dir.path(), &[]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(ex, counts(2, 2));
    // A enabled: not-a and both (never with a feature set too).
    let (_, ex, _) = excluded(dir.path(), &["--feature-gates", "A"]);
    assert_eq!(ex, counts(2, 2));
    let (_, ex, _) = excluded(dir.path(), &["--major-version", "5"]);
    assert_eq!(ex, counts(2, 2));
    let (_, ex, _) = excluded(dir.path(), &["--major-version", "3"]);
    assert_eq!(ex, counts(2, 3));

    // The graph holds what is kept.
    let graph = |args: &[&str]| {
        common::cli::stdout(
            cvo()
                .args(["graph", "--format", "json", "--release"])
                .arg(dir.path())
                .args(args),
        )
    };
    let none = graph(&[]);
    assert!(
        !none.contains("needs-a") && none.contains("not-a"),
        "{none}"
    );
    assert!(none.contains("fours") && !none.contains("fives"), "{none}");
    let a = graph(&["--feature-gates", "A", "--major-version", "5"]);
    assert!(a.contains("needs-a") && !a.contains("not-a"), "{a}");
    assert!(!a.contains("fours") && a.contains("fives"), "{a}");
    assert!(!a.contains("\"both\"") && !a.contains("cm-major"), "{a}");
}

#[test]
fn feature_gates_from_a_feature_gate_file() {
    let dir = fixture();
    let work = tempfile::tempdir().unwrap();
    let file = work.path().join("featuregate.yaml");
    std::fs::write(
        &file,
        "apiVersion: config.openshift.io/v1\nkind: FeatureGate\nmetadata:\n  name: cluster\nstatus:\n  featureGates:\n  - version: 4.18.0\n    enabled: []\n  - version: 4.19.0\n    enabled:\n    - name: A\n",
    )
    .unwrap();
    let file_arg = file.to_str().unwrap();
    let (code, ex, stderr) = excluded(dir.path(), &["--feature-gates-file", file_arg]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(ex, counts(2, 2));
    let graph = common::cli::stdout(
        cvo()
            .args([
                "graph",
                "--format",
                "json",
                "--feature-gates-file",
                file_arg,
                "--release",
            ])
            .arg(dir.path()),
    );
    assert!(
        graph.contains("needs-a") && !graph.contains("not-a"),
        "{graph}"
    );

    // Not a FeatureGate: refused (exit code 2), naming the file and what it holds.
    let wrong = work.path().join("cm.yaml");
    std::fs::write(&wrong, cm("x", "    a: b\n")).unwrap();
    let out = cvo()
        .args(["validate", "--feature-gates-file"])
        .arg(&wrong)
        .arg("--release")
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("cm.yaml: expected a FeatureGate (apiVersion config.openshift.io/v1, kind FeatureGate), found apiVersion `v1` kind `ConfigMap`; cannot tell which feature gates are enabled"),
        "{stderr}"
    );
    // Several versions, none the release's: refused rather than guessed.
    std::fs::write(
        &file,
        "apiVersion: config.openshift.io/v1\nkind: FeatureGate\nmetadata:\n  name: cluster\nstatus:\n  featureGates:\n  - version: 4.17.0\n  - version: 4.18.0\n",
    )
    .unwrap();
    let out = cvo()
        .args(["graph", "--feature-gates-file", file_arg, "--release"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(
            "status.featureGates has no entry for version 4.19.0 (it has 4.17.0, 4.18.0)"
        ),
        "{stderr}"
    );
    // Both flags: refused.
    cvo()
        .args([
            "graph",
            "--feature-gates",
            "A",
            "--feature-gates-file",
            file_arg,
            "--release",
        ])
        .arg(dir.path())
        .assert()
        .code(2);
}

/// The documents of a flat OpenShift payload that the default profile and feature set keep and
/// that no enabled gate admits (a feature-gate annotation naming a gate to enable, or beside a
/// feature-set annotation), counted independently of cvo; and the gates they name.
fn gated_in_default_profile(dir: &Path) -> (usize, Vec<String>) {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "yaml" || e == "yml"))
        .collect();
    files.sort();
    let (mut count, mut gates) = (0, Vec::new());
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let Ok(docs) = serde_saphyr::from_multiple::<Value>(&text) else {
            continue;
        };
        for doc in docs {
            let annotations = &doc["metadata"]["annotations"];
            let profile = annotations["include.release.openshift.io/self-managed-high-availability"]
                .as_str() == Some("true");
            let set = annotations["release.openshift.io/feature-set"].as_str();
            let in_default = set.is_none_or(|s| s.split(',').any(|s| s.trim() == "Default"));
            let Some(gate) = annotations["release.openshift.io/feature-gate"].as_str() else {
                continue;
            };
            let needs: Vec<&str> = gate
                .split(',')
                .map(str::trim)
                .filter(|g| !g.is_empty() && !g.starts_with('-'))
                .collect();
            if profile && in_default && (set.is_some() || !needs.is_empty()) {
                count += 1;
                gates.extend(needs.iter().map(|g| (*g).to_owned()));
            }
        }
    }
    gates.sort();
    gates.dedup();
    (count, gates)
}

#[test]
#[ignore = "needs the shared OpenShift corpus (../shared/corpus, or CVO_TEST_CORPUS): run with --include-ignored (.ci/run does)"]
fn openshift_corpus_with_no_gate_enabled_leaves_out_its_feature_gated_manifests() {
    let dir = common::needs::corpus("openshift-release");
    let (expected, gates) = gated_in_default_profile(&dir);
    assert!(expected >= 7, "the corpus gates {expected} manifests");
    let capabilities = |args: &[&str]| -> Value {
        let out = cvo()
            .args(["capabilities", "-o", "json", "--release"])
            .arg(&dir)
            .args(args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{stderr}");
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let report = capabilities(&[]);
    assert_eq!(report["excluded"]["featureGate"], expected, "{report:#}");
    assert_eq!(report["excluded"]["majorVersion"], 0);
    let all = gates.join(",");
    let report = capabilities(&["--feature-gates", &all]);
    assert_eq!(report["excluded"]["featureGate"], 0, "{all}");
}
