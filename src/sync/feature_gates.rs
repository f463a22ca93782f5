//! The feature gates a sync applies a release with: given (`--feature-gates`,
//! `--feature-gates-file`), else read from the cluster's FeatureGate `cluster`
//! (config.openshift.io/v1) as OpenShift's CVO reads it — the `status.featureGates` entry of
//! the release's version.
//!
//! As the CVO: a server that does not serve the FeatureGate kind, or has no FeatureGate
//! `cluster`, enables no gate (a manifest needing a gate is left out; one needing a gate
//! disabled is kept), and so does a FeatureGate without an entry for the release's version.
//! Fails closed: a FeatureGate that exists but cannot be read, or is not of FeatureGate's
//! shape, stops the sync before anything is applied, as an unreadable ClusterVersion does.

use kube::api::{Api, DynamicObject};

use crate::apply::RetryPolicy;
use crate::apply::retry::RequestError;
use crate::cluster::Cluster;
use crate::cluster::discovery::DiscoveryError;
use crate::release::Release;
use crate::release::feature_gate::{
    EnabledGates, Fallback, GateSource, OBJECT_API_VERSION as API_VERSION, OBJECT_KIND as KIND,
    OBJECT_NAME as NAME, enabled_in,
};

/// The feature gates could not be told: nothing was applied.
#[derive(Debug, thiserror::Error)]
pub enum FeatureGateError {
    #[error(
        "looking up the FeatureGate kind: {0}; cannot tell which feature gates are enabled, nothing was applied (run again when the server answers)"
    )]
    Discovery(#[source] DiscoveryError),
    #[error(
        "reading FeatureGate {NAME}: {0}; cannot tell which feature gates are enabled, nothing was applied (run again when the server answers, or give them with --feature-gates)"
    )]
    Read(#[source] RequestError),
    #[error(
        "FeatureGate {NAME}: {0}; cannot tell which feature gates are enabled, nothing was applied (fix its status, or give the gates with --feature-gates)"
    )]
    Invalid(String),
    /// The given source does not say (`--feature-gates-file` without the release's version).
    #[error("{0}; nothing was applied")]
    Given(String),
}

/// The gates enabled for `release`: from `given` when set, else the cluster's FeatureGate.
pub async fn enabled(
    cluster: &Cluster,
    retry: &RetryPolicy,
    release: &Release,
    given: Option<&GateSource>,
) -> Result<EnabledGates, FeatureGateError> {
    if let Some(source) = given {
        return source
            .enabled(release.version())
            .map_err(FeatureGateError::Given);
    }
    let Some(object) = read(cluster, retry).await? else {
        return Ok(EnabledGates::new());
    };
    let version = release.version().map(ToString::to_string);
    let value = serde_json::to_value(&object)
        .map_err(|e| FeatureGateError::Invalid(format!("cannot be read as an object: {e}")))?;
    enabled_in(&value, version.as_deref(), Fallback::StatusOnly).map_err(FeatureGateError::Invalid)
}

/// FeatureGate `cluster`, or `None` when the kind is not served or the object is absent. Any
/// other failure (after `retry`) is an error, never `None`.
async fn read(
    cluster: &Cluster,
    retry: &RetryPolicy,
) -> Result<Option<DynamicObject>, FeatureGateError> {
    let api: Api<DynamicObject> = match cluster.discovery().resolve(API_VERSION, KIND).await {
        Ok(resolved) => Api::all_with(cluster.client().clone(), &resolved.resource),
        Err(DiscoveryError::UnknownKind { .. }) => return Ok(None),
        Err(e) => return Err(FeatureGateError::Discovery(e)),
    };
    retry
        .run(|| api.get_opt(NAME))
        .await
        .map_err(|(e, _)| FeatureGateError::Read(e))
}
