use super::*;
use crate::apply::ManifestResult;
use crate::release::LoadOptions;

/// A release of two ConfigMaps at 1.6.0.
fn release() -> Release {
    let dir = tempfile::tempdir().unwrap();
    let cm = |name: &str| {
        format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: ns\n")
    };
    std::fs::write(dir.path().join("0000_10_a_00_a.yaml"), cm("a")).unwrap();
    std::fs::write(dir.path().join("0000_10_a_01_b.yaml"), cm("b")).unwrap();
    std::fs::write(
        dir.path().join("release-metadata"),
        r#"{"kind": "cincinnati-metadata-v0", "version": "1.6.0"}"#,
    )
    .unwrap();
    let release = crate::release::load(dir.path(), &LoadOptions::default()).unwrap();
    assert!(!release.has_errors(), "{:?}", release.diagnostics);
    release
}

fn result(index: usize, action: Action, code: Option<u16>) -> ManifestResult {
    let mut r = ManifestResult::new(index, action);
    r.rejected = code;
    if action == Action::Failed {
        r.error = Some(format!("refused ({code:?})"));
    }
    r
}

struct Given {
    update: UpdateType,
    upgradeable: Option<Condition>,
    preconditions: Vec<PreconditionFailure>,
    implicit: BTreeSet<String>,
    results: Vec<ManifestResult>,
    stored: Result<Vec<crds::Dropped>, String>,
}

impl Default for Given {
    fn default() -> Self {
        Given {
            update: UpdateType::MinorOrMajor,
            upgradeable: None,
            preconditions: Vec::new(),
            implicit: BTreeSet::new(),
            results: vec![
                result(0, Action::Unchanged, None),
                result(1, Action::Updated, None),
            ],
            stored: Ok(Vec::new()),
        }
    }
}

fn assessed(given: &Given) -> Assessment {
    let release = release();
    let report = PassReport {
        results: given.results.clone(),
    };
    assess(&Evidence {
        release: &release,
        update: &given.update,
        upgradeable: given.upgradeable.as_ref(),
        preconditions: &given.preconditions,
        implicitly_enabled: &given.implicit,
        dry_run: &report,
        stored_versions: &given.stored,
    })
}

fn applying(a: &Assessment) -> Vec<(&'static str, Applies)> {
    a.applying().map(|r| (r.name, r.applies)).collect()
}

#[test]
fn a_clean_update_has_every_check_and_none_applies() {
    let a = assessed(&Given::default());
    assert_eq!(a.version, "1.6.0");
    let names: Vec<&str> = a.risks.iter().map(|r| r.name).collect();
    let catalogue: Vec<&str> = CATALOGUE.iter().map(|c| c.name).collect();
    assert_eq!(names, catalogue);
    assert!(applying(&a).is_empty());
    assert!(a.refusal().is_none());
    for r in &a.risks {
        assert!(!r.message.is_empty(), "{}", r.name);
        assert!(r.url.starts_with(DOCS) && r.url.ends_with(&r.name.to_ascii_lowercase()));
        let c = r.condition();
        assert_eq!(
            (c.type_.as_str(), c.status, c.reason.as_str()),
            ("Applies", ConditionStatus::False, "DoesNotApply")
        );
    }
}

#[test]
fn a_stuck_deletion_is_its_own_risk_and_other_reasons_for_not_upgradeable_are_another() {
    let failure = PreconditionFailure {
        reason: "UpgradeableFalse",
        message:
            "a minor/major update is not allowed while Upgradeable=False (ResourceDeletionStuck: …)"
                .into(),
        objects: Vec::new(),
    };
    let stuck = Condition::new("Upgradeable", ConditionStatus::False, REASON_STUCK, "…");
    let a = assessed(&Given {
        upgradeable: Some(stuck),
        preconditions: vec![failure.clone()],
        ..Given::default()
    });
    assert_eq!(
        applying(&a),
        [("MinorUpdateWhileDeletionInProgress", Applies::Yes)]
    );
    let overrides = Condition::new(
        "Upgradeable",
        ConditionStatus::False,
        "ClusterVersionOverrides",
        "…",
    );
    let a = assessed(&Given {
        upgradeable: Some(overrides),
        preconditions: vec![failure],
        ..Given::default()
    });
    assert_eq!(
        applying(&a),
        [("MinorUpdateWhileNotUpgradeable", Applies::Yes)]
    );
    // A deletion nobody can read back cannot be told finished: it applies (fail closed).
    let a = assessed(&Given {
        preconditions: vec![PreconditionFailure {
            reason: "DeletionStatusUnknown",
            message: "cannot tell".into(),
            objects: Vec::new(),
        }],
        ..Given::default()
    });
    assert_eq!(
        applying(&a),
        [("MinorUpdateWhileDeletionInProgress", Applies::CannotTell)]
    );
    assert_eq!(a.risks[0].condition().status, ConditionStatus::Unknown);
}

#[test]
fn the_dry_run_tells_rejections_from_missing_permissions_and_unchecked_manifests_apply() {
    let a = assessed(&Given {
        results: vec![
            result(0, Action::Failed, Some(422)),
            result(1, Action::Failed, Some(403)),
        ],
        ..Given::default()
    });
    assert_eq!(
        applying(&a),
        [
            ("ManifestRejectedByServer", Applies::Yes),
            ("OperatorLacksPermission", Applies::Yes)
        ]
    );
    let rejected = a
        .risks
        .iter()
        .find(|r| r.name == "ManifestRejectedByServer")
        .unwrap();
    assert!(
        rejected.message.starts_with("1 of 2: ConfigMap ns/a"),
        "{}",
        rejected.message
    );
    // A manifest that failed for another reason (a timeout) or was skipped was not checked.
    let a = assessed(&Given {
        results: vec![
            result(0, Action::Failed, None),
            result(1, Action::Skipped, None),
        ],
        ..Given::default()
    });
    assert_eq!(
        applying(&a),
        [
            ("ManifestRejectedByServer", Applies::CannotTell),
            ("OperatorLacksPermission", Applies::CannotTell)
        ]
    );
}

#[test]
fn crd_versions_and_implicit_capabilities_apply_and_an_unreadable_crd_cannot_be_told() {
    let a = assessed(&Given {
        stored: Ok(vec![crds::Dropped {
            crd: "widgets.example.com".into(),
            versions: vec!["v1alpha1".into()],
        }]),
        implicit: BTreeSet::from(["Console".to_owned()]),
        ..Given::default()
    });
    assert_eq!(
        applying(&a),
        [
            ("CRDStoredVersionRemoved", Applies::Yes),
            ("CapabilityImplicitlyEnabled", Applies::Yes)
        ]
    );
    let a = assessed(&Given {
        stored: Err("503".into()),
        ..Given::default()
    });
    assert_eq!(
        applying(&a),
        [("CRDStoredVersionRemoved", Applies::CannotTell)]
    );
}

#[test]
fn accepted_risks_stop_nothing_and_the_refusal_names_the_rest_and_what_to_do() {
    let mut a = assessed(&Given {
        results: vec![
            result(0, Action::Failed, Some(422)),
            result(1, Action::Failed, Some(403)),
        ],
        ..Given::default()
    });
    a.accept(&["OperatorLacksPermission".to_owned()]);
    let refusal = a.refusal().unwrap();
    assert_eq!(refusal.reason, RISKS_NOT_ACCEPTED);
    assert_eq!(refusal.objects, ["ManifestRejectedByServer"]);
    assert!(
        refusal
            .message
            .contains("cvo apply --accept-risks ManifestRejectedByServer"),
        "{}",
        refusal.message
    );
    a.accept(&[
        "OperatorLacksPermission".to_owned(),
        "ManifestRejectedByServer".to_owned(),
    ]);
    assert!(a.refusal().is_none());
    assert!(a.unaccepted().is_empty());
}
