//! Leader election on a `coordination.k8s.io/v1` Lease, with client-go's protocol and
//! timings: only the holder of the Lease writes to the cluster.
//!
//! - Every **retry period** (default 2 s) each candidate reads the Lease. A Lease held by
//!   someone else is left alone until its record (holder, renewTime) has not changed for a
//!   whole **lease duration** (default 15 s) as measured on this candidate's own clock — no
//!   comparison of clocks across machines. An empty or expired Lease is taken with a PUT
//!   carrying the resourceVersion that was read, so that of two candidates exactly one
//!   succeeds (the other gets 409 Conflict).
//! - The holder renews every retry period the same way. When it could not renew for a whole
//!   **renew deadline** (default 10 s) it gives leadership up at once: it stops writing at
//!   least `lease duration − renew deadline` before anyone else may take over.
//! - On shutdown the holder **releases** the Lease (empty holder, duration 1 s), so that a
//!   standby takes over at its next retry instead of after a lease duration.
//!
//! Why not a crate: `kube-leader-election` is built on kube 4 (this repository uses kube 5).
//! `kube-lease-manager` 0.13 fits the versions, but a candidate facing a held Lease sleeps
//! until that holder's expiry, so a released Lease is picked up only a whole lease duration
//! later (no retry period), renewals are unconditional strategic-merge patches (exclusivity
//! rests on server-side-apply field ownership rather than on resourceVersion), and durations
//! are whole seconds. The protocol below is about a hundred lines on k8s-openapi's `Lease`,
//! under the one retry policy's error classification, and tested on both API servers.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, PostParams};
use tokio::sync::watch;
use tokio::time::Instant;

/// Where and how to elect.
#[derive(Clone, Debug)]
pub struct LeaseConfig {
    pub namespace: String,
    pub name: String,
    /// This candidate's identity (`holderIdentity`): unique per process.
    pub identity: String,
    pub lease_duration: Duration,
    pub renew_deadline: Duration,
    pub retry_period: Duration,
}

impl LeaseConfig {
    /// Client-go's defaults: lease 15 s, renew deadline 10 s, retry 2 s.
    pub fn new(namespace: &str, name: &str, identity: &str) -> Self {
        LeaseConfig {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            identity: identity.to_owned(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }

    /// Refuses timings under which two leaders could overlap or leadership would flap.
    ///
    /// # Errors
    ///
    /// [`TimingError`] names the flag to change.
    pub fn check(&self) -> Result<(), TimingError> {
        if self.retry_period.is_zero() {
            return Err(TimingError::NoRetry);
        }
        if self.renew_deadline <= self.retry_period {
            return Err(TimingError::RenewWithinRetry {
                renew_deadline: self.renew_deadline,
                retry_period: self.retry_period,
            });
        }
        if self.lease_duration <= self.renew_deadline {
            return Err(TimingError::LeaseWithinRenew {
                lease_duration: self.lease_duration,
                renew_deadline: self.renew_deadline,
            });
        }
        Ok(())
    }
}

/// Lease timings under which two leaders could overlap or leadership would flap.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TimingError {
    #[error("--lease-retry must be longer than 0")]
    NoRetry,
    #[error(
        "--lease-renew-deadline ({renew_deadline:?}) must be longer than --lease-retry ({retry_period:?})"
    )]
    RenewWithinRetry {
        renew_deadline: Duration,
        retry_period: Duration,
    },
    #[error(
        "--lease-duration ({lease_duration:?}) must be longer than --lease-renew-deadline ({renew_deadline:?})"
    )]
    LeaseWithinRenew {
        lease_duration: Duration,
        renew_deadline: Duration,
    },
}

/// A unique identity for this process: the host name (the pod name in a cluster) and a
/// random suffix, as client-go does.
pub fn default_identity() -> String {
    let host = std::env::var("POD_NAME")
        .or_else(|_| std::env::var("HOSTNAME"))
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| {
            std::fs::read_to_string("/etc/hostname")
                .ok()
                .map(|h| h.trim().to_owned())
        })
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "cvo".to_owned());
    format!("{host}_{:016x}", fastrand::u64(..))
}

/// How long releasing the Lease at shutdown may take.
const RELEASE_TIMEOUT: Duration = Duration::from_secs(5);

/// What this candidate last saw of someone else's Lease record, and when (its own clock).
struct Observed {
    record: (Option<String>, Option<String>),
    at: Instant,
}

/// Told the outcome of every attempt: true when the server answered (this candidate leads,
/// or stands by), false when the Lease could not be read or written.
type Heartbeat = Box<dyn Fn(bool) + Send + Sync>;

/// One candidate.
pub struct Elector {
    api: Api<Lease>,
    config: LeaseConfig,
    observed: Option<Observed>,
    /// When this candidate last renewed successfully (while leader).
    renewed: Option<Instant>,
    /// The last failed attempt's problem: said at warn level once, then at debug while it lasts.
    problem: Option<String>,
    heartbeat: Option<Heartbeat>,
}

impl Elector {
    pub fn new(client: kube::Client, config: LeaseConfig) -> Self {
        Elector {
            api: Api::namespaced(client, &config.namespace),
            config,
            observed: None,
            renewed: None,
            problem: None,
            heartbeat: None,
        }
    }

    /// Calls `heartbeat` after every attempt with whether the server answered: the operator's
    /// readiness follows it (the elector asks the server every retry period anyway).
    pub fn with_heartbeat(mut self, heartbeat: impl Fn(bool) + Send + Sync + 'static) -> Self {
        self.heartbeat = Some(Box::new(heartbeat));
        self
    }

    pub fn config(&self) -> &LeaseConfig {
        &self.config
    }

    /// Runs the election until `stop` resolves, publishing leadership on `leader`; then
    /// releases the Lease if held. Errors reading or writing the Lease count as a failed
    /// attempt (logged), never as leadership.
    pub async fn run(mut self, leader: watch::Sender<bool>, stop: impl std::future::Future) {
        tokio::pin!(stop);
        loop {
            // An attempt that hangs must not keep a leader leading: it gets the renew
            // deadline at most, and then counts as failed.
            let attempt =
                tokio::time::timeout(self.config.renew_deadline, self.try_acquire_or_renew())
                    .await
                    .unwrap_or_else(|_| {
                        Err(kube::Error::Service(
                            format!(
                                "no answer within the renew deadline ({:?})",
                                self.config.renew_deadline
                            )
                            .into(),
                        ))
                    });
            if let Some(heartbeat) = &self.heartbeat {
                heartbeat(attempt.is_ok());
            }
            let now_leader = match attempt {
                Ok(held) => {
                    if held {
                        self.renewed = Some(Instant::now());
                    }
                    if self.problem.take().is_some() {
                        tracing::info!(lease = %self.config.name, "leader election: the Lease can be read and written again");
                    }
                    held
                }
                Err(e) => {
                    let problem = lease_problem(&e, &self.config);
                    if self.problem.as_ref() == Some(&problem) {
                        tracing::debug!(lease = %self.config.name, "leader election: {problem}");
                    } else {
                        tracing::warn!(lease = %self.config.name, "leader election: {problem}");
                        self.problem = Some(problem);
                    }
                    // A leader keeps leading until its renew deadline passes.
                    *leader.borrow()
                        && self
                            .renewed
                            .is_some_and(|t| t.elapsed() < self.config.renew_deadline)
                }
            };
            if now_leader != *leader.borrow() {
                if now_leader {
                    tracing::info!(identity = %self.config.identity, lease = %format!("{}/{}", self.config.namespace, self.config.name), "became the leader");
                } else {
                    tracing::warn!(identity = %self.config.identity, "lost the leadership: no longer writing");
                    self.renewed = None;
                }
                let _ = leader.send(now_leader);
            }
            tokio::select! {
                _ = &mut stop => break,
                () = tokio::time::sleep(self.config.retry_period) => {}
            }
        }
        let was_leader = *leader.borrow();
        let _ = leader.send(false);
        if was_leader {
            // Bounded: shutdown must not wait on a server that does not answer.
            match tokio::time::timeout(RELEASE_TIMEOUT, self.release()).await {
                Ok(Ok(())) => tracing::info!(lease = %self.config.name, "released the Lease"),
                Ok(Err(e)) => {
                    tracing::warn!(lease = %self.config.name, "{}; a standby takes over when it expires", lease_problem(&e, &self.config))
                }
                Err(_) => {
                    tracing::warn!(lease = %self.config.name, "releasing the Lease timed out; a standby takes over when it expires")
                }
            }
        }
    }

    /// One attempt: true when this candidate holds the Lease afterwards.
    pub async fn try_acquire_or_renew(&mut self) -> Result<bool, kube::Error> {
        let now = jiff::Timestamp::now();
        let Some(lease) = self.api.get_opt(&self.config.name).await? else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.config.name.clone()),
                    namespace: Some(self.config.namespace.clone()),
                    ..Default::default()
                },
                spec: Some(self.spec_taking_over(None, now)),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(_) => Ok(true),
                Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
                Err(e) => Err(e),
            };
        };
        let spec = lease.spec.clone().unwrap_or_default();
        let holder = spec.holder_identity.clone().filter(|h| !h.is_empty());
        let ours = holder.as_deref() == Some(self.config.identity.as_str());
        if !ours && holder.is_some() && !self.expired(&spec) {
            return Ok(false);
        }
        let mut next = lease.clone();
        next.spec = Some(if ours {
            LeaseSpec {
                renew_time: Some(MicroTime(now)),
                lease_duration_seconds: Some(seconds(self.config.lease_duration)),
                ..spec
            }
        } else {
            self.spec_taking_over(Some(&spec), now)
        });
        match self
            .api
            .replace(&self.config.name, &PostParams::default(), &next)
            .await
        {
            Ok(_) => Ok(true),
            // Someone else wrote first: they won this round.
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
            Err(e) => Err(e),
        }
    }

    fn spec_taking_over(&self, old: Option<&LeaseSpec>, now: jiff::Timestamp) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(self.config.identity.clone()),
            lease_duration_seconds: Some(seconds(self.config.lease_duration)),
            acquire_time: Some(MicroTime(now)),
            renew_time: Some(MicroTime(now)),
            lease_transitions: Some(
                old.and_then(|s| s.lease_transitions).unwrap_or(0)
                    + i32::from(old.is_some_and(|s| s.holder_identity.is_some())),
            ),
            ..Default::default()
        }
    }

    /// True when someone else's record has not changed for a lease duration (its own, if it
    /// states a longer one), by this candidate's clock.
    fn expired(&mut self, spec: &LeaseSpec) -> bool {
        let record = (
            spec.holder_identity.clone(),
            spec.renew_time.as_ref().map(|t| t.0.to_string()),
        );
        match &self.observed {
            Some(o) if o.record == record => {}
            _ => {
                self.observed = Some(Observed {
                    record,
                    at: Instant::now(),
                });
            }
        }
        let stated = spec
            .lease_duration_seconds
            .and_then(|s| u64::try_from(s).ok())
            .map(Duration::from_secs)
            .unwrap_or_default();
        let duration = stated.max(self.config.lease_duration);
        self.observed
            .as_ref()
            .is_some_and(|o| o.at.elapsed() >= duration)
    }

    /// Gives the Lease up if this candidate holds it (empty holder, 1 s duration).
    pub async fn release(&self) -> Result<(), kube::Error> {
        let Some(mut lease) = self.api.get_opt(&self.config.name).await? else {
            return Ok(());
        };
        let spec = lease.spec.get_or_insert_default();
        if spec.holder_identity.as_deref() != Some(self.config.identity.as_str()) {
            return Ok(());
        }
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        spec.renew_time = Some(MicroTime(jiff::Timestamp::now()));
        self.api
            .replace(&self.config.name, &PostParams::default(), &lease)
            .await
            .map(|_| ())
    }
}

fn seconds(d: Duration) -> i32 {
    i32::try_from(d.as_secs().max(1)).unwrap_or(i32::MAX)
}

/// What kept an attempt from reading or writing the Lease, and what to do, in plain words.
fn lease_problem(err: &kube::Error, config: &LeaseConfig) -> String {
    let (ns, name) = (&config.namespace, &config.name);
    match err {
        kube::Error::Api(status)
            if status.code == 404
                && status
                    .details
                    .as_ref()
                    .is_some_and(|d| d.kind == "namespaces") =>
        {
            format!(
                "cannot create Lease {ns}/{name}: namespace {ns} does not exist; create it (kubectl create namespace {ns}) or start the operator with --namespace naming one that does"
            )
        }
        kube::Error::Api(status) if status.code == 403 => format!(
            "not allowed to read or write Lease {ns}/{name} (403 Forbidden: {}); grant get, create and update on leases in {ns} (cvo rbac prints the rules)",
            status.message
        ),
        kube::Error::Api(status) => format!(
            "could not read or write Lease {ns}/{name}: the API server answered {}: {}",
            status.code, status.message
        ),
        other => format!(
            "could not read or write Lease {ns}/{name}: {}",
            crate::cluster::request_error::cause(other)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lease_problems_are_said_in_plain_words_with_what_to_do() {
        let config = LeaseConfig::new("ops", "cvo", "me");
        let status = |code: u16, message: &str, kind: &str| {
            kube::Error::Api(
                serde_json::from_value(serde_json::json!({
                    "status": "Failure", "code": code, "message": message, "reason": "x",
                    "details": {"name": "ops", "kind": kind},
                }))
                .unwrap(),
            )
        };
        let missing = lease_problem(
            &status(404, "namespaces \"ops\" not found", "namespaces"),
            &config,
        );
        assert!(
            missing.contains("namespace ops does not exist")
                && missing.contains("kubectl create namespace ops"),
            "{missing}"
        );
        let forbidden = lease_problem(&status(403, "nope", "leases"), &config);
        assert!(forbidden.contains("403 Forbidden: nope"), "{forbidden}");
        let timeout = kube::Error::Service("no answer within the renew deadline".into());
        let slow = lease_problem(&timeout, &config);
        assert!(
            slow.starts_with("could not read or write Lease ops/cvo: ")
                && slow.contains("no answer"),
            "{slow}"
        );
        for text in [missing, forbidden, slow] {
            assert!(
                !text.contains("Status {") && !text.contains("Api("),
                "{text}"
            );
        }
    }

    #[test]
    fn timings_that_could_overlap_are_refused() {
        let ok = LeaseConfig::new("ns", "l", "me");
        assert!(ok.check().is_ok());
        let mut bad = ok.clone();
        bad.renew_deadline = Duration::from_secs(20);
        assert!(
            bad.check()
                .unwrap_err()
                .to_string()
                .contains("--lease-duration")
        );
        let mut bad = ok.clone();
        bad.retry_period = Duration::from_secs(10);
        assert!(
            bad.check()
                .unwrap_err()
                .to_string()
                .contains("--lease-retry")
        );
        let mut bad = ok;
        bad.retry_period = Duration::ZERO;
        assert!(bad.check().is_err());
    }

    #[test]
    fn identities_are_unique() {
        assert_ne!(default_identity(), default_identity());
    }
}
