use serde_json::json;

use super::*;
use crate::fleet::control::State;
use crate::fleet::feedback::Entry;
use crate::fleet::status::{ClusterRollout, ClusterState, Target};

const IMAGE: &str = "127.0.0.1:5000/fleet/release@sha256:ab";
const STUCK: &str = "MinorUpdateWhileDeletionInProgress";

fn s(name: &str, v: &str) -> Value {
    json!({"name": name, "fieldValue": {"type": "String", "string": v}})
}

fn i(name: &str, v: i64) -> Value {
    json!({"name": name, "fieldValue": {"type": "Integer", "integer": v}})
}

/// The feedback of a cluster that answered the preflight of `image`: every risk `False`
/// but `applying` (`True`), `accepted` named in acceptRisks.
fn answered(image: &str, applying: &[&str], accepted: &[&str]) -> Vec<FeedbackValue> {
    let mut values = vec![
        s("requestedImage", image),
        s("requestedMode", "Preflight"),
        i("generation", 4),
        i("observedGeneration", 4),
        s(
            "UpdatePreflight.status",
            if applying.is_empty() { "True" } else { "False" },
        ),
        s(
            "recommended",
            if applying.is_empty() { "True" } else { "False" },
        ),
        s(
            "UpdatePreflight.message",
            &format!("Preflight of 1.2.0 ({image}): risks apply that are not accepted: …"),
        ),
    ];
    for check in CATALOGUE {
        let applies = applying.contains(&check.name);
        values.push(s(
            &applies_name(check.name),
            if applies { "True" } else { "False" },
        ));
        if applies {
            values.push(s(
                &message_name(check.name),
                "ConfigMap fleet-held/held is still being deleted",
            ));
        }
        if accepted.contains(&check.name) {
            values.push(s(&accepted_name(check.name), check.name));
        }
    }
    serde_json::from_value(json!(values)).expect("values")
}

#[test]
fn the_paths_are_scalars_named_once_with_nested_filters_and_the_image_quoted() {
    let paths = paths(IMAGE);
    let names: std::collections::BTreeSet<&String> = paths.iter().map(|(n, _)| n).collect();
    assert_eq!(names.len(), paths.len());
    let find = |name: &str| {
        paths
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, p)| p.as_str())
            .unwrap_or_else(|| panic!("no path {name}"))
    };
    assert_eq!(
        find(&applies_name(STUCK)),
        ".status.conditionalUpdateRisks[?(@.name==\"MinorUpdateWhileDeletionInProgress\")].conditions[?(@.type==\"Applies\")].status"
    );
    assert_eq!(
        find(&accepted_name(STUCK)),
        ".spec.desiredUpdate.acceptRisks[?(@.name==\"MinorUpdateWhileDeletionInProgress\")].name"
    );
    assert_eq!(
        find("recommended"),
        format!(
            ".status.conditionalUpdates[?(@.release.image==\"{IMAGE}\")].conditions[?(@.type==\"Recommended\")].status"
        )
    );
    // Every set's paths too: the answer is bound by generation and requested image.
    assert_eq!(find("observedGeneration"), ".status.observedGeneration");
}

#[test]
fn the_request_asks_every_cluster_at_once_for_a_preflight_and_orphans_on_delete() {
    let set = Request {
        namespace: "fleet".into(),
        placement: "waves".into(),
        version: "1.2.0".into(),
        image: IMAGE.into(),
        accept_risks: vec![STUCK.into()],
    }
    .manifest();
    assert_eq!(set["metadata"]["name"], "cvo-preflight-waves");
    assert_eq!(
        set["spec"]["placementRefs"][0]["rolloutStrategy"],
        json!({"type": "All"})
    );
    let template = &set["spec"]["manifestWorkTemplate"];
    assert_eq!(template["deleteOption"]["propagationPolicy"], "Orphan");
    assert_eq!(
        template["manifestConfigs"][0]["updateStrategy"]["serverSideApply"]["fieldManager"],
        work::AGENT_FIELD_MANAGER
    );
    assert!(
        template["manifestConfigs"][0]
            .get("conditionRules")
            .is_none()
    );
    assert_eq!(
        template["workload"]["manifests"][0]["spec"],
        json!({"desiredUpdate": {"version": "1.2.0", "image": IMAGE, "mode": "Preflight",
            "acceptRisks": [{"name": STUCK}]}})
    );
    assert_eq!(
        set["metadata"]["annotations"][work::ACCEPT_RISKS_ANNOTATION],
        STUCK
    );
}

#[test]
fn an_answer_counts_only_for_this_request_and_fails_closed() {
    // Nothing reported, another image, a spec not seen yet, no condition naming the image.
    assert!(matches!(answer(&[], IMAGE), Answer::NotReported { .. }));
    let other = answered("r@sha256:cd", &[], &[]);
    assert!(matches!(answer(&other, IMAGE), Answer::NotReported { .. }));
    let mut behind = answered(IMAGE, &[], &[]);
    behind.retain(|v| v.name != "observedGeneration");
    behind.extend(
        serde_json::from_value::<Vec<FeedbackValue>>(json!([i("observedGeneration", 3)]))
            .expect("v"),
    );
    let Answer::NotReported { reason } = answer(&behind, IMAGE) else {
        panic!("behind is not reported");
    };
    assert!(
        reason.contains("observedGeneration 3, generation 4"),
        "{reason}"
    );
    let mut old = answered(IMAGE, &[], &[]);
    for v in &mut old {
        if v.name == "UpdatePreflight.message" {
            v.field_value.string =
                Some("Preflight of 1.1.0 (r@sha256:cd): no risk applies.".into());
        }
    }
    assert_eq!(answer(&old, IMAGE).verdict(None), Verdict::NotReported);
    // A rollout's apply removed the mode: no longer a preflight request.
    let mut rolled = answered(IMAGE, &[], &[]);
    rolled.retain(|v| v.name != "requestedMode");
    assert_eq!(answer(&rolled, IMAGE).verdict(None), Verdict::NotReported);
    // The preflight could not run.
    let mut failed = answered(IMAGE, &[], &[]);
    for v in &mut failed {
        if v.name == "UpdatePreflight.status" {
            v.field_value.string = Some("Unknown".into());
        }
    }
    assert!(matches!(answer(&failed, IMAGE), Answer::Failed { .. }));
    // A risk whose Applies is missing applies (Unknown).
    let mut missing = answered(IMAGE, &[], &[]);
    missing.retain(|v| v.name != applies_name("CRDStoredVersionRemoved"));
    let Answer::Assessed { risks, .. } = answer(&missing, IMAGE) else {
        panic!("assessed");
    };
    assert_eq!(risks.len(), 1);
    assert_eq!(risks[0].applies, "Unknown");
    assert_eq!(answer(&missing, IMAGE).verdict(None), Verdict::NotAccepted);
}

#[test]
fn a_risk_that_applies_is_named_with_its_message_and_whether_it_is_accepted() {
    let clean = answer(&answered(IMAGE, &[], &[]), IMAGE);
    assert_eq!(
        clean,
        Answer::Assessed {
            risks: Vec::new(),
            recommended: Some("True".to_owned())
        }
    );
    assert_eq!(clean.verdict(None), Verdict::Clean);
    let stuck = answer(&answered(IMAGE, &[STUCK], &[]), IMAGE);
    let Answer::Assessed { risks, .. } = &stuck else {
        panic!("assessed");
    };
    assert_eq!(risks[0].name, STUCK);
    assert_eq!(risks[0].applies, "True");
    assert!(!risks[0].accepted);
    assert!(
        risks[0]
            .message
            .as_deref()
            .is_some_and(|m| m.contains("fleet-held"))
    );
    assert_eq!(stuck.verdict(None), Verdict::NotAccepted);
    // The rollout's --accept-risks judges, when given.
    assert_eq!(stuck.verdict(Some(&[STUCK.to_owned()])), Verdict::Accepted);
    let accepted = answer(&answered(IMAGE, &[STUCK], &[STUCK]), IMAGE);
    assert_eq!(accepted.verdict(None), Verdict::Accepted);
    assert_eq!(accepted.verdict(Some(&[])), Verdict::NotAccepted);
}

fn state(name: &str, wave: u32, at_image: Option<&str>) -> ClusterState {
    ClusterState {
        name: name.to_owned(),
        wave: Some(Wave {
            index: wave,
            name: if wave == 0 { "canary" } else { "rest" }.to_owned(),
        }),
        reachable: Reachability::Reachable,
        report: Some(Report {
            history: vec![Entry {
                version: Some("1.1.0".into()),
                state: Some("Completed".into()),
                image: Some(at_image.unwrap_or("r@sha256:old").to_owned()),
                verified: None,
            }],
            ..Report::default()
        }),
        rollout: ClusterRollout::None,
    }
}

fn fleet(clusters: Vec<ClusterState>) -> FleetStatus {
    FleetStatus {
        placement: "fleet/waves".into(),
        target: None,
        waves: status::wave_states(&clusters),
        clusters,
        held_by: Vec::new(),
        problems: Vec::new(),
    }
}

#[test]
fn a_rollout_is_refused_on_its_first_wave_for_risks_not_accepted_and_for_no_answer() {
    let st = fleet(vec![
        state("c1", 0, None),
        state("c0", 0, None),
        state("c2", 1, None),
    ]);
    let mut answers = BTreeMap::new();
    answers.insert(
        "c1".to_owned(),
        answer(&answered(IMAGE, &[STUCK], &[]), IMAGE),
    );
    answers.insert(
        "c2".to_owned(),
        answer(&answered(IMAGE, &["CRDStoredVersionRemoved"], &[]), IMAGE),
    );
    let refused = first_wave_refusals(&st, &answers, IMAGE, &[]);
    let names: Vec<&str> = refused.iter().map(|r| r.cluster.as_str()).collect();
    // c0 never answered; c2 is not in the first wave.
    assert_eq!(names, ["c0", "c1"], "{refused:?}");
    assert!(refused[0].reason.contains("run `cvo fleet preflight --placement fleet/waves --release oci://127.0.0.1:5000/fleet/release@sha256:ab` first"), "{}", refused[0].reason);
    assert!(
        refused[1].reason.starts_with("preflight risks apply that are not accepted: MinorUpdateWhileDeletionInProgress (ConfigMap fleet-held/held is still being deleted)")
            && refused[1].reason.ends_with("`--accept-risks MinorUpdateWhileDeletionInProgress`"),
        "{}",
        refused[1].reason
    );
    // Accepted by the rollout: only the cluster without an answer is left.
    let left = first_wave_refusals(&st, &answers, IMAGE, &[STUCK.to_owned()]);
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].cluster, "c0");
    // A cluster already at the image needs no preflight; nor does a rollout written again.
    let at = fleet(vec![state("c0", 0, Some(IMAGE))]);
    assert!(first_wave_refusals(&at, &BTreeMap::new(), IMAGE, &[]).is_empty());
    let mut again = fleet(vec![state("c0", 0, None)]);
    again.target = Some(target(State::Running));
    assert!(first_wave_refusals(&again, &BTreeMap::new(), IMAGE, &[]).is_empty());
}

fn target(state: State) -> Target {
    Target {
        rollout: "fleet/cvo-rollout-waves".into(),
        version: "1.1.0".into(),
        image: IMAGE.into(),
        deadline: None,
        forced: None,
        clusters: Vec::new(),
        state,
    }
}

#[test]
fn a_done_or_aborted_rollout_makes_way_for_a_preflight_and_a_running_one_refuses_it() {
    assert_eq!(
        rollout_in_the_way(&fleet(vec![state("c1", 0, None)])),
        Ok(None)
    );
    let mut running = fleet(vec![state("c1", 0, None)]);
    running.target = Some(target(State::Running));
    running.clusters[0].rollout = ClusterRollout::Progressing("asked".into());
    running.waves = status::wave_states(&running.clusters);
    let why = rollout_in_the_way(&running).unwrap_err();
    assert!(
        why.contains("is not done") && why.contains("cvo fleet abort"),
        "{why}"
    );
    let mut aborted = running.clone();
    aborted.target = Some(target(State::Aborted));
    assert_eq!(
        rollout_in_the_way(&aborted),
        Ok(Some("fleet/cvo-rollout-waves".to_owned()))
    );
    let mut done = running.clone();
    done.clusters[0].rollout = ClusterRollout::Done;
    done.waves = status::wave_states(&done.clusters);
    assert!(rollout_in_the_way(&done).is_ok_and(|d| d.is_some()));
}

#[test]
fn the_fleet_exit_code_is_1_for_risks_3_for_no_answer_yet_0_when_clean() {
    let one = |verdict: Verdict, wave: u32, name: &str| ClusterPreflight {
        name: name.into(),
        wave: Wave {
            index: wave,
            name: String::new(),
        },
        reachable: Reachability::Reachable,
        verdict,
        answer: Answer::Assessed {
            risks: Vec::new(),
            recommended: None,
        },
    };
    let mut p = FleetPreflight {
        placement: "fleet/waves".into(),
        preflight: "fleet/cvo-preflight-waves".into(),
        version: "1.2.0".into(),
        image: IMAGE.into(),
        accept_risks: Vec::new(),
        waves: Vec::new(),
        clusters: vec![one(Verdict::Clean, 0, "a"), one(Verdict::Accepted, 1, "b")],
        problems: Vec::new(),
    };
    assert_eq!(p.exit(), Exit::Success);
    assert!(p.attention().is_empty());
    p.clusters.push(one(Verdict::NotReported, 1, "c"));
    assert_eq!(p.exit(), Exit::InProgress);
    p.clusters.push(one(Verdict::NotAccepted, 1, "d"));
    p.clusters.push(one(Verdict::Failed, 0, "e"));
    assert_eq!(p.exit(), Exit::Failed);
    let order: Vec<&str> = p.attention().iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        order,
        ["e", "d", "c"],
        "the first wave first, the worst first"
    );
}
