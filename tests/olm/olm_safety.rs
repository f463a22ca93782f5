//! Randomized safety test of the operand-cleanup planner.
//!
//! A seeded generator (fastrand) builds random clusters — namespaces with labels, 0/1/2
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

use crate::model;

use model::*;

use cvo::olm::plan::{self, CrRef, CrdInfo, Decision, ReleaseReason, Snapshot};
use cvo::olm::types::{CleanupSpec, CleanupStatus, OperatorGroup};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

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
                csv.metadata.deletion_timestamp.is_none() || !model::has_finalizer(&csv),
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
    let mut rng = Rng::for_case(seed, case);
    let mut w = gen_world(&mut rng, "t", "example.com");
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
        if csv.metadata.deletion_timestamp.is_some() && model::has_finalizer(csv) {
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
        run_case(case, seed, &mut stats);
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
