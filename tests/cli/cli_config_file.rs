//! `.cvo.yaml` in the release directory, where a release engineer checks it in (issue 34
//! item 1): `validate` takes its settings and no command reads it as a manifest — `validate`,
//! `graph` and `apply --in-memory` see only the release, and `cvo push` leaves it out of the
//! artifact. Any other hidden file is still a manifest (with its `hidden-file` warning).

use crate::common;

use std::path::Path;

/// A repository (`.git` at its root) holding the release `rel/`: a Namespace and a ConfigMap,
/// a file whose name breaks the convention (`settings.yaml`: a `file-name-convention`
/// warning) and, next to them, the `.cvo.yaml` that turns that rule off.
fn repo_with_configured_release() -> tempfile::TempDir {
    let repo = tempfile::tempdir().unwrap();
    std::fs::create_dir(repo.path().join(".git")).unwrap();
    let rel = repo.path().join("rel");
    std::fs::create_dir(&rel).unwrap();
    let ns = common::unique("config-file");
    let files = [
        (
            "0000_10_app_00_namespace.yaml",
            format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {ns}\n"),
        ),
        (
            "settings.yaml",
            format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: {ns}\ndata:\n  a: \"1\"\n"
            ),
        ),
        (
            ".cvo.yaml",
            "rules:\n  file-name-convention: off\n".to_owned(),
        ),
    ];
    for (name, text) in files {
        std::fs::write(rel.join(name), text).unwrap();
    }
    repo
}

/// `cvo ARGS…` in `dir`: exit code, stdout, stderr.
fn run(dir: &Path, args: &[&str]) -> (i32, String, String) {
    let out = common::cli::cvo()
        .current_dir(dir)
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn validate_takes_the_settings_of_the_cvo_yaml_beside_the_manifests_and_no_manifest_from_it() {
    let repo = repo_with_configured_release();
    let (code, stdout, stderr) = run(repo.path(), &["validate", "--release", "rel"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    for finding in [
        ".cvo.yaml",
        "hidden-file",
        "invalid-object",
        "file-name-convention",
    ] {
        assert!(!stdout.contains(finding), "{finding}: {stdout}");
    }
    let (_, config, _) = run(
        repo.path(),
        &["validate", "--release", "rel", "--print-config"],
    );
    assert!(config.contains("file-name-convention: off"), "{config}");
    // Any other hidden file is a manifest, as the CVO reads it.
    std::fs::write(
        repo.path().join("rel/.old.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: old\n  namespace: default\n",
    )
    .unwrap();
    let (code, stdout, _) = run(repo.path(), &["validate", "--release", "rel"]);
    assert_eq!(code, 0, "{stdout}");
    assert!(stdout.contains("warning[hidden-file]"), "{stdout}");
    assert!(stdout.contains(".old.yaml"), "{stdout}");
    assert!(!stdout.contains(".cvo.yaml"), "{stdout}");
}

#[test]
fn graph_leaves_the_cvo_yaml_out() {
    let repo = repo_with_configured_release();
    let (code, stdout, stderr) = run(
        repo.path(),
        &["graph", "--release", "rel", "--format", "json"],
    );
    assert_eq!(code, 0, "{stdout}{stderr}");
    let graph: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(graph["tasks"], 2, "{stdout}");
    let files: Vec<&str> = graph["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|n| n["tasks"].as_array().unwrap())
        .map(|t| t["file"].as_str().unwrap())
        .collect();
    assert_eq!(files.len(), 2, "{files:?}");
    assert!(files.iter().all(|f| !f.contains(".cvo.yaml")), "{files:?}");
    assert!(!stderr.contains(".cvo.yaml"), "{stderr}");
}

#[test]
fn apply_in_memory_leaves_the_cvo_yaml_out() {
    let repo = repo_with_configured_release();
    let (code, stdout, stderr) = run(
        repo.path(),
        &["apply", "--release", "rel", "--in-memory", "-o", "json"],
    );
    assert_eq!(code, 0, "{stdout}{stderr}");
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let actions: Vec<(&str, &str)> = report["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["kind"].as_str().unwrap(), r["action"].as_str().unwrap()))
        .collect();
    assert_eq!(
        actions,
        [("Namespace", "created"), ("ConfigMap", "created")],
        "{stdout}"
    );
}

#[test]
fn push_leaves_the_cvo_yaml_out_of_the_artifact() {
    let repo = repo_with_configured_release();
    let layout = tempfile::tempdir().unwrap();
    let push = |tag: &str| {
        let target = format!("oci-layout:{}:{tag}", layout.path().display());
        let (code, stdout, stderr) = run(repo.path(), &["push", "--release", "rel", &target]);
        assert_eq!(code, 0, "{stdout}{stderr}");
        stdout
            .trim()
            .rsplit_once('@')
            .map(|(_, digest)| digest.to_owned())
            .unwrap_or_else(|| panic!("no digest: {stdout}"))
    };
    let with_config = push("with");
    // Without the file (its rule is then the default: a warning, which does not refuse the
    // push), the artifact is the same, byte for byte.
    std::fs::remove_file(repo.path().join("rel/.cvo.yaml")).unwrap();
    assert_eq!(push("without"), with_config);
}
