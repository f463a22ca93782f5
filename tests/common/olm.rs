//! OLM for tests: the one installer of its CRDs (where missing), and the CSVs of the OLM
//! scenarios (`cvo uninstall`, `cvo operand-cleanup`).

use cvo::olm::types::{CleanupSpec, ClusterServiceVersion, CrdDescription, CsvSpec};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

use super::TestCluster;

/// OLM's CRDs, each installed only where the cluster has none: the real ClusterServiceVersion
/// and OperatorGroup CRDs (`tests/fixtures/olm/crds/`, copied from OLM), and cvo's minimal
/// ones (`cvo::dev::olm_crds`) for the other kinds. Never tracked for cleanup: they are
/// cluster-wide, and a real cluster may have OLM's own or the ones another test installed.
pub async fn ensure_olm_crds(tc: &TestCluster) {
    let api: Api<CustomResourceDefinition> = Api::all(tc.client.clone());
    let mut crds: Vec<CustomResourceDefinition> = Vec::new();
    for file in [
        "operators.coreos.com_clusterserviceversions.yaml",
        "operators.coreos.com_operatorgroups.yaml",
    ] {
        let path = format!(
            "{}/tests/fixtures/olm/crds/{file}",
            env!("CARGO_MANIFEST_DIR")
        );
        let text = std::fs::read_to_string(&path).expect("OLM CRD fixture");
        crds.push(serde_saphyr::from_str(&text).expect("OLM CRD yaml"));
    }
    for crd in cvo::dev::olm_crds::minimal_crds() {
        let crd: CustomResourceDefinition = serde_json::from_value(crd).expect("minimal CRD");
        if !crds.iter().any(|c| c.metadata.name == crd.metadata.name) {
            crds.push(crd);
        }
    }
    for crd in crds {
        let name = crd.metadata.name.clone().expect("CRD name");
        if api.get_opt(&name).await.expect("get an OLM CRD").is_none() {
            match api.create(&PostParams::default(), &crd).await {
                Ok(_) => {}
                // Another test created it first.
                Err(kube::Error::Api(s)) if s.code == 409 => {}
                Err(e) => panic!("create CRD {name}: {e}"),
            }
        }
        super::wait_established(tc, &name).await;
    }
}

/// The name of the operator's CSV in the OLM scenarios.
pub const WIDGET_CSV: &str = "widget-operator.v1.0.0";

/// A CSV spec OLM's own CRD accepts: `display_name`, an (empty) deployment install strategy,
/// the `owned` CRDs (name, kind; version `v1`), opted in to the cleanup of its custom
/// resources when `cleanup`.
pub fn csv_spec(display_name: &str, owned: &[(&str, &str)], cleanup: bool) -> CsvSpec {
    let mut spec = CsvSpec::default();
    for (name, kind) in owned {
        spec.customresourcedefinitions
            .owned
            .push(CrdDescription::new(name, "v1", kind));
    }
    spec.extra.insert("displayName".into(), json!(display_name));
    spec.extra.insert(
        "install".into(),
        json!({"strategy": "deployment", "spec": {"deployments": []}}),
    );
    if cleanup {
        spec.cleanup = Some(CleanupSpec { enabled: true });
    }
    spec
}

/// Creates CSV `ns`/`name` of `spec`, labelled with `labels` (empty values) and holding the
/// operand-cleanup finalizer when `finalizer`, and reports it installed (`status.phase:
/// Succeeded`), as OLM does.
pub async fn create_csv(
    client: &Client,
    ns: &str,
    name: &str,
    spec: CsvSpec,
    labels: &[&str],
    finalizer: bool,
) {
    let mut csv = ClusterServiceVersion::new(ns, name, spec);
    if !labels.is_empty() {
        csv.metadata.labels = Some(
            labels
                .iter()
                .map(|l| (l.to_string(), String::new()))
                .collect(),
        );
    }
    if finalizer {
        csv.metadata.finalizers = Some(vec![cvo::olm::plan::FINALIZER.to_owned()]);
    }
    let api: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), ns);
    api.create(&PostParams::default(), &csv)
        .await
        .unwrap_or_else(|e| panic!("create CSV {ns}/{name}: {e}"));
    api.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Succeeded"}})),
    )
    .await
    .unwrap_or_else(|e| panic!("CSV {ns}/{name} status: {e}"));
}
