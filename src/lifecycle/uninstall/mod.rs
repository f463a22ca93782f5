//! `cvo uninstall`: remove an OLM-installed operator safely, in the order of OLM's guide.
//!
//! 1. operands (`--delete-operands`): the custom resources of the CSV's owned CRDs in the
//!    OperatorGroup's target namespaces are deleted while the operator still runs, and waited
//!    for (a watch, up to `--timeout`); a CSV that opted in to OLM operand cleanup is left to
//!    that reconciler instead, and the CSV's deletion is waited for;
//! 2. the Subscription (first: otherwise OLM installs the operator again);
//! 3. the ClusterServiceVersion, waited for until it is gone;
//! 4. owned CRDs and APIServices (`--delete-crds`), each only when safe;
//! 5. the `Operator` object, once nothing else carries its label (`--remove-labels`);
//! 6. the OperatorGroup (`--delete-operator-group`), once nothing else uses it.
//!
//! [`plan()`] reads the cluster ([`gather`]) and returns the [`Plan`] (every object deleted or
//! kept, and why — [`plan`] holds the rules); [`execute`] carries a plan out, deciding steps
//! 4–6 again on a fresh read of the cluster. A wait that times out stops the uninstall: what
//! remains is reported with its finalizers, and nothing after that step is deleted.

pub mod plan;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, Preconditions,
};
use kube::{Client, ResourceExt};
use serde::Serialize;
use serde_json::json;

pub use plan::{Action, Item, Plan, Step};

use super::gone::{self, Remaining, Tracked};
use super::scan::{self, Scan};
use crate::cluster::list;
use crate::cluster::retry::{RequestError, RetryPolicy};
use crate::olm::plan::{CrRef, CrdInfo, NamespaceInfo};
use crate::olm::reconciler::{api_resource, crd_info};
use crate::olm::types::{ClusterServiceVersion, OperatorGroup, Subscription};

/// What to uninstall and how far to go.
#[derive(Clone, Debug)]
pub struct Options {
    pub package: String,
    pub namespace: String,
    pub delete_operands: bool,
    pub delete_crds: bool,
    pub remove_labels: bool,
    pub delete_operator_group: bool,
    /// How long each wait may take (operands, the CSV, garbage-collected label carriers).
    pub timeout: Duration,
    pub retry: RetryPolicy,
}

impl Options {
    /// Defaults: nothing optional, a 10 minute timeout.
    pub fn new(package: &str, namespace: &str) -> Self {
        Options {
            package: package.to_owned(),
            namespace: namespace.to_owned(),
            delete_operands: false,
            delete_crds: false,
            remove_labels: false,
            delete_operator_group: false,
            timeout: Duration::from_secs(600),
            retry: RetryPolicy::default(),
        }
    }
}

/// Why the cluster could not be read (or a step could not be carried out).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{what}: {source}")]
    Request {
        what: String,
        #[source]
        source: RequestError,
    },
    #[error(
        "the {kind} kind (operators.coreos.com) is not served by this cluster: is OLM installed?"
    )]
    NotServed { kind: String },
    #[error(
        "no Subscription for package {package} in namespace {namespace} (kubectl get subscriptions.operators.coreos.com -n {namespace} lists them)"
    )]
    NoSubscription { package: String, namespace: String },
}

/// What could not be read while gathering. Kept in the [`Inventory`] rather than returned,
/// so that the plan keeps (never deletes) what depends on it.
#[derive(Clone, Debug, thiserror::Error)]
pub enum Unknown {
    #[error("listing {kind} ({api_version}): {source}")]
    Objects {
        kind: String,
        api_version: String,
        #[source]
        source: Arc<RequestError>,
    },
    #[error("discovering the served kinds: {0}")]
    Discovery(#[source] Arc<RequestError>),
}

fn request(what: impl Into<String>) -> impl FnOnce(RequestError) -> Error {
    let what = what.into();
    move |source| Error::Request { what, source }
}

/// An owned APIService and whether objects it serves remain.
#[derive(Clone, Debug)]
pub struct ApiServiceState {
    /// `<version>.<group>`.
    pub name: String,
    pub kind: String,
    /// `None`: the APIService does not exist.
    pub uid: Option<String>,
    /// How many objects of its kind exist, or why that cannot be told.
    pub objects: Result<usize, Unknown>,
}

/// The `Operator` object of the package.
#[derive(Clone, Debug)]
pub struct OperatorRef {
    pub name: String,
    pub uid: Option<String>,
}

/// Everything the plan depends on, read from the cluster.
#[derive(Clone, Debug)]
pub struct Inventory {
    /// Subscriptions for the package in the namespace.
    pub subscriptions: Vec<Subscription>,
    /// Every Subscription in the namespace.
    pub namespace_subscriptions: Vec<Subscription>,
    /// The installed CSV's name (the Subscription's `status.installedCSV`).
    pub csv_name: Option<String>,
    /// The installed CSV (as read now, or as read when the plan was made once it is gone).
    pub csv: Option<ClusterServiceVersion>,
    pub all_csvs: Vec<ClusterServiceVersion>,
    /// OperatorGroups of the namespace.
    pub operator_groups: Vec<OperatorGroup>,
    pub namespaces: Vec<NamespaceInfo>,
    /// The CSV's owned CRDs that exist, and their UIDs by name.
    pub crds: Vec<CrdInfo>,
    pub crd_uids: BTreeMap<String, String>,
    /// Every custom resource of those CRDs, in any namespace.
    pub crs: Vec<CrRef>,
    pub apiservices: Vec<ApiServiceState>,
    pub operator: Option<OperatorRef>,
    /// Objects carrying the Operator's label (when there is an Operator).
    pub label_carriers: Result<Scan, Unknown>,
}

impl Default for Inventory {
    fn default() -> Self {
        Inventory {
            subscriptions: Vec::new(),
            namespace_subscriptions: Vec::new(),
            csv_name: None,
            csv: None,
            all_csvs: Vec::new(),
            operator_groups: Vec::new(),
            namespaces: Vec::new(),
            crds: Vec::new(),
            crd_uids: BTreeMap::new(),
            crs: Vec::new(),
            apiservices: Vec::new(),
            operator: None,
            label_carriers: Ok(Scan::default()),
        }
    }
}

fn not_found(e: &RequestError) -> bool {
    e.code() == Some(404)
}

/// Reads what the plan needs. `known`: the CSV and its name as read when the plan was made
/// (used once the Subscription or the CSV is gone).
///
/// # Errors
///
/// [`Error::NotServed`] when the cluster does not serve OLM's Subscription or
/// ClusterServiceVersion kind, [`Error::Request`] (naming what was being read) when a request
/// still fails after the retries of [`Options::retry`]. What cannot be read about an owned
/// APIService's objects or the Operator's label carriers is no error: it is kept as
/// [`Unknown`] in the inventory, and the plan keeps what depends on it.
pub async fn gather(
    client: &Client,
    opts: &Options,
    known: Option<(&Option<String>, &Option<ClusterServiceVersion>)>,
) -> Result<Inventory, Error> {
    let retry = &opts.retry;
    let ns = opts.namespace.as_str();
    let lp = ListParams::default();
    let subs_api: Api<Subscription> = Api::namespaced(client.clone(), ns);
    let namespace_subscriptions = match list::all(&subs_api, &lp, retry).await {
        Ok(s) => s,
        Err(e) if not_found(&e) => {
            return Err(Error::NotServed {
                kind: "Subscription".into(),
            });
        }
        Err(e) => {
            return Err(request(format!("listing Subscriptions in namespace {ns}"))(
                e,
            ));
        }
    };
    let subscriptions: Vec<Subscription> = namespace_subscriptions
        .iter()
        .filter(|s| s.spec.name == opts.package)
        .cloned()
        .collect();
    let csv_name = subscriptions
        .first()
        .and_then(|s| s.status.as_ref())
        .and_then(|s| s.installed_csv.clone())
        .or_else(|| known.and_then(|k| k.0.clone()));
    let csvs_api: Api<ClusterServiceVersion> = Api::all(client.clone());
    let all_csvs = match list::all(&csvs_api, &lp, retry).await {
        Ok(c) => c,
        Err(e) if not_found(&e) => {
            return Err(Error::NotServed {
                kind: "ClusterServiceVersion".into(),
            });
        }
        Err(e) => return Err(request("listing ClusterServiceVersions")(e)),
    };
    let csv = csv_name
        .as_ref()
        .and_then(|name| {
            all_csvs
                .iter()
                .find(|c| {
                    c.metadata.namespace.as_deref() == Some(ns)
                        && c.metadata.name.as_deref() == Some(name.as_str())
                })
                .cloned()
        })
        .or_else(|| known.and_then(|k| k.1.clone()));
    let og_api: Api<OperatorGroup> = Api::namespaced(client.clone(), ns);
    let operator_groups = match list::all(&og_api, &lp, retry).await {
        Ok(o) => o,
        Err(e) if not_found(&e) => Vec::new(),
        Err(e) => return Err(request(format!("listing OperatorGroups in namespace {ns}"))(e)),
    };
    let namespaces = list::all(&Api::<Namespace>::all(client.clone()), &lp, retry)
        .await
        .map_err(request("listing Namespaces"))?
        .into_iter()
        .map(|n| NamespaceInfo {
            name: n.name_any(),
            labels: n.metadata.labels.unwrap_or_default(),
        })
        .collect();
    let mut inv = Inventory {
        subscriptions,
        namespace_subscriptions,
        csv_name,
        csv,
        all_csvs,
        operator_groups,
        namespaces,
        label_carriers: Ok(Scan::default()),
        ..Inventory::default()
    };
    if let Some(csv) = inv.csv.clone() {
        gather_owned(client, opts, &csv, &mut inv).await?;
    }
    gather_operator(client, opts, &mut inv).await?;
    Ok(inv)
}

async fn gather_owned(
    client: &Client,
    opts: &Options,
    csv: &ClusterServiceVersion,
    inv: &mut Inventory,
) -> Result<(), Error> {
    let retry = &opts.retry;
    let crd_api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for d in &csv.spec.customresourcedefinitions.owned {
        if inv.crds.iter().any(|c| c.name == d.name) {
            continue;
        }
        let crd = retry
            .run(|| crd_api.get_opt(&d.name))
            .await
            .map_err(|(e, _)| request(format!("reading CustomResourceDefinition {}", d.name))(e))?;
        let Some(crd) = crd else { continue };
        let info = crd_info(&crd);
        if let Some(uid) = crd.uid() {
            inv.crd_uids.insert(info.name.clone(), uid);
        }
        if let Some(ar) = api_resource(&info) {
            let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
            let objs = match list::all(&api, &ListParams::default(), retry).await {
                Ok(o) => o,
                // The CRD stopped being served between get and list: none of it is left.
                Err(e) if not_found(&e) => Vec::new(),
                Err(e) => return Err(request(format!("listing {} ({})", ar.kind, info.name))(e)),
            };
            inv.crs.extend(objs.into_iter().map(|o| CrRef {
                crd: info.name.clone(),
                namespace: o.metadata.namespace.clone(),
                name: o.name_any(),
                uid: o.metadata.uid.clone(),
                deleting: o.metadata.deletion_timestamp.is_some(),
            }));
        }
        inv.crds.push(info);
    }
    let svc_api: Api<DynamicObject> = Api::all_with(client.clone(), &plan::apiservice_resource());
    for d in csv.spec.owned_apiservices() {
        let name = d.apiservice_name();
        if inv.apiservices.iter().any(|s| s.name == name) {
            continue;
        }
        let got = retry
            .run(|| svc_api.get_opt(&name))
            .await
            .map_err(|(e, _)| request(format!("reading APIService {name}"))(e))?;
        let objects = if got.is_some() {
            let ar = ApiResource {
                group: d.group.clone(),
                version: d.version.clone(),
                api_version: format!("{}/{}", d.group, d.version),
                kind: d.kind.clone(),
                plural: d.name.clone(),
            };
            let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
            list::all_metadata(&api, &ListParams::default(), retry)
                .await
                .map(|l| l.len())
                .map_err(|e| Unknown::Objects {
                    kind: d.kind.clone(),
                    api_version: ar.api_version.clone(),
                    source: Arc::new(e),
                })
        } else {
            Ok(0)
        };
        inv.apiservices.push(ApiServiceState {
            name,
            kind: d.kind.clone(),
            uid: got.and_then(|o| o.uid()),
            objects,
        });
    }
    Ok(())
}

async fn gather_operator(
    client: &Client,
    opts: &Options,
    inv: &mut Inventory,
) -> Result<(), Error> {
    let retry = &opts.retry;
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &plan::operator_resource());
    for name in [
        format!("{}.{}", opts.package, opts.namespace),
        opts.package.clone(),
    ] {
        match retry.run(|| api.get_opt(&name)).await {
            Ok(Some(op)) => {
                inv.operator = Some(OperatorRef {
                    name: name.clone(),
                    uid: op.uid(),
                });
                break;
            }
            Ok(None) => {}
            // The Operator kind is not served (an OLM without it): nothing to remove.
            Err((e, _)) if not_found(&e) => return Ok(()),
            Err((e, _)) => return Err(request(format!("reading Operator {name}"))(e)),
        }
    }
    if let Some(op) = &inv.operator {
        let label = plan::operator_label(&op.name);
        inv.label_carriers = scan::objects(client, Some(&label), |_| true, retry)
            .await
            .map_err(|e| Unknown::Discovery(Arc::new(e)));
    }
    Ok(())
}

/// Reads the cluster and makes the plan.
///
/// # Errors
///
/// What [`gather`] fails with, and [`Error::NoSubscription`] when the namespace has no
/// Subscription for the package.
pub async fn plan(client: &Client, opts: &Options) -> Result<(Plan, Inventory), Error> {
    let inv = gather(client, opts, None).await?;
    if inv.subscriptions.is_empty() {
        return Err(Error::NoSubscription {
            package: opts.package.clone(),
            namespace: opts.namespace.clone(),
        });
    }
    Ok((plan::decide(&inv, opts), inv))
}

/// What was done to one object.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Performed {
    pub step: Step,
    pub api_version: String,
    pub kind: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub name: String,
    /// `deleted`, `deletion-started`, `already-absent`, `replaced` (a new object of the same
    /// name exists: not deleted), `label-removed`, `kept`.
    pub result: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub reason: String,
}

impl Performed {
    pub fn describe(&self) -> String {
        gone::describe(&self.kind, self.namespace.as_deref(), &self.name)
    }
}

/// How an uninstall ended.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "status", rename_all = "kebab-case")]
pub enum Outcome {
    /// Every step ran (objects kept by a rule are in `performed`).
    Done,
    /// A safety rule refused the uninstall; nothing was deleted.
    Refused { reasons: Vec<String> },
    /// A wait timed out; nothing after `step` was deleted.
    TimedOut {
        step: Step,
        waited: String,
        remaining: Vec<Remaining>,
    },
    /// A request failed; nothing after `step` was deleted.
    Failed { step: Step, message: String },
}

/// The result of [`execute`].
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub performed: Vec<Performed>,
    pub outcome: Outcome,
}

/// Progress while an uninstall runs, for a person watching.
#[derive(Clone, Debug)]
pub enum Progress {
    /// One object handled.
    Did(Performed),
    /// Waiting in `step` for `remaining` of `total` objects to be gone.
    Waiting {
        step: Step,
        remaining: usize,
        total: usize,
    },
}

struct Run<'a> {
    client: &'a Client,
    opts: &'a Options,
    performed: Vec<Performed>,
    progress: &'a mut (dyn FnMut(Progress) + Send),
}

/// A step that ended the uninstall early.
struct Stop(Outcome);

impl Run<'_> {
    fn record(&mut self, item: &Item, result: &str, reason: &str) {
        let p = Performed {
            step: item.step,
            api_version: item.api_version.clone(),
            kind: item.kind.clone(),
            namespace: item.namespace.clone(),
            name: item.name.clone(),
            result: result.to_owned(),
            reason: reason.to_owned(),
        };
        (self.progress)(Progress::Did(p.clone()));
        self.performed.push(p);
    }

    fn api(&self, item: &Item) -> Api<DynamicObject> {
        match &item.namespace {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, &item.resource),
            None => Api::all_with(self.client.clone(), &item.resource),
        }
    }

    /// DELETE (background propagation, UID precondition), under the retry policy.
    async fn delete(&mut self, item: &Item) -> Result<(), Stop> {
        let api = self.api(item);
        let mut params = DeleteParams::background();
        params.preconditions = item.uid.clone().map(|uid| Preconditions {
            uid: Some(uid),
            resource_version: None,
        });
        match self
            .opts
            .retry
            .run(|| api.delete(&item.name, &params))
            .await
        {
            Ok(answer) => {
                let pending = answer
                    .left()
                    .filter(|o| o.metadata.deletion_timestamp.is_some())
                    .map(|o| o.finalizers().to_vec());
                match pending {
                    Some(f) if !f.is_empty() => self.record(
                        item,
                        "deletion-started",
                        &format!("finalizers: {}", f.join(", ")),
                    ),
                    _ => self.record(item, "deleted", ""),
                }
                Ok(())
            }
            Err((e, _)) if e.code() == Some(404) => {
                self.record(item, "already-absent", "");
                Ok(())
            }
            Err((e, _)) if e.code() == Some(409) && item.uid.is_some() => {
                self.record(
                    item,
                    "replaced",
                    "a new object of the same name exists; it is not deleted",
                );
                Ok(())
            }
            Err((e, _)) => Err(Stop(Outcome::Failed {
                step: item.step,
                message: format!("deleting {}: {e}", item.describe()),
            })),
        }
    }

    async fn remove_label(&mut self, item: &Item, label: &str) -> Result<(), Stop> {
        let api = self.api(item);
        let patch = Patch::Merge(json!({"metadata": {"labels": {label: null}}}));
        let params = PatchParams::default();
        match self
            .opts
            .retry
            .run(|| api.patch(&item.name, &params, &patch))
            .await
        {
            Ok(_) => {
                self.record(item, "label-removed", label);
                Ok(())
            }
            Err((e, _)) if e.code() == Some(404) => {
                self.record(item, "already-absent", "");
                Ok(())
            }
            Err((e, _)) => Err(Stop(Outcome::Failed {
                step: item.step,
                message: format!("removing the label {label} from {}: {e}", item.describe()),
            })),
        }
    }

    async fn wait(&mut self, step: Step, what: &str, tracked: &[Tracked]) -> Result<(), Stop> {
        let progress = &mut *self.progress;
        match gone::until_gone(
            self.client,
            tracked,
            self.opts.timeout,
            |remaining, total| {
                progress(Progress::Waiting {
                    step,
                    remaining,
                    total,
                })
            },
        )
        .await
        {
            Ok(()) => Ok(()),
            Err(remaining) => Err(Stop(Outcome::TimedOut {
                step,
                waited: format!(
                    "{what} were not gone after {}",
                    humantime::format_duration(self.opts.timeout)
                ),
                remaining,
            })),
        }
    }

    fn keep_all(&mut self, items: &[Item]) {
        for i in items.iter().filter(|i| i.action == Action::Keep) {
            self.record(i, "kept", &i.reason);
        }
    }

    /// The cluster read again, for deciding `step` (a failure ends the uninstall there).
    async fn fresh(&self, step: Step, known: &Inventory) -> Result<Inventory, Stop> {
        gather(self.client, self.opts, Some((&known.csv_name, &known.csv)))
            .await
            .map_err(|e| {
                Stop(Outcome::Failed {
                    step,
                    message: e.to_string(),
                })
            })
    }
}

fn tracked(item: &Item) -> Tracked {
    Tracked {
        resource: item.resource.clone(),
        namespace: item.namespace.clone(),
        name: item.name.clone(),
        uid: item.uid.clone(),
    }
}

/// Carries out `plan` (made from `inv` with the same `opts`). A plan with refusals deletes
/// nothing. Steps 4–6 are decided again on a fresh read of the cluster.
///
/// # Errors
///
/// None are returned: every way an uninstall ends is the [`Report`]'s [`Outcome`], with the
/// objects handled until then in [`Report::performed`]:
/// - [`Outcome::Refused`] when the plan has refusals (nothing is deleted);
/// - [`Outcome::Failed`] when a request fails after the retries of [`Options::retry`], or the
///   cluster cannot be read again before steps 4–6 (nothing after that step is deleted);
/// - [`Outcome::TimedOut`] when objects waited for are not gone within [`Options::timeout`]
///   (what remains is listed with its finalizers; nothing after that step is deleted).
pub async fn execute(
    client: &Client,
    opts: &Options,
    plan: &Plan,
    inv: &Inventory,
    progress: &mut (dyn FnMut(Progress) + Send),
) -> Report {
    let mut run = Run {
        client,
        opts,
        performed: Vec::new(),
        progress,
    };
    if !plan.refusals.is_empty() {
        return Report {
            performed: Vec::new(),
            outcome: Outcome::Refused {
                reasons: plan.refusals.clone(),
            },
        };
    }
    let outcome = match steps(&mut run, plan, inv).await {
        Ok(()) => Outcome::Done,
        Err(Stop(outcome)) => outcome,
    };
    Report {
        performed: run.performed,
        outcome,
    }
}

async fn steps(run: &mut Run<'_>, plan: &Plan, inv: &Inventory) -> Result<(), Stop> {
    // 1. Operands, while the operator runs (unless OLM operand cleanup does it with the CSV).
    let operands: Vec<Item> = plan.step(Step::Operands).cloned().collect();
    let delete_operands: Vec<&Item> = operands
        .iter()
        .filter(|i| i.action == Action::Delete)
        .collect();
    if !plan.olm_operand_cleanup {
        for item in &delete_operands {
            run.delete(item).await?;
        }
        let tracked: Vec<Tracked> = delete_operands.iter().map(|i| tracked(i)).collect();
        run.wait(Step::Operands, "the operator's custom resources", &tracked)
            .await?;
    }
    run.keep_all(&operands);
    // 2. Subscription.
    for item in plan.step(Step::Subscription).cloned().collect::<Vec<_>>() {
        run.delete(&item).await?;
    }
    // 3. CSV, until gone (with OLM operand cleanup: the reconciler removes its finalizer
    //    once the operands are gone).
    for item in plan.step(Step::Csv).cloned().collect::<Vec<_>>() {
        run.delete(&item).await?;
        let mut wait_for = vec![tracked(&item)];
        if plan.olm_operand_cleanup {
            wait_for.extend(delete_operands.iter().map(|i| tracked(i)));
        }
        let what = if plan.olm_operand_cleanup {
            "the CSV and its custom resources (deleted by the operand-cleanup reconciler: is `cvo operand-cleanup` running?)"
        } else {
            "the CSV"
        };
        run.wait(Step::Csv, what, &wait_for).await?;
    }
    // 4. CRDs and APIServices, decided again now that the operands are gone.
    let fresh = run.fresh(Step::Crds, inv).await?;
    let remaining: Vec<&CrRef> = fresh.crs.iter().collect();
    let mut items = plan::crd_items(&fresh, run.opts, &remaining);
    items.extend(plan::apiservice_items(&fresh, run.opts));
    for item in &items {
        match item.action {
            Action::Delete => run.delete(item).await?,
            _ => run.record(item, "kept", &item.reason),
        }
    }
    // 5. The Operator object.
    operator_object(run, inv).await?;
    // 6. The OperatorGroup.
    let fresh = run.fresh(Step::OperatorGroup, inv).await?;
    for item in &plan::operator_group_items(&fresh, run.opts) {
        match item.action {
            Action::Delete => run.delete(item).await?,
            _ => run.record(item, "kept", &item.reason),
        }
    }
    Ok(())
}

/// Step 5, the Operator object: waits for the objects carrying its label that are going away
/// (being deleted, or owned by the CSV), then decides again what to do with it and its label.
async fn operator_object(run: &mut Run<'_>, inv: &Inventory) -> Result<(), Stop> {
    let mut fresh = run.fresh(Step::Operator, inv).await?;
    if let (Some(op), Ok(scan)) = (&fresh.operator, &fresh.label_carriers) {
        let csv_uid = inv.csv.as_ref().and_then(|c| c.metadata.uid.clone());
        let leaving: Vec<Tracked> = scan
            .found
            .iter()
            .filter(|f| f.uid != op.uid)
            .filter(|f| f.deleting || csv_uid.as_ref().is_some_and(|u| f.owners.contains(u)))
            .map(|f| Tracked {
                resource: f.resource.api_resource(),
                namespace: f.namespace.clone(),
                name: f.name.clone(),
                uid: f.uid.clone(),
            })
            .collect();
        if !leaving.is_empty() {
            let label = plan::operator_label(&op.name);
            run.wait(
                Step::Operator,
                &format!("objects labelled {label} that are being deleted"),
                &leaving,
            )
            .await?;
            fresh = run.fresh(Step::Operator, inv).await?;
        }
    }
    let (items, _) = plan::operator_items(&fresh, run.opts, &Default::default());
    let label = fresh
        .operator
        .as_ref()
        .map(|op| plan::operator_label(&op.name))
        .unwrap_or_default();
    for item in &items {
        match item.action {
            Action::RemoveLabel => run.remove_label(item, &label).await?,
            Action::Delete => run.delete(item).await?,
            Action::Keep => run.record(item, "kept", &item.reason),
        }
    }
    Ok(())
}
