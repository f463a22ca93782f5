//! Garbage collector: deletes (in the background) objects whose ownerReferences all point to
//! owners that no longer exist, and finishes foreground deletions: an owner carrying the
//! `foregroundDeletion` finalizer has its dependents deleted, and loses the finalizer once no
//! dependent with `blockOwnerDeletion: true` is left. References to owners that are gone are
//! dropped from objects that still have a live owner. Orphan propagation is done synchronously by the delete handler.

use serde_json::Value;

use crate::handler::{self, FOREGROUND, Policy, State};
use crate::store::ObjKey;

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
        let gone = |r: &Value| {
            st.store
                .by_uid(r.get("uid").and_then(Value::as_str).unwrap_or(""))
                .is_none()
        };
        let all_gone = refs.iter().all(gone);
        let some_gone = refs.iter().any(gone);
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
            continue;
        }
        if some_gone {
            // A live owner remains: the dangling references are dropped, the object stays.
            let live: Vec<Value> = refs
                .iter()
                .filter(|r| {
                    st.store
                        .by_uid(r.get("uid").and_then(Value::as_str).unwrap_or(""))
                        .is_some()
                })
                .cloned()
                .collect();
            st.controller_update(&k, "garbage-collector", None, |o| {
                o["metadata"]["ownerReferences"] = Value::Array(live);
            });
        }
        if owner_foreground {
            // Like kube's GC: foreground down the chain only if this dependent has dependents.
            let uid = st.store.get(&k).map(State::uid_of).unwrap_or_default();
            let policy = if st.dependents(&uid).is_empty() {
                Policy::Background
            } else {
                Policy::Foreground
            };
            st.controller_delete(&k, policy);
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
        let uid = State::uid_of(obj);
        // Only dependents with blockOwnerDeletion=true hold a foreground owner.
        let blocking = st.dependents(&uid).into_iter().any(|d| {
            st.store
                .get(&d)
                .and_then(|o| o.pointer("/metadata/ownerReferences"))
                .and_then(Value::as_array)
                .is_some_and(|refs| {
                    refs.iter().any(|r| {
                        r.get("uid").and_then(Value::as_str) == Some(uid.as_str())
                            && r.get("blockOwnerDeletion").and_then(Value::as_bool) == Some(true)
                    })
                })
        });
        if !blocking {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handler::{DeleteOpts, Target, WriteOpts};
    use crate::test_support::{create_namespace, state, target};
    use serde_json::json;

    fn setup() -> (State, Target, Target) {
        let mut st = state(1000, 3);
        create_namespace(&mut st, "n");
        let owner = target(&st, "", "configmaps", "n", "owner");
        let (_, o) = st
            .create(
                &owner,
                json!({"metadata": {"name": "owner"}}),
                &WriteOpts::default(),
                false,
            )
            .unwrap();
        let uid = o["metadata"]["uid"].clone();
        let dep = target(&st, "", "configmaps", "n", "dep");
        st.create(
            &dep,
            json!({"metadata": {"name": "dep", "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": uid}]}}),
            &WriteOpts::default(),
            false,
        )
        .unwrap();
        (st, owner, dep)
    }

    #[test]
    fn background_deletes_dependents_after_owner() {
        let (mut st, owner, dep) = setup();
        st.delete(&owner, &DeleteOpts::default()).unwrap();
        assert!(st.get(&dep).is_ok());
        reconcile(&mut st);
        assert_eq!(st.get(&dep).unwrap_err().code, 404);
    }

    #[test]
    fn foreground_waits_for_dependents() {
        let (mut st, owner, dep) = setup();
        st.delete(
            &owner,
            &DeleteOpts {
                policy: Some(Policy::Foreground),
                ..Default::default()
            },
        )
        .unwrap();
        let o = st.get(&owner).unwrap();
        assert_eq!(o["metadata"]["finalizers"], json!([FOREGROUND]));
        assert!(o["metadata"]["deletionTimestamp"].is_string());
        reconcile(&mut st);
        assert_eq!(st.get(&dep).unwrap_err().code, 404);
        reconcile(&mut st);
        assert_eq!(st.get(&owner).unwrap_err().code, 404);
    }

    #[test]
    fn orphan_keeps_dependents() {
        let (mut st, owner, dep) = setup();
        st.delete(
            &owner,
            &DeleteOpts {
                policy: Some(Policy::Orphan),
                ..Default::default()
            },
        )
        .unwrap();
        reconcile(&mut st);
        let d = st.get(&dep).unwrap();
        assert!(d["metadata"].get("ownerReferences").is_none());
    }

    #[test]
    fn dry_run_delete_changes_nothing() {
        let (mut st, owner, _) = setup();
        let rv = st.store.rv();
        st.delete(
            &owner,
            &DeleteOpts {
                dry_run: true,
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(st.store.rv(), rv);
        assert!(st.get(&owner).is_ok());
    }
}
