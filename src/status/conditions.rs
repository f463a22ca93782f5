//! The conditions a pass reports, worded like OpenShift's CVO.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::apply::{ManifestResult, PendingDeletion, Summary};
use crate::release::Release;
use crate::release::capability::{ByUpdate, Capabilities, Judged, name_list};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ConditionStatus {
    True,
    False,
    Unknown,
}

impl ConditionStatus {
    /// As the API writes it: `True`, `False`, `Unknown`.
    pub fn as_str(self) -> &'static str {
        match self {
            ConditionStatus::True => "True",
            ConditionStatus::False => "False",
            ConditionStatus::Unknown => "Unknown",
        }
    }
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

/// Where the cluster stands, for the conditions after a pass.
#[derive(Clone, Copy, Debug)]
pub struct Standing<'a> {
    /// The version the cluster is at before this pass: the newest `Completed` history entry.
    pub completed: Option<&'a str>,
    /// The release is already that completed version (OpenShift's reconciling mode):
    /// Progressing stays False, and problems show in `Failing` only.
    pub reconciling: bool,
}

/// Available / Progressing / Failing / Upgradeable after a pass, as OpenShift's CVO sets them,
/// so that they never contradict the history:
/// - `Available=True "Done applying V"` names the version the cluster is at: this release once
///   it completed, else the newest completed one (an update that failed leaves the cluster at
///   the version it came from); `False` when nothing ever completed.
/// - `Progressing` is True only while installing or updating: "Working towards V: n of m done
///   (p% complete)" (with what it waits on), or "Unable to apply V: …" when manifests failed;
///   in the reconciling mode it stays False: "Cluster version is V", or "Error while
///   reconciling V: …" naming the most frequent error.
pub fn after_pass(
    release: &Release,
    results: &[ManifestResult],
    upgradeable: Condition,
    standing: Standing<'_>,
    grace: Grace,
) -> Vec<Condition> {
    let summary = Summary::of(results);
    let version = version_text(release);
    let complete = summary.failed == 0 && summary.skipped == 0;
    let at = if complete {
        Some(version.as_str())
    } else {
        standing.completed
    };
    let available = match at {
        Some(at) => Condition::new(
            "Available",
            ConditionStatus::True,
            "",
            format!("Done applying {at}"),
        ),
        None => Condition::new("Available", ConditionStatus::False, "", ""),
    };
    let failing = failing(release, results, grace);
    let why = || {
        most_frequent_error(release, results)
            .map(|g| g.to_string())
            .unwrap_or_else(|| format!("{} manifests not applied", summary.skipped))
    };
    let progressing = if standing.reconciling {
        let message = if failing.status == ConditionStatus::True {
            format!("Error while reconciling {version}: {}", why())
        } else {
            format!("Cluster version is {version}")
        };
        Condition::new(
            "Progressing",
            ConditionStatus::False,
            &failing.reason,
            message,
        )
    } else if complete {
        Condition::new(
            "Progressing",
            ConditionStatus::False,
            "",
            format!("Cluster version is {version}"),
        )
    } else if failing.status == ConditionStatus::True {
        Condition::new(
            "Progressing",
            ConditionStatus::True,
            &failing.reason,
            format!(
                "Unable to apply {version}: {} of {} done; {}",
                summary.done(),
                summary.total,
                why()
            ),
        )
    } else {
        let waiting: Vec<crate::health::Finding> = results
            .iter()
            .filter(|r| grace.excuses(r))
            .filter_map(|r| r.health.as_deref().cloned())
            .collect();
        Condition::new(
            "Progressing",
            ConditionStatus::True,
            "",
            waiting_message(&version, summary.done(), summary.total, &waiting),
        )
    };
    vec![available, progressing, failing, upgradeable]
}

/// The most frequent error among failed results: how many failed with it, and one of them in
/// full (bounded). Errors are grouped by their words with the object's own name and namespace
/// taken out, so that one cause hitting 5,000 objects (403 Forbidden for each ConfigMap) is one
/// group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ErrorGroup {
    pub count: usize,
    /// The error of the first result of the group, at most [`ERROR_MESSAGE_MAX`] characters.
    pub message: String,
}

/// The longest error message [`ErrorGroup`] keeps (characters); longer ones end in `…`.
pub const ERROR_MESSAGE_MAX: usize = 300;

impl std::fmt::Display for ErrorGroup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} failed: {}", self.count, self.message)
    }
}

/// [`ErrorGroup`] of the failed results (`None` when none failed with an error). Ties go to
/// the group seen first.
pub fn most_frequent_error(release: &Release, results: &[ManifestResult]) -> Option<ErrorGroup> {
    let mut tally = ErrorTally::default();
    for r in results {
        tally.add(release, r);
    }
    tally.most_frequent()
}

/// Counts failed results by their error's group (see [`ErrorGroup`]) as they come.
#[derive(Clone, Debug, Default)]
pub struct ErrorTally {
    /// Group key → (count, first message, order of first sight).
    groups: std::collections::HashMap<String, (usize, String, usize)>,
}

/// At most this many distinct groups are kept (a bound on memory for hostile input); errors of
/// further groups are not counted.
const MAX_GROUPS: usize = 1000;

impl ErrorTally {
    /// Counts `r` when it failed with an error.
    pub fn add(&mut self, release: &Release, r: &ManifestResult) {
        if r.action != crate::apply::Action::Failed {
            return;
        }
        let Some(error) = r.error.as_deref() else {
            return;
        };
        let id = release.manifests.get(r.index).map(|m| &m.id);
        let key = error_key(error, id);
        let seen = self.groups.len();
        if let Some(group) = self.groups.get_mut(&key) {
            group.0 += 1;
        } else if seen < MAX_GROUPS {
            self.groups
                .insert(key, (1, cut(error, ERROR_MESSAGE_MAX), seen));
        }
    }

    /// Every group, the largest first (ties: the one seen first).
    pub fn groups(&self) -> Vec<ErrorGroup> {
        let mut groups: Vec<_> = self.groups.values().collect();
        groups.sort_by(|a, b| b.0.cmp(&a.0).then(a.2.cmp(&b.2)));
        groups
            .into_iter()
            .map(|(count, message, _)| ErrorGroup {
                count: *count,
                message: message.clone(),
            })
            .collect()
    }

    /// The largest group, if any failed.
    pub fn most_frequent(&self) -> Option<ErrorGroup> {
        self.groups
            .values()
            .max_by(|a, b| a.0.cmp(&b.0).then(b.2.cmp(&a.2)))
            .map(|(count, message, _)| ErrorGroup {
                count: *count,
                message: message.clone(),
            })
    }
}

/// The words of `error` with the object's name and namespace replaced by `*` where they stand
/// as names (quoted, or as `ns/name`), so that the same failure of other objects groups
/// together; bounded in length.
fn error_key(error: &str, id: Option<&crate::release::ObjectId>) -> String {
    let mut key = cut(error, 2 * ERROR_MESSAGE_MAX);
    if let Some(id) = id {
        if let Some(ns) = &id.namespace {
            key = key.replace(&format!("{ns}/{}", id.name), "*/*");
            key = key.replace(&format!("\"{ns}\""), "\"*\"");
        }
        if !id.name.is_empty() {
            key = key.replace(&format!("\"{}\"", id.name), "\"*\"");
            key = key.replace(&format!(" {} ", id.name), " * ");
        }
    }
    key
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
/// `MultipleErrors`, naming the most frequent error with its count and listing at most
/// [`FAILING_LINES`] lines. Failures the grace period still excuses ([`Grace::excuses`]) are left
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
        _ => {
            let mut tally = ErrorTally::default();
            for r in &failed {
                tally.add(release, r);
            }
            let most = tally
                .most_frequent()
                .map(|g| format!(" (most often, {g})"))
                .unwrap_or_default();
            let shown: Vec<&str> = lines
                .iter()
                .take(FAILING_LINES)
                .map(|(_, m)| m.as_str())
                .collect();
            let more = match lines.len().saturating_sub(FAILING_LINES) {
                0 => String::new(),
                n => format!("\n* … and {n} more"),
            };
            Condition::new(
                "Failing",
                ConditionStatus::True,
                "MultipleErrors",
                format!(
                    "{} manifests failed{most}:\n* {}{more}",
                    failed.len(),
                    shown.join("\n* ")
                ),
            )
        }
    }
}

/// At most this many failures are listed one per line in `Failing`'s message; the rest are
/// counted.
const FAILING_LINES: usize = 10;

/// The condition that says whether capabilities are enabled beyond what
/// `spec.capabilities` asks (the CVO's).
pub const IMPLICITLY_ENABLED_CAPABILITIES: &str = "ImplicitlyEnabledCapabilities";

/// `ImplicitlyEnabledCapabilities`: True `CapabilitiesImplicitlyEnabled` naming the
/// capabilities enabled although the spec does not ask for them (enabled before, or by an
/// update), else False `AsExpected`; the CVO's words.
pub fn implicitly_enabled(caps: &Capabilities) -> Condition {
    let (status, reason, message) = if caps.implicitly_enabled.is_empty() {
        (
            ConditionStatus::False,
            "AsExpected",
            "Capabilities match configured spec".to_owned(),
        )
    } else {
        (
            ConditionStatus::True,
            "CapabilitiesImplicitlyEnabled",
            format!(
                "The following capabilities could not be disabled: {}",
                name_list(caps.implicitly_enabled.iter().map(String::as_str))
            ),
        )
    };
    Condition::new(IMPLICITLY_ENABLED_CAPABILITIES, status, reason, message)
}

/// The longest reason quoted for a release that could not be read (a registry's answer may
/// be long; the sync's warning has it whole).
const MAX_UNREAD: usize = 300;

/// [`implicitly_enabled`], its message also saying what this update enabled and from what
/// that was judged (`by_update`; docs/capabilities.md): after the CVO's words, `; enabled by
/// this update: A, judged from …`, so that what reads the CVO's list up to `;` still can.
pub fn implicitly_enabled_by(caps: &Capabilities, by_update: Option<&ByUpdate>) -> Condition {
    let mut condition = implicitly_enabled(caps);
    if let Some(by) = by_update.filter(|b| !b.enabled.is_empty()) {
        let names = name_list(by.enabled.iter().map(String::as_str));
        let judged = match &by.judged {
            Judged::Release(named) => format!(
                "judged from the release the cluster is at, {named}: objects it applies move into them"
            ),
            Judged::Cluster { objects, unread } => {
                let why = match unread {
                    None => "the release it is at is not known".to_owned(),
                    Some(why) => format!(
                        "the release it is at could not be read: {}",
                        cut(why, MAX_UNREAD)
                    ),
                };
                let objects: Vec<String> = objects.iter().map(ToString::to_string).collect();
                format!(
                    "judged from the cluster ({why}): cvo applied objects that move into them ({})",
                    name_list(objects.iter().map(String::as_str))
                )
            }
        };
        condition.message = format!(
            "{}; enabled by this update: {names}, {judged}",
            condition.message
        );
    }
    condition
}

/// `text` cut to at most `max` characters (`…` marks a cut).
fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

/// `text` cut to at most `max` bytes (on a character boundary), `…` marking the cut: what a
/// schema's length cap on a condition message accepts.
pub fn truncate(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max.saturating_sub('…'.len_utf8());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
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
        r.health = Some(Box::new(crate::health::Finding {
            reason,
            subject: format!("cluster operator {operator}"),
            operator: Some(operator.into()),
            message,
        }));
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
        let installing = Standing {
            completed: None,
            reconciling: false,
        };
        let conds = after_pass(&rel, &results, upgradeable.clone(), installing, early);
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

    fn failed(index: usize, error: &str) -> ManifestResult {
        let mut r = ManifestResult::new(index, crate::apply::Action::Failed);
        r.error = Some(error.to_owned());
        r
    }

    fn configmaps_release(count: usize) -> Release {
        let dir = tempfile::tempdir().unwrap();
        for i in 0..count {
            std::fs::write(
                dir.path().join(format!("0000_10_c_{i:03}_cm.yaml")),
                format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-{i}\n  namespace: ns-{i}\n"),
            )
            .unwrap();
        }
        std::fs::write(
            dir.path().join("release-metadata"),
            r#"{"kind": "cincinnati-metadata-v0", "version": "1.6.0"}"#,
        )
        .unwrap();
        crate::release::load(dir.path(), &Default::default()).unwrap()
    }

    fn forbidden(i: usize) -> String {
        format!(
            "apply rejected by the server (403 Forbidden): configmaps \"cm-{i}\" is forbidden: User \"system:serviceaccount:default:nobody\" cannot patch resource \"configmaps\" in API group \"\" in the namespace \"ns-{i}\""
        )
    }

    #[test]
    fn the_same_error_on_different_objects_is_one_group() {
        let rel = configmaps_release(12);
        let mut results: Vec<ManifestResult> = (0..10).map(|i| failed(i, &forbidden(i))).collect();
        results.push(failed(
            10,
            "apply failed after 5 attempts: 503 Service Unavailable",
        ));
        results.push(ManifestResult::new(11, crate::apply::Action::Created));
        let group = most_frequent_error(&rel, &results).expect("a group");
        assert_eq!(group.count, 10);
        assert_eq!(group.message, forbidden(0));
        assert!(
            group.to_string().starts_with(
                "10 failed: apply rejected by the server (403 Forbidden): configmaps \"cm-0\""
            ),
            "{group}"
        );
        // Failing names it with its count, and lists a bounded number of lines.
        let c = failing(&rel, &results, Grace::NONE);
        assert_eq!(c.reason, "MultipleErrors");
        assert!(
            c.message.starts_with("11 manifests failed (most often, 10 failed: apply rejected by the server (403 Forbidden)"),
            "{}",
            c.message
        );
        assert_eq!(
            c.message.matches("\n* ").count(),
            FAILING_LINES + 1,
            "{}",
            c.message
        );
        assert!(c.message.ends_with("\n* … and 1 more"), "{}", c.message);
        // A very long error is cut.
        let long = "x".repeat(5000);
        let group = most_frequent_error(&rel, &[failed(0, &long)]).expect("a group");
        assert_eq!(group.message.chars().count(), ERROR_MESSAGE_MAX + 1);
        assert!(group.message.ends_with('…'));
        assert_eq!(most_frequent_error(&rel, &results[11..]), None);
    }

    #[test]
    fn error_groups_are_listed_largest_first_ties_in_order_of_first_sight() {
        let rel = configmaps_release(6);
        let results = [
            failed(0, "503 Service Unavailable"),
            failed(1, &forbidden(1)),
            failed(2, "timed out"),
            failed(3, &forbidden(3)),
            failed(4, "timed out"),
            ManifestResult::new(5, crate::apply::Action::Created),
        ];
        let mut tally = ErrorTally::default();
        for r in &results {
            tally.add(&rel, r);
        }
        let groups: Vec<(usize, String)> = tally
            .groups()
            .into_iter()
            .map(|g| (g.count, g.message))
            .collect();
        assert_eq!(
            groups,
            [
                (2, forbidden(1)),
                (2, "timed out".to_owned()),
                (1, "503 Service Unavailable".to_owned()),
            ]
        );
    }

    #[test]
    fn a_failed_update_is_available_at_the_version_it_came_from() {
        let rel = configmaps_release(3);
        let results = [
            ManifestResult::new(0, crate::apply::Action::Created),
            failed(1, &forbidden(1)),
            ManifestResult::new(2, crate::apply::Action::Created),
        ];
        let upgradeable = Condition::new("Upgradeable", ConditionStatus::True, "AsExpected", "");
        let find =
            |conds: &[Condition], t: &str| conds.iter().find(|c| c.type_ == t).unwrap().clone();
        let updating = Standing {
            completed: Some("1.4.0"),
            reconciling: false,
        };
        let conds = after_pass(&rel, &results, upgradeable.clone(), updating, Grace::NONE);
        let available = find(&conds, "Available");
        assert_eq!(
            (available.status, available.message.as_str()),
            (ConditionStatus::True, "Done applying 1.4.0")
        );
        let progressing = find(&conds, "Progressing");
        assert_eq!(progressing.status, ConditionStatus::True);
        assert!(
            progressing
                .message
                .starts_with("Unable to apply 1.6.0: 2 of 3 done; 1 failed: apply rejected"),
            "{}",
            progressing.message
        );
        assert_eq!(find(&conds, "Failing").status, ConditionStatus::True);
        // Never completed anything: not available.
        let installing = Standing {
            completed: None,
            reconciling: false,
        };
        let conds = after_pass(&rel, &results, upgradeable.clone(), installing, Grace::NONE);
        assert_eq!(find(&conds, "Available").status, ConditionStatus::False);
        // Completed now: done applying this release.
        let done = [
            ManifestResult::new(0, crate::apply::Action::Created),
            ManifestResult::new(1, crate::apply::Action::Created),
            ManifestResult::new(2, crate::apply::Action::Unchanged),
        ];
        let conds = after_pass(&rel, &done, upgradeable.clone(), updating, Grace::NONE);
        assert_eq!(find(&conds, "Available").message, "Done applying 1.6.0");
        let progressing = find(&conds, "Progressing");
        assert_eq!(
            (progressing.status, progressing.message.as_str()),
            (ConditionStatus::False, "Cluster version is 1.6.0")
        );
    }

    #[test]
    fn reconciling_never_reports_progressing_and_shows_the_failure_in_failing() {
        let rel = configmaps_release(3);
        let results = [
            ManifestResult::new(0, crate::apply::Action::Unchanged),
            failed(1, &forbidden(1)),
            ManifestResult::new(2, crate::apply::Action::Unchanged),
        ];
        let upgradeable = Condition::new("Upgradeable", ConditionStatus::True, "AsExpected", "");
        let reconciling = Standing {
            completed: Some("1.6.0"),
            reconciling: true,
        };
        let conds = after_pass(&rel, &results, upgradeable, reconciling, Grace::NONE);
        let find = |t: &str| conds.iter().find(|c| c.type_ == t).unwrap();
        assert_eq!(find("Available").message, "Done applying 1.6.0");
        let progressing = find("Progressing");
        assert_eq!(progressing.status, ConditionStatus::False);
        assert!(
            progressing
                .message
                .starts_with("Error while reconciling 1.6.0: 1 failed: apply rejected"),
            "{}",
            progressing.message
        );
        assert_eq!(find("Failing").status, ConditionStatus::True);
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

    /// The condition says what this update enabled, and whether that was judged from the
    /// release the cluster is at (a) or from the cluster (b), after the CVO's words.
    #[test]
    fn implicit_capabilities_say_how_an_update_judged_them() {
        let caps = Capabilities {
            known: ["A".into(), "B".into()].into(),
            enabled: ["A".into(), "B".into()].into(),
            implicitly_enabled: ["A".into(), "B".into()].into(),
        };
        let cvo_words = "The following capabilities could not be disabled: A, B";
        assert_eq!(implicitly_enabled_by(&caps, None).message, cvo_words);
        let by = |judged| ByUpdate {
            enabled: ["B".into()].into(),
            judged,
        };
        let from_release = implicitly_enabled_by(
            &caps,
            Some(&by(Judged::Release("1.0.0 (r@sha256:ab)".into()))),
        );
        assert_eq!(from_release.reason, "CapabilitiesImplicitlyEnabled");
        assert_eq!(
            from_release.message,
            format!(
                "{cvo_words}; enabled by this update: B, judged from the release the cluster is at, 1.0.0 (r@sha256:ab): objects it applies move into them"
            )
        );
        let objects = vec![ObjectId::new("", "ConfigMap", Some("ns"), "x")];
        let from_cluster = implicitly_enabled_by(
            &caps,
            Some(&by(Judged::Cluster {
                objects: objects.clone(),
                unread: None,
            })),
        );
        assert_eq!(
            from_cluster.message,
            format!(
                "{cvo_words}; enabled by this update: B, judged from the cluster (the release it is at is not known): cvo applied objects that move into them (ConfigMap ns/x)"
            )
        );
        let unread = implicitly_enabled_by(
            &caps,
            Some(&by(Judged::Cluster {
                objects,
                unread: Some("x".repeat(1000)),
            })),
        );
        assert!(
            unread
                .message
                .contains("(the release it is at could not be read: xxx")
                && unread.message.len() < 600,
            "{}",
            unread.message
        );
        // Nothing enabled by the update: the CVO's words alone.
        let nothing = ByUpdate {
            enabled: Default::default(),
            judged: Judged::Release("r".into()),
        };
        assert_eq!(
            implicitly_enabled_by(&caps, Some(&nothing)).message,
            cvo_words
        );
    }
}
