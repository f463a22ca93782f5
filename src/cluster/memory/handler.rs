//! API semantics of every verb over the [`Store`]: create/get/list/update/patch/apply/delete/
//! deletecollection with validation, optimistic concurrency, finalizers, deletion propagation,
//! status-subresource separation, generation, managedFields and dry-run. The controllers reuse
//! the same entry points, so their writes follow the same rules and emit the same events.
//!
//! Everything here is synchronous and runs under the server's single state lock.

use serde_json::{Map, Value, json};

use super::errors::{ApiError, Cause, Subject, success_status};
use super::patch::{self, PatchKind};
use super::resources::{self, ResKey, ResourceInfo};
use super::rng::XorShift;
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
    pub rng: XorShift,
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
    v.pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
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
            rng: XorShift::new(seed),
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

    // ----- reads -------------------------------------------------------------------------------

    /// GET one object.
    pub fn get(&self, t: &Target) -> Result<Value, ApiError> {
        let obj = self
            .store
            .get(&t.key())
            .ok_or_else(|| ApiError::not_found(t.subject()))?;
        Ok(self.present(obj.clone(), t))
    }

    /// LIST a collection.
    pub fn list(&self, t: &Target, o: &ListOpts) -> Result<Value, ApiError> {
        let ns = (!t.namespace.is_empty()).then_some(t.namespace.as_str());
        let (rv, after) = match o.continue_token.as_deref().filter(|c| !c.is_empty()) {
            Some(tok) => {
                let (rv, a, b) = decode_continue(tok).ok_or_else(|| {
                    ApiError::bad_request(format!("continue key is not valid: {tok}"))
                })?;
                (rv, Some((a, b)))
            }
            None => (self.store.rv(), None),
        };
        let limit = o.limit.filter(|l| *l > 0);
        let matches = |v: &&Value| {
            o.fields.matches(v)
                && o.labels
                    .matches(v.pointer("/metadata/labels").and_then(Value::as_object))
        };
        let mut items = Vec::new();
        let mut next = None;
        let mut remaining = 0usize;
        let candidates: Box<dyn Iterator<Item = &Value>> = match (o.fields.exact_name(), ns) {
            (Some(name), _) if !t.info.namespaced || ns.is_some() => Box::new(
                self.store
                    .get(&ObjKey {
                        res: t.info.key(),
                        namespace: t.namespace.clone(),
                        name: name.into(),
                    })
                    .into_iter(),
            ),
            _ if rv < self.store.rv() => {
                match self.store.snapshot_range(&t.info.key(), ns, after, rv) {
                    Some(items) => Box::new(items.into_iter()),
                    None => {
                        return Err(ApiError::gone(
                            "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.",
                        ));
                    }
                }
            }
            _ => self.store.range(&t.info.key(), ns, after),
        };
        let selective = !o.labels.is_empty() || o.fields != FieldSelector::default();
        let mut it = candidates.filter(matches);
        for v in it.by_ref() {
            items.push(self.present(v.clone(), t));
            if limit.is_some_and(|l| items.len() >= l) {
                break;
            }
        }
        if limit.is_some_and(|l| items.len() >= l) {
            // Like kube: remainingItemCount only without selectors; with them, only "more?".
            let more = if selective {
                it.next().is_some()
            } else {
                remaining = it.count();
                remaining > 0
            };
            if more {
                let last: &Value = items.last().expect("limit > 0");
                next = Some(encode_continue(
                    rv,
                    &meta(last, "namespace").unwrap_or_default(),
                    &meta(last, "name").unwrap_or_default(),
                ));
            }
        }
        let mut md = json!({"resourceVersion": rv.to_string()});
        if let Some(n) = next {
            md["continue"] = json!(n);
            if !selective {
                md["remainingItemCount"] = json!(remaining);
            }
        }
        Ok(
            json!({"kind": format!("{}List", t.info.kind), "apiVersion": t.api_version(), "metadata": md, "items": items}),
        )
    }

    // ----- create ------------------------------------------------------------------------------

    fn check_namespace(&self, t: &Target) -> Result<(), ApiError> {
        if !t.info.namespaced {
            return Ok(());
        }
        let key = ObjKey {
            res: ResKey {
                group: "".into(),
                resource: "namespaces".into(),
            },
            namespace: "".into(),
            name: t.namespace.clone(),
        };
        match self.store.get(&key) {
            None => Err(ApiError::not_found(Subject {
                group: "",
                resource: "namespaces",
                name: &t.namespace,
            })),
            Some(ns) if is_deleting(ns) => Err(ApiError::forbidden(
                t.subject(),
                format!(
                    "{} \"{}\" is forbidden: unable to create new content in namespace {} because it is being terminated",
                    if t.info.group.is_empty() {
                        t.info.plural.clone()
                    } else {
                        format!("{}.{}", t.info.plural, t.info.group)
                    },
                    t.name,
                    t.namespace
                ),
            )),
            Some(_) => Ok(()),
        }
    }

    fn check_type_accepting(&self, t: &Target) -> Result<(), ApiError> {
        if self
            .custom
            .iter()
            .any(|c| c.info.key() == t.info.key() && c.terminating)
        {
            return Err(ApiError::method_not_allowed(format!(
                "create not allowed while custom resource definition is terminating ({}.{})",
                t.info.plural, t.info.group
            )));
        }
        Ok(())
    }

    /// POST: create an object (`body` already parsed). `managed` = managedFields already set (apply).
    pub fn create(
        &mut self,
        t: &Target,
        mut obj: Value,
        o: &WriteOpts,
        managed: bool,
    ) -> Result<Reply, ApiError> {
        let mut t = t.clone();
        if let Some(k) = obj.get("kind").and_then(Value::as_str)
            && k != t.info.kind
        {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({}) does not match the expected API version ({})",
                obj.get("apiVersion").and_then(Value::as_str).unwrap_or(""),
                t.api_version()
            )));
        }
        let m = meta_mut(&mut obj);
        let body_ns = m
            .get("namespace")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        if t.info.namespaced {
            if !body_ns.is_empty() && body_ns != t.namespace {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
            m.insert("namespace".into(), json!(t.namespace));
        } else {
            m.remove("namespace");
        }
        let mut name = m
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        if name.is_empty()
            && let Some(g) = m
                .get("generateName")
                .and_then(Value::as_str)
                .filter(|g| !g.is_empty())
        {
            name = format!("{g}{}", self.rng.name_suffix(5));
        }
        if name.is_empty() {
            return Err(ApiError::invalid(
                &t.info.group,
                &t.info.kind,
                "",
                vec![Cause::required(
                    "metadata.name",
                    "name or generateName is required",
                )],
            ));
        }
        if !t.name.is_empty() && t.name != name {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({name}) does not match the name on the URL ({})",
                t.name
            )));
        }
        t.name = name.clone();
        validation::check_name(&t.info, &name)
            .map_err(|c| ApiError::invalid(&t.info.group, &t.info.kind, &name, vec![c]))?;
        if m.get("resourceVersion")
            .and_then(Value::as_str)
            .is_some_and(|s| !s.is_empty())
        {
            return Err(ApiError::bad_request(
                "resourceVersion should not be set on objects to be created",
            ));
        }
        self.check_namespace(&t)?;
        self.check_type_accepting(&t)?;
        let key = t.key();
        if self.store.get(&key).is_some() {
            return Err(ApiError::already_exists(t.subject()));
        }
        let uid = self.rng.uuid();
        let m = meta_mut(&mut obj);
        m.insert("name".into(), json!(name));
        m.insert("uid".into(), json!(uid));
        m.insert("creationTimestamp".into(), json!(now()));
        for f in [
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "selfLink",
        ] {
            m.remove(f);
        }
        if t.info.generation {
            m.insert("generation".into(), json!(1));
        } else {
            m.remove("generation");
        }
        if t.info.status_subresource
            && let Some(o) = obj.as_object_mut()
        {
            o.remove("status");
        }
        obj["apiVersion"] = json!(t.api_version());
        obj["kind"] = json!(t.info.kind);
        self.defaults_on_create(&t, &mut obj)?;
        t.check_schema(&mut obj, o.strict)?;
        check_metadata(&t, &obj)?;
        if !managed {
            ssa::track_update(
                None,
                &mut obj,
                &o.manager(),
                &t.api_version(),
                t.scope(),
                &now(),
                &t.lists(),
            );
        }
        if o.dry_run {
            return Ok((201, obj));
        }
        let stored = self.store.insert(key.clone(), obj);
        self.after_write(&key.res);
        Ok((201, self.present(stored, &t)))
    }

    fn defaults_on_create(&mut self, t: &Target, obj: &mut Value) -> Result<(), ApiError> {
        match (t.info.group.as_str(), t.info.kind.as_str()) {
            ("", "Namespace") => {
                obj["spec"] = json!({"finalizers": [NS_FINALIZER]});
                obj["status"] = json!({"phase": "Active"});
            }
            ("", "Service") => {
                let external =
                    obj.pointer("/spec/type").and_then(Value::as_str) == Some("ExternalName");
                if !external
                    && obj
                        .pointer("/spec/clusterIP")
                        .is_none_or(|v| v.as_str() == Some(""))
                {
                    let n = self.next_ip;
                    self.next_ip += 1;
                    let ip = format!("10.96.{}.{}", (n >> 8) & 0xff, n & 0xff);
                    if !obj.get("spec").is_some_and(Value::is_object) {
                        obj["spec"] = json!({});
                    }
                    obj["spec"]["clusterIP"] = json!(ip);
                    obj["spec"]["clusterIPs"] = json!([ip]);
                }
            }
            ("apiextensions.k8s.io", "CustomResourceDefinition") => {
                let info = resources::from_crd(obj).ok_or_else(|| {
                    ApiError::invalid(
                        &t.info.group,
                        &t.info.kind,
                        &t.name,
                        vec![Cause::required("spec", "spec.group, spec.names.{kind,plural} and a served version are required")],
                    )
                })?;
                let expect = format!("{}.{}", info.plural, info.group);
                if t.name != expect {
                    return Err(ApiError::invalid(
                        &t.info.group,
                        &t.info.kind,
                        &t.name,
                        vec![Cause::invalid(
                            "metadata.name",
                            &json!(t.name),
                            &format!("must be spec.names.plural+\".\"+spec.group: {expect:?}"),
                        )],
                    ));
                }
                if self.custom.iter().any(|c| c.info.key() == info.key()) {
                    return Err(ApiError::already_exists(t.subject()));
                }
                let m = meta_mut(obj);
                let mut fins: Vec<Value> = m
                    .get("finalizers")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                if !fins.contains(&json!(CRD_FINALIZER)) {
                    fins.push(json!(CRD_FINALIZER));
                }
                m.insert("finalizers".into(), Value::Array(fins));
                let names = obj["spec"]["names"].clone();
                let stored: Vec<Value> = obj["spec"]["versions"]
                    .as_array()
                    .map(|vs| {
                        vs.iter()
                            .filter(|v| v["storage"] == true)
                            .map(|v| v["name"].clone())
                            .collect()
                    })
                    .unwrap_or_default();
                obj["status"] = json!({
                    "acceptedNames": names,
                    "storedVersions": stored,
                    "conditions": [
                        {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts", "message": "no conflicts found", "lastTransitionTime": now()},
                        {"type": "Established", "status": "False", "reason": "Installing", "message": "the initial names have been accepted", "lastTransitionTime": now()},
                    ],
                });
            }
            _ => {}
        }
        Ok(())
    }

    // ----- update / patch / apply --------------------------------------------------------------

    /// Merge the non-client-writable parts of `old` into `new` and enforce the write rules;
    /// then store (or, for dry-run, just return) the result.
    fn write_existing(
        &mut self,
        t: &Target,
        old: Value,
        mut new: Value,
        o: &WriteOpts,
        track: bool,
        precondition_rv: Option<String>,
    ) -> Result<Reply, ApiError> {
        let old_rv = meta(&old, "resourceVersion").unwrap_or_default();
        if let Some(rv) = precondition_rv.filter(|r| !r.is_empty())
            && rv != old_rv
        {
            return Err(ApiError::conflict_stale(t.subject()));
        }
        if !new.is_object() {
            return Err(ApiError::bad_request("object must be a JSON object"));
        }
        if let Some(n) = meta(&new, "name").filter(|n| !n.is_empty() && *n != t.name) {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({n}) does not match the name on the URL ({})",
                t.name
            )));
        }
        if let Some(n) = meta(&new, "namespace")
            .filter(|n| t.info.namespaced && !n.is_empty() && *n != t.namespace)
        {
            let _ = n;
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
        let scope = t.scope();
        // Status subresource separation.
        match scope {
            Scope::Status => {
                let mut merged = old.clone();
                match new.get("status") {
                    Some(s) => merged["status"] = s.clone(),
                    None => {
                        if let Some(m) = merged.as_object_mut() {
                            m.remove("status");
                        }
                    }
                }
                if let Some(mf) = new.pointer("/metadata/managedFields") {
                    meta_mut(&mut merged).insert("managedFields".into(), mf.clone());
                }
                new = merged;
            }
            Scope::Main => match old.get("status") {
                Some(s) => new["status"] = s.clone(),
                None => {
                    if let Some(m) = new.as_object_mut() {
                        m.remove("status");
                    }
                }
            },
            Scope::Whole => {}
        }
        // Server-owned metadata.
        let m = meta_mut(&mut new);
        for f in [
            "name",
            "namespace",
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
        ] {
            match old.pointer(&format!("/metadata/{f}")) {
                Some(v) => {
                    m.insert(f.into(), v.clone());
                }
                None => {
                    m.remove(f);
                }
            }
        }
        m.insert("resourceVersion".into(), json!(old_rv));
        if !m.contains_key("managedFields")
            && let Some(mf) = old.pointer("/metadata/managedFields")
        {
            m.insert("managedFields".into(), mf.clone());
        }
        new["apiVersion"] = json!(t.api_version());
        new["kind"] = json!(t.info.kind);
        // Namespaces: spec.finalizers only through /finalize, phase is server-owned.
        if t.info.group.is_empty() && t.info.kind == "Namespace" {
            if t.subresource.as_deref() == Some("finalize") {
                let spec_f = new.pointer("/spec/finalizers").cloned();
                let mut merged = old.clone();
                merged["spec"]["finalizers"] = spec_f.unwrap_or(json!([]));
                new = merged;
            } else {
                if let Some(f) = old.pointer("/spec/finalizers") {
                    if !new.get("spec").is_some_and(Value::is_object) {
                        new["spec"] = json!({});
                    }
                    new["spec"]["finalizers"] = f.clone();
                }
                if let Some(p) = old.pointer("/status/phase") {
                    if !new.get("status").is_some_and(Value::is_object) {
                        new["status"] = json!({});
                    }
                    new["status"]["phase"] = p.clone();
                }
            }
        }
        // Finalizers on deleting objects.
        if is_deleting(&old) {
            let before = finalizers(&old);
            let added: Vec<String> = finalizers(&new)
                .into_iter()
                .filter(|f| !before.contains(f))
                .collect();
            if !added.is_empty() {
                return Err(ApiError::invalid(
                    &t.info.group,
                    &t.info.kind,
                    &t.name,
                    vec![Cause::forbidden(
                        "metadata.finalizers",
                        &format!(
                            "no new finalizers can be added if the object is being deleted, found new finalizers {added:?}"
                        ),
                    )],
                ));
            }
        }
        if t.info.group.is_empty()
            && t.info.kind == "Service"
            && new.pointer("/spec/clusterIP").is_none()
            && let Some(ip) = old.pointer("/spec/clusterIP")
            && let Some(spec) = new.get_mut("spec").and_then(Value::as_object_mut)
        {
            spec.insert("clusterIP".into(), ip.clone());
        }
        t.check_schema(&mut new, o.strict)?;
        check_metadata(t, &new)?;
        validation::check_immutable(&t.info, &old, &new)?;
        // Generation: bumps on anything but metadata and status.
        if t.info.generation {
            let has_status = t.info.status_subresource;
            let strip = |v: &Value| {
                let mut v = v.clone();
                if let Some(m) = v.as_object_mut() {
                    m.remove("metadata");
                    if has_status {
                        m.remove("status");
                    }
                    m.remove("apiVersion");
                    m.remove("kind");
                }
                v
            };
            if strip(&old) != strip(&new) {
                let g = old
                    .pointer("/metadata/generation")
                    .and_then(Value::as_i64)
                    .unwrap_or(0)
                    + 1;
                meta_mut(&mut new).insert("generation".into(), json!(g));
            }
        }
        if track {
            ssa::track_update(
                Some(&old),
                &mut new,
                &o.manager(),
                &t.api_version(),
                scope,
                &now(),
                &t.lists(),
            );
        }
        // No-op writes do not bump the resourceVersion.
        let mut cmp_old = old.clone();
        cmp_old["apiVersion"] = new["apiVersion"].clone();
        if cmp_old == new {
            return Ok((200, self.present(old, t)));
        }
        if o.dry_run {
            return Ok((200, new));
        }
        let key = t.key();
        if is_deleting(&new) && !held(&new, &t.info) {
            let gone = self.store.remove(&key).unwrap_or(new);
            self.after_write(&key.res);
            return Ok((200, self.present(gone, t)));
        }
        let stored = self.store.replace(key.clone(), new);
        self.after_write(&key.res);
        Ok((200, self.present(stored, t)))
    }

    /// PUT.
    pub fn update(&mut self, t: &Target, body: &[u8], o: &WriteOpts) -> Result<Reply, ApiError> {
        let new = parse_body(body)?;
        let old = self
            .store
            .get(&t.key())
            .cloned()
            .ok_or_else(|| ApiError::not_found(t.subject()))?;
        let rv = meta(&new, "resourceVersion").filter(|r| !r.is_empty());
        if rv.is_none() && !t.info.unconditional_update {
            return Err(ApiError::invalid(
                &t.info.group,
                &t.info.kind,
                &t.name,
                vec![Cause::invalid(
                    "metadata.resourceVersion",
                    &json!(0),
                    "must be specified for an update",
                )],
            ));
        }
        self.write_existing(t, old, new, o, true, rv)
    }

    /// PATCH (merge / json / strategic / apply).
    pub fn patch(
        &mut self,
        t: &Target,
        kind: PatchKind,
        body: &[u8],
        o: &WriteOpts,
    ) -> Result<Reply, ApiError> {
        if kind == PatchKind::Apply {
            return self.apply(t, body, o);
        }
        let old = self
            .store
            .get(&t.key())
            .cloned()
            .ok_or_else(|| ApiError::not_found(t.subject()))?;
        let mut new = self.present(old.clone(), t);
        patch::apply_patch(kind, &mut new, body)?;
        let rv = meta(&new, "resourceVersion");
        self.write_existing(t, old, new, o, true, rv)
    }

    fn apply(&mut self, t: &Target, body: &[u8], o: &WriteOpts) -> Result<Reply, ApiError> {
        let manager = o
            .field_manager
            .clone()
            .filter(|m| !m.is_empty())
            .ok_or_else(|| {
                ApiError::invalid(
                    "meta.k8s.io",
                    "PatchOptions",
                    "",
                    vec![Cause::required(
                        "fieldManager",
                        "is required for apply patch",
                    )],
                )
            })?;
        let applied = parse_body(body)?;
        if applied
            .get("apiVersion")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
            || applied
                .get("kind")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
        {
            return Err(ApiError::bad_request(
                "apiVersion and kind must be set in the applied configuration",
            ));
        }
        if applied["kind"] != json!(t.info.kind) {
            return Err(ApiError::bad_request(format!(
                "the kind in the applied configuration ({}) does not match the request ({})",
                applied["kind"], t.info.kind
            )));
        }
        if let Some(n) = meta(&applied, "name").filter(|n| *n != t.name) {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({n}) does not match the name on the URL ({})",
                t.name
            )));
        }
        let live = self.store.get(&t.key()).cloned();
        let base = match &live {
            Some(l) => self.present(l.clone(), t),
            None => {
                if t.scope() == Scope::Status {
                    return Err(ApiError::not_found(t.subject()));
                }
                json!({"apiVersion": t.api_version(), "kind": t.info.kind, "metadata": {"name": t.name}})
            }
        };
        let ts = now();
        let req = ssa::ApplyRequest {
            applied: &applied,
            manager: &manager,
            force: o.force,
            api_version: &t.api_version(),
            scope: t.scope(),
            now: &ts,
            lists: t.lists(),
        };
        let new = ssa::apply(&base, &req).map_err(|cs| self.conflict_error(t, &cs))?;
        let precondition = meta(&applied, "resourceVersion");
        match live {
            Some(old) => self.write_existing(t, old, new, o, false, precondition),
            None => self.create(t, new, o, true),
        }
    }

    fn conflict_error(&self, t: &Target, cs: &[ssa::Conflict]) -> ApiError {
        let n = cs.len();
        let mut by_mgr: Vec<(String, Vec<String>)> = Vec::new();
        for c in cs {
            let label = format!("conflict with \"{}\" using {}", c.manager, c.api_version);
            let p = ssa::display_path(&c.path);
            match by_mgr.iter_mut().find(|(l, _)| *l == label) {
                Some((_, ps)) => ps.push(p),
                None => by_mgr.push((label, vec![p])),
            }
        }
        let message = if n == 1 {
            format!(
                "Apply failed with 1 conflict: {}: {}",
                by_mgr[0].0, by_mgr[0].1[0]
            )
        } else {
            let parts: Vec<String> = by_mgr
                .iter()
                .map(|(l, ps)| {
                    format!(
                        "{}:\n{}",
                        l.replacen("conflict", "conflicts", 1),
                        ps.iter()
                            .map(|p| format!("- {p}"))
                            .collect::<Vec<_>>()
                            .join("\n")
                    )
                })
                .collect();
            format!("Apply failed with {n} conflicts: {}", parts.join("\n"))
        };
        let mut e = ApiError::new(409, "Conflict", message);
        let mut d = Map::new();
        d.insert("name".into(), json!(t.name));
        if !t.info.group.is_empty() {
            d.insert("group".into(), json!(t.info.group));
        }
        d.insert("kind".into(), json!(t.info.plural));
        d.insert(
            "causes".into(),
            Value::Array(
                cs.iter()
                    .map(|c| {
                        json!({"reason": "FieldManagerConflict",
                               "message": format!("conflict with \"{}\" using {}", c.manager, c.api_version),
                               "field": ssa::display_path(&c.path)})
                    })
                    .collect(),
            ),
        );
        e.details = Some(Box::new(d));
        e
    }

    /// POST body for create.
    pub fn create_from_body(
        &mut self,
        t: &Target,
        body: &[u8],
        o: &WriteOpts,
    ) -> Result<Reply, ApiError> {
        let obj = parse_body(body)?;
        self.create(t, obj, o, false)
    }

    // ----- scale subresource ------------------------------------------------------------------

    /// GET `…/scale`: the `autoscaling/v1` Scale view of `spec.replicas`.
    pub fn scale_get(&self, t: &Target) -> Result<Value, ApiError> {
        let obj = self
            .store
            .get(&t.key())
            .ok_or_else(|| ApiError::not_found(t.subject()))?;
        let selector = obj
            .pointer("/spec/selector/matchLabels")
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .unwrap_or_default();
        Ok(json!({
            "kind": "Scale", "apiVersion": "autoscaling/v1",
            "metadata": {"name": t.name, "namespace": t.namespace, "uid": obj["metadata"]["uid"],
                         "resourceVersion": obj["metadata"]["resourceVersion"], "creationTimestamp": obj["metadata"]["creationTimestamp"]},
            "spec": {"replicas": obj.pointer("/spec/replicas").cloned().unwrap_or(json!(1))},
            "status": {"replicas": obj.pointer("/status/replicas").cloned().unwrap_or(json!(0)), "selector": selector},
        }))
    }

    /// PUT/PATCH `…/scale`: writes `spec.replicas` of the object.
    pub fn scale_write(
        &mut self,
        t: &Target,
        scale: Value,
        o: &WriteOpts,
    ) -> Result<Reply, ApiError> {
        let old = self
            .store
            .get(&t.key())
            .cloned()
            .ok_or_else(|| ApiError::not_found(t.subject()))?;
        let replicas = scale
            .pointer("/spec/replicas")
            .cloned()
            .filter(Value::is_i64)
            .ok_or_else(|| {
                ApiError::invalid(
                    "autoscaling",
                    "Scale",
                    &t.name,
                    vec![Cause::required("spec.replicas", "")],
                )
            })?;
        let mut main = t.clone();
        main.subresource = None;
        let mut new = self.present(old.clone(), &main);
        if !new.get("spec").is_some_and(Value::is_object) {
            new["spec"] = json!({});
        }
        new["spec"]["replicas"] = replicas;
        let (code, _) =
            self.write_existing(&main, old, new, o, true, meta(&scale, "resourceVersion"))?;
        if o.dry_run {
            let mut s = self.scale_get(t)?;
            s["spec"]["replicas"] = scale["spec"]["replicas"].clone();
            return Ok((code, s));
        }
        Ok((code, self.scale_get(t)?))
    }

    /// PATCH `…/scale` with a non-apply patch.
    pub fn scale_patch(
        &mut self,
        t: &Target,
        kind: PatchKind,
        body: &[u8],
        o: &WriteOpts,
    ) -> Result<Reply, ApiError> {
        if kind == PatchKind::Apply {
            return Err(ApiError::unsupported_media("application/apply-patch+yaml"));
        }
        let mut s = self.scale_get(t)?;
        patch::apply_patch(kind, &mut s, body)?;
        self.scale_write(t, s, o)
    }

    /// PUT `…/scale`.
    pub fn scale_update(
        &mut self,
        t: &Target,
        body: &[u8],
        o: &WriteOpts,
    ) -> Result<Reply, ApiError> {
        let s = parse_body(body)?;
        self.scale_write(t, s, o)
    }

    // ----- delete ------------------------------------------------------------------------------

    /// DELETE one object.
    pub fn delete(&mut self, t: &Target, d: &DeleteOpts) -> Result<Reply, ApiError> {
        let key = t.key();
        let obj = self
            .store
            .get(&key)
            .cloned()
            .ok_or_else(|| ApiError::not_found(t.subject()))?;
        let uid = meta(&obj, "uid").unwrap_or_default();
        if let Some(p) = d.uid.as_deref().filter(|p| *p != uid) {
            return Err(ApiError::conflict(
                t.subject(),
                &format!(
                    "Precondition failed: UID in precondition: {p}, UID in object meta: {uid}"
                ),
            ));
        }
        let rv = meta(&obj, "resourceVersion").unwrap_or_default();
        if let Some(p) = d.resource_version.as_deref().filter(|p| *p != rv) {
            return Err(ApiError::conflict(
                t.subject(),
                &format!(
                    "Precondition failed: ResourceVersion in precondition: {p}, ResourceVersion in meta: {rv}"
                ),
            ));
        }
        let is_ns = t.info.group.is_empty() && t.info.kind == "Namespace";
        if is_ns && IMMORTAL_NAMESPACES.contains(&t.name.as_str()) {
            return Err(ApiError::forbidden(
                t.subject(),
                format!(
                    "namespaces \"{}\" is forbidden: this namespace may not be deleted",
                    t.name
                ),
            ));
        }
        let policy = d
            .policy
            .unwrap_or(if t.info.group == "batch" && t.info.kind == "Job" {
                Policy::Orphan
            } else {
                Policy::Background
            });
        let mut new = obj.clone();
        if policy == Policy::Orphan && !d.dry_run {
            self.orphan_dependents(&uid);
        }
        if policy == Policy::Foreground && !is_deleting(&obj) {
            let mut f = finalizers(&new);
            if !f.iter().any(|x| x == FOREGROUND) {
                f.push(FOREGROUND.into());
            }
            meta_mut(&mut new).insert("finalizers".into(), json!(f));
        }
        if is_ns && !is_deleting(&obj) {
            new["status"]["phase"] = json!("Terminating");
        }
        if held(&new, &t.info) {
            if is_deleting(&obj) {
                return Ok((200, self.present(obj, t)));
            }
            let m = meta_mut(&mut new);
            m.insert("deletionTimestamp".into(), json!(now()));
            m.insert("deletionGracePeriodSeconds".into(), json!(0));
            if let Some(g) = m.get("generation").and_then(Value::as_i64) {
                m.insert("generation".into(), json!(g + 1));
            }
            if d.dry_run {
                return Ok((200, self.present(new, t)));
            }
            let stored = self.store.replace(key.clone(), new);
            self.after_write(&key.res);
            return Ok((200, self.present(stored, t)));
        }
        if d.dry_run {
            return Ok((
                200,
                success_status(&t.info.group, &t.info.plural, &t.name, &uid),
            ));
        }
        self.store.remove(&key);
        self.after_write(&key.res);
        Ok((
            200,
            success_status(&t.info.group, &t.info.plural, &t.name, &uid),
        ))
    }

    /// Remove ownerReferences to `uid` from every dependent (Orphan propagation).
    fn orphan_dependents(&mut self, uid: &str) {
        let deps = self.dependents(uid);
        for k in deps {
            if let Some(mut o) = self.store.get(&k).cloned() {
                if let Some(refs) = o
                    .pointer_mut("/metadata/ownerReferences")
                    .and_then(Value::as_array_mut)
                {
                    refs.retain(|r| r.get("uid").and_then(Value::as_str) != Some(uid));
                    if refs.is_empty() {
                        meta_mut(&mut o).remove("ownerReferences");
                    }
                }
                self.store.replace(k, o);
            }
        }
    }

    /// Objects with an ownerReference to `uid`.
    pub fn dependents(&self, uid: &str) -> Vec<ObjKey> {
        self.store
            .owned()
            .filter(|k| {
                self.store
                    .get(k)
                    .and_then(|o| o.pointer("/metadata/ownerReferences"))
                    .and_then(Value::as_array)
                    .is_some_and(|refs| {
                        refs.iter()
                            .any(|r| r.get("uid").and_then(Value::as_str) == Some(uid))
                    })
            })
            .cloned()
            .collect()
    }

    /// DELETE on a collection.
    pub fn delete_collection(
        &mut self,
        t: &Target,
        l: &ListOpts,
        d: &DeleteOpts,
    ) -> Result<Reply, ApiError> {
        let list = self.list(
            t,
            &ListOpts {
                limit: None,
                continue_token: None,
                ..l.clone()
            },
        )?;
        let mut out = Vec::new();
        for item in list["items"].as_array().cloned().unwrap_or_default() {
            let mut ti = t.clone();
            ti.name = meta(&item, "name").unwrap_or_default();
            ti.namespace = meta(&item, "namespace").unwrap_or_default();
            ti.subresource = None;
            match self.delete(
                &ti,
                &DeleteOpts {
                    uid: None,
                    resource_version: None,
                    ..d.clone()
                },
            ) {
                Ok((_, v)) if v["kind"] == "Status" => out.push(item),
                Ok((_, v)) => out.push(v),
                Err(e) if e.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
        Ok((
            200,
            json!({"kind": format!("{}List", t.info.kind), "apiVersion": t.api_version(), "metadata": {"resourceVersion": self.store.rv().to_string()}, "items": out}),
        ))
    }

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
}

/// Is the object being deleted?
pub fn deleting(v: &Value) -> bool {
    is_deleting(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn state() -> State {
        let mut s = State::new(Store::new(100, Arc::new(tokio::sync::Notify::new())), 1);
        let t = target(&s, "", "namespaces", "", "");
        s.create(
            &t,
            json!({"metadata": {"name": "ns"}}),
            &WriteOpts::default(),
            false,
        )
        .unwrap();
        s
    }

    fn target(s: &State, group: &str, plural: &str, ns: &str, name: &str) -> Target {
        let info = s
            .builtins
            .iter()
            .find(|i| i.group == group && i.plural == plural)
            .unwrap()
            .clone();
        Target {
            version: info.versions[0].clone(),
            info,
            namespace: ns.into(),
            name: name.into(),
            subresource: None,
        }
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
