//! The operand-cleanup controller: a kube-runtime [`Controller`] on ClusterServiceVersions.
//!
//! Per reconcile it (1) asks [`plan::precheck`] whether the CSV alone decides the matter,
//! (2) otherwise gathers a [`plan::Snapshot`] through the API — every list paginated with
//! `limit`/`continue` — and asks [`plan::plan`], (3) carries out the decision: deletes CRs
//! (with a UID precondition), writes `status.cleanup` and the CSV condition on the status
//! subresource only when they change, removes the finalizer with a JSON patch that first
//! `test`s the finalizer list, publishes Events, and requeues with exponential backoff while
//! CRs remain. It holds no state besides per-CSV backoff counters; everything is rebuilt from
//! the cluster on each pass.

use std::collections::HashMap;
use std::fmt::Debug;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, Preconditions,
};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::watcher;
use kube::{Api, Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde_json::json;
use tracing::{Instrument, debug, info, info_span, warn};

use crate::retry::Backoff;

use super::plan::{
    self, CrRef, CrdInfo, Decision, NamespaceInfo, REASON_BLOCKED, REASON_WAITING, ReleaseReason,
    Snapshot,
};
use super::types::{ClusterServiceVersion, OperatorGroup, Subscription};

/// Condition reason written when every CR is gone.
pub const REASON_COMPLETE: &str = "CleanupComplete";

/// Tunables of the reconciler. [`Config::default`] suits a real cluster.
#[derive(Clone, Debug)]
pub struct Config {
    /// Watch CSVs of this namespace only (all checks still look cluster-wide).
    pub namespace: Option<String>,
    /// `limit` of every list request.
    pub page_size: u32,
    /// First requeue delay while CRs remain; doubles per pass.
    pub min_backoff: Duration,
    /// Cap of the requeue delay.
    pub max_backoff: Duration,
    /// Requeue delay while blocked by a safety rule.
    pub blocked_requeue: Duration,
    /// `reportingController` of the Events.
    pub reporter: String,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            namespace: None,
            page_size: 500,
            min_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(60),
            blocked_requeue: Duration::from_secs(60),
            reporter: "cvo-operand-cleanup".to_string(),
        }
    }
}

/// What can go wrong in one reconcile; the controller logs it and retries with backoff.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{action}: {source}")]
    Kube {
        action: String,
        #[source]
        source: kube::Error,
    },
    #[error(
        "the ClusterServiceVersion type (operators.coreos.com/v1alpha1) is not served: is OLM installed?"
    )]
    NotInstalled,
    #[error("object has no name or namespace")]
    MissingName,
    #[error("building the finalizer patch: {0}")]
    Patch(#[from] serde_json::Error),
}

fn kube_err(action: impl Into<String>) -> impl FnOnce(kube::Error) -> Error {
    let action = action.into();
    move |source| Error::Kube { action, source }
}

fn is_status(e: &kube::Error, code: u16) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == code)
}

struct Ctx {
    client: Client,
    config: Config,
    recorder: Recorder,
    attempts: Mutex<HashMap<String, u32>>,
}

impl Ctx {
    /// The next requeue delay of `key`: `min_backoff`, doubling per call up to `max_backoff`.
    fn backoff(&self, key: &str) -> Duration {
        let mut map = self.attempts.lock().expect("poisoned backoff map");
        let n = map.entry(key.to_string()).or_insert(0);
        *n = n.saturating_add(1);
        Backoff::doubling(self.config.min_backoff, self.config.max_backoff).delay(*n)
    }

    fn reset(&self, key: &str) {
        self.attempts
            .lock()
            .expect("poisoned backoff map")
            .remove(key);
    }

    async fn event(
        &self,
        csv: &ClusterServiceVersion,
        type_: EventType,
        reason: &str,
        note: String,
    ) {
        let ev = Event {
            type_,
            reason: reason.to_string(),
            note: Some(truncate(note, 1000)),
            action: "OperandCleanup".to_string(),
            secondary: None,
        };
        if let Err(e) = self.recorder.publish(&ev, &csv.object_ref(&())).await {
            warn!(error = %e, reason, "publishing event failed");
        }
    }
}

fn truncate(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut cut = max;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
    }
    s
}

/// Run the reconciler with default settings until `shutdown` resolves.
pub async fn run(
    client: Client,
    namespace: Option<String>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), Error> {
    run_with_config(
        client,
        Config {
            namespace,
            ..Config::default()
        },
        shutdown,
    )
    .await
}

/// Run the reconciler until `shutdown` resolves; in-flight reconciles finish first.
pub async fn run_with_config(
    client: Client,
    config: Config,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), Error> {
    let api: Api<ClusterServiceVersion> = match &config.namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    let reporter = Reporter {
        controller: config.reporter.clone(),
        instance: std::env::var("POD_NAME").ok(),
    };
    let ctx = Arc::new(Ctx {
        recorder: Recorder::new(client.clone(), reporter),
        client,
        config,
        attempts: Mutex::new(HashMap::new()),
    });
    // Fail fast when OLM's CSV type is not served at all, instead of retrying forever.
    if let Err(e) = api.list(&ListParams::default().limit(1)).await {
        return Err(if is_status(&e, 404) {
            Error::NotInstalled
        } else {
            kube_err("listing ClusterServiceVersions")(e)
        });
    }
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let signal = tokio::spawn(async move {
        shutdown.await;
        let _ = tx.send(());
    });
    info!(namespace = ?ctx.config.namespace, "operand-cleanup reconciler starting");
    Controller::new(api, watcher::Config::default())
        .graceful_shutdown_on(async move {
            let _ = rx.await;
        })
        .run(reconcile, error_policy, ctx)
        .for_each(|res| async move {
            match res {
                Ok((obj, action)) => debug!(csv = %obj, ?action, "reconciled"),
                // A CSV that disappeared between its event and its reconcile (the usual end of
                // a finished cleanup) is not a failure.
                Err(kube::runtime::controller::Error::ObjectNotFound(obj)) => {
                    debug!(csv = %obj, "gone before it was reconciled")
                }
                Err(e) => warn!(error = %e, "reconcile failed"),
            }
        })
        .await;
    signal.abort();
    info!("operand-cleanup reconciler stopped");
    Ok(())
}

fn error_policy(csv: Arc<ClusterServiceVersion>, err: &Error, ctx: Arc<Ctx>) -> Action {
    let key = csv.uid().unwrap_or_else(|| csv.name_any());
    let delay = ctx.backoff(&key);
    warn!(
        namespace = csv.namespace().unwrap_or_default(),
        name = csv.name_any(),
        error = %err,
        retry_in = ?delay,
        "operand cleanup failed"
    );
    Action::requeue(delay)
}

async fn reconcile(csv: Arc<ClusterServiceVersion>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    let ns = csv.namespace().ok_or(Error::MissingName)?;
    let name = csv.metadata.name.clone().ok_or(Error::MissingName)?;
    let span = info_span!("operand_cleanup", csv.namespace = %ns, csv.name = %name);
    reconcile_csv(csv, ctx, ns, name).instrument(span).await
}

struct Gathered {
    csv: ClusterServiceVersion,
    all_csvs: Vec<ClusterServiceVersion>,
    ogs: Vec<OperatorGroup>,
    namespaces: Vec<NamespaceInfo>,
    crds: Vec<CrdInfo>,
    subs: Vec<Subscription>,
}

async fn reconcile_csv(
    stale: Arc<ClusterServiceVersion>,
    ctx: Arc<Ctx>,
    ns: String,
    name: String,
) -> Result<Action, Error> {
    let key = stale.uid().unwrap_or_else(|| format!("{ns}/{name}"));
    if let Some(decision) = plan::precheck(&stale) {
        return apply(&ctx, &stale, &key, decision, &[]).await;
    }
    let Some(g) = gather(&ctx, &ns, &name, stale.uid()).await? else {
        debug!("CSV is gone");
        ctx.reset(&key);
        return Ok(Action::await_change());
    };
    // Decide the cheap rules before listing any CR.
    let snapshot = |crs: &'_ [CrRef]| -> plan::Plan {
        plan::plan(&Snapshot {
            csv: &g.csv,
            all_csvs: &g.all_csvs,
            operator_groups: &g.ogs,
            namespaces: &g.namespaces,
            crds: &g.crds,
            crs,
            subscriptions: &g.subs,
        })
    };
    let first = snapshot(&[]);
    let p = match first.decision {
        Decision::Block(_) | Decision::Ignore(_) | Decision::RemoveFinalizer(_) => first,
        _ => {
            let crs = list_crs(&ctx, &g.crds).await?;
            snapshot(&crs)
        }
    };
    for w in &p.warnings {
        warn!(hazard = %w, "operand cleanup hazard");
    }
    // Hazard Events go out once, when a cleanup starts.
    if !p.warnings.is_empty()
        && !plan::cleanup_started(&g.csv)
        && matches!(p.decision, Decision::DeleteCrs { .. })
    {
        ctx.event(
            &g.csv,
            EventType::Warning,
            "CleanupHazard",
            p.warnings.join("; "),
        )
        .await;
    }
    apply(&ctx, &g.csv, &key, p.decision, &g.crds).await
}

/// Carries out `decision` for `csv`: the requeue that follows, or why it could not be done.
async fn apply(
    ctx: &Ctx,
    csv: &ClusterServiceVersion,
    key: &str,
    decision: Decision,
    crds: &[CrdInfo],
) -> Result<Action, Error> {
    match decision {
        Decision::Ignore(reason) => {
            debug!(?reason, "not ours");
            ctx.reset(key);
            Ok(Action::await_change())
        }
        Decision::RemoveFinalizer(reason) => release(ctx, csv, key, reason).await,
        Decision::Block(reason) => {
            let message = reason.to_string();
            warn!(reason = %message, "operand cleanup blocked; finalizer kept");
            let changed = write_status(ctx, csv, None, REASON_BLOCKED, &message).await?;
            if changed.is_some() {
                ctx.event(csv, EventType::Warning, "CleanupBlocked", message)
                    .await;
            }
            Ok(Action::requeue(ctx.config.blocked_requeue))
        }
        Decision::DeleteCrs { delete, pending } => {
            delete_crs(ctx, csv, key, crds, &delete, &pending).await
        }
        Decision::WaitForCrs { pending } => {
            info!(
                pending = pending.len(),
                "waiting for operator to finalize custom resources"
            );
            wait_status(ctx, csv, crds, &pending).await?;
            Ok(Action::requeue(ctx.backoff(key)))
        }
        Decision::Done => finish(ctx, csv, key).await,
    }
}

/// [`Decision::RemoveFinalizer`]: the finalizer goes without a cleanup (an Event says why).
async fn release(
    ctx: &Ctx,
    csv: &ClusterServiceVersion,
    key: &str,
    reason: ReleaseReason,
) -> Result<Action, Error> {
    info!(%reason, "removing finalizer without cleanup");
    if remove_finalizer(ctx, csv).await? {
        let (type_, ev_reason) = match reason {
            ReleaseReason::CleanupDisabled { aborted: true } => {
                (EventType::Warning, "CleanupAborted")
            }
            _ => (EventType::Normal, "CleanupSkipped"),
        };
        ctx.event(csv, type_, ev_reason, reason.to_string()).await;
    }
    ctx.reset(key);
    Ok(Action::await_change())
}

/// [`Decision::DeleteCrs`]: deletes `delete`, unless the CSV changed since the snapshot, and
/// writes the `pending` ones to the status.
async fn delete_crs(
    ctx: &Ctx,
    csv: &ClusterServiceVersion,
    key: &str,
    crds: &[CrdInfo],
    delete: &[CrRef],
    pending: &[CrRef],
) -> Result<Action, Error> {
    // Listing CRs can take a while: re-read the CSV right before deleting, and delete
    // nothing if anything about it changed since the snapshot (e.g. an abort).
    let api: Api<ClusterServiceVersion> =
        Api::namespaced(ctx.client.clone(), &csv.namespace().unwrap_or_default());
    let fresh = api
        .get_opt(&csv.name_any())
        .await
        .map_err(kube_err("re-reading the CSV before deleting"))?;
    if fresh.as_ref().and_then(|f| f.resource_version()) != csv.resource_version() {
        debug!("CSV changed since the snapshot; re-planning before deleting");
        return Ok(Action::requeue(ctx.config.min_backoff));
    }
    if !plan::cleanup_started(csv) {
        ctx.event(
            csv,
            EventType::Normal,
            "CleanupStarted",
            format!("deleting {} custom resources", pending.len()),
        )
        .await;
    }
    info!(
        deleting = delete.len(),
        pending = pending.len(),
        "deleting custom resources"
    );
    for cr in delete {
        delete_cr(ctx, crds, cr).await?;
    }
    wait_status(ctx, csv, crds, pending).await?;
    Ok(Action::requeue(ctx.backoff(key)))
}

/// [`Decision::Done`]: the status says the cleanup is complete, then the finalizer goes.
async fn finish(ctx: &Ctx, csv: &ClusterServiceVersion, key: &str) -> Result<Action, Error> {
    let mut current = csv.clone();
    if plan::cleanup_started(csv)
        && let Some(updated) = write_status(
            ctx,
            csv,
            Some(vec![]),
            REASON_COMPLETE,
            "all custom resources deleted",
        )
        .await?
    {
        current = updated;
    }
    info!("no custom resources left; removing finalizer");
    if remove_finalizer(ctx, &current).await? {
        ctx.event(
            csv,
            EventType::Normal,
            "CleanupFinished",
            "all custom resources in the target namespaces are deleted".to_string(),
        )
        .await;
    }
    ctx.reset(key);
    Ok(Action::await_change())
}

async fn wait_status(
    ctx: &Ctx,
    csv: &ClusterServiceVersion,
    crds: &[CrdInfo],
    pending: &[CrRef],
) -> Result<(), Error> {
    let (lists, unlisted) = plan::pending_deletion(pending, crds);
    let message = plan::waiting_message(pending.len(), unlisted);
    write_status(ctx, csv, Some(lists), REASON_WAITING, &message).await?;
    Ok(())
}

/// Merge-patch `status.cleanup` and `status.conditions` when they differ from the CSV's; the
/// patch carries the read `resourceVersion`, so a concurrent writer makes it fail (409) and the
/// next pass recomputes. Returns the updated CSV when a write happened.
async fn write_status(
    ctx: &Ctx,
    csv: &ClusterServiceVersion,
    cleanup: Option<Vec<super::types::ResourceList>>,
    reason: &str,
    message: &str,
) -> Result<Option<ClusterServiceVersion>, Error> {
    let now = jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    let Some((cleanup, conditions)) =
        plan::desired_status(csv.status.as_ref(), cleanup, reason, message, &now)
    else {
        return Ok(None);
    };
    let mut status = json!({ "conditions": conditions });
    if let Some(pending) = cleanup {
        status["cleanup"] = json!({ "pendingDeletion": pending });
    }
    let mut body = json!({ "status": status });
    if let Some(rv) = csv.resource_version() {
        body["metadata"] = json!({ "resourceVersion": rv });
    }
    let api: Api<ClusterServiceVersion> =
        Api::namespaced(ctx.client.clone(), &csv.namespace().unwrap_or_default());
    let updated = api
        .patch_status(
            &csv.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&body),
        )
        .await
        .map_err(kube_err("patching CSV status"))?;
    debug!(reason, message, "status written");
    Ok(Some(updated))
}

/// Remove the finalizer with a `test`-guarded JSON patch. Returns whether this call removed it.
async fn remove_finalizer(ctx: &Ctx, csv: &ClusterServiceVersion) -> Result<bool, Error> {
    let Some(patch) = plan::finalizer_removal_patch(&csv.metadata) else {
        return Ok(false);
    };
    let patch: json_patch::Patch = serde_json::from_value(patch)?;
    let api: Api<ClusterServiceVersion> =
        Api::namespaced(ctx.client.clone(), &csv.namespace().unwrap_or_default());
    match api
        .patch(
            &csv.name_any(),
            &PatchParams::default(),
            &Patch::Json::<()>(patch),
        )
        .await
    {
        Ok(_) => {
            info!("finalizer removed");
            Ok(true)
        }
        Err(e) if is_status(&e, 404) => Ok(false),
        Err(e) => Err(kube_err(
            "removing the finalizer (its list changed concurrently?)",
        )(e)),
    }
}

/// How to address the CRs of `crd` (its [`CrdInfo::served_version`]); `None` when no
/// version is served.
pub fn api_resource(crd: &CrdInfo) -> Option<ApiResource> {
    let version = crd.served_version.clone()?;
    Some(ApiResource {
        api_version: if crd.group.is_empty() {
            version.clone()
        } else {
            format!("{}/{}", crd.group, version)
        },
        group: crd.group.clone(),
        version,
        kind: crd.kind.clone(),
        plural: crd.plural.clone(),
    })
}

async fn delete_cr(ctx: &Ctx, crds: &[CrdInfo], cr: &CrRef) -> Result<(), Error> {
    let Some(ar) = crds
        .iter()
        .find(|c| c.name == cr.crd)
        .and_then(api_resource)
    else {
        return Ok(());
    };
    let api: Api<DynamicObject> = match &cr.namespace {
        Some(ns) => Api::namespaced_with(ctx.client.clone(), ns, &ar),
        None => Api::all_with(ctx.client.clone(), &ar),
    };
    let dp = DeleteParams {
        preconditions: cr.uid.clone().map(|uid| Preconditions {
            uid: Some(uid),
            resource_version: None,
        }),
        ..DeleteParams::background()
    };
    match api.delete(&cr.name, &dp).await {
        Ok(_) => {
            info!(kind = %ar.kind, namespace = ?cr.namespace, name = %cr.name, "deleted custom resource");
            Ok(())
        }
        // Gone already, or replaced by a new object of the same name (UID precondition).
        Err(e) if is_status(&e, 404) || is_status(&e, 409) => Ok(()),
        Err(e) => Err(kube_err(format!(
            "deleting {} {}/{}",
            ar.kind,
            cr.namespace.as_deref().unwrap_or(""),
            cr.name
        ))(e)),
    }
}

/// List every object, following `continue` tokens page by page.
pub async fn list_all<K>(api: &Api<K>, page_size: u32, what: &str) -> Result<Vec<K>, Error>
where
    K: Clone + DeserializeOwned + Debug,
{
    let mut out = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let mut lp = ListParams::default().limit(page_size);
        if let Some(t) = &token {
            lp = lp.continue_token(t);
        }
        let list = api
            .list(&lp)
            .await
            .map_err(kube_err(format!("listing {what}")))?;
        out.extend(list.items);
        match list.metadata.continue_ {
            Some(t) if !t.is_empty() => token = Some(t),
            _ => return Ok(out),
        }
    }
}

/// The version to talk to a CRD in: its storage version if served, else the first served one.
pub fn crd_info(crd: &CustomResourceDefinition) -> CrdInfo {
    let versions = &crd.spec.versions;
    let served_version = versions
        .iter()
        .find(|v| v.served && v.storage)
        .or_else(|| versions.iter().find(|v| v.served))
        .map(|v| v.name.clone());
    CrdInfo {
        name: crd.name_any(),
        group: crd.spec.group.clone(),
        plural: crd.spec.names.plural.clone(),
        kind: crd.spec.names.kind.clone(),
        served_version,
        cluster_scoped: crd.spec.scope == "Cluster",
    }
}

async fn gather(
    ctx: &Ctx,
    ns: &str,
    name: &str,
    uid: Option<String>,
) -> Result<Option<Gathered>, Error> {
    let client = &ctx.client;
    let page = ctx.config.page_size;
    let all_csvs: Vec<ClusterServiceVersion> =
        list_all(&Api::all(client.clone()), page, "ClusterServiceVersions").await?;
    let Some(csv) = all_csvs
        .iter()
        .find(|c| {
            c.metadata.namespace.as_deref() == Some(ns)
                && c.metadata.name.as_deref() == Some(name)
                && (uid.is_none() || c.metadata.uid == uid)
        })
        .cloned()
    else {
        return Ok(None);
    };
    let ogs: Vec<OperatorGroup> =
        list_all(&Api::namespaced(client.clone(), ns), page, "OperatorGroups").await?;
    let namespaces: Vec<NamespaceInfo> =
        list_all(&Api::<Namespace>::all(client.clone()), page, "Namespaces")
            .await?
            .into_iter()
            .map(|n| NamespaceInfo {
                name: n.name_any(),
                labels: n.metadata.labels.unwrap_or_default(),
            })
            .collect();
    // Subscriptions only feed hazard warnings: their absence (no CRD) is not an error.
    let subs: Vec<Subscription> =
        match list_all(&Api::namespaced(client.clone(), ns), page, "Subscriptions").await {
            Ok(s) => s,
            Err(e) => {
                debug!(error = %e, "Subscriptions not listed");
                Vec::new()
            }
        };
    let crd_api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut crds = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for d in &csv.spec.customresourcedefinitions.owned {
        if !seen.insert(d.name.clone()) {
            continue;
        }
        if let Some(crd) = crd_api
            .get_opt(&d.name)
            .await
            .map_err(kube_err(format!("getting CRD {}", d.name)))?
        {
            crds.push(crd_info(&crd));
        }
    }
    Ok(Some(Gathered {
        csv,
        all_csvs,
        ogs,
        namespaces,
        crds,
        subs,
    }))
}

async fn list_crs(ctx: &Ctx, crds: &[CrdInfo]) -> Result<Vec<CrRef>, Error> {
    let mut out = Vec::new();
    for crd in crds {
        let Some(ar) = api_resource(crd) else {
            continue;
        };
        let api: Api<DynamicObject> = Api::all_with(ctx.client.clone(), &ar);
        let objs = match list_all(&api, ctx.config.page_size, &crd.name).await {
            Ok(o) => o,
            // The CRD went away between get and list: nothing of it is left.
            Err(Error::Kube { source, .. }) if is_status(&source, 404) => continue,
            Err(e) => return Err(e),
        };
        out.extend(objs.into_iter().map(|o| CrRef {
            crd: crd.name.clone(),
            namespace: o.metadata.namespace.clone(),
            name: o.name_any(),
            uid: o.metadata.uid.clone(),
            deleting: o.metadata.deletion_timestamp.is_some(),
        }));
    }
    Ok(out)
}
