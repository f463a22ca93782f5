//! Server-side apply and dry run; empty lists of built-in kinds; managedFields of objects first created otherwise.

use crate::helpers::*;

// ---------------------------------------------------------------------------------------------
// 8. server-side apply and dry run

#[tokio::test]
async fn apply_that_changes_nothing_does_not_write() {
    let tc = cluster().await;
    let ns = tc.namespace("ssa-noop").await;
    let api = cms(&tc, &ns);
    let body = json!({"metadata": {"labels": {"a": "1"}}, "data": {"k1": "v1", "k2": "v2"}});

    let first = api
        .patch(
            "cm",
            &PatchParams::apply("cvo-test"),
            &apply_cm("cm", body.clone()),
        )
        .await
        .expect("apply creates");
    assert!(
        owns(&first, "cvo-test", &["f:data", "f:k1"]),
        "managedFields: {:?}",
        first.metadata.managed_fields
    );
    let entry = first
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .find(|m| m.manager.as_deref() == Some("cvo-test"))
        .expect("managedFields entry");
    assert_eq!(entry.operation.as_deref(), Some("Apply"));

    let second = api
        .patch("cm", &PatchParams::apply("cvo-test"), &apply_cm("cm", body))
        .await
        .expect("second apply");
    assert_eq!(rv(&second), rv(&first), "a no-op apply must not write");
    // The same content in another key order is still a no-op.
    let reordered = json!({"data": {"k2": "v2", "k1": "v1"}, "metadata": {"labels": {"a": "1"}}});
    let third = api
        .patch(
            "cm",
            &PatchParams::apply("cvo-test"),
            &apply_cm("cm", reordered),
        )
        .await
        .expect("third apply");
    assert_eq!(rv(&third), rv(&first));
    assert_eq!(rv(&api.get("cm").await.expect("get")), rv(&first));
}

#[tokio::test]
async fn apply_removes_fields_the_manager_stopped_applying_and_keeps_other_managers_fields() {
    let tc = cluster().await;
    let ns = tc.namespace("ssa-prune").await;
    let api = cms(&tc, &ns);
    let mine = PatchParams::apply("cvo-mine");

    api.patch(
        "cm",
        &mine,
        &apply_cm("cm", json!({"metadata": {"labels": {"keep": "y", "drop": "y"}}, "data": {"a": "1", "b": "2"}})),
    )
    .await
    .expect("first apply");
    // Another applier and a plain (Update) writer add their own fields.
    api.patch(
        "cm",
        &PatchParams::apply("cvo-other"),
        &apply_cm("cm", json!({"data": {"theirs": "x"}})),
    )
    .await
    .expect("other applier");
    let updater = PatchParams {
        field_manager: Some("cvo-updater".into()),
        ..PatchParams::default()
    };
    api.patch("cm", &updater, &merge(json!({"data": {"edited": "z"}})))
        .await
        .expect("update manager");

    let obj = api
        .patch(
            "cm",
            &mine,
            &apply_cm(
                "cm",
                json!({"metadata": {"labels": {"keep": "y"}}, "data": {"a": "1"}}),
            ),
        )
        .await
        .expect("apply without b and label drop");
    let data = obj.data["data"].as_object().expect("data").clone();
    let keys: BTreeSet<String> = data.keys().cloned().collect();
    assert_eq!(
        keys,
        set(&["a", "edited", "theirs"]),
        "b removed, others kept"
    );
    let labels = obj.metadata.labels.clone().unwrap_or_default();
    assert!(
        labels.contains_key("keep") && !labels.contains_key("drop"),
        "labels: {labels:?}"
    );
    assert!(!owns(&obj, "cvo-mine", &["f:data", "f:b"]));
    assert!(owns(&obj, "cvo-other", &["f:data", "f:theirs"]));
    assert!(owns(&obj, "cvo-updater", &["f:data", "f:edited"]));
}

#[tokio::test]
async fn managed_fields_survive_an_update_that_omits_them() {
    // A PUT whose body carries no managedFields keeps the recorded ownership (only an explicit
    // empty list resets it), so a later apply still prunes what its manager dropped.
    let tc = cluster().await;
    let ns = tc.namespace("ssa-keep").await;
    let api = cms(&tc, &ns);
    let mine = PatchParams::apply("cvo-mine");
    let applied = api
        .patch(
            "cm",
            &mine,
            &apply_cm("cm", json!({"data": {"a": "1", "b": "2"}})),
        )
        .await
        .expect("apply");
    let mut edited = applied.clone();
    edited.metadata.managed_fields = None;
    edited.data["data"]["c"] = json!("3");
    let put = api.replace("cm", &pp(), &edited).await.expect("PUT");
    assert!(
        owns(&put, "cvo-mine", &["f:data", "f:b"]),
        "ownership kept across a PUT without managedFields: {:?}",
        put.metadata.managed_fields
    );
    let pruned = api
        .patch("cm", &mine, &apply_cm("cm", json!({"data": {"a": "1"}})))
        .await
        .expect("apply without b");
    let keys: BTreeSet<String> = pruned.data["data"]
        .as_object()
        .expect("data")
        .keys()
        .cloned()
        .collect();
    assert_eq!(keys, set(&["a", "c"]));
}

#[tokio::test]
async fn apply_conflicts_without_force_and_force_takes_ownership() {
    let tc = cluster().await;
    let ns = tc.namespace("ssa-conflict").await;
    let api = cms(&tc, &ns);
    api.patch(
        "cm",
        &PatchParams::apply("alpha"),
        &apply_cm("cm", json!({"data": {"key": "one", "own": "a"}})),
    )
    .await
    .expect("alpha applies");

    let status = expect_status(
        api.patch(
            "cm",
            &PatchParams::apply("beta"),
            &apply_cm("cm", json!({"data": {"key": "two"}})),
        )
        .await,
        409,
        "Conflict",
        "beta applies a field alpha owns with another value",
    );
    let causes = status.details.map(|d| d.causes).unwrap_or_default();
    assert!(
        causes
            .iter()
            .any(|c| c.reason == "FieldManagerConflict" && c.field == ".data.key"),
        "conflict causes: {causes:?}"
    );
    assert_eq!(api.get("cm").await.expect("get").data["data"]["key"], "one");

    // Applying the same value is shared ownership, not a conflict.
    api.patch(
        "cm",
        &PatchParams::apply("gamma"),
        &apply_cm("cm", json!({"data": {"key": "one"}})),
    )
    .await
    .expect("same value: no conflict");

    // Fields last written by an Update manager conflict too.
    let updater = PatchParams {
        field_manager: Some("editor".into()),
        ..PatchParams::default()
    };
    api.patch(
        "cm",
        &updater,
        &merge(json!({"data": {"edited": "by-hand"}})),
    )
    .await
    .expect("update");
    expect_status(
        api.patch(
            "cm",
            &PatchParams::apply("alpha"),
            &apply_cm(
                "cm",
                json!({"data": {"key": "one", "own": "a", "edited": "by-apply"}}),
            ),
        )
        .await,
        409,
        "Conflict",
        "apply over an Update manager's field",
    );

    let forced = api
        .patch(
            "cm",
            &PatchParams::apply("beta").force(),
            &apply_cm("cm", json!({"data": {"key": "two"}})),
        )
        .await
        .expect("forced apply");
    assert_eq!(forced.data["data"]["key"], "two");
    assert!(owns(&forced, "beta", &["f:data", "f:key"]));
    assert!(
        !owns(&forced, "alpha", &["f:data", "f:key"]),
        "force takes the field from alpha"
    );
    assert!(
        !owns(&forced, "gamma", &["f:data", "f:key"]),
        "force takes the field from gamma"
    );

    // alpha no longer owns `key`: re-applying without it leaves beta's value alone.
    let after = api
        .patch(
            "cm",
            &PatchParams::apply("alpha"),
            &apply_cm("cm", json!({"data": {"own": "a"}})),
        )
        .await
        .expect("alpha reapplies");
    assert_eq!(after.data["data"]["key"], "two");
}

#[tokio::test]
async fn apply_merges_keyed_lists_of_builtin_kinds_per_item() {
    let tc = cluster().await;
    let ns = tc.namespace("ssa-lists").await;
    let api = tc.dynamic(&deployments(), Some(&ns));
    let full = |containers: Value| {
        Patch::Apply(json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web"},
            "spec": {
                "replicas": 0,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": containers},
                },
            },
        }))
    };
    api.patch(
        "web",
        &PatchParams::apply("owner-a"),
        &full(json!([{"name": "main", "image": "registry.k8s.io/pause:3.10"}])),
    )
    .await
    .expect("manager a");
    // Manager b applies only its own container: `containers` is a list keyed by `name`, so
    // this is no conflict and both containers stay.
    let sidecar = Patch::Apply(json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {"template": {"spec": {"containers": [
            {"name": "sidecar", "image": "registry.k8s.io/pause:3.9"}
        ]}}},
    }));
    let both = api
        .patch("web", &PatchParams::apply("owner-b"), &sidecar)
        .await
        .expect("manager b adds a container without conflict");
    let container_names = |obj: &DynamicObject| -> BTreeSet<String> {
        obj.data["spec"]["template"]["spec"]["containers"]
            .as_array()
            .map(|cs| {
                cs.iter()
                    .filter_map(|c| c["name"].as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    assert_eq!(container_names(&both), set(&["main", "sidecar"]));

    // a re-applies (changing its own container): b's container stays.
    let again = api
        .patch(
            "web",
            &PatchParams::apply("owner-a"),
            &full(json!([{"name": "main", "image": "registry.k8s.io/pause:3.9"}])),
        )
        .await
        .expect("manager a again");
    assert_eq!(container_names(&again), set(&["main", "sidecar"]));
    // b stops applying its container: it is removed, a's stays.
    let fewer = api
        .patch(
            "web",
            &PatchParams::apply("owner-b"),
            &Patch::Apply(json!({
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": "web"},
            })),
        )
        .await
        .expect("manager b drops its container");
    assert_eq!(container_names(&fewer), set(&["main"]));
}

#[tokio::test]
async fn apply_treats_lists_of_schemaless_custom_fields_as_atomic() {
    // For fields under x-kubernetes-preserve-unknown-fields the apply schema is deduced:
    // maps merge per key, lists are atomic. A second manager changing the list conflicts.
    let tc = cluster().await;
    let crd = TestCrd::new("Bundle", true, false);
    let ar = crd.install(&tc).await;
    let ns = tc.namespace("ssa-atomic").await;
    let api = tc.dynamic(&ar, Some(&ns));
    let apply = |spec: Value| {
        let mut obj = serde_json::to_value(crd.object("b", None, json!({}))).expect("json");
        obj["spec"] = spec;
        Patch::Apply(obj)
    };
    api.patch(
        "b",
        &PatchParams::apply("first"),
        &apply(json!({
            "items": ["x"],
            "objects": [{"name": "a", "v": 1}],
            "labels": {"a": "1"},
        })),
    )
    .await
    .expect("first applies");
    let merged = api
        .patch(
            "b",
            &PatchParams::apply("second"),
            &apply(json!({"labels": {"b": "2"}})),
        )
        .await
        .expect("second applies another map key");
    assert_eq!(merged.data["spec"]["labels"], json!({"a": "1", "b": "2"}));
    assert_eq!(merged.data["spec"]["items"], json!(["x"]));
    expect_status(
        api.patch(
            "b",
            &PatchParams::apply("second"),
            &apply(json!({"items": ["y"], "labels": {"b": "2"}})),
        )
        .await,
        409,
        "Conflict",
        "second manager replacing an atomic list",
    );
    // Even a list of objects that all have a `name` is atomic here (no list-map-keys in the
    // schema), unlike a built-in keyed list such as containers.
    expect_status(
        api.patch(
            "b",
            &PatchParams::apply("second"),
            &apply(json!({"objects": [{"name": "b", "v": 2}], "labels": {"b": "2"}})),
        )
        .await,
        409,
        "Conflict",
        "second manager adding an item to an atomic list of named objects",
    );
    let forced = api
        .patch(
            "b",
            &PatchParams::apply("second").force(),
            &apply(json!({"items": ["y"], "labels": {"b": "2"}})),
        )
        .await
        .expect("forced");
    assert_eq!(
        forced.data["spec"]["items"],
        json!(["y"]),
        "atomic: replaced, not merged"
    );
}

#[tokio::test]
async fn apply_requires_a_field_manager() {
    let tc = cluster().await;
    let ns = tc.namespace("ssa-nomgr").await;
    let api = cms(&tc, &ns);
    // kube-apiserver validates PatchOptions: fieldManager is required for apply (422 Invalid,
    // details naming PatchOptions and the fieldManager field).
    let status = expect_status(
        api.patch(
            "cm",
            &PatchParams::default(),
            &apply_cm("cm", json!({"data": {"a": "1"}})),
        )
        .await,
        422,
        "Invalid",
        "apply without fieldManager",
    );
    let details = status.details.expect("details");
    assert_eq!(details.kind, "PatchOptions");
    assert!(
        details.causes.iter().any(|c| c.field == "fieldManager"),
        "causes {:?}",
        details.causes
    );
    expect_status(api.get("cm").await, 404, "NotFound", "nothing was created");
}

#[tokio::test]
async fn dry_run_all_returns_the_result_and_writes_nothing() {
    let tc = cluster().await;
    let ns = tc.namespace("dryrun").await;
    let api = cms(&tc, &ns);
    let dry_post = PostParams {
        dry_run: true,
        ..PostParams::default()
    };

    let would = api
        .create(&dry_post, &configmap("ghost", json!({"data": {"a": "1"}})))
        .await
        .expect("dry-run create");
    assert_eq!(would.metadata.name.as_deref(), Some("ghost"));
    assert_eq!(would.data["data"]["a"], "1");
    expect_status(
        api.get("ghost").await,
        404,
        "NotFound",
        "dry-run create wrote nothing",
    );

    let real = create_cm(&tc, &ns, "real", &[], json!({"data": {"a": "1"}})).await;
    let before = rv(&real);

    let mut changed = real.clone();
    changed.data["data"]["a"] = json!("put");
    let put = api
        .replace("real", &dry_post, &changed)
        .await
        .expect("dry-run PUT");
    assert_eq!(put.data["data"]["a"], "put");

    let patched = api
        .patch(
            "real",
            &PatchParams::default().dry_run(),
            &merge(json!({"data": {"a": "merge"}})),
        )
        .await
        .expect("dry-run merge patch");
    assert_eq!(patched.data["data"]["a"], "merge");

    // `data.a` belongs to the creating (Update) manager: apply needs force, as for real.
    let applied = api
        .patch(
            "real",
            &PatchParams::apply("cvo-dry").force().dry_run(),
            &apply_cm("real", json!({"data": {"a": "apply"}})),
        )
        .await
        .expect("dry-run apply");
    assert_eq!(applied.data["data"]["a"], "apply");
    let would_create = api
        .patch(
            "ghost",
            &PatchParams::apply("cvo-dry").dry_run(),
            &apply_cm("ghost", json!({"data": {"a": "x"}})),
        )
        .await
        .expect("dry-run apply that would create");
    assert_eq!(would_create.data["data"]["a"], "x");
    expect_status(
        api.get("ghost").await,
        404,
        "NotFound",
        "dry-run apply created nothing",
    );

    let dry_delete = DeleteParams {
        dry_run: true,
        ..DeleteParams::default()
    };
    api.delete("real", &dry_delete)
        .await
        .expect("dry-run delete");

    let now = api
        .get("real")
        .await
        .expect("still there after dry-run delete");
    assert_eq!(now.data["data"]["a"], "1", "no dry-run write persisted");
    assert_eq!(rv(&now), before, "resourceVersion untouched by dry runs");

    // Dry-run DELETE of a finalized object shows it marked, and leaves it unmarked.
    create_cm(&tc, &ns, "held", &[TEST_FINALIZER], json!({})).await;
    let marked = api
        .delete("held", &dry_delete)
        .await
        .expect("dry-run delete of a finalized object")
        .left()
        .expect("the would-be object");
    assert!(marked.metadata.deletion_timestamp.is_some());
    let held = api.get("held").await.expect("held");
    assert!(
        held.metadata.deletion_timestamp.is_none(),
        "dry-run delete must not mark"
    );
}

// ---------------------------------------------------------------------------------------------
// 15. storage drops the empty lists and maps of built-in kinds

/// Server-side apply `obj` (a whole object) to `api` as manager `cvo-test`.
async fn apply(api: &Api<DynamicObject>, obj: &DynamicObject) -> DynamicObject {
    let name = obj.metadata.name.clone().expect("object name");
    api.patch(&name, &PatchParams::apply("cvo-test"), &Patch::Apply(obj))
        .await
        .unwrap_or_else(|e| panic!("apply {name}: {e}"))
}

#[tokio::test]
async fn an_applied_empty_ingress_list_is_dropped_and_rewritten_on_every_apply() {
    // kube-apiserver stores NetworkPolicies as protobuf, where `ingress: []` and no ingress are
    // the same, but bumps their generation with Go's reflect.DeepEqual, where they differ: every
    // apply of `ingress: []` is a spec change, a new generation and a write.
    let tc = cluster().await;
    let ns = tc.namespace("empty-np").await;
    let api = tc.dynamic(
        &builtin(
            "networking.k8s.io",
            "v1",
            "NetworkPolicy",
            "networkpolicies",
        ),
        Some(&ns),
    );
    let policy = object(
        "networking.k8s.io/v1",
        "NetworkPolicy",
        "deny-in",
        json!({"spec": {"podSelector": {}, "ingress": [], "policyTypes": ["Ingress"]}}),
    );
    let first = apply(&api, &policy).await;
    assert_eq!(
        first.data["spec"].get("ingress"),
        None,
        "empty ingress must not be stored: {}",
        first.data["spec"]
    );
    let second = apply(&api, &policy).await;
    assert_ne!(rv(&second), rv(&first), "the second apply writes again");
    assert_eq!(generation(&second), generation(&first) + 1);
    let third = apply(&api, &policy).await;
    assert_ne!(rv(&third), rv(&second), "and so does every later one");
    assert_eq!(generation(&third), generation(&second) + 1);
    assert_eq!(third.data["spec"].get("ingress"), None);
}

#[tokio::test]
async fn empty_lists_and_maps_of_builtin_kinds_are_not_kept_and_reapplying_them_writes_nothing() {
    let tc = cluster().await;
    let ns = tc.namespace("empty-builtin").await;

    // A ClusterRole's `rules` has no omitempty: it reads back as null.
    let roles = builtin(
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRole",
        "clusterroles",
    );
    let role_name = unique("cvo-test-empty-rules");
    tc.track_cluster_object(&roles, &role_name);
    let role = object(
        "rbac.authorization.k8s.io/v1",
        "ClusterRole",
        &role_name,
        json!({"rules": []}),
    );
    let roles = tc.dynamic(&roles, None);
    let first = apply(&roles, &role).await;
    assert!(
        first.data.get("rules").is_none_or(Value::is_null),
        "rules: [] is not kept: {:?}",
        first.data.get("rules")
    );
    assert_eq!(rv(&apply(&roles, &role).await), rv(&first), "ClusterRole");

    let mut same_after_reapply = Vec::new();
    for (resource, obj) in [
        (configmaps(), configmap("empty-data", json!({"data": {}}))),
        (
            builtin("", "v1", "ServiceAccount", "serviceaccounts"),
            object(
                "v1",
                "ServiceAccount",
                "empty-secrets",
                json!({"secrets": []}),
            ),
        ),
    ] {
        let api = tc.dynamic(&resource, Some(&ns));
        let first = apply(&api, &obj).await;
        let field = if resource.kind == "ConfigMap" {
            "data"
        } else {
            "secrets"
        };
        assert_eq!(
            first.data.get(field),
            None,
            "{}: empty {field}",
            resource.kind
        );
        same_after_reapply.push((resource.kind, rv(&apply(&api, &obj).await) == rv(&first)));
    }
    assert!(
        same_after_reapply.iter().all(|(_, same)| *same),
        "re-applying wrote: {same_after_reapply:?}"
    );

    // Deployments compare their spec semantically: the generation stays (a real deployment
    // controller may still write status, so the resourceVersion is not checked).
    let mut dep = deployment("empty-lists");
    dep.data["spec"]["template"]["spec"]["volumes"] = json!([]);
    dep.data["spec"]["template"]["spec"]["containers"][0]["args"] = json!([]);
    let api = tc.dynamic(&deployments(), Some(&ns));
    let first = apply(&api, &dep).await;
    let pod_spec = &first.data["spec"]["template"]["spec"];
    assert_eq!(pod_spec.get("volumes"), None, "{pod_spec}");
    assert_eq!(pod_spec["containers"][0].get("args"), None, "{pod_spec}");
    let again = apply(&api, &dep).await;
    assert_eq!(generation(&again), generation(&first));
}

#[tokio::test]
async fn custom_resources_keep_empty_lists() {
    // Custom resources are stored as JSON: `[]` stays, and re-applying it writes nothing.
    let tc = cluster().await;
    let crd = TestCrd::new("Bin", true, false);
    let ns = tc.namespace("empty-cr").await;
    let api = tc.dynamic(&crd.install(&tc).await, Some(&ns));
    let bin = crd.object("b", Some(&ns), json!({"spec": {"items": []}}));
    let first = apply(&api, &bin).await;
    assert_eq!(first.data["spec"]["items"], json!([]));
    assert_eq!(rv(&apply(&api, &bin).await), rv(&first));
}

// ---------------------------------------------------------------------------------------------
// 16. managedFields of objects first created otherwise: before-first-apply

fn namespaces() -> ApiResource {
    builtin("", "v1", "Namespace", "namespaces")
}

fn managers(obj: &DynamicObject) -> Vec<(String, String)> {
    obj.metadata
        .managed_fields
        .iter()
        .flatten()
        .map(|m| {
            (
                m.manager.clone().unwrap_or_default(),
                m.operation.clone().unwrap_or_default(),
            )
        })
        .collect()
}

#[tokio::test]
async fn a_namespace_applied_with_only_its_name_is_adopted_by_the_second_apply() {
    // The apply owns no field, so the manager's empty entry is dropped; the server-set label
    // and spec.finalizers are owned by nobody. The next apply of the same body first records
    // the existing fields as `before-first-apply` (an Update): one extra write, then none.
    let tc = cluster().await;
    let name = unique("ssa-bare-ns");
    tc.track_cluster_object(&namespaces(), &name);
    let api = tc.dynamic(&namespaces(), None);
    let bare = object("v1", "Namespace", &name, json!({}));

    let first = apply(&api, &bare).await;
    assert_eq!(
        managers(&first),
        vec![],
        "no managedFields after the first apply"
    );
    assert_eq!(
        first.metadata.labels.clone().unwrap_or_default()["kubernetes.io/metadata.name"],
        name
    );
    assert_eq!(first.data["spec"]["finalizers"], json!(["kubernetes"]));

    let second = apply(&api, &bare).await;
    assert_ne!(rv(&second), rv(&first), "the second apply writes once");
    assert_eq!(
        managers(&second),
        vec![("before-first-apply".to_string(), "Update".to_string())]
    );
    assert!(owns(
        &second,
        "before-first-apply",
        &["f:metadata", "f:labels", "f:kubernetes.io/metadata.name"]
    ));
    assert!(owns(
        &second,
        "before-first-apply",
        &["f:spec", "f:finalizers"]
    ));

    let third = apply(&api, &bare).await;
    assert_eq!(rv(&third), rv(&second), "the third apply writes nothing");
}

#[tokio::test]
async fn a_namespace_applied_with_a_field_of_its_own_is_stable_from_the_first_apply() {
    let tc = cluster().await;
    let name = unique("ssa-labelled-ns");
    tc.track_cluster_object(&namespaces(), &name);
    let api = tc.dynamic(&namespaces(), None);
    let labelled = object(
        "v1",
        "Namespace",
        &name,
        json!({"metadata": {"labels": {TEST_LABEL: "semantics"}}}),
    );
    let first = apply(&api, &labelled).await;
    assert_eq!(
        managers(&first),
        vec![("cvo-test".to_string(), "Apply".to_string())]
    );
    assert!(owns(
        &first,
        "cvo-test",
        &["f:metadata", "f:labels", &format!("f:{TEST_LABEL}")]
    ));
    assert_eq!(rv(&apply(&api, &labelled).await), rv(&first));
}

#[tokio::test]
async fn fields_of_an_unmanaged_object_go_to_before_first_apply_when_it_is_applied() {
    // An object without managedFields (here: created by an apply that owned nothing) does not
    // start tracking on updates; the first apply that finds it so adopts all its fields.
    let tc = cluster().await;
    let ns = tc.namespace("ssa-adopt").await;
    let api = cms(&tc, &ns);
    let created = apply(&api, &configmap("cm", json!({}))).await;
    assert_eq!(managers(&created), vec![]);
    let editor = PatchParams {
        field_manager: Some("cvo-editor".into()),
        ..PatchParams::default()
    };
    let edited = api
        .patch("cm", &editor, &merge(json!({"data": {"a": "1"}})))
        .await
        .expect("merge patch");
    assert_eq!(
        managers(&edited),
        vec![],
        "an update does not start tracking an unmanaged object"
    );

    let applied = apply(&api, &configmap("cm", json!({"data": {"b": "2"}}))).await;
    assert_eq!(applied.data["data"], json!({"a": "1", "b": "2"}));
    assert!(owns(&applied, "cvo-test", &["f:data", "f:b"]));
    assert!(owns(&applied, "before-first-apply", &["f:data", "f:a"]));
    let mut found = managers(&applied);
    found.sort();
    assert_eq!(
        found,
        vec![
            ("before-first-apply".to_string(), "Update".to_string()),
            ("cvo-test".to_string(), "Apply".to_string()),
        ]
    );
}
