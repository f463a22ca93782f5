//! The delete annotation itself: a value other than `"true"` (rule `invalid-delete-value`)
//! and keys that are near misses of `release.openshift.io/delete` (rule
//! `delete-annotation-typo`).

use crate::diagnostic::{Diagnostic, excerpt};
use crate::release::{DELETE_ANNOTATION, DeleteIntent, Release};

use super::finding;
use super::rules::{DELETE_ANNOTATION_TYPO, INVALID_DELETE_VALUE};

/// Largest edit distance (after trimming and lower-casing) still taken for a typo.
const MAX_DISTANCE: usize = 2;

pub fn check(release: &Release) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for m in &release.manifests {
        if let DeleteIntent::Invalid(value) = &m.intent {
            out.push(finding(
                INVALID_DELETE_VALUE,
                m,
                format!(
                    "`{DELETE_ANNOTATION}` is `{}`, not the string \"true\": CVO refuses this manifest and leaves the object untouched",
                    excerpt(value)
                ),
                format!(
                    "write `{DELETE_ANNOTATION}: \"true\"` (quoted: a bare true is a boolean) to delete the object, or remove the annotation to apply it"
                ),
            ));
        }
        let Some(annotations) = m
            .object
            .pointer("/metadata/annotations")
            .and_then(|a| a.as_object())
        else {
            continue;
        };
        let has_real_key = annotations.contains_key(DELETE_ANNOTATION);
        for key in annotations.keys().filter(|k| is_near_miss(k)) {
            let message = if has_real_key {
                format!(
                    "annotation `{key}` is a near miss of `{DELETE_ANNOTATION}`, which is also set: the misspelt key does nothing"
                )
            } else {
                format!(
                    "annotation `{key}` is a near miss of `{DELETE_ANNOTATION}`: this object would be applied instead of deleted"
                )
            };
            let help = if has_real_key {
                format!("remove the annotation `{key}`")
            } else {
                format!(
                    "spell the key exactly `{DELETE_ANNOTATION}` (lower case, no spaces), or remove it if the object should be applied"
                )
            };
            out.push(finding(DELETE_ANNOTATION_TYPO, m, message, help));
        }
    }
    out
}

/// True for a key that is not `release.openshift.io/delete` but is within edit distance 2 of
/// it once surrounding white space is trimmed and case is folded.
pub fn is_near_miss(key: &str) -> bool {
    if key == DELETE_ANNOTATION {
        return false;
    }
    let folded = key.trim().to_lowercase();
    // Cheap length bound before the quadratic distance.
    if folded.len().abs_diff(DELETE_ANNOTATION.len()) > MAX_DISTANCE {
        return false;
    }
    // Insertions, deletions and substitutions, counted by characters.
    strsim::levenshtein(&folded, DELETE_ANNOTATION) <= MAX_DISTANCE
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validate::testing::{manifest, release, rules};

    #[test]
    fn near_misses() {
        for key in [
            "release.openshift.io/deleted",
            "Release.openshift.io/delete",
            "RELEASE.OPENSHIFT.IO/DELETE",
            " release.openshift.io/delete",
            "release.openshift.io/delete ",
            "release.openshift.io/delet",
            "release.openshift.io/dlete",
            "release.openshfit.io/delete",
            "release.openshift.io.delete",
            "releases.openshift.io/delete",
        ] {
            assert!(is_near_miss(key), "{key:?} should be a near miss");
        }
        for key in [
            "release.openshift.io/delete",
            "release.openshift.io/create-only",
            "release.openshift.io/feature-set",
            "include.release.openshift.io/self-managed-high-availability",
            "capability.openshift.io/name",
            "release.openshift.io/version",
            "release.openshift.io/deletion-policy",
        ] {
            assert!(!is_near_miss(key), "{key:?} is not a near miss");
        }
    }

    #[test]
    fn invalid_value_and_typo_fire() {
        let bad_value = manifest(
            "0000_50_a_00_cm.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  namespace: ns\n  annotations:\n    release.openshift.io/delete: \"yes\"\n",
        );
        let bool_value = manifest(
            "0000_50_a_01_cm.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n  namespace: ns\n  annotations:\n    release.openshift.io/delete: true\n",
        );
        let typo = manifest(
            "0000_50_a_02_cm.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  namespace: ns\n  annotations:\n    release.openshift.io/deleted: \"true\"\n",
        );
        let good = manifest(
            "0000_50_a_03_cm.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: d\n  namespace: ns\n  annotations:\n    release.openshift.io/delete: \"true\"\n    release.openshift.io/create-only: \"true\"\n",
        );
        let found = check(&release(vec![bad_value, bool_value, typo, good]));
        assert_eq!(
            rules(&found),
            [
                INVALID_DELETE_VALUE,
                INVALID_DELETE_VALUE,
                DELETE_ANNOTATION_TYPO
            ]
        );
        assert!(found[2].message.contains("applied instead of deleted"));
        assert_eq!(
            found[2].object.as_ref().unwrap().to_string(),
            "ConfigMap ns/c"
        );
    }
}
