//! `cvo validate` end to end: exit codes, every rule on its fixtures (both sides), the three
//! output formats, the example release, and the real OpenShift corpus when it is present.

use crate::common;

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use predicates::prelude::*;
use serde_json::Value;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn fixtures() -> PathBuf {
    root().join("tests/fixtures/validate")
}

fn cvo() -> Command {
    let mut cmd = common::cli::cvo();
    cmd.current_dir(root());
    cmd
}

/// `--release` (and `--previous`, when the fixture has one) for a fixture side.
fn fixture_args(dir: &Path) -> Vec<String> {
    if dir.join("previous").is_dir() {
        vec![
            "--release".into(),
            dir.join("release").display().to_string(),
            "--previous".into(),
            dir.join("previous").display().to_string(),
        ]
    } else {
        vec!["--release".into(), dir.display().to_string()]
    }
}

/// Runs validate with JSON output; returns the exit code and the parsed report.
fn validate_json(args: &[String]) -> (i32, Value) {
    let out = cvo()
        .arg("validate")
        .args(args)
        .args(["--format", "json"])
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().expect("exited"), report)
}

fn rules_in(report: &Value) -> Vec<String> {
    report["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["rule"].as_str().unwrap().to_owned())
        .collect()
}

use crate::common::needs::corpus;

#[test]
fn every_rule_fires_on_its_bad_fixture_and_not_on_its_good_one() {
    for rule in cvo::validate::RULES {
        let dir = fixtures().join(rule.id);
        assert!(dir.is_dir(), "no fixture for rule {}", rule.id);

        let (code, report) = validate_json(&fixture_args(&dir.join("bad")));
        let fired = rules_in(&report);
        if rule.off_by_default {
            // Off until turned on: its bad fixture reports nothing, not even this rule.
            assert!(
                fired.is_empty(),
                "{} is off by default: {report:#}",
                rule.id
            );
            assert_eq!(code, 0, "exit code of {}/bad: {report:#}", rule.id);
            // Turned on by name, it reports at its severity.
            let mut on = fixture_args(&dir.join("bad"));
            on.extend(["--rule".to_owned(), format!("{}=warning", rule.id)]);
            let (code, report) = validate_json(&on);
            assert!(
                rules_in(&report).iter().any(|r| r == rule.id),
                "{} turned on did not fire on its bad fixture: {report:#}",
                rule.id
            );
            assert_eq!(
                code, 0,
                "exit code of {}/bad turned on: {report:#}",
                rule.id
            );
            continue;
        }
        assert!(
            fired.iter().any(|r| r == rule.id),
            "{} did not fire on its bad fixture: {report:#}",
            rule.id
        );
        let expected = if rule.severity == cvo::diagnostic::Severity::Error {
            1
        } else {
            0
        };
        assert_eq!(code, expected, "exit code of {}/bad: {report:#}", rule.id);
        for d in report["diagnostics"].as_array().unwrap() {
            // Whole-file loader findings (a sub-directory, release-metadata) have no line.
            if !rule.from_loader {
                assert!(d["location"]["line"].as_u64().is_some(), "no line: {d}");
            }
            assert!(d["help"].as_str().is_some(), "no help: {d}");
        }

        let (code, report) = validate_json(&fixture_args(&dir.join("good")));
        assert!(
            !rules_in(&report).iter().any(|r| r == rule.id),
            "{} fired on its good fixture: {report:#}",
            rule.id
        );
        assert_eq!(code, 0, "{}/good is not clean: {report:#}", rule.id);
        assert_eq!(
            report["summary"]["warnings"], 0,
            "{}/good: {report:#}",
            rule.id
        );
    }
}

#[test]
fn every_rule_is_documented() {
    let docs = std::fs::read_to_string(root().join("docs/validation.md")).unwrap();
    for rule in cvo::validate::RULES {
        assert!(
            docs.contains(&format!("### `{}`", rule.id)),
            "docs/validation.md has no section for {}",
            rule.id
        );
        assert!(
            docs.lines()
                .any(|line| line.starts_with('|')
                    && line.contains(&format!("[`{0}`](#{0})", rule.id))),
            "docs/validation.md has no table row for {}",
            rule.id
        );
    }
}

#[test]
fn own_rules_name_the_object() {
    // A capability of the catalogue file is no object.
    let about_the_catalogue = [cvo::validate::rules::CAPABILITY_IN_NO_SET];
    for rule in cvo::validate::RULES
        .iter()
        .filter(|r| !r.from_loader && !about_the_catalogue.contains(&r.id))
    {
        let (_, report) = validate_json(&fixture_args(&fixtures().join(rule.id).join("bad")));
        for d in report["diagnostics"].as_array().unwrap() {
            assert!(
                d["object"]["kind"].is_string(),
                "{}: no object: {d}",
                rule.id
            );
        }
    }
}

#[test]
fn example_release_validates_clean() {
    for profile in [None, Some("self-managed-high-availability")] {
        let mut cmd = cvo();
        cmd.args(["validate", "--release", "manifests-example"]);
        if let Some(p) = profile {
            cmd.args(["--profile", p]);
        }
        cmd.assert()
            .code(0)
            .stdout(predicate::str::contains(
                "excluded in profile self-managed-high-availability: 1 of 33 manifests (profile 0, feature set 1, feature gate 0, major version 0, capability 0, exclude 0)\n",
            ))
            .stdout(predicate::str::ends_with("0 errors, 0 warnings, 0 notes\n"))
            .stdout(predicate::str::contains("[").not());
    }
}

#[test]
fn text_output_is_rustc_style() {
    let dir = fixtures().join("invalid-delete-value/bad");
    cvo()
        .args(["validate", "--release"])
        .arg(&dir)
        .assert()
        .code(1)
        .stdout(predicate::str::contains(
            "error[invalid-delete-value]: ConfigMap app/old-settings:",
        ))
        .stdout(
            predicate::str::is_match(r"(?m)^  --> .*0000_50_app_90_old-settings-delete\.yaml:1")
                .unwrap(),
        )
        .stdout(predicate::str::contains("   = help: "))
        // The unquoted `delete: true` is a non-string annotation too (issue 25 item 9).
        .stdout(predicate::str::contains(
            "error[non-string-annotation]: ConfigMap app/old-rules:",
        ))
        .stdout(predicate::str::ends_with("3 errors, 0 warnings, 0 notes\n"));
}

#[test]
fn warnings_alone_exit_zero() {
    cvo()
        .args([
            "validate",
            "--release",
            "tests/fixtures/validate/file-name-convention/bad",
        ])
        .assert()
        .code(0)
        .stdout(predicate::str::contains("warning[file-name-convention]"))
        .stdout(predicate::str::contains("0 errors, 1 warning, 0 notes"));
}

#[test]
fn unreadable_input_exits_two() {
    cvo()
        .args([
            "validate",
            "--release",
            "tests/fixtures/validate/does-not-exist",
        ])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("cannot read release directory"));
    cvo()
        .args([
            "validate",
            "--release",
            "manifests-example",
            "--previous",
            "tests/fixtures/validate/does-not-exist",
        ])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--previous"));
    cvo()
        .args(["validate", "--release", "Cargo.toml"])
        .assert()
        .code(2);
}

/// Each kind of broken document gets its own message and help, with file, document and line,
/// and nothing of the parser's internals (type names, options) reaches the user.
#[test]
fn each_kind_of_broken_document_is_explained_in_plain_words() {
    let dir = tempfile::tempdir().unwrap();
    let ok = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: app\n---\n";
    let cases: &[(&str, &[u8], &str)] = &[
        (
            "utf8.yaml",
            b"data:\n  x: caf\xe9\n",
            "invalid UTF-8: byte 0xE9 at byte offset",
        ),
        ("syntax.yaml", b"a: [\n", "YAML syntax error"),
        ("nullkeys.yaml", b": : :\n", "a key is empty or null"),
        (
            "list.yaml",
            b"- a\n",
            "the document is a list, not a mapping",
        ),
        (
            "nokind.yaml",
            b"apiVersion: v1\nmetadata:\n  name: x\n",
            "`kind` is missing",
        ),
        (
            "type.yaml",
            b"apiVersion: v1\nkind: 5\nmetadata:\n  name: x\n",
            "`kind` is a number, not a string",
        ),
    ];
    for (name, doc, _) in cases {
        let mut bytes = ok.as_bytes().to_vec();
        bytes.extend_from_slice(doc);
        std::fs::write(dir.path().join(name), bytes).unwrap();
    }
    let (code, report) = validate_json(&["--release".into(), dir.path().display().to_string()]);
    assert_eq!(code, 1, "{report}");
    let diagnostics = report["diagnostics"].as_array().unwrap();
    let mut helps = std::collections::HashSet::new();
    for (name, _, message) in cases {
        let d = diagnostics
            .iter()
            .find(|d| {
                d["location"]["file"]
                    .as_str()
                    .is_some_and(|f| f.ends_with(name))
                    && (d["rule"] == "parse-error" || d["rule"] == "invalid-object")
            })
            .unwrap_or_else(|| panic!("{name}: no error in {report}"));
        let text = d["message"].as_str().unwrap();
        assert!(text.contains(message), "{name}: {text}");
        assert_eq!(d["location"]["document"], 1, "{name}: {d}");
        assert!(d["location"]["line"].as_u64().unwrap() >= 5, "{name}: {d}");
        let help = d["help"].as_str().unwrap();
        for internal in ["Option<", "String>", "serde", "Policy", "deserialize"] {
            assert!(
                !text.contains(internal) && !help.contains(internal),
                "{name}: {d}"
            );
        }
        helps.insert(help.to_owned());
    }
    assert_eq!(helps.len(), cases.len(), "one help per kind: {helps:?}");
}

#[test]
fn json_has_a_stable_shape() {
    let (code, report) =
        validate_json(&fixture_args(&fixtures().join("stale-delete-manifest/bad")));
    assert_eq!(code, 1);
    assert_eq!(report["summary"]["errors"], 1);
    let d = &report["diagnostics"][0];
    for key in ["rule", "severity", "location", "object", "message", "help"] {
        assert!(d.get(key).is_some(), "missing {key}: {d}");
    }
    assert_eq!(d["rule"], "stale-delete-manifest");
    assert_eq!(d["severity"], "error");
    assert_eq!(d["object"]["name"], "legacy");
}

#[test]
fn sarif_has_what_code_scanning_needs() {
    let out = cvo()
        .args([
            "validate",
            "--format",
            "sarif",
            "--release",
            "tests/fixtures/validate/delete-annotation-typo/bad",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let sarif: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(sarif["version"], "2.1.0");
    assert!(sarif["$schema"].as_str().unwrap().contains("sarif"));
    let run = &sarif["runs"][0];
    let driver = &run["tool"]["driver"];
    assert_eq!(driver["name"], "cvo");
    let rules = driver["rules"].as_array().unwrap();
    assert_eq!(rules.len(), cvo::validate::RULES.len());
    for r in rules {
        assert!(r["id"].is_string() && r["shortDescription"]["text"].is_string());
        assert!(
            ["error", "warning", "note"]
                .contains(&r["defaultConfiguration"]["level"].as_str().unwrap())
        );
    }
    let results = run["results"].as_array().unwrap();
    assert_eq!(results.len(), 3);
    for r in results {
        assert_eq!(r["ruleId"], "delete-annotation-typo");
        assert_eq!(r["level"], "error");
        assert!(r["message"]["text"].as_str().unwrap().contains("near miss"));
        let loc = &r["locations"][0]["physicalLocation"];
        let uri = loc["artifactLocation"]["uri"].as_str().unwrap();
        assert!(
            uri.starts_with("tests/fixtures/validate/delete-annotation-typo/bad/0000_50_app_9"),
            "{uri}"
        );
        assert!(!uri.contains('\\'));
        assert!(loc["region"]["startLine"].as_u64().unwrap() >= 1);
    }
}

/// Issue 25 item 4: the corpus's one duplicate key is a warning naming both lines (the
/// last value wins, as the CVO reads it): the release validates with no error.
#[test]
#[ignore = "needs the shared OpenShift corpus (../shared/corpus, or CVO_TEST_CORPUS): run with --include-ignored (.ci/run does)"]
fn corpus_names_the_duplicate_key_file_and_line() {
    let dir = corpus("openshift-release");
    let out = cvo()
        .args([
            "validate",
            "--profile",
            "self-managed-high-availability",
            "--release",
        ])
        .arg(&dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    let line = stdout
        .lines()
        .find(|l| {
            l.contains("0000_50_cluster-csi-snapshot-controller-operator_04_serviceaccount.yaml")
        })
        .expect("the duplicate-key file is named");
    assert!(line.contains(":14"), "line 14 named: {line}");
    assert!(
        stdout.contains("warning[duplicate-key]: ServiceAccount openshift-cluster-storage-operator/csi-snapshot-controller-operator: the key `capability.openshift.io/name` is written twice in one mapping (lines 13 and 14)") || stdout.contains("warning[duplicate-key]: the key `capability.openshift.io/name` is written twice in one mapping (lines 13 and 14)"),
        "{stdout}"
    );
}

#[test]
#[ignore = "needs the shared OpenShift corpus (../shared/corpus, or CVO_TEST_CORPUS): run with --include-ignored (.ci/run does)"]
fn corpus_delete_annotated_folders_never_panic() {
    let dir = corpus("delete-annotated");
    let mut folders: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    folders.sort();
    assert!(!folders.is_empty());
    for folder in folders {
        for format in ["text", "json", "sarif"] {
            let out = cvo()
                .args(["validate", "--format", format, "--release"])
                .arg(&folder)
                .output()
                .unwrap();
            let code = out.status.code();
            assert!(
                matches!(code, Some(0 | 1)),
                "{} ({format}) exited {code:?}: {}",
                folder.display(),
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
}

/// `--max-file-bytes` and `--max-release-bytes` (docs/limits.md), on `--previous` too.
#[test]
fn size_limits_are_flags_with_plain_refusals() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("0000_10_a_cm.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  namespace: ns\n",
    )
    .unwrap();
    let release = dir.path().display().to_string();
    cvo()
        .args(["validate", "--release", &release, "--max-file-bytes", "10"])
        .assert()
        .code(1)
        .stdout(predicate::str::contains(
            "larger than the limit of 10 bytes per file",
        ))
        .stdout(predicate::str::contains("--max-file-bytes"));
    cvo()
        .args([
            "validate",
            "--release",
            &release,
            "--max-release-bytes",
            "10",
        ])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--max-release-bytes"));
    cvo()
        .args([
            "validate",
            "--release",
            &release,
            "--previous",
            "manifests-example",
        ])
        .args(["--max-release-bytes", "200"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "--previous: release manifests-example is larger",
        ));
    cvo()
        .args(["validate", "--release", &release])
        .assert()
        .success();
}

/// Two files whose names differ only in bytes that are not UTF-8 stay two distinct files in
/// every machine-readable output (a lossy conversion would make both `0000_10_a_�.yaml`).
#[cfg(unix)]
#[test]
fn file_names_that_are_not_utf8_stay_distinct_in_json_and_sarif() {
    use std::os::unix::ffi::OsStrExt;
    let dir = tempfile::tempdir().unwrap();
    for byte in [0xFEu8, 0xFF] {
        let mut name = b"0000_10_a_".to_vec();
        name.push(byte);
        name.extend_from_slice(b".yaml");
        std::fs::write(
            dir.path().join(std::ffi::OsStr::from_bytes(&name)),
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n  namespace: ns\n  annotations:\n    release.openshift.io/delete: \"yes\"\n",
        )
        .unwrap();
    }
    let release = dir.path().display().to_string();
    let (code, report) = validate_json(&["--release".into(), release.clone()]);
    assert_eq!(code, 1);
    let mut files: Vec<String> = report["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["rule"] == "invalid-delete-value")
        .map(|d| d["location"]["file"].as_str().unwrap().to_owned())
        .collect();
    files.sort();
    files.dedup();
    assert_eq!(files.len(), 2, "{report}");
    assert!(files[0].ends_with("0000_10_a_\\xFE.yaml"), "{files:?}");
    assert!(files[1].ends_with("0000_10_a_\\xFF.yaml"), "{files:?}");

    let out = cvo()
        .args(["validate", "--format", "sarif", "--release", &release])
        .output()
        .unwrap();
    let sarif: Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut uris: Vec<String> = sarif["runs"][0]["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["ruleId"] == "invalid-delete-value")
        .map(|r| {
            r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    uris.sort();
    uris.dedup();
    assert_eq!(uris.len(), 2, "{uris:?}");
}

/// A message quotes at most 200 characters of the input, whatever the rule.
#[test]
fn messages_quote_at_most_200_characters_of_the_input() {
    let dir = tempfile::tempdir().unwrap();
    let value = "y".repeat(5000);
    std::fs::write(
        dir.path().join("0000_10_a_cm.yaml"),
        format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n  namespace: ns\n  annotations:\n    release.openshift.io/delete: \"{value}\"\n"),
    )
    .unwrap();
    let (_, report) = validate_json(&["--release".into(), dir.path().display().to_string()]);
    let diagnostics = report["diagnostics"].as_array().unwrap();
    let invalid = diagnostics
        .iter()
        .find(|d| d["rule"] == "invalid-delete-value")
        .unwrap_or_else(|| panic!("{report}"));
    let message = invalid["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("{}…", "y".repeat(200))),
        "{message}"
    );
    assert!(!message.contains(&"y".repeat(201)), "{message}");
    for d in diagnostics {
        let text = format!("{} {}", d["message"], d["help"]);
        assert!(!text.contains(&"y".repeat(201)), "{text}");
    }
}

/// A copy of manifests-example as 1.4.1 whose shipped binding `cvo-operator` binds a
/// least-privilege role instead of cluster-admin, under the same name.
fn rebound_under_the_same_name(dest: &Path) {
    for entry in std::fs::read_dir(root().join("manifests-example")).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, dest.join(path.file_name().unwrap())).unwrap();
    }
    std::fs::write(
        dest.join("release-metadata"),
        r#"{"kind": "cincinnati-metadata-v0", "version": "1.4.1", "previous": ["1.4.0"]}"#,
    )
    .unwrap();
    let file = dest.join(common::example::RBAC_FILE);
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains("  name: cluster-admin\n"));
    std::fs::write(
        &file,
        text.replace(
            "  name: cluster-admin\n",
            "  name: cvo-operator-least-privilege\n",
        ),
    )
    .unwrap();
}

#[test]
fn a_binding_that_changes_its_role_under_its_name_is_immutable_roleref() {
    let dir = tempfile::tempdir().unwrap();
    rebound_under_the_same_name(dir.path());
    let (code, report) = validate_json(&[
        "--release".into(),
        dir.path().display().to_string(),
        "--previous".into(),
        "manifests-example".into(),
    ]);
    assert_eq!(code, 1, "{report:#}");
    let found: Vec<&Value> = report["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["rule"] == "immutable-roleref")
        .collect();
    assert_eq!(found.len(), 1, "{report:#}");
    let d = found[0];
    assert_eq!(d["severity"], "error");
    assert_eq!(d["object"]["kind"], "ClusterRoleBinding");
    assert_eq!(d["object"]["name"], "cvo-operator");
    assert!(
        d["location"]["file"]
            .as_str()
            .unwrap()
            .ends_with(common::example::RBAC_FILE),
        "{d}"
    );
    assert!(d["location"]["line"].as_u64().is_some(), "{d}");
    let message = d["message"].as_str().unwrap();
    for want in [
        "binds ClusterRole cvo-operator-least-privilege",
        "bound ClusterRole cluster-admin",
        "422",
    ] {
        assert!(message.contains(want), "{want}: {message}");
    }
    assert!(
        d["help"]
            .as_str()
            .unwrap()
            .contains("delete manifest ordered after the new binding"),
        "{d}"
    );
    // Without --previous there is nothing to compare.
    let (code, report) = validate_json(&["--release".into(), dir.path().display().to_string()]);
    assert_eq!(code, 0, "{report:#}");
}

#[test]
fn the_least_privilege_migration_validates_clean_against_the_example() {
    let dir = tempfile::tempdir().unwrap();
    let release =
        common::example::least_privilege_update(&dir.path().join("1.5.0"), &common::cli::binary());
    cvo()
        .args(["validate", "--release"])
        .arg(&release)
        .args(["--previous", "manifests-example"])
        .assert()
        .code(0)
        .stdout(predicate::str::ends_with("0 errors, 0 warnings, 0 notes\n"))
        .stdout(predicate::str::contains("[").not());
}

/// The issue's example: 3,000 ConfigMaps without profile annotations and two manifests with
/// one. Read in the default profile, 3,000 of 3,002 are left out: validate says so (one
/// warning, not 3,000) and counts them under `excluded.profile`.
#[test]
fn a_profile_that_leaves_out_most_manifests_is_said_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let profile = "  annotations:\n    include.release.openshift.io/self-managed-high-availability: \"true\"\n";
    std::fs::write(
        dir.path().join("0000_10_app_00_namespace.yaml"),
        format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: app\n{profile}"),
    )
    .unwrap();
    std::fs::write(
        dir.path().join("0000_10_app_01_settings.yaml"),
        common::configmap("app", "settings", profile, &[]),
    )
    .unwrap();
    for i in 0..3000 {
        std::fs::write(
            dir.path().join(format!("0000_50_app_{i:04}_cm.yaml")),
            common::configmap("app", &format!("cm-{i}"), "", &[("k", "v")]),
        )
        .unwrap();
    }
    let release = dir.path().display().to_string();
    let (code, report) = validate_json(&["--release".into(), release.clone()]);
    assert_eq!(code, 0, "{report:#}");
    assert_eq!(rules_in(&report), ["manifest-in-no-profile"]);
    let d = &report["diagnostics"][0];
    let message = d["message"].as_str().unwrap();
    assert!(
        message.starts_with("3000 of 3002 manifests name no cluster profile"),
        "{message}"
    );
    assert!(
        message.ends_with("in 0000_50_app_0000_cm.yaml, 0000_50_app_0001_cm.yaml, 0000_50_app_0002_cm.yaml, 0000_50_app_0003_cm.yaml, 0000_50_app_0004_cm.yaml and 2995 more files"),
        "{message}"
    );
    assert_eq!(
        report["summary"]["excluded"],
        serde_json::json!({"profile": 3000, "featureSet": 0, "featureGate": 0, "majorVersion": 0, "capability": 0, "exclude": 0})
    );
    assert_eq!(
        report["summary"]["profiles"],
        serde_json::json!([{
            "profile": "self-managed-high-availability",
            "manifests": 3002,
            "excluded": {"profile": 3000, "featureSet": 0, "featureGate": 0, "majorVersion": 0, "capability": 0, "exclude": 0},
        }])
    );
    // The text summary, and `-o` as the short form of `--format`.
    let out = cvo()
        .args(["validate", "--release", &release])
        .assert()
        .code(0)
        .get_output()
        .stdout
        .clone();
    let text = String::from_utf8(out).unwrap();
    assert!(text.ends_with("excluded in profile self-managed-high-availability: 3000 of 3002 manifests (profile 3000, feature set 0, feature gate 0, major version 0, capability 0, exclude 0)\n0 errors, 1 warning, 0 notes\n"), "{text}");
    let out = cvo()
        .args(["validate", "-o", "sarif", "--release", &release])
        .output()
        .unwrap();
    let sarif: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(sarif["runs"][0]["properties"]["excluded"]["profile"], 3000);
}

/// Per profile when the release uses several: each reading's counts, `excluded` the default
/// profile's.
#[test]
fn each_profile_read_is_counted() {
    let dir = tempfile::tempdir().unwrap();
    let both = "  annotations:\n    include.release.openshift.io/self-managed-high-availability: \"true\"\n    include.release.openshift.io/hypershift: \"true\"\n";
    let one = "  annotations:\n    include.release.openshift.io/hypershift: \"true\"\n    capability.openshift.io/name: \"Console\"\n";
    std::fs::write(
        dir.path().join("0000_10_app_00_namespace.yaml"),
        format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: app\n{both}"),
    )
    .unwrap();
    std::fs::write(
        dir.path().join("0000_10_app_01_only.yaml"),
        common::configmap("app", "only", one, &[]),
    )
    .unwrap();
    let (code, report) = validate_json(&["--release".into(), dir.path().display().to_string()]);
    assert_eq!(code, 0, "{report:#}");
    assert_eq!(
        report["summary"]["excluded"],
        serde_json::json!({"profile": 1, "featureSet": 0, "featureGate": 0, "majorVersion": 0, "capability": 0, "exclude": 0})
    );
    let profiles = report["summary"]["profiles"].as_array().unwrap();
    assert_eq!(profiles.len(), 2);
    assert_eq!(profiles[0]["profile"], "hypershift");
    assert_eq!(profiles[0]["excluded"]["profile"], 0);
}

/// A capabilities.yaml the loader refuses shows in validate, naming the file, with the fix.
#[test]
fn a_bad_capability_catalogue_is_reported_with_its_file() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("capabilities.yaml"),
        "known: [Console, Console]\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("0000_50_app_01_settings.yaml"),
        common::configmap(
            "app",
            "settings",
            "  annotations:\n    capability.openshift.io/name: Console\n",
            &[],
        ),
    )
    .unwrap();
    let (code, report) = validate_json(&["--release".into(), dir.path().display().to_string()]);
    assert_eq!(code, 1, "{report:#}");
    let d = report["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["rule"] == "release-metadata")
        .unwrap_or_else(|| panic!("{report:#}"));
    assert!(
        d["location"]["file"]
            .as_str()
            .unwrap()
            .ends_with("capabilities.yaml"),
        "{d}"
    );
    assert_eq!(
        d["message"],
        "capabilities.yaml: known: `Console` is listed twice"
    );
    assert!(
        d["help"].as_str().unwrap().contains("docs/capabilities.md"),
        "{d}"
    );
}

/// A payload's catalogue lives in `release-manifests/`: messages name it inside the release.
#[test]
fn a_payloads_catalogue_is_named_inside_the_release() {
    let dir = tempfile::tempdir().unwrap();
    let manifests = dir.path().join("manifests");
    let release_manifests = dir.path().join("release-manifests");
    std::fs::create_dir_all(&manifests).unwrap();
    std::fs::create_dir_all(&release_manifests).unwrap();
    std::fs::write(
        release_manifests.join("capabilities.yaml"),
        "known:\n  - Console\n  - Insights\nsets:\n  vCurrent:\n    - Console\n",
    )
    .unwrap();
    std::fs::write(
        manifests.join("0000_50_app_01_settings.yaml"),
        common::configmap(
            "app",
            "settings",
            "  annotations:\n    capability.openshift.io/name: console\n",
            &[],
        ),
    )
    .unwrap();
    let (code, report) = validate_json(&["--release".into(), dir.path().display().to_string()]);
    assert_eq!(code, 1, "{report:#}");
    assert_eq!(
        rules_in(&report),
        ["capability-unknown", "capability-in-no-set"],
        "{report:#}"
    );
    let unknown = &report["diagnostics"][0];
    assert!(
        unknown["message"]
            .as_str()
            .unwrap()
            .contains("catalogue release-manifests/capabilities.yaml (it knows Console, Insights)"),
        "{unknown}"
    );
    assert!(
        unknown["help"]
            .as_str()
            .unwrap()
            .starts_with("did you mean `Console`?"),
        "{unknown}"
    );
    let no_set = &report["diagnostics"][1];
    assert!(
        no_set["location"]["file"]
            .as_str()
            .unwrap()
            .ends_with("release-manifests/capabilities.yaml"),
        "{no_set}"
    );
    // `- Insights` is on line 3.
    assert_eq!(no_set["location"]["line"], 3, "{no_set}");
    assert_eq!(no_set["object"], Value::Null);
}

/// `--live` checks the release's CRDs against the cluster's `status.storedVersions` (the
/// in-memory server, or the real one with `CVO_TEST_KUBECONFIG`), without `--previous`: a
/// CRD that still stores `v1alpha1` cannot drop it; after a storage migration (storedVersions
/// patched to `[v1]` through the status subresource, as a migrator does) only the warning
/// that its clients break is left. The schema is compared with the cluster's CRD.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_checks_crds_against_the_clusters_stored_versions() {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use kube::api::{Api, Patch, PatchParams, PostParams};
    use serde_json::json;

    let tc = common::cluster().await;
    let group = format!("{}.{}", common::unique("g"), common::TEST_GROUP_SUFFIX);
    let name = format!("widgets.{group}");
    let schema = json!({"openAPIV3Schema": {"type": "object", "properties": {
        "spec": {"type": "object", "properties": {"mode": {"type": "string"}}}}}});
    let crd_json = |versions: serde_json::Value| {
        json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": name},
            "spec": {
                "group": group,
                "scope": "Namespaced",
                "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
                "versions": versions,
            },
        })
    };
    let on_cluster = crd_json(json!([
        {"name": "v1alpha1", "served": true, "storage": false, "schema": schema},
        {"name": "v1", "served": true, "storage": true, "schema": schema},
    ]));
    let crds = Api::<CustomResourceDefinition>::all(tc.client.clone());
    crds.create(
        &PostParams::default(),
        &serde_json::from_value(on_cluster).unwrap(),
    )
    .await
    .expect("create CRD");
    tc.track_crd(&name);
    common::wait_established(&tc, &name).await;
    let stored = |versions: serde_json::Value| {
        let crds = crds.clone();
        let name = name.clone();
        async move {
            crds.patch_status(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"storedVersions": versions}})),
            )
            .await
            .expect("patch status.storedVersions");
        }
    };
    stored(json!(["v1alpha1", "v1"])).await;

    // The new release drops v1alpha1.
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = tc.kubeconfig_file(dir.path()).await;
    let rel = dir.path().join("release");
    std::fs::create_dir(&rel).unwrap();
    let new_crd = crd_json(json!([
        {"name": "v1", "served": true, "storage": true, "schema": schema},
    ]));
    std::fs::write(
        rel.join("0000_50_widgets_00_crd.yaml"),
        serde_json::to_string_pretty(&new_crd).unwrap(),
    )
    .unwrap();
    let rel = rel.display().to_string();
    let args = ["validate", "--release", &rel, "--live", "--format", "json"];
    let crd_findings = |out: &str| -> Vec<Value> {
        let report: Value = serde_json::from_str(out).unwrap_or_else(|e| panic!("{e}: {out}"));
        report["diagnostics"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| d["rule"].as_str().unwrap().starts_with("crd-"))
            .cloned()
            .collect()
    };

    let (code, out, err) = common::run_cvo(&kubeconfig, &args).await;
    assert_eq!(code, 1, "{out}\n{err}");
    let found = crd_findings(&out);
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_eq!(found[0]["rule"], "crd-stored-version-removal");
    assert_eq!(found[0]["severity"], "error");
    let message = found[0]["message"].as_str().unwrap();
    assert!(
        message.starts_with(".spec.versions[v1alpha1]: "),
        "{message}"
    );
    assert!(message.contains("status.storedVersions"), "{message}");
    assert_eq!(found[0]["object"]["name"], name.as_str());

    // After the storage migration, what is left is that v1alpha1's clients break.
    stored(json!(["v1"])).await;
    let (code, out, err) = common::run_cvo(&kubeconfig, &args).await;
    assert_eq!(code, 0, "{out}\n{err}");
    let found = crd_findings(&out);
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_eq!(found[0]["rule"], "crd-served-version-removal");
    assert_eq!(found[0]["severity"], "warning");

    // Without --previous, the schema is compared with the CRD as the cluster serves it: an
    // enum put on an existing field is reported; the same schema as on the cluster is not
    // (the served form reads back as written).
    let narrowed = json!({"openAPIV3Schema": {"type": "object", "properties": {
        "spec": {"type": "object", "properties": {"mode": {"type": "string", "enum": ["a"]}}}}}});
    std::fs::write(
        Path::new(&rel).join("0000_50_widgets_00_crd.yaml"),
        serde_json::to_string_pretty(&crd_json(json!([
            {"name": "v1alpha1", "served": true, "storage": false, "schema": schema},
            {"name": "v1", "served": true, "storage": true, "schema": narrowed},
        ])))
        .unwrap(),
    )
    .unwrap();
    let (code, out, err) = common::run_cvo(&kubeconfig, &args).await;
    assert_eq!(code, 1, "{out}\n{err}");
    let found = crd_findings(&out);
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_eq!(found[0]["rule"], "crd-enum");
    let message = found[0]["message"].as_str().unwrap();
    assert!(
        message.starts_with(
            ".spec.versions[v1].schema.openAPIV3Schema.properties.spec.properties.mode.enum: "
        ) && message.ends_with("compared with the CRD on the cluster"),
        "{message}"
    );
}

/// `--live` without a cluster that answers is exit code 2, never a clean report.
#[test]
fn live_without_a_cluster_fails_closed() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\nusers: []\n",
    )
    .unwrap();
    let out = cvo()
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["validate", "--release", "manifests-example", "--live"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--live:"), "{err}");
    assert!(err.contains("nothing is assumed"), "{err}");
}

/// Issue 20: the OpenShift corpus against itself has no CRD finding; a copy in which five CRDs
/// are mutated (a field removed, an enum value removed, the storage version dropped, the scope
/// changed, a field newly required) reports exactly those five, each with its rule and path,
/// and nothing else that the unchanged corpus does not report.
#[test]
#[ignore = "needs the shared OpenShift corpus (../shared/corpus, or CVO_TEST_CORPUS): run with --include-ignored (.ci/run does)"]
fn corpus_crd_mutations_are_each_reported_with_rule_and_path() {
    let corpus = corpus("openshift-release");
    let run = |release: &Path| -> Vec<Value> {
        let (_, report) = validate_json(&[
            "--release".into(),
            release.display().to_string(),
            "--previous".into(),
            corpus.display().to_string(),
        ]);
        report["diagnostics"].as_array().unwrap().clone()
    };
    let baseline = run(&corpus);
    let crd_rules: Vec<&Value> = baseline
        .iter()
        .filter(|d| d["rule"].as_str().unwrap().starts_with("crd-"))
        .collect();
    assert!(crd_rules.is_empty(), "{crd_rules:#?}");

    // A copy with five CRDs mutated, each in its own file (written back as JSON, which YAML
    // reads alike).
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("release");
    std::fs::create_dir(&copy).unwrap();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&corpus)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    for f in &files {
        std::fs::copy(f, copy.join(f.file_name().unwrap())).unwrap();
    }
    type Mutation = fn(&mut Value) -> Option<String>;
    let mutations: [(&str, Mutation); 5] = [
        ("crd-existing-field-removal", |crd| {
            let (v, spec) = spec_schema(crd)?;
            let props = spec["properties"].as_object_mut()?;
            let field = props.keys().next()?.clone();
            props.remove(&field);
            // A required field that is removed is reported as removed only.
            if let Some(req) = spec["required"].as_array_mut() {
                req.retain(|r| r != field.as_str());
            }
            Some(format!(
                ".spec.versions[{v}].schema.openAPIV3Schema.properties.spec.properties.{field}"
            ))
        }),
        ("crd-enum", |crd| {
            let (v, spec) = spec_schema(crd)?;
            for (field, schema) in spec["properties"].as_object_mut()? {
                if let Some(values) = schema.get_mut("enum").and_then(Value::as_array_mut)
                    && values.len() >= 2
                {
                    values.pop();
                    return Some(format!(
                        ".spec.versions[{v}].schema.openAPIV3Schema.properties.spec.properties.{field}.enum"
                    ));
                }
            }
            None
        }),
        ("crd-stored-version-removal", |crd| {
            let versions = crd["spec"]["versions"].as_array_mut()?;
            if versions.len() != 1 {
                return None;
            }
            let old = versions[0]["name"].as_str()?.to_owned();
            versions[0]["name"] = Value::String(format!("{old}next"));
            Some(format!(".spec.versions[{old}]"))
        }),
        ("crd-scope", |crd| {
            let scope = crd["spec"]["scope"].as_str()?;
            let other = if scope == "Namespaced" {
                "Cluster"
            } else {
                "Namespaced"
            };
            crd["spec"]["scope"] = Value::String(other.into());
            Some(".spec.scope".into())
        }),
        ("crd-required", |crd| {
            let (v, spec) = spec_schema(crd)?;
            let required: Vec<String> = spec["required"]
                .as_array()
                .map(|r| {
                    r.iter()
                        .filter_map(|s| s.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default();
            let field = spec["properties"]
                .as_object()?
                .keys()
                .find(|k| !required.contains(k))?
                .clone();
            let mut now: Vec<Value> = required.into_iter().map(Value::String).collect();
            now.push(Value::String(field));
            spec["required"] = Value::Array(now);
            Some(format!(
                ".spec.versions[{v}].schema.openAPIV3Schema.properties.spec.required"
            ))
        }),
    ];
    let mut expected: Vec<(String, String, String)> = Vec::new();
    let mut mutation = mutations.iter();
    let mut next = mutation.next();
    // Every other CRD is written back as JSON too (keys in another order, no comments): a
    // change of form only, which must report nothing.
    let mut rewritten = 0;
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        if !text.contains("kind: CustomResourceDefinition") || text.contains("\n---") {
            continue;
        }
        let Ok(mut crd) = serde_saphyr::from_str::<Value>(&text) else {
            continue;
        };
        // Only CRDs the default feature set applies.
        let feature_sets = crd["metadata"]["annotations"]["release.openshift.io/feature-set"]
            .as_str()
            .unwrap_or("Default");
        if !feature_sets.split(',').any(|s| s == "Default") {
            continue;
        }
        if crd["kind"] != "CustomResourceDefinition"
            || crd["metadata"]["annotations"]["release.openshift.io/delete"].is_string()
        {
            continue;
        }
        let name = f.file_name().unwrap().to_str().unwrap().to_owned();
        // A mutation that does not apply leaves the CRD as it was (indexing may add nulls).
        let mut mutated = crd.clone();
        if let Some((rule, mutate)) = next
            && let Some(path) = mutate(&mut mutated)
        {
            crd = mutated;
            expected.push((rule.to_string(), name.clone(), path));
            next = mutation.next();
        } else {
            rewritten += 1;
        }
        std::fs::write(copy.join(&name), serde_json::to_string(&crd).unwrap()).unwrap();
    }
    assert!(rewritten > 50, "only {rewritten} CRDs rewritten");
    assert_eq!(
        expected.len(),
        5,
        "the corpus has a CRD for every mutation: {expected:?}"
    );

    let key = |d: &Value| (d["rule"].clone(), d["message"].clone());
    let before: std::collections::HashSet<_> = baseline.iter().map(key).collect();
    let new: Vec<Value> = run(&copy)
        .into_iter()
        .filter(|d| !before.contains(&key(d)))
        .collect();
    for (rule, file, path) in &expected {
        assert!(
            new.iter().any(|d| d["rule"] == rule.as_str()
                && d["location"]["file"]
                    .as_str()
                    .unwrap()
                    .ends_with(file.as_str())
                && d["message"]
                    .as_str()
                    .unwrap()
                    .starts_with(&format!("{path}: "))),
            "no {rule} at {path} in {file}: {new:#?}"
        );
    }
    assert_eq!(
        new.len(),
        expected.len(),
        "only the mutations are reported: {new:#?}"
    );
}

/// The first version's schema of `spec` in a CRD: (version name, schema).
fn spec_schema(crd: &mut Value) -> Option<(String, &mut Value)> {
    let version = crd["spec"]["versions"].get_mut(0)?;
    let name = version["name"].as_str()?.to_owned();
    let spec = version.pointer_mut("/schema/openAPIV3Schema/properties/spec")?;
    spec.get("properties")?
        .as_object()
        .filter(|p| !p.is_empty())?;
    Some((name, spec))
}

#[test]
fn crd_findings_point_at_the_changed_line_of_the_new_manifest() {
    let dir = tempfile::tempdir().unwrap();
    let crd = |versions: &str| {
        format!(
            "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: widgets.example.com\nspec:\n  group: example.com\n  names:\n    kind: Widget\n    plural: widgets\n  scope: Namespaced\n  versions:\n{versions}"
        )
    };
    let version = |name: &str, storage: bool, modes: &str| {
        format!(
            "  - name: {name}\n    served: true\n    storage: {storage}\n    schema:\n      openAPIV3Schema:\n        type: object\n        properties:\n          spec:\n            type: object\n            properties:\n              mode:\n                type: string\n                enum: {modes}\n"
        )
    };
    let (old, new) = (dir.path().join("old"), dir.path().join("new"));
    for (d, text) in [
        (
            &old,
            crd(&(version("v1alpha1", true, "[A, B]") + &version("v1", false, "[A, B]"))),
        ),
        (&new, crd(&version("v1", true, "[A]"))),
    ] {
        std::fs::create_dir(d).unwrap();
        std::fs::write(d.join("0000_50_widgets_00_crd.yaml"), text).unwrap();
    }
    let new_text = std::fs::read_to_string(new.join("0000_50_widgets_00_crd.yaml")).unwrap();
    let line_of = |needle: &str| {
        new_text
            .lines()
            .position(|l| l.trim_start().starts_with(needle))
            .unwrap() as u64
            + 1
    };
    let (code, report) = validate_json(&[
        "--release".into(),
        new.display().to_string(),
        "--previous".into(),
        old.display().to_string(),
    ]);
    assert_eq!(code, 1, "{report:#}");
    let at = |rule: &str| {
        report["diagnostics"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["rule"] == rule)
            .unwrap_or_else(|| panic!("no {rule}: {report:#}"))["location"]["line"]
            .as_u64()
    };
    // The enum of v1, and spec.versions for the version the new CRD no longer has.
    assert_eq!(at("crd-enum"), Some(line_of("enum:")), "{report:#}");
    assert_eq!(
        at("crd-stored-version-removal"),
        Some(line_of("versions:")),
        "{report:#}"
    );
}

/// The opt-out annotation makes a reviewed change a note, whatever level `--rule` sets; a
/// misspelt name in it is an error, not silently ignored.
#[test]
fn an_allowed_crd_change_stays_a_note_under_a_rule_level_and_a_typo_is_an_error() {
    let bad = fixtures().join("crd-enum/bad");
    let dir = tempfile::tempdir().unwrap();
    let release = dir.path().join("release");
    std::fs::create_dir(&release).unwrap();
    let file = "0000_50_widgets_00_crd.yaml";
    let annotate = |names: &str| {
        let text = std::fs::read_to_string(bad.join("release").join(file)).unwrap();
        let text = text.replacen(
            "  name: widgets.example.com\n",
            &format!(
                "  name: widgets.example.com\n  annotations:\n    release.cvo.io/allow-crd-changes: \"{names}\"\n"
            ),
            1,
        );
        std::fs::write(release.join(file), text).unwrap();
    };
    let args = |more: &[&str]| {
        let mut a = vec![
            "--release".to_owned(),
            release.display().to_string(),
            "--previous".to_owned(),
            bad.join("previous").display().to_string(),
        ];
        a.extend(more.iter().map(|s| s.to_string()));
        a
    };
    annotate("enum");
    for more in [
        &[][..],
        &["--rule", "crd-enum=error"],
        &["--rule", "crd-enum=warning"],
    ] {
        let (code, report) = validate_json(&args(more));
        assert_eq!(code, 0, "{more:?}: {report:#}");
        let d = &report["diagnostics"][0];
        assert_eq!(d["rule"], "crd-enum", "{report:#}");
        assert_eq!(d["severity"], "note", "{more:?}: {report:#}");
        assert!(
            d["message"]
                .as_str()
                .unwrap()
                .contains("allowed by the CRD's release.cvo.io/allow-crd-changes annotation"),
            "{report:#}"
        );
    }
    annotate("enums");
    let (code, report) = validate_json(&args(&[]));
    assert_eq!(code, 1, "{report:#}");
    // At the annotations, in the new manifest.
    assert_eq!(
        report["diagnostics"][0]["location"]["line"], 5,
        "{report:#}"
    );
    assert_eq!(
        rules_in(&report),
        ["invalid-suppression", "crd-enum"],
        "{report:#}"
    );
}
