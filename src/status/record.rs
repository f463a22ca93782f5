//! The deletion record: what the delete manifests of past passes did to this cluster, kept in
//! the cluster so that a restarted `cvo` (or another machine running `cvo apply`) knows it too.
//!
//! The object of a delete manifest can be absent for two reasons the cluster alone cannot tell
//! apart: `cvo` deleted it (under some release), or it never existed here (the component was
//! never installed on this cluster). The record — a ConfigMap [`NAME`] in the state namespace,
//! one JSON document under [`KEY`] — remembers each deletion `cvo` requested: when, when the
//! object was gone, and under which release. The sync uses it to:
//!
//! - refuse a minor/major update that still ships a delete manifest whose deletion was
//!   completed under an earlier minor release (`StaleDeleteManifest`), and only those;
//! - tell "already deleted by us" from "never existed" in its reports;
//! - report an object that reappears after its deletion was completed (and delete it again).
//!
//! Fails closed: a record that cannot be read or parsed is [`RecordError`], never an empty
//! record; the caller then treats every absent delete target as possibly deleted earlier. Only a
//! missing ConfigMap (or namespace) is an empty record. Writes are read-modify-write with the
//! resourceVersion as precondition, retried on conflict, and skipped when nothing changed.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ObjectMeta, PostParams};
use serde::{Deserialize, Serialize};

use crate::apply::RetryPolicy;
use crate::apply::retry::{RequestError, Verdict, classify};
use crate::cluster::Cluster;
use crate::release::ObjectId;

/// Name of the ConfigMap.
pub const NAME: &str = "cvo-deletion-record";
/// Its data key.
pub const KEY: &str = "deletions.json";
/// Most entries kept; past it the oldest completed ones are dropped (a ConfigMap holds at most
/// 1 MiB; an entry is about 250 bytes).
pub const LIMIT: usize = 2000;

/// One deletion `cvo` requested.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    #[serde(flatten)]
    pub object: ObjectId,
    /// When `cvo` first saw the object being deleted (by its request).
    pub requested: jiff::Timestamp,
    /// When `cvo` first saw it gone; `None` while the deletion is in progress.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed: Option<jiff::Timestamp>,
    /// The release (version) being applied at the last of those two moments.
    pub release: String,
}

#[derive(Debug, Serialize, Deserialize)]
struct Document {
    entries: Vec<Entry>,
}

/// The record: entries by object.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Record {
    entries: BTreeMap<ObjectId, Entry>,
}

/// What [`Record::saw_present`] learned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Seen {
    /// Nothing new, or a new deletion.
    Noted,
    /// The object had been deleted (this entry) and exists again.
    Reappeared(Entry),
}

impl Record {
    pub fn get(&self, id: &ObjectId) -> Option<&Entry> {
        self.entries.get(id)
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The object of a delete manifest exists and is being deleted (or was just deleted and
    /// still has finalizers): opens an entry, unless one is open already.
    pub fn saw_deleting(&mut self, id: &ObjectId, now: jiff::Timestamp, release: &str) -> Seen {
        match self.entries.get(id) {
            Some(e) if e.completed.is_none() => Seen::Noted,
            previous => {
                let seen = match previous {
                    Some(e) => Seen::Reappeared(e.clone()),
                    None => Seen::Noted,
                };
                self.entries.insert(
                    id.clone(),
                    Entry {
                        object: id.clone(),
                        requested: now,
                        completed: None,
                        release: release.to_owned(),
                    },
                );
                seen
            }
        }
    }

    /// `cvo` deleted the object and it is gone now (in one step, or ending an open entry).
    /// Returns what [`Record::saw_deleting`] would have said about its existence.
    pub fn saw_deleted(&mut self, id: &ObjectId, now: jiff::Timestamp, release: &str) -> Seen {
        let seen = self.saw_deleting(id, now, release);
        self.saw_gone(id, now, release);
        seen
    }

    /// The object is absent: closes an open entry. Without an entry nothing is recorded (the
    /// object never existed as far as `cvo` knows).
    pub fn saw_gone(&mut self, id: &ObjectId, now: jiff::Timestamp, release: &str) {
        if let Some(e) = self.entries.get_mut(id)
            && e.completed.is_none()
        {
            e.completed = Some(now);
            e.release = release.to_owned();
        }
    }

    /// Whether the deletion of `id` was completed under a minor release older than `target`
    /// (what makes its delete manifest stale in a minor/major update). An entry whose release
    /// is not a version counts as older (fail closed).
    pub fn completed_before_minor(&self, id: &ObjectId, target: &semver::Version) -> bool {
        self.entries.get(id).is_some_and(|e| {
            e.completed.is_some()
                && e.release
                    .parse::<semver::Version>()
                    .map_or(true, |v| (v.major, v.minor) < (target.major, target.minor))
        })
    }

    /// Drops the oldest completed entries past [`LIMIT`].
    fn trim(&mut self) {
        let excess = self.entries.len().saturating_sub(LIMIT);
        if excess == 0 {
            return;
        }
        let mut completed: Vec<(jiff::Timestamp, ObjectId)> = self
            .entries
            .values()
            .filter_map(|e| e.completed.map(|t| (t, e.object.clone())))
            .collect();
        completed.sort();
        for (_, id) in completed.into_iter().take(excess) {
            self.entries.remove(&id);
        }
    }

    fn parse(text: &str) -> serde_json::Result<Self> {
        let doc: Document = serde_json::from_str(text)?;
        Ok(Record {
            entries: doc
                .entries
                .into_iter()
                .map(|e| (e.object.clone(), e))
                .collect(),
        })
    }

    fn render(&self) -> String {
        let doc = Document {
            entries: self.entries.values().cloned().collect(),
        };
        serde_json::to_string_pretty(&doc).expect("a record serializes")
    }
}

/// Where the record lives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Location {
    pub namespace: String,
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ConfigMap {}/{NAME}", self.namespace)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("reading the deletion record ({0}): {1}")]
    Read(Location, #[source] RequestError),
    #[error(
        "the deletion record ({0}) is not valid: {1}; fix the key {KEY} or delete the ConfigMap (cvo then treats every absent delete target as never deleted by it)"
    )]
    Invalid(Location, #[source] serde_json::Error),
    #[error("writing the deletion record ({0}): {1}")]
    Write(Location, #[source] RequestError),
    #[error(
        "writing the deletion record ({0}): its namespace does not exist (create it, or choose another with --state-namespace)"
    )]
    NoNamespace(Location),
    #[error("writing the deletion record ({0}): still conflicting after {1} attempts")]
    Conflict(Location, u32),
}

/// The record and the resourceVersion it was read at (`None`: no ConfigMap yet).
async fn fetch(
    api: &Api<ConfigMap>,
    retry: &RetryPolicy,
    at: &Location,
) -> Result<(Record, Option<ConfigMap>), RecordError> {
    let got = retry
        .run(|| api.get_opt(NAME))
        .await
        .map_err(|(e, _)| RecordError::Read(at.clone(), e))?;
    let Some(cm) = got else {
        return Ok((Record::default(), None));
    };
    let text = cm
        .data
        .as_ref()
        .and_then(|d| d.get(KEY))
        .map(String::as_str)
        .unwrap_or(r#"{"entries": []}"#);
    let record = Record::parse(text).map_err(|e| RecordError::Invalid(at.clone(), e))?;
    Ok((record, Some(cm)))
}

/// Reads the record (empty when there is no ConfigMap yet).
///
/// # Errors
///
/// [`RecordError::Read`] when the ConfigMap cannot be read (after the retries of `retry`),
/// [`RecordError::Invalid`] when its key [`KEY`] is not a valid record.
pub async fn read(
    cluster: &Cluster,
    retry: &RetryPolicy,
    at: &Location,
) -> Result<Record, RecordError> {
    let api: Api<ConfigMap> = Api::namespaced(cluster.client().clone(), &at.namespace);
    Ok(fetch(&api, retry, at).await?.0)
}

/// Applies `change` to the record in the cluster: read, change, write when it changed; a
/// conflict starts over from a fresh read. Returns what `change` returned on the write that
/// counted.
///
/// # Errors
///
/// What [`read`] fails with, and when writing fails: [`RecordError::NoNamespace`] when the
/// namespace does not exist, [`RecordError::Write`] when the server refuses (or keeps failing
/// past the retries), [`RecordError::Conflict`] when every attempt met a concurrent write.
pub async fn update<T>(
    cluster: &Cluster,
    retry: &RetryPolicy,
    at: &Location,
    change: impl Fn(&mut Record) -> T,
) -> Result<T, RecordError> {
    let api: Api<ConfigMap> = Api::namespaced(cluster.client().clone(), &at.namespace);
    for attempt in 1..=retry.attempts {
        let (mut record, existing) = fetch(&api, retry, at).await?;
        let before = record.clone();
        let out = change(&mut record);
        record.trim();
        if record == before {
            return Ok(out);
        }
        let mut data = BTreeMap::new();
        data.insert(KEY.to_owned(), record.render());
        let written = match existing {
            Some(mut cm) => {
                cm.data = Some(data);
                api.replace(NAME, &PostParams::default(), &cm).await
            }
            None => {
                let cm = ConfigMap {
                    metadata: ObjectMeta {
                        name: Some(NAME.to_owned()),
                        namespace: Some(at.namespace.clone()),
                        labels: Some(BTreeMap::from([(
                            "app.kubernetes.io/managed-by".to_owned(),
                            "cvo".to_owned(),
                        )])),
                        ..Default::default()
                    },
                    data: Some(data),
                    ..Default::default()
                };
                api.create(&PostParams::default(), &cm).await
            }
        };
        match written {
            Ok(_) => return Ok(out),
            // Someone wrote in between (or created it first): start over.
            Err(kube::Error::Api(s)) if s.code == 409 => continue,
            Err(kube::Error::Api(s)) if s.code == 404 => {
                return Err(RecordError::NoNamespace(at.clone()));
            }
            Err(e) => {
                let e = RequestError::Kube(e);
                if classify(&e) == Verdict::Fail || attempt == retry.attempts {
                    return Err(RecordError::Write(at.clone(), e));
                }
                tokio::time::sleep(retry.delay(attempt)).await;
            }
        }
    }
    Err(RecordError::Conflict(at.clone(), retry.attempts))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(name: &str) -> ObjectId {
        ObjectId::new("", "ConfigMap", Some("ns"), name)
    }

    fn at(s: &str) -> jiff::Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn a_deletion_is_opened_then_completed_and_a_return_is_noticed() {
        let mut r = Record::default();
        let t1 = at("2026-01-01T00:00:00Z");
        let t2 = at("2026-01-02T00:00:00Z");
        assert_eq!(r.saw_deleting(&id("a"), t1, "1.4.0"), Seen::Noted);
        // Seen again while still in progress: the first request time stays.
        assert_eq!(r.saw_deleting(&id("a"), t2, "1.4.1"), Seen::Noted);
        assert_eq!(r.get(&id("a")).unwrap().requested, t1);
        r.saw_gone(&id("a"), t2, "1.4.1");
        let done = r.get(&id("a")).unwrap().clone();
        assert_eq!((done.completed, done.release.as_str()), (Some(t2), "1.4.1"));
        // Absent without an entry: nothing to record.
        r.saw_gone(&id("never"), t2, "1.4.1");
        assert!(r.get(&id("never")).is_none());
        // Present again after completion.
        assert_eq!(r.saw_deleted(&id("a"), t2, "1.4.2"), Seen::Reappeared(done));
        assert!(r.get(&id("a")).unwrap().completed.is_some());
    }

    #[test]
    fn only_deletions_completed_under_an_earlier_minor_are_stale() {
        let mut r = Record::default();
        let t = at("2026-01-01T00:00:00Z");
        r.saw_deleted(&id("old"), t, "1.4.2");
        r.saw_deleted(&id("this-minor"), t, "1.5.0");
        r.saw_deleting(&id("open"), t, "1.4.0");
        r.saw_deleted(&id("unversioned"), t, "unknown version");
        let target: semver::Version = "1.5.0".parse().unwrap();
        assert!(r.completed_before_minor(&id("old"), &target));
        assert!(!r.completed_before_minor(&id("this-minor"), &target));
        assert!(!r.completed_before_minor(&id("open"), &target));
        assert!(!r.completed_before_minor(&id("never"), &target));
        assert!(r.completed_before_minor(&id("unversioned"), &target));
    }

    #[test]
    fn round_trips_and_keeps_open_entries_when_trimmed() {
        let mut r = Record::default();
        let base = at("2026-01-01T00:00:00Z");
        for i in 0..LIMIT + 5 {
            let t = base + jiff::SignedDuration::from_secs(i as i64);
            if i % 2 == 0 {
                r.saw_deleted(&id(&format!("cm-{i:05}")), t, "1.0.0");
            } else {
                r.saw_deleting(&id(&format!("cm-{i:05}")), t, "1.0.0");
            }
        }
        r.trim();
        assert_eq!(r.len(), LIMIT);
        // The oldest completed ones went; every open one stayed.
        assert!(r.get(&id("cm-00000")).is_none());
        assert!(r.get(&id("cm-00001")).is_some());
        let back = Record::parse(&r.render()).unwrap();
        assert_eq!(back, r);
        assert!(Record::parse("{not json").is_err());
        let cluster_scoped = ObjectId::new("rbac.authorization.k8s.io", "ClusterRole", None, "x");
        let mut r = Record::default();
        r.saw_deleted(&cluster_scoped, base, "1.0.0");
        assert!(!r.render().contains("namespace"), "{}", r.render());
    }
}
