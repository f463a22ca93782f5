//! The operand-cleanup decision, as a pure function of a cluster snapshot.
//!
//! Every safety rule of the cleanup lives here and nowhere else: [`plan`] takes a
//! [`Snapshot`] (the CSV, every CSV in the cluster, the OperatorGroups of the CSV's namespace,
//! the namespaces with their labels, the CSV's owned CRDs as served, and the custom resources of
//! those CRDs) and returns a [`Decision`]. The reconciler only gathers snapshots and carries
//! decisions out; the randomized safety test drives this same function against a model cluster.
//!
//! Rules, in the order they are checked:
//! 1. act only on a CSV with a `deletionTimestamp` and the [`FINALIZER`] → else [`Decision::Ignore`];
//! 2. copied CSVs are never cleaned → release the finalizer;
//! 3. `spec.cleanup.enabled` false/absent → release the finalizer (an abort if cleanup had begun);
//! 4. `status.phase` other than `Succeeded` → release the finalizer (upgrades never clean);
//! 5. exactly one OperatorGroup in the CSV's namespace gives the target namespaces → else block;
//! 6. no other non-copied CSV may own or require any owned CRD → else block;
//! 7. delete every CR of each owned CRD in the targets (cluster-scoped only for all namespaces);
//! 8. while some remain → wait (status lists them, bounded);
//! 9. none remain → done, release the finalizer.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::{Value, json};

use crate::cluster::selector;

use super::types::{
    ClusterServiceVersion, CsvCondition, CsvStatus, OperatorGroup, ResourceInstance, ResourceList,
    Subscription, phase,
};

/// The finalizer an admin adds to opt a CSV into operand cleanup. Never added by `cvo`.
pub const FINALIZER: &str = "operatorframework.io/delete-custom-resources";
/// Label OLM puts on CSVs it copies into target namespaces.
pub const COPIED_FROM_LABEL: &str = "olm.copiedFrom";
/// Annotation naming the namespace of the operator a CSV belongs to.
pub const OPERATOR_NAMESPACE_ANNOTATION: &str = "olm.operatorNamespace";
/// `status.reason` of a copied CSV.
pub const COPIED_REASON: &str = "Copied";
/// At most this many instances are listed in `status.cleanup.pendingDeletion`, in total.
pub const MAX_PENDING_INSTANCES: usize = 100;
/// At most this many `status.conditions` are kept, as OLM does.
pub const MAX_CONDITIONS: usize = 20;
/// Condition reason while CRs are still being finalized by their operator.
pub const REASON_WAITING: &str = "WaitingOnCleanup";
/// Condition reason while cleanup is blocked by a safety rule.
pub const REASON_BLOCKED: &str = "CleanupBlocked";

/// A namespace and its labels.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NamespaceInfo {
    pub name: String,
    pub labels: BTreeMap<String, String>,
}

/// What the planner needs of a CRD: identity, the version to talk to, and scope.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CrdInfo {
    /// `<plural>.<group>`, as in the CSV's `owned[].name`.
    pub name: String,
    pub group: String,
    pub plural: String,
    pub kind: String,
    /// The version used for list/delete: the storage version if served, else the first served one.
    pub served_version: Option<String>,
    pub cluster_scoped: bool,
}

/// One custom resource of an owned CRD, as listed from the cluster.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CrRef {
    /// Name of the CRD (`<plural>.<group>`) this CR is an instance of.
    pub crd: String,
    pub namespace: Option<String>,
    pub name: String,
    /// Used as a delete precondition, so a recreated object of the same name is not deleted.
    pub uid: Option<String>,
    /// Already has a `deletionTimestamp` (its finalizers are still running).
    pub deleting: bool,
}

/// Everything the decision depends on. Gathered by the reconciler, or built by a test.
#[derive(Clone, Copy, Debug)]
pub struct Snapshot<'a> {
    /// The CSV being reconciled.
    pub csv: &'a ClusterServiceVersion,
    /// Every CSV in the cluster (may include `csv` itself; it is recognised and skipped).
    pub all_csvs: &'a [ClusterServiceVersion],
    /// The OperatorGroups in the CSV's namespace.
    pub operator_groups: &'a [OperatorGroup],
    /// Every namespace with its labels.
    pub namespaces: &'a [NamespaceInfo],
    /// The CSV's owned CRDs that exist in the cluster.
    pub crds: &'a [CrdInfo],
    /// The CRs of those CRDs, in any namespace (the planner filters by target).
    pub crs: &'a [CrRef],
    /// Subscriptions in the CSV's namespace (hazard warnings only).
    pub subscriptions: &'a [Subscription],
}

/// Why the CSV is none of our business.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IgnoreReason {
    NotBeingDeleted,
    NoFinalizer,
}

/// Why the finalizer is removed without deleting anything (more).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReleaseReason {
    /// A copy OLM made into a target namespace.
    Copied,
    /// `spec.cleanup.enabled` is false or absent; `aborted` when a cleanup had already begun.
    CleanupDisabled { aborted: bool },
    /// `status.phase` is not `Succeeded` (e.g. `Replacing` during an upgrade).
    NotSucceeded { phase: String },
}

impl fmt::Display for ReleaseReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReleaseReason::Copied => write!(f, "copied CSV: never cleaned up"),
            ReleaseReason::CleanupDisabled { aborted: true } => write!(
                f,
                "spec.cleanup.enabled was set to false during cleanup: aborted, nothing more is deleted"
            ),
            ReleaseReason::CleanupDisabled { aborted: false } => {
                write!(
                    f,
                    "spec.cleanup.enabled is false or absent: nothing is deleted"
                )
            }
            ReleaseReason::NotSucceeded { phase } => write!(
                f,
                "status.phase is {:?}, not Succeeded: nothing is deleted",
                phase
            ),
        }
    }
}

/// Why cleanup cannot proceed safely; the finalizer stays until the admin acts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BlockReason {
    NoOperatorGroup {
        namespace: String,
    },
    SeveralOperatorGroups {
        namespace: String,
        names: Vec<String>,
    },
    /// The OperatorGroup's target list or selector cannot be interpreted safely.
    InvalidOperatorGroup {
        name: String,
        problem: String,
    },
    /// Another non-copied CSV owns or requires an owned CRD.
    SharedCrd {
        conflicts: Vec<CrdConflict>,
    },
}

/// One other CSV that uses one of our owned CRDs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CrdConflict {
    /// `namespace/name` of the other CSV.
    pub csv: String,
    pub crd: String,
    /// `true` when it owns the CRD, `false` when it requires it.
    pub owns: bool,
}

impl fmt::Display for BlockReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BlockReason::NoOperatorGroup { namespace } => {
                write!(
                    f,
                    "no OperatorGroup in namespace {namespace}: target namespaces unknown"
                )
            }
            BlockReason::SeveralOperatorGroups { namespace, names } => write!(
                f,
                "{} OperatorGroups in namespace {namespace} ({}): target namespaces ambiguous",
                names.len(),
                names.join(", ")
            ),
            BlockReason::InvalidOperatorGroup { name, problem } => {
                write!(f, "OperatorGroup {name}: {problem}")
            }
            BlockReason::SharedCrd { conflicts } => {
                let parts: Vec<String> = conflicts
                    .iter()
                    .map(|c| {
                        format!(
                            "CSV {} {} CRD {}",
                            c.csv,
                            if c.owns { "owns" } else { "requires" },
                            c.crd
                        )
                    })
                    .collect();
                write!(f, "{}", parts.join("; "))?;
                write!(
                    f,
                    " (set spec.cleanup.enabled=false to release without cleanup)"
                )
            }
        }
    }
}

/// The namespaces a cleanup may touch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Targets {
    /// Every namespace, and cluster-scoped CRs.
    AllNamespaces,
    /// Only these namespaces; cluster-scoped CRs are never touched.
    Namespaces(BTreeSet<String>),
}

impl Targets {
    /// Whether a CR at this location (None = cluster-scoped) is in scope.
    pub fn contains(&self, namespace: Option<&str>) -> bool {
        match (self, namespace) {
            (Targets::AllNamespaces, _) => true,
            (Targets::Namespaces(set), Some(ns)) => set.contains(ns),
            (Targets::Namespaces(_), None) => false,
        }
    }
}

/// What the reconciler must do next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Not ours: leave the CSV alone.
    Ignore(IgnoreReason),
    /// Remove the finalizer, delete nothing.
    RemoveFinalizer(ReleaseReason),
    /// Keep the finalizer, delete nothing, report why.
    Block(BlockReason),
    /// Delete `delete` (CRs without a deletionTimestamp); `pending` is every CR still in scope.
    DeleteCrs {
        delete: Vec<CrRef>,
        pending: Vec<CrRef>,
    },
    /// Every CR in scope is already being deleted; wait for their finalizers.
    WaitForCrs { pending: Vec<CrRef> },
    /// Nothing left in scope: remove the finalizer.
    Done,
}

impl Decision {
    /// The CRs still in scope, for the status.
    pub fn pending(&self) -> &[CrRef] {
        match self {
            Decision::DeleteCrs { pending, .. } | Decision::WaitForCrs { pending } => pending,
            _ => &[],
        }
    }
}

/// The full answer: the decision plus hazards worth a warning.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    pub decision: Decision,
    pub targets: Option<Targets>,
    pub warnings: Vec<String>,
}

/// Whether a CSV is one of OLM's copies (rule 2 of this module; docs/operand-cleanup.md).
pub fn is_copied(csv: &ClusterServiceVersion) -> bool {
    let meta = &csv.metadata;
    if meta
        .labels
        .as_ref()
        .is_some_and(|l| l.contains_key(COPIED_FROM_LABEL))
    {
        return true;
    }
    if csv
        .status
        .as_ref()
        .and_then(|s| s.reason.as_deref())
        .is_some_and(|r| r == COPIED_REASON)
    {
        return true;
    }
    match meta
        .annotations
        .as_ref()
        .and_then(|a| a.get(OPERATOR_NAMESPACE_ANNOTATION))
    {
        Some(op_ns) => Some(op_ns.as_str()) != meta.namespace.as_deref(),
        None => false,
    }
}

fn has_finalizer(meta: &ObjectMeta) -> bool {
    meta.finalizers
        .as_ref()
        .is_some_and(|f| f.iter().any(|x| x == FINALIZER))
}

fn cleanup_enabled(csv: &ClusterServiceVersion) -> bool {
    csv.spec.cleanup.as_ref().is_some_and(|c| c.enabled)
}

/// Whether the CSV opted in to operand cleanup: the [`FINALIZER`] and `spec.cleanup.enabled`.
pub fn opted_in(csv: &ClusterServiceVersion) -> bool {
    has_finalizer(&csv.metadata) && cleanup_enabled(csv)
}

/// Whether this CSV's status shows a cleanup that has begun (for telling an abort apart).
pub fn cleanup_started(csv: &ClusterServiceVersion) -> bool {
    csv.status.as_ref().is_some_and(|s| {
        s.cleanup.is_some()
            || s.conditions
                .last()
                .is_some_and(|c| c.phase == phase::DELETING && c.reason == REASON_WAITING)
    })
}

/// Rules 1–4: what can be decided from the CSV alone. `None` means: gather a snapshot.
pub fn precheck(csv: &ClusterServiceVersion) -> Option<Decision> {
    if csv.metadata.deletion_timestamp.is_none() {
        return Some(Decision::Ignore(IgnoreReason::NotBeingDeleted));
    }
    if !has_finalizer(&csv.metadata) {
        return Some(Decision::Ignore(IgnoreReason::NoFinalizer));
    }
    if is_copied(csv) {
        return Some(Decision::RemoveFinalizer(ReleaseReason::Copied));
    }
    if !cleanup_enabled(csv) {
        return Some(Decision::RemoveFinalizer(ReleaseReason::CleanupDisabled {
            aborted: cleanup_started(csv),
        }));
    }
    if csv.phase() != phase::SUCCEEDED {
        return Some(Decision::RemoveFinalizer(ReleaseReason::NotSucceeded {
            phase: csv.phase().to_string(),
        }));
    }
    None
}

/// Rule 5: the target namespaces, from the single OperatorGroup of the CSV's namespace.
pub fn targets(
    csv_namespace: &str,
    operator_groups: &[OperatorGroup],
    namespaces: &[NamespaceInfo],
) -> Result<Targets, BlockReason> {
    let here: Vec<&OperatorGroup> = operator_groups
        .iter()
        .filter(|og| og.metadata.namespace.as_deref() == Some(csv_namespace))
        .collect();
    let og = match here.as_slice() {
        [] => {
            return Err(BlockReason::NoOperatorGroup {
                namespace: csv_namespace.to_string(),
            });
        }
        [og] => *og,
        several => {
            let mut names: Vec<String> = several
                .iter()
                .map(|og| og.metadata.name.clone().unwrap_or_default())
                .collect();
            names.sort();
            return Err(BlockReason::SeveralOperatorGroups {
                namespace: csv_namespace.to_string(),
                names,
            });
        }
    };
    let og_name = og.metadata.name.clone().unwrap_or_default();
    let invalid = |problem: String| BlockReason::InvalidOperatorGroup {
        name: format!("{csv_namespace}/{og_name}"),
        problem,
    };
    if let Some(list) = og.spec.target_namespaces.as_ref().filter(|l| !l.is_empty()) {
        if list.iter().any(|ns| ns.is_empty()) {
            return Err(invalid(
                "spec.targetNamespaces contains an empty name".to_string(),
            ));
        }
        return Ok(Targets::Namespaces(list.iter().cloned().collect()));
    }
    match og.spec.selector.as_ref() {
        Some(sel) if !selector::is_empty(sel) => {
            // Validate up front: an invalid selector blocks even with no namespace to match.
            let invalid_selector = |e: selector::SelectorError| invalid(e.to_string());
            selector::validate(sel).map_err(invalid_selector)?;
            let mut set = BTreeSet::new();
            for ns in namespaces {
                if selector::matches(sel, &ns.labels).map_err(invalid_selector)? {
                    set.insert(ns.name.clone());
                }
            }
            Ok(Targets::Namespaces(set))
        }
        _ => Ok(Targets::AllNamespaces),
    }
}

fn csv_key(csv: &ClusterServiceVersion) -> (String, String) {
    (
        csv.metadata.namespace.clone().unwrap_or_default(),
        csv.metadata.name.clone().unwrap_or_default(),
    )
}

fn owned_crd_names(csv: &ClusterServiceVersion) -> BTreeSet<&str> {
    csv.spec
        .customresourcedefinitions
        .owned
        .iter()
        .map(|d| d.name.as_str())
        .collect()
}

/// Rule 6: other non-copied CSVs owning or requiring one of `csv`'s owned CRDs.
pub fn crd_conflicts(
    csv: &ClusterServiceVersion,
    all_csvs: &[ClusterServiceVersion],
) -> Vec<CrdConflict> {
    let me = csv_key(csv);
    let owned = owned_crd_names(csv);
    let mut out = Vec::new();
    for other in all_csvs {
        if csv_key(other) == me || is_copied(other) {
            continue;
        }
        let (ns, name) = csv_key(other);
        let defs = &other.spec.customresourcedefinitions;
        for (list, owns) in [(&defs.owned, true), (&defs.required, false)] {
            for d in list {
                if owned.contains(d.name.as_str()) {
                    out.push(CrdConflict {
                        csv: format!("{ns}/{name}"),
                        crd: d.name.clone(),
                        owns,
                    });
                }
            }
        }
    }
    out.sort_by(|a, b| (&a.csv, &a.crd, !a.owns).cmp(&(&b.csv, &b.crd, !b.owns)));
    out.dedup();
    out
}

/// Rule 7: the CRs of owned CRDs that lie in the targets.
pub fn in_scope<'a>(
    csv: &ClusterServiceVersion,
    targets: &Targets,
    crds: &[CrdInfo],
    crs: &'a [CrRef],
) -> Vec<&'a CrRef> {
    let owned = owned_crd_names(csv);
    let crds: BTreeMap<&str, &CrdInfo> = crds
        .iter()
        .filter(|c| owned.contains(c.name.as_str()))
        .map(|c| (c.name.as_str(), c))
        .collect();
    let mut out: Vec<&CrRef> = crs
        .iter()
        .filter(|cr| {
            let Some(crd) = crds.get(cr.crd.as_str()) else {
                return false;
            };
            if crd.cluster_scoped {
                cr.namespace.is_none() && *targets == Targets::AllNamespaces
            } else {
                cr.namespace.is_some() && targets.contains(cr.namespace.as_deref())
            }
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The whole decision (rules 1–9) for one snapshot.
///
/// # Errors
///
/// None are returned: the decision is pure and total, and what keeps a cleanup from going
/// ahead is part of it — [`Decision::Block`] with a [`BlockReason`] (no or several
/// OperatorGroups, an OperatorGroup whose targets cannot be interpreted safely, an owned CRD
/// another CSV owns or requires), in which case the finalizer stays and nothing is deleted.
/// Hazards the reconciler cannot fix are in [`Plan::warnings`].
pub fn plan(s: &Snapshot<'_>) -> Plan {
    let warnings = hazards(s);
    if let Some(decision) = precheck(s.csv) {
        return Plan {
            decision,
            targets: None,
            warnings,
        };
    }
    let ns = s.csv.metadata.namespace.clone().unwrap_or_default();
    let targets = match targets(&ns, s.operator_groups, s.namespaces) {
        Ok(t) => t,
        Err(reason) => {
            return Plan {
                decision: Decision::Block(reason),
                targets: None,
                warnings,
            };
        }
    };
    let conflicts = crd_conflicts(s.csv, s.all_csvs);
    if !conflicts.is_empty() {
        return Plan {
            decision: Decision::Block(BlockReason::SharedCrd { conflicts }),
            targets: Some(targets),
            warnings,
        };
    }
    let pending: Vec<CrRef> = in_scope(s.csv, &targets, s.crds, s.crs)
        .into_iter()
        .cloned()
        .collect();
    let delete: Vec<CrRef> = pending.iter().filter(|c| !c.deleting).cloned().collect();
    let decision = if pending.is_empty() {
        Decision::Done
    } else if delete.is_empty() {
        Decision::WaitForCrs { pending }
    } else {
        Decision::DeleteCrs { delete, pending }
    };
    Plan {
        decision,
        targets: Some(targets),
        warnings,
    }
}

/// Hazards the reconciler cannot fix but should report (docs/operand-cleanup.md, "Hazards").
fn hazards(s: &Snapshot<'_>) -> Vec<String> {
    let mut out = Vec::new();
    let name = s.csv.metadata.name.as_deref().unwrap_or_default();
    for sub in s.subscriptions {
        let installed = sub
            .status
            .as_ref()
            .and_then(|st| st.installed_csv.as_deref());
        if installed == Some(name) && sub.metadata.deletion_timestamp.is_none() {
            out.push(format!(
                "Subscription {} still installs this CSV: OLM will recreate it; delete the Subscription first",
                sub.metadata.name.as_deref().unwrap_or_default()
            ));
        }
    }
    if s.csv
        .metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == "foregroundDeletion")
    {
        out.push(
            "the CSV is being deleted in the foreground: its operator Deployment may be removed before its CRs are finalized"
                .to_string(),
        );
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Status and finalizer writes, as pure functions
// ---------------------------------------------------------------------------------------------

/// `status.cleanup.pendingDeletion` for `pending`: grouped by group/kind, at most
/// [`MAX_PENDING_INSTANCES`] instances in total. Returns the lists and how many were left out.
pub fn pending_deletion(pending: &[CrRef], crds: &[CrdInfo]) -> (Vec<ResourceList>, usize) {
    let by_name: BTreeMap<&str, &CrdInfo> = crds.iter().map(|c| (c.name.as_str(), c)).collect();
    let mut groups: BTreeMap<(String, String), Vec<ResourceInstance>> = BTreeMap::new();
    let mut sorted: Vec<&CrRef> = pending.iter().collect();
    sorted.sort();
    let mut listed = 0usize;
    for cr in &sorted {
        if listed == MAX_PENDING_INSTANCES {
            break;
        }
        let (group, kind) = match by_name.get(cr.crd.as_str()) {
            Some(c) => (c.group.clone(), c.kind.clone()),
            None => match cr.crd.split_once('.') {
                Some((_, g)) => (g.to_string(), cr.crd.clone()),
                None => (String::new(), cr.crd.clone()),
            },
        };
        groups
            .entry((group, kind))
            .or_default()
            .push(ResourceInstance {
                name: cr.name.clone(),
                namespace: cr.namespace.clone(),
            });
        listed += 1;
    }
    let lists = groups
        .into_iter()
        .map(|((group, kind), instances)| ResourceList {
            group,
            kind,
            instances,
        })
        .collect();
    (lists, sorted.len() - listed)
}

/// The condition message while waiting.
pub fn waiting_message(total: usize, unlisted: usize) -> String {
    let mut m = format!("waiting for operator to finish cleanup for {total} CRs");
    if unlisted > 0 {
        m.push_str(&format!(
            " ({unlisted} not listed in status.cleanup.pendingDeletion)"
        ));
    }
    m
}

/// The status the CSV should have, or `None` when it already has it (no write needed).
///
/// `cleanup` replaces `status.cleanup` (`None` leaves it unchanged); the condition
/// `{phase: Deleting, reason, message}` is updated in place when the latest condition already
/// has this phase and reason, else appended; at most [`MAX_CONDITIONS`] are kept.
pub fn desired_status(
    current: Option<&CsvStatus>,
    cleanup: Option<Vec<ResourceList>>,
    reason: &str,
    message: &str,
    now: &str,
) -> Option<(Option<Vec<ResourceList>>, Vec<CsvCondition>)> {
    let empty = CsvStatus::default();
    let current = current.unwrap_or(&empty);
    let current_pending = current.cleanup.as_ref().map(|c| &c.pending_deletion);
    let cleanup_same = match &cleanup {
        None => true,
        Some(p) => current_pending == Some(p),
    };
    let last = current.conditions.last();
    let same_kind = last.is_some_and(|c| c.phase == phase::DELETING && c.reason == reason);
    let cond_same = same_kind && last.is_some_and(|c| c.message == message);
    if cleanup_same && cond_same {
        return None;
    }
    let mut conditions = current.conditions.clone();
    if cond_same {
        // unchanged
    } else if same_kind {
        let c = conditions.last_mut().expect("checked above");
        c.message = message.to_string();
        c.last_update_time = Some(now.to_string());
    } else {
        conditions.push(CsvCondition {
            phase: phase::DELETING.to_string(),
            reason: reason.to_string(),
            message: message.to_string(),
            last_update_time: Some(now.to_string()),
            last_transition_time: Some(now.to_string()),
        });
    }
    if conditions.len() > MAX_CONDITIONS {
        conditions.drain(..conditions.len() - MAX_CONDITIONS);
    }
    Some((cleanup, conditions))
}

/// A JSON patch removing [`FINALIZER`] whose first operation tests the finalizer list, so a
/// concurrent change by another writer makes the patch fail instead of being lost. When the
/// object's `resourceVersion` is known it is tested too: the decision to release was made on
/// exactly this version (not on a stale cache entry). `None` when the finalizer is absent.
pub fn finalizer_removal_patch(meta: &ObjectMeta) -> Option<Value> {
    let list = meta.finalizers.as_ref()?;
    let idx = list.iter().position(|f| f == FINALIZER)?;
    let mut ops = vec![json!({"op": "test", "path": "/metadata/finalizers", "value": list})];
    if let Some(rv) = &meta.resource_version {
        ops.push(json!({"op": "test", "path": "/metadata/resourceVersion", "value": rv}));
    }
    ops.push(json!({"op": "remove", "path": format!("/metadata/finalizers/{idx}")}));
    Some(Value::Array(ops))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::olm::types::{
        CleanupSpec, CrdDescription, CsvSpec, OperatorGroupSpec, SubscriptionStatus,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
        LabelSelector, LabelSelectorRequirement, Time,
    };

    const CRD: &str = "widgets.example.com";

    fn csv(ns: &str, name: &str) -> ClusterServiceVersion {
        let mut spec = CsvSpec::default();
        spec.customresourcedefinitions
            .owned
            .push(CrdDescription::new(CRD, "v1", "Widget"));
        spec.cleanup = Some(CleanupSpec { enabled: true });
        let mut c = ClusterServiceVersion::new(ns, name, spec);
        c.metadata.deletion_timestamp = Some(Time(jiff::Timestamp::UNIX_EPOCH));
        c.metadata.finalizers = Some(vec![FINALIZER.to_string()]);
        c.status = Some(CsvStatus {
            phase: phase::SUCCEEDED.into(),
            ..Default::default()
        });
        c
    }

    fn og(ns: &str, name: &str, targets: &[&str]) -> OperatorGroup {
        OperatorGroup::new(
            ns,
            name,
            OperatorGroupSpec {
                target_namespaces: Some(targets.iter().map(|s| s.to_string()).collect()),
                ..Default::default()
            },
        )
    }

    fn crd(cluster_scoped: bool) -> CrdInfo {
        CrdInfo {
            name: CRD.into(),
            group: "example.com".into(),
            plural: "widgets".into(),
            kind: "Widget".into(),
            served_version: Some("v1".into()),
            cluster_scoped,
        }
    }

    /// Sets `key` in a label or annotation map, creating the map if needed.
    fn insert(map: &mut Option<BTreeMap<String, String>>, key: &str, value: &str) {
        map.get_or_insert_default().insert(key.into(), value.into());
    }

    fn cr(ns: Option<&str>, name: &str, deleting: bool) -> CrRef {
        CrRef {
            crd: CRD.into(),
            namespace: ns.map(String::from),
            name: name.into(),
            uid: None,
            deleting,
        }
    }

    fn nss(names: &[(&str, &[(&str, &str)])]) -> Vec<NamespaceInfo> {
        names
            .iter()
            .map(|(n, l)| NamespaceInfo {
                name: n.to_string(),
                labels: l
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            })
            .collect()
    }

    struct World {
        csv: ClusterServiceVersion,
        others: Vec<ClusterServiceVersion>,
        ogs: Vec<OperatorGroup>,
        nss: Vec<NamespaceInfo>,
        crds: Vec<CrdInfo>,
        crs: Vec<CrRef>,
        subs: Vec<Subscription>,
    }

    impl World {
        fn new() -> Self {
            World {
                csv: csv("op", "w.v1"),
                others: vec![],
                ogs: vec![og("op", "og", &["a"])],
                nss: nss(&[("op", &[]), ("a", &[]), ("b", &[])]),
                crds: vec![crd(false)],
                crs: vec![cr(Some("a"), "x", false), cr(Some("b"), "y", false)],
                subs: vec![],
            }
        }
        fn plan(&self) -> Plan {
            let mut all = self.others.clone();
            all.push(self.csv.clone());
            plan(&Snapshot {
                csv: &self.csv,
                all_csvs: &all,
                operator_groups: &self.ogs,
                namespaces: &self.nss,
                crds: &self.crds,
                crs: &self.crs,
                subscriptions: &self.subs,
            })
        }
    }

    #[test]
    fn rule1_ignores_csv_not_being_deleted_or_without_finalizer() {
        let mut w = World::new();
        w.csv.metadata.deletion_timestamp = None;
        assert_eq!(
            w.plan().decision,
            Decision::Ignore(IgnoreReason::NotBeingDeleted)
        );
        let mut w = World::new();
        w.csv.metadata.finalizers = Some(vec!["other".into()]);
        assert_eq!(
            w.plan().decision,
            Decision::Ignore(IgnoreReason::NoFinalizer)
        );
    }

    #[test]
    fn rule2_disabled_or_absent_cleanup_releases_and_abort_is_recognised() {
        let mut w = World::new();
        w.csv.spec.cleanup = None;
        assert_eq!(
            w.plan().decision,
            Decision::RemoveFinalizer(ReleaseReason::CleanupDisabled { aborted: false })
        );
        w.csv.spec.cleanup = Some(CleanupSpec { enabled: false });
        w.csv.status.as_mut().unwrap().cleanup = Some(Default::default());
        assert_eq!(
            w.plan().decision,
            Decision::RemoveFinalizer(ReleaseReason::CleanupDisabled { aborted: true })
        );
    }

    #[test]
    fn rule3_only_succeeded_is_cleaned() {
        for p in phase::ALL.iter().filter(|p| **p != phase::SUCCEEDED) {
            let mut w = World::new();
            w.csv.status.as_mut().unwrap().phase = p.to_string();
            assert_eq!(
                w.plan().decision,
                Decision::RemoveFinalizer(ReleaseReason::NotSucceeded {
                    phase: p.to_string()
                }),
                "{p}"
            );
        }
        let mut w = World::new();
        w.csv.status = None;
        assert!(matches!(
            w.plan().decision,
            Decision::RemoveFinalizer(ReleaseReason::NotSucceeded { .. })
        ));
    }

    #[test]
    fn rule4_copied_csvs_are_released_and_not_counted() {
        let mut w = World::new();
        insert(&mut w.csv.metadata.labels, COPIED_FROM_LABEL, "op");
        assert_eq!(
            w.plan().decision,
            Decision::RemoveFinalizer(ReleaseReason::Copied)
        );
        let mut w = World::new();
        w.csv.status.as_mut().unwrap().reason = Some(COPIED_REASON.into());
        assert_eq!(
            w.plan().decision,
            Decision::RemoveFinalizer(ReleaseReason::Copied)
        );
        let mut w = World::new();
        insert(
            &mut w.csv.metadata.annotations,
            OPERATOR_NAMESPACE_ANNOTATION,
            "elsewhere",
        );
        assert_eq!(
            w.plan().decision,
            Decision::RemoveFinalizer(ReleaseReason::Copied)
        );
        // Same namespace in the annotation: not a copy.
        let mut w = World::new();
        insert(
            &mut w.csv.metadata.annotations,
            OPERATOR_NAMESPACE_ANNOTATION,
            "op",
        );
        assert!(matches!(w.plan().decision, Decision::DeleteCrs { .. }));
        // A copy of another owner of the CRD does not block.
        let mut w = World::new();
        let mut copy = csv("a", "w.v1");
        insert(&mut copy.metadata.labels, COPIED_FROM_LABEL, "op");
        w.others.push(copy);
        assert!(matches!(w.plan().decision, Decision::DeleteCrs { .. }));
    }

    #[test]
    fn rule5_needs_exactly_one_operator_group() {
        let mut w = World::new();
        w.ogs.clear();
        assert!(matches!(
            w.plan().decision,
            Decision::Block(BlockReason::NoOperatorGroup { .. })
        ));
        w.ogs = vec![og("op", "one", &["a"]), og("op", "two", &["b"])];
        assert!(matches!(
            w.plan().decision,
            Decision::Block(BlockReason::SeveralOperatorGroups { .. })
        ));
        // An OperatorGroup of another namespace does not count.
        w.ogs = vec![og("a", "elsewhere", &[])];
        assert!(matches!(
            w.plan().decision,
            Decision::Block(BlockReason::NoOperatorGroup { .. })
        ));
    }

    #[test]
    fn rule5_targets_ignore_the_csv_annotation() {
        let mut w = World::new();
        insert(&mut w.csv.metadata.annotations, "olm.targetNamespaces", "b");
        assert_eq!(
            w.plan().decision.pending(),
            &[cr(Some("a"), "x", false)][..]
        );
    }

    #[test]
    fn rule5_selector_and_all_namespaces() {
        let mut w = World::new();
        w.nss = nss(&[
            ("op", &[]),
            ("a", &[("team", "x")]),
            ("b", &[("team", "y")]),
        ]);
        w.ogs[0].spec.target_namespaces = None;
        w.ogs[0].spec.selector = Some(LabelSelector {
            match_labels: Some([("team".to_string(), "y".to_string())].into()),
            ..Default::default()
        });
        assert_eq!(
            w.plan().decision.pending(),
            &[cr(Some("b"), "y", false)][..]
        );
        w.ogs[0].spec.selector = Some(LabelSelector {
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: "team".into(),
                operator: "NotIn".into(),
                values: Some(vec!["y".into()]),
            }]),
            ..Default::default()
        });
        assert_eq!(
            w.plan().decision.pending(),
            &[cr(Some("a"), "x", false)][..]
        );
        w.ogs[0].spec.selector = Some(LabelSelector {
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: "team".into(),
                operator: "Bogus".into(),
                values: None,
            }]),
            ..Default::default()
        });
        assert!(matches!(
            w.plan().decision,
            Decision::Block(BlockReason::InvalidOperatorGroup { .. })
        ));
        // An invalid expression blocks even when matchLabels already rules every namespace out.
        w.ogs[0].spec.selector.as_mut().unwrap().match_labels =
            Some([("team".to_string(), "nobody".to_string())].into());
        assert!(matches!(
            w.plan().decision,
            Decision::Block(BlockReason::InvalidOperatorGroup { .. })
        ));
        // Empty selector and empty targetNamespaces: all namespaces.
        w.ogs[0].spec.selector = Some(LabelSelector::default());
        w.ogs[0].spec.target_namespaces = Some(vec![]);
        let p = w.plan();
        assert_eq!(p.targets, Some(Targets::AllNamespaces));
        assert_eq!(p.decision.pending().len(), 2);
        // An empty entry in targetNamespaces is refused.
        w.ogs[0].spec.target_namespaces = Some(vec![String::new()]);
        assert!(matches!(
            w.plan().decision,
            Decision::Block(BlockReason::InvalidOperatorGroup { .. })
        ));
    }

    #[test]
    fn rule6_other_owner_or_requirer_blocks() {
        let mut w = World::new();
        w.others.push(csv("other", "w.v2"));
        match w.plan().decision {
            Decision::Block(BlockReason::SharedCrd { conflicts }) => {
                assert_eq!(
                    conflicts,
                    vec![CrdConflict {
                        csv: "other/w.v2".into(),
                        crd: CRD.into(),
                        owns: true
                    }]
                );
            }
            d => panic!("{d:?}"),
        }
        let mut w = World::new();
        let mut user = ClusterServiceVersion::new("u", "user.v1", CsvSpec::default());
        user.spec
            .customresourcedefinitions
            .required
            .push(CrdDescription::new(CRD, "v1", "Widget"));
        w.others.push(user);
        let d = w.plan().decision;
        let Decision::Block(reason) = d else { panic!() };
        assert!(reason.to_string().contains("u/user.v1 requires CRD"));
        // A CSV with the same name in another namespace is another CSV.
        let mut w = World::new();
        w.others.push(csv("a", "w.v1"));
        assert!(matches!(w.plan().decision, Decision::Block(_)));
    }

    #[test]
    fn rule7_scope_and_served_version() {
        // Namespaced: only targets.
        let w = World::new();
        assert_eq!(
            w.plan().decision,
            Decision::DeleteCrs {
                delete: vec![cr(Some("a"), "x", false)],
                pending: vec![cr(Some("a"), "x", false)]
            }
        );
        // Cluster-scoped CRs are skipped unless all namespaces.
        let mut w = World::new();
        w.crds = vec![crd(true)];
        w.crs = vec![cr(None, "c", false)];
        assert_eq!(w.plan().decision, Decision::Done);
        w.ogs[0].spec.target_namespaces = None;
        assert_eq!(w.plan().decision.pending(), &[cr(None, "c", false)][..]);
        // CRs of required (not owned) CRDs are never touched.
        let mut w = World::new();
        w.csv.spec.customresourcedefinitions.required =
            w.csv.spec.customresourcedefinitions.owned.clone();
        w.csv.spec.customresourcedefinitions.owned.clear();
        assert_eq!(w.plan().decision, Decision::Done);
        // A CRD that no longer exists has nothing to delete.
        let mut w = World::new();
        w.crds.clear();
        assert_eq!(w.plan().decision, Decision::Done);
    }

    #[test]
    fn rule8_wait_while_crs_are_finalizing_and_rule9_done() {
        let mut w = World::new();
        w.crs = vec![cr(Some("a"), "x", true), cr(Some("a"), "z", false)];
        assert_eq!(
            w.plan().decision,
            Decision::DeleteCrs {
                delete: vec![cr(Some("a"), "z", false)],
                pending: vec![cr(Some("a"), "x", true), cr(Some("a"), "z", false)]
            }
        );
        w.crs = vec![cr(Some("a"), "x", true)];
        assert_eq!(
            w.plan().decision,
            Decision::WaitForCrs {
                pending: vec![cr(Some("a"), "x", true)]
            }
        );
        w.crs.clear();
        assert_eq!(w.plan().decision, Decision::Done);
    }

    #[test]
    fn pending_deletion_is_bounded_and_grouped() {
        let crs: Vec<CrRef> = (0..250)
            .map(|i| cr(Some("a"), &format!("x{i:03}"), true))
            .collect();
        let (lists, unlisted) = pending_deletion(&crs, &[crd(false)]);
        assert_eq!(lists.len(), 1);
        assert_eq!(lists[0].group, "example.com");
        assert_eq!(lists[0].kind, "Widget");
        assert_eq!(lists[0].instances.len(), MAX_PENDING_INSTANCES);
        assert_eq!(unlisted, 150);
        assert_eq!(
            waiting_message(250, 150),
            "waiting for operator to finish cleanup for 250 CRs (150 not listed in status.cleanup.pendingDeletion)"
        );
    }

    #[test]
    fn status_is_written_only_on_change_and_conditions_are_capped() {
        let (lists, _) = pending_deletion(&[cr(Some("a"), "x", true)], &[crd(false)]);
        let msg = waiting_message(1, 0);
        let mut status = CsvStatus {
            phase: phase::SUCCEEDED.into(),
            conditions: (0..25)
                .map(|i| CsvCondition {
                    phase: "Installing".into(),
                    reason: format!("r{i}"),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        };
        let (cleanup, conds) = desired_status(
            Some(&status),
            Some(lists.clone()),
            REASON_WAITING,
            &msg,
            "t1",
        )
        .unwrap();
        assert_eq!(conds.len(), MAX_CONDITIONS);
        assert_eq!(conds.last().unwrap().reason, REASON_WAITING);
        assert_eq!(conds.first().unwrap().reason, "r6");
        status.cleanup = Some(crate::olm::types::CleanupStatus {
            pending_deletion: cleanup.unwrap(),
        });
        status.conditions = conds;
        assert_eq!(
            desired_status(
                Some(&status),
                Some(lists.clone()),
                REASON_WAITING,
                &msg,
                "t2"
            ),
            None
        );
        // A new count updates the last condition in place.
        let (_, conds) = desired_status(
            Some(&status),
            Some(vec![]),
            REASON_WAITING,
            &waiting_message(0, 0),
            "t3",
        )
        .unwrap();
        assert_eq!(conds.len(), MAX_CONDITIONS);
        assert_eq!(
            conds.last().unwrap().last_transition_time.as_deref(),
            Some("t1")
        );
        assert_eq!(
            conds.last().unwrap().last_update_time.as_deref(),
            Some("t3")
        );
    }

    #[test]
    fn finalizer_patch_tests_the_list_first() {
        let meta = ObjectMeta {
            finalizers: Some(vec!["a".into(), FINALIZER.into()]),
            ..Default::default()
        };
        let p = finalizer_removal_patch(&meta).unwrap();
        assert_eq!(
            p,
            json!([
                {"op": "test", "path": "/metadata/finalizers", "value": ["a", FINALIZER]},
                {"op": "remove", "path": "/metadata/finalizers/1"}
            ])
        );
        assert_eq!(finalizer_removal_patch(&ObjectMeta::default()), None);
        let meta = ObjectMeta {
            finalizers: Some(vec![FINALIZER.into()]),
            resource_version: Some("42".into()),
            ..Default::default()
        };
        assert_eq!(
            finalizer_removal_patch(&meta).unwrap(),
            json!([
                {"op": "test", "path": "/metadata/finalizers", "value": [FINALIZER]},
                {"op": "test", "path": "/metadata/resourceVersion", "value": "42"},
                {"op": "remove", "path": "/metadata/finalizers/0"}
            ])
        );
    }

    #[test]
    fn hazards_are_reported() {
        let mut w = World::new();
        w.subs.push(Subscription {
            metadata: ObjectMeta {
                name: Some("sub".into()),
                ..Default::default()
            },
            status: Some(SubscriptionStatus {
                installed_csv: Some("w.v1".into()),
                ..Default::default()
            }),
            ..Default::default()
        });
        assert_eq!(w.plan().warnings.len(), 1);
    }
}
