//! The ManifestWorkReplicaSets cvo writes on the hub, one per Placement and purpose:
//!
//! - **observe** (`cvo-observe-PLACEMENT`): every selected cluster reports its ClusterVersion
//!   `version` (a `ReadOnly` manifest with [`feedback::rules`]); nothing is written to a cluster.
//! - **rollout** (`cvo-rollout-PLACEMENT`): every selected cluster gets `spec.desiredUpdate
//!   {version, image}` of ClusterVersion `version` (server-side applied by the work agent, so
//!   the rest of the spec stays whoever's it is), one decision group after the other
//!   (`ProgressivePerGroup`), judged by CEL rules over the cluster's ClusterVersion status,
//!   applied as the [`EXECUTOR`] ServiceAccount that `cvo fleet install` makes on each cluster.
//! - **install** (`cvo-install-PLACEMENT`): the operator's objects on every selected cluster.
//! - **preflight** (`cvo-preflight-PLACEMENT`): every selected cluster at once gets
//!   `spec.desiredUpdate {version, image, mode: Preflight, acceptRisks}` (same field manager
//!   as the rollout's), and reports its operator's preflight ([`super::preflight`]).
//!
//! Deleting one of them orphans what it put on the clusters (`deleteOption: Orphan`): taking a
//! rollout away never takes a ClusterVersion away.

use std::time::Duration;

use serde_json::{Value, json};

use super::feedback;
use super::ocm;

/// The field manager of every object cvo writes on the hub.
pub const FIELD_MANAGER: &str = "cvo-fleet";
/// The field manager the work agent uses on a cluster for the rollout's manifest (OCM
/// requires the `work-agent` prefix).
pub const AGENT_FIELD_MANAGER: &str = "work-agent-cvo-fleet";
/// Labels every object cvo writes on the hub.
pub const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "cvo");
/// Rollout annotation: the release (`REPO@sha256:…`) and the version it rolls out.
pub const RELEASE_ANNOTATION: &str = "fleet.cvo.io/release";
pub const VERSION_ANNOTATION: &str = "fleet.cvo.io/version";
/// Rollout annotation: what `--force` overrode (each cluster and why it would have been
/// refused), for whoever reads the rollout later.
pub const FORCED_ANNOTATION: &str = "fleet.cvo.io/forced";
/// Rollout annotation: the clusters selected when it was written, comma-separated.
pub const CLUSTERS_ANNOTATION: &str = "fleet.cvo.io/clusters";
/// Rollout and preflight annotation: the risks accepted (`--accept-risks`), comma-separated.
pub const ACCEPT_RISKS_ANNOTATION: &str = "fleet.cvo.io/accept-risks";

/// The namespace and name of the ServiceAccount the rollout's manifests are applied as, on
/// every cluster (made by `cvo fleet install`).
pub const EXECUTOR: (&str, &str) = ("cvo-fleet", "cvo-fleet-updater");

/// What a ManifestWorkReplicaSet of cvo's is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Purpose {
    Observe,
    Rollout,
    Install,
    Preflight,
}

impl Purpose {
    /// The set's name for Placement `placement`.
    pub fn name(self, placement: &str) -> String {
        let prefix = match self {
            Purpose::Observe => "cvo-observe",
            Purpose::Rollout => "cvo-rollout",
            Purpose::Install => "cvo-install",
            Purpose::Preflight => "cvo-preflight",
        };
        // A dot in a set's name keeps OCM from waking the rollout on ManifestWork changes
        // (it then advances only on timers and resyncs): Placement names may hold dots.
        format!("{prefix}-{}", placement.replace('.', "-"))
    }
}

/// ClusterVersion `version`'s identity in a ManifestWork's `manifestConfigs`.
pub(super) fn cluster_version_identifier() -> Value {
    json!({"group": "config.openshift.io", "resource": "clusterversions", "name": "version"})
}

/// A set of cvo's for `purpose` on Placement `namespace/placement` (labelled [`MANAGED_BY`]).
pub(super) fn replica_set(
    purpose: Purpose,
    namespace: &str,
    placement: &str,
    rollout_strategy: Value,
    template: Value,
) -> Value {
    json!({
        "apiVersion": ocm::manifest_work_replica_set().api_version,
        "kind": "ManifestWorkReplicaSet",
        "metadata": {
            "name": purpose.name(placement),
            "namespace": namespace,
            "labels": {MANAGED_BY.0: MANAGED_BY.1},
        },
        "spec": {
            // OCM's default, written out: the field is required, and a server that does not
            // apply schema defaults (the embedded one) would refuse the set without it.
            "cascadeDeletionPolicy": "Background",
            "placementRefs": [{"name": placement, "rolloutStrategy": rollout_strategy}],
            "manifestWorkTemplate": template,
        },
    })
}

/// The observe set: ClusterVersion `version` read only, its feedback reported.
pub fn observe(namespace: &str, placement: &str) -> Value {
    let template = json!({
        "deleteOption": {"propagationPolicy": "Orphan"},
        "manifestConfigs": [{
            "resourceIdentifier": cluster_version_identifier(),
            "updateStrategy": {"type": "ReadOnly"},
            "feedbackScrapeType": "Watch",
            "feedbackRules": feedback::rules(),
        }],
        "workload": {"manifests": [{
            "apiVersion": "config.openshift.io/v1",
            "kind": "ClusterVersion",
            "metadata": {"name": "version"},
        }]},
    });
    replica_set(
        Purpose::Observe,
        namespace,
        placement,
        json!({"type": "All"}),
        template,
    )
}

/// How many clusters of a later wave may fail before the rollout stops (`--max-failures`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MaxFailures {
    Count(u32),
    Percent(u8),
}

impl MaxFailures {
    fn value(&self) -> Value {
        match self {
            MaxFailures::Count(n) => json!(n),
            MaxFailures::Percent(p) => json!(format!("{p}%")),
        }
    }
}

/// What a rollout writes.
#[derive(Clone, Debug)]
pub struct Rollout {
    pub namespace: String,
    pub placement: String,
    /// The release's version (its `release-metadata`).
    pub version: String,
    /// The release by digest, as the CVO's pullspec: `HOST[:PORT]/REPO@sha256:HEX`.
    pub image: String,
    /// The clusters selected when the rollout is written (annotation [`CLUSTERS_ANNOTATION`]),
    /// so that one that leaves the Placement's decisions later (OCM drops an unreachable
    /// cluster, and deletes its ManifestWork) is still named.
    pub clusters: Vec<String>,
    pub max_failures: MaxFailures,
    pub progress_deadline: Option<Duration>,
    pub min_success_time: Duration,
    /// What `--force` overrode, if anything.
    pub forced: Option<String>,
    /// The preflight risks accepted (`--accept-risks`): `spec.desiredUpdate.acceptRisks`.
    pub accept_risks: Vec<String>,
}

impl Rollout {
    /// The rollout set.
    pub fn manifest(&self) -> Value {
        // No `mandatoryDecisionGroups`: setting it makes OCM ignore `maxFailures` in every
        // group. With the default `maxFailures` of 0, a failing first wave holds the rest.
        let progressive = json!({
            "maxFailures": self.max_failures.value(),
            "minSuccessTime": go_duration(self.min_success_time),
            "progressDeadline": self.progress_deadline.map_or_else(|| "None".to_owned(), go_duration),
        });
        let mut set = replica_set(
            Purpose::Rollout,
            &self.namespace,
            &self.placement,
            json!({"type": "ProgressivePerGroup", "progressivePerGroup": progressive}),
            self.template(),
        );
        let mut annotations = json!({
            RELEASE_ANNOTATION: self.image,
            VERSION_ANNOTATION: self.version,
            CLUSTERS_ANNOTATION: self.clusters.join(","),
        });
        if let Some(forced) = &self.forced {
            annotations[FORCED_ANNOTATION] = json!(forced);
        }
        if !self.accept_risks.is_empty() {
            annotations[ACCEPT_RISKS_ANNOTATION] = json!(self.accept_risks.join(","));
        }
        set["metadata"]["annotations"] = annotations;
        set
    }

    fn template(&self) -> Value {
        let mut update = json!({"version": self.version, "image": self.image});
        if !self.accept_risks.is_empty() {
            update["acceptRisks"] = accept_risks(&self.accept_risks);
        }
        desired_update_template(
            update,
            feedback::rules(),
            Some(condition_rules(&self.version, &self.image)),
        )
    }
}

/// `acceptRisks` of `spec.desiredUpdate`: one `{name}` per accepted risk.
pub(super) fn accept_risks(names: &[String]) -> Value {
    Value::Array(names.iter().map(|n| json!({"name": n})).collect())
}

/// The ManifestWork template that server-side applies ClusterVersion `version`'s
/// `spec.desiredUpdate` as `update` (field manager [`AGENT_FIELD_MANAGER`], as the
/// [`EXECUTOR`]), with `feedback_rules` and, for a rollout, its condition rules. The rollout and
/// the preflight write through the same field manager: what one leaves out of
/// `desiredUpdate` (the preflight's `mode`), the other's apply removes.
pub(super) fn desired_update_template(
    update: Value,
    feedback_rules: Value,
    condition_rules: Option<Value>,
) -> Value {
    let mut config = json!({
        "resourceIdentifier": cluster_version_identifier(),
        "updateStrategy": {
            "type": "ServerSideApply",
            "serverSideApply": {"fieldManager": AGENT_FIELD_MANAGER, "force": true},
        },
        "feedbackScrapeType": "Watch",
        "feedbackRules": feedback_rules,
    });
    if let Some(rules) = condition_rules {
        config["conditionRules"] = rules;
    }
    json!({
        "deleteOption": {"propagationPolicy": "Orphan"},
        "executor": {"subject": {
            "type": "ServiceAccount",
            "serviceAccount": {"namespace": EXECUTOR.0, "name": EXECUTOR.1},
        }},
        "manifestConfigs": [config],
        "workload": {"manifests": [{
            "apiVersion": "config.openshift.io/v1",
            "kind": "ClusterVersion",
            "metadata": {"name": "version"},
            "spec": {"desiredUpdate": update},
        }]},
    })
}

/// A duration as OCM's rollout fields take it (Go's `time.ParseDuration`: `90s`, `2h`).
pub fn go_duration(d: Duration) -> String {
    format!("{}s", d.as_secs())
}

/// A CEL string literal of `text` (single-quoted, backslashes and quotes escaped).
fn cel_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('\'');
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("\\'"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

/// `Progressing` while the cluster has not completed `version` from `image` (Available, not
/// Failing); `Degraded` when, having seen the current spec, it reports `Failing=True` or
/// `ReleaseAccepted=False`.
///
/// A CEL error reads as False, and for `Progressing` False means done: "progressing" is
/// written as the negation of a `has()`-guarded "done", so a missing status reads as
/// progressing. `Degraded` waits for `status.observedGeneration` to reach the spec's
/// generation, so that a failure about the previous request does not fail the new one.
pub fn condition_rules(version: &str, image: &str) -> Value {
    let (v, i) = (cel_string(version), cel_string(image));
    let done = format!(
        "has(object.status) && has(object.status.history) && size(object.status.history) > 0 \
         && object.status.history[0].version == {v} \
         && has(object.status.history[0].image) && object.status.history[0].image == {i} \
         && object.status.history[0].state == 'Completed' \
         && has(object.status.conditions) \
         && object.status.conditions.exists(c, c.type == 'Available' && c.status == 'True') \
         && !object.status.conditions.exists(c, c.type == 'Failing' && c.status == 'True')"
    );
    let failed = "(c.type == 'Failing' && c.status == 'True') || (c.type == 'ReleaseAccepted' && c.status == 'False')";
    let degraded = format!(
        "has(object.status) && has(object.status.conditions) \
         && has(object.status.observedGeneration) \
         && object.status.observedGeneration == object.metadata.generation \
         && object.status.conditions.exists(c, {failed})"
    );
    let failure_message = format!(
        "object.status.conditions.filter(c, {failed}).map(c, c.type + '=' + c.status + ' ' \
         + (has(c.reason) ? c.reason : '') + ': ' + (has(c.message) ? c.message : ''))[0]"
    );
    json!([
        {
            "condition": "Progressing",
            "type": "CEL",
            "celExpressions": [format!("!({done})")],
            "messageExpression": format!("result ? 'updating to ' + {v} : {v} + ' Completed'"),
        },
        {
            "condition": "Degraded",
            "type": "CEL",
            "celExpressions": [degraded],
            "messageExpression": format!("result ? {failure_message} : 'not failing'"),
        },
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cel_strings_are_escaped() {
        assert_eq!(cel_string("1.1.0"), "'1.1.0'");
        assert_eq!(cel_string("a'b\\c"), "'a\\'b\\\\c'");
    }

    #[test]
    fn the_rollout_writes_only_desired_update_and_orphans_on_delete() {
        let rollout = Rollout {
            namespace: "fleet".into(),
            placement: "waves".into(),
            version: "1.1.0".into(),
            image: "127.0.0.1:5000/release@sha256:ab".into(),
            clusters: vec!["c1".into(), "c2".into()],
            max_failures: MaxFailures::Percent(10),
            progress_deadline: Some(Duration::from_secs(7200)),
            min_success_time: Duration::ZERO,
            forced: None,
            accept_risks: Vec::new(),
        };
        let set = rollout.manifest();
        assert_eq!(set["metadata"]["name"], "cvo-rollout-waves");
        let template = &set["spec"]["manifestWorkTemplate"];
        assert_eq!(template["deleteOption"]["propagationPolicy"], "Orphan");
        let manifest = &template["workload"]["manifests"][0];
        assert_eq!(
            manifest["spec"],
            json!({"desiredUpdate": {"version": "1.1.0", "image": "127.0.0.1:5000/release@sha256:ab"}})
        );
        let strategy = &set["spec"]["placementRefs"][0]["rolloutStrategy"];
        assert_eq!(strategy["type"], "ProgressivePerGroup");
        assert_eq!(strategy["progressivePerGroup"]["maxFailures"], "10%");
        assert_eq!(strategy["progressivePerGroup"]["progressDeadline"], "7200s");
        assert!(
            strategy["progressivePerGroup"]
                .get("mandatoryDecisionGroups")
                .is_none()
        );
        assert_eq!(set["metadata"]["annotations"][CLUSTERS_ANNOTATION], "c1,c2");
        let rules = &template["manifestConfigs"][0]["conditionRules"];
        let progressing = rules[0]["celExpressions"][0].as_str().unwrap();
        assert!(
            progressing.starts_with("!(has(object.status)"),
            "{progressing}"
        );
        assert!(progressing.contains("== '127.0.0.1:5000/release@sha256:ab'"));
    }
}
