//! What storage does to a built-in object, and what counts as a spec change for its generation.
//!
//! kube-apiserver keeps built-in kinds as protobuf and decodes them into Go structs, where an
//! empty list or map is the same as none: `spec.ingress: []`, `data: {}` or
//! `selector.matchLabels: {}` are not kept, and a list without `omitempty` (a Role's or
//! ClusterRole's `rules`) reads back as `null`. Custom resources are stored as JSON and keep
//! `[]`; CRDs keep it too (their schemas hold raw JSON values such as `default: []`).
//!
//! Whether the generation moves is decided before storage, on the object as decoded from the
//! request: most kinds compare their spec semantically (an empty list equals none), but
//! NetworkPolicy and the admission webhook configurations use Go's `reflect.DeepEqual`, so an
//! applied `ingress: []` against a stored "no ingress" is a change, and bumps the generation
//! on every write. Deployments also bump it when their annotations change.
//!
//! Every kind, custom resources included, reads an integral number back without a fraction
//! (`1.0` → `1`, `0.0` → `0`: Go's rendering of a float64).
//!
//! The status of the workload kinds is a Go struct too: it always reads back (`status: {}` for a
//! Deployment, Job or CronJob nobody has written status for), its counters without `omitempty` read back
//! as `0` (a StatefulSet's `replicas`/`availableReplicas`, a DaemonSet's four `…NumberScheduled`
//! / `numberReady`), and condition timestamps a writer left out read back as `null`.

use serde_json::Value;

use super::resources::ResourceInfo;

/// Map-valued fields (Go maps, `omitempty`) that are dropped when empty. Empty objects
/// elsewhere are structs (`podSelector: {}`, `emptyDir: {}`) and are kept.
const MAP_FIELDS: &[&str] = &[
    "labels",
    "annotations",
    "data",
    "binaryData",
    "stringData",
    "matchLabels",
    "nodeSelector",
    "limits",
    "requests",
];

/// Top-level lists without `omitempty`: they read back as `null` when empty or absent.
const NULL_WHEN_EMPTY: &[(&str, &str, &str)] = &[
    ("rbac.authorization.k8s.io", "ClusterRole", "rules"),
    ("rbac.authorization.k8s.io", "Role", "rules"),
];

/// Kinds whose generation compares the spec with `reflect.DeepEqual` (an empty list differs
/// from none).
const STRICT_GENERATION: &[(&str, &str)] = &[
    ("networking.k8s.io", "NetworkPolicy"),
    (
        "admissionregistration.k8s.io",
        "ValidatingWebhookConfiguration",
    ),
    (
        "admissionregistration.k8s.io",
        "MutatingWebhookConfiguration",
    ),
];

fn is(info: &ResourceInfo, group: &str, kind: &str) -> bool {
    info.group == group && info.kind == kind
}

/// Is this kind stored the way built-in kinds are (empty lists and maps dropped)?
fn drops_empty(info: &ResourceInfo) -> bool {
    !info.custom && !is(info, "apiextensions.k8s.io", "CustomResourceDefinition")
}

/// Bring `obj` to the form storage gives it (see the module doc).
pub fn normalize(info: &ResourceInfo, obj: &mut Value) {
    integral_numbers(obj);
    if !drops_empty(info) {
        return;
    }
    let Some(top) = obj.as_object_mut() else {
        return;
    };
    for (key, value) in top.iter_mut() {
        match value.as_object_mut() {
            Some(meta) if key == "metadata" => {
                // managedFields hold FieldsV1 trees, whose `{}` leaves are meaningful.
                for (_, v) in meta.iter_mut().filter(|(k, _)| *k != "managedFields") {
                    drop_empty_within(v);
                }
                meta.retain(|k, v| k == "managedFields" || !is_droppable(k, v));
            }
            _ => drop_empty_within(value),
        }
    }
    top.retain(|k, v| !is_droppable(k, v));
    for (_, _, field) in NULL_WHEN_EMPTY.iter().filter(|(g, k, _)| is(info, g, k)) {
        top.entry(field.to_string()).or_insert(Value::Null);
    }
    shape_workload_status(info, obj);
}

/// Numbers with no fraction read back without one, whatever the kind: Go renders an integral
/// float64 as `1`, not `1.0` (typed fields), and decodes a custom resource's `1.0` to a
/// float64 rendered the same way. Beyond the integer range serde_json holds, left as is.
fn integral_numbers(value: &mut Value) {
    match value {
        Value::Number(n) if n.is_f64() => {
            let f = n.as_f64().unwrap_or(f64::NAN);
            if f.fract() == 0.0 {
                if f >= 0.0 && f <= u64::MAX as f64 && (f as u64) as f64 == f {
                    *value = Value::from(f as u64);
                } else if f < 0.0 && f >= i64::MIN as f64 && (f as i64) as f64 == f {
                    *value = Value::from(f as i64);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(integral_numbers),
        Value::Object(fields) => fields.values_mut().for_each(integral_numbers),
        _ => {}
    }
}

/// Status counters without `omitempty` and the timestamps of conditions, per workload kind.
const WORKLOAD_STATUS: &[(&str, &str, &[&str], &[&str])] = &[
    (
        "apps",
        "Deployment",
        &[],
        &["lastUpdateTime", "lastTransitionTime"],
    ),
    (
        "apps",
        "StatefulSet",
        &["replicas", "availableReplicas"],
        &["lastTransitionTime"],
    ),
    (
        "apps",
        "DaemonSet",
        &[
            "currentNumberScheduled",
            "numberMisscheduled",
            "desiredNumberScheduled",
            "numberReady",
        ],
        &["lastTransitionTime"],
    ),
    (
        "batch",
        "Job",
        &[],
        &["lastProbeTime", "lastTransitionTime"],
    ),
    ("batch", "CronJob", &[], &[]),
];

/// Give a workload's status the shape kube-apiserver's Go structs give it (see the module doc).
fn shape_workload_status(info: &ResourceInfo, obj: &mut Value) {
    let Some((_, _, counters, times)) = WORKLOAD_STATUS
        .iter()
        .find(|(g, k, _, _)| !info.custom && is(info, g, k))
    else {
        return;
    };
    if !obj.get("status").is_some_and(Value::is_object) {
        obj["status"] = Value::Object(Default::default());
    }
    let Some(status) = obj.get_mut("status").and_then(Value::as_object_mut) else {
        return;
    };
    for c in *counters {
        if status.get(*c).is_none_or(Value::is_null) {
            status.insert(c.to_string(), Value::from(0));
        }
    }
    if let Some(conds) = status.get_mut("conditions").and_then(Value::as_array_mut) {
        for c in conds.iter_mut().filter_map(Value::as_object_mut) {
            for t in *times {
                c.entry(t.to_string()).or_insert(Value::Null);
            }
        }
    }
}

fn is_droppable(key: &str, value: &Value) -> bool {
    match value {
        Value::Array(items) => items.is_empty(),
        Value::Object(m) => m.is_empty() && MAP_FIELDS.contains(&key),
        _ => false,
    }
}

/// Drop the empty lists and maps nested in `value` (not `value` itself: that is up to its
/// parent, which knows the field name).
fn drop_empty_within(value: &mut Value) {
    match value {
        Value::Object(m) => {
            for v in m.values_mut() {
                drop_empty_within(v);
            }
            m.retain(|k, v| !is_droppable(k, v));
        }
        Value::Array(items) => items.iter_mut().for_each(drop_empty_within),
        _ => {}
    }
}

/// Does the generation of `info` count empty lists (`reflect.DeepEqual`)? Then it must be
/// decided on the object before [`normalize`].
pub fn strict_generation(info: &ResourceInfo) -> bool {
    STRICT_GENERATION.iter().any(|(g, k)| is(info, g, k))
}

/// The part of an object whose change bumps `metadata.generation`: everything but metadata
/// (except a Deployment's annotations) and, with a status subresource, status.
pub fn generation_view(info: &ResourceInfo, obj: &Value) -> Value {
    let mut view = obj.clone();
    if let Some(m) = view.as_object_mut() {
        let meta = m.remove("metadata");
        m.remove("apiVersion");
        m.remove("kind");
        if info.status_subresource {
            m.remove("status");
        }
        if is(info, "apps", "Deployment") {
            let annotations = meta
                .as_ref()
                .and_then(|md| md.get("annotations"))
                .filter(|a| a.as_object().is_some_and(|a| !a.is_empty()));
            if let Some(a) = annotations {
                m.insert("annotations".into(), a.clone());
            }
        }
    }
    view
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::builtins;
    use serde_json::json;

    fn info(kind: &str) -> ResourceInfo {
        builtins()
            .into_iter()
            .find(|i| i.kind == kind)
            .expect("built-in kind")
    }

    #[test]
    fn empty_lists_and_maps_of_builtins_are_dropped() {
        let mut np = json!({"metadata": {"name": "n", "labels": {}, "finalizers": [],
            "managedFields": [{"fieldsV1": {"f:spec": {"f:ingress": {}}}}]},
            "spec": {"podSelector": {}, "ingress": [], "egress": [{"to": [], "ports": [{"port": 80}]}],
                     "policyTypes": ["Ingress"]}});
        normalize(&info("NetworkPolicy"), &mut np);
        assert_eq!(
            np,
            json!({"metadata": {"name": "n",
                "managedFields": [{"fieldsV1": {"f:spec": {"f:ingress": {}}}}]},
                "spec": {"podSelector": {}, "egress": [{"ports": [{"port": 80}]}],
                         "policyTypes": ["Ingress"]}})
        );
        let mut cm = json!({"metadata": {"name": "c"}, "data": {}});
        normalize(&info("ConfigMap"), &mut cm);
        assert_eq!(cm, json!({"metadata": {"name": "c"}}));
        let mut pdb = json!({"spec": {"selector": {"matchLabels": {}, "matchExpressions": []}}});
        normalize(&info("PodDisruptionBudget"), &mut pdb);
        assert_eq!(pdb, json!({"spec": {"selector": {}}}));
    }

    #[test]
    fn rules_read_back_as_null_and_custom_kinds_keep_empty_lists() {
        let mut role = json!({"metadata": {"name": "r"}, "rules": []});
        normalize(&info("ClusterRole"), &mut role);
        assert_eq!(role, json!({"metadata": {"name": "r"}, "rules": null}));
        let mut crd = json!({"spec": {"versions": [{"schema": {"default": []}}]}});
        let before = crd.clone();
        normalize(&info("CustomResourceDefinition"), &mut crd);
        assert_eq!(crd, before);
        let mut custom = info("ConfigMap");
        custom.custom = true;
        let mut cr = json!({"spec": {"items": []}});
        normalize(&custom, &mut cr);
        assert_eq!(cr, json!({"spec": {"items": []}}));
    }

    #[test]
    fn workload_status_reads_back_like_the_go_structs() {
        let mut d = json!({"metadata": {"name": "d"}, "spec": {}});
        normalize(&info("Deployment"), &mut d);
        assert_eq!(d["status"], json!({}));
        let mut s = json!({"status": {"observedGeneration": 2}});
        normalize(&info("StatefulSet"), &mut s);
        assert_eq!(
            s["status"],
            json!({"observedGeneration": 2, "replicas": 0, "availableReplicas": 0})
        );
        let mut ds = json!({"status": null});
        normalize(&info("DaemonSet"), &mut ds);
        assert_eq!(ds["status"]["desiredNumberScheduled"], 0);
        let mut j = json!({"status": {"conditions": [{"type": "Complete", "status": "True"}]}});
        normalize(&info("Job"), &mut j);
        assert_eq!(
            j["status"]["conditions"][0],
            json!({"type": "Complete", "status": "True", "lastProbeTime": null, "lastTransitionTime": null})
        );
        let mut cm = json!({"metadata": {"name": "c"}});
        normalize(&info("ConfigMap"), &mut cm);
        assert!(cm.get("status").is_none());
    }

    #[test]
    fn deployment_generation_counts_annotations() {
        let d = info("Deployment");
        let a = json!({"metadata": {"labels": {"x": "1"}}, "spec": {"replicas": 1}, "status": {}});
        let b = json!({"metadata": {"labels": {"x": "2"}}, "spec": {"replicas": 1}});
        assert_eq!(generation_view(&d, &a), generation_view(&d, &b));
        let c = json!({"metadata": {"annotations": {"y": "1"}}, "spec": {"replicas": 1}});
        assert_ne!(generation_view(&d, &a), generation_view(&d, &c));
        let np = info("NetworkPolicy");
        assert!(strict_generation(&np) && !strict_generation(&d));
    }
}
