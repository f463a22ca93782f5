//! `cvo operand-cleanup`: run the OLM CSV operand-cleanup reconciler until SIGINT/SIGTERM.

#[cfg(feature = "in-memory")]
use std::net::SocketAddr;
use std::process::ExitCode;

use clap::Args;

use super::GlobalArgs;

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

pub fn run(global: &GlobalArgs, args: &OperandCleanupArgs) -> ExitCode {
    #[cfg(feature = "in-memory")]
    if let Some(addr) = args.listen
        && !addr.ip().is_loopback()
    {
        stderr_line!(
            "error: refusing to listen on {addr}: use a loopback address such as 127.0.0.1"
        );
        return ExitCode::from(super::EXIT_INPUT);
    }
    let runtime = match super::runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    runtime.block_on(async {
        let client = match client(global, args).await {
            Ok(c) => c,
            Err(code) => return code,
        };
        tracing::info!(namespace = ?args.namespace, "operand-cleanup reconciler starting");
        match crate::olm::run(client, args.namespace.clone(), super::shutdown_signal()).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                stderr_line!("error: {e}");
                ExitCode::FAILURE
            }
        }
    })
}

/// The kubeconfig cluster's client, or with `--in-memory` a fresh embedded server's.
#[cfg_attr(not(feature = "in-memory"), allow(unused_variables))]
async fn client(global: &GlobalArgs, args: &OperandCleanupArgs) -> Result<kube::Client, ExitCode> {
    #[cfg(feature = "in-memory")]
    if args.in_memory {
        return in_memory(args.listen).await;
    }
    super::kube_client(global).await.map_err(|e| e.report())
}

/// A fresh embedded server with OLM's CRDs, also served on `listen` if given.
#[cfg(feature = "in-memory")]
async fn in_memory(listen: Option<SocketAddr>) -> Result<kube::Client, ExitCode> {
    use memory_apiserver::{Config, MemoryServer, serve};

    let server = MemoryServer::start(Config::default());
    if let Err(e) = crate::dev::olm_crds::install(&server.client()).await {
        stderr_line!("error: installing OLM CRDs in the in-memory server: {e}");
        return Err(ExitCode::FAILURE);
    }
    if let Some(addr) = listen {
        let serving = server.clone();
        tokio::spawn(async move {
            if let Err(e) = serve(serving, addr).await {
                stderr_line!("error: serving on {addr}: {e}");
            }
        });
        stderr_line!("in-memory API server with OLM CRDs on http://{addr}");
    }
    Ok(server.client())
}
