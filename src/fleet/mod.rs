//! Fleets on Open Cluster Management (OCM): one release rolled out to many clusters in
//! waves, each wave gated on what every cluster's own ClusterVersion says.
//!
//! cvo grows no multi-cluster controller, queue or agent. OCM distributes: a Placement's
//! decision groups are the waves, a ManifestWorkReplicaSet rolls one ManifestWork per cluster
//! out group by group (judged by CEL rules over the cluster's ClusterVersion status), and the
//! work agent on each cluster applies it and reports status feedback. Each cluster's own
//! `cvo operator` does the update (it pulls the release by digest and verifies it, as for a
//! single cluster). This module writes cvo's sets on the hub and reads the fleet back
//! (docs/fleet.md):
//!
//! - [`ocm`]: the OCM kinds and labels cvo names;
//! - [`feedback`]: what a cluster's ClusterVersion reports through ManifestWork feedback;
//! - [`work`]: the sets cvo writes (observe, rollout, install);
//! - [`status`]: the fleet as the hub sees it — waves, clusters, what holds a rollout;
//! - [`rollout`]: what a rollout is refused for, before anything is written;
//! - [`preflight`]: every cluster asked for the preflight of a release, and what each answered;
//! - [`install`]: the operator's objects for every cluster;
//! - [`control`]: pause, resume and abort of a rollout, retry of one cluster.

pub mod control;
pub mod feedback;
pub mod hub;
pub mod install;
pub mod ocm;
pub mod preflight;
pub mod rollout;
pub mod status;
pub mod work;

use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::Value;

use crate::cluster::NamespacedName;
use crate::cluster::retry::{RequestError, RetryPolicy};

/// What writing a set did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Written {
    Created,
    Configured,
    Unchanged,
}

impl std::fmt::Display for Written {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Written::Created => "created",
            Written::Configured => "configured",
            Written::Unchanged => "unchanged",
        })
    }
}

/// The Placements cvo's sets on the hub name (one LIST of the sets labelled
/// [`work::MANAGED_BY`]), sorted.
pub async fn placements(client: &kube::Client) -> Result<Vec<NamespacedName>, RequestError> {
    let api = Api::<DynamicObject>::all_with(client.clone(), &ocm::manifest_work_replica_set());
    let lp = kube::api::ListParams::default().labels(&format!(
        "{}={}",
        work::MANAGED_BY.0,
        work::MANAGED_BY.1
    ));
    let sets = crate::cluster::list::all(&api, &lp, &RetryPolicy::default()).await?;
    let mut out: Vec<NamespacedName> = sets
        .iter()
        .filter_map(|s| {
            Some(NamespacedName {
                namespace: s.metadata.namespace.clone()?,
                // The first ref that is a Placement (a paused set names cvo's stop first).
                name: ref_names(&s.data)
                    .into_iter()
                    .find(|n| !control::is_stop(n))?
                    .to_owned(),
            })
        })
        .collect();
    out.sort();
    out.dedup();
    Ok(out)
}

/// The ManifestWorkReplicaSets of `namespace` on the hub.
pub(crate) fn sets(client: &kube::Client, namespace: &str) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), namespace, &ocm::manifest_work_replica_set())
}

/// `ops` after a `test` that the object's resourceVersion is still `resource_version`.
fn tested(resource_version: &str, ops: Vec<Value>) -> Vec<Value> {
    let mut all = vec![
        serde_json::json!({"op": "test", "path": "/metadata/resourceVersion", "value": resource_version}),
    ];
    all.extend(ops);
    all
}

/// JSON-patches `name` with `ops`, first testing that its resourceVersion is still
/// `resource_version` (field manager [`work::FIELD_MANAGER`]): `Ok(false)` when the object
/// changed since it was read (the test failed), and nothing was written.
pub(crate) async fn patch_unchanged(
    api: &Api<DynamicObject>,
    name: &str,
    resource_version: &str,
    ops: Vec<Value>,
) -> Result<bool, RequestError> {
    let patch: json_patch::Patch =
        serde_json::from_value(Value::Array(tested(resource_version, ops)))
            .map_err(|e| RequestError::Kube(kube::Error::SerdeError(e)))?;
    let params = PatchParams {
        field_manager: Some(work::FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    };
    match api.patch(name, &params, &Patch::Json::<()>(patch)).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(s)) if s.code == 422 || s.code == 409 => Ok(false),
        Err(e) => Err(RequestError::Kube(e)),
    }
}

/// The names in a set's `spec.placementRefs` (`set` whole), in order: cvo's stop, if any,
/// first ([`control`]).
pub(crate) fn ref_names(set: &Value) -> Vec<&str> {
    set["spec"]["placementRefs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["name"].as_str())
        .collect()
}

/// Server-side applies the ManifestWorkReplicaSet `set` on the hub (field manager
/// [`work::FIELD_MANAGER`]): the same set applied again changes nothing (`Unchanged`: the
/// same generation, labels and annotations as before).
pub async fn write(client: &kube::Client, set: &Value) -> Result<Written, RequestError> {
    let namespace = set["metadata"]["namespace"].as_str().unwrap_or_default();
    let name = set["metadata"]["name"].as_str().unwrap_or_default();
    let api = sets(client, namespace);
    let retry = RetryPolicy::default();
    let before = retry.run(|| api.get_opt(name)).await.map_err(|(e, _)| e)?;
    let params = PatchParams::apply(work::FIELD_MANAGER).force();
    let patch = Patch::Apply(set);
    let after = retry
        .run(|| api.patch(name, &params, &patch))
        .await
        .map_err(|(e, _)| e)?;
    // Not the resourceVersion: OCM's controller writes the set's status and finalizer at any
    // time. The spec (its generation), labels and annotations are what cvo writes.
    let written = |o: &DynamicObject| {
        (
            o.metadata.generation,
            o.metadata.labels.clone(),
            o.metadata.annotations.clone(),
        )
    };
    Ok(match before {
        None => Written::Created,
        Some(b) if written(&b) == written(&after) => Written::Unchanged,
        Some(_) => Written::Configured,
    })
}
