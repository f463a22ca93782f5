//! Delete manifests carrying more than an object's identity (rule `delete-extra-fields`).
//!
//! Deleting needs only `apiVersion`, `kind` and `metadata`; a `spec`, `data` or `rules` left
//! in a delete manifest has no effect and suggests the author expected it to be applied.

use crate::diagnostic::Diagnostic;
use crate::release::Release;

use super::finding;
use super::rules::DELETE_EXTRA_FIELDS;

const IDENTITY_FIELDS: [&str; 3] = ["apiVersion", "kind", "metadata"];

pub fn check(release: &Release) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for m in release.manifests.iter().filter(|m| m.is_delete()) {
        let Some(object) = m.object.as_object() else {
            continue;
        };
        let extra: Vec<&str> = object
            .keys()
            .map(String::as_str)
            .filter(|k| !IDENTITY_FIELDS.contains(k))
            .collect();
        if extra.is_empty() {
            continue;
        }
        let fields = extra
            .iter()
            .map(|k| format!("`{k}`"))
            .collect::<Vec<_>>()
            .join(", ");
        out.push(finding(
            DELETE_EXTRA_FIELDS,
            m,
            format!(
                "delete manifest has {fields}, which {} no effect: the object is deleted, not applied",
                if extra.len() == 1 { "has" } else { "have" }
            ),
            format!("remove {fields}: a delete manifest needs only apiVersion, kind and metadata"),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validate::testing::{manifest, release, rules};

    #[test]
    fn spec_in_delete_manifest_is_a_note() {
        let found = check(&release(vec![
            manifest(
                "0000_50_a_00_x.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  namespace: ns\n  annotations:\n    release.openshift.io/delete: \"true\"\ndata:\n  k: v\n",
            ),
            manifest(
                "0000_50_a_01_x.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n  namespace: ns\n  annotations:\n    release.openshift.io/delete: \"true\"\n",
            ),
            manifest(
                "0000_50_a_02_x.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  namespace: ns\ndata:\n  k: v\n",
            ),
        ]));
        assert_eq!(rules(&found), [DELETE_EXTRA_FIELDS]);
        assert_eq!(found[0].severity, crate::diagnostic::Severity::Note);
        assert!(found[0].message.contains("`data`"));
    }
}
