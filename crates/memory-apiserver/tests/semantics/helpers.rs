//! Helpers shared by the semantics modules, and the imports they all use.

pub(crate) use std::collections::BTreeSet;
pub(crate) use std::time::Duration;

pub(crate) use crate::support::*;
pub(crate) use futures::{Stream, StreamExt};
pub(crate) use k8s_openapi::api::core::v1::Namespace;
pub(crate) use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
pub(crate) use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch,
    PatchParams, PostParams, Preconditions, WatchEvent, WatchParams,
};
pub(crate) use kube::core::Status;
pub(crate) use kube::discovery::{self, Discovery, Scope};
pub(crate) use serde_json::{Value, json};

// ---------------------------------------------------------------------------------------------
// helpers

pub(crate) fn pp() -> PostParams {
    PostParams::default()
}

/// A ConfigMap `name` with `rest` merged into it (JSON merge patch semantics).
pub(crate) fn configmap(name: &str, rest: Value) -> DynamicObject {
    let mut value = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}});
    json_patch::merge(&mut value, &rest);
    serde_json::from_value(value).expect("configmap")
}

pub(crate) fn object(api_version: &str, kind: &str, name: &str, rest: Value) -> DynamicObject {
    let mut value = json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": name}});
    json_patch::merge(&mut value, &rest);
    serde_json::from_value(value).expect("object")
}

pub(crate) fn cms(tc: &TestCluster, ns: &str) -> Api<DynamicObject> {
    tc.dynamic(&configmaps(), Some(ns))
}

pub(crate) fn jobs() -> ApiResource {
    builtin("batch", "v1", "Job", "jobs")
}

pub(crate) fn pods() -> ApiResource {
    builtin("", "v1", "Pod", "pods")
}

pub(crate) fn deployments() -> ApiResource {
    builtin("apps", "v1", "Deployment", "deployments")
}

pub(crate) fn merge(value: Value) -> Patch<Value> {
    Patch::Merge(value)
}

pub(crate) fn finalizers(obj: &DynamicObject) -> Vec<String> {
    obj.metadata.finalizers.clone().unwrap_or_default()
}

pub(crate) fn rv(obj: &DynamicObject) -> String {
    obj.metadata
        .resource_version
        .clone()
        .expect("resourceVersion")
}

pub(crate) fn uid(obj: &DynamicObject) -> String {
    obj.metadata.uid.clone().expect("uid")
}

pub(crate) fn generation(obj: &DynamicObject) -> i64 {
    obj.metadata.generation.expect("metadata.generation")
}

/// An ownerReference pointing at a ConfigMap.
pub(crate) fn owner_ref(owner: &DynamicObject, block: bool) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": owner.metadata.name.clone().expect("owner name"),
        "uid": uid(owner),
        "blockOwnerDeletion": block,
    })
}

pub(crate) fn owner_uids(obj: &DynamicObject) -> Vec<String> {
    obj.metadata
        .owner_references
        .iter()
        .flatten()
        .map(|r| r.uid.clone())
        .collect()
}

/// Does `manager` own the field at `path` (FieldsV1 keys such as `f:data`, `f:key`)?
pub(crate) fn owns(obj: &DynamicObject, manager: &str, path: &[&str]) -> bool {
    obj.metadata
        .managed_fields
        .iter()
        .flatten()
        .filter(|m| m.manager.as_deref() == Some(manager))
        .any(|m| {
            let Some(fields) = m.fields_v1.as_ref() else {
                return false;
            };
            let mut node = &fields.0;
            for segment in path {
                match node.get(*segment) {
                    Some(next) => node = next,
                    None => return false,
                }
            }
            true
        })
}

pub(crate) fn names(list: &[DynamicObject]) -> BTreeSet<String> {
    list.iter()
        .filter_map(|o| o.metadata.name.clone())
        .collect()
}

pub(crate) fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// Create a ConfigMap with `finalizers`; registers held ones for cleanup.
pub(crate) async fn create_cm(
    tc: &TestCluster,
    ns: &str,
    name: &str,
    finalizer_list: &[&str],
    rest: Value,
) -> DynamicObject {
    let mut obj = configmap(name, rest);
    if !finalizer_list.is_empty() {
        obj.metadata.finalizers = Some(finalizer_list.iter().map(|s| s.to_string()).collect());
        tc.hold(&configmaps(), Some(ns), name);
    }
    cms(tc, ns)
        .create(&pp(), &obj)
        .await
        .unwrap_or_else(|e| panic!("create configmap {ns}/{name}: {e}"))
}

/// The next event of a watch stream within `wait`, or None when the stream ended or was idle.
pub(crate) async fn next_event<S>(
    stream: &mut S,
    wait: Duration,
) -> Option<kube::Result<WatchEvent<DynamicObject>>>
where
    S: Stream<Item = kube::Result<WatchEvent<DynamicObject>>> + Unpin,
{
    tokio::time::timeout(wait, stream.next())
        .await
        .ok()
        .flatten()
}

pub(crate) fn describe(event: &WatchEvent<DynamicObject>) -> String {
    match event {
        WatchEvent::Added(o) => format!("ADDED {}", o.metadata.name.clone().unwrap_or_default()),
        WatchEvent::Modified(o) => {
            format!("MODIFIED {}", o.metadata.name.clone().unwrap_or_default())
        }
        WatchEvent::Deleted(o) => {
            format!("DELETED {}", o.metadata.name.clone().unwrap_or_default())
        }
        WatchEvent::Bookmark(b) => format!("BOOKMARK {}", b.metadata.resource_version),
        WatchEvent::Error(s) => format!("ERROR {} {}", s.code, s.reason),
    }
}

pub(crate) fn deployment(name: &str) -> DynamicObject {
    object(
        "apps/v1",
        "Deployment",
        name,
        json!({"spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}]},
            },
        }}),
    )
}

pub(crate) fn suspended_job(name: &str) -> DynamicObject {
    object(
        "batch/v1",
        "Job",
        name,
        json!({"spec": {
            "suspend": true,
            "template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}],
            }},
        }}),
    )
}

pub(crate) fn apply_cm(name: &str, rest: Value) -> Patch<Value> {
    let mut value = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}});
    json_patch::merge(&mut value, &rest);
    Patch::Apply(value)
}
