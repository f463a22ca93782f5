//! `--components operand-cleanup`: the OLM operand-cleanup reconciler ([`crate::olm`], the one
//! `cvo operand-cleanup` runs) in the operator's process, under its leadership: it runs only
//! while this instance holds the Lease, stops at once when the Lease is lost (the caller drops
//! it), and on shutdown gets the same grace period as a pass in flight.
//!
//! The reconciler fails fast when OLM's ClusterServiceVersion type is not served (OLM not
//! installed yet; a release may install it): it is started again after
//! [`Backoff::RECONCILER_RESTART`] (10 s, doubling up to 5 min), for as long as the operator
//! leads.

use std::time::Duration;

use tokio::sync::watch;

use crate::retry::Backoff;

/// Runs the reconciler with `config` until `stop` turns true (in-flight reconciles get
/// `grace` to finish), starting it again after errors. `leading` turning false (the Lease
/// lost) also ends it; the caller drops this future at once then, and the reconciler's
/// shutdown signal must not outlive it.
pub async fn run_while_leading(
    client: kube::Client,
    config: crate::olm::Config,
    stop: watch::Receiver<bool>,
    leading: watch::Receiver<bool>,
    grace: Duration,
) {
    let mut delays = Backoff::RECONCILER_RESTART.delays();
    let mut stopped = stop.clone();
    loop {
        let (mut signal, mut lost) = (stop.clone(), leading.clone());
        let shutdown = async move {
            tokio::select! {
                _ = signal.wait_for(|s| *s) => {}
                _ = lost.wait_for(|l| !*l) => {}
            }
        };
        let reconciler = crate::olm::run_with_config(client.clone(), config.clone(), shutdown);
        let delay = match super::shutdown::until_stopped(reconciler, &mut stopped, grace).await {
            Err(_) | Ok(Ok(())) => return,
            Ok(Err(e)) => {
                let delay = delays.next_wait();
                tracing::warn!(error = %e, retry_in = ?delay, "operand-cleanup reconciler not running; starting it again later");
                delay
            }
        };
        tokio::select! {
            _ = stopped.wait_for(|s| *s) => return,
            () = tokio::time::sleep(delay) => {}
        }
    }
}
