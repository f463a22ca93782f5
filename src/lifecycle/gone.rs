//! Waiting until a set of objects (of any kinds) is gone, with kube-runtime watchers — one per
//! kind, all namespaces — instead of polling.
//!
//! An object counts as gone when the watch says it was deleted, or when it is absent from a
//! (re-)list, or when an object of the same name but another UID replaced it. A kind's state
//! is known only after its first list: until then every object of it counts as remaining. At
//! the deadline each remaining object is read once more, so the caller can show what holds it
//! (its finalizers); an object that cannot be read is reported as remaining with the error.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use futures::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use serde::Serialize;
use tokio::time::Instant;

/// One object to wait for.
#[derive(Clone, Debug)]
pub struct Tracked {
    pub resource: ApiResource,
    pub namespace: Option<String>,
    pub name: String,
    /// When known: a new object of the same name is not the one waited for.
    pub uid: Option<String>,
}

impl Tracked {
    /// `Kind ns/name` or `Kind name`.
    pub fn describe(&self) -> String {
        describe(&self.resource.kind, self.namespace.as_deref(), &self.name)
    }
}

pub(crate) fn describe(kind: &str, namespace: Option<&str>, name: &str) -> String {
    match namespace {
        Some(ns) => format!("{kind} {ns}/{name}"),
        None => format!("{kind} {name}"),
    }
}

/// An object still there at the deadline.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Remaining {
    pub api_version: String,
    pub kind: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub name: String,
    /// Its finalizers (what holds it).
    pub finalizers: Vec<String>,
    /// Its deletionTimestamp, when its deletion has started.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deleting_since: Option<String>,
    /// Why its state is not known (it could not be read).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Remaining {
    /// One line: `Kind ns/name (finalizers: a, b)`.
    pub fn line(&self) -> String {
        let what = describe(&self.kind, self.namespace.as_deref(), &self.name);
        if let Some(e) = &self.error {
            return format!("{what} (state unknown: {e})");
        }
        if self.finalizers.is_empty() {
            format!("{what} (no finalizers)")
        } else {
            format!("{what} (finalizers: {})", self.finalizers.join(", "))
        }
    }
}

type Key = (usize, Option<String>, String);

/// Waits until every object of `objects` is gone, or `timeout` passes; then returns the ones
/// remaining. `progress(remaining, total)` is called whenever the count of remaining objects
/// (as far as known) changes.
pub async fn until_gone(
    client: &Client,
    objects: &[Tracked],
    timeout: Duration,
    mut progress: impl FnMut(usize, usize),
) -> Result<(), Vec<Remaining>> {
    if objects.is_empty() {
        return Ok(());
    }
    let deadline = Instant::now() + timeout;
    // Kinds, each watched once.
    let mut kinds: Vec<ApiResource> = Vec::new();
    let mut wanted: BTreeMap<Key, Option<String>> = BTreeMap::new();
    for o in objects {
        let idx = match kinds.iter().position(|k| *k == o.resource) {
            Some(i) => i,
            None => {
                kinds.push(o.resource.clone());
                kinds.len() - 1
            }
        };
        wanted.insert((idx, o.namespace.clone(), o.name.clone()), o.uid.clone());
    }
    let streams = kinds.iter().enumerate().map(|(idx, ar)| {
        let api: Api<DynamicObject> = Api::all_with(client.clone(), ar);
        watcher(api, watcher::Config::default())
            .default_backoff()
            .map(move |ev| (idx, ev))
            .boxed()
    });
    let mut events = futures::stream::select_all(streams);
    // Per kind: None until its first list is complete; then the wanted objects present.
    let mut present: Vec<Option<BTreeSet<Key>>> = vec![None; kinds.len()];
    let mut listing: Vec<BTreeSet<Key>> = vec![BTreeSet::new(); kinds.len()];
    let mut last_count = usize::MAX;
    let is_wanted = |idx: usize, obj: &DynamicObject| -> Option<Key> {
        let key = (idx, obj.namespace(), obj.name_any());
        match wanted.get(&key) {
            Some(Some(uid)) if obj.uid().as_ref() != Some(uid) => None,
            Some(_) => Some(key),
            None => None,
        }
    };
    loop {
        let count: usize = present
            .iter()
            .enumerate()
            .map(|(idx, p)| match p {
                Some(set) => set.len(),
                None => wanted.keys().filter(|k| k.0 == idx).count(),
            })
            .sum();
        if count != last_count {
            progress(count, objects.len());
            last_count = count;
        }
        if count == 0 && present.iter().all(Option::is_some) {
            return Ok(());
        }
        let next = match tokio::time::timeout_at(deadline, events.next()).await {
            Ok(Some(next)) => next,
            Ok(None) | Err(_) => break,
        };
        let (idx, event) = next;
        match event {
            Ok(watcher::Event::Init) => listing[idx].clear(),
            Ok(watcher::Event::InitApply(obj)) => {
                if let Some(k) = is_wanted(idx, &obj) {
                    listing[idx].insert(k);
                }
            }
            Ok(watcher::Event::InitDone) => {
                present[idx] = Some(std::mem::take(&mut listing[idx]));
            }
            Ok(watcher::Event::Apply(obj)) => {
                if let (Some(k), Some(set)) = (is_wanted(idx, &obj), present[idx].as_mut()) {
                    set.insert(k);
                }
            }
            Ok(watcher::Event::Delete(obj)) => {
                if let (Some(k), Some(set)) = (is_wanted(idx, &obj), present[idx].as_mut()) {
                    set.remove(&k);
                }
            }
            Err(e) => {
                tracing::debug!(kind = %kinds[idx].kind, error = %e, "watch failed; it is restarted")
            }
        }
    }
    // The deadline: read what remains once more.
    let mut remaining = Vec::new();
    for o in objects {
        let api: Api<DynamicObject> = match &o.namespace {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &o.resource),
            None => Api::all_with(client.clone(), &o.resource),
        };
        let base = Remaining {
            api_version: o.resource.api_version.clone(),
            kind: o.resource.kind.clone(),
            namespace: o.namespace.clone(),
            name: o.name.clone(),
            finalizers: Vec::new(),
            deleting_since: None,
            error: None,
        };
        match api.get_opt(&o.name).await {
            Ok(None) => {}
            Ok(Some(obj)) if o.uid.is_some() && obj.uid() != o.uid => {}
            Ok(Some(obj)) => remaining.push(Remaining {
                finalizers: obj.finalizers().to_vec(),
                deleting_since: obj
                    .metadata
                    .deletion_timestamp
                    .as_ref()
                    .map(|t| t.0.to_string()),
                ..base
            }),
            Err(e) => remaining.push(Remaining {
                error: Some(crate::cluster::retry::RequestError::from(e).to_string()),
                ..base
            }),
        }
    }
    if remaining.is_empty() {
        // Gone right at the deadline.
        return Ok(());
    }
    Err(remaining)
}
