//! The stand-in for an operator image that is not this project's (manifests-example's widget
//! operator), and the init container that holds a pod's start: this test binary, run in a
//! pod with [`ENV`] set. It accepts any arguments, runs until SIGTERM or SIGINT and exits 0,
//! as a well-behaved controller does; with `--exit-after=SECONDS` it exits 0 after that long.

use std::time::Duration;

/// Set in the stand-in image: run as the stand-in, not as the test harness.
pub const ENV: &str = "CVO_NODE_STANDIN";

pub fn run() {
    let exit_after = std::env::args()
        .find_map(|a| a.strip_prefix("--exit-after=").map(str::to_owned))
        .map(|s| s.parse::<u64>().expect("--exit-after=SECONDS"));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("SIGTERM handler");
        let timer = async {
            match exit_after {
                Some(seconds) => tokio::time::sleep(Duration::from_secs(seconds)).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = term.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
            () = timer => {}
        }
    });
}
