//! The real OpenShift corpus in `../shared/corpus/` loads as CVO would read it.
//! Ignored by default (`common::needs`): run with `--include-ignored` where the corpus is.

use std::collections::BTreeSet;

use cvo::diagnostic::Severity;
use cvo::release::{DeleteIntent, Filters, LoadOptions, load};

/// File names of the diagnostics of `rule`s.
fn files_with(release: &cvo::release::Release, rules: &[&str]) -> BTreeSet<String> {
    release
        .diagnostics
        .iter()
        .filter(|d| rules.contains(&d.rule))
        .map(|d| {
            d.location
                .file
                .file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .to_owned()
        })
        .collect()
}

use crate::common::needs::corpus;

const DUPLICATE_KEY_FILE: &str =
    "0000_50_cluster-csi-snapshot-controller-operator_04_serviceaccount.yaml";

/// Issue 25 item 4: the real OpenShift corpus loads unedited, with no error at all: its one
/// duplicate mapping key keeps the last value (as the CVO reads it) and is a warning naming
/// both lines.
#[test]
#[ignore = "needs the shared OpenShift corpus (../shared/corpus, or CVO_TEST_CORPUS): run with --include-ignored (.ci/run does)"]
fn openshift_release_loads_every_file_with_no_error() {
    let dir = corpus("openshift-release");
    // In each of its cluster profiles (all of them at once would hold each object's
    // per-profile twins): no error at all.
    let release = load(&dir, &LoadOptions::default()).expect("corpus is readable");
    let profiles = cvo::release::Selectors::of(release.all_manifests()).profiles;
    assert_eq!(profiles.len(), 4, "{profiles:?}");
    for profile in profiles {
        let options = LoadOptions {
            filters: Filters {
                profile: Some(profile.clone()),
                ..Filters::default()
            },
            ..LoadOptions::default()
        };
        let in_profile = load(&dir, &options).unwrap();
        let errors: Vec<_> = in_profile.errors().collect();
        assert!(errors.is_empty(), "{profile}: {errors:#?}");
    }
    let dup: Vec<_> = release
        .diagnostics
        .iter()
        .filter(|d| d.rule == "duplicate-key")
        .collect();
    assert_eq!(dup.len(), 1, "{dup:?}");
    let dup = dup[0];
    assert!(dup.location.file.ends_with(DUPLICATE_KEY_FILE), "{dup}");
    assert_eq!(dup.location.line, Some(14), "{dup}");
    assert_eq!(dup.location.document, Some(0));
    assert_eq!(dup.severity, Severity::Warning);
    assert!(
        dup.message.contains(
            "`capability.openshift.io/name` is written twice in one mapping (lines 13 and 14)"
        ),
        "{dup}"
    );
    let sa = release
        .all_manifests()
        .find(|m| m.file_name() == DUPLICATE_KEY_FILE)
        .expect("the duplicate-key file loads");
    assert_eq!(sa.capabilities, ["CSISnapshot"]);

    // SOURCES.md: 1081 non-empty documents.
    assert_eq!(release.manifests.len() + release.excluded.len(), 1081);
    let files: BTreeSet<_> = release
        .all_manifests()
        .map(|m| m.file_name().to_owned())
        .collect();
    assert_eq!(files.len(), 799);

    // 15 delete-annotated documents, all "true".
    let deletes = release
        .all_manifests()
        .filter(|m| m.intent == DeleteIntent::Delete)
        .count();
    assert_eq!(deletes, 15);

    // The CVO's own install templates are flagged, since this folder is not a payload.
    let templates = files_with(&release, &["unrendered-template"]);
    assert_eq!(
        templates,
        BTreeSet::from([
            "0000_00_cluster-version-operator_30_deployment.yaml".to_owned(),
            "0000_90_cluster-version-operator_02_prometheusrule_servicemonitor.yaml".to_owned(),
            "0000_90_cluster-version-operator_02_servicemonitor.yaml".to_owned(),
        ])
    );
}

#[test]
#[ignore = "needs the shared OpenShift corpus (../shared/corpus, or CVO_TEST_CORPUS): run with --include-ignored (.ci/run does)"]
fn edge_cases_read_like_kubernetes_tooling() {
    let dir = corpus("openshift-release");
    let release = load(&dir, &LoadOptions::default()).unwrap();
    let by_file = |name: &str| {
        release
            .all_manifests()
            .find(|m| m.file_name() == name)
            .unwrap_or_else(|| panic!("{name} not loaded"))
    };
    // A UTF-8 BOM at the start of a file.
    let bom = by_file("0000_50_console-operator_node-with-s2i.yaml");
    assert_eq!(bom.id.kind, "ConsoleQuickStart");
    // A bare `- =` enum entry is the string "=".
    let eq = by_file(
        "0000_50_cluster-monitoring-operator_00_0alertmanager-config-custom-resource-definition.yaml",
    );
    assert!(eq.object.to_string().contains("\"=\""));
    // A quoted scalar whose continuation lines are under-indented (libyaml accepts it).
    let scc = by_file("0000_20_kube-apiserver-operator_00_scc-nested-container.yaml");
    let description = scc.annotation("kubernetes.io/description").unwrap();
    assert!(description.starts_with("nested-container is specially tailored"));
    assert!(description.contains("running nested containers. It balances"));
}

#[test]
#[ignore = "needs the shared OpenShift corpus (../shared/corpus, or CVO_TEST_CORPUS): run with --include-ignored (.ci/run does)"]
fn profile_filter_keeps_only_included_manifests() {
    let dir = corpus("openshift-release");
    let options = LoadOptions {
        filters: Filters {
            profile: Some("hypershift".into()),
            ..Default::default()
        },
        ..Default::default()
    };
    let release = load(&dir, &options).unwrap();
    assert!(!release.manifests.is_empty());
    assert!(
        release
            .manifests
            .iter()
            .all(|m| { m.annotation("include.release.openshift.io/hypershift") == Some("true") })
    );
}

#[test]
#[ignore = "needs the shared OpenShift corpus (../shared/corpus, or CVO_TEST_CORPUS): run with --include-ignored (.ci/run does)"]
fn delete_annotated_corpus_loads_without_panics() {
    let dir = corpus("delete-annotated");
    let mut deletes = 0;
    let mut documents = 0;
    let mut repeated = BTreeSet::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let sub = entry.unwrap().path();
        if !sub.is_dir() {
            continue;
        }
        let release = load(&sub, &LoadOptions::default()).unwrap();
        let parse_errors: Vec<_> = release
            .diagnostics
            .iter()
            .filter(|d| d.severity == Severity::Error && d.rule == "parse-error")
            .collect();
        assert!(parse_errors.is_empty(), "{parse_errors:?}");
        for d in release
            .diagnostics
            .iter()
            .filter(|d| d.rule == "repeated-document")
        {
            repeated.insert(format!(
                "{}:{}",
                d.location.file.display(),
                d.location.line.unwrap()
            ));
        }
        let all: Vec<_> = release.all_manifests().collect();
        documents += all.len();
        deletes += all.iter().filter(|m| m.is_delete()).count();
    }
    // SOURCES.md: 125 documents, 87 delete-annotated objects, all "true".
    assert_eq!(documents, 125);
    assert_eq!(deletes, 87);
    // A real one (issue 25 item 5): insights-operator's file of 2021 deletes a Role and its
    // RoleBinding and creates them again in the same file, which the CVO refuses.
    let file = dir.join("insights-operator/03-clusterrole.yaml");
    let at = |line: u32| format!("{}:{line}", file.display());
    assert_eq!(repeated, BTreeSet::from([at(367), at(389)]));
}
