//! The operators a release's ClusterOperators stand for, played for `cvo apply --in-memory`:
//! nothing runs on the embedded server, so without this every ClusterOperator would be waited
//! for until the health timeout. Each ClusterOperator of the release, once it exists, reports
//! what a healthy operator at the release would: the manifest's `status.versions`,
//! `Available=True`, `Progressing=False`, `Degraded=False`. A CLI convenience beside the
//! engine, no part of it; a real cluster gets no such help.

use std::collections::BTreeMap;

use futures::StreamExt;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::{Value, json};

use crate::cluster::Cluster;
use crate::release::{DeleteIntent, Release};

const API_VERSION: &str = "config.openshift.io/v1";
const KIND: &str = "ClusterOperator";

/// The status each ClusterOperator of `release` reports, by name (none: nothing to play).
fn reports(release: &Release) -> BTreeMap<String, Value> {
    let at = "2000-01-01T00:00:00Z";
    let condition = |type_: &str, status: &str| json!({"type": type_, "status": status, "reason": "AsExpected", "message": "played by cvo apply --in-memory", "lastTransitionTime": at});
    release
        .manifests
        .iter()
        .filter(|m| {
            m.id.group == "config.openshift.io"
                && m.id.kind == KIND
                && m.intent == DeleteIntent::Apply
        })
        .filter_map(|m| {
            let versions = m.object.pointer("/status/versions")?.clone();
            Some((
                m.id.name.clone(),
                json!({
                    "versions": versions,
                    "conditions": [
                        condition("Available", "True"),
                        condition("Progressing", "False"),
                        condition("Degraded", "False"),
                    ],
                }),
            ))
        })
        .collect()
}

/// Plays the operators of `release` until dropped: waits for the ClusterOperator kind to be
/// served (the release may bring its CRD), then watches ClusterOperators and writes each one's
/// report whenever its status differs.
pub async fn play(cluster: Cluster, release: Release) {
    let reports = reports(&release);
    if reports.is_empty() {
        return;
    }
    let resolved = loop {
        match cluster
            .discovery()
            .resolve_within(API_VERSION, KIND, std::time::Duration::from_secs(3600))
            .await
        {
            Ok(resolved) => break resolved,
            Err(e) => {
                tracing::debug!(error = %e, "in-memory operators: ClusterOperator not served yet")
            }
        }
    };
    let api: Api<DynamicObject> = cluster.api(&resolved, None);
    let mut events = watcher::watcher(api.clone(), watcher::Config::default())
        .default_backoff()
        .applied_objects()
        .boxed();
    while let Some(event) = events.next().await {
        let Ok(obj) = event else { continue };
        let Some(name) = obj.metadata.name.as_deref() else {
            continue;
        };
        let Some(report) = reports.get(name) else {
            continue;
        };
        let current = obj.data.get("status").cloned().unwrap_or(Value::Null);
        if !subset(report, &current) {
            report_status(&api, name, report).await;
        }
    }
}

/// Writes `report` as the status of ClusterOperator `name`. A write that fails is tried again
/// (a busy server answers late or not at all): the watch brings no new event for an object
/// nothing changed, so a write given up on would leave the operator unplayed until the
/// health timeout.
async fn report_status(api: &Api<DynamicObject>, name: &str, report: &Value) {
    let patch = json!({"status": report});
    let mut delays = crate::retry::Backoff::WATCH_RESTART.delays();
    for attempt in 1..=10 {
        match api
            .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => return,
            Err(e) => {
                tracing::debug!(operator = name, attempt, error = %e, "in-memory operators: status not written yet");
            }
        }
        tokio::time::sleep(delays.next_wait()).await;
    }
}

/// True when every field of `want` has the same value in `have`.
fn subset(want: &Value, have: &Value) -> bool {
    match want {
        Value::Object(fields) => fields
            .iter()
            .all(|(k, v)| have.get(k).is_some_and(|h| subset(v, h))),
        _ => want == have,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_and_subset() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("0000_10_a_00_co.yaml"),
            "apiVersion: config.openshift.io/v1\nkind: ClusterOperator\nmetadata:\n  name: dns\nstatus:\n  versions:\n  - name: operator\n    version: 1.2.3\n",
        )
        .unwrap();
        let release = crate::release::load(dir.path(), &Default::default()).unwrap();
        let reports = reports(&release);
        let dns = &reports["dns"];
        assert_eq!(dns["versions"][0]["version"], "1.2.3");
        assert!(subset(dns, dns));
        let mut other = dns.clone();
        other["versions"][0]["version"] = json!("1.2.2");
        assert!(!subset(dns, &other));
    }
}
