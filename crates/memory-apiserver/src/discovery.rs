//! Discovery documents: `/version`, `/api`, `/api/v1`, `/apis`, `/apis/{group}` and
//! `/apis/{group}/{version}` (the non-aggregated format, which kube-rs `Discovery` and kubectl
//! both understand), built from the currently served types.

use serde_json::{Value, json};

use super::resources::{ResourceInfo, VERBS};

/// `/version`.
pub fn version() -> Value {
    json!({
        "major": "1", "minor": "34", "gitVersion": "v1.34.0+cvo-memory", "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean", "buildDate": "2025-01-01T00:00:00Z", "goVersion": "go1.24.0",
        "compiler": "gc", "platform": "linux/amd64",
    })
}

/// `/api`.
pub fn core_versions() -> Value {
    json!({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]})
}

fn group_versions(types: &[ResourceInfo]) -> Vec<(String, Vec<String>)> {
    let mut groups: Vec<(String, Vec<String>)> = Vec::new();
    for t in types.iter().filter(|t| !t.group.is_empty()) {
        let idx = match groups.iter().position(|(g, _)| *g == t.group) {
            Some(i) => i,
            None => {
                groups.push((t.group.clone(), Vec::new()));
                groups.len() - 1
            }
        };
        for v in &t.versions {
            if !groups[idx].1.contains(v) {
                groups[idx].1.push(v.clone());
            }
        }
    }
    groups
}

fn group_doc(g: &str, versions: &[String]) -> Value {
    let vs: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{g}/{v}"), "version": v}))
        .collect();
    json!({"name": g, "versions": vs, "preferredVersion": vs[0]})
}

/// `/apis`.
pub fn groups(types: &[ResourceInfo]) -> Value {
    let gs: Vec<Value> = group_versions(types)
        .iter()
        .map(|(g, vs)| group_doc(g, vs))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": gs})
}

/// `/apis/{group}`.
pub fn group(types: &[ResourceInfo], g: &str) -> Option<Value> {
    let (_, vs) = group_versions(types).into_iter().find(|(n, _)| n == g)?;
    let mut d = group_doc(g, &vs);
    d["kind"] = json!("APIGroup");
    d["apiVersion"] = json!("v1");
    Some(d)
}

/// `/api/v1` or `/apis/{group}/{version}`.
pub fn resources(types: &[ResourceInfo], g: &str, v: &str) -> Option<Value> {
    let mut out = Vec::new();
    for t in types
        .iter()
        .filter(|t| t.group == g && t.versions.iter().any(|x| x == v))
    {
        let mut r = json!({
            "name": t.plural, "singularName": t.singular, "namespaced": t.namespaced, "kind": t.kind, "verbs": VERBS,
        });
        if !t.short_names.is_empty() {
            r["shortNames"] = json!(t.short_names);
        }
        if !t.categories.is_empty() {
            r["categories"] = json!(t.categories);
        }
        out.push(r);
        if t.status_subresource {
            out.push(json!({"name": format!("{}/status", t.plural), "singularName": "", "namespaced": t.namespaced, "kind": t.kind, "verbs": ["get", "patch", "update"]}));
        }
        if t.scale {
            out.push(json!({"name": format!("{}/scale", t.plural), "singularName": "", "namespaced": t.namespaced, "group": "autoscaling", "version": "v1", "kind": "Scale", "verbs": ["get", "patch", "update"]}));
        }
        if g.is_empty() && t.kind == "Namespace" {
            out.push(json!({"name": "namespaces/finalize", "singularName": "", "namespaced": false, "kind": "Namespace", "verbs": ["update"]}));
        }
    }
    if out.is_empty() {
        return None;
    }
    let gv = if g.is_empty() {
        v.to_string()
    } else {
        format!("{g}/{v}")
    };
    Some(
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": out}),
    )
}

fn gv_path(g: &str, v: &str) -> String {
    if g.is_empty() {
        format!("api/{v}")
    } else {
        format!("apis/{g}/{v}")
    }
}

/// `/openapi/v3`: one entry per served group/version. Enough for kubectl to learn that PATCH
/// supports `fieldValidation` (so it validates server-side instead of downloading schemas).
pub fn openapi_root(types: &[ResourceInfo]) -> Value {
    let mut paths = serde_json::Map::new();
    for t in types {
        for v in &t.versions {
            let p = gv_path(&t.group, v);
            paths.insert(
                p.clone(),
                json!({"serverRelativeURL": format!("/openapi/v3/{p}?hash=cvo-memory")}),
            );
        }
    }
    json!({"paths": paths})
}

/// `/openapi/v3/{api/v1 | apis/g/v}`: a skeletal OpenAPI 3 document listing each resource's
/// item path with its PATCH operation, GVK extension and the `fieldValidation`/`fieldManager`/
/// `dryRun`/`force` parameters. No schemas.
pub fn openapi_gv(types: &[ResourceInfo], g: &str, v: &str) -> Option<Value> {
    let mut paths = serde_json::Map::new();
    for t in types
        .iter()
        .filter(|t| t.group == g && t.versions.iter().any(|x| x == v))
    {
        let base = format!("/{}", gv_path(g, v));
        let item = if t.namespaced {
            format!("{base}/namespaces/{{namespace}}/{}/{{name}}", t.plural)
        } else {
            format!("{base}/{}/{{name}}", t.plural)
        };
        let gvk = json!({"group": g, "version": v, "kind": t.kind});
        let params: Vec<Value> = ["dryRun", "fieldManager", "fieldValidation", "force"]
            .iter()
            .map(|p| json!({"name": p, "in": "query", "schema": {"type": "string"}, "uniqueItems": true}))
            .collect();
        let op = |id: &str| {
            json!({"operationId": format!("{id}{}", t.kind), "x-kubernetes-group-version-kind": gvk,
                   "parameters": params, "responses": {"200": {"description": "OK"}}})
        };
        paths.insert(item, json!({"get": op("read"), "put": op("replace"), "patch": op("patch"), "delete": op("delete")}));
    }
    if paths.is_empty() {
        return None;
    }
    Some(
        json!({"openapi": "3.0.0", "info": {"title": "Kubernetes (cvo in-memory)", "version": "v1.34.0"}, "paths": paths}),
    )
}
