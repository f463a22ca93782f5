//! Garbage collector: deletes (in the background) objects whose ownerReferences all point to
//! owners that no longer exist, and finishes foreground deletions: an owner carrying the
//! `foregroundDeletion` finalizer has its dependents deleted, and loses the finalizer once no
//! dependent is left. Orphan propagation is done synchronously by the delete handler.

use serde_json::Value;

use crate::cluster::memory::handler::{self, FOREGROUND, Policy, State};
use crate::cluster::memory::store::ObjKey;

/// One pass.
pub fn reconcile(st: &mut State) {
    // Dangling dependents.
    let owned: Vec<ObjKey> = st.store.owned().cloned().collect();
    for k in owned {
        let Some(obj) = st.store.get(&k) else {
            continue;
        };
        if handler::deleting(obj) {
            continue;
        }
        let refs = obj
            .pointer("/metadata/ownerReferences")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let all_gone = refs.iter().all(|r| {
            let uid = r.get("uid").and_then(Value::as_str).unwrap_or("");
            st.store.by_uid(uid).is_none()
        });
        // Owners being deleted in the foreground take their dependents with them.
        let owner_foreground = refs.iter().any(|r| {
            let uid = r.get("uid").and_then(Value::as_str).unwrap_or("");
            st.store
                .by_uid(uid)
                .and_then(|ok| st.store.get(ok))
                .is_some_and(|o| {
                    handler::deleting(o) && State::finalizers_of(o).iter().any(|f| f == FOREGROUND)
                })
        });
        if all_gone {
            st.controller_delete(&k, Policy::Background);
        } else if owner_foreground {
            st.controller_delete(&k, Policy::Foreground);
        }
    }
    // Foreground owners whose dependents are gone.
    let deleting: Vec<ObjKey> = st.store.deleting().cloned().collect();
    for k in deleting {
        let Some(obj) = st.store.get(&k) else {
            continue;
        };
        if !State::finalizers_of(obj).iter().any(|f| f == FOREGROUND) {
            continue;
        }
        let uid = obj
            .pointer("/metadata/uid")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        if st.dependents(&uid).is_empty() {
            st.controller_update(&k, "garbage-collector", None, |o| {
                if let Some(f) = o
                    .pointer_mut("/metadata/finalizers")
                    .and_then(Value::as_array_mut)
                {
                    f.retain(|x| x != FOREGROUND);
                }
            });
        }
    }
}
