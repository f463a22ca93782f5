//! Whether a conditional update is recommended for this cluster: each risk's matching rules
//! are evaluated as OpenShift's cluster-version operator evaluates them, and the update gets
//! a `Recommended` condition.
//!
//! Rules are walked in order and the first that can be evaluated decides: `Always` matches;
//! `PromQL` cannot be evaluated by `cvo` (it queries no Prometheus), so it is an evaluation
//! failure and the walk goes on. A risk that matches makes the update not recommended
//! (`Recommended=False`, reason the risk's name — or `ExposedToRisks` when the name is not a
//! valid reason —, message `<risk message> <risk url>`); a risk that cannot be evaluated makes
//! it `Recommended=Unknown` `EvaluationFailed` (fail closed: never recommended); several
//! reasons together are `MultipleReasons`. A risk named by several conditional updates is
//! evaluated once, from the newest update's copy. Accepted risks (`spec.desiredUpdate.
//! acceptRisks`) do not change the recommendation here, as in OpenShift's default feature
//! set. An update recommended after all joins the available updates.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::graph::{Release, Risk, Rule};

pub const RECOMMENDED: &str = "Recommended";
const NOT_EXPOSED: &str = "NotExposedToRisks";
const ALL_ACCEPTED: &str = "AllExposedRisksAccepted";
const EVALUATION_FAILED: &str = "EvaluationFailed";
const MULTIPLE: &str = "MultipleReasons";
const EXPOSED: &str = "ExposedToRisks";
const MAX_CONDITION_MESSAGE: usize = 32768;

/// One entry of `status.conditionalUpdates` (openshift/api's `ConditionalUpdate`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConditionalUpdate {
    pub release: Release,
    pub risks: Vec<Risk>,
    pub conditions: Vec<UpdateCondition>,
}

/// A condition of a conditional update (a `metav1.Condition`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UpdateCondition {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
    pub reason: String,
    pub message: String,
    #[serde(rename = "lastTransitionTime")]
    pub last_transition_time: String,
}

/// Whether a risk applies to this cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Applies {
    Yes,
    No,
    Unknown(String),
}

/// The first rule that can be evaluated decides; none: the errors of all.
fn matches(rules: &[Rule]) -> Result<bool, String> {
    let mut errors = Vec::new();
    for rule in rules {
        match rule.type_.as_str() {
            "Always" => return Ok(true),
            "PromQL" => errors.push(
                "PromQL matching rules are not evaluated by cvo (it queries no Prometheus)"
                    .to_owned(),
            ),
            _ => {}
        }
    }
    Err(match errors.len() {
        1 => errors.remove(0),
        _ => format!("[{}]", errors.join(", ")),
    })
}

fn applies(risk: &Risk) -> Applies {
    match matches(&risk.matching_rules) {
        Ok(true) => Applies::Yes,
        Ok(false) => Applies::No,
        Err(e) => Applies::Unknown(format!(
            "Could not evaluate exposure to update risk {name} ({e})\n  {name} description: {message}\n  {name} URL: {url}",
            name = risk.name,
            message = risk.message,
            url = risk.url
        )),
    }
}

/// Each conditional update with its `Recommended` condition (dated `now`), sorted newest
/// first, and the releases among them that are recommended after all.
pub fn evaluate(
    conditional: Vec<(Release, Vec<Risk>)>,
    now: &str,
) -> (Vec<ConditionalUpdate>, Vec<Release>) {
    // Each risk by name, from the newest update that lists it.
    let mut newest: BTreeMap<String, (semver::Version, &Risk)> = BTreeMap::new();
    for (release, risks) in &conditional {
        let Ok(version) = release.version.parse::<semver::Version>() else {
            continue;
        };
        for risk in risks {
            match newest.get(&risk.name) {
                Some((v, _)) if *v >= version => {}
                _ => {
                    newest.insert(risk.name.clone(), (version.clone(), risk));
                }
            }
        }
    }
    let applies: BTreeMap<String, Applies> = newest
        .iter()
        .map(|(name, (_, risk))| (name.clone(), applies(risk)))
        .collect();
    let mut recommended = Vec::new();
    let mut out: Vec<ConditionalUpdate> = conditional
        .iter()
        .map(|(release, risks)| {
            let condition = recommendation(risks, &applies, now);
            if condition.status == "True" {
                recommended.push(release.clone());
            }
            ConditionalUpdate {
                release: release.clone(),
                risks: risks.clone(),
                conditions: vec![condition],
            }
        })
        .collect();
    sort_newest_first(&mut out, |c| &c.release.version);
    (out, recommended)
}

/// Sorts by semantic version, newest first (as the CVO sorts both lists).
pub fn sort_newest_first<T>(items: &mut [T], version: impl Fn(&T) -> &str) {
    items.sort_by(|a, b| {
        let (a, b) = (
            version(a).parse::<semver::Version>(),
            version(b).parse::<semver::Version>(),
        );
        match (a, b) {
            (Ok(a), Ok(b)) => b.cmp_precedence(&a),
            (a, b) => b.is_ok().cmp(&a.is_ok()),
        }
    });
}

fn recommendation(
    risks: &[Risk],
    applies: &BTreeMap<String, Applies>,
    now: &str,
) -> UpdateCondition {
    let mut status = "True";
    let mut reason = NOT_EXPOSED.to_owned();
    let mut messages = Vec::new();
    for risk in risks {
        let verdict = applies.get(&risk.name).cloned().unwrap_or_else(|| {
            Applies::Unknown(format!(
                "failed to find risk condition for risk {}",
                risk.name
            ))
        });
        match verdict {
            Applies::No => {}
            Applies::Unknown(message) => {
                if status != "False" {
                    status = "Unknown";
                }
                reason = next_reason(&reason, EVALUATION_FAILED);
                messages.push(message);
            }
            Applies::Yes => {
                status = "False";
                let want = if valid_reason(&risk.name) {
                    risk.name.as_str()
                } else {
                    EXPOSED
                };
                reason = next_reason(&reason, want);
                messages.push(format!("{} {}", risk.message, risk.url));
            }
        }
    }
    let message = if messages.is_empty() {
        "The update is recommended, because none of the conditional update risks apply to this cluster.".to_owned()
    } else {
        // OpenShift's schema caps a condition message at 32 KiB.
        crate::status::conditions::truncate(&messages.join("\n\n"), MAX_CONDITION_MESSAGE)
    };
    UpdateCondition {
        type_: RECOMMENDED.into(),
        status: status.into(),
        reason,
        message,
        last_transition_time: now.into(),
    }
}

/// The CVO's reason when a risk asks for `want` after the reasons so far gave `now`.
fn next_reason(now: &str, want: &str) -> String {
    if now == NOT_EXPOSED
        || (now == ALL_ACCEPTED && want != NOT_EXPOSED)
        || (now == EVALUATION_FAILED && want == EXPOSED)
        || now == want
    {
        want.to_owned()
    } else if want == NOT_EXPOSED
        || (now == EVALUATION_FAILED && want == ALL_ACCEPTED)
        || (now == EXPOSED && (want == ALL_ACCEPTED || want == EVALUATION_FAILED))
    {
        now.to_owned()
    } else {
        MULTIPLE.to_owned()
    }
}

/// A Kubernetes condition reason: `^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$`.
fn valid_reason(s: &str) -> bool {
    let b = s.as_bytes();
    let inner = |c: &u8| c.is_ascii_alphanumeric() || matches!(c, b'_' | b',' | b':');
    let last = |c: &u8| c.is_ascii_alphanumeric() || *c == b'_';
    match b {
        [] => false,
        [first] => first.is_ascii_alphabetic(),
        [first, middle @ .., end] => {
            first.is_ascii_alphabetic() && middle.iter().all(inner) && last(end)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::updates::graph::PromQl;

    const NOW: &str = "2026-01-01T00:00:00Z";

    fn release(v: &str) -> Release {
        Release {
            version: v.into(),
            image: format!("img:{v}"),
            url: None,
            channels: None,
        }
    }

    fn risk(name: &str, rules: &[&str]) -> Risk {
        Risk {
            url: format!("https://example.com/{name}"),
            name: name.into(),
            message: format!("{name} breaks."),
            matching_rules: rules
                .iter()
                .map(|t| Rule {
                    type_: (*t).into(),
                    promql: (*t == "PromQL").then(|| PromQl {
                        promql: "up == 0".into(),
                    }),
                })
                .collect(),
        }
    }

    #[test]
    fn an_always_risk_makes_the_update_not_recommended() {
        let (out, recommended) = evaluate(
            vec![(release("1.6.0"), vec![risk("Widgets", &["Always"])])],
            NOW,
        );
        assert!(recommended.is_empty());
        let c = &out[0].conditions[0];
        assert_eq!(
            (c.type_.as_str(), c.status.as_str(), c.reason.as_str()),
            ("Recommended", "False", "Widgets")
        );
        assert_eq!(c.message, "Widgets breaks. https://example.com/Widgets");
        assert_eq!(c.last_transition_time, NOW);
    }

    #[test]
    fn a_promql_risk_cvo_cannot_evaluate_is_unknown_never_recommended() {
        let (out, recommended) = evaluate(
            vec![(release("1.6.0"), vec![risk("Slow", &["PromQL"])])],
            NOW,
        );
        assert!(recommended.is_empty());
        let c = &out[0].conditions[0];
        assert_eq!(
            (c.status.as_str(), c.reason.as_str()),
            ("Unknown", "EvaluationFailed")
        );
        assert!(c.message.starts_with("Could not evaluate exposure to update risk Slow (PromQL matching rules are not evaluated by cvo"), "{}", c.message);
        assert!(
            c.message.ends_with(
                "\n  Slow description: Slow breaks.\n  Slow URL: https://example.com/Slow"
            ),
            "{}",
            c.message
        );
        // A later rule that can be evaluated decides.
        let (out, _) = evaluate(
            vec![(release("1.6.0"), vec![risk("Slow", &["PromQL", "Always"])])],
            NOW,
        );
        assert_eq!(out[0].conditions[0].status, "False");
    }

    #[test]
    fn reasons_combine_as_in_the_cvo() {
        let (out, _) = evaluate(
            vec![(
                release("1.6.0"),
                vec![
                    risk("A", &["Always"]),
                    risk("B", &["PromQL"]),
                    risk("bad name!", &["Always"]),
                ],
            )],
            NOW,
        );
        let c = &out[0].conditions[0];
        assert_eq!(
            (c.status.as_str(), c.reason.as_str()),
            ("False", "MultipleReasons")
        );
        // A huge risk message is cut to what OpenShift's schema accepts.
        let mut long = risk("Long", &["Always"]);
        long.message = "x".repeat(100_000);
        let (huge, _) = evaluate(vec![(release("1.7.0"), vec![long])], NOW);
        assert!(huge[0].conditions[0].message.len() <= MAX_CONDITION_MESSAGE);
        assert_eq!(c.message.split("\n\n").count(), 3);
        assert_eq!(
            next_reason(NOT_EXPOSED, EVALUATION_FAILED),
            EVALUATION_FAILED
        );
        assert_eq!(next_reason(EVALUATION_FAILED, EXPOSED), EXPOSED);
        assert_eq!(next_reason(EXPOSED, EVALUATION_FAILED), EXPOSED);
        assert_eq!(next_reason("A", "A"), "A");
        assert!(
            valid_reason("A_b:c,1")
                && !valid_reason("1A")
                && !valid_reason("A,")
                && !valid_reason("")
        );
    }

    #[test]
    fn sorted_newest_first_and_a_shared_risk_is_read_from_the_newest_update() {
        let mut old = risk("Shared", &["PromQL"]);
        old.message = "old".into();
        let (out, _) = evaluate(
            vec![
                (release("1.5.2"), vec![old]),
                (release("1.10.0"), vec![risk("Shared", &["Always"])]),
                (release("1.6.0"), vec![risk("Other", &["Always"])]),
            ],
            NOW,
        );
        let versions: Vec<&str> = out.iter().map(|c| c.release.version.as_str()).collect();
        assert_eq!(versions, ["1.10.0", "1.6.0", "1.5.2"]);
        // 1.5.2's copy of Shared says PromQL, but 1.10.0's (Always) decides.
        assert_eq!(out[2].conditions[0].status, "False");
    }
}
