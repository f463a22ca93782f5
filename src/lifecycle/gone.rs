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
///
/// # Errors
///
/// The objects still there at the deadline (read once more: with their finalizers, or with
/// the error that kept them from being read). A watch that fails is restarted with backoff,
/// never an error of its own: its objects count as remaining until it lists again.
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
    let mut watched = Watched::new(objects);
    let streams = watched.kinds.iter().enumerate().map(|(idx, ar)| {
        let api: Api<DynamicObject> = Api::all_with(client.clone(), ar);
        watcher(api, watcher::Config::default())
            .default_backoff()
            .map(move |ev| (idx, ev))
            .boxed()
    });
    let mut events = futures::stream::select_all(streams);
    let mut last_count = usize::MAX;
    loop {
        let count = watched.remaining();
        if count != last_count {
            progress(count, objects.len());
            last_count = count;
        }
        if count == 0 && watched.all_listed() {
            return Ok(());
        }
        let (idx, event) = match tokio::time::timeout_at(deadline, events.next()).await {
            Ok(Some(next)) => next,
            Ok(None) | Err(_) => break,
        };
        match event {
            Ok(event) => watched.apply(idx, event),
            Err(e) => {
                tracing::debug!(kind = %watched.kinds[idx].kind, error = %e, "watch failed; it is restarted")
            }
        }
    }
    // The deadline: read what remains once more.
    let remaining = read_remaining(client, objects).await;
    if remaining.is_empty() {
        // Gone right at the deadline.
        return Ok(());
    }
    Err(remaining)
}

/// What the watches have told so far about the objects waited for.
struct Watched {
    /// The kinds, each watched once; a [`Key`] holds the index of its kind.
    kinds: Vec<ApiResource>,
    /// The objects waited for, with the UID that must match when known.
    wanted: BTreeMap<Key, Option<String>>,
    /// Per kind: `None` until its first list is complete; then the wanted objects present.
    present: Vec<Option<BTreeSet<Key>>>,
    /// Per kind: the wanted objects seen by the list in progress.
    listing: Vec<BTreeSet<Key>>,
}

impl Watched {
    fn new(objects: &[Tracked]) -> Self {
        let mut kinds: Vec<ApiResource> = Vec::new();
        let mut wanted = BTreeMap::new();
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
        let n = kinds.len();
        Watched {
            kinds,
            wanted,
            present: vec![None; n],
            listing: vec![BTreeSet::new(); n],
        }
    }

    /// How many objects remain as far as known (all of a kind not listed yet).
    fn remaining(&self) -> usize {
        self.present
            .iter()
            .enumerate()
            .map(|(idx, p)| match p {
                Some(set) => set.len(),
                None => self.wanted.keys().filter(|k| k.0 == idx).count(),
            })
            .sum()
    }

    /// Whether every kind has been listed once.
    fn all_listed(&self) -> bool {
        self.present.iter().all(Option::is_some)
    }

    /// The key of `obj` (of kind `idx`) when it is one of the objects waited for.
    fn key(&self, idx: usize, obj: &DynamicObject) -> Option<Key> {
        let key = (idx, obj.namespace(), obj.name_any());
        match self.wanted.get(&key) {
            Some(Some(uid)) if obj.uid().as_ref() != Some(uid) => None,
            Some(_) => Some(key),
            None => None,
        }
    }

    fn apply(&mut self, idx: usize, event: watcher::Event<DynamicObject>) {
        match event {
            watcher::Event::Init => self.listing[idx].clear(),
            watcher::Event::InitApply(obj) => {
                if let Some(k) = self.key(idx, &obj) {
                    self.listing[idx].insert(k);
                }
            }
            watcher::Event::InitDone => {
                self.present[idx] = Some(std::mem::take(&mut self.listing[idx]));
            }
            watcher::Event::Apply(obj) => {
                if let (Some(k), Some(set)) = (self.key(idx, &obj), self.present[idx].as_mut()) {
                    set.insert(k);
                }
            }
            watcher::Event::Delete(obj) => {
                if let (Some(k), Some(set)) = (self.key(idx, &obj), self.present[idx].as_mut()) {
                    set.remove(&k);
                }
            }
        }
    }
}

/// Each of `objects` read once more: those still there (the same UID, when known), with
/// their finalizers, or with the error that kept them from being read.
async fn read_remaining(client: &Client, objects: &[Tracked]) -> Vec<Remaining> {
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
    remaining
}
