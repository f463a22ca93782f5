//! Deletion tracking, rebuilt from the cluster: what the cluster says now about the object of
//! a delete manifest. Nothing is remembered between passes; a restarted process reads the same
//! answers.
//!
//! Fails closed: a kind the server does not serve has no objects (gone), but a discovery or
//! GET error (after the retry policy) is [`Observed::Unknown`], never "gone".

use kube::ResourceExt;

use super::{Applier, PendingDeletion};
use crate::cluster::discovery::DiscoveryError;
use crate::release::Manifest;

/// The object of one delete manifest, as the cluster shows it now.
#[derive(Clone, Debug, PartialEq)]
pub enum Observed {
    Gone,
    /// Still there: with a deletionTimestamp (`since`), or not deleted yet (`since: None`).
    Present(PendingDeletion),
    /// The engine could not tell.
    Unknown(String),
}

/// Reads the object of `manifest` (a delete manifest) back from the cluster.
pub async fn observe(applier: &Applier<'_>, manifest: &Manifest) -> Observed {
    let cluster = applier.cluster();
    let resolved = match cluster
        .discovery()
        .resolve(&manifest.api_version, &manifest.id.kind)
        .await
    {
        Ok(resolved) => resolved,
        Err(DiscoveryError::UnknownKind { .. }) => return Observed::Gone,
        Err(e) => return Observed::Unknown(e.to_string()),
    };
    let ns = manifest.id.namespace.as_deref();
    let got = applier
        .options()
        .retry
        .run(|| cluster.get(&resolved, ns, &manifest.id.name))
        .await;
    match got {
        Ok(None) => Observed::Gone,
        Ok(Some(obj)) => Observed::Present(PendingDeletion {
            id: manifest.id.clone(),
            since: obj.metadata.deletion_timestamp.as_ref().map(|t| t.0),
            finalizers: obj.finalizers().to_vec(),
        }),
        Err((e, attempts)) => {
            Observed::Unknown(format!("reading it failed after {attempts} attempts: {e}"))
        }
    }
}
