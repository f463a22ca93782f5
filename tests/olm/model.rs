//! A model cluster for the operand-cleanup tests: a seeded world generator and an oracle that
//! restates the safety rules independently of `cvo::olm::plan` (shared by `olm_safety.rs`,
//! which drives the planner over it, and `olm_cleanup.rs`, which replays worlds on an API
//! server and compares the result with [`expected_outcome`]).
#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};

use cvo::olm::plan::{self, CrdInfo, FINALIZER, NamespaceInfo};
use cvo::olm::types::{
    CleanupSpec, ClusterServiceVersion, CrdDescription, CsvSpec, CsvStatus, OperatorGroup,
    OperatorGroupSpec, phase,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, LabelSelectorRequirement, Time,
};

/// The random worlds' generator: `fastrand`'s, seeded per case so a failing case reproduces
/// from its seed and number.
pub struct Rng(fastrand::Rng);

impl Rng {
    /// The generator of case `case` of a run with `seed` (nearby cases get unrelated worlds:
    /// fastrand mixes its state on every output).
    pub fn for_case(seed: u64, case: u64) -> Rng {
        Rng(fastrand::Rng::with_seed(seed ^ case.rotate_left(32)))
    }
    pub fn below(&mut self, n: usize) -> usize {
        self.0.usize(..n)
    }
    pub fn chance(&mut self, percent: u64) -> bool {
        self.0.u64(..100) < percent
    }
    pub fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len())]
    }
}

#[derive(Clone, Debug)]
pub struct ModelCr {
    pub crd: String,
    pub namespace: Option<String>,
    pub name: String,
    pub uid: String,
    pub deleting: bool,
    pub held: bool,
}

#[derive(Clone, Debug, Default)]
pub struct World {
    pub namespaces: Vec<NamespaceInfo>,
    pub ogs: Vec<OperatorGroup>,
    pub csvs: Vec<ClusterServiceVersion>,
    pub crds: Vec<CrdInfo>,
    pub crs: Vec<ModelCr>,
}

pub const LABEL_KEYS: [&str; 2] = ["team", "env"];
pub const LABEL_VALUES: [&str; 3] = ["a", "b", "c"];

pub fn gen_selector(rng: &mut Rng) -> LabelSelector {
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

/// A random world; namespace names are `<prefix>-ns<i>`, CRDs live in group `group`.
pub fn gen_world(rng: &mut Rng, prefix: &str, group: &str) -> World {
    gen_world_with(rng, prefix, group, 6)
}

/// Like [`gen_world`] with at most `max_csvs` CSVs (fewer CSVs: fewer shared-CRD blocks).
pub fn gen_world_with(rng: &mut Rng, prefix: &str, group: &str, max_csvs: usize) -> World {
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
            name: format!("{prefix}-ns{i}"),
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
            name: format!("k{i}s.{group}"),
            group: group.into(),
            plural: format!("k{i}s"),
            kind: format!("K{i}"),
            served_version: Some("v1".into()),
            cluster_scoped: rng.chance(20),
        });
    }
    let n_csv = 1 + rng.below(max_csvs);
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

pub fn oracle_copied(csv: &ClusterServiceVersion) -> bool {
    let labels = csv.metadata.labels.clone().unwrap_or_default();
    let ann = csv.metadata.annotations.clone().unwrap_or_default();
    labels.contains_key("olm.copiedFrom")
        || csv.status.as_ref().and_then(|s| s.reason.clone()) == Some("Copied".into())
        || ann
            .get("olm.operatorNamespace")
            .is_some_and(|ns| Some(ns) != csv.metadata.namespace.as_ref())
}

pub fn oracle_label_match(sel: &LabelSelector, labels: &BTreeMap<String, String>) -> Option<bool> {
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
pub fn oracle_targets(w: &World, csv_ns: &str) -> Option<Option<BTreeSet<String>>> {
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

pub fn owned(csv: &ClusterServiceVersion) -> BTreeSet<String> {
    csv.spec
        .customresourcedefinitions
        .owned
        .iter()
        .map(|d| d.name.clone())
        .collect()
}

pub fn oracle_shared(w: &World, csv: &ClusterServiceVersion) -> bool {
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

/// Whether `csv` carries the operand-cleanup finalizer.
pub fn has_finalizer(csv: &ClusterServiceVersion) -> bool {
    csv.metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == FINALIZER)
}

pub fn oracle_cleanup_applies(csv: &ClusterServiceVersion) -> bool {
    csv.metadata.deletion_timestamp.is_some()
        && has_finalizer(csv)
        && !oracle_copied(csv)
        && csv.spec.cleanup.as_ref().is_some_and(|c| c.enabled)
        && csv.status.as_ref().map(|s| s.phase.as_str()) == Some("Succeeded")
}

/// Whether the CSV may delete anything at all right now (all safety conditions).
pub fn oracle_safe(w: &World, csv: &ClusterServiceVersion) -> bool {
    oracle_cleanup_applies(csv)
        && oracle_targets(w, csv.metadata.namespace.as_deref().unwrap()).is_some()
        && !oracle_shared(w, csv)
}

pub fn oracle_in_scope(w: &World, csv: &ClusterServiceVersion, cr: &ModelCr) -> bool {
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

/// Remove `FINALIZER` from CSV `idx`; the CSV is gone if being deleted with no finalizer left.
pub fn remove_finalizer(w: &mut World, idx: usize) {
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

/// What the cluster must look like once the reconciler is quiescent, for a world with no CR
/// finalizers and no concurrent changes: apply "release" or "clean up" to every CSV that
/// allows it until nothing changes. Removing CSVs only ever unblocks others, so this fixpoint
/// is unique whatever order the reconciler works in.
pub fn expected_outcome(w: &World) -> World {
    let mut w = w.clone();
    w.csvs.retain(|c| {
        c.metadata.deletion_timestamp.is_none()
            || c.metadata
                .finalizers
                .as_ref()
                .is_some_and(|f| !f.is_empty())
    });
    for c in &mut w.crs {
        c.held = false;
    }
    loop {
        let mut changed = false;
        for i in 0..w.csvs.len() {
            let csv = w.csvs[i].clone();
            let ours = csv.metadata.deletion_timestamp.is_some() && has_finalizer(&csv);
            if !ours {
                continue;
            }
            if oracle_cleanup_applies(&csv) {
                if !oracle_safe(&w, &csv) {
                    continue;
                }
                let keep: Vec<ModelCr> = w
                    .crs
                    .iter()
                    .filter(|cr| !oracle_in_scope(&w, &csv, cr))
                    .cloned()
                    .collect();
                w.crs = keep;
            }
            remove_finalizer(&mut w, i);
            changed = true;
            break;
        }
        if !changed {
            return w;
        }
    }
}

/// Bias a world towards a cleanup that can happen: the first CSV opted in, deleting,
/// `Succeeded`, not copied, and alone in its namespace with exactly one OperatorGroup.
/// (The unbiased generator mostly produces blocks and releases, which is what the planner
/// test wants, but a live replay of a few worlds should also see deletions.)
pub fn bias_towards_cleanup(w: &mut World, rng: &mut Rng) {
    let Some(csv) = w.csvs.first_mut() else {
        return;
    };
    let ns = csv.metadata.namespace.clone().unwrap();
    csv.metadata.deletion_timestamp = Some(Time(jiff::Timestamp::UNIX_EPOCH));
    csv.metadata.finalizers = Some(vec![FINALIZER.to_string()]);
    csv.spec.cleanup = Some(CleanupSpec { enabled: true });
    if let Some(l) = csv.metadata.labels.as_mut() {
        l.remove(plan::COPIED_FROM_LABEL);
    }
    if let Some(a) = csv.metadata.annotations.as_mut() {
        a.remove(plan::OPERATOR_NAMESPACE_ANNOTATION);
    }
    let status = csv.status.get_or_insert_default();
    status.phase = phase::SUCCEEDED.to_string();
    status.reason = None;
    let in_ns: Vec<usize> = (0..w.ogs.len())
        .filter(|&i| w.ogs[i].metadata.namespace.as_deref() == Some(ns.as_str()))
        .collect();
    if in_ns.len() != 1 {
        w.ogs
            .retain(|o| o.metadata.namespace.as_deref() != Some(ns.as_str()));
        let spec = if rng.chance(50) {
            OperatorGroupSpec::default()
        } else {
            OperatorGroupSpec {
                target_namespaces: Some(vec![ns.clone()]),
                ..Default::default()
            }
        };
        w.ogs.push(OperatorGroup::new(&ns, "og0", spec));
    }
}
