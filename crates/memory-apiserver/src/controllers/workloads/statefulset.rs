//! The StatefulSet controller on a cluster whose Pods never run.
//!
//! Its Pods live here, in controller memory, as ordinal → revision. With the default
//! `OrderedReady` policy the controller creates Pod 0 and then waits for it to be ready, which
//! never happens: `status.replicas` is at most 1 whatever `spec.replicas` says, and a template
//! change does not replace that Pod. With `Parallel` all Pods are created; a rolling update
//! deletes (and recreates at the new revision) the highest ordinal at or above the partition,
//! then waits for it. Scaling down deletes Pods at once (unscheduled Pods have no grace period).
//! `currentRevision` becomes `updateRevision` only when every Pod is updated and ready, that
//! is, with no Pods. Revision names use a hash of the template that is not kube's.

use std::collections::{BTreeMap, HashMap};

use serde_json::{Value, json};

use super::{int, set_omitempty, status_map, template_hash, write_status};
use crate::handler::State;
use crate::store::ObjKey;

/// A StatefulSet's Pods and current revision.
#[derive(Debug, Default)]
pub struct Pods {
    /// Ordinal → revision of the Pods that exist.
    pods: BTreeMap<i64, String>,
    current: Option<String>,
}

/// One reconcile of the StatefulSet at `key`.
pub fn sync(st: &mut State, key: &ObjKey, all: &mut HashMap<String, Pods>) {
    let Some(set) = st.store.get(key) else {
        return;
    };
    let uid = State::uid_of(set);
    let p = all.entry(uid).or_default();
    let spec = &set["spec"];
    let name = set["metadata"]["name"].as_str().unwrap_or("");
    let replicas = spec["replicas"].as_i64().unwrap_or(1).max(0);
    let parallel = spec["podManagementPolicy"] == "Parallel";
    let on_delete =
        spec.pointer("/updateStrategy/type").and_then(Value::as_str) == Some("OnDelete");
    let partition = spec
        .pointer("/updateStrategy/rollingUpdate/partition")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let update = format!("{name}-{}", template_hash(&spec["template"]));
    let current = p.current.get_or_insert_with(|| update.clone()).clone();
    // A Pod created now: below the partition at the current revision, else the update one.
    let revision_for = |ord: i64| {
        if !on_delete && ord < partition {
            current.clone()
        } else {
            update.clone()
        }
    };
    // kube counts the Pods as they were when the sync started: a Pod it creates (or deletes)
    // shows in the status of the next sync.
    let before = p.pods.clone();
    // Create missing Pods; OrderedReady stops at the first one that is not ready (all are).
    for ord in 0..replicas {
        p.pods.entry(ord).or_insert_with(|| revision_for(ord));
        if !parallel {
            break;
        }
    }
    // Scale down: condemned Pods go, highest first (OrderedReady: only once every lower Pod is
    // ready, except for the first unhealthy one, which here is the lowest condemned Pod when
    // no Pod is wanted).
    let condemned: Vec<i64> = p.pods.keys().copied().filter(|o| *o >= replicas).collect();
    if parallel {
        for o in condemned {
            p.pods.remove(&o);
        }
    } else if let Some(o) = condemned.last().copied()
        && p.pods.keys().next() == Some(&o)
    {
        p.pods.remove(&o);
    }
    // Rolling update: only where nothing blocked above (Parallel, or no Pod in OrderedReady).
    if !on_delete && (parallel || p.pods.is_empty()) {
        let target = p
            .pods
            .range(partition.max(0)..replicas)
            .next_back()
            .map(|(o, r)| (*o, r.clone()));
        if let Some((o, rev)) = target
            && rev != update
        {
            // Deleted, then recreated at the update revision on the next sync.
            p.pods.insert(o, update.clone());
        }
    }
    let generation = int(set, "/metadata/generation");
    let mut seen = vec![before];
    if seen[0] != p.pods {
        seen.push(p.pods.clone());
    }
    for pods in seen {
        let count = pods.len() as i64;
        let mut current = p.current.clone().unwrap_or_else(|| update.clone());
        let mut current_n = pods.values().filter(|r| **r == current).count() as i64;
        let updated_n = pods.values().filter(|r| **r == update).count() as i64;
        // The rolling update is complete when every Pod is updated and ready: with no Pods.
        if !on_delete && count == 0 {
            current = update.clone();
            current_n = updated_n;
            p.current = Some(update.clone());
        }
        write(
            st,
            key,
            generation,
            count,
            (current, current_n),
            (&update, updated_n),
        );
    }
}

/// Write the status when kube's `inconsistentStatus` says so.
fn write(
    st: &mut State,
    key: &ObjKey,
    generation: i64,
    count: i64,
    (current, current_n): (String, i64),
    (update, updated_n): (&str, i64),
) {
    let Some(set) = st.store.get(key) else {
        return;
    };
    let stored = status_map(set);
    let text = |f: &str| {
        stored
            .get(f)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let num = |f: &str| stored.get(f).and_then(Value::as_i64).unwrap_or(0);
    let inconsistent = generation > num("observedGeneration")
        || count != num("replicas")
        || current_n != num("currentReplicas")
        || num("readyReplicas") != 0
        || updated_n != num("updatedReplicas")
        || current != text("currentRevision")
        || num("availableReplicas") != 0
        || update != text("updateRevision");
    if !inconsistent {
        return;
    }
    let mut status = stored.clone();
    status.insert("observedGeneration".into(), json!(generation));
    status.insert("replicas".into(), json!(count));
    set_omitempty(&mut status, "readyReplicas", 0);
    set_omitempty(&mut status, "currentReplicas", current_n);
    set_omitempty(&mut status, "updatedReplicas", updated_n);
    status.insert("availableReplicas".into(), json!(0));
    status.insert("currentRevision".into(), json!(current));
    status.insert("updateRevision".into(), json!(update));
    status.insert("collisionCount".into(), json!(num("collisionCount")));
    write_status(st, key, Value::Object(status), None);
}

#[cfg(test)]
mod tests {
    use super::super::reconcile;
    use super::super::tests::{create, get, patch_spec, patch_status, setup};
    use super::*;

    fn counts(s: &Value) -> (Value, Value, Value) {
        let s = &s["status"];
        (
            s["replicas"].clone(),
            s["currentReplicas"].clone(),
            s["updatedReplicas"].clone(),
        )
    }

    #[test]
    fn ordered_ready_stops_at_the_first_pod() {
        let (mut st, mut timers, mut mem) = setup();
        create(
            &mut st,
            "apps",
            "statefulsets",
            "s",
            json!({"replicas": 1, "serviceName": "s"}),
        );
        reconcile(&mut st, &mut timers, &mut mem);
        let s = get(&st, "apps", "statefulsets", "s");
        assert_eq!(counts(&s), (json!(1), json!(1), json!(1)));
        assert_eq!(s["status"]["availableReplicas"], 0);
        assert_eq!(s["status"]["collisionCount"], 0);
        assert_eq!(s["status"]["observedGeneration"], 1);
        assert_eq!(
            s["status"]["currentRevision"],
            s["status"]["updateRevision"]
        );
        assert!(s["status"].get("readyReplicas").is_none());
        // Two replicas: still one Pod.
        patch_spec(&mut st, "apps", "statefulsets", "s", json!({"replicas": 2}));
        reconcile(&mut st, &mut timers, &mut mem);
        let s = get(&st, "apps", "statefulsets", "s");
        assert_eq!(counts(&s), (json!(1), json!(1), json!(1)));
        assert_eq!(s["status"]["observedGeneration"], 2);
        // A new template: the unready Pod blocks the update.
        let before = s["status"]["currentRevision"].clone();
        patch_spec(
            &mut st,
            "apps",
            "statefulsets",
            "s",
            json!({"template": {"metadata": {"annotations": {"x": "1"}}}}),
        );
        reconcile(&mut st, &mut timers, &mut mem);
        let s = get(&st, "apps", "statefulsets", "s");
        assert_eq!(counts(&s), (json!(1), json!(1), Value::Null));
        assert_eq!(s["status"]["currentRevision"], before);
        assert_ne!(s["status"]["updateRevision"], before);
        // Scaled to zero: no Pods, the update is complete.
        patch_spec(&mut st, "apps", "statefulsets", "s", json!({"replicas": 0}));
        reconcile(&mut st, &mut timers, &mut mem);
        let s = get(&st, "apps", "statefulsets", "s");
        assert_eq!(counts(&s), (json!(0), Value::Null, Value::Null));
        assert_eq!(
            s["status"]["currentRevision"],
            s["status"]["updateRevision"]
        );
        let rv = st.store.rv();
        reconcile(&mut st, &mut timers, &mut mem);
        assert_eq!(st.store.rv(), rv);
    }

    #[test]
    fn parallel_creates_all_and_updates_the_highest_ordinal() {
        let (mut st, mut timers, mut mem) = setup();
        create(
            &mut st,
            "apps",
            "statefulsets",
            "p",
            json!({"replicas": 3, "serviceName": "p", "podManagementPolicy": "Parallel"}),
        );
        reconcile(&mut st, &mut timers, &mut mem);
        assert_eq!(
            counts(&get(&st, "apps", "statefulsets", "p")),
            (json!(3), json!(3), json!(3))
        );
        patch_spec(
            &mut st,
            "apps",
            "statefulsets",
            "p",
            json!({"template": {"metadata": {"annotations": {"x": "1"}}}}),
        );
        reconcile(&mut st, &mut timers, &mut mem);
        assert_eq!(
            counts(&get(&st, "apps", "statefulsets", "p")),
            (json!(3), json!(2), json!(1))
        );
    }

    #[test]
    fn a_client_status_is_kept_unless_inconsistent() {
        let (mut st, mut timers, mut mem) = setup();
        create(
            &mut st,
            "apps",
            "statefulsets",
            "s",
            json!({"replicas": 0, "serviceName": "s"}),
        );
        reconcile(&mut st, &mut timers, &mut mem);
        patch_status(
            &mut st,
            "apps",
            "statefulsets",
            "s",
            json!({"observedGeneration": 42}),
        );
        reconcile(&mut st, &mut timers, &mut mem);
        assert_eq!(
            get(&st, "apps", "statefulsets", "s")["status"]["observedGeneration"],
            42
        );
        patch_status(&mut st, "apps", "statefulsets", "s", json!({"replicas": 5}));
        reconcile(&mut st, &mut timers, &mut mem);
        let s = get(&st, "apps", "statefulsets", "s");
        assert_eq!(s["status"]["replicas"], 0);
        assert_eq!(s["status"]["observedGeneration"], 1);
    }
}
