//! Finding objects of every kind the server serves: discovery of all groups, then a
//! metadata-only list of each listable resource (a Secret's data is never fetched).
//!
//! Used where a question is about the whole cluster — which objects still carry OLM's
//! `operators.coreos.com/<operator>` label, which objects are annotated
//! `lifecycle.cvo.io/preserve: "true"`. A kind that cannot be listed is reported in
//! [`Scan::unlisted`], never silently skipped: the caller decides what an incomplete answer
//! means (fail closed). A kind the server stopped serving since discovery (404) has no objects
//! left, and is skipped.

use std::collections::BTreeSet;

use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use kube::core::ObjectMeta;
use kube::discovery::{Discovery, Scope, verbs};
use kube::{Client, ResourceExt};
use serde::Serialize;

use crate::cluster::list;
use crate::cluster::retry::{RequestError, RetryPolicy};

/// One object found, by its metadata.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Found {
    pub api_version: String,
    pub kind: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub name: String,
    #[serde(skip)]
    pub uid: Option<String>,
    /// UIDs of its owners (ownerReferences).
    #[serde(skip)]
    pub owners: Vec<String>,
    /// Has a deletionTimestamp.
    #[serde(skip)]
    pub deleting: bool,
    #[serde(skip)]
    pub resource: ApiResourceKey,
}

/// How to address the kind of a [`Found`] again (plural and scope).
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct ApiResourceKey {
    pub group: String,
    pub version: String,
    pub kind: String,
    pub plural: String,
    pub namespaced: bool,
}

impl ApiResourceKey {
    pub fn api_resource(&self) -> ApiResource {
        ApiResource {
            group: self.group.clone(),
            version: self.version.clone(),
            api_version: if self.group.is_empty() {
                self.version.clone()
            } else {
                format!("{}/{}", self.group, self.version)
            },
            kind: self.kind.clone(),
            plural: self.plural.clone(),
        }
    }
}

impl Found {
    /// `Kind ns/name` or `Kind name`, for messages.
    pub fn describe(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{} {ns}/{}", self.kind, self.name),
            None => format!("{} {}", self.kind, self.name),
        }
    }
}

/// What a scan found, and the kinds it could not list.
#[derive(Clone, Debug, Default)]
pub struct Scan {
    pub found: Vec<Found>,
    /// `kind (group/version): error` for each kind whose list failed.
    pub unlisted: Vec<String>,
}

/// Every served group. A group removed while discovery reads the groups one by one (a CRD
/// deleted meanwhile) fails the whole discovery with 404: it is asked again, waiting as the
/// retry policy says between attempts (a busy server lists a deleted CRD's group for a while
/// after the group stops answering), until the policy's attempts are spent.
async fn discover(client: &Client, retry: &RetryPolicy) -> Result<Discovery, RequestError> {
    let mut attempt = 1;
    loop {
        match retry.run(|| Discovery::new(client.clone()).run()).await {
            Ok(d) => return Ok(d),
            Err((e, _)) if e.code() == Some(404) && attempt < retry.attempts => {
                tracing::debug!(error = %e, "a group vanished during discovery; asking again");
                tokio::time::sleep(retry.delay(attempt)).await;
                attempt += 1;
            }
            Err((e, _)) => return Err(e),
        }
    }
}

/// Lists the metadata of every object of every listable kind (with `label_selector`, when
/// given) and keeps those `keep` accepts. Discovery failing as a whole is an error; one kind
/// failing is recorded in [`Scan::unlisted`].
pub async fn objects(
    client: &Client,
    label_selector: Option<&str>,
    keep: impl Fn(&ObjectMeta) -> bool,
    retry: &RetryPolicy,
) -> Result<Scan, RequestError> {
    let discovery = discover(client, retry).await?;
    let mut lp = ListParams::default();
    if let Some(sel) = label_selector {
        lp = lp.labels(sel);
    }
    let mut scan = Scan::default();
    let mut seen = BTreeSet::new();
    for group in discovery.groups() {
        for (ar, caps) in group.recommended_resources() {
            if !caps.supports_operation(verbs::LIST) {
                continue;
            }
            let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
            let metas = match list::all_metadata(&api, &lp, retry).await {
                Ok(m) => m,
                // No longer served since discovery (a CRD deleted meanwhile: it stops being
                // served only once its objects are gone): none of it exists.
                Err(e) if e.code() == Some(404) => continue,
                Err(e) => {
                    scan.unlisted
                        .push(format!("{} ({}): {e}", ar.kind, ar.api_version));
                    continue;
                }
            };
            let key = ApiResourceKey {
                group: ar.group.clone(),
                version: ar.version.clone(),
                kind: ar.kind.clone(),
                plural: ar.plural.clone(),
                namespaced: caps.scope == Scope::Namespaced,
            };
            for m in metas {
                if !keep(&m.metadata) {
                    continue;
                }
                // One object served under two groups (core and events.k8s.io Events) once.
                if let Some(uid) = &m.metadata.uid
                    && !seen.insert(uid.clone())
                {
                    continue;
                }
                scan.found.push(Found {
                    api_version: ar.api_version.clone(),
                    kind: ar.kind.clone(),
                    namespace: m.metadata.namespace.clone(),
                    name: m.name_any(),
                    uid: m.metadata.uid.clone(),
                    owners: m
                        .metadata
                        .owner_references
                        .iter()
                        .flatten()
                        .map(|o| o.uid.clone())
                        .collect(),
                    deleting: m.metadata.deletion_timestamp.is_some(),
                    resource: key.clone(),
                });
            }
        }
    }
    scan.found.sort();
    Ok(scan)
}
