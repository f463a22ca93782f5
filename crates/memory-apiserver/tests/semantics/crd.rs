//! CustomResourceDefinitions: deletion, establish/serve, schemas, discovery.

use crate::helpers::*;

// ---------------------------------------------------------------------------------------------
// 6. CRD deletion

#[tokio::test]
async fn crd_deletion_deletes_custom_resources_first_and_waits_for_their_finalizers() {
    let tc = cluster().await;
    let crd = TestCrd::new("Gizmo", false, false);
    let ar = crd.install(&tc).await;
    let api = tc.dynamic(&ar, None);
    let crds: Api<CustomResourceDefinition> = Api::all(tc.client.clone());
    let plain = unique("plain");
    let held = unique("held");
    api.create(&pp(), &crd.object(&plain, None, json!({"spec": {"n": 1}})))
        .await
        .expect("plain CR");
    tc.hold(&ar, None, &held);
    api.create(
        &pp(),
        &crd.object(
            &held,
            None,
            json!({"metadata": {"finalizers": [TEST_FINALIZER]}}),
        ),
    )
    .await
    .expect("held CR");

    crds.delete(&crd.name, &DeleteParams::background())
        .await
        .expect("delete CRD");
    let deleting = crds
        .get(&crd.name)
        .await
        .expect("CRD stays while CRs remain");
    assert!(deleting.metadata.deletion_timestamp.is_some());
    assert!(
        deleting
            .metadata
            .finalizers
            .clone()
            .unwrap_or_default()
            .contains(&"customresourcecleanup.apiextensions.k8s.io".to_string()),
        "CRD finalizers: {:?}",
        deleting.metadata.finalizers
    );

    wait_gone(&tc, &api, &plain, "CR without finalizer").await;
    poll_until(
        "held CR marked and CRD Terminating",
        tc.deadline(),
        || async {
            let cr = api.get(&held).await.map_err(|e| e.to_string())?;
            let c = crds.get(&crd.name).await.map_err(|e| e.to_string())?;
            let terminating = crd_condition(&c, "Terminating");
            if cr.metadata.deletion_timestamp.is_some() && terminating.as_deref() == Some("True") {
                Ok(())
            } else {
                Err(format!(
                    "CR deletionTimestamp={:?} Terminating={terminating:?}",
                    cr.metadata.deletion_timestamp
                ))
            }
        },
    )
    .await;
    crds.get(&crd.name)
        .await
        .expect("CRD held by the CR finalizer");

    // New instances are refused while the CRD terminates (403 Forbidden). The real handler
    // reads the CRD from an informer, so allow it a moment there.
    let refused = |s: &Status| {
        s.code == 403
            && s.reason == "Forbidden"
            && s.message
                .contains("create not allowed while custom resource definition is terminating")
    };
    if tc.is_memory() {
        let status = api_error(
            api.create(&pp(), &crd.object("late", None, json!({})))
                .await,
            "create while the CRD terminates",
        );
        assert!(
            refused(&status),
            "create while the CRD terminates: {status:?}"
        );
    } else {
        poll_until(
            "create refused while the CRD terminates",
            tc.deadline(),
            || async {
                let name = unique("late");
                match api.create(&pp(), &crd.object(&name, None, json!({}))).await {
                    Err(kube::Error::Api(s)) if refused(&s) => Ok(()),
                    other => Err(format!("{other:?}")),
                }
            },
        )
        .await;
    }

    api.patch(
        &held,
        &PatchParams::default(),
        &merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .expect("release CR");
    wait_gone(&tc, &crds, &crd.name, "CRD removed").await;
    poll_until("kind no longer served", tc.deadline(), || async {
        match api.list(&ListParams::default()).await {
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            other => Err(format!("{:?}", other.map(|l| l.items.len()))),
        }
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// 7. CRD establish / serve

#[tokio::test]
async fn custom_resources_are_served_only_once_the_crd_is_established() {
    // In memory the establish delay is made long enough to observe the gap. A real
    // apiserver establishes within milliseconds (it even serves once NamesAccepted), so there
    // the "before" half cannot be forced and is only checked in memory.
    // Assigned (not a struct literal) so this keeps compiling if Config grows private fields.
    #[allow(clippy::field_reassign_with_default)]
    let config = {
        let mut config = memory_apiserver::Config::default();
        config.establish_delay = Duration::from_secs(2);
        config
    };
    let tc = cluster_with(config).await;
    let crd = TestCrd::new("Widget", true, false);
    let ns = tc.namespace("est").await;
    let api = tc.dynamic(&crd.resource(), Some(&ns));
    crd.create(&tc).await;

    if tc.is_memory() {
        let fresh = Api::<CustomResourceDefinition>::all(tc.client.clone())
            .get(&crd.name)
            .await
            .expect("CRD");
        assert_ne!(
            crd_condition(&fresh, "Established").as_deref(),
            Some("True")
        );
        expect_status(
            api.create(&pp(), &crd.object("early", Some(&ns), json!({})))
                .await,
            404,
            "NotFound",
            "CR create before Established",
        );
        expect_status(
            api.get("early").await,
            404,
            "NotFound",
            "CR get before Established",
        );
        expect_status(
            api.list(&ListParams::default()).await,
            404,
            "NotFound",
            "CR list before Established",
        );
    }

    wait_established(&tc, &crd.name).await;
    let ready = crd.object("ready", Some(&ns), json!({"spec": {"a": 1}}));
    let params = pp();
    let created = if tc.is_memory() {
        api.create(&params, &ready)
            .await
            .expect("CR create once Established")
    } else {
        // On a real apiserver the CR handler reads CRDs from an informer that can trail the
        // Established write by a moment.
        poll_until("CR create after Established", tc.deadline(), || async {
            api.create(&params, &ready).await.map_err(|e| e.to_string())
        })
        .await
    };
    assert_eq!(created.data["spec"]["a"], 1);
    let established = Api::<CustomResourceDefinition>::all(tc.client.clone())
        .get(&crd.name)
        .await
        .expect("CRD");
    assert_eq!(
        crd_condition(&established, "NamesAccepted").as_deref(),
        Some("True")
    );
    let listed = api.list(&ListParams::default()).await.expect("list");
    assert_eq!(names(&listed.items), set(&["ready"]));
}

#[tokio::test]
async fn custom_resources_are_validated_and_pruned_by_their_schema() {
    let tc = cluster().await;
    let crd = TestCrd::new("Valve", true, false);
    let mut manifest = serde_json::to_value(crd.manifest()).expect("json");
    manifest["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"] = json!({
        "type": "object",
        "properties": {
            "replicas": {"type": "integer", "minimum": 0},
            "mode": {"type": "string", "enum": ["open", "closed"]},
        },
    });
    let manifest: CustomResourceDefinition = serde_json::from_value(manifest).expect("CRD");
    Api::<CustomResourceDefinition>::all(tc.client.clone())
        .create(&pp(), &manifest)
        .await
        .expect("create CRD");
    tc.track_crd(&crd.name);
    wait_established(&tc, &crd.name).await;
    let ns = tc.namespace("schema").await;
    let api = tc.dynamic(&crd.resource(), Some(&ns));

    // Unknown fields are pruned, not stored.
    let ok = api
        .create(
            &pp(),
            &crd.object(
                "ok",
                Some(&ns),
                json!({"spec": {"replicas": 2, "mode": "open", "colour": "red"}}),
            ),
        )
        .await
        .expect("valid CR");
    assert_eq!(
        ok.data["spec"],
        json!({"replicas": 2, "mode": "open"}),
        "unknown field pruned"
    );

    for (name, spec) in [
        ("wrong-type", json!({"replicas": "two"})),
        ("not-in-enum", json!({"mode": "ajar"})),
        ("below-minimum", json!({"replicas": -1})),
    ] {
        expect_status(
            api.create(&pp(), &crd.object(name, Some(&ns), json!({"spec": spec})))
                .await,
            422,
            "Invalid",
            &format!("CR {name}"),
        );
    }
    expect_status(
        api.patch(
            "ok",
            &PatchParams::default(),
            &merge(json!({"spec": {"replicas": "many"}})),
        )
        .await,
        422,
        "Invalid",
        "update violating the schema",
    );
}

/// A status write is validated against the CRD's schema like any other write: a required
/// field left out is `422 Invalid` naming `status.<path>: Required value` (what an OpenShift
/// CRD answers a ClusterVersion status without `desired.image`), a wrong type too; `null` is
/// accepted only where the schema says `nullable`.
#[tokio::test]
async fn status_writes_are_validated_against_the_schema_required_fields_included() {
    let tc = cluster().await;
    let crd = TestCrd::new("Dial", false, true);
    let mut manifest = serde_json::to_value(crd.manifest()).expect("json");
    manifest["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"] = json!({
        "type": "object",
        "required": ["desired", "observedGeneration"],
        "properties": {
            "desired": {"type": "object", "required": ["image", "version"], "properties": {
                "image": {"type": "string"}, "version": {"type": "string"}}},
            "observedGeneration": {"type": "integer", "format": "int64"},
            "history": {"type": "array", "items": {"type": "object",
                "required": ["image", "completionTime"], "properties": {
                    "image": {"type": "string"},
                    "completionTime": {"type": "string", "format": "date-time", "nullable": true}}}},
        },
    });
    let manifest: CustomResourceDefinition = serde_json::from_value(manifest).expect("CRD");
    Api::<CustomResourceDefinition>::all(tc.client.clone())
        .create(&pp(), &manifest)
        .await
        .expect("create CRD");
    tc.track_crd(&crd.name);
    wait_established(&tc, &crd.name).await;
    let api = tc.dynamic(&crd.resource(), None);
    let name = unique("dial");
    tc.track_cluster_object(&crd.resource(), &name);
    let mut dial = api
        .create(&pp(), &crd.object(&name, None, json!({"spec": {}})))
        .await
        .expect("create without status: status is not required on create");

    dial.data["status"] =
        json!({"desired": {"version": "1.0.0"}, "history": [{"completionTime": null}]});
    let refused = expect_status(
        api.replace_status(&name, &pp(), &dial).await,
        422,
        "Invalid",
        "status without required fields",
    );
    let mut fields: Vec<(String, String)> = refused
        .details
        .as_ref()
        .expect("details")
        .causes
        .iter()
        .map(|c| (c.field.clone(), c.message.clone()))
        .collect();
    fields.sort();
    assert_eq!(
        fields,
        [
            (
                "status.desired.image".to_owned(),
                "Required value".to_owned()
            ),
            (
                "status.history[0].image".to_owned(),
                "Required value".to_owned()
            ),
            (
                "status.observedGeneration".to_owned(),
                "Required value".to_owned()
            ),
        ],
        "{refused:?}"
    );
    assert!(
        refused
            .message
            .contains("status.desired.image: Required value"),
        "{}",
        refused.message
    );
    expect_status(
        api.patch_status(
            &name,
            &PatchParams::default(),
            &merge(json!({"status": {"desired": {"version": "1.0.0", "image": ""}, "observedGeneration": "one"}})),
        )
        .await,
        422,
        "Invalid",
        "status of the wrong type",
    );

    dial.data["status"] = json!({"desired": {"version": "1.0.0", "image": ""}, "observedGeneration": 1,
        "history": [{"image": "", "completionTime": null}]});
    let stored = api
        .replace_status(&name, &pp(), &dial)
        .await
        .expect("a status with every required field, null where nullable");
    assert_eq!(
        stored.data["status"]["history"][0]["completionTime"],
        Value::Null
    );
}

#[tokio::test]
async fn crd_kinds_appear_in_discovery_with_scope_verbs_and_subresources() {
    let tc = cluster().await;
    let group = format!("{}.{TEST_GROUP_SUFFIX}", unique("disc"));
    let namespaced = TestCrd::in_group(&group, "Sprocket", true, true);
    let clustered = TestCrd::in_group(&group, "Cog", false, false);
    namespaced.install(&tc).await;
    let cog = clustered.install(&tc).await;

    let resolved = poll_until("CRD kinds in discovery", tc.deadline(), || async {
        let g = discovery::group(&tc.client, &group)
            .await
            .map_err(|e| e.to_string())?;
        let sprocket = g.recommended_kind("Sprocket");
        let cog = g.recommended_kind("Cog");
        match (sprocket, cog) {
            (Some(s), Some(c)) => Ok((s, c)),
            (s, c) => Err(format!("Sprocket={} Cog={}", s.is_some(), c.is_some())),
        }
    })
    .await;
    let ((s_ar, s_caps), (c_ar, c_caps)) = resolved;
    assert_eq!(s_ar.plural, "sprockets");
    assert_eq!(s_ar.api_version, format!("{group}/v1"));
    assert_eq!(s_caps.scope, Scope::Namespaced);
    assert_eq!(c_ar.plural, "cogs");
    assert_eq!(c_caps.scope, Scope::Cluster);
    for verb in [
        "create",
        "delete",
        "deletecollection",
        "get",
        "list",
        "patch",
        "update",
        "watch",
    ] {
        assert!(
            s_caps.supports_operation(verb),
            "Sprocket lacks verb {verb}: {:?}",
            s_caps.operations
        );
        assert!(
            c_caps.supports_operation(verb),
            "Cog lacks verb {verb}: {:?}",
            c_caps.operations
        );
    }
    assert!(
        s_caps
            .subresources
            .iter()
            .any(|(ar, _)| ar.plural == "sprockets/status" || ar.plural == "status"),
        "Sprocket declares a status subresource: {:?}",
        s_caps
            .subresources
            .iter()
            .map(|(ar, _)| ar.plural.clone())
            .collect::<Vec<_>>()
    );
    assert!(
        c_caps.subresources.is_empty(),
        "Cog declares no subresources"
    );

    // Cluster-scoped custom resources work without a namespace, and not with one.
    let api = tc.dynamic(&cog, None);
    let name = unique("cog");
    let created = api
        .create(
            &pp(),
            &clustered.object(&name, None, json!({"spec": {"teeth": 12}})),
        )
        .await
        .expect("cluster-scoped CR");
    assert!(created.metadata.namespace.is_none());
    assert_eq!(api.get(&name).await.expect("get").data["spec"]["teeth"], 12);
    let ns = tc.namespace("disc").await;
    let wrong_scope = tc.dynamic(&cog, Some(&ns));
    assert_eq!(
        api_error(
            wrong_scope.get(&name).await,
            "namespaced GET of a cluster kind"
        )
        .code,
        404
    );
}

#[tokio::test]
async fn discovery_serves_the_builtin_kinds_with_their_scope() {
    let tc = cluster().await;
    // Only the groups asserted on: a real cluster may carry broken aggregated APIs.
    let disc = Discovery::new(tc.client.clone())
        .filter(&[
            "",
            "apps",
            "batch",
            "rbac.authorization.k8s.io",
            "networking.k8s.io",
            "policy",
            "coordination.k8s.io",
            "admissionregistration.k8s.io",
            "apiextensions.k8s.io",
        ])
        .run()
        .await
        .expect("discovery");
    let expect = [
        ("", "v1", "Namespace", "namespaces", Scope::Cluster),
        ("", "v1", "ConfigMap", "configmaps", Scope::Namespaced),
        ("", "v1", "Secret", "secrets", Scope::Namespaced),
        (
            "",
            "v1",
            "ServiceAccount",
            "serviceaccounts",
            Scope::Namespaced,
        ),
        ("", "v1", "Service", "services", Scope::Namespaced),
        ("", "v1", "Event", "events", Scope::Namespaced),
        ("", "v1", "Pod", "pods", Scope::Namespaced),
        ("apps", "v1", "Deployment", "deployments", Scope::Namespaced),
        ("apps", "v1", "DaemonSet", "daemonsets", Scope::Namespaced),
        (
            "apps",
            "v1",
            "StatefulSet",
            "statefulsets",
            Scope::Namespaced,
        ),
        ("batch", "v1", "Job", "jobs", Scope::Namespaced),
        ("batch", "v1", "CronJob", "cronjobs", Scope::Namespaced),
        (
            "rbac.authorization.k8s.io",
            "v1",
            "Role",
            "roles",
            Scope::Namespaced,
        ),
        (
            "rbac.authorization.k8s.io",
            "v1",
            "RoleBinding",
            "rolebindings",
            Scope::Namespaced,
        ),
        (
            "rbac.authorization.k8s.io",
            "v1",
            "ClusterRole",
            "clusterroles",
            Scope::Cluster,
        ),
        (
            "rbac.authorization.k8s.io",
            "v1",
            "ClusterRoleBinding",
            "clusterrolebindings",
            Scope::Cluster,
        ),
        (
            "networking.k8s.io",
            "v1",
            "NetworkPolicy",
            "networkpolicies",
            Scope::Namespaced,
        ),
        (
            "policy",
            "v1",
            "PodDisruptionBudget",
            "poddisruptionbudgets",
            Scope::Namespaced,
        ),
        (
            "coordination.k8s.io",
            "v1",
            "Lease",
            "leases",
            Scope::Namespaced,
        ),
        (
            "admissionregistration.k8s.io",
            "v1",
            "ValidatingWebhookConfiguration",
            "validatingwebhookconfigurations",
            Scope::Cluster,
        ),
        (
            "admissionregistration.k8s.io",
            "v1",
            "MutatingWebhookConfiguration",
            "mutatingwebhookconfigurations",
            Scope::Cluster,
        ),
        (
            "admissionregistration.k8s.io",
            "v1",
            "ValidatingAdmissionPolicy",
            "validatingadmissionpolicies",
            Scope::Cluster,
        ),
        (
            "admissionregistration.k8s.io",
            "v1",
            "ValidatingAdmissionPolicyBinding",
            "validatingadmissionpolicybindings",
            Scope::Cluster,
        ),
        (
            "apiextensions.k8s.io",
            "v1",
            "CustomResourceDefinition",
            "customresourcedefinitions",
            Scope::Cluster,
        ),
    ];
    for (group, version, kind, plural, scope) in expect {
        let gvk = GroupVersionKind::gvk(group, version, kind);
        let (ar, caps) = disc
            .resolve_gvk(&gvk)
            .unwrap_or_else(|| panic!("discovery lacks {group}/{version} {kind}"));
        assert_eq!(ar.plural, plural, "{kind} plural");
        assert_eq!(caps.scope, scope, "{kind} scope");
        for verb in [
            "create", "delete", "get", "list", "patch", "update", "watch",
        ] {
            assert!(
                caps.supports_operation(verb),
                "{kind} lacks verb {verb}: {:?}",
                caps.operations
            );
        }
    }
    let (_, deploy) = disc
        .resolve_gvk(&GroupVersionKind::gvk("apps", "v1", "Deployment"))
        .expect("Deployment");
    let subs: Vec<String> = deploy
        .subresources
        .iter()
        .map(|(ar, _)| ar.plural.clone())
        .collect();
    assert!(
        subs.iter().any(|s| s.ends_with("status")) && subs.iter().any(|s| s.ends_with("scale")),
        "Deployment subresources: {subs:?}"
    );
}

/// A CRD update keeps every stored version: a new storage version joins
/// `status.storedVersions`, and an update that drops a stored version from `spec.versions` is
/// refused (422: objects may still be stored in it).
#[tokio::test]
async fn a_crd_update_keeps_every_stored_version() {
    let tc = cluster().await;
    let crd = TestCrd::new("Sprocket", false, false);
    crd.install(&tc).await;
    let crds: Api<CustomResourceDefinition> = Api::all(tc.client.clone());
    let mut live = crds.get(&crd.name).await.expect("CRD");
    let mut v2 = live.spec.versions[0].clone();
    v2.name = "v2".into();
    live.spec.versions[0].storage = false;
    live.spec.versions.push(v2);
    let live = crds
        .replace(&crd.name, &pp(), &live)
        .await
        .expect("v2 stored next to v1");
    let stored = live.status.as_ref().and_then(|s| s.stored_versions.clone());
    assert_eq!(stored, Some(vec!["v1".to_owned(), "v2".to_owned()]));

    let mut dropped = live.clone();
    dropped.spec.versions.remove(0);
    let status = api_error(
        crds.replace(&crd.name, &pp(), &dropped).await,
        "drop the stored v1",
    );
    assert_eq!(status.code, 422, "{status:?}");
    assert!(
        status.message.contains(
            "status.storedVersions[0]: Invalid value: \"v1\": missing from spec.versions; v1 was previously a storage version"
        ),
        "{}",
        status.message
    );
    let now = crds.get(&crd.name).await.expect("CRD");
    assert_eq!(now.spec.versions.len(), 2, "unchanged");
}
