//! Health: is an object the release applied healthy? One module owns the answer for every
//! kind, for `cvo apply` and the operator alike (docs/apply.md, "Health").
//!
//! - [`assess`] judges one live object against its manifest (pure): healthy, still on its way
//!   (waiting), or failed — with a reason worded like OpenShift's CVO
//!   (`ClusterOperatorDegraded`, `WorkloadNotAvailable`, …) so that existing dashboards
//!   understand it;
//! - [`settle`] watches the object (kube-runtime) until the judgement is no longer "waiting" or
//!   the node's deadline passes — a deadline turns "waiting" into a failure that names what the
//!   object still lacks;
//! - [`kinds`]: the per-kind rules (ClusterOperator, Deployment, StatefulSet, DaemonSet, Job,
//!   CustomResourceDefinition, APIService, and the generic `Ready` condition).
//!
//! Deleted objects are not judged here: a delete manifest is done when its object is gone
//! (synchronous) or its deletion was requested (non-blocking).

pub mod kinds;
mod settle;

use std::fmt;
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

pub use settle::settle;

use crate::release::Manifest;

/// How long and for what a node waits after writing its objects (`--wait`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum WaitMode {
    /// The CVO's semantics: fail on an unhealthy object without waiting for a workload's
    /// rollout; wait for ClusterOperators to report the release's versions, for Jobs to finish,
    /// for CRDs to be served and for APIServices to be available.
    #[default]
    Failures,
    /// Also wait until workloads have rolled out and objects with a `Ready` condition are
    /// ready (kapp / Argo CD).
    Ready,
    /// Do not look at health at all: a node is done when its writes returned.
    None,
}

/// Knobs of the health checks.
#[derive(Clone, Debug)]
pub struct Options {
    pub wait: WaitMode,
    /// How long one node may wait for its objects to become healthy (`--health-timeout`).
    pub timeout: Duration,
    /// The CVO's initializing mode (an install): a degraded ClusterOperator is reported, not
    /// failed, and Jobs are not waited for.
    pub initializing: bool,
    /// Told what the pass waits for whenever that changes (progress bars, heartbeats).
    pub observer: Option<Observer>,
}

/// A function told what is awaited right now.
pub type ObserverFn = dyn Fn(&[Finding]) + Send + Sync;

/// Receives the list of what is awaited right now (empty: nothing).
#[derive(Clone)]
pub struct Observer(pub std::sync::Arc<ObserverFn>);

impl Observer {
    pub fn waiting(&self, findings: &[Finding]) {
        (self.0)(findings)
    }
}

impl fmt::Debug for Observer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Observer")
    }
}

impl Default for Options {
    fn default() -> Self {
        Options {
            wait: WaitMode::Failures,
            timeout: Duration::from_secs(600),
            initializing: false,
            observer: None,
        }
    }
}

/// Why an object is not healthy (yet), as the CVO words it where the CVO has a word.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum Reason {
    ClusterOperatorNoVersions,
    ClusterOperatorNotAvailable,
    ClusterOperatorDegraded,
    ClusterOperatorUpdating,
    WorkloadNotAvailable,
    WorkloadNotProgressing,
    /// `--wait ready`: the rollout has not completed.
    RolloutInProgress,
    JobFailed,
    JobNotComplete,
    CustomResourceDefinitionNotEstablished,
    CustomResourceDefinitionNotServed,
    APIServiceNotAvailable,
    /// `--wait ready`: the object's `Ready` condition is not True.
    NotReady,
    /// The object went away while it was waited for.
    ObjectDeleted,
    /// Its state could not be read back.
    StatusUnknown,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::ClusterOperatorNoVersions => "ClusterOperatorNoVersions",
            Reason::ClusterOperatorNotAvailable => "ClusterOperatorNotAvailable",
            Reason::ClusterOperatorDegraded => "ClusterOperatorDegraded",
            Reason::ClusterOperatorUpdating => "ClusterOperatorUpdating",
            Reason::WorkloadNotAvailable => "WorkloadNotAvailable",
            Reason::WorkloadNotProgressing => "WorkloadNotProgressing",
            Reason::RolloutInProgress => "RolloutInProgress",
            Reason::JobFailed => "JobFailed",
            Reason::JobNotComplete => "JobNotComplete",
            Reason::CustomResourceDefinitionNotEstablished => {
                "CustomResourceDefinitionNotEstablished"
            }
            Reason::CustomResourceDefinitionNotServed => "CustomResourceDefinitionNotServed",
            Reason::APIServiceNotAvailable => "APIServiceNotAvailable",
            Reason::NotReady => "NotReady",
            Reason::ObjectDeleted => "ObjectDeleted",
            Reason::StatusUnknown => "StatusUnknown",
        }
    }

    /// The CVO's plural reason and message for several ClusterOperators with this reason
    /// ("Cluster operators a, b are degraded").
    pub fn plural(self) -> Option<(&'static str, &'static str)> {
        Some(match self {
            Reason::ClusterOperatorNoVersions => (
                "ClusterOperatorsNoVersions",
                "do not declare expected versions",
            ),
            Reason::ClusterOperatorNotAvailable => {
                ("ClusterOperatorsNotAvailable", "are not available")
            }
            Reason::ClusterOperatorDegraded => ("ClusterOperatorsDegraded", "are degraded"),
            Reason::ClusterOperatorUpdating => {
                ("ClusterOperatorsUpdating", "are updating versions")
            }
            _ => return None,
        })
    }

    /// Failing turns True for this reason only after the grace period (the CVO's
    /// `UpdateEffectFailAfterInterval` / `UpdateEffectNone`): an operator still updating or
    /// briefly degraded is progress, not failure. Every other reason fails at once.
    pub fn fails_after_grace(self) -> bool {
        matches!(
            self,
            Reason::ClusterOperatorDegraded | Reason::ClusterOperatorUpdating
        )
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One finding about one object.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Finding {
    pub reason: Reason,
    /// What is judged, short: `cluster operator network`, `Deployment ns/web`.
    pub subject: String,
    /// The ClusterOperator's name, for condensed messages.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub operator: Option<String>,
    /// One plain sentence: what is wrong or awaited, with the object's own words.
    pub message: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// The judgement of one object.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    Healthy,
    /// Healthy enough to go on, with something to report (a degraded operator during an
    /// install).
    Reported(Finding),
    /// Not there yet: wait (on what, and why).
    Waiting(Finding),
    /// Failed; waiting will not help.
    Failed(Finding),
}

impl Verdict {
    pub fn is_waiting(&self) -> bool {
        matches!(self, Verdict::Waiting(_))
    }
}

/// Judges `live` (the object as the server returned it) against `manifest`.
pub fn assess(manifest: &Manifest, live: &Value, options: &Options) -> Verdict {
    if options.wait == WaitMode::None {
        return Verdict::Healthy;
    }
    kinds::assess(
        &kinds::Subject::of(manifest),
        &manifest.object,
        live,
        options,
    )
}

/// What is awaited, in a few words: "cluster operators dns, network; Deployment ns/web".
/// ClusterOperators are named together, as the CVO does.
pub fn waiting_summary(findings: &[Finding]) -> String {
    let mut operators: Vec<&str> = findings
        .iter()
        .filter_map(|f| f.operator.as_deref())
        .collect();
    operators.sort_unstable();
    operators.dedup();
    let mut parts = Vec::new();
    match operators.len() {
        0 => {}
        1 => parts.push(format!("cluster operator {}", operators[0])),
        _ => parts.push(format!("cluster operators {}", operators.join(", "))),
    }
    parts.extend(
        findings
            .iter()
            .filter(|f| f.operator.is_none())
            .map(|f| f.subject.clone()),
    );
    parts.join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(reason: Reason, subject: &str, operator: Option<&str>) -> Finding {
        Finding {
            reason,
            subject: subject.into(),
            operator: operator.map(Into::into),
            message: String::new(),
        }
    }

    #[test]
    fn waiting_summary_names_operators_together() {
        let findings = [
            f(
                Reason::ClusterOperatorUpdating,
                "cluster operator network",
                Some("network"),
            ),
            f(Reason::RolloutInProgress, "Deployment ns/web", None),
            f(
                Reason::ClusterOperatorDegraded,
                "cluster operator dns",
                Some("dns"),
            ),
        ];
        assert_eq!(
            waiting_summary(&findings),
            "cluster operators dns, network; Deployment ns/web"
        );
        assert_eq!(waiting_summary(&findings[..1]), "cluster operator network");
        assert_eq!(waiting_summary(&[]), "");
    }
}
