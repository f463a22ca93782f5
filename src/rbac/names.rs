//! The printed objects' names against the release they go into.
//!
//! A binding's `roleRef` is immutable: the API server refuses (422) an update that changes it.
//! Every binding `cvo rbac` prints is named after the role it binds (one name, `--name`, for
//! all of them), so its `roleRef` never changes under that name — unless the release already
//! holds a binding of that name that binds another role (the shipped `ClusterRoleBinding
//! cvo-operator` binds `cluster-admin`). Such a release could never apply the printed RBAC:
//! [`conflicts`] finds those bindings, and `cvo rbac` refuses to print.
//!
//! [`ships_own`] tells whether the release already ships the printed ClusterRole: only then do
//! the rules cover the operator keeping its own RBAC applied (the objects are in the release),
//! so output meant for the release is printed once more after it is put there.

use std::fmt;

use super::Rbac;
use crate::diagnostic::Location;
use crate::release::{DeleteIntent, Manifest, ObjectId};

const RBAC_GROUP: &str = super::RBAC_GROUP;

/// A binding of the release under the name of a printed binding, binding another role.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RoleRefConflict {
    /// Where the release's binding is.
    pub location: Location,
    /// The binding (`ClusterRoleBinding name`, `RoleBinding ns/name`).
    pub binding: ObjectId,
    /// The role it binds, as `Kind name` (`unreadable` when its roleRef is not complete).
    pub release_role: String,
    /// The role the printed binding of that name binds, as `Kind name`.
    pub printed_role: String,
}

impl fmt::Display for RoleRefConflict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: the release's {} binds {}, and the printed {} of the same name binds {}: the API server refuses to change a binding's roleRef (422 Unprocessable Entity), so every update of the release would fail on it. Choose another --name (the default, {}, is a name of its own)",
            self.location,
            self.binding,
            self.release_role,
            self.binding.kind,
            self.printed_role,
            super::DEFAULT_NAME
        )
    }
}

/// A binding's `roleRef` as (apiGroup, kind, name); `None` when a part is missing.
pub fn role_ref(object: &serde_json::Value) -> Option<(&str, &str, &str)> {
    let role = object.get("roleRef")?;
    let field = |key: &str| role.get(key).and_then(serde_json::Value::as_str);
    Some((field("apiGroup")?, field("kind")?, field("name")?))
}

/// The printed bindings: identity and the role each binds (`Kind`, name).
fn printed_bindings(rbac: &Rbac) -> Vec<(ObjectId, &'static str)> {
    let name = &rbac.options.name;
    let mut out = vec![(
        ObjectId::new(RBAC_GROUP, "ClusterRoleBinding", None, name),
        "ClusterRole",
    )];
    for namespace in rbac.namespace_rules.keys() {
        out.push((
            ObjectId::new(RBAC_GROUP, "RoleBinding", Some(namespace), name),
            "Role",
        ));
    }
    out
}

/// Every binding `manifests` apply (delete manifests aside) under the name of a printed
/// binding whose `roleRef` differs from the printed one.
pub fn conflicts<'a>(
    rbac: &Rbac,
    manifests: impl IntoIterator<Item = &'a Manifest>,
) -> Vec<RoleRefConflict> {
    let printed = printed_bindings(rbac);
    let name = &rbac.options.name;
    let mut out = Vec::new();
    for manifest in manifests {
        if manifest.intent != DeleteIntent::Apply {
            continue;
        }
        let Some((_, kind)) = printed.iter().find(|(id, _)| *id == manifest.id) else {
            continue;
        };
        let same = role_ref(&manifest.object)
            .is_some_and(|(group, k, n)| group == RBAC_GROUP && k == *kind && n == name);
        if same {
            continue;
        }
        let conflict = RoleRefConflict {
            location: manifest.location.clone(),
            binding: manifest.id.clone(),
            release_role: role_ref(&manifest.object)
                .map(|(_, k, n)| format!("{k} {n}"))
                .unwrap_or_else(|| "an unreadable roleRef".to_owned()),
            printed_role: format!("{kind} {name}"),
        };
        if !out.contains(&conflict) {
            out.push(conflict);
        }
    }
    out
}

/// True when `manifests` apply the printed ClusterRole (the output is already in the release).
pub fn ships_own<'a>(rbac: &Rbac, manifests: impl IntoIterator<Item = &'a Manifest>) -> bool {
    let own = ObjectId::new(RBAC_GROUP, "ClusterRole", None, &rbac.options.name);
    manifests
        .into_iter()
        .any(|m| m.intent == DeleteIntent::Apply && m.id == own)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rbac::{DEFAULT_NAME, Options, Resources, derive};
    use crate::release::LoadOptions;

    fn release(files: &[(&str, &str)]) -> crate::release::Release {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in files {
            std::fs::write(dir.path().join(name), text).unwrap();
        }
        crate::release::load(dir.path(), &LoadOptions::default()).unwrap()
    }

    fn binding(kind: &str, namespace: Option<&str>, name: &str, role: &str) -> String {
        let ns = namespace
            .map(|n| format!("  namespace: {n}\n"))
            .unwrap_or_default();
        let role_kind = if kind == "RoleBinding" {
            "Role"
        } else {
            "ClusterRole"
        };
        format!(
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: {kind}\nmetadata:\n  name: {name}\n{ns}roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: {role_kind}, name: {role}}}\nsubjects: [{{kind: ServiceAccount, name: cvo-operator, namespace: cluster-version}}]\n"
        )
    }

    fn rbac_named(release: &crate::release::Release, name: &str) -> Rbac {
        let options = Options {
            name: name.into(),
            service_account: "cluster-version/cvo-operator".parse().unwrap(),
            namespace: "cluster-version".into(),
            state_namespace: "cluster-version".into(),
            lease_name: "cvo-operator".into(),
            by_name: true,
            self_deployment: None,
            operand_cleanup: None,
            profiles: Vec::new(),
            feature_set: "Default".into(),
        };
        derive(release, &Resources::of(release), &options).unwrap()
    }

    #[test]
    fn a_binding_of_the_same_name_to_another_role_conflicts() {
        let admin = binding("ClusterRoleBinding", None, "cvo-operator", "cluster-admin");
        let release = release(&[("0000_00_cvo_04_rbac.yaml", &admin)]);
        let found = conflicts(&rbac_named(&release, "cvo-operator"), &release.manifests);
        assert_eq!(found.len(), 1);
        let text = found[0].to_string();
        for want in [
            "0000_00_cvo_04_rbac.yaml:1 (document 0)",
            "ClusterRoleBinding cvo-operator binds ClusterRole cluster-admin",
            "binds ClusterRole cvo-operator",
            "422",
            "Choose another --name",
            DEFAULT_NAME,
        ] {
            assert!(text.contains(want), "{want}: {text}");
        }
        // The default name is its own.
        assert!(conflicts(&rbac_named(&release, DEFAULT_NAME), &release.manifests).is_empty());
    }

    #[test]
    fn the_printed_output_itself_a_delete_manifest_and_other_names_do_not_conflict() {
        let own = binding("ClusterRoleBinding", None, "mine", "mine");
        let own_role = binding("RoleBinding", Some("cluster-version"), "mine", "mine");
        let deleted = "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: old\n  annotations:\n    release.openshift.io/delete: \"true\"\n";
        let other = binding("RoleBinding", Some("elsewhere"), "mine", "someone-elses");
        let release = release(&[
            ("0000_00_cvo_04_a.yaml", &own),
            ("0000_00_cvo_04_b.yaml", &own_role),
            ("0000_00_cvo_04_c.yaml", deleted),
            ("0000_00_cvo_04_d.yaml", &other),
        ]);
        let rbac = rbac_named(&release, "mine");
        assert!(conflicts(&rbac, &release.manifests).is_empty());
        let rbac = rbac_named(&release, "old");
        assert!(conflicts(&rbac, &release.manifests).is_empty());
    }

    #[test]
    fn a_role_binding_in_the_operators_namespace_conflicts_too() {
        let other = binding("RoleBinding", Some("cluster-version"), "mine", "edit");
        let release = release(&[("0000_00_cvo_04_rb.yaml", &other)]);
        let found = conflicts(&rbac_named(&release, "mine"), &release.manifests);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0]
                .to_string()
                .contains("RoleBinding cluster-version/mine binds Role edit"),
            "{}",
            found[0]
        );
    }

    #[test]
    fn ships_own_when_the_release_applies_the_printed_cluster_role() {
        let role = "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: mine\nrules: []\n";
        let release = release(&[("0000_00_cvo_04_role.yaml", role)]);
        assert!(ships_own(&rbac_named(&release, "mine"), &release.manifests));
        assert!(!ships_own(
            &rbac_named(&release, "other"),
            &release.manifests
        ));
    }
}
