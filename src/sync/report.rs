//! The report of a sync for people (text) and programs (JSON, docs/apply.md).

use std::fmt::Write as _;

use serde_json::{Value, json};

use super::SyncOutcome;
use crate::apply::{Action, ManifestResult, Summary};
use crate::release::{ExcludedBy, Release};
use crate::status::conditions::{ErrorTally, version_text};

/// The failed manifests the text report lists one by one; the others are counted by error
/// ([`failures_by_error`]). `-o json` lists every result.
const FAILURES_LISTED: usize = 20;

/// The errors [`failures_by_error`] names, the most frequent first.
const ERRORS_LISTED: usize = 10;

/// One result in the JSON shape of `cvo apply -o json` (docs/apply.md), plus `warnings`,
/// `health` (what the health check found) and, for plans, `changes`, when present.
pub fn result_json(release: &Release, r: &ManifestResult) -> Value {
    let m = &release.manifests[r.index];
    let mut v = json!({
        "file": m.location.file.display().to_string(),
        "document": m.location.document,
        "kind": m.id.kind,
        "apiVersion": m.api_version,
        "namespace": m.id.namespace,
        "name": m.id.name,
        "action": r.action,
    });
    // Why an excluded manifest is left out is not an error.
    let why = if r.action == Action::Excluded {
        "reason"
    } else {
        "error"
    };
    v[why] = json!(r.error);
    if !r.warnings.is_empty() {
        v["warnings"] = json!(r.warnings);
    }
    if !r.changes.is_empty() {
        v["changes"] = json!(r.changes);
    }
    if let Some(health) = &r.health {
        v["health"] = json!({"reason": health.reason, "message": health.message});
    }
    v
}

/// The whole JSON report, as a value.
pub fn json_report(release: &Release, outcome: &SyncOutcome) -> Value {
    serde_json::to_value(JsonReport::of(release, outcome)).unwrap_or_default()
}

/// The whole JSON report (docs/apply.md), written as it is serialized: each result becomes
/// its JSON when its turn comes, so a report of 50,000 results is never held whole. `head` is
/// what comes before the results (`release`, `summary`, `conditions`), for a caller to add to.
pub struct JsonReport<'a> {
    release: &'a Release,
    results: &'a [ManifestResult],
    pub head: Value,
    tail: Value,
}

impl<'a> JsonReport<'a> {
    pub fn of(release: &'a Release, outcome: &'a SyncOutcome) -> Self {
        let results = outcome.report.as_ref().map_or(&[][..], |r| &r.results);
        let head = json!({
            "release": {"version": release.version().map(ToString::to_string)},
            "summary": Summary::of(results),
            "conditions": outcome.conditions,
        });
        let mut tail = json!({
            "excluded": outcome.left_out.json(),
            "featureGates": outcome.feature_gates,
            "capabilities": outcome.capabilities,
            "updateType": outcome.update,
            "mode": outcome.mode,
            "retries": outcome.retries,
            "rounds": outcome.rounds(),
        });
        if !outcome.refused.is_empty() {
            tail["preconditionFailures"] = json!(outcome.refused);
        }
        if let Some(preflight) = &outcome.preflight {
            tail["preflight"] = json!(preflight);
        }
        if !outcome.warnings.is_empty() {
            tail["warnings"] = json!(outcome.warnings);
        }
        Self {
            release,
            results,
            head,
            tail,
        }
    }
}

impl serde::Serialize for JsonReport<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{SerializeMap, SerializeSeq};
        /// The results, one at a time.
        struct Results<'a>(&'a Release, &'a [ManifestResult]);
        impl serde::Serialize for Results<'_> {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let mut seq = s.serialize_seq(Some(self.1.len()))?;
                for r in self.1 {
                    seq.serialize_element(&result_json(self.0, r))?;
                }
                seq.end()
            }
        }
        let mut map = s.serialize_map(None)?;
        for (key, value) in self.head.as_object().into_iter().flatten() {
            map.serialize_entry(key, value)?;
        }
        map.serialize_entry("results", &Results(self.release, self.results))?;
        for (key, value) in self.tail.as_object().into_iter().flatten() {
            map.serialize_entry(key, value)?;
        }
        map.end()
    }
}

/// One line per manifest: `created  ConfigMap ns/name  (0000_10_x.yaml)`.
pub fn result_line(release: &Release, r: &ManifestResult) -> String {
    let m = &release.manifests[r.index];
    let mut line = format!("{:<20} {}  ({})", r.action.as_str(), m.id, m.location);
    if let Some(e) = &r.error {
        let _ = write!(line, ": {e}");
    }
    line
}

/// The manifests the release's inclusion filters left out when it was read, which the table
/// does not count (its `excluded` row counts those this cluster's capabilities or feature gates
/// leave out during the pass): `1 of the release's 33 manifests is not in the table: left out
/// by the feature set (1)`.
fn not_in_the_table(release: &Release) -> Option<String> {
    let n = release.excluded.len();
    if n == 0 {
        return None;
    }
    let mut by = std::collections::BTreeMap::<ExcludedBy, usize>::new();
    for e in &release.excluded {
        *by.entry(e.by).or_default() += 1;
    }
    let mut reasons: Vec<String> = by
        .into_iter()
        .map(|(by, count)| {
            let filter = match by {
                ExcludedBy::Profile => "the cluster profile",
                ExcludedBy::FeatureSet => "the feature set",
                ExcludedBy::FeatureGate => "the feature gates",
                ExcludedBy::MajorVersion => "the major version",
                ExcludedBy::Capability => "the capabilities",
                ExcludedBy::Exclude => "--exclude",
            };
            format!("{filter} ({count})")
        })
        .collect();
    let last = reasons.pop().unwrap_or_default();
    let reasons = if reasons.is_empty() {
        last
    } else {
        format!("{} and {last}", reasons.join(", "))
    };
    Some(format!(
        "{n} of the release's {} manifests {} not in the table: left out by {reasons}",
        n + release.manifests.len(),
        if n == 1 { "is" } else { "are" }
    ))
}

/// Text report: failures and skips (every change too when `all_changes`, as for `plan`),
/// planned field changes, warnings, the summary table and the conditions.
pub fn text_report(release: &Release, outcome: &SyncOutcome, all_changes: bool) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "release {} ({})",
        version_text(release),
        outcome.update
    );
    if outcome.mode == super::Mode::Initializing && outcome.rounds() > 1 {
        let _ = writeln!(
            out,
            "install: {} rounds (failed manifests are retried until they succeed or --install-timeout passes)",
            outcome.rounds()
        );
    }
    if let Some(preflight) = &outcome.preflight {
        out.push_str(&preflight.text());
    }
    for f in &outcome.refused {
        let _ = writeln!(out, "refused: {f}");
    }
    if let Some(report) = &outcome.report {
        let mut failed = 0;
        for r in &report.results {
            failed += usize::from(r.action == Action::Failed);
            if r.action == Action::Failed && failed > FAILURES_LISTED {
                continue;
            }
            let shown = r.action == Action::Failed
                || !r.changes.is_empty()
                || (all_changes && !matches!(r.action, Action::Unchanged | Action::Skipped));
            if shown {
                let _ = writeln!(out, "{}", result_line(release, r));
            }
            for c in &r.changes {
                let show = |v: &Option<Value>| {
                    v.as_ref()
                        .map(Value::to_string)
                        .unwrap_or_else(|| "(absent)".into())
                };
                let _ = writeln!(
                    out,
                    "    {}: {} -> {}",
                    c.path,
                    show(&c.before),
                    show(&c.after)
                );
            }
        }
        failures_by_error(&mut out, release, &report.results);
        let skipped = report
            .results
            .iter()
            .filter(|r| r.action == Action::Skipped)
            .count();
        if skipped > 0 {
            let _ = writeln!(
                out,
                "{skipped} manifests not attempted because of the failures above"
            );
        }
    }
    if outcome.retries.retries > 0 {
        let _ = writeln!(
            out,
            "retried: {} requests ({} throttled with 429 Too Many Requests)",
            outcome.retries.retries, outcome.retries.throttled
        );
    }
    for w in &outcome.warnings {
        let _ = writeln!(out, "warning: {w}");
    }
    let summary = outcome
        .report
        .as_ref()
        .map(|r| r.summary())
        .unwrap_or_default();
    let _ = writeln!(out, "\n{:<22} {:>6}", "ACTION", "COUNT");
    for a in Action::ALL {
        let label = match a {
            Action::DeletionInProgress => "deletion in progress",
            Action::AlreadyAbsent => "already absent",
            other => other.as_str(),
        };
        let _ = writeln!(out, "{label:<22} {:>6}", summary.count(a));
    }
    let _ = writeln!(out, "{:<22} {:>6}", "total", summary.total);
    if let Some(line) = not_in_the_table(release) {
        let _ = writeln!(out, "{line}");
    }
    out.push('\n');
    write_conditions(&mut out, &outcome.conditions);
    out
}

/// When more than [`FAILURES_LISTED`] manifests failed (the report lists those first): how
/// many more, and every failure counted by its error (grouped as the progress lines group
/// them), the [`ERRORS_LISTED`] most frequent named, the rest counted together.
fn failures_by_error(out: &mut String, release: &Release, results: &[ManifestResult]) {
    let failed = results
        .iter()
        .filter(|r| r.action == Action::Failed)
        .count();
    if failed <= FAILURES_LISTED {
        return;
    }
    let mut tally = ErrorTally::default();
    for r in results {
        tally.add(release, r);
    }
    let _ = writeln!(
        out,
        "and {} more failed manifests (-o json lists all {failed}); the failures by error:",
        failed - FAILURES_LISTED
    );
    let groups = tally.groups();
    let mut named = 0;
    for group in groups.iter().take(ERRORS_LISTED) {
        let _ = writeln!(out, "  {group}");
        named += group.count;
    }
    if named < failed {
        let _ = writeln!(out, "  and {} failed with other errors", failed - named);
    }
}

/// One line per condition: `Type=Status Reason: message`.
fn write_conditions(out: &mut String, conditions: &[crate::status::Condition]) {
    for c in conditions {
        let status = c.status.as_str();
        let _ = write!(out, "{}={status}", c.type_);
        if !c.reason.is_empty() {
            let _ = write!(out, " {}", c.reason);
        }
        if !c.message.is_empty() {
            let _ = write!(out, ": {}", c.message);
        }
        out.push('\n');
    }
}
