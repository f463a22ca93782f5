//! The deletion bookkeeping of a sync: which delete manifests' objects are absent before an
//! update (the stale-delete preconditions), which deletions are unfinished after the pass
//! (read back from the cluster), and what the deletion record ([`crate::status::record`])
//! learns from the pass — "deleted by cvo" as opposed to "never existed".
//!
//! Fails closed: an object that cannot be read is neither absent nor present (it is
//! *unknown*, which makes `Upgradeable` Unknown); a deletion record that cannot be read counts
//! every absent delete target as possibly deleted earlier.

use std::time::Duration;

use futures::StreamExt;

use crate::apply::deletions::{self, Observed};
use crate::apply::{Action, Applier, PassReport, PendingDeletion};
use crate::cluster::Cluster;
use crate::release::{ObjectId, Release};
use crate::status::UpdateType;
use crate::status::conditions::UnknownDeletion;
use crate::status::record::{self, Record, RecordError, Seen};
use crate::status::update::name_list;

use super::SyncOptions;

/// The deletion record as the sync read it: `None` when none is kept (no location, or the
/// release has no delete manifests).
pub(super) type RecordRead = Option<Result<Record, RecordError>>;

/// Reads the deletion record, when the release has delete manifests and `options` keeps one.
pub(super) async fn read_record(
    cluster: &Cluster,
    release: &Release,
    options: &SyncOptions,
) -> RecordRead {
    let deletes = release.manifests.iter().any(|m| m.is_delete());
    match &options.record {
        Some(at) if deletes => Some(record::read(cluster, &options.apply.retry, at).await),
        _ => None,
    }
}

/// The delete manifests whose objects are absent before a minor or major update.
#[derive(Debug, Default)]
pub(super) struct Absent {
    /// Deleted under an earlier minor release (per the record; without a readable record,
    /// every absent one): these refuse the update.
    pub stale: Vec<ObjectId>,
    /// Absent, and never deleted by cvo on this cluster (per the record): not stale.
    pub never_deleted: Vec<ObjectId>,
    /// Could not be read: neither absent nor present.
    pub unreadable: Vec<ObjectId>,
}

impl Absent {
    /// Looks the delete targets up (only a minor or major update needs them: for any other,
    /// nothing is read and all lists are empty).
    pub(super) async fn before(
        applier: &Applier<'_>,
        update: &UpdateType,
        record: &RecordRead,
    ) -> Self {
        if *update != UpdateType::MinorOrMajor {
            return Absent::default();
        }
        let (absent, unreadable) = delete_targets(applier).await;
        let (stale, never_deleted) = match (record, applier.release().version()) {
            (Some(Ok(r)), Some(target)) => absent
                .into_iter()
                .partition(|id| r.completed_before_minor(id, target)),
            // No record, or one that cannot be read: each could have been deleted earlier.
            _ => (absent, Vec::new()),
        };
        Absent {
            stale,
            never_deleted,
            unreadable,
        }
    }

    /// The warning about delete targets that were never deleted, if any.
    pub(super) fn never_deleted_warning(&self) -> Option<String> {
        if self.never_deleted.is_empty() {
            return None;
        }
        let names: Vec<String> = self.never_deleted.iter().map(ToString::to_string).collect();
        let not_stale = if names.len() == 1 {
            "It does not refuse the update"
        } else {
            "They do not refuse the update"
        };
        Some(format!("{}. {not_stale}", absent_targets(&names, true)))
    }
}

/// `1 delete manifest names an object that is already absent` (`2 delete manifests name
/// objects that are …`), `and that cvo never deleted on this cluster, according to its deletion
/// record` when the record says so, and `: NAMES`.
fn absent_targets(names: &[String], never_deleted: bool) -> String {
    let subject = if names.len() == 1 {
        "delete manifest names an object that is"
    } else {
        "delete manifests name objects that are"
    };
    let record = if never_deleted {
        " and that cvo never deleted on this cluster, according to its deletion record"
    } else {
        ""
    };
    format!(
        "{} {subject} already absent{record}: {}",
        names.len(),
        name_list(names)
    )
}

/// The delete manifests of an install, a reconciliation or a patch update whose objects were
/// already absent and that cvo did not delete earlier (per the record): one warning line
/// (each is logged at info). A minor or major update reported them before the pass.
pub(super) fn already_absent_warning(
    release: &Release,
    report: &PassReport,
    update: &UpdateType,
    record: &RecordRead,
) -> Option<String> {
    let record_read = record.as_ref().and_then(|r| r.as_ref().ok());
    let mut already_absent = Vec::new();
    for r in &report.results {
        let m = &release.manifests[r.index];
        if r.action != Action::AlreadyAbsent || *update == UpdateType::MinorOrMajor {
            continue;
        }
        let earlier = record_read
            .and_then(|r| r.get(&m.id))
            .and_then(|e| e.completed.map(|t| (t, e.release.clone())));
        match earlier {
            // Deleted by an earlier pass: what a delete manifest is for.
            Some((at, under)) => {
                tracing::debug!(manifest = %m.id, %at, release = %under, "delete manifest: deleted earlier");
            }
            None => {
                tracing::info!(manifest = %m.id, location = %m.location, "delete manifest, but the object is already absent");
                already_absent.push(m.id.to_string());
            }
        }
    }
    if already_absent.is_empty() {
        return None;
    }
    // One line, however many: each is logged with -v.
    let check = if already_absent.len() == 1 {
        "check that it names the object you meant (-v logs its file)"
    } else {
        "check that they name the objects you meant (-v logs their files)"
    };
    Some(format!(
        "{}. Nothing to delete; {check}",
        absent_targets(&already_absent, record_read.is_some())
    ))
}

/// The deletions after the pass, read back, and what the record learned.
#[derive(Debug, Default)]
pub(super) struct Settled {
    /// Deletions the release asked for that are not finished.
    pub pending: Vec<PendingDeletion>,
    /// Delete manifests whose objects could not be read back.
    pub unknown: Vec<UnknownDeletion>,
    /// Objects that exist again after the record saw them deleted (deleted again now).
    pub reappeared: Vec<ObjectId>,
    /// Deletions the record saw complete in this pass, and how long each took.
    pub completed: Vec<(ObjectId, Duration)>,
    /// What to tell the user (objects that came back, a record that could not be written).
    pub warnings: Vec<String>,
}

/// Reads back every deletion the pass did not finish, and — unless this is a dry run or no
/// record is kept — writes what the pass saw into the deletion record.
///
/// After it, `pending` and `unknown` hold every delete manifest whose object may still exist
/// (a delete task that failed or was not reached counts as long as its object is there);
/// a record that cannot be written is a warning (after a restart cvo will not know which
/// deletions it did), not a failure of the sync.
pub(super) async fn settle(
    cluster: &Cluster,
    applier: &Applier<'_>,
    report: &PassReport,
    options: &SyncOptions,
    version: &str,
) -> Settled {
    let release = applier.release();
    let (pending, unknown, gone) = unfinished_deletions(applier, report).await;
    let mut settled = Settled {
        pending,
        unknown,
        ..Settled::default()
    };
    let deletes = release.manifests.iter().any(|m| m.is_delete());
    let Some(at) = options
        .record
        .as_ref()
        .filter(|_| deletes && !options.apply.dry_run)
    else {
        return settled;
    };
    let seen = deletions_seen(release, report, &settled.pending, &gone);
    let now = jiff::Timestamp::now();
    let updated = record::update(cluster, &options.apply.retry, at, |r| {
        remember(r, &seen, now, version)
    })
    .await;
    match updated {
        Ok(Remembered { back, completed }) => {
            settled.completed = completed;
            for (id, entry) in back {
                settled.warnings.push(format!(
                    "{id} exists again although cvo saw it deleted on {} (under release {}); it was deleted again",
                    entry.completed.map(|t| t.to_string()).unwrap_or_default(),
                    entry.release
                ));
                settled.reappeared.push(id);
            }
        }
        Err(e) => settled.warnings.push(format!(
            "{e}; after a restart cvo will not know which of these deletions it did"
        )),
    }
    settled
}

/// Every deletion the release asked for that the cluster has not finished, and those the
/// engine cannot tell about. A task's own answer counts when it is definite (deleted, absent,
/// in progress); a delete manifest that failed or was not reached is read back from the
/// cluster, so an object that still exists counts whatever its task did.
async fn unfinished_deletions(
    applier: &Applier<'_>,
    report: &PassReport,
) -> (Vec<PendingDeletion>, Vec<UnknownDeletion>, Vec<ObjectId>) {
    let release = applier.release();
    let mut pending: Vec<PendingDeletion> =
        report.pending_deletions().into_iter().cloned().collect();
    let unread: Vec<usize> = report
        .results
        .iter()
        .filter(|r| release.manifests[r.index].is_delete() && r.pending.is_none())
        .filter(|r| {
            !matches!(
                r.action,
                Action::Deleted | Action::AlreadyAbsent | Action::Unmanaged | Action::Excluded
            )
        })
        .map(|r| r.index)
        .collect();
    let (mut unknown, mut gone) = (Vec::new(), Vec::new());
    for (index, observed) in observe_all(applier, &unread).await {
        match observed {
            Observed::Gone => gone.push(release.manifests[index].id.clone()),
            Observed::Present(p) => pending.push(p),
            Observed::Unknown(error) => unknown.push(UnknownDeletion {
                id: release.manifests[index].id.clone(),
                error,
            }),
        }
    }
    (pending, unknown, gone)
}

/// What this pass saw of each delete manifest's object, for the deletion record.
#[derive(Debug)]
enum Saw {
    /// Deleted by this pass, and gone.
    Deleted,
    /// Being deleted (a deletionTimestamp), by this pass or an earlier one.
    Deleting(Option<jiff::Timestamp>),
    /// Absent.
    Gone,
}

fn deletions_seen(
    release: &Release,
    report: &PassReport,
    pending: &[PendingDeletion],
    gone: &[ObjectId],
) -> Vec<(ObjectId, Saw)> {
    let mut seen: Vec<(ObjectId, Saw)> = report
        .results
        .iter()
        .filter(|r| release.manifests[r.index].is_delete())
        .filter_map(|r| {
            let saw = match r.action {
                Action::Deleted => Saw::Deleted,
                Action::AlreadyAbsent => Saw::Gone,
                _ => return None,
            };
            Some((release.manifests[r.index].id.clone(), saw))
        })
        .collect();
    // Present without a deletionTimestamp means no deletion was requested (it failed first).
    seen.extend(
        pending
            .iter()
            .filter(|p| p.since.is_some())
            .map(|p| (p.id.clone(), Saw::Deleting(p.since))),
    );
    seen.extend(gone.iter().map(|id| (id.clone(), Saw::Gone)));
    seen
}

/// What [`remember`] learned.
#[derive(Debug, Default)]
struct Remembered {
    /// Objects that came back after a completed deletion, with the entry that recorded it.
    back: Vec<(ObjectId, record::Entry)>,
    /// Deletions completed now, and how long they took from the request.
    completed: Vec<(ObjectId, Duration)>,
}

/// Writes what was seen into the record.
fn remember(
    record: &mut Record,
    seen: &[(ObjectId, Saw)],
    now: jiff::Timestamp,
    release: &str,
) -> Remembered {
    let mut out = Remembered::default();
    for (id, saw) in seen {
        let open = record
            .get(id)
            .filter(|e| e.completed.is_none())
            .map(|e| e.requested);
        let noticed = match saw {
            Saw::Deleted => record.saw_deleted(id, now, release),
            Saw::Deleting(since) => record.saw_deleting(id, since.unwrap_or(now), release),
            Saw::Gone => {
                record.saw_gone(id, now, release);
                Seen::Noted
            }
        };
        if let Seen::Reappeared(entry) = noticed {
            out.back.push((id.clone(), entry));
        }
        let requested = match saw {
            Saw::Deleted => Some(open.unwrap_or(now)),
            Saw::Gone => open,
            Saw::Deleting(_) => None,
        };
        if let Some(requested) = requested {
            let took = now.duration_since(requested).unsigned_abs();
            out.completed.push((id.clone(), took));
        }
    }
    out
}

/// Delete manifests of the release whose objects are absent, and those that could not be
/// read (for the minor-update preconditions).
async fn delete_targets(applier: &Applier<'_>) -> (Vec<ObjectId>, Vec<ObjectId>) {
    let release = applier.release();
    let (unmanaged, excluded) = (&applier.options().unmanaged, &applier.options().excluded);
    let deletes: Vec<usize> = (0..release.manifests.len())
        .filter(|&i| release.manifests[i].is_delete())
        .filter(|&i| !unmanaged.contains(&release.manifests[i].id) && !excluded.contains_key(&i))
        .collect();
    let (mut absent, mut unknown) = (Vec::new(), Vec::new());
    for (index, observed) in observe_all(applier, &deletes).await {
        let id = release.manifests[index].id.clone();
        match observed {
            Observed::Gone => absent.push(id),
            Observed::Present(_) => {}
            Observed::Unknown(_) => unknown.push(id),
        }
    }
    (absent, unknown)
}

/// Reads the objects of the delete manifests `indices` back, 16 at a time, in order.
async fn observe_all(applier: &Applier<'_>, indices: &[usize]) -> Vec<(usize, Observed)> {
    futures::stream::iter(indices.iter().copied())
        .map(|i| async move {
            (
                i,
                deletions::observe(applier, &applier.release().manifests[i]).await,
            )
        })
        .buffered(16)
        .collect()
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(names: &[&str]) -> Vec<ObjectId> {
        names
            .iter()
            .map(|n| ObjectId::new("apps", "Deployment", Some("ns"), *n))
            .collect()
    }

    /// Issue 34 item 8: one manifest is one manifest, one parenthetical at most, and the
    /// warning says what to make of it.
    #[test]
    fn absent_delete_targets_are_counted_in_words_that_agree() {
        let one = Absent {
            never_deleted: ids(&["a"]),
            ..Absent::default()
        };
        assert_eq!(
            one.never_deleted_warning().unwrap(),
            "1 delete manifest names an object that is already absent and that cvo never deleted on this cluster, according to its deletion record: Deployment ns/a. It does not refuse the update"
        );
        let two = Absent {
            never_deleted: ids(&["a", "b"]),
            ..Absent::default()
        };
        assert_eq!(
            two.never_deleted_warning().unwrap(),
            "2 delete manifests name objects that are already absent and that cvo never deleted on this cluster, according to its deletion record: Deployment ns/a, Deployment ns/b. They do not refuse the update"
        );
        assert_eq!(
            absent_targets(&["Deployment ns/a".to_owned()], false),
            "1 delete manifest names an object that is already absent: Deployment ns/a"
        );
        assert!(Absent::default().never_deleted_warning().is_none());
    }
}
