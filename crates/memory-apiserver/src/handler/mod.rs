//! API semantics of every verb over the [`Store`]: create/get/list/update/patch/apply/delete/
//! deletecollection with validation, optimistic concurrency, finalizers, deletion propagation,
//! status-subresource separation, generation, managedFields and dry-run. The controllers reuse
//! the same entry points, so their writes follow the same rules and emit the same events.
//!
//! Everything here is synchronous and runs under the server's single state lock. This module
//! holds the state, request types and shared helpers; the verbs live in `read` (get, list),
//! `create`, `write` (update, patch, apply), `delete` and `scale`.

use serde_json::{Map, Value, json};

use super::errors::{ApiError, Cause, Subject, success_status};
use super::patch::{self, PatchKind};
use super::resources::{self, ResKey, ResourceInfo};
use super::rng::Rng;
use super::roundtrip;
use super::schema;
use super::selectors::{FieldSelector, LabelSelector};
use super::ssa::{self, Scope};
use super::store::{ObjKey, Store};
use super::validation;

/// Finalizer the namespace controller holds on `spec.finalizers`.
pub const NS_FINALIZER: &str = "kubernetes";
/// Finalizer of CRDs until their custom resources are gone.
pub const CRD_FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";
/// Finalizer set by foreground deletion until dependents are gone.
pub const FOREGROUND: &str = "foregroundDeletion";

/// The whole mutable state of one server.
#[derive(Debug)]
pub struct State {
    /// Objects, events.
    pub store: Store,
    builtins: Vec<ResourceInfo>,
    /// Types from CRDs: (CRD name, type, established, terminating).
    custom: Vec<CustomType>,
    /// Seeded randomness for uids and generated names.
    pub rng: Rng,
    next_ip: u32,
}

#[derive(Debug, Clone)]
struct CustomType {
    crd: String,
    info: ResourceInfo,
    established: bool,
    terminating: bool,
}

/// A resolved request target.
#[derive(Debug, Clone)]
pub struct Target {
    /// The type.
    pub info: ResourceInfo,
    /// Requested version.
    pub version: String,
    /// Namespace ("" for cluster-scoped or all namespaces).
    pub namespace: String,
    /// Object name ("" for collections).
    pub name: String,
    /// `status`, `finalize`… if any.
    pub subresource: Option<String>,
}

impl Target {
    /// Storage key of the named object.
    pub fn key(&self) -> ObjKey {
        ObjKey {
            res: self.info.key(),
            namespace: self.namespace.clone(),
            name: self.name.clone(),
        }
    }
    fn subject(&self) -> Subject<'_> {
        Subject {
            group: &self.info.group,
            resource: &self.info.plural,
            name: &self.name,
        }
    }
    fn api_version(&self) -> String {
        self.info.api_version(&self.version)
    }
    fn lists(&self) -> ssa::Lists<'_> {
        ssa::Lists {
            schema: self.info.schema(&self.version),
        }
    }
    /// Prune and validate against the CRD schema (custom resources).
    fn check_schema(&self, obj: &mut Value, strict: bool) -> Result<(), ApiError> {
        let Some(schema) = self.info.schema(&self.version) else {
            return Ok(());
        };
        let dropped = schema::prune(obj, schema);
        if strict && !dropped.is_empty() {
            let fields = dropped
                .iter()
                .map(|d| format!("unknown field \"{d}\""))
                .collect::<Vec<_>>()
                .join(", ");
            return Err(ApiError::bad_request(format!(
                "{} in version \"{}\" cannot be handled as a {}: strict decoding error: {fields}",
                self.info.kind, self.version, self.info.kind
            )));
        }
        let causes = schema::validate(obj, schema);
        if causes.is_empty() {
            Ok(())
        } else {
            let name = meta(obj, "name").unwrap_or_else(|| self.name.clone());
            Err(ApiError::invalid(
                &self.info.group,
                &self.info.kind,
                &name,
                causes,
            ))
        }
    }
    fn scope(&self) -> Scope {
        match (self.subresource.as_deref(), self.info.status_subresource) {
            (Some("status"), _) => Scope::Status,
            (_, true) => Scope::Main,
            _ => Scope::Whole,
        }
    }
}

/// Options common to writes.
#[derive(Debug, Clone, Default)]
pub struct WriteOpts {
    /// `dryRun=All`.
    pub dry_run: bool,
    /// `fieldManager` query parameter.
    pub field_manager: Option<String>,
    /// Manager name derived from the User-Agent when `fieldManager` is absent.
    pub default_manager: String,
    /// `force=true` (apply).
    pub force: bool,
    /// `fieldValidation=Strict`: unknown fields of custom resources are a 400 instead of pruned.
    pub strict: bool,
}

impl WriteOpts {
    fn manager(&self) -> String {
        self.field_manager
            .clone()
            .unwrap_or_else(|| self.default_manager.clone())
    }
}

/// Deletion propagation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// Delete the owner now, dependents afterwards (GC).
    Background,
    /// Keep the owner (finalizer `foregroundDeletion`) until its dependents are gone.
    Foreground,
    /// Strip dependents' ownerReferences to the owner.
    Orphan,
}

/// DeleteOptions.
#[derive(Debug, Clone, Default)]
pub struct DeleteOpts {
    /// `dryRun=All`.
    pub dry_run: bool,
    /// `propagationPolicy` (None = type default).
    pub policy: Option<Policy>,
    /// `preconditions.uid`.
    pub uid: Option<String>,
    /// `preconditions.resourceVersion`.
    pub resource_version: Option<String>,
}

/// List/watch filters.
#[derive(Debug, Clone, Default)]
pub struct ListOpts {
    /// `labelSelector`.
    pub labels: LabelSelector,
    /// `fieldSelector`.
    pub fields: FieldSelector,
    /// `limit` (0/None = all).
    pub limit: Option<usize>,
    /// `continue` token.
    pub continue_token: Option<String>,
}

/// A successful response: HTTP code and body.
pub type Reply = (u16, Value);

/// Current time, RFC 3339 with second precision like kube.
pub fn now() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

fn meta(v: &Value, f: &str) -> Option<String> {
    v.get("metadata")?.get(f)?.as_str().map(str::to_string)
}

fn finalizers(v: &Value) -> Vec<String> {
    resources::strings(v.pointer("/metadata/finalizers"))
}

fn is_deleting(v: &Value) -> bool {
    v.pointer("/metadata/deletionTimestamp")
        .is_some_and(|t| !t.is_null())
}

fn meta_mut(v: &mut Value) -> &mut Map<String, Value> {
    if !v.get("metadata").is_some_and(Value::is_object) {
        v["metadata"] = json!({});
    }
    v["metadata"].as_object_mut().expect("metadata object")
}

/// Does `obj` still hold anything that keeps it from being removed once it is deleting?
fn held(obj: &Value, info: &ResourceInfo) -> bool {
    if !finalizers(obj).is_empty() {
        return true;
    }
    info.group.is_empty()
        && info.kind == "Namespace"
        && obj
            .pointer("/spec/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|a| !a.is_empty())
}

fn check_metadata(t: &Target, obj: &Value) -> Result<(), ApiError> {
    let mut causes = validation::check_metadata(obj);
    causes.extend(validation::check_builtin(&t.info, obj));
    if causes.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid(
            &t.info.group,
            &t.info.kind,
            &meta(obj, "name").unwrap_or_default(),
            causes,
        ))
    }
}

/// Namespaces kube-apiserver refuses to delete.
const IMMORTAL_NAMESPACES: &[&str] = &["default", "kube-system", "kube-public"];

/// Encode a continue token (opaque hex of a small JSON document).
fn encode_continue(rv: u64, ns: &str, name: &str) -> String {
    json!({"v": "meta.k8s.io/v1", "rv": rv, "start": [ns, name]})
        .to_string()
        .bytes()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn decode_continue(tok: &str) -> Option<(u64, String, String)> {
    if !tok.len().is_multiple_of(2) {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..tok.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(tok.get(i..i + 2)?, 16).ok())
        .collect();
    let v: Value = serde_json::from_slice(&bytes?).ok()?;
    Some((
        v.get("rv")?.as_u64()?,
        v.pointer("/start/0")?.as_str()?.to_string(),
        v.pointer("/start/1")?.as_str()?.to_string(),
    ))
}

fn parse_body(body: &[u8]) -> Result<Value, ApiError> {
    let v: Value = serde_json::from_slice(body).or_else(|_| {
        std::str::from_utf8(body)
            .ok()
            .and_then(|s| serde_saphyr::from_str::<Value>(s).ok())
            .ok_or_else(|| {
                ApiError::bad_request(
                    "the body of the request could not be decoded as JSON or YAML",
                )
            })
    })?;
    if !v.is_object() {
        return Err(ApiError::bad_request("the request body must be an object"));
    }
    Ok(v)
}

impl State {
    /// An empty cluster (namespaces are created by the caller).
    pub fn new(store: Store, seed: u64) -> Self {
        State {
            store,
            builtins: resources::builtins(),
            custom: Vec::new(),
            rng: Rng::new(seed),
            next_ip: 1,
        }
    }

    /// The served type for a request path, if any (CRD types only once Established).
    pub fn lookup(&self, group: &str, version: &str, plural: &str) -> Option<ResourceInfo> {
        self.served().into_iter().find(|i| {
            i.group == group && i.plural == plural && i.versions.iter().any(|v| v == version)
        })
    }

    /// All served types.
    pub fn served(&self) -> Vec<ResourceInfo> {
        let mut out = self.builtins.clone();
        out.extend(
            self.custom
                .iter()
                .filter(|c| c.established)
                .map(|c| c.info.clone()),
        );
        out
    }

    /// Type info for a storage key, including CRD types not (or no longer) served.
    pub fn info_for(&self, res: &ResKey) -> Option<ResourceInfo> {
        self.builtins
            .iter()
            .find(|i| i.key() == *res)
            .cloned()
            .or_else(|| {
                self.custom
                    .iter()
                    .find(|c| c.info.key() == *res)
                    .map(|c| c.info.clone())
            })
    }

    /// Types defined by a CRD, by CRD name.
    pub fn crd_type(&self, crd: &str) -> Option<ResourceInfo> {
        self.custom
            .iter()
            .find(|c| c.crd == crd)
            .map(|c| c.info.clone())
    }

    /// Re-derive the custom types from the stored CRDs.
    fn refresh_custom(&mut self) {
        let res = ResKey {
            group: "apiextensions.k8s.io".into(),
            resource: "customresourcedefinitions".into(),
        };
        self.custom = self
            .store
            .range(&res, None, None)
            .filter_map(|crd| {
                let info = resources::from_crd(crd)?;
                let established = crd
                    .pointer("/status/conditions")
                    .and_then(Value::as_array)
                    .is_some_and(|cs| {
                        cs.iter()
                            .any(|c| c["type"] == "Established" && c["status"] == "True")
                    });
                Some(CustomType {
                    crd: meta(crd, "name")?,
                    info,
                    established,
                    terminating: is_deleting(crd),
                })
            })
            .collect();
    }

    fn after_write(&mut self, res: &ResKey) {
        if res.group == "apiextensions.k8s.io" {
            self.refresh_custom();
        }
    }

    fn present(&self, mut obj: Value, t: &Target) -> Value {
        obj["apiVersion"] = json!(t.api_version());
        obj["kind"] = json!(t.info.kind);
        obj
    }
}

mod create;
mod delete;
mod read;
mod scale;
mod write;

impl State {
    // ----- helpers for controllers -------------------------------------------------------------

    /// A target for a stored object (its preferred version).
    pub fn target_for(&self, key: &ObjKey) -> Option<Target> {
        let info = self.info_for(&key.res)?;
        Some(Target {
            version: info.versions[0].clone(),
            info,
            namespace: key.namespace.clone(),
            name: key.name.clone(),
            subresource: None,
        })
    }

    /// Controller write: replace the object with `f(obj)` if that changes anything, honouring
    /// finalizer-removal semantics (manager `manager`).
    pub fn controller_update(
        &mut self,
        key: &ObjKey,
        manager: &str,
        sub: Option<&str>,
        f: impl FnOnce(&mut Value),
    ) {
        let Some(mut t) = self.target_for(key) else {
            return;
        };
        t.subresource = sub.map(str::to_string);
        let Some(old) = self.store.get(key).cloned() else {
            return;
        };
        let mut new = self.present(old.clone(), &t);
        f(&mut new);
        let o = WriteOpts {
            default_manager: manager.into(),
            ..Default::default()
        };
        let _ = self.write_existing(&t, old, new, &o, true, None);
    }

    /// Controller delete with a policy; errors (already gone…) are ignored.
    pub fn controller_delete(&mut self, key: &ObjKey, policy: Policy) {
        if let Some(t) = self.target_for(key) {
            let _ = self.delete(
                &t,
                &DeleteOpts {
                    policy: Some(policy),
                    ..Default::default()
                },
            );
        }
    }

    /// Drop a CRD's type after the CRD is gone (its objects are all deleted by then).
    pub fn finalizers_of(obj: &Value) -> Vec<String> {
        finalizers(obj)
    }

    /// The object's uid, empty if it has none.
    pub fn uid_of(obj: &Value) -> String {
        obj.pointer("/metadata/uid")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    }
}

/// Is the object being deleted?
pub fn deleting(v: &Value) -> bool {
    is_deleting(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{self, create_namespace, target};

    fn state() -> State {
        let mut s = test_support::state(100, 1);
        create_namespace(&mut s, "ns");
        s
    }

    #[test]
    fn continue_token_round_trip() {
        let t = encode_continue(42, "ns", "a/b");
        assert_eq!(decode_continue(&t), Some((42, "ns".into(), "a/b".into())));
        assert_eq!(decode_continue("zz"), None);
    }

    #[test]
    fn list_pages_with_continue() {
        let mut s = state();
        let t = target(&s, "", "configmaps", "ns", "");
        for i in 0..5 {
            s.create(
                &t,
                json!({"metadata": {"name": format!("c{i}"), "labels": {"i": i.to_string()}}}),
                &WriteOpts::default(),
                false,
            )
            .unwrap();
        }
        let mut o = ListOpts {
            limit: Some(2),
            ..Default::default()
        };
        let mut names = vec![];
        loop {
            let l = s.list(&t, &o).unwrap();
            names.extend(
                l["items"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|i| i["metadata"]["name"].as_str().unwrap().to_string()),
            );
            match l["metadata"]["continue"].as_str() {
                Some(c) => o.continue_token = Some(c.into()),
                None => break,
            }
        }
        assert_eq!(names, vec!["c0", "c1", "c2", "c3", "c4"]);
        let sel = ListOpts {
            labels: LabelSelector::parse("i in (1,3)").unwrap(),
            ..Default::default()
        };
        assert_eq!(
            s.list(&t, &sel).unwrap()["items"].as_array().unwrap().len(),
            2
        );
    }

    #[test]
    fn generation_bumps_only_on_spec() {
        let mut s = state();
        let t = target(&s, "apps", "deployments", "ns", "d");
        let (_, d) = s
            .create(
                &t,
                json!({"metadata": {"name": "d"}, "spec": {"replicas": 1, "selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}}),
                &WriteOpts::default(),
                false,
            )
            .unwrap();
        assert_eq!(d["metadata"]["generation"], 1);
        let (_, d) = s
            .patch(
                &t,
                PatchKind::Merge,
                br#"{"metadata":{"labels":{"a":"b"}}}"#,
                &WriteOpts::default(),
            )
            .unwrap();
        assert_eq!(d["metadata"]["generation"], 1);
        let (_, d2) = s
            .patch(
                &t,
                PatchKind::Merge,
                br#"{"spec":{"replicas":2}}"#,
                &WriteOpts::default(),
            )
            .unwrap();
        assert_eq!(d2["metadata"]["generation"], 2);
        // status on the main resource is ignored
        let (_, d3) = s
            .patch(
                &t,
                PatchKind::Merge,
                br#"{"status":{"replicas":2}}"#,
                &WriteOpts::default(),
            )
            .unwrap();
        assert_eq!(
            d3["metadata"]["resourceVersion"],
            d2["metadata"]["resourceVersion"]
        );
    }

    #[test]
    fn finalizer_lifecycle() {
        let mut s = state();
        let t = target(&s, "", "configmaps", "ns", "c");
        s.create(
            &t,
            json!({"metadata": {"name": "c", "finalizers": ["x/y"]}}),
            &WriteOpts::default(),
            false,
        )
        .unwrap();
        let (_, o) = s.delete(&t, &DeleteOpts::default()).unwrap();
        assert!(o["metadata"]["deletionTimestamp"].is_string());
        assert_eq!(o["metadata"]["deletionGracePeriodSeconds"], 0);
        let e = s
            .patch(
                &t,
                PatchKind::Merge,
                br#"{"metadata":{"finalizers":["x/y","new"]}}"#,
                &WriteOpts::default(),
            )
            .unwrap_err();
        assert_eq!(e.code, 422);
        s.patch(
            &t,
            PatchKind::Merge,
            br#"{"metadata":{"finalizers":null}}"#,
            &WriteOpts::default(),
        )
        .unwrap();
        assert_eq!(s.get(&t).unwrap_err().code, 404);
    }

    #[test]
    fn garbage_input_is_an_error_not_a_panic() {
        let mut s = state();
        let t = target(&s, "", "services", "ns", "svc");
        let o = WriteOpts::default();
        assert_eq!(s.create_from_body(&t, b"[1,2]", &o).unwrap_err().code, 400);
        assert_eq!(
            s.create_from_body(&t, b"\xff\xfe", &o).unwrap_err().code,
            400
        );
        let _ = s.create(
            &t,
            json!({"metadata": {"name": "svc"}, "spec": "x", "status": 7}),
            &o,
            false,
        );
        let _ = s.update(&t, br#"{"metadata":{"name":"svc"},"spec":[1]}"#, &o);
        let _ = s.patch(
            &t,
            PatchKind::Json,
            br#"[{"op":"replace","path":"/metadata","value":3}]"#,
            &o,
        );
        let _ = s.patch(
            &t,
            PatchKind::Merge,
            br#"{"metadata":null,"spec":null}"#,
            &o,
        );
        let _ = s.patch(&t, PatchKind::Apply, br#"{"apiVersion":"v1","kind":"Service","metadata":{"name":"svc"},"spec":{"ports":[{"name":1}]}}"#, &WriteOpts { field_manager: Some("m".into()), ..o.clone() });
        let d = target(&s, "apps", "deployments", "ns", "d");
        let _ = s.create(&d, json!({"metadata": {"name": "d"}, "spec": 5}), &o, false);
        let _ = s.scale_patch(&d, PatchKind::Merge, br#"{"spec":{"replicas":3}}"#, &o);
        let _ = s.delete(&t, &DeleteOpts::default());
    }

    #[test]
    fn put_creates_only_where_kube_allows_it() {
        let mut s = state();
        let lease = target(&s, "coordination.k8s.io", "leases", "ns", "l");
        let (code, _) = s
            .update(
                &lease,
                br#"{"metadata":{"name":"l"},"spec":{"holderIdentity":"a"}}"#,
                &WriteOpts::default(),
            )
            .unwrap();
        assert_eq!(code, 201);
        let cm = target(&s, "", "configmaps", "ns", "c");
        assert_eq!(
            s.update(&cm, br#"{"metadata":{"name":"c"}}"#, &WriteOpts::default())
                .unwrap_err()
                .code,
            404
        );
    }

    #[test]
    fn stale_update_conflicts() {
        let mut s = state();
        let t = target(&s, "", "configmaps", "ns", "c");
        let (_, o) = s
            .create(
                &t,
                json!({"metadata": {"name": "c"}}),
                &WriteOpts::default(),
                false,
            )
            .unwrap();
        s.patch(
            &t,
            PatchKind::Merge,
            br#"{"data":{"a":"1"}}"#,
            &WriteOpts::default(),
        )
        .unwrap();
        let e = s
            .update(&t, o.to_string().as_bytes(), &WriteOpts::default())
            .unwrap_err();
        assert_eq!((e.code, e.reason), (409, "Conflict"));
    }
}
