//! What the leader does with a release that cannot be used (unreadable, with errors, or an OCI
//! release whose signature does not verify; [`super::run`]): it reports
//! `ReleaseAccepted=False` (reason [`INVALID_RELEASE`], or [`IMAGE_VERIFICATION_FAILED`])
//! every resync interval and at every ClusterVersion spec change, and applies nothing — until
//! `spec.desiredUpdate.image` names a release artifact it can pull ([`super::pull`]): then it
//! returns that release, to be led with as a usable one.

use kube::api::DynamicObject;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use super::metrics::Metrics;
use super::pull::{
    IMAGE_VERIFICATION_FAILED, Lookup, Outcome, PullError, Pulled, Puller, Switch, cluster_at,
};
use super::self_update::{self, Decision, SelfUpdate};
use super::status::not_progressing;
use super::{Options, drift, resync};
use crate::cluster::Cluster;
use crate::status::clusterversion;
use crate::status::conditions::RELEASE_ACCEPTED;
use crate::status::spec::Spec;
use crate::status::{Condition, ConditionStatus};

/// The leader's work with a release that cannot be used (`why`: the `ReleaseAccepted`
/// reason and message), until told to stop (or dropped when leadership is lost); `Some`: a release
/// `spec.desiredUpdate.image` names was pulled, to lead with.
pub(super) async fn lead_invalid(
    cluster: &Cluster,
    why: &Unusable,
    options: &Options,
    metrics: &Metrics,
    puller: &Puller,
    stop: &mut watch::Receiver<bool>,
) -> Option<Switch> {
    let mover = SelfUpdate::new(options.self_update.clone());
    let report = |trigger| report_invalid(cluster, options, why, &mover, puller, metrics, trigger);
    let generation = match report("initial").await {
        Ok(generation) => generation,
        Err(pulled) => return Some(Switch::Pulled(pulled)),
    };
    // A spec change (a desiredUpdate.image naming a fixed release, say) is acted on at once,
    // not at the next resync.
    let (cv_tx, mut cv_rx) = mpsc::unbounded_channel();
    let cv_watch = drift::watch_cluster_version(cluster, generation, &cv_tx);
    tokio::pin!(cv_watch);
    let mut cv_watching = true;
    loop {
        let trigger = tokio::select! {
            _ = stop.wait_for(|s| *s) => return None,
            () = &mut cv_watch, if cv_watching => { cv_watching = false; continue }
            Some(()) = cv_rx.recv() => "clusterversion",
            () = tokio::time::sleep(resync::next_delay(options.resync_interval)) => "resync",
        };
        if let Err(pulled) = report(trigger).await {
            return Some(Switch::Pulled(pulled));
        }
    }
}

/// `ReleaseAccepted` reason for a release that cannot be read or has errors.
pub const INVALID_RELEASE: &str = "InvalidRelease";

/// Why the release given at start cannot be used: the `ReleaseAccepted` reason and message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unusable {
    /// [`INVALID_RELEASE`], or [`IMAGE_VERIFICATION_FAILED`] for an OCI release whose
    /// signature does not verify with `--verify-key`.
    pub reason: &'static str,
    pub message: String,
}

impl Unusable {
    /// A release that cannot be read or has errors.
    pub fn invalid(message: String) -> Self {
        Unusable {
            reason: INVALID_RELEASE,
            message,
        }
    }

    /// An OCI release whose signature does not verify.
    pub fn unverified(message: String) -> Self {
        Unusable {
            reason: IMAGE_VERIFICATION_FAILED,
            message,
        }
    }
}

/// One report of a release that cannot be used: `ReleaseAccepted=False` ([`INVALID_RELEASE`],
/// `why`) — unless `spec.desiredUpdate.image` moved the operator to another image (a fixed
/// release, say), which is reported instead. Returns the ClusterVersion's generation, or the
/// release artifact `spec.desiredUpdate.image` names, pulled.
async fn report_invalid(
    cluster: &Cluster,
    options: &Options,
    why: &Unusable,
    mover: &SelfUpdate,
    puller: &Puller,
    metrics: &Metrics,
    trigger: &'static str,
) -> Result<Option<i64>, Box<Pulled>> {
    let retry = &options.sync.apply.retry;
    let started = Instant::now();
    let cv = match clusterversion::read(cluster, retry).await {
        Ok(cv) => cv,
        Err(e) => {
            tracing::warn!(error = %e, "could not read ClusterVersion");
            None
        }
    };
    let generation = cv.as_ref().and_then(|cv| cv.metadata.generation);
    let (decision, pull_failure) = match consider(cluster, cv.as_ref(), mover, puller).await {
        Ok(considered) => considered,
        Err(pulled) => {
            metrics.pass(trigger, "switched", started.elapsed().as_secs_f64());
            return Err(pulled);
        }
    };
    let (mut conditions, result) = match &decision {
        Decision::HandedOver { to, .. } => {
            tracing::warn!(%to, "the release cannot be used; the operator's Deployment runs the image spec.desiredUpdate names: handed over");
            (
                decision.conditions(mover.deployment(), "invalid"),
                "handed-over",
            )
        }
        Decision::Stay | Decision::CannotMove { .. } | Decision::Conflict { .. } => (
            refused(why, &decision, pull_failure.as_ref(), cv.as_ref()),
            "refused",
        ),
    };
    // The spec is read here too: an invalid request is said, and not acted on.
    if let Some(cv) = &cv {
        let stored = clusterversion::condition(cv, "Invalid");
        conditions.extend(Spec::of(cv).invalid_update(stored.as_ref()));
    }
    let written = clusterversion::write_update(
        cluster,
        retry,
        clusterversion::Update::Conditions {
            conditions: &conditions,
            observed: generation,
        },
    )
    .await;
    if let Err(e) = written {
        tracing::warn!(error = %e, "could not record {RELEASE_ACCEPTED} in ClusterVersion");
    }
    metrics.pass(trigger, result, started.elapsed().as_secs_f64());
    Ok(generation)
}

/// What the image `spec.desiredUpdate` asks for (else the release image the cluster is at: a
/// release pulled before a restart, rebuilt from the cluster) means for an operator whose
/// release cannot be used: a release artifact is pulled (`Err`: lead with it); a container
/// image moves the operator; an image that cannot be looked up or pulled is returned with
/// [`Decision::Stay`], to be reported.
async fn consider(
    cluster: &Cluster,
    cv: Option<&DynamicObject>,
    mover: &SelfUpdate,
    puller: &Puller,
) -> Result<(Decision, Option<PullError>), Box<Pulled>> {
    let update = cv.and_then(|cv| Spec::of(cv).desired_update);
    let lookup = Lookup::of(update.as_ref(), cluster_at(cv, None).as_deref());
    let decision = match &lookup {
        Some(l) if !mover.runs(cluster, &l.image).await => {
            let repository = mover.pod_repository(cluster).await;
            match puller
                .consider(cluster.client(), l.asked(), None, repository.as_deref())
                .await
            {
                Outcome::Switch(pulled) => {
                    tracing::warn!(image = %pulled.image(), asked = %pulled.asked, "the release cannot be used; switching to the release image the cluster names");
                    return Err(pulled);
                }
                Outcome::Image if l.from_status => Decision::Stay,
                Outcome::Image => mover.decide(cluster, Some(&l.image), None).await,
                Outcome::Lead => Decision::Stay,
                Outcome::Failed(e) => return Ok((Decision::Stay, Some(e))),
            }
        }
        _ => {
            let desired = cv.and_then(self_update::desired_image);
            mover.decide(cluster, desired.as_deref(), None).await
        }
    };
    Ok((decision, None))
}

/// `ReleaseAccepted=False` for a release that cannot be used (`why`), saying also why the
/// operator cannot move (`decision`) or the release image cannot be used (`pull_failure`,
/// whose reason then wins), and `Progressing=False`: nothing is applied.
fn refused(
    why: &Unusable,
    decision: &Decision,
    pull_failure: Option<&PullError>,
    cv: Option<&DynamicObject>,
) -> Vec<Condition> {
    let mut message = why.message.clone();
    if let Decision::CannotMove { to, why: cannot } = decision {
        message.push_str(&format!(
            "; cannot move the operator to image {to}: {cannot}"
        ));
    }
    if let Some(e) = pull_failure {
        let at = e
            .digest
            .as_ref()
            .map_or_else(String::new, |d| format!(" (digest {d})"));
        message.push_str(&format!(
            "; cannot use the release image {}{at}: {}",
            e.image, e.cause
        ));
    }
    // A release image that cannot be pulled or verified says so in the reason.
    let reason = pull_failure.map_or(why.reason, |e| e.reason);
    tracing::error!(reason, "the release cannot be used: nothing is applied");
    let refused = Condition::new(RELEASE_ACCEPTED, ConditionStatus::False, reason, message);
    // Nothing is applied: no earlier leader's Progressing stays.
    let idle = not_progressing(cv, "the release this operator holds", reason);
    vec![refused, idle]
}
