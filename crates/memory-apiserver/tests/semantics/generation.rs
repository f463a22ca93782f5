//! Generation, the status subresource, and immutable fields.

use crate::helpers::*;

// ---------------------------------------------------------------------------------------------
// 9. generation and the status subresource

#[tokio::test]
async fn generation_bumps_on_spec_and_annotation_changes_and_status_is_split_for_deployments() {
    let tc = cluster().await;
    let ns = tc.namespace("gen").await;
    let api = tc.dynamic(&deployments(), Some(&ns));
    let created = api
        .create(&pp(), &deployment("web"))
        .await
        .expect("deployment");
    assert_eq!(generation(&created), 1);
    // The deployment controller stamps its `deployment.kubernetes.io/revision` annotation on
    // the new Deployment through /status, which leaves the generation alone.
    let base = poll_until("deployment revision annotation", tc.deadline(), || async {
        let d = api.get("web").await.map_err(|e| e.to_string())?;
        match d.metadata.annotations.as_ref() {
            Some(a) if a.contains_key("deployment.kubernetes.io/revision") => Ok(generation(&d)),
            other => Err(format!("annotations {other:?}")),
        }
    })
    .await;
    assert_eq!(
        base, 1,
        "the revision annotation does not move the generation"
    );

    let labelled = api
        .patch(
            "web",
            &PatchParams::default(),
            &merge(json!({"metadata": {"labels": {"x": "1"}}})),
        )
        .await
        .expect("label patch");
    assert_eq!(
        generation(&labelled),
        base,
        "label changes keep the generation"
    );

    // Deployments are the exception: their generation also counts annotation changes
    // (kube's deployment strategy compares spec and annotations).
    let annotated = api
        .patch(
            "web",
            &PatchParams::default(),
            &merge(json!({"metadata": {"annotations": {"y": "2"}}})),
        )
        .await
        .expect("annotation patch");
    assert_eq!(
        generation(&annotated),
        base + 1,
        "a Deployment's annotation change bumps the generation"
    );

    let respec = api
        .patch(
            "web",
            &PatchParams::default(),
            &merge(json!({"spec": {"minReadySeconds": 7}})),
        )
        .await
        .expect("spec patch");
    assert_eq!(
        generation(&respec),
        base + 2,
        "spec change bumps generation"
    );

    // The main resource ignores status.
    let ignored = api
        .patch(
            "web",
            &PatchParams::default(),
            &merge(json!({"status": {"observedGeneration": 99}})),
        )
        .await
        .expect("status via main resource");
    assert_ne!(
        ignored.data["status"]["observedGeneration"], 99,
        "main resource must ignore status"
    );
    assert_eq!(generation(&ignored), base + 2);

    // /status ignores everything but status.
    let status_write = api
        .patch_status(
            "web",
            &PatchParams::default(),
            &merge(json!({"spec": {"minReadySeconds": 30}, "status": {"observedGeneration": 77}})),
        )
        .await
        .expect("patch /status");
    assert_eq!(status_write.data["status"]["observedGeneration"], 77);
    assert_eq!(
        status_write.data["spec"]["minReadySeconds"], 7,
        "/status must ignore spec"
    );
    assert_eq!(
        generation(&status_write),
        base + 2,
        "status writes keep the generation"
    );
}

#[tokio::test]
async fn custom_resource_status_subresource_and_generation() {
    let tc = cluster().await;
    let group = format!("{}.{TEST_GROUP_SUFFIX}", unique("gen"));
    let with_status = TestCrd::in_group(&group, "Engine", true, true);
    let without_status = TestCrd::in_group(&group, "Wheel", true, false);
    let ns = tc.namespace("crgen").await;
    let engines = tc.dynamic(&with_status.install(&tc).await, Some(&ns));
    let wheels = tc.dynamic(&without_status.install(&tc).await, Some(&ns));

    // With a status subresource: status on create is dropped.
    let e = engines
        .create(
            &pp(),
            &with_status.object(
                "e",
                Some(&ns),
                json!({"spec": {"size": 1}, "status": {"ready": true}}),
            ),
        )
        .await
        .expect("engine");
    assert_eq!(generation(&e), 1);
    assert!(
        e.data
            .get("status")
            .is_none_or(|s| s.get("ready").is_none()),
        "status ignored on create: {:?}",
        e.data
    );

    let e = engines
        .patch(
            "e",
            &PatchParams::default(),
            &merge(json!({"metadata": {"labels": {"l": "1"}}})),
        )
        .await
        .expect("label");
    assert_eq!(generation(&e), 1);
    let e = engines
        .patch(
            "e",
            &PatchParams::default(),
            &merge(json!({"spec": {"size": 2}})),
        )
        .await
        .expect("spec");
    assert_eq!(generation(&e), 2);
    let e = engines
        .patch(
            "e",
            &PatchParams::default(),
            &merge(json!({"status": {"ready": true}})),
        )
        .await
        .expect("status via main resource");
    assert!(
        e.data
            .get("status")
            .is_none_or(|s| s.get("ready").is_none()),
        "main resource ignores status"
    );
    assert_eq!(generation(&e), 2);
    let e = engines
        .patch_status(
            "e",
            &PatchParams::default(),
            &merge(json!({"spec": {"size": 99}, "status": {"ready": true}})),
        )
        .await
        .expect("patch /status");
    assert_eq!(e.data["status"]["ready"], true);
    assert_eq!(e.data["spec"]["size"], 2, "/status ignores spec");
    assert_eq!(generation(&e), 2, "status writes keep the generation");
    let got = engines.get_status("e").await.expect("GET /status");
    assert_eq!(got.data["status"]["ready"], true);

    // Without a status subresource, status is ordinary content: kept on create, and any
    // non-metadata change (status included) bumps the generation.
    let w = wheels
        .create(
            &pp(),
            &without_status.object(
                "w",
                Some(&ns),
                json!({"spec": {"r": 1}, "status": {"ok": false}}),
            ),
        )
        .await
        .expect("wheel");
    assert_eq!(w.data["status"]["ok"], false);
    assert_eq!(generation(&w), 1);
    let w = wheels
        .patch(
            "w",
            &PatchParams::default(),
            &merge(json!({"status": {"ok": true}})),
        )
        .await
        .expect("status patch");
    assert_eq!(w.data["status"]["ok"], true);
    assert_eq!(generation(&w), 2);
    expect_status(
        wheels.get_status("w").await,
        404,
        "NotFound",
        "no /status subresource when the CRD declares none",
    );
}

// ---------------------------------------------------------------------------------------------
// 10. immutable fields

#[tokio::test]
async fn immutable_fields_are_rejected_as_invalid() {
    let tc = cluster().await;
    let ns = tc.namespace("immut").await;
    let api = cms(&tc, &ns);

    create_cm(
        &tc,
        &ns,
        "frozen",
        &[],
        json!({"immutable": true, "data": {"a": "1"}}),
    )
    .await;
    expect_status(
        api.patch(
            "frozen",
            &PatchParams::default(),
            &merge(json!({"data": {"a": "2"}})),
        )
        .await,
        422,
        "Invalid",
        "data of an immutable ConfigMap",
    );
    expect_status(
        api.patch(
            "frozen",
            &PatchParams::default(),
            &merge(json!({"immutable": false})),
        )
        .await,
        422,
        "Invalid",
        "un-freezing an immutable ConfigMap",
    );
    api.patch(
        "frozen",
        &PatchParams::default(),
        &merge(json!({"metadata": {"labels": {"ok": "yes"}}})),
    )
    .await
    .expect("metadata of an immutable ConfigMap stays mutable");

    let job_api = tc.dynamic(&jobs(), Some(&ns));
    job_api
        .create(&pp(), &suspended_job("job"))
        .await
        .expect("job");
    expect_status(
        job_api
            .patch(
                "job",
                &PatchParams::default(),
                &merge(json!({"spec": {"template": {"spec": {"containers": [
                    {"name": "main", "image": "registry.k8s.io/pause:3.9"}
                ]}}}})),
            )
            .await,
        422,
        "Invalid",
        "Job spec.template image",
    );

    let deploy_api = tc.dynamic(&deployments(), Some(&ns));
    deploy_api
        .create(&pp(), &deployment("web"))
        .await
        .expect("deployment");
    expect_status(
        deploy_api
            .patch(
                "web",
                &PatchParams::default(),
                &merge(json!({"spec": {
                    "selector": {"matchLabels": {"app": "other"}},
                    "template": {"metadata": {"labels": {"app": "other"}}},
                }})),
            )
            .await,
        422,
        "Invalid",
        "Deployment spec.selector",
    );
}

#[tokio::test]
async fn service_cluster_ip_is_allocated_and_immutable() {
    let tc = cluster().await;
    let ns = tc.namespace("svc").await;
    let api = tc.dynamic(&builtin("", "v1", "Service", "services"), Some(&ns));
    let created = api
        .create(
            &pp(),
            &object(
                "v1",
                "Service",
                "web",
                json!({"spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}}),
            ),
        )
        .await
        .expect("service");
    let ip = created.data["spec"]["clusterIP"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        !ip.is_empty() && ip != "None",
        "a ClusterIP service gets an address on create: {:?}",
        created.data["spec"]
    );
    expect_status(
        api.patch(
            "web",
            &PatchParams::default(),
            &merge(json!({"spec": {"clusterIP": "None", "clusterIPs": ["None"]}})),
        )
        .await,
        422,
        "Invalid",
        "changing spec.clusterIP",
    );
    let now = api.get("web").await.expect("get");
    assert_eq!(now.data["spec"]["clusterIP"], ip.as_str());
}
