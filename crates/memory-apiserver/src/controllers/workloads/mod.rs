//! Workload status, as kube-controller-manager writes it on a control plane without nodes,
//! kubelet or scheduler (the crate's README.md, "Workload status, as on a control plane
//! without nodes"): Pods are created there but never scheduled, so they stay `Pending`, are
//! never ready or available, and are deleted at once (no node to wait for).
//!
//! - [`deployment`]: the deployment controller, with the ReplicaSets it would create kept in
//!   controller memory (not stored as objects): rollout, scaling, revision annotation,
//!   `Available`/`Progressing` conditions and the progress deadline;
//! - [`statefulset`]: the StatefulSet controller with its Pods kept in controller memory:
//!   OrderedReady stops at the first (never ready) Pod, Parallel creates them all, rolling
//!   updates replace the highest ordinal and then wait;
//! - [`job`]: the Job controller (active Pods, `startTime`, suspend/resume, completions 0,
//!   `activeDeadlineSeconds`), which leaves Jobs with a foreign `spec.managedBy` and finished
//!   Jobs alone;
//! - DaemonSets (here): no nodes, so nothing is desired.
//!
//! Objects to look at come from the store's change history since the last pass (all of them
//! after a compaction), plus those whose deadline is due. Status is written through the
//! `/status` subresource as manager `kube-controller-manager`, only when it changes, so a
//! settled cluster sees no writes. Objects being deleted are left alone.

pub mod deployment;
pub mod job;
pub mod statefulset;

use std::collections::{BTreeSet, HashMap};

use serde_json::{Map, Value, json};
use tokio::time::Instant;

use super::Timers;
use crate::handler::{self, State};
use crate::resources::ResKey;
use crate::store::{EventType, ObjKey};

/// The manager kube-controller-manager's status writes are recorded under.
pub const MANAGER: &str = "kube-controller-manager";

/// What the workload controllers remember between passes (the objects a real cluster would
/// have created: ReplicaSets and Pods), keyed by the owner's uid.
#[derive(Debug, Default)]
pub struct Workloads {
    /// The store's resourceVersion up to which changes have been looked at.
    seen_rv: u64,
    /// Deployments' ReplicaSets.
    deployments: HashMap<String, deployment::Rollout>,
    /// StatefulSets' Pods.
    statefulsets: HashMap<String, statefulset::Pods>,
    /// Jobs' `spec.completions` as kube's defaulting left it at creation.
    completions: HashMap<String, Option<i64>>,
    /// Objects to look at again at a given time (progress deadlines, Job deadlines).
    due: HashMap<ObjKey, Instant>,
}

fn res(group: &str, resource: &str) -> ResKey {
    ResKey {
        group: group.into(),
        resource: resource.into(),
    }
}

/// The four kinds, in the order they are reconciled.
fn kinds() -> [ResKey; 4] {
    [
        res("apps", "deployments"),
        res("apps", "statefulsets"),
        res("apps", "daemonsets"),
        res("batch", "jobs"),
    ]
}

/// One pass.
pub fn reconcile(st: &mut State, timers: &mut Timers, mem: &mut Workloads) {
    let kinds = kinds();
    let mut dirty: BTreeSet<ObjKey> = BTreeSet::new();
    if mem.seen_rv == 0 || st.store.compacted() > mem.seen_rv {
        for r in &kinds {
            dirty.extend(st.store.range(r, None, None).map(|o| key_of(r, o)));
        }
    } else {
        for ev in st.store.history_since(mem.seen_rv) {
            if !kinds.contains(&ev.key.res) {
                continue;
            }
            if ev.kind == EventType::Deleted {
                let uid = State::uid_of(&ev.object);
                mem.deployments.remove(&uid);
                mem.statefulsets.remove(&uid);
                mem.completions.remove(&uid);
                mem.due.remove(&ev.key);
            } else {
                if ev.kind == EventType::Added && ev.key.res.resource == "jobs" {
                    mem.completions.insert(
                        State::uid_of(&ev.object),
                        job::defaulted_completions(&ev.object["spec"]),
                    );
                }
                dirty.insert(ev.key.clone());
            }
        }
    }
    let now = Instant::now();
    let due: Vec<ObjKey> = mem
        .due
        .iter()
        .filter(|(_, at)| **at <= now)
        .map(|(k, _)| k.clone())
        .collect();
    for k in due {
        mem.due.remove(&k);
        dirty.insert(k);
    }
    for key in dirty {
        let Some(obj) = st.store.get(&key) else {
            continue;
        };
        if handler::deleting(obj) {
            continue;
        }
        let wake = match (key.res.group.as_str(), key.res.resource.as_str()) {
            ("apps", "deployments") => deployment::sync(st, &key, &mut mem.deployments),
            ("apps", "statefulsets") => {
                statefulset::sync(st, &key, &mut mem.statefulsets);
                None
            }
            ("apps", "daemonsets") => {
                sync_daemonset(st, &key);
                None
            }
            _ => job::sync(st, &key, &mut mem.completions),
        };
        if let Some(after) = wake {
            let at = now + after;
            mem.due.insert(key, at);
        }
    }
    if let Some(first) = mem.due.values().min().copied() {
        timers.next_wake = Some(timers.next_wake.map_or(first, |w| w.min(first)));
    }
    mem.seen_rv = st.store.rv();
}

fn key_of(r: &ResKey, o: &Value) -> ObjKey {
    ObjKey {
        res: r.clone(),
        namespace: o["metadata"]["namespace"].as_str().unwrap_or("").into(),
        name: o["metadata"]["name"].as_str().unwrap_or("").into(),
    }
}

/// Write `status` (and, if given, the object's annotations) through `/status` when they differ
/// from what is stored.
pub(crate) fn write_status(
    st: &mut State,
    key: &ObjKey,
    status: Value,
    annotations: Option<Value>,
) {
    let Some(obj) = st.store.get(key) else {
        return;
    };
    let same_annotations = annotations
        .as_ref()
        .is_none_or(|a| obj.pointer("/metadata/annotations") == Some(a));
    if obj.get("status") == Some(&status) && same_annotations {
        return;
    }
    st.controller_update(key, MANAGER, Some("status"), |o| {
        o["status"] = status;
        if let Some(a) = annotations {
            o["metadata"]["annotations"] = a;
        }
    });
}

/// `status.<field>` as an integer (0 when absent).
pub(crate) fn int(obj: &Value, pointer: &str) -> i64 {
    obj.pointer(pointer).and_then(Value::as_i64).unwrap_or(0)
}

/// A copy of the object's status as a map.
pub(crate) fn status_map(obj: &Value) -> Map<String, Value> {
    obj.get("status")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default()
}

/// Set an integer field that Go leaves out when it is 0 (`omitempty`).
pub(crate) fn set_omitempty(m: &mut Map<String, Value>, field: &str, n: i64) {
    if n == 0 {
        m.remove(field);
    } else {
        m.insert(field.into(), json!(n));
    }
}

/// kube's `rand.SafeEncodeString` of an FNV-1a hash of `v` (keys sorted, so the same
/// template always gives the same name). Not kube's exact hash: that hashes the Go structs
/// after defaulting.
pub(crate) fn template_hash(v: &Value) -> String {
    fn canonical(v: &Value, out: &mut String) {
        match v {
            Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                out.push('{');
                for k in keys {
                    out.push_str(&json!(k).to_string());
                    out.push(':');
                    canonical(&m[k], out);
                    out.push(',');
                }
                out.push('}');
            }
            Value::Array(a) => {
                out.push('[');
                for x in a {
                    canonical(x, out);
                    out.push(',');
                }
                out.push(']');
            }
            other => out.push_str(&other.to_string()),
        }
    }
    let mut text = String::new();
    canonical(v, &mut text);
    let mut h: u32 = 0x811c_9dc5;
    for b in text.bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    const ALPHA: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    h.to_string()
        .bytes()
        .map(|b| ALPHA[usize::from(b) % ALPHA.len()] as char)
        .collect()
}

/// The DaemonSet controller with no nodes: nothing desired, scheduled, ready or available. Like
/// kube it writes only when a number differs or the generation was not observed yet, and then
/// writes all of them (a client's `observedGeneration: 42` with the right numbers stays).
fn sync_daemonset(st: &mut State, key: &ObjKey) {
    let Some(ds) = st.store.get(key) else {
        return;
    };
    const NUMBERS: [&str; 7] = [
        "desiredNumberScheduled",
        "currentNumberScheduled",
        "numberMisscheduled",
        "numberReady",
        "updatedNumberScheduled",
        "numberAvailable",
        "numberUnavailable",
    ];
    let generation = int(ds, "/metadata/generation");
    let settled = NUMBERS
        .iter()
        .all(|n| int(ds, &format!("/status/{n}")) == 0)
        && int(ds, "/status/observedGeneration") >= generation;
    if settled {
        return;
    }
    let mut status = status_map(ds);
    status.insert("observedGeneration".into(), json!(generation));
    for (i, n) in NUMBERS.iter().enumerate() {
        if i < 4 {
            status.insert(n.to_string(), json!(0));
        } else {
            status.remove(*n);
        }
    }
    write_status(st, key, Value::Object(status), None);
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::handler::WriteOpts;
    use crate::patch::PatchKind;
    use crate::test_support::{create_namespace, state, target};

    /// A state with namespace `ns`, and fresh controller memory.
    pub(crate) fn setup() -> (State, Timers, Workloads) {
        let mut st = state(10_000, 7);
        create_namespace(&mut st, "ns");
        (st, Timers::default(), Workloads::default())
    }

    /// Create a workload from `rest` (merged under a name and a matching selector/template).
    pub(crate) fn create(
        st: &mut State,
        group: &str,
        plural: &str,
        name: &str,
        spec: Value,
    ) -> Value {
        let t = target(st, group, plural, "ns", name);
        let mut full = json!({"selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                         "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}});
        if plural == "jobs" {
            full.as_object_mut().map(|m| m.remove("selector"));
        }
        json_patch::merge(&mut full, &spec);
        st.create(
            &t,
            json!({"metadata": {"name": name}, "spec": full}),
            &WriteOpts::default(),
            false,
        )
        .unwrap()
        .1
    }

    pub(crate) fn get(st: &State, group: &str, plural: &str, name: &str) -> Value {
        st.get(&target(st, group, plural, "ns", name)).unwrap()
    }

    pub(crate) fn patch_spec(st: &mut State, group: &str, plural: &str, name: &str, spec: Value) {
        let t = target(st, group, plural, "ns", name);
        st.patch(
            &t,
            PatchKind::Merge,
            json!({"spec": spec}).to_string().as_bytes(),
            &WriteOpts::default(),
        )
        .unwrap();
    }

    pub(crate) fn patch_status(
        st: &mut State,
        group: &str,
        plural: &str,
        name: &str,
        status: Value,
    ) {
        let mut t = target(st, group, plural, "ns", name);
        t.subresource = Some("status".into());
        st.patch(
            &t,
            PatchKind::Merge,
            json!({"status": status}).to_string().as_bytes(),
            &WriteOpts::default(),
        )
        .unwrap();
    }

    #[test]
    fn daemonsets_desire_nothing_without_nodes() {
        let (mut st, mut timers, mut mem) = setup();
        create(&mut st, "apps", "daemonsets", "ds", json!({}));
        let ds = get(&st, "apps", "daemonsets", "ds");
        assert_eq!(
            ds["status"],
            json!({"currentNumberScheduled": 0, "numberMisscheduled": 0,
                   "desiredNumberScheduled": 0, "numberReady": 0})
        );
        reconcile(&mut st, &mut timers, &mut mem);
        let ds = get(&st, "apps", "daemonsets", "ds");
        assert_eq!(ds["status"]["observedGeneration"], 1);
        assert_eq!(ds["metadata"]["managedFields"][1]["manager"], MANAGER);
        // A higher observedGeneration with the right numbers stays; wrong numbers do not.
        patch_status(
            &mut st,
            "apps",
            "daemonsets",
            "ds",
            json!({"observedGeneration": 42}),
        );
        reconcile(&mut st, &mut timers, &mut mem);
        assert_eq!(
            get(&st, "apps", "daemonsets", "ds")["status"]["observedGeneration"],
            42
        );
        patch_status(
            &mut st,
            "apps",
            "daemonsets",
            "ds",
            json!({"numberReady": 3}),
        );
        reconcile(&mut st, &mut timers, &mut mem);
        let ds = get(&st, "apps", "daemonsets", "ds");
        assert_eq!(ds["status"]["numberReady"], 0);
        assert_eq!(ds["status"]["observedGeneration"], 1);
        // Settled: another pass writes nothing.
        let rv = st.store.rv();
        reconcile(&mut st, &mut timers, &mut mem);
        assert_eq!(st.store.rv(), rv);
    }

    #[test]
    fn template_hashes_ignore_key_order() {
        let a = template_hash(&json!({"a": 1, "b": {"c": [1, 2]}}));
        let b = template_hash(&json!({"b": {"c": [1, 2]}, "a": 1}));
        assert_eq!(a, b);
        assert_ne!(a, template_hash(&json!({"a": 2, "b": {"c": [1, 2]}})));
        assert!(a.chars().all(|c| c.is_ascii_alphanumeric()));
    }
}
