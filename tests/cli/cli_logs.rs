//! One log format for every command (issue 34, item 4): with `--log-format json` every line
//! `apply`, `plan`, `validate`, `push` and `uninstall` write to stderr is one JSON object
//! (notes, diagnostics, progress and fatal errors included), `CVO_LOG=off` never hides a fatal
//! error, a panic in JSON mode is one JSON line, and `apply`'s text report lists a bounded
//! few of thousands of failed manifests (all of them with `-o json`).

use crate::common;
use crate::common::cli::cvo;

use std::path::Path;

use cvo::olm::types::Subscription;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

/// A ConfigMap of `ns`, in the default profile.
fn configmap(ns: &str, name: &str) -> String {
    common::configmap(
        ns,
        name,
        "  annotations:\n    include.release.openshift.io/self-managed-high-availability: \"true\"\n",
        &[("a", "b")],
    )
}

/// A manifest of a kind no server serves (`kind` in `example.com/v1`), in the default profile.
fn unserved(kind: &str, name: &str) -> String {
    format!(
        "apiVersion: example.com/v1\nkind: {kind}\nmetadata:\n  name: {name}\n  namespace: default\n  annotations:\n    include.release.openshift.io/self-managed-high-availability: \"true\"\n"
    )
}

/// A release in `dir` that makes each kind of line: a note (it uses cluster profiles), a
/// warning diagnostic (a sub-directory, which is not read), a ConfigMap of `ns` that applies
/// and a Widget no server serves.
fn noisy_release(dir: &Path, ns: &str) -> String {
    let release = dir.join("release");
    common::write_release(
        &release,
        Some("1.0.0"),
        &[
            ("0000_10_a_00_cm.yaml", configmap(ns, "logged")),
            ("0000_10_a_01_widget.yaml", unserved("Widget", "w")),
        ],
    );
    std::fs::create_dir(release.join("extra")).expect("mkdir");
    release.to_string_lossy().into_owned()
}

/// Each line of `stderr` as JSON; a line that is not one fails the test.
fn json_lines(stderr: &str) -> Vec<Value> {
    stderr
        .lines()
        .map(|l| {
            serde_json::from_str(l)
                .unwrap_or_else(|e| panic!("not a JSON line ({e}): {l:?}\nstderr:\n{stderr}"))
        })
        .collect()
}

/// The events whose message contains `text`.
fn events<'a>(lines: &'a [Value], text: &str) -> Vec<&'a Value> {
    lines
        .iter()
        .filter(|l| {
            l["fields"]["message"]
                .as_str()
                .is_some_and(|m| m.contains(text))
        })
        .collect()
}

/// Every line has tracing's shape: `timestamp`, `level`, `target` and `fields.message`.
fn assert_shape(lines: &[Value]) {
    for l in lines {
        assert!(l["timestamp"].is_string(), "{l}");
        assert!(l["level"].is_string(), "{l}");
        assert!(l["target"].is_string(), "{l}");
        assert!(l["fields"]["message"].is_string(), "{l}");
    }
}

/// Runs `cvo ARGS` and returns its exit code, stdout and stderr.
fn run(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let mut cmd = cvo();
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.args(args).output().expect("run cvo");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The release's note and warning diagnostic, as events with their fields.
fn assert_release_events(lines: &[Value], stderr: &str) {
    let note = events(lines, "the release uses cluster profiles");
    assert_eq!(note.len(), 1, "{stderr}");
    assert_eq!(note[0]["level"], "INFO", "{}", note[0]);
    assert_eq!(
        note[0]["fields"]["profile"],
        "self-managed-high-availability"
    );
    let warning = events(lines, "sub-directories of a release are not read");
    assert_eq!(warning.len(), 1, "{stderr}");
    assert_eq!(warning[0]["level"], "WARN", "{}", warning[0]);
    assert_eq!(warning[0]["fields"]["rule"], "subdirectory-ignored");
}

#[test]
fn apply_writes_only_json_on_stderr_in_json_mode() {
    let dir = tempfile::tempdir().unwrap();
    let release = noisy_release(dir.path(), "default");
    let (code, stdout, stderr) = run(
        &[
            "--log-format",
            "json",
            "apply",
            "--release",
            &release,
            "--in-memory",
            "--install-timeout",
            "1s",
        ],
        &[],
    );
    assert_eq!(code, 1, "{stdout}\n{stderr}");
    // The report on stdout is as it always is.
    assert!(stdout.starts_with("release 1.0.0 (install)"), "{stdout}");
    let lines = json_lines(&stderr);
    assert_shape(&lines);
    assert_release_events(&lines, &stderr);
    // One progress event per manifest: the action, the object and the file as fields.
    let created = events(&lines, "created ConfigMap default/logged");
    assert_eq!(created.len(), 1, "{stderr}");
    assert_eq!(created[0]["level"], "INFO");
    assert_eq!(created[0]["fields"]["action"], "created");
    assert_eq!(created[0]["fields"]["namespace"], "default");
    let failed = events(&lines, "failed Widget default/w: ");
    assert_eq!(failed.len(), 1, "{stderr}");
    let fields = &failed[0]["fields"];
    assert_eq!(failed[0]["level"], "WARN");
    assert_eq!(fields["kind"], "Widget", "{fields}");
    assert_eq!(fields["name"], "w", "{fields}");
    assert!(
        fields["file"]
            .as_str()
            .is_some_and(|f| f.ends_with("0000_10_a_01_widget.yaml")),
        "{fields}"
    );
    assert!(
        fields["error"]
            .as_str()
            .is_some_and(|e| e.contains("Widget")),
        "{fields}"
    );

    // A fatal error: one ERROR event with the exit code.
    let (code, _, stderr) = run(
        &[
            "--log-format",
            "json",
            "apply",
            "--release",
            "/nonexistent/release",
            "--in-memory",
        ],
        &[],
    );
    assert_eq!(code, 2, "{stderr}");
    let lines = json_lines(&stderr);
    assert_eq!(lines.len(), 1, "{stderr}");
    assert_eq!(lines[0]["level"], "ERROR");
    assert_eq!(lines[0]["fields"]["exit_code"], 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_writes_only_json_on_stderr_in_json_mode() {
    let tc = common::cluster().await;
    let ns = tc.namespace("logs-plan").await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = tc.kubeconfig_file(dir.path()).await;
    let release = noisy_release(dir.path(), &ns);
    let (code, stdout, stderr) = common::run_cvo(
        &kubeconfig,
        &["--log-format", "json", "plan", "--release", &release],
    )
    .await;
    assert_eq!(code, 1, "the Widget cannot be planned:\n{stdout}\n{stderr}");
    let lines = json_lines(&stderr);
    assert_shape(&lines);
    assert_release_events(&lines, &stderr);
    let planned = events(&lines, &format!("created ConfigMap {ns}/logged"));
    assert_eq!(planned.len(), 1, "{stderr}");
    assert_eq!(
        events(&lines, "failed Widget default/w: ").len(),
        1,
        "{stderr}"
    );
}

#[test]
fn validate_and_push_write_only_json_on_stderr_in_json_mode() {
    let dir = tempfile::tempdir().unwrap();
    // Two profiles: validate checks each and says so in a note.
    let release = dir.path().join("profiles");
    let cm = |name: &str, profile: &str| {
        common::configmap(
            "default",
            name,
            &format!("  annotations:\n    include.release.openshift.io/{profile}: \"true\"\n"),
            &[],
        )
    };
    common::write_release(
        &release,
        Some("1.0.0"),
        &[
            (
                "0000_10_a_00_cm.yaml",
                cm("a", "self-managed-high-availability"),
            ),
            ("0000_10_a_01_cm.yaml", cm("b", "single-node-developer")),
        ],
    );
    let release = release.to_string_lossy().into_owned();
    let (code, stdout, stderr) = run(
        &["--log-format", "json", "validate", "--release", &release],
        &[],
    );
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let lines = json_lines(&stderr);
    assert_shape(&lines);
    let note = events(&lines, "each was validated on its own");
    assert_eq!(note.len(), 1, "{stderr}");
    assert_eq!(note[0]["level"], "INFO");
    // A profile the release does not use: the fatal error is an event.
    let (code, _, stderr) = run(
        &[
            "--log-format",
            "json",
            "validate",
            "--release",
            &release,
            "--profile",
            "nope",
        ],
        &[],
    );
    assert_eq!(code, 2, "{stderr}");
    let lines = json_lines(&stderr);
    assert_eq!(lines.len(), 1, "{stderr}");
    assert_eq!(lines[0]["level"], "ERROR");
    assert_eq!(lines[0]["fields"]["exit_code"], 2);

    // push refuses a release with errors: each error is an event, then the fatal one.
    let broken = dir.path().join("broken");
    common::write_release(
        &broken,
        Some("1.0.0"),
        &[("0000_10_a_00_cm.yaml", "kind: [unclosed\n".to_owned())],
    );
    let layout = format!("oci-layout:{}:v1", dir.path().join("layout").display());
    let (code, stdout, stderr) = run(
        &[
            "--log-format",
            "json",
            "push",
            "--release",
            &broken.to_string_lossy(),
            &layout,
        ],
        &[],
    );
    assert_eq!(code, 1, "{stdout}\n{stderr}");
    let lines = json_lines(&stderr);
    assert_shape(&lines);
    let (fatal, diagnostics) = lines.split_last().expect("lines");
    assert_eq!(fatal["level"], "ERROR", "{fatal}");
    assert_eq!(fatal["fields"]["exit_code"], 1, "{fatal}");
    assert!(
        diagnostics.iter().any(|d| d["fields"]["file"]
            .as_str()
            .is_some_and(|f| f.ends_with("0000_10_a_00_cm.yaml"))),
        "{stderr}"
    );
    for d in diagnostics {
        assert_eq!(d["level"], "ERROR", "{d}");
        assert!(d["fields"]["rule"].is_string(), "{d}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uninstall_writes_only_json_on_stderr_in_json_mode() {
    let tc = common::cluster().await;
    common::ensure_olm_crds(&tc).await;
    let ns = tc.namespace("logs-uninst").await;
    let package = common::unique("logged-operator");
    let csv = format!("{package}.v1.0.0");
    let subs: Api<Subscription> = Api::namespaced(tc.client.clone(), &ns);
    let sub: Subscription = serde_json::from_value(json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
        "metadata": {"name": "logged", "namespace": ns},
        "spec": {"name": package, "channel": "stable", "source": "catalog",
            "sourceNamespace": "olm"}}))
    .expect("Subscription");
    subs.create(&PostParams::default(), &sub)
        .await
        .expect("create Subscription");
    subs.patch_status(
        "logged",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"installedCSV": csv}})),
    )
    .await
    .expect("Subscription status");
    let spec = common::olm::csv_spec("Logged", &[], false);
    common::olm::create_csv(&tc.client, &ns, &csv, spec, &[], false).await;

    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = tc.kubeconfig_file(dir.path()).await;
    let (code, stdout, stderr) = common::run_cvo(
        &kubeconfig,
        &[
            "--log-format",
            "json",
            "uninstall",
            &package,
            "-n",
            &ns,
            "--yes",
        ],
    )
    .await;
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let lines = json_lines(&stderr);
    assert_shape(&lines);
    let deleted: Vec<&Value> = lines
        .iter()
        .filter(|l| {
            matches!(
                l["fields"]["result"].as_str(),
                Some("deleted" | "deletion-started")
            )
        })
        .collect();
    let kinds: Vec<&str> = deleted
        .iter()
        .filter_map(|l| l["fields"]["kind"].as_str())
        .collect();
    assert!(kinds.contains(&"Subscription"), "{stderr}");
    assert!(kinds.contains(&"ClusterServiceVersion"), "{stderr}");
    for l in deleted {
        assert_eq!(l["fields"]["namespace"], ns.as_str(), "{l}");
        assert!(l["fields"]["step"].is_string(), "{l}");
    }
}

#[test]
fn cvo_log_off_never_hides_a_fatal_error() {
    let off = [("CVO_LOG", "off")];
    let apply = ["apply", "--release", "/nonexistent/release", "--in-memory"];
    // Text: the `error:` line.
    let (code, _, stderr) = run(&apply, &off);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.starts_with("error: "), "{stderr:?}");
    assert!(stderr.contains("/nonexistent/release"), "{stderr}");
    // JSON: the error event.
    let json: Vec<&str> = ["--log-format", "json"].into_iter().chain(apply).collect();
    let (code, _, stderr) = run(&json, &off);
    assert_eq!(code, 2, "{stderr}");
    let lines = json_lines(&stderr);
    assert_eq!(lines.len(), 1, "{stderr:?}");
    assert_eq!(lines[0]["level"], "ERROR");
    assert_eq!(lines[0]["fields"]["exit_code"], 2);
    assert!(
        lines[0]["fields"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("/nonexistent/release")),
        "{stderr}"
    );
    // A command line clap refuses, in JSON mode.
    let (code, _, stderr) = run(
        &[
            "--log-format",
            "json",
            "apply",
            "--release",
            "r",
            "--wait",
            "soon",
        ],
        &off,
    );
    assert_eq!(code, 2, "{stderr}");
    let lines = json_lines(&stderr);
    assert_eq!(lines.len(), 1, "{stderr:?}");
    assert_eq!(lines[0]["fields"]["exit_code"], 2);
}

/// `CVO_TEST_PANIC` makes the tests' (debug) build panic once logging is set up; release
/// builds do not have it (see `panic_for_tests` in src/cli/mod.rs).
#[test]
fn a_panic_in_json_mode_is_one_json_line() {
    let panic = [("CVO_TEST_PANIC", "deliberate test panic")];
    let (code, _, stderr) = run(
        &[
            "--log-format",
            "json",
            "validate",
            "--release",
            "manifests-example",
        ],
        &panic,
    );
    assert_eq!(code, 101, "{stderr}");
    let lines = json_lines(&stderr);
    assert_eq!(lines.len(), 1, "{stderr:?}");
    let event = &lines[0];
    assert_eq!(event["level"], "ERROR", "{event}");
    assert!(
        event["fields"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("deliberate test panic")),
        "{event}"
    );
    assert!(
        event["fields"]["location"]
            .as_str()
            .is_some_and(|l| l.starts_with("src/cli/mod.rs:")),
        "{event}"
    );
    assert_eq!(event["fields"]["thread"], "main", "{event}");
    // Even with the logs off.
    let (code, _, stderr) = run(
        &[
            "--log-format",
            "json",
            "validate",
            "--release",
            "manifests-example",
        ],
        &[panic[0], ("CVO_LOG", "off")],
    );
    assert_eq!(code, 101, "{stderr}");
    assert_eq!(json_lines(&stderr).len(), 1, "{stderr:?}");
    // Text mode: Rust's own words.
    let (code, _, stderr) = run(&["validate", "--release", "manifests-example"], &panic);
    assert_eq!(code, 101, "{stderr}");
    assert!(stderr.contains("panicked at"), "{stderr}");
    assert!(stderr.contains("deliberate test panic"), "{stderr}");
}

/// 3,000 manifests of twelve kinds no server serves: Widget 2,000 times, Gadget00 to Gadget09
/// 91 times each, Gadget10 90 times.
const MANY: usize = 3000;

#[test]
fn thousands_of_failures_are_a_bounded_list_in_text_and_all_in_json() {
    let dir = tempfile::tempdir().unwrap();
    let release = dir.path().join("release");
    let kinds: Vec<String> = (0..11).map(|i| format!("Gadget{i:02}")).collect();
    let files: Vec<(String, String)> = (0..MANY)
        .map(|i| {
            let kind = if i < 2000 {
                "Widget"
            } else {
                &kinds[(i - 2000) % 11]
            };
            (
                format!("0000_10_w_{i:04}.yaml"),
                unserved(kind, &format!("o{i}")),
            )
        })
        .collect();
    let files: Vec<(&str, String)> = files.iter().map(|(f, t)| (f.as_str(), t.clone())).collect();
    common::write_release(&release, Some("1.0.0"), &files);
    let release = release.to_string_lossy().into_owned();
    let apply = |output: &str| {
        run(
            &[
                "apply",
                "--release",
                &release,
                "--in-memory",
                "--install-timeout",
                "0s",
                "-o",
                output,
            ],
            &[],
        )
    };
    let (code, stdout, stderr) = apply("text");
    assert_eq!(code, 1, "{stdout}\n{stderr}");
    let listed = stdout
        .lines()
        .filter(|l| l.starts_with("failed ") && l.contains(" default/o"))
        .count();
    assert_eq!(listed, 20, "{stdout}");
    assert!(
        stdout.contains(&format!(
            "\nand {} more failed manifests (-o json lists all {MANY}); the failures by error:\n",
            MANY - 20
        )),
        "{stdout}"
    );
    assert!(
        stdout
            .contains("\n  2000 failed: the server does not serve kind Widget in example.com/v1\n"),
        "{stdout}"
    );
    assert!(
        stdout
            .contains("\n  91 failed: the server does not serve kind Gadget00 in example.com/v1\n"),
        "{stdout}"
    );
    // Ten errors named (Widget and nine Gadgets), two counted together.
    assert!(
        stdout.contains("\n  and 181 failed with other errors\n"),
        "{stdout}"
    );
    assert!(stdout.lines().count() < 100, "bounded: {stdout}");

    let (code, stdout, stderr) = apply("json");
    assert_eq!(code, 1, "{stderr}");
    let v: Value = serde_json::from_str(&stdout).expect("JSON report");
    let failed = v["results"]
        .as_array()
        .expect("results")
        .iter()
        .filter(|r| r["action"] == "failed")
        .count();
    assert_eq!(failed, MANY, "every failure in -o json");
}
