//! A CVO payload read and applied as OpenShift's CVO would (issue 25, items 3–11), with
//! `cvo apply` on both servers: `manifests/` before `release-manifests/`, a duplicate key's
//! last value, a file whose template action cvo does not know skipped, YAML in a `.json` file,
//! a non-string annotation and an unknown feature set leaving their manifest out (warnings,
//! not a refused release), a hidden file applied, a known feature set no manifest names
//! accepted; a document repeated in one file refuses the release.

use crate::common;

use std::path::Path;

use serde_json::Value;

const PROFILE: &str = "    include.release.openshift.io/self-managed-high-availability: \"true\"\n";

/// A ConfigMap in `ns`, in the default profile, with more `annotations` and `v: "1"`.
fn cm(ns: &str, name: &str, annotations: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {ns}\n  annotations:\n{PROFILE}{annotations}data:\n  v: \"1\"\n"
    )
}

fn write(dir: &Path, file: &str, text: &str) {
    let path = dir.join(file);
    std::fs::create_dir_all(path.parent().expect("parent")).expect("folder");
    std::fs::write(path, text).expect("write");
}

/// The payload: one file per item, in both folders.
fn payload(dir: &Path, ns: &str) {
    let r = "release-manifests";
    write(dir, "manifests/0000_90_b_00_late.yaml", &cm(ns, "late", ""));
    write(
        dir,
        "manifests/0000_30_b_00_future.yaml",
        &cm(
            ns,
            "future",
            "    x: '{{index .FutureField \"some-key\"}}'\n",
        ),
    );
    write(
        dir,
        &format!("{r}/0000_20_a_00_early.yaml"),
        &cm(ns, "early", ""),
    );
    write(
        dir,
        &format!("{r}/0000_30_a_00_dupkey.yaml"),
        &format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: dupkey\n  namespace: {ns}\n  annotations:\n{PROFILE}data:\n  v: first\n  v: last\n"
        ),
    );
    write(
        dir,
        &format!("{r}/0000_30_a_01_yaml.json"),
        &cm(ns, "yamljson", ""),
    );
    write(
        dir,
        &format!("{r}/0000_30_a_02_nonstring.yaml"),
        &format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: nonstring\n  namespace: {ns}\n  annotations:\n    include.release.openshift.io/self-managed-high-availability: true\n"
        ),
    );
    write(
        dir,
        &format!("{r}/0000_30_a_03_padded.yaml"),
        &cm(
            ns,
            "padded",
            "    release.openshift.io/feature-set: \"Default \"\n",
        ),
    );
    write(
        dir,
        &format!("{r}/.0000_30_a_04_hidden.yaml"),
        &cm(ns, "hidden", ""),
    );
    write(
        dir,
        &format!("{r}/0000_30_a_05_default.yaml"),
        &cm(
            ns,
            "defaultonly",
            "    release.openshift.io/feature-set: Default\n",
        ),
    );
    write(
        dir,
        &format!("{r}/release-metadata"),
        r#"{"kind": "cincinnati-metadata-v0", "version": "1.0.0"}"#,
    );
}

/// `cvo apply -o json ARGS`: exit code, report (`Null` when none), stderr.
async fn apply(kubeconfig: &Path, release: &Path, args: &[&str]) -> (i32, Value, String) {
    let mut all = vec![
        "apply",
        "--release",
        release.to_str().expect("utf-8"),
        "-o",
        "json",
    ];
    all.extend(args);
    let (code, out, err) = common::run_cvo(kubeconfig, &all).await;
    (code, serde_json::from_str(&out).unwrap_or(Value::Null), err)
}

/// (name, action, reason) of each result, in the report's order.
fn results(report: &Value) -> Vec<(String, String, String)> {
    report["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| {
            let text = |k: &str| r[k].as_str().unwrap_or_default().to_owned();
            (text("name"), text("action"), text("reason"))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_payload_is_applied_as_the_cvo_reads_it() {
    let tc = common::cluster().await;
    let (_guard, cv_resource) = common::cluster_version(&tc).await;
    let ns = tc.namespace("payload").await;
    let dir = tempfile::tempdir().expect("tempdir");
    let release = dir.path().join("payload");
    payload(&release, &ns);
    let kubeconfig = tc.kubeconfig_file(dir.path()).await;

    let (code, report, stderr) = apply(&kubeconfig, &release, &[]).await;
    assert_eq!(code, 0, "{stderr}");
    // Read as the CVO reads it, each difference a warning on stderr.
    for rule in [
        "warning[unknown-template-action]",
        "warning[duplicate-key]",
        "warning[json-extension-yaml-content]",
        "warning[non-string-annotation]",
        "warning[unknown-feature-set]",
        "warning[hidden-file]",
    ] {
        assert!(stderr.contains(rule), "{rule}:\n{stderr}");
    }
    let got = results(&report);
    let names: Vec<&str> = got.iter().map(|(n, _, _)| n.as_str()).collect();
    // manifests/ first, then release-manifests/ (a hidden file sorts first there); the file
    // with the unknown action is not part of the release, and what the loader leaves out
    // (the non-string annotation: no profile; the padded feature set) is only counted.
    assert_eq!(
        names,
        [
            "late",
            "hidden",
            "early",
            "dupkey",
            "yamljson",
            "defaultonly"
        ],
        "{report:#}"
    );
    for (name, action, _) in &got {
        assert_eq!(action, "created", "{name}");
    }
    assert_eq!(report["excluded"]["profile"], 1, "{report:#}");
    assert_eq!(report["excluded"]["featureSet"], 1, "{report:#}");
    let cms = tc.dynamic(&common::configmaps(), Some(&ns));
    let dupkey = cms.get("dupkey").await.expect("dupkey");
    assert_eq!(dupkey.data["data"]["v"], "last");
    for absent in ["future", "nonstring", "padded"] {
        assert!(
            cms.get_opt(absent).await.expect("get").is_none(),
            "{absent}"
        );
    }

    // A known feature set no manifest names: accepted; the Default-only manifest is left out
    // (and left in place).
    let (code, report, stderr) = apply(
        &kubeconfig,
        &release,
        &["--feature-set", "TechPreviewNoUpgrade"],
    )
    .await;
    assert_eq!(code, 0, "{stderr}");
    let names: Vec<String> = results(&report).into_iter().map(|(n, _, _)| n).collect();
    assert!(!names.contains(&"defaultonly".to_owned()), "{names:?}");
    assert_eq!(report["excluded"]["featureSet"], 2, "{report:#}");
    assert!(cms.get_opt("defaultonly").await.expect("get").is_some());

    // One object twice in one file: the CVO refuses the payload, and so does cvo.
    write(
        &release,
        "release-manifests/0000_40_a_00_twice.yaml",
        &format!("{}---\n{}", cm(&ns, "twice", ""), cm(&ns, "twice", "")),
    );
    let (code, _, stderr) = apply(&kubeconfig, &release, &[]).await;
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("error[repeated-document]"), "{stderr}");
    assert!(cms.get_opt("twice").await.expect("get").is_none());

    let cvs = tc.dynamic(&cv_resource, None);
    if cvs.get_opt("version").await.expect("get cv").is_some() {
        cvs.delete("version", &Default::default())
            .await
            .expect("delete cv");
        common::wait_gone(&tc, &cvs, "version", "ClusterVersion version").await;
    }
}
