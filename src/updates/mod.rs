//! Available updates from an update graph: the client of the protocol OpenShift's update
//! service (Cincinnati / OSUS) speaks, so that an existing graph server works.
//!
//! With ClusterVersion's `spec.upstream` and `spec.channel` set, [`retrieve`] asks
//! `GET <upstream>?arch=A&channel=C&id=<spec.clusterID>&version=V` (`Accept:
//! application/json`; `A` is Go's name of this binary's architecture, `V` the version of the
//! release being reconciled) and reads the answer into what ClusterVersion's status holds:
//! `availableUpdates`, `conditionalUpdates` and the `RetrievedUpdates` condition, with the
//! reasons and messages OpenShift's cluster-version operator uses.
//!
//! - [`query`]: the checks before any request and the request URL (pure);
//! - [`fetch`]: the HTTP exchange, bounded by [`TIMEOUT`] and [`MAX_BODY`];
//! - [`graph`]: the graph format and what it offers the current version (pure);
//! - [`risks`]: whether each conditional update is recommended (pure).
//!
//! What a caller does with a [`Retrieval`]: [`Lists::Replace`] writes the lists,
//! [`Lists::Clear`] writes none (`availableUpdates: null`, as when there is no update source),
//! and [`Lists::Keep`] — the service could not be asked or answered badly (`RemoteFailed`,
//! `ResponseFailed`, `ResponseInvalid`) — keeps the last good lists, unless the upstream or
//! channel they came from changed.

pub mod fetch;
pub mod graph;
pub mod query;
pub mod risks;

use std::time::Duration;

use serde_json::{Value, json};

use crate::status::{Condition, ConditionStatus};
pub use graph::Release;
pub use query::Source;
pub use risks::ConditionalUpdate;

/// The `ClusterVersion` condition this module sets.
pub const RETRIEVED_UPDATES: &str = "RetrievedUpdates";

/// The longest one retrieval may take, connection to last byte: a slow or silent service
/// costs a pass at most this long, and says `RemoteFailed`.
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// The largest graph read (4 MiB; OpenShift's public graph of every channel is well below it).
/// A larger answer is `ResponseFailed` and never parsed.
pub const MAX_BODY: usize = 4 * 1024 * 1024;

/// The longest `RetrievedUpdates` message written: a hostile upstream URL or error text does
/// not grow ClusterVersion.
const MAX_MESSAGE: usize = 4096;

use crate::status::conditions::truncate;

/// Why there are no updates: a `RetrievedUpdates=False` reason and message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    pub reason: &'static str,
    pub message: String,
}

impl Failure {
    pub fn new(reason: &'static str, message: impl Into<String>) -> Self {
        Failure {
            reason,
            message: message.into(),
        }
    }

    /// The service was asked but did not answer usefully: the last good lists stay.
    fn transient(&self) -> bool {
        matches!(
            self.reason,
            "RemoteFailed" | "ResponseFailed" | "ResponseInvalid"
        )
    }
}

/// What to do with the lists in the status.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Lists {
    /// The service answered: these are the lists (sorted newest first).
    Replace {
        available: Vec<Release>,
        conditional: Vec<ConditionalUpdate>,
    },
    /// Nothing to offer (no source, or the current version is not in the graph).
    Clear,
    /// The service failed: keep the last good lists.
    Keep,
}

/// One retrieval: the `RetrievedUpdates` condition and the lists.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Retrieval {
    pub condition: Condition,
    pub lists: Lists,
}

impl Retrieval {
    fn failed(failure: Failure, lists: Lists) -> Self {
        let message = match failure.reason {
            "RemoteFailed" | "ResponseFailed" | "ResponseInvalid" | "VersionNotFound"
            | "InvalidRequest" => {
                format!("Unable to retrieve available updates: {}", failure.message)
            }
            _ => failure.message,
        };
        let message = truncate(&message, MAX_MESSAGE);
        Retrieval {
            condition: Condition::new(
                RETRIEVED_UPDATES,
                ConditionStatus::False,
                failure.reason,
                message,
            ),
            lists,
        }
    }

    /// `status.availableUpdates` and `status.conditionalUpdates` as JSON, `None` to keep the
    /// stored ones. No updates is `null` for `availableUpdates` (as the CVO writes it) and an
    /// absent `conditionalUpdates` (`Value::Null`).
    pub fn status_lists(&self) -> Option<(Value, Value)> {
        match &self.lists {
            Lists::Keep => None,
            Lists::Clear => Some((Value::Null, Value::Null)),
            Lists::Replace {
                available,
                conditional,
            } => Some((
                if available.is_empty() {
                    Value::Null
                } else {
                    json!(available)
                },
                if conditional.is_empty() {
                    Value::Null
                } else {
                    json!(conditional)
                },
            )),
        }
    }
}

/// At most this many conditional updates are written (OpenShift's ClusterVersion schema
/// refuses more); the newest are kept.
const MAX_CONDITIONAL: usize = 500;

/// Asks the update service `source` names for the updates of a cluster at `version`, with
/// the default bounds.
pub async fn retrieve(source: &Source, version: Option<&str>) -> Retrieval {
    retrieve_within(source, version, TIMEOUT, MAX_BODY).await
}

/// [`retrieve`] with other bounds.
pub async fn retrieve_within(
    source: &Source,
    version: Option<&str>,
    timeout: Duration,
    max_body: usize,
) -> Retrieval {
    let request = match query::request(source, version, query::arch()) {
        Ok(r) => r,
        Err(f) => return Retrieval::failed(f, Lists::Clear),
    };
    let outcome = match fetch::get(&request, timeout, max_body).await {
        Ok(body) => graph::offered(&body, &request.version, &request.channel),
        Err(f) => Err(f),
    };
    match outcome {
        Ok(offered) => answered(offered, &jiff::Timestamp::now().to_string()),
        Err(f) => {
            let lists = if f.transient() {
                Lists::Keep
            } else {
                Lists::Clear
            };
            Retrieval::failed(f, lists)
        }
    }
}

/// The retrieval of what a graph offered (pure): conditional updates evaluated, the ones
/// recommended after all added to the available ones, both sorted newest first.
fn answered(offered: graph::Offered, now: &str) -> Retrieval {
    let (mut conditional, recommended) = risks::evaluate(offered.conditional, now);
    conditional.truncate(MAX_CONDITIONAL);
    let mut available = offered.updates;
    for r in recommended {
        if !available.iter().any(|a| a.image == r.image) {
            available.push(r);
        }
    }
    risks::sort_newest_first(&mut available, |r| &r.version);
    Retrieval {
        condition: Condition::new(RETRIEVED_UPDATES, ConditionStatus::True, "", ""),
        lists: Lists::Replace {
            available,
            conditional,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offered(body: &str) -> Retrieval {
        let v = semver::Version::new(1, 4, 0);
        match graph::offered(body.as_bytes(), &v, "stable-1") {
            Ok(o) => answered(o, "2026-01-01T00:00:00Z"),
            Err(f) => Retrieval::failed(
                f.clone(),
                if f.transient() {
                    Lists::Keep
                } else {
                    Lists::Clear
                },
            ),
        }
    }

    #[test]
    fn an_answer_fills_both_lists_newest_first_and_retrieved_updates_is_true() {
        let r = offered(
            r#"{"nodes": [{"version": "1.4.0", "payload": "i:1.4.0"}, {"version": "1.4.2", "payload": "i:1.4.2"},
                          {"version": "1.10.0", "payload": "i:1.10.0"}, {"version": "1.6.0", "payload": "i:1.6.0"}],
                "edges": [[0, 1], [0, 2]],
                "conditionalEdges": [{"edges": [{"from": "1.4.0", "to": "1.6.0"}],
                    "risks": [{"url": "https://e.com/r", "name": "R", "message": "m", "matchingRules": [{"type": "Always"}]}]}]}"#,
        );
        assert_eq!(
            r.condition,
            Condition::new("RetrievedUpdates", ConditionStatus::True, "", "")
        );
        let (available, conditional) = r.status_lists().expect("lists");
        assert_eq!(
            available,
            json!([{"version": "1.10.0", "image": "i:1.10.0"}, {"version": "1.4.2", "image": "i:1.4.2"}])
        );
        assert_eq!(
            conditional[0]["release"],
            json!({"version": "1.6.0", "image": "i:1.6.0"})
        );
        assert_eq!(conditional[0]["conditions"][0]["status"], "False");
        assert_eq!(
            conditional[0]["risks"][0]["matchingRules"],
            json!([{"type": "Always"}])
        );
    }

    #[test]
    fn long_messages_are_cut_on_a_character_boundary() {
        assert_eq!(truncate("short", 10), "short");
        let cut = truncate(&"é".repeat(100), 11);
        assert!(cut.len() <= 11 && cut.ends_with('…'), "{cut}");
        let huge = Source {
            upstream: format!("http://{}/", "a".repeat(100_000)),
            channel: "c".into(),
            cluster_id: "x".into(),
        };
        let r = Retrieval::failed(
            query::request(&huge, Some("1.0.0"), "amd64").unwrap_err(),
            Lists::Clear,
        );
        assert!(
            r.condition.message.len() <= MAX_MESSAGE,
            "{}",
            r.condition.message.len()
        );
    }

    #[test]
    fn no_updates_is_null_as_the_cvo_writes_it() {
        let r = offered(r#"{"nodes": [{"version": "1.4.0", "payload": "i"}]}"#);
        assert_eq!(r.condition.status, ConditionStatus::True);
        assert_eq!(r.status_lists(), Some((Value::Null, Value::Null)));
    }

    #[test]
    fn failures_keep_or_clear_the_lists_and_say_unable_to_retrieve() {
        let bad = offered("{");
        assert_eq!(bad.condition.reason, "ResponseInvalid");
        assert!(
            bad.condition
                .message
                .starts_with("Unable to retrieve available updates: "),
            "{}",
            bad.condition.message
        );
        assert_eq!(bad.status_lists(), None, "the last good lists stay");
        let missing = offered(r#"{"nodes": []}"#);
        assert_eq!(missing.condition.reason, "VersionNotFound");
        assert_eq!(
            missing.condition.message,
            "Unable to retrieve available updates: currently reconciling cluster version 1.4.0 not found in the \"stable-1\" channel"
        );
        assert_eq!(missing.status_lists(), Some((Value::Null, Value::Null)));
    }

    #[test]
    fn the_documented_example_graph_offers_what_the_docs_say() {
        let body = include_str!("../../docs/examples/update-graph.json");
        let v = semver::Version::new(1, 4, 0);
        let r = answered(
            graph::offered(body.as_bytes(), &v, "stable-1.4").expect("valid"),
            "t",
        );
        let Lists::Replace {
            available,
            conditional,
        } = r.lists
        else {
            panic!("{:?}", r.lists)
        };
        let versions: Vec<&str> = available.iter().map(|u| u.version.as_str()).collect();
        assert_eq!(versions, ["1.5.1", "1.5.0"]);
        assert_eq!(conditional.len(), 1);
        assert_eq!(conditional[0].release.version, "1.6.0");
        assert_eq!(conditional[0].conditions[0].reason, "WidgetsBreak");
    }

    #[tokio::test]
    async fn no_upstream_needs_no_request() {
        let r = retrieve(&Source::default(), Some("1.0.0")).await;
        assert_eq!(
            r.condition,
            Condition::new(
                "RetrievedUpdates",
                ConditionStatus::False,
                "NoUpstream",
                "No updateService server has been set to retrieve updates."
            )
        );
        assert_eq!(r.lists, Lists::Clear);
    }
}
