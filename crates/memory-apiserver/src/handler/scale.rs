//! The `autoscaling/v1` `scale` subresource of Deployments and StatefulSets.

use serde_json::{Value, json};

use super::*;

impl State {
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
            return Err(ApiError::unsupported_patch(false));
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
}
