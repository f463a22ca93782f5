//! Checks of an update: the new release against the release it updates from (`--previous`).
//!
//! Rules `delete-unknown-object` (a delete manifest for an object the previous release never
//! had), `removed-without-delete` (an object dropped without a delete manifest is orphaned on
//! every cluster) and `stale-delete-manifest` (a delete manifest carried over a major or minor
//! update: every cluster that went through the previous release already deleted the object).

use std::collections::HashMap;

use crate::diagnostic::Diagnostic;
use crate::release::{DELETE_ANNOTATION, DeleteIntent, Manifest, ObjectId, Release};

use super::finding;
use super::rules::{DELETE_UNKNOWN_OBJECT, REMOVED_WITHOUT_DELETE, STALE_DELETE_MANIFEST};

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
