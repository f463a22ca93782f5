//! Cluster-profile coverage: of delete manifests (rule `delete-missing-profile`), and of
//! every manifest of a release that uses profiles (rule `manifest-in-no-profile`).
//!
//! A manifest is part of profile P only with `include.release.openshift.io/P: "true"`. A
//! delete manifest that lacks a profile every other manifest of its component carries is
//! silently skipped on clusters of that profile, so the object lives on there (this happened
//! in cluster-network-operator). The component comes from the file name; manifests left out
//! by the current `--profile`/`--feature-set` filters count too, so the rule gives the same
//! answer whatever profile is being validated.
//!
//! A release that uses profiles and has manifests that name none is applied by the CVO
//! without them, in every profile: one finding says how many and names the first few files
//! (a release of 3,000 such ConfigMaps gets one finding, not 3,000).

use std::collections::{BTreeMap, BTreeSet};

use crate::diagnostic::Diagnostic;
use crate::release::{DeleteIntent, INCLUDE_PREFIX, Manifest, Release};

use super::finding;
use super::rules::{DELETE_MISSING_PROFILE, MANIFEST_IN_NO_PROFILE};

/// Files named by the `manifest-in-no-profile` finding before "and N more".
const FIRST_FILES: usize = 5;

/// Rule `manifest-in-no-profile`: when some manifest names a profile, the manifests that
/// name none (kept or left out by the filters), as one finding at the first of them.
pub fn check_in_no_profile(release: &Release) -> Vec<Diagnostic> {
    let mut used = BTreeSet::new();
    let mut none: Vec<&Manifest> = Vec::new();
    let mut total = 0;
    for m in release.all_manifests() {
        total += 1;
        let profiles = profiles_of(m);
        if profiles.is_empty() {
            none.push(m);
        }
        used.extend(profiles);
    }
    if used.is_empty() || none.is_empty() {
        return Vec::new();
    }
    none.sort_by(|a, b| a.location.cmp(&b.location));
    let mut files: Vec<String> = Vec::new();
    for m in &none {
        let name = crate::diagnostic::escaped_path(std::path::Path::new(m.file_name()));
        if files.last() != Some(&name) {
            files.push(name);
        }
    }
    let shown = files
        .iter()
        .take(FIRST_FILES)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    let more = match files.len().saturating_sub(FIRST_FILES) {
        0 => String::new(),
        n => format!(" and {n} more file{}", if n == 1 { "" } else { "s" }),
    };
    // Hostile releases name any number of profiles, of any length: a few, each cut short.
    const SHOWN_PROFILES: usize = 4;
    let mut profiles = used
        .iter()
        .take(SHOWN_PROFILES)
        .map(|p| format!("`{}`", crate::diagnostic::excerpt(p)))
        .collect::<Vec<_>>()
        .join(", ");
    if used.len() > SHOWN_PROFILES {
        profiles.push_str(&format!(" and {} more", used.len() - SHOWN_PROFILES));
    }
    vec![finding(
        MANIFEST_IN_NO_PROFILE,
        none[0],
        format!(
            "{} of {total} manifests name no cluster profile (no `{INCLUDE_PREFIX}<profile>: \"true\"`) while the release uses profiles {profiles}: the CVO applies them in no profile, so they are left out on every cluster; in {shown}{more}",
            none.len()
        ),
        format!(
            "add `{INCLUDE_PREFIX}<profile>: \"true\"` for each profile a manifest belongs to, or remove the manifests from the release"
        ),
    )]
}

pub fn check(release: &Release) -> Vec<Diagnostic> {
    let all = || release.all_manifests();
    // Per component: the profiles that every applied manifest of it includes.
    let mut common: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    for m in all().filter(|m| m.intent == DeleteIntent::Apply) {
        let Some(order) = &m.order else { continue };
        let profiles = profiles_of(m);
        common
            .entry(order.component.as_str())
            .and_modify(|set| set.retain(|p| profiles.contains(p)))
            .or_insert(profiles);
    }
    let mut out = Vec::new();
    for m in all().filter(|m| m.is_delete()) {
        let Some(order) = &m.order else { continue };
        let Some(expected) = common.get(order.component.as_str()) else {
            continue;
        };
        let have = profiles_of(m);
        let missing: Vec<&String> = expected.difference(&have).collect();
        if missing.is_empty() {
            continue;
        }
        let keys: Vec<String> = missing
            .iter()
            .map(|p| format!("{INCLUDE_PREFIX}{p}"))
            .collect();
        out.push(finding(
            DELETE_MISSING_PROFILE,
            m,
            format!(
                "delete manifest lacks {} that every other manifest of component `{}` carries: on clusters with {} it is skipped and the object is never deleted",
                keys.iter()
                    .map(|k| format!("`{k}`"))
                    .collect::<Vec<_>>()
                    .join(", "),
                order.component,
                if missing.len() == 1 {
                    format!("profile `{}`", missing[0])
                } else {
                    format!(
                        "profiles {}",
                        missing
                            .iter()
                            .map(|p| format!("`{p}`"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                }
            ),
            format!(
                "add {} to the delete manifest's annotations",
                keys.iter()
                    .map(|k| format!("`{k}: \"true\"`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ));
    }
    out
}

/// Profiles a manifest is included in (`include.release.openshift.io/<p>: "true"`).
fn profiles_of(m: &Manifest) -> BTreeSet<String> {
    m.annotations()
        .filter(|(_, v)| *v == "true")
        .filter_map(|(k, _)| k.strip_prefix(INCLUDE_PREFIX))
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validate::testing::{manifest, release, rules, with_excluded};

    fn cm(file: &str, name: &str, profiles: &[&str], delete: bool) -> Manifest {
        let mut annotations = String::new();
        for p in profiles {
            annotations.push_str(&format!("    {INCLUDE_PREFIX}{p}: \"true\"\n"));
        }
        if delete {
            annotations.push_str("    release.openshift.io/delete: \"true\"\n");
        }
        manifest(
            file,
            &format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: ns\n  annotations:\n    x: \"y\"\n{annotations}"
            ),
        )
    }

    #[test]
    fn manifests_in_no_profile_are_one_finding_with_the_count_and_the_first_files() {
        let mut ms = vec![cm("0000_70_net_00_a.yaml", "a", &["hypershift"], false)];
        for i in 0..8 {
            ms.push(cm(
                &format!("0000_70_net_1{i}_x.yaml"),
                &format!("x{i}"),
                &[],
                false,
            ));
        }
        let found = check_in_no_profile(&with_excluded(release(vec![]), ms));
        assert_eq!(rules(&found), [MANIFEST_IN_NO_PROFILE]);
        let d = &found[0];
        assert!(
            d.message
                .starts_with("8 of 9 manifests name no cluster profile"),
            "{}",
            d.message
        );
        assert!(d.message.contains("`hypershift`"), "{}", d.message);
        assert!(
            d.message.ends_with("in 0000_70_net_10_x.yaml, 0000_70_net_11_x.yaml, 0000_70_net_12_x.yaml, 0000_70_net_13_x.yaml, 0000_70_net_14_x.yaml and 3 more files"),
            "{}",
            d.message
        );
        assert_eq!(d.object.as_ref().unwrap().name, "x0");
        // No profile anywhere, or every manifest in one: nothing to say.
        assert!(
            check_in_no_profile(&release(vec![cm("0000_70_net_10_x.yaml", "x", &[], false)]))
                .is_empty()
        );
        assert!(
            check_in_no_profile(&release(vec![cm(
                "0000_70_net_00_a.yaml",
                "a",
                &["p"],
                false
            )]))
            .is_empty()
        );
    }

    #[test]
    fn delete_manifest_missing_a_common_profile() {
        let found = check(&release(vec![
            cm(
                "0000_70_net_00_a.yaml",
                "a",
                &["hypershift", "self-managed-high-availability"],
                false,
            ),
            cm(
                "0000_70_net_01_b.yaml",
                "b",
                &["hypershift", "self-managed-high-availability"],
                false,
            ),
            cm(
                "0000_70_net_02_old.yaml",
                "old",
                &["self-managed-high-availability"],
                true,
            ),
        ]));
        assert_eq!(rules(&found), [DELETE_MISSING_PROFILE]);
        assert!(
            found[0]
                .message
                .contains("include.release.openshift.io/hypershift")
        );
    }

    #[test]
    fn excluded_manifests_count_and_uncommon_profiles_do_not() {
        // Under --profile hypershift the delete manifest is excluded; still reported.
        let r = with_excluded(
            release(vec![cm(
                "0000_70_net_00_a.yaml",
                "a",
                &["hypershift"],
                false,
            )]),
            vec![cm("0000_70_net_02_old.yaml", "old", &[], true)],
        );
        assert_eq!(rules(&check(&r)), [DELETE_MISSING_PROFILE]);
        // A profile only some manifests carry is not expected of the delete manifest.
        let found = check(&release(vec![
            cm(
                "0000_70_net_00_a.yaml",
                "a",
                &["hypershift", "single-node-developer"],
                false,
            ),
            cm("0000_70_net_01_b.yaml", "b", &["hypershift"], false),
            cm("0000_70_net_02_old.yaml", "old", &["hypershift"], true),
            cm("0000_70_other_02_old.yaml", "x", &[], true),
        ]));
        assert!(found.is_empty(), "{found:?}");
    }
}
