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
        defaults_on_decode(t, &mut new);
        // The generation of a few kinds counts what storage then drops (`ingress: []`).
        let decoded = roundtrip::strict_generation(&t.info).then(|| new.clone());
        roundtrip::normalize(&t.info, &mut new);
        t.check_schema(&mut new, o.strict)?;
        check_metadata(t, &new)?;
        validation::check_immutable(&t.info, &old, &new)?;
        if scope == Scope::Status {
            let causes = status_rules::check_status_update(&t.info, &old, &new);
            if !causes.is_empty() {
                return Err(ApiError::invalid(
                    &t.info.group,
                    &t.info.kind,
                    &t.name,
                    causes,
                ));
            }
        }
        // A status write never moves the generation (not even a Deployment's annotations,
        // which its /status accepts).
        if t.info.generation && scope != Scope::Status {
            let requested = decoded.as_ref().unwrap_or(&new);
            if roundtrip::generation_view(&t.info, &old)
                != roundtrip::generation_view(&t.info, requested)
            {
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
