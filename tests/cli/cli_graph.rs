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
            "00 cluster-version-operator, 05 cluster-lifecycle, 10 cluster-config, … +1",
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

#[test]
fn dot_renders_with_graphviz_when_installed() {
    let Ok(out) = std::process::Command::new("dot").arg("-V").output() else {
        return crate::common::skip("graphviz `dot` is not installed (.ci/run installs it)");
    };
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
