//! Randomized safety test of the operand-cleanup planner.
//!
//! A seeded xorshift generator builds random clusters — namespaces with labels, 0/1/2
//! OperatorGroups per namespace (target lists, selectors, all namespaces), CSVs (every phase,
//! copied in each of the three ways or not, overlapping owned/required CRDs, cleanup
//! enabled/false/absent, with or without the finalizer and a deletionTimestamp), namespaced and
//! cluster-scoped CRDs and CRs (some holding a finalizer of their own). A model cluster then
//! runs the planner to quiescence, carrying out each decision (CR deletions, finalizer removal)
//! while the world moves: held CR finalizers are released at random, an admin may abort with
//! `enabled=false`, other CSVs get deleted.
//!
//! An independent oracle (written here, not calling the planner's helpers) checks every
//! effect at the moment it happens:
//! - every deleted CR is of a CRD owned by a deleting, finalizer-carrying, cleanup-enabled,
//!   `Succeeded`, non-copied CSV; lies in one of its target namespaces computed from the single
//!   OperatorGroup of its namespace (cluster-scoped only for all namespaces); and no other
//!   non-copied CSV owns or requires any of that CSV's owned CRDs;
//! - the finalizer is removed only when cleanup does not apply, or when no CR in scope is left;
//! - a blocked CSV really is unsafe; at quiescence every CSV still held is blocked.
//!
//! `CVO_OLM_SAFETY_CASES` (default 1000) and `CVO_OLM_SAFETY_SEED` tune the run.

use std::collections::{BTreeMap, BTreeSet};

use cvo::olm::plan::{
    self, CrRef, CrdInfo, Decision, FINALIZER, NamespaceInfo, ReleaseReason, Snapshot,
};
use cvo::olm::types::{
    CleanupSpec, CleanupStatus, ClusterServiceVersion, CrdDescription, CsvSpec, CsvStatus,
    OperatorGroup, OperatorGroupSpec, phase,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, LabelSelectorRequirement, Time,
};

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
    fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len())]
    }
}

#[derive(Clone, Debug)]
struct ModelCr {
    crd: String,
    namespace: Option<String>,
    name: String,
    uid: String,
    deleting: bool,
    held: bool,
}

#[derive(Clone, Debug, Default)]
struct World {
    namespaces: Vec<NamespaceInfo>,
    ogs: Vec<OperatorGroup>,
    csvs: Vec<ClusterServiceVersion>,
    crds: Vec<CrdInfo>,
    crs: Vec<ModelCr>,
}

#[derive(Default, Debug)]
struct Stats {
    deleted_crs: usize,
    done: usize,
    released: usize,
    aborted: usize,
    blocked: usize,
    waits: usize,
    steps: usize,
}

const LABEL_KEYS: [&str; 2] = ["team", "env"];
const LABEL_VALUES: [&str; 3] = ["a", "b", "c"];

fn gen_selector(rng: &mut Rng) -> LabelSelector {
    let mut sel = LabelSelector::default();
    if rng.chance(50) {
        sel.match_labels = Some(
            [(
                rng.pick(&LABEL_KEYS).to_string(),
                rng.pick(&LABEL_VALUES).to_string(),
            )]
            .into(),
        );
    }
    if rng.chance(50) || sel.match_labels.is_none() {
        let op = *rng.pick(&["In", "NotIn", "Exists", "DoesNotExist", "Bogus"]);
        let values = match op {
            "In" | "NotIn" => Some(vec![
                rng.pick(&LABEL_VALUES).to_string(),
                rng.pick(&LABEL_VALUES).to_string(),
            ]),
            _ => None,
        };
        sel.match_expressions = Some(vec![LabelSelectorRequirement {
            key: rng.pick(&LABEL_KEYS).to_string(),
            operator: op.to_string(),
            values,
        }]);
    }
    sel
}

fn gen_world(rng: &mut Rng) -> World {
    let mut w = World::default();
    let n_ns = 2 + rng.below(5);
    for i in 0..n_ns {
        let mut labels = BTreeMap::new();
        for k in LABEL_KEYS {
            if rng.chance(60) {
                labels.insert(k.to_string(), rng.pick(&LABEL_VALUES).to_string());
            }
        }
        w.namespaces.push(NamespaceInfo {
            name: format!("ns{i}"),
            labels,
        });
    }
    let ns_names: Vec<String> = w.namespaces.iter().map(|n| n.name.clone()).collect();
    for ns in &ns_names {
        let count = match rng.below(100) {
            0..15 => 0,
            15..85 => 1,
            _ => 2,
        };
        for j in 0..count {
            let mut spec = OperatorGroupSpec::default();
            match rng.below(4) {
                0 => {
                    let mut t: Vec<String> = ns_names
                        .iter()
                        .filter(|_| rng.chance(40))
                        .cloned()
                        .collect();
                    if rng.chance(5) {
                        t.push(String::new());
                    }
                    if rng.chance(10) {
                        t.push("missing-ns".into());
                    }
                    spec.target_namespaces = Some(t);
                }
                1 => spec.selector = Some(gen_selector(rng)),
                2 => {
                    if rng.chance(50) {
                        spec.selector = Some(LabelSelector::default());
                    }
                    if rng.chance(50) {
                        spec.target_namespaces = Some(vec![]);
                    }
                }
                _ => spec.target_namespaces = Some(vec![ns.clone()]),
            }
            w.ogs.push(OperatorGroup::new(ns, &format!("og{j}"), spec));
        }
    }
    let n_crd = 1 + rng.below(5);
    for i in 0..n_crd {
        w.crds.push(CrdInfo {
            name: format!("k{i}s.example.com"),
            group: "example.com".into(),
            plural: format!("k{i}s"),
            kind: format!("K{i}"),
            served_version: Some("v1".into()),
            cluster_scoped: rng.chance(20),
        });
    }
    let n_csv = 1 + rng.below(6);
    for i in 0..n_csv {
        let ns = rng.pick(&ns_names).clone();
        let mut spec = CsvSpec::default();
        for crd in &w.crds {
            let desc = CrdDescription::new(&crd.name, "v1", &crd.kind);
            if rng.chance(35) {
                spec.customresourcedefinitions.owned.push(desc);
            } else if rng.chance(15) {
                spec.customresourcedefinitions.required.push(desc);
            }
        }
        spec.cleanup = match rng.below(10) {
            0..2 => None,
            2..3 => Some(CleanupSpec { enabled: false }),
            _ => Some(CleanupSpec { enabled: true }),
        };
        let mut csv = ClusterServiceVersion::new(&ns, &format!("csv{i}"), spec);
        csv.metadata.uid = Some(format!("uid-csv{i}"));
        let ph = if rng.chance(65) {
            phase::SUCCEEDED
        } else {
            *rng.pick(&phase::ALL)
        };
        let mut status = CsvStatus {
            phase: ph.to_string(),
            ..Default::default()
        };
        if rng.chance(20) {
            match rng.below(3) {
                0 => {
                    csv.metadata
                        .labels
                        .get_or_insert_default()
                        .insert(plan::COPIED_FROM_LABEL.into(), "x".into());
                }
                1 => status.reason = Some(plan::COPIED_REASON.into()),
                _ => {
                    let other = rng.pick(&ns_names).clone();
                    csv.metadata
                        .annotations
                        .get_or_insert_default()
                        .insert(plan::OPERATOR_NAMESPACE_ANNOTATION.into(), other);
                }
            }
        } else if rng.chance(20) {
            csv.metadata
                .annotations
                .get_or_insert_default()
                .insert(plan::OPERATOR_NAMESPACE_ANNOTATION.into(), ns.clone());
        }
        if rng.chance(20) {
            // A misleading annotation: targets must come from the OperatorGroup only.
            let t = rng.pick(&ns_names).clone();
            csv.metadata
                .annotations
                .get_or_insert_default()
                .insert("olm.targetNamespaces".into(), t);
        }
        csv.status = Some(status);
        let mut finalizers = Vec::new();
        if rng.chance(20) {
            finalizers.push("operators.coreos.com/csv-cleanup".to_string());
        }
        if rng.chance(80) {
            finalizers.push(FINALIZER.to_string());
        }
        csv.metadata.finalizers = Some(finalizers);
        if rng.chance(70) {
            csv.metadata.deletion_timestamp = Some(Time(jiff::Timestamp::UNIX_EPOCH));
        }
        w.csvs.push(csv);
    }
    let mut uid = 0;
    for crd in &w.crds {
        for j in 0..rng.below(9) {
            let namespace = if crd.cluster_scoped {
                None
            } else {
                Some(rng.pick(&ns_names).clone())
            };
            uid += 1;
            w.crs.push(ModelCr {
                crd: crd.name.clone(),
                namespace,
                name: format!("{}-{j}", crd.kind.to_lowercase()),
                uid: format!("uid{uid}"),
                deleting: false,
                held: rng.chance(30),
            });
        }
    }
    w
}

// ----------------------------------------------------------------------------------------------
// The oracle: an independent restatement of the rules.
// ----------------------------------------------------------------------------------------------

fn oracle_copied(csv: &ClusterServiceVersion) -> bool {
    let labels = csv.metadata.labels.clone().unwrap_or_default();
    let ann = csv.metadata.annotations.clone().unwrap_or_default();
    labels.contains_key("olm.copiedFrom")
        || csv.status.as_ref().and_then(|s| s.reason.clone()) == Some("Copied".into())
        || ann
            .get("olm.operatorNamespace")
            .is_some_and(|ns| Some(ns) != csv.metadata.namespace.as_ref())
}

fn oracle_label_match(sel: &LabelSelector, labels: &BTreeMap<String, String>) -> Option<bool> {
    let mut ok = true;
    for (k, v) in sel.match_labels.clone().unwrap_or_default() {
        ok &= labels.get(&k) == Some(&v);
    }
    for e in sel.match_expressions.clone().unwrap_or_default() {
        let vals = e.values.clone().unwrap_or_default();
        let has = labels.get(&e.key);
        ok &= match e.operator.as_str() {
            "In" => has.is_some_and(|v| vals.contains(v)),
            "NotIn" => !has.is_some_and(|v| vals.contains(v)),
            "Exists" => has.is_some(),
            "DoesNotExist" => has.is_none(),
            _ => return None,
        };
    }
    Some(ok)
}

/// `Some(None)` = all namespaces; `Some(Some(set))` = those; `None` = unsafe (blocked).
fn oracle_targets(w: &World, csv_ns: &str) -> Option<Option<BTreeSet<String>>> {
    let ogs: Vec<&OperatorGroup> = w
        .ogs
        .iter()
        .filter(|o| o.metadata.namespace.as_deref() == Some(csv_ns))
        .collect();
    if ogs.len() != 1 {
        return None;
    }
    let spec = &ogs[0].spec;
    let list = spec.target_namespaces.clone().unwrap_or_default();
    if !list.is_empty() {
        if list.iter().any(|n| n.is_empty()) {
            return None;
        }
        return Some(Some(list.into_iter().collect()));
    }
    if let Some(sel) = &spec.selector {
        let empty = sel.match_labels.as_ref().is_none_or(|m| m.is_empty())
            && sel.match_expressions.as_ref().is_none_or(|m| m.is_empty());
        if !empty {
            let mut set = BTreeSet::new();
            for ns in &w.namespaces {
                if oracle_label_match(sel, &ns.labels)? {
                    set.insert(ns.name.clone());
                }
            }
            return Some(Some(set));
        }
    }
    Some(None)
}

fn owned(csv: &ClusterServiceVersion) -> BTreeSet<String> {
    csv.spec
        .customresourcedefinitions
        .owned
        .iter()
        .map(|d| d.name.clone())
        .collect()
}

fn oracle_shared(w: &World, csv: &ClusterServiceVersion) -> bool {
    let mine = owned(csv);
    w.csvs.iter().any(|o| {
        o.metadata.uid != csv.metadata.uid
            && !oracle_copied(o)
            && o.spec
                .customresourcedefinitions
                .owned
                .iter()
                .chain(&o.spec.customresourcedefinitions.required)
                .any(|d| mine.contains(&d.name))
    })
}

fn oracle_cleanup_applies(csv: &ClusterServiceVersion) -> bool {
    csv.metadata.deletion_timestamp.is_some()
        && csv
            .metadata
            .finalizers
            .iter()
            .flatten()
            .any(|f| f == FINALIZER)
        && !oracle_copied(csv)
        && csv.spec.cleanup.as_ref().is_some_and(|c| c.enabled)
        && csv.status.as_ref().map(|s| s.phase.as_str()) == Some("Succeeded")
}

/// Whether the CSV may delete anything at all right now (all safety conditions).
fn oracle_safe(w: &World, csv: &ClusterServiceVersion) -> bool {
    oracle_cleanup_applies(csv)
        && oracle_targets(w, csv.metadata.namespace.as_deref().unwrap()).is_some()
        && !oracle_shared(w, csv)
}

fn oracle_in_scope(w: &World, csv: &ClusterServiceVersion, cr: &ModelCr) -> bool {
    let Some(targets) = oracle_targets(w, csv.metadata.namespace.as_deref().unwrap()) else {
        return false;
    };
    let Some(crd) = w.crds.iter().find(|c| c.name == cr.crd) else {
        return false;
    };
    if !owned(csv).contains(&cr.crd) {
        return false;
    }
    match (&targets, &cr.namespace, crd.cluster_scoped) {
        (None, None, true) => true,
        (None, Some(_), false) => true,
        (Some(set), Some(ns), false) => set.contains(ns),
        _ => false,
    }
}

// ----------------------------------------------------------------------------------------------
// The model cluster.
// ----------------------------------------------------------------------------------------------

fn snapshot_and_plan(w: &World, idx: usize) -> plan::Plan {
    let csv = &w.csvs[idx];
    let ns = csv.metadata.namespace.clone().unwrap();
    let ogs: Vec<OperatorGroup> = w
        .ogs
        .iter()
        .filter(|o| o.metadata.namespace.as_deref() == Some(&ns))
        .cloned()
        .collect();
    let mine = owned(csv);
    let crds: Vec<CrdInfo> = w
        .crds
        .iter()
        .filter(|c| mine.contains(&c.name))
        .cloned()
        .collect();
    let crs: Vec<CrRef> = w
        .crs
        .iter()
        .filter(|c| mine.contains(&c.crd))
        .map(|c| CrRef {
            crd: c.crd.clone(),
            namespace: c.namespace.clone(),
            name: c.name.clone(),
            uid: Some(c.uid.clone()),
            deleting: c.deleting,
        })
        .collect();
    plan::plan(&Snapshot {
        csv,
        all_csvs: &w.csvs,
        operator_groups: &ogs,
        namespaces: &w.namespaces,
        crds: &crds,
        crs: &crs,
        subscriptions: &[],
    })
}

/// Remove `FINALIZER` from CSV `idx`; the CSV is gone if being deleted with no finalizer left.
fn remove_finalizer(w: &mut World, idx: usize) {
    let csv = &mut w.csvs[idx];
    if let Some(f) = csv.metadata.finalizers.as_mut() {
        f.retain(|x| x != FINALIZER);
    }
    if csv.metadata.deletion_timestamp.is_some()
        && csv
            .metadata
            .finalizers
            .as_ref()
            .is_none_or(|f| f.is_empty())
    {
        w.csvs.remove(idx);
    }
}

/// The status write the reconciler does while waiting (what tells an abort apart).
fn write_pending(w: &mut World, idx: usize, pending: &[CrRef]) {
    let (lists, _) = plan::pending_deletion(pending, &w.crds);
    let status = w.csvs[idx].status.get_or_insert_default();
    status.cleanup = Some(CleanupStatus {
        pending_deletion: lists,
    });
}

/// One reconcile of CSV `idx`, checked by the oracle. Returns whether the world changed.
fn reconcile(w: &mut World, idx: usize, stats: &mut Stats, case: u64) -> bool {
    let csv = w.csvs[idx].clone();
    let id = format!(
        "case {case}: CSV {}/{}",
        csv.metadata.namespace.as_deref().unwrap(),
        csv.metadata.name.as_deref().unwrap()
    );
    let p = snapshot_and_plan(w, idx);
    match p.decision {
        Decision::Ignore(_) => {
            assert!(
                csv.metadata.deletion_timestamp.is_none()
                    || !csv
                        .metadata
                        .finalizers
                        .iter()
                        .flatten()
                        .any(|f| f == FINALIZER),
                "{id}: ignored although deleting with the finalizer"
            );
            false
        }
        Decision::RemoveFinalizer(reason) => {
            assert!(
                !oracle_cleanup_applies(&csv),
                "{id}: released without cleanup although cleanup applies ({reason})"
            );
            if let ReleaseReason::CleanupDisabled { aborted: true } = reason {
                stats.aborted += 1;
            }
            stats.released += 1;
            remove_finalizer(w, idx);
            true
        }
        Decision::Block(reason) => {
            assert!(
                oracle_cleanup_applies(&csv) && !oracle_safe(w, &csv),
                "{id}: blocked although safe: {reason}"
            );
            stats.blocked += 1;
            false
        }
        Decision::Done => {
            assert!(oracle_safe(w, &csv), "{id}: Done although unsafe");
            let left: Vec<&ModelCr> = w
                .crs
                .iter()
                .filter(|cr| oracle_in_scope(w, &csv, cr))
                .collect();
            assert!(left.is_empty(), "{id}: Done while CRs remain: {left:?}");
            stats.done += 1;
            remove_finalizer(w, idx);
            true
        }
        Decision::WaitForCrs { pending } => {
            assert!(oracle_safe(w, &csv), "{id}: waiting although unsafe");
            assert!(pending.iter().all(|c| c.deleting));
            stats.waits += 1;
            write_pending(w, idx, &pending);
            false
        }
        Decision::DeleteCrs { delete, pending } => {
            assert!(!delete.is_empty());
            assert!(pending.len() >= delete.len());
            write_pending(w, idx, &pending);
            let mut changed = false;
            for d in delete {
                let pos = w
                    .crs
                    .iter()
                    .position(|c| Some(&c.uid) == d.uid.as_ref())
                    .unwrap_or_else(|| panic!("{id}: deleting a CR that does not exist: {d:?}"));
                let cr = w.crs[pos].clone();
                // The safety property, checked at the moment of deletion.
                assert!(
                    oracle_cleanup_applies(&csv),
                    "{id}: deleted {cr:?} without opt-in"
                );
                assert!(
                    oracle_targets(w, csv.metadata.namespace.as_deref().unwrap()).is_some(),
                    "{id}: deleted {cr:?} without exactly one valid OperatorGroup"
                );
                assert!(
                    !oracle_shared(w, &csv),
                    "{id}: deleted {cr:?} while another CSV owns/requires an owned CRD"
                );
                assert!(
                    owned(&csv).contains(&cr.crd),
                    "{id}: deleted {cr:?} of a CRD it does not own"
                );
                assert!(
                    oracle_in_scope(w, &csv, &cr),
                    "{id}: deleted {cr:?} outside its target namespaces"
                );
                assert!(!cr.deleting, "{id}: deleted {cr:?} twice");
                stats.deleted_crs += 1;
                if cr.held {
                    w.crs[pos].deleting = true;
                } else {
                    w.crs.remove(pos);
                }
                changed = true;
            }
            changed
        }
    }
}

/// Random things the rest of the cluster does between reconciles.
fn perturb(w: &mut World, rng: &mut Rng) {
    // The CRs' operator finishes a finalizer.
    if rng.chance(40)
        && let Some(pos) = w.crs.iter().position(|c| c.deleting && c.held)
    {
        w.crs.remove(pos);
    }
    // The admin aborts a cleanup (most likely one in progress).
    if rng.chance(10) && !w.csvs.is_empty() {
        let in_progress: Vec<usize> = (0..w.csvs.len())
            .filter(|&i| plan::cleanup_started(&w.csvs[i]))
            .collect();
        let i = if !in_progress.is_empty() && rng.chance(80) {
            *rng.pick(&in_progress)
        } else {
            rng.below(w.csvs.len())
        };
        w.csvs[i].spec.cleanup = Some(CleanupSpec { enabled: false });
    }
    // Someone deletes another CSV.
    if rng.chance(5) && !w.csvs.is_empty() {
        let i = rng.below(w.csvs.len());
        if w.csvs[i].metadata.deletion_timestamp.is_none() {
            w.csvs[i].metadata.deletion_timestamp = Some(Time(jiff::Timestamp::UNIX_EPOCH));
            if w.csvs[i]
                .metadata
                .finalizers
                .as_ref()
                .is_none_or(|f| f.is_empty())
            {
                w.csvs.remove(i);
            }
        }
    }
}

fn run_case(case: u64, seed: u64, stats: &mut Stats) {
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut w = gen_world(&mut rng);
    let mut quiet_rounds = 0;
    for _ in 0..10_000 {
        stats.steps += 1;
        let mut changed = false;
        if !w.csvs.is_empty() {
            let idx = rng.below(w.csvs.len());
            changed |= reconcile(&mut w, idx, stats, case);
        }
        let before = (w.crs.len(), w.csvs.len());
        perturb(&mut w, &mut rng);
        changed |= before != (w.crs.len(), w.csvs.len());
        // Quiescence: a full sweep changes nothing and no CR finalizer is still held.
        if !changed {
            quiet_rounds += 1;
        } else {
            quiet_rounds = 0;
        }
        if quiet_rounds > 8 {
            let mut sweep_changed = false;
            for idx in (0..w.csvs.len()).rev() {
                if idx < w.csvs.len() {
                    sweep_changed |= reconcile(&mut w, idx, stats, case);
                }
            }
            let held = w.crs.iter().any(|c| c.deleting);
            if !sweep_changed && !held {
                break;
            }
            if held {
                // Release one held finalizer so the run converges.
                if let Some(pos) = w.crs.iter().position(|c| c.deleting) {
                    w.crs.remove(pos);
                }
            }
            quiet_rounds = 0;
        }
    }
    // Liveness at quiescence: whoever still carries the finalizer while deleting is blocked.
    for csv in &w.csvs {
        if csv.metadata.deletion_timestamp.is_some()
            && csv
                .metadata
                .finalizers
                .iter()
                .flatten()
                .any(|f| f == FINALIZER)
        {
            assert!(
                oracle_cleanup_applies(csv) && !oracle_safe(&w, csv),
                "case {case}: CSV {:?} still holds the finalizer but is not blocked",
                csv.metadata.name
            );
        }
    }
}

#[test]
fn randomized_cleanup_is_safe() {
    let cases: u64 = std::env::var("CVO_OLM_SAFETY_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1000);
    let seed: u64 = std::env::var("CVO_OLM_SAFETY_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x0C0F_FEE5);
    let start = std::time::Instant::now();
    let mut stats = Stats::default();
    for case in 0..cases {
        run_case(case, seed.wrapping_add(case), &mut stats);
    }
    eprintln!(
        "olm safety: {cases} cases (seed {seed}) in {:.2?}: {stats:?}",
        start.elapsed()
    );
    // The generator must actually exercise every outcome.
    if cases >= 100 {
        assert!(stats.deleted_crs > 0, "{stats:?}");
        assert!(stats.done > 0, "{stats:?}");
        assert!(stats.blocked > 0, "{stats:?}");
        assert!(stats.released > 0, "{stats:?}");
        assert!(stats.aborted > 0, "{stats:?}");
        assert!(stats.waits > 0, "{stats:?}");
    }
}
