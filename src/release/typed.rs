//! Typed round-trip for built-in kinds: decode the manifest into the k8s-openapi struct and
//! encode it again, as OpenShift's CVO does by decoding into Go types.
//!
//! A real kube-apiserver rejects a server-side apply carrying a field the built-in schema
//! does not declare ("field not declared in schema"); real releases contain such fields (the
//! OpenShift corpus has ClusterRoleBindings with `userNames`). The round-trip drops them, and
//! [`round_trip`] names each dropped field so it can be reported as a warning. Kinds
//! k8s-openapi does not know (custom resources, other versions) pass through unchanged.

use k8s_openapi::Resource;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// The object to send, and the JSON paths of fields the typed struct dropped.
#[derive(Clone, Debug, PartialEq)]
pub struct RoundTrip {
    pub object: Value,
    /// Dropped fields as JSON-pointer-like paths (`/userNames`, `/spec/foo`).
    pub dropped: Vec<String>,
    /// The object went through its built-in type (a kind k8s-openapi knows): the server keeps
    /// it as a Go struct, where a zero value and an absent field are the same (`omitempty`).
    pub typed: bool,
}

/// The manifest does not decode into the built-in type: which field, and why, in the
/// release author's terms (no Rust type names).
#[derive(Debug, thiserror::Error)]
#[error("{}{message}, so it is not a valid {api_version} {kind}", path.as_deref().map(|p| format!("`{p}`: ")).unwrap_or_default())]
pub struct DecodeError {
    pub api_version: String,
    pub kind: String,
    /// The field as a dotted path (`spec.template.spec.containers[0].ports`), when known.
    pub path: Option<String>,
    pub message: String,
}

fn through<K: Resource + Serialize + DeserializeOwned>(
    object: &Value,
) -> Result<Value, DecodeError> {
    let error = |path: Option<String>, message: String| DecodeError {
        api_version: K::API_VERSION.to_owned(),
        kind: K::KIND.to_owned(),
        path,
        message,
    };
    let typed: K = serde_path_to_error::deserialize(object).map_err(|e| {
        let path = e.path().to_string();
        let path = (path != ".").then_some(path);
        error(path, plain_serde_message(&e.into_inner().to_string()))
    })?;
    serde_json::to_value(&typed).map_err(|e| error(None, plain_serde_message(&e.to_string())))
}

/// serde's wording (`invalid type: string "x", expected i32`) in the user's terms.
pub fn plain_serde_message(message: &str) -> String {
    let message = message.split(" at line ").next().unwrap_or(message);
    if let Some(field) = message
        .strip_prefix("missing field `")
        .and_then(|m| m.strip_suffix('`'))
    {
        return format!("the required field `{field}` is missing");
    }
    if let Some(rest) = message.strip_prefix("unknown variant ") {
        let (value, allowed) = rest.split_once(", expected ").unwrap_or((rest, ""));
        return format!(
            "{} is not an allowed value (allowed: {})",
            crate::diagnostic::excerpt(value),
            allowed.trim_start_matches("one of ")
        );
    }
    for prefix in ["invalid type: ", "invalid value: "] {
        if let Some(rest) = message.strip_prefix(prefix)
            && let Some((found, expected)) = rest.rsplit_once(", expected ")
        {
            return format!(
                "it is {}, but must be {}",
                crate::diagnostic::excerpt(found),
                plain_expected(expected)
            );
        }
    }
    crate::diagnostic::excerpt(message)
}

/// `i32` → `a whole number`; `struct ObjectMeta` or `a map` → `a mapping`; …
fn plain_expected(expected: &str) -> &'static str {
    let e = expected.trim_start_matches("a ").trim_start_matches("an ");
    let integer = [
        "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "usize",
    ];
    if integer.contains(&e) {
        "a whole number"
    } else if e == "f32" || e == "f64" {
        "a number"
    } else if e.contains("string") || e == "char" || e == "borrowed str" {
        "a string"
    } else if e == "boolean" || e == "bool" {
        "true or false"
    } else if e.starts_with("sequence") || e.contains("list") {
        "a list"
    } else if e.contains("int or string") || e.contains("IntOrString") {
        "a number or a string"
    } else if e.contains("RFC 3339") || e.contains("date") || e.contains("Time") {
        "a date and time (RFC 3339, such as 2024-01-31T12:00:00Z)"
    } else if e.contains("base64") || e.contains("ByteString") {
        "base64-encoded data"
    } else if e.starts_with("struct ")
        || e.starts_with("map")
        || e.chars().next().is_some_and(char::is_uppercase)
    {
        "a mapping (`key: value` lines)"
    } else {
        "of another type (see the Kubernetes API reference for this field)"
    }
}

macro_rules! known_kinds {
    ($api_version:expr, $kind:expr, $object:expr; $($ty:ty),* $(,)?) => {{
        $(
            if $api_version == <$ty as Resource>::API_VERSION && $kind == <$ty as Resource>::KIND {
                return through::<$ty>($object).map(Some);
            }
        )*
        Ok(None)
    }};
}

/// The typed re-encoding of `object`, or `None` when k8s-openapi does not know its
/// `apiVersion`/kind.
pub fn typed_value(
    api_version: &str,
    kind: &str,
    object: &Value,
) -> Result<Option<Value>, DecodeError> {
    use k8s_openapi::api::{
        admissionregistration::v1 as adm, apps::v1 as apps, batch::v1 as batch, core::v1 as core,
        networking::v1 as net, policy::v1 as policy, rbac::v1 as rbac, scheduling::v1 as sched,
        storage::v1 as storage,
    };
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as ext;
    use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1 as reg;
    known_kinds!(api_version, kind, object;
        core::Namespace, core::ConfigMap, core::Secret, core::Service, core::ServiceAccount,
        core::Pod, core::Endpoints, core::LimitRange, core::ResourceQuota,
        core::PersistentVolumeClaim, core::PersistentVolume,
        apps::Deployment, apps::DaemonSet, apps::StatefulSet, apps::ReplicaSet,
        batch::Job, batch::CronJob,
        rbac::Role, rbac::RoleBinding, rbac::ClusterRole, rbac::ClusterRoleBinding,
        ext::CustomResourceDefinition,
        adm::ValidatingWebhookConfiguration, adm::MutatingWebhookConfiguration,
        net::NetworkPolicy, net::Ingress, policy::PodDisruptionBudget,
        sched::PriorityClass, storage::StorageClass, storage::CSIDriver,
        reg::APIService,
    )
}

/// Round-trips `object` through its built-in type when there is one.
pub fn round_trip(api_version: &str, kind: &str, object: &Value) -> Result<RoundTrip, DecodeError> {
    let typed = typed_value(api_version, kind, object).map_err(|mut e| {
        // The decoder quotes the value it rejected: never a Secret's.
        if api_version == "v1" && kind == "Secret" {
            e.message =
                "it has the wrong type, or is not valid base64 (values of Secrets are not shown)"
                    .to_owned();
        }
        e
    })?;
    match typed {
        None => {
            let mut object = object.clone();
            openshift_defaults(api_version, kind, &mut object);
            Ok(RoundTrip {
                object,
                dropped: Vec::new(),
                typed: false,
            })
        }
        Some(mut typed) => {
            let mut dropped = Vec::new();
            dropped_fields(object, &typed, &mut String::new(), &mut dropped);
            strip_empty_lists(&mut typed);
            strip_added_zero_values(object, &mut typed);
            Ok(RoundTrip {
                object: typed,
                dropped,
                typed: true,
            })
        }
    }
}

/// What the CVO's own Go types add to an OpenShift kind it sends: a ClusterOperator's `spec`
/// is a struct its encoder always writes, so a manifest without one (OpenShift's own have
/// none) is sent with `spec: {}` — which OpenShift's ClusterOperator CRD requires.
fn openshift_defaults(api_version: &str, kind: &str, object: &mut Value) {
    if api_version == "config.openshift.io/v1"
        && kind == "ClusterOperator"
        && let Some(map) = object.as_object_mut()
        && !map.contains_key("spec")
    {
        map.insert("spec".to_owned(), Value::Object(Default::default()));
    }
}

/// Removes every field whose value is an empty list. A real API server stores built-in kinds
/// as protobuf, where an empty list and an absent one are the same, so it never keeps `[]`
/// (docs/kubernetes-semantics.md §15); an apply body that says `ingress: []` then differs from the stored
/// object on every pass, and some kinds (NetworkPolicy) are rewritten each time — a hot loop.
/// Sending what the server keeps makes a repeated apply write nothing. Only for built-in
/// kinds: custom resources are stored as JSON and keep `[]`.
fn strip_empty_lists(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.retain(|_, v| !matches!(v, Value::Array(a) if a.is_empty()));
            map.values_mut().for_each(strip_empty_lists);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_empty_lists),
        _ => {}
    }
}

/// Removes the fields the typed encoding added with a zero value (`""`, `false`, `0`): a
/// required field the manifest left out (a RoleBinding's `roleRef.apiGroup`) is written out
/// as `""`, which the server then defaults (`rbac.authorization.k8s.io`). The body says no
/// more than the manifest; the server defaults the field exactly as it would the `""`, and
/// the next pass does not see a difference in a value `cvo` never meant to send.
fn strip_added_zero_values(original: &Value, typed: &mut Value) {
    match (original, typed) {
        (Value::Object(original), Value::Object(typed)) => {
            typed.retain(|key, value| original.contains_key(key) || !is_zero(value));
            for (key, value) in typed.iter_mut() {
                if let Some(before) = original.get(key) {
                    strip_added_zero_values(before, value);
                }
            }
        }
        (Value::Array(original), Value::Array(typed)) => {
            for (before, after) in original.iter().zip(typed.iter_mut()) {
                strip_added_zero_values(before, after);
            }
        }
        _ => {}
    }
}

/// A scalar Go's `omitempty` leaves out: `""`, `false`, `0`.
pub(crate) fn is_zero(value: &Value) -> bool {
    match value {
        Value::String(s) => s.is_empty(),
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        _ => false,
    }
}

/// Appends to `out` every non-null field of `before` that `after` no longer has.
fn dropped_fields(before: &Value, after: &Value, path: &mut String, out: &mut Vec<String>) {
    match (before, after) {
        (Value::Object(b), Value::Object(a)) => {
            for (key, value) in b {
                let len = path.len();
                path.push('/');
                path.push_str(&key.replace('~', "~0").replace('/', "~1"));
                match a.get(key) {
                    None if !value.is_null() => out.push(path.clone()),
                    None => {}
                    Some(next) => dropped_fields(value, next, path, out),
                }
                path.truncate(len);
            }
        }
        (Value::Array(b), Value::Array(a)) => {
            for (i, (bv, av)) in b.iter().zip(a).enumerate() {
                let len = path.len();
                path.push('/');
                path.push_str(&i.to_string());
                dropped_fields(bv, av, path, out);
                path.truncate(len);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cluster_operator_gets_the_empty_spec_the_cvos_types_send() {
        let co = serde_json::json!({"apiVersion": "config.openshift.io/v1", "kind": "ClusterOperator",
            "metadata": {"name": "x"}, "status": {"versions": [{"name": "operator", "version": "1"}]}});
        let sent = round_trip("config.openshift.io/v1", "ClusterOperator", &co).unwrap();
        assert_eq!(sent.object["spec"], serde_json::json!({}));
        assert_eq!(sent.object["status"], co["status"]);
        let with_spec = serde_json::json!({"apiVersion": "config.openshift.io/v1",
            "kind": "ClusterOperator", "metadata": {"name": "x"}, "spec": {"a": 1}});
        let sent = round_trip("config.openshift.io/v1", "ClusterOperator", &with_spec).unwrap();
        assert_eq!(sent.object, with_spec);
    }
    use serde_json::json;

    #[test]
    fn the_body_says_no_more_than_the_manifest() {
        let rb = json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "x", "namespace": "n"},
            "roleRef": {"kind": "Role", "name": "r"},
            "subjects": [{"kind": "ServiceAccount", "name": "sa", "namespace": "n"}],
        });
        let rt = round_trip("rbac.authorization.k8s.io/v1", "RoleBinding", &rb).unwrap();
        assert!(rt.typed);
        assert_eq!(rt.object["roleRef"], json!({"kind": "Role", "name": "r"}));
        assert_eq!(rt.object["subjects"], rb["subjects"]);
        // A zero value the manifest says is kept.
        let mut explicit = rb.clone();
        explicit["roleRef"]["apiGroup"] = json!("");
        let rt = round_trip("rbac.authorization.k8s.io/v1", "RoleBinding", &explicit).unwrap();
        assert_eq!(rt.object["roleRef"]["apiGroup"], "");
    }

    #[test]
    fn cluster_role_binding_user_names_are_dropped_and_named() {
        let crb = json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "x"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "r"},
            "subjects": [{"kind": "Group", "name": "g", "apiGroup": "rbac.authorization.k8s.io"}],
            "userNames": ["system:serviceaccount:a:b"],
            "groupNames": null,
        });
        let rt = round_trip("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", &crb).unwrap();
        assert_eq!(rt.dropped, ["/userNames"]);
        assert!(rt.object.get("userNames").is_none());
        assert_eq!(rt.object["subjects"], crb["subjects"]);
        assert_eq!(rt.object["kind"], "ClusterRoleBinding");
    }

    #[test]
    fn nested_unknown_fields_are_named_with_their_path() {
        let cm = json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d", "bogus": 1},
            "spec": {"selector": {"matchLabels": {"a": "b"}},
                     "template": {"metadata": {"labels": {"a": "b"}},
                                  "spec": {"containers": [{"name": "c", "image": "i", "colour": "red"}]}}},
        });
        let rt = round_trip("apps/v1", "Deployment", &cm).unwrap();
        assert_eq!(
            rt.dropped,
            ["/metadata/bogus", "/spec/template/spec/containers/0/colour"]
        );
    }

    #[test]
    fn unknown_kinds_and_versions_pass_through() {
        let cr = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "extra": 1});
        let rt = round_trip("example.com/v1", "Widget", &cr).unwrap();
        assert_eq!(rt.object, cr);
        assert!(rt.dropped.is_empty());
        let old = json!({"apiVersion": "rbac.authorization.k8s.io/v1beta1", "kind": "ClusterRoleBinding", "userNames": []});
        assert!(
            round_trip(
                "rbac.authorization.k8s.io/v1beta1",
                "ClusterRoleBinding",
                &old
            )
            .unwrap()
            .dropped
            .is_empty()
        );
    }

    #[test]
    fn a_wrongly_typed_field_is_a_decode_error() {
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": 1}});
        let err = round_trip("v1", "ConfigMap", &cm).unwrap_err();
        assert_eq!(err.kind, "ConfigMap");
    }

    #[test]
    fn empty_lists_of_built_in_kinds_are_not_sent() {
        let np = json!({
            "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"name": "n", "namespace": "ns"},
            "spec": {"podSelector": {}, "ingress": [], "egress": [{"to": [], "ports": [{"port": 80}]}],
                     "policyTypes": ["Ingress", "Egress"]},
        });
        let rt = round_trip("networking.k8s.io/v1", "NetworkPolicy", &np).unwrap();
        assert!(rt.dropped.is_empty(), "{:?}", rt.dropped);
        assert_eq!(
            rt.object["spec"],
            json!({"podSelector": {}, "egress": [{"ports": [{"port": 80}]}], "policyTypes": ["Ingress", "Egress"]})
        );
        let cr = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"items": []}});
        assert_eq!(
            round_trip("example.com/v1", "Widget", &cr).unwrap().object,
            cr
        );
    }

    #[test]
    fn a_secret_that_does_not_decode_quotes_no_value() {
        let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
            "data": {"password": "not base64 hunter2!"}});
        let err = round_trip("v1", "Secret", &secret).unwrap_err();
        assert!(!err.to_string().contains("hunter2"), "{err}");
        assert!(!format!("{err:?}").contains("hunter2"), "{err:?}");
    }
}
