//! `cvo rbac`: the printed rules for manifests-example, the errors, and — the real judge — that
//! the printed RBAC is sufficient: `cvo apply` run as a ServiceAccount holding only it applies a
//! release (creates, updates, deletes, a CRD and its resource, RBAC objects, ClusterVersion
//! status, deletion record), and fails with 403 once one rule is taken away; and `cvo operator`
//! as that account takes its Lease, repairs drift from its watches and publishes an Event.
//!
//! The embedded in-memory API server does not authorize requests at all (every client may do
//! everything): on it, a test shows that the printed objects are accepted; the sufficiency
//! test needs a real API server (`CVO_TEST_KUBECONFIG`) and is ignored by default
//! (`common::needs`). The least-privilege update runs on both, as its account only where RBAC
//! is enforced.

use crate::common;
use crate::common::cli::cvo;
use crate::common::operator::Operator;

use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, ServiceAccount};
use k8s_openapi::api::events::v1::Event;
use kube::Client;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use serde_json::{Value, json};

/// `cvo rbac ARGS -o json`: the items of the List it prints.
fn rbac_items(args: &[&str]) -> Vec<Value> {
    let out = cvo()
        .arg("rbac")
        .args(args)
        .args(["-o", "json"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let list: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(list["kind"], "List");
    list["items"].as_array().unwrap().clone()
}

fn item<'a>(items: &'a [Value], kind: &str) -> &'a Value {
    items
        .iter()
        .find(|i| i["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind} in {items:#?}"))
}

/// Each rule of a role as `group/resource [names] verbs`.
fn rules(role: &Value) -> Vec<String> {
    let list = |v: &Value| -> String {
        v.as_array()
            .map(|a| {
                a.iter()
                    .map(|s| s.as_str().unwrap())
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .unwrap_or_default()
    };
    role["rules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            format!(
                "{}/{} [{}] {}",
                list(&r["apiGroups"]),
                list(&r["resources"]),
                list(&r["resourceNames"]),
                list(&r["verbs"])
            )
        })
        .collect()
}

fn has(rules: &[String], want: &str) {
    assert!(
        rules.iter().any(|r| r == want),
        "{want} missing from {rules:#?}"
    );
}

#[test]
fn the_example_gets_rules_by_name_and_the_operator_its_own() {
    let items = rbac_items(&["--release", "manifests-example"]);
    let kinds: Vec<&str> = items.iter().map(|i| i["kind"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        ["ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"]
    );
    let cluster = rules(item(&items, "ClusterRole"));
    for want in [
        // Drift watches: every namespace, every name.
        "/configmaps [] list,watch",
        // Server-side apply, by name (an apply that creates is authorized as create).
        "/configmaps [cluster-settings,release-info,widget-dashboard-overview,widget-operator-config] get,create,patch",
        // Delete manifests.
        "/configmaps [legacy-settings,widget-dashboard-overview-v1] get,delete",
        "apps/deployments [widget-controller] get,delete",
        "rbac.authorization.k8s.io/clusterrolebindings [widget-controller] get,delete",
        // A kind defined by the release's CRD: plural from the CRD.
        "example.com/widgets [default] get,create,patch",
        "example.com/widgets [legacy] get,delete",
        // Create-only (not watched for drift): list/watch only by name.
        "lifecycle.cvo.io/alives [cluster] get,list,watch,create,patch",
        // The operator's ClusterVersion, merged with the release's create-only manifest.
        "config.openshift.io/clusterversions [version] get,list,watch,create,patch",
        "config.openshift.io/clusterversions/status [version] update",
        // The operator's FeatureGate, read every pass and watched.
        "config.openshift.io/featuregates [cluster] get,list,watch",
        // The release ships RBAC: escalate on its roles, bind on the roles it binds.
        "rbac.authorization.k8s.io/clusterroles [widget-operator] get,create,patch,escalate,bind",
        "rbac.authorization.k8s.io/roles [widget-operator-leader-election] get,create,patch,escalate,bind",
    ] {
        has(&cluster, want);
    }
    // The release has delete manifests: Events when one of their objects reappears.
    has(&cluster, "events.k8s.io/events [] create,patch");
    // Nothing else for every name beyond list and watch.
    for rule in &cluster {
        if rule.contains(" [] ") && !rule.starts_with("events.k8s.io/") {
            assert!(rule.ends_with(" [] list,watch"), "{rule}");
        }
    }
    let role = item(&items, "Role");
    assert_eq!(role["metadata"]["namespace"], "cluster-version");
    assert_eq!(
        rules(role),
        [
            "/configmaps [] create",
            // The operator's pull configuration (its Deployment's --pull-config).
            "/configmaps [cvo-pull-config] get",
            "/configmaps [cvo-deletion-record] get,update,patch",
            "coordination.k8s.io/leases [] create",
            "coordination.k8s.io/leases [cvo-operator] get,update",
        ]
    );
    for binding in ["ClusterRoleBinding", "RoleBinding"] {
        assert_eq!(
            item(&items, binding)["subjects"],
            json!([{"kind": "ServiceAccount", "name": "cvo-operator", "namespace": "cluster-version"}])
        );
    }
}

#[test]
fn flags_name_the_subject_the_namespace_and_the_lease() {
    let items = rbac_items(&[
        "--release",
        "manifests-example",
        "--service-account",
        "ops/runner",
        "--namespace",
        "cvo-system",
        "--name",
        "my-cvo",
        "--lease-name",
        "leader",
    ]);
    assert_eq!(item(&items, "ClusterRole")["metadata"]["name"], "my-cvo");
    assert_eq!(
        item(&items, "RoleBinding")["subjects"][0],
        json!({"kind": "ServiceAccount", "name": "runner", "namespace": "ops"})
    );
    let role = item(&items, "Role");
    assert_eq!(role["metadata"]["namespace"], "cvo-system");
    has(
        &rules(role),
        "coordination.k8s.io/leases [leader] get,update",
    );
    has(
        &rules(role),
        "/configmaps [cvo-deletion-record] get,update,patch",
    );
    // A state namespace of its own: a second Role, bound too.
    let items = rbac_items(&[
        "--release",
        "manifests-example",
        "--state-namespace",
        "cvo-state",
    ]);
    let placed: Vec<String> = items
        .iter()
        .map(|i| {
            format!(
                "{} {}",
                i["kind"].as_str().unwrap(),
                i["metadata"]["namespace"].as_str().unwrap_or("-")
            )
        })
        .collect();
    assert_eq!(
        placed,
        [
            "ClusterRole -",
            "ClusterRoleBinding -",
            "Role cluster-version",
            "RoleBinding cluster-version",
            "Role cvo-state",
            "RoleBinding cvo-state",
        ]
    );
    assert_eq!(
        rules(&items[4]),
        [
            "/configmaps [] create",
            "/configmaps [cvo-deletion-record] get,update,patch"
        ]
    );
}

#[test]
fn no_by_name_grants_the_kinds_but_keeps_escalate_and_bind_named() {
    let items = rbac_items(&["--release", "manifests-example", "--no-by-name"]);
    let cluster = rules(item(&items, "ClusterRole"));
    has(
        &cluster,
        "/configmaps [] get,list,watch,create,patch,delete",
    );
    has(
        &cluster,
        "rbac.authorization.k8s.io/clusterroles [widget-operator] escalate,bind",
    );
    has(
        &cluster,
        "config.openshift.io/clusterversions [] get,list,watch,create,patch",
    );
    has(
        &cluster,
        "config.openshift.io/clusterversions/status [version] update",
    );
    assert!(
        !cluster.iter().any(|r| r.contains("[cluster-settings")),
        "{cluster:#?}"
    );
}

#[test]
fn yaml_says_why_and_is_the_same_every_time() {
    let run = || common::cli::stdout(cvo().args(["rbac", "--release", "manifests-example"]));
    let yaml = run();
    assert_eq!(yaml, run());
    // The same objects as -o json.
    let docs: Vec<Value> = serde_saphyr::from_multiple(&yaml).unwrap();
    assert_eq!(docs, rbac_items(&["--release", "manifests-example"]));
    for want in [
        "# escalate: the release ships these roles",
        "# list, watch: the operator's drift watches",
        "  - legacy-settings  # cluster-config (0000_10_cluster-config_90_legacy-settings.delete.yaml)",
        "# get, update, patch: the deletion record, ConfigMap cvo-deletion-record",
    ] {
        assert!(yaml.contains(want), "{want} missing from\n{yaml}");
    }
}

#[test]
fn an_unknown_kind_fails_closed_naming_file_line_and_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("0000_10_a_01_thing.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  namespace: app\n---\napiVersion: example.com/v1\nkind: Thing\nmetadata:\n  name: t\n",
    )
    .unwrap();
    let out = cvo()
        .args(["rbac", "--release"])
        .arg(dir.path())
        .assert()
        .code(1)
        .get_output()
        .clone();
    assert!(out.stdout.is_empty(), "nothing printed on failure");
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        stderr.contains("0000_10_a_01_thing.yaml:7 (document 1): kind Thing (example.com/v1)"),
        "{stderr}"
    );
    assert!(
        stderr.contains(
            "ship its CustomResourceDefinition in the release, or run `cvo rbac` with --discover"
        ),
        "{stderr}"
    );
}

#[test]
fn secrets_are_read_only_in_their_namespaces() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("0000_10_a_01_secret.yaml"),
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: token\n  namespace: app\n",
    )
    .unwrap();
    let out = cvo()
        .args(["rbac", "--release"])
        .arg(dir.path())
        .args(["-o", "json"])
        .assert()
        .success()
        .get_output()
        .clone();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(!stderr.contains("every Secret"), "{stderr}");
    assert!(
        stderr.contains("namespaces that must exist before this RBAC is applied: app"),
        "{stderr}"
    );
    let list: Value = serde_json::from_slice(&out.stdout).unwrap();
    let items = list["items"].as_array().unwrap();
    let cluster = rules(item(items, "ClusterRole"));
    assert!(
        !cluster.iter().any(|r| r.starts_with("/secrets [] ")),
        "{cluster:?}"
    );
    let app = items
        .iter()
        .find(|i| i["kind"] == "Role" && i["metadata"]["namespace"] == "app")
        .expect("a Role in app");
    assert_eq!(rules(app), ["/secrets [] list,watch"]);
}

#[test]
fn a_bad_service_account_is_a_usage_error() {
    let out = cvo()
        .args([
            "rbac",
            "--release",
            "manifests-example",
            "--service-account",
            "just-a-name",
        ])
        .assert()
        .code(2)
        .get_output()
        .clone();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("NAMESPACE/NAME"), "{stderr}");
}

#[tokio::test]
async fn discover_asks_the_cluster_for_kinds_the_release_does_not_define() {
    let tc = common::cluster().await;
    let crd = common::TestCrd::new("Gizmo", true, false);
    crd.install(&tc).await;
    let dir = tempfile::tempdir().unwrap();
    let cr = serde_json::to_string(&crd.object("g1", Some("app"), json!({}))).unwrap();
    std::fs::write(dir.path().join("0000_10_a_01_gizmo.yaml"), cr).unwrap();
    let kubeconfig = tc.kubeconfig_file(dir.path()).await;
    let release = dir.path().to_str().unwrap();
    // Without --discover the kind is unknown.
    let (code, _, stderr) = common::run_cvo(&kubeconfig, &["rbac", "--release", release]).await;
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("kind Gizmo"), "{stderr}");
    let (code, stdout, stderr) = common::run_cvo(
        &kubeconfig,
        &["rbac", "--release", release, "--discover", "-o", "json"],
    )
    .await;
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains("note: kind Gizmo of group")
            && stderr.contains("resource gizmos, from the cluster's discovery"),
        "{stderr}"
    );
    let list: Value = serde_json::from_str(&stdout).unwrap();
    let cluster = rules(item(list["items"].as_array().unwrap(), "ClusterRole"));
    has(
        &cluster,
        &format!("{}/gizmos [g1] get,create,patch", crd.group),
    );
    has(&cluster, &format!("{}/gizmos [] list,watch", crd.group));
}

/// A release exercising every kind of request: namespace (exists: an update), a CRD and its
/// custom resource (created; the CRD waited for), a ConfigMap (created), a ServiceAccount and
/// RBAC objects (escalate, bind), a delete manifest of an existing ConfigMap and of a
/// ClusterRoleBinding that never existed.
struct TestRelease {
    dir: tempfile::TempDir,
    crd: common::TestCrd,
    role: String,
}

impl TestRelease {
    fn write(ns: &str) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let crd = common::TestCrd::new("Gadget", true, false);
        let role = common::unique("rbac-role");
        let write = |name: &str, value: Value| {
            std::fs::write(
                dir.path().join(name),
                serde_json::to_string_pretty(&value).unwrap(),
            )
            .unwrap()
        };
        common::write_release(dir.path(), Some("1.0.0"), &[]);
        write(
            "0000_10_app_00_namespace.yaml",
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
        );
        write(
            "0000_10_app_01_gadgets.crd.yaml",
            serde_json::to_value(crd.manifest()).unwrap(),
        );
        write(
            "0000_20_app_00_settings.configmap.yaml",
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "settings", "namespace": ns}, "data": {"a": "1"}}),
        );
        write(
            "0000_20_app_01_gadget.yaml",
            serde_json::to_value(crd.object("g1", Some(ns), json!({"spec": {"size": 1}}))).unwrap(),
        );
        write(
            "0000_20_app_02_serviceaccount.yaml",
            json!({"apiVersion": "v1", "kind": "ServiceAccount",
                "metadata": {"name": "app", "namespace": ns}}),
        );
        let rules = json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]);
        let subjects = json!([{"kind": "ServiceAccount", "name": "app", "namespace": ns}]);
        let role_ref = |kind: &str| json!({"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": role});
        write(
            "0000_20_app_03_clusterrole.yaml",
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                "metadata": {"name": role}, "rules": rules}),
        );
        write(
            "0000_20_app_04_clusterrolebinding.yaml",
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                "metadata": {"name": role}, "roleRef": role_ref("ClusterRole"), "subjects": subjects}),
        );
        write(
            "0000_20_app_05_role.yaml",
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                "metadata": {"name": "app", "namespace": ns}, "rules": rules}),
        );
        write(
            "0000_20_app_06_rolebinding.yaml",
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                "metadata": {"name": "app", "namespace": ns}, "roleRef": role_ref("Role"),
                "subjects": subjects}),
        );
        let delete = json!({"release.openshift.io/delete": "true"});
        write(
            "0000_30_app_00_old.delete.yaml",
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "old", "namespace": ns, "annotations": delete}}),
        );
        write(
            "0000_30_app_01_never.delete.yaml",
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                "metadata": {"name": common::unique("rbac-never"), "annotations": delete}}),
        );
        TestRelease { dir, crd, role }
    }

    fn path(&self) -> &str {
        self.dir.path().to_str().unwrap()
    }
}

fn rbac_resource(kind: &str) -> ApiResource {
    ApiResource::from_gvk(&GroupVersionKind::gvk(
        "rbac.authorization.k8s.io",
        "v1",
        kind,
    ))
}

/// Creates or replaces `object` (an RBAC object printed by `cvo rbac`) as the admin.
async fn put(tc: &common::TestCluster, object: &Value) {
    let kind = object["kind"].as_str().unwrap();
    let name = object["metadata"]["name"].as_str().unwrap();
    let namespace = object["metadata"]["namespace"].as_str();
    let resource = rbac_resource(kind);
    let api = tc.dynamic(&resource, namespace);
    let mut object: DynamicObject = serde_json::from_value(object.clone()).unwrap();
    match api.get_opt(name).await.expect("get") {
        Some(live) => {
            object.metadata.resource_version = live.metadata.resource_version;
            api.replace(name, &PostParams::default(), &object)
                .await
                .unwrap_or_else(|e| panic!("replace {kind} {name}: {e}"));
        }
        None => {
            api.create(&PostParams::default(), &object)
                .await
                .unwrap_or_else(|e| panic!("create {kind} {name}: {e}"));
            if namespace.is_none() {
                tc.track_cluster_object(&resource, name);
            }
        }
    }
}

/// A kubeconfig for the real cluster `admin` that authenticates as `token`.
pub(crate) fn token_kubeconfig(admin: &Path, token: &str, dir: &Path) -> PathBuf {
    let config = kube::config::Kubeconfig::read_from(admin).expect("admin kubeconfig");
    let context = config
        .contexts
        .iter()
        .find(|c| Some(&c.name) == config.current_context.as_ref())
        .and_then(|c| c.context.as_ref())
        .expect("current context");
    let cluster = config
        .clusters
        .iter()
        .find(|c| c.name == context.cluster)
        .expect("cluster of the current context");
    let kubeconfig = json!({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [serde_json::to_value(cluster).unwrap()],
        "users": [{"name": "sa", "user": {"token": token}}],
        "contexts": [{"name": "sa", "context": {"cluster": cluster.name, "user": "sa"}}],
        "current-context": "sa",
    });
    let path = dir.join("sa.kubeconfig");
    std::fs::write(&path, serde_json::to_string(&kubeconfig).unwrap()).unwrap();
    path
}

/// Waits until the authorizer answers `allowed` for `verb` on ConfigMap `name` in `ns`, as
/// `client` (RBAC changes reach the authorizer's cache a moment after they are written).
async fn wait_access(client: &Client, ns: &str, name: &str, verb: &str, allowed: bool) {
    let api = Api::<SelfSubjectAccessReview>::all(client.clone());
    let review = SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                namespace: Some(ns.to_owned()),
                verb: Some(verb.to_owned()),
                resource: Some("configmaps".to_owned()),
                name: Some(name.to_owned()),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    common::poll_until(
        &format!("{verb} configmaps/{name} allowed={allowed}"),
        Duration::from_secs(30),
        || async {
            let answer = api
                .create(&PostParams::default(), &review)
                .await
                .map_err(|e| e.to_string())?;
            let now = answer.status.map(|s| s.allowed);
            (now == Some(allowed))
                .then_some(())
                .ok_or(format!("allowed: {now:?}"))
        },
    )
    .await
}

/// The action of the result for the object named `name` in an apply report.
fn action(report: &Value, name: &str) -> String {
    let results = report["results"].as_array().unwrap();
    results
        .iter()
        .find(|r| r["name"] == name)
        .map(|r| r["action"].as_str().unwrap().to_owned())
        .unwrap_or_else(|| panic!("no result for {name}: {results:#?}"))
}

/// On any server: the printed objects are valid RBAC objects the API server accepts. (The
/// embedded server authorizes nothing: whether they are sufficient is the next test's, on a
/// real cluster.)
#[tokio::test]
async fn the_printed_rbac_objects_are_accepted_by_the_api_server() {
    let tc = common::cluster().await;
    let ns = tc.namespace("rbac-accepted").await;
    let release = TestRelease::write(&ns);
    let name = common::unique("cvo-operator");
    let items = rbac_items(&[
        "--release",
        release.path(),
        "--service-account",
        &format!("{ns}/cvo"),
        "--name",
        &name,
        "--lease-name",
        &name,
    ]);
    for kind in ["ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"] {
        item(&items, kind);
    }
    for object in &items {
        put(&tc, object).await;
    }
}

#[tokio::test]
#[ignore = "needs a real cluster, which enforces RBAC (CVO_TEST_KUBECONFIG): run with --include-ignored (.ci/run does)"]
async fn the_printed_rbac_is_sufficient_and_each_rule_counts() {
    let tc = common::cluster().await;
    common::needs::real_cluster(&tc, "the in-memory API server does not enforce RBAC");
    // The ClusterVersion kind served and `version` present, so that status is written too.
    let (_cv_turn, cv_resource) = common::cluster_version(&tc).await;
    let cvs = common::create_cluster_version(&tc, &cv_resource).await;
    let ns = tc.namespace("rbac").await;
    let release = TestRelease::write(&ns);
    tc.track_crd(&release.crd.name);
    tc.track_cluster_object(&rbac_resource("ClusterRole"), &release.role);
    tc.track_cluster_object(&rbac_resource("ClusterRoleBinding"), &release.role);
    // The object of the delete manifest, as a previous release left it.
    let old: ConfigMap = serde_json::from_value(
        json!({"metadata": {"name": "old", "namespace": ns}, "data": {"x": "y"}}),
    )
    .unwrap();
    Api::<ConfigMap>::namespaced(tc.client.clone(), &ns)
        .create(&PostParams::default(), &old)
        .await
        .expect("create old");

    let name = common::unique("cvo-operator");
    let items = rbac_items(&[
        "--release",
        release.path(),
        "--service-account",
        &format!("{ns}/cvo"),
        "--name",
        &name,
        "--lease-name",
        &name,
    ]);
    let work = tempfile::tempdir().unwrap();
    let admin = tc.kubeconfig_file(work.path()).await;

    // The operator's ServiceAccount and a token for it (TokenRequest API).
    let sa: ServiceAccount =
        serde_json::from_value(json!({"metadata": {"name": "cvo", "namespace": ns}})).unwrap();
    let sas = Api::<ServiceAccount>::namespaced(tc.client.clone(), &ns);
    sas.create(&PostParams::default(), &sa)
        .await
        .expect("create sa");
    let token = token(&sas, "cvo").await;
    let as_sa = token_kubeconfig(&admin, &token, work.path());
    let sa_client = {
        let config = kube::Config::from_custom_kubeconfig(
            kube::config::Kubeconfig::read_from(&as_sa).unwrap(),
            &Default::default(),
        )
        .await
        .unwrap();
        Client::try_from(config).unwrap()
    };
    let apply = |install_timeout: &'static str| {
        let as_sa = as_sa.clone();
        let path = release.path().to_owned();
        let ns = ns.clone();
        async move {
            common::run_cvo(
                &as_sa,
                &[
                    "apply",
                    "--release",
                    &path,
                    "-o",
                    "json",
                    "--install-timeout",
                    install_timeout,
                    "--health-timeout",
                    "60s",
                    "--state-namespace",
                    &ns,
                ],
            )
            .await
        }
    };

    // Without the rule that lets it apply ConfigMap `settings`: 403, and the run fails.
    let cluster_role = item(&items, "ClusterRole");
    let mut short = cluster_role.clone();
    let all_rules = short["rules"].as_array().unwrap().clone();
    short["rules"] = Value::Array(
        all_rules
            .iter()
            .filter(|r| {
                !(r["resources"] == json!(["configmaps"])
                    && r["resourceNames"]
                        .as_array()
                        .is_some_and(|n| n.contains(&json!("settings"))))
            })
            .cloned()
            .collect(),
    );
    assert_eq!(
        short["rules"].as_array().unwrap().len() + 1,
        all_rules.len()
    );
    put(&tc, &short).await;
    for object in items.iter().filter(|i| i["kind"] != "ClusterRole") {
        put(&tc, object).await;
    }
    wait_access(&sa_client, &ns, "old", "delete", true).await;
    wait_access(&sa_client, &ns, "settings", "patch", false).await;
    let (code, stdout, stderr) = apply("2s").await;
    assert_eq!(code, 1, "one rule short must fail\n{stdout}\n{stderr}");
    let report: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    let failed: Vec<&Value> = report["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["action"] == "failed")
        .collect();
    assert_eq!(failed.len(), 1, "{failed:#?}");
    assert_eq!(failed[0]["name"], "settings");
    let error = failed[0]["error"].as_str().unwrap();
    assert!(error.contains("403 Forbidden"), "{error}");
    // Everything else was allowed: the delete manifest's object is gone, and the deletion
    // record (in the operator's namespace) says so.
    assert_eq!(action(&report, "old"), "deleted");
    let record = Api::<ConfigMap>::namespaced(tc.client.clone(), &ns)
        .get("cvo-deletion-record")
        .await
        .expect("the deletion record, written by the ServiceAccount");
    let entries = record.data.unwrap_or_default();
    assert!(
        entries.values().any(|v| v.contains("\"old\"")),
        "{entries:?}"
    );

    // With every rule printed: everything applied, deleted, and ClusterVersion written.
    put(&tc, cluster_role).await;
    wait_access(&sa_client, &ns, "settings", "patch", true).await;
    let (code, stdout, stderr) = apply("60s").await;
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(action(&report, "settings"), "created");
    assert_eq!(action(&report, "old"), "already-absent");
    assert_eq!(action(&report, "g1"), "unchanged");
    assert_eq!(action(&report, &release.role), "unchanged");
    for r in report["results"].as_array().unwrap() {
        assert_ne!(r["action"], "failed", "{r}");
    }
    let cv = cvs.get("version").await.expect("get cv");
    assert!(
        cv.data["status"]["history"][0]["version"] == "1.0.0",
        "ClusterVersion status written by the ServiceAccount: {:?}",
        cv.data["status"]
    );

    // `cvo operator` as the ServiceAccount: elected on its Lease, and its drift watches
    // (list/watch in every namespace) see an edit, which it puts back.
    let operator = Operator::start(
        &as_sa,
        work.path(),
        Path::new(release.path()),
        &ns,
        &["--lease-name", &name, "--resync-interval", "1h"],
    );
    let leases = Api::<Lease>::namespaced(tc.client.clone(), &ns);
    common::poll_until(
        "the operator holds its Lease",
        Duration::from_secs(60),
        || async {
            let lease = leases.get_opt(&name).await.map_err(|e| e.to_string())?;
            lease
                .and_then(|l| l.spec?.holder_identity)
                .filter(|h| !h.is_empty())
                .map(|_| ())
                .ok_or_else(|| format!("no holder yet; log:\n{}", operator.log()))
        },
    )
    .await;
    common::poll_until(
        "the operator watches for drift",
        Duration::from_secs(60),
        || async {
            let log = operator.log();
            if log.contains("steady state: watching managed objects for drift") {
                Ok(())
            } else {
                Err(log)
            }
        },
    )
    .await;
    let configmaps = Api::<ConfigMap>::namespaced(tc.client.clone(), &ns);
    configmaps
        .patch(
            "settings",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"a": "edited"}})),
        )
        .await
        .expect("edit settings");
    common::poll_until("the edit put back", Duration::from_secs(30), || async {
        let cm = configmaps
            .get("settings")
            .await
            .map_err(|e| e.to_string())?;
        let a = cm.data.and_then(|d| d.get("a").cloned());
        (a.as_deref() == Some("1"))
            .then_some(())
            .ok_or_else(|| format!("a = {a:?}; log:\n{}", operator.log()))
    })
    .await;
    // The object of the delete manifest, deleted by cvo, comes back: a spec change starts a
    // full pass, which deletes it again and says so in an Event.
    configmaps
        .create(&PostParams::default(), &old)
        .await
        .expect("recreate old");
    cvs.patch(
        "version",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"channel": "rbac-test"}})),
    )
    .await
    .expect("change the ClusterVersion spec");
    let events = Api::<Event>::namespaced(tc.client.clone(), &ns);
    common::poll_until(
        "the reappearance reported in an Event",
        Duration::from_secs(60),
        || async {
            let list = events
                .list(&Default::default())
                .await
                .map_err(|e| e.to_string())?;
            let reported = list.items.iter().any(|e| {
                e.reason.as_deref() == Some("DeletedObjectReappeared")
                    && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("old")
            });
            let gone = configmaps
                .get_opt("old")
                .await
                .map_err(|e| e.to_string())?
                .is_none();
            (reported && gone).then_some(()).ok_or_else(|| {
                format!(
                    "event: {reported}, deleted again: {gone}; log:\n{}",
                    operator.log()
                )
            })
        },
    )
    .await;
    let log = operator.log();
    assert!(!log.to_lowercase().contains("forbidden"), "{log}");
    assert!(!log.contains("could not publish"), "{log}");
    drop(operator);
    cvs.delete("version", &Default::default())
        .await
        .expect("delete cv");
}

#[tokio::test]
async fn operand_cleanup_grants_what_the_reconciler_needs_for_the_crds_csvs_own() {
    let tc = common::cluster().await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = tc.kubeconfig_file(dir.path()).await;
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/manifests-example");
    // The operands' kinds are the cluster's: without --discover there is nothing to go on.
    let (code, _, stderr) = common::run_cvo(
        &kubeconfig,
        &[
            "rbac",
            "--release",
            example,
            "--components",
            "release,operand-cleanup",
        ],
    )
    .await;
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("needs --discover"), "{stderr}");

    common::ensure_olm_crds(&tc).await;
    let owned = common::TestCrd::new("Sprocket", true, false);
    let ns = tc.namespace("rbac-olm").await;
    let csv = json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
        "metadata": {"name": "sprockets.v1.0.0", "namespace": ns},
        "spec": {"displayName": "Sprockets",
            "install": {"strategy": "deployment", "spec": {"deployments": []}},
            "customresourcedefinitions": {"owned": [{"name": owned.name, "version": "v1", "kind": "Sprocket"}]}}
    });
    let csvs = tc.dynamic(
        &kube::api::ApiResource::from_gvk_with_plural(
            &kube::core::GroupVersionKind::gvk(
                "operators.coreos.com",
                "v1alpha1",
                "ClusterServiceVersion",
            ),
            "clusterserviceversions",
        ),
        Some(&ns),
    );
    csvs.create(&Default::default(), &serde_json::from_value(csv).unwrap())
        .await
        .expect("create CSV");
    let (code, stdout, stderr) = common::run_cvo(
        &kubeconfig,
        &[
            "rbac",
            "--release",
            example,
            "--components",
            "release,operand-cleanup",
            "--discover",
            "-o",
            "json",
        ],
    )
    .await;
    assert_eq!(code, 0, "{stderr}");
    let list: Value = serde_json::from_str(&stdout).unwrap();
    let cluster = rules(item(list["items"].as_array().unwrap(), "ClusterRole"));
    has(
        &cluster,
        "operators.coreos.com/clusterserviceversions [] get,list,watch,patch",
    );
    has(
        &cluster,
        "operators.coreos.com/clusterserviceversions/status [] patch",
    );
    has(&cluster, "operators.coreos.com/operatorgroups [] list");
    has(
        &cluster,
        &format!("{}/sprockets [] list,delete", owned.group),
    );
    // Other tests' CSVs may own CRDs on a shared cluster: their names share the rule.
    assert!(
        cluster.iter().any(|r| {
            r.starts_with("apiextensions.k8s.io/customresourcedefinitions [")
                && r.ends_with("] get")
                && r.contains(&owned.name)
        }),
        "get of CRD {} missing from {cluster:#?}",
        owned.name
    );
    // The release's own rules are still there.
    has(
        &cluster,
        "lifecycle.cvo.io/alives [cluster] get,list,watch,create,patch",
    );
}

/// The result for `kind name` in an apply report.
fn result_of<'a>(report: &'a Value, kind: &str, name: &str) -> &'a Value {
    let results = report["results"].as_array().unwrap();
    results
        .iter()
        .find(|r| r["kind"] == kind && r["name"] == name)
        .unwrap_or_else(|| panic!("no result for {kind} {name}: {results:#?}"))
}

/// Writes into `dest` release 1.6.0 after `previous` (the 1.5.0 of
/// `common::example::least_privilege_update`): one ConfigMap more, the old binding's delete
/// manifest dropped (stale across a minor update), and `cvo rbac`'s output printed again into
/// the release's RBAC file (once: the release already ships it), which now names the new
/// ConfigMap.
fn next_release(previous: &Path, dest: &Path) {
    std::fs::create_dir_all(dest).unwrap();
    for entry in std::fs::read_dir(previous).unwrap() {
        let path = entry.unwrap().path();
        let file = path.file_name().unwrap();
        if file != common::example::OLD_BINDING_DELETE_FILE {
            std::fs::copy(&path, dest.join(file)).unwrap();
        }
    }
    std::fs::write(
        dest.join("release-metadata"),
        r#"{"kind": "cincinnati-metadata-v0", "version": "1.6.0", "previous": ["1.5.0"]}"#,
    )
    .unwrap();
    std::fs::write(
        dest.join("0000_10_cluster-config_03_added.configmap.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: added-in-1-6\n  namespace: cluster-config\n  annotations:\n    include.release.openshift.io/self-managed-high-availability: \"true\"\n    include.release.openshift.io/single-node-developer: \"true\"\ndata:\n  since: 1.6.0\n",
    )
    .unwrap();
    let rbac = common::cli::stdout(
        cvo()
            .args(["rbac", "--release"])
            .arg(dest)
            .args(["--self-deployment", "cluster-version/cvo-operator"]),
    );
    assert!(rbac.contains("- added-in-1-6  #"), "{rbac}");
    std::fs::write(dest.join(common::example::RBAC_FILE), rbac).unwrap();
}

/// The newest ClusterVersion history entry as (version, state).
async fn newest_history(cvs: &Api<DynamicObject>) -> (String, String) {
    let cv = cvs.get("version").await.expect("get cv");
    let entry = &cv.data["status"]["history"][0];
    let text = |k: &str| entry[k].as_str().unwrap_or_default().to_owned();
    (text("version"), text("state"))
}

/// Adopting least privilege is a release update (docs/operator.md, "Least-privilege RBAC"):
/// manifests-example (1.4.0, the operator bound to `cluster-admin` by `ClusterRoleBinding
/// cvo-operator`) is applied as an administrator; then release 1.5.0 of
/// `common::example::least_privilege_update` — `cvo rbac`'s output (printed by the real
/// binary) under its own names, and a delete manifest of the old binding ordered after it —
/// is applied as the operator's ServiceAccount `cluster-version/cvo-operator` (a token from
/// the TokenRequest API): it ends Completed with no 422, the old binding is gone and the new
/// objects exist; then 1.5.0 is applied again as that account, which by then holds only the
/// printed RBAC: the steady state (every object read and compared, ClusterVersion status,
/// the deletion record) is still allowed; and so is the next release (1.6.0), which adds an
/// object: the account updates its own ClusterRole first, then creates the object.
///
/// On the embedded in-memory API server the same flow runs with the administrator's
/// kubeconfig: it authorizes nothing, so there it shows only that the update applies (no
/// roleRef change, the old binding deleted after the new one is applied). That the
/// ServiceAccount may do all of it after losing cluster-admin is proven on a real API server
/// only (`CVO_TEST_KUBECONFIG`); the test says so on stderr.
#[tokio::test]
async fn a_release_adopts_least_privilege_and_its_operator_keeps_running_it() {
    let tc = common::cluster().await;
    let (_cv_turn, cv_resource) = common::cluster_version(&tc).await;
    common::example::prepare(&tc).await;
    let name = common::example::LEAST_PRIVILEGE_NAME;
    tc.track_cluster_object(&rbac_resource("ClusterRole"), name);
    tc.track_cluster_object(&rbac_resource("ClusterRoleBinding"), name);
    let work = tempfile::tempdir().unwrap();
    let release =
        common::example::least_privilege_update(&work.path().join("1.5.0"), &common::cli::binary());
    let release = release.to_str().unwrap().to_owned();
    let example = common::example::dir().to_str().unwrap().to_owned();
    let admin = tc.kubeconfig_file(work.path()).await;
    let apply = |kubeconfig: PathBuf, dir: String| async move {
        let (code, stdout, stderr) = common::run_cvo(
            &kubeconfig,
            &[
                "apply",
                "--release",
                &dir,
                "-o",
                "json",
                "--install-timeout",
                "120s",
                "--health-timeout",
                "60s",
            ],
        )
        .await;
        assert!(
            !common::mentions_status(&stdout, "422") && !common::mentions_status(&stderr, "422"),
            "{stdout}\n{stderr}"
        );
        let report: Value =
            serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}\n{stderr}"));
        for r in report["results"].as_array().unwrap() {
            assert_ne!(r["action"], "failed", "{r}\n{stderr}");
        }
        assert_eq!(code, 0, "{stdout}\n{stderr}");
        report
    };
    let cvs = tc.dynamic(&cv_resource, None);

    // 1.4.0, as an administrator: the operator's account is bound to cluster-admin.
    apply(admin.clone(), example).await;
    assert_eq!(
        newest_history(&cvs).await,
        ("1.4.0".to_owned(), "Completed".to_owned())
    );
    let bindings = tc.dynamic(&rbac_resource("ClusterRoleBinding"), None);
    let old = bindings.get("cvo-operator").await.expect("1.4.0's binding");
    assert_eq!(old.data["roleRef"]["name"], "cluster-admin");

    // The operator's account, with a token of its own (real cluster only).
    let as_sa = if tc.is_memory() {
        admin.clone()
    } else {
        let sas = Api::<ServiceAccount>::namespaced(tc.client.clone(), "cluster-version");
        let token = token(&sas, "cvo-operator").await;
        token_kubeconfig(&admin, &token, work.path())
    };

    // 1.5.0, as the operator's account: new RBAC first, then the old binding deleted.
    let report = apply(as_sa.clone(), release.clone()).await;
    assert_migration(&report, &cvs, name, ("updating", "deleted", "created")).await;
    assert!(
        bindings
            .get_opt("cvo-operator")
            .await
            .expect("get")
            .is_none(),
        "the cluster-admin binding is gone"
    );
    let new = bindings.get(name).await.expect("the new binding");
    assert_eq!(
        new.data["roleRef"],
        json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name})
    );
    let role_bindings = tc.dynamic(&rbac_resource("RoleBinding"), Some("cluster-version"));
    role_bindings.get(name).await.expect("the new RoleBinding");
    assert_eq!(
        new.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("include.release.openshift.io/self-managed-high-availability"))
            .map(String::as_str),
        Some("true"),
        "applied as the release wrote it"
    );

    // The embedded server enforces no RBAC (the update above ran as the administrator there):
    // only a real one can show that the operator's account no longer holds cluster-admin.
    if !tc.is_memory() {
        // The account no longer holds cluster-admin (once the authorizer has seen the
        // deletion): reading Secrets everywhere is refused.
        let sa_client = {
            let config = kube::Config::from_custom_kubeconfig(
                kube::config::Kubeconfig::read_from(&as_sa).unwrap(),
                &Default::default(),
            )
            .await
            .unwrap();
            Client::try_from(config).unwrap()
        };
        let reviews = Api::<SelfSubjectAccessReview>::all(sa_client);
        let review = SelfSubjectAccessReview {
            spec: SelfSubjectAccessReviewSpec {
                resource_attributes: Some(ResourceAttributes {
                    verb: Some("list".to_owned()),
                    resource: Some("secrets".to_owned()),
                    ..Default::default()
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        common::poll_until(
            "cluster-admin gone from the operator's account",
            Duration::from_secs(30),
            || async {
                let answer = reviews
                    .create(&PostParams::default(), &review)
                    .await
                    .map_err(|e| e.to_string())?;
                let allowed = answer.status.map(|s| s.allowed);
                (allowed == Some(false))
                    .then_some(())
                    .ok_or(format!("list secrets allowed: {allowed:?}"))
            },
        )
        .await;
    }
    // The steady state, with nothing but the printed RBAC (on a real server).
    let report = apply(as_sa.clone(), release.clone()).await;
    assert_migration(
        &report,
        &cvs,
        name,
        ("reconciling", "already-absent", "unchanged"),
    )
    .await;
    let record = Api::<ConfigMap>::namespaced(tc.client.clone(), "cluster-version")
        .get("cvo-deletion-record")
        .await
        .expect("the deletion record");
    assert!(
        record
            .data
            .unwrap_or_default()
            .values()
            .any(|v| v.contains("cvo-operator")),
        "the old binding's deletion recorded"
    );

    // The next release adds an object: the RBAC printed for it by name is applied by the
    // operator's account itself (it may patch and escalate its own ClusterRole: the output
    // was printed again once in the release), then the new object, which only the new rules
    // allow.
    let next = work.path().join("1.6.0");
    next_release(Path::new(&release), &next);
    let report = apply(as_sa, next.to_str().unwrap().to_owned()).await;
    assert_eq!(report["mode"], "updating", "{report:#}");
    assert_eq!(result_of(&report, "ClusterRole", name)["action"], "updated");
    assert_eq!(
        result_of(&report, "ConfigMap", "added-in-1-6")["action"],
        "created"
    );
    assert_eq!(
        newest_history(&cvs).await,
        ("1.6.0".to_owned(), "Completed".to_owned())
    );
    common::example::clean_up(&tc, &cvs).await;
}

#[test]
fn every_object_is_named_after_the_role_it_binds_never_cvo_operator() {
    let items = rbac_items(&["--release", "manifests-example"]);
    for item in &items {
        assert_eq!(
            item["metadata"]["name"],
            common::example::LEAST_PRIVILEGE_NAME,
            "{item}"
        );
        if let Some(role) = item.get("roleRef") {
            assert_eq!(
                role["name"],
                common::example::LEAST_PRIVILEGE_NAME,
                "{item}"
            );
        }
    }
}

#[test]
fn a_name_the_release_binds_to_another_role_is_refused_naming_file_and_object() {
    let out = cvo()
        .args([
            "rbac",
            "--release",
            "manifests-example",
            "--name",
            "cvo-operator",
        ])
        .assert()
        .code(2)
        .get_output()
        .clone();
    assert!(out.stdout.is_empty(), "nothing printed");
    let stderr = String::from_utf8(out.stderr).unwrap();
    // The binding's document starts after the file's comment.
    let file = common::example::dir().join(common::example::RBAC_FILE);
    let line = std::fs::read_to_string(file)
        .unwrap()
        .lines()
        .position(|l| l.starts_with("apiVersion:"))
        .unwrap()
        + 1;
    let at = format!("{}:{line} (document 0)", common::example::RBAC_FILE);
    for want in [
        at.as_str(),
        "the release's ClusterRoleBinding cvo-operator binds ClusterRole cluster-admin",
        "the printed ClusterRoleBinding of the same name binds ClusterRole cvo-operator",
        "refuses to change a binding's roleRef (422",
        "Choose another --name",
    ] {
        assert!(stderr.contains(want), "{want} missing from {stderr}");
    }
    // A binding of the same name to the same role is no conflict: the output itself, in the
    // release, printed again.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("0000_10_a_01_cm.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  namespace: app\n",
    )
    .unwrap();
    let run = || {
        let out = cvo()
            .args(["rbac", "--release"])
            .arg(dir.path())
            .assert()
            .success()
            .get_output()
            .clone();
        (
            String::from_utf8(out.stdout).unwrap(),
            String::from_utf8(out.stderr).unwrap(),
        )
    };
    let (first, stderr) = run();
    // Until the output is in the release, its rules do not cover updating it: said so.
    assert!(
        stderr.contains("the release does not ship ClusterRole cvo-operator-least-privilege")
            && stderr.contains("run `cvo rbac` again"),
        "{stderr}"
    );
    std::fs::write(dir.path().join("0000_10_a_02_rbac.yaml"), &first).unwrap();
    let (second, stderr) = run();
    assert!(!stderr.contains("does not ship"), "{stderr}");
    assert!(
        second.contains("- cvo-operator-least-privilege  # (0000_10_a_02_rbac.yaml)"),
        "{second}"
    );
    std::fs::write(dir.path().join("0000_10_a_02_rbac.yaml"), &second).unwrap();
    assert_eq!(run().0, second, "a fixed point");
}

#[test]
fn profiles_are_annotated_on_every_object_in_yaml_and_json() {
    let annotations = |items: &[Value]| -> Vec<Value> {
        items
            .iter()
            .map(|i| i["metadata"]["annotations"].clone())
            .collect()
    };
    // The example uses two profiles: the rules cover both, every object is in both.
    let items = rbac_items(&["--release", "manifests-example"]);
    let both = json!({
        "include.release.openshift.io/self-managed-high-availability": "true",
        "include.release.openshift.io/single-node-developer": "true",
    });
    assert_eq!(annotations(&items), vec![both; items.len()]);
    let yaml = common::cli::stdout(cvo().args(["rbac", "--release", "manifests-example"]));
    let docs: Vec<Value> = serde_saphyr::from_multiple(&yaml).unwrap();
    assert_eq!(docs, items);
    // One profile: only it.
    let items = rbac_items(&[
        "--release",
        "manifests-example",
        "--profile",
        "single-node-developer",
    ]);
    let one = json!({"include.release.openshift.io/single-node-developer": "true"});
    assert_eq!(annotations(&items), vec![one; items.len()]);
    // No profiles in the release: no annotations.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("0000_10_a_01_cm.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  namespace: app\n",
    )
    .unwrap();
    let items = rbac_items(&["--release", dir.path().to_str().unwrap()]);
    assert_eq!(annotations(&items), vec![Value::Null; items.len()]);
}

#[test]
fn a_feature_set_other_than_default_is_named_in_the_header_and_its_objects_granted() {
    let run = |feature_set: &str| {
        common::cli::stdout(cvo().args([
            "rbac",
            "--release",
            "manifests-example",
            "--feature-set",
            feature_set,
        ]))
    };
    let preview = run("TechPreviewNoUpgrade");
    assert!(
        preview.contains("# Derived for the feature set TechPreviewNoUpgrade"),
        "{preview}"
    );
    assert!(preview.contains("- preview-features  #"), "{preview}");
    let default = run("Default");
    assert!(!default.contains("feature set"), "{default}");
    assert!(!default.contains("preview-features"), "{default}");
    let docs: Vec<Value> = serde_saphyr::from_multiple(&preview).unwrap();
    assert!(
        docs.iter()
            .all(|d| !d["metadata"].to_string().contains("feature-set")),
        "no feature-set annotation"
    );
}

/// A token of the ServiceAccount `name` (TokenRequest API, valid for an hour).
async fn token(sas: &Api<ServiceAccount>, name: &str) -> String {
    sas.create_token_request(
        name,
        &PostParams::default(),
        &TokenRequest {
            spec: TokenRequestSpec {
                audiences: vec![],
                expiration_seconds: Some(3600),
                ..Default::default()
            },
            ..Default::default()
        },
    )
    .await
    .expect("token request")
    .status
    .expect("token status")
    .token
}

/// A pass of the least-privilege 1.5.0: its `mode`, what it did to the old binding
/// `cvo-operator` and to the four printed objects `name`, and ClusterVersion at 1.5.0
/// Completed.
async fn assert_migration(
    report: &serde_json::Value,
    cvs: &Api<DynamicObject>,
    name: &str,
    (mode, old_binding, printed): (&str, &str, &str),
) {
    assert_eq!(report["mode"], mode, "{report:#}");
    assert_eq!(
        result_of(report, "ClusterRoleBinding", "cvo-operator")["action"],
        old_binding
    );
    for kind in ["ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"] {
        assert_eq!(result_of(report, kind, name)["action"], printed, "{kind}");
    }
    assert_eq!(
        newest_history(cvs).await,
        ("1.5.0".to_owned(), "Completed".to_owned())
    );
}
