//! A complete operator that holds the cluster's deletion until it has cleaned up outside the
//! cluster (docs/cluster-deletion.md): `cargo run --example alive_operator` against the
//! kubeconfig cluster (with the `cluster-lifecycle` component of manifests-example applied).

use std::sync::Arc;

use cvo::lifecycle::alive::Alive;
use cvo::lifecycle::finalizer::on_cluster_deletion;

/// What cleaning up can fail with; the finalizer stays and the cleanup is retried.
#[derive(Debug, thiserror::Error)]
#[error("deleting load balancer {0}: {1}")]
struct CleanupError(String, String);

/// Deletes the cloud load balancers this operator created. Idempotent: deleting one that is
/// already gone is success.
async fn delete_load_balancers(_alive: Arc<Alive>) -> Result<(), CleanupError> {
    for lb in ["widgets-public", "widgets-internal"] {
        // cloud.delete_load_balancer(lb).await.map_err(|e| CleanupError(lb.into(), e.to_string()))?;
        println!("deleted load balancer {lb}");
    }
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let client = kube::Client::try_default().await?;
    on_cluster_deletion(
        client,
        "cluster-lifecycle",                  // where Alive lives
        "widgets.example.com/load-balancers", // your finalizer: <your domain>/<what>
        delete_load_balancers,
        async {
            let _ = tokio::signal::ctrl_c().await; // stop gracefully
        },
    )
    .await?;
    Ok(())
}
