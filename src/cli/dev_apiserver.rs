//! `cvo dev-apiserver`: the embedded in-memory API server over plain HTTP on loopback, for
//! kubectl and `cvo` in another process.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use memory_apiserver::{Config, MemoryServer, serve_with_kubeconfig};

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

pub fn run(args: &DevApiserverArgs) -> ExitCode {
    if !args.listen.ip().is_loopback() {
        stderr_line!(
            "error: refusing to listen on {}: the in-memory API server has no authentication; use a loopback address such as 127.0.0.1",
            args.listen
        );
        return ExitCode::from(super::EXIT_INPUT);
    }
    let runtime = match super::runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    if let Some(path) = &args.kubeconfig_out {
        stderr_line!(
            "kubeconfig: {} (kubectl --kubeconfig {0} get ns)",
            path.display()
        );
    }
    stderr_line!("in-memory API server on http://{}", args.listen);
    runtime.block_on(async {
        let serving = serve_with_kubeconfig(
            MemoryServer::start(Config::default()),
            args.listen,
            args.kubeconfig_out.as_deref(),
        );
        tokio::select! {
            result = serving => match result {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    stderr_line!("error: serving on {}: {e}", args.listen);
                    ExitCode::FAILURE
                }
            },
            () = super::shutdown_signal() => ExitCode::SUCCESS,
        }
    })
}
