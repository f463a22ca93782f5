//! Get, create, update and delete errors (404/409), lists (paging, selectors), patch flavours, deletecollection, metadata-only requests and number round trips.

use crate::helpers::*;

// ---------------------------------------------------------------------------------------------
// 3. NotFound / AlreadyExists / Conflict

#[tokio::test]
async fn get_patch_replace_and_delete_of_a_missing_object_are_not_found() {
    let tc = cluster().await;
    let ns = tc.namespace("missing").await;
    let api = cms(&tc, &ns);

    for (what, result) in [
        ("GET", api.get("nope").await.map(|_| ())),
        (
            "DELETE",
            api.delete("nope", &DeleteParams::default())
                .await
                .map(|_| ()),
        ),
        (
            "merge PATCH",
            api.patch(
                "nope",
                &PatchParams::default(),
                &merge(json!({"data": {"a": "1"}})),
            )
            .await
            .map(|_| ()),
        ),
        (
            "PUT",
            api.replace("nope", &pp(), &configmap("nope", json!({})))
                .await
                .map(|_| ()),
        ),
    ] {
        let status = expect_status(result, 404, "NotFound", what);
        let details = status.details.expect("NotFound carries details");
        assert_eq!(details.name, "nope", "{what}: details.name");
        assert_eq!(
            details.kind, "configmaps",
            "{what}: details.kind is the resource"
        );
    }
}

#[tokio::test]
async fn create_of_an_existing_object_is_already_exists() {
    let tc = cluster().await;
    let ns = tc.namespace("exists").await;
    let api = cms(&tc, &ns);
    create_cm(&tc, &ns, "dup", &[], json!({"data": {"v": "first"}})).await;

    let status = expect_status(
        api.create(&pp(), &configmap("dup", json!({"data": {"v": "second"}})))
            .await,
        409,
        "AlreadyExists",
        "second create",
    );
    let details = status.details.expect("details");
    assert_eq!(
        (details.name.as_str(), details.kind.as_str()),
        ("dup", "configmaps")
    );
    let obj = api.get("dup").await.expect("get");
    assert_eq!(
        obj.data["data"]["v"], "first",
        "the failed create must not write"
    );
}

#[tokio::test]
async fn update_with_a_stale_resource_version_is_a_conflict() {
    let tc = cluster().await;
    let ns = tc.namespace("stale").await;
    let api = cms(&tc, &ns);
    let original = create_cm(&tc, &ns, "cm", &[], json!({"data": {"v": "0"}})).await;

    let mut first = original.clone();
    first.data["data"]["v"] = json!("1");
    let updated = api
        .replace("cm", &pp(), &first)
        .await
        .expect("update at current RV");
    assert_ne!(
        rv(&updated),
        rv(&original),
        "a write changes resourceVersion"
    );

    let mut stale = original.clone();
    stale.data["data"]["v"] = json!("2");
    expect_status(
        api.replace("cm", &pp(), &stale).await,
        409,
        "Conflict",
        "PUT with stale RV",
    );

    // A patch that carries a resourceVersion is a precondition too.
    expect_status(
        api.patch(
            "cm",
            &PatchParams::default(),
            &merge(json!({"metadata": {"resourceVersion": rv(&original)}, "data": {"v": "3"}})),
        )
        .await,
        409,
        "Conflict",
        "merge patch with stale RV",
    );
    let current = api.get("cm").await.expect("get");
    assert_eq!(current.data["data"]["v"], "1");
    assert_eq!(rv(&current), rv(&updated), "failed updates do not write");
}

#[tokio::test]
async fn delete_preconditions_on_uid_and_resource_version() {
    let tc = cluster().await;
    let ns = tc.namespace("precond").await;
    let api = cms(&tc, &ns);
    let obj = create_cm(&tc, &ns, "cm", &[], json!({})).await;

    let wrong_uid = DeleteParams::default().preconditions(Preconditions {
        uid: Some("00000000-0000-0000-0000-000000000000".into()),
        resource_version: None,
    });
    expect_status(
        api.delete("cm", &wrong_uid).await,
        409,
        "Conflict",
        "DELETE with wrong uid",
    );

    let newer = api
        .patch(
            "cm",
            &PatchParams::default(),
            &merge(json!({"data": {"x": "y"}})),
        )
        .await
        .expect("patch");
    let stale_rv = DeleteParams::default().preconditions(Preconditions {
        uid: None,
        resource_version: Some(rv(&obj)),
    });
    expect_status(
        api.delete("cm", &stale_rv).await,
        409,
        "Conflict",
        "DELETE with stale RV",
    );
    api.get("cm")
        .await
        .expect("failed preconditions keep the object");

    let exact = DeleteParams::default().preconditions(Preconditions {
        uid: Some(uid(&obj)),
        resource_version: Some(rv(&newer)),
    });
    api.delete("cm", &exact)
        .await
        .expect("DELETE with matching preconditions");
    expect_status(api.get("cm").await, 404, "NotFound", "deleted");
}

// ---------------------------------------------------------------------------------------------
// list: paging and selectors

#[tokio::test]
async fn list_limit_and_continue_return_each_item_exactly_once_from_one_snapshot() {
    let tc = cluster().await;
    let ns = tc.namespace("page").await;
    let api = cms(&tc, &ns);
    let mut expected = BTreeSet::new();
    for i in 0..7 {
        let name = format!("item-{i}");
        create_cm(
            &tc,
            &ns,
            &name,
            &[],
            json!({"metadata": {"labels": {"page": "yes"}}}),
        )
        .await;
        expected.insert(name);
    }
    let lp = ListParams::default().labels("page=yes").limit(3);
    let first = api.list(&lp).await.expect("first page");
    assert_eq!(first.items.len(), 3, "limit honoured");
    let mut token = first
        .metadata
        .continue_
        .clone()
        .filter(|t| !t.is_empty())
        .expect("continue token");
    let mut seen: Vec<String> = first
        .items
        .iter()
        .filter_map(|o| o.metadata.name.clone())
        .collect();

    // Created after the first page: not part of the snapshot the pages are served from.
    create_cm(
        &tc,
        &ns,
        "zz-late",
        &[],
        json!({"metadata": {"labels": {"page": "yes"}}}),
    )
    .await;

    let mut pages = 1;
    loop {
        let page = api
            .list(&lp.clone().continue_token(&token))
            .await
            .expect("next page");
        assert!(page.items.len() <= 3, "page larger than limit");
        seen.extend(page.items.iter().filter_map(|o| o.metadata.name.clone()));
        pages += 1;
        assert!(pages < 20, "pagination does not terminate");
        match page.metadata.continue_.filter(|t| !t.is_empty()) {
            Some(next) => token = next,
            None => break,
        }
    }
    let unique_seen: BTreeSet<String> = seen.iter().cloned().collect();
    assert_eq!(
        seen.len(),
        unique_seen.len(),
        "an item appeared twice: {seen:?}"
    );
    assert_eq!(
        unique_seen, expected,
        "pages must cover the snapshot exactly"
    );
    let all = api
        .list(&ListParams::default().labels("page=yes"))
        .await
        .expect("full list");
    assert_eq!(all.items.len(), 8, "a fresh list sees the late item");
}

#[tokio::test]
async fn label_and_field_selectors_filter_lists() {
    let tc = cluster().await;
    let ns = tc.namespace("select").await;
    let api = cms(&tc, &ns);
    for (name, labels) in [
        ("web", json!({"sel": "yes", "tier": "web", "env": "prod"})),
        ("db", json!({"sel": "yes", "tier": "db", "env": "prod"})),
        ("tool", json!({"sel": "yes", "env": "dev"})),
    ] {
        create_cm(&tc, &ns, name, &[], json!({"metadata": {"labels": labels}})).await;
    }
    let cases: [(&str, Option<&str>, &[&str]); 9] = [
        ("sel=yes,tier=web", None, &["web"]),
        ("sel=yes,env=prod", None, &["web", "db"]),
        ("sel=yes,tier in (web,db)", None, &["web", "db"]),
        ("sel=yes,tier notin (web)", None, &["db", "tool"]),
        ("sel=yes,!tier", None, &["tool"]),
        ("sel=yes,tier", None, &["web", "db"]),
        ("sel=yes,tier!=web", None, &["db", "tool"]),
        ("sel=yes", Some("metadata.name=db"), &["db"]),
        ("sel=yes", Some("metadata.name!=db"), &["web", "tool"]),
    ];
    for (labels, fields, want) in cases {
        let mut lp = ListParams::default().labels(labels);
        if let Some(f) = fields {
            lp = lp.fields(f);
        }
        let got = api
            .list(&lp)
            .await
            .unwrap_or_else(|e| panic!("list {labels} {fields:?}: {e}"));
        assert_eq!(
            names(&got.items),
            set(want),
            "labels {labels:?} fields {fields:?}"
        );
    }
    let by_ns = api
        .list(
            &ListParams::default()
                .fields(&format!("metadata.namespace={ns}"))
                .labels("sel=yes"),
        )
        .await
        .expect("namespace field selector");
    assert_eq!(by_ns.items.len(), 3);
    let everywhere: Api<DynamicObject> = tc.dynamic(&configmaps(), None);
    let cross = everywhere
        .list(&ListParams::default().fields(&format!("metadata.namespace={ns},metadata.name=web")))
        .await
        .expect("all-namespaces list with field selector");
    assert_eq!(names(&cross.items), set(&["web"]));

    // Unsupported field selectors and malformed label selectors are rejected, not ignored.
    expect_status(
        api.list(&ListParams::default().fields("data.tier=web"))
            .await,
        400,
        "BadRequest",
        "field selector on a field ConfigMaps do not support",
    );
    expect_status(
        api.list(&ListParams::default().labels("tier in (web"))
            .await,
        400,
        "BadRequest",
        "malformed label selector",
    );
}

// ---------------------------------------------------------------------------------------------
// patch flavours and deletecollection

#[tokio::test]
async fn json_patch_test_failure_is_invalid_and_merge_patch_null_deletes() {
    let tc = cluster().await;
    let ns = tc.namespace("patch").await;
    let api = cms(&tc, &ns);
    let before = create_cm(&tc, &ns, "cm", &[], json!({"data": {"a": "1", "b": "2"}})).await;

    let failing: json_patch::Patch = serde_json::from_value(json!([
        {"op": "test", "path": "/data/a", "value": "not-1"},
        {"op": "replace", "path": "/data/a", "value": "3"},
    ]))
    .unwrap();
    expect_status(
        api.patch(
            "cm",
            &PatchParams::default(),
            &Patch::<Value>::Json(failing),
        )
        .await,
        422,
        "Invalid",
        "JSON patch whose test op fails",
    );
    assert_eq!(
        rv(&api.get("cm").await.expect("get")),
        rv(&before),
        "failed patch wrote nothing"
    );

    let passing: json_patch::Patch = serde_json::from_value(json!([
        {"op": "test", "path": "/data/a", "value": "1"},
        {"op": "replace", "path": "/data/a", "value": "3"},
        {"op": "add", "path": "/data/c", "value": "4"},
    ]))
    .unwrap();
    let obj = api
        .patch(
            "cm",
            &PatchParams::default(),
            &Patch::<Value>::Json(passing),
        )
        .await
        .expect("JSON patch");
    assert_eq!(obj.data["data"], json!({"a": "3", "b": "2", "c": "4"}));

    let obj = api
        .patch(
            "cm",
            &PatchParams::default(),
            &merge(json!({"data": {"b": null}})),
        )
        .await
        .expect("merge patch");
    assert_eq!(obj.data["data"], json!({"a": "3", "c": "4"}));
}

#[tokio::test]
async fn json_patch_test_of_an_absent_path_against_null_passes() {
    // kube-runtime's finalizer helper adds the first finalizer with exactly this patch.
    let tc = cluster().await;
    let ns = tc.namespace("patch-null").await;
    let api = cms(&tc, &ns);
    create_cm(&tc, &ns, "cm", &[], json!({"data": {"a": "1"}})).await;
    let first: json_patch::Patch = serde_json::from_value(json!([
        {"op": "test", "path": "/metadata/finalizers", "value": null},
        {"op": "add", "path": "/metadata/finalizers", "value": [TEST_FINALIZER]},
    ]))
    .unwrap();
    tc.hold(&configmaps(), Some(&ns), "cm");
    let obj = api
        .patch(
            "cm",
            &PatchParams::default(),
            &Patch::<Value>::Json(first.clone()),
        )
        .await
        .expect("a test of an absent path against null passes");
    assert_eq!(
        obj.metadata.finalizers,
        Some(vec![TEST_FINALIZER.to_owned()])
    );
    // Present now: the same test fails.
    expect_status(
        api.patch("cm", &PatchParams::default(), &Patch::<Value>::Json(first))
            .await,
        422,
        "Invalid",
        "a test against null of a present path",
    );
}

#[tokio::test]
async fn deletecollection_honours_the_label_selector() {
    let tc = cluster().await;
    let ns = tc.namespace("delcol").await;
    let api = cms(&tc, &ns);
    for (name, group) in [("a1", "a"), ("a2", "a"), ("b1", "b")] {
        create_cm(
            &tc,
            &ns,
            name,
            &[],
            json!({"metadata": {"labels": {"grp": group}}}),
        )
        .await;
    }
    create_cm(
        &tc,
        &ns,
        "a-held",
        &[TEST_FINALIZER],
        json!({"metadata": {"labels": {"grp": "a"}}}),
    )
    .await;

    api.delete_collection(
        &DeleteParams::background(),
        &ListParams::default().labels("grp=a"),
    )
    .await
    .expect("deletecollection");
    for name in ["a1", "a2"] {
        wait_gone(&tc, &api, name, name).await;
    }
    api.get("b1").await.expect("unselected object kept");
    let held = api.get("a-held").await.expect("finalized object kept");
    assert!(
        held.metadata.deletion_timestamp.is_some(),
        "but marked for deletion"
    );
    api.patch(
        "a-held",
        &PatchParams::default(),
        &merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .expect("release");
    expect_status(api.get("a-held").await, 404, "NotFound", "released");
}

/// `Accept: …;as=PartialObjectMetadata[List];g=meta.k8s.io;v=v1` (kube-rs `PartialObjectMeta`,
/// the operator's drift watches): GET, LIST and WATCH answer with metadata only.
#[tokio::test]
async fn metadata_only_requests_answer_partial_object_metadata() {
    let tc = cluster().await;
    let ns = tc.namespace("meta-only").await;
    create_cm(
        &tc,
        &ns,
        "a",
        &[],
        json!({"metadata": {"labels": {"cvo-meta": "yes"}}, "data": {"secretish": "v"}}),
    )
    .await;
    let raw = |path: String, accept: &'static str| {
        let client = tc.client.clone();
        async move {
            let req = http::Request::get(path)
                .header(http::header::ACCEPT, accept)
                .body(Vec::new())
                .expect("request");
            client.request_text(req).await.expect("request")
        }
    };
    let one: Value = serde_json::from_str(
        &raw(
            format!("/api/v1/namespaces/{ns}/configmaps/a"),
            "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
        )
        .await,
    )
    .expect("json");
    assert_eq!(one["kind"], "PartialObjectMetadata", "{one}");
    assert_eq!(one["apiVersion"], "meta.k8s.io/v1", "{one}");
    assert_eq!(one["metadata"]["name"], "a", "{one}");
    assert!(one.get("data").is_none(), "{one}");
    let list: Value = serde_json::from_str(
        &raw(
            format!("/api/v1/namespaces/{ns}/configmaps?labelSelector=cvo-meta%3Dyes"),
            "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1",
        )
        .await,
    )
    .expect("json");
    assert_eq!(list["kind"], "PartialObjectMetadataList", "{list}");
    assert_eq!(list["items"][0]["kind"], "PartialObjectMetadata", "{list}");
    assert!(list["items"][0].get("data").is_none(), "{list}");
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .expect("list resourceVersion")
        .to_owned();
    cms(&tc, &ns)
        .patch(
            "a",
            &PatchParams::default(),
            &merge(json!({"data": {"secretish": "w"}})),
        )
        .await
        .expect("modify");
    let events = raw(
        format!(
            "/api/v1/namespaces/{ns}/configmaps?watch=true&labelSelector=cvo-meta%3Dyes&resourceVersion={rv}&timeoutSeconds=2"
        ),
        "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
    )
    .await;
    let first: Value =
        serde_json::from_str(events.lines().next().expect("an event")).expect("json");
    assert_eq!(first["type"], "MODIFIED", "{events}");
    assert_eq!(first["object"]["kind"], "PartialObjectMetadata", "{events}");
    assert!(first["object"].get("data").is_none(), "{events}");
}

// A number with no fraction reads back without one (Go renders an integral float64 as `1`):
// in a custom resource, and in a typed field of a built-in kind (a CRD schema's `minimum`).
// An engine comparing what it sends with what it reads must compare numbers by value.
#[tokio::test]
async fn integral_numbers_read_back_without_a_fraction() {
    let tc = crate::support::cluster().await;
    let crd = TestCrd::new("Numeral", false, false);
    let ar = crd.install(&tc).await;
    let api = tc.dynamic(&ar, None);
    let name = unique("n");
    let created = api
        .create(
            &pp(),
            &crd.object(
                &name,
                None,
                json!({"spec": {"one": 1.0, "zero": 0.0, "half": 1.5, "neg": -2.0}}),
            ),
        )
        .await
        .expect("create");
    assert_eq!(
        created.data["spec"],
        json!({"one": 1, "zero": 0, "half": 1.5, "neg": -2})
    );
    assert!(
        created.data["spec"]["one"].is_u64(),
        "{}",
        created.data["spec"]
    );
    assert!(
        created.data["spec"]["neg"].is_i64(),
        "{}",
        created.data["spec"]
    );

    let typed = TestCrd::new("Bounded", false, false);
    let mut manifest = serde_json::to_value(typed.manifest()).expect("crd json");
    manifest["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"] = json!({"spec": {"type": "object", "properties": {"n": {"type": "integer", "minimum": 0.0}}}});
    let crds = tc.dynamic(
        &crate::support::builtin(
            "apiextensions.k8s.io",
            "v1",
            "CustomResourceDefinition",
            "customresourcedefinitions",
        ),
        None,
    );
    tc.track_crd(&typed.name);
    let stored = crds
        .create(&pp(), &serde_json::from_value(manifest).expect("crd"))
        .await
        .expect("create crd");
    let minimum = &stored.data["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
        ["properties"]["n"]["minimum"];
    assert!(minimum.is_u64() && minimum == 0, "{minimum}");
}
