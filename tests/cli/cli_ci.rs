//! `cvo validate` in release engineers' CI: the six output formats agree on the findings
//! (example release, a fixture with every kind of finding, the OpenShift corpus), the JUnit
//! report reads with a real JUnit reader (Python's `junitparser`) and is valid against the
//! strict JUnit schema (`xmlschema`, tests/fixtures/ci/junit), the GitLab report has the
//! fields GitLab requires with unique, stable fingerprints.
//!
//! The Python tools come from `CVO_TEST_VENV` (a virtualenv `.ci/run` creates) or, without it,
//! the `python3` on PATH. The tests that need them are ignored by default (`common::needs`);
//! run with `--include-ignored`, a missing tool fails them.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command as Process;

use serde_json::Value;

use crate::common;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// One finding as every format can say it: rule, severity, file name, line (0 when none).
type Key = (String, String, String, usize);

/// Runs `cvo validate -o FORMAT ARGS` from the repository root; stdout and the exit code.
fn run(format: &str, args: &[&str]) -> (String, i32) {
    let out = common::cli::cvo()
        .current_dir(root())
        .arg("validate")
        .args(args)
        .args(["-o", format])
        .output()
        .unwrap();
    (
        String::from_utf8(out.stdout).expect("UTF-8 report"),
        out.status.code().expect("exited"),
    )
}

fn name_of(file: &str) -> String {
    file.rsplit('/').next().unwrap_or(file).to_owned()
}

fn sorted(keys: impl IntoIterator<Item = Key>) -> Vec<Key> {
    let mut v: Vec<Key> = keys.into_iter().collect();
    v.sort();
    v
}

fn from_text(out: &str) -> Vec<Key> {
    let lines: Vec<&str> = out.lines().collect();
    let mut keys = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some((severity, rest)) = ["error", "warning", "note"]
            .iter()
            .find_map(|s| line.strip_prefix(&format!("{s}[")).map(|r| (*s, r)))
        else {
            continue;
        };
        let rule = rest.split(']').next().unwrap();
        let at = lines[i + 1..]
            .iter()
            .find_map(|l| l.strip_prefix("  --> "))
            .expect("a location line");
        let at = at.split(" (document").next().unwrap();
        let (file, line) = match at.rsplit_once(':') {
            Some((f, l)) if l.parse::<usize>().is_ok() => (f, l.parse().unwrap()),
            _ => (at, 0),
        };
        keys.push((rule.into(), severity.into(), name_of(file), line));
    }
    sorted(keys)
}

fn from_json(out: &str) -> Vec<Key> {
    let v: Value = serde_json::from_str(out).unwrap();
    sorted(v["diagnostics"].as_array().unwrap().iter().map(|d| {
        (
            d["rule"].as_str().unwrap().into(),
            d["severity"].as_str().unwrap().into(),
            name_of(d["location"]["file"].as_str().unwrap()),
            d["location"]["line"].as_u64().unwrap_or(0) as usize,
        )
    }))
}

/// SARIF and GitLab give line 1 for a finding without a line: such keys are compared with
/// the line they would have there.
fn line_one(keys: &[Key]) -> Vec<Key> {
    sorted(
        keys.iter()
            .map(|(r, s, f, l)| (r.clone(), s.clone(), f.clone(), (*l).max(1))),
    )
}

fn from_sarif(out: &str) -> Vec<Key> {
    let v: Value = serde_json::from_str(out).unwrap();
    sorted(v["runs"][0]["results"].as_array().unwrap().iter().map(|r| {
        let loc = &r["locations"][0]["physicalLocation"];
        (
            r["ruleId"].as_str().unwrap().into(),
            r["level"].as_str().unwrap().into(),
            name_of(loc["artifactLocation"]["uri"].as_str().unwrap()),
            loc["region"]["startLine"].as_u64().unwrap() as usize,
        )
    }))
}

fn from_github(out: &str) -> Vec<Key> {
    let mut keys = Vec::new();
    for line in out.lines().filter(|l| l.starts_with("::")) {
        let (command, rest) = line[2..].split_once(' ').unwrap();
        let (props, _message) = rest.split_once("::").unwrap();
        let mut file = String::new();
        let mut at = 0;
        let mut rule = String::new();
        for p in props.split(',') {
            let (k, v) = p.split_once('=').unwrap();
            let v = v
                .replace("%3A", ":")
                .replace("%2C", ",")
                .replace("%25", "%");
            match k {
                "file" => file = name_of(&v),
                "line" => at = v.parse().unwrap(),
                "title" => rule = v,
                other => panic!("unexpected property {other} in {line}"),
            }
        }
        let severity = match command {
            "notice" => "note",
            other => other,
        };
        keys.push((rule, severity.into(), file, at));
    }
    sorted(keys)
}

fn from_gitlab(out: &str) -> Vec<Key> {
    let v: Value = serde_json::from_str(out).unwrap();
    let issues = v.as_array().expect("an array of issues");
    let fingerprints: BTreeSet<&str> = issues
        .iter()
        .map(|i| i["fingerprint"].as_str().unwrap())
        .collect();
    assert_eq!(fingerprints.len(), issues.len(), "fingerprints are unique");
    sorted(issues.iter().map(|i| {
        for field in ["description", "check_name", "fingerprint", "severity"] {
            assert!(
                i[field].as_str().is_some_and(|s| !s.is_empty()),
                "{field} missing in {i}"
            );
        }
        let severity = match i["severity"].as_str().unwrap() {
            "major" => "error",
            "minor" => "warning",
            "info" => "note",
            other => panic!("unexpected severity {other}"),
        };
        (
            i["check_name"].as_str().unwrap().into(),
            severity.into(),
            name_of(i["location"]["path"].as_str().unwrap()),
            i["location"]["lines"]["begin"].as_u64().unwrap() as usize,
        )
    }))
}

/// The Python with the CI tools; the test fails when it cannot import `module`.
pub fn python_with(module: &str) -> PathBuf {
    let python = match std::env::var_os("CVO_TEST_VENV").filter(|v| !v.is_empty()) {
        Some(venv) => Path::new(&venv).join("bin/python"),
        None => PathBuf::from("python3"),
    };
    let found = Process::new(&python)
        .args(["-c", &format!("import {module}")])
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        common::needs::missing(
            &format!("Python's {module} ({} cannot import it)", python.display()),
            "set CVO_TEST_VENV to a virtualenv holding junitparser, xmlschema and pre-commit (.ci/run makes one)",
        );
    }
    python
}

/// Reads a JUnit report with `junitparser`; the findings (from each case's failure or
/// system-out text: `SEVERITY[RULE]: …` then `  --> FILE:LINE …`, with the rule also the
/// case's classname), and per suite its name, case count and failure count.
fn from_junit(python: &Path, xml: &str) -> (Vec<Key>, Vec<(String, usize, usize)>) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("report.xml");
    std::fs::write(&file, xml).unwrap();
    let script = r#"
import json, re, sys
from junitparser import JUnitXml, Failure
xml = JUnitXml.fromfile(sys.argv[1])
keys, suites = [], []
for suite in xml:
    cases = list(suite)
    failures = sum(1 for c in cases if any(isinstance(r, Failure) for r in c.result))
    suites.append([suite.name, len(cases), failures])
    for case in cases:
        if case.name == "no findings":
            continue
        failed = [r for r in case.result if isinstance(r, Failure)]
        body = failed[0].text if failed else case.system_out
        head, at = body.split("\n")[0], body.split("\n")[1]
        severity, rule = re.match(r"^(error|warning|note)\[([a-z-]+)\]: ", head).groups()
        assert case.classname == "cvo.validate." + rule, case.classname
        assert bool(failed) == (severity == "error"), case.name
        place = re.match(r"^  --> (.*?)(?::(\d+))?(?: \(document \d+\))?$", at)
        assert place, at
        keys.append([rule, severity, place.group(1).rsplit("/", 1)[-1], int(place.group(2) or 0)])
        # The case's name starts with the same place.
        assert case.name.startswith(place.group(1)), (case.name, at)
print(json.dumps({"keys": keys, "suites": suites}))
"#;
    let out = Process::new(python)
        .args(["-c", script])
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "junitparser could not read the report: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let keys = sorted(v["keys"].as_array().unwrap().iter().map(|k| {
        (
            k[0].as_str().unwrap().into(),
            k[1].as_str().unwrap().into(),
            k[2].as_str().unwrap().into(),
            k[3].as_u64().unwrap() as usize,
        )
    }));
    let suites = v["suites"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s[0].as_str().unwrap().into(),
                s[1].as_u64().unwrap() as usize,
                s[2].as_u64().unwrap() as usize,
            )
        })
        .collect();
    (keys, suites)
}

/// Validates a JUnit report against the strict JUnit schema (tests/fixtures/ci/junit) with
/// the `xmlschema` validator; panics with its reasons when the report is not valid.
fn valid_junit(python: &Path, xml: &str) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("report.xml");
    std::fs::write(&file, xml).unwrap();
    let script = r#"
import sys, xmlschema
schema = xmlschema.XMLSchema10(sys.argv[1])
errors = list(schema.iter_errors(sys.argv[2]))
for e in errors[:5]:
    print(e.reason, e.path, file=sys.stderr)
sys.exit(1 if errors else 0)
"#;
    let out = Process::new(python)
        .args(["-c", script])
        .arg(root().join("tests/fixtures/ci/junit/junit-strict.xsd"))
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "the JUnit report is not valid against the strict JUnit schema: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// All six formats of `args`: the same findings and the same exit code; returns the findings.
fn six_formats_agree(args: &[&str], python: &Path) -> Vec<Key> {
    let (text, code) = run("text", args);
    let keys = from_text(&text);
    let (json, c) = run("json", args);
    assert_eq!(c, code);
    assert_eq!(from_json(&json), keys, "json vs text for {args:?}");
    let (sarif, c) = run("sarif", args);
    assert_eq!(c, code);
    assert_eq!(from_sarif(&sarif), line_one(&keys), "sarif vs text");
    let (github, c) = run("github", args);
    assert_eq!(c, code);
    assert_eq!(from_github(&github), keys, "github vs text");
    let (gitlab, c) = run("gitlab", args);
    assert_eq!(c, code);
    assert_eq!(from_gitlab(&gitlab), line_one(&keys), "gitlab vs text");
    let (again, _) = run("gitlab", args);
    assert_eq!(again, gitlab, "GitLab fingerprints are stable across runs");
    let (junit, c) = run("junit", args);
    assert_eq!(c, code);
    valid_junit(python, &junit);
    let (junit_keys, suites) = from_junit(python, &junit);
    assert_eq!(junit_keys, keys, "junit vs text");
    // One suite per registered rule; its cases are its findings (or one passing case).
    assert_eq!(suites.len(), cvo::validate::RULES.len());
    for (rule, cases, failures) in suites {
        let found: Vec<&Key> = keys.iter().filter(|k| k.0 == rule).collect();
        assert_eq!(cases, found.len().max(1), "cases of {rule}");
        assert_eq!(
            failures,
            found.iter().filter(|k| k.1 == "error").count(),
            "failures of {rule}"
        );
    }
    keys
}

#[test]
#[ignore = "needs the CI virtualenv with junitparser and xmlschema (CVO_TEST_VENV, made by .ci/run): run with --include-ignored (.ci/run does)"]
fn six_formats_report_the_same_findings() {
    let python = python_with("junitparser");
    python_with("xmlschema");
    // The example release is clean in every format.
    assert!(six_formats_agree(&["--release", "manifests-example"], &python).is_empty());
    // A fixture pair with errors, warnings and notes.
    let fixture = "tests/fixtures/ci/formats";
    let keys = six_formats_agree(
        &[
            "--release",
            &format!("{fixture}/release"),
            "--previous",
            &format!("{fixture}/previous"),
        ],
        &python,
    );
    for severity in ["error", "warning", "note"] {
        assert!(
            keys.iter().any(|k| k.1 == severity),
            "the fixture has no {severity}: {keys:?}"
        );
    }
}

#[test]
#[ignore = "needs the CI virtualenv (CVO_TEST_VENV, made by .ci/run) and the shared OpenShift corpus: run with --include-ignored (.ci/run does)"]
fn six_formats_report_the_same_findings_on_the_corpus() {
    let python = python_with("junitparser");
    python_with("xmlschema");
    let corpus = common::needs::corpus("openshift-release");
    let keys = six_formats_agree(&["--release", corpus.to_str().unwrap()], &python);
    assert!(!keys.is_empty());
}

#[test]
fn github_and_gitlab_paths_are_relative_to_the_repository_root() {
    let fixture = "tests/fixtures/ci/formats/release";
    let (github, code) = run("github", &["--release", fixture]);
    assert_eq!(code, 1, "{github}");
    assert!(
        github
            .lines()
            .filter(|l| l.starts_with("::"))
            .all(|l| l.contains(&format!("file={fixture}/"))),
        "{github}"
    );
    // From a sub-directory, the paths still start at the repository root.
    let out = common::cli::cvo()
        .current_dir(root().join("tests"))
        .args(["validate", "--release", "fixtures/ci/formats/release"])
        .args(["-o", "gitlab"])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    for issue in v.as_array().unwrap() {
        let path = issue["location"]["path"].as_str().unwrap();
        assert!(path.starts_with(&format!("{fixture}/")), "{path}");
    }
}

/// A copy of the CI fixture's release in a temporary repository (a `.git` directory at its
/// root), so that config-file discovery stops there.
fn repo_with_release() -> (tempfile::TempDir, PathBuf) {
    let repo = tempfile::tempdir().unwrap();
    std::fs::create_dir(repo.path().join(".git")).unwrap();
    let release = repo.path().join("releases/app");
    std::fs::create_dir_all(&release).unwrap();
    for entry in std::fs::read_dir(root().join("tests/fixtures/ci/formats/release")).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), release.join(entry.file_name())).unwrap();
    }
    (repo, release)
}

fn validate_in(dir: &Path, args: &[&str]) -> std::process::Output {
    common::cli::cvo()
        .current_dir(dir)
        .arg("validate")
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn rule_levels_from_the_command_line_change_the_exit_code() {
    let (repo, _) = repo_with_release();
    let out = validate_in(repo.path(), &["--release", "releases/app"]);
    assert_eq!(out.status.code(), Some(1));
    let out = validate_in(
        repo.path(),
        &[
            "--release",
            "releases/app",
            "--rule",
            "invalid-delete-value=warning",
            "--rule",
            "file-name-convention=off",
        ],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("warning[invalid-delete-value]"), "{text}");
    assert!(!text.contains("file-name-convention"), "{text}");
    // An unknown id is a usage error naming it, with the nearest id.
    let out = validate_in(
        repo.path(),
        &[
            "--release",
            "releases/app",
            "--rule",
            "invalid-delet-value=off",
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            "`invalid-delet-value` is not a rule id (did you mean `invalid-delete-value`?)"
        ),
        "{err}"
    );
}

#[test]
fn the_config_file_is_found_upwards_and_flags_override_it() {
    let (repo, _) = repo_with_release();
    // At the repository root, found from the release directory two levels down.
    std::fs::write(
        repo.path().join(".cvo.yaml"),
        "rules:\n  invalid-delete-value: warning\n  file-name-convention: off\nfeature-set: TechPreviewNoUpgrade\n",
    )
    .unwrap();
    let out = validate_in(repo.path(), &["--release", "releases/app"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(!text.contains("file-name-convention"), "{text}");
    // The command line wins over the file.
    let out = validate_in(
        repo.path(),
        &[
            "--release",
            "releases/app",
            "--rule",
            "invalid-delete-value=error",
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    // --print-config says where each setting came from.
    let out = validate_in(
        repo.path(),
        &[
            "--release",
            "releases/app",
            "--print-config",
            "--profile",
            "hypershift",
        ],
    );
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    let file = repo.path().join(".cvo.yaml");
    let file = file.display();
    assert!(text.contains(&format!("config file: {file}")), "{text}");
    assert!(
        text.contains(&format!("feature-set: TechPreviewNoUpgrade  ({file}:4)")),
        "{text}"
    );
    assert!(
        text.contains("profile: hypershift  (command line)"),
        "{text}"
    );
    assert!(
        text.contains(&format!("  invalid-delete-value: warning  ({file}:2)")),
        "{text}"
    );
    assert!(
        text.contains("  apply-and-delete: error  (default)"),
        "{text}"
    );
    // An unknown key or rule id is an error naming the file and line.
    std::fs::write(
        repo.path().join(".cvo.yaml"),
        "rules:\n  apply-and-delete: error\nprofiles: x\n",
    )
    .unwrap();
    let out = validate_in(repo.path(), &["--release", "releases/app"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("config file {file}:3: unknown field `profiles`")),
        "{err}"
    );
    let other = repo.path().join("other.yaml");
    std::fs::write(&other, "rules:\n  stale-delete: off\n").unwrap();
    let out = validate_in(
        repo.path(),
        &[
            "--release",
            "releases/app",
            "--config",
            other.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "config file {}:2: rules: `stale-delete` is not a rule id",
            other.display()
        )),
        "{err}"
    );
}

#[test]
fn a_suppression_changes_the_exit_code_and_a_stale_one_warns() {
    let (repo, release) = repo_with_release();
    let bad = release.join("0000_50_app_03_bad.yaml");
    let text = std::fs::read_to_string(&bad).unwrap();
    let suppressed = text.replace(
        "  annotations:\n",
        "  annotations:\n    validate.cvo.io/ignore: invalid-delete-value,file-name-convention\n    validate.cvo.io/ignore-reason: \"reviewed: the old operator reads it\"\n",
    );
    std::fs::write(&bad, suppressed).unwrap();
    let out = validate_in(repo.path(), &["--release", "releases/app", "-o", "json"]);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(0), "{report:#}");
    let diagnostics = report["diagnostics"].as_array().unwrap();
    let notes: Vec<&Value> = diagnostics
        .iter()
        .filter(|d| d["rule"] == "invalid-delete-value")
        .collect();
    assert_eq!(notes.len(), 2);
    for d in notes {
        assert_eq!(d["severity"], "note");
        assert!(
            d["message"]
                .as_str()
                .unwrap()
                .ends_with("(suppressed, was error: reviewed: the old operator reads it)"),
            "{d}"
        );
    }
    // file-name-convention fires on settings.yaml, not on this file: stale, twice (one per
    // annotated document).
    let stale: Vec<&Value> = diagnostics
        .iter()
        .filter(|d| d["rule"] == "stale-suppression")
        .collect();
    assert_eq!(stale.len(), 2, "{report:#}");
    assert_eq!(stale[0]["severity"], "warning");
    assert!(
        stale[0]["message"]
            .as_str()
            .unwrap()
            .contains("`file-name-convention`")
    );
    // Without the reason the suppression is refused, and the errors stay.
    let no_reason: String = std::fs::read_to_string(&bad)
        .unwrap()
        .lines()
        .filter(|l| !l.contains("ignore-reason"))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&bad, no_reason).unwrap();
    let out = validate_in(repo.path(), &["--release", "releases/app"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("error[invalid-suppression]"), "{text}");
    assert!(text.contains("error[invalid-delete-value]"), "{text}");
}

/// The `pre-commit` executable (`CVO_TEST_VENV`'s, else PATH's); the test fails without it.
fn pre_commit() -> PathBuf {
    let exe = match std::env::var_os("CVO_TEST_VENV").filter(|v| !v.is_empty()) {
        Some(venv) => Path::new(&venv).join("bin/pre-commit"),
        None => PathBuf::from("pre-commit"),
    };
    if Process::new(&exe)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        return exe;
    }
    common::needs::missing(
        &format!("pre-commit ({} does not run)", exe.display()),
        "set CVO_TEST_VENV to a virtualenv holding pre-commit (.ci/run makes one)",
    )
}

fn git(dir: &Path, args: &[&str]) {
    let out = Process::new("git")
        .current_dir(dir)
        .args(args)
        .env("GIT_AUTHOR_NAME", "cvo test")
        .env("GIT_AUTHOR_EMAIL", "test@example.invalid")
        .env("GIT_COMMITTER_NAME", "cvo test")
        .env("GIT_COMMITTER_EMAIL", "test@example.invalid")
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `pre-commit run --all-files` with the repository's system hook in a temporary git
/// repository holding `release`; the exit code and the output.
fn pre_commit_run(exe: &Path, release: &Path) -> (i32, String) {
    let work = tempfile::tempdir().unwrap();
    // The hooks repository: this repository's .pre-commit-hooks.yaml, committed.
    let hooks = work.path().join("hooks");
    std::fs::create_dir(&hooks).unwrap();
    std::fs::copy(
        root().join(".pre-commit-hooks.yaml"),
        hooks.join(".pre-commit-hooks.yaml"),
    )
    .unwrap();
    git(&hooks, &["init", "-q"]);
    git(&hooks, &["add", "."]);
    git(&hooks, &["commit", "-q", "-m", "hooks"]);
    let rev = Process::new("git")
        .current_dir(&hooks)
        .args(["rev-parse", "HEAD"])
        .output()
        .unwrap();
    let rev = String::from_utf8(rev.stdout).unwrap().trim().to_owned();
    // The user's repository: a release under releases/app, and a config using the hook.
    let repo = work.path().join("repo");
    let dir = repo.join("releases/app");
    std::fs::create_dir_all(&dir).unwrap();
    for entry in std::fs::read_dir(release).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), dir.join(entry.file_name())).unwrap();
    }
    std::fs::write(
        repo.join(".pre-commit-config.yaml"),
        format!(
            "repos:\n  - repo: {}\n    rev: {rev}\n    hooks:\n      - id: cvo-validate-system\n        files: ^releases/\n",
            hooks.display()
        ),
    )
    .unwrap();
    git(&repo, &["init", "-q"]);
    git(&repo, &["add", "."]);
    let bin_dir = common::cli::binary().parent().unwrap().to_path_buf();
    let path = std::env::join_paths(
        std::iter::once(bin_dir).chain(std::env::split_paths(&std::env::var_os("PATH").unwrap())),
    )
    .unwrap();
    let out = Process::new(exe)
        .current_dir(&repo)
        .args(["run", "--all-files", "--color", "never"])
        .env("PATH", path)
        .env("PRE_COMMIT_HOME", work.path().join("cache"))
        .output()
        .expect("pre-commit runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().expect("exited"), text)
}

#[test]
#[ignore = "needs the CI virtualenv with pre-commit (CVO_TEST_VENV, made by .ci/run): run with --include-ignored (.ci/run does)"]
fn the_pre_commit_hook_passes_a_good_release_and_fails_a_bad_one() {
    let exe = pre_commit();
    let (code, out) = pre_commit_run(&exe, &root().join("manifests-example"));
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("cvo validate (cvo on PATH)") && out.contains("Passed"),
        "{out}"
    );
    let (code, out) = pre_commit_run(&exe, &root().join("tests/fixtures/ci/formats/release"));
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("Failed"), "{out}");
    assert!(out.contains("error[invalid-delete-value]"), "{out}");
}

/// Runs the action as the runner would: each input's `with:` value (else its default) put
/// into the expressions of the `cvo validate` step's `env`, its `run` script run by
/// `bash --noprofile --norc -eo pipefail` (the runner's `shell: bash`) in the workspace (a git
/// repository holding the fixture's release), with `$RUNNER_TEMP/cvo-action/bin/cvo` being the
/// binary under test (what the build step's `cargo install` puts there; that step, a release
/// build, is checked for its command line but not run).
fn run_action(with: &[(&str, &str)]) -> (i32, String, tempfile::TempDir) {
    let (repo, _) = repo_with_release();
    let (code, out) = run_action_in(repo.path(), with);
    (code, out, repo)
}

/// [`run_action`] in the workspace `repo`.
fn run_action_in(repo: &Path, with: &[(&str, &str)]) -> (i32, String) {
    let out = action_output(repo, with);
    (
        out.status.code().expect("exited"),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// The action run as [`run_action`] says, in the workspace `repo`.
fn action_output(repo: &Path, with: &[(&str, &str)]) -> std::process::Output {
    let action: Value =
        serde_saphyr::from_str(&std::fs::read_to_string(root().join("action.yml")).unwrap())
            .unwrap();
    assert_eq!(action["runs"]["using"], "composite");
    let steps = action["runs"]["steps"].as_array().unwrap();
    assert_eq!(
        steps[0]["run"],
        "cargo install --locked --quiet --path \"$GITHUB_ACTION_PATH\" --root \"$RUNNER_TEMP/cvo-action\""
    );
    let step = steps
        .iter()
        .find(|s| s["id"] == "validate")
        .expect("a step with id validate");
    assert_eq!(step["shell"], "bash");
    assert_eq!(
        action["outputs"]["sarif-file"]["value"],
        "${{ steps.validate.outputs.sarif-file }}"
    );
    let input = |name: &str| -> String {
        let spec = &action["inputs"][name];
        assert!(spec.is_object(), "no input {name}");
        let value = with
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| (*v).to_owned())
            .or_else(|| spec["default"].as_str().map(str::to_owned));
        if spec["required"] == true {
            assert!(value.is_some(), "the test must give required input {name}");
        }
        value.unwrap_or_default()
    };
    let temp = tempfile::tempdir().unwrap();
    let bin = temp.path().join("cvo-action/bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(common::cli::binary(), bin.join("cvo")).unwrap();
    let mut cmd = std::process::Command::new("bash");
    cmd.args(["--noprofile", "--norc", "-eo", "pipefail", "-c"])
        .arg(step["run"].as_str().unwrap())
        .current_dir(repo);
    for name in common::cli::SCRUBBED_ENV {
        cmd.env_remove(name);
    }
    for (var, expr) in step["env"].as_object().unwrap() {
        // Only `${{ inputs.NAME }}` expressions: what the runner evaluates here.
        let name = expr
            .as_str()
            .and_then(|e| e.strip_prefix("${{ inputs."))
            .and_then(|e| e.strip_suffix(" }}"))
            .unwrap_or_else(|| panic!("{var}: {expr}"));
        cmd.env(var, input(name));
    }
    for (name, _) in with {
        assert!(
            action["inputs"][name].is_object(),
            "the action has no input {name}"
        );
    }
    cmd.env("RUNNER_TEMP", temp.path())
        .env("GITHUB_WORKSPACE", repo)
        .env("GITHUB_OUTPUT", repo.join("github-output"));
    let out = cmd.output().unwrap();
    drop(temp);
    out
}

#[test]
fn the_github_action_entrypoint_annotates_and_writes_sarif() {
    let (code, out, _repo) = run_action(&[("release", "releases/app")]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(
            "::error file=releases/app/0000_50_app_03_bad.yaml,line=1,title=invalid-delete-value::"
        ),
        "{out}"
    );
    let (code, out, repo) = run_action(&[
        ("release", "releases/app"),
        ("format", "sarif"),
        ("args", "--rule invalid-delete-value=warning"),
    ]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("::warning file=releases/app/0000_50_app_03_bad.yaml"),
        "{out}"
    );
    let sarif_file = repo.path().join("cvo-results.sarif");
    let sarif: Value =
        serde_json::from_str(&std::fs::read_to_string(&sarif_file).unwrap()).unwrap();
    assert_eq!(sarif["version"], "2.1.0");
    assert!(!sarif["runs"][0]["results"].as_array().unwrap().is_empty());
    let output = std::fs::read_to_string(repo.path().join("github-output")).unwrap();
    assert_eq!(output, format!("sarif-file={}\n", sarif_file.display()));
    // A missing required input is a usage error.
    let (code, _, _) = run_action(&[("release", "")]);
    assert_eq!(code, 2);
}

/// A repository whose `.cvo.yaml` selects `feature-set: TechPreviewNoUpgrade`, with a release
/// `rel` whose only error is in a manifest of that feature set.
fn repo_with_tech_preview_error() -> tempfile::TempDir {
    let repo = tempfile::tempdir().unwrap();
    std::fs::create_dir(repo.path().join(".git")).unwrap();
    let rel = repo.path().join("rel");
    std::fs::create_dir(&rel).unwrap();
    std::fs::write(
        rel.join("0000_50_app_00_namespace.yaml"),
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: app\n",
    )
    .unwrap();
    std::fs::write(
        rel.join("0000_50_app_01_preview.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: preview\n  namespace: app\n  annotations:\n    release.openshift.io/feature-set: TechPreviewNoUpgrade\n    release.openshift.io/delete: \"yes\"\n",
    )
    .unwrap();
    std::fs::write(
        repo.path().join(".cvo.yaml"),
        "feature-set: TechPreviewNoUpgrade\n",
    )
    .unwrap();
    repo
}

#[test]
fn feature_set_on_the_command_line_beats_the_config_file_in_every_front_end() {
    let repo = repo_with_tech_preview_error();
    let dir = repo.path();
    let code = |args: &[&str]| {
        let out = common::cli::cvo()
            .current_dir(dir)
            .args(args)
            .output()
            .unwrap();
        (
            out.status.code().expect("exited"),
            format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        )
    };
    // The config file's feature set keeps the manifest in: its error fails the run.
    let (c, out) = code(&["validate", "--release", "rel"]);
    assert_eq!(c, 1, "{out}");
    assert!(out.contains("error[invalid-delete-value]"), "{out}");
    let (c, out) = code(&["validate", "--release", "rel", "--feature-set", "Default"]);
    assert_eq!(c, 0, "validate: {out}");
    let (c, out) = code(&[
        "validate",
        "--release",
        "rel",
        "--feature-set",
        "Default",
        "--print-config",
    ]);
    assert_eq!(c, 0, "{out}");
    assert!(
        out.contains("feature-set: Default  (command line)"),
        "{out}"
    );

    let file = "rel/0000_50_app_01_preview.yaml";
    let (c, out) = code(&["validate-files", file]);
    assert_eq!(c, 1, "{out}");
    let (c, out) = code(&["validate-files", "--feature-set", "Default", file]);
    assert_eq!(c, 0, "validate-files: {out}");
    let (c, out) = code(&["validate-files", "--feature-set=Default", file]);
    assert_eq!(c, 0, "validate-files: {out}");

    let (c, out) = run_action_in(dir, &[("release", "rel")]);
    assert_eq!(c, 1, "{out}");
    let (c, out) = run_action_in(
        dir,
        &[("release", "rel"), ("args", "--feature-set Default")],
    );
    assert_eq!(c, 0, "github-action: {out}");
}

#[test]
fn a_suppression_matched_in_one_profile_only_is_not_stale() {
    let repo = tempfile::tempdir().unwrap();
    std::fs::create_dir(repo.path().join(".git")).unwrap();
    let rel = repo.path().join("rel");
    std::fs::create_dir(&rel).unwrap();
    // The namespace is deleted in both profiles; it is still in use in hypershift only, so
    // `namespace-deleted-in-use` is reported in hypershift only.
    std::fs::write(
        rel.join("0000_10_a_00_ns.yaml"),
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: old\n  annotations:\n    release.openshift.io/delete: \"true\"\n    include.release.openshift.io/hypershift: \"true\"\n    include.release.openshift.io/self-managed-high-availability: \"true\"\n    validate.cvo.io/ignore: namespace-deleted-in-use,crd-deleted-in-use\n    validate.cvo.io/ignore-reason: \"reviewed\"\n",
    )
    .unwrap();
    std::fs::write(
        rel.join("0000_10_a_01_cm.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  namespace: old\n  annotations:\n    include.release.openshift.io/hypershift: \"true\"\n",
    )
    .unwrap();
    let out = validate_in(repo.path(), &["--release", "rel", "-o", "json"]);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(0), "{report:#}");
    let diagnostics = report["diagnostics"].as_array().unwrap();
    let suppressed: Vec<&Value> = diagnostics
        .iter()
        .filter(|d| d["rule"] == "namespace-deleted-in-use")
        .collect();
    assert_eq!(suppressed.len(), 1, "{report:#}");
    assert_eq!(suppressed[0]["severity"], "note");
    // Stale for the rule matched in no profile only, once, in no particular profile.
    let stale: Vec<&Value> = diagnostics
        .iter()
        .filter(|d| d["rule"] == "stale-suppression")
        .collect();
    assert_eq!(stale.len(), 1, "{report:#}");
    let message = stale[0]["message"].as_str().unwrap();
    assert!(message.contains("`crd-deleted-in-use`"), "{message}");
    assert!(!message.contains("namespace-deleted-in-use"), "{message}");
    assert!(!message.contains("(profile"), "{message}");
}

/// The GitLab fingerprints of `cvo validate -o gitlab --release rel` in `repo`, by check name.
fn gitlab_fingerprints(repo: &Path) -> Vec<(String, String, usize)> {
    let out = validate_in(repo, &["--release", "rel", "-o", "gitlab"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    v.as_array()
        .unwrap()
        .iter()
        .map(|i| {
            (
                i["check_name"].as_str().unwrap().to_owned(),
                i["fingerprint"].as_str().unwrap().to_owned(),
                i["location"]["lines"]["begin"].as_u64().unwrap() as usize,
            )
        })
        .collect()
}

#[test]
fn gitlab_fingerprints_survive_a_line_added_above_and_stay_unique() {
    let repo = tempfile::tempdir().unwrap();
    std::fs::create_dir(repo.path().join(".git")).unwrap();
    let rel = repo.path().join("rel");
    std::fs::create_dir(&rel).unwrap();
    let body = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  namespace: ns\ndata:\n  a: \"1\"\n  a: \"2\"\n  b: \"1\"\n  b: \"2\"\n";
    let file = rel.join("0000_50_app_00_x.yaml");
    std::fs::write(&file, body).unwrap();
    let before = gitlab_fingerprints(repo.path());
    let keys: Vec<_> = before.iter().filter(|f| f.0 == "duplicate-key").collect();
    assert_eq!(keys.len(), 2, "{before:?}");
    std::fs::write(&file, format!("# a comment added above\n{body}")).unwrap();
    let after = gitlab_fingerprints(repo.path());
    assert_eq!(before.len(), after.len(), "{before:?} {after:?}");
    for (b, a) in before.iter().zip(&after) {
        assert_eq!((&b.0, &b.1), (&a.0, &a.1), "{before:?} {after:?}");
    }
    // The findings did move: the fingerprints stayed although the line numbers changed.
    assert_ne!(
        keys[0].2,
        after.iter().find(|f| f.0 == "duplicate-key").unwrap().2
    );
    let unique: BTreeSet<&String> = after.iter().map(|f| &f.1).collect();
    assert_eq!(unique.len(), after.len(), "{after:?}");
}

#[test]
fn github_paths_with_dot_and_dot_dot_are_normalised() {
    let fixture = "tests/fixtures/ci/formats/release";
    for release in [
        "../tests/fixtures/ci/formats/release",
        "./fixtures/./ci/formats/../formats/release",
    ] {
        let out = common::cli::cvo()
            .current_dir(root().join("tests"))
            .args(["validate", "--release", release, "-o", "github"])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(1), "{text}");
        let commands: Vec<&str> = text.lines().filter(|l| l.starts_with("::")).collect();
        assert!(!commands.is_empty(), "{text}");
        for l in commands {
            assert!(l.contains(&format!("file={fixture}/")), "{release}: {l}");
        }
    }
}

#[test]
fn the_github_action_validates_once_and_renders_twice() {
    // A release in two profiles says so once per validation, on stderr.
    let repo = tempfile::tempdir().unwrap();
    std::fs::create_dir(repo.path().join(".git")).unwrap();
    let rel = repo.path().join("rel");
    std::fs::create_dir(&rel).unwrap();
    for (file, profile) in [
        ("0000_50_a_00_x.yaml", "hypershift"),
        ("0000_50_a_01_y.yaml", "self-managed-high-availability"),
    ] {
        std::fs::write(
            rel.join(file),
            format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {file}\n  namespace: ns\n  annotations:\n    include.release.openshift.io/{profile}: \"true\"\n    release.openshift.io/delete: \"yes\"\n"
            ),
        )
        .unwrap();
    }
    for format in ["sarif", "gitlab"] {
        let out = action_output(repo.path(), &[("release", "rel"), ("format", format)]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
        assert_eq!(
            stderr.matches("the release uses cluster profiles").count(),
            1,
            "{format}: {stderr}"
        );
        assert_eq!(stdout.matches("::error ").count(), 2, "{stdout}");
    }
    let sarif: Value = serde_json::from_str(
        &std::fs::read_to_string(repo.path().join("cvo-results.sarif")).unwrap(),
    )
    .unwrap();
    assert_eq!(sarif["runs"][0]["results"].as_array().unwrap().len(), 2);
    let out = action_output(repo.path(), &[("release", "rel"), ("format", "gitlab")]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let json_start = stdout
        .find("\n[")
        .expect("a GitLab report after the annotations")
        + 1;
    let gitlab: Value = serde_json::from_str(&stdout[json_start..]).unwrap();
    assert_eq!(gitlab.as_array().unwrap().len(), 2, "{stdout}");
    // A format the action does not know is a usage error naming the input.
    let out = action_output(repo.path(), &[("release", "rel"), ("format", "xml")]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("the action's input `format` is \"xml\""),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_config_file_found_upwards_that_is_invalid_says_where_it_was_found() {
    let (repo, release) = repo_with_release();
    let file = repo.path().join(".cvo.yaml");
    std::fs::write(&file, "rules:\n  apply-and-delete: error\nprofiles: x\n").unwrap();
    let out = validate_in(repo.path(), &["--release", "releases/app"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "config file {}:3: unknown field `profiles`",
            file.display()
        )),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "the file was found from the release directory {} upwards",
            release.display()
        )),
        "{err}"
    );
    assert!(!err.contains("fix the path given to --config"), "{err}");
    // Too large to be a config file: the same.
    std::fs::write(&file, "#".repeat(1024 * 1024 + 1)).unwrap();
    let out = validate_in(repo.path(), &["--release", "releases/app"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("more than a config file holds"), "{err}");
    assert!(
        err.contains("found from the release directory") && !err.contains("path given to --config"),
        "{err}"
    );
    // Named with --config, the message is about that path.
    let out = validate_in(
        repo.path(),
        &[
            "--release",
            "releases/app",
            "--config",
            file.to_str().unwrap(),
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("the path given to --config"), "{err}");
    assert!(!err.contains("found from the release directory"), "{err}");
}

/// The fenced block of `doc` whose first line is `first`, without its fences.
fn doc_block<'a>(doc: &'a str, fence: &str, first: &str) -> &'a str {
    let start = doc
        .find(&format!("```{fence}\n{first}"))
        .unwrap_or_else(|| panic!("docs/ci.md has a ```{fence} block starting {first:?}"))
        + fence.len()
        + 4;
    let end = start + doc[start..].find("```\n").expect("the block ends");
    &doc[start..end]
}

#[test]
fn the_print_config_sample_in_docs_ci_is_the_commands_output() {
    let doc = std::fs::read_to_string(root().join("docs/ci.md")).unwrap();
    let fixture = root().join("tests/fixtures/ci/print-config/.cvo.yaml");
    let config = std::fs::read_to_string(&fixture).unwrap();
    // The config file the doc shows is the fixture.
    assert_eq!(doc_block(&doc, "yaml", "rules:  "), config);
    // Its --print-config, at the root of a repository, with that root written /repo.
    let repo = tempfile::tempdir().unwrap();
    std::fs::create_dir(repo.path().join(".git")).unwrap();
    std::fs::create_dir(repo.path().join("manifests")).unwrap();
    std::fs::write(repo.path().join(".cvo.yaml"), &config).unwrap();
    let out = validate_in(repo.path(), &["--release", "manifests", "--print-config"]);
    assert_eq!(out.status.code(), Some(0));
    let printed = String::from_utf8(out.stdout)
        .unwrap()
        .replace(repo.path().to_str().unwrap(), "/repo");
    assert_eq!(
        doc_block(&doc, "text", "config file: /repo/.cvo.yaml"),
        printed,
        "docs/ci.md's --print-config sample differs from the output: paste the output above"
    );
}

#[test]
fn validate_files_maps_a_file_in_a_sub_directory_to_its_release() {
    let (repo, release) = repo_with_release();
    std::fs::create_dir(release.join("sub")).unwrap();
    std::fs::write(
        release.join("sub/x.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  namespace: app\n",
    )
    .unwrap();
    let out = common::cli::cvo()
        .current_dir(repo.path())
        .args(["validate-files", "releases/app/sub/x.yaml"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("cvo validate --release releases/app\n"),
        "{stderr}"
    );
    assert!(!stderr.contains("releases/app/sub"), "{stderr}");
    // The release's own errors, and the sub-directory it ignores.
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(stdout.contains("error[invalid-delete-value]"), "{stdout}");
    assert!(stdout.contains("warning[subdirectory-ignored]"), "{stdout}");
}

#[test]
fn an_oci_release_takes_the_config_file_from_the_current_directory_upwards() {
    // A release whose only finding is a warning (file-name-convention), in an OCI layout.
    let release = tempfile::tempdir().unwrap();
    for file in ["0000_50_app_00_namespace.yaml", "settings.yaml"] {
        std::fs::copy(
            root().join("tests/fixtures/ci/formats/release").join(file),
            release.path().join(file),
        )
        .unwrap();
    }
    let layout = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let source = format!("oci-layout:{}:1", layout.path().display());
    let out = common::cli::cvo()
        .args([
            "push",
            "--release",
            release.path().to_str().unwrap(),
            &source,
        ])
        .arg("--cache-dir")
        .arg(cache.path())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A repository whose config turns the warning into an error; run from a sub-directory.
    let repo = tempfile::tempdir().unwrap();
    std::fs::create_dir(repo.path().join(".git")).unwrap();
    std::fs::create_dir(repo.path().join("ci")).unwrap();
    let config = repo.path().join(".cvo.yaml");
    let validate = |dir: &Path, extra: &[&str]| {
        common::cli::cvo()
            .current_dir(dir)
            .args(["validate", "--release", &source, "--cache-dir"])
            .arg(cache.path())
            .args(extra)
            .output()
            .unwrap()
    };
    let out = validate(&repo.path().join("ci"), &[]);
    assert_eq!(out.status.code(), Some(0), "no config file yet");
    std::fs::write(&config, "rules:\n  file-name-convention: error\n").unwrap();
    let out = validate(&repo.path().join("ci"), &[]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("error[file-name-convention]"), "{text}");
    let out = validate(&repo.path().join("ci"), &["--print-config"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!("config file: {}", config.display())),
        "{text}"
    );
    // The search stops at the repository root: a config above it is not read.
    let inner = repo.path().join("ci/inner");
    std::fs::create_dir_all(inner.join(".git")).unwrap();
    let out = validate(&inner, &[]);
    assert_eq!(out.status.code(), Some(0));
    // An invalid one says where it was found from.
    std::fs::write(&config, "rule: {}\n").unwrap();
    let out = validate(&repo.path().join("ci"), &[]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("found from the current directory") && err.contains("OCI artifact"),
        "{err}"
    );
}

#[test]
fn push_validates_with_the_rule_levels_of_the_config_file() {
    let (repo, _) = repo_with_release();
    let layout = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let target = format!("oci-layout:{}:1", layout.path().display());
    let push = |extra: &[&str]| {
        common::cli::cvo()
            .current_dir(repo.path())
            .args(["push", "--release", "releases/app", &target, "--cache-dir"])
            .arg(cache.path())
            .args(extra)
            .output()
            .unwrap()
    };
    // invalid-delete-value is an error: not pushed.
    let out = push(&[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("error[invalid-delete-value]") && err.contains("not pushed"),
        "{err}"
    );
    // Turned off in the repository's .cvo.yaml: pushed.
    std::fs::write(
        repo.path().join(".cvo.yaml"),
        "rules:\n  invalid-delete-value: off\n",
    )
    .unwrap();
    let out = push(&[]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("@sha256:"));
    // --config names another file, which keeps the error.
    let other = repo.path().join("strict.yaml");
    std::fs::write(&other, "rules:\n  invalid-delete-value: error\n").unwrap();
    let out = push(&["--config", other.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    // An invalid config file refuses the push (nothing is assumed).
    std::fs::write(repo.path().join(".cvo.yaml"), "rules:\n  nope: off\n").unwrap();
    let out = push(&[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("`nope` is not a rule id"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
