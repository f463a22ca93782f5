//! The fleet tier: `cvo fleet` on real Open Cluster Management (`../shared/ocm`: OCM v1.3's
//! hub controllers and klusterlet agents as processes) over four real control planes
//! (`../shared/realk8s`): a hub and three managed clusters, `c1` in decision group `canary` and
//! `c2` in `rest` (the Placement of `../shared/ocm/examples/placement-waves.yaml`), and `c3`
//! (label `wave=pods`, its own Placement `fleet/pods`) with a real node
//! (`../shared/realk8s/start-node.sh`). On `c1` and `c2` the update is done by a real `cvo
//! operator` process; on `c3` by the operator's Pod that `cvo fleet install` put there, from
//! an image built with `image.py`, as users deploy it. Each pulls the release from a real
//! registry (Debian's docker-registry; `c3`'s listens on its node's pod bridge, which its pods
//! reach) and verifies its signature.
//!
//! The steps share the hub and the clusters and run in order, one at a time, each a named test
//! (this binary's own harness, libtest-mimic: `cargo test --test fleet -- --list`); a step
//! whose prerequisite failed fails too, saying which. The harness starts everything itself
//! (about 35 s) and stops it at the end:
//!
//! ```sh
//! cargo test --test fleet -- --include-ignored
//! ```
//!
//! Without `--ignored`/`--include-ignored` every step is reported as ignored (a plain `cargo
//! test` starts no clusters); with it, a missing `../shared` or docker-registry fails every
//! step saying why (never a pass).

#[path = "../common/mod.rs"]
mod common;
mod steps;
mod walkthrough;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use libtest_mimic::{Arguments, Failed, Trial};

fn main() {
    let mut args = Arguments::from_args();
    // One hub, two clusters: the steps run in order, one at a time.
    args.test_threads = Some(1);
    let wanted = args.ignored || args.include_ignored;
    let fleet = if wanted {
        Fleet::start().map(std::sync::Arc::new)
    } else {
        Err("needs an OCM hub, three managed clusters and a node, which the harness starts (about 45 s): run with --include-ignored (.ci/run does)".to_owned())
    };
    if let Err(why) = &fleet {
        eprintln!("the fleet tier's {} steps: {why}", steps::STEPS.len());
    }
    let trials = steps::STEPS
        .iter()
        .map(|step| {
            let fleet = fleet.clone();
            Trial::test(step.name, move || match fleet {
                Ok(fleet) => fleet.run(step),
                Err(why) => Err(why.into()),
            })
            .with_ignored_flag(true)
        })
        .collect();
    let conclusion = libtest_mimic::run(&args, trials);
    // The clusters and OCM stop here (`exit` would skip the drop).
    drop(fleet);
    conclusion.exit();
}

/// A managed cluster: its name (the ManagedCluster's, and its namespace on the hub) and
/// admin kubeconfig.
pub struct Managed {
    pub name: &'static str,
    pub kubeconfig: PathBuf,
    pub client: kube::Client,
}

/// What every step shares: the hub, the two clusters, the registry, and what earlier steps
/// passed.
pub struct Fleet {
    pub rt: tokio::runtime::Runtime,
    pub hub: PathBuf,
    pub hub_client: kube::Client,
    /// `c1` and `c2`, the Placement `fleet/waves`'s.
    pub clusters: Vec<Managed>,
    pub registry: common::registry::Registry,
    /// `c3` and its real node.
    pub pods: Pods,
    /// Releases, keys and logs of this run.
    pub work: tempfile::TempDir,
    shared: PathBuf,
    passed: common::steps::Passed,
    /// What docs/fleet.md's walkthrough shows, as the steps ran it.
    pub transcript: walkthrough::Transcript,
    /// Stops OCM and the control planes: dropped last.
    teardown: Teardown,
}

/// `c3`: a managed cluster with a real node, where the operator runs as a Pod.
pub struct Pods {
    pub cluster: Managed,
    /// The node's containerd (`CONTAINERD_ADDRESS`) and its `ctr` binary, for `image.py`.
    pub containerd: String,
    pub ctr: PathBuf,
    /// A registry on the node's pod bridge address: its pods reach it (loopback they do not).
    pub registry: common::registry::Registry,
}

/// What the harness started, stopped when dropped (also when the start fails half-way).
struct Teardown {
    shared: PathBuf,
    /// realk8s state files (hub, c1, c2, c3) and the OCM state file, in `dir`.
    states: Vec<PathBuf>,
    /// c3's node's state file.
    node_state: PathBuf,
    ocm_state: PathBuf,
    /// Removed only after the stop scripts read the state files in it (fields drop after
    /// `drop`).
    _dir: tempfile::TempDir,
}

impl Drop for Teardown {
    fn drop(&mut self) {
        let stop = self.shared.join("ocm/stop.sh");
        let _ = script(&stop, &["--clean"], &[("OCM_STATE_FILE", &self.ocm_state)]);
        if self.node_state.exists() {
            let stop = self.shared.join("realk8s/stop-node.sh");
            let _ = script(&stop, &[], &[("REALNODE_STATE_FILE", &self.node_state)]);
        }
        let stop = self.shared.join("realk8s/stop.sh");
        for state in &self.states {
            if state.exists() {
                let _ = script(&stop, &["--clean"], &[("REALK8S_STATE_FILE", state)]);
            }
        }
    }
}

/// The repository's `../shared`.
fn shared() -> PathBuf {
    std::env::var_os("CVO_TEST_SHARED_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared"))
}

/// The `export KEY=VALUE` lines a start script printed.
fn exports(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("export "))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| {
            (
                k.to_owned(),
                v.trim_matches('\'').trim_matches('"').to_owned(),
            )
        })
        .collect()
}

/// Runs `script` with `env`, returning its stdout; fails with its stderr.
fn script(script: &Path, args: &[&str], env: &[(&str, &Path)]) -> Result<String, String> {
    let mut cmd = Command::new(script);
    cmd.args(args).stdin(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd
        .output()
        .map_err(|e| format!("{}: {e}", script.display()))?;
    if !out.status.success() {
        return Err(format!(
            "{} {args:?} failed: {}",
            script.display(),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn client(rt: &tokio::runtime::Runtime, kubeconfig: &Path) -> Result<kube::Client, String> {
    let config = rt
        .block_on(kube::Config::from_custom_kubeconfig(
            kube::config::Kubeconfig::read_from(kubeconfig).map_err(|e| e.to_string())?,
            &kube::config::KubeConfigOptions::default(),
        ))
        .map_err(|e| e.to_string())?;
    let _guard = rt.enter();
    kube::Client::try_from(config).map_err(|e| e.to_string())
}

impl Fleet {
    /// Starts three control planes at once, makes the first an OCM hub, joins the other two
    /// (`c1` labelled `wave=canary`, `c2` `wave=rest`), and starts a registry.
    fn start() -> Result<Fleet, String> {
        let shared = shared();
        let realk8s = shared.join("realk8s");
        let ocm = shared.join("ocm");
        for s in [realk8s.join("start.sh"), ocm.join("start-hub.sh")] {
            if !s.exists() {
                return Err(format!(
                    "needs {} (../shared beside the repository)",
                    s.display()
                ));
            }
        }
        if !Path::new("/usr/bin/docker-registry").exists() {
            return Err("needs docker-registry (apt-get install docker-registry)".to_owned());
        }
        let work = tempfile::tempdir().map_err(|e| e.to_string())?;
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let teardown = Teardown {
            shared: shared.clone(),
            states: ["hub", "c1", "c2", "c3"]
                .iter()
                .map(|n| dir.path().join(format!("{n}.realk8s")))
                .collect(),
            node_state: dir.path().join("c3.realnode"),
            ocm_state: dir.path().join("ocm.state"),
            _dir: dir,
        };
        let started: Vec<Result<String, String>> = std::thread::scope(|s| {
            let handles: Vec<_> = teardown
                .states
                .iter()
                .map(|state| {
                    let start = realk8s.join("start.sh");
                    s.spawn(move || script(&start, &[], &[("REALK8S_STATE_FILE", state)]))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|_| Err("start.sh panicked".into())))
                .collect()
        });
        let kubeconfigs: Vec<PathBuf> = started
            .into_iter()
            .map(|r| r.map(|out| PathBuf::from(&exports(&out)["KUBECONFIG"])))
            .collect::<Result<_, _>>()?;
        let ocm_state: &Path = &teardown.ocm_state;
        let hub_env = script(
            &ocm.join("start-hub.sh"),
            &[],
            &[
                ("KUBECONFIG", &kubeconfigs[0]),
                ("OCM_STATE_FILE", ocm_state),
            ],
        )?;
        let hub = PathBuf::from(&exports(&hub_env)["OCM_HUB_KUBECONFIG"]);
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        let mut clusters = Vec::new();
        for (i, (name, wave)) in [("c1", "canary"), ("c2", "rest"), ("c3", "pods")]
            .into_iter()
            .enumerate()
        {
            let kubeconfig = kubeconfigs[i + 1].clone();
            script(
                &ocm.join("join.sh"),
                &[name, &format!("wave={wave}")],
                &[("KUBECONFIG", &kubeconfig), ("OCM_STATE_FILE", ocm_state)],
            )?;
            clusters.push(Managed {
                name,
                client: client(&rt, &kubeconfig)?,
                kubeconfig,
            });
        }
        let c3 = clusters.pop().expect("c3");
        let node = exports(&script(
            &realk8s.join("start-node.sh"),
            &[],
            &[
                ("REALK8S_STATE_FILE", &teardown.states[3]),
                ("REALNODE_STATE_FILE", &teardown.node_state),
            ],
        )?);
        // The node's name is its pod bridge's address.
        let bridge: std::net::Ipv4Addr = node["REALNODE_NODE_NAME"]
            .parse()
            .map_err(|e| format!("the node's name is not its bridge address: {e}"))?;
        let pods = Pods {
            cluster: c3,
            containerd: node["CONTAINERD_ADDRESS"].clone(),
            ctr: PathBuf::from(&node["REALNODE_BIN"]).join("ctr"),
            registry: common::registry::Registry::start_on(bridge),
        };
        Ok(Fleet {
            hub_client: client(&rt, &hub)?,
            hub,
            rt,
            clusters,
            pods,
            registry: common::registry::Registry::start(),
            work,
            shared,
            passed: common::steps::Passed::default(),
            transcript: walkthrough::Transcript::default(),
            teardown,
        })
    }

    /// Runs `step` (a panic is its failure), unless a step it needs did not pass.
    fn run(&self, step: &'static steps::Step) -> Result<(), Failed> {
        self.passed.run(&self.rt, self, step)
    }

    /// The managed cluster `name`.
    pub fn cluster(&self, name: &str) -> &Managed {
        self.clusters
            .iter()
            .find(|c| c.name == name)
            .expect("a managed cluster of the tier")
    }

    /// The OCM state file (for `fault.sh`).
    pub fn ocm_state(&self) -> PathBuf {
        self.teardown.ocm_state.clone()
    }

    /// `../shared/ocm/…`.
    pub fn ocm(&self, path: &str) -> PathBuf {
        self.shared.join("ocm").join(path)
    }
}
