//! The uninstall plan, as pure functions of an [`Inventory`]: every object the uninstall would
//! delete or keep, and why, and the safety rules that refuse the whole uninstall.
//!
//! Each step has its own function so the executor can decide a later step again on a fresh
//! inventory (after the operands, the Subscription and the CSV are gone) with the same rules
//! the plan showed.
//!
//! Rules:
//! - more than one Subscription for the package in the namespace → refused (ambiguous);
//! - a CSV that opted in to OLM operand cleanup deletes its operands when it is deleted: without
//!   `--delete-operands` → refused;
//! - `--delete-operands`: exactly one OperatorGroup must give the target namespaces, and no
//!   other (non-copied) CSV may own or require one of the owned CRDs → else refused (the same
//!   rules as the operand-cleanup reconciler, [`crate::olm::plan`]);
//! - a CRD is deleted only with `--delete-crds`, when no other CSV owns or requires it and no
//!   custom resource of it remains anywhere; an APIService likewise, when the objects it serves
//!   can be listed and none remain;
//! - the `Operator` object is deleted once nothing else carries its label (with
//!   `--remove-labels`, the label is removed from what still does); when that cannot be told
//!   (a kind could not be listed), it is kept;
//! - the OperatorGroup is deleted only with `--delete-operator-group`, when it is the only one
//!   and no other Subscription or CSV remains in the namespace.

use std::collections::BTreeSet;

use kube::api::ApiResource;
use serde::Serialize;

use super::{Inventory, Options};
use crate::lifecycle::scan::Found;
use crate::olm::plan::{self as olm_plan, CrRef, Targets};
use crate::olm::types::{ClusterServiceVersion, OperatorGroup, Subscription};

/// The steps, in the order they run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Step {
    Operands,
    Subscription,
    Csv,
    Crds,
    Operator,
    OperatorGroup,
}

impl Step {
    pub fn as_str(self) -> &'static str {
        match self {
            Step::Operands => "operands",
            Step::Subscription => "subscription",
            Step::Csv => "csv",
            Step::Crds => "crds",
            Step::Operator => "operator",
            Step::OperatorGroup => "operator-group",
        }
    }
}

/// What happens to one object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Action {
    Delete,
    Keep,
    /// Remove the `operators.coreos.com/<operator>` label, keep the object.
    RemoveLabel,
}

impl Action {
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Delete => "delete",
            Action::Keep => "keep",
            Action::RemoveLabel => "remove-label",
        }
    }
}

/// One object of the plan.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Item {
    pub step: Step,
    pub action: Action,
    pub api_version: String,
    pub kind: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub name: String,
    pub reason: String,
    #[serde(skip)]
    pub uid: Option<String>,
    #[serde(skip)]
    pub resource: ApiResource,
}

impl Item {
    /// `Kind ns/name` or `Kind name`.
    pub fn describe(&self) -> String {
        crate::lifecycle::gone::describe(&self.kind, self.namespace.as_deref(), &self.name)
    }
}

/// The plan: what would be deleted and kept, the safety rules that refuse it, and notes.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    pub package: String,
    pub namespace: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subscription: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub csv: Option<String>,
    /// The CSV opted in to OLM operand cleanup: its operands are deleted by that reconciler
    /// when the CSV is deleted, and the uninstall waits for it.
    pub olm_operand_cleanup: bool,
    pub items: Vec<Item>,
    /// Safety rules that refuse the uninstall (nothing is deleted).
    pub refusals: Vec<String>,
    pub notes: Vec<String>,
}

impl Plan {
    /// Items of one step.
    pub fn step(&self, step: Step) -> impl Iterator<Item = &Item> {
        self.items.iter().filter(move |i| i.step == step)
    }
}

fn resource(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: group.to_string(),
        version: version.to_string(),
        api_version: if group.is_empty() {
            version.to_string()
        } else {
            format!("{group}/{version}")
        },
        kind: kind.to_string(),
        plural: plural.to_string(),
    }
}

/// The APIService kind.
pub fn apiservice_resource() -> ApiResource {
    resource("apiregistration.k8s.io", "v1", "APIService", "apiservices")
}

/// The CustomResourceDefinition kind.
pub fn crd_resource() -> ApiResource {
    resource(
        "apiextensions.k8s.io",
        "v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
    )
}

/// The OLM `Operator` kind.
pub fn operator_resource() -> ApiResource {
    use crate::olm::crds::{OPERATOR_KIND, OPERATOR_PLURAL, OPERATOR_VERSION};
    resource(
        crate::olm::types::GROUP,
        OPERATOR_VERSION,
        OPERATOR_KIND,
        OPERATOR_PLURAL,
    )
}

fn typed_resource<K: kube::Resource<DynamicType = ()>>() -> ApiResource {
    ApiResource::erase::<K>(&())
}

fn item(
    step: Step,
    action: Action,
    resource: &ApiResource,
    namespace: Option<&str>,
    name: &str,
    uid: Option<String>,
    reason: impl Into<String>,
) -> Item {
    Item {
        step,
        action,
        api_version: resource.api_version.clone(),
        kind: resource.kind.clone(),
        namespace: namespace.map(str::to_owned),
        name: name.to_owned(),
        reason: reason.into(),
        uid,
        resource: resource.clone(),
    }
}

/// The label OLM puts on an operator's objects: `operators.coreos.com/<operator>`.
pub fn operator_label(operator_name: &str) -> String {
    format!("{}/{operator_name}", crate::olm::types::GROUP)
}

/// The whole plan for `inv`.
pub fn decide(inv: &Inventory, opts: &Options) -> Plan {
    let mut plan = Plan {
        package: opts.package.clone(),
        namespace: opts.namespace.clone(),
        subscription: inv
            .subscriptions
            .first()
            .and_then(|s| s.metadata.name.clone()),
        csv: inv.csv_name.clone(),
        olm_operand_cleanup: inv.csv.as_ref().is_some_and(olm_plan::opted_in),
        items: Vec::new(),
        refusals: Vec::new(),
        notes: Vec::new(),
    };
    if inv.subscriptions.len() > 1 {
        let names: Vec<String> = inv
            .subscriptions
            .iter()
            .filter_map(|s| s.metadata.name.clone())
            .collect();
        plan.refusals.push(format!(
            "{} Subscriptions for package {} in namespace {} ({}): which one to remove is ambiguous; delete the extra ones by hand first",
            names.len(),
            opts.package,
            opts.namespace,
            names.join(", ")
        ));
    }
    match (&inv.csv_name, &inv.csv) {
        (None, _) => plan.notes.push(
            "the Subscription has no status.installedCSV: OLM has installed no CSV for it, so only the Subscription is removed".to_owned(),
        ),
        (Some(name), None) => plan.notes.push(format!(
            "ClusterServiceVersion {}/{name} (the Subscription's installedCSV) does not exist",
            opts.namespace
        )),
        _ => {}
    }
    let operands = operand_items(inv, opts, &mut plan);
    plan.items.extend(operands);
    for sub in &inv.subscriptions {
        plan.items.push(item(
            Step::Subscription,
            Action::Delete,
            &typed_resource::<Subscription>(),
            Some(&opts.namespace),
            sub.metadata.name.as_deref().unwrap_or_default(),
            sub.metadata.uid.clone(),
            "first, so that OLM does not install the operator again",
        ));
    }
    if let Some(csv) = &inv.csv {
        let reason = if plan.olm_operand_cleanup && opts.delete_operands {
            "after the Subscription; OLM removes the operator's Deployment and RBAC with it, and the operand-cleanup reconciler deletes its operands first (the CSV opted in)"
        } else {
            "after the Subscription; OLM removes the operator's Deployment and RBAC with it"
        };
        plan.items.push(item(
            Step::Csv,
            Action::Delete,
            &typed_resource::<ClusterServiceVersion>(),
            Some(&opts.namespace),
            csv.metadata.name.as_deref().unwrap_or_default(),
            csv.metadata.uid.clone(),
            reason,
        ));
    }
    // CRs that remain after the operand step.
    let deleted: BTreeSet<&CrRef> = if opts.delete_operands && plan.refusals.is_empty() {
        operand_scope(inv).unwrap_or_default().into_iter().collect()
    } else {
        BTreeSet::new()
    };
    let remaining: Vec<&CrRef> = inv.crs.iter().filter(|c| !deleted.contains(c)).collect();
    plan.items.extend(crd_items(inv, opts, &remaining));
    plan.items.extend(apiservice_items(inv, opts));
    let mut going: BTreeSet<String> = plan
        .items
        .iter()
        .filter(|i| i.action == Action::Delete)
        .filter_map(|i| i.uid.clone())
        .collect();
    going.extend(deleted.iter().filter_map(|c| c.uid.clone()));
    let (items, notes) = operator_items(inv, opts, &going);
    plan.items.extend(items);
    plan.notes.extend(notes);
    plan.items.extend(operator_group_items(inv, opts));
    plan
}

/// The CRs in the OperatorGroup's target namespaces (`None`: no CSV, or the targets cannot be
/// told).
fn operand_scope(inv: &Inventory) -> Option<Vec<&CrRef>> {
    let csv = inv.csv.as_ref()?;
    let targets = olm_plan::targets(
        csv.metadata.namespace.as_deref().unwrap_or_default(),
        &inv.operator_groups,
        &inv.namespaces,
    )
    .ok()?;
    Some(olm_plan::in_scope(csv, &targets, &inv.crds, &inv.crs))
}

fn cr_item(inv: &Inventory, cr: &CrRef, action: Action, reason: String) -> Option<Item> {
    let crd = inv.crds.iter().find(|c| c.name == cr.crd)?;
    let ar = crate::olm::reconciler::api_resource(crd)?;
    Some(item(
        Step::Operands,
        action,
        &ar,
        cr.namespace.as_deref(),
        &cr.name,
        cr.uid.clone(),
        reason,
    ))
}

fn operand_items(inv: &Inventory, opts: &Options, plan: &mut Plan) -> Vec<Item> {
    let mut items = Vec::new();
    let Some(csv) = &inv.csv else {
        if opts.delete_operands {
            plan.refusals.push(
                "--delete-operands: the installed CSV is unknown, so which custom resources are the operator's cannot be told".to_owned(),
            );
        }
        return items;
    };
    let opted_in = olm_plan::opted_in(csv);
    if opted_in && !opts.delete_operands {
        plan.refusals.push(format!(
            "ClusterServiceVersion {}/{} opted in to OLM operand cleanup (finalizer {} and spec.cleanup.enabled): deleting it deletes its custom resources; pass --delete-operands, or set spec.cleanup.enabled=false first to keep them",
            opts.namespace,
            csv.metadata.name.as_deref().unwrap_or_default(),
            olm_plan::FINALIZER
        ));
    }
    if !opts.delete_operands {
        for cr in &inv.crs {
            items.extend(cr_item(
                inv,
                cr,
                Action::Keep,
                "--delete-operands not given".to_owned(),
            ));
        }
        return items;
    }
    let csv_ns = csv.metadata.namespace.as_deref().unwrap_or_default();
    let targets = match olm_plan::targets(csv_ns, &inv.operator_groups, &inv.namespaces) {
        Ok(t) => t,
        Err(why) => {
            plan.refusals.push(format!(
                "--delete-operands: {why}; the custom resources to delete cannot be told"
            ));
            return items;
        }
    };
    let conflicts = olm_plan::crd_conflicts(csv, &inv.all_csvs);
    if !conflicts.is_empty() {
        let parts: Vec<String> = conflicts
            .iter()
            .map(|c| {
                format!(
                    "CRD {} is also {} by CSV {}",
                    c.crd,
                    if c.owns { "owned" } else { "required" },
                    c.csv
                )
            })
            .collect();
        plan.refusals.push(format!(
            "--delete-operands: {}; deleting its custom resources could destroy another operator's data (run without --delete-operands)",
            parts.join("; ")
        ));
        return items;
    }
    if csv.phase() != crate::olm::types::phase::SUCCEEDED {
        plan.notes.push(format!(
            "the CSV's phase is {:?}, not Succeeded: the operator may not be running to clear its custom resources' finalizers{}",
            csv.phase(),
            if opted_in {
                ", and OLM operand cleanup deletes nothing for such a CSV"
            } else {
                ""
            }
        ));
    }
    let where_ = match &targets {
        Targets::AllNamespaces => "the OperatorGroup targets all namespaces".to_owned(),
        Targets::Namespaces(_) => "in a target namespace of the OperatorGroup".to_owned(),
    };
    let scope: BTreeSet<&CrRef> = olm_plan::in_scope(csv, &targets, &inv.crds, &inv.crs)
        .into_iter()
        .collect();
    for cr in &inv.crs {
        let (action, reason) = if !scope.contains(cr) {
            (
                Action::Keep,
                "outside the OperatorGroup's target namespaces".to_owned(),
            )
        } else if opted_in {
            (
                Action::Delete,
                format!(
                    "{where_}; by the operand-cleanup reconciler when the CSV is deleted (the CSV opted in)"
                ),
            )
        } else {
            (
                Action::Delete,
                format!(
                    "{where_}; deleted while the operator still runs, so its finalizers can clean up"
                ),
            )
        };
        items.extend(cr_item(inv, cr, action, reason));
    }
    items
}

fn other_csv_uses(
    inv: &Inventory,
    matches: impl Fn(&ClusterServiceVersion) -> Option<bool>,
) -> Vec<String> {
    let me = inv
        .csv
        .as_ref()
        .map(|c| (c.metadata.namespace.clone(), c.metadata.name.clone()));
    let mut out = Vec::new();
    for other in &inv.all_csvs {
        if Some((
            other.metadata.namespace.clone(),
            other.metadata.name.clone(),
        )) == me
            || olm_plan::is_copied(other)
        {
            continue;
        }
        if let Some(owns) = matches(other) {
            out.push(format!(
                "{} by CSV {}/{}",
                if owns { "also owned" } else { "required" },
                other.metadata.namespace.as_deref().unwrap_or_default(),
                other.metadata.name.as_deref().unwrap_or_default()
            ));
        }
    }
    out.sort();
    out.dedup();
    out
}

/// Step 4, CRDs: each owned CRD deleted or kept, given the CRs that remain.
pub fn crd_items(inv: &Inventory, opts: &Options, remaining: &[&CrRef]) -> Vec<Item> {
    let mut items = Vec::new();
    let Some(csv) = &inv.csv else {
        return items;
    };
    let crd_ar = crd_resource();
    for desc in &csv.spec.customresourcedefinitions.owned {
        let Some(crd) = inv.crds.iter().find(|c| c.name == desc.name) else {
            continue;
        };
        let users = other_csv_uses(inv, |other| {
            let defs = &other.spec.customresourcedefinitions;
            if defs.owned.iter().any(|d| d.name == crd.name) {
                Some(true)
            } else if defs.required.iter().any(|d| d.name == crd.name) {
                Some(false)
            } else {
                None
            }
        });
        let left: Vec<&&CrRef> = remaining.iter().filter(|c| c.crd == crd.name).collect();
        let uid = inv.crd_uids.get(&crd.name).cloned();
        let (action, reason) = if !opts.delete_crds {
            (Action::Keep, "--delete-crds not given".to_owned())
        } else if !users.is_empty() {
            (Action::Keep, users.join("; "))
        } else if !left.is_empty() {
            let names: Vec<String> = left
                .iter()
                .take(5)
                .map(|c| match &c.namespace {
                    Some(ns) => format!("{ns}/{}", c.name),
                    None => c.name.clone(),
                })
                .collect();
            (
                Action::Keep,
                format!(
                    "{} custom resource(s) of it remain ({}{})",
                    left.len(),
                    names.join(", "),
                    if left.len() > 5 { ", …" } else { "" }
                ),
            )
        } else {
            (
                Action::Delete,
                "no custom resource of it remains and no other CSV owns or requires it".to_owned(),
            )
        };
        items.push(item(
            Step::Crds,
            action,
            &crd_ar,
            None,
            &crd.name,
            uid,
            reason,
        ));
    }
    items
}

/// Step 4, APIServices: each owned APIService deleted or kept.
pub fn apiservice_items(inv: &Inventory, opts: &Options) -> Vec<Item> {
    let ar = apiservice_resource();
    let mut items = Vec::new();
    for svc in &inv.apiservices {
        if svc.uid.is_none() {
            continue; // absent
        }
        let users = other_csv_uses(inv, |other| {
            let named =
                |d: &crate::olm::types::ApiServiceDescription| d.apiservice_name() == svc.name;
            if other.spec.owned_apiservices().iter().any(named) {
                Some(true)
            } else if other.spec.required_apiservices().iter().any(named) {
                Some(false)
            } else {
                None
            }
        });
        let (action, reason) = if !opts.delete_crds {
            (Action::Keep, "--delete-crds not given".to_owned())
        } else if !users.is_empty() {
            (Action::Keep, users.join("; "))
        } else {
            match &svc.objects {
                Ok(0) => (
                    Action::Delete,
                    format!(
                        "no {} remains and no other CSV owns or requires it",
                        svc.kind
                    ),
                ),
                Ok(n) => (Action::Keep, format!("{n} {} object(s) remain", svc.kind)),
                Err(e) => (
                    Action::Keep,
                    format!("cannot tell whether {} objects remain: {e}", svc.kind),
                ),
            }
        };
        items.push(item(
            Step::Crds,
            action,
            &ar,
            None,
            &svc.name,
            svc.uid.clone(),
            reason,
        ));
    }
    items
}

/// Step 5: the `Operator` object and the objects that carry its label. `going`: UIDs of the
/// objects the plan deletes before this step. Returns the items and notes.
pub fn operator_items(
    inv: &Inventory,
    opts: &Options,
    going: &BTreeSet<String>,
) -> (Vec<Item>, Vec<String>) {
    let mut items = Vec::new();
    let mut notes = Vec::new();
    let Some(op) = &inv.operator else {
        notes.push(format!(
            "no Operator object ({}.{} or {}): nothing to remove in that step",
            opts.package, opts.namespace, opts.package
        ));
        return (items, notes);
    };
    let ar = operator_resource();
    let label = operator_label(&op.name);
    // An item about the Operator object itself.
    let operator = |action: Action, reason: String| {
        item(
            Step::Operator,
            action,
            &ar,
            None,
            &op.name,
            op.uid.clone(),
            reason,
        )
    };
    let scan = match &inv.label_carriers {
        Ok(scan) => scan,
        Err(e) => {
            items.push(operator(
                Action::Keep,
                format!("cannot tell which objects carry the label {label}: {e}"),
            ));
            return (items, notes);
        }
    };
    let csv_uid = inv.csv.as_ref().and_then(|c| c.metadata.uid.clone());
    let going_away = |f: &Found| {
        f.deleting
            || f.uid.as_ref().is_some_and(|u| going.contains(u))
            || csv_uid.as_ref().is_some_and(|u| f.owners.contains(u))
    };
    let carriers: Vec<&Found> = scan
        .found
        .iter()
        .filter(|f| f.uid != op.uid && !going_away(f))
        .collect();
    let leaving = scan
        .found
        .iter()
        .filter(|f| f.uid != op.uid && going_away(f))
        .count();
    if leaving > 0 {
        notes.push(format!(
            "{leaving} object(s) carrying {label} are deleted by the steps before (or with the CSV, by garbage collection): the Operator step waits for them"
        ));
    }
    if !scan.unlisted.is_empty() {
        items.push(operator(
            Action::Keep,
            format!(
                "cannot tell whether anything still carries the label {label}: could not list {}",
                scan.unlisted.join("; ")
            ),
        ));
        return (items, notes);
    }
    if carriers.is_empty() {
        items.push(operator(
            Action::Delete,
            format!("nothing else carries the label {label}"),
        ));
    } else if opts.remove_labels {
        for f in &carriers {
            items.push(item(
                Step::Operator,
                Action::RemoveLabel,
                &f.resource.api_resource(),
                f.namespace.as_deref(),
                &f.name,
                f.uid.clone(),
                format!("--remove-labels: the label {label} is removed, the object kept"),
            ));
        }
        items.push(operator(
            Action::Delete,
            format!("the label {label} is removed from what remains (--remove-labels)"),
        ));
    } else {
        let names: Vec<String> = carriers.iter().take(10).map(|f| f.describe()).collect();
        let more = if carriers.len() > 10 { ", …" } else { "" };
        items.push(operator(
            Action::Keep,
            format!(
                "{} object(s) still carry the label {label} ({}{more}): OLM would create the Operator again; pass --remove-labels to remove the label from them",
                carriers.len(),
                names.join(", "),
            ),
        ));
    }
    (items, notes)
}

/// Step 6: the OperatorGroup(s) of the namespace.
pub fn operator_group_items(inv: &Inventory, opts: &Options) -> Vec<Item> {
    let ar = typed_resource::<OperatorGroup>();
    let ours_sub: BTreeSet<Option<&str>> = inv
        .subscriptions
        .iter()
        .map(|s| s.metadata.uid.as_deref())
        .collect();
    let mut others: Vec<String> = inv
        .namespace_subscriptions
        .iter()
        .filter(|s| !ours_sub.contains(&s.metadata.uid.as_deref()))
        .map(|s| {
            format!(
                "Subscription {}",
                s.metadata.name.as_deref().unwrap_or_default()
            )
        })
        .collect();
    others.extend(
        inv.all_csvs
            .iter()
            .filter(|c| c.metadata.namespace.as_deref() == Some(opts.namespace.as_str()))
            .filter(|c| inv.csv_name.is_none() || c.metadata.name != inv.csv_name)
            .filter(|c| !olm_plan::is_copied(c))
            .map(|c| {
                format!(
                    "ClusterServiceVersion {}",
                    c.metadata.name.as_deref().unwrap_or_default()
                )
            }),
    );
    let mut items = Vec::new();
    let n = inv.operator_groups.len();
    for og in &inv.operator_groups {
        let (action, reason) = if !opts.delete_operator_group {
            (Action::Keep, "--delete-operator-group not given".to_owned())
        } else if !others.is_empty() {
            (
                Action::Keep,
                format!("still used in the namespace by {}", others.join(", ")),
            )
        } else if n > 1 {
            (
                Action::Keep,
                format!("{n} OperatorGroups in the namespace: which one to remove is ambiguous"),
            )
        } else {
            (
                Action::Delete,
                "no other Subscription or CSV remains in the namespace".to_owned(),
            )
        };
        items.push(item(
            Step::OperatorGroup,
            action,
            &ar,
            Some(&opts.namespace),
            og.metadata.name.as_deref().unwrap_or_default(),
            og.metadata.uid.clone(),
            reason,
        ));
    }
    items
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lifecycle::scan::Scan;
    use crate::lifecycle::uninstall::OperatorRef;
    use crate::olm::plan::CrdInfo;
    use crate::olm::types::{CleanupSpec, CrdDescription, CsvSpec, OperatorGroupSpec};
    use serde_json::json;

    fn sub(name: &str, package: &str) -> Subscription {
        serde_json::from_value(
            json!({"metadata": {"name": name, "namespace": "ops", "uid": name},
            "spec": {"name": package}, "status": {"installedCSV": "op.v1"}}),
        )
        .unwrap()
    }

    fn csv(ns: &str, name: &str, owned: &[&str], required: &[&str]) -> ClusterServiceVersion {
        let mut spec = CsvSpec::default();
        for o in owned {
            spec.customresourcedefinitions
                .owned
                .push(CrdDescription::new(o, "v1", "Widget"));
        }
        for r in required {
            spec.customresourcedefinitions
                .required
                .push(CrdDescription::new(r, "v1", "Widget"));
        }
        let mut c = ClusterServiceVersion::new(ns, name, spec);
        c.metadata.uid = Some(format!("{ns}/{name}"));
        c
    }

    fn crd(name: &str) -> CrdInfo {
        CrdInfo {
            name: name.into(),
            group: "example.com".into(),
            plural: "widgets".into(),
            kind: "Widget".into(),
            served_version: Some("v1".into()),
            cluster_scoped: false,
        }
    }

    fn cr(ns: &str, name: &str) -> CrRef {
        CrRef {
            crd: "widgets.example.com".into(),
            namespace: Some(ns.into()),
            name: name.into(),
            uid: Some(format!("{ns}/{name}")),
            deleting: false,
        }
    }

    /// Operator `op` in `ops`, targeting `t1`, owning widgets.example.com, one CR in `t1` and
    /// one in `t2`.
    fn inventory() -> Inventory {
        let ours = csv("ops", "op.v1", &["widgets.example.com"], &[]);
        Inventory {
            subscriptions: vec![sub("op", "op")],
            namespace_subscriptions: vec![sub("op", "op")],
            csv_name: Some("op.v1".into()),
            csv: Some(ours.clone()),
            all_csvs: vec![ours],
            operator_groups: vec![OperatorGroup::new(
                "ops",
                "og",
                OperatorGroupSpec {
                    target_namespaces: Some(vec!["t1".into()]),
                    ..Default::default()
                },
            )],
            crds: vec![crd("widgets.example.com")],
            crs: vec![cr("t1", "a"), cr("t2", "b")],
            operator: Some(OperatorRef {
                name: "op.ops".into(),
                uid: Some("operator".into()),
            }),
            label_carriers: Ok(Scan::default()),
            ..Inventory::default()
        }
    }

    fn opts() -> Options {
        Options::new("op", "ops")
    }

    fn find<'a>(plan: &'a Plan, kind: &str, name: &str) -> &'a Item {
        plan.items
            .iter()
            .find(|i| i.kind == kind && i.name == name)
            .unwrap_or_else(|| panic!("no {kind} {name} in {:#?}", plan.items))
    }

    #[test]
    fn defaults_delete_the_subscription_and_csv_and_keep_the_rest() {
        let plan = decide(&inventory(), &opts());
        assert!(plan.refusals.is_empty(), "{:?}", plan.refusals);
        assert_eq!(find(&plan, "Subscription", "op").action, Action::Delete);
        assert_eq!(
            find(&plan, "ClusterServiceVersion", "op.v1").action,
            Action::Delete
        );
        let crd = find(&plan, "CustomResourceDefinition", "widgets.example.com");
        assert_eq!(
            (crd.action, crd.reason.as_str()),
            (Action::Keep, "--delete-crds not given")
        );
        assert_eq!(find(&plan, "Widget", "a").action, Action::Keep);
        assert_eq!(find(&plan, "OperatorGroup", "og").action, Action::Keep);
        assert_eq!(find(&plan, "Operator", "op.ops").action, Action::Delete);
        // The steps come in their order.
        let steps: Vec<Step> = plan.items.iter().map(|i| i.step).collect();
        let mut sorted = steps.clone();
        sorted.sort();
        assert_eq!(steps, sorted);
    }

    #[test]
    fn operands_only_in_targets_and_the_crd_kept_while_others_remain() {
        let o = Options {
            delete_operands: true,
            delete_crds: true,
            ..opts()
        };
        let plan = decide(&inventory(), &o);
        assert!(plan.refusals.is_empty(), "{:?}", plan.refusals);
        assert_eq!(find(&plan, "Widget", "a").action, Action::Delete);
        let b = find(&plan, "Widget", "b");
        assert_eq!(b.action, Action::Keep);
        assert!(b.reason.contains("outside"), "{}", b.reason);
        let crd = find(&plan, "CustomResourceDefinition", "widgets.example.com");
        assert_eq!(crd.action, Action::Keep);
        assert!(crd.reason.contains("t2/b"), "{}", crd.reason);
    }

    #[test]
    fn a_crd_another_csv_requires_refuses_operands_and_is_kept() {
        let mut inv = inventory();
        inv.all_csvs
            .push(csv("elsewhere", "other.v1", &[], &["widgets.example.com"]));
        inv.crs.clear();
        let with_operands = Options {
            delete_operands: true,
            delete_crds: true,
            ..opts()
        };
        let plan = decide(&inv, &with_operands);
        assert!(
            plan.refusals
                .iter()
                .any(|r| r.contains("required by CSV elsewhere/other.v1")),
            "{:?}",
            plan.refusals
        );
        let crds_only = Options {
            delete_crds: true,
            ..opts()
        };
        let plan = decide(&inv, &crds_only);
        assert!(plan.refusals.is_empty());
        let crd = find(&plan, "CustomResourceDefinition", "widgets.example.com");
        assert_eq!(crd.action, Action::Keep);
        assert_eq!(crd.reason, "required by CSV elsewhere/other.v1");
        // A copied CSV does not count.
        let mut copied = csv("t1", "op.v1", &["widgets.example.com"], &[]);
        copied.metadata.labels = Some([("olm.copiedFrom".to_owned(), "ops".to_owned())].into());
        inv.all_csvs.pop();
        inv.all_csvs.push(copied);
        let plan = decide(&inv, &crds_only);
        let crd = find(&plan, "CustomResourceDefinition", "widgets.example.com");
        assert_eq!(crd.action, Action::Delete, "{}", crd.reason);
    }

    #[test]
    fn refusals() {
        let mut two = inventory();
        two.subscriptions.push(sub("op-2", "op"));
        assert!(decide(&two, &opts()).refusals[0].contains("2 Subscriptions"));

        let mut opted = inventory();
        let c = opted.csv.as_mut().unwrap();
        c.metadata.finalizers = Some(vec![olm_plan::FINALIZER.into()]);
        c.spec.cleanup = Some(CleanupSpec { enabled: true });
        assert!(decide(&opted, &opts()).refusals[0].contains("opted in"));
        let with = Options {
            delete_operands: true,
            ..opts()
        };
        let plan = decide(&opted, &with);
        assert!(plan.refusals.is_empty() && plan.olm_operand_cleanup);

        let mut no_og = inventory();
        no_og.operator_groups.clear();
        assert!(decide(&no_og, &with).refusals[0].contains("no OperatorGroup"));
    }

    #[test]
    fn the_operator_object_waits_for_labels_and_fails_closed() {
        let mut inv = inventory();
        let carrier = Found {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            namespace: Some("ops".into()),
            name: "settings".into(),
            uid: Some("cm".into()),
            owners: vec![],
            deleting: false,
            resource: crate::lifecycle::scan::ApiResourceKey {
                version: "v1".into(),
                kind: "ConfigMap".into(),
                plural: "configmaps".into(),
                namespaced: true,
                ..Default::default()
            },
        };
        let csv_owned = Found {
            name: "deployment".into(),
            uid: Some("dep".into()),
            owners: vec!["ops/op.v1".into()],
            ..carrier.clone()
        };
        inv.label_carriers = Ok(Scan {
            found: vec![carrier.clone(), csv_owned],
            unlisted: vec![],
        });
        let plan = decide(&inv, &opts());
        let op = find(&plan, "Operator", "op.ops");
        assert_eq!(op.action, Action::Keep);
        assert!(
            op.reason.contains("ConfigMap ops/settings"),
            "{}",
            op.reason
        );
        assert!(
            !op.reason.contains("deployment"),
            "garbage-collected with the CSV"
        );
        let plan = decide(
            &inv,
            &Options {
                remove_labels: true,
                ..opts()
            },
        );
        assert_eq!(
            find(&plan, "ConfigMap", "settings").action,
            Action::RemoveLabel
        );
        assert_eq!(find(&plan, "Operator", "op.ops").action, Action::Delete);
        inv.label_carriers = Ok(Scan {
            found: vec![],
            unlisted: vec!["Secret (v1): 403 Forbidden".into()],
        });
        let op_plan = decide(&inv, &opts());
        let op = find(&op_plan, "Operator", "op.ops");
        assert_eq!(op.action, Action::Keep, "cannot tell: kept");
        assert!(op.reason.contains("cannot tell"), "{}", op.reason);
    }

    #[test]
    fn the_operator_group_goes_only_when_nothing_else_uses_it() {
        let o = Options {
            delete_operator_group: true,
            ..opts()
        };
        assert_eq!(
            find(&decide(&inventory(), &o), "OperatorGroup", "og").action,
            Action::Delete
        );
        let mut inv = inventory();
        inv.namespace_subscriptions
            .push(sub("other", "other-package"));
        let og = decide(&inv, &o);
        let og = find(&og, "OperatorGroup", "og");
        assert_eq!(og.action, Action::Keep);
        assert!(og.reason.contains("Subscription other"), "{}", og.reason);
    }
}
