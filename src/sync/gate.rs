//! The `Upgradeable` gate closed while a pass runs: as soon as a delete manifest's deletion
//! is requested, and before its task waits on anything (the synchronous strategy, health
//! gates, the next run level), ClusterVersion says `Upgradeable=False` naming the objects
//! being deleted (the words of [`conditions::upgradeable`]) and, while an install or update
//! is in progress, `Progressing=True "Working towards …"`. A process killed at any moment after
//! the request leaves the gate closed; the end of the pass writes the final conditions.
//!
//! Only with a ClusterVersion to write and not in a dry run: an install whose release creates
//! ClusterVersion later has nothing to write to until then (docs/apply.md, "Conditions and
//! status"). A failed write is logged and does not fail the manifest; the status the pass
//! concludes with counts the deletion anyway, so it never reports `Upgradeable=True` for it.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::apply::{DeletionRequested, PendingDeletion, RetryPolicy};
use crate::cluster::Cluster;
use crate::status::clusterversion;
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
    /// The hook for [`crate::apply::Options::on_deletion_requested`].
    pub(super) fn hook(
        inputs: Inputs<'_>,
        retry: &RetryPolicy,
        stuck_after: Duration,
    ) -> DeletionRequested {
        let gate = Arc::new(Gate {
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
        });
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
        let names: Vec<String> = state
            .requested
            .iter()
            .map(conditions::object_name)
            .collect();
        if state.stored.as_ref().is_some_and(|c| {
            c.status == ConditionStatus::False && names.iter().all(|n| names_object(&c.message, n))
        }) {
            return;
        }
        let requested: Vec<&PendingDeletion> = state.requested.iter().collect();
        let upgradeable = upgradeable_with_overrides(
            conditions::upgradeable(&requested, &[], self.stuck_after, jiff::Timestamp::now()),
            &self.spec,
        );
        let mut written = vec![upgradeable.clone()];
        if self.in_progress {
            written.push(Condition::new(
                "Progressing",
                ConditionStatus::True,
                "",
                conditions::progress_message(
                    &self.version,
                    self.done.load(Ordering::Relaxed),
                    self.total,
                ),
            ));
        }
        let update = clusterversion::Update::Conditions {
            conditions: &written,
            observed: None,
        };
        match clusterversion::write_update(&self.cluster, &self.retry, update).await {
            Ok(_) => state.stored = Some(upgradeable),
            Err(e) => tracing::warn!(
                "could not mark ClusterVersion not upgradeable while {} is being deleted: {e}",
                names.join(", ")
            ),
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
