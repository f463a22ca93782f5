//! The cluster-deletion signal: the namespaced `Alive` object (`lifecycle.cvo.io/v1alpha1`,
//! named [`NAME`]) exists while the cluster lives. A provisioner about to tear the cluster
//! down deletes it ([`signal`]); operators that must clean up outside the cluster first (cloud
//! load balancers, DNS records, buckets) hold it with a finalizer ([`super::finalizer`]) and
//! release it when done. When `Alive` is gone, teardown may start.
//!
//! A `ValidatingAdmissionPolicy` shipped with the CRD denies a DELETE of an `Alive` object
//! unless it carries [`CONFIRM_ANNOTATION`]` = "true"`, so a stray `kubectl delete` cannot start
//! a cluster deletion; [`signal`] sets it first.
//!
//! [`status`] shows the object, its finalizers and who set each one (from
//! `metadata.managedFields`), how long its deletion has been running, and the objects
//! annotated [`PRESERVE_ANNOTATION`]` = "true"` that teardown must keep.

use std::borrow::Cow;
use std::time::Duration;

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ManagedFieldsEntry, ObjectMeta};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, Preconditions};
use kube::{Client, Resource, ResourceExt};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::scan::{self, Found};
use crate::cluster::retry::{RequestError, RetryPolicy};
use crate::cluster::wait;
use crate::status::clusterversion;

/// API group of `Alive`.
pub const GROUP: &str = "lifecycle.cvo.io";
/// API version of `Alive`.
pub const VERSION: &str = "v1alpha1";
/// Kind.
pub const KIND: &str = "Alive";
/// Plural (the resource).
pub const PLURAL: &str = "alives";
/// The name of the one `Alive` object.
pub const NAME: &str = "cluster";
/// The namespace `manifests-example` puts it in (`--namespace` chooses another).
pub const DEFAULT_NAMESPACE: &str = "cluster-lifecycle";
/// Without this annotation set to `"true"`, the admission policy denies a DELETE of `Alive`.
pub const CONFIRM_ANNOTATION: &str = "lifecycle.cvo.io/confirm-deletion";
/// Objects annotated `"true"` are kept by teardown: listed as kept by [`status`] and [`signal`].
pub const PRESERVE_ANNOTATION: &str = "lifecycle.cvo.io/preserve";
/// Field manager of the confirmation annotation.
pub const FIELD_MANAGER: &str = "cvo-cluster-deletion";

/// `lifecycle.cvo.io/v1alpha1` `Alive`: metadata is what matters; anything else is kept.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Alive {
    #[serde(default = "api_version")]
    pub api_version: String,
    #[serde(default = "kind")]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

fn api_version() -> String {
    format!("{GROUP}/{VERSION}")
}
fn kind() -> String {
    KIND.to_owned()
}

impl Alive {
    /// An `Alive` named [`NAME`] in `namespace`.
    pub fn new(namespace: &str) -> Self {
        Alive {
            api_version: api_version(),
            kind: kind(),
            metadata: ObjectMeta {
                name: Some(NAME.to_owned()),
                namespace: Some(namespace.to_owned()),
                ..ObjectMeta::default()
            },
            extra: Map::new(),
        }
    }
}

impl Resource for Alive {
    type DynamicType = ();
    type Scope = NamespaceResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        Cow::Borrowed(KIND)
    }
    fn group(_: &()) -> Cow<'_, str> {
        Cow::Borrowed(GROUP)
    }
    fn version(_: &()) -> Cow<'_, str> {
        Cow::Borrowed(VERSION)
    }
    fn api_version(_: &()) -> Cow<'_, str> {
        Cow::Owned(api_version())
    }
    fn plural(_: &()) -> Cow<'_, str> {
        Cow::Borrowed(PLURAL)
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// Why a signal or status could not be carried out.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "the Alive kind ({GROUP}/{VERSION}) is not served by this cluster: apply the lifecycle component (manifests-example/0000_05_cluster-lifecycle_*) first"
    )]
    NotServed,
    #[error("{what}: {source}")]
    Request {
        what: String,
        #[source]
        source: RequestError,
    },
    #[error(
        "Alive {namespace}/{NAME} was denied deletion: {message} (does an admission policy require the {CONFIRM_ANNOTATION} annotation, and could it not be set?)"
    )]
    Denied { namespace: String, message: String },
    #[error(
        "could not take Alive {namespace}/{NAME} out of cvo's management (a ClusterVersion override), so the cvo operator would create it again after its deletion: {message}; nothing was deleted"
    )]
    Unmanage { namespace: String, message: String },
}

/// One finalizer and who set it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Holder {
    pub finalizer: String,
    /// Field managers that own it in `managedFields` (empty when none records it).
    pub set_by: Vec<SetBy>,
}

/// A managedFields entry that owns a finalizer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SetBy {
    pub manager: String,
    pub operation: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time: Option<String>,
}

impl Holder {
    /// `finalizer (set by manager (Update, time), …)`.
    pub fn line(&self) -> String {
        if self.set_by.is_empty() {
            return format!(
                "{} (no managedFields entry records who set it)",
                self.finalizer
            );
        }
        let who: Vec<String> = self
            .set_by
            .iter()
            .map(|s| match &s.time {
                Some(t) => format!("{} ({}, {t})", s.manager, s.operation),
                None => format!("{} ({})", s.manager, s.operation),
            })
            .collect();
        format!("{} (set by {})", self.finalizer, who.join(", "))
    }
}

/// The finalizers of `meta` and, for each, the managedFields entries that own it.
pub fn holders(meta: &ObjectMeta) -> Vec<Holder> {
    let entries: &[ManagedFieldsEntry] = meta.managed_fields.as_deref().unwrap_or(&[]);
    meta.finalizers
        .iter()
        .flatten()
        .map(|f| {
            let key = format!("v:{}", Value::String(f.clone()));
            let set_by = entries
                .iter()
                .filter(|e| {
                    e.fields_v1
                        .as_ref()
                        .and_then(|v| v.0.pointer("/f:metadata/f:finalizers"))
                        .and_then(Value::as_object)
                        .is_some_and(|m| m.contains_key(&key))
                })
                .map(|e| SetBy {
                    manager: e.manager.clone().unwrap_or_default(),
                    operation: e.operation.clone().unwrap_or_default(),
                    time: e.time.as_ref().map(|t| t.0.to_string()),
                })
                .collect();
            Holder {
                finalizer: f.clone(),
                set_by,
            }
        })
        .collect()
}

/// The state of `Alive` and of what teardown must keep.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    pub namespace: String,
    pub name: String,
    /// The object exists.
    pub exists: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    /// Its deletionTimestamp: the deletion was signalled then.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deletion_started: Option<String>,
    /// Seconds since `deletion_started`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deleting_for_seconds: Option<u64>,
    pub confirmed: bool,
    pub finalizers: Vec<Holder>,
    /// Objects annotated `lifecycle.cvo.io/preserve: "true"`: teardown keeps them.
    pub preserved: Vec<Found>,
    /// Kinds that could not be listed when looking for preserved objects (the list may be
    /// incomplete).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub preserved_unlisted: Vec<String>,
}

fn api(client: &Client, namespace: &str) -> Api<Alive> {
    Api::namespaced(client.clone(), namespace)
}

/// `Alive` in `namespace`; `None` when absent. A kind that is not served at all (which a GET
/// cannot tell from an absent object) is [`Error::NotServed`].
async fn get(
    client: &Client,
    namespace: &str,
    retry: &RetryPolicy,
) -> Result<Option<Alive>, Error> {
    let api = api(client, namespace);
    let read = |e| Error::Request {
        what: format!("reading {KIND} {namespace}/{NAME}"),
        source: e,
    };
    match retry.run(|| api.get_opt(NAME)).await {
        Ok(Some(a)) => Ok(Some(a)),
        Ok(None) => match retry
            .run(|| {
                let lp = ListParams::default().limit(1);
                let api = api.clone();
                async move { api.list_metadata(&lp).await }
            })
            .await
        {
            Ok(_) => Ok(None),
            Err((e, _)) if e.code() == Some(404) => Err(Error::NotServed),
            Err((e, _)) => Err(read(e)),
        },
        Err((e, _)) => Err(read(e)),
    }
}

fn status_of(namespace: &str, alive: Option<&Alive>) -> Status {
    let now = jiff::Timestamp::now();
    let started = alive.and_then(|a| a.metadata.deletion_timestamp.as_ref().map(|t| t.0));
    Status {
        namespace: namespace.to_owned(),
        name: NAME.to_owned(),
        exists: alive.is_some(),
        uid: alive.and_then(|a| a.uid()),
        deletion_started: started.map(|t| t.to_string()),
        deleting_for_seconds: started.map(|t| {
            now.duration_since(t)
                .as_secs()
                .max(0)
                .try_into()
                .unwrap_or_default()
        }),
        confirmed: alive.is_some_and(|a| {
            a.annotations().get(CONFIRM_ANNOTATION).map(String::as_str) == Some("true")
        }),
        finalizers: alive.map(|a| holders(&a.metadata)).unwrap_or_default(),
        preserved: Vec::new(),
        preserved_unlisted: Vec::new(),
    }
}

/// Fills in the preserved objects (a scan of every listable kind).
async fn preserved(client: &Client, status: &mut Status, retry: &RetryPolicy) -> Result<(), Error> {
    let scan = scan::objects(
        client,
        None,
        |m| {
            m.annotations
                .as_ref()
                .and_then(|a| a.get(PRESERVE_ANNOTATION))
                .is_some_and(|v| v == "true")
        },
        retry,
    )
    .await
    .map_err(|source| Error::Request {
        what: "discovering the served kinds (to list preserved objects)".into(),
        source,
    })?;
    status.preserved = scan.found;
    status.preserved_unlisted = scan.unlisted;
    Ok(())
}

/// The state of `Alive` in `namespace`, and the preserved objects.
pub async fn status(
    client: &Client,
    namespace: &str,
    retry: &RetryPolicy,
) -> Result<Status, Error> {
    let alive = get(client, namespace, retry).await?;
    let mut st = status_of(namespace, alive.as_ref());
    preserved(client, &mut st, retry).await?;
    Ok(st)
}

/// How a signal ended.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "result", rename_all = "kebab-case")]
pub enum Signalled {
    /// `Alive` is gone: teardown may start.
    Gone { waited_seconds: f64 },
    /// There was no `Alive` object to delete (signalled before, or never created).
    AlreadyGone,
    /// The deadline passed; `Alive` is still held by the finalizers in the status. Nothing was
    /// changed since the DELETE.
    TimedOut { timeout_seconds: f64 },
}

/// Starts the deletion of `Alive` in `namespace` (whose UID is `uid`): marked unmanaged in
/// ClusterVersion's overrides, annotated with [`CONFIRM_ANNOTATION`], then deleted with a UID
/// precondition. An `Alive` gone meanwhile is no error.
async fn start_deletion(
    client: &Client,
    namespace: &str,
    uid: Option<String>,
    retry: &RetryPolicy,
) -> Result<(), Error> {
    let api = api(client, namespace);
    // The release ships Alive: without an override, the cvo operator's next pass would
    // create it again, as if the cluster were not being deleted.
    let id = crate::release::ObjectId::new(GROUP, KIND, Some(namespace), NAME);
    let cluster = crate::cluster::Cluster::new(client.clone());
    if let Err(e) = clusterversion::ensure_unmanaged(&cluster, retry, &id).await {
        return Err(Error::Unmanage {
            namespace: namespace.to_owned(),
            message: e.to_string(),
        });
    }
    let confirm = Patch::Merge(json!({"metadata": {
        "annotations": {CONFIRM_ANNOTATION: "true"},
    }}));
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    };
    match retry.run(|| api.patch(NAME, &params, &confirm)).await {
        Ok(_) => {}
        Err((e, _)) if e.code() == Some(404) => {}
        Err((e, _)) => {
            return Err(Error::Request {
                what: format!("annotating {KIND} {namespace}/{NAME} with {CONFIRM_ANNOTATION}"),
                source: e,
            });
        }
    }
    let params = DeleteParams {
        preconditions: uid.clone().map(|uid| Preconditions {
            uid: Some(uid),
            resource_version: None,
        }),
        ..DeleteParams::background()
    };
    match retry.run(|| api.delete(NAME, &params)).await {
        Ok(_) => Ok(()),
        Err((e, _)) if e.code() == Some(404) => Ok(()),
        Err((RequestError::Kube(kube::Error::Api(s)), _))
            if s.code == 403 || s.code == 422 || s.reason == "Invalid" =>
        {
            Err(Error::Denied {
                namespace: namespace.to_owned(),
                message: s.message,
            })
        }
        Err((e, _)) => Err(Error::Request {
            what: format!("deleting {KIND} {namespace}/{NAME}"),
            source: e,
        }),
    }
}

/// Signals cluster deletion: sets [`CONFIRM_ANNOTATION`], deletes `Alive` (UID
/// precondition) and watches until it is gone or `timeout` passes. `on_deleting` is called
/// once the deletion is under way, with the finalizers that hold it. Returns how it ended and
/// the status as it was at the end (at a timeout: who still holds it).
pub async fn signal(
    client: &Client,
    namespace: &str,
    timeout: Duration,
    retry: &RetryPolicy,
    on_deleting: impl FnOnce(&[Holder]),
) -> Result<(Signalled, Status), Error> {
    let start = tokio::time::Instant::now();
    let api = api(client, namespace);
    let Some(alive) = get(client, namespace, retry).await? else {
        let mut st = status_of(namespace, None);
        preserved(client, &mut st, retry).await?;
        return Ok((Signalled::AlreadyGone, st));
    };
    let uid = alive.uid();
    if alive.metadata.deletion_timestamp.is_none() {
        start_deletion(client, namespace, uid.clone(), retry).await?;
    }
    if let Ok(Some(now)) = retry.run(|| api.get_opt(NAME)).await.map_err(|(e, _)| e) {
        on_deleting(&holders(&now.metadata));
    }
    let uid_gone = uid.clone();
    let remaining = timeout.saturating_sub(start.elapsed());
    let outcome = wait::until(
        &api,
        NAME,
        move |a: Option<&Alive>| a.is_none_or(|a| a.uid() != uid_gone),
        remaining,
    )
    .await;
    let last = match outcome {
        Ok(_) => None,
        Err(_) => get(client, namespace, retry)
            .await?
            .filter(|a| a.uid() == uid),
    };
    let mut st = status_of(namespace, last.as_ref());
    preserved(client, &mut st, retry).await?;
    let result = match last {
        None => Signalled::Gone {
            waited_seconds: start.elapsed().as_secs_f64(),
        },
        Some(_) => Signalled::TimedOut {
            timeout_seconds: timeout.as_secs_f64(),
        },
    };
    Ok((result, st))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holders_name_the_manager_that_set_each_finalizer() {
        let meta: ObjectMeta = serde_json::from_value(json!({
            "name": "cluster",
            "finalizers": ["a.example.com/cleanup", "b.example.com/dns"],
            "managedFields": [
                {"manager": "operator-a", "operation": "Update", "apiVersion": "lifecycle.cvo.io/v1alpha1",
                 "time": "2026-01-01T00:00:00Z", "fieldsType": "FieldsV1",
                 "fieldsV1": {"f:metadata": {"f:finalizers": {".": {}, "v:\"a.example.com/cleanup\"": {}}}}},
                {"manager": "cvo", "operation": "Apply", "apiVersion": "lifecycle.cvo.io/v1alpha1",
                 "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:labels": {}}}}
            ]
        }))
        .unwrap();
        let h = holders(&meta);
        assert_eq!(h.len(), 2);
        assert_eq!(h[0].set_by.len(), 1);
        assert_eq!(h[0].set_by[0].manager, "operator-a");
        assert!(
            h[0].line().contains("operator-a (Update"),
            "{}",
            h[0].line()
        );
        assert!(h[1].set_by.is_empty());
        assert!(
            h[1].line().contains("no managedFields entry"),
            "{}",
            h[1].line()
        );
    }
}
