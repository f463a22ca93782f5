//! Deletion propagation (background, foreground, orphan) and the garbage collector.

use crate::helpers::*;

// ---------------------------------------------------------------------------------------------
// 4. propagationPolicy

#[tokio::test]
async fn background_propagation_removes_the_owner_then_its_dependents() {
    let tc = cluster().await;
    let ns = tc.namespace("bg").await;
    let api = cms(&tc, &ns);
    let owner = create_cm(&tc, &ns, "owner", &[], json!({})).await;
    for dep in ["dep-a", "dep-b"] {
        create_cm(
            &tc,
            &ns,
            dep,
            &[],
            json!({"metadata": {"ownerReferences": [owner_ref(&owner, false)]}}),
        )
        .await;
    }

    api.delete("owner", &DeleteParams::background())
        .await
        .expect("delete owner");
    expect_status(api.get("owner").await, 404, "NotFound", "owner goes first");
    for dep in ["dep-a", "dep-b"] {
        wait_gone(&tc, &api, dep, &format!("GC of {dep}")).await;
    }

    // Without a policy, a ConfigMap (like everything but batch/v1 Job) cascades in background.
    let owner2 = create_cm(&tc, &ns, "owner-default", &[], json!({})).await;
    create_cm(
        &tc,
        &ns,
        "dep-default",
        &[],
        json!({"metadata": {"ownerReferences": [owner_ref(&owner2, false)]}}),
    )
    .await;
    api.delete("owner-default", &DeleteParams::default())
        .await
        .expect("delete owner without policy");
    expect_status(
        api.get("owner-default").await,
        404,
        "NotFound",
        "owner without policy",
    );
    wait_gone(&tc, &api, "dep-default", "GC after a delete without policy").await;
}

#[tokio::test]
async fn foreground_propagation_holds_the_owner_until_blocking_dependents_are_gone() {
    let tc = cluster().await;
    let ns = tc.namespace("fg").await;
    let api = cms(&tc, &ns);
    let owner = create_cm(&tc, &ns, "owner", &[], json!({})).await;
    let deps = [("blocking", true), ("nonblocking", false)];
    for (dep, block) in deps {
        create_cm(
            &tc,
            &ns,
            dep,
            &[TEST_FINALIZER],
            json!({"metadata": {"ownerReferences": [owner_ref(&owner, block)]}}),
        )
        .await;
    }

    api.delete("owner", &DeleteParams::foreground())
        .await
        .expect("delete owner");
    let marked = api
        .get("owner")
        .await
        .expect("owner stays during foreground deletion");
    assert!(marked.metadata.deletion_timestamp.is_some());
    assert!(
        finalizers(&marked).contains(&"foregroundDeletion".to_string()),
        "owner must carry foregroundDeletion, has {:?}",
        finalizers(&marked)
    );

    // The garbage collector deletes every dependent (they are held by our finalizer).
    for (dep, _) in deps {
        poll_until(
            &format!("{dep} marked for deletion"),
            tc.deadline(),
            || async {
                let obj = api.get(dep).await.map_err(|e| e.to_string())?;
                obj.metadata
                    .deletion_timestamp
                    .map(|_| ())
                    .ok_or_else(|| "no deletionTimestamp yet".to_string())
            },
        )
        .await;
    }
    let owner_now = api
        .get("owner")
        .await
        .expect("blocking dependent still holds the owner");
    assert!(finalizers(&owner_now).contains(&"foregroundDeletion".to_string()));

    // Release the blocking dependent: it goes, then the owner goes, although the
    // non-blocking dependent still exists.
    api.patch(
        "blocking",
        &PatchParams::default(),
        &merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .expect("release blocking dependent");
    wait_gone(&tc, &api, "blocking", "blocking dependent").await;
    wait_gone(&tc, &api, "owner", "owner after its blocking dependent").await;
    let nonblocking = api
        .get("nonblocking")
        .await
        .expect("non-blocking dependent remains");
    assert!(nonblocking.metadata.deletion_timestamp.is_some());

    api.patch(
        "nonblocking",
        &PatchParams::default(),
        &merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .expect("release");
    wait_gone(&tc, &api, "nonblocking", "non-blocking dependent").await;
}

#[tokio::test]
async fn orphan_propagation_keeps_dependents_and_strips_their_owner_reference() {
    let tc = cluster().await;
    let ns = tc.namespace("orphan").await;
    let api = cms(&tc, &ns);
    let owner = create_cm(&tc, &ns, "owner", &[], json!({})).await;
    let owner_uid = uid(&owner);
    create_cm(
        &tc,
        &ns,
        "dep",
        &[],
        json!({"metadata": {"ownerReferences": [owner_ref(&owner, true)]}}),
    )
    .await;

    api.delete("owner", &DeleteParams::orphan())
        .await
        .expect("delete owner");
    // The owner is either gone already or waiting on the `orphan` finalizer.
    if let Ok(o) = api.get("owner").await {
        assert!(o.metadata.deletion_timestamp.is_some());
        assert!(
            finalizers(&o).contains(&"orphan".to_string()),
            "finalizers {:?}",
            finalizers(&o)
        );
    }
    wait_gone(&tc, &api, "owner", "owner (orphan)").await;
    let dep = api.get("dep").await.expect("orphaned dependent survives");
    assert!(dep.metadata.deletion_timestamp.is_none());
    assert!(
        !owner_uids(&dep).contains(&owner_uid),
        "ownerReference to the deleted owner must be removed"
    );
}

/// A pod that never schedules (no node matches) and never pulls an image.
fn parked_pod(name: &str, owner: &DynamicObject) -> DynamicObject {
    object(
        "v1",
        "Pod",
        name,
        json!({
            "metadata": {"ownerReferences": [{
                "apiVersion": "batch/v1",
                "kind": "Job",
                "name": owner.metadata.name.clone().expect("job name"),
                "uid": uid(owner),
            }]},
            "spec": {
                "nodeSelector": {"cvo-test.example.com/never": "true"},
                "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}],
            },
        }),
    )
}

/// Create a pod. A real cluster refuses pods until the namespace's `default` ServiceAccount
/// exists (created by a controller right after the namespace), so retry there.
async fn create_pod(tc: &TestCluster, api: &Api<DynamicObject>, pod: &DynamicObject) {
    if tc.is_memory() {
        api.create(&pp(), pod).await.expect("create pod");
        return;
    }
    poll_until("pod created", tc.deadline(), || async {
        api.create(&pp(), pod)
            .await
            .map(|_| ())
            .map_err(|e| e.to_string())
    })
    .await;
}

#[tokio::test]
async fn job_delete_without_policy_orphans_pods_and_background_removes_them() {
    let tc = cluster().await;
    let ns = tc.namespace("job").await;
    let job_api = tc.dynamic(&jobs(), Some(&ns));
    let pod_api = tc.dynamic(&pods(), Some(&ns));

    // A suspended Job makes no pods of its own; the pods are created by hand with an
    // ownerReference (not a controller reference, labels outside the Job's selector).
    let job = job_api
        .create(&pp(), &suspended_job("default-policy"))
        .await
        .expect("job");
    let job_uid = uid(&job);
    create_pod(&tc, &pod_api, &parked_pod("orphan-me", &job)).await;
    let job2 = job_api
        .create(&pp(), &suspended_job("background"))
        .await
        .expect("job2");
    create_pod(&tc, &pod_api, &parked_pod("delete-me", &job2)).await;

    // batch/v1 Job: no propagationPolicy means Orphan.
    job_api
        .delete("default-policy", &DeleteParams::default())
        .await
        .expect("delete job");
    wait_gone(
        &tc,
        &job_api,
        "default-policy",
        "Job deleted without a policy",
    )
    .await;
    let pod = pod_api
        .get("orphan-me")
        .await
        .expect("pod of a Job deleted without policy survives");
    assert!(pod.metadata.deletion_timestamp.is_none());
    assert!(
        !owner_uids(&pod).contains(&job_uid),
        "orphaned pod keeps no reference to the Job"
    );

    job_api
        .delete("background", &DeleteParams::background())
        .await
        .expect("delete job2");
    wait_gone(&tc, &job_api, "background", "Job deleted with Background").await;
    wait_gone(
        &tc,
        &pod_api,
        "delete-me",
        "pod of the Job deleted with Background",
    )
    .await;
}

// ---------------------------------------------------------------------------------------------
// 13. garbage collection

#[tokio::test]
async fn garbage_collector_removes_objects_whose_owners_are_all_gone() {
    let tc = cluster().await;
    let ns = tc.namespace("gc").await;
    let api = cms(&tc, &ns);
    let live = create_cm(&tc, &ns, "live-owner", &[], json!({})).await;
    // A reference to an owner that does not exist (never did): a dangling owner.
    let ghost = json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": "ghost-owner",
        "uid": "7a3c2e1f-0000-4000-8000-000000000001",
    });
    create_cm(
        &tc,
        &ns,
        "orphan",
        &[],
        json!({"metadata": {"ownerReferences": [ghost.clone()]}}),
    )
    .await;
    create_cm(
        &tc,
        &ns,
        "shared",
        &[],
        json!({"metadata": {"ownerReferences": [owner_ref(&live, false), ghost]}}),
    )
    .await;
    // Owner deleted later: its dependent goes too.
    let doomed = create_cm(&tc, &ns, "doomed-owner", &[], json!({})).await;
    create_cm(
        &tc,
        &ns,
        "follower",
        &[],
        json!({"metadata": {"ownerReferences": [owner_ref(&doomed, false)]}}),
    )
    .await;
    api.delete("doomed-owner", &DeleteParams::background())
        .await
        .expect("delete owner");

    wait_gone(
        &tc,
        &api,
        "orphan",
        "dependent whose only owner never existed",
    )
    .await;
    wait_gone(&tc, &api, "follower", "dependent whose owner was deleted").await;
    // With one live owner the object stays.
    let shared = api
        .get("shared")
        .await
        .expect("object with a live owner is kept");
    assert!(
        shared.metadata.deletion_timestamp.is_none(),
        "an object with a live owner is kept"
    );

    // A namespaced dependent of a cluster-scoped owner.
    let roles = builtin(
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRole",
        "clusterroles",
    );
    let role_name = unique("cvo-test-owner");
    tc.track_cluster_object(&roles, &role_name);
    let role_api = tc.dynamic(&roles, None);
    let role = role_api
        .create(
            &pp(),
            &object(
                "rbac.authorization.k8s.io/v1",
                "ClusterRole",
                &role_name,
                json!({"rules": []}),
            ),
        )
        .await
        .expect("cluster role");
    create_cm(
        &tc,
        &ns,
        "role-dependent",
        &[],
        json!({"metadata": {"ownerReferences": [{
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "name": role_name,
            "uid": uid(&role),
        }]}}),
    )
    .await;
    role_api
        .delete(&role_name, &DeleteParams::background())
        .await
        .expect("delete cluster role");
    wait_gone(
        &tc,
        &api,
        "role-dependent",
        "dependent of a deleted cluster-scoped owner",
    )
    .await;
}

#[tokio::test]
async fn garbage_collector_drops_dangling_references_of_objects_with_a_live_owner() {
    let tc = cluster().await;
    let ns = tc.namespace("gc-dangling").await;
    let api = cms(&tc, &ns);
    let live = create_cm(&tc, &ns, "live-owner", &[], json!({})).await;
    let ghost = json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": "ghost-owner",
        "uid": "7a3c2e1f-0000-4000-8000-000000000002",
    });
    create_cm(
        &tc,
        &ns,
        "shared",
        &[],
        json!({"metadata": {"ownerReferences": [owner_ref(&live, false), ghost]}}),
    )
    .await;
    // kube-controller-manager's collector keeps the object (it has a solid owner) and patches
    // the dangling reference away.
    let shared = poll_until("dangling reference removed", tc.deadline(), || async {
        let obj = api.get("shared").await.map_err(|e| e.to_string())?;
        if owner_uids(&obj) == vec![uid(&live)] {
            Ok(obj)
        } else {
            Err(format!(
                "ownerReferences {:?}",
                obj.metadata.owner_references
            ))
        }
    })
    .await;
    assert!(shared.metadata.deletion_timestamp.is_none());
}
