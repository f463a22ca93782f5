//! The preflight of an update: what would stop it on this cluster, before anything is
//! applied, as risks in OpenShift's API (`status.conditionalUpdateRisks`,
//! `spec.desiredUpdate.acceptRisks`; docs/preflight.md).
//!
//! Every check of the [`CATALOGUE`] gives one [`Risk`]: its stable CamelCase name, whether it
//! applies, a message naming the objects, the evidence it read, and a URL into the docs. The
//! evidence comes from the sync that runs the preflight ([`Evidence`]): ClusterVersion's
//! stored `Upgradeable` and history, the preconditions, what the update enables implicitly, a
//! server-side dry run (`dryRun=All`) of every manifest, and the CRDs' `status.storedVersions`
//! ([`crds`]). Nothing is written. Fails closed: a check that cannot tell gives a risk that
//! applies ([`Applies::CannotTell`]), never silence.
//!
//! An update proceeds when every risk that applies is accepted ([`Assessment::unaccepted`]),
//! or when forced; the sync refuses it otherwise (exit code 4).

pub mod crds;
pub mod grants;
pub mod status;

use std::collections::BTreeSet;

use serde::Serialize;

use crate::apply::{Action, PassReport};
use crate::release::Release;
use crate::status::conditions::{REASON_IN_PROGRESS, REASON_STUCK, REASON_UNKNOWN};
use crate::status::update::name_list;
use crate::status::{Condition, ConditionStatus, PreconditionFailure, UpdateType};

/// Where every risk's URL points: docs/preflight.md, one section per risk.
pub const DOCS: &str = "https://github.com/cvo-project/cvo/blob/main/docs/preflight.md";

/// One check of the preflight: the risk it reports, what it checks, and from what.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Check {
    /// The risk's stable CamelCase name (what `acceptRisks` names).
    pub name: &'static str,
    /// What the risk means, for people.
    pub summary: &'static str,
    /// What the check reads.
    pub evidence: &'static str,
}

impl Check {
    /// The risk's section of docs/preflight.md.
    pub fn url(&self) -> String {
        format!("{DOCS}#{}", self.name.to_ascii_lowercase())
    }
}

pub const MINOR_UPDATE_WHILE_DELETION_IN_PROGRESS: Check = Check {
    name: "MinorUpdateWhileDeletionInProgress",
    summary: "A minor or major update while a deletion the release asked for is unfinished, stuck or cannot be read: the new release may no longer ship the delete manifest, and the object would stay.",
    evidence: "ClusterVersion version status.conditions Upgradeable (reasons ResourceDeletionInProgress, ResourceDeletionStuck, DeletionStatusUnknown), and each delete manifest's object read back",
};
pub const MINOR_UPDATE_WHILE_NOT_UPGRADEABLE: Check = Check {
    name: "MinorUpdateWhileNotUpgradeable",
    summary: "A minor or major update while the cluster is not Upgradeable for another reason (ClusterVersion overrides, a component that says so).",
    evidence: "ClusterVersion version status.conditions Upgradeable, and spec.overrides",
};
pub const STALE_DELETE_MANIFEST: Check = Check {
    name: "StaleDeleteManifest",
    summary: "A minor or major update that still ships delete manifests for objects deleted under an earlier minor release.",
    evidence: "the deletion record (ConfigMap cvo-deletion-record) and each delete manifest's object read back",
};
pub const LOW_DESIRED_VERSION: Check = Check {
    name: "LowDesiredVersion",
    summary: "A rollback further than the previous version, or across a minor version.",
    evidence: "ClusterVersion version status.history",
};
pub const MAJOR_VERSION_UPDATE: Check = Check {
    name: "MajorVersionUpdate",
    summary: "An update to a new major version.",
    evidence: "ClusterVersion version status.history",
};
pub const MULTIPLE_MINOR_VERSIONS_UPDATE: Check = Check {
    name: "MultipleMinorVersionsUpdate",
    summary: "An update that skips a minor version.",
    evidence: "ClusterVersion version status.history",
};
pub const CRD_STORED_VERSION_REMOVED: Check = Check {
    name: "CRDStoredVersionRemoved",
    summary: "A CRD of the release drops a version the cluster may still store objects in: the API server refuses the CRD, and objects in that version would be unreadable.",
    evidence: "each CustomResourceDefinition's status.storedVersions on the cluster, against the release's spec.versions",
};
pub const MANIFEST_REJECTED_BY_SERVER: Check = Check {
    name: "ManifestRejectedByServer",
    summary: "The API server refuses a manifest of the release (schema, validation, admission, immutable fields).",
    evidence: "a server-side dry run (dryRun=All) of every manifest of the release",
};
pub const OPERATOR_LACKS_PERMISSION: Check = Check {
    name: "OperatorLacksPermission",
    summary: "The identity that applies the release (the operator's service account, or the user of cvo apply) may not write an object of the release (403 Forbidden).",
    evidence: "a server-side dry run (dryRun=All) of every manifest of the release, as that identity",
};
pub const CAPABILITY_IMPLICITLY_ENABLED: Check = Check {
    name: "CapabilityImplicitlyEnabled",
    summary: "The update enables a capability the cluster did not ask for, because it moves an object the cluster has into it; a capability is never disabled again.",
    evidence: "the release the cluster is at (or the objects cvo applied) against the new release's capability annotations and ClusterVersion spec.capabilities",
};

/// Every check, in the order they are reported.
pub const CATALOGUE: [Check; 10] = [
    MINOR_UPDATE_WHILE_DELETION_IN_PROGRESS,
    MINOR_UPDATE_WHILE_NOT_UPGRADEABLE,
    STALE_DELETE_MANIFEST,
    LOW_DESIRED_VERSION,
    MAJOR_VERSION_UPDATE,
    MULTIPLE_MINOR_VERSIONS_UPDATE,
    CRD_STORED_VERSION_REMOVED,
    MANIFEST_REJECTED_BY_SERVER,
    OPERATOR_LACKS_PERMISSION,
    CAPABILITY_IMPLICITLY_ENABLED,
];

/// The check named `name`, if it is one of the catalogue.
pub fn check_named(name: &str) -> Option<&'static Check> {
    CATALOGUE.iter().find(|c| c.name == name)
}

/// Whether a risk applies to this cluster (in JSON as its `Applies` condition's status).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Applies {
    #[serde(rename = "True")]
    Yes,
    #[serde(rename = "False")]
    No,
    /// The check could not tell (a read failed, a manifest was not checked): counted as
    /// applying (fail closed).
    #[serde(rename = "Unknown")]
    CannotTell,
}

impl Applies {
    /// The risk must be accepted for the update to proceed.
    pub fn blocks(self) -> bool {
        self != Applies::No
    }

    /// The `Applies` condition's status: `Unknown` when the check could not tell.
    pub fn status(self) -> ConditionStatus {
        match self {
            Applies::Yes => ConditionStatus::True,
            Applies::No => ConditionStatus::False,
            Applies::CannotTell => ConditionStatus::Unknown,
        }
    }
}

/// One check's verdict.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Risk {
    pub name: &'static str,
    pub applies: Applies,
    /// What applies, naming the objects; when it does not apply, what was checked.
    pub message: String,
    /// What the check read.
    pub evidence: &'static str,
    pub url: String,
    /// Named in the accepted risks (`--accept-risks`, `spec.desiredUpdate.acceptRisks`).
    pub accepted: bool,
}

impl Risk {
    fn new(check: &Check, applies: Applies, message: String) -> Self {
        Risk {
            name: check.name,
            applies,
            message,
            evidence: check.evidence,
            url: check.url(),
            accepted: false,
        }
    }

    /// The risk applies and is not accepted: it stops the update.
    pub fn stops(&self) -> bool {
        self.applies.blocks() && !self.accepted
    }

    /// Its `Applies` condition (`metav1.Condition`'s reason: `Applies`, `DoesNotApply`,
    /// `EvaluationFailed`).
    pub fn condition(&self) -> Condition {
        let reason = match self.applies {
            Applies::Yes => "Applies",
            Applies::No => "DoesNotApply",
            Applies::CannotTell => "EvaluationFailed",
        };
        Condition::new(
            "Applies",
            self.applies.status(),
            reason,
            self.message.clone(),
        )
    }
}

/// The preflight of one update: every check's risk, for the release it targets.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Assessment {
    pub version: String,
    pub image: String,
    pub risks: Vec<Risk>,
}

impl Assessment {
    /// Marks the risks `accepted` names as accepted.
    pub fn accept(&mut self, accepted: &[String]) {
        for risk in &mut self.risks {
            risk.accepted = accepted.iter().any(|a| a == risk.name);
        }
    }

    /// The risks that apply (or could not be told).
    pub fn applying(&self) -> impl Iterator<Item = &Risk> {
        self.risks.iter().filter(|r| r.applies.blocks())
    }

    /// The risks that apply and are not accepted: each one stops the update.
    pub fn unaccepted(&self) -> Vec<&Risk> {
        self.risks.iter().filter(|r| r.stops()).collect()
    }

    /// For people: the risks that apply, each with its message and whether it is accepted,
    /// and where they are explained; one line when none applies.
    pub fn text(&self) -> String {
        use std::fmt::Write as _;
        let applying: Vec<&Risk> = self.applying().collect();
        let mut out = String::new();
        if applying.is_empty() {
            let _ = writeln!(
                out,
                "preflight of {}: no risk applies ({} checks)",
                self.version,
                self.risks.len()
            );
            return out;
        }
        let _ = writeln!(
            out,
            "preflight of {}: {} of {} risks apply",
            self.version,
            applying.len(),
            self.risks.len()
        );
        for r in applying {
            let state = match (r.applies, r.accepted) {
                (_, true) => "accepted",
                (Applies::CannotTell, false) => "cannot tell, not accepted",
                _ => "not accepted",
            };
            let _ = writeln!(out, "  {} ({state}): {}", r.name, r.message);
        }
        let stopping: Vec<&str> = self.unaccepted().iter().map(|r| r.name).collect();
        if !stopping.is_empty() {
            let _ = writeln!(
                out,
                "  to go ahead anyway, accept them: --accept-risks {}",
                stopping.join(",")
            );
        }
        let _ = writeln!(out, "  what each risk means and what to do: {DOCS}");
        out
    }

    /// Why the update is refused, when risks stop it: one failure naming them all, with what
    /// to do (reason `RisksNotAccepted`).
    pub fn refusal(&self) -> Option<PreconditionFailure> {
        let stopping = self.unaccepted();
        if stopping.is_empty() {
            return None;
        }
        let names: Vec<&str> = stopping.iter().map(|r| r.name).collect();
        let each: Vec<String> = stopping
            .iter()
            .map(|r| format!("{}: {}", r.name, r.message))
            .collect();
        Some(PreconditionFailure {
            reason: RISKS_NOT_ACCEPTED,
            message: format!(
                "risks that apply to the update to {} are not accepted: {}; fix them, or accept them (cvo apply --accept-risks {}; ClusterVersion spec.desiredUpdate.acceptRisks) — see {DOCS}",
                self.version,
                each.join("; "),
                names.join(",")
            ),
            objects: names.iter().map(|n| (*n).to_owned()).collect(),
        })
    }
}

/// The reason of a refusal by risks that are not accepted.
pub const RISKS_NOT_ACCEPTED: &str = "RisksNotAccepted";

/// The checks a precondition failure answers to: its reason names the risk, except the
/// Upgradeable ones, which say why the cluster is not upgradeable.
pub fn risk_of(failure: &PreconditionFailure, upgradeable: Option<&Condition>) -> &'static Check {
    match failure.reason {
        "UpgradeableFalse" | "UpgradeableUnknown"
            if upgradeable.is_some_and(|c| !deletion_reason(&c.reason)) =>
        {
            &MINOR_UPDATE_WHILE_NOT_UPGRADEABLE
        }
        "UpgradeableFalse" | "UpgradeableUnknown" | "DeletionStatusUnknown" => {
            &MINOR_UPDATE_WHILE_DELETION_IN_PROGRESS
        }
        reason => check_named(reason).unwrap_or(&MINOR_UPDATE_WHILE_NOT_UPGRADEABLE),
    }
}

fn deletion_reason(reason: &str) -> bool {
    [REASON_IN_PROGRESS, REASON_STUCK, REASON_UNKNOWN].contains(&reason)
}

/// What the preflight of one update is judged from: the sync's own reads.
pub struct Evidence<'a> {
    pub release: &'a Release,
    pub update: &'a UpdateType,
    /// ClusterVersion's stored Upgradeable (overrides included).
    pub upgradeable: Option<&'a Condition>,
    /// Every precondition that refuses the update.
    pub preconditions: &'a [PreconditionFailure],
    /// The capabilities the update enables implicitly.
    pub implicitly_enabled: &'a BTreeSet<String>,
    /// The server-side dry run of every manifest.
    pub dry_run: &'a PassReport,
    /// The CRD versions the release drops while the cluster stores objects in them, or why
    /// that could not be read.
    pub stored_versions: &'a Result<Vec<crds::Dropped>, String>,
}

/// Every check of the catalogue over `evidence`, in catalogue order.
pub fn assess(evidence: &Evidence<'_>) -> Assessment {
    let mut risks: Vec<Risk> = Vec::with_capacity(CATALOGUE.len());
    for check in &CATALOGUE {
        let from_preconditions: Vec<&PreconditionFailure> = evidence
            .preconditions
            .iter()
            .filter(|f| risk_of(f, evidence.upgradeable).name == check.name)
            .collect();
        let risk = match check.name {
            n if n == CRD_STORED_VERSION_REMOVED.name => stored_versions(evidence),
            n if n == MANIFEST_REJECTED_BY_SERVER.name => rejected(evidence, false),
            n if n == OPERATOR_LACKS_PERMISSION.name => rejected(evidence, true),
            n if n == CAPABILITY_IMPLICITLY_ENABLED.name => implicit(evidence),
            _ if from_preconditions.is_empty() => {
                Risk::new(check, Applies::No, not_applying(check, evidence.update))
            }
            _ => {
                let unknown = from_preconditions.iter().any(|f| {
                    f.reason == "DeletionStatusUnknown" || f.reason == "UpgradeableUnknown"
                });
                let message = from_preconditions
                    .iter()
                    .map(|f| f.message.clone())
                    .collect::<Vec<_>>()
                    .join("; ");
                let applies = if unknown {
                    Applies::CannotTell
                } else {
                    Applies::Yes
                };
                Risk::new(check, applies, message)
            }
        };
        risks.push(risk);
    }
    Assessment {
        version: crate::status::conditions::version_text(evidence.release),
        image: evidence.release.image.clone().unwrap_or_default(),
        risks,
    }
}

/// What a precondition check that found nothing says.
fn not_applying(check: &Check, update: &UpdateType) -> String {
    let kind = match update {
        UpdateType::MinorOrMajor => "a minor or major update",
        UpdateType::Patch => "a patch update",
        UpdateType::Install => "an install",
    };
    format!("Does not apply to {kind}: checked {}.", check.evidence)
}

fn stored_versions(evidence: &Evidence<'_>) -> Risk {
    let check = &CRD_STORED_VERSION_REMOVED;
    match evidence.stored_versions {
        Err(why) => Risk::new(
            check,
            Applies::CannotTell,
            format!("cannot tell which versions the cluster stores its CRDs' objects in: {why}"),
        ),
        Ok(dropped) if dropped.is_empty() => Risk::new(
            check,
            Applies::No,
            "Every version the cluster's CRDs store objects in is kept by the release.".to_owned(),
        ),
        Ok(dropped) => {
            let each: Vec<String> = dropped.iter().map(ToString::to_string).collect();
            Risk::new(check, Applies::Yes, name_list(&each))
        }
    }
}

/// The dry run's refusals: 403 (`permission`) or any other code the server refused with.
/// Manifests the dry run did not check (skipped after a failure, or failing for another
/// reason than the server's refusal) make the check unable to tell.
fn rejected(evidence: &Evidence<'_>, permission: bool) -> Risk {
    let check = if permission {
        &OPERATOR_LACKS_PERMISSION
    } else {
        &MANIFEST_REJECTED_BY_SERVER
    };
    let release = evidence.release;
    let mut refused = Vec::new();
    let mut unchecked = Vec::new();
    let mut granted = Vec::new();
    for r in &evidence.dry_run.results {
        let m = &release.manifests[r.index];
        let error = r.error.as_deref().unwrap_or("");
        match (r.action, r.rejected) {
            (Action::Failed, Some(403)) => {
                match grants::parse(error).and_then(|f| grants::granted_by(release, m, &f)) {
                    Some(by) => granted.push(format!("{} (by {by})", m.id)),
                    None if permission => refused.push(format!("{} ({error})", m.id)),
                    None => {}
                }
            }
            (Action::Failed, Some(_)) if !permission => {
                refused.push(format!("{} ({error})", m.id));
            }
            (Action::Failed, None) | (Action::Skipped, _) => unchecked.push(m.id.to_string()),
            _ => {}
        }
    }
    let checked = evidence.dry_run.results.len();
    // Forbidden until the release's own RBAC is applied: planned without the server's check.
    let granted_note = if granted.is_empty() {
        String::new()
    } else {
        format!(
            " {} planned without the server's check: forbidden until the release's own RBAC, at an earlier run level, grants it: {}.",
            granted.len(),
            name_list(&granted)
        )
    };
    if !refused.is_empty() {
        let mut message = format!("{} of {checked}: {}", refused.len(), name_list(&refused));
        if !unchecked.is_empty() {
            message.push_str(&format!("; not checked: {}", name_list(&unchecked)));
        }
        return Risk::new(check, Applies::Yes, message);
    }
    if !unchecked.is_empty() {
        return Risk::new(
            check,
            Applies::CannotTell,
            format!(
                "the dry run could not check {} manifests: {}",
                unchecked.len(),
                name_list(&unchecked)
            ),
        );
    }
    Risk::new(
        check,
        Applies::No,
        format!("The server accepted a dry run of every manifest ({checked}).{granted_note}"),
    )
}

fn implicit(evidence: &Evidence<'_>) -> Risk {
    let check = &CAPABILITY_IMPLICITLY_ENABLED;
    if evidence.implicitly_enabled.is_empty() {
        return Risk::new(
            check,
            Applies::No,
            "The update enables no capability implicitly.".to_owned(),
        );
    }
    let names: Vec<String> = evidence.implicitly_enabled.iter().cloned().collect();
    Risk::new(
        check,
        Applies::Yes,
        format!(
            "the update enables {} implicitly (add them to ClusterVersion spec.capabilities.additionalEnabledCapabilities to ask for them)",
            names.join(", ")
        ),
    )
}

#[cfg(test)]
mod tests;
