//! The fleet as the hub sees it: which clusters a Placement selects and in which decision
//! group (wave), whether each reaches the hub, what its ClusterVersion reports, and — for a
//! rollout — which waves are done, which cluster holds the rollout and why.
//!
//! [`read`] sends a constant number of requests whatever the fleet's size (the Placement, the
//! rollout set, and three LISTs: PlacementDecisions, ManagedClusters, the ManifestWorks of
//! cvo's two sets; each list paged); [`judge`] is pure, so every rule below is a unit test.
//!
//! A cluster of a rollout is **done** when its ClusterVersion's newest history entry is the
//! target version and image, `Completed`, with `Available=True` and `Failing` not `True`;
//! **failed** when, having seen the rollout's spec, it reports `Failing=True` or
//! `ReleaseAccepted=False`, when the work agent could not apply the manifest (e.g. the
//! executor lacks a permission), or when it made no progress within the rollout's
//! `progressDeadline`; **pending** while its ManifestWork does not ask for the target yet (a
//! later wave); **progressing** otherwise. A cluster the hub cannot reach is named as such,
//! never dropped: also one that left the Placement's decisions while cvo's works remain.

use std::collections::BTreeMap;
use std::time::Duration;

use kube::api::{Api, DynamicObject, ListParams};
use serde::Serialize;
use serde_json::Value;

use super::control;
use super::feedback::{self, Report};
use super::hub::{self, condition};
use super::ocm;
use super::work::{self, Purpose};
use crate::cluster::retry::{RequestError, RetryPolicy};
use crate::exit::Exit;

/// A decision group of a Placement: the rollout's unit.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Wave {
    pub index: u32,
    /// Empty for a group made by `clustersPerDecisionGroup` alone.
    pub name: String,
}

impl std::fmt::Display for Wave {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.name.is_empty() {
            write!(f, "{}", self.index)
        } else {
            write!(f, "{} ({})", self.index, self.name)
        }
    }
}

/// What the hub knows of a cluster's connection (ManagedCluster
/// `ManagedClusterConditionAvailable`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "state", content = "reason", rename_all = "kebab-case")]
pub enum Reachability {
    Reachable,
    /// The condition is False or Unknown (its agent stopped renewing its lease): why.
    Unreachable(String),
    /// No ManagedCluster, or no condition yet.
    Unknown(String),
}

/// Where one cluster is in a rollout.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "state", content = "reason", rename_all = "kebab-case")]
pub enum ClusterRollout {
    /// No rollout set on the hub.
    None,
    /// Its ManifestWork does not ask for the target yet.
    Pending,
    /// Asked; not done yet: what its ClusterVersion says.
    Progressing(String),
    Done,
    Failed(String),
}

/// One cluster, as the hub sees it.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterState {
    pub name: String,
    /// `None`: not in the Placement's decisions (any more), though cvo's works remain.
    pub wave: Option<Wave>,
    pub reachable: Reachability,
    /// ClusterVersion `version` as the rollout's or the observe set's feedback reports it.
    pub report: Option<Report>,
    pub rollout: ClusterRollout,
}

impl ClusterState {
    /// The first problem to show for this cluster: its failure, else the first condition
    /// that is not as expected.
    pub fn message(&self) -> Option<String> {
        if let ClusterRollout::Failed(why) = &self.rollout {
            return Some(why.clone());
        }
        let report = self.report.as_ref()?;
        report.failure().or_else(|| {
            [("Available", "True"), ("Upgradeable", "True")]
                .iter()
                .find_map(|(type_, good)| {
                    let c = report.condition(type_).filter(|c| !c.is(good))?;
                    Some(feedback::describe(type_, c))
                })
        })
    }
}

/// Where a wave is in the rollout.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum WaveProgress {
    Done,
    InProgress,
    Failed,
    Pending,
}

impl std::fmt::Display for WaveProgress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            WaveProgress::Done => "done",
            WaveProgress::InProgress => "in progress",
            WaveProgress::Failed => "failed",
            WaveProgress::Pending => "pending",
        })
    }
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WaveState {
    #[serde(flatten)]
    pub wave: Wave,
    pub clusters: Vec<String>,
    pub progress: WaveProgress,
    /// Its clusters by where they are in the rollout.
    pub counts: WaveCounts,
}

/// How many clusters of a wave are done, progressing, failed, and not asked yet.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WaveCounts {
    pub done: usize,
    pub progressing: usize,
    pub failed: usize,
    pub not_started: usize,
}

/// The release a rollout set asks for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Target {
    /// `NAMESPACE/NAME` of the rollout set.
    pub rollout: String,
    pub version: String,
    pub image: String,
    /// Its `progressDeadline`, if any.
    #[serde(skip)]
    pub deadline: Option<Duration>,
    /// What `--force` overrode when it was written.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub forced: Option<String>,
    /// The clusters selected when it was written.
    #[serde(skip)]
    pub clusters: Vec<String>,
    /// Running, or paused or aborted (`cvo fleet pause|abort`).
    pub state: control::State,
}

/// A cluster that holds a rollout, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Hold {
    pub cluster: String,
    pub reason: String,
}

/// The fleet of one Placement.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FleetStatus {
    /// `NAMESPACE/NAME` of the Placement.
    pub placement: String,
    pub target: Option<Target>,
    pub waves: Vec<WaveState>,
    pub clusters: Vec<ClusterState>,
    /// The clusters of the first wave that is not done, with what holds each.
    pub held_by: Vec<Hold>,
    /// What the hub holds that could not be read (a malformed label, a missing field): each
    /// named, never read as a default; the status is then held (exit code 1).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<String>,
}

impl FleetStatus {
    /// `0` all at the target (without a rollout: all reachable and none failing), `3` in
    /// progress (also paused), `1` held by a failure or a deadline, or aborted before every
    /// wave was done.
    pub fn exit(&self) -> Exit {
        if !self.problems.is_empty() {
            return Exit::Failed;
        }
        let Some(target) = &self.target else {
            let bad = self.clusters.iter().any(|c| {
                c.reachable != Reachability::Reachable
                    || c.report.as_ref().is_none_or(|r| r.failure().is_some())
            });
            return if bad { Exit::Failed } else { Exit::Success };
        };
        let dropped = self
            .clusters
            .iter()
            .any(|c| c.wave.is_none() && matches!(c.rollout, ClusterRollout::Failed(_)));
        let done =
            !self.waves.is_empty() && self.waves.iter().all(|w| w.progress == WaveProgress::Done);
        if dropped
            || self
                .waves
                .iter()
                .any(|w| w.progress == WaveProgress::Failed)
        {
            Exit::Failed
        } else if done {
            Exit::Success
        } else if target.state == control::State::Aborted {
            // Aborted: the waves not started never will.
            Exit::Failed
        } else {
            Exit::InProgress
        }
    }

    /// The clusters that need a look, each with why: failed, unreachable (or unknown), no
    /// report yet, failing or not Upgradeable, or (without a rollout) at a version older than
    /// the newest any cluster of the fleet is at. The rest are where they should be.
    pub fn attention(&self) -> Vec<(&ClusterState, String)> {
        let newest = self
            .clusters
            .iter()
            .filter_map(|c| c.report.as_ref()?.current_version())
            .filter_map(|v| crate::version::parse(v).ok())
            .max();
        self.clusters
            .iter()
            .filter_map(|c| {
                let why = match (&c.reachable, &c.rollout, &c.report) {
                    (Reachability::Unreachable(why) | Reachability::Unknown(why), _, _) => {
                        format!("unreachable: {why}")
                    }
                    (_, ClusterRollout::Failed(why), _) => why.clone(),
                    (_, _, None) => "no ClusterVersion report yet".to_owned(),
                    (_, _, Some(report)) => match c.message() {
                        Some(m) => m,
                        None if self.target.is_none() => {
                            let at = report
                                .current_version()
                                .and_then(|v| crate::version::parse(v).ok());
                            match (&at, &newest) {
                                (Some(at), Some(newest)) if at < newest => {
                                    format!("behind the others: at {at}, the newest is {newest}")
                                }
                                (None, _) => "no completed version reported".to_owned(),
                                _ => return None,
                            }
                        }
                        None => return None,
                    },
                };
                Some((c, why))
            })
            .collect()
    }

    /// The cluster named `name`.
    pub fn cluster(&self, name: &str) -> Option<&ClusterState> {
        self.clusters.iter().find(|c| c.name == name)
    }
}

/// The hub objects a status is judged from, as narrow typed views ([`hub`]).
#[derive(Clone, Debug, Default)]
pub struct HubView {
    pub namespace: String,
    pub placement: String,
    pub decisions: Vec<hub::PlacementDecision>,
    pub managed_clusters: Vec<hub::ManagedCluster>,
    /// The ManifestWorks of cvo's observe and rollout sets for this Placement.
    pub works: Vec<hub::ManifestWork>,
    /// The rollout set (one object: kept whole).
    pub rollout: Option<Value>,
}

/// Why the hub could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("Placement {0} not found on the hub")]
    NoPlacement(String),
    #[error(
        "the hub does not serve {0}: is this the kubeconfig of an Open Cluster Management hub (with the ManifestWorkReplicaSet feature)?"
    )]
    NotAHub(String),
    #[error("reading {what} from the hub: {error}")]
    Request { what: String, error: RequestError },
    #[error("{0}")]
    Invalid(String),
}

/// Reads what [`judge`] needs from the hub: the Placement (which must exist), then at once
/// the rollout set and three LISTs.
pub async fn read(
    client: &kube::Client,
    namespace: &str,
    placement: &str,
) -> Result<HubView, ReadError> {
    let retry = RetryPolicy::default();
    let observe_label = ocm::replica_set_label_value(namespace, &Purpose::Observe.name(placement))
        .map_err(ReadError::Invalid)?;
    let rollout_label = ocm::replica_set_label_value(namespace, &Purpose::Rollout.name(placement))
        .map_err(ReadError::Invalid)?;
    let placements =
        Api::<DynamicObject>::namespaced_with(client.clone(), namespace, &ocm::placement());
    let name = format!("{namespace}/{placement}");
    get(&placements, placement, "Placement", &retry)
        .await?
        .ok_or_else(|| ReadError::NoPlacement(name.clone()))?;
    let sets = super::sets(client, namespace);
    // The rollout set and the three LISTs at once: the pages of one list follow each other,
    // but the server serves one list while cvo decodes another.
    let decisions = Api::namespaced_with(client.clone(), namespace, &ocm::placement_decision());
    let managed_clusters = Api::all_with(client.clone(), &ocm::managed_cluster());
    let works = Api::all_with(client.clone(), &ocm::manifest_work());
    let decision_params =
        ListParams::default().labels(&format!("{}={placement}", ocm::PLACEMENT_LABEL));
    let work_params = ListParams::default().labels(&format!(
        "{} in ({observe_label},{rollout_label})",
        ocm::REPLICA_SET_LABEL
    ));
    let rollout_name = Purpose::Rollout.name(placement);
    let every = ListParams::default();
    let (rollout, decisions, managed_clusters, works) = tokio::try_join!(
        get(&sets, &rollout_name, "ManifestWorkReplicaSet", &retry),
        list(&decisions, &decision_params, "PlacementDecisions", &retry),
        list(&managed_clusters, &every, "ManagedClusters", &retry),
        list(&works, &work_params, "ManifestWorks", &retry),
    )?;
    Ok(HubView {
        namespace: namespace.to_owned(),
        placement: placement.to_owned(),
        decisions,
        managed_clusters,
        works,
        rollout: rollout
            .map(serde_json::to_value)
            .transpose()
            .map_err(|e| ReadError::Invalid(format!("the rollout set: {e}")))?,
    })
}

pub(super) async fn get(
    api: &Api<DynamicObject>,
    name: &str,
    kind: &str,
    retry: &RetryPolicy,
) -> Result<Option<DynamicObject>, ReadError> {
    retry
        .run(|| api.get_opt(name))
        .await
        .map_err(|(error, _)| request_error(kind, error))
}

pub(super) async fn list<T: serde::de::DeserializeOwned + Clone>(
    api: &Api<DynamicObject>,
    lp: &ListParams,
    what: &str,
    retry: &RetryPolicy,
) -> Result<Vec<T>, ReadError> {
    crate::cluster::list::all_as(api, lp, retry)
        .await
        .map_err(|error| request_error(what, error))
}

fn request_error(what: &str, error: RequestError) -> ReadError {
    if let RequestError::Kube(kube::Error::Api(s)) = &error
        && s.code == 404
    {
        return ReadError::NotAHub(what.to_owned());
    }
    ReadError::Request {
        what: what.to_owned(),
        error,
    }
}

/// The rollout set's target, from its annotations and rollout strategy.
fn target(set: &Value, namespace: &str, placement: &str) -> Option<Target> {
    let annotations = &set["metadata"]["annotations"];
    let refs = set["spec"]["placementRefs"].as_array()?;
    let own = refs.iter().find(|r| r["name"] == placement)?;
    let strategy = &own["rolloutStrategy"]["progressivePerGroup"];
    Some(Target {
        rollout: format!("{namespace}/{}", set["metadata"]["name"].as_str()?),
        version: annotations[work::VERSION_ANNOTATION].as_str()?.to_owned(),
        image: annotations[work::RELEASE_ANNOTATION].as_str()?.to_owned(),
        deadline: strategy["progressDeadline"]
            .as_str()
            .filter(|d| *d != "None")
            .and_then(|d| humantime::parse_duration(d).ok()),
        forced: annotations[work::FORCED_ANNOTATION]
            .as_str()
            .map(str::to_owned),
        clusters: annotations[work::CLUSTERS_ANNOTATION]
            .as_str()
            .unwrap_or("")
            .split(',')
            .filter(|c| !c.is_empty())
            .map(str::to_owned)
            .collect(),
        state: control::State::of_refs(&super::ref_names(set)),
    })
}

/// Judges the fleet from the hub's objects at time `now`.
pub fn judge(view: &HubView, now: jiff::Timestamp) -> FleetStatus {
    let target = view
        .rollout
        .as_ref()
        .and_then(|s| target(s, &view.namespace, &view.placement));
    let (waves_of, mut problems) = waves_of(&view.decisions);
    let reachability: BTreeMap<&str, Reachability> = view
        .managed_clusters
        .iter()
        .map(|c| (c.metadata.name.as_str(), reachability(c)))
        .collect();
    let observe_set = format!(
        "{}.{}",
        view.namespace,
        Purpose::Observe.name(&view.placement)
    );
    let mut works: BTreeMap<&str, (Option<&hub::ManifestWork>, Option<&hub::ManifestWork>)> =
        BTreeMap::new();
    for w in &view.works {
        let Some(cluster) = w.metadata.namespace.as_deref() else {
            problems.push(format!(
                "ManifestWork {} has no namespace: left out",
                w.metadata.name
            ));
            continue;
        };
        let entry = works.entry(cluster).or_default();
        if w.metadata.labels.get(ocm::REPLICA_SET_LABEL) == Some(&observe_set) {
            entry.0 = Some(w);
        } else {
            entry.1 = Some(w);
        }
    }
    // Selected now, else with a work of cvo's, else selected when the rollout was written:
    // a cluster OCM dropped (unreachable: its work deleted too) is still named.
    let mut names: Vec<&str> = waves_of.keys().copied().collect();
    names.extend(works.keys().filter(|c| !waves_of.contains_key(*c)));
    let recorded = target
        .iter()
        .flat_map(|t| t.clusters.iter().map(String::as_str));
    for c in recorded {
        if !names.contains(&c) {
            names.push(c);
        }
    }
    let clusters: Vec<ClusterState> = names
        .into_iter()
        .map(|name| {
            let (observe, rollout) = works.get(name).copied().unwrap_or_default();
            let report = rollout
                .and_then(report_of)
                .or_else(|| observe.and_then(report_of));
            ClusterState {
                name: name.to_owned(),
                wave: waves_of.get(name).cloned(),
                reachable: reachability.get(name).cloned().unwrap_or_else(|| {
                    Reachability::Unknown("no ManagedCluster of this name".to_owned())
                }),
                rollout: match &target {
                    None => ClusterRollout::None,
                    Some(_) if !waves_of.contains_key(name) => ClusterRollout::Failed(
                        "no longer selected by the Placement (OCM drops a cluster it cannot reach unless the Placement tolerates the taint): the rollout goes on without it".to_owned(),
                    ),
                    Some(t) => cluster_rollout(t, rollout, report.as_ref(), now),
                },
                report,
            }
        })
        .collect();
    let waves = wave_states(&clusters);
    let held_by = holds(&waves, &clusters, target.as_ref().map(|t| t.state));
    FleetStatus {
        placement: format!("{}/{}", view.namespace, view.placement),
        target,
        waves,
        clusters,
        held_by,
        problems,
    }
}

/// Each selected cluster's wave, from the PlacementDecisions' labels, and what could not be
/// read: a decision whose group index is missing or not a number names no wave (its clusters
/// are judged as not selected), and says so.
fn waves_of(decisions: &[hub::PlacementDecision]) -> (BTreeMap<&str, Wave>, Vec<String>) {
    let mut out = BTreeMap::new();
    let mut problems = Vec::new();
    for d in decisions {
        let labels = &d.metadata.labels;
        let index = match labels
            .get(ocm::DECISION_GROUP_INDEX_LABEL)
            .map(|i| i.parse::<u32>())
        {
            Some(Ok(index)) => index,
            other => {
                problems.push(format!(
                    "PlacementDecision {}: label {} is {}: its {} cluster(s) are in no wave",
                    d.metadata.name,
                    ocm::DECISION_GROUP_INDEX_LABEL,
                    match other {
                        None => "missing".to_owned(),
                        Some(_) => format!(
                            "{:?}, not a number",
                            labels[ocm::DECISION_GROUP_INDEX_LABEL]
                        ),
                    },
                    d.status.decisions.len()
                ));
                continue;
            }
        };
        let wave = Wave {
            index,
            name: labels
                .get(ocm::DECISION_GROUP_NAME_LABEL)
                .cloned()
                .unwrap_or_default(),
        };
        for decision in &d.status.decisions {
            out.insert(decision.cluster_name.as_str(), wave.clone());
        }
    }
    (out, problems)
}

fn reachability(cluster: &hub::ManagedCluster) -> Reachability {
    let Some(c) = condition(
        &cluster.status.conditions,
        "ManagedClusterConditionAvailable",
    ) else {
        return Reachability::Unknown("its agent has not reported yet".to_owned());
    };
    if c.status == "True" {
        return Reachability::Reachable;
    }
    Reachability::Unreachable(format!(
        "ManagedClusterConditionAvailable={} {}: {}",
        c.status, c.reason, c.message
    ))
}

/// The ClusterVersion manifest's status of a ManifestWork.
fn manifest_status(work: &hub::ManifestWork) -> Option<&hub::ManifestStatus> {
    work.status.resource_status.manifests.iter().find(|m| {
        m.resource_meta.resource == "clusterversions" && m.resource_meta.name == "version"
    })
}

fn report_of(work: &hub::ManifestWork) -> Option<Report> {
    let values = &manifest_status(work)?.status_feedback.values;
    (!values.is_empty()).then(|| Report::from_values(values))
}

/// What the rollout's ManifestWork `work` of one cluster asks for (`spec.desiredUpdate`).
fn requested(work: &hub::ManifestWork) -> (Option<&str>, Option<&str>) {
    work.spec
        .workload
        .manifests
        .iter()
        .find(|m| m.is_cluster_version())
        .map_or((None, None), hub::WorkManifest::desired_update)
}

/// The manifests of a rollout's ManifestWork other than ClusterVersion `version` — cvo
/// writes none, so its set was changed on the hub — each with what the work agent did with
/// it (its `Applied` condition; the executor may not write anything else).
fn foreign(work: &hub::ManifestWork) -> Vec<String> {
    let statuses = &work.status.resource_status.manifests;
    work.spec
        .workload
        .manifests
        .iter()
        .enumerate()
        .filter(|(_, m)| !m.is_cluster_version())
        .map(|(ordinal, m)| {
            let meta = &m.metadata;
            let name = match &meta.namespace {
                Some(ns) => format!("{ns}/{}", meta.name),
                None => meta.name.clone(),
            };
            let kind = if m.kind.is_empty() {
                "an object"
            } else {
                &m.kind
            };
            let applied = statuses
                .iter()
                .find(|s| s.resource_meta.ordinal == ordinal as u64)
                .and_then(|s| condition(&s.conditions, "Applied"));
            match applied {
                Some(c) if c.status == "True" => format!("{kind} {name} (applied)"),
                Some(c) => format!("{kind} {name} (not applied: {} {})", c.reason, c.message),
                None => format!("{kind} {name} (not applied yet)"),
            }
        })
        .collect()
}

fn cluster_rollout(
    target: &Target,
    work: Option<&hub::ManifestWork>,
    report: Option<&Report>,
    now: jiff::Timestamp,
) -> ClusterRollout {
    let Some(work) = work else {
        return ClusterRollout::Pending;
    };
    if requested(work) != (Some(target.version.as_str()), Some(target.image.as_str())) {
        return ClusterRollout::Pending;
    }
    let foreign = foreign(work);
    if !foreign.is_empty() {
        return ClusterRollout::Failed(format!(
            "the rollout's ManifestWork names more than ClusterVersion version, which cvo never writes (the set was changed on the hub; `cvo fleet rollout` writes it again): {}",
            foreign.join(", ")
        ));
    }
    if report.is_some_and(|r| r.is_done(&target.version, &target.image)) {
        return ClusterRollout::Done;
    }
    // The work agent could not apply the manifest (an executor without the permission, a
    // ClusterVersion kind the cluster does not serve).
    if let Some(applied) = manifest_status(work)
        .and_then(|m| condition(&m.conditions, "Applied"))
        .filter(|c| c.status == "False")
    {
        return ClusterRollout::Failed(format!(
            "the work agent did not apply spec.desiredUpdate: {} {}",
            applied.reason, applied.message
        ));
    }
    if let Some(r) = report
        && r.observed_generation.is_some()
        && r.observed_generation == r.generation
        && let Some(failure) = r.failure()
    {
        return ClusterRollout::Failed(failure);
    }
    if let (Some(deadline), Some(since)) = (target.deadline, progressing_since(work))
        && let Ok(deadline) = jiff::SignedDuration::try_from(deadline)
        && now.duration_since(since) > deadline
    {
        return ClusterRollout::Failed(format!(
            "no progress within the rollout's progressDeadline ({}), progressing since {since}",
            humantime::format_duration(deadline.unsigned_abs())
        ));
    }
    ClusterRollout::Progressing(progress_of(target, report))
}

/// When the ManifestWork's `Progressing` condition turned True.
fn progressing_since(work: &hub::ManifestWork) -> Option<jiff::Timestamp> {
    let c = condition(&work.status.conditions, "Progressing").filter(|c| c.status == "True")?;
    c.last_transition_time.as_deref()?.parse().ok()
}

fn progress_of(target: &Target, report: Option<&Report>) -> String {
    let Some(r) = report else {
        return "no ClusterVersion report yet".to_owned();
    };
    let Some(newest) = r.history.first() else {
        return format!("asked for {}; no history yet", target.version);
    };
    let (version, state) = (
        newest.version.as_deref().unwrap_or("?"),
        newest.state.as_deref().unwrap_or("?"),
    );
    if version == target.version {
        if let Some(p) = r.condition("Progressing").and_then(|c| c.message.clone()) {
            return format!("{version} {state}: {p}");
        }
        return format!("{version} {state}");
    }
    format!("asked for {}; at {version} {state}", target.version)
}

/// Each wave's progress and counts, from its clusters'.
pub fn wave_states(clusters: &[ClusterState]) -> Vec<WaveState> {
    let mut by_wave: BTreeMap<&Wave, Vec<&ClusterState>> = BTreeMap::new();
    for c in clusters {
        if let Some(w) = &c.wave {
            by_wave.entry(w).or_default().push(c);
        }
    }
    by_wave
        .into_iter()
        .map(|(wave, members)| {
            let all = |f: fn(&ClusterRollout) -> bool| members.iter().all(|c| f(&c.rollout));
            let any = |f: fn(&ClusterRollout) -> bool| members.iter().any(|c| f(&c.rollout));
            let progress = if any(|r| matches!(r, ClusterRollout::Failed(_))) {
                WaveProgress::Failed
            } else if all(|r| matches!(r, ClusterRollout::Done)) {
                WaveProgress::Done
            } else if any(|r| matches!(r, ClusterRollout::Done | ClusterRollout::Progressing(_))) {
                WaveProgress::InProgress
            } else {
                WaveProgress::Pending
            };
            let mut counts = WaveCounts::default();
            for c in &members {
                match c.rollout {
                    ClusterRollout::Done => counts.done += 1,
                    ClusterRollout::Progressing(_) => counts.progressing += 1,
                    ClusterRollout::Failed(_) => counts.failed += 1,
                    ClusterRollout::Pending | ClusterRollout::None => counts.not_started += 1,
                }
            }
            WaveState {
                wave: wave.clone(),
                clusters: members.iter().map(|c| c.name.clone()).collect(),
                progress,
                counts,
            }
        })
        .collect()
}

fn holds(
    waves: &[WaveState],
    clusters: &[ClusterState],
    rollout: Option<control::State>,
) -> Vec<Hold> {
    let Some(state) = rollout else {
        return Vec::new();
    };
    let first = waves.iter().find(|w| w.progress != WaveProgress::Done);
    clusters
        .iter()
        .filter(|c| match (&c.wave, first) {
            // Dropped from the Placement since the rollout was written.
            (None, _) => matches!(c.rollout, ClusterRollout::Failed(_)),
            (Some(w), Some(first)) => *w == first.wave && c.rollout != ClusterRollout::Done,
            (Some(_), None) => false,
        })
        .map(|c| {
            let mut reason = match &c.rollout {
                ClusterRollout::Failed(why) | ClusterRollout::Progressing(why) => why.clone(),
                _ => match state {
                    control::State::Running => {
                        "not asked yet: OCM has not written the rollout's ManifestWork for it"
                    }
                    control::State::Paused => {
                        "not asked: the rollout is paused (`cvo fleet resume` goes on)"
                    }
                    control::State::Aborted => "never asked: the rollout was aborted",
                }
                .to_owned(),
            };
            if let Reachability::Unreachable(why) | Reachability::Unknown(why) = &c.reachable {
                reason = format!("unreachable ({why}); {reason}");
            }
            Hold {
                cluster: c.name.clone(),
                reason,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const IMAGE: &str = "127.0.0.1:5000/release@sha256:ab";

    fn decision(index: u32, name: &str, clusters: &[&str]) -> Value {
        let decisions: Vec<Value> = clusters
            .iter()
            .map(|c| json!({"clusterName": c, "reason": ""}))
            .collect();
        json!({
            "metadata": {"labels": {
                ocm::PLACEMENT_LABEL: "waves",
                ocm::DECISION_GROUP_INDEX_LABEL: index.to_string(),
                ocm::DECISION_GROUP_NAME_LABEL: name,
            }},
            "status": {"decisions": decisions},
        })
    }

    fn managed(name: &str, available: &str) -> Value {
        json!({"metadata": {"name": name}, "status": {"conditions": [{
            "type": "ManagedClusterConditionAvailable", "status": available,
            "reason": if available == "True" { "ManagedClusterAvailable" } else { "ManagedClusterLeaseUpdateStopped" },
            "message": "",
        }]}})
    }

    fn s(name: &str, v: &str) -> Value {
        json!({"name": name, "fieldValue": {"type": "String", "string": v}})
    }

    /// The rollout's ManifestWork of `cluster`, asking for `version`, whose ClusterVersion
    /// reports `history0` (version, state) and conditions `(type, status)`.
    fn work(
        cluster: &str,
        version: &str,
        history0: (&str, &str),
        conditions: &[(&str, &str)],
    ) -> Value {
        let mut values = vec![
            s("history0.version", history0.0),
            s("history0.state", history0.1),
            s("history0.image", IMAGE),
            json!({"name": "generation", "fieldValue": {"type": "Integer", "integer": 2}}),
            json!({"name": "observedGeneration", "fieldValue": {"type": "Integer", "integer": 2}}),
        ];
        for (t, st) in conditions {
            values.push(s(&format!("{t}.status"), st));
            values.push(s(&format!("{t}.message"), &format!("{t} says {st}")));
        }
        json!({
            "metadata": {"namespace": cluster, "labels": {ocm::REPLICA_SET_LABEL: "fleet.cvo-rollout-waves"}},
            "spec": {"workload": {"manifests": [{
                "apiVersion": "config.openshift.io/v1", "kind": "ClusterVersion",
                "metadata": {"name": "version"},
                "spec": {"desiredUpdate": {"version": version, "image": IMAGE}},
            }]}},
            "status": {"resourceStatus": {"manifests": [{
                "resourceMeta": {"resource": "clusterversions", "name": "version"},
                "conditions": [{"type": "Applied", "status": "True"}],
                "statusFeedback": {"values": values},
            }]}},
        })
    }

    /// A hub object as [`read`] decodes it.
    fn typed<T: serde::de::DeserializeOwned>(v: Value) -> T {
        serde_json::from_value(v).expect("a hub object of the test")
    }

    fn view(works: Vec<Value>, clusters: &[&str]) -> HubView {
        HubView {
            namespace: "fleet".into(),
            placement: "waves".into(),
            decisions: vec![
                typed(decision(0, "canary", &["c1"])),
                typed(decision(1, "rest", &["c2", "c3"])),
            ],
            managed_clusters: vec![
                typed(managed("c1", "True")),
                typed(managed("c2", "True")),
                typed(managed("c3", "Unknown")),
            ],
            works: works.into_iter().map(typed).collect(),
            rollout: Some(json!({
                "metadata": {"name": "cvo-rollout-waves", "annotations": {
                    work::VERSION_ANNOTATION: "1.1.0",
                    work::RELEASE_ANNOTATION: IMAGE,
                    work::CLUSTERS_ANNOTATION: clusters.join(","),
                }},
                "spec": {"placementRefs": [{"name": "waves", "rolloutStrategy": {"progressivePerGroup": {"progressDeadline": "1h"}}}]},
            })),
        }
    }

    const DONE: &[(&str, &str)] = &[("Available", "True"), ("Failing", "False")];

    /// The three clusters' rollout works, each at the target and done.
    fn all_done() -> Vec<Value> {
        ["c1", "c2", "c3"]
            .iter()
            .map(|c| work(c, "1.1.0", ("1.1.0", "Completed"), DONE))
            .collect()
    }

    #[test]
    fn a_running_canary_holds_the_later_waves_and_is_named() {
        let works = vec![work(
            "c1",
            "1.1.0",
            ("1.1.0", "Partial"),
            &[("Available", "True"), ("Progressing", "True")],
        )];
        let st = judge(&view(works, &["c1", "c2", "c3"]), jiff::Timestamp::now());
        assert_eq!(st.exit(), Exit::InProgress);
        assert_eq!(st.waves[0].progress, WaveProgress::InProgress);
        assert_eq!(st.waves[1].progress, WaveProgress::Pending);
        assert_eq!(st.held_by.len(), 1);
        assert_eq!(st.held_by[0].cluster, "c1");
        assert!(
            st.held_by[0].reason.contains("1.1.0 Partial"),
            "{:?}",
            st.held_by
        );
        assert_eq!(st.cluster("c2").unwrap().rollout, ClusterRollout::Pending);
    }

    #[test]
    fn a_paused_rollout_is_in_progress_and_an_aborted_one_is_held_for_good() {
        let works = || vec![work("c1", "1.1.0", ("1.1.0", "Completed"), DONE)];
        let stopped = |state| {
            let mut v = view(works(), &["c1", "c2", "c3"]);
            control::keep(v.rollout.as_mut().unwrap(), state);
            judge(&v, jiff::Timestamp::now())
        };
        let paused = stopped(control::State::Paused);
        assert_eq!(
            paused.target.as_ref().unwrap().state,
            control::State::Paused
        );
        assert_eq!(paused.exit(), Exit::InProgress);
        assert_eq!(paused.waves[0].progress, WaveProgress::Done);
        let held: Vec<_> = paused.held_by.iter().map(|h| h.cluster.as_str()).collect();
        assert_eq!(held, ["c2", "c3"]);
        assert!(
            paused.held_by[0].reason.contains("paused"),
            "{:?}",
            paused.held_by
        );
        let aborted = stopped(control::State::Aborted);
        assert_eq!(aborted.exit(), Exit::Failed);
        assert!(aborted.held_by[0].reason.contains("aborted"));
        // Aborted after the last wave was done: done.
        let mut v = view(all_done(), &["c1", "c2", "c3"]);
        control::keep(v.rollout.as_mut().unwrap(), control::State::Aborted);
        assert_eq!(judge(&v, jiff::Timestamp::now()).exit(), Exit::Success);
    }

    #[test]
    fn a_malformed_decision_group_label_is_named_never_read_as_wave_0() {
        let mut v = view(Vec::new(), &[]);
        let mut bad = decision(1, "rest", &["c2", "c3"]);
        bad["metadata"]["name"] = json!("waves-decision-2");
        bad["metadata"]["labels"][ocm::DECISION_GROUP_INDEX_LABEL] = json!("one");
        v.decisions[1] = typed(bad);
        v.rollout = None;
        let st = judge(&v, jiff::Timestamp::now());
        assert_eq!(st.problems.len(), 1, "{:?}", st.problems);
        assert!(
            st.problems[0].contains("waves-decision-2")
                && st.problems[0].contains("\"one\", not a number"),
            "{:?}",
            st.problems
        );
        assert_eq!(st.exit(), Exit::Failed);
        assert!(st.waves.iter().all(|w| w.wave.index == 0));
        assert!(st.cluster("c2").is_none_or(|c| c.wave.is_none()));
    }

    #[test]
    fn a_failing_canary_fails_the_rollout_with_its_message() {
        let works = vec![work(
            "c1",
            "1.1.0",
            ("1.1.0", "Partial"),
            &[("Available", "True"), ("Failing", "True")],
        )];
        let st = judge(&view(works, &["c1", "c2", "c3"]), jiff::Timestamp::now());
        assert_eq!(st.exit(), Exit::Failed);
        assert_eq!(st.waves[0].progress, WaveProgress::Failed);
        assert!(
            st.held_by[0].reason.starts_with("Failing=True"),
            "{:?}",
            st.held_by
        );
    }

    #[test]
    fn an_unreachable_cluster_of_the_running_wave_is_named_as_such() {
        let works = vec![
            work("c1", "1.1.0", ("1.1.0", "Completed"), DONE),
            work("c2", "1.1.0", ("1.1.0", "Completed"), DONE),
            work("c3", "1.1.0", ("1.0.0", "Completed"), DONE),
        ];
        let st = judge(&view(works, &["c1", "c2", "c3"]), jiff::Timestamp::now());
        assert_eq!(st.waves[0].progress, WaveProgress::Done);
        assert_eq!(st.exit(), Exit::InProgress);
        assert_eq!(st.held_by[0].cluster, "c3");
        assert!(
            st.held_by[0]
                .reason
                .starts_with("unreachable (ManagedClusterConditionAvailable=Unknown"),
            "{:?}",
            st.held_by
        );
    }

    #[test]
    fn a_cluster_dropped_from_the_placement_is_named_and_the_rollout_is_not_done() {
        let works = vec![
            work("c1", "1.1.0", ("1.1.0", "Completed"), DONE),
            work("c2", "1.1.0", ("1.1.0", "Completed"), DONE),
            work("c3", "1.1.0", ("1.1.0", "Completed"), DONE),
        ];
        let st = judge(
            &view(works, &["c1", "c2", "c3", "c4"]),
            jiff::Timestamp::now(),
        );
        assert!(st.waves.iter().all(|w| w.progress == WaveProgress::Done));
        assert_eq!(st.exit(), Exit::Failed);
        assert_eq!(st.held_by[0].cluster, "c4");
        assert!(st.held_by[0].reason.contains("no longer selected"));
    }

    #[test]
    fn every_cluster_done_is_success_and_a_stale_work_is_pending() {
        let mut v = view(all_done(), &["c1", "c2", "c3"]);
        assert_eq!(judge(&v, jiff::Timestamp::now()).exit(), Exit::Success);
        // c3's work still asks for the previous release: not yet rolled to.
        v.works[2] = typed(work("c3", "1.0.0", ("1.0.0", "Completed"), DONE));
        let st = judge(&v, jiff::Timestamp::now());
        assert_eq!(st.cluster("c3").unwrap().rollout, ClusterRollout::Pending);
        assert_eq!(st.exit(), Exit::InProgress);
    }

    #[test]
    fn a_work_naming_another_object_fails_its_cluster_with_what_the_agent_said() {
        let mut w = work("c1", "1.1.0", ("1.1.0", "Completed"), DONE);
        // Written on the hub into the set by someone else, before ClusterVersion.
        let manifests = w["spec"]["workload"]["manifests"].as_array_mut().unwrap();
        manifests.insert(
            0,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "intruder", "namespace": "default"}}),
        );
        w["status"]["resourceStatus"]["manifests"][0]["resourceMeta"]["ordinal"] = json!(1);
        let refused = json!({"resourceMeta": {"ordinal": 0, "resource": "configmaps", "name": "intruder", "namespace": "default"},
            "conditions": [{"type": "Applied", "status": "False", "reason": "AppliedManifestFailed",
                            "message": "not allowed to apply the resource"}]});
        w["status"]["resourceStatus"]["manifests"]
            .as_array_mut()
            .unwrap()
            .push(refused);
        let st = judge(&view(vec![w], &["c1", "c2", "c3"]), jiff::Timestamp::now());
        let ClusterRollout::Failed(why) = &st.cluster("c1").unwrap().rollout else {
            panic!("{:?}", st.cluster("c1"));
        };
        assert!(
            why.contains("ConfigMap default/intruder (not applied: AppliedManifestFailed not allowed to apply the resource)"),
            "{why}"
        );
        assert_eq!(st.exit(), Exit::Failed);
        assert_eq!(st.held_by[0].cluster, "c1");
    }

    #[test]
    fn progressing_past_the_deadline_fails() {
        let mut w = work(
            "c1",
            "1.1.0",
            ("1.1.0", "Partial"),
            &[("Available", "True")],
        );
        w["status"]["conditions"] = json!([{"type": "Progressing", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}]);
        let st = judge(
            &view(vec![w], &["c1", "c2", "c3"]),
            "2026-01-01T02:00:00Z".parse().unwrap(),
        );
        assert_eq!(st.exit(), Exit::Failed);
        assert!(
            st.held_by[0].reason.contains("progressDeadline (1h)"),
            "{:?}",
            st.held_by
        );
    }
}
