//! Drift detection: metadata-only watches (kube-runtime `metadata_watcher`), one per kind of
//! the release's objects, filtered by the ownership label `cvo.io/managed=true` that every
//! apply puts on its objects, and one on `ClusterVersion version` itself. Secrets are watched
//! per namespace the release ships them to, never cluster-wide: RBAC has no metadata-only
//! verb, so a cluster-wide watch would need the right to read every Secret in the cluster
//! (`cvo rbac` grants it in those namespaces only).
//!
//! The operator remembers the resourceVersion each manifest's object had when it last wrote
//! it or found it up to date ([`Known`]). A watch event whose resourceVersion differs —
//! someone else changed the object, unless only its status moved (same generation, labels and
//! annotations as at the previous event, for kinds with a generation) — or a deletion (also: the label removed, so the object
//! left the selector), or an object missing when a watch (re)lists, sends that manifest's
//! index to the repair queue.
//!
//! Two more watches ask for a full pass rather than a repair: `ClusterVersion version` (its
//! spec generation moved) and the FeatureGate `cluster` (the gates it enables for the
//! release's version changed: manifests gated on them come in or stay out from that pass on). Events for the operator's own writes carry the version it
//! recorded and are dropped; one that overtakes the recording costs a read, not a write (the
//! repair finds the object up to date). Delete manifests are not watched: their deletions are
//! tracked by the passes.
//!
//! Nothing here writes; nothing here is kept across restarts (a new watch lists first, and a
//! new process starts with a full pass).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use kube::api::{Api, DynamicObject};
use kube::core::PartialObjectMeta;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use tokio::sync::mpsc::UnboundedSender;

use crate::apply::MANAGED_LABEL;
use crate::cluster::Cluster;
use crate::release::Release;
use crate::release::feature_gate::{self, EnabledGates, Fallback};
use crate::status::clusterversion;

/// What makes an object one of the release's: (namespace, name) within its kind.
type ObjectKey = (Option<String>, String);

/// The resourceVersion of each manifest's object as the operator last wrote or read it, by
/// manifest index (shared by the passes, the repairs and the watches).
#[derive(Clone, Default)]
pub struct Known(Arc<Mutex<HashMap<usize, String>>>);

impl Known {
    pub fn set(&self, index: usize, resource_version: Option<String>) {
        let mut known = self.0.lock().unwrap_or_else(|p| p.into_inner());
        match resource_version {
            Some(rv) => known.insert(index, rv),
            None => known.remove(&index),
        };
    }

    fn get(&self, index: usize) -> Option<String> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&index)
            .cloned()
    }
}

/// What one watch covers: (apiVersion, kind), and the namespace when the watch is limited to
/// one (Secrets: watching them everywhere would need the right to read every Secret).
type WatchKey = (String, String, Option<String>);

/// The release's applied manifests grouped by kind (and, for Secrets, by namespace): what to
/// watch.
#[derive(Debug)]
pub struct Kinds {
    /// Watch → objects it covers → manifest index.
    by_kind: Vec<(WatchKey, HashMap<ObjectKey, usize>)>,
}

impl Kinds {
    pub fn of(release: &Release) -> Self {
        let mut by_kind: Vec<(WatchKey, HashMap<ObjectKey, usize>)> = Vec::new();
        for (index, m) in release.manifests.iter().enumerate() {
            if m.is_delete() || m.create_only {
                continue;
            }
            let scope =
                m.id.namespace
                    .clone()
                    .filter(|_| crate::apply::secrets::is_secret(&m.api_version, &m.id.kind));
            let key = (m.api_version.clone(), m.id.kind.clone(), scope);
            let objects = match by_kind.iter_mut().find(|(k, _)| *k == key) {
                Some((_, objects)) => objects,
                None => {
                    by_kind.push((key, HashMap::new()));
                    &mut by_kind.last_mut().expect("just pushed").1
                }
            };
            objects.insert((m.id.namespace.clone(), m.id.name.clone()), index);
        }
        Kinds { by_kind }
    }

    pub fn len(&self) -> usize {
        self.by_kind.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_kind.is_empty()
    }

    /// Watches every kind until dropped, sending the index of each manifest whose object
    /// drifted to `drifted`.
    pub async fn watch(&self, cluster: &Cluster, known: &Known, drifted: &UnboundedSender<usize>) {
        let watches = self
            .by_kind
            .iter()
            .map(|((api_version, kind, namespace), objects)| {
                let what = Watched {
                    api_version,
                    kind,
                    namespace: namespace.as_deref(),
                };
                watch_kind(cluster, what, objects, known, drifted)
            });
        futures::future::join_all(watches).await;
    }
}

/// What tells a spec or metadata change from a status-only one, for kinds that have a
/// `metadata.generation` (moved by spec changes, not by status writes): the generation and a
/// hash of the labels and annotations. Kinds without a generation (ConfigMaps, Secrets, …) have
/// none: every change of theirs is looked at, so nothing of theirs is kept (at 50,000 objects
/// the labels and annotations themselves were tens of MB).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Shape {
    generation: i64,
    metadata: u64,
}

impl Shape {
    fn of(meta: &kube::api::ObjectMeta) -> Option<Self> {
        use std::hash::{Hash, Hasher};
        let generation = meta.generation?;
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        meta.labels.hash(&mut hasher);
        meta.annotations.hash(&mut hasher);
        Some(Shape {
            generation,
            metadata: hasher.finish(),
        })
    }
}

/// True when `now` can differ from `before` only in its status: the kind has a generation, it
/// did not move, and labels and annotations are the same.
fn only_status_moved(before: Option<Shape>, now: Option<Shape>) -> bool {
    now.is_some() && before == now
}

/// One watch: a kind, in every namespace or in one.
#[derive(Clone, Copy)]
struct Watched<'a> {
    api_version: &'a str,
    kind: &'a str,
    namespace: Option<&'a str>,
}

async fn watch_kind(
    cluster: &Cluster,
    what: Watched<'_>,
    objects: &HashMap<ObjectKey, usize>,
    known: &Known,
    drifted: &UnboundedSender<usize>,
) {
    let (api_version, kind) = (what.api_version, what.kind);
    let mut waits = crate::retry::Backoff::RESOLVE_KIND.delays();
    let resolved = loop {
        match cluster.discovery().resolve(api_version, kind).await {
            Ok(r) => break r,
            Err(e) => {
                tracing::debug!(%kind, error = %e, "cannot watch this kind yet; trying again");
                tokio::time::sleep(waits.next_wait()).await;
            }
        }
    };
    // `PartialObjectMeta`: metadata-only LIST and WATCH requests.
    let api: Api<PartialObjectMeta<DynamicObject>> = match what.namespace {
        Some(ns) => Api::namespaced_with(cluster.client().clone(), ns, &resolved.resource),
        None => Api::all_with(cluster.client().clone(), &resolved.resource),
    };
    let selector = format!("{MANAGED_LABEL}=true");
    let stream =
        watcher::watcher(api, watcher::Config::default().labels(&selector)).default_backoff();
    futures::pin_mut!(stream);
    let index_of = |meta: &kube::api::ObjectMeta| {
        let namespace = meta.namespace.clone().filter(|_| resolved.namespaced);
        let name = meta.name.clone().unwrap_or_default();
        objects.get(&(namespace, name)).copied()
    };
    let mut listed: HashSet<usize> = HashSet::new();
    // What each object (of a kind with a generation) looked like at its previous event.
    let mut last: HashMap<usize, Shape> = HashMap::new();
    tracing::debug!(%kind, objects = objects.len(), "watching for drift");
    while let Some(event) = stream.next().await {
        let event = match event {
            Ok(e) => e,
            Err(e) => {
                tracing::debug!(%kind, error = %e, "drift watch broke; it resumes with backoff");
                continue;
            }
        };
        match event {
            Event::Init => listed.clear(),
            Event::InitApply(obj) | Event::Apply(obj) => {
                let Some(index) = index_of(&obj.metadata) else {
                    continue;
                };
                listed.insert(index);
                if obj.metadata.deletion_timestamp.is_some() {
                    // Being deleted by someone: repaired once it is gone (its Delete event).
                    continue;
                }
                let seen = obj.metadata.resource_version.clone();
                let shape = Shape::of(&obj.metadata);
                let before = match shape {
                    Some(shape) => last.insert(index, shape),
                    None => last.remove(&index),
                };
                if seen.is_none() || seen == known.get(index) {
                    continue;
                }
                if only_status_moved(before, shape) {
                    // Only the status moved (its controller at work): not drift.
                    continue;
                }
                tracing::debug!(%kind, name = ?obj.metadata.name, ?seen, "changed by someone else");
                let _ = drifted.send(index);
            }
            Event::Delete(obj) => {
                if let Some(index) = index_of(&obj.metadata) {
                    last.remove(&index);
                    tracing::debug!(%kind, name = ?obj.metadata.name, "deleted, or no longer labelled {MANAGED_LABEL}");
                    let _ = drifted.send(index);
                }
            }
            Event::InitDone => {
                // Objects of the release this listing did not show are gone (or lost their
                // label) while nobody watched.
                for (_, &index) in objects.iter().filter(|(_, i)| !listed.contains(i)) {
                    let _ = drifted.send(index);
                }
            }
        }
    }
}

/// The kind `kind` of `api_version`, once the server serves it: looked up every 30 s until
/// then (a steady poll, not a backoff: a kind is served or not for long).
async fn once_served(cluster: &Cluster, api_version: &str, kind: &str) -> crate::cluster::Resolved {
    loop {
        match cluster.discovery().resolve(api_version, kind).await {
            Ok(r) => return r,
            Err(_) => tokio::time::sleep(Duration::from_secs(30)).await,
        }
    }
}

/// Watches `ClusterVersion version` and sends `()` whenever its `metadata.generation` moves
/// away from `generation` (the one the last pass read) or from the last one seen — its spec
/// changed: a new `desiredUpdate`, say; the operator then runs a full pass. Status writes do
/// not move the generation. Waits while the kind is not served.
pub async fn watch_cluster_version(
    cluster: &Cluster,
    mut generation: Option<i64>,
    changed: &UnboundedSender<()>,
) {
    let resolved = once_served(cluster, clusterversion::API_VERSION, clusterversion::KIND).await;
    let api: Api<PartialObjectMeta<DynamicObject>> =
        Api::all_with(cluster.client().clone(), &resolved.resource);
    let selector = format!("metadata.name={}", clusterversion::NAME);
    let stream =
        watcher::watcher(api, watcher::Config::default().fields(&selector)).default_backoff();
    futures::pin_mut!(stream);
    while let Some(event) = stream.next().await {
        if let Ok(Event::Apply(obj) | Event::InitApply(obj)) = event {
            let now = obj.metadata.generation;
            if generation.is_some() && now != generation {
                let _ = changed.send(());
            }
            generation = now;
        }
    }
}

/// Watches the FeatureGate `cluster` and sends on `changed` when the gates it enables for
/// `version` (its `status.featureGates` entry, as [`crate::sync::feature_gates`] reads it)
/// differ from `seen`: what the last pass read, or `None` when it read none (then the first
/// answer asks for a pass). A FeatureGate deleted enables no gate; one whose status cannot be
/// read counts as a change too (the pass then stops, failing closed, and says why).
///
/// The kind may not be served yet (an OpenShift payload ships the FeatureGate CRD itself): it
/// is looked up again every 30 s until it is. Runs until dropped.
pub async fn watch_feature_gate(
    cluster: &Cluster,
    version: Option<String>,
    mut seen: Option<EnabledGates>,
    changed: &UnboundedSender<()>,
) {
    let resolved = once_served(
        cluster,
        feature_gate::OBJECT_API_VERSION,
        feature_gate::OBJECT_KIND,
    )
    .await;
    let api: Api<DynamicObject> = Api::all_with(cluster.client().clone(), &resolved.resource);
    let selector = format!("metadata.name={}", feature_gate::OBJECT_NAME);
    let stream =
        watcher::watcher(api, watcher::Config::default().fields(&selector)).default_backoff();
    futures::pin_mut!(stream);
    // Whether the list being received (after `Init`) has held the object.
    let mut listed = false;
    while let Some(event) = stream.next().await {
        let now = match event {
            Ok(Event::Init) => {
                listed = false;
                continue;
            }
            Ok(Event::InitApply(obj)) => {
                listed = true;
                gates_of(&obj, version.as_deref())
            }
            Ok(Event::InitDone) if !listed => Some(EnabledGates::new()),
            Ok(Event::Apply(obj)) => gates_of(&obj, version.as_deref()),
            Ok(Event::Delete(_)) => Some(EnabledGates::new()),
            Ok(Event::InitDone) | Err(_) => continue,
        };
        if now != seen {
            let _ = changed.send(());
        }
        seen = now;
    }
}

/// The gates `object` enables for `version`; `None` when its status cannot be read.
fn gates_of(object: &DynamicObject, version: Option<&str>) -> Option<EnabledGates> {
    let value = serde_json::to_value(object).ok()?;
    feature_gate::enabled_in(&value, version, Fallback::StatusOnly).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::release::LoadOptions;

    #[test]
    fn kinds_group_applied_manifests_and_skip_deletes() {
        let dir = tempfile::tempdir().unwrap();
        let cm = |name: &str, extra: &str| {
            format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: ns\n{extra}"
            )
        };
        std::fs::write(dir.path().join("0000_10_a_00_a.yaml"), cm("a", "")).unwrap();
        std::fs::write(dir.path().join("0000_10_a_01_b.yaml"), cm("b", "")).unwrap();
        std::fs::write(
            dir.path().join("0000_10_a_02_gone.yaml"),
            cm(
                "gone",
                "  annotations:\n    release.openshift.io/delete: \"true\"\n",
            ),
        )
        .unwrap();
        std::fs::write(
            dir.path().join("0000_10_a_03_ns.yaml"),
            "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: ns\n",
        )
        .unwrap();
        let secret = |ns: &str| {
            format!("apiVersion: v1\nkind: Secret\nmetadata:\n  name: s\n  namespace: {ns}\n")
        };
        std::fs::write(dir.path().join("0000_10_a_04_s.yaml"), secret("ns")).unwrap();
        std::fs::write(dir.path().join("0000_10_a_05_s.yaml"), secret("other")).unwrap();
        let release = crate::release::load(dir.path(), &LoadOptions::default()).unwrap();
        let kinds = Kinds::of(&release);
        assert_eq!(kinds.len(), 4, "{kinds:?}");
        let (key, cms) = &kinds.by_kind[0];
        assert_eq!(key.2, None, "ConfigMaps: one watch in every namespace");
        assert_eq!(cms.len(), 2);
        let secrets: Vec<&Option<String>> = kinds
            .by_kind
            .iter()
            .filter(|((_, kind, _), _)| kind == "Secret")
            .map(|((_, _, ns), _)| ns)
            .collect();
        assert_eq!(
            secrets,
            [&Some("ns".to_owned()), &Some("other".to_owned())],
            "Secrets: one watch per namespace"
        );
        assert!(!cms.contains_key(&(Some("ns".into()), "gone".into())));
        let meta = |generation: Option<i64>, label: &str| kube::api::ObjectMeta {
            generation,
            labels: Some([("l".to_owned(), label.to_owned())].into()),
            ..Default::default()
        };
        let before = Shape::of(&meta(Some(3), "a"));
        assert!(only_status_moved(before, Shape::of(&meta(Some(3), "a"))));
        assert!(!only_status_moved(before, Shape::of(&meta(Some(4), "a"))));
        assert!(!only_status_moved(before, Shape::of(&meta(Some(3), "b"))));
        assert!(!only_status_moved(None, Shape::of(&meta(Some(3), "a"))));
        let no_generation = Shape::of(&meta(None, "a"));
        assert!(!only_status_moved(no_generation, no_generation));
        let known = Known::default();
        known.set(0, Some("5".into()));
        assert_eq!(known.get(0).as_deref(), Some("5"));
        known.set(0, None);
        assert_eq!(known.get(0), None);
    }
}
