//! Discovery cache: `apiVersion` + kind → the REST resource (plural, scope).
//!
//! Each group/version/kind is looked up once with `kube::discovery::pinned_kind` (under the
//! retry policy, so a server unreachable for a moment when a run starts is waited for) and
//! cached for the life of the [`Discovery`]. A kind the server does not serve is never cached, so
//! the next lookup asks again: that is how a kind appears once its CRD is established.
//! [`Discovery::forget`] drops an entry the server has stopped serving, and
//! [`Discovery::resolve_within`] asks again until a new kind is served.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::Client;
use kube::api::{ApiResource, GroupVersionKind};
use kube::discovery::Scope;

use super::retry::{RequestError, RetryPolicy};

/// A served kind: how to address it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resolved {
    pub resource: ApiResource,
    /// True for namespaced kinds.
    pub namespaced: bool,
    /// The kind has a `status` subresource: a write to the object itself ignores `status`.
    pub status_subresource: bool,
}

/// Why a kind could not be resolved.
#[derive(Debug, thiserror::Error)]
pub enum DiscoveryError {
    /// The server does not serve this group/version/kind (yet).
    #[error("the server does not serve kind {kind} in {api_version}")]
    UnknownKind { api_version: String, kind: String },
    /// The discovery request itself failed (after the retry policy).
    #[error("discovery of {kind} in {api_version} failed after {attempts} attempts: {source}")]
    Request {
        api_version: String,
        kind: String,
        attempts: u32,
        #[source]
        source: RequestError,
    },
}

/// The GVK → resource cache of one client.
pub struct Discovery {
    client: Client,
    retry: RetryPolicy,
    cache: Mutex<HashMap<GroupVersionKind, Resolved>>,
    /// One lock per kind being looked up, so concurrent first lookups send one request.
    inflight: Mutex<HashMap<GroupVersionKind, Arc<tokio::sync::Mutex<()>>>>,
}

/// Splits `apps/v1` into (`apps`, `v1`) and `v1` into (``, `v1`).
pub fn split_api_version(api_version: &str) -> (&str, &str) {
    api_version.rsplit_once('/').unwrap_or(("", api_version))
}

impl Discovery {
    pub fn new(client: Client) -> Self {
        Discovery {
            client,
            retry: RetryPolicy::default(),
            cache: Mutex::new(HashMap::new()),
            inflight: Mutex::new(HashMap::new()),
        }
    }

    fn key(api_version: &str, kind: &str) -> GroupVersionKind {
        let (group, version) = split_api_version(api_version);
        GroupVersionKind::gvk(group, version, kind)
    }

    /// Resolves `kind` in `api_version`, asking the server on a cache miss.
    pub async fn resolve(&self, api_version: &str, kind: &str) -> Result<Resolved, DiscoveryError> {
        let gvk = Self::key(api_version, kind);
        if let Some(hit) = self.lock().get(&gvk) {
            return Ok(hit.clone());
        }
        let gate = self
            .inflight
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(gvk.clone())
            .or_default()
            .clone();
        let _turn = gate.lock().await;
        if let Some(hit) = self.lock().get(&gvk) {
            return Ok(hit.clone());
        }
        let unknown = || DiscoveryError::UnknownKind {
            api_version: api_version.to_owned(),
            kind: kind.to_owned(),
        };
        let lookup = self
            .retry
            .run(|| kube::discovery::pinned_kind(&self.client, &gvk))
            .await;
        match lookup {
            Ok((resource, caps)) => {
                let resolved = Resolved {
                    resource,
                    namespaced: caps.scope == Scope::Namespaced,
                    status_subresource: caps.subresources.iter().any(|(r, _)| r.plural == "status"),
                };
                self.lock().insert(gvk, resolved.clone());
                Ok(resolved)
            }
            Err((RequestError::Kube(kube::Error::Api(status)), _)) if status.code == 404 => {
                Err(unknown())
            }
            Err((RequestError::Kube(kube::Error::Discovery(_)), _)) => Err(unknown()),
            Err((source, attempts)) => Err(DiscoveryError::Request {
                api_version: api_version.to_owned(),
                kind: kind.to_owned(),
                attempts,
                source,
            }),
        }
    }

    /// Like [`Discovery::resolve`], but a kind not served yet (or a failed discovery request)
    /// is asked for again — [`crate::retry::Backoff::DISCOVERY_LAG`]: 20 ms, growing ×1.5 to
    /// 500 ms — until it is served or `timeout` passes: a real API server lists a new CRD's
    /// kind a moment after the CRD is `Established` (docs/apply.md). Discovery has no watch,
    /// so this one wait polls.
    pub async fn resolve_within(
        &self,
        api_version: &str,
        kind: &str,
        timeout: Duration,
    ) -> Result<Resolved, DiscoveryError> {
        let deadline = tokio::time::Instant::now() + timeout;
        let mut delays = crate::retry::Backoff::DISCOVERY_LAG.delays();
        let mut delay = delays.next_wait();
        loop {
            match self.resolve(api_version, kind).await {
                Ok(resolved) => return Ok(resolved),
                Err(e) if tokio::time::Instant::now() + delay >= deadline => return Err(e),
                Err(e) => {
                    tracing::debug!(%api_version, %kind, error = %e, "kind not served yet; asking again")
                }
            }
            tokio::time::sleep(delay).await;
            delay = delays.next_wait();
        }
    }

    /// What discovery retried so far.
    pub fn retries(&self) -> super::retry::Retries {
        self.retry.retries()
    }

    /// Drops a cached kind (after the server answered 404 for the type itself).
    pub fn forget(&self, api_version: &str, kind: &str) {
        self.lock().remove(&Self::key(api_version, kind));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<GroupVersionKind, Resolved>> {
        self.cache.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_core_and_grouped_api_versions() {
        assert_eq!(split_api_version("v1"), ("", "v1"));
        assert_eq!(split_api_version("apps/v1"), ("apps", "v1"));
        assert_eq!(
            split_api_version("config.openshift.io/v1"),
            ("config.openshift.io", "v1")
        );
    }
}
