//! PUT, PATCH and server-side apply: optimistic concurrency, status-subresource separation,
//! server-owned metadata, finalizer rules on deleting objects, schema and immutability checks,
//! generation, managedFields, no-op detection and dry-run.

use serde_json::{Map, Value, json};

use super::create::defaults_on_decode;
use super::*;
use crate::status_rules;

impl State {
    /// Merge the non-client-writable parts of `old` into `new` and enforce the write rules;
    /// then store (or, for dry-run, just return) the result.
    pub(super) fn write_existing(
        &mut self,
        t: &Target,
        old: Value,
        new: Value,
        o: &WriteOpts,
        track: bool,
        precondition_rv: Option<String>,
    ) -> Result<Reply, ApiError> {
        let old_rv = meta(&old, "resourceVersion").unwrap_or_default();
        check_request(t, &old_rv, precondition_rv, &new)?;
        let scope = t.scope();
        let mut new = separate_status(t, scope, &old, new);
        keep_server_metadata(t, &old, &mut new, &old_rv);
        let mut new = keep_namespace_fields(t, &old, new);
        check_no_new_finalizers(t, &old, &new)?;
        keep_cluster_ip(t, &old, &mut new);
        let decoded = decode_and_validate(t, scope, &old, &mut new, o.strict)?;
        bump_generation(t, scope, &old, &mut new, decoded.as_ref());
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
        self.store_write(t, old, new, o.dry_run)
    }

    /// Store `new` in place of `old`: nothing for a no-op write (the resourceVersion does not
    /// move), the would-be result for a dry run, and removal when the write took the last
    /// finalizer of a deleting object.
    fn store_write(
        &mut self,
        t: &Target,
        old: Value,
        new: Value,
        dry_run: bool,
    ) -> Result<Reply, ApiError> {
        let mut cmp_old = old.clone();
        cmp_old["apiVersion"] = new["apiVersion"].clone();
        if cmp_old == new {
            return Ok((200, self.present(old, t)));
        }
        if dry_run {
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
        let mut new = parse_body(body)?;
        let Some(old) = self.store.get(&t.key()).cloned() else {
            // Some kinds (RBAC, Lease, Service, Event) may be created with a PUT, like in kube.
            if t.info.create_on_update && t.subresource.is_none() {
                meta_mut(&mut new).remove("resourceVersion");
                return self.create(t, new, o, false);
            }
            return Err(ApiError::not_found(t.subject()));
        };
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

    pub(super) fn apply(
        &mut self,
        t: &Target,
        body: &[u8],
        o: &WriteOpts,
    ) -> Result<Reply, ApiError> {
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
        let ts = now();
        let base = match &live {
            Some(l) => {
                let mut base = self.present(l.clone(), t);
                ssa::adopt_unmanaged(&mut base, &t.api_version(), t.scope(), &ts, &t.lists());
                base
            }
            None => {
                if t.scope() == Scope::Status {
                    return Err(ApiError::not_found(t.subject()));
                }
                json!({"apiVersion": t.api_version(), "kind": t.info.kind, "metadata": {"name": t.name}})
            }
        };
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

    pub(super) fn conflict_error(&self, t: &Target, cs: &[ssa::Conflict]) -> ApiError {
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
}

/// The request itself: the resourceVersion precondition (409 when stale), a JSON object, and a
/// name and namespace matching the URL.
fn check_request(
    t: &Target,
    old_rv: &str,
    precondition_rv: Option<String>,
    new: &Value,
) -> Result<(), ApiError> {
    if let Some(rv) = precondition_rv.filter(|r| !r.is_empty())
        && rv != old_rv
    {
        return Err(ApiError::conflict_stale(t.subject()));
    }
    if !new.is_object() {
        return Err(ApiError::bad_request("object must be a JSON object"));
    }
    if let Some(n) = meta(new, "name").filter(|n| !n.is_empty() && *n != t.name) {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({n}) does not match the name on the URL ({})",
            t.name
        )));
    }
    if meta(new, "namespace")
        .is_some_and(|n| t.info.namespaced && !n.is_empty() && n != t.namespace)
    {
        return Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        ));
    }
    Ok(())
}

/// Status subresource separation: a `/status` write changes only the status (and the metadata
/// the kind's `/status` accepts), a write of the main resource never the status.
fn separate_status(t: &Target, scope: Scope, old: &Value, mut new: Value) -> Value {
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
            let mut carried = vec!["managedFields"];
            carried.extend(validation::status_writable_metadata(&t.info));
            for f in carried {
                match new.pointer(&format!("/metadata/{f}")) {
                    Some(v) => {
                        meta_mut(&mut merged).insert(f.into(), v.clone());
                    }
                    None if f != "managedFields" => {
                        meta_mut(&mut merged).remove(f);
                    }
                    None => {}
                }
            }
            merged
        }
        Scope::Main => {
            match old.get("status") {
                Some(s) => new["status"] = s.clone(),
                None => {
                    if let Some(m) = new.as_object_mut() {
                        m.remove("status");
                    }
                }
            }
            new
        }
        Scope::Whole => new,
    }
}

/// Server-owned metadata comes from `old` whatever the client sent (managedFields too, when the
/// client sent none); apiVersion and kind from the URL.
fn keep_server_metadata(t: &Target, old: &Value, new: &mut Value, old_rv: &str) {
    let m = meta_mut(new);
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
}

/// Namespaces: `spec.finalizers` change only through `/finalize`, `status.phase` is
/// server-owned.
fn keep_namespace_fields(t: &Target, old: &Value, mut new: Value) -> Value {
    if !(t.info.group.is_empty() && t.info.kind == "Namespace") {
        return new;
    }
    if t.subresource.as_deref() == Some("finalize") {
        let spec_f = new.pointer("/spec/finalizers").cloned();
        let mut merged = old.clone();
        merged["spec"]["finalizers"] = spec_f.unwrap_or(json!([]));
        return merged;
    }
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
    new
}

/// No finalizer may be added to an object being deleted (422).
fn check_no_new_finalizers(t: &Target, old: &Value, new: &Value) -> Result<(), ApiError> {
    if !is_deleting(old) {
        return Ok(());
    }
    let before = finalizers(old);
    let added: Vec<String> = finalizers(new)
        .into_iter()
        .filter(|f| !before.contains(f))
        .collect();
    if added.is_empty() {
        return Ok(());
    }
    Err(ApiError::invalid(
        &t.info.group,
        &t.info.kind,
        &t.name,
        vec![Cause::forbidden(
            "metadata.finalizers",
            &format!(
                "no new finalizers can be added if the object is being deleted, found new finalizers {added:?}"
            ),
        )],
    ))
}

/// A Service written without `spec.clusterIP` keeps the one allocated on create.
fn keep_cluster_ip(t: &Target, old: &Value, new: &mut Value) {
    if t.info.group.is_empty()
        && t.info.kind == "Service"
        && new.pointer("/spec/clusterIP").is_none()
        && let Some(ip) = old.pointer("/spec/clusterIP")
        && let Some(spec) = new.get_mut("spec").and_then(Value::as_object_mut)
    {
        spec.insert("clusterIP".into(), ip.clone());
    }
}

/// What decoding and storage do to `new` (defaults, dropped empty lists), then the checks:
/// schema, metadata, immutable fields, and the rules of `/status` writes. Returns the object as
/// decoded, before storage dropped anything, for the kinds whose generation counts that.
fn decode_and_validate(
    t: &Target,
    scope: Scope,
    old: &Value,
    new: &mut Value,
    strict: bool,
) -> Result<Option<Value>, ApiError> {
    defaults_on_decode(t, new);
    // The generation of a few kinds counts what storage then drops (`ingress: []`).
    let decoded = roundtrip::strict_generation(&t.info).then(|| new.clone());
    roundtrip::normalize(&t.info, new);
    t.check_schema(new, strict)?;
    check_metadata(t, new)?;
    validation::check_immutable(&t.info, old, new)?;
    if scope != Scope::Status {
        crd_stored_versions(t, new)?;
    }
    if scope == Scope::Status {
        let causes = status_rules::check_status_update(&t.info, old, new);
        if !causes.is_empty() {
            return Err(ApiError::invalid(
                &t.info.group,
                &t.info.kind,
                &t.name,
                causes,
            ));
        }
    }
    Ok(decoded)
}

/// A CRD's spec update, as the real server's CRD strategy and validation treat it: the new
/// storage version joins `status.storedVersions`, and every stored version must stay in
/// `spec.versions` (422 otherwise: objects may still be stored in it).
fn crd_stored_versions(t: &Target, new: &mut Value) -> Result<(), ApiError> {
    if t.info.custom
        || (t.info.group.as_str(), t.info.kind.as_str())
            != ("apiextensions.k8s.io", "CustomResourceDefinition")
    {
        return Ok(());
    }
    let versions: Vec<Value> = new
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let names: Vec<&Value> = versions.iter().map(|v| &v["name"]).collect();
    let Some(stored) = new
        .pointer_mut("/status/storedVersions")
        .and_then(Value::as_array_mut)
    else {
        return Ok(());
    };
    if let Some(storage) = versions.iter().find(|v| v["storage"] == true)
        && !stored.contains(&storage["name"])
    {
        stored.push(storage["name"].clone());
    }
    let causes: Vec<Cause> = stored
        .iter()
        .enumerate()
        .filter(|(_, s)| !names.contains(s))
        .map(|(i, s)| {
            let v = s.as_str().unwrap_or_default();
            Cause::invalid(
                &format!("status.storedVersions[{i}]"),
                s,
                &format!(
                    "missing from spec.versions; {v} was previously a storage version, and must remain in spec.versions until a storage migration ensures no data remains persisted in {v} and removes {v} from status.storedVersions"
                ),
            )
        })
        .collect();
    if causes.is_empty() {
        return Ok(());
    }
    Err(ApiError::invalid(
        &t.info.group,
        &t.info.kind,
        &t.name,
        causes,
    ))
}

/// One more generation when what the generation covers changed (`decoded`: the request before
/// storage dropped anything, when the kind counts that). A status write never moves the
/// generation (not even a Deployment's annotations, which its /status accepts).
fn bump_generation(
    t: &Target,
    scope: Scope,
    old: &Value,
    new: &mut Value,
    decoded: Option<&Value>,
) {
    if !t.info.generation || scope == Scope::Status {
        return;
    }
    let requested = decoded.unwrap_or(new);
    if roundtrip::generation_view(&t.info, old) != roundtrip::generation_view(&t.info, requested) {
        let g = old
            .pointer("/metadata/generation")
            .and_then(Value::as_i64)
            .unwrap_or(0)
            + 1;
        meta_mut(new).insert("generation".into(), json!(g));
    }
}
