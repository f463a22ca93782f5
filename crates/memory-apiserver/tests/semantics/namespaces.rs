//! The namespace lifecycle: termination, content removal, 404 in a missing namespace.

use crate::helpers::*;

// ---------------------------------------------------------------------------------------------
// 5. namespaces

#[tokio::test]
async fn namespace_deletion_terminates_deletes_content_and_waits_for_finalizers() {
    let tc = cluster().await;
    let ns = tc.namespace("term").await;
    let namespaces: Api<Namespace> = Api::all(tc.client.clone());
    let api = cms(&tc, &ns);
    let secrets = tc.dynamic(&builtin("", "v1", "Secret", "secrets"), Some(&ns));

    let created = namespaces.get(&ns).await.expect("namespace");
    let spec_finalizers = created.spec.and_then(|s| s.finalizers).unwrap_or_default();
    assert_eq!(
        spec_finalizers,
        vec!["kubernetes".to_string()],
        "spec.finalizers on create"
    );
    assert_eq!(
        created.status.and_then(|s| s.phase).as_deref(),
        Some("Active")
    );

    create_cm(&tc, &ns, "plain", &[], json!({"data": {"a": "1"}})).await;
    create_cm(&tc, &ns, "held", &[TEST_FINALIZER], json!({})).await;
    secrets
        .create(
            &pp(),
            &object("v1", "Secret", "s", json!({"stringData": {"k": "v"}})),
        )
        .await
        .expect("secret");

    namespaces
        .delete(&ns, &DeleteParams::default())
        .await
        .expect("delete namespace");
    let terminating = namespaces
        .get(&ns)
        .await
        .expect("namespace stays while content remains");
    assert!(terminating.metadata.deletion_timestamp.is_some());
    assert_eq!(
        terminating.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Terminating")
    );
    assert!(
        terminating
            .spec
            .as_ref()
            .and_then(|s| s.finalizers.clone())
            .unwrap_or_default()
            .contains(&"kubernetes".to_string())
    );

    // A second DELETE of a terminating namespace is harmless: current kube-apiserver answers
    // with the namespace (very old releases said 409 Conflict).
    let again = namespaces
        .delete(&ns, &DeleteParams::default())
        .await
        .expect("second DELETE of a terminating namespace");
    assert!(
        again
            .left()
            .is_some_and(|n| n.metadata.deletion_timestamp.is_some()),
        "second DELETE returns the terminating namespace"
    );

    // Creating in a terminating namespace is forbidden.
    if tc.is_memory() {
        expect_status(
            api.create(&pp(), &configmap("late", json!({}))).await,
            403,
            "Forbidden",
            "create in terminating namespace",
        );
        expect_status(
            api.patch(
                "late-apply",
                &PatchParams::apply("cvo-test"),
                &apply_cm("late-apply", json!({"data": {"a": "1"}})),
            )
            .await,
            403,
            "Forbidden",
            "apply-create in terminating namespace",
        );
    } else {
        // The real admission plugin reads namespaces from an informer that may trail the
        // DELETE for a moment.
        poll_until(
            "create in terminating namespace is Forbidden",
            tc.deadline(),
            || async {
                match api
                    .create(&pp(), &configmap(&unique("late"), json!({})))
                    .await
                {
                    Err(kube::Error::Api(s)) if s.code == 403 && s.reason == "Forbidden" => Ok(()),
                    other => Err(format!("{:?}", other.map(|o| o.metadata.name))),
                }
            },
        )
        .await;
    }

    // The namespace controller deletes the content; the finalized object holds the namespace,
    // which reports it in its conditions.
    wait_gone(
        &tc,
        &api,
        "plain",
        "plain configmap in terminating namespace",
    )
    .await;
    wait_gone(&tc, &secrets, "s", "secret in terminating namespace").await;
    poll_until(
        "NamespaceContentRemaining/NamespaceFinalizersRemaining",
        tc.deadline(),
        || async {
            let held = api.get("held").await.map_err(|e| e.to_string())?;
            if held.metadata.deletion_timestamp.is_none() {
                return Err("held object not marked for deletion yet".into());
            }
            let n = namespaces.get(&ns).await.map_err(|e| e.to_string())?;
            let conditions = n.status.and_then(|s| s.conditions).unwrap_or_default();
            let find = |t: &str| conditions.iter().find(|c| c.type_ == t).cloned();
            match (
                find("NamespaceContentRemaining"),
                find("NamespaceFinalizersRemaining"),
            ) {
                (Some(content), Some(fins))
                    if content.status == "True"
                        && fins.status == "True"
                        && content.reason.as_deref() == Some("SomeResourcesRemain")
                        && fins.reason.as_deref() == Some("SomeFinalizersRemain")
                        && fins
                            .message
                            .as_deref()
                            .unwrap_or("")
                            .contains(TEST_FINALIZER) =>
                {
                    Ok(())
                }
                _ => Err(format!("conditions: {conditions:?}")),
            }
        },
    )
    .await;
    namespaces
        .get(&ns)
        .await
        .expect("namespace held by the finalizer");

    api.patch(
        "held",
        &PatchParams::default(),
        &merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .expect("release");
    wait_gone(&tc, &namespaces, &ns, "namespace removed").await;
    // Once it is gone, creating in it is NotFound (an admission cache may briefly still say
    // Forbidden on a real cluster; poll for the final answer).
    poll_until(
        "create in the deleted namespace answers 404",
        tc.deadline(),
        || async {
            match api.create(&pp(), &configmap("after", json!({}))).await {
                Err(kube::Error::Api(s)) if s.code == 404 && s.reason == "NotFound" => Ok(()),
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await;
}

#[tokio::test]
async fn namespace_deletion_removes_custom_resources_too() {
    let tc = cluster().await;
    let crd = TestCrd::new("Gadget", true, false);
    let ar = crd.install(&tc).await;
    let ns = tc.namespace("term-cr").await;
    let namespaces: Api<Namespace> = Api::all(tc.client.clone());
    let api = tc.dynamic(&ar, Some(&ns));
    api.create(&pp(), &crd.object("plain", Some(&ns), json!({"spec": {}})))
        .await
        .expect("plain CR");
    tc.hold(&ar, Some(&ns), "held");
    api.create(
        &pp(),
        &crd.object(
            "held",
            Some(&ns),
            json!({"metadata": {"finalizers": [TEST_FINALIZER]}}),
        ),
    )
    .await
    .expect("held CR");

    namespaces
        .delete(&ns, &DeleteParams::default())
        .await
        .expect("delete namespace");
    // The namespace controller discovers every namespaced kind, custom ones included.
    wait_gone(&tc, &api, "plain", "CR in a terminating namespace").await;
    poll_until(
        "held CR marked, namespace reports it",
        tc.deadline(),
        || async {
            let held = api.get("held").await.map_err(|e| e.to_string())?;
            let n = namespaces.get(&ns).await.map_err(|e| e.to_string())?;
            let conditions = n.status.and_then(|s| s.conditions).unwrap_or_default();
            let remaining = conditions.iter().any(|c| {
                c.type_ == "NamespaceContentRemaining"
                    && c.status == "True"
                    && c.message.as_deref().unwrap_or("").contains(&crd.plural)
            });
            if held.metadata.deletion_timestamp.is_some() && remaining {
                Ok(())
            } else {
                Err(format!(
                    "held deletionTimestamp={:?} conditions={conditions:?}",
                    held.metadata.deletion_timestamp
                ))
            }
        },
    )
    .await;
    api.patch(
        "held",
        &PatchParams::default(),
        &merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .expect("release");
    wait_gone(&tc, &namespaces, &ns, "namespace removed").await;
}

#[tokio::test]
async fn create_in_a_missing_namespace_is_not_found() {
    let tc = cluster().await;
    let missing = unique("never-created");
    let status = expect_status(
        cms(&tc, &missing)
            .create(&pp(), &configmap("cm", json!({})))
            .await,
        404,
        "NotFound",
        "create in missing namespace",
    );
    let details = status.details.expect("details");
    assert_eq!(
        details.kind, "namespaces",
        "the missing thing is the namespace"
    );
    assert_eq!(details.name, missing);

    // Server-side apply that would create is a create: same answer.
    let status = expect_status(
        cms(&tc, &missing)
            .patch(
                "cm",
                &PatchParams::apply("cvo-test"),
                &apply_cm("cm", json!({"data": {"a": "1"}})),
            )
            .await,
        404,
        "NotFound",
        "apply into a missing namespace",
    );
    assert_eq!(
        status.details.map(|d| d.kind).as_deref(),
        Some("namespaces")
    );
}
