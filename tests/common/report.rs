//! What a sync pass did, read from its outcome (`cvo::sync::SyncOutcome`).

use cvo::apply::{Action, ManifestResult};
use cvo::release::Release;
use cvo::sync::SyncOutcome;

/// The action taken for every manifest, in the order of the report; fails the test when no
/// pass ran.
pub fn actions(out: &SyncOutcome) -> Vec<Action> {
    out.report
        .as_ref()
        .expect("a pass ran")
        .results
        .iter()
        .map(|r| r.action)
        .collect()
}

/// The result for the manifest of `rel` whose object is named `name`; fails the test when no
/// pass ran or it has none.
pub fn result<'a>(out: &'a SyncOutcome, rel: &Release, name: &str) -> &'a ManifestResult {
    out.report
        .as_ref()
        .expect("a pass ran")
        .results
        .iter()
        .find(|r| rel.manifests[r.index].id.name == name)
        .unwrap_or_else(|| panic!("no result for {name}"))
}
