//! Whether the release itself grants what the dry run was forbidden (403): a release that adds
//! objects usually adds, at an earlier run level, the RBAC its operator needs for them — which
//! a dry run cannot see, since it applies nothing. Such a manifest is not a missing
//! permission; like an object in a namespace the release creates, it is planned without the
//! server's check (a note says so).
//!
//! The refusal is read from kube-apiserver's words (`User "U" cannot VERB resource "R" in API
//! group "G" in the namespace "NS"`), and granted only by a Role or ClusterRole of the
//! release, bound to that user or service account by a binding of the release, both applied
//! (not deleted) at a run level before the manifest's, with a rule naming the group, the
//! resource, the verb and (when it lists names) the object. Anything else — a message in other
//! words, a group subject, an aggregated or pre-existing role — is not granted (fail closed).

use serde_json::Value;

use crate::release::{DeleteIntent, Manifest, Release};

const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// What the server refused, from its message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Forbidden {
    pub user: String,
    pub verb: String,
    pub resource: String,
    pub group: String,
    /// `None`: at the cluster scope.
    pub namespace: Option<String>,
}

/// Reads kube-apiserver's 403 message; `None` when it is not in those words.
pub fn parse(message: &str) -> Option<Forbidden> {
    let quoted = |s: &str, after: &str| -> Option<(String, usize)> {
        let start = s.find(after)? + after.len();
        let end = s[start..].find('"')? + start;
        Some((s[start..end].to_owned(), end + 1))
    };
    let (user, at) = quoted(message, "User \"")?;
    let rest = &message[at..];
    let rest = rest.strip_prefix(" cannot ")?;
    let (verb, rest) = rest.split_once(' ')?;
    let (resource, at) = quoted(rest, "resource \"")?;
    let rest = &rest[at..];
    let (group, at) = quoted(rest, " in API group \"")?;
    let rest = &rest[at..];
    let namespace = quoted(rest, " in the namespace \"").map(|(ns, _)| ns);
    Some(Forbidden {
        user,
        verb: verb.to_owned(),
        resource,
        group,
        namespace,
    })
}

/// The Role or ClusterRole binding of `release` that grants `forbidden` for `manifest` (at a
/// run level before it), named `Kind name`.
pub fn granted_by(release: &Release, manifest: &Manifest, forbidden: &Forbidden) -> Option<String> {
    let runlevel = manifest.order.as_ref()?.runlevel;
    let earlier = |m: &&Manifest| {
        m.intent == DeleteIntent::Apply
            && m.id.group == RBAC_GROUP
            && m.order.as_ref().is_some_and(|o| o.runlevel < runlevel)
    };
    let rbac: Vec<&Manifest> = release.manifests.iter().filter(earlier).collect();
    rbac.iter()
        .filter(|b| b.id.kind == "ClusterRoleBinding" || b.id.kind == "RoleBinding")
        .filter(|b| b.id.kind == "ClusterRoleBinding" || b.id.namespace == forbidden.namespace)
        .filter(|b| binds(&b.object, b.id.namespace.as_deref(), &forbidden.user))
        .find(|b| {
            let (kind, name) = match (
                b.object.pointer("/roleRef/kind").and_then(Value::as_str),
                b.object.pointer("/roleRef/name").and_then(Value::as_str),
            ) {
                (Some(k), Some(n)) => (k, n),
                _ => return false,
            };
            rbac.iter().any(|r| {
                r.id.kind == kind
                    && r.id.name == name
                    && (kind == "ClusterRole" || r.id.namespace == b.id.namespace)
                    && allows(&r.object, forbidden, &manifest.id.name)
            })
        })
        .map(|b| format!("{} {}", b.id.kind, b.id.name))
}

/// Whether binding `object` (in `namespace`, for a RoleBinding) has `user` among its
/// subjects: `system:serviceaccount:NS:NAME` as a ServiceAccount, anyone else as a User.
fn binds(object: &Value, namespace: Option<&str>, user: &str) -> bool {
    let account = user
        .strip_prefix("system:serviceaccount:")
        .and_then(|rest| rest.split_once(':'));
    object
        .get("subjects")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|s| {
            let field = |f: &str| s.get(f).and_then(Value::as_str);
            match (field("kind"), account) {
                (Some("ServiceAccount"), Some((ns, name))) => {
                    field("name") == Some(name) && field("namespace").or(namespace) == Some(ns)
                }
                (Some("User"), None) => field("name") == Some(user),
                _ => false,
            }
        })
}

/// Whether a rule of role `object` allows `forbidden` on the object `name`.
fn allows(object: &Value, forbidden: &Forbidden, name: &str) -> bool {
    let has = |rule: &Value, field: &str, want: &str| {
        rule.get(field)
            .and_then(Value::as_array)
            .is_some_and(|l| l.iter().any(|v| v == want || v == "*"))
    };
    object
        .get("rules")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|rule| {
            let names = rule.get("resourceNames").and_then(Value::as_array);
            has(rule, "apiGroups", &forbidden.group)
                && has(rule, "resources", &forbidden.resource)
                && has(rule, "verbs", &forbidden.verb)
                && names.is_none_or(|n| n.is_empty() || n.iter().any(|v| v == name))
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::release::LoadOptions;

    const MESSAGE: &str = r#"apply rejected by the server (403 Forbidden): configmaps "added" is forbidden: User "system:serviceaccount:cv:op" cannot patch resource "configmaps" in API group "" in the namespace "cfg""#;

    #[test]
    fn kube_apiservers_words_are_read_and_others_are_not() {
        assert_eq!(
            parse(MESSAGE),
            Some(Forbidden {
                user: "system:serviceaccount:cv:op".into(),
                verb: "patch".into(),
                resource: "configmaps".into(),
                group: String::new(),
                namespace: Some("cfg".into()),
            })
        );
        let cluster = r#"User "alice" cannot delete resource "clusterroles" in API group "rbac.authorization.k8s.io" at the cluster scope"#;
        assert_eq!(parse(cluster).unwrap().namespace, None);
        assert_eq!(parse("forbidden: no"), None);
    }

    fn release(files: &[(&str, &str)]) -> Release {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in files {
            std::fs::write(dir.path().join(name), text).unwrap();
        }
        crate::release::load(dir.path(), &LoadOptions::default()).unwrap()
    }

    const ROLE: &str = "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {name: op, namespace: cfg}\nrules:\n- apiGroups: [\"\"]\n  resources: [configmaps]\n  resourceNames: [added]\n  verbs: [get, patch]\n";
    const BINDING: &str = "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {name: op, namespace: cfg}\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: op}\nsubjects:\n- {kind: ServiceAccount, name: op, namespace: cv}\n";
    const CM: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: added, namespace: cfg}\n";

    #[test]
    fn a_role_and_binding_of_an_earlier_run_level_grant_it_and_nothing_else_does() {
        let forbidden = parse(MESSAGE).unwrap();
        let rel = release(&[
            ("0000_10_a_00_role.yaml", ROLE),
            ("0000_10_a_01_binding.yaml", BINDING),
            ("0000_20_b_00_cm.yaml", CM),
        ]);
        let cm = rel
            .manifests
            .iter()
            .find(|m| m.id.kind == "ConfigMap")
            .unwrap();
        assert_eq!(
            granted_by(&rel, cm, &forbidden).as_deref(),
            Some("RoleBinding op")
        );
        // The same run level: the order between them is not known.
        let rel = release(&[
            ("0000_20_a_00_role.yaml", ROLE),
            ("0000_20_a_01_binding.yaml", BINDING),
            ("0000_20_b_00_cm.yaml", CM),
        ]);
        let cm = rel
            .manifests
            .iter()
            .find(|m| m.id.kind == "ConfigMap")
            .unwrap();
        assert_eq!(granted_by(&rel, cm, &forbidden), None);
        // Another verb, another object, another account: not granted.
        let rel = release(&[
            ("0000_10_a_00_role.yaml", ROLE),
            ("0000_10_a_01_binding.yaml", BINDING),
            ("0000_20_b_00_cm.yaml", CM),
        ]);
        let cm = rel
            .manifests
            .iter()
            .find(|m| m.id.kind == "ConfigMap")
            .unwrap();
        let delete = Forbidden {
            verb: "delete".into(),
            ..forbidden.clone()
        };
        assert_eq!(granted_by(&rel, cm, &delete), None);
        let other = Forbidden {
            user: "system:serviceaccount:cv:someone".into(),
            ..forbidden.clone()
        };
        assert_eq!(granted_by(&rel, cm, &other), None);
        let elsewhere = Forbidden {
            namespace: Some("other".into()),
            ..forbidden
        };
        assert_eq!(granted_by(&rel, cm, &elsewhere), None);
    }
}
