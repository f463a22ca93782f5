//! The state a previous release would have left on a fresh in-memory server, so that `cvo
//! apply --in-memory` shows real deletions. A CLI convenience: it drives the engine from the
//! outside and is no part of it.

use crate::apply::{Applier, Options, run_level_graph, run_pass};
use crate::cluster::Cluster;
use crate::release::{ObjectId, Release};

/// Creates what a previous release would have left behind: every object the release deletes
/// (its delete manifest turned into an ordinary one, finalizers included), with the release's
/// Namespace and CRD manifests those objects need, so that the next sync has real deletions to
/// do and still creates everything else. Used by `cvo apply --in-memory` on its fresh server;
/// the results are not reported and failures are ignored (a delete manifest may carry only the
/// object's identity, which not every kind accepts).
pub async fn previous_state(cluster: &Cluster, release: &Release, parallelism: usize) {
    let deleted: Vec<&ObjectId> = release
        .manifests
        .iter()
        .filter(|m| m.is_delete())
        .map(|m| &m.id)
        .collect();
    let needed = |m: &crate::release::Manifest| {
        deleted.iter().any(|d| {
            **d == m.id
                || (m.id.group.is_empty()
                    && m.id.kind == "Namespace"
                    && d.namespace.as_deref() == Some(m.id.name.as_str()))
                || (m.id.is_crd()
                    && m.object["spec"]["group"] == d.group.as_str()
                    && m.object["spec"]["names"]["kind"] == d.kind.as_str())
        })
    };
    let mut previous = release.clone();
    previous.manifests.retain(|m| needed(m));
    for m in &mut previous.manifests {
        if m.is_delete() {
            m.intent = crate::release::DeleteIntent::Apply;
            if let Some(a) = std::sync::Arc::make_mut(&mut m.object)
                .pointer_mut("/metadata/annotations")
                .and_then(|a| a.as_object_mut())
            {
                a.remove(crate::release::DELETE_ANNOTATION);
            }
        }
    }
    let applier = Applier::new(cluster.clone(), &previous, Options::default());
    let graph = std::sync::Arc::new(run_level_graph(&previous));
    // A failed seed must not keep the others from being seeded: keep going past failures.
    let (report, _) = run_pass(&applier, &graph, parallelism, Some(None), |_| {}).await;
    for r in report.failed() {
        tracing::debug!(manifest = %previous.manifests[r.index].id, error = ?r.error, "seeding failed");
    }
}
