//! Object storage: one ordered table per (group, version-independent resource), keyed by
//! (namespace, name), a global resourceVersion counter, the bounded watch-event history and the
//! broadcast channel watchers subscribe to. Secondary indexes (uid → object, objects with
//! ownerReferences, objects being deleted) keep controllers from scanning everything.
//!
//! The store is purely mechanical: it stamps resourceVersions and records events. API
//! semantics (validation, finalizers, SSA…) live in `handler`.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::{Notify, broadcast};

use super::resources::ResKey;

/// Full identity of one stored object.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjKey {
    /// Resource type.
    pub res: ResKey,
    /// Namespace ("" for cluster-scoped).
    pub namespace: String,
    /// Name.
    pub name: String,
}

/// Watch event type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// `ADDED`
    Added,
    /// `MODIFIED`
    Modified,
    /// `DELETED`
    Deleted,
}

/// One change, as recorded in the history and broadcast to watchers.
#[derive(Debug, Clone)]
pub struct Event {
    /// resourceVersion of the change.
    pub rv: u64,
    /// Object identity.
    pub key: ObjKey,
    /// Type.
    pub kind: EventType,
    /// Object after the change (for DELETED: last state, with the deletion's resourceVersion).
    pub object: Arc<Value>,
    /// Object before the change (None for ADDED): lets lists be served from an older snapshot
    /// and watches turn selector transitions into ADDED/DELETED.
    pub prev: Option<Arc<Value>>,
    /// `object` serialised once, shared by every watcher that wants it as stored.
    pub encoded: std::sync::OnceLock<bytes::Bytes>,
}

type Table = BTreeMap<(String, String), Value>;

/// The object store.
#[derive(Debug)]
pub struct Store {
    rv: u64,
    tables: HashMap<ResKey, Table>,
    uids: HashMap<String, ObjKey>,
    owned: BTreeSet<ObjKey>,
    deleting: BTreeSet<ObjKey>,
    history: VecDeque<Arc<Event>>,
    history_cap: usize,
    /// Highest resourceVersion whose event has been dropped from history.
    compacted: u64,
    tx: broadcast::Sender<Arc<Event>>,
    changed: Arc<Notify>,
}

fn meta_str<'a>(v: &'a Value, f: &str) -> Option<&'a str> {
    v.get("metadata")?.get(f)?.as_str()
}

impl Store {
    /// An empty store keeping `history_cap` events for watches.
    pub fn new(history_cap: usize, changed: Arc<Notify>) -> Self {
        let (tx, _) = broadcast::channel(history_cap.clamp(1024, 65536));
        Store {
            rv: 1,
            tables: HashMap::new(),
            uids: HashMap::new(),
            owned: BTreeSet::new(),
            deleting: BTreeSet::new(),
            history: VecDeque::new(),
            history_cap: history_cap.max(1),
            compacted: 1,
            tx,
            changed,
        }
    }

    /// The current global resourceVersion.
    pub fn rv(&self) -> u64 {
        self.rv
    }

    /// resourceVersions at or below this are no longer in the watch history.
    pub fn compacted(&self) -> u64 {
        self.compacted
    }

    /// Subscribe to future events.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Event>> {
        self.tx.subscribe()
    }

    /// Events with resourceVersion greater than `rv`, oldest first.
    pub fn history_since(&self, rv: u64) -> impl Iterator<Item = &Arc<Event>> {
        let start = self.history.partition_point(|e| e.rv <= rv);
        self.history.range(start..)
    }

    /// One object.
    pub fn get(&self, key: &ObjKey) -> Option<&Value> {
        self.tables
            .get(&key.res)?
            .get(&(key.namespace.clone(), key.name.clone()))
    }

    /// Key of the object with this uid.
    pub fn by_uid(&self, uid: &str) -> Option<&ObjKey> {
        self.uids.get(uid)
    }

    /// Objects of a type, in (namespace, name) order, optionally within one namespace, strictly
    /// after `after`.
    pub fn range<'a>(
        &'a self,
        res: &ResKey,
        namespace: Option<&'a str>,
        after: Option<(String, String)>,
    ) -> Box<dyn Iterator<Item = &'a Value> + 'a> {
        use std::ops::Bound::*;
        let Some(t) = self.tables.get(res) else {
            return Box::new(std::iter::empty());
        };
        let lower = match (after, namespace) {
            (Some(a), _) => Excluded(a),
            (None, Some(ns)) => Included((ns.to_string(), String::new())),
            (None, None) => Unbounded,
        };
        let it = t.range((lower, Unbounded)).map(|(_, v)| v);
        match namespace {
            Some(ns) => {
                Box::new(it.take_while(move |v| meta_str(v, "namespace").unwrap_or("") == ns))
            }
            None => Box::new(it),
        }
    }

    /// The state of a type's objects (optionally in one namespace) at an older resourceVersion
    /// `rv`, strictly after `after`, in key order; `None` when `rv` is no longer covered by the
    /// history.
    pub fn snapshot_range<'a>(
        &'a self,
        res: &ResKey,
        namespace: Option<&'a str>,
        after: Option<(String, String)>,
        rv: u64,
    ) -> Option<Vec<&'a Value>> {
        if rv < self.compacted {
            return None;
        }
        let mut at_rv: BTreeMap<(String, String), Option<&'a Value>> = BTreeMap::new();
        for ev in self.history_since(rv) {
            if ev.key.res == *res && namespace.is_none_or(|ns| ev.key.namespace == ns) {
                at_rv
                    .entry((ev.key.namespace.clone(), ev.key.name.clone()))
                    .or_insert(ev.prev.as_deref());
            }
        }
        let mut merged: BTreeMap<(String, String), &'a Value> = BTreeMap::new();
        for v in self.range(res, namespace, after.clone()) {
            let k = (
                meta_str(v, "namespace").unwrap_or("").to_string(),
                meta_str(v, "name").unwrap_or("").to_string(),
            );
            merged.insert(k, v);
        }
        for (k, v) in at_rv {
            if after.as_ref().is_some_and(|a| k <= *a) {
                continue;
            }
            match v {
                Some(v) => {
                    merged.insert(k, v);
                }
                None => {
                    merged.remove(&k);
                }
            }
        }
        Some(merged.into_values().collect())
    }

    /// Resource types with at least one object.
    pub fn types(&self) -> Vec<ResKey> {
        self.tables
            .iter()
            .filter(|(_, t)| !t.is_empty())
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// Objects that carry ownerReferences.
    pub fn owned(&self) -> impl Iterator<Item = &ObjKey> {
        self.owned.iter()
    }

    /// Objects with a deletionTimestamp.
    pub fn deleting(&self) -> impl Iterator<Item = &ObjKey> {
        self.deleting.iter()
    }

    fn index(&mut self, key: &ObjKey, obj: &Value) {
        if obj
            .pointer("/metadata/ownerReferences")
            .and_then(Value::as_array)
            .is_some_and(|a| !a.is_empty())
        {
            self.owned.insert(key.clone());
        } else {
            self.owned.remove(key);
        }
        if obj
            .pointer("/metadata/deletionTimestamp")
            .is_some_and(|v| !v.is_null())
        {
            self.deleting.insert(key.clone());
        } else {
            self.deleting.remove(key);
        }
    }

    fn record(&mut self, key: ObjKey, kind: EventType, object: Value, prev: Option<Value>) {
        let ev = Arc::new(Event {
            rv: self.rv,
            key,
            kind,
            object: Arc::new(object),
            prev: prev.map(Arc::new),
            encoded: std::sync::OnceLock::new(),
        });
        self.history.push_back(ev.clone());
        while self.history.len() > self.history_cap {
            if let Some(old) = self.history.pop_front() {
                self.compacted = old.rv;
            }
        }
        let _ = self.tx.send(ev);
        self.changed.notify_one();
    }

    fn stamp(&mut self, obj: &mut Value) -> u64 {
        self.rv += 1;
        obj["metadata"]["resourceVersion"] = json!(self.rv.to_string());
        self.rv
    }

    /// Store a new object (metadata already complete but for resourceVersion); returns it.
    pub fn insert(&mut self, key: ObjKey, mut obj: Value) -> Value {
        self.stamp(&mut obj);
        if let Some(uid) = meta_str(&obj, "uid") {
            self.uids.insert(uid.to_string(), key.clone());
        }
        self.index(&key, &obj);
        self.tables
            .entry(key.res.clone())
            .or_default()
            .insert((key.namespace.clone(), key.name.clone()), obj.clone());
        self.record(key, EventType::Added, obj.clone(), None);
        obj
    }

    /// Replace an existing object, bumping its resourceVersion; returns it.
    pub fn replace(&mut self, key: ObjKey, mut obj: Value) -> Value {
        self.stamp(&mut obj);
        self.index(&key, &obj);
        let prev = self
            .tables
            .entry(key.res.clone())
            .or_default()
            .insert((key.namespace.clone(), key.name.clone()), obj.clone());
        self.record(key, EventType::Modified, obj.clone(), prev);
        obj
    }

    /// Remove an object; returns its last state (with the deletion's resourceVersion).
    pub fn remove(&mut self, key: &ObjKey) -> Option<Value> {
        let mut obj = self
            .tables
            .get_mut(&key.res)?
            .remove(&(key.namespace.clone(), key.name.clone()))?;
        if let Some(uid) = meta_str(&obj, "uid") {
            self.uids.remove(uid);
        }
        self.owned.remove(key);
        self.deleting.remove(key);
        let prev = obj.clone();
        self.stamp(&mut obj);
        self.record(key.clone(), EventType::Deleted, obj.clone(), Some(prev));
        Some(obj)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(ns: &str, name: &str) -> ObjKey {
        ObjKey {
            res: ResKey {
                group: "".into(),
                resource: "configmaps".into(),
            },
            namespace: ns.into(),
            name: name.into(),
        }
    }
    fn obj(ns: &str, name: &str) -> Value {
        json!({"metadata": {"name": name, "namespace": ns, "uid": format!("{ns}-{name}")}})
    }

    #[test]
    fn namespace_range_and_history() {
        let mut s = Store::new(3, Arc::new(Notify::new()));
        for (ns, n) in [("a", "1"), ("b", "1"), ("b", "2"), ("c", "1")] {
            s.insert(key(ns, n), obj(ns, n));
        }
        let res = key("", "").res;
        let names: Vec<_> = s
            .range(&res, Some("b"), None)
            .map(|v| v["metadata"]["name"].clone())
            .collect();
        assert_eq!(names, vec![json!("1"), json!("2")]);
        let after: Vec<_> = s
            .range(&res, None, Some(("b".into(), "1".into())))
            .collect();
        assert_eq!(after.len(), 2);
        assert_eq!(s.rv(), 5);
        assert_eq!(s.compacted(), 2);
        assert_eq!(s.history_since(3).count(), 2);
        assert!(s.by_uid("b-2").is_some());
        s.remove(&key("b", "2"));
        assert!(s.by_uid("b-2").is_none());
    }
}
