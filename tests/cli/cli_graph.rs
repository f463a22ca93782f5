//! `cvo graph` over manifests-example: every format, and the exit code for bad input.

use crate::common::cli::cvo;

use predicates::prelude::*;

fn graph(format: &str) -> String {
    crate::common::cli::stdout(cvo().args([
        "graph",
        "--release",
        "manifests-example",
        "--format",
        format,
    ]))
}

#[test]
fn json_has_the_run_level_shape_of_the_example() {
    let v: serde_json::Value = serde_json::from_str(&graph("json")).unwrap();
    let titles: Vec<&str> = v["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["title"].as_str().unwrap())
        .collect();
    // 00, 05, 10 and 20 hold one component each and merge; 50 has two parallel components; 90
    // waits.
    assert_eq!(
        titles,
        [
            "00 cluster-version-operator → 05 cluster-lifecycle → 10 cluster-config → 20 widget-operator",
            "50 widget-dashboards",
            "50 widget-operator",
            "90 cluster-config",
        ]
    );
    let edges: Vec<(u64, u64)> = v["edges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["from"].as_u64().unwrap(), e["to"].as_u64().unwrap()))
        .collect();
    assert_eq!(edges, [(0, 1), (0, 2), (1, 3), (2, 3)]);
    // 22, the 5 documents of the cluster-lifecycle component (namespace, Alive CRD,
    // admission policy and binding, Alive) and the operator's own 5 (ClusterOperator CRD,
    // ServiceAccount, ClusterRoleBinding, Deployment, metrics Service).
    assert_eq!(v["tasks"], 32);
    let deletes = v["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|n| n["tasks"].as_array().unwrap())
        .filter(|t| t["delete"] == true)
        .count();
    assert_eq!(deletes, 5);
}

#[test]
fn text_dot_and_mermaid_name_files_and_mark_deletions() {
    let text = graph("text");
    assert!(text.contains("Stage 2 (2 nodes in parallel)"), "{text}");
    assert!(text.contains("✗ delete 0000_50_widget-operator_82_legacy.widget.delete.yaml"));
    let dot = graph("dot");
    assert!(dot.starts_with("digraph"));
    assert!(dot.contains("0000_90_cluster-config_00_release-info.configmap.yaml"));
    assert!(dot.contains("✗ delete"));
    let mermaid = graph("mermaid");
    assert!(mermaid.starts_with("flowchart TD"), "{mermaid}");
}

/// Issue 34 item 8: the first node of the example holds four run levels; the text names each
/// (none hidden behind `… +1`) and says why they share a node.
#[test]
fn text_names_every_run_level_of_a_node_and_why_they_share_it() {
    let text = graph("text");
    assert!(
        text.contains("\n  [0] 00 cluster-version-operator → 05 cluster-lifecycle → 10 cluster-config → 20 widget-operator · 17 tasks\n"),
        "{text}"
    );
    assert!(
        text.contains("\nA node runs its tasks one after another: consecutive run levels of one component each share one (\"00 a → 05 b\"), as in the CVO.\n"),
        "{text}"
    );
    assert!(!text.contains("… +"), "{text}");
}

#[test]
#[ignore = "needs Graphviz dot (apt-get install graphviz): run with --include-ignored (.ci/run does)"]
fn dot_renders_with_graphviz() {
    let out = std::process::Command::new("dot")
        .arg("-V")
        .output()
        .unwrap_or_else(|e| {
            crate::common::needs::missing(
                &format!("Graphviz `dot` ({e})"),
                "apt-get install graphviz (.ci/run installs it)",
            )
        });
    assert!(out.status.success());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("g.dot");
    std::fs::write(&path, graph("dot")).unwrap();
    let svg = std::process::Command::new("dot")
        .arg("-Tsvg")
        .arg(&path)
        .output()
        .unwrap();
    assert!(
        svg.status.success(),
        "{}",
        String::from_utf8_lossy(&svg.stderr)
    );
    assert!(String::from_utf8_lossy(&svg.stdout).contains("<svg"));
}

#[test]
fn bad_input_exits_2() {
    cvo()
        .args(["graph", "--release", "does-not-exist"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("cannot read release directory"));
    cvo()
        .args(["graph", "--release", "manifests-example", "--format", "png"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("unknown graph format"));
}

fn config_map(name: &str, annotations: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: ns\n  annotations:\n{annotations}    example.com/x: \"y\"\n"
    )
}

/// The files of the graph's nodes, in node order.
fn graph_files(release: &std::path::Path, extra: &[&str]) -> (Vec<String>, String) {
    let out = cvo()
        .args(["graph", "--format", "json", "--release"])
        .arg(release)
        .args(extra)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let files = v["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|n| n["tasks"].as_array().unwrap())
        .map(|t| t["file"].as_str().unwrap().to_owned())
        .collect();
    (files, String::from_utf8_lossy(&out.stderr).into_owned())
}

/// Issue 25 items 3 and 11: as the CVO's task list, every file of `manifests/` comes before
/// any file of `release-manifests/` (run level 90 of the first before 10 of the second), and
/// a hidden file is read, first of its folder.
#[test]
fn graph_orders_the_manifests_folder_before_release_manifests_as_the_cvo() {
    let dir = tempfile::tempdir().unwrap();
    let m = dir.path().join("manifests");
    let r = dir.path().join("release-manifests");
    std::fs::create_dir_all(&m).unwrap();
    std::fs::create_dir_all(&r).unwrap();
    std::fs::write(m.join("0000_90_b_00_x.yaml"), config_map("m90", "")).unwrap();
    std::fs::write(m.join("0000_00_a_00_x.yaml"), config_map("m00", "")).unwrap();
    std::fs::write(r.join("0000_10_c_00_x.yaml"), config_map("r10", "")).unwrap();
    std::fs::write(r.join(".0000_50_d_00_x.yaml"), config_map("hidden", "")).unwrap();
    let (files, _) = graph_files(dir.path(), &[]);
    assert_eq!(
        files,
        [
            "0000_00_a_00_x.yaml",
            "0000_90_b_00_x.yaml",
            ".0000_50_d_00_x.yaml",
            "0000_10_c_00_x.yaml"
        ]
    );
}

/// Issue 25 item 6: a known feature set that no manifest names is accepted (the CVO applies
/// the manifests without a feature-set annotation), with a note of how many it selects; an
/// unknown name is refused with the known ones.
#[test]
fn graph_accepts_a_known_feature_set_no_manifest_names_with_a_note() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("0000_10_a_00_x.yaml"),
        config_map("plain", ""),
    )
    .unwrap();
    std::fs::write(
        dir.path().join("0000_10_a_01_x.yaml"),
        config_map(
            "default-only",
            "    release.openshift.io/feature-set: Default\n",
        ),
    )
    .unwrap();
    let (files, stderr) = graph_files(dir.path(), &["--feature-set", "TechPreviewNoUpgrade"]);
    assert_eq!(files, ["0000_10_a_00_x.yaml"]);
    assert!(
        stderr.contains("note: --feature-set TechPreviewNoUpgrade: no manifest of the release names this feature set, so it selects the 1 manifests without a feature-set annotation"),
        "{stderr}"
    );
    let out = cvo()
        .args(["graph", "--release"])
        .arg(dir.path())
        .args(["--feature-set", "TechPreview"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--feature-set TechPreview: not a known feature set (the known ones are CustomNoUpgrade, Default, DevPreviewNoUpgrade, OKD, TechPreviewNoUpgrade)"),
        "{stderr}"
    );
}
