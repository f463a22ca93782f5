//! For operators written in Rust: hold the cluster's deletion until your cleanup is done.
//!
//! [`on_cluster_deletion`] runs a kube-runtime [`Controller`] on the `Alive` object and uses
//! kube-runtime's [`finalizer`](kube::runtime::finalizer()) helper: while `Alive` lives, it
//! makes sure `Alive` carries your finalizer (added under a field manager of the finalizer's
//! name, so `cvo cluster-deletion status` names who set it); once its deletion starts (the provisioner ran
//! `cvo cluster-deletion signal`), it runs your cleanup and removes the finalizer only when the
//! cleanup succeeded. A failed cleanup is retried with backoff; the finalizer stays meanwhile.
//!
//! ```no_run
//! # async fn example(client: kube::Client) -> Result<(), Box<dyn std::error::Error>> {
//! use cvo::lifecycle::finalizer::on_cluster_deletion;
//! on_cluster_deletion(
//!     client,
//!     "cluster-lifecycle",
//!     "widgets.example.com/cloud-resources",
//!     |_alive| async move {
//!         // delete load balancers, DNS records, buckets … outside the cluster
//!         Ok::<(), std::io::Error>(())
//!     },
//!     async { let _ = tokio::signal::ctrl_c().await; },
//! )
//! .await?;
//! # Ok(()) }
//! ```

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::finalizer::{Error as FinalizerError, Event, finalizer};
use kube::runtime::watcher;
use kube::{Api, Client, ResourceExt};

use super::alive::{Alive, NAME};

/// Why the helper stopped.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "the Alive kind (lifecycle.cvo.io/v1alpha1) is not served in namespace {0}: apply the lifecycle component first"
    )]
    NotServed(String),
    #[error("reading Alive objects in namespace {namespace}: {source}")]
    Kube {
        namespace: String,
        #[source]
        source: kube::Error,
    },
}

/// Adds `name` to the finalizers of `alive` with field manager `name`, so that `cvo
/// cluster-deletion status` can say who set it (kube-runtime's helper would add it under the
/// client's User-Agent, often `unknown`). The patch first tests the list it read: a concurrent
/// change makes it fail and the reconcile run again.
async fn add_finalizer(api: &Api<Alive>, alive: &Alive, name: &str) -> Result<Alive, kube::Error> {
    let current = alive.finalizers();
    let patch: json_patch::Patch = serde_json::from_value(if current.is_empty() {
        serde_json::json!([
            {"op": "test", "path": "/metadata/finalizers", "value": null},
            {"op": "add", "path": "/metadata/finalizers", "value": [name]},
        ])
    } else {
        serde_json::json!([
            {"op": "test", "path": "/metadata/finalizers", "value": current},
            {"op": "add", "path": "/metadata/finalizers/-", "value": name},
        ])
    })
    .map_err(kube::Error::SerdeError)?;
    let params = PatchParams {
        field_manager: Some(name.chars().take(128).collect()),
        ..PatchParams::default()
    };
    api.patch(&alive.name_any(), &params, &Patch::Json::<()>(patch))
        .await
}

/// Delay before a failed reconcile (a cleanup error, a conflict) is tried again.
pub const RETRY_AFTER: Duration = Duration::from_secs(2);

/// Holds the `Alive` object in `namespace` with `finalizer_name` and runs `cleanup` once its
/// deletion starts, until `shutdown` resolves (in-flight work finishes first). `cleanup` must be
/// idempotent: it runs again after a failure or a restart.
pub async fn on_cluster_deletion<F, Fut, E>(
    client: Client,
    namespace: &str,
    finalizer_name: &str,
    cleanup: F,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), Error>
where
    F: Fn(Arc<Alive>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), E>> + Send + 'static,
    E: std::error::Error + Send + Sync + 'static,
{
    let api: Api<Alive> = Api::namespaced(client, namespace);
    if let Err(e) = api.list_metadata(&Default::default()).await {
        return Err(match e {
            kube::Error::Api(s) if s.code == 404 => Error::NotServed(namespace.to_owned()),
            source => Error::Kube {
                namespace: namespace.to_owned(),
                source,
            },
        });
    }
    struct Ctx<F> {
        api: Api<Alive>,
        finalizer: String,
        cleanup: F,
    }
    let ctx = Arc::new(Ctx {
        api: api.clone(),
        finalizer: finalizer_name.to_owned(),
        cleanup,
    });
    let config = watcher::Config::default().fields(&format!("metadata.name={NAME}"));
    // The controller wants a shutdown future it can share: relay `shutdown` through a channel.
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let relay = tokio::spawn(async move {
        shutdown.await;
        let _ = tx.send(());
    });
    Controller::new(api, config)
        .graceful_shutdown_on(async move {
            let _ = rx.await;
        })
        .run(
            |alive: Arc<Alive>, ctx: Arc<Ctx<F>>| async move {
                if alive.metadata.deletion_timestamp.is_none()
                    && !alive.finalizers().iter().any(|f| *f == ctx.finalizer)
                {
                    add_finalizer(&ctx.api, &alive, &ctx.finalizer)
                        .await
                        .map_err(FinalizerError::AddFinalizer)?;
                    return Ok(Action::await_change());
                }
                finalizer(&ctx.api, &ctx.finalizer, alive, |event| async {
                    match event {
                        Event::Apply(_) => Ok::<_, E>(Action::await_change()),
                        Event::Cleanup(alive) => {
                            (ctx.cleanup)(alive).await?;
                            Ok(Action::await_change())
                        }
                    }
                })
                .await
            },
            |_alive, error: &FinalizerError<E>, _ctx| {
                tracing::warn!(%error, "Alive finalizer: retrying");
                Action::requeue(RETRY_AFTER)
            },
            ctx,
        )
        .for_each(|_| async {})
        .await;
    relay.abort();
    Ok(())
}
