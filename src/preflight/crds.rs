//! The evidence of `CRDStoredVersionRemoved`: each CRD the release applies is read from the
//! cluster, and every version in its `status.storedVersions` that the release's
//! `spec.versions` no longer has is a version objects may still be stored in. A CRD without
//! that status (not yet reconciled) counts every version of its live spec as stored, as
//! `cvo validate --live` does. A CRD the cluster lacks stores nothing.

use std::fmt;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ApiResource, DynamicObject};
use serde_json::Value;

use crate::apply::RetryPolicy;
use crate::cluster::Cluster;
use crate::release::{DeleteIntent, Release};

/// A CRD of the release that drops versions the cluster stores objects in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dropped {
    pub crd: String,
    pub versions: Vec<String>,
}

impl fmt::Display for Dropped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "CustomResourceDefinition {} drops {} from spec.versions, but the cluster's status.storedVersions lists it",
            self.crd,
            self.versions.join(", ")
        )
    }
}

/// Reads the release's CRDs from the cluster and returns what each drops; `Err` says which
/// CRD could not be read (after `retry`).
pub async fn dropped(
    cluster: &Cluster,
    release: &Release,
    retry: &RetryPolicy,
) -> Result<Vec<Dropped>, String> {
    let resource = ApiResource::erase::<CustomResourceDefinition>(&());
    let api: kube::Api<DynamicObject> = kube::Api::all_with(cluster.client().clone(), &resource);
    let mut out = Vec::new();
    for m in &release.manifests {
        if !m.id.is_crd() || m.intent != DeleteIntent::Apply {
            continue;
        }
        let live = retry
            .run(|| api.get_opt(&m.id.name))
            .await
            .map_err(|(e, _)| format!("reading CustomResourceDefinition {}: {e}", m.id.name))?;
        let Some(live) = live else { continue };
        if let Some(d) = drops(&m.id.name, &stored_versions(&live.data), &m.object) {
            out.push(d);
        }
    }
    Ok(out)
}

/// The versions a live CRD (`object`, as the server serves it) may store objects in: its
/// `status.storedVersions`, or every version of its spec when it has no such status yet (not
/// reconciled): never assumed fewer.
pub fn stored_versions(object: &Value) -> Vec<String> {
    names(object, "/status/storedVersions")
        .or_else(|| names(object, "/spec/versions"))
        .unwrap_or_default()
}

/// The names of a list of strings or of `{name}` objects at `pointer`.
fn names(object: &Value, pointer: &str) -> Option<Vec<String>> {
    let list = object.pointer(pointer)?.as_array()?;
    Some(
        list.iter()
            .filter_map(|v| v.as_str().or_else(|| v.get("name")?.as_str()))
            .map(str::to_owned)
            .collect(),
    )
}

/// The versions of `stored` that the release's CRD (`manifest`) no longer lists.
fn drops(crd: &str, stored: &[String], manifest: &Value) -> Option<Dropped> {
    let kept = names(manifest, "/spec/versions").unwrap_or_default();
    let versions: Vec<String> = stored
        .iter()
        .filter(|s| !kept.contains(s))
        .cloned()
        .collect();
    (!versions.is_empty()).then(|| Dropped {
        crd: crd.to_owned(),
        versions,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_stored_version_the_release_drops_is_named_and_kept_ones_are_not() {
        let manifest = json!({"spec": {"versions": [{"name": "v1"}, {"name": "v2"}]}});
        let stored = ["v1alpha1".to_owned(), "v1".to_owned()];
        let d = drops("widgets.example.com", &stored, &manifest).unwrap();
        assert_eq!(d.versions, ["v1alpha1"]);
        assert_eq!(
            d.to_string(),
            "CustomResourceDefinition widgets.example.com drops v1alpha1 from spec.versions, but the cluster's status.storedVersions lists it"
        );
        assert!(drops("w", &["v2".to_owned()], &manifest).is_none());
        assert_eq!(
            names(&json!({"a": ["x", {"name": "y"}]}), "/a").unwrap(),
            ["x", "y"]
        );
    }
}
