//! `cvo fleet preflight`: every cluster of a Placement asked at once, through OCM, for the
//! preflight of one release (docs/fleet.md, "Preflight"), and what each answered.
//!
//! The preflight set (`cvo-preflight-PLACEMENT`, rollout `All`: a preflight writes nothing but
//! the request, so it needs no waves) server-side applies ClusterVersion `version`'s
//! `spec.desiredUpdate {version, image, mode: Preflight, acceptRisks}` with the rollout's field
//! manager. Each cluster's `cvo operator` pulls that release, runs its preflight without
//! updating, and writes it into ClusterVersion status ([`crate::preflight::status`]); the work
//! agent reports it back as scalars ([`paths`]): per catalogue risk its `Applies` status and
//! message and whether `acceptRisks` names it, the `UpdatePreflight` condition, the target's
//! `Recommended` condition.
//!
//! A cluster's answer counts only when it is the answer to this request ([`answer`]): its
//! ClusterVersion asks for the preflight of this image, its operator has seen that spec
//! (`observedGeneration` = `generation`) and its `UpdatePreflight` condition names the image.
//! Anything else is "not reported yet", never clean (fail closed).
//!
//! A rollout reads the same answers before it writes ([`first_wave_refusals`]): it refuses when
//! a cluster of its first wave has a risk that applies and that `--accept-risks` does not name,
//! when the preflight there could not run, or when no answer to the preflight of this release
//! is there (run `cvo fleet preflight` first); `--force` overrides, and is recorded. It then
//! deletes the preflight set before writing itself: both write `desiredUpdate` with one field
//! manager, and the rollout's apply (no `mode`) removes the preflight's `mode`.

use std::collections::BTreeMap;

use kube::api::{Api, DeleteParams, DynamicObject, ListParams};
use serde::Serialize;
use serde_json::{Value, json};

use super::feedback::{self, FeedbackValue, Report};
use super::hub;
use super::ocm;
use super::rollout::Refusal;
use super::status::{self, FleetStatus, HubView, Reachability, ReadError, Wave, WaveProgress};
use super::work::{self, Purpose};
use crate::cluster::retry::{RequestError, RetryPolicy};
use crate::exit::Exit;
use crate::preflight::CATALOGUE;
use crate::preflight::status::CONDITION;

/// `spec.desiredUpdate.mode` of a preflight.
pub const MODE: &str = "Preflight";
/// Feedback name: `spec.desiredUpdate.mode`.
const REQUESTED_MODE: &str = "requestedMode";
/// Feedback name: the target's `Recommended` condition status (`conditionalUpdates`).
const RECOMMENDED: &str = "recommended";

fn applies_name(risk: &str) -> String {
    format!("risk.{risk}.applies")
}

fn message_name(risk: &str) -> String {
    format!("risk.{risk}.message")
}

fn accepted_name(risk: &str) -> String {
    format!("risk.{risk}.accepted")
}

/// `text` as a double-quoted string of a JSONPath filter (client-go's parser unquotes it).
fn quoted(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_default()
}

/// The feedback rules' `(name, JSONPath)` pairs of a preflight of `image`: those of every set
/// ([`feedback::paths`]), then the request's mode, the `UpdatePreflight` condition, the
/// target's `Recommended` status and, per catalogue risk, its `Applies` status and message and
/// whether `acceptRisks` names it. Each one scalar (OCM's `JSONPaths` feedback); a path that
/// matches nothing is left out of the report.
pub fn paths(image: &str) -> Vec<(String, String)> {
    let mut paths = feedback::paths();
    paths.push((
        REQUESTED_MODE.to_owned(),
        ".spec.desiredUpdate.mode".to_owned(),
    ));
    for field in ["status", "reason", "message"] {
        paths.push((
            format!("{CONDITION}.{field}"),
            format!(".status.conditions[?(@.type==\"{CONDITION}\")].{field}"),
        ));
    }
    paths.push((
        RECOMMENDED.to_owned(),
        format!(
            ".status.conditionalUpdates[?(@.release.image=={})].conditions[?(@.type==\"Recommended\")].status",
            quoted(image)
        ),
    ));
    for check in CATALOGUE {
        let risk = format!(
            ".status.conditionalUpdateRisks[?(@.name==\"{}\")]",
            check.name
        );
        paths.push((
            applies_name(check.name),
            format!("{risk}.conditions[?(@.type==\"Applies\")].status"),
        ));
        paths.push((
            message_name(check.name),
            format!("{risk}.conditions[?(@.type==\"Applies\")].message"),
        ));
        paths.push((
            accepted_name(check.name),
            format!(
                ".spec.desiredUpdate.acceptRisks[?(@.name==\"{}\")].name",
                check.name
            ),
        ));
    }
    paths
}

/// A preflight request: what `cvo fleet preflight` writes.
#[derive(Clone, Debug)]
pub struct Request {
    pub namespace: String,
    pub placement: String,
    /// The release's version (its `release-metadata`).
    pub version: String,
    /// The release by digest: `HOST[:PORT]/REPO@sha256:HEX`.
    pub image: String,
    /// `--accept-risks`: `spec.desiredUpdate.acceptRisks`.
    pub accept_risks: Vec<String>,
}

impl Request {
    /// The preflight set: every cluster at once (`All`), its ClusterVersion asked for the
    /// preflight of the release.
    pub fn manifest(&self) -> Value {
        let mut update = json!({"version": self.version, "image": self.image, "mode": MODE});
        if !self.accept_risks.is_empty() {
            update["acceptRisks"] = work::accept_risks(&self.accept_risks);
        }
        let rules: Vec<Value> = paths(&self.image)
            .into_iter()
            .map(|(name, path)| json!({"name": name, "path": path}))
            .collect();
        let template = work::desired_update_template(
            update,
            json!([{"type": "JSONPaths", "jsonPaths": rules}]),
            None,
        );
        let mut set = work::replica_set(
            Purpose::Preflight,
            &self.namespace,
            &self.placement,
            json!({"type": "All"}),
            template,
        );
        set["metadata"]["annotations"] = json!({
            work::RELEASE_ANNOTATION: self.image,
            work::VERSION_ANNOTATION: self.version,
            work::ACCEPT_RISKS_ANNOTATION: self.accept_risks.join(","),
        });
        set
    }
}

/// One risk that applies to a cluster (its `Applies` is `True`, or `Unknown`: the check could
/// not tell, which counts as applying).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RiskState {
    pub name: String,
    /// `True` or `Unknown`.
    pub applies: String,
    /// Named in the cluster's `spec.desiredUpdate.acceptRisks`.
    pub accepted: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// What a cluster answered to the preflight of one release.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "kebab-case")]
pub enum Answer {
    /// No answer to this request yet: why.
    NotReported { reason: String },
    /// The preflight could not run (`UpdatePreflight=Unknown`): its message.
    Failed { message: String },
    /// The preflight ran: the risks that apply, and the cluster's own `Recommended` status of
    /// the target (its `conditionalUpdates` entry for the image; shown, not judged: the risks
    /// are).
    Assessed {
        risks: Vec<RiskState>,
        #[serde(skip_serializing_if = "Option::is_none")]
        recommended: Option<String>,
    },
}

/// A cluster's answer, in one word.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// Risks apply that are not accepted.
    NotAccepted,
    /// The preflight could not run.
    Failed,
    NotReported,
    /// Every risk that applies is accepted.
    Accepted,
    /// No risk applies.
    Clean,
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Verdict::NotAccepted => "risks not accepted",
            Verdict::Failed => "could not run",
            Verdict::NotReported => "not reported yet",
            Verdict::Accepted => "accepted",
            Verdict::Clean => "clean",
        })
    }
}

impl Answer {
    /// The verdict, judging acceptance by `accepted` (the rollout's `--accept-risks`) when
    /// given, else by what the cluster's `acceptRisks` names.
    pub fn verdict(&self, accepted: Option<&[String]>) -> Verdict {
        match self {
            Answer::NotReported { .. } => Verdict::NotReported,
            Answer::Failed { .. } => Verdict::Failed,
            Answer::Assessed { risks, .. } if risks.is_empty() => Verdict::Clean,
            Answer::Assessed { .. } if self.unaccepted(accepted).is_empty() => Verdict::Accepted,
            Answer::Assessed { .. } => Verdict::NotAccepted,
        }
    }

    /// The risks that apply and are not accepted (by `accepted` when given, else by the
    /// cluster's `acceptRisks`).
    pub fn unaccepted(&self, accepted: Option<&[String]>) -> Vec<&RiskState> {
        let Answer::Assessed { risks, .. } = self else {
            return Vec::new();
        };
        risks
            .iter()
            .filter(|r| match accepted {
                Some(names) => !names.contains(&r.name),
                None => !r.accepted,
            })
            .collect()
    }
}

/// What one cluster's feedback `values` answer to the preflight of `image`.
pub fn answer(values: &[FeedbackValue], image: &str) -> Answer {
    let report = Report::from_values(values);
    let by_name: BTreeMap<&str, Option<&str>> = values
        .iter()
        .map(|v| (v.name.as_str(), v.field_value.string.as_deref()))
        .collect();
    let text = |name: &str| by_name.get(name).copied().flatten();
    let not_reported = |reason: String| Answer::NotReported { reason };
    let mode = text(REQUESTED_MODE);
    if report.requested_image.as_deref() != Some(image) || mode != Some(MODE) {
        return not_reported(format!(
            "its ClusterVersion does not ask for this preflight yet (spec.desiredUpdate: image {}, mode {})",
            report.requested_image.as_deref().unwrap_or("none"),
            mode.unwrap_or("none")
        ));
    }
    if report.observed_generation.is_none() || report.observed_generation != report.generation {
        return not_reported(format!(
            "its operator has not seen the request yet (observedGeneration {}, generation {})",
            report
                .observed_generation
                .map_or_else(|| "none".to_owned(), |g| g.to_string()),
            report
                .generation
                .map_or_else(|| "none".to_owned(), |g| g.to_string())
        ));
    }
    let field = |f: &str| text(&format!("{CONDITION}.{f}"));
    let Some(message) = field("message").filter(|m| m.contains(image)) else {
        return not_reported(format!(
            "its operator has not written a preflight of {image} yet (no {CONDITION} condition naming it)"
        ));
    };
    match field("status") {
        Some("True" | "False") => {}
        _ => {
            return Answer::Failed {
                message: message.to_owned(),
            };
        }
    }
    let risks = CATALOGUE
        .iter()
        .filter_map(|check| {
            // A risk the preflight wrote no Applies for cannot be told: it applies (fail closed).
            let reported = text(&applies_name(check.name));
            if reported == Some("False") {
                return None;
            }
            Some(RiskState {
                name: check.name.to_owned(),
                applies: if reported == Some("True") {
                    "True"
                } else {
                    "Unknown"
                }
                .to_owned(),
                accepted: text(&accepted_name(check.name)) == Some(check.name),
                message: text(&message_name(check.name))
                    .map(str::to_owned)
                    .or_else(|| {
                        reported
                            .is_none()
                            .then(|| "its Applies condition was not reported".to_owned())
                    }),
            })
        })
        .collect();
    Answer::Assessed {
        risks,
        recommended: text(RECOMMENDED).map(str::to_owned),
    }
}

/// One cluster of a preflight.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterPreflight {
    pub name: String,
    pub wave: Wave,
    pub reachable: Reachability,
    pub verdict: Verdict,
    pub answer: Answer,
}

/// A wave's clusters counted by verdict.
#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WaveCounts {
    pub clean: usize,
    pub accepted: usize,
    pub not_accepted: usize,
    pub failed: usize,
    pub not_reported: usize,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WavePreflight {
    #[serde(flatten)]
    pub wave: Wave,
    pub clusters: Vec<String>,
    pub counts: WaveCounts,
}

/// The preflight of one release on the clusters of a Placement.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FleetPreflight {
    /// `NAMESPACE/NAME` of the Placement.
    pub placement: String,
    /// `NAMESPACE/NAME` of the preflight set.
    pub preflight: String,
    pub version: String,
    pub image: String,
    /// The risks the request accepts (`--accept-risks`).
    pub accept_risks: Vec<String>,
    pub waves: Vec<WavePreflight>,
    /// In wave order.
    pub clusters: Vec<ClusterPreflight>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<String>,
}

impl FleetPreflight {
    /// `1` risks not accepted or a preflight that could not run (or the hub could not be
    /// read), else `3` a cluster that has not answered yet, else `0` every cluster clean or
    /// its risks accepted.
    pub fn exit(&self) -> Exit {
        let verdicts = || self.clusters.iter().map(|c| c.verdict);
        if !self.problems.is_empty()
            || verdicts().any(|v| matches!(v, Verdict::NotAccepted | Verdict::Failed))
        {
            Exit::Failed
        } else if verdicts().any(|v| v == Verdict::NotReported) || self.clusters.is_empty() {
            Exit::InProgress
        } else {
            Exit::Success
        }
    }

    /// The clusters that need a look (risks not accepted, could not run, not reported), the
    /// first wave's first, the worst first within a wave.
    pub fn attention(&self) -> Vec<&ClusterPreflight> {
        let mut out: Vec<&ClusterPreflight> = self
            .clusters
            .iter()
            .filter(|c| c.verdict < Verdict::Accepted)
            .collect();
        out.sort_by(|a, b| (&a.wave, a.verdict).cmp(&(&b.wave, b.verdict)));
        out
    }
}

/// What a preflight is judged from: the hub's view of the fleet ([`status::read`]), the
/// preflight set and its ManifestWorks.
#[derive(Clone, Debug, Default)]
pub struct PreflightView {
    pub hub: HubView,
    pub set: Option<Value>,
    pub works: Vec<hub::ManifestWork>,
}

/// Reads the fleet as `status` does, and at once the preflight set and its works (a constant
/// number of requests).
pub async fn read(
    client: &kube::Client,
    namespace: &str,
    placement: &str,
) -> Result<PreflightView, ReadError> {
    let name = Purpose::Preflight.name(placement);
    let label = ocm::replica_set_label_value(namespace, &name).map_err(ReadError::Invalid)?;
    let retry = RetryPolicy::default();
    let sets = super::sets(client, namespace);
    let works = Api::<DynamicObject>::all_with(client.clone(), &ocm::manifest_work());
    let params = ListParams::default().labels(&format!("{}={label}", ocm::REPLICA_SET_LABEL));
    let (hub, set, works) = tokio::try_join!(
        status::read(client, namespace, placement),
        status::get(&sets, &name, "ManifestWorkReplicaSet", &retry),
        status::list(&works, &params, "ManifestWorks", &retry),
    )?;
    Ok(PreflightView {
        hub,
        set: set
            .map(serde_json::to_value)
            .transpose()
            .map_err(|e| ReadError::Invalid(format!("the preflight set: {e}")))?,
        works,
    })
}

/// Each cluster's answer to the preflight of `image`, from the preflight set's works.
pub fn answers(works: &[hub::ManifestWork], image: &str) -> BTreeMap<String, Answer> {
    works
        .iter()
        .filter_map(|w| {
            let cluster = w.metadata.namespace.clone()?;
            let values = w
                .status
                .resource_status
                .manifests
                .iter()
                .find(|m| {
                    m.resource_meta.resource == "clusterversions"
                        && m.resource_meta.name == "version"
                })
                .map(|m| m.status_feedback.values.as_slice())
                .unwrap_or_default();
            Some((cluster, answer(values, image)))
        })
        .collect()
}

/// The preflight as the hub sees it (`None` without a preflight set), judged at `now`.
pub fn judge(view: &PreflightView, now: jiff::Timestamp) -> Option<FleetPreflight> {
    let set = view.set.as_ref()?;
    let annotations = &set["metadata"]["annotations"];
    let image = annotations[work::RELEASE_ANNOTATION].as_str()?.to_owned();
    let version = annotations[work::VERSION_ANNOTATION]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let accept_risks: Vec<String> = annotations[work::ACCEPT_RISKS_ANNOTATION]
        .as_str()
        .unwrap_or_default()
        .split(',')
        .filter(|n| !n.is_empty())
        .map(str::to_owned)
        .collect();
    let fleet = status::judge(&view.hub, now);
    let answers = answers(&view.works, &image);
    let clusters = of_fleet(&fleet, &answers, None);
    let waves = fleet
        .waves
        .iter()
        .map(|w| {
            let mut counts = WaveCounts::default();
            for c in clusters.iter().filter(|c| c.wave == w.wave) {
                match c.verdict {
                    Verdict::Clean => counts.clean += 1,
                    Verdict::Accepted => counts.accepted += 1,
                    Verdict::NotAccepted => counts.not_accepted += 1,
                    Verdict::Failed => counts.failed += 1,
                    Verdict::NotReported => counts.not_reported += 1,
                }
            }
            WavePreflight {
                wave: w.wave.clone(),
                clusters: w.clusters.clone(),
                counts,
            }
        })
        .collect();
    Some(FleetPreflight {
        placement: fleet.placement.clone(),
        preflight: format!(
            "{}/{}",
            view.hub.namespace,
            Purpose::Preflight.name(&view.hub.placement)
        ),
        version,
        image,
        accept_risks,
        waves,
        clusters,
        problems: fleet.problems,
    })
}

/// The selected clusters of `fleet`, in wave order, each with its answer (none: not reported)
/// judged by `accepted` ([`Answer::verdict`]).
fn of_fleet(
    fleet: &FleetStatus,
    answers: &BTreeMap<String, Answer>,
    accepted: Option<&[String]>,
) -> Vec<ClusterPreflight> {
    let mut out: Vec<ClusterPreflight> = fleet
        .clusters
        .iter()
        .filter_map(|c| {
            let answer = answers
                .get(&c.name)
                .cloned()
                .unwrap_or(Answer::NotReported {
                reason:
                    "no preflight request for it on the hub (no ManifestWork of the preflight set)"
                        .to_owned(),
            });
            Some(ClusterPreflight {
                name: c.name.clone(),
                wave: c.wave.clone()?,
                reachable: c.reachable.clone(),
                verdict: answer.verdict(accepted),
                answer,
            })
        })
        .collect();
    out.sort_by(|a, b| (&a.wave, &a.name).cmp(&(&b.wave, &b.name)));
    out
}

/// The clusters of the first wave of `fleet` a rollout of `image` is refused on: a risk
/// applies that `accepted` (`--accept-risks`) does not name, the preflight could not run, or
/// no answer to the preflight of this release is there. A cluster already at (or updating to)
/// `image` — its newest history entry is that image — needs no preflight, nor does any when
/// the rollout set already rolls `image` out (writing it again).
pub fn first_wave_refusals(
    fleet: &FleetStatus,
    answers: &BTreeMap<String, Answer>,
    image: &str,
    accepted: &[String],
) -> Vec<Refusal> {
    if fleet.target.as_ref().is_some_and(|t| t.image == image) {
        return Vec::new();
    }
    let Some(first) = fleet.waves.first() else {
        return Vec::new();
    };
    let placement = &fleet.placement;
    let run_first =
        format!("run `cvo fleet preflight --placement {placement} --release oci://{image}` first");
    of_fleet(fleet, answers, Some(accepted))
        .into_iter()
        .filter(|c| c.wave == first.wave)
        .filter(|c| {
            let at = fleet
                .cluster(&c.name)
                .and_then(|s| s.report.as_ref())
                .and_then(|r| r.history.first())
                .and_then(|e| e.image.as_deref());
            at != Some(image)
        })
        .filter_map(|c| {
            let reason = match (&c.answer, c.verdict) {
                (_, Verdict::Clean | Verdict::Accepted) => return None,
                (Answer::NotReported { reason }, _) => {
                    format!("no answer to the preflight of this release: {reason}; {run_first}")
                }
                (Answer::Failed { message }, _) => format!(
                    "its preflight could not run ({message}); fix that and {run_first} again"
                ),
                (answer, _) => {
                    let stopping = answer.unaccepted(Some(accepted));
                    let names: Vec<&str> = stopping.iter().map(|r| r.name.as_str()).collect();
                    let each: Vec<String> = stopping
                        .iter()
                        .map(|r| match &r.message {
                            Some(m) => format!("{} ({m})", r.name),
                            None => r.name.clone(),
                        })
                        .collect();
                    format!(
                        "preflight risks apply that are not accepted: {}; fix them and run `cvo fleet preflight` again, or accept them with `--accept-risks {}`",
                        each.join("; "),
                        names.join(",")
                    )
                }
            };
            Some(Refusal {
                cluster: c.name,
                reason,
            })
        })
        .collect()
}

/// What `cvo fleet preflight` does with the rollout set `fleet` has, if any: a rollout that is
/// done or aborted is deleted first (its works orphan what they applied), so that its works
/// and the preflight's never write `desiredUpdate` in turn; a running or paused one refuses
/// the preflight (`Err`: why). `Ok(Some(name))`: the rollout set to delete.
pub fn rollout_in_the_way(fleet: &FleetStatus) -> Result<Option<String>, String> {
    let Some(target) = &fleet.target else {
        return Ok(None);
    };
    let done =
        !fleet.waves.is_empty() && fleet.waves.iter().all(|w| w.progress == WaveProgress::Done);
    if done || target.state == super::control::State::Aborted {
        return Ok(Some(target.rollout.clone()));
    }
    Err(format!(
        "the rollout {} of {} on Placement {} is {}: a preflight would write spec.desiredUpdate on the clusters it asks; wait until it is done, or abort it (`cvo fleet abort --placement {}`)",
        target.rollout,
        target.version,
        fleet.placement,
        match target.state {
            super::control::State::Paused => "paused, not done",
            _ => "not done",
        },
        fleet.placement
    ))
}

/// How long a deleted set may take to go: OCM's work controller removes its finalizer once it
/// has deleted the set's ManifestWorks.
pub const DELETE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(120);

/// Why a set could not be deleted.
#[derive(Debug, thiserror::Error)]
pub enum DeleteError {
    #[error("{0}")]
    Request(RequestError),
    #[error(
        "ManifestWorkReplicaSet {0} is still being deleted after {1:?}: OCM's hub work controller removes its finalizer once it deleted the set's ManifestWorks (is it running?); run the command again once the set is gone"
    )]
    Stuck(String, std::time::Duration),
}

/// Deletes the set `namespace/name` (its works orphan what they applied) and waits, by watch,
/// until it is gone — a set written again while it is being deleted would go with it. `false`
/// when it was not there.
pub async fn delete_set(
    client: &kube::Client,
    namespace: &str,
    name: &str,
) -> Result<bool, DeleteError> {
    let api = super::sets(client, namespace);
    let params = DeleteParams::default();
    let deleted = RetryPolicy::default()
        .run(|| api.delete(name, &params))
        .await
        .map(|_| true)
        .or_else(|(e, n)| match e {
            RequestError::Kube(kube::Error::Api(s)) if s.code == 404 => Ok(false),
            e => Err((e, n)),
        })
        .map_err(|(e, _)| DeleteError::Request(e))?;
    crate::cluster::wait::until(&api, name, |o| o.is_none(), DELETE_TIMEOUT)
        .await
        .map_err(|_| DeleteError::Stuck(format!("{namespace}/{name}"), DELETE_TIMEOUT))?;
    Ok(deleted)
}

#[cfg(test)]
mod tests;
