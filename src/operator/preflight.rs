//! `spec.desiredUpdate.mode: Preflight`: after each full pass (the release led with stays
//! applied), the release the request names is pulled as an update would pull it, and its
//! preflight ([`crate::sync::preflight`]) is written to ClusterVersion status
//! ([`crate::preflight::status`]): the risks, the target's conditional update, and the
//! `UpdatePreflight` condition. Nothing else is written; no update starts.
//!
//! Fails closed: a release that cannot be pulled, a container image, a release of another
//! version than asked for, or a cluster that cannot be read make `UpdatePreflight=Unknown`
//! with the reason — never a preflight that passed.

use super::pass::Passes;
use super::pull::{Lookup, Outcome};
use crate::preflight::status as preflight_status;
use crate::status::spec::DesiredUpdate;

impl Passes<'_> {
    /// Runs the preflight `request` asks for and records it; what fails is logged and
    /// recorded as `UpdatePreflight=Unknown`.
    pub(super) async fn preflight(&self, request: &DesiredUpdate) {
        let target = if request.image.is_empty() {
            request.version.clone()
        } else {
            request.image.clone()
        };
        let retry = &self.options.sync.apply.retry;
        let written = match self.assess(request).await {
            Ok(assessment) => {
                let stopping: Vec<&str> = assessment.unaccepted().iter().map(|r| r.name).collect();
                tracing::info!(target = %target, version = %assessment.version, ?stopping, "preflight done");
                preflight_status::write(self.cluster, retry, &assessment).await
            }
            Err(why) => {
                tracing::error!(target = %target, %why, "preflight could not run");
                let condition = preflight_status::failed(&target, &why);
                crate::status::clusterversion::write_update(
                    self.cluster,
                    retry,
                    crate::status::clusterversion::Update::Conditions {
                        conditions: std::slice::from_ref(&condition),
                        observed: None,
                    },
                )
                .await
            }
        };
        if let Err(e) = written {
            tracing::error!(error = %e, "preflight not recorded in ClusterVersion");
        }
    }

    /// The preflight of the release `request` names, or why it cannot be told.
    async fn assess(
        &self,
        request: &DesiredUpdate,
    ) -> Result<crate::preflight::Assessment, String> {
        let leading = self.release.image.as_deref();
        let lookup = Lookup::of(Some(request), None)
            .ok_or("spec.desiredUpdate names no image, and its version resolves to none")?;
        let repository = self.mover.pod_repository(self.cluster).await;
        let pulled;
        let release = match self
            .puller
            .consider(
                self.cluster.client(),
                lookup.asked(),
                leading,
                repository.as_deref(),
            )
            .await
        {
            Outcome::Lead => self.release,
            Outcome::Switch(p) => {
                pulled = p;
                &pulled.release
            }
            Outcome::Image => {
                return Err(format!(
                    "{} is not a release artifact (a container image): a preflight checks a release",
                    lookup.image
                ));
            }
            Outcome::Failed(e) => return Err(format!("{} ({})", e.cause, e.reason)),
        };
        let version = crate::status::conditions::version_text(release);
        if !request.version.is_empty() && request.version != version {
            return Err(format!(
                "the release of {} is version {version}, not {} as spec.desiredUpdate.version says",
                lookup.image, request.version
            ));
        }
        let mut options = self.options.sync.clone();
        options.accept_risks = request.accept_risks.clone();
        match crate::sync::preflight(self.cluster, release, &options).await {
            Ok(Some(assessment)) => Ok(assessment),
            Ok(None) => Err(
                "the cluster has no completed release to update from (ClusterVersion history)"
                    .to_owned(),
            ),
            Err(e) => Err(e.to_string()),
        }
    }
}
