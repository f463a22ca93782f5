//! Printing [`Rbac`]: multi-document YAML with a comment on every rule saying why it is
//! needed, or the same objects as a JSON `List` (`kubectl apply -f` takes either).
//!
//! The objects: ClusterRole and ClusterRoleBinding `<name>`, Role and RoleBinding `<name>` in
//! the operator's namespace (and in its state namespace when that is another), every binding
//! to the operator's ServiceAccount. Both renderings
//! come from [`objects`]; the YAML is written by hand (no YAML serializer writes comments),
//! quoting every scalar that is not plainly a name. The output depends only on the input.

use serde_json::{Value, json};

use super::{Rbac, Rule};

const API_VERSION: &str = "rbac.authorization.k8s.io/v1";

/// The objects to apply, in order: ClusterRole, ClusterRoleBinding, then Role and RoleBinding
/// per namespace.
pub fn objects(rbac: &Rbac) -> Vec<Value> {
    let o = &rbac.options;
    let subjects = json!([{
        "kind": "ServiceAccount",
        "name": o.service_account.name,
        "namespace": o.service_account.namespace,
    }]);
    let role_ref =
        |kind: &str| json!({"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": o.name});
    let mut objects = vec![
        json!({
            "apiVersion": API_VERSION, "kind": "ClusterRole",
            "metadata": {"name": o.name},
            "rules": rbac.cluster_rules.iter().map(rule_value).collect::<Vec<_>>(),
        }),
        json!({
            "apiVersion": API_VERSION, "kind": "ClusterRoleBinding",
            "metadata": {"name": o.name},
            "roleRef": role_ref("ClusterRole"),
            "subjects": subjects,
        }),
    ];
    for (namespace, rules) in &rbac.namespace_rules {
        objects.push(json!({
            "apiVersion": API_VERSION, "kind": "Role",
            "metadata": {"name": o.name, "namespace": namespace},
            "rules": rules.iter().map(rule_value).collect::<Vec<_>>(),
        }));
        objects.push(json!({
            "apiVersion": API_VERSION, "kind": "RoleBinding",
            "metadata": {"name": o.name, "namespace": namespace},
            "roleRef": role_ref("Role"),
            "subjects": subjects,
        }));
    }
    objects
}

fn rule_value(rule: &Rule) -> Value {
    let mut v = json!({
        "apiGroups": [rule.api_group],
        "resources": [rule.resource],
        "verbs": rule.verbs.iter().map(|v| v.as_str()).collect::<Vec<_>>(),
    });
    if !rule.resource_names.is_empty() {
        v["resourceNames"] = json!(rule.resource_names);
    }
    v
}

/// The objects as a JSON `List`, pretty-printed, with a final newline.
pub fn json(rbac: &Rbac) -> String {
    let list = json!({"apiVersion": "v1", "kind": "List", "items": objects(rbac)});
    format!(
        "{}\n",
        serde_json::to_string_pretty(&list).unwrap_or_default()
    )
}

/// The objects as multi-document YAML with comments.
pub fn yaml(rbac: &Rbac) -> String {
    let o = &rbac.options;
    let sa = format!("{}/{}", o.service_account.namespace, o.service_account.name);
    let mut out = String::new();
    let w = &mut out;
    line(
        w,
        &format!(
            "# RBAC of `cvo operator` for release {}, printed by `cvo rbac`: apply it as a cluster",
            comment(&rbac.version)
        ),
    );
    line(
        w,
        &format!(
            "# administrator (kubectl apply -f) for the ServiceAccount {}.",
            comment(&sa)
        ),
    );
    if o.by_name {
        line(
            w,
            "# get/create/patch/delete are restricted to the release's objects by name: print and apply",
        );
        line(
            w,
            "# it again for each new release, before the operator runs it (or use --no-by-name).",
        );
    } else {
        line(
            w,
            "# --no-by-name: the release's kinds are granted for every name (escalate, bind and the",
        );
        line(w, "# operator's own objects stay restricted by name).");
    }
    if rbac.ships_rbac {
        line(
            w,
            "# The release ships RBAC objects: escalate and bind are granted on those roles only.",
        );
    }
    header(w, "ClusterRole", &o.name, None);
    rules(w, &rbac.cluster_rules);
    line(w, "---");
    header(w, "ClusterRoleBinding", &o.name, None);
    role_ref_and_subjects(w, "ClusterRole", rbac);
    for (namespace, namespace_rules) in &rbac.namespace_rules {
        let what = match (*namespace == o.namespace, *namespace == o.state_namespace) {
            (true, true) => {
                "the operator's namespace: its leader-election Lease and deletion record"
            }
            (true, false) => "the operator's namespace: its leader-election Lease",
            _ => "the operator's state namespace: its deletion record",
        };
        line(w, "---");
        line(w, &format!("# In {what} ({}).", comment(namespace)));
        header(w, "Role", &o.name, Some(namespace));
        rules(w, namespace_rules);
        line(w, "---");
        header(w, "RoleBinding", &o.name, Some(namespace));
        role_ref_and_subjects(w, "Role", rbac);
    }
    out
}

fn line(out: &mut String, text: &str) {
    out.push_str(text);
    out.push('\n');
}

fn header(out: &mut String, kind: &str, name: &str, namespace: Option<&str>) {
    line(out, &format!("apiVersion: {API_VERSION}"));
    line(out, &format!("kind: {kind}"));
    line(out, "metadata:");
    line(out, &format!("  name: {}", scalar(name)));
    if let Some(ns) = namespace {
        line(out, &format!("  namespace: {}", scalar(ns)));
    }
}

fn role_ref_and_subjects(out: &mut String, kind: &str, rbac: &Rbac) {
    let o = &rbac.options;
    line(out, "roleRef:");
    line(out, "  apiGroup: rbac.authorization.k8s.io");
    line(out, &format!("  kind: {kind}"));
    line(out, &format!("  name: {}", scalar(&o.name)));
    line(out, "subjects:");
    line(out, "- kind: ServiceAccount");
    line(out, &format!("  name: {}", scalar(&o.service_account.name)));
    line(
        out,
        &format!("  namespace: {}", scalar(&o.service_account.namespace)),
    );
}

fn rules(out: &mut String, rules: &[Rule]) {
    if rules.is_empty() {
        line(out, "rules: []");
        return;
    }
    line(out, "rules:");
    for rule in rules {
        for why in &rule.why {
            line(out, &format!("# {}", why.text()));
        }
        if let Some(note) = &rule.note {
            line(out, &format!("# NOTE: {}", comment(note)));
        }
        line(out, &format!("- apiGroups: [{}]", scalar(&rule.api_group)));
        line(out, &format!("  resources: [{}]", scalar(&rule.resource)));
        if !rule.resource_names.is_empty() {
            line(out, "  resourceNames:");
            for name in &rule.resource_names {
                let mut item = format!("  - {}", scalar(name));
                if let Some(objects) = rule.objects.get(name) {
                    let objects: Vec<&str> = objects.iter().map(String::as_str).collect();
                    item.push_str(&format!("  # {}", comment(&objects.join(", "))));
                }
                line(out, &item);
            }
        }
        let verbs: Vec<&str> = rule.verbs.iter().map(|v| v.as_str()).collect();
        line(out, &format!("  verbs: [{}]", verbs.join(", ")));
    }
}

/// Text safe inside a `#` comment: one line.
fn comment(text: &str) -> String {
    crate::diagnostic::excerpt(text)
}

/// A YAML scalar: plain when it is plainly a name (starts with a letter, then letters, digits,
/// `-`, `.`, `_`, `/`, and is no YAML 1.1 keyword), else double-quoted (JSON string syntax,
/// which YAML reads the same).
pub fn scalar(text: &str) -> String {
    const KEYWORDS: &[&str] = &["true", "false", "yes", "no", "on", "off", "null", "y", "n"];
    let plain = text.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_' | '/'))
        && !KEYWORDS.contains(&text.to_ascii_lowercase().as_str());
    if plain {
        text.to_owned()
    } else {
        serde_json::to_string(text).unwrap_or_default()
    }
}
