//! `ClusterVersion/version` (config.openshift.io/v1): read the current version and the last
//! Upgradeable condition, and write a pass's status the way CVO does — `desired`, `history`
//! (newest first, Partial → Completed, at most [`HISTORY_LIMIT`] entries), `versionHash` and
//! conditions. Every status written holds what OpenShift's ClusterVersion schema requires
//! ([`fill_required`]), so a server serving OpenShift's own CRD accepts it. The status is
//! written only when it changed, and the write retries on conflict. Without a
//! ClusterVersion, nothing is read or written.

use kube::api::{Api, DynamicObject, PostParams};
use serde_json::{Value, json};

use super::Condition;
use crate::apply::RetryPolicy;
use crate::apply::retry::{RequestError, Verdict, classify};
use crate::cluster::Cluster;
use crate::cluster::discovery::DiscoveryError;
use crate::release::capability::Capabilities;

pub const API_VERSION: &str = "config.openshift.io/v1";
pub const KIND: &str = "ClusterVersion";
pub const NAME: &str = "version";
/// Longest history kept, as in CVO.
pub const HISTORY_LIMIT: usize = 100;

#[derive(Debug, thiserror::Error)]
pub enum ClusterVersionError {
    #[error(
        "reading ClusterVersion {NAME}: {0}; cannot tell install from update, nothing was applied (run again when the server answers)"
    )]
    Read(#[source] RequestError),
    #[error(
        "looking up the ClusterVersion kind: {0}; nothing was applied (run again when the server answers)"
    )]
    Discovery(#[source] DiscoveryError),
    #[error(
        "writing ClusterVersion {NAME} status: {0}; the cluster does not record this run (if the server refused the status, check which ClusterVersion CRD it serves: `kubectl get crd clusterversions.config.openshift.io -o yaml`)"
    )]
    Write(#[source] RequestError),
    #[error("writing ClusterVersion {NAME} spec: {0}")]
    WriteSpec(#[source] RequestError),
    #[error("writing ClusterVersion {NAME} status: still conflicting after {0} attempts")]
    Conflict(u32),
}

/// What [`write`] did.
#[derive(Debug, PartialEq, Eq)]
pub enum WriteOutcome {
    Written,
    Unchanged,
    /// No ClusterVersion in the cluster.
    Absent,
}

/// The ClusterVersion API; `None` only when the server does not serve the kind. A failed
/// discovery request is an error: it must not read as "no ClusterVersion" (an install).
async fn api(cluster: &Cluster) -> Result<Option<Api<DynamicObject>>, ClusterVersionError> {
    match cluster.discovery().resolve(API_VERSION, KIND).await {
        Ok(resolved) => Ok(Some(Api::all_with(
            cluster.client().clone(),
            &resolved.resource,
        ))),
        Err(DiscoveryError::UnknownKind { .. }) => Ok(None),
        Err(e) => Err(ClusterVersionError::Discovery(e)),
    }
}

/// The ClusterVersion, or `None` when the kind is not served or the object is absent. Any
/// other failure (after `retry`) is an error, never `None`.
pub async fn read(
    cluster: &Cluster,
    retry: &RetryPolicy,
) -> Result<Option<DynamicObject>, ClusterVersionError> {
    let Some(api) = api(cluster).await? else {
        return Ok(None);
    };
    retry
        .run(|| api.get_opt(NAME))
        .await
        .map_err(|(e, _)| ClusterVersionError::Read(e))
}

fn status(cv: &DynamicObject) -> &Value {
    cv.data.get("status").unwrap_or(&Value::Null)
}

/// The field manager of the risks `cvo apply --accept-risks` records in
/// `spec.desiredUpdate.acceptRisks` (its own, so that applying the release's ClusterVersion
/// manifest as `cvo` never takes them away).
pub const ACCEPT_RISKS_MANAGER: &str = "cvo-accept-risks";

/// Records `names` in `spec.desiredUpdate.acceptRisks` (server-side apply, a list keyed by
/// name: the entries others wrote stay). Nothing is created: without a ClusterVersion the
/// answer is [`WriteOutcome::Absent`].
///
/// # Errors
///
/// [`ClusterVersionError::Read`] or [`ClusterVersionError::Discovery`] when ClusterVersion
/// cannot be read, [`ClusterVersionError::WriteSpec`] when the server refuses the write (for
/// example a ClusterVersion CRD without `acceptRisks`, which prunes it: then nothing is
/// recorded and the write is reported unchanged).
pub async fn record_accepted_risks(
    cluster: &Cluster,
    retry: &RetryPolicy,
    names: &[String],
) -> Result<WriteOutcome, ClusterVersionError> {
    let Some(api) = api(cluster).await? else {
        return Ok(WriteOutcome::Absent);
    };
    let Some(cv) = read(cluster, retry).await? else {
        return Ok(WriteOutcome::Absent);
    };
    let has = |cv: &DynamicObject| {
        let listed: Vec<&str> = cv
            .data
            .pointer("/spec/desiredUpdate/acceptRisks")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|r| r.get("name").and_then(Value::as_str))
            .collect();
        names.iter().all(|n| listed.contains(&n.as_str()))
    };
    if has(&cv) {
        return Ok(WriteOutcome::Unchanged);
    }
    let body = json!({
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": NAME},
        "spec": {"desiredUpdate": {
            "acceptRisks": names.iter().map(|n| json!({"name": n})).collect::<Vec<_>>(),
        }},
    });
    let params = kube::api::PatchParams::apply(ACCEPT_RISKS_MANAGER).force();
    let patch = kube::api::Patch::Apply(&body);
    let written = retry
        .run(|| api.patch(NAME, &params, &patch))
        .await
        .map_err(|(e, _)| ClusterVersionError::WriteSpec(e))?;
    Ok(if has(&written) {
        WriteOutcome::Written
    } else {
        WriteOutcome::Unchanged
    })
}

/// The newest Completed history entry's version.
pub fn current_version(cv: &DynamicObject) -> Option<semver::Version> {
    status(cv)
        .get("history")?
        .as_array()?
        .iter()
        .find(|h| h.get("state").and_then(Value::as_str) == Some("Completed"))
        .and_then(|h| h.get("version")?.as_str()?.parse().ok())
}

/// `status.desired.image`: the release image the cluster is at or moving to (`None` when
/// empty or absent).
pub fn desired_image(cv: &DynamicObject) -> Option<String> {
    status(cv)
        .pointer("/desired/image")
        .and_then(Value::as_str)
        .filter(|image| !image.is_empty())
        .map(str::to_owned)
}

/// The current target (the newest history entry, completed or not) and the version before
/// it (the newest entry with another version): what a rollback is checked against.
pub fn current_and_previous(
    cv: &DynamicObject,
) -> (Option<semver::Version>, Option<semver::Version>) {
    let versions: Vec<&str> = status(cv)
        .get("history")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|h| h.get("version").and_then(Value::as_str))
        .collect();
    let Some(current) = versions.first() else {
        return (None, None);
    };
    let previous = versions.iter().find(|v| *v != current);
    (current.parse().ok(), previous.and_then(|v| v.parse().ok()))
}

/// The image of the release the cluster is at, when a pass towards `version` (of image
/// `image`, when known) moves it from another: the newest history entry's image, when that
/// entry names another release (another version, or another image) and an image at all.
pub fn previous_image(cv: &DynamicObject, version: &str, image: Option<&str>) -> Option<String> {
    let newest = status(cv).get("history")?.as_array()?.first()?;
    let at = newest
        .get("image")
        .and_then(Value::as_str)
        .filter(|i| !i.is_empty())?;
    let same_version = newest.get("version").and_then(Value::as_str) == Some(version);
    let same_image = image.is_none_or(|i| i.is_empty() || i == at);
    (!(same_version && same_image)).then(|| at.to_owned())
}

/// When the update towards `version` started: the newest history entry's `startedTime`, if
/// that entry is `version` and still Partial.
pub fn started(cv: &DynamicObject, version: &str) -> Option<jiff::Timestamp> {
    let newest = status(cv).get("history")?.as_array()?.first()?;
    if newest.get("version").and_then(Value::as_str) != Some(version)
        || newest.get("state").and_then(Value::as_str) != Some("Partial")
    {
        return None;
    }
    newest.get("startedTime")?.as_str()?.parse().ok()
}

/// True when some history entry is Completed.
pub fn ever_completed(cv: &DynamicObject) -> bool {
    current_version(cv).is_some()
}

/// The condition `type_` in the status, if present.
pub fn condition(cv: &DynamicObject, type_: &str) -> Option<Condition> {
    status(cv)
        .get("conditions")?
        .as_array()?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(type_))
        .and_then(|c| serde_json::from_value(c.clone()).ok())
}

/// The release a pass works towards, as `status.desired` and the history record it.
#[derive(Clone, Copy, Debug)]
pub struct Desired<'a> {
    pub version: &'a str,
    /// The release image's pull spec (`--release-image`); the empty string when unknown.
    pub image: &'a str,
    /// The release's [`crate::release::version_hash`].
    pub version_hash: &'a str,
    /// The release image's signature verified (`--verify-key`): a new history entry's
    /// `verified`.
    pub verified: bool,
}

/// The status after a pass towards `desired` (pure). `complete`: every manifest applied.
/// Conditions keep their `lastTransitionTime` while their status is unchanged, so an
/// identical pass yields an identical status; conditions of other types (written by someone
/// else, or `ReleaseAccepted` by the operator) are kept as they are. `accepted_risks`: the
/// preconditions a forced update overrode, recorded in its history entry as the CVO does.
/// A new history entry supersedes the one before it: an entry still without a completion
/// time (a Partial update) gets `now`, the start of the new one.
pub fn next_status(
    old: &Value,
    desired: Desired<'_>,
    conditions: &[Condition],
    complete: bool,
    accepted_risks: Option<&str>,
    now: jiff::Timestamp,
) -> Value {
    let mut status = object_or_empty(old);
    let now_text = now.to_string();
    let Desired {
        version,
        image,
        version_hash,
        verified,
    } = desired;
    status["desired"] = json!({"version": version, "image": image});
    status["versionHash"] = json!(version_hash);
    let mut history: Vec<Value> = old
        .get("history")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let same = history
        .first()
        .is_some_and(|h| h.get("version").and_then(Value::as_str) == Some(version));
    if same {
        if history[0]
            .get("image")
            .and_then(Value::as_str)
            .unwrap_or("")
            .is_empty()
        {
            history[0]["image"] = json!(image);
        }
    } else {
        if let Some(superseded) = history.first_mut()
            && superseded.get("completionTime").is_none_or(Value::is_null)
        {
            superseded["completionTime"] = json!(now_text);
        }
        history.insert(0, json!({"state": "Partial", "version": version, "image": image, "startedTime": now_text, "completionTime": null, "verified": verified}));
    }
    if let Some(risks) = accepted_risks {
        history[0]["acceptedRisks"] = json!(risks);
    }
    if complete && history[0].get("state").and_then(Value::as_str) != Some("Completed") {
        history[0]["state"] = json!("Completed");
        history[0]["completionTime"] = json!(now_text);
    }
    history.truncate(HISTORY_LIMIT);
    status["history"] = Value::Array(history);
    status["conditions"] = Value::Array(merge_conditions(old, conditions, now));
    status
}

/// `conditions` in the status format, each keeping the `lastTransitionTime` of the condition
/// of its type in `old` while the status is the same, merged into `old`'s conditions: each
/// replaces the one of its type where it stands, new types are appended, and conditions of
/// other types are kept unchanged (foreign conditions are never wiped). The order is stable,
/// so writers of different conditions do not undo each other's writes.
fn merge_conditions(old: &Value, conditions: &[Condition], now: jiff::Timestamp) -> Vec<Value> {
    let now = now.to_string();
    let mut merged = old
        .get("conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for c in conditions {
        let status_text = c.status.as_str();
        let slot = merged
            .iter()
            .position(|o| o.get("type").and_then(Value::as_str) == Some(c.type_.as_str()));
        let since = slot
            .map(|i| &merged[i])
            .filter(|o| o.get("status").and_then(Value::as_str) == Some(status_text))
            .and_then(|o| o.get("lastTransitionTime").cloned())
            .unwrap_or_else(|| json!(now));
        let value = json!({"type": c.type_, "status": status_text, "reason": c.reason, "message": c.message, "lastTransitionTime": since});
        match slot {
            Some(i) => merged[i] = value,
            None => merged.push(value),
        }
    }
    merged
}

/// The status with `conditions` merged in (pure): desired and history untouched.
pub fn with_conditions(old: &Value, conditions: &[Condition], now: jiff::Timestamp) -> Value {
    let mut status = object_or_empty(old);
    status["conditions"] = Value::Array(merge_conditions(old, conditions, now));
    status
}

/// The manifest of ClusterVersion [`NAME`] in `release`, if it ships one (what an install
/// creates).
pub fn shipped(release: &crate::release::Release) -> Option<&crate::release::Manifest> {
    release.manifests.iter().find(|m| {
        !m.is_delete()
            && m.id.kind == KIND
            && m.id.group == "config.openshift.io"
            && m.id.name == NAME
    })
}

/// The ClusterVersion `release` ships, as an object (its spec is what an install asks for).
pub fn shipped_object(release: &crate::release::Release) -> Option<DynamicObject> {
    shipped(release).and_then(|m| serde_json::from_value((*m.object).clone()).ok())
}

/// `status.capabilities` as openshift/api defines it: sorted lists. What `old` (the status
/// this write replaces) enabled stays enabled, so that a writer that computed its set before
/// another one enabled more never disables anything.
fn capabilities_status(caps: &Capabilities, old: &Value) -> Value {
    let mut enabled = caps.enabled.clone();
    enabled.extend(
        old.pointer("/capabilities/enabledCapabilities")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str().map(str::to_owned)),
    );
    json!({
        "enabledCapabilities": enabled,
        "knownCapabilities": caps.known,
    })
}

/// `old` when it is an object (a status to change), else an empty one.
fn object_or_empty(old: &Value) -> Value {
    if old.is_object() {
        old.clone()
    } else {
        json!({})
    }
}

/// The version of the newest history entry (of `status`), completed or not.
pub fn newest_version(status: &Value) -> Option<&str> {
    status.pointer("/history/0/version").and_then(Value::as_str)
}

/// Dates the history entry a write added (`next`'s newest) from when its pass began: its
/// `startedTime`, and the `completionTime` the write gave the entry it superseded (one that
/// had none in `old`).
fn began_at(next: &mut Value, old: &Value, started: jiff::Timestamp) {
    let started = json!(started.to_string());
    next["history"][0]["startedTime"] = started.clone();
    let superseded_open = old
        .pointer("/history/0/completionTime")
        .is_none_or(Value::is_null);
    if superseded_open && next.pointer("/history/1").is_some() {
        next["history"][1]["completionTime"] = started;
    }
}

/// What a status write records.
#[derive(Clone, Copy, Debug)]
pub enum Update<'a> {
    /// A pass towards `version`: desired, history and conditions (see [`next_status`]).
    Pass {
        version: &'a str,
        /// The release image's pull spec, the empty string when unknown.
        image: &'a str,
        /// The release's [`crate::release::version_hash`].
        version_hash: &'a str,
        /// The release image's signature verified: a new history entry's `verified`.
        verified: bool,
        conditions: &'a [Condition],
        complete: bool,
        accepted_risks: Option<&'a str>,
        /// The `metadata.generation` of the ClusterVersion the pass acted on.
        observed: Option<i64>,
        /// When the pass began, if before this write: the `startedTime` of a history entry
        /// this write adds (a release that creates its own ClusterVersion gets its entry only
        /// at the end of its first pass).
        started: Option<jiff::Timestamp>,
        /// `status.capabilities` (enabled and known, sorted), when the sync knows them.
        capabilities: Option<&'a Capabilities>,
    },
    /// Only these conditions, merged into the others (a release refused before any pass, the
    /// operator's move to another image, a progress refresh).
    Conditions {
        conditions: &'a [Condition],
        /// The generation this write answers, if it answers a spec it read.
        observed: Option<i64>,
    },
}

impl Update<'_> {
    fn next(&self, old: &Value, now: jiff::Timestamp) -> Value {
        let (mut next, observed) = match *self {
            Update::Pass {
                version,
                image,
                version_hash,
                verified,
                conditions,
                complete,
                accepted_risks,
                observed,
                started,
                capabilities,
            } => {
                let desired = Desired {
                    version,
                    image,
                    version_hash,
                    verified,
                };
                let mut next = next_status(old, desired, conditions, complete, accepted_risks, now);
                if let Some(caps) = capabilities {
                    next["capabilities"] = capabilities_status(caps, old);
                }
                if let Some(started) = started.filter(|s| *s < now)
                    && newest_version(old) != Some(version)
                {
                    began_at(&mut next, old, started);
                }
                (next, observed)
            }
            Update::Conditions {
                conditions,
                observed,
            } => (with_conditions(old, conditions, now), observed),
        };
        if let Some(generation) = observed {
            observe(&mut next, generation);
        }
        next
    }
}

/// Sets `status.observedGeneration` (the spec generation the status answers) to `generation`,
/// never lowering it: a slower writer that read an older spec does not move it back.
fn observe(status: &mut Value, generation: i64) {
    let current = status.get("observedGeneration").and_then(Value::as_i64);
    if current.is_none_or(|c| c < generation) {
        status["observedGeneration"] = json!(generation);
    }
}

/// Completes `status` with what OpenShift's ClusterVersion schema requires, never changing
/// a value that is there (pure):
/// - `desired {version, image}`: when absent, the newest history entry's, else empty strings;
/// - `versionHash`: the empty string when absent (a pass writes the release's);
/// - `availableUpdates`: `null` when the key is absent — an existing list, written by
///   whoever reads an update graph, is never touched;
/// - `observedGeneration`: `generation` (of the object read for this write) when absent;
/// - every history entry: `image` (empty), `verified` (false), `state` (Partial),
///   `startedTime` and `completionTime` (null on the newest entry; on an older one, the time
///   the entry after it started, which is when it was superseded);
/// - every condition: `lastTransitionTime` (`now`) when a writer left it out.
pub fn fill_required(status: &mut Value, generation: Option<i64>, now: jiff::Timestamp) {
    if !status.is_object() {
        *status = json!({});
    }
    let now_text = now.to_string();
    let newest = status
        .get("history")
        .and_then(|h| h.get(0))
        .filter(|h| h.is_object())
        .cloned();
    if !status["desired"].is_object() {
        let from = |key| {
            newest
                .as_ref()
                .and_then(|h| h.get(key))
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned()
        };
        status["desired"] = json!({"version": from("version"), "image": from("image")});
    }
    for key in ["version", "image"] {
        if !status["desired"][key].is_string() {
            status["desired"][key] = json!("");
        }
    }
    if !status["versionHash"].is_string() {
        status["versionHash"] = json!("");
    }
    if status.get("availableUpdates").is_none() {
        status["availableUpdates"] = Value::Null;
    }
    if !status["observedGeneration"].is_i64() {
        status["observedGeneration"] = json!(generation.unwrap_or(0));
    }
    if let Some(history) = status.get_mut("history").and_then(Value::as_array_mut) {
        let mut next_started: Option<Value> = None;
        for (i, entry) in history.iter_mut().enumerate() {
            if !entry.is_object() {
                continue;
            }
            if !entry["image"].is_string() {
                entry["image"] = json!("");
            }
            if !entry["verified"].is_boolean() {
                entry["verified"] = json!(false);
            }
            if !entry["state"].is_string() {
                entry["state"] = json!("Partial");
            }
            if !entry["startedTime"].is_string() {
                let started = entry
                    .get("completionTime")
                    .filter(|t| t.is_string())
                    .cloned()
                    .unwrap_or_else(|| json!(now_text));
                entry["startedTime"] = started;
            }
            if i == 0 {
                if entry.get("completionTime").is_none() {
                    entry["completionTime"] = Value::Null;
                }
            } else if !entry["completionTime"].is_string() {
                entry["completionTime"] = next_started.clone().unwrap_or_else(|| json!(now_text));
            }
            next_started = Some(entry["startedTime"].clone());
        }
    }
    if let Some(conditions) = status.get_mut("conditions").and_then(Value::as_array_mut) {
        for c in conditions.iter_mut().filter(|c| c.is_object()) {
            if !c["lastTransitionTime"].is_string() {
                c["lastTransitionTime"] = json!(now_text);
            }
        }
    }
}

/// Writes `update` to the status, only when it changes it, completed with what the schema
/// requires ([`fill_required`]). A conflict re-reads at once; any other transient error waits
/// as the retry policy says and tries again (up to its attempts).
pub async fn write_update(
    cluster: &Cluster,
    retry: &RetryPolicy,
    update: Update<'_>,
) -> Result<WriteOutcome, ClusterVersionError> {
    read_modify_write(cluster, retry, Part::Status, |cv| {
        let old = status(cv).clone();
        let now = jiff::Timestamp::now();
        let mut new = update.next(&old, now);
        fill_required(&mut new, cv.metadata.generation, now);
        let changed = new != old;
        cv.data["status"] = new;
        changed
    })
    .await
}

/// Adds `spec.overrides` entry `{kind, group, namespace, name, unmanaged: true}` for `id`
/// unless one for that object is there already, so that `cvo` (the operator's passes and
/// repairs, `cvo apply`) leaves the object alone. `Written` when the entry was added,
/// `Unchanged` when it was there, `Absent` without a ClusterVersion.
pub async fn ensure_unmanaged(
    cluster: &Cluster,
    retry: &RetryPolicy,
    id: &crate::release::ObjectId,
) -> Result<WriteOutcome, ClusterVersionError> {
    let entry = json!({"kind": id.kind, "group": id.group,
        "namespace": id.namespace.clone().unwrap_or_default(), "name": id.name, "unmanaged": true});
    read_modify_write(cluster, retry, Part::Spec, |cv| {
        if super::spec::Spec::of(cv).unmanaged.contains(id) {
            return false;
        }
        if !cv.data["spec"].is_object() {
            cv.data["spec"] = json!({});
        }
        match cv.data["spec"]["overrides"].as_array_mut() {
            Some(list) => list.push(entry.clone()),
            None => cv.data["spec"]["overrides"] = json!([entry]),
        }
        true
    })
    .await
}

/// Which part of ClusterVersion a write replaces.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Part {
    Spec,
    Status,
}

/// GET, `change` (false: nothing to write), PUT with the resourceVersion read as precondition;
/// a conflict starts over from a fresh read, other failures follow the retry policy.
async fn read_modify_write(
    cluster: &Cluster,
    retry: &RetryPolicy,
    part: Part,
    change: impl Fn(&mut DynamicObject) -> bool,
) -> Result<WriteOutcome, ClusterVersionError> {
    let Some(api) = api(cluster).await? else {
        return Ok(WriteOutcome::Absent);
    };
    for attempt in 1..=retry.attempts {
        let Some(mut cv) = retry
            .run(|| api.get_opt(NAME))
            .await
            .map_err(|(e, _)| ClusterVersionError::Read(e))?
        else {
            return Ok(WriteOutcome::Absent);
        };
        if !change(&mut cv) {
            return Ok(WriteOutcome::Unchanged);
        }
        let params = PostParams::default();
        let written = match part {
            Part::Status => api.replace_status(NAME, &params, &cv).await,
            Part::Spec => api.replace(NAME, &params, &cv).await,
        };
        match written {
            Ok(_) => return Ok(WriteOutcome::Written),
            Err(kube::Error::Api(s)) if s.code == 409 => continue,
            Err(e) => {
                let e = RequestError::Kube(e);
                if classify(&e) == Verdict::Fail || attempt == retry.attempts {
                    return Err(match part {
                        Part::Status => ClusterVersionError::Write(e),
                        Part::Spec => ClusterVersionError::WriteSpec(e),
                    });
                }
                tokio::time::sleep(retry.delay(attempt)).await;
            }
        }
    }
    Err(ClusterVersionError::Conflict(retry.attempts))
}

/// Replaces ClusterVersion status with what `change` makes of it (pure; the same status: no
/// write), read again and retried on conflict.
///
/// # Errors
///
/// [`ClusterVersionError::Read`] or [`ClusterVersionError::Discovery`] when ClusterVersion
/// cannot be read, [`ClusterVersionError::Write`] when the write is refused,
/// [`ClusterVersionError::Conflict`] when it keeps conflicting.
pub async fn write_status_with(
    cluster: &Cluster,
    retry: &RetryPolicy,
    change: impl Fn(&Value) -> Value,
) -> Result<WriteOutcome, ClusterVersionError> {
    read_modify_write(cluster, retry, Part::Status, |cv| {
        let old = status(cv).clone();
        let new = change(&old);
        let changed = new != old;
        cv.data["status"] = new;
        changed
    })
    .await
}

/// Every condition in the status.
pub fn conditions(cv: &DynamicObject) -> Vec<Condition> {
    status(cv)
        .get("conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| serde_json::from_value(c.clone()).ok())
        .collect()
}

/// True when the newest history entry is `version`, Completed: a pass towards it is a
/// re-apply, not an update in progress.
pub fn completed(cv: &DynamicObject, version: &str) -> bool {
    status(cv)
        .get("history")
        .and_then(Value::as_array)
        .and_then(|h| h.first())
        .is_some_and(|h| {
            h.get("version").and_then(Value::as_str) == Some(version)
                && h.get("state").and_then(Value::as_str) == Some("Completed")
        })
}

/// The status with what an update service said (pure): `availableUpdates` and
/// `conditionalUpdates` replaced by `lists` (`None`: the stored ones kept; a `null`
/// `conditionalUpdates` is left out), and `condition` (`RetrievedUpdates`) merged in. A
/// conditional update's condition keeps its `lastTransitionTime` while its status is the same
/// (matched by release image), so an identical answer yields an identical status.
/// `availableUpdates` is always present (`null` when there is nothing), as OpenShift's schema
/// requires.
pub fn with_available_updates(
    old: &Value,
    lists: Option<&(Value, Value)>,
    condition: &Condition,
    now: jiff::Timestamp,
) -> Value {
    let mut status = object_or_empty(old);
    if let Some((available, conditional)) = lists {
        status["availableUpdates"] = available.clone();
        let mut conditional = conditional.clone();
        if let Some(entries) = conditional.as_array_mut() {
            let before = old
                .get("conditionalUpdates")
                .and_then(Value::as_array)
                .map(Vec::as_slice)
                .unwrap_or_default();
            for entry in entries.iter_mut() {
                keep_transition_times(entry, before);
            }
        }
        match (conditional.is_null(), status.as_object_mut()) {
            (true, Some(map)) => {
                map.remove("conditionalUpdates");
            }
            _ => status["conditionalUpdates"] = conditional,
        }
    } else if status.get("availableUpdates").is_none() {
        status["availableUpdates"] = Value::Null;
    }
    status["conditions"] =
        Value::Array(merge_conditions(old, std::slice::from_ref(condition), now));
    status
}

/// `entry`'s conditions take the `lastTransitionTime` of the same condition, same status, of
/// the entry for the same release image in `before`.
pub fn keep_transition_times(entry: &mut Value, before: &[Value]) {
    let image = entry.pointer("/release/image").cloned();
    let Some(old) = before
        .iter()
        .find(|o| image.is_some() && o.pointer("/release/image") == image.as_ref())
    else {
        return;
    };
    let Some(conditions) = entry.get_mut("conditions").and_then(Value::as_array_mut) else {
        return;
    };
    for c in conditions {
        let since = old
            .get("conditions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .find(|o| o.get("type") == c.get("type") && o.get("status") == c.get("status"))
            .and_then(|o| o.get("lastTransitionTime"))
            .cloned();
        if let Some(since) = since {
            c["lastTransitionTime"] = since;
        }
    }
}

/// True when `spec` still names the update service `(upstream, channel)` (absent reads as
/// empty).
pub fn names_update_service(spec: Option<&Value>, (upstream, channel): (&str, &str)) -> bool {
    let text = |k: &str| {
        spec.and_then(|s| s.get(k))
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    text("upstream") == upstream && text("channel") == channel
}

/// Writes what the update service `source` (`(upstream, channel)`) said (see
/// [`with_available_updates`]), only when it changes the status — and only while the spec
/// still names that service: an answer for a channel the administrator has left since is
/// not written (`Unchanged`). `carry(old, new)` puts back what others keep in the lists it
/// replaces (the preflight's entry of the target, `crate::preflight::status::carry_over`).
pub async fn write_available_updates(
    cluster: &Cluster,
    retry: &RetryPolicy,
    source: (&str, &str),
    lists: Option<(Value, Value)>,
    condition: &Condition,
    carry: fn(&Value, &mut Value),
) -> Result<WriteOutcome, ClusterVersionError> {
    read_modify_write(cluster, retry, Part::Status, |cv| {
        if !names_update_service(cv.data.get("spec"), source) {
            return false;
        }
        let old = status(cv).clone();
        let mut new =
            with_available_updates(&old, lists.as_ref(), condition, jiff::Timestamp::now());
        carry(&old, &mut new);
        let changed = new != old;
        cv.data["status"] = new;
        changed
    })
    .await
}

#[cfg(test)]
mod available_updates_tests {
    use super::*;
    use crate::status::ConditionStatus;

    fn retrieved(status: ConditionStatus, reason: &str) -> Condition {
        Condition::new("RetrievedUpdates", status, reason, "")
    }

    #[test]
    fn lists_are_replaced_cleared_or_kept_and_transition_times_stay() {
        let t0 = jiff::Timestamp::from_second(1_000).unwrap();
        let t1 = jiff::Timestamp::from_second(2_000).unwrap();
        let conditional = |time: &str| {
            json!([{"release": {"version": "1.6.0", "image": "i:1.6.0"}, "risks": [],
                    "conditions": [{"type": "Recommended", "status": "False", "reason": "R", "message": "m", "lastTransitionTime": time}]}])
        };
        let lists = (
            json!([{"version": "1.5.0", "image": "i:1.5.0"}]),
            conditional("t0"),
        );
        let ok = retrieved(ConditionStatus::True, "");
        let s1 = with_available_updates(
            &json!({"desired": {"version": "1.4.0"}}),
            Some(&lists),
            &ok,
            t0,
        );
        assert_eq!(s1["availableUpdates"], lists.0);
        assert_eq!(s1["desired"]["version"], "1.4.0", "the rest is kept");
        assert_eq!(s1["conditions"][0]["type"], "RetrievedUpdates");
        // The same answer later: nothing changes (the old transition times stay).
        let again = (lists.0.clone(), conditional("t1"));
        assert_eq!(with_available_updates(&s1, Some(&again), &ok, t1), s1);
        // A failure keeps the lists.
        let failed = retrieved(ConditionStatus::False, "RemoteFailed");
        let s2 = with_available_updates(&s1, None, &failed, t1);
        assert_eq!(s2["availableUpdates"], s1["availableUpdates"]);
        assert_eq!(s2["conditionalUpdates"], s1["conditionalUpdates"]);
        assert_eq!(s2["conditions"][0]["status"], "False");
        // Cleared: null, and no conditionalUpdates.
        let none = retrieved(ConditionStatus::False, "NoUpstream");
        let s3 = with_available_updates(&s2, Some(&(Value::Null, Value::Null)), &none, t1);
        assert!(s3["availableUpdates"].is_null() && s3.get("availableUpdates").is_some());
        assert!(s3.get("conditionalUpdates").is_none(), "{s3}");
        // Nothing stored and nothing known: availableUpdates is there, null.
        let s4 = with_available_updates(&Value::Null, None, &failed, t0);
        assert!(
            s4.get("availableUpdates").is_some_and(Value::is_null),
            "{s4}"
        );
    }

    #[test]
    fn an_answer_is_written_only_while_the_spec_names_its_service() {
        let spec = json!({"upstream": "http://g/", "channel": "stable-1"});
        assert!(names_update_service(Some(&spec), ("http://g/", "stable-1")));
        assert!(!names_update_service(Some(&spec), ("http://g/", "fast-1")));
        assert!(!names_update_service(
            Some(&spec),
            ("http://h/", "stable-1")
        ));
        assert!(names_update_service(None, ("", "")));
        assert!(names_update_service(
            Some(&json!({"clusterID": "x"})),
            ("", "")
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::ConditionStatus;

    fn d(version: &str) -> Desired<'_> {
        Desired {
            version,
            image: "quay.io/r@sha256:1",
            version_hash: "h",
            verified: false,
        }
    }

    fn conds(status: ConditionStatus) -> Vec<Condition> {
        vec![Condition::new("Failing", status, "", "")]
    }

    #[test]
    fn observed_generation_follows_the_spec_a_write_answers_and_never_goes_back() {
        let now = jiff::Timestamp::from_second(1_000).unwrap();
        let pass = |observed| Update::Pass {
            capabilities: None,
            version: "1.0.0",
            image: "",
            version_hash: "",
            verified: false,
            conditions: &[],
            complete: true,
            accepted_risks: None,
            observed,
            started: None,
        };
        let s1 = pass(Some(3)).next(&Value::Null, now);
        assert_eq!(s1["observedGeneration"], 3);
        let older = Update::Conditions {
            conditions: &[],
            observed: Some(2),
        };
        assert_eq!(older.next(&s1, now)["observedGeneration"], 3, "not lowered");
        assert_eq!(pass(None).next(&s1, now)["observedGeneration"], 3, "kept");
        assert_eq!(pass(Some(4)).next(&s1, now)["observedGeneration"], 4);
    }

    #[test]
    fn a_new_history_entry_starts_when_the_pass_began_not_when_it_was_written() {
        let (began, now) = (
            jiff::Timestamp::from_second(1_000).unwrap(),
            jiff::Timestamp::from_second(1_090).unwrap(),
        );
        let pass = |version| Update::Pass {
            capabilities: None,
            version,
            image: "",
            version_hash: "",
            verified: false,
            conditions: &[],
            complete: true,
            accepted_risks: None,
            observed: None,
            started: Some(began),
        };
        let s1 = pass("1.0.0").next(&Value::Null, now);
        assert_eq!(s1["history"][0]["startedTime"], began.to_string());
        assert_eq!(s1["history"][0]["completionTime"], now.to_string());
        // An entry already there keeps its start.
        let later = jiff::Timestamp::from_second(5_000).unwrap();
        let s2 = pass("1.0.0").next(&s1, later);
        assert_eq!(s2["history"][0]["startedTime"], began.to_string());
        // A Partial entry superseded by a new one ends when the new one began.
        let partial = json!({"history": [{"state": "Partial", "version": "0.9.0",
            "startedTime": "1970-01-01T00:00:00Z", "completionTime": null}]});
        let s3 = pass("1.0.0").next(&partial, now);
        assert_eq!(s3["history"][0]["startedTime"], began.to_string());
        assert_eq!(s3["history"][1]["completionTime"], began.to_string());
    }

    #[test]
    fn history_goes_partial_then_completed_newest_first() {
        let t0 = jiff::Timestamp::from_second(1_000).unwrap();
        let s1 = next_status(
            &Value::Null,
            d("1.0.0"),
            &conds(ConditionStatus::True),
            false,
            None,
            t0,
        );
        assert_eq!(s1["history"][0]["state"], "Partial");
        assert_eq!(s1["desired"]["version"], "1.0.0");
        let s2 = next_status(
            &s1,
            d("1.0.0"),
            &conds(ConditionStatus::False),
            true,
            None,
            t0,
        );
        assert_eq!(s2["history"].as_array().unwrap().len(), 1);
        assert_eq!(s2["history"][0]["state"], "Completed");
        let s3 = next_status(
            &s2,
            d("1.1.0"),
            &conds(ConditionStatus::False),
            false,
            None,
            t0,
        );
        assert_eq!(s3["history"][0]["version"], "1.1.0");
        assert_eq!(s3["history"][1]["state"], "Completed");
    }

    #[test]
    fn same_pass_gives_same_status_and_history_is_capped() {
        let t0 = jiff::Timestamp::from_second(1_000).unwrap();
        let t1 = jiff::Timestamp::from_second(2_000).unwrap();
        let s1 = next_status(
            &Value::Null,
            d("1.0.0"),
            &conds(ConditionStatus::False),
            true,
            None,
            t0,
        );
        assert_eq!(
            next_status(
                &s1,
                d("1.0.0"),
                &conds(ConditionStatus::False),
                true,
                None,
                t1
            ),
            s1
        );
        let mut s = s1;
        for i in 0..150 {
            s = next_status(
                &s,
                d(&format!("1.{i}.0")),
                &conds(ConditionStatus::False),
                true,
                None,
                t0,
            );
        }
        assert_eq!(s["history"].as_array().unwrap().len(), HISTORY_LIMIT);
        assert_eq!(s["history"][0]["version"], "1.149.0");
    }

    #[test]
    fn foreign_conditions_are_kept_and_risks_recorded() {
        let t0 = jiff::Timestamp::from_second(1_000).unwrap();
        let t1 = jiff::Timestamp::from_second(2_000).unwrap();
        let accepted = [Condition::new(
            "ReleaseAccepted",
            ConditionStatus::True,
            "PayloadLoaded",
            "",
        )];
        let s0 = with_conditions(&Value::Null, &accepted, t0);
        assert!(s0.get("history").is_none(), "conditions only: {s0}");
        let s1 = next_status(
            &s0,
            d("1.0.0"),
            &conds(ConditionStatus::False),
            false,
            Some("UpgradeableFalse"),
            t1,
        );
        let types: Vec<&str> = s1["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["type"].as_str().unwrap())
            .collect();
        assert_eq!(types, ["ReleaseAccepted", "Failing"]);
        assert_eq!(s1["conditions"][0]["lastTransitionTime"], t0.to_string());
        assert_eq!(s1["history"][0]["acceptedRisks"], "UpgradeableFalse");
        // Same status again: the transition time stays.
        let s2 = with_conditions(&s1, &accepted, t1);
        assert_eq!(s2, s1);
    }

    #[test]
    fn a_pass_records_the_release_image_and_hash_in_desired_and_history() {
        let t0 = jiff::Timestamp::from_second(1_000).unwrap();
        let s1 = next_status(&Value::Null, d("1.0.0"), &[], false, None, t0);
        assert_eq!(
            s1["desired"],
            json!({"version": "1.0.0", "image": "quay.io/r@sha256:1"})
        );
        assert_eq!(s1["history"][0]["image"], "quay.io/r@sha256:1");
        assert_eq!(s1["versionHash"], "h");
        let without = Desired {
            version: "1.0.0",
            image: "",
            version_hash: "",
            verified: false,
        };
        let s0 = next_status(&Value::Null, without, &[], false, None, t0);
        assert_eq!(s0["desired"], json!({"version": "1.0.0", "image": ""}));
        assert_eq!(s0["history"][0]["verified"], false);
        // A release image whose signature verified: its new entry says so; the entry of
        // the release before it keeps what it had.
        let verified = Desired {
            verified: true,
            ..d("1.1.0")
        };
        let s2 = next_status(&s0, verified, &[], false, None, t0);
        assert_eq!(s2["history"][0]["verified"], true);
        assert_eq!(s2["history"][1]["verified"], false);
        assert_eq!(s0["history"][0]["image"], "", "never absent");
        // The same release, now with its image known: the entry learns it.
        let s2 = next_status(&s0, d("1.0.0"), &[], true, None, t0);
        assert_eq!(s2["history"][0]["image"], "quay.io/r@sha256:1");
    }

    #[test]
    fn a_superseded_partial_entry_gets_the_time_it_was_superseded() {
        let t0 = jiff::Timestamp::from_second(1_000).unwrap();
        let t1 = jiff::Timestamp::from_second(2_000).unwrap();
        let t2 = jiff::Timestamp::from_second(3_000).unwrap();
        let done = next_status(&Value::Null, d("1.0.0"), &[], true, None, t0);
        let partial = next_status(&done, d("1.1.0"), &[], false, None, t1);
        assert_eq!(partial["history"][0]["completionTime"], Value::Null);
        assert_eq!(
            partial["history"][1]["completionTime"],
            t0.to_string(),
            "a completed entry keeps its own time"
        );
        let next = next_status(&partial, d("1.2.0"), &[], false, None, t2);
        assert_eq!(next["history"][0]["completionTime"], Value::Null);
        assert_eq!(next["history"][1]["version"], "1.1.0");
        assert_eq!(next["history"][1]["state"], "Partial");
        assert_eq!(next["history"][1]["completionTime"], t2.to_string());
        assert_eq!(next["history"][2]["completionTime"], t0.to_string());
    }

    #[test]
    fn every_written_status_holds_what_openshifts_schema_requires() {
        let now = jiff::Timestamp::from_second(5_000).unwrap();
        // A conditions-only write to a ClusterVersion without status.
        let mut s = with_conditions(
            &Value::Null,
            &[Condition::new(
                "ReleaseAccepted",
                ConditionStatus::False,
                "X",
                "",
            )],
            now,
        );
        fill_required(&mut s, Some(2), now);
        assert_eq!(s["desired"], json!({"version": "", "image": ""}));
        assert_eq!(s["versionHash"], "");
        assert_eq!(s["observedGeneration"], 2);
        assert!(s["availableUpdates"].is_null());
        assert!(s.as_object().unwrap().contains_key("availableUpdates"));

        // A status written by an older cvo: entries without image, verified or completion
        // time; a foreign condition without transition time; an update list someone filled.
        let mut old = json!({
            "desired": {"version": "1.1.0"},
            "observedGeneration": 7,
            "availableUpdates": [{"version": "1.2.0", "image": "quay.io/r:1.2.0"}],
            "history": [
                {"state": "Partial", "version": "1.1.0", "startedTime": "1970-01-01T00:33:20Z"},
                {"state": "Partial", "version": "1.0.1", "startedTime": "1970-01-01T00:25:00Z", "completionTime": null},
                {"state": "Completed", "version": "1.0.0", "startedTime": "1970-01-01T00:16:40Z", "completionTime": "1970-01-01T00:20:00Z", "image": "img", "verified": true},
            ],
            "conditions": [{"type": "Foreign", "status": "True"}],
        });
        let kept = old.clone();
        fill_required(&mut old, Some(9), now);
        assert_eq!(old["desired"], json!({"version": "1.1.0", "image": ""}));
        assert_eq!(old["observedGeneration"], 7, "never changed once there");
        assert_eq!(
            old["availableUpdates"], kept["availableUpdates"],
            "never overwritten"
        );
        assert_eq!(old["history"][0]["completionTime"], Value::Null);
        assert_eq!(old["history"][0]["image"], "");
        assert_eq!(old["history"][0]["verified"], false);
        assert_eq!(
            old["history"][1]["completionTime"], "1970-01-01T00:33:20Z",
            "superseded when the next one started"
        );
        assert_eq!(
            old["history"][2], kept["history"][2],
            "complete entries untouched"
        );
        assert_eq!(old["conditions"][0]["lastTransitionTime"], now.to_string());
        // Filling again changes nothing: a write of the same status is no write.
        let once = old.clone();
        fill_required(&mut old, Some(10), now);
        assert_eq!(old, once);
    }

    #[test]
    fn the_previous_image_is_the_newest_entrys_when_it_is_another_release() {
        let cv = |history: Value| -> DynamicObject {
            serde_json::from_value(json!({"apiVersion": API_VERSION, "kind": KIND,
                "metadata": {"name": NAME}, "status": {"history": history}}))
            .unwrap()
        };
        let at = cv(json!([{"version": "1.0.0", "image": "r/x@sha256:a", "state": "Completed"}]));
        assert_eq!(
            previous_image(&at, "1.1.0", None).as_deref(),
            Some("r/x@sha256:a")
        );
        assert_eq!(previous_image(&at, "1.0.0", None), None, "the same release");
        assert_eq!(previous_image(&at, "1.0.0", Some("r/x@sha256:a")), None);
        assert_eq!(
            previous_image(&at, "1.0.0", Some("r/x@sha256:b")).as_deref(),
            Some("r/x@sha256:a"),
            "the same version, another image"
        );
        let no_image = cv(json!([{"version": "1.0.0", "image": "", "state": "Completed"}]));
        assert_eq!(previous_image(&no_image, "1.1.0", None), None);
        assert_eq!(previous_image(&cv(json!([])), "1.1.0", None), None);
    }
}
