//! The Job controller on a cluster whose Pods never run.
//!
//! A Job it manages (no `spec.managedBy`, or `kubernetes.io/job-controller`) that has not
//! finished gets `startTime`, `active` Pods (`min(parallelism, completions)`, or `parallelism`
//! for a work queue), `ready: 0`, `terminating: 0` and `uncountedTerminatedPods: {}`. Suspended:
//! `Suspended=True JobSuspended`, no active Pods, no `startTime`; resumed:
//! `Suspended=False JobResumed` and a new `startTime`. `completions: 0` completes at once
//! (`SuccessCriteriaMet` then `Complete`, reason `CompletionsReached`), and
//! `activeDeadlineSeconds` fails it (`FailureTarget` then `Failed`, reason `DeadlineExceeded`,
//! its active Pods counted as failed). Finished Jobs and Jobs managed by someone else are left
//! alone, whatever their status says.

use std::collections::HashMap;
use std::time::Duration;

use serde_json::{Map, Value, json};

use super::{int, set_omitempty, status_map, write_status};
use crate::handler::{State, now};
use crate::status_rules::job_finished;
use crate::store::ObjKey;

/// `spec.managedBy` of Jobs kube's Job controller reconciles.
pub const JOB_CONTROLLER: &str = "kubernetes.io/job-controller";

/// kube's `ensureJobConditionStatus`: sets the condition when its status differs (a `False`
/// condition is only added over an existing one).
fn ensure_condition(
    status: &mut Map<String, Value>,
    ty: &str,
    st: &str,
    reason: &str,
    message: &str,
    ts: &str,
) {
    let conds = status
        .entry("conditions")
        .or_insert_with(|| json!([]))
        .as_array_mut();
    let Some(conds) = conds else {
        return;
    };
    match conds.iter_mut().find(|c| c["type"] == ty) {
        Some(c) if c["status"] == st => {}
        Some(c) => {
            c["status"] = json!(st);
            c["reason"] = json!(reason);
            c["message"] = json!(message);
            c["lastProbeTime"] = json!(ts);
            c["lastTransitionTime"] = json!(ts);
        }
        None if st == "True" => conds.push(json!({"type": ty, "status": st, "lastProbeTime": ts,
            "lastTransitionTime": ts, "reason": reason, "message": message})),
        None => {}
    }
    if conds.is_empty() {
        status.remove("conditions");
    }
}

/// `spec.completions` after kube's defaulting of a new Job (this server does not default):
/// without `completions` and `parallelism` both become 1; a `parallelism` alone is a work queue
/// (no completions).
pub fn defaulted_completions(spec: &Value) -> Option<i64> {
    match (spec["completions"].as_i64(), spec["parallelism"].is_null()) {
        (Some(c), _) => Some(c),
        (None, true) => Some(1),
        (None, false) => None,
    }
}

/// Reconcile the Job at `key`; returns when its active deadline falls due. `created` holds the
/// completions of Jobs as they were created (kube defaults them once, at creation).
pub fn sync(
    st: &mut State,
    key: &ObjKey,
    created: &mut HashMap<String, Option<i64>>,
) -> Option<Duration> {
    let job = st.store.get(key)?.clone();
    let job = &job;
    let spec = &job["spec"];
    let uid = State::uid_of(job);
    let defaulted = *created
        .entry(uid)
        .or_insert_with(|| defaulted_completions(spec));
    if spec["managedBy"]
        .as_str()
        .is_some_and(|m| m != JOB_CONTROLLER)
        || job_finished(job)
    {
        return None;
    }
    let ts = now();
    let mut status = status_map(job);
    // Statuses kube writes on the way, while the Pods it deletes are terminating.
    let mut steps: Vec<Map<String, Value>> = Vec::new();
    let running = int(job, "/status/active");
    let wake = if spec["suspend"].as_bool().unwrap_or(false) {
        suspend(&mut status, running, &ts, &mut steps);
        None
    } else {
        run(st, job, defaulted, &mut status, &ts, &mut steps)
    };
    for step in steps {
        write_status(st, key, Value::Object(step), None);
    }
    write_status(st, key, Value::Object(with_pods(&status, 0, None)), None);
    wake
}

/// A suspended Job: `Suspended=True`, no start time, its `running` Pods deleted.
fn suspend(
    status: &mut Map<String, Value>,
    running: i64,
    ts: &str,
    steps: &mut Vec<Map<String, Value>>,
) {
    ensure_condition(
        status,
        "Suspended",
        "True",
        "JobSuspended",
        "Job suspended",
        ts,
    );
    status.remove("startTime");
    status.remove("active");
    if running > 0 {
        steps.push(with_pods(status, running, None));
    }
}

/// A running (or resumed) Job: its active Pods, complete at once with `completions: 0`, failed
/// at its `activeDeadlineSeconds`. Returns when the deadline will pass.
fn run(
    st: &mut State,
    job: &Value,
    defaulted: Option<i64>,
    status: &mut Map<String, Value>,
    ts: &str,
    steps: &mut Vec<Map<String, Value>>,
) -> Option<Duration> {
    let spec = &job["spec"];
    resume(status, ts);
    let parallelism = spec["parallelism"].as_i64().unwrap_or(1).max(0);
    let completions = spec["completions"].as_i64().or(defaulted);
    let succeeded = int(job, "/status/succeeded");
    let active = match completions {
        Some(c) => parallelism.min((c - succeeded).max(0)),
        None if succeeded > 0 => 0,
        None => parallelism,
    };
    let left = deadline_left(spec, status);
    if completions == Some(0) {
        complete(status, ts);
        return None;
    }
    if left.is_some_and(|l| l <= 0) {
        fail_at_deadline(st, job, status, ts, steps);
        return None;
    }
    set_omitempty(status, "active", active);
    left.map(|l| Duration::from_secs(l as u64))
}

/// `Suspended=False` (a new start time when resumed, or when there was none).
fn resume(status: &mut Map<String, Value>, ts: &str) {
    let was_suspended = status
        .get("conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Suspended" && c["status"] == "True")
        });
    ensure_condition(
        status,
        "Suspended",
        "False",
        "JobResumed",
        "Job resumed",
        ts,
    );
    if was_suspended || !status.contains_key("startTime") {
        status.insert("startTime".into(), json!(ts));
    }
}

/// Seconds left until `activeDeadlineSeconds` passes (0 or less: passed), if the Job has one
/// and has started.
fn deadline_left(spec: &Value, status: &Map<String, Value>) -> Option<i64> {
    let started = status
        .get("startTime")
        .and_then(Value::as_str)
        .and_then(|t| t.parse::<jiff::Timestamp>().ok())?;
    let deadline = spec["activeDeadlineSeconds"].as_i64()?;
    Some(started.as_second() + deadline - jiff::Timestamp::now().as_second())
}

/// `SuccessCriteriaMet` then `Complete`, with a completion time.
fn complete(status: &mut Map<String, Value>, ts: &str) {
    let msg = "Reached expected number of succeeded pods";
    ensure_condition(
        status,
        "SuccessCriteriaMet",
        "True",
        "CompletionsReached",
        msg,
        ts,
    );
    ensure_condition(status, "Complete", "True", "CompletionsReached", msg, ts);
    status.insert("completionTime".into(), json!(ts));
    status.remove("active");
}

/// `FailureTarget`, the active Pods terminating and counted as failed, then `Failed`.
fn fail_at_deadline(
    st: &mut State,
    job: &Value,
    status: &mut Map<String, Value>,
    ts: &str,
    steps: &mut Vec<Map<String, Value>>,
) {
    let msg = "Job was active longer than specified deadline";
    let running = int(job, "/status/active");
    let failed = int(job, "/status/failed") + running;
    ensure_condition(status, "FailureTarget", "True", "DeadlineExceeded", msg, ts);
    status.remove("active");
    if running > 0 {
        // The deleted Pods are terminating, counted as failed, then gone.
        let uids: Vec<String> = (0..running).map(|_| st.rng.uuid()).collect();
        steps.push(with_pods(status, running, Some(uids)));
        set_omitempty(status, "failed", failed);
        steps.push(with_pods(status, running, None));
        steps.push(with_pods(status, 0, None));
    }
    set_omitempty(status, "failed", failed);
    ensure_condition(status, "Failed", "True", "DeadlineExceeded", msg, ts);
}

/// `status` with kube's Pod counters: none ready, `terminating` Pods, and the uids of failed
/// Pods not yet counted.
fn with_pods(
    status: &Map<String, Value>,
    terminating: i64,
    uncounted_failed: Option<Vec<String>>,
) -> Map<String, Value> {
    let mut s = status.clone();
    s.insert("ready".into(), json!(0));
    s.insert("terminating".into(), json!(terminating));
    let uncounted = match uncounted_failed {
        Some(uids) => json!({"failed": uids}),
        None => json!({}),
    };
    s.insert("uncountedTerminatedPods".into(), uncounted);
    s
}

#[cfg(test)]
mod tests {
    use super::super::reconcile;
    use super::super::tests::{create, get, patch_spec, patch_status, setup};
    use super::*;

    fn job(st: &State, name: &str) -> Value {
        get(st, "batch", "jobs", name)
    }

    #[test]
    fn a_job_gets_its_pod_and_start_time() {
        let (mut st, mut timers, mut mem) = setup();
        create(&mut st, "batch", "jobs", "j", json!({}));
        assert_eq!(job(&st, "j")["status"], json!({}));
        reconcile(&mut st, &mut timers, &mut mem);
        let s = job(&st, "j")["status"].clone();
        assert_eq!(s["active"], 1);
        assert_eq!(s["ready"], 0);
        assert_eq!(s["terminating"], 0);
        assert_eq!(s["uncountedTerminatedPods"], json!({}));
        assert!(s["startTime"].is_string());
        assert!(s.get("conditions").is_none());
        // A client's count is corrected.
        patch_status(&mut st, "batch", "jobs", "j", json!({"active": 3}));
        reconcile(&mut st, &mut timers, &mut mem);
        assert_eq!(job(&st, "j")["status"]["active"], 1);
        let rv = st.store.rv();
        reconcile(&mut st, &mut timers, &mut mem);
        assert_eq!(st.store.rv(), rv, "settled");
    }

    #[test]
    fn work_queues_run_parallelism_pods() {
        let (mut st, mut timers, mut mem) = setup();
        create(&mut st, "batch", "jobs", "q", json!({"parallelism": 3}));
        create(
            &mut st,
            "batch",
            "jobs",
            "c",
            json!({"parallelism": 3, "completions": 2}),
        );
        reconcile(&mut st, &mut timers, &mut mem);
        assert_eq!(job(&st, "q")["status"]["active"], 3);
        assert_eq!(job(&st, "c")["status"]["active"], 2);
    }

    #[test]
    fn completions_are_defaulted_once_at_creation() {
        let (mut st, mut timers, mut mem) = setup();
        create(&mut st, "batch", "jobs", "j", json!({}));
        reconcile(&mut st, &mut timers, &mut mem);
        // kube set completions: 1 when the Job was created: more parallelism changes nothing.
        patch_spec(&mut st, "batch", "jobs", "j", json!({"parallelism": 2}));
        reconcile(&mut st, &mut timers, &mut mem);
        assert_eq!(job(&st, "j")["status"]["active"], 1);
    }

    #[test]
    fn suspend_and_resume() {
        let (mut st, mut timers, mut mem) = setup();
        create(&mut st, "batch", "jobs", "j", json!({"suspend": true}));
        reconcile(&mut st, &mut timers, &mut mem);
        let s = job(&st, "j")["status"].clone();
        assert_eq!(s["conditions"][0]["type"], "Suspended");
        assert_eq!(s["conditions"][0]["status"], "True");
        assert_eq!(s["conditions"][0]["reason"], "JobSuspended");
        assert!(s.get("startTime").is_none() && s.get("active").is_none());
        patch_spec(&mut st, "batch", "jobs", "j", json!({"suspend": false}));
        reconcile(&mut st, &mut timers, &mut mem);
        let s = job(&st, "j")["status"].clone();
        assert_eq!(s["conditions"][0]["status"], "False");
        assert_eq!(s["conditions"][0]["reason"], "JobResumed");
        assert_eq!(s["active"], 1);
        assert!(s["startTime"].is_string());
        patch_spec(&mut st, "batch", "jobs", "j", json!({"suspend": true}));
        reconcile(&mut st, &mut timers, &mut mem);
        let s = job(&st, "j")["status"].clone();
        assert_eq!(s["conditions"][0]["reason"], "JobSuspended");
        assert!(s.get("startTime").is_none() && s.get("active").is_none());
    }

    #[test]
    fn zero_completions_complete_at_once() {
        let (mut st, mut timers, mut mem) = setup();
        create(&mut st, "batch", "jobs", "z", json!({"completions": 0}));
        reconcile(&mut st, &mut timers, &mut mem);
        let s = job(&st, "z")["status"].clone();
        let types: Vec<&str> = s["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["type"].as_str().unwrap())
            .collect();
        assert_eq!(types, vec!["SuccessCriteriaMet", "Complete"]);
        assert_eq!(s["conditions"][1]["reason"], "CompletionsReached");
        assert!(s["completionTime"].is_string() && s["startTime"].is_string());
    }

    #[test]
    fn an_active_deadline_registers_a_wake_up_and_then_fails_the_job() {
        let (mut st, mut timers, mut mem) = setup();
        create(
            &mut st,
            "batch",
            "jobs",
            "d",
            json!({"activeDeadlineSeconds": 30}),
        );
        reconcile(&mut st, &mut timers, &mut mem);
        assert_eq!(job(&st, "d")["status"]["active"], 1);
        assert!(mem.due.values().next().is_some(), "a wake-up is registered");
        assert!(timers.next_wake.is_some());
        // A deadline already passed (0 s): failed at once, like kube's `pastActiveDeadline`.
        create(
            &mut st,
            "batch",
            "jobs",
            "e",
            json!({"activeDeadlineSeconds": 0}),
        );
        reconcile(&mut st, &mut timers, &mut mem);
        let s = job(&st, "e")["status"].clone();
        let types: Vec<&str> = s["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["type"].as_str().unwrap())
            .collect();
        assert_eq!(types, vec!["FailureTarget", "Failed"]);
        assert_eq!(s["conditions"][1]["reason"], "DeadlineExceeded");
        assert!(s.get("active").is_none());
        let rv = st.store.rv();
        reconcile(&mut st, &mut timers, &mut mem);
        assert_eq!(st.store.rv(), rv, "a failed Job is left alone");
    }

    #[test]
    fn deleted_pods_terminate_on_the_way_like_kube() {
        let (mut st, mut timers, mut mem) = setup();
        create(
            &mut st,
            "batch",
            "jobs",
            "s",
            json!({"parallelism": 2, "completions": 4}),
        );
        reconcile(&mut st, &mut timers, &mut mem);
        let from = st.store.rv();
        patch_spec(&mut st, "batch", "jobs", "s", json!({"suspend": true}));
        reconcile(&mut st, &mut timers, &mut mem);
        let terminating: Vec<Value> = st
            .store
            .history_since(from)
            .filter(|e| e.key.name == "s")
            .map(|e| e.object["status"]["terminating"].clone())
            .collect();
        // The spec change, then the suspension with 2 terminating Pods, then none.
        assert_eq!(terminating, vec![json!(0), json!(2), json!(0)]);
        assert!(job(&st, "s")["status"].get("startTime").is_none());
    }

    #[test]
    fn foreign_and_finished_jobs_are_left_alone() {
        let (mut st, mut timers, mut mem) = setup();
        create(
            &mut st,
            "batch",
            "jobs",
            "x",
            json!({"managedBy": "example.com/foreign"}),
        );
        reconcile(&mut st, &mut timers, &mut mem);
        assert_eq!(job(&st, "x")["status"], json!({}));
        let done = json!({"startTime": "2026-01-01T00:00:00Z", "completionTime": "2026-01-01T00:01:00Z",
            "conditions": [{"type": "SuccessCriteriaMet", "status": "True"},
                           {"type": "Complete", "status": "True"}]});
        patch_status(&mut st, "batch", "jobs", "x", done);
        reconcile(&mut st, &mut timers, &mut mem);
        let s = job(&st, "x")["status"].clone();
        assert_eq!(s["conditions"][1]["type"], "Complete");
        assert!(s.get("active").is_none() && s.get("ready").is_none());
    }
}
