//! `cvo operand-cleanup`: run the OLM CSV operand-cleanup reconciler until SIGINT/SIGTERM.

#[cfg(feature = "in-memory")]
use std::net::SocketAddr;

use clap::Args;

use super::{CliError, GlobalArgs};
use crate::exit::Exit;

#[derive(Debug, Args)]
pub struct OperandCleanupArgs {
    /// Watch ClusterServiceVersions of this namespace only (safety checks still look at the
    /// whole cluster).
    #[arg(long, short = 'n', value_name = "NS")]
    pub namespace: Option<String>,
    /// Run against a fresh embedded API server with OLM's CRDs installed, instead of the
    /// kubeconfig cluster.
    #[cfg(feature = "in-memory")]
    #[arg(long)]
    pub in_memory: bool,
    /// With --in-memory: also serve that server on this loopback address, so kubectl can
    /// create CSVs while the reconciler runs (see `cvo dev-apiserver`).
    #[cfg(feature = "in-memory")]
    #[arg(long, value_name = "ADDR:PORT", requires = "in_memory")]
    pub listen: Option<SocketAddr>,
}

pub fn run(global: &GlobalArgs, args: &OperandCleanupArgs) -> Result<Exit, CliError> {
    #[cfg(feature = "in-memory")]
    if let Some(addr) = args.listen
        && !addr.ip().is_loopback()
    {
        return Err(CliError::usage(format_args!(
            "refusing to listen on {addr}: use a loopback address such as 127.0.0.1"
        )));
    }
    let runtime = super::runtime()?;
    runtime.block_on(async {
        let client = client(global, args).await?;
        tracing::info!(namespace = ?args.namespace, "operand-cleanup reconciler starting");
        crate::olm::run(client, args.namespace.clone(), super::shutdown_signal())
            .await
            .map_err(CliError::failed)?;
        Ok(Exit::Success)
    })
}

/// The kubeconfig cluster's client, or with `--in-memory` a fresh embedded server's.
#[cfg_attr(not(feature = "in-memory"), allow(unused_variables))]
async fn client(global: &GlobalArgs, args: &OperandCleanupArgs) -> Result<kube::Client, CliError> {
    #[cfg(feature = "in-memory")]
    if args.in_memory {
        return in_memory(args.listen, global.console).await;
    }
    super::kube_client(global).await
}

/// A fresh embedded server with OLM's CRDs, also served on `listen` if given.
#[cfg(feature = "in-memory")]
async fn in_memory(
    listen: Option<SocketAddr>,
    console: super::Console,
) -> Result<kube::Client, CliError> {
    use memory_apiserver::{Config, MemoryServer, serve};

    let server = MemoryServer::start(Config::default());
    crate::dev::olm_crds::install(&server.client())
        .await
        .map_err(|e| {
            CliError::failed(format_args!(
                "installing OLM CRDs in the in-memory server: {e}"
            ))
        })?;
    if let Some(addr) = listen {
        let serving = server.clone();
        tokio::spawn(async move {
            if let Err(e) = serve(serving, addr).await {
                say!(console, error, "serving on {addr}: {e}");
            }
        });
        say!(console, line { %addr }, "in-memory API server with OLM CRDs on http://{addr}");
    }
    Ok(server.client())
}
