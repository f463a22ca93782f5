//! The per-kind health rules (pure functions of the manifest and the live object).
//!
//! | kind | failed (at once) | waited for |
//! |---|---|---|
//! | ClusterOperator | no `status.versions` in the manifest | Available=True, Degraded=False, the manifest's versions |
//! | Deployment | ReplicaFailure=True; Progressing=False ProgressDeadlineExceeded; Available=False with Progressing=False | `ready`: rollout complete |
//! | StatefulSet, DaemonSet | — | `ready`: rollout complete |
//! | Job | Failed=True, or more failed pods than its backoff limit | Complete (not while initializing) |
//! | CustomResourceDefinition | NamesAccepted=False | Established=True (and served: [`super::settle`]) |
//! | APIService | — | Available=True |
//! | anything with a `Ready` condition | — | `ready`: Ready=True |
//!
//! Workload conditions count only when the controller has seen the current spec
//! (`status.observedGeneration >= metadata.generation`); older ones describe an older spec.

use serde_json::Value;

use super::{Finding, Options, Reason, Verdict, WaitMode};
use crate::release::Manifest;

/// Who is judged: group, kind and the printable identity.
#[derive(Clone, Debug)]
pub struct Subject {
    pub group: String,
    pub kind: String,
    pub name: String,
    /// `Kind ns/name` or `Kind name`.
    pub id: String,
}

impl Subject {
    pub fn of(manifest: &Manifest) -> Self {
        Subject {
            group: manifest.id.group.clone(),
            kind: manifest.id.kind.clone(),
            name: manifest.id.name.clone(),
            id: manifest.id.to_string(),
        }
    }
}

pub fn assess(subject: &Subject, desired: &Value, live: &Value, options: &Options) -> Verdict {
    match (subject.group.as_str(), subject.kind.as_str()) {
        ("config.openshift.io", "ClusterOperator") => {
            cluster_operator(subject, desired, live, options)
        }
        ("apps", "Deployment") => deployment(subject, live, options),
        ("apps", "StatefulSet") => stateful_set(subject, live, options),
        ("apps", "DaemonSet") => daemon_set(subject, live, options),
        ("batch", "Job") => job(subject, live, options),
        ("apiextensions.k8s.io", "CustomResourceDefinition") => crd(subject, live),
        ("apiregistration.k8s.io", "APIService") => api_service(subject, live),
        _ => generic(subject, live, options),
    }
}

/// A condition of `status.conditions`: (status, reason, message).
fn condition<'a>(live: &'a Value, type_: &str) -> Option<(&'a str, &'a str, &'a str)> {
    live.pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(type_))
        .map(|c| {
            let s = |k: &str| c.get(k).and_then(Value::as_str).unwrap_or("");
            (s("status"), s("reason"), s("message"))
        })
}

/// "Type=Status: Reason: message", leaving out what is empty.
fn describe(type_: &str, (status, reason, message): (&str, &str, &str)) -> String {
    let mut out = format!("{type_}={status}");
    for part in [reason, message] {
        if !part.is_empty() {
            out.push_str(": ");
            out.push_str(part);
        }
    }
    out
}

fn int(live: &Value, pointer: &str) -> Option<i64> {
    live.pointer(pointer).and_then(Value::as_i64)
}

fn finding(subject: &Subject, reason: Reason, message: String) -> Finding {
    Finding {
        reason,
        subject: subject.id.clone(),
        operator: None,
        message,
    }
}

fn cluster_operator(
    subject: &Subject,
    desired: &Value,
    live: &Value,
    options: &Options,
) -> Verdict {
    let name = &subject.name;
    let co = |reason: Reason, headline: String, detail: Option<String>| Finding {
        reason,
        subject: format!("cluster operator {name}"),
        operator: Some(name.clone()),
        message: match detail {
            Some(d) => format!("{headline}: {d}"),
            None => headline,
        },
    };
    let expected: Vec<(&str, &str)> = desired
        .pointer("/status/versions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|v| Some((v.get("name")?.as_str()?, v.get("version")?.as_str()?)))
        .collect();
    if expected.is_empty() {
        return Verdict::Failed(co(
            Reason::ClusterOperatorNoVersions,
            format!("Cluster operator {name} does not declare expected versions"),
            Some("add status.versions (name and version of each operand) to its manifest".into()),
        ));
    }
    let actual: Vec<(&str, &str)> = live
        .pointer("/status/versions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|v| Some((v.get("name")?.as_str()?, v.get("version")?.as_str()?)))
        .collect();
    let mut undone: Vec<String> = expected
        .iter()
        .filter_map(|(operand, want)| {
            match actual.iter().find(|(n, _)| n == operand).map(|(_, v)| *v) {
                Some(have) if have == *want => None,
                Some(have) => Some(format!("{operand} from {have} to {want}")),
                None => Some(format!("{operand} to {want}")),
            }
        })
        .collect();
    undone.sort();
    let available = condition(live, "Available");
    if available.is_none_or(|(s, _, _)| s != "True") {
        return Verdict::Waiting(co(
            Reason::ClusterOperatorNotAvailable,
            format!("Cluster operator {name} is not available"),
            Some(match available {
                Some(c) => describe("Available", c),
                None => "it has not reported an Available condition".into(),
            }),
        ));
    }
    // A missing Degraded condition counts as degraded, as in the CVO.
    let degraded = condition(live, "Degraded");
    let is_degraded = degraded.is_none_or(|(s, _, _)| s != "False");
    let degraded_finding = || {
        co(
            Reason::ClusterOperatorDegraded,
            format!("Cluster operator {name} is degraded"),
            Some(match degraded {
                Some(c) => describe("Degraded", c),
                None => "it has not reported a Degraded condition".into(),
            }),
        )
    };
    if is_degraded && !options.initializing {
        return Verdict::Waiting(degraded_finding());
    }
    if !undone.is_empty() {
        return Verdict::Waiting(co(
            Reason::ClusterOperatorUpdating,
            format!("Cluster operator {name} is updating versions"),
            Some(undone.join(", ")),
        ));
    }
    if is_degraded {
        return Verdict::Reported(degraded_finding());
    }
    Verdict::Healthy
}

/// The controller has seen the current spec.
fn observed(live: &Value) -> bool {
    let generation = int(live, "/metadata/generation").unwrap_or(0);
    int(live, "/status/observedGeneration").is_some_and(|o| o >= generation)
}

fn deployment(subject: &Subject, live: &Value, options: &Options) -> Verdict {
    let id = &subject.id;
    if observed(live) {
        if let Some(c @ ("True", _, _)) = condition(live, "ReplicaFailure") {
            return Verdict::Failed(finding(
                subject,
                Reason::WorkloadNotProgressing,
                format!(
                    "{id} has a replica failure: {}",
                    describe("ReplicaFailure", c)
                ),
            ));
        }
        let progressing = condition(live, "Progressing");
        if let Some(c @ ("False", "ProgressDeadlineExceeded", _)) = progressing {
            return Verdict::Failed(finding(
                subject,
                Reason::WorkloadNotProgressing,
                format!("{id} is not progressing: {}", describe("Progressing", c)),
            ));
        }
        if let (Some(a @ ("False", _, _)), Some(p @ ("False", _, _))) =
            (condition(live, "Available"), progressing)
        {
            return Verdict::Failed(finding(
                subject,
                Reason::WorkloadNotAvailable,
                format!(
                    "{id} is neither available nor progressing: {}; {}",
                    describe("Available", a),
                    describe("Progressing", p)
                ),
            ));
        }
    }
    if options.wait != WaitMode::Ready {
        return Verdict::Healthy;
    }
    let desired = int(live, "/spec/replicas").unwrap_or(1);
    let count = |field: &str| int(live, &format!("/status/{field}")).unwrap_or(0);
    let (replicas, updated, available) = (
        count("replicas"),
        count("updatedReplicas"),
        count("availableReplicas"),
    );
    rollout(
        subject,
        live,
        updated >= desired && replicas <= updated && available >= desired,
        format!("{updated} of {desired} replicas updated, {available} available"),
    )
}

/// `--wait ready`: healthy once the controller has seen the spec and `done` holds.
fn rollout(subject: &Subject, live: &Value, done: bool, progress: String) -> Verdict {
    if !observed(live) {
        let generation = int(live, "/metadata/generation").unwrap_or(0);
        return Verdict::Waiting(finding(
            subject,
            Reason::RolloutInProgress,
            format!(
                "{} is rolling out: its controller has not observed generation {generation} yet",
                subject.id
            ),
        ));
    }
    if done {
        return Verdict::Healthy;
    }
    Verdict::Waiting(finding(
        subject,
        Reason::RolloutInProgress,
        format!("{} is rolling out: {progress}", subject.id),
    ))
}

fn stateful_set(subject: &Subject, live: &Value, options: &Options) -> Verdict {
    if options.wait != WaitMode::Ready {
        return Verdict::Healthy;
    }
    let desired = int(live, "/spec/replicas").unwrap_or(1);
    let count = |field: &str| int(live, &format!("/status/{field}")).unwrap_or(0);
    let on_delete = live
        .pointer("/spec/updateStrategy/type")
        .and_then(Value::as_str)
        == Some("OnDelete");
    let (updated, ready, available) = (
        count("updatedReplicas"),
        count("readyReplicas"),
        count("availableReplicas"),
    );
    rollout(
        subject,
        live,
        (on_delete || updated >= desired) && ready >= desired && available >= desired,
        format!("{updated} of {desired} replicas updated, {ready} ready, {available} available"),
    )
}

fn daemon_set(subject: &Subject, live: &Value, options: &Options) -> Verdict {
    if options.wait != WaitMode::Ready {
        return Verdict::Healthy;
    }
    let count = |field: &str| int(live, &format!("/status/{field}")).unwrap_or(0);
    let desired = count("desiredNumberScheduled");
    let (updated, available) = (count("updatedNumberScheduled"), count("numberAvailable"));
    rollout(
        subject,
        live,
        updated >= desired && available >= desired,
        format!("{updated} of {desired} scheduled pods updated, {available} available"),
    )
}

fn job(subject: &Subject, live: &Value, options: &Options) -> Verdict {
    let id = &subject.id;
    if let Some(c @ ("True", _, _)) = condition(live, "Failed") {
        return Verdict::Failed(finding(
            subject,
            Reason::JobFailed,
            format!("{id} failed: {}", describe("Failed", c)),
        ));
    }
    let failed = int(live, "/status/failed").unwrap_or(0);
    let backoff_limit = int(live, "/spec/backoffLimit").unwrap_or(6);
    if failed > backoff_limit {
        return Verdict::Failed(finding(
            subject,
            Reason::JobFailed,
            format!(
                "{id} failed: {failed} pods failed, more than its backoff limit {backoff_limit}"
            ),
        ));
    }
    let completions = int(live, "/spec/completions").unwrap_or(1);
    let succeeded = int(live, "/status/succeeded").unwrap_or(0);
    if condition(live, "Complete").is_some_and(|(s, _, _)| s == "True") || succeeded >= completions
    {
        return Verdict::Healthy;
    }
    if options.initializing {
        // As the CVO: an install does not wait for Jobs.
        return Verdict::Healthy;
    }
    let active = int(live, "/status/active").unwrap_or(0);
    Verdict::Waiting(finding(
        subject,
        Reason::JobNotComplete,
        format!(
            "{id} has not completed: {succeeded} of {completions} succeeded, {active} active, {failed} failed"
        ),
    ))
}

fn crd(subject: &Subject, live: &Value) -> Verdict {
    let id = &subject.id;
    if let Some(c @ ("False", _, _)) = condition(live, "NamesAccepted") {
        return Verdict::Failed(finding(
            subject,
            Reason::CustomResourceDefinitionNotEstablished,
            format!(
                "{id}: its names were not accepted: {}",
                describe("NamesAccepted", c)
            ),
        ));
    }
    match condition(live, "Established") {
        Some(("True", _, _)) => Verdict::Healthy,
        other => Verdict::Waiting(finding(
            subject,
            Reason::CustomResourceDefinitionNotEstablished,
            match other {
                Some(c) => format!("{id} is not established: {}", describe("Established", c)),
                None => format!("{id} is not established yet"),
            },
        )),
    }
}

fn api_service(subject: &Subject, live: &Value) -> Verdict {
    match condition(live, "Available") {
        Some(("True", _, _)) => Verdict::Healthy,
        other => Verdict::Waiting(finding(
            subject,
            Reason::APIServiceNotAvailable,
            match other {
                Some(c) => format!(
                    "{} is not available: {}",
                    subject.id,
                    describe("Available", c)
                ),
                None => format!("{} has not reported an Available condition", subject.id),
            },
        )),
    }
}

/// Argo CD's generic rule: with `--wait ready`, an object that reports `Ready` must be ready.
fn generic(subject: &Subject, live: &Value, options: &Options) -> Verdict {
    if options.wait != WaitMode::Ready {
        return Verdict::Healthy;
    }
    match condition(live, "Ready") {
        None | Some(("True", _, _)) => Verdict::Healthy,
        Some(c) => Verdict::Waiting(finding(
            subject,
            Reason::NotReady,
            format!("{} is not ready: {}", subject.id, describe("Ready", c)),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn subject(group: &str, kind: &str) -> Subject {
        Subject {
            group: group.into(),
            kind: kind.into(),
            name: "x".into(),
            id: format!("{kind} ns/x"),
        }
    }

    fn opts(wait: WaitMode, initializing: bool) -> Options {
        Options {
            wait,
            initializing,
            ..Options::default()
        }
    }

    fn reason(v: &Verdict) -> Option<(Reason, &'static str)> {
        match v {
            Verdict::Healthy => None,
            Verdict::Reported(f) => Some((f.reason, "reported")),
            Verdict::Waiting(f) => Some((f.reason, "waiting")),
            Verdict::Failed(f) => Some((f.reason, "failed")),
        }
    }

    fn co_live(available: &str, degraded: Option<&str>, version: &str) -> Value {
        let mut conditions = vec![json!({"type": "Available", "status": available})];
        if let Some(d) = degraded {
            conditions.push(json!({"type": "Degraded", "status": d, "reason": "Broken", "message": "disk full"}));
        }
        json!({"status": {"conditions": conditions, "versions": [{"name": "operator", "version": version}]}})
    }

    #[test]
    fn cluster_operator_rules_follow_the_cvo() {
        let s = subject("config.openshift.io", "ClusterOperator");
        let desired = json!({"status": {"versions": [{"name": "operator", "version": "1.1.0"}]}});
        let upd = opts(WaitMode::Failures, false);
        let init = opts(WaitMode::Failures, true);
        use Reason::*;
        // (available, degraded, reported version, installing) → verdict.
        let cases = [
            ("True", Some("False"), "1.1.0", false, None),
            (
                "True",
                Some("False"),
                "1.0.0",
                false,
                Some((ClusterOperatorUpdating, "waiting")),
            ),
            (
                "False",
                Some("False"),
                "1.1.0",
                false,
                Some((ClusterOperatorNotAvailable, "waiting")),
            ),
            // A missing Degraded condition counts as degraded.
            (
                "True",
                None,
                "1.1.0",
                false,
                Some((ClusterOperatorDegraded, "waiting")),
            ),
            (
                "True",
                Some("True"),
                "1.1.0",
                false,
                Some((ClusterOperatorDegraded, "waiting")),
            ),
            // Installing: degraded is reported, versions still awaited.
            (
                "True",
                Some("True"),
                "1.1.0",
                true,
                Some((ClusterOperatorDegraded, "reported")),
            ),
            (
                "True",
                Some("True"),
                "1.0.0",
                true,
                Some((ClusterOperatorUpdating, "waiting")),
            ),
        ];
        for (available, degraded, version, installing, want) in cases {
            let live = co_live(available, degraded, version);
            let o = if installing { &init } else { &upd };
            assert_eq!(
                reason(&cluster_operator(&s, &desired, &live, o)),
                want,
                "{live}, installing: {installing}"
            );
        }
        let none = reason(&cluster_operator(&s, &json!({}), &json!({}), &upd));
        assert_eq!(none, Some((Reason::ClusterOperatorNoVersions, "failed")));
        let Verdict::Waiting(f) =
            cluster_operator(&s, &desired, &co_live("True", Some("True"), "1.1.0"), &upd)
        else {
            panic!()
        };
        assert_eq!(
            f.message,
            "Cluster operator x is degraded: Degraded=True: Broken: disk full"
        );
        assert_eq!(f.operator.as_deref(), Some("x"));
    }

    fn deploy(generation: i64, observed: i64, conditions: Value, status: Value) -> Value {
        let mut status = status;
        status["observedGeneration"] = json!(observed);
        status["conditions"] = conditions;
        json!({"metadata": {"generation": generation}, "spec": {"replicas": 3}, "status": status})
    }

    #[test]
    fn deployment_failures_and_rollout() {
        let s = subject("apps", "Deployment");
        let failures = opts(WaitMode::Failures, false);
        let ready = opts(WaitMode::Ready, false);
        let deadline = json!([{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"}]);
        let d = deploy(2, 2, deadline.clone(), json!({}));
        assert_eq!(
            reason(&deployment(&s, &d, &failures)),
            Some((Reason::WorkloadNotProgressing, "failed"))
        );
        // Stale status (an older spec) does not count.
        let stale = deploy(3, 2, deadline, json!({}));
        assert_eq!(reason(&deployment(&s, &stale, &failures)), None);
        assert_eq!(
            reason(&deployment(&s, &stale, &ready)),
            Some((Reason::RolloutInProgress, "waiting"))
        );
        let rf = json!([{"type": "ReplicaFailure", "status": "True", "reason": "FailedCreate"}]);
        assert_eq!(
            reason(&deployment(&s, &deploy(1, 1, rf, json!({})), &failures)),
            Some((Reason::WorkloadNotProgressing, "failed"))
        );
        let na = json!([{"type": "Available", "status": "False"}, {"type": "Progressing", "status": "False"}]);
        assert_eq!(
            reason(&deployment(&s, &deploy(1, 1, na, json!({})), &failures)),
            Some((Reason::WorkloadNotAvailable, "failed"))
        );
        // Rolling out: fine without waiting, awaited with --wait ready.
        let rolling = json!([{"type": "Available", "status": "False"}, {"type": "Progressing", "status": "True"}]);
        let partial = deploy(
            1,
            1,
            rolling,
            json!({"replicas": 3, "updatedReplicas": 3, "availableReplicas": 1}),
        );
        assert_eq!(reason(&deployment(&s, &partial, &failures)), None);
        let Verdict::Waiting(f) = deployment(&s, &partial, &ready) else {
            panic!()
        };
        assert!(
            f.message.contains("3 of 3 replicas updated, 1 available"),
            "{}",
            f.message
        );
        let done = deploy(
            1,
            1,
            json!([]),
            json!({"replicas": 3, "updatedReplicas": 3, "availableReplicas": 3}),
        );
        assert_eq!(reason(&deployment(&s, &done, &ready)), None);
    }

    #[test]
    fn jobs_are_barriers_except_while_installing() {
        let s = subject("batch", "Job");
        let upd = opts(WaitMode::Failures, false);
        let running = json!({"status": {"active": 1}});
        assert_eq!(
            reason(&job(&s, &running, &upd)),
            Some((Reason::JobNotComplete, "waiting"))
        );
        assert_eq!(
            reason(&job(&s, &running, &opts(WaitMode::Failures, true))),
            None
        );
        let complete = json!({"status": {"conditions": [{"type": "Complete", "status": "True"}], "succeeded": 1}});
        assert_eq!(reason(&job(&s, &complete, &upd)), None);
        let failed = json!({"status": {"conditions": [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}]}});
        assert_eq!(
            reason(&job(&s, &failed, &upd)),
            Some((Reason::JobFailed, "failed"))
        );
        let exhausted = json!({"spec": {"backoffLimit": 1}, "status": {"failed": 2}});
        assert_eq!(
            reason(&job(&s, &exhausted, &upd)),
            Some((Reason::JobFailed, "failed"))
        );
    }

    #[test]
    fn crds_api_services_and_ready_conditions() {
        let crd_s = subject("apiextensions.k8s.io", "CustomResourceDefinition");
        let est = json!({"status": {"conditions": [{"type": "Established", "status": "True"}]}});
        assert_eq!(reason(&crd(&crd_s, &est)), None);
        assert_eq!(
            reason(&crd(&crd_s, &json!({}))),
            Some((Reason::CustomResourceDefinitionNotEstablished, "waiting"))
        );
        let api = subject("apiregistration.k8s.io", "APIService");
        let down = json!({"status": {"conditions": [{"type": "Available", "status": "False", "reason": "ServiceNotFound"}]}});
        assert_eq!(
            reason(&api_service(&api, &down)),
            Some((Reason::APIServiceNotAvailable, "waiting"))
        );
        let w = subject("example.com", "Widget");
        let not_ready = json!({"status": {"conditions": [{"type": "Ready", "status": "False"}]}});
        assert_eq!(
            reason(&generic(&w, &not_ready, &opts(WaitMode::Failures, false))),
            None
        );
        assert_eq!(
            reason(&generic(&w, &not_ready, &opts(WaitMode::Ready, false))),
            Some((Reason::NotReady, "waiting"))
        );
        assert_eq!(
            reason(&generic(&w, &json!({}), &opts(WaitMode::Ready, false))),
            None
        );
    }

    #[test]
    fn daemon_and_stateful_sets_roll_out() {
        let ready = opts(WaitMode::Ready, false);
        let ds = json!({"metadata": {"generation": 1}, "status": {"observedGeneration": 1, "desiredNumberScheduled": 0}});
        assert_eq!(
            reason(&daemon_set(&subject("apps", "DaemonSet"), &ds, &ready)),
            None
        );
        let sts = json!({"metadata": {"generation": 1}, "spec": {"replicas": 2}, "status": {"observedGeneration": 1, "readyReplicas": 1, "availableReplicas": 1, "updatedReplicas": 2}});
        assert_eq!(
            reason(&stateful_set(&subject("apps", "StatefulSet"), &sts, &ready)),
            Some((Reason::RolloutInProgress, "waiting"))
        );
    }
}
