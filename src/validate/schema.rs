//! Manifests of built-in kinds checked against their typed schema (rules `dropped-field` and
//! `schema-mismatch`), with the same typed round-trip `apply` sends through.
//!
//! A real kube-apiserver rejects a server-side apply that carries a field the built-in type
//! does not declare; `cvo apply` (like OpenShift's CVO) drops such fields by decoding into the
//! typed struct, so each dropped field is a warning here: the release says something the
//! cluster will never see. A manifest that does not decode at all fails at apply time.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;

use crate::diagnostic::Diagnostic;
use crate::release::typed::round_trip;
use crate::release::{DeleteIntent, FieldLines, Manifest, Release};

use super::finding;
use super::rules::{DROPPED_FIELD, SCHEMA_MISMATCH};

/// The findings of [`check`] by object, for the selections of one release (each profile's):
/// a manifest in several profiles is one shared object ([`Manifest::object`]) in each, and is
/// round-tripped once. The object is kept with its findings, so its address is not reused.
#[derive(Default)]
pub struct Checked(HashMap<usize, (Arc<Value>, Vec<Diagnostic>)>);

pub fn check(release: &Release, checked: &mut Checked) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    let lines = FieldLines::default();
    // Delete manifests are never sent, and a manifest with an invalid delete annotation is
    // refused whole (`invalid-delete-value`).
    let applied = release
        .manifests
        .iter()
        .filter(|m| m.intent == DeleteIntent::Apply);
    for m in applied {
        let (_, found) = checked
            .0
            .entry(Arc::as_ptr(&m.object) as usize)
            .or_insert_with(|| (m.object.clone(), check_one(m, &lines)));
        out.extend(found.iter().cloned());
    }
    out
}

/// The finding of one manifest, if any.
fn check_one(m: &Manifest, lines: &FieldLines) -> Vec<Diagnostic> {
    let finding = match round_trip(&m.api_version, &m.id.kind, &m.object) {
        Ok(rt) if rt.dropped.is_empty() => return Vec::new(),
        Ok(rt) => {
            let fields = rt
                .dropped
                .iter()
                .map(|f| format!("`{f}`"))
                .collect::<Vec<_>>()
                .join(", ");
            finding(
                DROPPED_FIELD,
                m,
                format!(
                    "{fields} {} not part of {} {}: it is dropped before applying (a server-side apply with it would be rejected)",
                    if rt.dropped.len() == 1 { "is" } else { "are" },
                    m.api_version,
                    m.id.kind
                ),
                format!("remove {fields} from the manifest, or check its spelling and indentation"),
            )
        }
        Err(e) => {
            let help = match &e.path {
                Some(path) => format!(
                    "write `{path}` as the Kubernetes API reference describes it; `kubectl explain {}.{}` shows the field",
                    m.id.kind.to_lowercase(),
                    explain_path(path)
                ),
                None => "fix the field's type to match the Kubernetes API reference for this kind"
                    .to_owned(),
            };
            let mut d = finding(SCHEMA_MISMATCH, m, e.to_string(), help);
            // Point at the field itself, not at the start of the document.
            if let Some(line) = e.path.as_deref().and_then(|p| lines.line(m, p)) {
                d.location.line = Some(line);
            }
            d
        }
    };
    vec![finding]
}

/// `spec.containers[0].image` → `spec.containers.image`, the form `kubectl explain` takes.
fn explain_path(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    let mut in_index = false;
    for c in path.chars() {
        match c {
            '[' => in_index = true,
            ']' => in_index = false,
            c if !in_index => out.push(c),
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validate::testing::{manifest, release, rules};

    #[test]
    fn unknown_fields_of_built_in_kinds_are_reported() {
        let crb = manifest(
            "0000_50_a_00_crb.yaml",
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: x\nroleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: view\nsubjects: []\nuserNames: [a]\n",
        );
        let found = check(&release(vec![crb]), &mut Checked::default());
        assert_eq!(rules(&found), [DROPPED_FIELD]);
        assert!(
            found[0].message.contains("`/userNames`"),
            "{}",
            found[0].message
        );
    }

    #[test]
    fn wrong_types_and_custom_kinds() {
        let deploy = manifest(
            "0000_50_a_01_deploy.yaml",
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\n  namespace: ns\nspec:\n  replicas: three\n",
        );
        let custom = manifest(
            "0000_50_a_02_widget.yaml",
            "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\n  namespace: n\nanything: goes\n",
        );
        let release = release(vec![deploy, custom]);
        let mut checked = Checked::default();
        let found = check(&release, &mut checked);
        assert_eq!(rules(&found), [SCHEMA_MISMATCH]);
        // Another selection sharing the objects (a second profile): the same findings, each
        // object round-tripped once.
        assert_eq!(check(&release, &mut checked), found);
        assert_eq!(checked.0.len(), 2);
        // The field path, in plain words, with no Rust type names.
        let message = &found[0].message;
        assert!(message.starts_with("`spec.replicas`: "), "{message}");
        assert!(message.contains("must be a whole number"), "{message}");
        assert!(!message.contains("i32"), "{message}");
        let help = found[0].help.as_deref().unwrap();
        assert!(
            help.contains("kubectl explain deployment.spec.replicas"),
            "{help}"
        );
    }

    #[test]
    fn explain_paths_drop_indexes() {
        assert_eq!(
            explain_path("spec.template.spec.containers[0].ports[1].name"),
            "spec.template.spec.containers.ports.name"
        );
    }
}
