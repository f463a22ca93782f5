//! Finalizers and DELETE; no new finalizer on a deleting object.

use crate::helpers::*;

// ---------------------------------------------------------------------------------------------
// 1. finalizers and DELETE

#[tokio::test]
async fn delete_without_finalizers_removes_the_object_at_once() {
    let tc = cluster().await;
    let ns = tc.namespace("del-plain").await;
    let api = cms(&tc, &ns);
    create_cm(&tc, &ns, "plain", &[], json!({"data": {"a": "1"}})).await;

    api.delete("plain", &DeleteParams::default())
        .await
        .expect("delete");
    // No finalizers: gone synchronously, no polling.
    expect_status(api.get("plain").await, 404, "NotFound", "GET after DELETE");
}

#[tokio::test]
async fn delete_with_finalizer_marks_the_object_and_keeps_it() {
    let tc = cluster().await;
    let ns = tc.namespace("del-fin").await;
    let api = cms(&tc, &ns);
    create_cm(
        &tc,
        &ns,
        "held",
        &[TEST_FINALIZER],
        json!({"data": {"a": "1"}}),
    )
    .await;

    let answer = api
        .delete("held", &DeleteParams::default())
        .await
        .expect("delete");
    let returned = answer
        .left()
        .expect("DELETE of a finalized object returns the object");
    assert!(
        returned.metadata.deletion_timestamp.is_some(),
        "response lacks deletionTimestamp"
    );

    let obj = api
        .get("held")
        .await
        .expect("object must stay while finalizers remain");
    let stamp = obj
        .metadata
        .deletion_timestamp
        .clone()
        .expect("deletionTimestamp set");
    assert_eq!(obj.metadata.deletion_grace_period_seconds, Some(0));
    assert_eq!(finalizers(&obj), vec![TEST_FINALIZER.to_string()]);

    // Repeating the DELETE is harmless: still there, same deletionTimestamp.
    api.delete("held", &DeleteParams::default())
        .await
        .expect("repeated DELETE succeeds");
    let again = api
        .get("held")
        .await
        .expect("still there after the second DELETE");
    assert_eq!(again.metadata.deletion_timestamp, Some(stamp));

    // Other updates to an object being deleted are allowed.
    let patched = api
        .patch(
            "held",
            &PatchParams::default(),
            &merge(json!({"data": {"b": "2"}})),
        )
        .await
        .expect("updating a terminating object's data is allowed");
    assert_eq!(patched.data["data"]["b"], "2");

    // Removing the last finalizer removes the object.
    api.patch(
        "held",
        &PatchParams::default(),
        &merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .expect("remove finalizer");
    expect_status(
        api.get("held").await,
        404,
        "NotFound",
        "GET after last finalizer removed",
    );
}

#[tokio::test]
async fn removing_the_last_finalizer_by_update_removes_the_object() {
    let tc = cluster().await;
    let ns = tc.namespace("del-update").await;
    let api = cms(&tc, &ns);
    let second = "cvo-test.example.com/second";
    create_cm(&tc, &ns, "two", &[TEST_FINALIZER, second], json!({})).await;
    api.delete("two", &DeleteParams::background())
        .await
        .expect("delete");

    // JSON patch removing one of two finalizers: the object stays.
    let obj = api
        .patch(
            "two",
            &PatchParams::default(),
            &Patch::<Value>::Json(
                serde_json::from_value(json!([
                    {"op": "test", "path": "/metadata/finalizers/0", "value": TEST_FINALIZER},
                    {"op": "remove", "path": "/metadata/finalizers/0"},
                ]))
                .expect("json patch"),
            ),
        )
        .await
        .expect("remove first finalizer");
    assert_eq!(finalizers(&obj), vec![second.to_string()]);
    let obj = api
        .get("two")
        .await
        .expect("one finalizer left: object stays");
    assert!(obj.metadata.deletion_timestamp.is_some());

    // PUT (replace) without the last finalizer: the object is removed.
    let mut last = obj.clone();
    last.metadata.finalizers = Some(vec![]);
    api.replace("two", &pp(), &last)
        .await
        .expect("replace without finalizers");
    expect_status(
        api.get("two").await,
        404,
        "NotFound",
        "GET after PUT removed the last finalizer",
    );
}

// 2. no new finalizers once deleting

#[tokio::test]
async fn adding_a_finalizer_to_a_deleting_object_is_invalid() {
    let tc = cluster().await;
    let ns = tc.namespace("fin-add").await;
    let api = cms(&tc, &ns);
    let extra = "cvo-test.example.com/late";

    // Before deletion, adding finalizers is fine.
    create_cm(&tc, &ns, "obj", &[], json!({})).await;
    tc.hold(&configmaps(), Some(&ns), "obj");
    api.patch(
        "obj",
        &PatchParams::default(),
        &merge(json!({"metadata": {"finalizers": [TEST_FINALIZER]}})),
    )
    .await
    .expect("adding a finalizer to a live object");
    api.delete("obj", &DeleteParams::default())
        .await
        .expect("delete");

    let status = expect_status(
        api.patch(
            "obj",
            &PatchParams::default(),
            &merge(json!({"metadata": {"finalizers": [TEST_FINALIZER, extra]}})),
        )
        .await,
        422,
        "Invalid",
        "merge patch adding a finalizer while deleting",
    );
    assert_eq!(
        status.details.as_ref().map(|d| d.name.as_str()),
        Some("obj")
    );

    let mut current = api.get("obj").await.expect("get");
    current.metadata.finalizers = Some(vec![TEST_FINALIZER.to_string(), extra.to_string()]);
    expect_status(
        api.replace("obj", &pp(), &current).await,
        422,
        "Invalid",
        "PUT adding a finalizer while deleting",
    );
    let current = api.get("obj").await.expect("get");
    assert_eq!(finalizers(&current), vec![TEST_FINALIZER.to_string()]);

    api.patch(
        "obj",
        &PatchParams::default(),
        &merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .expect("release");
    expect_status(api.get("obj").await, 404, "NotFound", "released object");
}
