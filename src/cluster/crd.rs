//! Waiting for a CustomResourceDefinition to be `Established=True`: a CRD's kind is served
//! only from then on (docs/kubernetes-semantics.md §7), so its custom resources must wait for it.

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{Api, Client};
use tokio::time::Instant;

use super::wait;

/// Why waiting for a CRD ended without it being established.
#[derive(Debug, thiserror::Error)]
pub enum CrdWaitError {
    #[error(
        "CustomResourceDefinition {name} does not exist (waited {waited:?}): it must be applied at an earlier run level than its custom resources"
    )]
    Absent { name: String, waited: Duration },
    #[error(
        "CustomResourceDefinition {name} was not Established after {waited:?} (last seen: {last})"
    )]
    Timeout {
        name: String,
        waited: Duration,
        last: String,
    },
}

/// True when the CRD has condition `Established=True`.
pub fn is_established(crd: &CustomResourceDefinition) -> bool {
    crd.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c.type_ == "Established" && c.status == "True")
        })
}

/// How long a CRD may be absent before [`wait_established`] gives up (it may be created by a
/// node running in parallel; one created at a later run level will not come in time).
pub const ABSENT_GRACE: Duration = Duration::from_secs(5);

/// Watches the CRD `name` until it is established or `timeout` passes; gives up after
/// [`ABSENT_GRACE`] while the CRD does not exist at all.
pub async fn wait_established(
    client: &Client,
    name: &str,
    timeout: Duration,
) -> Result<(), CrdWaitError> {
    let api = Api::<CustomResourceDefinition>::all(client.clone());
    let start = Instant::now();
    let grace = ABSENT_GRACE.min(timeout);
    if wait::until(
        &api,
        name,
        |crd: Option<&CustomResourceDefinition>| crd.is_some(),
        grace,
    )
    .await
    .is_err()
    {
        return Err(CrdWaitError::Absent {
            name: name.to_owned(),
            waited: start.elapsed(),
        });
    }
    let remaining = timeout.saturating_sub(start.elapsed());
    let established = |crd: Option<&CustomResourceDefinition>| crd.is_some_and(is_established);
    match wait::until(&api, name, established, remaining).await {
        Ok(_) => Ok(()),
        Err(_) => Err(CrdWaitError::Timeout {
            name: name.to_owned(),
            waited: timeout,
            last: match api.get_opt(name).await {
                Ok(Some(crd)) => format!("conditions {:?}", crd.status.and_then(|s| s.conditions)),
                Ok(None) => "absent".to_owned(),
                Err(e) => e.to_string(),
            },
        }),
    }
}
