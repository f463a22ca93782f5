//! The file-name convention `0000_<runlevel>_<component>_<rest>` that orders a release.
//!
//! Same pattern as CVO's task graph: `^0000_(\d+)_([a-zA-Z0-9]+(-[a-zA-Z0-9]+)*?)_`. A file
//! that does not match has neither runlevel nor component and runs serially.

use std::sync::LazyLock;

use regex::Regex;
use serde::Serialize;

/// Run level and component parsed from a file name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct FileOrder {
    /// The number after `0000_` (`0000_50_x_` → 50).
    pub runlevel: u32,
    /// The component (`0000_50_cluster-monitoring-operator_…` → `cluster-monitoring-operator`).
    pub component: String,
}

static CONVENTION: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^0000_(\d+)_([a-zA-Z0-9]+(-[a-zA-Z0-9]+)*?)_").expect("static regex")
});

/// Parses a file name (no directories). `None` when it does not follow the convention.
pub fn parse_file_name(name: &str) -> Option<FileOrder> {
    let caps = CONVENTION.captures(name)?;
    Some(FileOrder {
        runlevel: caps[1].parse().ok()?,
        component: caps[2].to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn order(runlevel: u32, component: &str) -> Option<FileOrder> {
        Some(FileOrder {
            runlevel,
            component: component.into(),
        })
    }

    #[test]
    fn parses_cvo_names() {
        assert_eq!(
            parse_file_name("0000_50_cluster-monitoring-operator_00_namespace.yaml"),
            order(50, "cluster-monitoring-operator")
        );
        assert_eq!(parse_file_name("0000_00_a_b.yaml"), order(0, "a"));
        assert_eq!(
            parse_file_name("0000_90_machine-config_90_deletion.yaml"),
            order(90, "machine-config")
        );
    }

    #[test]
    fn rejects_names_off_the_convention() {
        assert_eq!(parse_file_name("deployment.yaml"), None);
        assert_eq!(parse_file_name("0000_50_.yaml"), None);
        assert_eq!(parse_file_name("0001_50_x_y.yaml"), None);
        assert_eq!(parse_file_name("0000_50_x.yaml"), None);
        assert_eq!(parse_file_name("0000_x_y_z.yaml"), None);
        assert_eq!(parse_file_name("0000_99999999999_y_z.yaml"), None);
    }
}
