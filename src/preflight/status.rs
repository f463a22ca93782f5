//! A preflight in ClusterVersion status, as OpenShift's API has it (feature gates
//! `ClusterUpdatePreflight` and `ClusterUpdateAcceptRisks`, docs/preflight.md):
//!
//! - `status.conditionalUpdateRisks`: every check of the catalogue, with its `Applies`
//!   condition (`True`, `False`, or `Unknown` when the check could not tell). OpenShift's
//!   schema requires each risk to carry matching rules; cvo's carry the one rule `Always`,
//!   and whether the risk applies is its `Applies` condition, which cvo evaluates itself.
//!   Risks others wrote (an update service's) stay.
//! - `status.conditionalUpdates`: the target release's entry gets every check's name in
//!   `riskNames` and `risks`, and a `Recommended` condition (`True` `NotExposedToRisks` or
//!   `AllExposedRisksAccepted`, `False` with the risk's name or `MultipleReasons`, `Unknown`
//!   `EvaluationFailed`). An entry an update service wrote for the same image keeps its own
//!   risks beside cvo's, and is not recommended when either says so.
//! - the condition [`CONDITION`] (`UpdatePreflight`) in `status.conditions`: `True` when the
//!   update would proceed (no risk applies, or every one is accepted), `False` when risks stop
//!   it, `Unknown` when the preflight could not run; its message names the target and the
//!   risks. A fleet reads it through OCM's status feedback (docs/fleet.md).
//!
//! A condition's `lastTransitionTime` stays while its status does, so that the same preflight
//! again writes nothing.

use serde_json::{Value, json};

use super::{Applies, Assessment, CATALOGUE, Risk};
use crate::apply::RetryPolicy;
use crate::cluster::Cluster;
use crate::status::clusterversion::{self, ClusterVersionError, WriteOutcome};
use crate::status::conditions::truncate;
use crate::status::{Condition, ConditionStatus};

/// The ClusterVersion condition that says how the last preflight ended.
pub const CONDITION: &str = "UpdatePreflight";
/// Its reasons.
pub const NO_RISKS: &str = "NoRisksApply";
pub const ALL_ACCEPTED: &str = "AllRisksAccepted";
pub const NOT_ACCEPTED: &str = "RisksNotAccepted";
pub const FAILED: &str = "PreflightFailed";

/// OpenShift's schema caps a condition message at 32 KiB.
const MAX_MESSAGE: usize = 32768;

/// The `UpdatePreflight` condition an assessment gives.
pub fn condition(a: &Assessment) -> Condition {
    let target = target_text(a);
    let stopping: Vec<&str> = a.unaccepted().iter().map(|r| r.name).collect();
    let accepted: Vec<&str> = a
        .applying()
        .filter(|r| r.accepted)
        .map(|r| r.name)
        .collect();
    let (status, reason, message) = match (stopping.is_empty(), accepted.is_empty()) {
        (true, true) => (
            ConditionStatus::True,
            NO_RISKS,
            format!("Preflight of {target}: no risk applies."),
        ),
        (true, false) => (
            ConditionStatus::True,
            ALL_ACCEPTED,
            format!(
                "Preflight of {target}: every risk that applies is accepted: {}.",
                accepted.join(",")
            ),
        ),
        (false, _) => (
            ConditionStatus::False,
            NOT_ACCEPTED,
            format!(
                "Preflight of {target}: risks apply that are not accepted: {}{}.",
                stopping.join(","),
                if accepted.is_empty() {
                    String::new()
                } else {
                    format!("; accepted: {}", accepted.join(","))
                }
            ),
        ),
    };
    Condition::new(CONDITION, status, reason, truncate(&message, MAX_MESSAGE))
}

/// The `UpdatePreflight` condition of a preflight that could not run (`why`): `Unknown`.
pub fn failed(target: &str, why: &str) -> Condition {
    Condition::new(
        CONDITION,
        ConditionStatus::Unknown,
        FAILED,
        truncate(
            &format!("Preflight of {target} could not run: {why}"),
            MAX_MESSAGE,
        ),
    )
}

fn target_text(a: &Assessment) -> String {
    if a.image.is_empty() {
        a.version.clone()
    } else {
        format!("{} ({})", a.version, a.image)
    }
}

/// Writes `a` into ClusterVersion status (risks, the target's conditional update, the
/// `UpdatePreflight` condition); nothing when it says what the status already says.
///
/// # Errors
///
/// What [`clusterversion::write_status_with`] returns: ClusterVersion unreadable, or the
/// write refused (a ClusterVersion CRD without these fields prunes them; OpenShift's
/// `DevPreviewNoUpgrade` one has them).
pub async fn write(
    cluster: &Cluster,
    retry: &RetryPolicy,
    a: &Assessment,
) -> Result<WriteOutcome, ClusterVersionError> {
    let now = jiff::Timestamp::now();
    clusterversion::write_status_with(cluster, retry, |old| with_assessment(old, a, now)).await
}

/// `old` status with `a` in it (pure).
pub fn with_assessment(old: &Value, a: &Assessment, now: jiff::Timestamp) -> Value {
    let mut status = if old.is_object() {
        old.clone()
    } else {
        json!({})
    };
    let time = now.to_string();
    let before_risks = list(old, "conditionalUpdateRisks");
    let mut risks: Vec<Value> = before_risks
        .iter()
        .filter(|r| !ours(r.get("name")))
        .cloned()
        .collect();
    let our_risks: Vec<Value> = a
        .risks
        .iter()
        .map(|r| risk_json(r, &before_risks, &time))
        .collect();
    risks.extend(our_risks.iter().cloned());
    status["conditionalUpdateRisks"] = Value::Array(risks);
    let entry = json!({
        "release": {"version": a.version, "image": a.image},
        "riskNames": a.risks.iter().map(|r| r.name).collect::<Vec<_>>(),
        "risks": our_risks,
        "conditions": [recommended(a)],
    });
    let mut updates = list(old, "conditionalUpdates");
    merge_entry(&mut updates, entry, &time);
    status["conditionalUpdates"] = Value::Array(updates);
    clusterversion::with_conditions(&status, &[condition(a)], now)
}

/// After an update service replaced `conditionalUpdates` (`new`, from `old`): the preflight's
/// part of the target's entry is put back (pure).
pub fn carry_over(old: &Value, new: &mut Value) {
    // The preflight's entries name its risks in `riskNames`, and in `risks` (which a
    // ClusterVersion CRD without `riskNames`, OpenShift's Default one, keeps).
    let kept: Vec<Value> = list(old, "conditionalUpdates")
        .into_iter()
        .filter(|e| {
            names(e, "riskNames").iter().any(|n| ours(Some(&json!(n))))
                || list(e, "risks").iter().any(|r| ours(r.get("name")))
        })
        .collect();
    if kept.is_empty() {
        return;
    }
    let mut updates = list(new, "conditionalUpdates");
    for entry in kept {
        let time = entry
            .pointer("/conditions/0/lastTransitionTime")
            .cloned()
            .unwrap_or_else(|| json!(""));
        let ours_only = only_ours(&entry);
        merge_entry(&mut updates, ours_only, time.as_str().unwrap_or_default());
    }
    new["conditionalUpdates"] = Value::Array(updates);
}

/// `entry` with only the preflight's risks (its Recommended as it was).
fn only_ours(entry: &Value) -> Value {
    let mut e = entry.clone();
    let risks: Vec<Value> = list(entry, "risks")
        .into_iter()
        .filter(|r| ours(r.get("name")))
        .collect();
    let risk_names: Vec<String> = names(entry, "riskNames")
        .into_iter()
        .filter(|n| ours(Some(&json!(n))))
        .collect();
    // None (pruned by the CRD): none written, as OpenShift's schema wants at least one.
    match e.as_object_mut() {
        Some(o) if risk_names.is_empty() => {
            o.remove("riskNames");
        }
        _ => e["riskNames"] = json!(risk_names),
    }
    e["risks"] = Value::Array(risks);
    e
}

/// Puts the preflight's entry `ours_entry` into `updates`: into the entry for the same
/// release (by image, else by version) beside the risks others listed there, else as a new
/// entry. `Recommended` is the preflight's unless the other entry's says not recommended.
fn merge_entry(updates: &mut Vec<Value>, mut ours_entry: Value, time: &str) {
    if let Some(c) = ours_entry.pointer_mut("/conditions/0") {
        c["lastTransitionTime"] = json!(time);
    }
    let field = |f: &str| {
        ours_entry
            .pointer(f)
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    let (image, version) = (field("/release/image"), field("/release/version"));
    let same = |e: &Value| match image.as_deref().filter(|i| !i.is_empty()) {
        Some(i) => e.pointer("/release/image").and_then(Value::as_str) == Some(i),
        None => e.pointer("/release/version").and_then(Value::as_str) == version.as_deref(),
    };
    let Some(existing) = updates.iter_mut().find(|e| same(e)) else {
        updates.push(ours_entry);
        return;
    };
    let before = existing.clone();
    let mut risks: Vec<Value> = list(existing, "risks")
        .into_iter()
        .filter(|r| !ours(r.get("name")))
        .collect();
    risks.extend(list(&ours_entry, "risks"));
    let mut risk_names: Vec<String> = names(existing, "riskNames")
        .into_iter()
        .filter(|n| !ours(Some(&json!(n))))
        .collect();
    risk_names.extend(names(&ours_entry, "riskNames"));
    let others_say_no = list(&before, "risks").iter().any(|r| !ours(r.get("name")))
        && before
            .pointer("/conditions/0/status")
            .and_then(Value::as_str)
            .is_some_and(|s| s != "True");
    let ours_say_no = ours_entry
        .pointer("/conditions/0/status")
        .and_then(Value::as_str)
        != Some("True");
    existing["risks"] = Value::Array(risks);
    if risk_names.is_empty() {
        if let Some(o) = existing.as_object_mut() {
            o.remove("riskNames");
        }
    } else {
        existing["riskNames"] = json!(risk_names);
    }
    if !others_say_no || ours_say_no {
        existing["conditions"] = ours_entry["conditions"].clone();
        clusterversion::keep_transition_times(existing, std::slice::from_ref(&before));
    }
}

/// The `Recommended` condition of the target (`metav1.Condition`, dated by the caller).
fn recommended(a: &Assessment) -> Value {
    let applying: Vec<&Risk> = a.applying().collect();
    let stopping = a.unaccepted();
    let (status, reason, message) = if applying.is_empty() {
        (
            "True",
            "NotExposedToRisks".to_owned(),
            "The update is recommended, because none of the conditional update risks apply to this cluster.".to_owned(),
        )
    } else if stopping.is_empty() {
        (
            "True",
            "AllExposedRisksAccepted".to_owned(),
            format!(
                "The update is recommended, because every risk that applies is accepted: {}.",
                applying
                    .iter()
                    .map(|r| r.name)
                    .collect::<Vec<_>>()
                    .join(",")
            ),
        )
    } else {
        let unknown_only = stopping.iter().all(|r| r.applies == Applies::CannotTell);
        let reason = match stopping.as_slice() {
            _ if unknown_only => "EvaluationFailed".to_owned(),
            [one] => one.name.to_owned(),
            _ => "MultipleReasons".to_owned(),
        };
        let status = if unknown_only { "Unknown" } else { "False" };
        let message = stopping
            .iter()
            .map(|r| format!("{}: {} {}", r.name, r.message, r.url))
            .collect::<Vec<_>>()
            .join("\n\n");
        (status, reason, message)
    };
    json!({
        "type": "Recommended",
        "status": status,
        "reason": reason,
        "message": truncate(&message, MAX_MESSAGE),
        "lastTransitionTime": "",
    })
}

/// One entry of `conditionalUpdateRisks`; its `Applies` keeps the time of `before`'s entry
/// of the same name while the status is the same.
fn risk_json(r: &Risk, before: &[Value], time: &str) -> Value {
    let c = r.condition();
    let since = before
        .iter()
        .find(|b| b.get("name").and_then(Value::as_str) == Some(r.name))
        .and_then(|b| b.pointer("/conditions/0"))
        .filter(|b| b.get("status").and_then(Value::as_str) == Some(c.status.as_str()))
        .and_then(|b| b.get("lastTransitionTime").cloned())
        .unwrap_or_else(|| json!(time));
    json!({
        "name": r.name,
        "message": r.message,
        "url": r.url,
        "matchingRules": [{"type": "Always"}],
        "conditions": [{
            "type": c.type_,
            "status": c.status.as_str(),
            "reason": c.reason,
            "message": truncate(&c.message, MAX_MESSAGE),
            "lastTransitionTime": since,
        }],
    })
}

/// Whether `name` is one of the catalogue's risks.
fn ours(name: Option<&Value>) -> bool {
    name.and_then(Value::as_str)
        .is_some_and(|n| CATALOGUE.iter().any(|c| c.name == n))
}

fn list(v: &Value, field: &str) -> Vec<Value> {
    v.get(field)
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

fn names(v: &Value, field: &str) -> Vec<String> {
    list(v, field)
        .iter()
        .filter_map(Value::as_str)
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::preflight::{Applies, Risk};

    fn assessment(applying: &[&str], accepted: &[&str]) -> Assessment {
        let mut a = Assessment {
            version: "1.6.0".into(),
            image: "r.example/rel@sha256:16".into(),
            risks: CATALOGUE
                .iter()
                .map(|c| Risk {
                    name: c.name,
                    applies: if applying.contains(&c.name) {
                        Applies::Yes
                    } else {
                        Applies::No
                    },
                    message: format!("{} message", c.name),
                    evidence: c.evidence,
                    url: c.url(),
                    accepted: false,
                })
                .collect(),
        };
        a.accept(&accepted.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>());
        a
    }

    fn t(s: i64) -> jiff::Timestamp {
        jiff::Timestamp::from_second(s).unwrap()
    }

    #[test]
    fn every_check_is_a_risk_the_target_lists_them_and_the_condition_says_what_stops_it() {
        let old = json!({"conditions": [{"type": "Available", "status": "True"}],
            "conditionalUpdateRisks": [{"name": "FromService", "message": "m", "url": "https://x", "matchingRules": [{"type": "Always"}],
                "conditions": [{"type": "Applies", "status": "True", "reason": "R", "message": "", "lastTransitionTime": "t"}]}]});
        let a = assessment(&["MinorUpdateWhileDeletionInProgress"], &[]);
        let s = with_assessment(&old, &a, t(1));
        let risks = s["conditionalUpdateRisks"].as_array().unwrap();
        assert_eq!(risks.len(), 1 + CATALOGUE.len());
        assert_eq!(risks[0]["name"], "FromService", "others' risks stay");
        assert_eq!(risks[1]["name"], "MinorUpdateWhileDeletionInProgress");
        assert_eq!(risks[1]["conditions"][0]["status"], "True");
        assert_eq!(risks[2]["conditions"][0]["status"], "False");
        let entry = &s["conditionalUpdates"][0];
        assert_eq!(entry["release"]["image"], "r.example/rel@sha256:16");
        assert_eq!(
            entry["riskNames"].as_array().unwrap().len(),
            CATALOGUE.len()
        );
        assert_eq!(
            (
                &entry["conditions"][0]["status"],
                &entry["conditions"][0]["reason"]
            ),
            (
                &json!("False"),
                &json!("MinorUpdateWhileDeletionInProgress")
            )
        );
        let c = s["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == CONDITION)
            .unwrap();
        assert_eq!(
            (&c["status"], &c["reason"]),
            (&json!("False"), &json!(NOT_ACCEPTED))
        );
        assert!(
            c["message"]
                .as_str()
                .unwrap()
                .ends_with("not accepted: MinorUpdateWhileDeletionInProgress.")
        );
        // The same preflight later writes nothing new.
        assert_eq!(with_assessment(&s, &a, t(2)), s);
        // Accepted: recommended, and the condition turns True.
        let accepted = assessment(
            &["MinorUpdateWhileDeletionInProgress"],
            &["MinorUpdateWhileDeletionInProgress"],
        );
        let s2 = with_assessment(&s, &accepted, t(3));
        assert_eq!(s2["conditionalUpdates"].as_array().unwrap().len(), 1);
        assert_eq!(
            s2["conditionalUpdates"][0]["conditions"][0]["reason"],
            "AllExposedRisksAccepted"
        );
        let c = s2["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == CONDITION)
            .unwrap();
        assert_eq!(
            (&c["status"], &c["reason"]),
            (&json!("True"), &json!(ALL_ACCEPTED))
        );
    }

    #[test]
    fn an_update_service_entry_for_the_same_image_keeps_its_risks_and_gets_the_preflights_back() {
        let a = assessment(&[], &[]);
        let s = with_assessment(&json!({}), &a, t(1));
        // The update service replaces the list with its own entry for the same image.
        let service_entry = json!({"release": {"version": "1.6.0", "image": "r.example/rel@sha256:16"},
            "risks": [{"name": "Slow", "message": "m", "url": "https://x", "matchingRules": [{"type": "PromQL", "promql": {"promql": "1"}}]}],
            "conditions": [{"type": "Recommended", "status": "Unknown", "reason": "EvaluationFailed", "message": "m", "lastTransitionTime": "t"}]});
        let mut replaced = s.clone();
        replaced["conditionalUpdates"] = json!([service_entry]);
        carry_over(&s, &mut replaced);
        let entry = &replaced["conditionalUpdates"][0];
        assert_eq!(replaced["conditionalUpdates"].as_array().unwrap().len(), 1);
        assert_eq!(
            entry["risks"].as_array().unwrap().len(),
            1 + CATALOGUE.len()
        );
        assert_eq!(entry["risks"][0]["name"], "Slow");
        // The service's doubt stands: cvo's checks passing do not make it recommended.
        assert_eq!(entry["conditions"][0]["status"], "Unknown");
        // Gone from the service's answer: the preflight's entry stays.
        let mut cleared = s.clone();
        cleared["conditionalUpdates"] = json!([]);
        carry_over(&s, &mut cleared);
        assert_eq!(cleared["conditionalUpdates"], s["conditionalUpdates"]);
    }

    #[test]
    fn the_preflights_entry_is_carried_over_where_the_crd_prunes_risk_names() {
        // OpenShift's Default ClusterVersion CRD has no riskNames, nor risks' conditions.
        let mut s = with_assessment(&json!({}), &assessment(&[], &[]), t(1));
        let entry = &mut s["conditionalUpdates"][0];
        entry.as_object_mut().unwrap().remove("riskNames");
        for r in entry["risks"].as_array_mut().unwrap() {
            r.as_object_mut().unwrap().remove("conditions");
        }
        let mut cleared = s.clone();
        cleared["conditionalUpdates"] = json!([]);
        carry_over(&s, &mut cleared);
        assert_eq!(cleared["conditionalUpdates"], s["conditionalUpdates"]);
        assert!(cleared["conditionalUpdates"][0].get("riskNames").is_none());
    }

    #[test]
    fn a_preflight_that_cannot_run_is_unknown_and_long_messages_are_cut() {
        let c = failed("1.6.0 (img)", &"x".repeat(100_000));
        assert_eq!(
            (c.status, c.reason.as_str()),
            (ConditionStatus::Unknown, FAILED)
        );
        assert!(c.message.len() <= MAX_MESSAGE);
    }
}
