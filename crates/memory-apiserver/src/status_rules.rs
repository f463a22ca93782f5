//! Validation of writes to a workload's `/status`, as kube-apiserver v1.36 does it.
//!
//! Deployments, StatefulSets and DaemonSets: counters are not negative, a Deployment's or
//! StatefulSet's counts are not above `status.replicas`, `availableReplicas` is not above
//! `readyReplicas`, and `collisionCount` never goes down.
//!
//! The Job has the rules a client is most likely to meet: since `spec.managedBy` let controllers
//! other than kube's own write Job status, the apiserver checks that a status is consistent
//! (a `Complete=True` Job has `SuccessCriteriaMet=True`, a `startTime` and a `completionTime`;
//! a `Failed=True` Job has `FailureTarget=True`; a finished Job has no active pods …) and that
//! a transition is allowed (a terminal condition stays, counters do not decrease, times do not
//! move). Like upstream, most rules are checked only when the fields they are about change, so
//! an unrelated write to an inconsistent status still goes through. The messages are the
//! apiserver's own, as seen on a v1.36 control plane (the crate's README.md, "Workload
//! status"). Indexed-Job rules (`completedIndexes`, `failedIndexes`) are not implemented.

use jiff::Timestamp;
use serde_json::{Value, json};

use super::errors::Cause;
use super::resources::ResourceInfo;

/// Causes of a 422 for a write of `new` over `old` through `/status` (empty: accepted).
pub fn check_status_update(info: &ResourceInfo, old: &Value, new: &Value) -> Vec<Cause> {
    if info.custom {
        return Vec::new();
    }
    match (info.group.as_str(), info.kind.as_str()) {
        ("batch", "Job") => check_job(old, new),
        ("apps", "Deployment") => check_counts(
            old,
            new,
            &[
                "observedGeneration",
                "replicas",
                "updatedReplicas",
                "readyReplicas",
                "availableReplicas",
                "unavailableReplicas",
                "terminatingReplicas",
                "collisionCount",
            ],
            &["updatedReplicas", "readyReplicas", "availableReplicas"],
            "readyReplicas",
        ),
        ("apps", "StatefulSet") => check_counts(
            old,
            new,
            &[
                "replicas",
                "readyReplicas",
                "currentReplicas",
                "updatedReplicas",
                "availableReplicas",
                "observedGeneration",
                "collisionCount",
            ],
            &[
                "readyReplicas",
                "currentReplicas",
                "updatedReplicas",
                "availableReplicas",
            ],
            "status.readyReplicas",
        ),
        ("apps", "DaemonSet") => check_counts(
            old,
            new,
            &[
                "currentNumberScheduled",
                "numberMisscheduled",
                "desiredNumberScheduled",
                "numberReady",
                "observedGeneration",
                "updatedNumberScheduled",
                "numberAvailable",
                "numberUnavailable",
                "collisionCount",
            ],
            &[],
            "",
        ),
        _ => Vec::new(),
    }
}

/// The apps kinds' status rules: counters are not negative, some are not above
/// `status.replicas`, `availableReplicas` is not above the ready ones (`ready_name` in the
/// message), and `collisionCount` does not go down.
fn check_counts(
    old: &Value,
    new: &Value,
    non_negative: &[&str],
    at_most_replicas: &[&str],
    ready_name: &str,
) -> Vec<Cause> {
    let mut causes = Vec::new();
    for field in non_negative {
        if let Some(n) = opt_int(new, field).filter(|n| *n < 0) {
            causes.push(Cause::invalid(
                &format!("status.{field}"),
                &json!(n),
                "must be greater than or equal to 0",
            ));
        }
    }
    if !at_most_replicas.is_empty() {
        let replicas = int(new, "replicas");
        for field in at_most_replicas {
            let n = int(new, field);
            if n > replicas {
                causes.push(Cause::invalid(
                    &format!("status.{field}"),
                    &json!(n),
                    "cannot be greater than status.replicas",
                ));
            }
        }
        let available = int(new, "availableReplicas");
        if available > int(new, "readyReplicas") {
            causes.push(Cause::invalid(
                "status.availableReplicas",
                &json!(available),
                &format!("cannot be greater than {ready_name}"),
            ));
        }
    }
    if let (Some(n), Some(o)) = (
        opt_int(new, "collisionCount"),
        opt_int(old, "collisionCount"),
    ) && n < o
    {
        causes.push(Cause::invalid(
            "status.collisionCount",
            &json!(n),
            "cannot be decremented",
        ));
    }
    causes
}

fn conditions(job: &Value) -> &[Value] {
    job.pointer("/status/conditions")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// Is condition `ty` present with status `True`?
pub fn condition_true(job: &Value, ty: &str) -> bool {
    conditions(job)
        .iter()
        .any(|c| c["type"] == ty && c["status"] == "True")
}

/// Has the Job finished (`Complete=True` or `Failed=True`)?
pub fn job_finished(job: &Value) -> bool {
    condition_true(job, "Complete") || condition_true(job, "Failed")
}

fn int(job: &Value, field: &str) -> i64 {
    job.pointer(&format!("/status/{field}"))
        .and_then(Value::as_i64)
        .unwrap_or(0)
}

fn opt_int(job: &Value, field: &str) -> Option<i64> {
    job.pointer(&format!("/status/{field}"))
        .and_then(Value::as_i64)
}

/// A status timestamp: the text as written, and its instant when it parses.
fn time(job: &Value, field: &str) -> Option<(String, Option<Timestamp>)> {
    let s = job
        .pointer(&format!("/status/{field}"))
        .and_then(Value::as_str)?;
    Some((s.to_string(), s.parse::<Timestamp>().ok()))
}

fn same_time(
    a: &Option<(String, Option<Timestamp>)>,
    b: &Option<(String, Option<Timestamp>)>,
) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some((sa, ta)), Some((sb, tb))) => match (ta, tb) {
            (Some(x), Some(y)) => x == y,
            _ => sa == sb,
        },
        _ => false,
    }
}

fn cond_invalid(detail: &str) -> Cause {
    Cause {
        reason: "FieldValueInvalid",
        field: "status.conditions".into(),
        message: format!("Invalid value: {detail}"),
    }
}

/// What a write to a Job's `/status` changes: the conditions and times of the new status, and
/// which fields moved (most rules apply only when their field changes, as in kube-apiserver).
struct JobChange<'a> {
    old: &'a Value,
    new: &'a Value,
    complete: bool,
    failed: bool,
    failure_target: bool,
    success_met: bool,
    finished: bool,
    finished_changed: bool,
    active_changed: bool,
    ready_changed: bool,
    terminating_changed: bool,
    start_old: Option<(String, Option<Timestamp>)>,
    start_new: Option<(String, Option<Timestamp>)>,
    done_old: Option<(String, Option<Timestamp>)>,
    done_new: Option<(String, Option<Timestamp>)>,
    start_changed: bool,
    completion_changed: bool,
    suspend: bool,
}

impl<'a> JobChange<'a> {
    fn new(old: &'a Value, new: &'a Value) -> Self {
        let complete = condition_true(new, "Complete");
        let failed = condition_true(new, "Failed");
        let (start_old, start_new) = (time(old, "startTime"), time(new, "startTime"));
        let (done_old, done_new) = (time(old, "completionTime"), time(new, "completionTime"));
        JobChange {
            old,
            new,
            complete,
            failed,
            failure_target: condition_true(new, "FailureTarget"),
            success_met: condition_true(new, "SuccessCriteriaMet"),
            finished: complete || failed,
            finished_changed: job_finished(old) != (complete || failed),
            active_changed: int(old, "active") != int(new, "active"),
            ready_changed: opt_int(old, "ready") != opt_int(new, "ready"),
            terminating_changed: opt_int(old, "terminating") != opt_int(new, "terminating"),
            start_changed: !same_time(&start_old, &start_new),
            completion_changed: !same_time(&done_old, &done_new),
            start_old,
            start_new,
            done_old,
            done_new,
            suspend: new.pointer("/spec/suspend").and_then(Value::as_bool) == Some(true),
        }
    }

    /// Did condition `ty` turn true or stop being true?
    fn changed(&self, ty: &str) -> bool {
        condition_true(self.old, ty) != condition_true(self.new, ty)
    }
}

/// The rules of kube-apiserver's Job status strategy, in its order: counters, conditions and
/// times, a finished Job's fields, then transitions from the old status.
fn check_job(old: &Value, new: &Value) -> Vec<Cause> {
    let j = JobChange::new(old, new);
    let mut causes = Vec::new();
    job_counters(new, &mut causes);
    job_conditions_and_times(&j, &mut causes);
    job_finished_fields(&j, &mut causes);
    job_transitions(&j, &mut causes);
    causes
}

/// No counter is negative.
fn job_counters(new: &Value, causes: &mut Vec<Cause>) {
    for field in ["active", "succeeded", "failed", "ready", "terminating"] {
        if let Some(n) = opt_int(new, field).filter(|n| *n < 0) {
            causes.push(Cause::invalid(
                &format!("status.{field}"),
                &json!(n),
                "must be greater than or equal to 0",
            ));
        }
    }
}

/// Conditions that exclude or require each other, and `completionTime` against them and
/// `startTime`.
fn job_conditions_and_times(j: &JobChange, causes: &mut Vec<Cause>) {
    if (j.changed("Complete") || j.changed("Failed")) && j.complete && j.failed {
        causes.push(cond_invalid(
            "cannot set Complete=True and Failed=true conditions",
        ));
    }
    if (j.changed("Complete") || j.changed("FailureTarget")) && j.complete && j.failure_target {
        causes.push(cond_invalid(
            "cannot set Complete=True and FailureTarget=true conditions",
        ));
    }
    if j.changed("Complete") || j.completion_changed {
        if let Some((s, _)) = j.done_new.as_ref().filter(|_| !j.complete) {
            causes.push(Cause::invalid(
                "status.completionTime",
                &json!(s),
                "cannot set completionTime when there is no Complete=True condition",
            ));
        }
        if j.done_new.is_none() && j.complete {
            causes.push(Cause::required(
                "status.completionTime",
                "completionTime is required for Complete jobs",
            ));
        }
    }
    if (j.start_changed || j.completion_changed)
        && let (Some((_, Some(start))), Some((s, Some(done)))) = (&j.start_new, &j.done_new)
        && done < start
    {
        causes.push(Cause::invalid(
            "status.completionTime",
            &json!(s),
            "must be equal to or after `startTime`",
        ));
    }
    if j.changed("Failed") && j.failed && !j.failure_target {
        causes.push(cond_invalid(
            "cannot set Failed=True condition without the FailureTarget=true condition",
        ));
    }
    if (j.changed("Complete") || j.changed("SuccessCriteriaMet")) && j.complete && !j.success_met {
        causes.push(cond_invalid(
            "cannot set Complete=True condition without the SuccessCriteriaMet=true condition",
        ));
    }
}

/// A finished Job has no active or terminating Pods and a `startTime`; never more ready Pods
/// than active ones; `SuccessCriteriaMet` excludes failure.
fn job_finished_fields(j: &JobChange, causes: &mut Vec<Cause>) {
    let new = j.new;
    if (j.finished_changed || j.active_changed) && j.finished && int(new, "active") > 0 {
        causes.push(Cause::invalid(
            "status.active",
            &json!(int(new, "active")),
            "active>0 is invalid for finished job",
        ));
    }
    if (j.finished_changed || j.start_changed) && j.finished && j.start_new.is_none() {
        causes.push(Cause::required(
            "status.startTime",
            "startTime is required for finished job",
        ));
    }
    if (j.finished_changed || j.terminating_changed)
        && j.finished
        && opt_int(new, "terminating").is_some_and(|t| t > 0)
    {
        causes.push(Cause::invalid(
            "status.terminating",
            &json!(int(new, "terminating")),
            "terminating>0 is invalid for finished job",
        ));
    }
    if (j.ready_changed || j.active_changed)
        && let Some(ready) = opt_int(new, "ready").filter(|r| *r > int(new, "active"))
    {
        causes.push(Cause::invalid(
            "status.ready",
            &json!(ready),
            "cannot set more ready pods than active",
        ));
    }
    if j.success_met && j.failed {
        causes.push(cond_invalid(
            "cannot set SuccessCriteriaMet=True and Failed=true conditions",
        ));
    }
    if j.success_met && j.failure_target {
        causes.push(cond_invalid(
            "cannot set SuccessCriteriaMet=True and FailureTarget=true conditions",
        ));
    }
}

/// Transitions from the old status: terminal conditions stay, counters do not decrease,
/// `completionTime` and (unless suspended or resuming) `startTime` are immutable once set.
fn job_transitions(j: &JobChange, causes: &mut Vec<Cause>) {
    let (old, new) = (j.old, j.new);
    for ty in ["Failed", "Complete", "FailureTarget"] {
        if condition_true(old, ty) && !condition_true(new, ty) {
            causes.push(cond_invalid(&format!(
                "cannot disable the terminal {ty}=True condition"
            )));
        }
    }
    for (field, what) in [("failed", "failed"), ("succeeded", "succeeded")] {
        let n = int(new, field);
        if n < int(old, field) {
            causes.push(Cause::invalid(
                &format!("status.{field}"),
                &json!(n),
                &format!("cannot decrease the {what} counter"),
            ));
        }
    }
    if let (Some((s, _)), Some(_)) = (&j.done_new, &j.done_old)
        && j.completion_changed
    {
        causes.push(Cause::invalid(
            "status.completionTime",
            &json!(s),
            "field is immutable",
        ));
    }
    let resuming = conditions(old)
        .iter()
        .any(|c| c["type"] == "Suspended" && c["status"] == "True")
        && conditions(new)
            .iter()
            .any(|c| c["type"] == "Suspended" && c["status"] == "False");
    if j.start_changed && j.start_old.is_some() && !j.suspend && !resuming {
        let value = j.start_new.as_ref().map_or(Value::Null, |(s, _)| json!(s));
        causes.push(Cause::invalid(
            "status.startTime",
            &value,
            "field is immutable for unsuspended job once set",
        ));
    }
    if condition_true(old, "SuccessCriteriaMet") && !j.success_met {
        causes.push(cond_invalid(
            "cannot disable the SuccessCriteriaMet=True condition",
        ));
    }
    if condition_true(old, "Complete")
        && !condition_true(old, "SuccessCriteriaMet")
        && j.success_met
    {
        causes.push(cond_invalid(
            "cannot set SuccessCriteriaMet=True for Job already has Complete=true conditions",
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::builtins;

    fn job() -> ResourceInfo {
        builtins()
            .into_iter()
            .find(|i| i.kind == "Job")
            .expect("Job")
    }

    fn messages(old: Value, new: Value) -> Vec<String> {
        check_status_update(&job(), &old, &new)
            .iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect()
    }

    fn status(s: Value) -> Value {
        json!({"spec": {}, "status": s})
    }

    #[test]
    fn a_lone_complete_condition_is_refused_like_kube() {
        let got = messages(
            status(json!({})),
            status(json!({"conditions": [{"type": "Complete", "status": "True"}]})),
        );
        assert_eq!(
            got,
            vec![
                "status.completionTime: Required value: completionTime is required for Complete jobs",
                "status.conditions: Invalid value: cannot set Complete=True condition without the SuccessCriteriaMet=true condition",
                "status.startTime: Required value: startTime is required for finished job",
            ]
        );
        let failed = messages(
            status(json!({})),
            status(json!({"conditions": [{"type": "Failed", "status": "True"}]})),
        );
        assert_eq!(
            failed,
            vec![
                "status.conditions: Invalid value: cannot set Failed=True condition without the FailureTarget=true condition",
                "status.startTime: Required value: startTime is required for finished job",
            ]
        );
    }

    #[test]
    fn a_complete_status_with_its_prerequisites_is_accepted_and_then_sticks() {
        let done = status(json!({
            "startTime": "2026-01-01T00:00:00Z", "completionTime": "2026-01-01T00:05:00Z",
            "conditions": [{"type": "SuccessCriteriaMet", "status": "True"},
                           {"type": "Complete", "status": "True"}]}));
        assert!(messages(status(json!({})), done.clone()).is_empty());
        let undone = status(json!({
            "startTime": "2026-01-01T00:00:00Z", "completionTime": "2026-01-01T00:05:00Z",
            "conditions": [{"type": "SuccessCriteriaMet", "status": "True"}]}));
        assert_eq!(
            messages(done.clone(), undone),
            vec![
                "status.completionTime: Invalid value: \"2026-01-01T00:05:00Z\": cannot set completionTime when there is no Complete=True condition",
                "status.conditions: Invalid value: cannot disable the terminal Complete=True condition",
            ]
        );
        let mut moved = done.clone();
        moved["status"]["completionTime"] = json!("2026-01-01T00:00:00Z");
        assert_eq!(
            messages(done.clone(), moved),
            vec![
                "status.completionTime: Invalid value: \"2026-01-01T00:00:00Z\": field is immutable"
            ]
        );
        let mut more = done.clone();
        more["status"]["succeeded"] = json!(2);
        assert!(messages(done, more.clone()).is_empty());
        let mut less = more.clone();
        less["status"]["succeeded"] = json!(1);
        assert_eq!(
            messages(more, less),
            vec!["status.succeeded: Invalid value: 1: cannot decrease the succeeded counter"]
        );
    }

    #[test]
    fn counters_and_times_are_checked() {
        assert_eq!(
            messages(status(json!({})), status(json!({"ready": 2, "active": 1}))),
            vec!["status.ready: Invalid value: 2: cannot set more ready pods than active"]
        );
        assert_eq!(
            messages(status(json!({})), status(json!({"active": -1}))),
            vec!["status.active: Invalid value: -1: must be greater than or equal to 0"]
        );
        let failed_active = status(json!({"active": 1, "startTime": "2026-01-01T00:00:00Z",
            "conditions": [{"type": "FailureTarget", "status": "True"},
                           {"type": "Failed", "status": "True"}]}));
        assert_eq!(
            messages(status(json!({})), failed_active),
            vec!["status.active: Invalid value: 1: active>0 is invalid for finished job"]
        );
        let started = status(json!({"startTime": "2026-01-01T00:00:00Z"}));
        let restarted = status(json!({"startTime": "2026-01-01T00:05:00Z"}));
        assert_eq!(
            messages(started.clone(), restarted.clone()),
            vec![
                "status.startTime: Invalid value: \"2026-01-01T00:05:00Z\": field is immutable for unsuspended job once set"
            ]
        );
        let mut suspended = restarted;
        suspended["spec"]["suspend"] = json!(true);
        assert!(messages(started, suspended).is_empty());
    }

    fn apps(kind: &str) -> ResourceInfo {
        builtins()
            .into_iter()
            .find(|i| i.kind == kind)
            .expect("apps kind")
    }

    #[test]
    fn apps_counters_are_checked_like_kube() {
        let got = |kind: &str, old: Value, new: Value| -> Vec<String> {
            check_status_update(&apps(kind), &status(old), &status(new))
                .iter()
                .map(|c| format!("{}: {}", c.field, c.message))
                .collect()
        };
        assert_eq!(
            got("Deployment", json!({}), json!({"replicas": -1})),
            vec![
                "status.replicas: Invalid value: -1: must be greater than or equal to 0",
                "status.updatedReplicas: Invalid value: 0: cannot be greater than status.replicas",
                "status.readyReplicas: Invalid value: 0: cannot be greater than status.replicas",
                "status.availableReplicas: Invalid value: 0: cannot be greater than status.replicas",
            ]
        );
        assert_eq!(
            got(
                "Deployment",
                json!({}),
                json!({"replicas": 2, "readyReplicas": 1, "availableReplicas": 2})
            ),
            vec![
                "status.availableReplicas: Invalid value: 2: cannot be greater than readyReplicas"
            ]
        );
        assert_eq!(
            got(
                "StatefulSet",
                json!({"collisionCount": 0}),
                json!({"observedGeneration": -1, "collisionCount": -1})
            ),
            vec![
                "status.observedGeneration: Invalid value: -1: must be greater than or equal to 0",
                "status.collisionCount: Invalid value: -1: must be greater than or equal to 0",
                "status.collisionCount: Invalid value: -1: cannot be decremented",
            ]
        );
        assert_eq!(
            got(
                "StatefulSet",
                json!({}),
                json!({"replicas": 2, "readyReplicas": 1, "availableReplicas": 2})
            ),
            vec![
                "status.availableReplicas: Invalid value: 2: cannot be greater than status.readyReplicas"
            ]
        );
        assert!(
            got(
                "DaemonSet",
                json!({}),
                json!({"desiredNumberScheduled": 1, "numberReady": 2})
            )
            .is_empty()
        );
        assert_eq!(
            got("DaemonSet", json!({}), json!({"numberReady": -1})),
            vec!["status.numberReady: Invalid value: -1: must be greater than or equal to 0"]
        );
    }

    #[test]
    fn unrelated_writes_to_an_inconsistent_status_pass() {
        // Only the rules about changed fields apply.
        let odd = status(json!({"active": 1,
            "conditions": [{"type": "Complete", "status": "True"}]}));
        let mut relabelled = odd.clone();
        relabelled["status"]["ready"] = json!(0);
        assert!(messages(odd, relabelled).is_empty());
    }
}
