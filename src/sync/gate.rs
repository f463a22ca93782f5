//! The `Upgradeable` gate closed while a pass runs: as soon as a delete manifest's deletion
//! is requested, and before its task waits on anything (the synchronous strategy, health
//! gates, the next run level), ClusterVersion says `Upgradeable=False` naming the objects
//! being deleted (the words of [`conditions::upgradeable`]) and, while an install or update
//! is in progress, `Progressing=True "Working towards …"`. A process killed at any moment after
//! the request leaves the gate closed; the end of the pass writes the final conditions.
//!
//! The gate is also the pass's status writer: every heartbeat tick refreshes the Progressing
//! message through it (so that writes land in order), and writes a gate a deletion closed
//! while there was no ClusterVersion yet. Not in a dry run. ClusterVersion is found lazily: an
//! install whose release creates it gets the gate and the progress once it exists; while it
//! does not, nothing is written (fail closed: the gate counts as not written, and the next
//! write tries again). A failed write is logged and does not fail the manifest; the status the
//! pass concludes with counts the deletion anyway, so it never reports `Upgradeable=True` for
//! it.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::apply::{DeletionRequested, PendingDeletion, RetryPolicy};
use crate::cluster::Cluster;
use crate::status::clusterversion::{self, WriteOutcome};
use crate::status::conditions;
use crate::status::spec::{Spec, upgradeable_with_overrides};
use crate::status::{Condition, ConditionStatus};

/// What closing the gate needs; shared by every task of the sync through the hook.
pub(super) struct Gate {
    cluster: Cluster,
    retry: RetryPolicy,
    /// The release as status names it.
    version: String,
    /// Manifests in the release, and how many of them the pass has done.
    total: usize,
    done: Arc<AtomicUsize>,
    /// Progressing is written too (an install or update not yet completed).
    in_progress: bool,
    stuck_after: Duration,
    spec: Spec,
    /// Held across each write, so that writes land in order and the last names every object.
    state: tokio::sync::Mutex<State>,
}

struct State {
    /// The deletions requested so far in this sync.
    requested: Vec<PendingDeletion>,
    /// Upgradeable as ClusterVersion stores it (as read before the pass, then as written).
    stored: Option<Condition>,
}

/// The parts of the sync the gate needs.
pub(super) struct Inputs<'a> {
    pub cluster: &'a Cluster,
    pub version: &'a str,
    pub total: usize,
    pub done: Arc<AtomicUsize>,
    pub in_progress: bool,
    pub spec: &'a Spec,
    /// Upgradeable as ClusterVersion stores it before the pass.
    pub stored: Option<Condition>,
}

impl Gate {
    /// The gate, shared by the hook for [`crate::apply::Options::on_deletion_requested`]
    /// ([`Self::hook`]) and the pass's progress ticks ([`Self::tick`]).
    pub(super) fn new(inputs: Inputs<'_>, retry: &RetryPolicy, stuck_after: Duration) -> Arc<Gate> {
        Arc::new(Gate {
            cluster: inputs.cluster.clone(),
            retry: retry.clone(),
            version: inputs.version.to_owned(),
            total: inputs.total,
            done: inputs.done,
            in_progress: inputs.in_progress,
            stuck_after,
            spec: inputs.spec.clone(),
            state: tokio::sync::Mutex::new(State {
                requested: Vec::new(),
                stored: inputs.stored,
            }),
        })
    }

    /// The hook for [`crate::apply::Options::on_deletion_requested`].
    pub(super) fn hook(self: &Arc<Self>) -> DeletionRequested {
        let gate = self.clone();
        DeletionRequested(Arc::new(move |pending| {
            let gate = gate.clone();
            Box::pin(async move { gate.close(pending).await })
        }))
    }

    /// Writes `Upgradeable=False` naming every deletion requested so far (and Progressing),
    /// unless the stored gate is already closed for all of them.
    async fn close(&self, pending: PendingDeletion) {
        let mut state = self.state.lock().await;
        state.requested.retain(|p| p.id != pending.id);
        state.requested.push(pending);
        let progress = conditions::progress_message(
            &self.version,
            self.done.load(Ordering::Relaxed),
            self.total,
        );
        self.write(&mut state, progress).await;
    }

    /// A progress tick of the pass: while an install or update is in progress, Progressing
    /// with `message`; and the gate, when a deletion closed it but it is not stored yet (no
    /// ClusterVersion then, or a failed write). Nothing else is written.
    pub(super) async fn tick(&self, message: String) {
        let mut state = self.state.lock().await;
        self.write(&mut state, message).await;
    }

    /// Writes Progressing (`progress`, while in progress) and, unless already stored, the
    /// closed gate, in one write; skipped when there is nothing to write.
    async fn write(&self, state: &mut State, progress: String) {
        let names: Vec<String> = state
            .requested
            .iter()
            .map(conditions::object_name)
            .collect();
        let gate_stored = names.is_empty()
            || state.stored.as_ref().is_some_and(|c| {
                c.status == ConditionStatus::False
                    && names.iter().all(|n| names_object(&c.message, n))
            });
        let mut written = Vec::new();
        let mut upgradeable = None;
        if !gate_stored {
            let requested: Vec<&PendingDeletion> = state.requested.iter().collect();
            let closed = upgradeable_with_overrides(
                conditions::upgradeable(&requested, &[], self.stuck_after, jiff::Timestamp::now()),
                &self.spec,
            );
            written.push(closed.clone());
            upgradeable = Some(closed);
        }
        if self.in_progress {
            written.push(Condition::new(
                "Progressing",
                ConditionStatus::True,
                "",
                progress,
            ));
        }
        if written.is_empty() {
            return;
        }
        let update = clusterversion::Update::Conditions {
            conditions: &written,
            observed: None,
        };
        match clusterversion::write_update(&self.cluster, &self.retry, update).await {
            // No ClusterVersion (yet): nothing stored, the next write tries again.
            Ok(WriteOutcome::Absent) => {}
            Ok(_) => {
                if let Some(closed) = upgradeable {
                    state.stored = Some(closed);
                }
            }
            Err(e) if upgradeable.is_some() => tracing::warn!(
                "could not mark ClusterVersion not upgradeable while {} is being deleted: {e}",
                names.join(", ")
            ),
            Err(e) => {
                tracing::debug!(error = %e, "could not refresh the progress in ClusterVersion")
            }
        }
    }
}

/// `message` names `object` (`kind ns/name`) as a whole: after a space (or at the start), and
/// followed by the end, `,`, `;` or ` (` — so `ConfigMap ns/held` is not found in
/// `ConfigMap ns/held2`, nor `Map ns/a` in `ConfigMap ns/a`.
fn names_object(message: &str, object: &str) -> bool {
    message.match_indices(object).any(|(at, _)| {
        let rest = &message[at + object.len()..];
        let starts = at == 0 || message[..at].ends_with(' ');
        starts && (rest.is_empty() || rest.starts_with([',', ';']) || rest.starts_with(" ("))
    })
}

#[cfg(test)]
mod tests {
    use super::names_object;

    #[test]
    fn an_object_is_named_only_as_a_whole() {
        let message = "Deletion in progress: ConfigMap ns/held2, Widget w/legacy";
        assert!(names_object(message, "ConfigMap ns/held2"));
        assert!(names_object(message, "Widget w/legacy"));
        assert!(!names_object(message, "ConfigMap ns/held"));
        let stuck = "Deletion stuck for more than 10m: Widget w/legacy (finalizers: x); ConfigMap ns/a (finalizers: y)";
        assert!(names_object(stuck, "Widget w/legacy"));
        assert!(names_object(stuck, "ConfigMap ns/a"));
        assert!(!names_object(stuck, "ConfigMap ns/b"));
        assert!(!names_object(stuck, "Map ns/a"));
    }
}
