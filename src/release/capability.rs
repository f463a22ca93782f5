//! Capabilities: optional components of a release, with the OpenShift CVO's semantics.
//!
//! A manifest annotated `capability.openshift.io/name: "A+B"` belongs to capabilities `A` and
//! `B`, and is applied only while both are enabled (an empty value means none). A cluster
//! chooses its capabilities in ClusterVersion `spec.capabilities` (a baseline set and
//! additional capabilities); `status.capabilities.enabledCapabilities` carries what was
//! enabled before, and an enabled capability is never disabled again: asking to drop one keeps
//! it enabled ("implicitly"), as does an update that moves an object the cluster already has
//! into a capability it does not have.
//!
//! The catalogue — which capabilities exist and which named sets a baseline can name — is the
//! release's data ([`Catalogue`]): `capabilities.yaml` beside the manifests
//! (`release-manifests/` of a payload), or, without it, every name a manifest uses, with
//! `None` (nothing) and `vCurrent` (everything) as the sets. Everything here is pure: the
//! cluster's spec and status come in as values, the decisions go out as values.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::{Deserialize, Serialize};

use super::feature_gate::{self, EnabledGates};
use super::{FEATURE_SET_ANNOTATION, Manifest, ObjectId, Release};

/// The file that declares a release's capability catalogue.
pub const CATALOGUE_FILE: &str = "capabilities.yaml";
/// The set that enables nothing.
pub const SET_NONE: &str = "None";
/// The set that enables every capability of the release: the baseline when none is asked.
pub const SET_CURRENT: &str = "vCurrent";

/// Which capabilities a release knows, and the named sets a baseline may select.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Catalogue {
    pub known: BTreeSet<String>,
    pub sets: BTreeMap<String, BTreeSet<String>>,
    /// Read from [`CATALOGUE_FILE`] (else derived from the manifests' annotations).
    pub declared: bool,
    /// The file it was read from, when declared.
    #[serde(skip)]
    pub file: Option<std::path::PathBuf>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a mapping with `known` and `sets`")]
struct RawCatalogue {
    known: Vec<String>,
    #[serde(default)]
    sets: BTreeMap<String, Vec<String>>,
}

impl Catalogue {
    /// Parses [`CATALOGUE_FILE`]: `known: [A, B]` and `sets: {None: [], vCurrent: [A, B]}`.
    /// `None` and `vCurrent` are implied when absent (nothing; every known capability).
    ///
    /// # Errors
    ///
    /// What is wrong, in plain words: not YAML of that shape, an empty or `+`-holding name, a
    /// set naming a capability that is not known.
    pub fn parse(text: &str) -> Result<Self, String> {
        let raw: RawCatalogue = serde_saphyr::from_str(text).map_err(|e| {
            format!(
                "expected `known: [NAME, …]` and optionally `sets: {{SET: [NAME, …]}}`: {}",
                super::typed::plain_serde_message(&e.to_string())
            )
        })?;
        let mut known = BTreeSet::new();
        for name in raw.known {
            check_name(&name).map_err(|why| format!("known: {why}"))?;
            if !known.insert(name.clone()) {
                return Err(format!("known: `{name}` is listed twice"));
            }
        }
        let mut sets = BTreeMap::new();
        for (set, members) in raw.sets {
            if set.trim().is_empty() {
                return Err("sets: a set name is empty".to_owned());
            }
            let members: BTreeSet<String> = members.into_iter().collect();
            let unknown: Vec<&str> = members
                .iter()
                .filter(|m| !known.contains(*m))
                .map(String::as_str)
                .collect();
            if !unknown.is_empty() {
                return Err(format!(
                    "sets: {set} names capabilities that `known` does not list: {}",
                    unknown.join(", ")
                ));
            }
            sets.insert(set, members);
        }
        let mut catalogue = Catalogue {
            known,
            sets,
            declared: true,
            file: None,
        };
        catalogue.imply_sets();
        Ok(catalogue)
    }

    /// The catalogue of a release without [`CATALOGUE_FILE`]: every (non-empty) name its
    /// manifests use is known; `vCurrent` is all of them.
    pub fn derived<'a>(manifests: impl IntoIterator<Item = &'a Manifest>) -> Self {
        let known = manifests
            .into_iter()
            .flat_map(|m| m.capabilities.iter())
            .filter(|c| check_name(c).is_ok())
            .cloned()
            .collect();
        let mut catalogue = Catalogue {
            known,
            sets: BTreeMap::new(),
            declared: false,
            file: None,
        };
        catalogue.imply_sets();
        catalogue
    }

    fn imply_sets(&mut self) {
        self.sets.entry(SET_NONE.to_owned()).or_default();
        self.sets
            .entry(SET_CURRENT.to_owned())
            .or_insert_with(|| self.known.clone());
    }
}

/// At most this many names in one message (a hostile release may name thousands).
const NAMES_SHOWN: usize = 20;

/// `A, B, C` — the first [`NAMES_SHOWN`] names, then `and N more`: the CVO's wording for the
/// lists it writes, bounded.
pub fn name_list<'a>(names: impl IntoIterator<Item = &'a str>) -> String {
    let names: Vec<&str> = names.into_iter().collect();
    let mut text = names
        .iter()
        .take(NAMES_SHOWN)
        .map(|n| crate::diagnostic::excerpt(n))
        .collect::<Vec<_>>()
        .join(", ");
    if names.len() > NAMES_SHOWN {
        text.push_str(&format!(" and {} more", names.len() - NAMES_SHOWN));
    }
    text
}

/// Why `name` cannot be a capability name.
fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        Err("a capability name is empty".to_owned())
    } else if name.contains('+') {
        Err(format!(
            "`{name}`: a capability name cannot hold `+` (it separates names)"
        ))
    } else if name.trim() != name {
        Err(format!(
            "`{name}`: a capability name cannot start or end with spaces"
        ))
    } else {
        Ok(())
    }
}

/// The capability names of an annotation value, as the CVO splits it: on `+`, nothing
/// trimmed; an empty value names none.
pub fn split_annotation(value: &str) -> Vec<String> {
    if value.is_empty() {
        return Vec::new();
    }
    value.split('+').map(str::to_owned).collect()
}

/// ClusterVersion `spec.capabilities`, as read (ClusterVersion's reader checks the shape).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Asked {
    /// `baselineCapabilitySet`; `None`: [`SET_CURRENT`].
    pub baseline: Option<String>,
    /// `additionalEnabledCapabilities`.
    pub additional: Vec<String>,
    /// `baselineCapabilitySet` (or `spec.capabilities` itself) is not of the API's shape: the
    /// baseline enables nothing (fail closed; the reader reports the field).
    pub baseline_unreadable: bool,
}

/// The capabilities of a cluster for one release: ClusterVersion
/// `status.capabilities` plus which enabled ones the spec did not ask for.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Capabilities {
    pub known: BTreeSet<String>,
    pub enabled: BTreeSet<String>,
    /// Enabled although the spec does not ask for them: enabled before (never disabled
    /// again), or enabled by an update ([`implicitly_enabled`]).
    pub implicitly_enabled: BTreeSet<String>,
}

/// What [`Capabilities::resolve`] found wrong with the spec (the field is then read as the
/// CVO reads it, and the problem reported).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpecProblem(pub String);

impl Capabilities {
    /// Every capability of the catalogue enabled: a cluster without ClusterVersion, or one
    /// whose spec asks for nothing (baseline `vCurrent`).
    pub fn all(catalogue: &Catalogue) -> Self {
        Capabilities::resolve(catalogue, None, &[]).0
    }

    /// Enabled = the baseline set ∪ additional ∪ `prior` (what status says was enabled): what
    /// `prior` adds is implicitly enabled. A baseline set the catalogue does not have enables
    /// nothing (as the CVO reads an unknown set) and is reported; so is an additional
    /// capability the release does not know (it is enabled all the same, so that a release
    /// that adds it later finds it on).
    pub fn resolve(
        catalogue: &Catalogue,
        asked: Option<&Asked>,
        prior: &[String],
    ) -> (Self, Vec<SpecProblem>) {
        let mut problems = Vec::new();
        let baseline = asked
            .and_then(|a| a.baseline.as_deref())
            .unwrap_or(SET_CURRENT);
        let unreadable = asked.is_some_and(|a| a.baseline_unreadable);
        let mut enabled = match catalogue.sets.get(baseline) {
            _ if unreadable => BTreeSet::new(),
            Some(set) => set.clone(),
            None => {
                problems.push(SpecProblem(format!(
                    "spec.capabilities.baselineCapabilitySet: `{}` is not a capability set of this release (it has {}): no capability is enabled by it",
                    crate::diagnostic::excerpt(baseline),
                    name_list(catalogue.sets.keys().map(String::as_str))
                )));
                BTreeSet::new()
            }
        };
        let additional = asked.map(|a| a.additional.as_slice()).unwrap_or_default();
        enabled.extend(additional.iter().cloned());
        let unknown: Vec<&str> = additional
            .iter()
            .filter(|c| !catalogue.known.contains(*c))
            .map(String::as_str)
            .collect();
        if !unknown.is_empty() {
            problems.push(SpecProblem(format!(
                "spec.capabilities.additionalEnabledCapabilities: not capabilities of this release (enabled all the same): {}",
                name_list(unknown)
            )));
        }
        let mut implicitly_enabled = BTreeSet::new();
        for c in prior {
            if enabled.insert(c.clone()) {
                implicitly_enabled.insert(c.clone());
            }
        }
        let caps = Capabilities {
            known: catalogue.known.clone(),
            enabled,
            implicitly_enabled,
        };
        (caps, problems)
    }

    /// Adds capabilities an update enables implicitly ([`implicitly_enabled`]).
    pub fn enable_implicitly(&mut self, implicit: BTreeSet<String>) {
        self.enabled.extend(implicit.iter().cloned());
        self.implicitly_enabled.extend(implicit);
    }

    /// Why `manifest` is left out, or `None` when its capabilities are all enabled. The CVO's
    /// words: unknown names first (`unrecognized capability names: A, B`, unless
    /// `allow_unknown`), else `disabled capabilities: A, B`.
    pub fn exclusion(&self, manifest: &Manifest, allow_unknown: bool) -> Option<String> {
        self.exclusion_of(&manifest.capabilities, allow_unknown)
    }

    /// [`Self::exclusion`] of a manifest that needs `names`.
    fn exclusion_of(&self, names: &[String], allow_unknown: bool) -> Option<String> {
        let (mut unknown, mut disabled) = (Vec::new(), Vec::new());
        for c in names {
            if !allow_unknown && !self.known.contains(c) {
                unknown.push(c.as_str());
            } else if !self.enabled.contains(c) {
                disabled.push(c.as_str());
            }
        }
        if !unknown.is_empty() {
            Some(format!(
                "unrecognized capability names: {}",
                name_list(unknown)
            ))
        } else if !disabled.is_empty() {
            Some(format!("disabled capabilities: {}", name_list(disabled)))
        } else {
            None
        }
    }
}

/// What [`implicitly_enabled`] needs of the release a cluster is at: each object its
/// manifests name (group, kind, namespace, name; delete manifests too, as the CVO counts
/// them) and what decides whether each manifest is applied — the capabilities it needs and
/// its feature-gate annotation. Small enough to keep across a switch of releases, where the
/// release is not.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Gates {
    objects: HashMap<ObjectId, Vec<Needs>>,
    /// The release, as messages name it: its version and image (`1.0.0 (HOST/REPO@sha256:…)`).
    release: String,
}

/// What one manifest of the current release needs to be applied.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Needs {
    capabilities: Vec<String>,
    /// `release.openshift.io/feature-gate`, and whether a feature set is named too.
    feature_gates: Option<(String, bool)>,
}

impl Gates {
    pub fn of(release: &Release) -> Self {
        let mut objects: HashMap<ObjectId, Vec<Needs>> = HashMap::new();
        for m in &release.manifests {
            let feature_gates = m
                .annotation(feature_gate::FEATURE_GATE_ANNOTATION)
                .map(|g| {
                    let with_set = m.annotation(FEATURE_SET_ANNOTATION).is_some();
                    (g.to_owned(), with_set)
                });
            objects.entry(m.id.clone()).or_default().push(Needs {
                capabilities: m.capabilities.clone(),
                feature_gates,
            });
        }
        let version = release.version().map(ToString::to_string);
        let image = release.image.as_deref().filter(|i| !i.is_empty());
        let named = match (version, image) {
            (Some(v), Some(i)) => format!("{v} ({i})"),
            (Some(v), None) => v,
            (None, Some(i)) => i.to_owned(),
            (None, None) => "of no version".to_owned(),
        };
        Gates {
            objects,
            release: named,
        }
    }

    /// The release these gates are of, as messages name it: `1.0.0 (HOST/REPO@sha256:…)`.
    pub fn release(&self) -> &str {
        &self.release
    }
}

/// The capabilities an update from the release `current` describes to `update` enables
/// implicitly, with `caps` the cluster's capabilities before it and `gates` the feature gates
/// it enables (`None`: the loader decided them) — the CVO's rule: for each manifest `update`
/// keeps (profile, feature set, exclusions) but its feature gates or capabilities leave out —
/// unknown capability names allowed, since a new release may bring new capabilities — whose
/// object (group, kind, namespace, name) the current release applies under `gates` and
/// `caps`, the update's capabilities that the current manifest did not need and `caps` does
/// not enable are enabled. Returns them together with those `caps` already holds implicitly.
pub fn implicitly_enabled(
    update: &Release,
    current: &Gates,
    caps: &Capabilities,
    gates: Option<&EnabledGates>,
) -> BTreeSet<String> {
    let mut out = caps.implicitly_enabled.clone();
    for m in &update.manifests {
        let gated_out = gates.is_some_and(|g| feature_gate::feature_gate_exclusion(g, m).is_some());
        if !gated_out && caps.exclusion(m, true).is_none() {
            continue;
        }
        for needed in current.objects.get(&m.id).into_iter().flatten() {
            let current_gated_out = match (gates, &needed.feature_gates) {
                (Some(g), Some((names, with_set))) => {
                    feature_gate::gate_exclusion(g, names, *with_set).is_some()
                }
                _ => false,
            };
            if current_gated_out || caps.exclusion_of(&needed.capabilities, true).is_some() {
                continue;
            }
            out.extend(
                m.capabilities
                    .iter()
                    .filter(|n| !needed.capabilities.contains(n))
                    .filter(|n| !caps.enabled.contains(*n))
                    .cloned(),
            );
        }
    }
    out
}

/// The manifests of `update` that need a capability `caps` does not enable: the only ones for
/// which an update can enable a capability implicitly (whichever way it is judged).
pub fn awaiting<'a>(
    update: &'a Release,
    caps: &'a Capabilities,
) -> impl Iterator<Item = &'a Manifest> + 'a {
    update.manifests.iter().filter(|m| waits(m, caps))
}

/// `m` needs a capability `caps` does not enable.
fn waits(m: &Manifest, caps: &Capabilities) -> bool {
    m.capabilities.iter().any(|c| !caps.enabled.contains(c))
}

/// The CVO's rule judged from the cluster, when the release it is at is not known: each
/// manifest of `update` that needs capabilities `caps` does not enable ([`awaiting`]), whose
/// object is in `applied` (it exists and `cvo` applied it: an earlier release did), enables
/// them — as [`implicitly_enabled`] would, since what the earlier manifest needed was enabled
/// for it to be applied. Returns only what this update enables (not what `caps` already holds
/// implicitly), with the objects that made it (each once, in the update's order).
pub fn implicitly_enabled_by_cluster<'a>(
    update: &'a Release,
    caps: &Capabilities,
    applied: &std::collections::HashSet<ObjectId>,
) -> (BTreeSet<String>, Vec<&'a ObjectId>) {
    let mut enabled = BTreeSet::new();
    let mut objects: Vec<&ObjectId> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let moved = update.manifests.iter();
    for m in moved.filter(|m| waits(m, caps) && applied.contains(&m.id)) {
        enabled.extend(
            m.capabilities
                .iter()
                .filter(|c| !caps.enabled.contains(*c))
                .cloned(),
        );
        if seen.insert(&m.id) {
            objects.push(&m.id);
        }
    }
    (enabled, objects)
}

/// What an update enabled implicitly, and from what that was judged: what ClusterVersion's
/// `ImplicitlyEnabledCapabilities` message says besides the CVO's words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ByUpdate {
    /// The capabilities this update enabled (none enabled before).
    pub enabled: BTreeSet<String>,
    pub judged: Judged,
}

/// How an update's implicit capabilities were judged (docs/capabilities.md).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Judged {
    /// From the release the cluster is at ([`implicitly_enabled`]), named as
    /// [`Gates::release`] names it.
    Release(String),
    /// From the cluster ([`implicitly_enabled_by_cluster`]): the objects `cvo` applied that
    /// need the capabilities, and why the release the cluster is at was not used (`None`:
    /// none was named; else it could not be read or verified, in words).
    Cluster {
        objects: Vec<ObjectId>,
        unread: Option<String>,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validate::testing::manifest;

    fn cm(name: &str, caps: Option<&str>) -> Manifest {
        cm_kind("ConfigMap", name, caps)
    }

    fn cm_kind(kind: &str, name: &str, caps: Option<&str>) -> Manifest {
        let annotations = caps
            .map(|c| format!("  annotations:\n    capability.openshift.io/name: \"{c}\"\n"))
            .unwrap_or_default();
        manifest(
            &format!("0000_50_a_00_{name}.yaml"),
            &format!(
                "apiVersion: v1\nkind: {kind}\nmetadata:\n  name: {name}\n  namespace: ns1\n{annotations}"
            ),
        )
    }

    fn set(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|s| (*s).to_owned()).collect()
    }

    fn caps(known: &[&str], enabled: &[&str], implicit: &[&str]) -> Capabilities {
        Capabilities {
            known: set(known),
            enabled: set(enabled),
            implicitly_enabled: set(implicit),
        }
    }

    fn release(manifests: Vec<Manifest>) -> Release {
        crate::validate::testing::release(manifests)
    }

    #[test]
    fn annotation_is_split_as_the_cvo_splits_it() {
        assert_eq!(split_annotation(""), Vec::<String>::new());
        assert_eq!(split_annotation("A+B"), vec!["A", "B"]);
        assert_eq!(split_annotation("a++b"), vec!["a", "", "b"]);
        assert_eq!(split_annotation(" A"), vec![" A"]);
    }

    #[test]
    fn catalogue_is_read_and_checked() {
        let c = Catalogue::parse("known: [A, B, C]\nsets:\n  v1: [A]\n").unwrap();
        assert!(c.declared);
        assert_eq!(c.sets["v1"], set(&["A"]));
        assert_eq!(c.sets[SET_NONE], set(&[]));
        assert_eq!(c.sets[SET_CURRENT], set(&["A", "B", "C"]));
        let c = Catalogue::parse("known: [A, B]\nsets:\n  vCurrent: [A]\n").unwrap();
        assert_eq!(c.sets[SET_CURRENT], set(&["A"]));
        for (text, why) in [
            ("known: [A]\nsets:\n  v1: [B]\n", "v1 names capabilities"),
            ("known: [A, A]\n", "listed twice"),
            ("known: [\"A+B\"]\n", "cannot hold `+`"),
            ("known: [\"\"]\n", "empty"),
            ("known: [A]\nextra: 1\n", "expected `known"),
            ("- A\n", "expected `known"),
        ] {
            let e = Catalogue::parse(text).unwrap_err();
            assert!(e.contains(why), "{text:?}: {e}");
            assert!(!e.contains("RawCatalogue") && !e.contains("struct"), "{e}");
        }
    }

    #[test]
    fn derived_catalogue_knows_every_name_used() {
        let ms = [cm("a", Some("A+B")), cm("b", Some("C")), cm("c", None)];
        let c = Catalogue::derived(&ms);
        assert!(!c.declared);
        assert_eq!(c.known, set(&["A", "B", "C"]));
        assert_eq!(c.sets[SET_CURRENT], set(&["A", "B", "C"]));
        assert_eq!(c.sets[SET_NONE], set(&[]));
    }

    #[test]
    fn enabled_is_baseline_and_additional_and_everything_enabled_before() {
        let cat = Catalogue::parse("known: [A, B, C, D]\nsets:\n  v1: [A]\n").unwrap();
        // Nothing asked: vCurrent.
        let (c, p) = Capabilities::resolve(&cat, None, &[]);
        assert_eq!(c.enabled, set(&["A", "B", "C", "D"]));
        assert!(c.implicitly_enabled.is_empty() && p.is_empty());
        let asked = |baseline: &str, additional: &[&str]| Asked {
            baseline: Some(baseline.to_owned()),
            additional: additional.iter().map(|s| (*s).to_owned()).collect(),
            baseline_unreadable: false,
        };
        let (c, _) = Capabilities::resolve(&cat, Some(&asked("None", &["B"])), &[]);
        assert_eq!(c.enabled, set(&["B"]));
        let (c, _) = Capabilities::resolve(&cat, Some(&asked("v1", &["B"])), &[]);
        assert_eq!(c.enabled, set(&["A", "B"]));
        // B was asked for and then dropped from the spec: still enabled, implicitly.
        let prior = vec!["A".to_owned(), "B".to_owned()];
        let (c, p) = Capabilities::resolve(&cat, Some(&asked("v1", &[])), &prior);
        assert_eq!(c.enabled, set(&["A", "B"]));
        assert_eq!(c.implicitly_enabled, set(&["B"]));
        assert!(p.is_empty());
        // An unknown set enables nothing, and says so; an unknown additional is enabled.
        let (c, p) = Capabilities::resolve(&cat, Some(&asked("v9", &["Z"])), &[]);
        assert_eq!(c.enabled, set(&["Z"]));
        assert_eq!(p.len(), 2, "{p:?}");
        assert!(p[0].0.contains("`v9` is not a capability set"), "{p:?}");
        assert!(p[1].0.ends_with("enabled all the same): Z"), "{p:?}");
    }

    #[test]
    fn exclusion_reports_unknown_names_before_disabled_ones() {
        let c = caps(&["A", "B"], &["A"], &[]);
        assert_eq!(c.exclusion(&cm("x", Some("A")), false), None);
        assert_eq!(c.exclusion(&cm("x", None), false), None);
        assert_eq!(c.exclusion(&cm("x", Some("")), false), None);
        assert_eq!(
            c.exclusion(&cm("x", Some("A+B")), false).as_deref(),
            Some("disabled capabilities: B")
        );
        assert_eq!(
            c.exclusion(&cm("x", Some("B+Z+Y")), false).as_deref(),
            Some("unrecognized capability names: Z, Y")
        );
        assert_eq!(
            c.exclusion(&cm("x", Some("B+Z")), true).as_deref(),
            Some("disabled capabilities: B, Z")
        );
        assert_eq!(
            c.exclusion(&cm("x", Some("a++b")), false).as_deref(),
            Some("unrecognized capability names: a, , b")
        );
        // Bounded, however many a hostile manifest names.
        let many: Vec<String> = (0..500).map(|i| format!("C{i}")).collect();
        let why = c.exclusion(&cm("x", Some(&many.join("+"))), false).unwrap();
        assert!(why.ends_with("and 480 more") && why.len() < 300, "{why}");
    }

    /// The CVO's scenarios (its `payloadcapabilitytest` cases), as our own table: current
    /// manifests, update manifests, the cluster's capabilities, and what is implicitly enabled
    /// after.
    #[test]
    fn implicit_enablement_follows_the_cvos_scenarios() {
        type Case<'a> = (
            &'a str,
            Vec<Manifest>,
            Vec<Manifest>,
            Capabilities,
            &'a [&'a str],
        );
        let cases: Vec<Case> = vec![
            (
                "moved into a disabled capability",
                vec![cm("n1", Some("cap1"))],
                vec![cm("n1", Some("cap2"))],
                caps(&["cap1", "cap2"], &["cap1"], &[]),
                &["cap2"],
            ),
            (
                "moved into a capability the cluster does not know yet",
                vec![cm("n1", Some("cap1"))],
                vec![cm("n1", Some("cap2"))],
                caps(&["cap1"], &["cap1"], &[]),
                &["cap2"],
            ),
            (
                "another object (kind differs)",
                vec![cm("n1", Some("cap1"))],
                vec![cm_kind("Secret", "n1", Some("cap2"))],
                caps(&["cap1", "cap2"], &["cap1"], &[]),
                &[],
            ),
            (
                "the current manifest was not applied",
                vec![cm("n1", Some("cap1"))],
                vec![cm("n1", Some("cap2"))],
                caps(&["cap2"], &["cap2"], &[]),
                &[],
            ),
            (
                "the new capability is enabled already",
                vec![cm("n1", Some("cap1"))],
                vec![cm("n1", Some("cap2"))],
                caps(&["cap1", "cap2"], &["cap1", "cap2"], &[]),
                &[],
            ),
            (
                "already implicitly enabled",
                vec![cm("n1", Some("cap1"))],
                vec![cm("n1", Some("cap2"))],
                caps(&["cap1", "cap2"], &["cap1"], &["cap2"]),
                &["cap2"],
            ),
            (
                "two objects move into one capability: enabled once",
                vec![cm("n1", Some("cap1")), cm("n2", Some("cap1"))],
                vec![cm("n1", Some("cap2")), cm("n2", Some("cap2"))],
                caps(&["cap1", "cap2"], &["cap1"], &[]),
                &["cap2"],
            ),
            (
                "no manifest in the update keeps what was implicit",
                vec![cm("n1", Some("cap1"))],
                vec![],
                caps(&["cap1"], &["cap1"], &["cap1"]),
                &["cap1"],
            ),
            (
                "no current manifest keeps what was implicit",
                vec![],
                vec![cm("n1", Some("cap1"))],
                caps(&["cap1"], &["cap1"], &["cap1"]),
                &["cap1"],
            ),
            (
                "an object without capabilities moves into two",
                vec![cm("n1", None)],
                vec![cm("n1", Some("cap1+cap2"))],
                caps(&["cap1", "cap2"], &["cap1"], &[]),
                &["cap2"],
            ),
            (
                "only what the current manifest did not need",
                vec![cm("n1", Some("cap1+cap3"))],
                vec![cm("n1", Some("cap2+cap3"))],
                caps(&["cap1", "cap2", "cap3"], &["cap1", "cap3"], &[]),
                &["cap2"],
            ),
        ];
        for (name, current, update, c, want) in cases {
            let got = implicitly_enabled(&release(update), &Gates::of(&release(current)), &c, None);
            assert_eq!(got, set(want), "{name}");
        }
    }

    /// A ConfigMap `name` needing capabilities `caps` and the feature gates `gates`.
    fn gated(name: &str, caps: &str, gates: &str) -> Manifest {
        manifest(
            &format!("0000_50_a_00_{name}.yaml"),
            &format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: ns1\n  annotations:\n    capability.openshift.io/name: \"{caps}\"\n    release.openshift.io/feature-gate: \"{gates}\"\n"
            ),
        )
    }

    #[test]
    fn feature_gates_decide_inclusion_on_both_sides_as_the_cvo_does() {
        let c = caps(&["cap1", "cap2"], &["cap1"], &[]);
        let enabled: EnabledGates = set(&["G"]);
        // (case, the current release, the update, implicitly enabled)
        type Case<'a> = (&'a str, Vec<Manifest>, Vec<Manifest>, &'a [&'a str]);
        let cases: Vec<Case> = vec![
            (
                "the update's manifest is left out by a gate: its new capability is enabled",
                vec![cm("n1", Some("cap1"))],
                vec![gated("n1", "cap2", "H")],
                &["cap2"],
            ),
            (
                "the current manifest is left out by a gate: nothing to keep",
                vec![gated("n1", "cap1", "H")],
                vec![cm("n1", Some("cap2"))],
                &[],
            ),
            (
                "the current manifest's gate is enabled: it counts",
                vec![gated("n1", "cap1", "G")],
                vec![cm("n1", Some("cap2"))],
                &["cap2"],
            ),
        ];
        for (name, current, update, want) in cases {
            let got = implicitly_enabled(
                &release(update),
                &Gates::of(&release(current)),
                &c,
                Some(&enabled),
            );
            assert_eq!(got, set(want), "{name}");
        }
    }

    /// Judgement (b): only objects `cvo` applied count, only capabilities not enabled are
    /// enabled, and each object is named once.
    #[test]
    fn judged_from_the_cluster_an_applied_object_enables_what_its_manifest_needs() {
        let c = caps(&["cap1", "cap2", "cap3"], &["cap1"], &["cap1"]);
        let update = release(vec![
            cm("moved", Some("cap1+cap2")),
            cm("theirs", Some("cap3")),
            cm("plain", None),
            cm("kept", Some("cap1")),
        ]);
        let waiting: Vec<&str> = awaiting(&update, &c).map(|m| m.id.name.as_str()).collect();
        assert_eq!(waiting, ["moved", "theirs"]);
        let id = |name: &str| {
            update
                .manifests
                .iter()
                .find(|m| m.id.name == name)
                .unwrap()
                .id
                .clone()
        };
        // `theirs` exists but cvo did not apply it: not in `applied`.
        let applied = [id("moved"), id("plain"), id("kept")].into_iter().collect();
        let (enabled, objects) = implicitly_enabled_by_cluster(&update, &c, &applied);
        assert_eq!(enabled, set(&["cap2"]), "cap1 is enabled already");
        assert_eq!(objects, [&id("moved")]);
        let (enabled, objects) = implicitly_enabled_by_cluster(&update, &c, &Default::default());
        assert!(enabled.is_empty() && objects.is_empty());
    }

    #[test]
    fn gates_name_their_release_by_version_and_image() {
        let mut r = release(vec![]);
        assert_eq!(Gates::of(&r).release(), "of no version");
        r.image = Some("example.com/rel@sha256:ab".to_owned());
        assert_eq!(Gates::of(&r).release(), "example.com/rel@sha256:ab");
    }
}
