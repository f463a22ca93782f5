//! Deletion-order hazards: deleting a container (a Namespace, a CustomResourceDefinition)
//! while the release still needs what it contains, or before what it contains is gone.
//!
//! Rules `namespace-deleted-in-use`, `crd-deleted-in-use` and `crd-deleted-before-crs`.
//! With the previous release ([`check_update`]), a CRD it applied that this release drops
//! altogether (no manifest, not even a delete manifest, in any profile or feature set) while
//! this release still applies resources of its kind is `crd-deleted-in-use` too: nothing
//! serves the kind once the CRD is removed by hand or by a later cleanup.
//! A CRD named `<plural>.<group>` serves custom resources of `group` whose kind is the CRD's
//! `spec.names.kind`; delete manifests usually carry no spec, so without it the kind is
//! matched by its plural (`Widget` → `widgets`, `Policy` → `policies`, `Ingress` →
//! `ingresses`).

use crate::diagnostic::Diagnostic;
use crate::release::{DeleteIntent, Manifest, Release};

use super::finding;
use super::rules::{CRD_DELETED_BEFORE_CRS, CRD_DELETED_IN_USE, NAMESPACE_DELETED_IN_USE};

/// How many objects a finding names before it says "and N more".
const SHOW: usize = 3;

pub fn check(release: &Release) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    let applied: Vec<(usize, &Manifest)> = release
        .manifests
        .iter()
        .enumerate()
        .filter(|(_, m)| m.intent == DeleteIntent::Apply)
        .collect();
    let deleted: Vec<(usize, &Manifest)> = release
        .manifests
        .iter()
        .enumerate()
        .filter(|(_, m)| m.is_delete())
        .collect();

    for &(position, m) in &deleted {
        if m.id.group.is_empty() && m.id.kind == "Namespace" {
            let users: Vec<&Manifest> = applied
                .iter()
                .map(|(_, a)| *a)
                .filter(|a| a.id.namespace.as_deref() == Some(m.id.name.as_str()))
                .collect();
            if !users.is_empty() {
                out.push(finding(
                    NAMESPACE_DELETED_IN_USE,
                    m,
                    format!(
                        "this namespace is deleted while the release still applies {} object(s) in it: {}; deleting the namespace deletes them, and creating them in a terminating namespace is forbidden",
                        users.len(),
                        list(&users)
                    ),
                    "stop deleting the namespace, or turn the manifests of the objects in it into delete manifests",
                ));
            }
        }
        if m.id.is_crd() {
            let Some(served) = ServedKind::of(m) else {
                continue;
            };
            let in_use: Vec<&Manifest> = applied
                .iter()
                .map(|(_, a)| *a)
                .filter(|a| served.matches(a))
                .collect();
            if !in_use.is_empty() {
                out.push(finding(
                    CRD_DELETED_IN_USE,
                    m,
                    format!(
                        "this CRD is deleted while the release still applies {} resource(s) of its kind: {}; they are deleted with it and cannot be created again",
                        in_use.len(),
                        list(&in_use)
                    ),
                    "stop deleting the CRD, or turn the manifests of its resources into delete manifests",
                ));
            }
            let too_late: Vec<&Manifest> = deleted
                .iter()
                .filter(|(cr_position, cr)| {
                    served.matches(cr) && not_after(position, m, *cr_position, cr)
                })
                .map(|(_, cr)| *cr)
                .collect();
            if !too_late.is_empty() {
                out.push(finding(
                    CRD_DELETED_BEFORE_CRS,
                    m,
                    format!(
                        "this CRD is deleted before or at the same point as {} resource(s) of its kind: {}; once the CRD is going away, the finalizers of its resources may never be processed and the deletion sticks",
                        too_late.len(),
                        list(&too_late)
                    ),
                    "delete the CRD in a later run level than its custom resources, or in a later release once they are gone",
                ));
            }
        }
    }
    out
}

/// A CRD `previous` applied that `release` drops (no manifest of it at all, kept or left out)
/// while `release` applies resources of its kind: one finding per resource manifest, naming
/// both files.
pub fn check_update(release: &Release, previous: &Release) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for old in previous
        .manifests
        .iter()
        .filter(|m| m.intent == DeleteIntent::Apply && m.id.is_crd())
    {
        if release.all_manifests().any(|m| m.id == old.id) {
            continue;
        }
        let Some(served) = ServedKind::of(old) else {
            continue;
        };
        for user in release
            .manifests
            .iter()
            .filter(|m| m.intent == DeleteIntent::Apply && served.matches(m))
        {
            out.push(finding(
                CRD_DELETED_IN_USE,
                user,
                format!(
                    "this release applies a resource of a kind whose CustomResourceDefinition {} it dropped (the previous release applied it at {}): nothing in the release serves the kind, so applying this fails once the CRD is gone",
                    old.id.name, old.location
                ),
                "keep applying the CRD, or turn this manifest into a delete manifest ordered before the CRD's removal",
            ));
        }
    }
    out
}

/// True when the CRD deletion (at `crd_position`) is not strictly after the CR deletion:
/// the same or an earlier run level when both files have one, otherwise an earlier or the
/// same place in apply (file) order.
fn not_after(crd_position: usize, crd: &Manifest, cr_position: usize, cr: &Manifest) -> bool {
    match (&crd.order, &cr.order) {
        (Some(a), Some(b)) => a.runlevel <= b.runlevel,
        _ => crd_position <= cr_position,
    }
}

/// The custom resources a CRD serves: its group, and its kind or plural.
struct ServedKind {
    group: String,
    plural: String,
    kind: Option<String>,
}

impl ServedKind {
    fn of(crd: &Manifest) -> Option<Self> {
        let (plural, group) = crd.id.name.split_once('.')?;
        let spec_group = crd.object.pointer("/spec/group").and_then(|g| g.as_str());
        let kind = crd
            .object
            .pointer("/spec/names/kind")
            .and_then(|k| k.as_str())
            .map(str::to_owned);
        Some(ServedKind {
            group: spec_group.unwrap_or(group).to_owned(),
            plural: crd
                .object
                .pointer("/spec/names/plural")
                .and_then(|p| p.as_str())
                .unwrap_or(plural)
                .to_owned(),
            kind,
        })
    }

    fn matches(&self, m: &Manifest) -> bool {
        m.id.group == self.group
            && match &self.kind {
                Some(kind) => &m.id.kind == kind,
                None => plural_of(&m.id.kind) == self.plural,
            }
    }
}

/// The plural Kubernetes' own heuristic gives a kind (lower case).
fn plural_of(kind: &str) -> String {
    let lower = kind.to_lowercase();
    if lower.ends_with('s')
        || lower.ends_with('x')
        || lower.ends_with('z')
        || lower.ends_with("ch")
        || lower.ends_with("sh")
    {
        format!("{lower}es")
    } else if let Some(stem) = lower.strip_suffix('y')
        && !stem.ends_with(['a', 'e', 'i', 'o', 'u'])
    {
        format!("{stem}ies")
    } else {
        format!("{lower}s")
    }
}

/// `Kind ns/name (file:line), …` naming the first few objects.
fn list(objects: &[&Manifest]) -> String {
    let mut parts: Vec<String> = objects
        .iter()
        .take(SHOW)
        .map(|m| format!("{} ({})", m.id, m.location))
        .collect();
    if objects.len() > SHOW {
        parts.push(format!("and {} more", objects.len() - SHOW));
    }
    parts.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validate::testing::{manifest, release, rules};

    const DELETE: &str = "  annotations:\n    release.openshift.io/delete: \"true\"\n";

    fn ns(file: &str, delete: bool) -> Manifest {
        manifest(
            file,
            &format!(
                "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: old\n{}",
                if delete { DELETE } else { "" }
            ),
        )
    }

    fn cm(file: &str, name: &str, delete: bool) -> Manifest {
        manifest(
            file,
            &format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: old\n{}",
                if delete { DELETE } else { "" }
            ),
        )
    }

    fn crd(file: &str, with_kind: bool) -> Manifest {
        let spec = if with_kind {
            "spec:\n  group: example.com\n  names:\n    kind: Gadget\n    plural: gizmos\n"
        } else {
            ""
        };
        manifest(
            file,
            &format!(
                "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: gizmos.example.com\n{DELETE}{spec}"
            ),
        )
    }

    fn gadget(file: &str, delete: bool) -> Manifest {
        manifest(
            file,
            &format!(
                "apiVersion: example.com/v1\nkind: Gadget\nmetadata:\n  name: g\n{}",
                if delete { DELETE } else { "" }
            ),
        )
    }

    #[test]
    fn crd_dropped_from_the_release_while_its_resources_are_applied() {
        let applied_crd = || {
            manifest(
                "0000_50_gadgets_00_crd.yaml",
                "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: gizmos.example.com\nspec:\n  group: example.com\n  names:\n    kind: Gadget\n    plural: gizmos\n",
            )
        };
        let previous = release(vec![
            applied_crd(),
            gadget("0000_50_app_01_gadget.yaml", false),
        ]);
        let dropped = release(vec![gadget("0000_50_app_01_gadget.yaml", false)]);
        let found = check_update(&dropped, &previous);
        assert_eq!(rules(&found), [CRD_DELETED_IN_USE]);
        assert!(
            found[0].message.contains("gizmos.example.com"),
            "{}",
            found[0].message
        );
        assert!(
            found[0].message.contains("0000_50_gadgets_00_crd.yaml"),
            "{}",
            found[0].message
        );
        assert_eq!(
            found[0].location.file,
            std::path::Path::new("0000_50_app_01_gadget.yaml")
        );
        // Near misses: the CRD is still applied; the resource is deleted too.
        assert!(check_update(&previous, &previous).is_empty());
        let both_gone = release(vec![gadget("0000_50_app_01_gadget.yaml", true)]);
        assert!(check_update(&both_gone, &previous).is_empty());
    }

    #[test]
    fn plurals() {
        assert_eq!(plural_of("Widget"), "widgets");
        assert_eq!(plural_of("Policy"), "policies");
        assert_eq!(plural_of("Gateway"), "gateways");
        assert_eq!(plural_of("Ingress"), "ingresses");
        assert_eq!(plural_of("Mesh"), "meshes");
    }

    #[test]
    fn namespace_deleted_while_used() {
        let found = check(&release(vec![
            ns("0000_10_a_00_ns.yaml", true),
            cm("0000_10_a_01_cm.yaml", "x", false),
        ]));
        assert_eq!(rules(&found), [NAMESPACE_DELETED_IN_USE]);
        assert!(found[0].message.contains("ConfigMap old/x"));
        // Deleting the contents too is fine.
        let found = check(&release(vec![
            ns("0000_10_a_00_ns.yaml", true),
            cm("0000_10_a_01_cm.yaml", "x", true),
        ]));
        assert!(found.is_empty(), "{found:?}");
    }

    #[test]
    fn crd_deleted_while_used_by_kind_from_spec() {
        let found = check(&release(vec![
            crd("0000_90_a_00_crd.yaml", true),
            gadget("0000_50_a_00_cr.yaml", false),
        ]));
        assert_eq!(rules(&found), [CRD_DELETED_IN_USE]);
    }

    #[test]
    fn crd_deleted_at_the_same_runlevel_as_its_crs() {
        let found = check(&release(vec![
            crd("0000_50_a_00_crd.yaml", true),
            gadget("0000_50_b_00_cr.yaml", true),
        ]));
        assert_eq!(rules(&found), [CRD_DELETED_BEFORE_CRS]);
        let later = check(&release(vec![
            gadget("0000_50_b_00_cr.yaml", true),
            crd("0000_90_a_00_crd.yaml", true),
        ]));
        assert!(later.is_empty(), "{later:?}");
    }

    #[test]
    fn crd_without_spec_matches_by_plural_and_file_order_without_runlevels() {
        let widget_crd = manifest(
            "a-crd.yaml",
            &format!(
                "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: widgets.example.com\n{DELETE}"
            ),
        );
        let widget = manifest(
            "b-widget.yaml",
            &format!("apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\n{DELETE}"),
        );
        let found = check(&release(vec![widget_crd.clone(), widget.clone()]));
        assert_eq!(rules(&found), [CRD_DELETED_BEFORE_CRS]);
        let found = check(&release(vec![widget, widget_crd]));
        assert!(found.is_empty(), "{found:?}");
    }
}
