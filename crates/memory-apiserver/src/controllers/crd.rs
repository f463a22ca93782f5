//! CRD controller: sets `Established=True` once `establish_delay` has passed since creation (the
//! kind is served only from then on), and on deletion marks the CRD `Terminating`, deletes all
//! its custom resources (which their own finalizers may hold), then removes the
//! `customresourcecleanup.apiextensions.k8s.io` finalizer so the CRD — and its type — go away.

use std::time::Duration;

use serde_json::{Value, json};

use super::Timers;
use crate::handler::{self, CRD_FINALIZER, Policy, State, now};
use crate::resources::ResKey;
use crate::store::ObjKey;

pub(super) fn set_condition(obj: &mut Value, ty: &str, status: &str, reason: &str, message: &str) {
    if !obj.get("status").is_some_and(Value::is_object) {
        obj["status"] = json!({});
    }
    let conds = obj["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mut out: Vec<Value> = conds.into_iter().filter(|c| c["type"] != ty).collect();
    out.push(json!({"type": ty, "status": status, "reason": reason, "message": message, "lastTransitionTime": now()}));
    obj["status"]["conditions"] = Value::Array(out);
}

fn condition_is(obj: &Value, ty: &str, status: &str) -> bool {
    obj.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| cs.iter().any(|c| c["type"] == ty && c["status"] == status))
}

/// One pass.
pub fn reconcile(st: &mut State, timers: &mut Timers, delay: Duration) {
    let res = ResKey {
        group: "apiextensions.k8s.io".into(),
        resource: "customresourcedefinitions".into(),
    };
    // Only CRDs with work to do (not yet established, or being deleted), without cloning the
    // (possibly huge) CRD documents.
    let pending: Vec<(String, String, bool, bool)> = st
        .store
        .range(&res, None, None)
        .filter(|c| handler::deleting(c) || !condition_is(c, "Established", "True"))
        .map(|c| {
            (
                c["metadata"]["name"].as_str().unwrap_or("").to_string(),
                c["metadata"]["uid"].as_str().unwrap_or("").to_string(),
                handler::deleting(c),
                condition_is(c, "Terminating", "True"),
            )
        })
        .collect();
    for (name, uid, deleting, terminating) in pending {
        let key = ObjKey {
            res: res.clone(),
            namespace: String::new(),
            name: name.clone(),
        };
        if !deleting {
            if timers.due(&format!("crd/{uid}"), delay) {
                st.controller_update(&key, "kube-apiserver", Some("status"), |o| {
                    set_condition(
                        o,
                        "Established",
                        "True",
                        "InitialNamesAccepted",
                        "the initial names have been accepted",
                    )
                });
            }
            continue;
        }
        if !terminating {
            st.controller_update(&key, "kube-apiserver", Some("status"), |o| {
                set_condition(
                    o,
                    "Terminating",
                    "True",
                    "InstanceDeletionInProgress",
                    "CustomResource deletion is in progress",
                )
            });
        }
        let Some(info) = st.crd_type(&name) else {
            remove_finalizer(st, &key);
            continue;
        };
        let instances: Vec<(ObjKey, bool)> = st
            .store
            .range(&info.key(), None, None)
            .map(|o| {
                (
                    ObjKey {
                        res: info.key(),
                        namespace: o["metadata"]["namespace"].as_str().unwrap_or("").into(),
                        name: o["metadata"]["name"].as_str().unwrap_or("").into(),
                    },
                    handler::deleting(o),
                )
            })
            .collect();
        if instances.is_empty() {
            remove_finalizer(st, &key);
            continue;
        }
        for (k, deleting) in instances {
            if !deleting {
                st.controller_delete(&k, Policy::Background);
            }
        }
    }
}

fn remove_finalizer(st: &mut State, key: &ObjKey) {
    st.controller_update(key, "kube-apiserver", None, |o| {
        if let Some(f) = o
            .pointer_mut("/metadata/finalizers")
            .and_then(Value::as_array_mut)
        {
            f.retain(|x| x != CRD_FINALIZER);
        }
    });
}
