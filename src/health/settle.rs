//! Waiting for one object's health: judge the object the write returned; while the judgement
//! is "waiting", watch the object (kube-runtime, through [`crate::cluster::wait`]) until it is
//! not, or until the node's deadline — then read it once more and fail with what it still
//! lacks. A CRD is healthy once Established *and* its kind is served (a real server's
//! discovery lags behind Established).

use std::sync::Arc;

use kube::api::DynamicObject;
use serde_json::Value;
use tokio::time::Instant;

use super::kinds::{self, Subject};
use super::{Finding, Options, Reason, Verdict};
use crate::cluster::retry::RetryPolicy;
use crate::cluster::{Cluster, Resolved, wait};
use crate::release::Manifest;

fn value(obj: &DynamicObject) -> Value {
    serde_json::to_value(obj).unwrap_or(Value::Null)
}

/// Judges `live` and, while it is "waiting", watches it until `deadline`. `on_wait` is told
/// what is awaited when a wait starts (`Some`) and ends (`None`).
#[allow(clippy::too_many_arguments)]
pub async fn settle(
    cluster: &Cluster,
    resolved: &Resolved,
    manifest: &Manifest,
    live: &DynamicObject,
    options: &Options,
    retry: &RetryPolicy,
    deadline: Instant,
    on_wait: impl Fn(Option<&Finding>),
) -> Verdict {
    let mut verdict = super::assess(manifest, &value(live), options);
    if let Verdict::Waiting(finding) = &verdict {
        on_wait(Some(finding));
        verdict = watch(cluster, resolved, manifest, options, retry, deadline).await;
        on_wait(None);
    }
    if verdict == Verdict::Healthy
        && manifest.id.group == "apiextensions.k8s.io"
        && manifest.id.kind == "CustomResourceDefinition"
    {
        return served(cluster, manifest, live, deadline).await;
    }
    verdict
}

async fn watch(
    cluster: &Cluster,
    resolved: &Resolved,
    manifest: &Manifest,
    options: &Options,
    retry: &RetryPolicy,
    deadline: Instant,
) -> Verdict {
    let ns = manifest.id.namespace.as_deref();
    let api = cluster.api(resolved, ns);
    let subject = Arc::new(Subject::of(manifest));
    let desired = Arc::new(manifest.object.clone());
    let judge = {
        let (subject, desired, options) = (subject.clone(), desired.clone(), options.clone());
        move |obj: &DynamicObject| kinds::assess(&subject, &desired, &value(obj), &options)
    };
    let settled = {
        let judge = judge.clone();
        move |obj: Option<&DynamicObject>| obj.is_none_or(|o| !judge(o).is_waiting())
    };
    let remaining = deadline.saturating_duration_since(Instant::now());
    let gone = || {
        Verdict::Failed(Finding {
            reason: Reason::ObjectDeleted,
            subject: subject.id.clone(),
            operator: None,
            message: format!(
                "{} was deleted while its health was awaited; the next pass creates it again",
                subject.id
            ),
        })
    };
    match wait::until(&api, &manifest.id.name, settled, remaining).await {
        Ok(Some(obj)) => return judge(&obj),
        Ok(None) => return gone(),
        Err(_) => {}
    }
    // The deadline passed: one last look, then say what is still missing.
    match retry
        .run(|| cluster.get(resolved, ns, &manifest.id.name))
        .await
    {
        Ok(Some(obj)) => match judge(&obj) {
            Verdict::Waiting(mut f) => {
                f.message = format!(
                    "{}; still so when the node's health timeout ({}) ran out",
                    f.message,
                    humantime::format_duration(options.timeout)
                );
                Verdict::Failed(f)
            }
            other => other,
        },
        Ok(None) => gone(),
        Err((e, attempts)) => Verdict::Failed(Finding {
            reason: Reason::StatusUnknown,
            subject: subject.id.clone(),
            operator: None,
            message: format!(
                "cannot tell whether {} is healthy: reading it failed after {attempts} attempts: {e}",
                subject.id
            ),
        }),
    }
}

/// An Established CRD is healthy once discovery serves its kind (within the deadline).
async fn served(
    cluster: &Cluster,
    manifest: &Manifest,
    live: &DynamicObject,
    deadline: Instant,
) -> Verdict {
    let spec = live.data.get("spec").unwrap_or(&Value::Null);
    let group = spec.get("group").and_then(Value::as_str).unwrap_or("");
    let kind = spec
        .pointer("/names/kind")
        .and_then(Value::as_str)
        .unwrap_or("");
    let version = spec
        .get("versions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|v| v.get("served").and_then(Value::as_bool) == Some(true))
        .and_then(|v| v.get("name")?.as_str());
    let Some(version) = version else {
        // No served version: nothing to look up (the server refuses such a CRD anyway).
        return Verdict::Healthy;
    };
    let remaining = deadline.saturating_duration_since(Instant::now());
    match cluster
        .discovery()
        .resolve_within(&format!("{group}/{version}"), kind, remaining)
        .await
    {
        Ok(_) => Verdict::Healthy,
        Err(e) => Verdict::Failed(Finding {
            reason: Reason::CustomResourceDefinitionNotServed,
            subject: manifest.id.to_string(),
            operator: None,
            message: format!(
                "{} is established, but the server does not serve {kind} in {group}/{version}: {e}",
                manifest.id
            ),
        }),
    }
}
