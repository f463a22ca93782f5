//! A pass's view of existing objects, one LIST per (resource, namespace) instead of one GET
//! per manifest.
//!
//! A pass lists every (kind, namespace) of its release ahead of its tasks
//! (`Applier::prefetch`), and the first manifest that needs one not listed yet lists it
//! (concurrent users share the one LIST); every manifest of that (kind, namespace) finds its
//! object — or its absence — in the result. Each object of a release belongs to exactly one
//! manifest, so the entry a task reads was not changed by the pass itself; an object someone
//! else created since reads as absent, and server-side apply then updates it as it would
//! have (a create-only manifest asks again before it writes). A LIST that fails (forbidden,
//! kind not served yet) is remembered as "unknown" and the task falls back to a GET. The
//! snapshot lives for one pass only.
//!
//! Objects are kept as compact JSON text, not as parsed objects: a pass of a 5,000-manifest
//! release holds every listed object until it ends, and text takes about a quarter of the
//! memory of the parsed form (each lookup parses its one object, where it cloned it before).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use kube::ResourceExt;
use kube::api::{DynamicObject, ListParams};
use tokio::sync::OnceCell;

use crate::cluster::{Cluster, Resolved};

type Listing = Option<HashMap<String, Box<str>>>;

/// (group, version, plural, namespace).
type Key = (String, String, String, Option<String>);

/// Objects listed so far in this pass.
#[derive(Default)]
pub struct Snapshot {
    cells: Mutex<HashMap<Key, Arc<OnceCell<Listing>>>>,
}

/// What the snapshot knows about one object.
#[derive(Debug)]
pub enum Lookup {
    Absent,
    Present(Box<DynamicObject>),
    /// The LIST failed or does not apply: ask the server directly.
    Unknown,
}

impl Snapshot {
    pub fn new() -> Self {
        Self::default()
    }

    /// Forgets everything listed (the next pass reads the cluster afresh).
    pub fn clear(&self) {
        self.cells.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }

    /// Looks `name` up, listing its (kind, namespace) on first use; the time spent waiting
    /// for the listing (the server's answer) is added to `waited`, not the time to read the
    /// object from it.
    pub async fn lookup(
        &self,
        cluster: &Cluster,
        resolved: &Resolved,
        namespace: Option<&str>,
        name: &str,
        waited: &mut std::time::Duration,
    ) -> Lookup {
        if resolved.namespaced && namespace.is_none() {
            return Lookup::Unknown;
        }
        let listing =
            super::TaskTime::add(waited, self.listing(cluster, resolved, namespace)).await;
        match listing.get() {
            None | Some(None) => Lookup::Unknown,
            Some(Some(objects)) => match objects.get(name) {
                // What was just serialized parses back; if it did not, ask the server.
                Some(text) => match serde_json::from_str::<DynamicObject>(text) {
                    Ok(obj) => Lookup::Present(Box::new(obj)),
                    Err(_) => Lookup::Unknown,
                },
                None => Lookup::Absent,
            },
        }
    }

    /// Lists (kind, namespace) now unless it was listed already: a lookup later finds it
    /// ready (`Applier::prefetch`).
    pub async fn list(&self, cluster: &Cluster, resolved: &Resolved, namespace: Option<&str>) {
        if !resolved.namespaced || namespace.is_some() {
            self.listing(cluster, resolved, namespace).await;
        }
    }

    /// The listing of (kind, namespace), listed on first use (set when this returns).
    async fn listing(
        &self,
        cluster: &Cluster,
        resolved: &Resolved,
        namespace: Option<&str>,
    ) -> Arc<OnceCell<Listing>> {
        let r = &resolved.resource;
        let key = (
            r.group.clone(),
            r.version.clone(),
            r.plural.clone(),
            namespace.filter(|_| resolved.namespaced).map(str::to_owned),
        );
        let cell = self
            .cells
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(key)
            .or_default()
            .clone();
        cell.get_or_init(|| async {
                let list = cluster.api(resolved, namespace).list(&ListParams::default()).await;
                match list {
                    // An object that cannot be kept makes the listing unknown (GETs), never
                    // absent.
                    Ok(list) => list
                        .items
                        .into_iter()
                        .map(|o| Some((o.name_any(), serde_json::to_string(&o).ok()?.into())))
                        .collect(),
                    Err(e) => {
                        tracing::debug!(resource = %r.plural, ?namespace, error = %e, "list failed; falling back to GET");
                        None
                    }
                }
            })
            .await;
        cell
    }
}
