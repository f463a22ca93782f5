//! The node tier: `cvo operator` run as users deploy it — the image the `Dockerfile`'s final
//! stage describes, installed by `cvo apply --release manifests-example` as docs/operator.md
//! says — as a Pod on a real node (`../shared/realk8s/start-node.sh`: containerd, runc,
//! kubelet, kube-scheduler), then checked from outside as an administrator would: probes,
//! events, logs, ClusterVersion, drift repair, API-server outages while the pod runs and while
//! it starts, the self-update to a least-privilege release, and a 5,000-manifest release within
//! the Deployment's memory limit.
//!
//! The steps share one cluster and run in order, one at a time, each a named test (this
//! binary's own harness, libtest-mimic: `cargo test --test node -- --list`). A step whose
//! prerequisite failed fails too, saying which (never a pass). It needs a **fresh** real
//! control plane with a node and the release binary:
//!
//! ```sh
//! cargo build --release --locked            # the image's binary: target/release/cvo
//! eval "$(../shared/realk8s/start.sh)"; eval "$(../shared/realk8s/start-node.sh)"
//! CVO_TEST_KUBECONFIG=$KUBECONFIG cargo test --test node
//! ../shared/realk8s/stop-node.sh; ../shared/realk8s/stop.sh --clean
//! ```
//!
//! Without a real cluster (`CVO_TEST_KUBECONFIG`) or a node (`CONTAINERD_ADDRESS` and
//! `REALNODE_BIN` from start-node.sh), every step is reported as ignored, and why is printed
//! once; run with `--include-ignored` there, every step fails saying why (never a pass). A
//! missing or stale `target/release/cvo` is a failure, not a skip. `CVO_NODE_BINARY=PATH` puts
//! another build of the same source in the image (`.ci/run`: the test build's, unoptimised).
//!
//! The widget operator's image is a stand-in: this very binary, which with `CVO_NODE_STANDIN`
//! set runs until SIGTERM and exits 0 (or exits after `--exit-after=SECONDS`).

#[path = "../common/mod.rs"]
mod common;
mod pods;
mod standin;
mod steps;

use std::path::{Path, PathBuf};

use libtest_mimic::{Arguments, Failed, Trial};

fn main() {
    if std::env::var_os(standin::ENV).is_some() {
        standin::run();
        return;
    }
    let mut args = Arguments::from_args();
    // One cluster, one operator: the steps run in order, one at a time.
    args.test_threads = Some(1);
    let tier = Tier::from_env().map(std::sync::Arc::new);
    if let Err(why) = &tier {
        eprintln!(
            "the node tier's {} steps are ignored: {why}",
            steps::STEPS.len()
        );
    }
    let trials = steps::STEPS
        .iter()
        .map(|step| {
            let tier = tier.clone();
            let ignored = tier.is_err();
            let trial = Trial::test(step.name, move || match tier {
                Ok(tier) => tier.run(step),
                Err(why) => Err(why.into()),
            });
            trial.with_ignored_flag(ignored)
        })
        .collect();
    libtest_mimic::run(&args, trials).exit();
}

/// What every step shares: the cluster, the node, and what earlier steps left.
pub struct Tier {
    rt: tokio::runtime::Runtime,
    pub client: kube::Client,
    pub kubeconfig: PathBuf,
    /// `ctr` of the node and its containerd socket, for `image.py --import`.
    pub ctr: PathBuf,
    pub containerd: String,
    /// `../shared/realk8s` (start.sh, fault.sh, image.py).
    pub realk8s: PathBuf,
    /// The binary the image holds: `target/release/cvo`, as the Dockerfile's build stage
    /// builds it, or the one `CVO_NODE_BINARY` names (`.ci/run` gives the test build's
    /// `target/debug/cvo`: see there why).
    pub cvo_release: PathBuf,
    /// Release directories and image tarballs of this run.
    pub work: tempfile::TempDir,
    /// The steps that passed so far.
    passed: common::steps::Passed,
}

impl Tier {
    /// The tier when a real cluster with a node is at hand; otherwise why its steps are
    /// ignored.
    fn from_env() -> Result<Tier, String> {
        let kubeconfig = std::env::var_os(common::KUBECONFIG_ENV)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .ok_or("needs a real control plane with a node: CVO_TEST_KUBECONFIG unset (see tests/node/main.rs)")?;
        let (Some(bin), Some(containerd)) = (
            std::env::var_os("REALNODE_BIN").filter(|v| !v.is_empty()),
            std::env::var("CONTAINERD_ADDRESS")
                .ok()
                .filter(|v| !v.is_empty()),
        ) else {
            return Err(
                "no node: REALNODE_BIN and CONTAINERD_ADDRESS unset (eval \"$(../shared/realk8s/start-node.sh)\")"
                    .to_owned(),
            );
        };
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        let config = rt
            .block_on(kube::Config::from_custom_kubeconfig(
                kube::config::Kubeconfig::read_from(&kubeconfig).map_err(|e| e.to_string())?,
                &kube::config::KubeConfigOptions::default(),
            ))
            .map_err(|e| e.to_string())?;
        let client = {
            let _guard = rt.enter();
            kube::Client::try_from(config).map_err(|e| e.to_string())?
        };
        let root = Path::new(common::dockerfile::ROOT);
        let realk8s = std::env::var_os("CVO_TEST_REALK8S_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| root.join("../shared/realk8s"));
        Ok(Tier {
            rt,
            client,
            kubeconfig,
            ctr: PathBuf::from(bin).join("ctr"),
            containerd,
            realk8s,
            cvo_release: std::env::var_os(NODE_BINARY_ENV)
                .filter(|v| !v.is_empty())
                .map_or_else(|| target_dir().join("release/cvo"), PathBuf::from),
            work: tempfile::tempdir().map_err(|e| e.to_string())?,
            passed: common::steps::Passed::default(),
        })
    }

    /// Runs `step` (a panic is its failure), unless a step it needs did not pass.
    fn run(&self, step: &'static steps::Step) -> Result<(), Failed> {
        self.passed.run(&self.rt, self, step)
    }

    /// Runs `cvo ARGS…` (the test build) against the cluster: exit code, stdout, stderr.
    pub async fn cvo(&self, args: &[&str]) -> (i32, String, String) {
        common::run_cvo(&self.kubeconfig, args).await
    }
}

/// Names the binary the operator's image holds instead of `target/release/cvo`.
const NODE_BINARY_ENV: &str = "CVO_NODE_BINARY";

/// Cargo's target directory: this binary is `<target>/<profile>/deps/node-…`.
fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    exe.ancestors()
        .nth(3)
        .expect("<target>/<profile>/deps/<test>")
        .to_owned()
}
