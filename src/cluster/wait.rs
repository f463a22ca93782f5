//! Waiting for one object to reach a state, with kube-runtime watches
//! ([`kube::runtime::wait::await_condition`]) instead of polling.
//!
//! A watch can break (the server restarts, a proxy closes the stream, a 410 Gone on resume):
//! [`until`] starts a new one after a short backoff ([`crate::retry::Backoff::WATCH_RESTART`]),
//! so only the deadline ends a wait. The
//! condition is evaluated on the object as the watch sees it, `None` meaning absent.

use std::fmt::Debug;
use std::time::Duration;

use kube::api::Api;
use kube::runtime::wait::await_condition;
use serde::de::DeserializeOwned;
use tokio::time::Instant;

/// The deadline passed before the condition held.
#[derive(Debug, thiserror::Error)]
#[error("the condition did not hold within {0:?}")]
pub struct TimedOut(pub Duration);

/// Waits until `cond` holds for the object `name` of `api` (or `timeout` passes) and returns
/// the object as it was then (`None`: absent).
pub async fn until<K, F>(
    api: &Api<K>,
    name: &str,
    cond: F,
    timeout: Duration,
) -> Result<Option<K>, TimedOut>
where
    K: kube::Resource + Clone + Debug + Send + DeserializeOwned + 'static,
    F: Fn(Option<&K>) -> bool + Clone + Send + 'static,
{
    let deadline = Instant::now() + timeout;
    let mut delays = crate::retry::Backoff::WATCH_RESTART.delays();
    loop {
        let attempt = await_condition(api.clone(), name, cond.clone());
        match tokio::time::timeout_at(deadline, attempt).await {
            Err(_) => return Err(TimedOut(timeout)),
            Ok(Ok(obj)) => return Ok(obj),
            Ok(Err(e)) => {
                tracing::debug!(object = name, error = %e, "watch broke; starting a new one");
                let backoff = delays.next_wait();
                if Instant::now() + backoff >= deadline {
                    return Err(TimedOut(timeout));
                }
                tokio::time::sleep(backoff).await;
            }
        }
    }
}
