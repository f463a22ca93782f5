//! What `ClusterVersion version`'s spec asks of a sync, checked field by field: the
//! `overrides` that take objects out of management, the `desiredUpdate` asked for, and whether
//! the spec is valid at all.
//!
//! As the CVO: an override `{kind, group, namespace, name, unmanaged: true}` leaves that object
//! alone (no apply, no delete, no health check) and makes the cluster `Upgradeable=False`
//! (`ClusterVersionOverrides`) while it is there. `desiredUpdate` is validated as the CVO
//! validates it (and as the CRD's rules do): a `version` without an `image` must name exactly
//! one payload of `status.availableUpdates`, or a `status.history` entry with an image, and is
//! resolved to that image; `architecture` other than the cluster's is refused (cvo releases are
//! single-architecture); `acceptRisks` is read. An invalid field is reported (`Invalid=True`,
//! worded as the CVO words it, by JSON path) and ignored — an invalid `desiredUpdate` as a
//! whole; the rest of the spec still counts.

use std::collections::BTreeSet;

use kube::api::DynamicObject;
use serde_json::Value;

use super::{Condition, ConditionStatus};
use crate::release::ObjectId;
use crate::release::capability::{Asked, Capabilities, Catalogue};

/// Reason of the Upgradeable=False an override causes (the CVO's).
pub const OVERRIDES_REASON: &str = "ClusterVersionOverrides";
/// Reason of `Invalid=True` (the CVO's).
pub const INVALID_REASON: &str = "InvalidClusterVersion";

/// The spec, as far as a sync uses it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Spec {
    /// Objects overridden as unmanaged.
    pub unmanaged: BTreeSet<ObjectId>,
    /// What is wrong with the spec (`spec.overrides[2].kind: …`); each such field is ignored
    /// (an invalid `desiredUpdate` as a whole, as the CVO does).
    pub invalid: Vec<String>,
    /// `spec.desiredUpdate`, when given and valid.
    pub desired_update: Option<DesiredUpdate>,
    /// `spec.desiredUpdate` with `mode: Preflight`, when valid: the release to check, not to
    /// apply (then [`Spec::desired_update`] is `None`: nothing asks for an update).
    pub preflight: Option<DesiredUpdate>,
    /// `spec.capabilities`, when given (fields of the wrong shape are reported and read as
    /// absent).
    pub capabilities: Option<Asked>,
}

impl Spec {
    /// Reads the spec of `cv`.
    pub fn of(cv: &DynamicObject) -> Self {
        let mut spec = Spec::default();
        let Some(s) = cv.data.get("spec") else {
            return spec;
        };
        if !s.is_object() {
            spec.invalid.push("spec: must be an object".to_owned());
            return spec;
        }
        match s.get("overrides") {
            None | Some(Value::Null) => {}
            Some(Value::Array(items)) => {
                for (i, item) in items.iter().enumerate() {
                    match parse_override(item) {
                        Ok(Some(id)) => {
                            spec.unmanaged.insert(id);
                        }
                        Ok(None) => {}
                        Err(e) => spec.invalid.push(format!("spec.overrides[{i}]: {e}")),
                    }
                }
            }
            Some(_) => spec
                .invalid
                .push("spec.overrides: must be a list".to_owned()),
        }
        if let Some(c) = s.get("capabilities").filter(|v| !v.is_null()) {
            spec.capabilities = Some(parse_capabilities(c, &mut spec.invalid));
        }
        if let Some(du) = s.get("desiredUpdate").filter(|v| !v.is_null()) {
            let status = cv.data.get("status").unwrap_or(&Value::Null);
            match check_desired_update(du, status) {
                Ok(Some(desired)) if desired.preflight => spec.preflight = Some(desired),
                Ok(desired) => spec.desired_update = desired,
                Err(wrong) => spec.invalid.extend(wrong),
            }
        }
        spec
    }

    /// `Invalid=True` with every problem, or `None` when the spec is valid; worded as the
    /// CVO words it (one problem on the line, several as a list).
    pub fn invalid_condition(&self) -> Option<Condition> {
        let message = match self.invalid.as_slice() {
            [] => return None,
            [one] => format!("The cluster version is invalid: {one}"),
            many => {
                let mut text = "The cluster version is invalid:\n".to_owned();
                for e in many {
                    text.push_str(&format!("* {e}\n"));
                }
                text
            }
        };
        Some(Condition::new(
            "Invalid",
            ConditionStatus::True,
            INVALID_REASON,
            message,
        ))
    }

    /// The `Invalid` condition to record over `stored` (the one in status): True with the
    /// problems, False where it was there and the spec is valid again, else none.
    pub fn invalid_update(&self, stored: Option<&Condition>) -> Option<Condition> {
        self.invalid_condition().or_else(|| {
            stored.map(|_| Condition::new("Invalid", ConditionStatus::False, "AsExpected", ""))
        })
    }
}

/// What is wrong with one item of `spec.overrides` (the item is ignored).
#[derive(Debug, PartialEq, thiserror::Error)]
pub enum SpecError {
    #[error("must be an object with kind, group, namespace, name and unmanaged")]
    NotAnObject,
    #[error("{0} must not be empty")]
    Empty(&'static str),
    #[error("{0} is required")]
    Missing(&'static str),
    #[error("{0} must be a string, not {1}")]
    NotAString(&'static str, Value),
    #[error("unmanaged (true or false) is required")]
    NoUnmanaged,
    #[error("unmanaged must be true or false, not {0}")]
    UnmanagedNotABoolean(Value),
}

/// The object an override leaves alone, when it says `unmanaged: true`.
fn parse_override(item: &Value) -> Result<Option<ObjectId>, SpecError> {
    let Some(o) = item.as_object() else {
        return Err(SpecError::NotAnObject);
    };
    let text = |field: &'static str, required: bool| match o.get(field) {
        Some(Value::String(s)) if !(required && s.is_empty()) => Ok(s.clone()),
        None | Some(Value::Null) if !required => Ok(String::new()),
        Some(Value::String(_)) => Err(SpecError::Empty(field)),
        None | Some(Value::Null) => Err(SpecError::Missing(field)),
        Some(other) => Err(SpecError::NotAString(field, other.clone())),
    };
    let (kind, name) = (text("kind", true)?, text("name", true)?);
    let (group, namespace) = (text("group", false)?, text("namespace", false)?);
    let unmanaged = match o.get("unmanaged") {
        Some(Value::Bool(b)) => *b,
        None | Some(Value::Null) => return Err(SpecError::NoUnmanaged),
        Some(other) => return Err(SpecError::UnmanagedNotABoolean(other.clone())),
    };
    let namespace = (!namespace.is_empty()).then_some(namespace);
    Ok(unmanaged.then(|| ObjectId::new(&group, &kind, namespace.as_deref(), name)))
}

/// `spec.capabilities {baselineCapabilitySet, additionalEnabledCapabilities}`; what is not of
/// the API's shape is reported in `invalid` and read as absent.
fn parse_capabilities(c: &Value, invalid: &mut Vec<String>) -> Asked {
    let mut asked = Asked::default();
    // What cannot be read enables nothing: never every capability for want of a spec.
    let Some(o) = c.as_object() else {
        invalid.push("spec.capabilities: must be an object".to_owned());
        asked.baseline_unreadable = true;
        return asked;
    };
    match o.get("baselineCapabilitySet") {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) if !s.is_empty() => asked.baseline = Some(s.clone()),
        Some(Value::String(_)) => {}
        Some(_) => {
            invalid.push("spec.capabilities.baselineCapabilitySet: must be a string".to_owned());
            asked.baseline_unreadable = true;
        }
    }
    match o.get("additionalEnabledCapabilities") {
        None | Some(Value::Null) => {}
        Some(Value::Array(items)) => {
            for (i, item) in items.iter().enumerate() {
                match item.as_str() {
                    Some(name) => asked.additional.push(name.to_owned()),
                    None => invalid.push(format!(
                        "spec.capabilities.additionalEnabledCapabilities[{i}]: must be a string"
                    )),
                }
            }
        }
        Some(_) => invalid
            .push("spec.capabilities.additionalEnabledCapabilities: must be a list".to_owned()),
    }
    asked
}

/// The cluster's capabilities for `catalogue` (a release's): `spec.capabilities` as `spec`
/// read it, with everything `status.capabilities.enabledCapabilities` of `cv` holds kept
/// enabled; the spec's problems the catalogue shows (an unknown set or capability) are
/// returned to be reported as warnings. No ClusterVersion: every capability is enabled.
pub fn cluster_capabilities(
    catalogue: &Catalogue,
    spec: &Spec,
    cv: Option<&DynamicObject>,
) -> (Capabilities, Vec<String>) {
    let (prior, unreadable) = cv.map(enabled_before).unwrap_or_default();
    let (caps, problems) = Capabilities::resolve(catalogue, spec.capabilities.as_ref(), &prior);
    let mut problems: Vec<String> = problems.into_iter().map(|p| p.0).collect();
    if unreadable {
        problems.push("status.capabilities.enabledCapabilities is not a list of capability names: what was enabled before cannot be read in full (the names it holds stay enabled)".to_owned());
    }
    (caps, problems)
}

/// `status.capabilities.enabledCapabilities`: what was enabled before, and so stays enabled
/// (an enabled capability is never disabled); `true` when the field is there but not a list
/// of names (what can be read of it is returned).
pub fn enabled_before(cv: &DynamicObject) -> (Vec<String>, bool) {
    let Some(field) = cv
        .data
        .pointer("/status/capabilities/enabledCapabilities")
        .filter(|v| !v.is_null())
    else {
        return (Vec::new(), false);
    };
    let items = field.as_array().map(Vec::as_slice).unwrap_or_default();
    let names: Vec<String> = items
        .iter()
        .filter_map(|v| v.as_str().map(str::to_owned))
        .collect();
    let unreadable = !field.is_array() || names.len() != items.len();
    (names, unreadable)
}

/// At most this many `acceptRisks` entries are read (the API's limit).
const ACCEPT_RISKS_LIMIT: usize = 1000;
/// Longest risk name (the API's limit).
const RISK_NAME_LIMIT: usize = 256;

/// `spec.desiredUpdate` as valid: what it asks for, with a version alone resolved to the image
/// that `status.availableUpdates` (or a `status.history` entry) gives it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DesiredUpdate {
    /// `version` as asked (empty when not given).
    pub version: String,
    /// The image asked for, or resolved from the version (empty: no release is asked for,
    /// only `acceptRisks`).
    pub image: String,
    /// Where [`DesiredUpdate::image`] comes from.
    pub image_from: ImageFrom,
    pub force: bool,
    /// `acceptRisks[].name`, in order.
    pub accept_risks: Vec<String>,
    /// `mode: Preflight`: the release asked for is checked (its risks reported), not applied.
    pub preflight: bool,
}

/// The one value of `spec.desiredUpdate.mode`.
pub const PREFLIGHT_MODE: &str = "Preflight";

/// Where the image of a desired update comes from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ImageFrom {
    /// `spec.desiredUpdate.image` (or no image at all).
    #[default]
    Spec,
    /// The `status.availableUpdates` entry of the version.
    AvailableUpdates,
    /// The `status.history` entry of the version (a rollback).
    History,
}

/// The risks of `status.conditionalUpdates` that the release at `version` (or at the image
/// `desired` asks for) is exposed to and that `desired.acceptRisks` accepts, recorded in the
/// history entry's `acceptedRisks` as the CVO words it: `The target release IMAGE is exposed
/// to the risks [A,B] which were all explicitly accepted by the cluster administrator.`
/// `None` when no such risk is listed.
pub fn exposed_risks_accepted(
    cv: &DynamicObject,
    desired: &DesiredUpdate,
    version: &str,
) -> Option<String> {
    if desired.accept_risks.is_empty() {
        return None;
    }
    let updates = cv
        .data
        .pointer("/status/conditionalUpdates")
        .and_then(Value::as_array)?;
    let target = updates.iter().find(|u| {
        let release = u.get("release");
        let field = |f: &str| release.and_then(|r| r.get(f)).and_then(Value::as_str);
        (!desired.image.is_empty() && field("image") == Some(desired.image.as_str()))
            || field("version") == Some(version)
    })?;
    let listed = target
        .get("risks")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|r| r.get("name").and_then(Value::as_str))
        .chain(
            target
                .get("riskNames")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str),
        );
    let mut names: Vec<&str> = listed
        .filter(|n| desired.accept_risks.iter().any(|a| a == n))
        .collect();
    names.dedup();
    if names.is_empty() {
        return None;
    }
    let image = if desired.image.is_empty() {
        version
    } else {
        desired.image.as_str()
    };
    Some(format!(
        "The target release {} is exposed to the risks [{}] which were all explicitly accepted by the cluster administrator.",
        crate::diagnostic::excerpt(image),
        names
            .iter()
            .map(|n| crate::diagnostic::excerpt(n))
            .collect::<Vec<_>>()
            .join(",")
    ))
}

impl DesiredUpdate {
    /// Why the release at `version` is not the one asked for, as the CVO says it when the
    /// release in the image asked for is another version.
    pub fn version_mismatch(&self, version: &str) -> String {
        let asked = crate::diagnostic::excerpt(&self.version);
        format!(
            "Verifying payload failed version=\"{asked}\" image=\"{}\" failure=release image version {version} does not match the expected upstream version {asked}",
            crate::diagnostic::excerpt(&self.image),
        )
    }
}

/// A field error as the API server words it: `PATH: Invalid value: "VALUE": DETAIL`.
fn invalid_value(path: &str, value: &str, detail: &str) -> String {
    format!(
        "{path}: Invalid value: \"{}\": {detail}",
        crate::diagnostic::excerpt(value)
    )
}

/// Checks `spec.desiredUpdate` as OpenShift's CVO validates it (and as the CRD's rules do, for
/// servers that do not run them): a version without an image must name exactly one payload
/// in `status.availableUpdates`, or a `status.history` entry with an image. Returns the
/// request when valid, else what is wrong — an invalid request is ignored as a whole.
fn check_desired_update(du: &Value, status: &Value) -> Result<Option<DesiredUpdate>, Vec<String>> {
    let Some(o) = du.as_object() else {
        return Err(vec!["spec.desiredUpdate: must be an object".to_owned()]);
    };
    let requested = Requested::read(o)?;
    requested.check().map_err(|e| vec![e])?;
    let (image, image_from) = requested.image(status).map_err(|e| vec![e])?;
    check_architecture(&requested.architecture, status).map_err(|e| vec![e])?;
    Ok(Some(DesiredUpdate {
        version: requested.version,
        image,
        image_from,
        force: requested.force,
        accept_risks: requested.accept_risks,
        preflight: requested.mode == PREFLIGHT_MODE,
    }))
}

/// The fields of `spec.desiredUpdate` as written (an absent or null one empty).
struct Requested {
    version: String,
    image: String,
    architecture: String,
    force: bool,
    accept_risks: Vec<String>,
    mode: String,
}

impl Requested {
    /// The fields of `o`, or every field of the wrong type.
    fn read(o: &serde_json::Map<String, Value>) -> Result<Requested, Vec<String>> {
        let mut wrong = Vec::new();
        let mut text = |field: &'static str| match o.get(field) {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(s)) => s.clone(),
            Some(other) => {
                wrong.push(format!(
                    "spec.desiredUpdate.{field}: must be a string, not {}",
                    crate::diagnostic::excerpt(&other.to_string())
                ));
                String::new()
            }
        };
        let (version, image, architecture) = (text("version"), text("image"), text("architecture"));
        let mode = text("mode");
        let force = match o.get("force") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(_) => {
                wrong.push("spec.desiredUpdate.force: must be true or false".to_owned());
                false
            }
        };
        let accept_risks = match accept_risks(o.get("acceptRisks")) {
            Ok(names) => names,
            Err(e) => {
                wrong.push(e);
                Vec::new()
            }
        };
        if !wrong.is_empty() {
            return Err(wrong);
        }
        Ok(Requested {
            version,
            image,
            architecture,
            force,
            accept_risks,
            mode,
        })
    }

    /// The CRD's own rules (a real server refuses such a write; others may not), and the
    /// version's form.
    fn check(&self) -> Result<(), String> {
        let Requested {
            version,
            image,
            architecture,
            accept_risks,
            ..
        } = self;
        if !architecture.is_empty() && !image.is_empty() {
            return Err(
                "spec.desiredUpdate: Invalid value: \"object\": cannot set both Architecture and Image"
                    .to_owned(),
            );
        }
        if !architecture.is_empty() && version.is_empty() {
            return Err(
                "spec.desiredUpdate: Invalid value: \"object\": Version must be set if Architecture is set"
                    .to_owned(),
            );
        }
        if architecture.is_empty()
            && version.is_empty()
            && image.is_empty()
            && accept_risks.is_empty()
        {
            return Err(
                "spec.desiredUpdate: Required value: must specify architecture, version, image, or acceptRisks"
                    .to_owned(),
            );
        }
        if !self.mode.is_empty() && self.mode != PREFLIGHT_MODE {
            return Err(format!(
                "spec.desiredUpdate.mode: Unsupported value: \"{}\": supported values: \"{PREFLIGHT_MODE}\"",
                crate::diagnostic::excerpt(&self.mode)
            ));
        }
        if !self.mode.is_empty() && version.is_empty() && image.is_empty() {
            return Err(
                "spec.desiredUpdate.mode: Invalid value: \"Preflight\": a preflight needs the release to check: set version or image"
                    .to_owned(),
            );
        }
        if !version.is_empty() && version.parse::<semver::Version>().is_err() {
            return Err(invalid_value(
                VERSION_PATH,
                version,
                "must be a semantic version (1.2.3[-...])",
            ));
        }
        Ok(())
    }

    /// The image asked for and where it came from: the spec's, or, for a version without an
    /// image, the one payload `status` offers for that version.
    fn image(&self, status: &Value) -> Result<(String, ImageFrom), String> {
        if self.version.is_empty() || !self.image.is_empty() {
            return Ok((self.image.clone(), ImageFrom::Spec));
        }
        match payloads_for_version(status, &self.version) {
            Payloads::None => Err(invalid_value(
                VERSION_PATH,
                &self.version,
                "when image is empty the update must be an available update",
            )),
            Payloads::Many => Err(invalid_value(
                VERSION_PATH,
                &self.version,
                "there are multiple possible payloads for this version, specify the exact image",
            )),
            Payloads::One(image, from) => Ok((image, from)),
        }
    }
}

const VERSION_PATH: &str = "spec.desiredUpdate.version";

/// An architecture asked for must be the cluster's own (`status.desired.architecture`,
/// unless empty or `Multi`): cvo releases are single-architecture.
fn check_architecture(architecture: &str, status: &Value) -> Result<(), String> {
    let own_architecture = status
        .pointer("/desired/architecture")
        .and_then(Value::as_str)
        .filter(|a| !a.is_empty() && *a != "Multi");
    if architecture.is_empty() || Some(architecture) == own_architecture {
        return Ok(());
    }
    Err(format!(
        "spec.desiredUpdate.architecture: Unsupported value: \"{}\": cvo releases are single-architecture, so the cluster cannot move to another architecture; leave architecture empty",
        crate::diagnostic::excerpt(architecture)
    ))
}

/// The names of `acceptRisks` (a list of `{name}`), or what is wrong with it.
fn accept_risks(value: Option<&Value>) -> Result<Vec<String>, String> {
    let path = "spec.desiredUpdate.acceptRisks";
    let items = match value {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(items)) => items,
        Some(_) => return Err(format!("{path}: must be a list of {{name}}")),
    };
    if items.len() > ACCEPT_RISKS_LIMIT {
        return Err(format!(
            "{path}: Too many: {}: must have at most {ACCEPT_RISKS_LIMIT} items",
            items.len()
        ));
    }
    let mut names: Vec<String> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        match item.get("name").and_then(Value::as_str) {
            Some(n) if !n.is_empty() && n.chars().count() <= RISK_NAME_LIMIT => {
                if names.iter().any(|seen| seen == n) {
                    return Err(format!(
                        "{path}[{i}]: Duplicate value: {{\"name\":\"{}\"}}",
                        crate::diagnostic::excerpt(n)
                    ));
                }
                names.push(n.to_owned());
            }
            _ => {
                return Err(format!(
                    "{path}[{i}].name: Invalid value: must be a non-empty string of at most {RISK_NAME_LIMIT} characters"
                ));
            }
        }
    }
    Ok(names)
}

/// How many payloads a version names.
enum Payloads {
    None,
    One(String, ImageFrom),
    Many,
}

/// The payloads `status` gives `version`: its `availableUpdates` entries with an image, else
/// a `history` entry with an image (as the CVO counts them).
fn payloads_for_version(status: &Value, version: &str) -> Payloads {
    let list = |field: &str| {
        status
            .get(field)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|e| e.get("version").and_then(Value::as_str) == Some(version))
            .filter_map(|e| e.get("image").and_then(Value::as_str))
            .filter(|image| !image.is_empty())
            .map(str::to_owned)
            .collect::<Vec<String>>()
    };
    let mut available = list("availableUpdates");
    match available.len() {
        0 => match list("history").into_iter().next() {
            Some(image) => Payloads::One(image, ImageFrom::History),
            None => Payloads::None,
        },
        1 => Payloads::One(available.remove(0), ImageFrom::AvailableUpdates),
        _ => Payloads::Many,
    }
}

/// Upgradeable once overrides are counted: an override makes it False (the CVO's
/// `ClusterVersionOverrides`); with another reason already not True, both are said.
pub fn upgradeable_with_overrides(upgradeable: Condition, spec: &Spec) -> Condition {
    if spec.unmanaged.is_empty() {
        return upgradeable;
    }
    let names: Vec<String> = spec.unmanaged.iter().map(ToString::to_string).collect();
    let message = format!(
        "Disabling ownership via cluster version overrides prevents updates; remove the overrides before continuing ({})",
        super::update::name_list(&names)
    );
    if upgradeable.status == ConditionStatus::True {
        return Condition::new(
            "Upgradeable",
            ConditionStatus::False,
            OVERRIDES_REASON,
            message,
        );
    }
    Condition::new(
        "Upgradeable",
        ConditionStatus::False,
        "MultipleReasons",
        format!(
            "{message}. Also {}: {}",
            upgradeable.reason, upgradeable.message
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cv(spec: Value) -> DynamicObject {
        serde_json::from_value(json!({"apiVersion": "config.openshift.io/v1",
            "kind": "ClusterVersion", "metadata": {"name": "version"}, "spec": spec}))
        .unwrap()
    }

    #[test]
    fn capabilities_are_read_with_what_status_enabled_before() {
        let mut with = cv(json!({"capabilities": {
            "baselineCapabilitySet": "None",
            "additionalEnabledCapabilities": ["A", 3]}}));
        with.data["status"] = json!({"capabilities": {"enabledCapabilities": ["A", "B"]}});
        let spec = Spec::of(&with);
        assert_eq!(
            spec.capabilities,
            Some(Asked {
                baseline: Some("None".into()),
                additional: vec!["A".into()],
                baseline_unreadable: false,
            })
        );
        assert_eq!(
            spec.invalid,
            ["spec.capabilities.additionalEnabledCapabilities[1]: must be a string"]
        );
        let catalogue = Catalogue::parse("known: [A, B, C]").unwrap();
        let (caps, problems) = cluster_capabilities(&catalogue, &spec, Some(&with));
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(caps.enabled, ["A".to_owned(), "B".to_owned()].into());
        assert_eq!(caps.implicitly_enabled, ["B".to_owned()].into());
        // No spec: vCurrent.
        let (caps, _) = cluster_capabilities(&catalogue, &Spec::default(), None);
        assert_eq!(caps.enabled.len(), 3);
        // What cannot be read enables nothing (fail closed), and is reported.
        let bad = Spec::of(&cv(json!({"capabilities": "all"})));
        assert_eq!(bad.invalid, ["spec.capabilities: must be an object"]);
        assert!(
            cluster_capabilities(&catalogue, &bad, None)
                .0
                .enabled
                .is_empty()
        );
        let bad = Spec::of(&cv(json!({"capabilities": {
            "baselineCapabilitySet": 7, "additionalEnabledCapabilities": ["C"]}})));
        assert_eq!(
            bad.invalid,
            ["spec.capabilities.baselineCapabilitySet: must be a string"]
        );
        let (caps, _) = cluster_capabilities(&catalogue, &bad, None);
        assert_eq!(caps.enabled, ["C".to_owned()].into());
        // A status list that is not one: its names kept, and said.
        let mut odd = cv(json!({}));
        odd.data["status"] = json!({"capabilities": {"enabledCapabilities": ["A", {"x": 1}]}});
        let (caps, problems) = cluster_capabilities(&catalogue, &Spec::of(&odd), Some(&odd));
        assert!(caps.enabled.contains("A"));
        assert!(
            problems[0].contains("cannot be read in full"),
            "{problems:?}"
        );
    }

    #[test]
    fn unmanaged_overrides_are_read_and_bad_fields_reported_and_ignored() {
        let spec = Spec::of(&cv(json!({
            "clusterID": "x",
            "overrides": [
                {"kind": "Deployment", "group": "apps", "namespace": "ns", "name": "d", "unmanaged": true},
                {"kind": "ClusterRole", "group": "rbac.authorization.k8s.io", "namespace": "", "name": "r", "unmanaged": true},
                {"kind": "ConfigMap", "group": "", "namespace": "ns", "name": "kept", "unmanaged": false},
                {"kind": "", "group": "", "namespace": "ns", "name": "x", "unmanaged": true},
                {"kind": "ConfigMap", "name": "x", "unmanaged": "yes"},
                "nonsense"
            ],
            "desiredUpdate": {"version": "one-point-two", "force": "true"}
        })));
        let ids: Vec<String> = spec.unmanaged.iter().map(ToString::to_string).collect();
        assert_eq!(ids, ["Deployment ns/d", "ClusterRole r"]);
        assert_eq!(
            spec.invalid,
            [
                "spec.overrides[3]: kind must not be empty",
                "spec.overrides[4]: unmanaged must be true or false, not \"yes\"",
                "spec.overrides[5]: must be an object with kind, group, namespace, name and unmanaged",
                "spec.desiredUpdate.force: must be true or false",
            ]
        );
        assert_eq!(spec.desired_update, None, "an invalid request is ignored");
        let invalid = spec.invalid_condition().unwrap();
        assert_eq!(invalid.status, ConditionStatus::True);
        assert_eq!(
            invalid.message,
            "The cluster version is invalid:\n\
             * spec.overrides[3]: kind must not be empty\n\
             * spec.overrides[4]: unmanaged must be true or false, not \"yes\"\n\
             * spec.overrides[5]: must be an object with kind, group, namespace, name and unmanaged\n\
             * spec.desiredUpdate.force: must be true or false\n"
        );
        assert!(
            Spec::of(&cv(json!({"clusterID": "x"})))
                .invalid_condition()
                .is_none()
        );
    }

    fn cv_with(desired: Value, status: Value) -> DynamicObject {
        serde_json::from_value(json!({"apiVersion": "config.openshift.io/v1",
            "kind": "ClusterVersion", "metadata": {"name": "version"},
            "spec": {"desiredUpdate": desired}, "status": status}))
        .unwrap()
    }

    /// The one problem of `desired` over `status`, as the Invalid message says it.
    fn invalid_message(desired: Value, status: Value) -> String {
        let spec = Spec::of(&cv_with(desired, status));
        assert_eq!(spec.desired_update, None);
        spec.invalid_condition().expect("invalid").message
    }

    #[test]
    fn a_version_alone_must_be_an_available_update_or_in_history_as_the_cvo_says() {
        let status = json!({
            "availableUpdates": [
                {"version": "1.5.0", "image": "example.com/cvo@sha256:15"},
                {"version": "1.6.0", "image": "example.com/cvo@sha256:16a"},
                {"version": "1.6.0", "image": "example.com/cvo@sha256:16b"},
                {"version": "1.7.0", "image": ""},
            ],
            "history": [
                {"state": "Completed", "version": "1.4.0", "image": "example.com/cvo@sha256:14"},
                {"state": "Completed", "version": "1.3.0", "image": ""},
            ],
        });
        let spec = Spec::of(&cv_with(json!({"version": "1.5.0"}), status.clone()));
        assert_eq!(
            spec.desired_update,
            Some(DesiredUpdate {
                version: "1.5.0".into(),
                image: "example.com/cvo@sha256:15".into(),
                image_from: ImageFrom::AvailableUpdates,
                ..DesiredUpdate::default()
            })
        );
        assert!(spec.invalid_condition().is_none());
        // A rollback: the history entry's image.
        let back = Spec::of(&cv_with(
            json!({"version": "1.4.0", "image": "", "force": false}),
            status.clone(),
        ))
        .desired_update
        .unwrap();
        assert_eq!(
            (back.image.as_str(), back.image_from),
            ("example.com/cvo@sha256:14", ImageFrom::History)
        );
        assert_eq!(
            invalid_message(json!({"version": "1.9.0"}), status.clone()),
            "The cluster version is invalid: spec.desiredUpdate.version: Invalid value: \"1.9.0\": when image is empty the update must be an available update"
        );
        // Without availableUpdates at all (null), and for entries without an image.
        for (version, status) in [
            ("1.9.0", json!({"availableUpdates": null})),
            ("1.7.0", status.clone()),
            ("1.3.0", status.clone()),
        ] {
            assert!(
                invalid_message(json!({"version": version}), status)
                    .ends_with("when image is empty the update must be an available update")
            );
        }
        assert_eq!(
            invalid_message(json!({"version": "1.6.0"}), status.clone()),
            "The cluster version is invalid: spec.desiredUpdate.version: Invalid value: \"1.6.0\": there are multiple possible payloads for this version, specify the exact image"
        );
        assert_eq!(
            invalid_message(json!({"version": "one-point-two"}), status),
            "The cluster version is invalid: spec.desiredUpdate.version: Invalid value: \"one-point-two\": must be a semantic version (1.2.3[-...])"
        );
    }

    #[test]
    fn an_image_is_taken_as_asked_and_force_and_accepted_risks_are_read() {
        let spec = Spec::of(&cv_with(
            json!({"version": "", "image": "example.com/cvo:1.5.0", "force": true,
                   "acceptRisks": [{"name": "RiskA"}, {"name": "RiskB"}]}),
            json!({}),
        ));
        assert_eq!(
            spec.desired_update,
            Some(DesiredUpdate {
                version: String::new(),
                image: "example.com/cvo:1.5.0".into(),
                image_from: ImageFrom::Spec,
                force: true,
                accept_risks: vec!["RiskA".into(), "RiskB".into()],
                preflight: false,
            })
        );
        // mode: Preflight asks for a check of the release; another mode is refused.
        let preflight = Spec::of(&cv_with(
            json!({"image": "example.com/cvo:1.5.0", "mode": "Preflight"}),
            json!({}),
        ));
        assert!(
            preflight.desired_update.is_none(),
            "nothing asks for an update"
        );
        assert!(preflight.preflight.unwrap().preflight);
        let other = Spec::of(&cv_with(
            json!({"image": "example.com/cvo:1.5.0", "mode": "Apply"}),
            json!({}),
        ));
        assert!(other.desired_update.is_none() && other.preflight.is_none());
        assert_eq!(
            other.invalid,
            [
                "spec.desiredUpdate.mode: Unsupported value: \"Apply\": supported values: \"Preflight\""
            ]
        );
        // acceptRisks alone (what `oc adm upgrade accept` and `--clear` leave) is valid.
        let only = Spec::of(&cv_with(
            json!({"acceptRisks": [{"name": "RiskA"}]}),
            json!({}),
        ));
        assert!(only.invalid_condition().is_none());
        assert_eq!(only.desired_update.unwrap().image, "");
        assert!(
            invalid_message(
                json!({"acceptRisks": [{"name": "A"}, {"name": "A"}]}),
                json!({})
            )
            .contains("spec.desiredUpdate.acceptRisks[1]: Duplicate value")
        );
        assert_eq!(
            invalid_message(json!({"version": "", "image": ""}), json!({})),
            "The cluster version is invalid: spec.desiredUpdate: Required value: must specify architecture, version, image, or acceptRisks"
        );
        let many: Vec<Value> = (0..1001)
            .map(|i| json!({"name": format!("r{i}")}))
            .collect();
        assert!(invalid_message(json!({"acceptRisks": many}), json!({})).contains("Too many"));
    }

    #[test]
    fn another_architecture_is_refused_and_not_acted_on() {
        let status = json!({"availableUpdates": [{"version": "1.4.0", "image": "img@sha256:1"}],
            "desired": {"version": "1.4.0", "image": "img@sha256:1"}});
        // What `oc adm upgrade --to-multi-arch` writes.
        let multi = invalid_message(
            json!({"architecture": "Multi", "version": "1.4.0"}),
            status.clone(),
        );
        assert_eq!(
            multi,
            "The cluster version is invalid: spec.desiredUpdate.architecture: Unsupported value: \"Multi\": cvo releases are single-architecture, so the cluster cannot move to another architecture; leave architecture empty"
        );
        assert_eq!(
            invalid_message(
                json!({"architecture": "Multi", "image": "img@sha256:1"}),
                status.clone()
            ),
            "The cluster version is invalid: spec.desiredUpdate: Invalid value: \"object\": cannot set both Architecture and Image"
        );
        assert!(
            invalid_message(json!({"architecture": "Multi"}), status.clone())
                .ends_with("Version must be set if Architecture is set")
        );
        // The cluster's own architecture, or none, is fine.
        let own = json!({"availableUpdates": status["availableUpdates"],
            "desired": {"version": "1.4.0", "architecture": "amd64"}});
        let same = Spec::of(&cv_with(
            json!({"architecture": "amd64", "version": "1.4.0"}),
            own,
        ));
        assert!(same.invalid_condition().is_none());
        let none = Spec::of(&cv_with(
            json!({"architecture": "", "version": "1.4.0"}),
            status,
        ));
        assert!(none.invalid_condition().is_none());
    }

    #[test]
    fn accepted_risks_the_target_is_exposed_to_are_recorded_as_the_cvo_words_them() {
        let cv = cv_with(
            json!({"image": "img@sha256:2", "acceptRisks": [{"name": "RiskA"}, {"name": "Other"}]}),
            json!({"conditionalUpdates": [
                {"release": {"version": "1.5.0", "image": "img@sha256:2"},
                 "risks": [{"name": "RiskA", "url": "https://example.com", "message": "m"}]},
            ]}),
        );
        let desired = Spec::of(&cv).desired_update.unwrap();
        assert_eq!(
            exposed_risks_accepted(&cv, &desired, "1.5.0").as_deref(),
            Some(
                "The target release img@sha256:2 is exposed to the risks [RiskA] which were all explicitly accepted by the cluster administrator."
            )
        );
        assert!(
            exposed_risks_accepted(&cv, &desired, "9.9.9").is_some(),
            "matched by image"
        );
        let plain = cv_with(json!({"image": "img@sha256:2"}), json!({}));
        let d = Spec::of(&plain).desired_update.unwrap();
        assert_eq!(exposed_risks_accepted(&plain, &d, "1.5.0"), None);
    }

    #[test]
    fn a_single_problem_is_said_on_one_line_and_a_valid_spec_clears_invalid() {
        let stored = Condition::new("Invalid", ConditionStatus::True, INVALID_REASON, "old");
        let valid = Spec::default();
        let cleared = valid.invalid_update(Some(&stored)).unwrap();
        assert_eq!(cleared.status, ConditionStatus::False);
        assert_eq!(valid.invalid_update(None), None);
    }

    #[test]
    fn an_override_makes_the_cluster_not_upgradeable() {
        let spec = Spec::of(&cv(json!({"overrides": [
            {"kind": "ConfigMap", "group": "", "namespace": "ns", "name": "a", "unmanaged": true}]})));
        let ok = Condition::new("Upgradeable", ConditionStatus::True, "AsExpected", "");
        let c = upgradeable_with_overrides(ok.clone(), &spec);
        assert_eq!(
            (c.status, c.reason.as_str()),
            (ConditionStatus::False, OVERRIDES_REASON)
        );
        assert!(c.message.contains("ConfigMap ns/a"), "{}", c.message);
        let stuck = Condition::new(
            "Upgradeable",
            ConditionStatus::Unknown,
            "DeletionStatusUnknown",
            "cannot tell",
        );
        let c = upgradeable_with_overrides(stuck, &spec);
        assert_eq!(
            (c.status, c.reason.as_str()),
            (ConditionStatus::False, "MultipleReasons")
        );
        assert!(
            c.message
                .ends_with("Also DeletionStatusUnknown: cannot tell"),
            "{}",
            c.message
        );
        assert_eq!(upgradeable_with_overrides(ok.clone(), &Spec::default()), ok);
    }
}
