//! One manifest's task: decide create / update / unchanged / delete and do it with as few
//! requests as possible — a GET (to tell created from updated from unchanged, and to see a
//! deletion in progress) and at most one write.

use std::collections::HashMap;

use kube::ResourceExt;
use kube::api::DynamicObject;
use serde_json::Value;

use super::error::ManifestError;
use super::retry::RequestError;
use super::secrets;
use super::snapshot::{Lookup, Snapshot};
use super::{
    Action, FieldChange, ManifestResult, Options, PendingDeletion, STRATEGY_ANNOTATION, Strategy,
    TaskTime,
};
use crate::cluster::discovery::DiscoveryError;
use crate::cluster::{Cluster, DeleteOutcome, Resolved, crd, wait};
use crate::health::{self, Finding, Verdict, WaitMode};
use crate::release::{DeleteIntent, Manifest, Release, typed};

/// Applies the manifests of one release to one cluster. Holds no state between calls
/// except the discovery cache inside [`Cluster`].
pub struct Applier<'r> {
    cluster: Cluster,
    release: &'r Release,
    options: Options,
    /// (group, kind) → name of the CRD in this release that defines it.
    crds: HashMap<(String, String), String>,
    /// Namespaces this release creates.
    namespaces: std::collections::HashSet<String>,
    /// Existing objects, listed once per (kind, namespace) for this pass.
    snapshot: Snapshot,
    /// Manifests being worked on right now (for progress reports).
    in_flight: std::sync::Mutex<std::collections::BTreeSet<usize>>,
    /// What manifests being worked on wait for (their health), by manifest index.
    waiting: std::sync::Mutex<std::collections::BTreeMap<usize, Finding>>,
}

impl<'r> Applier<'r> {
    pub fn new(cluster: Cluster, release: &'r Release, options: Options) -> Self {
        // What this pass creates: manifests excluded by capability create nothing.
        let created = || {
            release
                .manifests
                .iter()
                .enumerate()
                .filter(|(i, m)| !m.is_delete() && !options.excluded.contains_key(i))
                .map(|(_, m)| m)
        };
        let crds = created()
            .filter(|m| m.id.is_crd())
            .filter_map(|m| {
                let spec = m.object.get("spec")?;
                let group = spec.get("group")?.as_str()?.to_owned();
                let kind = spec.pointer("/names/kind")?.as_str()?.to_owned();
                Some(((group, kind), m.id.name.clone()))
            })
            .collect();
        let namespaces = created()
            .filter(|m| m.id.kind == "Namespace" && m.id.group.is_empty())
            .map(|m| m.id.name.clone())
            .collect();
        Applier {
            cluster,
            release,
            options,
            crds,
            namespaces,
            snapshot: Snapshot::new(),
            in_flight: Default::default(),
            waiting: Default::default(),
        }
    }

    /// Lists, `parallelism` at a time, every (kind, namespace) the release's manifests are in
    /// whose kind the server serves now, so that the pass's tasks find their objects listed
    /// instead of each node waiting for its first LIST while it holds a slot
    /// (docs/performance.md). A kind not served yet is left to its task; a LIST that fails is
    /// remembered as unknown, as when a task lists (its tasks then GET).
    pub async fn prefetch(&self, parallelism: usize) {
        use futures::StreamExt;
        if !self.options.list_objects {
            return;
        }
        let mut seen = std::collections::HashSet::new();
        let wanted: Vec<&Manifest> = self
            .release
            .manifests
            .iter()
            .enumerate()
            .filter(|(i, m)| {
                !self.options.excluded.contains_key(i) && !self.options.unmanaged.contains(&m.id)
            })
            .map(|(_, m)| m)
            .filter(|m| seen.insert((&m.api_version, &m.id.kind, &m.id.namespace)))
            .collect();
        futures::stream::iter(wanted)
            .for_each_concurrent(parallelism.max(1), |m| async move {
                let discovery = self.cluster.discovery();
                if let Ok(resolved) = discovery.resolve(&m.api_version, &m.id.kind).await {
                    let ns = m.id.namespace.as_deref();
                    self.snapshot.list(&self.cluster, &resolved, ns).await;
                }
            })
            .await;
    }

    /// Forgets what the last pass listed, so the next pass reads the cluster afresh.
    pub fn new_pass(&self) {
        self.snapshot.clear();
    }

    pub fn cluster(&self) -> &Cluster {
        &self.cluster
    }

    pub fn options(&self) -> &Options {
        &self.options
    }

    pub fn release(&self) -> &'r Release {
        self.release
    }

    /// Manifests being worked on right now, in release order.
    pub fn in_flight(&self) -> Vec<usize> {
        self.in_flight
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .copied()
            .collect()
    }

    /// What the manifests being worked on wait for right now (their health), in release
    /// order.
    pub fn waiting(&self) -> Vec<Finding> {
        self.waiting
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .cloned()
            .collect()
    }

    fn set_waiting(&self, index: usize, finding: Option<&Finding>) {
        let now = {
            let mut waiting = self.waiting.lock().unwrap_or_else(|p| p.into_inner());
            match finding {
                Some(f) => waiting.insert(index, f.clone()),
                None => waiting.remove(&index),
            };
            waiting.values().cloned().collect::<Vec<_>>()
        };
        if let Some(observer) = &self.options.health.observer {
            observer.waiting(&now);
        }
    }

    /// Runs manifest `index` of the release, waiting for its health at most the health
    /// timeout.
    pub async fn run(&self, index: usize) -> ManifestResult {
        let deadline = tokio::time::Instant::now() + self.options.health.timeout;
        self.run_within(index, deadline).await
    }

    /// Runs manifest `index` of the release; waiting for its health ends at `deadline` (its
    /// node's).
    pub async fn run_within(&self, index: usize, deadline: tokio::time::Instant) -> ManifestResult {
        self.in_flight
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(index);
        let result = self.run_one(index, deadline).await;
        self.in_flight
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&index);
        result
    }

    async fn run_one(&self, index: usize, deadline: tokio::time::Instant) -> ManifestResult {
        let manifest = &self.release.manifests[index];
        if self.options.unmanaged.contains(&manifest.id) {
            return ManifestResult::new(index, Action::Unmanaged);
        }
        if let Some(why) = self.options.excluded.get(&index) {
            let mut result = ManifestResult::new(index, Action::Excluded);
            result.error = Some(why.clone());
            return result;
        }
        let started = tokio::time::Instant::now();
        let mut result = ManifestResult::new(index, Action::Failed);
        let outcome = match &manifest.intent {
            DeleteIntent::Invalid(value) => {
                Err(ManifestError::InvalidDeleteAnnotation(value.clone()))
            }
            DeleteIntent::Delete => self.delete(manifest, &mut result).await,
            DeleteIntent::Apply => self.apply(manifest, &mut result, deadline).await,
        };
        match outcome {
            Ok(action) => result.action = action,
            Err(e) => {
                result.action = Action::Failed;
                result.permanent = e.is_permanent();
                result.rejected = match &e {
                    ManifestError::Rejected { code, .. } => Some(*code),
                    // The server answers 404 for the namespace: it refuses the object.
                    ManifestError::MissingNamespace { .. } => Some(404),
                    _ => None,
                };
                result.error = Some(e.to_string());
            }
        }
        tracing::debug!(manifest = %manifest.id, action = %result.action, elapsed = ?started.elapsed(), "manifest done");
        result
    }

    /// Resolves the manifest's kind; when the release itself defines the kind with a CRD,
    /// waits for that CRD to be established and then for discovery to serve the kind (a real
    /// server lags behind `Established`), both within the CRD timeout.
    async fn resolve(&self, manifest: &Manifest) -> Result<Resolved, ManifestError> {
        let discovery = self.cluster.discovery();
        match discovery
            .resolve(&manifest.api_version, &manifest.id.kind)
            .await
        {
            Err(DiscoveryError::UnknownKind { .. }) => {
                let key = (manifest.id.group.clone(), manifest.id.kind.clone());
                let Some(crd_name) = self.crds.get(&key) else {
                    return discovery
                        .resolve(&manifest.api_version, &manifest.id.kind)
                        .await
                        .map_err(Into::into);
                };
                let start = tokio::time::Instant::now();
                let timeout = self.options.crd_timeout;
                crd::wait_established(self.cluster.client(), crd_name, timeout).await?;
                let remaining = timeout.saturating_sub(start.elapsed());
                Ok(discovery
                    .resolve_within(&manifest.api_version, &manifest.id.kind, remaining)
                    .await?)
            }
            other => Ok(other?),
        }
    }

    /// The object as the pass found it: from the snapshot, or a GET when it cannot tell; the
    /// time spent waiting on the server is added to `server`.
    async fn current(
        &self,
        resolved: &Resolved,
        manifest: &Manifest,
        server: &mut std::time::Duration,
    ) -> Result<Option<DynamicObject>, ManifestError> {
        if !self.options.list_objects {
            return TaskTime::add(server, self.get(resolved, manifest)).await;
        }
        let ns = manifest.id.namespace.as_deref();
        let name = &manifest.id.name;
        match self
            .snapshot
            .lookup(&self.cluster, resolved, ns, name, server)
            .await
        {
            Lookup::Absent => Ok(None),
            Lookup::Present(obj) => Ok(Some(*obj)),
            Lookup::Unknown => TaskTime::add(server, self.get(resolved, manifest)).await,
        }
    }

    async fn get(
        &self,
        resolved: &Resolved,
        manifest: &Manifest,
    ) -> Result<Option<DynamicObject>, ManifestError> {
        let ns = manifest.id.namespace.as_deref();
        self.options
            .retry
            .run(|| self.cluster.get(resolved, ns, &manifest.id.name))
            .await
            .map_err(|(e, n)| ManifestError::from_request("get", e, n))
    }

    /// Writes the manifest (or finds it up to date), then judges the object's health.
    async fn apply(
        &self,
        manifest: &Manifest,
        result: &mut ManifestResult,
        deadline: tokio::time::Instant,
    ) -> Result<Action, ManifestError> {
        let (action, written) = self.write(manifest, result).await?;
        let Some((resolved, live)) = written else {
            return Ok(action);
        };
        if !self.options.dry_run {
            result.resource_version = live.resource_version();
        }
        if self.options.dry_run || self.options.health.wait == WaitMode::None {
            return Ok(action);
        }
        let index = result.index;
        let verdict = TaskTime::add(
            &mut result.time.health,
            health::settle(
                &self.cluster,
                &resolved,
                manifest,
                &live,
                &self.options.health,
                &self.options.retry,
                deadline,
                |finding| self.set_waiting(index, finding),
            ),
        )
        .await;
        match verdict {
            Verdict::Healthy => Ok(action),
            Verdict::Reported(finding) => {
                result.warnings.push(finding.message.clone());
                result.health = Some(Box::new(finding));
                Ok(action)
            }
            Verdict::Failed(finding) | Verdict::Waiting(finding) => {
                result.health = Some(Box::new(finding.clone()));
                Err(ManifestError::Unhealthy(finding))
            }
        }
    }

    /// Creates the ClusterOperators of the release that the cluster lacks, before the pass,
    /// as the CVO precreates them: an operator can write its status as soon as it runs, even
    /// before the pass reaches its manifest. A kind not served yet is skipped (its manifest
    /// creates the object later).
    pub async fn precreate_cluster_operators(&self) -> usize {
        let mut created = 0;
        for (index, manifest) in self.release.manifests.iter().enumerate() {
            let is_operator = manifest.id.group == "config.openshift.io"
                && manifest.id.kind == "ClusterOperator"
                && manifest.intent == DeleteIntent::Apply
                && !self.options.unmanaged.contains(&manifest.id)
                && !self.options.excluded.contains_key(&index);
            if !is_operator {
                continue;
            }
            let Ok(resolved) = self
                .cluster
                .discovery()
                .resolve(&manifest.api_version, &manifest.id.kind)
                .await
            else {
                continue;
            };
            let mut untimed = std::time::Duration::ZERO;
            let current = self.current(&resolved, manifest, &mut untimed).await;
            if !matches!(current, Ok(None)) {
                continue;
            }
            let mut result = ManifestResult::new(index, Action::Failed);
            match self.write(manifest, &mut result).await {
                Ok((Action::Created, _)) => created += 1,
                Ok(_) => {}
                Err(e) => {
                    tracing::debug!(manifest = %manifest.id, error = %e, "could not precreate the ClusterOperator; its manifest will create it")
                }
            }
        }
        if created > 0 {
            // The pass must see them.
            self.snapshot.clear();
        }
        created
    }

    /// Writes the manifest with server-side apply unless it is up to date; returns the
    /// action and the live object (`None` when a dry run could not ask the server).
    async fn write(
        &self,
        manifest: &Manifest,
        result: &mut ManifestResult,
    ) -> Result<(Action, Option<(Resolved, DynamicObject)>), ManifestError> {
        let (body, typed) = body_of(manifest, result)?;
        if self.kind_not_served_yet(manifest, result).await {
            return Ok((Action::Created, None));
        }
        let server = &mut result.time.server;
        let resolved = TaskTime::add(server, self.resolve(manifest)).await?;
        let mut before = self.current(&resolved, manifest, server).await?;
        if before.is_none() && manifest.create_only && self.options.list_objects {
            // The pass listed ahead of this task: an object someone created since must never
            // be written over by a create-only manifest. Asked again, fresh.
            before = TaskTime::add(server, self.get(&resolved, manifest)).await?;
        }
        if let Some(live) = before
            .as_ref()
            .filter(|live| live.metadata.deletion_timestamp.is_some())
        {
            return Err(ManifestError::BeingDeleted {
                since: live.metadata.deletion_timestamp.as_ref().map(|t| t.0),
                finalizers: live.finalizers().to_vec(),
            });
        }
        let stored = super::body::Stored {
            typed,
            status_subresource: resolved.status_subresource,
        };
        if let Some(live) = before
            .as_ref()
            .filter(|live| up_to_date(manifest, live, &body, stored))
        {
            return Ok((Action::Unchanged, Some((resolved, live.clone()))));
        }
        let ns = manifest.id.namespace.as_deref();
        let dry_run = self.options.dry_run;
        let request = self.options.retry.run(|| {
            self.cluster
                .apply(&resolved, ns, &manifest.id.name, &body, dry_run)
        });
        let after = TaskTime::add(&mut result.time.server, request)
            .await
            .map_err(|(e, n)| self.apply_error(manifest, &resolved, e, n));
        let after = match after {
            Err(ManifestError::MissingNamespace { namespace, .. })
                if dry_run && self.namespaces.contains(&namespace) =>
            {
                result.warnings.push(format!(
                    "not checked by the server: namespace {namespace} is created by this release"
                ));
                return Ok((Action::Created, None));
            }
            other => other?,
        };
        let Some(before) = before else {
            return Ok((Action::Created, Some((resolved, after))));
        };
        if dry_run {
            return Ok((dry_run_changes(manifest, &before, &after, result), None));
        }
        let action = if applied_a_change(&before, &after, &body) {
            Action::Updated
        } else {
            Action::Unchanged
        };
        Ok((action, Some((resolved, after))))
    }

    /// In a dry run, whether `manifest`'s kind is one a CRD of this release defines and the
    /// server does not serve yet (a dry run creates no CRD): then the object can only be
    /// planned as new, with a warning in `result` saying it was not checked.
    async fn kind_not_served_yet(&self, manifest: &Manifest, result: &mut ManifestResult) -> bool {
        let key = (manifest.id.group.clone(), manifest.id.kind.clone());
        if !self.options.dry_run || !self.crds.contains_key(&key) {
            return false;
        }
        let resolved = self
            .cluster
            .discovery()
            .resolve(&manifest.api_version, &manifest.id.kind)
            .await;
        if !matches!(resolved, Err(DiscoveryError::UnknownKind { .. })) {
            return false;
        }
        result.warnings.push(format!(
            "not checked by the server: {} is not served yet (its CRD {} is created by this release)",
            manifest.id.kind, self.crds[&key]
        ));
        true
    }

    fn apply_error(
        &self,
        manifest: &Manifest,
        resolved: &Resolved,
        err: RequestError,
        attempts: u32,
    ) -> ManifestError {
        if let (Some(status), true) = (err.status(), resolved.namespaced) {
            let about_namespace = status
                .details
                .as_ref()
                .is_some_and(|d| d.kind == "namespaces")
                || status.message.starts_with("namespaces ");
            if status.code == 404 && about_namespace {
                return ManifestError::MissingNamespace {
                    namespace: manifest
                        .id
                        .namespace
                        .clone()
                        .unwrap_or_else(|| "default".into()),
                    message: status.message.clone(),
                };
            }
        }
        if err.code() == Some(404) {
            // The type itself is no longer served: look it up again next time.
            self.cluster
                .discovery()
                .forget(&manifest.api_version, &manifest.id.kind);
        }
        ManifestError::from_request("apply", err, attempts)
    }

    fn strategy(&self, manifest: &Manifest) -> Result<Strategy, ManifestError> {
        match manifest.annotation(STRATEGY_ANNOTATION) {
            None => Ok(self.options.strategy),
            Some(value) => Strategy::parse(value).ok_or_else(|| ManifestError::InvalidStrategy {
                annotation: STRATEGY_ANNOTATION,
                value: value.to_owned(),
            }),
        }
    }

    async fn delete(
        &self,
        manifest: &Manifest,
        result: &mut ManifestResult,
    ) -> Result<Action, ManifestError> {
        let strategy = self.strategy(manifest)?;
        let server = &mut result.time.server;
        let discovery = self.cluster.discovery();
        let resolved = match TaskTime::add(
            server,
            discovery.resolve(&manifest.api_version, &manifest.id.kind),
        )
        .await
        {
            // A kind nobody serves has no objects.
            Err(DiscoveryError::UnknownKind { .. }) => return Ok(Action::AlreadyAbsent),
            other => other?,
        };
        let Some(current) = self.current(&resolved, manifest, server).await? else {
            return Ok(Action::AlreadyAbsent);
        };
        let ns = manifest.id.namespace.as_deref();
        let uid = current.uid();
        let (since, finalizers) = if current.metadata.deletion_timestamp.is_some() {
            (
                current.metadata.deletion_timestamp.as_ref().map(|t| t.0),
                current.finalizers().to_vec(),
            )
        } else {
            let dry_run = self.options.dry_run;
            let request = self.options.retry.run(|| {
                self.cluster
                    .delete(&resolved, ns, &manifest.id.name, uid.as_deref(), dry_run)
            });
            let sent = TaskTime::add(server, request).await;
            match sent {
                Ok(DeleteOutcome::Deleted) => return Ok(Action::Deleted),
                Ok(DeleteOutcome::Pending { finalizers, since }) => (since, finalizers),
                Err((e, _)) if e.code() == Some(404) => return Ok(Action::AlreadyAbsent),
                Err((e, _)) if e.code() == Some(409) => return Err(ManifestError::Replaced),
                Err((e, n)) => return Err(ManifestError::from_request("delete", e, n)),
            }
        };
        let pending = PendingDeletion {
            id: manifest.id.clone(),
            since,
            finalizers,
        };
        // Before any wait: whoever watches deletions hears of this one first.
        if let Some(hook) = &self.options.on_deletion_requested
            && !self.options.dry_run
        {
            (hook.0)(pending.clone()).await;
        }
        if strategy == Strategy::Synchronous && !self.options.dry_run {
            let wait = self.wait_gone(&resolved, manifest, uid);
            return TaskTime::add(&mut result.time.deletion, wait).await;
        }
        result.pending = Some(Box::new(pending));
        Ok(Action::DeletionInProgress)
    }

    /// Watches the object until it is gone (or replaced by a new one with another uid) or
    /// the deletion timeout passes.
    async fn wait_gone(
        &self,
        resolved: &Resolved,
        manifest: &Manifest,
        uid: Option<String>,
    ) -> Result<Action, ManifestError> {
        let timeout = self.options.deletion_timeout;
        let api = self.cluster.api(resolved, manifest.id.namespace.as_deref());
        let gone = move |obj: Option<&DynamicObject>| {
            obj.is_none_or(|o| uid.is_some() && o.metadata.uid != uid)
        };
        match wait::until(&api, &manifest.id.name, gone, timeout).await {
            Ok(_) => Ok(Action::Deleted),
            Err(_) => Err(ManifestError::DeletionTimeout {
                waited: timeout,
                finalizers: match self.get(resolved, manifest).await? {
                    Some(obj) => obj.finalizers().to_vec(),
                    None => return Ok(Action::Deleted),
                },
            }),
        }
    }
}

/// The body server-side apply sends for `manifest` (its typed round trip, marked as cvo's)
/// and whether it went through a built-in type; each field the round trip dropped is a
/// warning in `result`.
fn body_of(
    manifest: &Manifest,
    result: &mut ManifestResult,
) -> Result<(Value, bool), ManifestError> {
    let rt = typed::round_trip(&manifest.api_version, &manifest.id.kind, &manifest.object)?;
    for path in &rt.dropped {
        result.warnings.push(format!(
            "field {path} is not part of {} {} and was dropped",
            manifest.api_version, manifest.id.kind
        ));
    }
    let mut body = rt.object;
    super::body::mark(&mut body);
    Ok((body, rt.typed))
}

/// Whether the `live` object needs no write: a create-only manifest never does once its
/// object exists; otherwise `body` must make no difference to it.
fn up_to_date(
    manifest: &Manifest,
    live: &DynamicObject,
    body: &Value,
    stored: super::body::Stored,
) -> bool {
    if manifest.create_only {
        return true;
    }
    let difference = super::body::difference(live, body, stored);
    if let Some(path) = &difference {
        tracing::debug!(manifest = %manifest.id, %path, "not up to date: applying");
    }
    difference.is_none()
}

/// A dry run's update: the field changes between the live object and the server's answer
/// (a Secret's values masked) go into `result`; `Updated` when there are any.
fn dry_run_changes(
    manifest: &Manifest,
    before: &DynamicObject,
    after: &DynamicObject,
    result: &mut ManifestResult,
) -> Action {
    let (mut old, mut new) = (comparable(before), comparable(after));
    if secrets::is_secret(&manifest.api_version, &manifest.id.kind) {
        secrets::mask_pair(&mut old, &mut new);
    }
    result.changes = diff(&old, &new);
    if result.changes.is_empty() {
        Action::Unchanged
    } else {
        Action::Updated
    }
}

/// Whether our apply changed the object between `before` (as the pass read it) and `after`
/// (the apply's answer). An unchanged resourceVersion means nothing was written. A changed one
/// may also come from someone else writing in between (a controller updating status or its
/// own annotations right after a create); the write was ours only if our managed-fields entry
/// moved or a value we send differs between the two.
fn applied_a_change(before: &DynamicObject, after: &DynamicObject, body: &Value) -> bool {
    if before.resource_version() == after.resource_version() {
        return false;
    }
    let ours = |o: &DynamicObject| {
        o.managed_fields()
            .iter()
            .find(|e| {
                e.manager.as_deref() == Some(crate::cluster::FIELD_MANAGER)
                    && e.operation.as_deref() == Some("Apply")
            })
            .map(|e| (e.fields_v1.clone().map(|f| f.0), e.time.clone()))
    };
    if ours(before) != ours(after) {
        return true;
    }
    // Type and bookkeeping left out: a real server's LIST items carry no apiVersion/kind.
    sent_values_differ(
        body,
        &comparable(before),
        &comparable(after),
        &mut String::new(),
    )
}

/// True when a leaf of `body` (an apply body) has different values in `b` and `a`.
fn sent_values_differ(body: &Value, b: &Value, a: &Value, path: &mut String) -> bool {
    match body {
        Value::Object(map) => map.iter().any(|(key, value)| {
            let len = path.len();
            path.push('/');
            path.push_str(&key.replace('~', "~0").replace('/', "~1"));
            let differs = sent_values_differ(value, b, a, path);
            path.truncate(len);
            differs
        }),
        _ => b.pointer(path) != a.pointer(path),
    }
}

/// The parts of an object a plan compares: everything but server bookkeeping and the type
/// (a real server's LIST items carry no apiVersion/kind).
fn comparable(obj: &DynamicObject) -> Value {
    let mut value = serde_json::to_value(obj).unwrap_or(Value::Null);
    if let Some(top) = value.as_object_mut() {
        top.remove("apiVersion");
        top.remove("kind");
    }
    if let Some(meta) = value.get_mut("metadata").and_then(Value::as_object_mut) {
        for key in [
            "managedFields",
            "resourceVersion",
            "generation",
            "creationTimestamp",
            "uid",
        ] {
            meta.remove(key);
        }
    }
    value
}

/// Field-level differences between two JSON values, as JSON pointers sorted by field:
/// where `json_patch::diff` adds, removes or replaces something. A list is one field, shown
/// whole before and after (a patch's indices shift as elements are removed, so they would
/// name the wrong elements of the list as it was).
pub fn diff(before: &Value, after: &Value) -> Vec<FieldChange> {
    let fields: std::collections::BTreeSet<Vec<String>> = json_patch::diff(before, after)
        .iter()
        .map(|op| field_of(op.path(), before, after))
        .collect();
    fields
        .into_iter()
        .map(|tokens| {
            let path: String = tokens.iter().map(|t| format!("/{t}")).collect();
            FieldChange {
                before: before.pointer(&path).cloned(),
                after: after.pointer(&path).cloned(),
                path: if path.is_empty() { "/".into() } else { path },
            }
        })
        .collect()
}

/// The (escaped) tokens of `path` up to the first list, on either side.
fn field_of(path: &json_patch::jsonptr::Pointer, before: &Value, after: &Value) -> Vec<String> {
    let (mut b, mut a) = (Some(before), Some(after));
    let mut out = Vec::new();
    for token in path.tokens() {
        if b.is_some_and(Value::is_array) || a.is_some_and(Value::is_array) {
            break;
        }
        let key = token.decoded();
        b = b.and_then(|v| v.get(key.as_ref()));
        a = a.and_then(|v| v.get(key.as_ref()));
        out.push(token.encoded().to_owned());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn diff_lists_changed_added_and_removed_leaves() {
        let before = json!({"a": 1, "b": {"c": "x", "d": [1]}, "gone": true});
        let after = json!({"a": 1, "b": {"c": "y", "d": [1, 2]}, "new": 2});
        let paths: Vec<_> = diff(&before, &after).into_iter().map(|c| c.path).collect();
        assert_eq!(paths, ["/b/c", "/b/d", "/gone", "/new"]);
        assert!(diff(&before, &before).is_empty());
    }

    #[test]
    fn a_changed_list_shows_whole_and_keys_stay_escaped() {
        let before = json!({"l": [1, 2, 3], "m": {"a/b": "x", "t~": 1}, "kept": [1]});
        let after = json!({"l": [1], "m": {"a/b": "y"}, "kept": [1]});
        let changes = diff(&before, &after);
        assert_eq!(
            changes,
            [
                FieldChange {
                    path: "/l".into(),
                    before: Some(json!([1, 2, 3])),
                    after: Some(json!([1])),
                },
                FieldChange {
                    path: "/m/a~1b".into(),
                    before: Some(json!("x")),
                    after: Some(json!("y")),
                },
                FieldChange {
                    path: "/m/t~0".into(),
                    before: Some(json!(1)),
                    after: None,
                },
            ]
        );
        // A whole document of another type: the root.
        let root = diff(&json!(1), &json!("1"));
        assert_eq!(root.len(), 1);
        assert_eq!(root[0].path, "/");
        // A list of objects is one field too.
        let before = json!({"spec": {"containers": [{"name": "a", "image": "x:1"}]}});
        let after = json!({"spec": {"containers": [{"name": "a", "image": "x:2"}]}});
        let changes = diff(&before, &after);
        assert_eq!(changes.len(), 1);
        assert_eq!(changes[0].path, "/spec/containers");
        assert_eq!(changes[0].after, Some(after["spec"]["containers"].clone()));
    }

    #[test]
    fn secret_values_stay_masked_in_a_diff() {
        let mut before = json!({"data": {"pw": "b2xk", "same": "c2FtZQ=="}});
        let mut after = json!({"data": {"pw": "bmV3", "same": "c2FtZQ==", "added": "eA=="}});
        super::super::secrets::mask_pair(&mut before, &mut after);
        let changes = diff(&before, &after);
        let text = serde_json::to_string(&changes).unwrap();
        for plain in ["b2xk", "bmV3", "c2FtZQ==", "eA=="] {
            assert!(!text.contains(plain), "{text}");
        }
        let paths: Vec<_> = changes.iter().map(|c| c.path.as_str()).collect();
        assert_eq!(paths, ["/data/added", "/data/pw"]);
    }

    fn object(value: Value) -> DynamicObject {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn a_write_by_someone_else_is_not_our_update() {
        let ours = json!([{"manager": "cvo", "operation": "Apply", "time": "2026-01-01T00:00:00Z",
            "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:a": {}}}}]);
        let before = object(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "resourceVersion": "1", "managedFields": ours}, "data": {"a": "b"}}));
        let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "b"}});
        // A controller annotated the object in between: the resourceVersion moved, not by us.
        let mut after = before.clone();
        after.metadata.resource_version = Some("2".into());
        after.metadata.annotations = Some([("x".to_owned(), "y".to_owned())].into());
        assert!(!applied_a_change(&before, &after, &body));
        // Our value changed within the same second (same managed-fields entry): ours.
        let mut changed = after.clone();
        changed.data["data"]["a"] = json!("c");
        assert!(applied_a_change(&before, &changed, &body));
        // A LIST item without apiVersion/kind is no difference.
        let mut listed = before.clone();
        listed.types = None;
        assert!(!applied_a_change(&listed, &after, &body));
        assert!(!applied_a_change(&before, &before, &body));
    }
}
