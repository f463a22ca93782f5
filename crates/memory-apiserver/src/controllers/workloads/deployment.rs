//! The deployment controller on a cluster whose Pods never become available.
//!
//! The ReplicaSets it would create live here, in controller memory: each has its spec size and
//! its observed size, which lags one step behind (as the ReplicaSet controller's status does),
//! so the Deployment goes through the same status writes as on a real control plane:
//! `Progressing=True NewReplicaSetCreated`, then `ReplicaSetUpdated` once the ReplicaSet's Pods
//! are counted, `Available=False MinimumReplicasUnavailable` unless `maxUnavailable` allows
//! zero available Pods (or there are no replicas), `NewReplicaSetAvailable` only with zero
//! replicas, and `ProgressDeadlineExceeded` once `progressDeadlineSeconds` have passed without
//! progress. Rolling updates surge new Pods and scale down old, never-available ones as kube's
//! `reconcileOldReplicaSets` does; Recreate scales the old ones to zero first; a paused
//! Deployment only scales. The `deployment.kubernetes.io/revision` annotation is kept like
//! kube keeps it. ReplicaSet names use a hash of the template that is not kube's.

use std::time::Duration;

use serde_json::{Map, Value, json};

use super::{int, set_omitempty, status_map, template_hash, write_status};
use crate::handler::{State, now};
use crate::store::ObjKey;

/// Annotation with the Deployment's current revision.
pub const REVISION: &str = "deployment.kubernetes.io/revision";

/// One ReplicaSet the controller would have created.
#[derive(Debug, Clone)]
struct Rs {
    name: String,
    hash: String,
    /// `spec.replicas`.
    spec: i64,
    /// `spec.replicas` as the current sync read it (kube's status uses its own copies, so a
    /// scale shows in the status of the next sync).
    counted: i64,
    /// `status.replicas`: the Pods that exist (one step behind `spec`).
    observed: i64,
    revision: u64,
    /// The `desired-replicas` annotation.
    desired: i64,
    /// The `max-replicas` annotation.
    max: i64,
    /// Creation order.
    seq: u64,
}

/// A Deployment's ReplicaSets.
#[derive(Debug, Default)]
pub struct Rollout {
    rss: Vec<Rs>,
    next_seq: u64,
}

/// The parts of the Deployment spec the controller uses, with kube's defaults.
struct Spec {
    name: String,
    generation: i64,
    replicas: i64,
    paused: bool,
    recreate: bool,
    surge: i64,
    unavailable: i64,
    deadline: Option<i64>,
    hash: String,
}

/// `intstr.GetScaledValueFromIntOrPercent`.
fn scaled(v: Option<&Value>, default: &str, total: i64, round_up: bool) -> i64 {
    let text = match v {
        Some(Value::Number(n)) => return n.as_i64().unwrap_or(0),
        Some(Value::String(s)) => s.clone(),
        _ => default.to_string(),
    };
    let Some(pct) = text.strip_suffix('%').and_then(|p| p.parse::<i64>().ok()) else {
        return text.parse().unwrap_or(0);
    };
    let x = pct * total;
    if round_up {
        (x + 99).div_euclid(100)
    } else {
        x.div_euclid(100)
    }
}

impl Spec {
    fn of(d: &Value) -> Spec {
        let spec = &d["spec"];
        let replicas = spec["replicas"].as_i64().unwrap_or(1);
        let recreate = spec.pointer("/strategy/type").and_then(Value::as_str) == Some("Recreate");
        let (mut surge, mut unavailable) = (0, 0);
        if !recreate {
            surge = scaled(
                spec.pointer("/strategy/rollingUpdate/maxSurge"),
                "25%",
                replicas,
                true,
            );
            unavailable = scaled(
                spec.pointer("/strategy/rollingUpdate/maxUnavailable"),
                "25%",
                replicas,
                false,
            );
            if surge == 0 && unavailable == 0 {
                unavailable = 1;
            }
        }
        // `MaxUnavailable` is 0 for zero replicas and never more than the replicas.
        let unavailable = if replicas == 0 {
            0
        } else {
            unavailable.min(replicas)
        };
        let deadline = match spec["progressDeadlineSeconds"].as_i64() {
            Some(s) if s == i64::from(i32::MAX) => None,
            Some(s) => Some(s),
            None => Some(600),
        };
        Spec {
            name: d["metadata"]["name"].as_str().unwrap_or("").to_string(),
            generation: int(d, "/metadata/generation"),
            replicas,
            paused: spec["paused"].as_bool().unwrap_or(false),
            recreate,
            surge,
            unavailable,
            deadline,
            hash: template_hash(&spec["template"]),
        }
    }
}

fn condition<'a>(status: &'a Map<String, Value>, ty: &str) -> Option<&'a Value> {
    status
        .get("conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == ty)
}

fn reason_of(status: &Map<String, Value>, ty: &str) -> String {
    condition(status, ty)
        .and_then(|c| c["reason"].as_str())
        .unwrap_or("")
        .to_string()
}

fn remove_condition(status: &mut Map<String, Value>, ty: &str) {
    if let Some(cs) = status.get_mut("conditions").and_then(Value::as_array_mut) {
        cs.retain(|c| c["type"] != ty);
    }
}

/// kube's `SetDeploymentCondition`: nothing when status and reason are unchanged, otherwise
/// the condition moves to the end, keeping its transition time if only the reason changed.
fn set_condition(status: &mut Map<String, Value>, ty: &str, st: &str, reason: &str, message: &str) {
    let ts = now();
    let mut transition = json!(ts);
    if let Some(cur) = condition(status, ty) {
        if cur["status"] == st && cur["reason"] == reason {
            return;
        }
        if cur["status"] == st {
            transition = cur["lastTransitionTime"].clone();
        }
    }
    remove_condition(status, ty);
    let c = json!({"type": ty, "status": st, "lastUpdateTime": ts,
                   "lastTransitionTime": transition, "reason": reason, "message": message});
    match status.get_mut("conditions").and_then(Value::as_array_mut) {
        Some(cs) => cs.push(c),
        None => {
            status.insert("conditions".into(), json!([c]));
        }
    }
}

impl Rollout {
    fn new_rs(&self, hash: &str) -> Option<usize> {
        self.rss.iter().position(|r| r.hash == hash)
    }

    fn max_old_revision(&self, hash: &str) -> u64 {
        self.rss
            .iter()
            .filter(|r| r.hash != hash)
            .map(|r| r.revision)
            .max()
            .unwrap_or(0)
    }

    fn total_spec(&self) -> i64 {
        self.rss.iter().map(|r| r.spec).sum()
    }

    fn scale(&mut self, i: usize, size: i64, s: &Spec) -> bool {
        let rs = &mut self.rss[i];
        let changed = rs.spec != size;
        rs.spec = size;
        rs.desired = s.replicas;
        rs.max = s.replicas + s.surge;
        changed
    }

    /// `getNewReplicaSet`: the ReplicaSet of the current template, its revision brought above
    /// every old one, created (with `size`) if `create` and missing. Returns its index and
    /// whether it was created.
    fn ensure_new(&mut self, s: &Spec, create: Option<i64>) -> (Option<usize>, bool) {
        let next = self.max_old_revision(&s.hash) + 1;
        if let Some(i) = self.new_rs(&s.hash) {
            if self.rss[i].revision < next {
                self.rss[i].revision = next;
            }
            return (Some(i), false);
        }
        let Some(size) = create else {
            return (None, false);
        };
        self.next_seq += 1;
        self.rss.push(Rs {
            name: format!("{}-{}", s.name, s.hash),
            hash: s.hash.clone(),
            spec: size,
            counted: size,
            observed: 0,
            revision: next,
            desired: s.replicas,
            max: s.replicas + s.surge,
            seq: self.next_seq,
        });
        (Some(self.rss.len() - 1), true)
    }

    /// `NewRSNewReplicas` for a rolling update.
    fn rolling_new_size(&self, s: &Spec, new_spec: i64) -> i64 {
        let max_total = s.replicas + s.surge;
        let current = self.total_spec();
        if current >= max_total {
            return new_spec;
        }
        new_spec + (max_total - current).min(s.replicas - new_spec)
    }

    /// `dc.scale`: the sizes for a scaling event (or a paused Deployment).
    fn scale_all(&mut self, s: &Spec, new: Option<usize>) {
        let active: Vec<usize> = (0..self.rss.len())
            .filter(|i| self.rss[*i].spec > 0)
            .collect();
        let target = match active.len() {
            0 => new.or_else(|| (0..self.rss.len()).max_by_key(|i| self.rss[*i].seq)),
            1 => Some(active[0]),
            _ => None,
        };
        if let Some(i) = target {
            if self.rss[i].spec != s.replicas || self.rss[i].desired != s.replicas {
                self.scale(i, s.replicas, s);
            }
            return;
        }
        if s.recreate {
            return;
        }
        // Proportional scaling of the active ReplicaSets (`dc.scale`, rolling update).
        let allowed = if s.replicas > 0 {
            s.replicas + s.surge
        } else {
            0
        };
        let current: i64 = active.iter().map(|i| self.rss[*i].spec).sum();
        let to_add = allowed - current;
        let mut order = active;
        if to_add > 0 {
            order.sort_by_key(|i| (-self.rss[*i].spec, std::cmp::Reverse(self.rss[*i].seq)));
        } else {
            order.sort_by_key(|i| (-self.rss[*i].spec, self.rss[*i].seq));
        }
        let mut added = 0;
        let mut sizes: Vec<(usize, i64)> = Vec::new();
        for &i in &order {
            let rs = &self.rss[i];
            let mut proportion = 0;
            if to_add != 0 && to_add != added && rs.spec != 0 {
                let fraction = if s.replicas == 0 {
                    -rs.spec
                } else if rs.max > 0 {
                    let size = (rs.spec * allowed) as f64 / rs.max as f64;
                    size.round() as i64 - rs.spec
                } else {
                    0
                };
                let left = to_add - added;
                proportion = if to_add > 0 {
                    fraction.min(left)
                } else {
                    fraction.max(left)
                };
            }
            added += proportion;
            sizes.push((i, rs.spec + proportion));
        }
        if let Some(first) = sizes.first_mut()
            && to_add != 0
        {
            first.1 = (first.1 + to_add - added).max(0);
        }
        for (i, size) in sizes {
            self.scale(i, size, s);
        }
    }

    /// `reconcileOldReplicaSets` when no Pod is ever available: only the cleanup of unhealthy
    /// replicas can scale old ReplicaSets down.
    fn scale_down_old(&mut self, s: &Spec, new: usize) -> bool {
        let old_total: i64 = (0..self.rss.len())
            .filter(|i| *i != new)
            .map(|i| self.rss[i].spec)
            .sum();
        if old_total == 0 {
            return false;
        }
        let min_available = s.replicas - s.unavailable;
        let max_down = self.total_spec() - min_available - self.rss[new].spec;
        if max_down <= 0 {
            return false;
        }
        let mut olds: Vec<usize> = (0..self.rss.len()).filter(|i| *i != new).collect();
        olds.sort_by_key(|i| self.rss[*i].seq);
        let mut done = 0;
        for i in olds {
            if done >= max_down {
                break;
            }
            if self.rss[i].spec == 0 {
                continue;
            }
            let down = (max_down - done).min(self.rss[i].spec);
            let size = self.rss[i].spec - down;
            self.scale(i, size, s);
            done += down;
        }
        done > 0
    }

    /// The ReplicaSet controller catching up: every ReplicaSet's Pods now exist (or are gone).
    fn catch_up(&mut self) -> bool {
        let mut changed = false;
        for rs in &mut self.rss {
            if rs.observed != rs.spec {
                rs.observed = rs.spec;
                changed = true;
            }
        }
        changed
    }
}

/// `calculateStatus`: counts from the ReplicaSets, the `Available` condition.
fn calculate(
    s: &Spec,
    r: &Rollout,
    new: Option<usize>,
    mut status: Map<String, Value>,
) -> Map<String, Value> {
    let observed: i64 = r.rss.iter().map(|x| x.observed).sum();
    let updated = new.map_or(0, |i| r.rss[i].observed);
    status.insert("observedGeneration".into(), json!(s.generation));
    set_omitempty(&mut status, "replicas", observed);
    set_omitempty(&mut status, "updatedReplicas", updated);
    set_omitempty(&mut status, "readyReplicas", 0);
    set_omitempty(&mut status, "availableReplicas", 0);
    let counted: i64 = r.rss.iter().map(|x| x.counted).sum();
    set_omitempty(&mut status, "unavailableReplicas", counted.max(0));
    status.insert("terminatingReplicas".into(), json!(0));
    if s.replicas - s.unavailable <= 0 {
        set_condition(
            &mut status,
            "Available",
            "True",
            "MinimumReplicasAvailable",
            "Deployment has minimum availability.",
        );
    } else {
        set_condition(
            &mut status,
            "Available",
            "False",
            "MinimumReplicasUnavailable",
            "Deployment does not have minimum availability.",
        );
    }
    status
}

fn num(m: &Map<String, Value>, f: &str) -> i64 {
    m.get(f).and_then(Value::as_i64).unwrap_or(0)
}

/// `syncRolloutStatus`: the status plus the `Progressing` condition. `stored` is the status
/// before this sync; returns the status and when the progress deadline falls due.
fn rollout_status(
    s: &Spec,
    r: &Rollout,
    new: Option<usize>,
    working: Map<String, Value>,
    stored: &Map<String, Value>,
) -> (Map<String, Value>, Option<Duration>) {
    let mut status = calculate(s, r, new, working);
    let Some(deadline) = s.deadline else {
        return (status, None);
    };
    let complete_already = num(&status, "replicas") == num(&status, "updatedReplicas")
        && reason_of(&status, "Progressing") == "NewReplicaSetAvailable";
    if complete_already {
        return (status, None);
    }
    let rs_name = new.map(|i| r.rss[i].name.clone());
    let complete = num(&status, "updatedReplicas") == s.replicas
        && num(&status, "replicas") == s.replicas
        && num(&status, "availableReplicas") == s.replicas
        && num(&status, "observedGeneration") >= s.generation;
    let old_old = num(stored, "replicas") - num(stored, "updatedReplicas");
    let new_old = num(&status, "replicas") - num(&status, "updatedReplicas");
    let progressing =
        num(&status, "updatedReplicas") > num(stored, "updatedReplicas") || new_old < old_old;
    if complete {
        let msg = match &rs_name {
            Some(n) => format!("ReplicaSet \"{n}\" has successfully progressed."),
            None => format!("Deployment \"{}\" has successfully progressed.", s.name),
        };
        set_condition(
            &mut status,
            "Progressing",
            "True",
            "NewReplicaSetAvailable",
            &msg,
        );
        return (status, None);
    }
    if progressing {
        let msg = match &rs_name {
            Some(n) => format!("ReplicaSet \"{n}\" is progressing."),
            None => format!("Deployment \"{}\" is progressing.", s.name),
        };
        let ts = now();
        let mut transition = json!(ts);
        if let Some(cur) = condition(&status, "Progressing")
            && cur["status"] == "True"
        {
            transition = cur["lastTransitionTime"].clone();
        }
        remove_condition(&mut status, "Progressing");
        let c = json!({"type": "Progressing", "status": "True", "lastUpdateTime": ts,
                       "lastTransitionTime": transition, "reason": "ReplicaSetUpdated", "message": msg});
        match status.get_mut("conditions").and_then(Value::as_array_mut) {
            Some(cs) => cs.push(c),
            None => {
                status.insert("conditions".into(), json!([c]));
            }
        }
        return (
            status,
            Some(Duration::from_secs(deadline.max(0) as u64 + 1)),
        );
    }
    // Timed out?
    let Some(cond) = condition(&status, "Progressing").cloned() else {
        return (status, None);
    };
    if cond["reason"] == "ProgressDeadlineExceeded" || cond["reason"] == "NewReplicaSetAvailable" {
        return (status, None);
    }
    let updated_at = cond["lastUpdateTime"]
        .as_str()
        .and_then(|t| t.parse::<jiff::Timestamp>().ok());
    let Some(updated_at) = updated_at else {
        return (status, None);
    };
    let due = updated_at.as_second() + deadline;
    let now_s = jiff::Timestamp::now().as_second();
    if now_s > due {
        let msg = match &rs_name {
            Some(n) => format!("ReplicaSet \"{n}\" has timed out progressing."),
            None => format!("Deployment \"{}\" has timed out progressing.", s.name),
        };
        set_condition(
            &mut status,
            "Progressing",
            "False",
            "ProgressDeadlineExceeded",
            &msg,
        );
        return (status, None);
    }
    // Not yet: look again just after the deadline.
    (status, Some(Duration::from_secs((due - now_s + 1) as u64)))
}

/// One `syncDeployment`: returns the new status, the revision annotation (if there is a new
/// ReplicaSet), and when to look again.
fn sync_once(
    d: &Value,
    r: &mut Rollout,
    early: &mut Vec<(Map<String, Value>, Option<u64>)>,
) -> (Map<String, Value>, Option<u64>, Option<Duration>) {
    let s = Spec::of(d);
    for rs in &mut r.rss {
        rs.counted = rs.spec;
    }
    let stored = status_map(d);
    let mut working = stored.clone();
    check_paused_conditions(&s, &mut working);
    if working != stored {
        // kube writes a changed pause condition at once.
        early.push((working.clone(), None));
    }
    let scaling_event = r.rss.iter().any(|x| x.spec > 0 && x.desired != s.replicas);
    if s.paused || scaling_event {
        let (new, _) = r.ensure_new(&s, None);
        r.scale_all(&s, new);
        let status = calculate(&s, r, new, working);
        return (status, new.map(|i| r.rss[i].revision), None);
    }
    // kube writes the status (and the revision annotation) as soon as it created a ReplicaSet.
    let mut note_created = |working: &mut Map<String, Value>, r: &Rollout, i: usize| {
        if s.deadline.is_some() {
            let msg = format!("Created new replica set \"{}\"", r.rss[i].name);
            set_condition(working, "Progressing", "True", "NewReplicaSetCreated", &msg);
            early.push((working.clone(), Some(r.rss[i].revision)));
        }
    };
    let note_found = |working: &mut Map<String, Value>, r: &Rollout, i: usize| {
        if s.deadline.is_some() && condition(working, "Progressing").is_none() {
            let msg = format!("Found new replica set \"{}\"", r.rss[i].name);
            set_condition(working, "Progressing", "True", "FoundNewReplicaSet", &msg);
        }
    };
    if s.recreate {
        let (mut new, _) = r.ensure_new(&s, None);
        if let Some(i) = new {
            note_found(&mut working, r, i);
        }
        let olds: Vec<usize> = (0..r.rss.len()).filter(|i| Some(*i) != new).collect();
        let mut scaled_down = false;
        for &i in &olds {
            if r.rss[i].spec > 0 {
                r.scale(i, 0, &s);
                scaled_down = true;
            }
        }
        let old_running = olds.iter().any(|i| r.rss[*i].observed > 0);
        if !scaled_down && !old_running {
            if new.is_none() {
                let (i, _) = r.ensure_new(&s, Some(s.replicas));
                new = i;
                if let Some(i) = i {
                    note_created(&mut working, r, i);
                }
            }
            if let Some(i) = new
                && r.rss[i].spec != s.replicas
            {
                r.scale(i, s.replicas, &s);
            }
        }
        let (status, wake) = rollout_status(&s, r, new, working, &stored);
        return (status, new.map(|i| r.rss[i].revision), wake);
    }
    // Rolling update.
    let size = r.rolling_new_size(&s, 0);
    let (new, created) = r.ensure_new(&s, Some(size));
    let Some(i) = new else {
        return (calculate(&s, r, None, working), None, None);
    };
    if created {
        note_created(&mut working, r, i);
    } else {
        note_found(&mut working, r, i);
    }
    let cur = r.rss[i].spec;
    let scaled_up = if cur == s.replicas {
        false
    } else if cur > s.replicas {
        r.scale(i, s.replicas, &s)
    } else {
        let want = r.rolling_new_size(&s, cur);
        r.scale(i, want, &s)
    };
    if !scaled_up {
        r.scale_down_old(&s, i);
    }
    let (status, wake) = rollout_status(&s, r, Some(i), working, &stored);
    (status, Some(r.rss[i].revision), wake)
}

/// kube's checkPausedConditions: `Progressing=Unknown` while paused (with a progress deadline),
/// `DeploymentResumed` when no longer.
fn check_paused_conditions(s: &Spec, working: &mut Map<String, Value>) {
    if s.deadline.is_none() {
        return;
    }
    let reason = reason_of(working, "Progressing");
    if s.paused && reason != "DeploymentPaused" {
        set_condition(
            working,
            "Progressing",
            "Unknown",
            "DeploymentPaused",
            "Deployment is paused",
        );
    } else if !s.paused && reason == "DeploymentPaused" {
        set_condition(
            working,
            "Progressing",
            "Unknown",
            "DeploymentResumed",
            "Deployment is resumed",
        );
    }
}

/// Reconcile one Deployment: sync, let the ReplicaSets catch up, sync again, until settled.
/// Returns when to look again (progress deadline).
pub fn sync(
    st: &mut State,
    key: &ObjKey,
    rollouts: &mut std::collections::HashMap<String, Rollout>,
) -> Option<Duration> {
    let uid = State::uid_of(st.store.get(key)?);
    let r = rollouts.entry(uid).or_default();
    let mut wake = None;
    for _ in 0..16 {
        let d = st.store.get(key)?.clone();
        let mut early = Vec::new();
        let (status, revision, w) = sync_once(&d, r, &mut early);
        wake = w;
        let annotations = |revision: Option<u64>| {
            revision.map(|rev| {
                let mut a = d
                    .pointer("/metadata/annotations")
                    .and_then(Value::as_object)
                    .cloned()
                    .unwrap_or_default();
                a.insert(REVISION.into(), json!(rev.to_string()));
                Value::Object(a)
            })
        };
        let before = st.store.rv();
        for (status, revision) in early {
            write_status(st, key, Value::Object(status), annotations(revision));
        }
        write_status(st, key, Value::Object(status), annotations(revision));
        let wrote = st.store.rv() != before;
        // A scaled ReplicaSet is seen first with its new size and old Pods (one more sync),
        // then with its Pods.
        let rescaled = r.rss.iter().any(|x| x.counted != x.spec);
        if !rescaled && !r.catch_up() && !wrote {
            break;
        }
    }
    wake
}

#[cfg(test)]
mod tests {
    use super::super::reconcile;
    use super::super::tests::{create, get, patch_spec, patch_status, setup};
    use super::*;

    fn conds(d: &Value) -> Vec<(String, String, String)> {
        d["status"]["conditions"]
            .as_array()
            .map(|cs| {
                cs.iter()
                    .map(|c| {
                        (
                            c["type"].as_str().unwrap_or("").to_string(),
                            c["status"].as_str().unwrap_or("").to_string(),
                            c["reason"].as_str().unwrap_or("").to_string(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    fn c(t: &str, s: &str, r: &str) -> (String, String, String) {
        (t.into(), s.into(), r.into())
    }

    #[test]
    fn one_replica_never_becomes_available() {
        let (mut st, mut timers, mut mem) = setup();
        create(&mut st, "apps", "deployments", "d", json!({"replicas": 1}));
        reconcile(&mut st, &mut timers, &mut mem);
        let d = get(&st, "apps", "deployments", "d");
        let s = &d["status"];
        assert_eq!(s["observedGeneration"], 1);
        assert_eq!(
            (s["replicas"].clone(), s["updatedReplicas"].clone()),
            (json!(1), json!(1))
        );
        assert_eq!(s["unavailableReplicas"], 1);
        assert_eq!(s["terminatingReplicas"], 0);
        assert!(s.get("availableReplicas").is_none() && s.get("readyReplicas").is_none());
        assert_eq!(
            conds(&d),
            vec![
                c("Available", "False", "MinimumReplicasUnavailable"),
                c("Progressing", "True", "ReplicaSetUpdated")
            ]
        );
        assert_eq!(d["metadata"]["annotations"][REVISION], "1");
        assert_eq!(d["metadata"]["generation"], 1);
        // Owned, with the status, by the controller's /status writes.
        let kcm = d["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["manager"] == super::super::MANAGER)
            .unwrap()
            .clone();
        assert_eq!(kcm["subresource"], "status");
        assert!(
            kcm["fieldsV1"]["f:metadata"]["f:annotations"]
                .get(format!("f:{REVISION}"))
                .is_some(),
            "{kcm}"
        );
        // Settled.
        let rv = st.store.rv();
        reconcile(&mut st, &mut timers, &mut mem);
        assert_eq!(st.store.rv(), rv);
    }

    #[test]
    fn zero_replicas_are_available_and_complete() {
        let (mut st, mut timers, mut mem) = setup();
        create(&mut st, "apps", "deployments", "d", json!({"replicas": 0}));
        reconcile(&mut st, &mut timers, &mut mem);
        let d = get(&st, "apps", "deployments", "d");
        assert_eq!(
            conds(&d),
            vec![
                c("Available", "True", "MinimumReplicasAvailable"),
                c("Progressing", "True", "NewReplicaSetAvailable")
            ]
        );
        assert!(d["status"].get("replicas").is_none());
        // A template change makes revision 2, still complete.
        patch_spec(
            &mut st,
            "apps",
            "deployments",
            "d",
            json!({"template": {"metadata": {"annotations": {"x": "1"}}}}),
        );
        reconcile(&mut st, &mut timers, &mut mem);
        let d = get(&st, "apps", "deployments", "d");
        assert_eq!(d["status"]["observedGeneration"], 2);
        assert_eq!(d["metadata"]["annotations"][REVISION], "2");
        assert_eq!(
            conds(&d)[1],
            c("Progressing", "True", "NewReplicaSetAvailable")
        );
    }

    #[test]
    fn rolling_update_surges_and_waits() {
        let (mut st, mut timers, mut mem) = setup();
        create(&mut st, "apps", "deployments", "d", json!({"replicas": 2}));
        reconcile(&mut st, &mut timers, &mut mem);
        patch_spec(
            &mut st,
            "apps",
            "deployments",
            "d",
            json!({"template": {"metadata": {"annotations": {"x": "1"}}}}),
        );
        reconcile(&mut st, &mut timers, &mut mem);
        let d = get(&st, "apps", "deployments", "d");
        // As observed: 2 old + 1 surged new Pod, nothing can be scaled down.
        assert_eq!(d["status"]["replicas"], 3);
        assert_eq!(d["status"]["updatedReplicas"], 1);
        assert_eq!(d["status"]["unavailableReplicas"], 3);
        assert_eq!(conds(&d)[1], c("Progressing", "True", "ReplicaSetUpdated"));
        // Scaling up: the client's status is overwritten.
        patch_status(
            &mut st,
            "apps",
            "deployments",
            "d",
            json!({"readyReplicas": 3, "availableReplicas": 3}),
        );
        reconcile(&mut st, &mut timers, &mut mem);
        let d = get(&st, "apps", "deployments", "d");
        assert!(d["status"].get("availableReplicas").is_none());
        assert!(d["status"].get("readyReplicas").is_none());
    }

    #[test]
    fn four_replicas_roll_by_cleaning_up_unhealthy_old_pods() {
        let (mut st, mut timers, mut mem) = setup();
        create(&mut st, "apps", "deployments", "d", json!({"replicas": 4}));
        reconcile(&mut st, &mut timers, &mut mem);
        patch_spec(
            &mut st,
            "apps",
            "deployments",
            "d",
            json!({"template": {"metadata": {"annotations": {"x": "1"}}}}),
        );
        reconcile(&mut st, &mut timers, &mut mem);
        let d = get(&st, "apps", "deployments", "d");
        // surge 1, maxUnavailable 1: the new ReplicaSet grows to 2, the old shrinks to 3.
        assert_eq!(d["status"]["replicas"], 5);
        assert_eq!(d["status"]["updatedReplicas"], 2);
    }

    #[test]
    fn recreate_replaces_all_pods() {
        let (mut st, mut timers, mut mem) = setup();
        create(
            &mut st,
            "apps",
            "deployments",
            "d",
            json!({"replicas": 2, "strategy": {"type": "Recreate"}}),
        );
        reconcile(&mut st, &mut timers, &mut mem);
        patch_spec(
            &mut st,
            "apps",
            "deployments",
            "d",
            json!({"template": {"metadata": {"annotations": {"x": "1"}}}}),
        );
        reconcile(&mut st, &mut timers, &mut mem);
        let d = get(&st, "apps", "deployments", "d");
        assert_eq!(d["status"]["replicas"], 2);
        assert_eq!(d["status"]["updatedReplicas"], 2);
        assert_eq!(d["metadata"]["annotations"][REVISION], "2");
        assert_eq!(
            conds(&d),
            vec![
                c("Available", "False", "MinimumReplicasUnavailable"),
                c("Progressing", "True", "ReplicaSetUpdated")
            ]
        );
    }

    #[test]
    fn paused_deployments_get_no_replica_set() {
        let (mut st, mut timers, mut mem) = setup();
        create(
            &mut st,
            "apps",
            "deployments",
            "d",
            json!({"replicas": 1, "paused": true}),
        );
        reconcile(&mut st, &mut timers, &mut mem);
        let d = get(&st, "apps", "deployments", "d");
        assert_eq!(
            conds(&d),
            vec![
                c("Progressing", "Unknown", "DeploymentPaused"),
                c("Available", "False", "MinimumReplicasUnavailable")
            ]
        );
        assert!(d["status"].get("replicas").is_none());
        assert!(d["metadata"].get("annotations").is_none());
        patch_spec(
            &mut st,
            "apps",
            "deployments",
            "d",
            json!({"paused": false}),
        );
        reconcile(&mut st, &mut timers, &mut mem);
        let d = get(&st, "apps", "deployments", "d");
        assert_eq!(d["status"]["replicas"], 1);
        assert_eq!(conds(&d)[1], c("Progressing", "True", "ReplicaSetUpdated"));
    }

    #[test]
    fn max_unavailable_can_make_zero_available_pods_enough() {
        let (mut st, mut timers, mut mem) = setup();
        create(
            &mut st,
            "apps",
            "deployments",
            "d",
            json!({"replicas": 1, "strategy": {"rollingUpdate": {"maxUnavailable": 1}}}),
        );
        reconcile(&mut st, &mut timers, &mut mem);
        let d = get(&st, "apps", "deployments", "d");
        assert_eq!(
            conds(&d)[0],
            c("Available", "True", "MinimumReplicasAvailable")
        );
    }

    #[test]
    fn the_progress_deadline_times_out() {
        let (mut st, mut timers, mut mem) = setup();
        create(
            &mut st,
            "apps",
            "deployments",
            "d",
            json!({"replicas": 1, "progressDeadlineSeconds": 5}),
        );
        reconcile(&mut st, &mut timers, &mut mem);
        assert!(mem.due.values().next().is_some(), "a wake-up is registered");
        assert!(timers.next_wake.is_some());
        // Pretend the last progress was long ago.
        let mut d = get(&st, "apps", "deployments", "d");
        d["status"]["conditions"][1]["lastUpdateTime"] = json!("2020-01-01T00:00:00Z");
        patch_status(&mut st, "apps", "deployments", "d", d["status"].clone());
        reconcile(&mut st, &mut timers, &mut mem);
        let d = get(&st, "apps", "deployments", "d");
        assert_eq!(
            conds(&d)[1],
            c("Progressing", "False", "ProgressDeadlineExceeded")
        );
        assert!(
            d["status"]["conditions"][1]["message"]
                .as_str()
                .unwrap()
                .ends_with("has timed out progressing.")
        );
        // It stays timed out.
        let rv = st.store.rv();
        reconcile(&mut st, &mut timers, &mut mem);
        assert_eq!(st.store.rv(), rv);
    }

    #[test]
    fn scaling_keeps_a_single_replica_set() {
        let (mut st, mut timers, mut mem) = setup();
        create(&mut st, "apps", "deployments", "d", json!({"replicas": 1}));
        reconcile(&mut st, &mut timers, &mut mem);
        patch_spec(&mut st, "apps", "deployments", "d", json!({"replicas": 3}));
        reconcile(&mut st, &mut timers, &mut mem);
        let d = get(&st, "apps", "deployments", "d");
        assert_eq!(d["status"]["replicas"], 3);
        assert_eq!(d["status"]["updatedReplicas"], 3);
        assert_eq!(d["status"]["observedGeneration"], 2);
        assert_eq!(d["metadata"]["annotations"][REVISION], "1");
    }
}
