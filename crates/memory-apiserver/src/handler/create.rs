//! POST: naming (`generateName`), validation, namespace checks (404/403), uniqueness (409),
//! server-set metadata and per-kind defaults (Namespace lifecycle, Service clusterIP, CRD
//! finalizer and conditions).

use serde_json::{Value, json};

use super::*;

/// kube-apiserver's 403 for a create it refuses: `<resource>[.<group>] "<name>" is forbidden: …`.
fn forbidden(t: &Target, why: &str) -> ApiError {
    let resource = if t.info.group.is_empty() {
        t.info.plural.clone()
    } else {
        format!("{}.{}", t.info.plural, t.info.group)
    };
    ApiError::forbidden(
        t.subject(),
        format!("{resource} \"{}\" is forbidden: {why}", t.name),
    )
}

/// Label kube puts on every Namespace: its own name.
pub(super) const NS_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// Defaults kube applies when it decodes a request body, before the field manager sees it (so
/// they are owned by the writer of a create or update, not by an apply): a Namespace's
/// `kubernetes.io/metadata.name` label, which always equals its name.
pub(super) fn defaults_on_decode(t: &Target, obj: &mut Value) {
    if t.info.group.is_empty() && t.info.kind == "Namespace" {
        let m = meta_mut(obj);
        if !m.get("labels").is_some_and(Value::is_object) {
            m.insert("labels".into(), json!({}));
        }
        if let Some(labels) = m.get_mut("labels").and_then(Value::as_object_mut) {
            labels.insert(NS_NAME_LABEL.into(), json!(t.name));
        }
    }
}

impl State {
    pub(super) fn check_namespace(&self, t: &Target) -> Result<(), ApiError> {
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
            Some(ns) if is_deleting(ns) => Err(forbidden(
                t,
                &format!(
                    "unable to create new content in namespace {} because it is being terminated",
                    t.namespace
                ),
            )),
            Some(_) => Ok(()),
        }
    }

    pub(super) fn check_type_accepting(&self, t: &Target) -> Result<(), ApiError> {
        if self
            .custom
            .iter()
            .any(|c| c.info.key() == t.info.key() && c.terminating)
        {
            return Err(forbidden(
                t,
                "create not allowed while custom resource definition is terminating",
            ));
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
        check_kind(&t, &obj)?;
        place_in_namespace(&t, &mut obj)?;
        let name = self.object_name(&t, &obj)?;
        t.name = name.clone();
        self.check_namespace(&t)?;
        self.check_type_accepting(&t)?;
        let key = t.key();
        if self.store.get(&key).is_some() {
            return Err(ApiError::already_exists(t.subject()));
        }
        let uid = self.rng.uuid();
        set_server_fields(&t, &mut obj, &name, &uid);
        defaults_on_decode(&t, &mut obj);
        t.check_schema(&mut obj, o.strict)?;
        check_metadata(&t, &obj)?;
        // Like kube's field manager, this sees the request after decoding (and its defaults)
        // but before the server fills in the rest, which nobody then owns.
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
        self.defaults_on_create(&t, &mut obj)?;
        roundtrip::normalize(&t.info, &mut obj);
        if o.dry_run {
            return Ok((201, obj));
        }
        let stored = self.store.insert(key.clone(), obj);
        self.after_write(&key.res);
        Ok((201, self.present(stored, &t)))
    }

    /// The name of the object to create: its own, or `generateName` with a random suffix; it
    /// must match the URL's and be valid for the kind, and the object carries no
    /// resourceVersion.
    fn object_name(&mut self, t: &Target, obj: &Value) -> Result<String, ApiError> {
        let mut name = meta(obj, "name").unwrap_or_default();
        if name.is_empty()
            && let Some(g) = meta(obj, "generateName").filter(|g| !g.is_empty())
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
        validation::check_name(&t.info, &name)
            .map_err(|c| ApiError::invalid(&t.info.group, &t.info.kind, &name, vec![c]))?;
        if meta(obj, "resourceVersion").is_some_and(|s| !s.is_empty()) {
            return Err(ApiError::bad_request(
                "resourceVersion should not be set on objects to be created",
            ));
        }
        Ok(name)
    }

    /// Per-kind defaults kube applies after the field manager (the REST strategy and storage):
    /// a Namespace's `spec.finalizers` and phase, a Service's clusterIP, a CRD's finalizer and
    /// conditions.
    pub(super) fn defaults_on_create(
        &mut self,
        t: &Target,
        obj: &mut Value,
    ) -> Result<(), ApiError> {
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
}

/// The body's kind is the URL's.
fn check_kind(t: &Target, obj: &Value) -> Result<(), ApiError> {
    match obj.get("kind").and_then(Value::as_str) {
        Some(k) if k != t.info.kind => Err(ApiError::bad_request(format!(
            "the API version in the data ({}) does not match the expected API version ({})",
            obj.get("apiVersion").and_then(Value::as_str).unwrap_or(""),
            t.api_version()
        ))),
        _ => Ok(()),
    }
}

/// A namespaced object gets the URL's namespace (a different one in the body is refused); a
/// cluster-scoped one none.
fn place_in_namespace(t: &Target, obj: &mut Value) -> Result<(), ApiError> {
    let m = meta_mut(obj);
    if !t.info.namespaced {
        m.remove("namespace");
        return Ok(());
    }
    let body_ns = m.get("namespace").and_then(Value::as_str).unwrap_or("");
    if !body_ns.is_empty() && body_ns != t.namespace {
        return Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        ));
    }
    m.insert("namespace".into(), json!(t.namespace));
    Ok(())
}

/// What the server sets on a new object: name, uid, creation time, generation 1 (kinds that
/// have one), no deletion fields, no status (kinds with a status subresource), apiVersion and
/// kind of the URL.
fn set_server_fields(t: &Target, obj: &mut Value, name: &str, uid: &str) {
    let m = meta_mut(obj);
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
}
