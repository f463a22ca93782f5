//! DELETE and deletecollection: preconditions, propagation policies (Background, Foreground,
//! Orphan; Job's orphan default), finalizers and `deletionTimestamp`, undeletable namespaces.

use serde_json::{Value, json};

use super::*;

impl State {
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
    pub(super) fn orphan_dependents(&mut self, uid: &str) {
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
}
