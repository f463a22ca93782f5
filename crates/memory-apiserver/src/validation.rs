//! Validation that kube-apiserver performs on every write and that clients must handle:
//! object names (DNS-1123 label / subdomain / path segment) and immutable fields (422).

use serde_json::Value;

use super::errors::{ApiError, Cause};
use super::resources::ResourceInfo;

const SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";

fn is_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

fn is_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(is_label)
}

/// Validate `name` for a type; `Err` carries the 422 cause.
pub fn check_name(info: &ResourceInfo, name: &str) -> Result<(), Cause> {
    let v = Value::String(name.to_string());
    match (info.group.as_str(), info.kind.as_str()) {
        ("", "Namespace") | ("", "Service") => {
            if !is_label(name) {
                return Err(Cause::invalid("metadata.name", &v, LABEL_MSG));
            }
        }
        ("rbac.authorization.k8s.io", _) => {
            if name.is_empty()
                || name == "."
                || name == ".."
                || name.contains('/')
                || name.contains('%')
            {
                return Err(Cause::invalid(
                    "metadata.name",
                    &v,
                    "may not be '.' or '..' and may not contain '/' or '%'",
                ));
            }
        }
        _ => {
            if !is_subdomain(name) {
                return Err(Cause::invalid("metadata.name", &v, SUBDOMAIN_MSG));
            }
        }
    }
    Ok(())
}

fn is_label_value(v: &str) -> bool {
    v.is_empty()
        || (v.len() <= 63
            && v.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
            && v.as_bytes()[0].is_ascii_alphanumeric()
            && v.as_bytes()[v.len() - 1].is_ascii_alphanumeric())
}

fn is_qualified_name(k: &str) -> bool {
    let (prefix, name) = match k.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, k),
    };
    prefix.is_none_or(|p| !p.is_empty() && is_subdomain(p))
        && !name.is_empty()
        && is_label_value(name)
}

/// Label keys and values, annotation keys and finalizer names (422 causes).
pub fn check_metadata(obj: &Value) -> Vec<Cause> {
    let mut out = Vec::new();
    let map = |f: &str| {
        obj.pointer(&format!("/metadata/{f}"))
            .and_then(Value::as_object)
    };
    for (k, v) in map("labels").into_iter().flatten() {
        if !is_qualified_name(k) {
            out.push(Cause::invalid("metadata.labels", &Value::String(k.clone()), "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"));
        }
        match v.as_str() {
            Some(s) if is_label_value(s) => {}
            _ => out.push(Cause::invalid("metadata.labels", v, "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')")),
        }
    }
    for (k, v) in map("annotations").into_iter().flatten() {
        if !is_qualified_name(&k.to_ascii_lowercase()) {
            out.push(Cause::invalid(
                "metadata.annotations",
                &Value::String(k.clone()),
                "name part must consist of alphanumeric characters, '-', '_' or '.'",
            ));
        }
        if !v.is_string() {
            out.push(Cause::invalid(
                "metadata.annotations",
                v,
                "annotation values must be strings",
            ));
        }
    }
    for f in obj
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if !f
            .as_str()
            .is_some_and(|s| is_qualified_name(s) || s == "kubernetes")
        {
            out.push(Cause::invalid(
                "metadata.finalizers",
                f,
                "name is neither a standard finalizer name nor is it fully qualified",
            ));
        }
    }
    out
}

fn selector_matches(sel: &Value, labels: Option<&serde_json::Map<String, Value>>) -> bool {
    let get = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
    let ml = sel.get("matchLabels").and_then(Value::as_object);
    let ok_labels = ml.is_none_or(|m| m.iter().all(|(k, v)| get(k) == v.as_str()));
    let ok_exprs = sel
        .get("matchExpressions")
        .and_then(Value::as_array)
        .is_none_or(|es| {
            es.iter().all(|e| {
                let key = e.get("key").and_then(Value::as_str).unwrap_or("");
                let vals: Vec<&str> = e
                    .get("values")
                    .and_then(Value::as_array)
                    .map(|a| a.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                match e.get("operator").and_then(Value::as_str).unwrap_or("") {
                    "In" => get(key).is_some_and(|v| vals.contains(&v)),
                    "NotIn" => get(key).is_none_or(|v| !vals.contains(&v)),
                    "Exists" => get(key).is_some(),
                    "DoesNotExist" => get(key).is_none(),
                    _ => false,
                }
            })
        });
    ok_labels && ok_exprs
}

fn check_pod_spec(spec: Option<&Value>, field: &str, out: &mut Vec<Cause>) {
    let containers = spec
        .and_then(|s| s.get("containers"))
        .and_then(Value::as_array);
    if containers.is_none_or(Vec::is_empty) {
        out.push(Cause::required(&format!("{field}.containers"), ""));
    }
}

/// The validation kube-apiserver does on built-in kinds that clients commonly trip over:
/// ConfigMap/Secret data keys, workload selectors matching their template labels, pod templates
/// with at least one container. (Everything else about built-in specs is accepted.)
pub fn check_builtin(info: &ResourceInfo, obj: &Value) -> Vec<Cause> {
    let mut out = Vec::new();
    match (info.group.as_str(), info.kind.as_str()) {
        ("", "ConfigMap") | ("", "Secret") => {
            for f in ["data", "binaryData", "stringData"] {
                for k in obj
                    .get(f)
                    .and_then(Value::as_object)
                    .into_iter()
                    .flatten()
                    .map(|(k, _)| k)
                {
                    let ok = !k.is_empty()
                        && k.len() <= 253
                        && k.bytes()
                            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
                        && k != "."
                        && k != "..";
                    if !ok {
                        out.push(Cause::invalid(&format!("{f}[{k}]"), &Value::String(k.clone()), "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')"));
                    }
                }
            }
        }
        ("apps", "Deployment") | ("apps", "DaemonSet") | ("apps", "StatefulSet") => {
            let labels = obj
                .pointer("/spec/template/metadata/labels")
                .and_then(Value::as_object);
            match obj.pointer("/spec/selector") {
                None | Some(Value::Null) => out.push(Cause::required("spec.selector", "")),
                Some(sel) => {
                    let empty = sel
                        .get("matchLabels")
                        .and_then(Value::as_object)
                        .is_none_or(|m| m.is_empty())
                        && sel
                            .get("matchExpressions")
                            .and_then(Value::as_array)
                            .is_none_or(|a| a.is_empty());
                    if empty {
                        out.push(Cause::invalid(
                            "spec.selector",
                            sel,
                            "empty selector is invalid for deployment",
                        ));
                    } else if !selector_matches(sel, labels) {
                        out.push(Cause::invalid(
                            "spec.template.metadata.labels",
                            &labels
                                .map(|l| Value::Object(l.clone()))
                                .unwrap_or(Value::Null),
                            "`selector` does not match template `labels`",
                        ));
                    }
                }
            }
            check_pod_spec(
                obj.pointer("/spec/template/spec"),
                "spec.template.spec",
                &mut out,
            );
        }
        ("batch", "Job") => check_pod_spec(
            obj.pointer("/spec/template/spec"),
            "spec.template.spec",
            &mut out,
        ),
        ("batch", "CronJob") => check_pod_spec(
            obj.pointer("/spec/jobTemplate/spec/template/spec"),
            "spec.jobTemplate.spec.template.spec",
            &mut out,
        ),
        ("", "Pod") => check_pod_spec(obj.get("spec"), "spec", &mut out),
        _ => {}
    }
    out
}

/// Fields that may not change after creation, per type (JSON pointers).
fn immutable_fields(info: &ResourceInfo) -> &'static [&'static str] {
    match (info.group.as_str(), info.kind.as_str()) {
        ("apps", "Deployment") | ("apps", "DaemonSet") => &["/spec/selector"],
        ("apps", "StatefulSet") => &[
            "/spec/selector",
            "/spec/serviceName",
            "/spec/volumeClaimTemplates",
            "/spec/podManagementPolicy",
        ],
        ("batch", "Job") => &["/spec/selector", "/spec/template", "/spec/completionMode"],
        ("", "Service") => &["/spec/clusterIP"],
        ("policy", "PodDisruptionBudget") => &[],
        ("rbac.authorization.k8s.io", "RoleBinding")
        | ("rbac.authorization.k8s.io", "ClusterRoleBinding") => &["/roleRef"],
        ("apiextensions.k8s.io", "CustomResourceDefinition") => {
            &["/spec/scope", "/spec/group", "/spec/names/plural"]
        }
        _ => &[],
    }
}

/// The metadata a write to the `/status` subresource may change besides status. Most kinds
/// reset all of it (like `ResetObjectMetaForStatus`), but the status strategies of the workload
/// kinds only reset the spec — and, for a Deployment, its labels: that is how the deployment
/// controller sets `deployment.kubernetes.io/revision` without moving the generation.
pub fn status_writable_metadata(info: &ResourceInfo) -> &'static [&'static str] {
    if info.custom {
        return &[];
    }
    match (info.group.as_str(), info.kind.as_str()) {
        ("apps", "Deployment") => &["annotations", "finalizers", "ownerReferences"],
        ("apps", "StatefulSet" | "DaemonSet") | ("batch", "Job") => {
            &["labels", "annotations", "finalizers", "ownerReferences"]
        }
        _ => &[],
    }
}

/// 422 when an update changes an immutable field (or data of an `immutable: true` ConfigMap/Secret).
pub fn check_immutable(info: &ResourceInfo, old: &Value, new: &Value) -> Result<(), ApiError> {
    let name = old
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let mut causes = Vec::new();
    // A Job's `spec.managedBy` cannot be set later either (the others are always set by kube's
    // defaulting, which this server does not do, so only a change of a set value counts).
    let from_unset = !info.custom && info.group == "batch" && info.kind == "Job";
    let unset_too: &[&str] = if from_unset {
        &["/spec/managedBy"]
    } else {
        &[]
    };
    for p in immutable_fields(info).iter().chain(unset_too) {
        let (o, n) = (old.pointer(p), new.pointer(p));
        if (o.is_some() || unset_too.contains(p)) && o != n {
            let field = p.trim_start_matches('/').replace('/', ".");
            causes.push(Cause::invalid(
                &field,
                n.unwrap_or(&Value::Null),
                "field is immutable",
            ));
        }
    }
    if info.group.is_empty()
        && matches!(info.kind.as_str(), "ConfigMap" | "Secret")
        && old.get("immutable") == Some(&Value::Bool(true))
    {
        for f in ["data", "binaryData", "immutable"] {
            if old.get(f) != new.get(f) {
                causes.push(Cause::forbidden(
                    f,
                    "field is immutable when `immutable` is set",
                ));
            }
        }
    }
    if causes.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid(&info.group, &info.kind, name, causes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names() {
        let cm = &super::super::resources::builtins()[1];
        assert!(check_name(cm, "a.b-c").is_ok());
        assert!(check_name(cm, "Bad_Name").is_err());
        let ns = &super::super::resources::builtins()[0];
        assert!(check_name(ns, "a.b").is_err());
    }

    #[test]
    fn builtin_rules() {
        let b = super::super::resources::builtins();
        let find = |k: &str| b.iter().find(|i| i.kind == k).unwrap();
        assert_eq!(
            check_builtin(
                find("ConfigMap"),
                &json!({"data": {"ok.key": "", "bad key": ""}})
            )
            .len(),
            1
        );
        let dep = |sel: Value| json!({"spec": {"selector": sel, "template": {"metadata": {"labels": {"app": "a"}}, "spec": {"containers": [{"name": "c"}]}}}});
        assert!(
            check_builtin(
                find("Deployment"),
                &dep(json!({"matchLabels": {"app": "a"}}))
            )
            .is_empty()
        );
        assert_eq!(
            check_builtin(
                find("Deployment"),
                &dep(json!({"matchLabels": {"app": "b"}}))
            )
            .len(),
            1
        );
        assert!(
            check_builtin(
                find("Deployment"),
                &dep(
                    json!({"matchExpressions": [{"key": "app", "operator": "In", "values": ["a"]}]})
                )
            )
            .is_empty()
        );
    }

    #[test]
    fn labels_and_finalizers() {
        assert!(check_metadata(&json!({"metadata": {"labels": {"app.kubernetes.io/name": "x", "a": ""}, "finalizers": ["example.com/f", "foregroundDeletion"]}})).is_empty());
        assert_eq!(
            check_metadata(&json!({"metadata": {"labels": {"a": "bad value"}}})).len(),
            1
        );
        assert_eq!(
            check_metadata(&json!({"metadata": {"labels": {"-a": "x"}}})).len(),
            1
        );
    }

    #[test]
    fn job_template_immutable() {
        let job = super::super::resources::builtins()
            .into_iter()
            .find(|i| i.kind == "Job")
            .unwrap();
        let old = json!({"metadata": {"name": "j"}, "spec": {"template": {"a": 1}}});
        let new = json!({"metadata": {"name": "j"}, "spec": {"template": {"a": 2}}});
        let e = check_immutable(&job, &old, &new).unwrap_err();
        assert_eq!(e.code, 422);
        assert!(
            e.message.contains("spec.template: Invalid value"),
            "{}",
            e.message
        );
    }
}
