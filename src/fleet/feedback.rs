//! What a cluster's ClusterVersion `version` reports to the hub: the feedback rules cvo puts
//! in its ManifestWorks (OCM's `JSONPaths` status feedback, one scalar per path) and the
//! report read back from a ManifestWork's status.
//!
//! Only scalars: a whole history or conditions list would need OCM's alpha raw-JSON feedback,
//! capped at 1 KiB by default. The newest two history entries are enough to name the version
//! a cluster is at (the newest `Completed` one, when one of the two is); beyond them the
//! current version is unknown, and the fleet then treats an update as minor (fail closed).

use std::collections::BTreeMap;

use serde_json::{Value, json};

/// The ClusterVersion conditions reported, each with status, reason and message.
pub const CONDITIONS: [&str; 5] = [
    "Available",
    "Progressing",
    "Failing",
    "Upgradeable",
    "ReleaseAccepted",
];

/// History entries reported (newest first).
const HISTORY: usize = 2;

/// The feedback rules' `(name, JSONPath)` pairs.
pub fn paths() -> Vec<(String, String)> {
    let mut paths: Vec<(String, String)> = [
        ("generation", ".metadata.generation"),
        ("observedGeneration", ".status.observedGeneration"),
        ("requestedVersion", ".spec.desiredUpdate.version"),
        ("requestedImage", ".spec.desiredUpdate.image"),
        ("desiredVersion", ".status.desired.version"),
        ("desiredImage", ".status.desired.image"),
    ]
    .iter()
    .map(|(n, p)| ((*n).to_owned(), (*p).to_owned()))
    .collect();
    paths.push((
        "openshiftManager".to_owned(),
        format!(".metadata.managedFields[?(@.manager==\"{OPENSHIFT_MANAGER}\")].manager"),
    ));
    for i in 0..HISTORY {
        for field in ["version", "state", "image", "verified"] {
            paths.push((
                format!("history{i}.{field}"),
                format!(".status.history[{i}].{field}"),
            ));
        }
    }
    for condition in CONDITIONS {
        for field in ["status", "reason", "message"] {
            paths.push((
                format!("{condition}.{field}"),
                format!(".status.conditions[?(@.type==\"{condition}\")].{field}"),
            ));
        }
    }
    paths
}

/// The `feedbackRules` entry of a ManifestWork's `manifestConfigs` for ClusterVersion
/// `version`.
pub fn rules() -> Value {
    let json_paths: Vec<Value> = paths()
        .into_iter()
        .map(|(name, path)| json!({"name": name, "path": path}))
        .collect();
    json!([{"type": "JSONPaths", "jsonPaths": json_paths}])
}

/// One status feedback value, as the work agent reports it.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FeedbackValue {
    pub name: String,
    #[serde(default)]
    pub field_value: FieldValue,
}

/// A feedback value's value: one of the three, by its `type`.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Deserialize)]
pub struct FieldValue {
    pub string: Option<String>,
    pub integer: Option<i64>,
    pub boolean: Option<bool>,
}

/// One ClusterVersion condition as reported.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    pub status: Option<String>,
    pub reason: Option<String>,
    pub message: Option<String>,
}

impl Condition {
    /// Whether its status is `status`.
    pub fn is(&self, status: &str) -> bool {
        self.status.as_deref() == Some(status)
    }
}

/// One history entry as reported.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    pub version: Option<String>,
    pub state: Option<String>,
    pub image: Option<String>,
    pub verified: Option<bool>,
}

/// ClusterVersion `version` of one cluster, as its ManifestWork's feedback says.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub generation: Option<i64>,
    pub observed_generation: Option<i64>,
    /// `spec.desiredUpdate`: what the cluster was asked for.
    pub requested_version: Option<String>,
    pub requested_image: Option<String>,
    /// `status.desired`: what the cluster's operator works towards.
    pub desired_version: Option<String>,
    pub desired_image: Option<String>,
    /// The newest entries of `status.history`, newest first.
    pub history: Vec<Entry>,
    pub conditions: BTreeMap<String, Condition>,
    /// The field manager of OpenShift's own cluster-version operator
    /// ([`OPENSHIFT_MANAGER`]) when it writes this ClusterVersion: another operator manages it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub openshift_manager: Option<String>,
}

/// The field manager OpenShift's cluster-version operator writes ClusterVersion `version` as
/// (client-go's default: its binary's name).
pub const OPENSHIFT_MANAGER: &str = "cluster-version-operator";

impl Report {
    /// Reads the feedback `values` of a ManifestWork's ClusterVersion manifest (a list of
    /// `{name, fieldValue: {type, string|integer|boolean}}`); unknown names are ignored, a value
    /// of another type than expected is left out.
    pub fn from_values(values: &[FeedbackValue]) -> Report {
        let by_name: BTreeMap<&str, &FieldValue> = values
            .iter()
            .map(|v| (v.name.as_str(), &v.field_value))
            .collect();
        let text = |name: &str| by_name.get(name).and_then(|f| f.string.clone());
        let int = |name: &str| by_name.get(name).and_then(|f| f.integer);
        let boolean = |name: &str| by_name.get(name).and_then(|f| f.boolean);
        let history = (0..HISTORY)
            .map(|i| Entry {
                version: text(&format!("history{i}.version")),
                state: text(&format!("history{i}.state")),
                image: text(&format!("history{i}.image")),
                verified: boolean(&format!("history{i}.verified")),
            })
            .take_while(|e| e.version.is_some() || e.state.is_some())
            .collect();
        let conditions = CONDITIONS
            .iter()
            .map(|c| {
                let field = |f: &str| text(&format!("{c}.{f}"));
                let condition = Condition {
                    status: field("status"),
                    reason: field("reason"),
                    message: field("message"),
                };
                ((*c).to_owned(), condition)
            })
            .filter(|(_, c)| c.status.is_some())
            .collect();
        Report {
            generation: int("generation"),
            observed_generation: int("observedGeneration"),
            requested_version: text("requestedVersion"),
            requested_image: text("requestedImage"),
            desired_version: text("desiredVersion"),
            desired_image: text("desiredImage"),
            history,
            conditions,
            openshift_manager: text("openshiftManager"),
        }
    }

    /// The condition `type_`, if reported.
    pub fn condition(&self, type_: &str) -> Option<&Condition> {
        self.conditions.get(type_)
    }

    /// The version the cluster is at: the newest `Completed` entry of the reported history
    /// (`None` when neither reported entry is completed: an install, or unknown).
    pub fn current_version(&self) -> Option<&str> {
        self.history
            .iter()
            .find(|e| e.state.as_deref() == Some("Completed"))
            .and_then(|e| e.version.as_deref())
    }

    /// Whether the cluster has completed `version` from `image`, is Available and not Failing.
    pub fn is_done(&self, version: &str, image: &str) -> bool {
        let Some(newest) = self.history.first() else {
            return false;
        };
        newest.version.as_deref() == Some(version)
            && newest.image.as_deref() == Some(image)
            && newest.state.as_deref() == Some("Completed")
            && self.condition("Available").is_some_and(|c| c.is("True"))
            && !self.condition("Failing").is_some_and(|c| c.is("True"))
    }

    /// Why the cluster fails, if it does: `Failing=True` or `ReleaseAccepted=False`, with the
    /// condition's reason and message.
    pub fn failure(&self) -> Option<String> {
        [("Failing", "True"), ("ReleaseAccepted", "False")]
            .iter()
            .find_map(|(type_, status)| {
                let c = self.condition(type_).filter(|c| c.is(status))?;
                Some(describe(type_, c))
            })
    }
}

/// `Type=Status Reason: message`, as `oc adm upgrade` prints a condition.
pub fn describe(type_: &str, c: &Condition) -> String {
    let mut text = format!("{type_}={}", c.status.as_deref().unwrap_or("?"));
    if let Some(reason) = c.reason.as_deref().filter(|r| !r.is_empty()) {
        text.push(' ');
        text.push_str(reason);
    }
    if let Some(message) = c.message.as_deref().filter(|m| !m.is_empty()) {
        text.push_str(": ");
        text.push_str(message);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(name: &str, v: &str) -> Value {
        json!({"name": name, "fieldValue": {"type": "String", "string": v}})
    }

    #[test]
    fn every_condition_has_a_filter_path_and_names_are_unique() {
        let paths = paths();
        let names: std::collections::BTreeSet<&String> = paths.iter().map(|(n, _)| n).collect();
        assert_eq!(names.len(), paths.len());
        assert!(paths.contains(&(
            "Upgradeable.message".to_owned(),
            ".status.conditions[?(@.type==\"Upgradeable\")].message".to_owned()
        )));
    }

    #[test]
    fn a_report_reads_back_what_the_paths_name() {
        let values = vec![
            s("history0.version", "1.1.0"),
            s("history0.state", "Partial"),
            s("history1.version", "1.0.0"),
            s("history1.state", "Completed"),
            json!({"name": "history1.verified", "fieldValue": {"type": "Boolean", "boolean": true}}),
            json!({"name": "observedGeneration", "fieldValue": {"type": "Integer", "integer": 3}}),
            s("Failing.status", "True"),
            s("Failing.reason", "ClusterOperatorNotAvailable"),
            s("Failing.message", "widget is down"),
            s("Upgradeable.status", "False"),
        ];
        let r = Report::from_values(
            &serde_json::from_value::<Vec<FeedbackValue>>(json!(values)).unwrap(),
        );
        assert_eq!(r.current_version(), Some("1.0.0"));
        assert_eq!(r.history.len(), 2);
        assert_eq!(r.history[1].verified, Some(true));
        assert_eq!(r.observed_generation, Some(3));
        assert_eq!(
            r.failure().as_deref(),
            Some("Failing=True ClusterOperatorNotAvailable: widget is down")
        );
        assert!(r.condition("Upgradeable").is_some_and(|c| c.is("False")));
        assert!(!r.is_done("1.1.0", "x"));
    }

    #[test]
    fn done_needs_the_image_too_and_a_missing_status_is_not_done() {
        assert!(!Report::default().is_done("1.1.0", "r@sha256:a"));
        let values = vec![
            s("history0.version", "1.1.0"),
            s("history0.state", "Completed"),
            s("history0.image", "r@sha256:a"),
            s("Available.status", "True"),
        ];
        let r = Report::from_values(
            &serde_json::from_value::<Vec<FeedbackValue>>(json!(values)).unwrap(),
        );
        assert!(r.is_done("1.1.0", "r@sha256:a"));
        assert!(!r.is_done("1.1.0", "r@sha256:b"));
    }
}
