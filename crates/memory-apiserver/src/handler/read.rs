//! GET and LIST: point lookups, namespace range scans, selectors, `limit`/`continue` pages
//! served from a consistent snapshot.

use serde_json::{Value, json};

use super::*;

impl State {
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
}
