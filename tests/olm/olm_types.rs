//! The real CSVs of the shared corpus (copied into `tests/fixtures/olm/csv/`) load into the
//! hand-written OLM types, and every field — typed or not — survives a round trip.

use cvo::olm::types::{ClusterServiceVersion, OperatorGroup, Subscription};
use serde_json::{Value, json};

fn fixtures() -> Vec<(String, Value)> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/olm/csv");
    let mut out: Vec<(String, Value)> = std::fs::read_dir(dir)
        .expect("fixture dir")
        .map(|e| {
            let path = e.unwrap().path();
            let text = std::fs::read_to_string(&path).unwrap();
            let value: Value =
                serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            (
                path.file_name().unwrap().to_string_lossy().into_owned(),
                value,
            )
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// The first path where `a` and `b` differ, for a readable failure.
fn first_diff(a: &Value, b: &Value, path: String) -> Option<String> {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for (k, v) in x {
                match y.get(k) {
                    // `creationTimestamp: null` and an absent field are the same object.
                    None if v.is_null() => {}
                    None => return Some(format!("{path}/{k} (dropped)")),
                    Some(w) => {
                        if let Some(d) = first_diff(v, w, format!("{path}/{k}")) {
                            return Some(d);
                        }
                    }
                }
            }
            y.keys()
                .find(|k| !x.contains_key(*k))
                .map(|k| format!("{path}/{k} (added)"))
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => x
            .iter()
            .zip(y)
            .enumerate()
            .find_map(|(i, (v, w))| first_diff(v, w, format!("{path}/{i}"))),
        _ if a == b => None,
        _ => Some(format!("{path}: {a} != {b}")),
    }
}

#[test]
fn corpus_csvs_load_and_round_trip() {
    let all = fixtures();
    assert_eq!(all.len(), 7);
    for (file, value) in all {
        let csv: ClusterServiceVersion =
            serde_json::from_value(value.clone()).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert_eq!(csv.kind, "ClusterServiceVersion", "{file}");
        assert!(csv.metadata.name.is_some(), "{file}");
        assert!(
            !csv.spec.customresourcedefinitions.owned.is_empty(),
            "{file}: owned CRDs"
        );
        for d in &csv.spec.customresourcedefinitions.owned {
            assert!(d.name.contains('.'), "{file}: {}", d.name);
            assert!(!d.kind.is_empty(), "{file}: {}", d.name);
        }
        if !file.starts_with("etcdoperator") {
            // The old etcd CSV predates installModes.
            assert!(!csv.spec.install_modes.is_empty(), "{file}: installModes");
        }
        let back = serde_json::to_value(&csv).unwrap();
        if let Some(d) = first_diff(&value, &back, String::new()) {
            panic!("{file}: round trip changed the object at {d}");
        }
    }
}

#[test]
fn etcd_csv_fields() {
    let (_, v) = fixtures()
        .into_iter()
        .find(|(f, _)| f.starts_with("etcdoperator"))
        .unwrap();
    let csv: ClusterServiceVersion = serde_json::from_value(v).unwrap();
    assert_eq!(csv.spec.replaces.as_deref(), Some("etcdoperator.v0.9.0"));
    let owned: Vec<&str> = csv
        .spec
        .customresourcedefinitions
        .owned
        .iter()
        .map(|d| d.name.as_str())
        .collect();
    assert!(owned.contains(&"etcdclusters.etcd.database.coreos.com"));
    assert!(csv.spec.cleanup.is_none());
}

#[test]
fn status_conditions_cleanup_and_unknown_fields_round_trip() {
    let v = json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "ClusterServiceVersion",
        "metadata": {"name": "x.v1", "namespace": "ns", "finalizers": ["operatorframework.io/delete-custom-resources"]},
        "spec": {
            "cleanup": {"enabled": true},
            "customresourcedefinitions": {"owned": [{"name": "xs.example.com", "version": "v1", "kind": "X", "displayName": "X"}]},
            "futureField": {"a": 1}
        },
        "status": {
            "phase": "Succeeded",
            "reason": "InstallSucceeded",
            "conditions": [{"phase": "Deleting", "reason": "WaitingOnCleanup", "message": "m",
                            "lastUpdateTime": "2024-01-01T00:00:00Z", "lastTransitionTime": "2024-01-01T00:00:00Z"}],
            "cleanup": {"pendingDeletion": [{"group": "example.com", "kind": "X",
                        "instances": [{"name": "a", "namespace": "n"}, {"name": "c"}]}]},
            "requirementStatus": [{"kind": "CRD"}]
        }
    });
    let csv: ClusterServiceVersion = serde_json::from_value(v.clone()).unwrap();
    assert!(csv.spec.cleanup.as_ref().unwrap().enabled);
    let st = csv.status.as_ref().unwrap();
    assert_eq!(st.conditions[0].reason, "WaitingOnCleanup");
    assert_eq!(
        st.cleanup.as_ref().unwrap().pending_deletion[0]
            .instances
            .len(),
        2
    );
    assert_eq!(serde_json::to_value(&csv).unwrap(), v);

    let og = json!({"apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
        "metadata": {"name": "og", "namespace": "ns"},
        "spec": {"targetNamespaces": ["a"], "upgradeStrategy": {"name": "Default"}},
        "status": {"namespaces": ["a"], "lastUpdated": "2024-01-01T00:00:00Z"}});
    let o: OperatorGroup = serde_json::from_value(og.clone()).unwrap();
    assert_eq!(
        o.spec.target_namespaces.as_deref(),
        Some(&["a".to_string()][..])
    );
    assert_eq!(serde_json::to_value(&o).unwrap(), og);

    let sub = json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
        "metadata": {"name": "s", "namespace": "ns"},
        "spec": {"name": "etcd", "channel": "alpha", "source": "cat", "sourceNamespace": "olm"},
        "status": {"installedCSV": "etcdoperator.v0.9.2", "state": "AtLatestKnown"}});
    let s: Subscription = serde_json::from_value(sub.clone()).unwrap();
    assert_eq!(
        s.status.as_ref().unwrap().installed_csv.as_deref(),
        Some("etcdoperator.v0.9.2")
    );
    assert_eq!(serde_json::to_value(&s).unwrap(), sub);
}
