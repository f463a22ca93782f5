//! What `cvo fleet install` puts on every cluster: the operator as the release ships it for one
//! cluster (docs/operator.md, "Install": the ClusterVersion and ClusterOperator CRDs, its
//! namespace, ServiceAccount, Deployment and metrics Service — the operator's component), with
//! the least-privilege RBAC [`crate::rbac`] derives for the release in place of the release's
//! own bindings, the Deployment running `--image`; and the rollout's executor: a ServiceAccount
//! allowed only to read ClusterVersion `version` and to patch it (RBAC cannot name a field:
//! see docs/fleet.md for what that leaves).
//!
//! ClusterVersion `version` itself is left to the operator, which creates it from its release:
//! the install never writes a ClusterVersion spec.

use serde_json::{Value, json};

use super::work::{self, EXECUTOR, Purpose};
use crate::cluster::NamespacedName;
use crate::release::{Manifest, Release};

/// The operator's objects and the executor's, for `image`.
///
/// # Errors
///
/// When the release ships no `cvo operator` Deployment (a container named `operator` whose
/// first argument is `operator`), or when the RBAC cannot be derived (a kind of unknown
/// resource: the message names each).
pub fn objects(release: &Release, image: &str) -> Result<Vec<Value>, String> {
    let deployment = release
        .manifests
        .iter()
        .find(|m| is_operator_deployment(m))
        .ok_or("the release ships no cvo operator Deployment (a container named `operator` running `operator`): nothing to install")?;
    let component = deployment.order.clone();
    let namespace = deployment.object["metadata"]["namespace"]
        .as_str()
        .unwrap_or("default")
        .to_owned();
    let deployment_name = deployment.object["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let service_account = deployment.object["spec"]["template"]["spec"]["serviceAccountName"]
        .as_str()
        .unwrap_or("default")
        .to_owned();
    let mut out: Vec<Value> = release
        .manifests
        .iter()
        .filter(|m| m.order.is_some() && m.order == component)
        .filter(|m| {
            m.intent == crate::release::DeleteIntent::Apply
                && !is_rbac(m)
                && m.id.kind != "ClusterVersion"
        })
        .map(|m| {
            let mut object = (*m.object).clone();
            if is_operator_deployment(m) {
                set_operator_image(&mut object, image);
            }
            object
        })
        .collect();
    let options = crate::rbac::Options {
        name: crate::rbac::DEFAULT_NAME.to_owned(),
        service_account: NamespacedName {
            namespace: namespace.clone(),
            name: service_account,
        },
        state_namespace: namespace.clone(),
        namespace: namespace.clone(),
        lease_name: "cvo-operator".to_owned(),
        by_name: true,
        self_deployment: Some(NamespacedName {
            namespace,
            name: deployment_name,
        }),
        operand_cleanup: None,
        profiles: Vec::new(),
        feature_set: crate::release::DEFAULT_FEATURE_SET.to_owned(),
    };
    let resources = crate::rbac::resources::Resources::of(release);
    let rbac = crate::rbac::derive(release, &resources, &options).map_err(|unknown| {
        unknown
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; ")
    })?;
    out.extend(crate::rbac::render::objects(&rbac));
    out.extend(executor_objects());
    Ok(out)
}

fn is_operator_deployment(m: &Manifest) -> bool {
    m.id.kind == "Deployment"
        && m.object["spec"]["template"]["spec"]["containers"]
            .as_array()
            .is_some_and(|cs| cs.iter().any(is_operator_container))
}

fn is_operator_container(c: &Value) -> bool {
    c["name"] == "operator" && c["args"][0] == "operator"
}

fn set_operator_image(deployment: &mut Value, image: &str) {
    if let Some(cs) = deployment["spec"]["template"]["spec"]["containers"].as_array_mut() {
        for c in cs.iter_mut().filter(|c| is_operator_container(c)) {
            c["image"] = json!(image);
        }
    }
}

fn is_rbac(m: &Manifest) -> bool {
    m.id.group == "rbac.authorization.k8s.io"
}

/// The rollout's executor: namespace, ServiceAccount, and a ClusterRole on ClusterVersion
/// `version` only. OCM's work agent asks the API server (a SubjectAccessReview) whether the
/// executor may get, create, update and patch each manifest before it applies it, so every
/// verb is granted for that one name; a real create by this account is still refused (a
/// create names no object when it is authorized, and `resourceNames` match none).
pub fn executor_objects() -> Vec<Value> {
    let (ns, name) = EXECUTOR;
    vec![
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": ns}}),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": name},
            "rules": [{
                "apiGroups": ["config.openshift.io"], "resources": ["clusterversions"],
                "resourceNames": ["version"],
                "verbs": ["get", "list", "watch", "create", "update", "patch"],
            }],
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": ns}],
        }),
    ]
}

/// The install set for Placement `namespace/placement`: `objects` on every selected cluster
/// at once, left in place when the set is deleted.
pub fn manifest(namespace: &str, placement: &str, objects: Vec<Value>) -> Value {
    let template = json!({
        "deleteOption": {"propagationPolicy": "Orphan"},
        "workload": {"manifests": objects},
    });
    work::replica_set(
        Purpose::Install,
        namespace,
        placement,
        json!({"type": "All"}),
        template,
    )
}
