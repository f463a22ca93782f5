//! The conditions a pass reports, worded like OpenShift's CVO.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::apply::{ManifestResult, PendingDeletion, Summary};
use crate::release::Release;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ConditionStatus {
    True,
    False,
    Unknown,
}

/// One condition, as in the JSON report and `ClusterVersion.status.conditions`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Condition {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: ConditionStatus,
    #[serde(default)]
    pub reason: String,
    #[serde(default)]
    pub message: String,
}

impl Condition {
    pub fn new(
        type_: &str,
        status: ConditionStatus,
        reason: &str,
        message: impl Into<String>,
    ) -> Self {
        Condition {
            type_: type_.to_owned(),
            status,
            reason: reason.to_owned(),
            message: message.into(),
        }
    }

    pub fn is_false(&self) -> bool {
        self.status == ConditionStatus::False
    }
}

pub const REASON_IN_PROGRESS: &str = "ResourceDeletionInProgress";
pub const REASON_STUCK: &str = "ResourceDeletionStuck";
pub const REASON_UNKNOWN: &str = "DeletionStatusUnknown";

/// A delete manifest whose object the engine could not read back (discovery or GET failed):
/// it cannot be counted as gone.
#[derive(Clone, Debug, PartialEq)]
pub struct UnknownDeletion {
    pub id: crate::release::ObjectId,
    pub error: String,
}

/// `Upgradeable` fails closed: False while deletions the release asked for are unfinished
/// (the reason turns to `ResourceDeletionStuck` once one has waited longer than `stuck_after`
/// since its deletionTimestamp, and the message then names every stuck object with its
/// finalizers); `Unknown` (reason [`REASON_UNKNOWN`]) when none is known to be pending but
/// some could not be read; True only when every delete manifest's object is known gone.
pub fn upgradeable(
    pending: &[&PendingDeletion],
    unknown: &[UnknownDeletion],
    stuck_after: Duration,
    now: jiff::Timestamp,
) -> Condition {
    let mut condition = pending_condition(pending, stuck_after, now);
    if !unknown.is_empty() {
        let names: Vec<String> = unknown
            .iter()
            .map(|u| format!("{} ({})", u.id, u.error))
            .collect();
        let text = format!(
            "cannot tell whether these deletions finished: {}",
            names.join("; ")
        );
        if condition.status == ConditionStatus::True {
            condition = Condition::new(
                "Upgradeable",
                ConditionStatus::Unknown,
                REASON_UNKNOWN,
                text,
            );
        } else {
            condition.message = format!("{}; {text}", condition.message);
        }
    }
    condition
}

fn pending_condition(
    pending: &[&PendingDeletion],
    stuck_after: Duration,
    now: jiff::Timestamp,
) -> Condition {
    if pending.is_empty() {
        return Condition::new("Upgradeable", ConditionStatus::True, "AsExpected", "");
    }
    let stuck_after =
        jiff::SignedDuration::try_from(stuck_after).unwrap_or(jiff::SignedDuration::MAX);
    let stuck: Vec<&&PendingDeletion> = pending
        .iter()
        .filter(|p| {
            p.since
                .is_some_and(|since| now.duration_since(since) > stuck_after)
        })
        .collect();
    if stuck.is_empty() {
        let names: Vec<String> = pending
            .iter()
            .map(|p| match p.since {
                Some(_) => object_name(p),
                None => format!("{} (not deleted yet)", object_name(p)),
            })
            .collect();
        return Condition::new(
            "Upgradeable",
            ConditionStatus::False,
            REASON_IN_PROGRESS,
            format!("Deletion in progress: {}", names.join(", ")),
        );
    }
    let names: Vec<String> = stuck
        .iter()
        .map(|p| {
            format!(
                "{} (finalizers: {})",
                object_name(p),
                p.finalizers.join(", ")
            )
        })
        .collect();
    Condition::new(
        "Upgradeable",
        ConditionStatus::False,
        REASON_STUCK,
        format!(
            "Deletion stuck for more than {}: {}",
            humanize(stuck_after.unsigned_abs()),
            names.join("; ")
        ),
    )
}

/// `kind ns/name` or `kind name`.
pub fn object_name(p: &PendingDeletion) -> String {
    match &p.id.namespace {
        Some(ns) => format!("{} {}/{}", p.id.kind, ns, p.id.name),
        None => format!("{} {}", p.id.kind, p.id.name),
    }
}

fn humanize(d: Duration) -> String {
    let secs = d.as_secs();
    if secs >= 60 && secs.is_multiple_of(60) {
        format!("{}m", secs / 60)
    } else {
        format!("{secs}s")
    }
}

/// "Working towards 1.2.3: 40 of 120 done (33% complete)".
pub fn progress_message(version: &str, done: usize, total: usize) -> String {
    let percent = (done * 100).checked_div(total).unwrap_or(100);
    format!("Working towards {version}: {done} of {total} done ({percent}% complete)")
}

/// How long ClusterOperators may stay degraded or updating before `Failing` turns True (the
/// CVO's fail-after-interval): `elapsed` since the update started, against `period`.
#[derive(Clone, Copy, Debug)]
pub struct Grace {
    pub elapsed: Duration,
    pub period: Duration,
}

impl Grace {
    /// No grace: every failure is Failing at once.
    pub const NONE: Grace = Grace {
        elapsed: Duration::ZERO,
        period: Duration::ZERO,
    };

    /// True when `r` failed only by waiting for an operator that is still degraded or
    /// updating, and the grace period has not passed: progress, not failure.
    pub fn excuses(&self, r: &ManifestResult) -> bool {
        self.elapsed < self.period
            && r.action == crate::apply::Action::Failed
            && r.health
                .as_ref()
                .is_some_and(|f| f.reason.fails_after_grace())
    }
}

/// Available / Progressing / Failing / Upgradeable after a pass.
pub fn after_pass(
    release: &Release,
    results: &[ManifestResult],
    upgradeable: Condition,
    ever_completed: bool,
    grace: Grace,
) -> Vec<Condition> {
    let summary = Summary::of(results);
    let version = version_text(release);
    let complete = summary.failed == 0 && summary.skipped == 0;
    let available = if complete || ever_completed {
        Condition::new(
            "Available",
            ConditionStatus::True,
            "",
            format!("Done applying {version}"),
        )
    } else {
        Condition::new("Available", ConditionStatus::False, "", "")
    };
    let progressing = if complete {
        Condition::new(
            "Progressing",
            ConditionStatus::False,
            "",
            format!("Cluster version is {version}"),
        )
    } else {
        let waiting: Vec<crate::health::Finding> = results
            .iter()
            .filter(|r| grace.excuses(r))
            .filter_map(|r| r.health.clone())
            .collect();
        Condition::new(
            "Progressing",
            ConditionStatus::True,
            "",
            waiting_message(&version, summary.done(), summary.total, &waiting),
        )
    };
    vec![
        available,
        progressing,
        failing(release, results, grace),
        upgradeable,
    ]
}

/// The progress message, and what the pass waits on when it waits:
/// "Working towards 1.5.0: 412 of 922 done (44% complete), waiting on cluster operators dns,
/// network".
pub fn waiting_message(
    version: &str,
    done: usize,
    total: usize,
    waiting: &[crate::health::Finding],
) -> String {
    let progress = progress_message(version, done, total);
    match crate::health::waiting_summary(waiting) {
        summary if summary.is_empty() => progress,
        summary => format!("{progress}, waiting on {summary}"),
    }
}

/// `Failing`: one failure names it, with its health reason when it has one (the CVO's
/// reasons); ClusterOperators failing for the same reason are condensed into one line with the
/// CVO's plural reason ("Cluster operators a, b are degraded"); several lines → reason
/// `MultipleErrors`. Failures the grace period still excuses ([`Grace::excuses`]) are left
/// out.
pub fn failing(release: &Release, results: &[ManifestResult], grace: Grace) -> Condition {
    let failed: Vec<&ManifestResult> = results
        .iter()
        .filter(|r| r.action == crate::apply::Action::Failed && !grace.excuses(r))
        .collect();
    let line = |r: &ManifestResult| {
        let m = &release.manifests[r.index];
        format!(
            "{} ({}): {}",
            m.id,
            m.file_name(),
            r.error.as_deref().unwrap_or("failed")
        )
    };
    let mut lines: Vec<(&str, String)> = Vec::new();
    let mut operators: std::collections::BTreeMap<crate::health::Reason, Vec<&ManifestResult>> =
        Default::default();
    for r in &failed {
        match r.health.as_ref() {
            Some(f) if f.operator.is_some() && f.reason.plural().is_some() => {
                operators.entry(f.reason).or_default().push(r)
            }
            Some(f) => lines.push((f.reason.as_str(), line(r))),
            None => lines.push(("ManifestFailed", line(r))),
        }
    }
    for (reason, rs) in operators {
        match (rs.as_slice(), reason.plural()) {
            ([_, _, ..], Some((plural, tail))) => {
                let names: Vec<&str> = rs
                    .iter()
                    .filter_map(|r| r.health.as_ref()?.operator.as_deref())
                    .collect();
                lines.push((
                    plural,
                    format!("Cluster operators {} {tail}", names.join(", ")),
                ));
            }
            _ => lines.extend(rs.iter().map(|r| (reason.as_str(), line(r)))),
        }
    }
    match lines.as_slice() {
        [] => Condition::new("Failing", ConditionStatus::False, "", ""),
        [(reason, message)] => {
            Condition::new("Failing", ConditionStatus::True, reason, message.clone())
        }
        _ => Condition::new(
            "Failing",
            ConditionStatus::True,
            "MultipleErrors",
            format!(
                "{} manifests failed:\n* {}",
                failed.len(),
                lines
                    .iter()
                    .map(|(_, m)| m.as_str())
                    .collect::<Vec<_>>()
                    .join("\n* ")
            ),
        ),
    }
}

/// The condition `cvo operator` adds to ClusterVersion: whether the release was accepted.
pub const RELEASE_ACCEPTED: &str = "ReleaseAccepted";

/// `ReleaseAccepted` for release `version`: False with the precondition's reason when
/// `refused` stopped it (`applied` false), else True, naming what a forced update overrode.
pub fn release_accepted(
    version: &str,
    refused: &[crate::status::PreconditionFailure],
    applied: bool,
) -> Condition {
    let list = |f: &dyn Fn(&crate::status::PreconditionFailure) -> String| {
        refused.iter().map(f).collect::<Vec<_>>()
    };
    if !applied {
        let reason = match refused {
            [only] => only.reason,
            _ => "PreconditionChecks",
        };
        return Condition::new(
            RELEASE_ACCEPTED,
            ConditionStatus::False,
            reason,
            format!(
                "Preconditions failed for release {version}: {}",
                list(&|f| f.to_string()).join("; ")
            ),
        );
    }
    let message = if refused.is_empty() {
        format!("Payload loaded version={version}")
    } else {
        format!(
            "Payload loaded version={version}; forced past: {}",
            list(&|f| f.reason.to_owned()).join(", ")
        )
    };
    Condition::new(
        RELEASE_ACCEPTED,
        ConditionStatus::True,
        "PayloadLoaded",
        message,
    )
}

/// The release's version as text (`unknown` without release-metadata).
pub fn version_text(release: &Release) -> String {
    release
        .version()
        .map(|v| v.to_string())
        .unwrap_or_else(|| "unknown".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::release::ObjectId;

    fn pending(name: &str, age_secs: i64, now: jiff::Timestamp) -> PendingDeletion {
        PendingDeletion {
            id: ObjectId::new("example.com", "Widget", Some("ns"), name),
            since: Some(now - jiff::SignedDuration::from_secs(age_secs)),
            finalizers: vec!["example.com/hold".into()],
        }
    }

    #[test]
    fn progress_message_matches_cvo() {
        assert_eq!(
            progress_message("1.2.3", 40, 120),
            "Working towards 1.2.3: 40 of 120 done (33% complete)"
        );
        assert_eq!(
            progress_message("1.2.3", 0, 0),
            "Working towards 1.2.3: 0 of 0 done (100% complete)"
        );
    }

    #[test]
    fn upgradeable_turns_stuck_past_the_threshold() {
        let now = jiff::Timestamp::now();
        let ten = Duration::from_secs(600);
        assert_eq!(
            upgradeable(&[], &[], ten, now).status,
            ConditionStatus::True
        );
        let young = pending("young", 5, now);
        let c = upgradeable(&[&young], &[], ten, now);
        assert_eq!(
            (c.status, c.reason.as_str()),
            (ConditionStatus::False, REASON_IN_PROGRESS)
        );
        assert!(c.message.contains("Widget ns/young"));
        let old = pending("old", 601, now);
        let c = upgradeable(&[&young, &old], &[], ten, now);
        assert_eq!(c.reason, REASON_STUCK);
        assert!(
            c.message
                .contains("Widget ns/old (finalizers: example.com/hold)"),
            "{}",
            c.message
        );
        assert!(!c.message.contains("young"));
        assert!(c.message.contains("10m"));
    }

    #[test]
    fn upgradeable_is_never_true_when_a_deletion_cannot_be_read() {
        let now = jiff::Timestamp::now();
        let ten = Duration::from_secs(600);
        let unknown = UnknownDeletion {
            id: ObjectId::new("example.com", "Widget", Some("ns"), "unread"),
            error: "503 Service Unavailable".into(),
        };
        let c = upgradeable(&[], std::slice::from_ref(&unknown), ten, now);
        assert_eq!(
            (c.status, c.reason.as_str()),
            (ConditionStatus::Unknown, REASON_UNKNOWN)
        );
        assert!(c.message.contains("Widget ns/unread (503"), "{}", c.message);
        let young = pending("young", 5, now);
        let c = upgradeable(&[&young], &[unknown], ten, now);
        assert_eq!(
            (c.status, c.reason.as_str()),
            (ConditionStatus::False, REASON_IN_PROGRESS)
        );
        assert!(
            c.message.contains("young") && c.message.contains("unread"),
            "{}",
            c.message
        );
    }

    #[test]
    fn an_object_not_yet_deleted_is_named_as_such() {
        let now = jiff::Timestamp::now();
        let mut p = pending("kept", 5, now);
        p.since = None;
        let c = upgradeable(&[&p], &[], Duration::from_secs(600), now);
        assert_eq!(c.status, ConditionStatus::False);
        assert!(
            c.message.contains("Widget ns/kept (not deleted yet)"),
            "{}",
            c.message
        );
    }

    fn operators_release(names: &[&str]) -> Release {
        let dir = tempfile::tempdir().unwrap();
        for (i, name) in names.iter().enumerate() {
            std::fs::write(
                dir.path().join(format!("0000_10_c{i}_00_operator.yaml")),
                format!("apiVersion: config.openshift.io/v1\nkind: ClusterOperator\nmetadata:\n  name: {name}\n"),
            )
            .unwrap();
        }
        crate::release::load(dir.path(), &Default::default()).unwrap()
    }

    fn unhealthy(index: usize, reason: crate::health::Reason, operator: &str) -> ManifestResult {
        let mut r = ManifestResult::new(index, crate::apply::Action::Failed);
        let message = format!("Cluster operator {operator} is degraded: Degraded=True");
        r.error = Some(message.clone());
        r.health = Some(crate::health::Finding {
            reason,
            subject: format!("cluster operator {operator}"),
            operator: Some(operator.into()),
            message,
        });
        r
    }

    #[test]
    fn operators_with_one_reason_are_condensed_and_excused_during_the_grace_period() {
        use crate::health::Reason;
        let rel = operators_release(&["dns", "network", "etcd"]);
        let results = [
            unhealthy(0, Reason::ClusterOperatorDegraded, "dns"),
            unhealthy(1, Reason::ClusterOperatorDegraded, "network"),
        ];
        let late = Grace {
            elapsed: Duration::from_secs(3600),
            period: Duration::from_secs(1800),
        };
        let c = failing(&rel, &results, late);
        assert_eq!(
            (c.status, c.reason.as_str(), c.message.as_str()),
            (
                ConditionStatus::True,
                "ClusterOperatorsDegraded",
                "Cluster operators dns, network are degraded"
            )
        );
        // One operator: the CVO's singular reason and the operator's own words.
        let c = failing(&rel, &results[..1], late);
        assert_eq!(c.reason, "ClusterOperatorDegraded");
        assert!(c.message.contains("Degraded=True"), "{}", c.message);
        // Within the grace period: not Failing, and Progressing says what is awaited.
        let early = Grace {
            elapsed: Duration::from_secs(60),
            period: Duration::from_secs(1800),
        };
        assert_eq!(
            failing(&rel, &results, early).status,
            ConditionStatus::False
        );
        let upgradeable = Condition::new("Upgradeable", ConditionStatus::True, "", "");
        let conds = after_pass(&rel, &results, upgradeable.clone(), false, early);
        let progressing = conds.iter().find(|c| c.type_ == "Progressing").unwrap();
        assert_eq!(
            progressing.message,
            "Working towards unknown: 0 of 2 done (0% complete), waiting on cluster operators dns, network"
        );
        // A hard failure is Failing at once, next to the condensed operators.
        let mut hard = unhealthy(2, Reason::ClusterOperatorNotAvailable, "etcd");
        hard.error = Some("Cluster operator etcd is not available".into());
        let mut all = results.to_vec();
        all.push(hard);
        let c = failing(&rel, &all, early);
        assert_eq!(
            (c.status, c.reason.as_str()),
            (ConditionStatus::True, "ClusterOperatorNotAvailable")
        );
        let c = failing(&rel, &all, late);
        assert_eq!(c.reason, "MultipleErrors");
        assert!(
            c.message
                .contains("* Cluster operators dns, network are degraded"),
            "{}",
            c.message
        );
    }

    #[test]
    fn release_accepted_names_the_precondition_or_the_forced_risks() {
        let failure = |reason: &'static str| crate::status::PreconditionFailure {
            reason,
            message: "why".into(),
            objects: Vec::new(),
        };
        let refused = release_accepted("1.1.0", &[failure("UpgradeableFalse")], false);
        assert_eq!(
            (refused.status, refused.reason.as_str()),
            (ConditionStatus::False, "UpgradeableFalse")
        );
        assert!(
            refused.message.contains("UpgradeableFalse: why"),
            "{}",
            refused.message
        );
        let two = release_accepted(
            "1.1.0",
            &[failure("UpgradeableFalse"), failure("StaleDeleteManifest")],
            false,
        );
        assert_eq!(two.reason, "PreconditionChecks");
        let forced = release_accepted("1.1.0", &[failure("UpgradeableFalse")], true);
        assert_eq!(forced.status, ConditionStatus::True);
        assert!(
            forced.message.ends_with("forced past: UpgradeableFalse"),
            "{}",
            forced.message
        );
        let plain = release_accepted("1.1.0", &[], true);
        assert_eq!(plain.message, "Payload loaded version=1.1.0");
    }
}
