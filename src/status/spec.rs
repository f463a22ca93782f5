//! What `ClusterVersion version`'s spec asks of a sync, checked field by field: the
//! `overrides` that take objects out of management, and whether the spec is valid at all.
//!
//! As the CVO: an override `{kind, group, namespace, name, unmanaged: true}` leaves that object
//! alone (no apply, no delete, no health check) and makes the cluster `Upgradeable=False`
//! (`ClusterVersionOverrides`) while it is there. An invalid field is reported (`Invalid=True`
//! with what is wrong, by JSON path) and ignored; the rest of the spec still counts.

use std::collections::BTreeSet;

use kube::api::DynamicObject;
use serde_json::Value;

use super::{Condition, ConditionStatus};
use crate::release::ObjectId;

/// Reason of the Upgradeable=False an override causes (the CVO's).
pub const OVERRIDES_REASON: &str = "ClusterVersionOverrides";

/// The spec, as far as a sync uses it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Spec {
    /// Objects overridden as unmanaged.
    pub unmanaged: BTreeSet<ObjectId>,
    /// What is wrong with the spec (`spec.overrides[2].kind: …`); each such field is ignored.
    pub invalid: Vec<String>,
}

impl Spec {
    /// Reads the spec of `cv`.
    pub fn of(cv: &DynamicObject) -> Self {
        let mut spec = Spec::default();
        let Some(s) = cv.data.get("spec") else {
            return spec;
        };
        if !s.is_object() {
            spec.invalid.push("spec: must be an object".to_owned());
            return spec;
        }
        match s.get("overrides") {
            None | Some(Value::Null) => {}
            Some(Value::Array(items)) => {
                for (i, item) in items.iter().enumerate() {
                    match parse_override(item) {
                        Ok(Some(id)) => {
                            spec.unmanaged.insert(id);
                        }
                        Ok(None) => {}
                        Err(e) => spec.invalid.push(format!("spec.overrides[{i}]: {e}")),
                    }
                }
            }
            Some(_) => spec
                .invalid
                .push("spec.overrides: must be a list".to_owned()),
        }
        if let Some(du) = s.get("desiredUpdate").filter(|v| !v.is_null()) {
            spec.invalid.extend(check_desired_update(du));
        }
        spec
    }

    /// `Invalid=True` with every problem, or `None` when the spec is valid.
    pub fn invalid_condition(&self) -> Option<Condition> {
        (!self.invalid.is_empty()).then(|| {
            Condition::new(
                "Invalid",
                ConditionStatus::True,
                "InvalidClusterVersion",
                format!(
                    "The cluster version is invalid (these fields are ignored): {}",
                    self.invalid.join("; ")
                ),
            )
        })
    }
}

/// What is wrong with one item of `spec.overrides` (the item is ignored).
#[derive(Debug, PartialEq, thiserror::Error)]
pub enum SpecError {
    #[error("must be an object with kind, group, namespace, name and unmanaged")]
    NotAnObject,
    #[error("{0} must not be empty")]
    Empty(&'static str),
    #[error("{0} is required")]
    Missing(&'static str),
    #[error("{0} must be a string, not {1}")]
    NotAString(&'static str, Value),
    #[error("unmanaged (true or false) is required")]
    NoUnmanaged,
    #[error("unmanaged must be true or false, not {0}")]
    UnmanagedNotABoolean(Value),
}

/// The object an override leaves alone, when it says `unmanaged: true`.
fn parse_override(item: &Value) -> Result<Option<ObjectId>, SpecError> {
    let Some(o) = item.as_object() else {
        return Err(SpecError::NotAnObject);
    };
    let text = |field: &'static str, required: bool| match o.get(field) {
        Some(Value::String(s)) if !(required && s.is_empty()) => Ok(s.clone()),
        None | Some(Value::Null) if !required => Ok(String::new()),
        Some(Value::String(_)) => Err(SpecError::Empty(field)),
        None | Some(Value::Null) => Err(SpecError::Missing(field)),
        Some(other) => Err(SpecError::NotAString(field, other.clone())),
    };
    let (kind, name) = (text("kind", true)?, text("name", true)?);
    let (group, namespace) = (text("group", false)?, text("namespace", false)?);
    let unmanaged = match o.get("unmanaged") {
        Some(Value::Bool(b)) => *b,
        None | Some(Value::Null) => return Err(SpecError::NoUnmanaged),
        Some(other) => return Err(SpecError::UnmanagedNotABoolean(other.clone())),
    };
    let namespace = (!namespace.is_empty()).then_some(namespace);
    Ok(unmanaged.then(|| ObjectId::new(&group, &kind, namespace.as_deref(), name)))
}

fn check_desired_update(du: &Value) -> Vec<String> {
    let Some(o) = du.as_object() else {
        return vec!["spec.desiredUpdate: must be an object".to_owned()];
    };
    let mut wrong = Vec::new();
    match o.get("version") {
        None | Some(Value::Null) => {}
        Some(Value::String(v)) if v.is_empty() || v.parse::<semver::Version>().is_ok() => {}
        Some(Value::String(v)) => wrong.push(format!(
            "spec.desiredUpdate.version: {} is not a semantic version such as 1.4.2",
            crate::diagnostic::excerpt(v)
        )),
        Some(other) => wrong.push(format!(
            "spec.desiredUpdate.version: must be a string, not {}",
            crate::diagnostic::excerpt(&other.to_string())
        )),
    }
    for (field, want) in [("image", "a string"), ("force", "true or false")] {
        let ok = matches!(
            (o.get(field), field),
            (None | Some(Value::Null), _)
                | (Some(Value::String(_)), "image")
                | (Some(Value::Bool(_)), "force")
        );
        if !ok {
            wrong.push(format!("spec.desiredUpdate.{field}: must be {want}"));
        }
    }
    wrong
}

/// Upgradeable once overrides are counted: an override makes it False (the CVO's
/// `ClusterVersionOverrides`); with another reason already not True, both are said.
pub fn upgradeable_with_overrides(upgradeable: Condition, spec: &Spec) -> Condition {
    if spec.unmanaged.is_empty() {
        return upgradeable;
    }
    let names: Vec<String> = spec.unmanaged.iter().map(ToString::to_string).collect();
    let message = format!(
        "Disabling ownership via cluster version overrides prevents updates; remove the overrides before continuing ({})",
        super::update::name_list(&names)
    );
    if upgradeable.status == ConditionStatus::True {
        return Condition::new(
            "Upgradeable",
            ConditionStatus::False,
            OVERRIDES_REASON,
            message,
        );
    }
    Condition::new(
        "Upgradeable",
        ConditionStatus::False,
        "MultipleReasons",
        format!(
            "{message}. Also {}: {}",
            upgradeable.reason, upgradeable.message
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cv(spec: Value) -> DynamicObject {
        serde_json::from_value(json!({"apiVersion": "config.openshift.io/v1",
            "kind": "ClusterVersion", "metadata": {"name": "version"}, "spec": spec}))
        .unwrap()
    }

    #[test]
    fn unmanaged_overrides_are_read_and_bad_fields_reported_and_ignored() {
        let spec = Spec::of(&cv(json!({
            "clusterID": "x",
            "overrides": [
                {"kind": "Deployment", "group": "apps", "namespace": "ns", "name": "d", "unmanaged": true},
                {"kind": "ClusterRole", "group": "rbac.authorization.k8s.io", "namespace": "", "name": "r", "unmanaged": true},
                {"kind": "ConfigMap", "group": "", "namespace": "ns", "name": "kept", "unmanaged": false},
                {"kind": "", "group": "", "namespace": "ns", "name": "x", "unmanaged": true},
                {"kind": "ConfigMap", "name": "x", "unmanaged": "yes"},
                "nonsense"
            ],
            "desiredUpdate": {"version": "one-point-two", "force": "true"}
        })));
        let ids: Vec<String> = spec.unmanaged.iter().map(ToString::to_string).collect();
        assert_eq!(ids, ["Deployment ns/d", "ClusterRole r"]);
        assert_eq!(
            spec.invalid,
            [
                "spec.overrides[3]: kind must not be empty",
                "spec.overrides[4]: unmanaged must be true or false, not \"yes\"",
                "spec.overrides[5]: must be an object with kind, group, namespace, name and unmanaged",
                "spec.desiredUpdate.version: one-point-two is not a semantic version such as 1.4.2",
                "spec.desiredUpdate.force: must be true or false",
            ]
        );
        let invalid = spec.invalid_condition().unwrap();
        assert_eq!(invalid.status, ConditionStatus::True);
        assert!(
            Spec::of(&cv(json!({"clusterID": "x"})))
                .invalid_condition()
                .is_none()
        );
    }

    #[test]
    fn an_override_makes_the_cluster_not_upgradeable() {
        let spec = Spec::of(&cv(json!({"overrides": [
            {"kind": "ConfigMap", "group": "", "namespace": "ns", "name": "a", "unmanaged": true}]})));
        let ok = Condition::new("Upgradeable", ConditionStatus::True, "AsExpected", "");
        let c = upgradeable_with_overrides(ok.clone(), &spec);
        assert_eq!(
            (c.status, c.reason.as_str()),
            (ConditionStatus::False, OVERRIDES_REASON)
        );
        assert!(c.message.contains("ConfigMap ns/a"), "{}", c.message);
        let stuck = Condition::new(
            "Upgradeable",
            ConditionStatus::Unknown,
            "DeletionStatusUnknown",
            "cannot tell",
        );
        let c = upgradeable_with_overrides(stuck, &spec);
        assert_eq!(
            (c.status, c.reason.as_str()),
            (ConditionStatus::False, "MultipleReasons")
        );
        assert!(
            c.message
                .ends_with("Also DeletionStatusUnknown: cannot tell"),
            "{}",
            c.message
        );
        assert_eq!(upgradeable_with_overrides(ok.clone(), &Spec::default()), ok);
    }
}
