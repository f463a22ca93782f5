//! The apply engine: make the cluster match a release, one manifest at a time, walking the
//! task graph with bounded parallelism.
//!
//! - [`task`]: one manifest — create/update with server-side apply, create-only, delete with
//!   `propagationPolicy: Background`, finalization strategies;
//! - [`pass`]: one pass over the release's task graph, collecting a [`ManifestResult`] per
//!   manifest;
//! - [`body`]: the apply body's marks (managed label, digest) and the up-to-date check that
//!   skips a PATCH which would change nothing;
//! - [`deletions`]: what the cluster says now about a delete manifest's object;
//! - [`secrets`]: Secret values masked in plans and left out of digests;
//! - [`error`]: why a manifest failed.
//!
//! After its writes, each manifest's object is judged by [`crate::health`] (and waited for,
//! within its node's health deadline): a node is done when what it applied is healthy.
//!
//! Deletion tracking has no memory of its own: every pass reads each delete manifest's
//! object back from the cluster (absent, present, or carrying a deletionTimestamp), so a
//! restarted process reports exactly what the cluster shows.

pub mod body;
pub mod deletions;
pub mod error;
pub mod pass;
pub use crate::cluster::retry;
pub mod secrets;
pub mod snapshot;
pub mod task;

use std::fmt;
use std::time::Duration;

use serde::Serialize;

use crate::release::ObjectId;
pub use error::ManifestError;
pub use pass::{
    PassReport, PassTimeline, Summary, TaskRun, flattened_graph, run_level_graph, run_pass,
    task_inputs,
};
pub use retry::RetryPolicy;
pub use task::Applier;

/// Label `cvo.io/managed: "true"`, put on every object `cvo` creates or updates.
pub const MANAGED_LABEL: &str = "cvo.io/managed";

/// Per-manifest annotation choosing the finalization strategy of a delete manifest:
/// `synchronous` or `non-blocking` (overrides `--deletion-strategy`).
pub const STRATEGY_ANNOTATION: &str = "cvo.io/deletion-strategy";

/// How a delete waits for finalizers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Strategy {
    /// Send the DELETE and move on; later passes read progress back from the cluster.
    #[default]
    NonBlocking,
    /// Wait until the object is gone; fail the node (and block its dependents) after the
    /// deletion timeout.
    Synchronous,
}

impl Strategy {
    pub fn parse(value: &str) -> Option<Self> {
        match value {
            "synchronous" => Some(Strategy::Synchronous),
            "non-blocking" => Some(Strategy::NonBlocking),
            _ => None,
        }
    }
}

/// Knobs of the engine.
#[derive(Clone, Debug)]
pub struct Options {
    pub strategy: Strategy,
    /// How long a synchronous deletion may take.
    pub deletion_timeout: Duration,
    /// How long to wait for a CRD of the release to become Established.
    pub crd_timeout: Duration,
    pub retry: RetryPolicy,
    /// Server-side dry-run (`cvo plan`): compute what would happen, write nothing.
    pub dry_run: bool,
    /// What a node waits for after its writes ([`crate::health`]).
    pub health: crate::health::Options,
    /// Read existing objects with one LIST per (kind, namespace) per pass
    /// ([`snapshot`]); off, each manifest GETs its own object — cheaper for a task run on its
    /// own (the operator's drift repairs).
    pub list_objects: bool,
    /// Objects left alone entirely — no apply, no delete, no health check — because
    /// ClusterVersion `spec.overrides` marks them `unmanaged` ([`Action::Unmanaged`]).
    pub unmanaged: std::collections::BTreeSet<ObjectId>,
    /// Manifests (indices into the release) left out of this pass, with why: the cluster does
    /// not enable their capabilities ([`Action::Excluded`]). Nothing is applied, deleted or
    /// checked for them; their objects are never deleted for it.
    pub excluded: std::collections::BTreeMap<usize, String>,
    /// Told of each deletion this engine requested ([`DeletionRequested`]); never in a dry
    /// run.
    pub on_deletion_requested: Option<DeletionRequested>,
}

/// A delete manifest's deletion was requested — the DELETE accepted, or its object found
/// already terminating — and its task is about to wait on something (the synchronous
/// strategy's wait, its node's health gate, the next run level). The task awaits the future
/// this returns before it goes on, so whatever it records is done before any wait; it cannot
/// fail the manifest. `sync` closes ClusterVersion's `Upgradeable` gate with it (the engine
/// itself writes no status: docs/apply.md, "Conditions and status").
#[derive(Clone)]
pub struct DeletionRequested(pub std::sync::Arc<DeletionRequestedFn>);

/// The callback of [`DeletionRequested`].
pub type DeletionRequestedFn =
    dyn Fn(PendingDeletion) -> futures::future::BoxFuture<'static, ()> + Send + Sync;

impl fmt::Debug for DeletionRequested {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("DeletionRequested")
    }
}

impl Default for Options {
    fn default() -> Self {
        Options {
            strategy: Strategy::NonBlocking,
            deletion_timeout: Duration::from_secs(600),
            crd_timeout: Duration::from_secs(60),
            retry: RetryPolicy::default(),
            dry_run: false,
            health: crate::health::Options::default(),
            list_objects: true,
            unmanaged: Default::default(),
            excluded: Default::default(),
            on_deletion_requested: None,
        }
    }
}

/// What happened to one manifest (the `action` of the JSON report).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Action {
    Created,
    Updated,
    Unchanged,
    Deleted,
    DeletionInProgress,
    AlreadyAbsent,
    /// Left alone: a ClusterVersion override marks the object unmanaged.
    Unmanaged,
    /// Left out of this cluster's release: a capability it needs is not enabled (the reason
    /// says which). Its object is neither applied nor deleted.
    Excluded,
    /// Not attempted because something it depends on failed.
    Skipped,
    Failed,
}

impl Action {
    pub const ALL: [Action; 10] = [
        Action::Created,
        Action::Updated,
        Action::Unchanged,
        Action::Deleted,
        Action::DeletionInProgress,
        Action::AlreadyAbsent,
        Action::Unmanaged,
        Action::Excluded,
        Action::Skipped,
        Action::Failed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Action::Created => "created",
            Action::Updated => "updated",
            Action::Unchanged => "unchanged",
            Action::Deleted => "deleted",
            Action::DeletionInProgress => "deletion-in-progress",
            Action::AlreadyAbsent => "already-absent",
            Action::Unmanaged => "unmanaged",
            Action::Excluded => "excluded",
            Action::Skipped => "skipped",
            Action::Failed => "failed",
        }
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A deletion the cluster has not finished: the object still exists with a
/// deletionTimestamp.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PendingDeletion {
    pub id: ObjectId,
    /// When the deletion was requested (the object's deletionTimestamp).
    pub since: Option<jiff::Timestamp>,
    pub finalizers: Vec<String>,
}

/// One changed field of a planned update (`cvo plan`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FieldChange {
    /// JSON pointer of the field.
    pub path: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub before: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after: Option<serde_json::Value>,
}

/// The outcome of one manifest.
#[derive(Clone, Debug, PartialEq)]
pub struct ManifestResult {
    /// Index into `release.manifests`.
    pub index: usize,
    pub action: Action,
    /// Why it failed (or, for `skipped` and `excluded`, why it did not run).
    pub error: Option<String>,
    /// A failure that trying again cannot fix ([`ManifestError::is_permanent`]).
    pub permanent: bool,
    /// The HTTP status code the server refused it with ([`ManifestError::Rejected`]): what
    /// tells a manifest the server rejects from one the identity may not write (403).
    pub rejected: Option<u16>,
    /// Non-fatal findings (dropped fields, stale delete manifests).
    pub warnings: Vec<String>,
    /// Set when the object is being deleted but still exists (boxed, as `health`: rare, and
    /// a pass holds one result per manifest).
    pub pending: Option<Box<PendingDeletion>>,
    /// Field changes of a planned update (dry-run only).
    pub changes: Vec<FieldChange>,
    /// What the health check found: why it failed (with `action: failed`), or what it
    /// reported without failing (a degraded operator during an install).
    pub health: Option<Box<crate::health::Finding>>,
    /// The object's resourceVersion as this task last saw it (after its write, or as found
    /// up to date): what the operator compares watch events with, to tell its own writes from
    /// someone else's. `None` for deletions, failures and dry runs.
    pub resource_version: Option<String>,
    /// Where the task's time went (`--timings`); zero for a task that did not run.
    pub time: TaskTime,
}

/// Where one task's time went, by what it waited on (`--timings`, docs/performance.md). The
/// rest of its wall time is cvo's own work (building bodies, comparing) and scheduling.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TaskTime {
    /// Waiting on the API server's answers: discovery, reads, writes, deletes (retries and
    /// their backoff included), a CRD of the release becoming established.
    pub server: std::time::Duration,
    /// Waiting for the object to be healthy ([`crate::health`]).
    pub health: std::time::Duration,
    /// Waiting for a deletion to finish (synchronous finalization).
    pub deletion: std::time::Duration,
}

impl TaskTime {
    /// Adds the time `work` takes to `into`.
    pub(crate) async fn add<T>(
        into: &mut std::time::Duration,
        work: impl std::future::Future<Output = T>,
    ) -> T {
        let started = tokio::time::Instant::now();
        let out = work.await;
        *into += started.elapsed();
        out
    }

    /// Time spent waiting on something outside cvo: the server, health, deletions.
    pub fn waited(&self) -> std::time::Duration {
        self.server + self.health + self.deletion
    }
}

impl ManifestResult {
    /// Final for an install round: done, or failed for good. Other failures and manifests
    /// not reached are tried again.
    pub fn is_final(&self) -> bool {
        !matches!(self.action, Action::Failed | Action::Skipped) || self.permanent
    }

    pub fn new(index: usize, action: Action) -> Self {
        ManifestResult {
            index,
            action,
            error: None,
            permanent: false,
            rejected: None,
            warnings: Vec::new(),
            pending: None,
            changes: Vec::new(),
            health: None,
            resource_version: None,
            time: TaskTime::default(),
        }
    }
}
