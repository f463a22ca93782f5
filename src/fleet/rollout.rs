//! Before a rollout writes anything: every selected cluster is checked against what its own
//! operator would refuse, from the status it reports (the observe set's feedback).
//!
//! A minor or major update (or one whose current version the report does not tell: fail
//! closed) is refused where `Upgradeable` is not `True` — False (a deletion the release asked
//! for is unfinished, an unmanaged override, …), Unknown, or not reported — as the cluster's
//! operator would refuse it; a patch update goes ahead as it would. What the operator refuses
//! whatever Upgradeable says is refused too: a skipped minor version, a new major version, a
//! rollback further than the previous version ([`crate::status::update::Versions`], from the
//! two reported history entries). A cluster that reports nothing cannot be judged and is
//! refused too. A refusal a preflight risk stands for (`MinorUpdateWhileDeletionInProgress` for
//! an unfinished deletion, `MultipleMinorVersionsUpdate` for a skipped minor version, …) is
//! taken back when `--accept-risks` names that risk, as the cluster's operator takes it back
//! for `spec.desiredUpdate.acceptRisks`. `--force` writes the rollout anyway and records
//! what it overrode on the rollout set.

use serde::Serialize;

use super::feedback;
use super::status::{ClusterState, FleetStatus};
use crate::preflight;
use crate::status::update::{UpdateType, update_type};

/// A cluster the rollout would be refused on, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Refusal {
    pub cluster: String,
    pub reason: String,
}

/// The clusters of `status` that a rollout to `target` is refused on, once the risks
/// `accepted` (`--accept-risks`) took back the refusals they stand for.
pub fn refusals(
    status: &FleetStatus,
    target: &semver::Version,
    accepted: &[String],
) -> Vec<Refusal> {
    status
        .clusters
        .iter()
        .filter(|c| c.wave.is_some())
        .filter_map(|c| {
            let (reason, risk) = refusal(c, target)?;
            let reason = match risk {
                Some(risk) if accepted.iter().any(|a| a == risk) => return None,
                Some(risk) => {
                    format!("{reason} (preflight risk {risk}: `--accept-risks {risk}` accepts it)")
                }
                None => reason,
            };
            Some(Refusal {
                cluster: c.name.clone(),
                reason,
            })
        })
        .collect()
}

/// The reason a cluster is refused for, and the preflight risk that stands for it (the one
/// whose acceptance makes the cluster's operator go ahead), if any.
fn refusal(
    cluster: &ClusterState,
    target: &semver::Version,
) -> Option<(String, Option<&'static str>)> {
    let Some(report) = &cluster.report else {
        return Some((
            "its ClusterVersion has not been reported to the hub (run `cvo fleet observe` and wait for the feedback)"
                .to_owned(),
            None,
        ));
    };
    let current = report
        .current_version()
        .and_then(|v| crate::version::parse(v).ok());
    let kind = match (&current, report.history.is_empty()) {
        // Completed entries exist but not among the two reported: cannot tell, fail closed.
        (None, false) => UpdateType::MinorOrMajor,
        _ => update_type(current.as_ref(), Some(target)),
    };
    let versions: Vec<semver::Version> = report
        .history
        .iter()
        .filter_map(|e| crate::version::parse(e.version.as_deref()?).ok())
        .collect();
    let newest = versions.first();
    let hops = crate::status::update::Versions {
        current: newest,
        previous: versions.iter().find(|v| Some(*v) != newest),
        target: Some(target),
    };
    if let Some(refused) = hops.check() {
        let risk = preflight::check_named(refused.reason).map(|c| c.name);
        return Some((refused.to_string(), risk));
    }
    if kind != UpdateType::MinorOrMajor {
        return None;
    }
    let from = current.map_or_else(|| "an unknown version".to_owned(), |v| v.to_string());
    match report.condition("Upgradeable") {
        Some(c) if c.is("True") => None,
        Some(c) => {
            let deletion = [
                crate::status::conditions::REASON_IN_PROGRESS,
                crate::status::conditions::REASON_STUCK,
                crate::status::conditions::REASON_UNKNOWN,
            ]
            .contains(&c.reason.as_deref().unwrap_or_default());
            let risk = if deletion {
                preflight::MINOR_UPDATE_WHILE_DELETION_IN_PROGRESS.name
            } else {
                preflight::MINOR_UPDATE_WHILE_NOT_UPGRADEABLE.name
            };
            Some((
                format!(
                    "{from} → {target} is a minor/major update and {}",
                    feedback::describe("Upgradeable", c)
                ),
                Some(risk),
            ))
        }
        // The cluster's operator could not tell either: no risk stands for it.
        None => Some((
            format!(
                "{from} → {target} is a minor/major update and its ClusterVersion reports no Upgradeable condition"
            ),
            None,
        )),
    }
}

/// `refusals` with one entry per cluster, in the order each cluster first appears: the
/// reasons of a cluster refused twice (its report and its preflight) joined.
pub fn merge(refusals: Vec<Refusal>) -> Vec<Refusal> {
    let mut out: Vec<Refusal> = Vec::new();
    for r in refusals {
        match out.iter_mut().find(|o| o.cluster == r.cluster) {
            Some(o) => {
                o.reason.push_str("; ");
                o.reason.push_str(&r.reason);
            }
            None => out.push(r),
        }
    }
    out
}

/// The `--force` record of `refusals`: one line per cluster.
pub fn forced_record(refusals: &[Refusal]) -> String {
    refusals
        .iter()
        .map(|r| format!("{}: {}", r.cluster, r.reason))
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::feedback::{Condition, Entry, Report};
    use crate::fleet::status::{ClusterRollout, Reachability, Wave};

    fn cluster(name: &str, at: Option<&str>, upgradeable: Option<&str>) -> ClusterState {
        let report = at.map(|v| {
            let mut r = Report {
                history: vec![Entry {
                    version: Some(v.to_owned()),
                    state: Some("Completed".to_owned()),
                    ..Entry::default()
                }],
                ..Report::default()
            };
            if let Some(status) = upgradeable {
                r.conditions.insert(
                    "Upgradeable".to_owned(),
                    Condition {
                        status: Some(status.to_owned()),
                        reason: Some("ResourceDeletionStuck".to_owned()),
                        message: Some("ConfigMap a/b is still being deleted".to_owned()),
                    },
                );
            }
            r
        });
        ClusterState {
            name: name.to_owned(),
            wave: Some(Wave {
                index: 0,
                name: String::new(),
            }),
            reachable: Reachability::Reachable,
            report,
            rollout: ClusterRollout::None,
        }
    }

    fn fleet(clusters: Vec<ClusterState>) -> FleetStatus {
        FleetStatus {
            placement: "fleet/waves".into(),
            target: None,
            waves: Vec::new(),
            clusters,
            held_by: Vec::new(),
            problems: Vec::new(),
        }
    }

    #[test]
    fn a_stuck_deletion_refuses_a_minor_update_but_not_a_patch() {
        let st = fleet(vec![
            cluster("stuck", Some("1.0.0"), Some("False")),
            cluster("fine", Some("1.0.0"), Some("True")),
        ]);
        let minor = refusals(&st, &semver::Version::new(1, 1, 0), &[]);
        assert_eq!(minor.len(), 1);
        assert_eq!(minor[0].cluster, "stuck");
        assert!(
            minor[0].reason.contains("1.0.0 → 1.1.0 is a minor/major update and Upgradeable=False ResourceDeletionStuck: ConfigMap a/b"),
            "{}",
            minor[0].reason
        );
        assert!(refusals(&st, &semver::Version::new(1, 0, 1), &[]).is_empty());
    }

    #[test]
    fn when_in_doubt_a_minor_update_is_refused() {
        let st = fleet(vec![
            cluster("silent", None, None),
            cluster("no-condition", Some("1.0.0"), None),
            cluster("unknown", Some("1.0.0"), Some("Unknown")),
        ]);
        let refused: Vec<String> = refusals(&st, &semver::Version::new(1, 1, 0), &[])
            .into_iter()
            .map(|r| r.cluster)
            .collect();
        assert_eq!(refused, ["silent", "no-condition", "unknown"]);
        // A patch still needs a report to be judged.
        let patch = refusals(&st, &semver::Version::new(1, 0, 1), &[]);
        assert_eq!(patch.len(), 1);
        assert_eq!(patch[0].cluster, "silent");
        assert_eq!(forced_record(&patch).lines().count(), 1);
    }

    #[test]
    fn what_the_operator_refuses_whatever_upgradeable_says_is_refused() {
        let st = fleet(vec![cluster("c2", Some("1.4.0"), Some("True"))]);
        let skip = refusals(&st, &semver::Version::new(1, 6, 0), &[]);
        assert_eq!(skip.len(), 1, "{skip:?}");
        assert!(
            skip[0]
                .reason
                .starts_with("MultipleMinorVersionsUpdate: 1.6.0 skips"),
            "{}",
            skip[0].reason
        );
        let major = refusals(&st, &semver::Version::new(2, 0, 0), &[]);
        assert!(
            major[0].reason.starts_with("MajorVersionUpdate"),
            "{major:?}"
        );
        assert!(refusals(&st, &semver::Version::new(1, 5, 0), &[]).is_empty());
    }

    #[test]
    fn an_accepted_risk_takes_back_the_refusal_it_stands_for() {
        let mut stuck = cluster("stuck", Some("1.0.0"), Some("False"));
        let mut other = cluster("overridden", Some("1.0.0"), Some("False"));
        if let Some(r) = other.report.as_mut() {
            r.conditions.get_mut("Upgradeable").expect("set").reason =
                Some("ClusterVersionOverridesSet".to_owned());
        }
        if let Some(r) = stuck.report.as_mut() {
            r.conditions.get_mut("Upgradeable").expect("set").reason =
                Some(crate::status::conditions::REASON_STUCK.to_owned());
        }
        let st = fleet(vec![stuck, other, cluster("silent", None, None)]);
        let target = semver::Version::new(1, 1, 0);
        let none = refusals(&st, &target, &[]);
        assert_eq!(none.len(), 3, "{none:?}");
        assert!(
            none[0]
                .reason
                .ends_with("(preflight risk MinorUpdateWhileDeletionInProgress: `--accept-risks MinorUpdateWhileDeletionInProgress` accepts it)"),
            "{}",
            none[0].reason
        );
        let accepted = refusals(
            &st,
            &target,
            &["MinorUpdateWhileDeletionInProgress".to_owned()],
        );
        let names: Vec<&str> = accepted.iter().map(|r| r.cluster.as_str()).collect();
        // Another reason is another risk; a cluster that reports nothing is never accepted.
        assert_eq!(names, ["overridden", "silent"]);
        assert!(
            accepted[0]
                .reason
                .contains("MinorUpdateWhileNotUpgradeable")
        );
        let skip = fleet(vec![cluster("c2", Some("1.4.0"), Some("True"))]);
        let six = semver::Version::new(1, 6, 0);
        assert_eq!(refusals(&skip, &six, &[]).len(), 1);
        assert!(refusals(&skip, &six, &["MultipleMinorVersionsUpdate".to_owned()]).is_empty());
    }
}
