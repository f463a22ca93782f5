//! Namespace lifecycle controller: for a namespace being deleted (phase `Terminating`), deletes
//! every namespaced object in it, reports what is left in the `NamespaceContentRemaining` and
//! `NamespaceFinalizersRemaining` conditions, and once it is empty removes the `kubernetes`
//! finalizer from `spec.finalizers` (through `/finalize`), which removes the namespace.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::handler::{self, NS_FINALIZER, Policy, State, now};
use crate::resources::ResKey;
use crate::store::ObjKey;

fn ns_res() -> ResKey {
    ResKey {
        group: String::new(),
        resource: "namespaces".into(),
    }
}

/// One pass.
pub fn reconcile(st: &mut State) {
    let terminating: Vec<ObjKey> = st
        .store
        .deleting()
        .filter(|k| k.res == ns_res())
        .cloned()
        .collect();
    for nskey in terminating {
        let (remaining, fins) = delete_content(st, &nskey.name);
        let desired = deletion_conditions(&remaining, &fins);
        st.controller_update(&nskey, "kube-controller-manager", Some("status"), |o| {
            set_conditions(o, desired)
        });
        if remaining.is_empty() {
            st.controller_update(&nskey, "kube-controller-manager", Some("finalize"), |o| {
                if let Some(f) = o
                    .pointer_mut("/spec/finalizers")
                    .and_then(Value::as_array_mut)
                {
                    f.retain(|x| x != NS_FINALIZER);
                }
            });
        }
    }
}

/// Deletes (background) everything in namespace `ns` not already being deleted; returns what
/// is left, by resource (`plural.group`), and the finalizers holding it, with their counts.
fn delete_content(st: &mut State, ns: &str) -> (BTreeMap<String, usize>, BTreeMap<String, usize>) {
    let mut remaining: BTreeMap<String, usize> = BTreeMap::new();
    let mut fins: BTreeMap<String, usize> = BTreeMap::new();
    for res in st.store.types() {
        if !st.info_for(&res).is_some_and(|i| i.namespaced) {
            continue;
        }
        let objs: Vec<(ObjKey, Value)> = st
            .store
            .range(&res, Some(ns), None)
            .map(|o| {
                (
                    ObjKey {
                        res: res.clone(),
                        namespace: ns.to_string(),
                        name: o["metadata"]["name"].as_str().unwrap_or("").into(),
                    },
                    o.clone(),
                )
            })
            .collect();
        for (k, o) in objs {
            if !handler::deleting(&o) {
                st.controller_delete(&k, Policy::Background);
            }
            if let Some(left) = st.store.get(&k) {
                let label = if res.group.is_empty() {
                    res.resource.clone()
                } else {
                    format!("{}.{}", res.resource, res.group)
                };
                *remaining.entry(label).or_default() += 1;
                for f in State::finalizers_of(left) {
                    *fins.entry(f).or_default() += 1;
                }
            }
        }
    }
    (remaining, fins)
}

/// The five conditions of a terminating namespace, as kube's namespace controller writes them,
/// from what is left in it.
fn deletion_conditions(
    remaining: &BTreeMap<String, usize>,
    fins: &BTreeMap<String, usize>,
) -> Vec<Value> {
    let content = if remaining.is_empty() {
        json!({"type": "NamespaceContentRemaining", "status": "False", "reason": "ContentRemoved", "message": "All content successfully removed"})
    } else {
        let m = remaining
            .iter()
            .map(|(r, n)| format!("{r} has {n} resource instances"))
            .collect::<Vec<_>>()
            .join(", ");
        json!({"type": "NamespaceContentRemaining", "status": "True", "reason": "SomeResourcesRemain", "message": format!("Some resources are remaining: {m}")})
    };
    let finalizers = if fins.is_empty() {
        json!({"type": "NamespaceFinalizersRemaining", "status": "False", "reason": "ContentHasNoFinalizers", "message": "All content-preserving finalizers finished"})
    } else {
        let m = fins
            .iter()
            .map(|(f, n)| format!("{f} in {n} resource instances"))
            .collect::<Vec<_>>()
            .join(", ");
        json!({"type": "NamespaceFinalizersRemaining", "status": "True", "reason": "SomeFinalizersRemain", "message": format!("Some content in the namespace has finalizers remaining: {m}")})
    };
    let ok = |ty: &str, reason: &str, msg: &str| json!({"type": ty, "status": "False", "reason": reason, "message": msg});
    vec![
        ok(
            "NamespaceDeletionDiscoveryFailure",
            "ResourcesDiscovered",
            "All resources successfully discovered",
        ),
        ok(
            "NamespaceDeletionGroupVersionParsingFailure",
            "ParsedGroupVersions",
            "All legacy kube types successfully parsed",
        ),
        ok(
            "NamespaceDeletionContentFailure",
            "ContentDeleted",
            "All content successfully deleted, may be waiting on finalization",
        ),
        content,
        finalizers,
    ]
}

/// Sets `desired` as the namespace's conditions, keeping a condition that did not change (its
/// `lastTransitionTime` with it).
fn set_conditions(o: &mut Value, desired: Vec<Value>) {
    let old = o
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let merged: Vec<Value> = desired
        .into_iter()
        .map(|mut d| {
            match old.iter().find(|c| {
                c["type"] == d["type"] && c["status"] == d["status"] && c["message"] == d["message"]
            }) {
                Some(prev) => prev.clone(),
                None => {
                    d["lastTransitionTime"] = json!(now());
                    d
                }
            }
        })
        .collect();
    o["status"]["conditions"] = Value::Array(merged);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handler::{DeleteOpts, WriteOpts};
    use crate::patch::PatchKind;
    use crate::test_support::{state, target};

    #[test]
    fn terminating_namespace_lifecycle() {
        let mut st = state(1000, 3);
        let ns = target(&st, "", "namespaces", "", "n");
        let (_, created) = st
            .create(
                &ns,
                json!({"metadata": {"name": "n"}}),
                &WriteOpts::default(),
                false,
            )
            .unwrap();
        assert_eq!(created["spec"]["finalizers"], json!(["kubernetes"]));
        assert_eq!(created["status"]["phase"], "Active");
        let a = target(&st, "", "configmaps", "n", "a");
        st.create(
            &a,
            json!({"metadata": {"name": "a"}}),
            &WriteOpts::default(),
            false,
        )
        .unwrap();
        let b = target(&st, "", "secrets", "n", "b");
        st.create(
            &b,
            json!({"metadata": {"name": "b", "finalizers": ["x.io/f"]}}),
            &WriteOpts::default(),
            false,
        )
        .unwrap();
        let (_, d) = st.delete(&ns, &DeleteOpts::default()).unwrap();
        assert_eq!(d["status"]["phase"], "Terminating");
        let e = st.create(
            &target(&st, "", "configmaps", "n", "c"),
            json!({"metadata": {"name": "c"}}),
            &WriteOpts::default(),
            false,
        );
        assert_eq!(e.unwrap_err().code, 403);
        reconcile(&mut st);
        assert_eq!(st.get(&a).unwrap_err().code, 404);
        let n = st.get(&ns).unwrap();
        let conds = n["status"]["conditions"].as_array().unwrap();
        let c = conds
            .iter()
            .find(|c| c["type"] == "NamespaceFinalizersRemaining")
            .unwrap();
        assert_eq!(c["status"], "True");
        assert!(c["message"].as_str().unwrap().contains("x.io/f"));
        st.patch(
            &b,
            PatchKind::Merge,
            br#"{"metadata":{"finalizers":[]}}"#,
            &WriteOpts::default(),
        )
        .unwrap();
        reconcile(&mut st);
        assert_eq!(st.get(&ns).unwrap_err().code, 404);
    }
}
