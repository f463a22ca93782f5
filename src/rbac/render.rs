//! Printing [`Rbac`]: multi-document YAML with a comment on every rule saying why it is
//! needed, or the same objects as a JSON `List` (`kubectl apply -f` takes either).
//!
//! The objects: ClusterRole and ClusterRoleBinding `<name>`, Role and RoleBinding `<name>` in
//! the operator's namespace (and in its state namespace when that is another), every binding
//! to the operator's ServiceAccount, all named `<name>` (a binding named after the role it
//! binds never changes its `roleRef`). For a release that uses cluster profiles every object
//! carries `include.release.openshift.io/<profile>: "true"` for each profile it was derived
//! for (no feature-set annotation: it belongs to every feature set). Both renderings
//! come from [`objects`]; the YAML is written by hand (no YAML serializer writes comments),
//! quoting every scalar that is not plainly a name. The output depends only on the input.

use serde_json::{Value, json};

use super::{Rbac, Rule};
use crate::release::{DEFAULT_FEATURE_SET, INCLUDE_PREFIX};

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
    let metadata = |namespace: Option<&str>| {
        let mut m = json!({"name": o.name});
        if let Some(ns) = namespace {
            m["namespace"] = json!(ns);
        }
        if !o.profiles.is_empty() {
            m["annotations"] = Value::Object(
                annotations(rbac)
                    .into_iter()
                    .map(|(k, v)| (k, json!(v)))
                    .collect(),
            );
        }
        m
    };
    let mut objects = vec![
        json!({
            "apiVersion": API_VERSION, "kind": "ClusterRole",
            "metadata": metadata(None),
            "rules": rbac.cluster_rules.iter().map(rule_value).collect::<Vec<_>>(),
        }),
        json!({
            "apiVersion": API_VERSION, "kind": "ClusterRoleBinding",
            "metadata": metadata(None),
            "roleRef": role_ref("ClusterRole"),
            "subjects": subjects,
        }),
    ];
    for (namespace, rules) in &rbac.namespace_rules {
        objects.push(json!({
            "apiVersion": API_VERSION, "kind": "Role",
            "metadata": metadata(Some(namespace)),
            "rules": rules.iter().map(rule_value).collect::<Vec<_>>(),
        }));
        objects.push(json!({
            "apiVersion": API_VERSION, "kind": "RoleBinding",
            "metadata": metadata(Some(namespace)),
            "roleRef": role_ref("Role"),
            "subjects": subjects,
        }));
    }
    objects
}

/// The annotations of every printed object: `include.release.openshift.io/<profile>: "true"`
/// for each profile the rules were derived for, sorted.
fn annotations(rbac: &Rbac) -> Vec<(String, &'static str)> {
    let mut profiles: Vec<&String> = rbac.options.profiles.iter().collect();
    profiles.sort();
    profiles.dedup();
    profiles
        .into_iter()
        .map(|p| (format!("{INCLUDE_PREFIX}{p}"), "true"))
        .collect()
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
            "# RBAC of `cvo operator` for release {}, printed by `cvo rbac`, for the ServiceAccount {}:",
            comment(&rbac.version),
            comment(&sa)
        ),
    );
    line(
        w,
        "# apply it as a cluster administrator (kubectl apply -f), or ship it in the release",
    );
    line(
        w,
        "# (docs/operator.md, \"Least-privilege RBAC\": binding another role under an existing",
    );
    line(
        w,
        "# binding's name fails, a binding's roleRef cannot change).",
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
    if !o.profiles.is_empty() {
        line(
            w,
            &format!(
                "# Derived for the cluster profile(s) {} (and annotated for them): what each of them needs.",
                comment(&o.profiles.join(", "))
            ),
        );
    }
    if o.feature_set != DEFAULT_FEATURE_SET {
        line(
            w,
            &format!(
                "# Derived for the feature set {}: a cluster in another feature set may need other rules.",
                comment(&o.feature_set)
            ),
        );
    }
    let annotations = annotations(rbac);
    let header = |w: &mut String, kind: &str, namespace: Option<&str>| {
        header(w, kind, &o.name, namespace, &annotations)
    };
    header(w, "ClusterRole", None);
    rules(w, &rbac.cluster_rules);
    line(w, "---");
    header(w, "ClusterRoleBinding", None);
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
        header(w, "Role", Some(namespace));
        rules(w, namespace_rules);
        line(w, "---");
        header(w, "RoleBinding", Some(namespace));
        role_ref_and_subjects(w, "Role", rbac);
    }
    out
}

fn line(out: &mut String, text: &str) {
    out.push_str(text);
    out.push('\n');
}

fn header(
    out: &mut String,
    kind: &str,
    name: &str,
    namespace: Option<&str>,
    annotations: &[(String, &str)],
) {
    line(out, &format!("apiVersion: {API_VERSION}"));
    line(out, &format!("kind: {kind}"));
    line(out, "metadata:");
    line(out, &format!("  name: {}", scalar(name)));
    if let Some(ns) = namespace {
        line(out, &format!("  namespace: {}", scalar(ns)));
    }
    if !annotations.is_empty() {
        line(out, "  annotations:");
        for (key, value) in annotations {
            line(out, &format!("    {}: {}", scalar(key), scalar(value)));
        }
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
