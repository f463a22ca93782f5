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

use super::status::FleetStatus;
use super::work::{self, EXECUTOR, Purpose};
use crate::cluster::NamespacedName;
use crate::release::{Manifest, Release};

/// What `cvo fleet install` gives every cluster's operator besides its release, through its
/// pull configuration: the ConfigMap its Deployment names with `cvo operator --pull-config`,
/// which the operator reads at every pull. Not through the Deployment's flags: the operator
/// keeps its own Deployment as its release says, so flags added by the install would be
/// undone by its first pass.
#[derive(Clone, Debug, Default)]
pub struct Extras {
    /// Public keys (a name, the PEM) the operator verifies every release it pulls with.
    pub verify_keys: Vec<(String, String)>,
    /// A registry credential (a Docker config JSON) the operator pulls releases with: the
    /// Secret [`PULL_SECRET`], named by the configuration.
    pub pull_secret: Option<Vec<u8>>,
    /// Registries the operator reaches over plain HTTP.
    pub insecure_registries: Vec<String>,
}

impl Extras {
    fn is_empty(&self) -> bool {
        self.verify_keys.is_empty()
            && self.pull_secret.is_none()
            && self.insecure_registries.is_empty()
    }
}

/// The operator's pull Secret (`kubernetes.io/dockerconfigjson`), in its namespace.
pub const PULL_SECRET: &str = "cvo-pull-secret";

/// The keys of the pull configuration as `cvo operator --pull-config` reads them (the
/// operator's own constants: `fleet` does not import the operator; `cli` checks they agree).
pub const PULL_CONFIG_KEYS: &str = "verify-keys";
pub const PULL_CONFIG_INSECURE: &str = "insecure-registries";
pub const PULL_CONFIG_SECRET: &str = "pull-secret";

/// Why the install cannot be made.
#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    #[error(
        "the release ships no cvo operator Deployment (a container named `operator` running `operator`): nothing to install"
    )]
    NoOperator,
    #[error("the operator's RBAC cannot be derived: {0}")]
    Rbac(String),
    #[error("--pull-secret: {0}")]
    PullSecret(String),
    #[error(
        "the release's operator Deployment passes no --pull-config: the keys, pull secret and registries cannot reach its operator (the operator keeps its Deployment as the release says); add `--pull-config=cvo-pull-config` to its args in the release"
    )]
    NoPullConfig,
}

/// The operator's objects and the executor's, for `image`, with `extras`.
///
/// # Errors
///
/// When the release ships no `cvo operator` Deployment (a container named `operator` whose
/// first argument is `operator`), when the RBAC cannot be derived (a kind of unknown
/// resource: the message names each), or when the pull secret is not a Docker config.
pub fn objects(
    release: &Release,
    image: &str,
    extras: &Extras,
) -> Result<Vec<Value>, InstallError> {
    let index = release
        .manifests
        .iter()
        .position(is_operator_deployment)
        .ok_or(InstallError::NoOperator)?;
    let deployment = &release.manifests[index];
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
    let mut operator = (*deployment.object).clone();
    set_operator_image(&mut operator, image);
    let words_of = |d: &Value, flag: &str| -> Option<String> {
        crate::rbac::deployment_flag(d, flag)
            .last()
            .map(|v| (*v).to_owned())
    };
    let lease_name = words_of(&operator, "--lease-name")
        .unwrap_or_else(|| crate::rbac::DEFAULT_LEASE_NAME.to_owned());
    let mut extra_objects = Vec::new();
    // For the RBAC only: the pull Secret the configuration names, as if passed by flag (the
    // operator may then read it, by name).
    let mut for_rbac = operator.clone();
    if !extras.is_empty() {
        let config = words_of(&operator, "--pull-config").ok_or(InstallError::NoPullConfig)?;
        if let Some(docker_config) = &extras.pull_secret {
            extra_objects.push(pull_secret(&namespace, docker_config)?);
            add_args(
                &mut for_rbac,
                &[format!("--pull-secret={namespace}/{PULL_SECRET}")],
            );
        }
        extra_objects.push(pull_config(&namespace, &config, extras));
    }
    // The RBAC is derived from the release with the pull Secret as if passed by flag.
    let mut derived_from = release.clone();
    derived_from.manifests[index].object = std::sync::Arc::new(for_rbac);
    let mut out: Vec<Value> = extra_objects;
    out.extend(
        release
            .manifests
            .iter()
            .enumerate()
            .filter(|(_, m)| m.order.is_some() && m.order == component)
            .filter(|(_, m)| {
                m.intent == crate::release::DeleteIntent::Apply
                    && !is_rbac(m)
                    && m.id.kind != "ClusterVersion"
            })
            .map(|(i, m)| {
                if i == index {
                    operator.clone()
                } else {
                    (*m.object).clone()
                }
            }),
    );
    let rbac = least_privilege(
        &derived_from,
        namespace,
        service_account,
        deployment_name,
        lease_name,
    )?;
    out.extend(crate::rbac::render::objects(&rbac));
    out.extend(executor_objects());
    Ok(out)
}

/// The least-privilege RBAC `cvo rbac` derives for `release`'s operator (its ServiceAccount,
/// namespace, Lease and Deployment), by name.
fn least_privilege(
    release: &Release,
    namespace: String,
    service_account: String,
    deployment_name: String,
    lease_name: String,
) -> Result<crate::rbac::Rbac, InstallError> {
    let options = crate::rbac::Options {
        name: crate::rbac::DEFAULT_NAME.to_owned(),
        service_account: NamespacedName {
            namespace: namespace.clone(),
            name: service_account,
        },
        state_namespace: namespace.clone(),
        namespace: namespace.clone(),
        lease_name,
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
    crate::rbac::derive(release, &resources, &options).map_err(|unknown| {
        InstallError::Rbac(
            unknown
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; "),
        )
    })
}

/// The pull configuration ConfigMap `name` (`cvo operator --pull-config`) of `extras`.
fn pull_config(namespace: &str, name: &str, extras: &Extras) -> Value {
    let mut data = serde_json::Map::new();
    if !extras.verify_keys.is_empty() {
        let pems: String = extras
            .verify_keys
            .iter()
            .map(|(_, pem)| pem.as_str())
            .collect();
        data.insert(PULL_CONFIG_KEYS.to_owned(), json!(pems));
    }
    if !extras.insecure_registries.is_empty() {
        data.insert(
            PULL_CONFIG_INSECURE.to_owned(),
            json!(extras.insecure_registries.join("\n")),
        );
    }
    if extras.pull_secret.is_some() {
        data.insert(PULL_CONFIG_SECRET.to_owned(), json!(PULL_SECRET));
    }
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace},
        "data": data,
    })
}

fn pull_secret(namespace: &str, config: &[u8]) -> Result<Value, InstallError> {
    use base64::Engine as _;
    let parsed: Value = serde_json::from_slice(config).map_err(|e| {
        InstallError::PullSecret(format!(
            "not JSON ({e}): give a Docker config file ({{\"auths\": …}})"
        ))
    })?;
    if !parsed["auths"].is_object() {
        return Err(InstallError::PullSecret(
            "no `auths` object: give a Docker config file (as `docker login` writes ~/.docker/config.json)".to_owned(),
        ));
    }
    Ok(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": PULL_SECRET, "namespace": namespace},
        "type": "kubernetes.io/dockerconfigjson",
        "data": {".dockerconfigjson": base64::engine::general_purpose::STANDARD.encode(config)},
    }))
}

/// `objects` as they may be printed: every Secret's data replaced by its size.
pub fn redacted(mut set: Value) -> Value {
    if let Some(manifests) = set
        .pointer_mut("/spec/manifestWorkTemplate/workload/manifests")
        .and_then(Value::as_array_mut)
    {
        for m in manifests.iter_mut().filter(|m| m["kind"] == "Secret") {
            if let Some(data) = m.get_mut("data").and_then(Value::as_object_mut) {
                for v in data.values_mut() {
                    let size = v.as_str().map_or(0, str::len);
                    *v = json!(format!("<redacted: {size} bytes of base64>"));
                }
            }
        }
    }
    set
}

/// Appends `args` to the operator container's.
fn add_args(deployment: &mut Value, args: &[String]) {
    if let Some(cs) = deployment["spec"]["template"]["spec"]["containers"].as_array_mut() {
        for c in cs.iter_mut().filter(|c| is_operator_container(c)) {
            if let Some(existing) = c["args"].as_array_mut() {
                existing.extend(args.iter().map(|a| json!(a)));
            }
        }
    }
}

/// The clusters whose ClusterVersion `version` OpenShift's own cluster-version operator
/// manages (its field manager, as reported), with that manager: a cvo operator there would
/// fight it over the same object.
pub fn managed_elsewhere(status: &FleetStatus) -> Vec<(String, String)> {
    status
        .clusters
        .iter()
        .filter_map(|c| {
            let manager = c.report.as_ref()?.openshift_manager.clone()?;
            Some((c.name.clone(), manager))
        })
        .collect()
}

/// The clusters that reported no ClusterVersion, so could not be checked for another
/// cluster-version operator.
pub fn unchecked(status: &FleetStatus) -> Vec<String> {
    status
        .clusters
        .iter()
        .filter(|c| c.wave.is_some() && c.report.is_none())
        .map(|c| c.name.clone())
        .collect()
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

/// What `cvo fleet uninstall` did.
#[derive(Clone, Debug, Default, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Uninstalled {
    /// The sets deleted on the hub (`NAMESPACE/NAME`).
    pub deleted_sets: Vec<String>,
    /// What each cluster's work agent deletes: the install's objects but those kept.
    pub removed: Vec<String>,
    /// What stays on every cluster: the CRDs (and so ClusterVersion `version`, its history)
    /// and the namespaces.
    pub kept: Vec<String>,
}

/// Why the uninstall stopped.
#[derive(Debug, thiserror::Error)]
pub enum UninstallError {
    #[error("{what}: {error}")]
    Request {
        what: String,
        #[source]
        error: crate::cluster::retry::RequestError,
    },
    #[error("the install set {0} changed while cvo changed it; run the command again")]
    Contended(String),
}

/// Removes cvo from every cluster of Placement `namespace/placement`: deletes the rollout and
/// observe sets (their works orphan what they applied: ClusterVersion keeps its spec), then
/// turns the install set's delete option to orphan only its CRDs and namespaces and deletes
/// it, so that each cluster's work agent deletes the operator's Deployment, Service, RBAC,
/// keys, pull Secret and the executor. Running it again finishes an interrupted one.
///
/// # Errors
///
/// A request that failed, or an install set that kept changing.
pub async fn uninstall(
    client: &kube::Client,
    namespace: &str,
    placement: &str,
) -> Result<Uninstalled, UninstallError> {
    use kube::api::DeleteParams;
    let api = super::sets(client, namespace);
    let retry = crate::cluster::retry::RetryPolicy::default();
    let request = |what: String| move |(error, _)| UninstallError::Request { what, error };
    let mut out = Uninstalled::default();
    let delete = DeleteParams::default();
    for purpose in [Purpose::Rollout, Purpose::Preflight, Purpose::Observe] {
        let name = purpose.name(placement);
        let gone = retry
            .run(|| api.delete(&name, &delete))
            .await
            .map(|_| true)
            .or_else(|(e, n)| match e {
                crate::cluster::retry::RequestError::Kube(kube::Error::Api(s)) if s.code == 404 => {
                    Ok(false)
                }
                e => Err((e, n)),
            })
            .map_err(request(format!("deleting {namespace}/{name}")))?;
        if gone {
            out.deleted_sets.push(format!("{namespace}/{name}"));
        }
    }
    let name = Purpose::Install.name(placement);
    let Some(set) = retry
        .run(|| api.get_opt(&name))
        .await
        .map_err(request(format!("reading {namespace}/{name}")))?
    else {
        return Ok(out);
    };
    let rules = orphaning_rules(&set.data, &mut out);
    let option = json!({
        "propagationPolicy": "SelectivelyOrphan",
        "selectivelyOrphans": {"orphaningRules": rules},
    });
    let resource_version = set.metadata.resource_version.clone().unwrap_or_default();
    let ops = vec![
        json!({"op": "replace", "path": "/spec/manifestWorkTemplate/deleteOption", "value": option}),
    ];
    let written = super::patch_unchanged(&api, &name, &resource_version, ops)
        .await
        .map_err(|error| UninstallError::Request {
            what: format!("patching {namespace}/{name}"),
            error,
        })?;
    if !written {
        return Err(UninstallError::Contended(format!("{namespace}/{name}")));
    }
    retry
        .run(|| api.delete(&name, &delete))
        .await
        .map_err(request(format!("deleting {namespace}/{name}")))?;
    out.deleted_sets.push(format!("{namespace}/{name}"));
    Ok(out)
}

/// The orphaning rules of an install set's delete option (its CRDs and namespaces stay on the
/// clusters), recording in `out` what is kept and what each agent deletes.
fn orphaning_rules(set: &Value, out: &mut Uninstalled) -> Vec<Value> {
    let manifests = set["spec"]["manifestWorkTemplate"]["workload"]["manifests"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let mut rules = Vec::new();
    for m in manifests {
        let (kind, name) = (
            m["kind"].as_str().unwrap_or(""),
            m["metadata"]["name"].as_str().unwrap_or(""),
        );
        let described = match m["metadata"]["namespace"].as_str() {
            Some(ns) => format!("{kind} {ns}/{name}"),
            None => format!("{kind} {name}"),
        };
        let kept = match kind {
            "CustomResourceDefinition" => {
                Some(("apiextensions.k8s.io", "customresourcedefinitions"))
            }
            "Namespace" => Some(("", "namespaces")),
            _ => None,
        };
        match kept {
            Some((group, resource)) => {
                rules.push(
                    json!({"group": group, "resource": resource, "namespace": "", "name": name}),
                );
                out.kept.push(described);
            }
            None => out.removed.push(described),
        }
    }
    rules
}

/// The install set for Placement `namespace/placement`: `objects` on every selected cluster
/// at once, left in place when the set is deleted (`cvo fleet uninstall` changes that first).
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

#[cfg(test)]
mod tests {
    use super::*;

    fn example() -> Release {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests-example");
        crate::release::load(&dir, &crate::release::LoadOptions::default()).expect("load")
    }

    /// manifests-example with its operator Deployment changed by `edit`.
    fn example_with_operator(edit: impl FnOnce(&mut Value)) -> Release {
        let mut release = example();
        let index = release
            .manifests
            .iter()
            .position(is_operator_deployment)
            .unwrap();
        let mut deployment = (*release.manifests[index].object).clone();
        edit(&mut deployment);
        release.manifests[index].object = std::sync::Arc::new(deployment);
        release
    }

    fn find<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
        objects
            .iter()
            .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("no {kind} {name}"))
    }

    /// The rules of every Role and ClusterRole of `objects` naming `resource`.
    fn names_granted(objects: &[Value], resource: &str) -> Vec<String> {
        objects
            .iter()
            .filter(|o| o["kind"] == "Role" || o["kind"] == "ClusterRole")
            .flat_map(|o| o["rules"].as_array().cloned().unwrap_or_default())
            .filter(|r| {
                r["resources"]
                    .as_array()
                    .is_some_and(|rs| rs.iter().any(|x| x == resource))
            })
            .flat_map(|r| r["resourceNames"].as_array().cloned().unwrap_or_default())
            .filter_map(|n| n.as_str().map(str::to_owned))
            .collect()
    }

    #[test]
    fn keys_pull_secret_and_registries_reach_the_operator_through_its_pull_configuration() {
        let extras = Extras {
            verify_keys: vec![("p256.pub".to_owned(), "PEM\n".to_owned())],
            pull_secret: Some(br#"{"auths": {}}"#.to_vec()),
            insecure_registries: vec!["10.0.0.9:5000".to_owned()],
        };
        let release = example();
        let objects = objects(&release, "img:1", &extras).expect("objects");
        let config = find(&objects, "ConfigMap", "cvo-pull-config");
        assert_eq!(config["data"][PULL_CONFIG_KEYS], "PEM\n");
        assert_eq!(config["data"][PULL_CONFIG_INSECURE], "10.0.0.9:5000");
        assert_eq!(config["data"][PULL_CONFIG_SECRET], PULL_SECRET);
        let secret = find(&objects, "Secret", PULL_SECRET);
        assert_eq!(secret["type"], "kubernetes.io/dockerconfigjson");
        // The Deployment is the release's but for its image: the operator would undo any flag.
        let deployment = find(&objects, "Deployment", "cvo-operator");
        let shipped = release
            .manifests
            .iter()
            .find(|m| is_operator_deployment(m))
            .unwrap();
        let mut expected = (*shipped.object).clone();
        set_operator_image(&mut expected, "img:1");
        assert_eq!(deployment, &expected);
        // The operator may read its pull configuration and pull Secret, those only.
        assert_eq!(names_granted(&objects, "secrets"), [PULL_SECRET]);
        assert!(names_granted(&objects, "configmaps").contains(&"cvo-pull-config".to_owned()));
        // And the printed set shows the Secret's size, not its data.
        let set = redacted(manifest("fleet", "waves", objects));
        let text = set.to_string();
        assert!(text.contains("<redacted: "), "{text}");
        assert!(!text.contains("eyJhdXRocyI6IHt9fQ=="), "{text}");
        assert!(matches!(
            objects_of_bad_secret(),
            Err(InstallError::PullSecret(m)) if m.contains("auths")
        ));
        // A release whose operator reads no pull configuration cannot be given one.
        let without = example_with_operator(|d| {
            for c in d["spec"]["template"]["spec"]["containers"]
                .as_array_mut()
                .unwrap()
            {
                if let Some(args) = c["args"].as_array_mut() {
                    args.retain(|a| !a.as_str().is_some_and(|a| a.starts_with("--pull-config")));
                }
            }
        });
        assert!(matches!(
            super::objects(&without, "img:1", &extras),
            Err(InstallError::NoPullConfig)
        ));
        assert!(super::objects(&without, "img:1", &Extras::default()).is_ok());
    }

    fn objects_of_bad_secret() -> Result<Vec<Value>, InstallError> {
        let extras = Extras {
            pull_secret: Some(br#"{"registry": "x"}"#.to_vec()),
            ..Extras::default()
        };
        objects(&example(), "img:1", &extras)
    }

    #[test]
    fn the_lease_granted_is_the_one_the_deployment_names() {
        let release =
            example_with_operator(|d| add_args(d, &["--lease-name=fleet-lease".to_owned()]));
        let objects = objects(&release, "img:1", &Extras::default()).expect("objects");
        assert_eq!(names_granted(&objects, "leases"), ["fleet-lease"]);
        let default = objects_of(&example());
        assert_eq!(
            names_granted(&default, "leases"),
            [crate::rbac::DEFAULT_LEASE_NAME]
        );
    }

    fn objects_of(release: &Release) -> Vec<Value> {
        objects(release, "img:1", &Extras::default()).expect("objects")
    }
}
