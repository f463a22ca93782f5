//! Cluster-profile coverage of delete manifests (rule `delete-missing-profile`).
//!
//! A manifest is part of profile P only with `include.release.openshift.io/P: "true"`. A
//! delete manifest that lacks a profile every other manifest of its component carries is
//! silently skipped on clusters of that profile, so the object lives on there (this happened
//! in cluster-network-operator). The component comes from the file name; manifests left out
//! by the current `--profile`/`--feature-set` filters count too, so the rule gives the same
//! answer whatever profile is being validated.

use std::collections::{BTreeMap, BTreeSet};

use crate::diagnostic::Diagnostic;
use crate::release::{DeleteIntent, INCLUDE_PREFIX, Manifest, Release};

use super::finding;
use super::rules::DELETE_MISSING_PROFILE;

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
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: ns\n  annotations:\n    x: y\n{annotations}"
            ),
        )
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
