//! What an update enables implicitly, and from what that is judged (docs/capabilities.md,
//! "Implicit enablement on update"). The CVO enables a capability when an update moves an
//! object the cluster has into it, because it knows the release it leaves; a sync knows it
//!
//! - when it is at hand: [`SyncOptions::updating_from`] (`cvo apply --updating-from`, the
//!   release the operator applied last) — the CVO's rule, [`capability::implicitly_enabled`];
//! - **(a)** when ClusterVersion's newest history entry names another release by an image that
//!   [`SyncOptions::previous_release`] reads (the CLI's and the operator's reader: an OCI
//!   release artifact by digest, from the blob cache or the registry, its signature checked
//!   with the keys the release itself is checked with) — the same rule;
//! - **(b)** otherwise, or when that release cannot be read or verified, from the cluster
//!   itself: an object of the release in a capability the cluster does not enable, that
//!   exists and was applied by `cvo` (an `Apply` entry of its field manager in
//!   `managedFields`: an earlier release applied it), enables that capability
//!   ([`capability::implicitly_enabled_by_cluster`]).
//!
//! The condition `ImplicitlyEnabledCapabilities` says which ([`ByUpdate`]). Nothing is judged
//! when every capability the release's manifests need is enabled. Fails closed: an object that
//! cannot be read while judging from the cluster ends the sync before anything is applied
//! ([`CapabilityError`]) — neither leaving the object unmanaged on a guess nor enabling a
//! capability (which is never disabled again) on one; a release that cannot be read is never
//! taken as "no object moved": the cluster is asked instead, and a warning says why.

use std::collections::{BTreeSet, HashSet};

use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream::FuturesUnordered;
use kube::api::DynamicObject;

use super::SyncOptions;
use crate::cluster::Cluster;
use crate::cluster::discovery::DiscoveryError;
use crate::cluster::retry::RetryPolicy;
use crate::release::capability::{self, ByUpdate, Capabilities, Gates, Judged};
use crate::release::feature_gate::EnabledGates;
use crate::release::{Manifest, ObjectId, Release};
use crate::status::clusterversion;

/// Reads the release an image names, for judgement (a): the command line's and the
/// operator's (through `oci`, which a sync never names).
pub trait PreviousRelease: Send + Sync + std::fmt::Debug {
    /// What the release `image` names applies ([`Gates::of`] of it, read as the release the
    /// sync applies is read). `None`: `image` is not a release this reader reads (not an OCI
    /// release artifact pinned by digest); `Some(Err(why))`: it is one, but it could not be
    /// read, loaded or verified.
    fn read<'a>(&'a self, image: &'a str) -> BoxFuture<'a, Option<Result<Gates, String>>>;
}

/// Objects read at once while judging from the cluster.
const READS_AT_ONCE: usize = 8;

/// What the update enables implicitly, how that was judged, and what the user should know.
#[derive(Debug, Default)]
pub(super) struct Judgement {
    /// `None`: nothing needed judging (every capability the release needs is enabled).
    pub by_update: Option<ByUpdate>,
    pub warnings: Vec<String>,
}

/// An object of the release could not be read while judging from the cluster: whether `cvo`
/// applied it cannot be told, and nothing was applied.
#[derive(Debug, thiserror::Error)]
#[error(
    "cannot tell which capabilities this update enables implicitly: {object} could not be read ({why}); nothing was applied. Try again once it can be read, or name the release the cluster is at (cvo apply --updating-from DIR)"
)]
pub struct CapabilityError {
    pub object: ObjectId,
    pub why: String,
}

/// Judges what updating the cluster (its ClusterVersion `cv`, capabilities `caps`, feature
/// gates `gates`) to `release` (`version` as status names it) enables implicitly (see the
/// module doc).
pub(super) async fn judge(
    cluster: &Cluster,
    release: &Release,
    options: &SyncOptions,
    cv: Option<&DynamicObject>,
    caps: &Capabilities,
    gates: &EnabledGates,
    version: &str,
) -> Result<Judgement, CapabilityError> {
    if capability::awaiting(release, caps).next().is_none() {
        return Ok(Judgement::default());
    }
    if let Some(from) = &options.updating_from {
        return Ok(from_release(release, from, caps, gates));
    }
    let mut warnings = Vec::new();
    let mut unread = None;
    let image =
        cv.and_then(|cv| clusterversion::previous_image(cv, version, release.image.as_deref()));
    if let (Some(reader), Some(image)) = (&options.previous_release, image) {
        match reader.read(&image).await {
            Some(Ok(from)) => return Ok(from_release(release, &from, caps, gates)),
            Some(Err(why)) => {
                warnings.push(format!(
                    "the release the cluster is at ({image}) could not be read: {why}; what this update enables implicitly was judged from the cluster instead (objects cvo applied)"
                ));
                unread = Some(format!("{image}: {why}"));
            }
            None => {}
        }
    }
    let applied = applied_objects(cluster, &options.apply.retry, release, caps).await?;
    let (enabled, objects) = capability::implicitly_enabled_by_cluster(release, caps, &applied);
    let judged = Judged::Cluster {
        objects: objects.into_iter().cloned().collect(),
        unread,
    };
    Ok(Judgement {
        by_update: Some(ByUpdate { enabled, judged }),
        warnings,
    })
}

/// The CVO's rule, from the release the cluster is at (`from`): what it adds to what `caps`
/// held implicitly.
fn from_release(
    release: &Release,
    from: &Gates,
    caps: &Capabilities,
    gates: &EnabledGates,
) -> Judgement {
    let all = capability::implicitly_enabled(release, from, caps, Some(gates));
    let enabled = all.difference(&caps.implicitly_enabled).cloned().collect();
    Judgement {
        by_update: Some(ByUpdate {
            enabled,
            judged: Judged::Release(from.release().to_owned()),
        }),
        warnings: Vec::new(),
    }
}

/// The objects of the manifests waiting for a capability ([`capability::awaiting`]) that
/// exist and were applied by `cvo`, read `READS_AT_ONCE` at a time.
async fn applied_objects(
    cluster: &Cluster,
    retry: &RetryPolicy,
    release: &Release,
    caps: &Capabilities,
) -> Result<HashSet<ObjectId>, CapabilityError> {
    let mut seen = BTreeSet::new();
    let waiting: Vec<&Manifest> = capability::awaiting(release, caps)
        .filter(|m| seen.insert(&m.id))
        .collect();
    let mut pending = waiting.into_iter();
    let mut reads = FuturesUnordered::new();
    let mut applied = HashSet::new();
    loop {
        while reads.len() < READS_AT_ONCE
            && let Some(m) = pending.next()
        {
            reads.push(read(cluster, retry, m));
        }
        let Some((m, answer)) = reads.next().await else {
            break;
        };
        match answer {
            Ok(true) => {
                applied.insert(m.id.clone());
            }
            Ok(false) => {}
            Err(why) => {
                return Err(CapabilityError {
                    object: m.id.clone(),
                    why,
                });
            }
        }
    }
    Ok(applied)
}

/// `m`, with whether its object exists and `cvo` applied it.
async fn read<'m>(
    cluster: &Cluster,
    retry: &RetryPolicy,
    m: &'m Manifest,
) -> (&'m Manifest, Result<bool, String>) {
    (m, applied_by_cvo(cluster, retry, m).await)
}

/// Whether the object of `m` exists and `cvo` applied it; a kind the server does not serve
/// has no objects. Any other failure (after `retry`) is an error, in words.
async fn applied_by_cvo(
    cluster: &Cluster,
    retry: &RetryPolicy,
    m: &Manifest,
) -> Result<bool, String> {
    let resolved = match cluster
        .discovery()
        .resolve(&m.api_version, &m.id.kind)
        .await
    {
        Ok(resolved) => resolved,
        Err(DiscoveryError::UnknownKind { .. }) => return Ok(false),
        Err(e) => return Err(e.to_string()),
    };
    let ns = m.id.namespace.as_deref();
    match retry.run(|| cluster.get(&resolved, ns, &m.id.name)).await {
        Ok(object) => Ok(object.as_ref().is_some_and(cvo_applied)),
        Err((e, attempts)) => Err(format!("reading it failed after {attempts} attempts: {e}")),
    }
}

/// `object`'s `managedFields` hold an `Apply` entry of `cvo`'s field manager.
fn cvo_applied(object: &DynamicObject) -> bool {
    object.metadata.managed_fields.iter().flatten().any(|e| {
        e.manager.as_deref() == Some(crate::cluster::FIELD_MANAGER)
            && e.operation.as_deref() == Some("Apply")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(managed: serde_json::Value) -> DynamicObject {
        serde_json::from_value(serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "x", "namespace": "ns", "managedFields": managed}}))
        .unwrap()
    }

    #[test]
    fn applied_by_cvo_is_an_apply_entry_of_its_field_manager() {
        let entry = |manager: &str, operation: &str| {
            serde_json::json!({"manager": manager, "operation": operation,
                "apiVersion": "v1", "fieldsType": "FieldsV1", "fieldsV1": {}})
        };
        assert!(cvo_applied(&object(serde_json::json!([
            entry("kubectl", "Update"),
            entry("cvo", "Apply")
        ]))));
        // Written by cvo's name as an update, or applied by another manager: not cvo's.
        assert!(!cvo_applied(&object(serde_json::json!([entry(
            "cvo", "Update"
        )]))));
        assert!(!cvo_applied(&object(serde_json::json!([entry(
            "kubectl", "Apply"
        )]))));
        assert!(!cvo_applied(&object(serde_json::json!([]))));
        assert!(!cvo_applied(&object(serde_json::Value::Null)));
    }
}
