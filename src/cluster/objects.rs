//! [`Cluster`]: one client plus its discovery cache, and the single-request verbs the apply
//! engine needs — get, server-side apply (field manager [`FIELD_MANAGER`], `force`), delete
//! with `propagationPolicy: Background`.

use std::sync::Arc;

use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, Preconditions};
use kube::{Client, ResourceExt};

use super::discovery::{Discovery, Resolved};

/// The server-side apply field manager of every write `cvo` makes.
pub const FIELD_MANAGER: &str = "cvo";

/// A connection to one API server (cheap to clone).
#[derive(Clone)]
pub struct Cluster {
    client: Client,
    discovery: Arc<Discovery>,
}

/// What a DELETE answered.
#[derive(Clone, Debug, PartialEq)]
pub enum DeleteOutcome {
    /// The object is gone.
    Deleted,
    /// The object stays with a deletionTimestamp until these finalizers are removed.
    Pending {
        finalizers: Vec<String>,
        /// The object's deletionTimestamp.
        since: Option<jiff::Timestamp>,
    },
}

impl Cluster {
    pub fn new(client: Client) -> Self {
        Cluster {
            discovery: Arc::new(Discovery::new(client.clone())),
            client,
        }
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    pub fn discovery(&self) -> &Discovery {
        &self.discovery
    }

    /// The dynamic API of `resolved` in `namespace` (the client's default namespace when a
    /// namespaced object names none; ignored for cluster-scoped kinds).
    pub fn api(&self, resolved: &Resolved, namespace: Option<&str>) -> Api<DynamicObject> {
        match (resolved.namespaced, namespace) {
            (true, Some(ns)) => Api::namespaced_with(self.client.clone(), ns, &resolved.resource),
            (true, None) => Api::default_namespaced_with(self.client.clone(), &resolved.resource),
            (false, _) => Api::all_with(self.client.clone(), &resolved.resource),
        }
    }

    /// GET; `Ok(None)` on 404.
    pub async fn get(
        &self,
        resolved: &Resolved,
        namespace: Option<&str>,
        name: &str,
    ) -> kube::Result<Option<DynamicObject>> {
        self.api(resolved, namespace).get_opt(name).await
    }

    /// Server-side apply of `object` (field manager `cvo`, force); `dry_run` sends
    /// `dryRun=All` and writes nothing.
    pub async fn apply(
        &self,
        resolved: &Resolved,
        namespace: Option<&str>,
        name: &str,
        object: &serde_json::Value,
        dry_run: bool,
    ) -> kube::Result<DynamicObject> {
        let mut params = PatchParams::apply(FIELD_MANAGER).force();
        if dry_run {
            params = params.dry_run();
        }
        self.api(resolved, namespace)
            .patch(name, &params, &Patch::Apply(object))
            .await
    }

    /// DELETE with `propagationPolicy: Background` (a Job deleted without a policy would
    /// orphan its pods) and, given `uid`, a uid precondition: the object deleted is the one
    /// that was read, not one recreated under the same name since (409 Conflict otherwise).
    /// 404 and 409 are returned as errors for the caller to classify.
    pub async fn delete(
        &self,
        resolved: &Resolved,
        namespace: Option<&str>,
        name: &str,
        uid: Option<&str>,
        dry_run: bool,
    ) -> kube::Result<DeleteOutcome> {
        let mut params = DeleteParams::background();
        if let Some(uid) = uid {
            params.preconditions = Some(Preconditions {
                uid: Some(uid.to_owned()),
                resource_version: None,
            });
        }
        if dry_run {
            params = params.dry_run();
        }
        let answer = self.api(resolved, namespace).delete(name, &params).await?;
        Ok(match answer.left() {
            Some(obj)
                if obj.metadata.deletion_timestamp.is_some() && !obj.finalizers().is_empty() =>
            {
                DeleteOutcome::Pending {
                    finalizers: obj.finalizers().to_vec(),
                    since: obj.metadata.deletion_timestamp.as_ref().map(|t| t.0),
                }
            }
            _ => DeleteOutcome::Deleted,
        })
    }
}
