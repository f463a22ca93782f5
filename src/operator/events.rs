//! Kubernetes Events the operator publishes (events.k8s.io/v1, through kube-runtime's
//! `Recorder`), for what an administrator should see in `kubectl describe` / `kubectl events`
//! without reading the operator's logs. Publishing is best effort: a failure is logged, never
//! fatal.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};

use crate::cluster::Cluster;
use crate::release::{Manifest, ObjectId};

/// The reporting controller of every event.
pub const CONTROLLER: &str = "cvo-operator";

/// The object of a delete manifest exists again after the deletion record saw it deleted; the
/// pass deleted it again. The event is about that object (`kubectl describe` shows it there).
pub async fn reappeared(cluster: &Cluster, manifest: &Manifest) {
    let reference = reference(&manifest.api_version, &manifest.id);
    let event = Event {
        type_: EventType::Warning,
        reason: "DeletedObjectReappeared".to_owned(),
        note: Some(format!(
            "{} exists again although cvo had deleted it (its release ships a delete manifest, {}); it was deleted again",
            manifest.id, manifest.location
        )),
        action: "Delete".to_owned(),
        secondary: None,
    };
    let recorder = Recorder::new(cluster.client().clone(), Reporter::from(CONTROLLER));
    if let Err(e) = recorder.publish(&event, &reference).await {
        tracing::warn!(object = %manifest.id, error = %e, "could not publish an Event");
    }
}

fn reference(api_version: &str, id: &ObjectId) -> ObjectReference {
    ObjectReference {
        api_version: Some(api_version.to_owned()),
        kind: Some(id.kind.clone()),
        namespace: id.namespace.clone(),
        name: Some(id.name.clone()),
        ..Default::default()
    }
}
