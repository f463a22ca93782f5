//! Available updates while leading: after every full pass (the first, each resync, each
//! ClusterVersion spec change — a new `spec.upstream` or `spec.channel` among them) the
//! operator asks the update service ([`crate::updates`]) and writes `availableUpdates`,
//! `conditionalUpdates` and `RetrievedUpdates` to ClusterVersion (only when they change).
//! The request runs beside the leader's loop ([`Refresher`]): a slow service holds up
//! neither passes nor drift repairs, and a pass while one is in flight asks nothing more.
//!
//! When the service fails (`RemoteFailed`, `ResponseFailed`, `ResponseInvalid`) the stored
//! lists stay, unless this leader last fetched them from another upstream or channel: then
//! they would describe another channel, and are cleared. A new leader has fetched nothing yet
//! and keeps what is stored. The only memory is that (upstream, channel); losing it on a
//! restart costs nothing but that choice.

use std::sync::Arc;

use crate::apply::RetryPolicy;
use crate::cluster::Cluster;
use crate::release::Release;
use crate::status::clusterversion::{self, WriteOutcome};
use crate::updates::{self, Lists, Retrieval, Source};

/// Starts retrievals in their own task, one at a time; the one in flight is stopped when the
/// refresher is dropped (leadership lost, shutdown).
pub(super) struct Refresher {
    cluster: Cluster,
    version: Option<String>,
    retry: RetryPolicy,
    state: Arc<tokio::sync::Mutex<Updates>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Refresher {
    pub(super) fn new(cluster: &Cluster, release: &Release, retry: &RetryPolicy) -> Self {
        Refresher {
            cluster: cluster.clone(),
            version: release.version().map(ToString::to_string),
            retry: retry.clone(),
            state: Arc::default(),
            task: None,
        }
    }

    /// Starts a retrieval, unless one is still in flight.
    pub(super) fn start(&mut self) {
        if self.task.as_ref().is_some_and(|t| !t.is_finished()) {
            tracing::debug!("available updates: the previous request is still in flight");
            return;
        }
        let (cluster, version, retry) = (
            self.cluster.clone(),
            self.version.clone(),
            self.retry.clone(),
        );
        let state = self.state.clone();
        self.task = Some(tokio::spawn(async move {
            state
                .lock()
                .await
                .refresh(&cluster, version.as_deref(), &retry)
                .await;
        }));
    }
}

impl Drop for Refresher {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

#[derive(Debug, Default)]
struct Updates {
    /// (upstream, channel) of the last lists this leader wrote from an answer.
    fetched_from: Option<(String, String)>,
}

impl Updates {
    /// Asks the update service ClusterVersion names and records the answer. Never fails:
    /// what went wrong is in `RetrievedUpdates`, or logged when ClusterVersion cannot be read
    /// or written.
    async fn refresh(&mut self, cluster: &Cluster, version: Option<&str>, retry: &RetryPolicy) {
        let cv = match clusterversion::read(cluster, retry).await {
            Ok(Some(cv)) => cv,
            Ok(None) => return,
            Err(e) => {
                tracing::warn!(error = %e, "available updates not retrieved");
                return;
            }
        };
        let source = Source::of_spec(cv.data.get("spec").unwrap_or(&serde_json::Value::Null));
        let mut retrieval = updates::retrieve(&source, version).await;
        self.settle(&source, &mut retrieval);
        let c = &retrieval.condition;
        tracing::debug!(status = ?c.status, reason = %c.reason, message = %c.message, "asked the update service");
        match clusterversion::write_available_updates(
            cluster,
            retry,
            (&source.upstream, &source.channel),
            retrieval.status_lists(),
            &retrieval.condition,
            crate::preflight::status::carry_over,
        )
        .await
        {
            Ok(WriteOutcome::Written) => {
                // Said once per change: an unchanged answer writes (and logs) nothing.
                tracing::info!(status = ?c.status, reason = %c.reason, message = %c.message, "available updates recorded");
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "available updates not recorded"),
        }
    }

    /// Keeps the stored lists after a failure only when they came from this source (or are
    /// not known to come from another one); remembers the source of an answer.
    fn settle(&mut self, source: &Source, retrieval: &mut Retrieval) {
        let from = (source.upstream.clone(), source.channel.clone());
        match retrieval.lists {
            Lists::Replace { .. } => self.fetched_from = Some(from),
            Lists::Keep if self.fetched_from.as_ref().is_some_and(|f| *f != from) => {
                retrieval.lists = Lists::Clear;
                self.fetched_from = None;
            }
            Lists::Keep => {}
            Lists::Clear => self.fetched_from = None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::{Condition, ConditionStatus};

    fn retrieval(lists: Lists) -> Retrieval {
        Retrieval {
            condition: Condition::new(
                "RetrievedUpdates",
                ConditionStatus::False,
                "RemoteFailed",
                "",
            ),
            lists,
        }
    }

    fn source(channel: &str) -> Source {
        Source {
            upstream: "http://g/".into(),
            channel: channel.into(),
            cluster_id: String::new(),
        }
    }

    #[test]
    fn a_failure_keeps_the_lists_of_the_same_channel_only() {
        let mut u = Updates::default();
        // A new leader keeps what is stored.
        let mut r = retrieval(Lists::Keep);
        u.settle(&source("a"), &mut r);
        assert_eq!(r.lists, Lists::Keep);
        let mut r = retrieval(Lists::Replace {
            available: vec![],
            conditional: vec![],
        });
        u.settle(&source("a"), &mut r);
        let mut r = retrieval(Lists::Keep);
        u.settle(&source("a"), &mut r);
        assert_eq!(r.lists, Lists::Keep, "same channel");
        let mut r = retrieval(Lists::Keep);
        u.settle(&source("b"), &mut r);
        assert_eq!(r.lists, Lists::Clear, "the lists were of channel a");
        let mut r = retrieval(Lists::Keep);
        u.settle(&source("b"), &mut r);
        assert_eq!(
            r.lists,
            Lists::Keep,
            "nothing of another channel is stored any more"
        );
    }
}
