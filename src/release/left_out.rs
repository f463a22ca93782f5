//! What a release leaves out for a cluster, counted by reason: the chosen profile, feature set,
//! feature gates, major version and `--exclude` (the loader's filters, in that order), then the
//! feature gates the cluster enables (when a sync decided them, not the loader) and the
//! capabilities it does not enable — `excluded: {profile: N, featureSet: N, featureGate: N,
//! majorVersion: N, capability: N, exclude: N}` in every report (docs/validation.md, "What the
//! release leaves out"; docs/apply.md, "Output").
//!
//! A manifest is counted once, under the first filter that leaves it out: profiles first (a
//! manifest outside the profile is never looked at for its capabilities).

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::capability::Capabilities;
use super::feature_gate::{EnabledGates, feature_gate_exclusion};
use super::{DEFAULT_CLUSTER_PROFILE, ExcludedBy, Release};

/// The counts of one reading of a release (one profile).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeftOut {
    /// The profile the release was read in; `None`: no profile filtering.
    pub profile: Option<String>,
    /// Every manifest of the release, kept or left out.
    pub total: usize,
    /// How many each filter leaves out (every reason present, zero included).
    pub by: BTreeMap<ExcludedBy, usize>,
}

impl LeftOut {
    /// Counts what `release` (read in `profile`) leaves out on a cluster with `caps`: what the
    /// loader's filters excluded, then of the kept manifests those `gates` leave out (the
    /// feature gates a sync read from the cluster; `None` when the loader decided them) and
    /// those `caps` excludes (unknown names included, as the CVO excludes them).
    pub fn of(
        release: &Release,
        profile: Option<&str>,
        caps: &Capabilities,
        gates: Option<&EnabledGates>,
    ) -> Self {
        LeftOut::counted(release, profile, &exclusions(release, caps, gates))
    }

    /// Counts what the loader's filters excluded from `release` (read in `profile`) and the
    /// kept manifests `excluded` leaves out (by index, from [`exclusions`]).
    pub fn counted(release: &Release, profile: Option<&str>, excluded: &Exclusions) -> Self {
        let mut by: BTreeMap<ExcludedBy, usize> = ExcludedBy::ALL.iter().map(|b| (*b, 0)).collect();
        let loader = release.excluded.iter().map(|e| e.by);
        for reason in loader.chain(excluded.values().map(|(by, _)| *by)) {
            *by.entry(reason).or_default() += 1;
        }
        LeftOut {
            profile: profile.map(str::to_owned),
            total: release.manifests.len() + release.excluded.len(),
            by,
        }
    }

    /// Counted with the release's default capabilities (its `vCurrent`: what a cluster
    /// without `spec.capabilities` enables).
    pub fn with_default_capabilities(release: &Release, profile: Option<&str>) -> Self {
        LeftOut::of(
            release,
            profile,
            &Capabilities::all(&release.capabilities),
            None,
        )
    }

    /// Manifests left out, for every reason.
    pub fn count(&self) -> usize {
        self.by.values().sum()
    }

    /// `{"profile": N, "featureSet": N, "featureGate": N, "majorVersion": N, "capability": N,
    /// "exclude": N}`.
    pub fn json(&self) -> Value {
        let mut map = serde_json::Map::new();
        for by in ExcludedBy::ALL {
            map.insert(
                by.key().to_owned(),
                json!(self.by.get(&by).copied().unwrap_or(0)),
            );
        }
        Value::Object(map)
    }

    /// `excluded in profile P: 3000 of 3002 manifests (profile 3000, feature set 0, feature
    /// gate 0, major version 0, capability 0, exclude 0)`.
    pub fn line(&self) -> String {
        let within = match &self.profile {
            Some(p) => format!(" in profile {p}"),
            None => String::new(),
        };
        let by: Vec<String> = ExcludedBy::ALL
            .iter()
            .map(|b| format!("{} {}", b.label(), self.by.get(b).copied().unwrap_or(0)))
            .collect();
        format!(
            "excluded{within}: {} of {} manifests ({})",
            self.count(),
            self.total,
            by.join(", ")
        )
    }
}

/// Kept manifests a cluster leaves out, by index in `release.manifests`: why (the filter, and
/// its reason in the CVO's words).
pub type Exclusions = BTreeMap<usize, (ExcludedBy, String)>;

/// Which of `release`'s kept manifests a cluster leaves out, as the CVO decides: the feature
/// gates `gates` first (`None`: the loader decided them), then the capabilities `caps` does not
/// enable (unknown names included).
pub fn exclusions(
    release: &Release,
    caps: &Capabilities,
    gates: Option<&EnabledGates>,
) -> Exclusions {
    release
        .manifests
        .iter()
        .enumerate()
        .filter_map(|(i, m)| {
            let by_gate = gates
                .and_then(|g| feature_gate_exclusion(g, m))
                .map(|why| (ExcludedBy::FeatureGate, why));
            let excluded = by_gate.or_else(|| {
                caps.exclusion(m, false)
                    .map(|why| (ExcludedBy::Capability, why))
            })?;
            Some((i, excluded))
        })
        .collect()
}

/// The reading a cluster without a profile choice gets: the only one, else the CVO's default
/// profile's; `None` when the release was read in several profiles, none the default.
pub fn default_reading(readings: &[LeftOut]) -> Option<&LeftOut> {
    match readings {
        [one] => Some(one),
        many => many
            .iter()
            .find(|r| r.profile.as_deref() == Some(DEFAULT_CLUSTER_PROFILE)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::release::Excluded;
    use crate::release::capability::Catalogue;
    use crate::validate::testing::{manifest, release};

    fn cm(name: &str, caps: &str) -> crate::release::Manifest {
        manifest(
            &format!("0000_50_a_00_{name}.yaml"),
            &format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  annotations:\n    capability.openshift.io/name: \"{caps}\"\n"
            ),
        )
    }

    #[test]
    fn counts_each_manifest_under_the_filter_that_leaves_it_out() {
        let mut r = release(vec![cm("a", "A"), cm("b", "B"), cm("c", ""), cm("d", "Z")]);
        r.capabilities = Catalogue::parse("known: [A, B]\nsets:\n  vCurrent: [A]\n").unwrap();
        r.excluded = [
            ExcludedBy::Profile,
            ExcludedBy::Profile,
            ExcludedBy::Exclude,
        ]
        .into_iter()
        .map(|by| Excluded {
            manifest: cm("x", "B"),
            by,
            reason: String::new(),
        })
        .collect();
        let left = LeftOut::with_default_capabilities(&r, Some("p"));
        // b: B is not in vCurrent; d: Z is unknown.
        assert_eq!(
            left.json(),
            json!({"profile": 2, "featureSet": 0, "featureGate": 0, "majorVersion": 0, "capability": 2, "exclude": 1})
        );
        assert_eq!(left.count(), 5);
        assert_eq!(
            left.line(),
            "excluded in profile p: 5 of 7 manifests (profile 2, feature set 0, feature gate 0, major version 0, capability 2, exclude 1)"
        );
        let none = LeftOut::with_default_capabilities(&release(vec![]), None);
        assert_eq!(
            none.line(),
            "excluded: 0 of 0 manifests (profile 0, feature set 0, feature gate 0, major version 0, capability 0, exclude 0)"
        );
        assert_eq!(default_reading(std::slice::from_ref(&left)), Some(&left));
        assert_eq!(default_reading(&[left.clone(), none.clone()]), None);
        let mut default = left.clone();
        default.profile = Some(DEFAULT_CLUSTER_PROFILE.to_owned());
        assert_eq!(
            default_reading(&[left, default.clone(), none]),
            Some(&default)
        );
    }

    #[test]
    fn feature_gates_count_before_capabilities_and_leave_out_in_order() {
        let gated = |name: &str, gate: &str, caps: &str| {
            manifest(
                &format!("0000_50_a_00_{name}.yaml"),
                &format!(
                    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  annotations:\n    capability.openshift.io/name: \"{caps}\"\n    release.openshift.io/feature-gate: \"{gate}\"\n"
                ),
            )
        };
        let mut r = release(vec![
            gated("a", "A", "B"),
            gated("b", "-A", ""),
            gated("c", "C", ""),
            gated("d", "", "B"),
        ]);
        r.capabilities = Catalogue::parse("known: [B]\nsets:\n  vCurrent: []\n").unwrap();
        let enabled: EnabledGates = ["A".to_owned()].into();
        // a: A enabled, but capability B not; b: needs A disabled; c: C not enabled.
        let left = LeftOut::with_default_capabilities(&r, None);
        assert_eq!(left.by[&ExcludedBy::FeatureGate], 0);
        let left = LeftOut::of(
            &r,
            None,
            &Capabilities::all(&r.capabilities),
            Some(&enabled),
        );
        assert_eq!(left.by[&ExcludedBy::FeatureGate], 2);
        assert_eq!(left.by[&ExcludedBy::Capability], 2);
        r.leave_out_by_feature_gates(&enabled);
        let kept: Vec<&str> = r.manifests.iter().map(|m| m.id.name.as_str()).collect();
        assert_eq!(kept, ["a", "d"]);
        let reasons: Vec<(&str, &str)> = r
            .excluded
            .iter()
            .map(|e| (e.manifest.id.name.as_str(), e.reason.as_str()))
            .collect();
        assert_eq!(
            reasons,
            [
                (
                    "b",
                    "feature gate A is enabled but manifest requires it to be disabled"
                ),
                ("c", "feature gate C is required but not enabled"),
            ]
        );
        assert!(r.excluded.iter().all(|e| e.by == ExcludedBy::FeatureGate));
        assert_eq!(
            LeftOut::with_default_capabilities(&r, None).json()["featureGate"],
            json!(2)
        );
    }
}
