//! Pause, resume and abort of a rollout, and retry of one cluster, built from OCM's own
//! objects: OCM v1.3 has none of these verbs, and cvo runs no controller of its own.
//!
//! OCM's ManifestWorkReplicaSet controller goes through a set's `placementRefs` in order, and
//! stops at the first whose Placement it cannot find (condition `PlacementVerified=False`,
//! reason `PlacementDecisionNotFound`) before it creates, updates or deletes any ManifestWork
//! of the refs after it. It deletes works only of Placements the set no longer names, and the
//! rollout's own ref stays named. So:
//!
//! - **pause** puts a first ref to [`PAUSED`], a name no Placement can have (a colon is not
//!   allowed in an object's name, and OCM's CRD does not check the ref's name): no wave starts,
//!   no cluster's work is written or deleted, and the clusters already asked go on (their works
//!   and agents are untouched).
//! - **resume** removes that ref: OCM goes on where the waves are.
//! - **abort** puts [`ABORTED`] first instead: the same stop, for good (`resume` refuses it; a
//!   new `cvo fleet rollout` starts over).
//! - **retry CLUSTER** deletes the cluster's rollout ManifestWork. OCM makes a new one for it
//!   (its wave running or done, once no other cluster is progressing): the cluster is asked
//!   again, and its `progressDeadline` counts from then. Its ClusterVersion keeps the request
//!   (the works orphan what they applied), and its own operator retries a failing update at
//!   every pass.
//!
//! The state lives in the set itself (its first ref), where a restarted hub controller finds
//! it. Every change is a JSON patch that first tests the set's resourceVersion, so a change
//! made by someone else in between is never overwritten (the command reads and tries again).

use kube::api::{Api, DeleteParams, DynamicObject, ListParams};
use serde::Serialize;
use serde_json::{Value, json};

use super::ocm;
use super::work::Purpose;
use crate::cluster::retry::{RequestError, RetryPolicy};

/// The first placementRef of a paused rollout set.
pub const PAUSED: &str = "cvo-fleet:paused";
/// The first placementRef of an aborted rollout set.
pub const ABORTED: &str = "cvo-fleet:aborted";

/// Whether a rollout set's waves may go on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum State {
    #[default]
    Running,
    Paused,
    Aborted,
}

impl State {
    /// The state a set's `placementRefs` say.
    pub fn of_refs(refs: &[&str]) -> State {
        match refs.first().copied() {
            Some(PAUSED) => State::Paused,
            Some(ABORTED) => State::Aborted,
            _ => State::Running,
        }
    }

    /// The name of the first ref that makes this state, if any.
    fn marker(self) -> Option<&'static str> {
        match self {
            State::Running => None,
            State::Paused => Some(PAUSED),
            State::Aborted => Some(ABORTED),
        }
    }

    /// The placementRef that stops OCM's controller in this state (`None`: running).
    pub fn stop_ref(self) -> Option<Value> {
        self.marker().map(|name| json!({"name": name}))
    }
}

impl std::fmt::Display for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            State::Running => "running",
            State::Paused => "paused",
            State::Aborted => "aborted",
        })
    }
}

/// Puts the stop of `state` first in a rollout set's `placementRefs` (`set` as
/// [`super::work::Rollout::manifest`] makes it): a rollout written again while paused stays
/// paused (the refs are one atomic list, which a server-side apply replaces whole).
pub fn keep(set: &mut Value, state: State) {
    if let (Some(stop), Some(refs)) = (
        state.stop_ref(),
        set["spec"]["placementRefs"].as_array_mut(),
    ) {
        refs.insert(0, stop);
    }
}

/// Whether a name in `placementRefs` is one of cvo's stops rather than a Placement.
pub fn is_stop(name: &str) -> bool {
    name == PAUSED || name == ABORTED
}

/// What a control verb asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verb {
    Pause,
    Resume,
    Abort,
}

/// What a control verb did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Changed {
    pub before: State,
    pub after: State,
}

/// Why a control verb did not change the set.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    #[error("no rollout set {0} on the hub: nothing to control (`cvo fleet rollout` writes one)")]
    NoRollout(String),
    #[error(
        "the rollout {0} was aborted: it cannot be resumed; `cvo fleet rollout` starts a new one"
    )]
    Aborted(String),
    #[error("the rollout set {0} is not as cvo writes it: {1}")]
    Malformed(String, String),
    #[error("the rollout set {set} changed {tries} times while cvo changed it; try again")]
    Contended { set: String, tries: u32 },
    #[error("{what}: {error}")]
    Request {
        what: String,
        #[source]
        error: RequestError,
    },
}

/// How often a verb reads the set again when someone else changed it in between.
const TRIES: u32 = 5;

/// The patch that takes a set whose first ref says `from` to `to`; `None` when nothing is to
/// change. Written with [`super::patch_unchanged`], which tests the set's resourceVersion
/// first.
fn patch(from: State, to: State) -> Option<Vec<Value>> {
    if from == to {
        return None;
    }
    let op = match (from.stop_ref(), to.stop_ref()) {
        (None, Some(stop)) => json!({"op": "add", "path": "/spec/placementRefs/0", "value": stop}),
        (Some(_), None) => json!({"op": "remove", "path": "/spec/placementRefs/0"}),
        (Some(_), Some(stop)) => {
            json!({"op": "replace", "path": "/spec/placementRefs/0", "value": stop})
        }
        (None, None) => return None,
    };
    Some(vec![op])
}

/// The rollout set of Placement `namespace/placement`: its API, name and `NAMESPACE/NAME`.
fn rollout_set(
    client: &kube::Client,
    namespace: &str,
    placement: &str,
) -> (Api<DynamicObject>, String, String) {
    let name = Purpose::Rollout.name(placement);
    let set_name = format!("{namespace}/{name}");
    (super::sets(client, namespace), name, set_name)
}

/// Pauses, resumes or aborts the rollout of Placement `namespace/placement`.
///
/// # Errors
///
/// No rollout set; resuming an aborted one; a set that does not name its Placement; a request
/// that failed; a set that kept changing under the patch.
pub async fn control(
    client: &kube::Client,
    namespace: &str,
    placement: &str,
    verb: Verb,
) -> Result<Changed, ControlError> {
    let (api, name, set_name) = rollout_set(client, namespace, placement);
    let retry = RetryPolicy::default();
    let request = |what: &str, error| ControlError::Request {
        what: format!("{what} the rollout set {set_name}"),
        error,
    };
    for _ in 0..TRIES {
        let set = retry
            .run(|| api.get_opt(&name))
            .await
            .map_err(|(e, _)| request("reading", e))?
            .ok_or_else(|| ControlError::NoRollout(set_name.clone()))?;
        let names = super::ref_names(&set.data);
        if !names.contains(&placement) {
            return Err(ControlError::Malformed(
                set_name.clone(),
                format!("its placementRefs ({names:?}) do not name Placement {placement}"),
            ));
        }
        let before = State::of_refs(&names);
        let after = match (verb, before) {
            (Verb::Resume, State::Aborted) => return Err(ControlError::Aborted(set_name)),
            (Verb::Pause, State::Aborted) => State::Aborted,
            (Verb::Pause, _) => State::Paused,
            (Verb::Resume, _) => State::Running,
            (Verb::Abort, _) => State::Aborted,
        };
        let Some(ops) = patch(before, after) else {
            return Ok(Changed { before, after });
        };
        let resource_version = set.metadata.resource_version.clone().unwrap_or_default();
        // Not written when the set changed since it was read: read it again.
        if super::patch_unchanged(&api, &name, &resource_version, ops)
            .await
            .map_err(|e| request("patching", e))?
        {
            return Ok(Changed { before, after });
        }
    }
    Err(ControlError::Contended {
        set: set_name,
        tries: TRIES,
    })
}

/// Why a retry was not made.
#[derive(Debug, thiserror::Error)]
pub enum RetryError {
    #[error(transparent)]
    Control(#[from] ControlError),
    #[error(
        "the rollout {set} is {state}: OCM asks no cluster while it is (`cvo fleet resume` first)"
    )]
    Stopped { set: String, state: State },
    #[error(
        "cluster {cluster} has no ManifestWork of the rollout {set}: it was not asked yet (its wave has not started) or is no longer selected"
    )]
    NotAsked { cluster: String, set: String },
}

/// Asks `cluster` again: deletes its ManifestWork of the rollout of `namespace/placement`,
/// which OCM writes anew. Refused while the rollout is paused or aborted (OCM would not write
/// it again until resumed, and an aborted rollout asks nobody). Returns the deleted work's
/// name.
///
/// # Errors
///
/// No rollout set, a stopped one, no work for the cluster, or a request that failed.
pub async fn retry(
    client: &kube::Client,
    namespace: &str,
    placement: &str,
    cluster: &str,
) -> Result<String, RetryError> {
    let (sets, name, set_name) = rollout_set(client, namespace, placement);
    let retry = RetryPolicy::default();
    let set = retry
        .run(|| sets.get_opt(&name))
        .await
        .map_err(|(error, _)| ControlError::Request {
            what: format!("reading the rollout set {set_name}"),
            error,
        })?
        .ok_or_else(|| ControlError::NoRollout(set_name.clone()))?;
    let state = State::of_refs(&super::ref_names(&set.data));
    if state != State::Running {
        return Err(RetryError::Stopped {
            set: set_name,
            state,
        });
    }
    let label = ocm::replica_set_label_value(namespace, &name)
        .map_err(|e| ControlError::Malformed(set_name.clone(), e))?;
    let works =
        Api::<DynamicObject>::namespaced_with(client.clone(), cluster, &ocm::manifest_work());
    let lp = ListParams::default().labels(&format!("{}={label}", ocm::REPLICA_SET_LABEL));
    let listed = crate::cluster::list::all(&works, &lp, &retry)
        .await
        .map_err(|error| ControlError::Request {
            what: format!("listing cluster {cluster}'s ManifestWorks"),
            error,
        })?;
    let Some(work) = listed.first().and_then(|w| w.metadata.name.clone()) else {
        return Err(RetryError::NotAsked {
            cluster: cluster.to_owned(),
            set: set_name,
        });
    };
    let params = DeleteParams::default();
    retry
        .run(|| works.delete(&work, &params))
        .await
        .map_err(|(error, _)| ControlError::Request {
            what: format!("deleting ManifestWork {cluster}/{work}"),
            error,
        })?;
    Ok(format!("{cluster}/{work}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_ref_is_the_state() {
        let names = |n: &[&'static str]| n.to_vec();
        assert_eq!(State::of_refs(&names(&["waves"])), State::Running);
        assert_eq!(State::of_refs(&names(&[PAUSED, "waves"])), State::Paused);
        assert_eq!(State::of_refs(&names(&[ABORTED, "waves"])), State::Aborted);
        // A Placement can never be named so: object names have no colon.
        assert!(PAUSED.contains(':') && ABORTED.contains(':'));
    }

    #[test]
    fn each_change_tests_the_resource_version_first() {
        let tested = |from, to| super::super::tested("42", patch(from, to).unwrap());
        let ops = tested(State::Running, State::Paused);
        assert_eq!(ops[0]["op"], "test");
        assert_eq!(ops[0]["value"], "42");
        assert_eq!(ops[1]["op"], "add");
        assert_eq!(ops[1]["path"], "/spec/placementRefs/0");
        assert_eq!(ops[1]["value"]["name"], PAUSED);
        assert_eq!(tested(State::Paused, State::Running)[1]["op"], "remove");
        let abort = tested(State::Paused, State::Aborted);
        assert_eq!(abort[1]["op"], "replace");
        assert_eq!(abort[1]["value"]["name"], ABORTED);
        assert!(patch(State::Paused, State::Paused).is_none());
    }
}
