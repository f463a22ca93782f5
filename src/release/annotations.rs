//! The `release.openshift.io/*` and related annotations a release speaks through.

use serde::Serialize;

/// Delete the object instead of applying it; only the exact value `"true"` is valid.
pub const DELETE_ANNOTATION: &str = "release.openshift.io/delete";
/// Create when absent, never update.
pub const CREATE_ONLY_ANNOTATION: &str = "release.openshift.io/create-only";
/// Comma-separated feature sets the manifest belongs to.
pub const FEATURE_SET_ANNOTATION: &str = "release.openshift.io/feature-set";
/// Capability (or `A+B` capabilities) the manifest belongs to.
pub const CAPABILITY_ANNOTATION: &str = "capability.openshift.io/name";
/// `include.release.openshift.io/<profile>: "true"` selects the manifest for a profile.
pub const INCLUDE_PREFIX: &str = "include.release.openshift.io/";
/// `exclude.release.openshift.io/<id>: "true"` drops the manifest when `<id>` is excluded.
pub const EXCLUDE_PREFIX: &str = "exclude.release.openshift.io/";

/// What a manifest asks for, from its `release.openshift.io/delete` annotation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "intent", content = "value")]
pub enum DeleteIntent {
    /// No delete annotation: create or update the object.
    Apply,
    /// `release.openshift.io/delete: "true"`: delete the object.
    Delete,
    /// The annotation with any other value: an error for this manifest; its object must not
    /// be touched at all. Holds the value as written.
    Invalid(String),
}

impl DeleteIntent {
    /// Reads the intent from an annotation value (`None` = annotation absent).
    pub fn from_annotation(value: Option<&serde_json::Value>) -> Self {
        match value {
            None => DeleteIntent::Apply,
            Some(serde_json::Value::String(s)) if s == "true" => DeleteIntent::Delete,
            Some(serde_json::Value::String(s)) => DeleteIntent::Invalid(s.clone()),
            Some(other) => DeleteIntent::Invalid(other.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_the_string_true_deletes() {
        assert_eq!(DeleteIntent::from_annotation(None), DeleteIntent::Apply);
        assert_eq!(
            DeleteIntent::from_annotation(Some(&json!("true"))),
            DeleteIntent::Delete
        );
        assert_eq!(
            DeleteIntent::from_annotation(Some(&json!("True"))),
            DeleteIntent::Invalid("True".into())
        );
        assert_eq!(
            DeleteIntent::from_annotation(Some(&json!(true))),
            DeleteIntent::Invalid("true".into())
        );
        assert_eq!(
            DeleteIntent::from_annotation(Some(&json!(""))),
            DeleteIntent::Invalid(String::new())
        );
    }
}
