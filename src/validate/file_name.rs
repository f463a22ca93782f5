//! The file-name convention (rule `file-name-convention`).
//!
//! `0000_<runlevel>_<component>_<name>` gives a manifest its place in the task graph. A file
//! off the convention has no run level and no component: it runs serially, outside the
//! parallel component chains, which is rarely what its author meant.

use std::collections::BTreeMap;
use std::path::Path;

use crate::diagnostic::{Diagnostic, Location};
use crate::release::{Manifest, Release};

use super::finding_at;
use super::rules::FILE_NAME_CONVENTION;

pub fn check(release: &Release) -> Vec<Diagnostic> {
    let mut files: BTreeMap<&Path, Vec<&Manifest>> = BTreeMap::new();
    for m in release.manifests.iter().filter(|m| m.order.is_none()) {
        files.entry(&m.location.file).or_default().push(m);
    }
    files
        .into_iter()
        .map(|(file, manifests)| {
            let first = manifests[0];
            // Escaped: a file name may hold control characters or bytes that are not UTF-8.
            let name = crate::diagnostic::escaped_path(
                first.location.file.file_name().map(Path::new).unwrap_or(Path::new("")),
            );
            let objects = if manifests.len() == 1 {
                String::new()
            } else {
                format!(" (and {} more object(s) in this file)", manifests.len() - 1)
            };
            finding_at(
                FILE_NAME_CONVENTION,
                Location {
                    file: file.to_path_buf(),
                    document: None,
                    line: Some(1),
                },
                format!(
                    "file name `{name}` does not follow `0000_<runlevel>_<component>_<name>`{objects}: it has no run level or component and is applied serially"
                ),
                format!(
                    "rename it to 0000_<runlevel>_<component>_{name}, e.g. 0000_50_my-operator_{name}"
                ),
            )
            .with_object(first.id.clone())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validate::testing::{manifest, release, rules};

    #[test]
    fn names_off_the_convention_warn_once_per_file() {
        let cm = |file: &str, name: &str| {
            manifest(
                file,
                &format!(
                    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: ns\n"
                ),
            )
        };
        let found = check(&release(vec![
            cm("0000_50_a_00_x.yaml", "a"),
            cm("deployment.yaml", "b"),
            cm("deployment.yaml", "c"),
        ]));
        assert_eq!(rules(&found), [FILE_NAME_CONVENTION]);
        assert_eq!(found[0].location.line, Some(1));
        assert!(found[0].message.contains("1 more object"));
        assert_eq!(
            found[0].object.as_ref().unwrap().to_string(),
            "ConfigMap ns/b"
        );
    }
}
