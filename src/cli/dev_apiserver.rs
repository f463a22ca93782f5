//! `cvo dev-apiserver`: the embedded in-memory API server over plain HTTP on loopback, for
//! kubectl and `cvo` in another process.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Args;

use memory_apiserver::{Config, MemoryServer, serve_with_kubeconfig};

use super::CliError;
use crate::exit::Exit;

#[derive(Debug, Args)]
pub struct DevApiserverArgs {
    /// Loopback address to listen on (non-loopback addresses are refused: the server has no
    /// authentication).
    #[arg(long, value_name = "ADDR:PORT", default_value = "127.0.0.1:8001")]
    pub listen: SocketAddr,
    /// Write a kubeconfig for this server to FILE (use it with `kubectl --kubeconfig FILE`);
    /// with port 0 it names the port actually bound.
    #[arg(long, value_name = "FILE")]
    pub kubeconfig_out: Option<PathBuf>,
}

pub fn run(args: &DevApiserverArgs, console: super::Console) -> Result<Exit, CliError> {
    if !args.listen.ip().is_loopback() {
        return Err(CliError::usage(format_args!(
            "refusing to listen on {}: the in-memory API server has no authentication; use a loopback address such as 127.0.0.1",
            args.listen
        )));
    }
    let runtime = super::runtime()?;
    if let Some(path) = &args.kubeconfig_out {
        let path = path.display();
        say!(console, line { kubeconfig = %path }, "kubeconfig: {path} (kubectl --kubeconfig {path} get ns)");
    }
    let addr = args.listen;
    say!(console, line { %addr }, "in-memory API server on http://{addr}");
    runtime.block_on(async {
        let serving = serve_with_kubeconfig(
            MemoryServer::start(Config::default()),
            args.listen,
            args.kubeconfig_out.as_deref(),
        );
        tokio::select! {
            result = serving => match result {
                Ok(()) => Ok(Exit::Success),
                Err(e) => Err(CliError::failed(format_args!("serving on {}: {e}", args.listen))),
            },
            () = super::shutdown_signal() => Ok(Exit::Success),
        }
    })
}
