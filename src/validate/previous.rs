//! Checks of an update: the new release against the release it updates from (`--previous`).
//!
//! Rules `delete-unknown-object` (a delete manifest for an object the previous release never
//! had), `removed-without-delete` (an object dropped without a delete manifest is orphaned on
//! every cluster) and `stale-delete-manifest` (a delete manifest carried over a major or minor
//! update: every cluster that went through the previous release already deleted the object)
//! and `immutable-roleref` (a binding applied by both releases under one name whose `roleRef`
//! differs: the API server refuses the change, so the update fails on every pass).

use std::collections::HashMap;

use crate::diagnostic::Diagnostic;
use crate::release::{DELETE_ANNOTATION, DeleteIntent, Manifest, ObjectId, Release};

use super::finding;
use super::rules::{
    DELETE_UNKNOWN_OBJECT, IMMUTABLE_ROLEREF, REMOVED_WITHOUT_DELETE, STALE_DELETE_MANIFEST,
};

pub fn check(release: &Release, previous: &Release) -> Vec<Diagnostic> {
    let before: HashMap<&ObjectId, &Manifest> =
        previous.manifests.iter().map(|m| (&m.id, m)).collect();
    let now: HashMap<&ObjectId, &Manifest> = release.manifests.iter().map(|m| (&m.id, m)).collect();
    let versions = match (previous.version(), release.version()) {
        (Some(p), Some(n)) if (p.major, p.minor) != (n.major, n.minor) => Some((p, n)),
        _ => None,
    };
    let mut out = Vec::new();

    for m in release.manifests.iter().filter(|m| m.is_delete()) {
        match before.get(&m.id).map(|p| &p.intent) {
            Some(DeleteIntent::Apply) => {}
            Some(DeleteIntent::Delete) => {
                if let Some((p, n)) = versions {
                    let at = &before[&m.id].location;
                    out.push(finding(
                        STALE_DELETE_MANIFEST,
                        m,
                        format!(
                            "the previous release {p} already carries this delete manifest (at {at}); {p} → {n} is a {} update, so every cluster reaching {n} went through a {}.{} release that deleted the object: this delete manifest is stale",
                            if p.major != n.major { "major" } else { "minor" },
                            p.major,
                            p.minor
                        ),
                        "remove the delete manifest: the object is already gone on every cluster that can update to this release",
                    ));
                }
            }
            Some(DeleteIntent::Invalid(_)) | None => out.push(finding(
                DELETE_UNKNOWN_OBJECT,
                m,
                "delete manifest for an object the previous release neither applied nor deleted: a typo, or nothing to delete",
                "check group, kind, namespace and name against the manifest that applied the object, or drop this delete manifest",
            )),
        }
    }

    for m in release.manifests.iter().filter(|m| is_binding(m)) {
        let Some(p) = before.get(&m.id).filter(|p| is_binding(p)) else {
            continue;
        };
        let (Some(old), Some(new)) = (role_ref(&p.object), role_ref(&m.object)) else {
            continue;
        };
        if old != new {
            out.push(finding(
                IMMUTABLE_ROLEREF,
                m,
                format!(
                    "this release binds {} where the previous release bound {} under the same name (at {}): the API server refuses to change a binding's roleRef (422 Unprocessable Entity), so the update fails on this binding on every pass",
                    role_text(new),
                    role_text(old),
                    p.location
                ),
                "bind the new role under a new name (name the binding after its role), and delete the old binding with a delete manifest ordered after the new binding (same component, a later file name)",
            ));
        }
    }

    for p in previous
        .manifests
        .iter()
        .filter(|p| p.intent == DeleteIntent::Apply && !now.contains_key(&p.id))
    {
        out.push(finding(
            REMOVED_WITHOUT_DELETE,
            p,
            "the previous release applied this object and this release neither applies nor deletes it: it will be orphaned on every cluster",
            format!(
                "add a delete manifest for it (apiVersion, kind, metadata with `{DELETE_ANNOTATION}: \"true\"`), or keep applying it"
            ),
        ));
    }
    out
}

/// A ClusterRoleBinding or RoleBinding the release applies (not a delete manifest).
fn is_binding(m: &Manifest) -> bool {
    m.intent == DeleteIntent::Apply
        && m.id.group == "rbac.authorization.k8s.io"
        && matches!(m.id.kind.as_str(), "ClusterRoleBinding" | "RoleBinding")
}

/// A binding's `roleRef`: (apiGroup, kind, name), each `None` when missing.
type RoleRef<'a> = (Option<&'a str>, Option<&'a str>, Option<&'a str>);

fn role_ref(object: &serde_json::Value) -> Option<RoleRef<'_>> {
    let role = object.get("roleRef")?;
    let field = |key: &str| role.get(key).and_then(serde_json::Value::as_str);
    Some((field("apiGroup"), field("kind"), field("name")))
}

/// `ClusterRole admin` (`(group g)` added when it is not the RBAC group).
fn role_text((group, kind, name): RoleRef<'_>) -> String {
    let text = |v: Option<&str>| crate::diagnostic::excerpt(v.unwrap_or("(none)"));
    let mut out = format!("{} {}", text(kind), text(name));
    if group != Some("rbac.authorization.k8s.io") {
        out.push_str(&format!(" (apiGroup {})", text(group)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::release::ReleaseMetadata;
    use crate::validate::testing::{manifest, release, rules};

    fn cm(file: &str, name: &str, delete: bool) -> Manifest {
        manifest(
            file,
            &format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: ns\n{}",
                if delete {
                    "  annotations:\n    release.openshift.io/delete: \"true\"\n"
                } else {
                    ""
                }
            ),
        )
    }

    fn versioned(mut r: Release, version: &str) -> Release {
        r.metadata = Some(ReleaseMetadata {
            version: version.parse().unwrap(),
            previous: Vec::new(),
        });
        r
    }

    #[test]
    fn unknown_deletes_and_orphans() {
        let previous = release(vec![
            cm("p/0000_50_a_00.yaml", "kept", false),
            cm("p/0000_50_a_01.yaml", "dropped", false),
        ]);
        let new = release(vec![
            cm("n/0000_50_a_00.yaml", "kept", false),
            cm("n/0000_50_a_02.yaml", "typo", true),
        ]);
        let found = check(&new, &previous);
        assert_eq!(
            rules(&found),
            [DELETE_UNKNOWN_OBJECT, REMOVED_WITHOUT_DELETE]
        );
        assert_eq!(found[1].object.as_ref().unwrap().name, "dropped");
    }

    #[test]
    fn deleting_what_the_previous_release_applied_is_fine() {
        let previous = release(vec![cm("p/0000_50_a_00.yaml", "old", false)]);
        let new = release(vec![cm("n/0000_50_a_00.yaml", "old", true)]);
        assert!(check(&new, &previous).is_empty());
    }

    fn binding(file: &str, kind: &str, name: &str, role: &str, delete: bool) -> Manifest {
        let (role_kind, ns) = if kind == "RoleBinding" {
            ("Role", "  namespace: ns\n")
        } else {
            ("ClusterRole", "")
        };
        let annotations = if delete {
            "  annotations:\n    release.openshift.io/delete: \"true\"\n"
        } else {
            ""
        };
        manifest(
            file,
            &format!(
                "apiVersion: rbac.authorization.k8s.io/v1\nkind: {kind}\nmetadata:\n  name: {name}\n{ns}{annotations}roleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: {role_kind}\n  name: {role}\nsubjects: []\n"
            ),
        )
    }

    #[test]
    fn a_binding_whose_role_changes_under_its_name_is_refused_by_the_server() {
        for kind in ["ClusterRoleBinding", "RoleBinding"] {
            let previous = release(vec![binding(
                "p/0000_00_a_04.yaml",
                kind,
                "op",
                "admin",
                false,
            )]);
            let new = release(vec![binding(
                "n/0000_00_a_04.yaml",
                kind,
                "op",
                "least",
                false,
            )]);
            let found = check(&new, &previous);
            assert_eq!(rules(&found), [IMMUTABLE_ROLEREF], "{kind}");
            let d = &found[0];
            assert_eq!(d.location.file, std::path::Path::new("n/0000_00_a_04.yaml"));
            assert!(
                d.message.contains("binds Role least")
                    || d.message.contains("binds ClusterRole least"),
                "{}",
                d.message
            );
            assert!(
                d.message.contains("bound ClusterRole admin")
                    || d.message.contains("bound Role admin"),
                "{}",
                d.message
            );
            assert!(d.message.contains("422"), "{}", d.message);
            assert!(d.message.contains("p/0000_00_a_04.yaml"), "{}", d.message);
            assert!(
                d.help
                    .as_deref()
                    .unwrap()
                    .contains("delete manifest ordered after")
            );
        }
    }

    #[test]
    fn the_same_role_a_new_name_or_a_deleted_binding_is_fine() {
        let previous = release(vec![binding(
            "p/0000_00_a_04.yaml",
            "ClusterRoleBinding",
            "op",
            "admin",
            false,
        )]);
        // The same roleRef (subjects may change).
        let same = release(vec![binding(
            "n/0000_00_a_04.yaml",
            "ClusterRoleBinding",
            "op",
            "admin",
            false,
        )]);
        assert!(check(&same, &previous).is_empty());
        // The migration: a new binding under the new role's name, the old one deleted.
        let migrated = release(vec![
            binding(
                "n/0000_00_a_04.yaml",
                "ClusterRoleBinding",
                "least",
                "least",
                false,
            ),
            binding(
                "n/0000_00_a_05.yaml",
                "ClusterRoleBinding",
                "op",
                "other",
                true,
            ),
        ]);
        assert!(check(&migrated, &previous).is_empty());
    }

    #[test]
    fn stale_only_across_minor_or_major() {
        let previous = |v| versioned(release(vec![cm("p/0000_50_a_00.yaml", "old", true)]), v);
        let new = |v| versioned(release(vec![cm("n/0000_50_a_00.yaml", "old", true)]), v);
        assert_eq!(
            rules(&check(&new("1.3.0"), &previous("1.2.5"))),
            [STALE_DELETE_MANIFEST]
        );
        assert_eq!(
            rules(&check(&new("2.0.0"), &previous("1.9.0"))),
            [STALE_DELETE_MANIFEST]
        );
        assert!(check(&new("1.2.6"), &previous("1.2.5")).is_empty());
        // Without versions nothing can be said.
        let unversioned = release(vec![cm("p/0000_50_a_00.yaml", "old", true)]);
        assert!(check(&unversioned.clone(), &unversioned).is_empty());
    }
}
