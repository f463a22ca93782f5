//! Workload status as kube-controller-manager writes it on a control plane without nodes, `/status` write validation, and APIService availability.

use crate::helpers::*;

// ---------------------------------------------------------------------------------------------
// 18. workload status, as kube-controller-manager writes it on a control plane without nodes
// (the crate's README.md, "Workload status"): Pods are created but never scheduled.

fn statefulsets() -> ApiResource {
    builtin("apps", "v1", "StatefulSet", "statefulsets")
}

fn daemonsets() -> ApiResource {
    builtin("apps", "v1", "DaemonSet", "daemonsets")
}

/// A workload `kind` named `name` with a selector and pod template, `spec` merged in.
fn workload(kind: &str, name: &str, spec: Value) -> DynamicObject {
    let api_version = if kind == "Job" { "batch/v1" } else { "apps/v1" };
    let mut full = json!({
        "selector": {"matchLabels": {"app": name}},
        "template": {
            "metadata": {"labels": {"app": name}},
            "spec": {"restartPolicy": "Never",
                     "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}]},
        },
    });
    if kind == "Job" {
        // kube generates a Job's selector and template labels itself.
        full = json!({"template": {"spec": full["template"]["spec"].clone()}});
    } else if kind != "Deployment" {
        full["template"]["spec"]["restartPolicy"] = json!("Always");
    }
    if kind == "StatefulSet" {
        full["serviceName"] = json!(name);
    }
    if kind == "Deployment" {
        full["template"]["spec"]["restartPolicy"] = json!("Always");
    }
    json_patch::merge(&mut full, &spec);
    object(api_version, kind, name, json!({"spec": full}))
}

/// `(type, status, reason)` of each condition, in order.
fn conditions_of(status: &Value) -> Vec<(String, String, String)> {
    status["conditions"]
        .as_array()
        .map(|cs| {
            cs.iter()
                .map(|c| {
                    let s = |f: &str| c[f].as_str().unwrap_or("").to_string();
                    (s("type"), s("status"), s("reason"))
                })
                .collect()
        })
        .unwrap_or_default()
}

fn cond(ty: &str, status: &str, reason: &str) -> (String, String, String) {
    (ty.into(), status.into(), reason.into())
}

/// Poll `name` until `check` accepts its status; returns the object.
async fn wait_status(
    tc: &TestCluster,
    api: &Api<DynamicObject>,
    name: &str,
    what: &str,
    check: impl Fn(&Value) -> bool,
) -> DynamicObject {
    poll_until(what, tc.deadline(), || async {
        let obj = api.get(name).await.map_err(|e| e.to_string())?;
        let status = obj.data.get("status").cloned().unwrap_or(Value::Null);
        if check(&status) {
            Ok(obj)
        } else {
            Err(format!("status {status}"))
        }
    })
    .await
}

#[tokio::test]
async fn deployment_status_without_nodes_never_becomes_available_except_with_zero_replicas() {
    let tc = cluster().await;
    let ns = tc.namespace("wl-deploy").await;
    let api = tc.dynamic(&deployments(), Some(&ns));
    let created = api
        .create(
            &pp(),
            &workload("Deployment", "one", json!({"replicas": 1})),
        )
        .await
        .expect("create");
    assert!(
        created.data["status"].is_object(),
        "a Deployment always has a status object: {:?}",
        created.data.get("status")
    );
    api.create(
        &pp(),
        &workload("Deployment", "zero", json!({"replicas": 0})),
    )
    .await
    .expect("create");

    let one = wait_status(&tc, &api, "one", "one: rollout status", |s| {
        s["observedGeneration"] == 1
            && conditions_of(s).last() == Some(&cond("Progressing", "True", "ReplicaSetUpdated"))
    })
    .await;
    let s = &one.data["status"];
    assert_eq!(
        conditions_of(s),
        vec![
            cond("Available", "False", "MinimumReplicasUnavailable"),
            cond("Progressing", "True", "ReplicaSetUpdated"),
        ]
    );
    assert_eq!(
        (
            &s["replicas"],
            &s["updatedReplicas"],
            &s["unavailableReplicas"]
        ),
        (&json!(1), &json!(1), &json!(1)),
        "{s}"
    );
    assert!(s.get("availableReplicas").is_none() && s.get("readyReplicas").is_none());
    assert_eq!(s["terminatingReplicas"], 0);
    let message = s["conditions"][1]["message"].as_str().unwrap_or("");
    assert!(
        message.starts_with("ReplicaSet \"one-") && message.ends_with("\" is progressing."),
        "{message}"
    );
    // The revision annotation is written through /status: the generation stays.
    assert_eq!(
        one.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("deployment.kubernetes.io/revision"))
            .map(String::as_str),
        Some("1")
    );
    assert_eq!(generation(&one), 1);
    let kcm = one
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .find(|e| e.manager.as_deref() == Some("kube-controller-manager"))
        .expect("kube-controller-manager's entry");
    assert_eq!(kcm.subresource.as_deref(), Some("status"));
    let owned = serde_json::to_value(&kcm.fields_v1).expect("fieldsV1");
    assert!(
        owned["f:metadata"]["f:annotations"]
            .get("f:deployment.kubernetes.io/revision")
            .is_some(),
        "the revision annotation is owned through /status: {owned}"
    );

    let zero = wait_status(&tc, &api, "zero", "zero: complete", |s| {
        s["observedGeneration"] == 1
            && conditions_of(s).last()
                == Some(&cond("Progressing", "True", "NewReplicaSetAvailable"))
    })
    .await;
    assert_eq!(
        conditions_of(&zero.data["status"]),
        vec![
            cond("Available", "True", "MinimumReplicasAvailable"),
            cond("Progressing", "True", "NewReplicaSetAvailable"),
        ]
    );
    assert!(zero.data["status"].get("replicas").is_none());

    // A spec change is observed.
    api.patch(
        "one",
        &PatchParams::default(),
        &merge(json!({"spec": {"replicas": 2}})),
    )
    .await
    .expect("scale");
    wait_status(&tc, &api, "one", "one: scaled to 2", |s| {
        s["observedGeneration"] == 2 && s["replicas"] == 2 && s["updatedReplicas"] == 2
    })
    .await;

    // Scaling a complete Deployment up is not a new rollout: kube skips the progress checks,
    // so `Progressing` stays `NewReplicaSetAvailable` while `Available` turns `False`.
    api.patch(
        "zero",
        &PatchParams::default(),
        &merge(json!({"spec": {"replicas": 1}})),
    )
    .await
    .expect("scale up");
    let scaled = wait_status(&tc, &api, "zero", "zero: scaled to 1", |s| {
        s["observedGeneration"] == 2 && s["updatedReplicas"] == 1
    })
    .await;
    assert_eq!(
        conditions_of(&scaled.data["status"]),
        vec![
            cond("Progressing", "True", "NewReplicaSetAvailable"),
            cond("Available", "False", "MinimumReplicasUnavailable"),
        ]
    );

    // A client's status is overwritten by the deployment controller.
    let written = api
        .patch_status(
            "one",
            &PatchParams::default(),
            &merge(json!({"status": {"availableReplicas": 2, "readyReplicas": 2}})),
        )
        .await
        .expect("status write");
    assert_eq!(written.data["status"]["availableReplicas"], 2);
    wait_status(&tc, &api, "one", "client status overwritten", |s| {
        s.get("availableReplicas").is_none() && s.get("readyReplicas").is_none()
    })
    .await;
}

#[tokio::test]
async fn deployment_progress_deadline_and_pause_conditions() {
    let tc = cluster().await;
    let ns = tc.namespace("wl-deadline").await;
    let api = tc.dynamic(&deployments(), Some(&ns));
    api.create(
        &pp(),
        &workload(
            "Deployment",
            "slow",
            json!({"replicas": 1, "progressDeadlineSeconds": 1}),
        ),
    )
    .await
    .expect("create");
    api.create(
        &pp(),
        &workload(
            "Deployment",
            "paused",
            json!({"replicas": 1, "paused": true}),
        ),
    )
    .await
    .expect("create");
    let slow = wait_status(&tc, &api, "slow", "progress deadline exceeded", |s| {
        conditions_of(s).last() == Some(&cond("Progressing", "False", "ProgressDeadlineExceeded"))
    })
    .await;
    assert_eq!(
        conditions_of(&slow.data["status"])[0],
        cond("Available", "False", "MinimumReplicasUnavailable")
    );
    let paused = wait_status(&tc, &api, "paused", "paused conditions", |s| {
        s["observedGeneration"] == 1 && conditions_of(s).len() == 2
    })
    .await;
    assert_eq!(
        conditions_of(&paused.data["status"]),
        vec![
            cond("Progressing", "Unknown", "DeploymentPaused"),
            cond("Available", "False", "MinimumReplicasUnavailable"),
        ]
    );
    assert!(
        paused.data["status"].get("replicas").is_none(),
        "a Deployment created paused gets no ReplicaSet"
    );
}

#[tokio::test]
async fn statefulset_status_without_nodes_stops_at_the_first_pod() {
    let tc = cluster().await;
    let ns = tc.namespace("wl-sts").await;
    let api = tc.dynamic(&statefulsets(), Some(&ns));
    let created = api
        .create(
            &pp(),
            &workload("StatefulSet", "one", json!({"replicas": 1})),
        )
        .await
        .expect("create");
    assert_eq!(created.data["status"]["availableReplicas"], 0);
    api.create(
        &pp(),
        &workload("StatefulSet", "zero", json!({"replicas": 0})),
    )
    .await
    .expect("create");
    let one = wait_status(&tc, &api, "one", "one: a Pod", |s| {
        s["observedGeneration"] == 1 && s["currentReplicas"] == 1
    })
    .await;
    let s = &one.data["status"];
    assert_eq!(
        (&s["replicas"], &s["updatedReplicas"]),
        (&json!(1), &json!(1))
    );
    assert_eq!(
        (&s["availableReplicas"], &s["collisionCount"]),
        (&json!(0), &json!(0))
    );
    assert!(s.get("readyReplicas").is_none());
    assert_eq!(s["currentRevision"], s["updateRevision"]);
    assert!(
        s["updateRevision"]
            .as_str()
            .unwrap_or("")
            .starts_with("one-")
    );
    let zero = wait_status(&tc, &api, "zero", "zero: observed", |s| {
        s["observedGeneration"] == 1 && s["currentRevision"].is_string()
    })
    .await;
    assert_eq!(zero.data["status"]["replicas"], 0);

    // OrderedReady waits for Pod 0 to be ready: three replicas still mean one Pod.
    api.patch(
        "one",
        &PatchParams::default(),
        &merge(json!({"spec": {"replicas": 3}})),
    )
    .await
    .expect("scale");
    let one = wait_status(&tc, &api, "one", "one: generation 2 observed", |s| {
        s["observedGeneration"] == 2
    })
    .await;
    assert_eq!(one.data["status"]["replicas"], 1);
}

#[tokio::test]
async fn daemonset_status_without_nodes_desires_nothing() {
    let tc = cluster().await;
    let ns = tc.namespace("wl-ds").await;
    let api = tc.dynamic(&daemonsets(), Some(&ns));
    let created = api
        .create(&pp(), &workload("DaemonSet", "ds", json!({})))
        .await
        .expect("create");
    assert_eq!(created.data["status"]["desiredNumberScheduled"], 0);
    let ds = wait_status(&tc, &api, "ds", "observed", |s| {
        s["observedGeneration"] == 1
    })
    .await;
    assert_eq!(
        ds.data["status"],
        json!({"currentNumberScheduled": 0, "desiredNumberScheduled": 0,
               "numberMisscheduled": 0, "numberReady": 0, "observedGeneration": 1})
    );
    api.patch(
        "ds",
        &PatchParams::default(),
        &merge(json!({"spec": {"template": {"metadata": {"annotations": {"x": "1"}}}}})),
    )
    .await
    .expect("template change");
    wait_status(&tc, &api, "ds", "generation 2 observed", |s| {
        s["observedGeneration"] == 2
    })
    .await;
}

#[tokio::test]
async fn job_status_without_nodes_active_suspended_resumed_and_deadline() {
    let tc = cluster().await;
    let ns = tc.namespace("wl-job").await;
    let api = tc.dynamic(&jobs(), Some(&ns));
    let created = api
        .create(&pp(), &workload("Job", "run", json!({})))
        .await
        .expect("create");
    assert_eq!(created.data["status"], json!({}));
    api.create(&pp(), &workload("Job", "held", json!({"suspend": true})))
        .await
        .expect("create");
    api.create(
        &pp(),
        &workload("Job", "late", json!({"activeDeadlineSeconds": 1})),
    )
    .await
    .expect("create");
    api.create(&pp(), &workload("Job", "none", json!({"completions": 0})))
        .await
        .expect("create");

    let run = wait_status(&tc, &api, "run", "an active Pod", |s| s["active"] == 1).await;
    let s = &run.data["status"];
    assert!(s["startTime"].is_string(), "{s}");
    assert_eq!((&s["ready"], &s["terminating"]), (&json!(0), &json!(0)));
    assert_eq!(s["uncountedTerminatedPods"], json!({}));
    assert!(s.get("conditions").is_none(), "{s}");

    let held = wait_status(&tc, &api, "held", "suspended", |s| {
        conditions_of(s) == vec![cond("Suspended", "True", "JobSuspended")]
    })
    .await;
    assert!(held.data["status"].get("startTime").is_none());
    assert!(held.data["status"].get("active").is_none());
    api.patch(
        "held",
        &PatchParams::default(),
        &merge(json!({"spec": {"suspend": false}})),
    )
    .await
    .expect("resume");
    let resumed = wait_status(&tc, &api, "held", "resumed", |s| {
        conditions_of(s) == vec![cond("Suspended", "False", "JobResumed")] && s["active"] == 1
    })
    .await;
    assert!(resumed.data["status"]["startTime"].is_string());

    let late = wait_status(&tc, &api, "late", "deadline exceeded", |s| {
        conditions_of(s).iter().any(|c| c.0 == "Failed")
    })
    .await;
    assert_eq!(
        conditions_of(&late.data["status"]),
        vec![
            cond("FailureTarget", "True", "DeadlineExceeded"),
            cond("Failed", "True", "DeadlineExceeded"),
        ]
    );
    assert!(late.data["status"].get("active").is_none());

    let none = wait_status(&tc, &api, "none", "complete", |s| {
        conditions_of(s).iter().any(|c| c.0 == "Complete")
    })
    .await;
    assert_eq!(
        conditions_of(&none.data["status"]),
        vec![
            cond("SuccessCriteriaMet", "True", "CompletionsReached"),
            cond("Complete", "True", "CompletionsReached"),
        ]
    );
    assert!(none.data["status"]["completionTime"].is_string());
}

/// The `field: message` of each cause of a 422.
fn causes(status: &Status) -> Vec<String> {
    status
        .details
        .as_ref()
        .map(|d| {
            d.causes
                .iter()
                .map(|c| format!("{}: {}", c.field, c.message))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn job_status_writes_are_validated_and_a_foreign_managed_by_is_left_alone() {
    let tc = cluster().await;
    let ns = tc.namespace("wl-jobstatus").await;
    let api = tc.dynamic(&jobs(), Some(&ns));
    api.create(
        &pp(),
        &workload("Job", "ext", json!({"managedBy": "example.com/foreign"})),
    )
    .await
    .expect("create");
    // A Job kube manages, created after: once it has its status, the Job controller has
    // been past the foreign one.
    api.create(&pp(), &workload("Job", "own", json!({})))
        .await
        .expect("create");
    wait_status(&tc, &api, "own", "own: active", |s| s["active"] == 1).await;
    assert_eq!(
        api.get("ext").await.expect("ext").data["status"],
        json!({}),
        "a Job managed by someone else gets no status from kube"
    );

    let lone = expect_status(
        api.patch_status(
            "ext",
            &PatchParams::default(),
            &merge(json!({"status": {"conditions": [{"type": "Complete", "status": "True"}]}})),
        )
        .await,
        422,
        "Invalid",
        "a lone Complete condition",
    );
    assert_eq!(
        causes(&lone),
        vec![
            "status.completionTime: Required value: completionTime is required for Complete jobs",
            "status.conditions: Invalid value: cannot set Complete=True condition without the SuccessCriteriaMet=true condition",
            "status.startTime: Required value: startTime is required for finished job",
        ]
    );
    let failed = expect_status(
        api.patch_status(
            "ext",
            &PatchParams::default(),
            &merge(json!({"status": {"startTime": "2026-01-01T00:00:00Z",
                "conditions": [{"type": "Failed", "status": "True"}]}})),
        )
        .await,
        422,
        "Invalid",
        "Failed without FailureTarget",
    );
    assert_eq!(
        causes(&failed),
        vec![
            "status.conditions: Invalid value: cannot set Failed=True condition without the FailureTarget=true condition"
        ]
    );
    let before_start = expect_status(
        api.patch_status(
            "ext",
            &PatchParams::default(),
            &merge(json!({"status": {
                "startTime": "2026-01-01T00:05:00Z", "completionTime": "2026-01-01T00:00:00Z",
                "conditions": [{"type": "SuccessCriteriaMet", "status": "True"},
                               {"type": "Complete", "status": "True"}]}})),
        )
        .await,
        422,
        "Invalid",
        "completion before start",
    );
    assert_eq!(
        causes(&before_start),
        vec![
            "status.completionTime: Invalid value: \"2026-01-01T00:00:00Z\": must be equal to or after `startTime`"
        ]
    );

    let done = api
        .patch_status(
            "ext",
            &PatchParams::default(),
            &merge(json!({"status": {
                "startTime": "2026-01-01T00:00:00Z", "completionTime": "2026-01-01T00:05:00Z",
                "succeeded": 1,
                "conditions": [{"type": "SuccessCriteriaMet", "status": "True"},
                               {"type": "Complete", "status": "True"}]}})),
        )
        .await
        .expect("a complete status with its prerequisites");
    let s = &done.data["status"];
    assert_eq!(
        conditions_of(s),
        vec![
            cond("SuccessCriteriaMet", "True", ""),
            cond("Complete", "True", "")
        ]
    );
    assert_eq!(
        s["conditions"][1]["lastTransitionTime"],
        Value::Null,
        "timestamps left out read back as null"
    );

    let undo = expect_status(
        api.patch_status(
            "ext",
            &PatchParams::default(),
            &merge(json!({"status": {"completionTime": null,
                "conditions": [{"type": "SuccessCriteriaMet", "status": "True"}]}})),
        )
        .await,
        422,
        "Invalid",
        "a terminal condition cannot go",
    );
    assert_eq!(
        causes(&undo),
        vec![
            "status.conditions: Invalid value: cannot disable the terminal Complete=True condition"
        ]
    );
    let decrease = expect_status(
        api.patch_status(
            "ext",
            &PatchParams::default(),
            &merge(json!({"status": {"succeeded": 0}})),
        )
        .await,
        422,
        "Invalid",
        "counters do not decrease",
    );
    assert_eq!(
        causes(&decrease),
        vec!["status.succeeded: Invalid value: 0: cannot decrease the succeeded counter"]
    );

    // managedBy cannot change, nor be set on a Job that had none.
    for (job, value) in [("ext", "example.com/other"), ("own", "example.com/late")] {
        let e = expect_status(
            api.patch(
                job,
                &PatchParams::default(),
                &merge(json!({"spec": {"managedBy": value}})),
            )
            .await,
            422,
            "Invalid",
            "managedBy is immutable",
        );
        assert_eq!(
            causes(&e),
            vec![format!(
                "spec.managedBy: Invalid value: \"{value}\": field is immutable"
            )]
        );
    }

    // The written status stays: kube's controller does not touch the foreign Job.
    api.create(&pp(), &workload("Job", "own2", json!({})))
        .await
        .expect("create");
    wait_status(&tc, &api, "own2", "own2: active", |s| s["active"] == 1).await;
    let ext = api.get("ext").await.expect("ext");
    assert_eq!(ext.data["status"], done.data["status"]);

    // On a Job kube manages, a lone Complete also meets the active Pod.
    let own = expect_status(
        api.patch_status(
            "own",
            &PatchParams::default(),
            &merge(json!({"status": {"conditions": [{"type": "Complete", "status": "True"}]}})),
        )
        .await,
        422,
        "Invalid",
        "a lone Complete on a running Job",
    );
    assert_eq!(
        causes(&own),
        vec![
            "status.completionTime: Required value: completionTime is required for Complete jobs",
            "status.conditions: Invalid value: cannot set Complete=True condition without the SuccessCriteriaMet=true condition",
            "status.active: Invalid value: 1: active>0 is invalid for finished job",
        ]
    );
}

#[tokio::test]
async fn workload_status_writes_carry_metadata_but_not_the_generation() {
    let tc = cluster().await;
    let ns = tc.namespace("wl-meta").await;
    let deploys = tc.dynamic(&deployments(), Some(&ns));
    deploys
        .create(&pp(), &workload("Deployment", "d", json!({"replicas": 0})))
        .await
        .expect("create");
    let d = deploys
        .patch_status(
            "d",
            &PatchParams::default(),
            &merge(json!({"metadata": {"labels": {"l": "1"}, "annotations": {"a": "1"}}})),
        )
        .await
        .expect("deployment /status");
    assert_eq!(
        d.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("a"))
            .map(String::as_str),
        Some("1"),
        "a Deployment's /status takes annotations"
    );
    assert!(
        d.metadata
            .labels
            .as_ref()
            .is_none_or(|l| !l.contains_key("l")),
        "but not labels"
    );
    assert_eq!(generation(&d), 1);

    let sets = tc.dynamic(&statefulsets(), Some(&ns));
    sets.create(&pp(), &workload("StatefulSet", "s", json!({"replicas": 0})))
        .await
        .expect("create");
    let s = sets
        .patch_status(
            "s",
            &PatchParams::default(),
            &merge(json!({"metadata": {"labels": {"l": "1"}, "annotations": {"a": "1"}}})),
        )
        .await
        .expect("statefulset /status");
    assert_eq!(
        s.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("l"))
            .map(String::as_str),
        Some("1"),
        "a StatefulSet's /status takes labels"
    );
    assert_eq!(
        s.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("a"))
            .map(String::as_str),
        Some("1")
    );
    assert_eq!(generation(&s), 1);
}

#[tokio::test]
async fn apps_status_writes_are_validated() {
    let tc = cluster().await;
    let ns = tc.namespace("wl-appsstatus").await;
    let deploys = tc.dynamic(&deployments(), Some(&ns));
    deploys
        .create(&pp(), &workload("Deployment", "d", json!({"replicas": 0})))
        .await
        .expect("create");
    let e = expect_status(
        deploys
            .patch_status(
                "d",
                &PatchParams::default(),
                &merge(
                    json!({"status": {"replicas": 2, "readyReplicas": 1, "availableReplicas": 2}}),
                ),
            )
            .await,
        422,
        "Invalid",
        "more available than ready",
    );
    assert_eq!(
        causes(&e),
        vec!["status.availableReplicas: Invalid value: 2: cannot be greater than readyReplicas"]
    );
    let e = expect_status(
        deploys
            .patch_status(
                "d",
                &PatchParams::default(),
                &merge(json!({"status": {"replicas": 1, "updatedReplicas": 2}})),
            )
            .await,
        422,
        "Invalid",
        "more updated than replicas",
    );
    assert_eq!(
        causes(&e),
        vec!["status.updatedReplicas: Invalid value: 2: cannot be greater than status.replicas"]
    );

    let sets = tc.dynamic(&statefulsets(), Some(&ns));
    sets.create(&pp(), &workload("StatefulSet", "s", json!({"replicas": 0})))
        .await
        .expect("create");
    let e = expect_status(
        sets.patch_status(
            "s",
            &PatchParams::default(),
            &merge(json!({"status": {"replicas": -1}})),
        )
        .await,
        422,
        "Invalid",
        "negative replicas",
    );
    assert_eq!(
        causes(&e),
        vec![
            "status.replicas: Invalid value: -1: must be greater than or equal to 0",
            "status.readyReplicas: Invalid value: 0: cannot be greater than status.replicas",
            "status.currentReplicas: Invalid value: 0: cannot be greater than status.replicas",
            "status.updatedReplicas: Invalid value: 0: cannot be greater than status.replicas",
            "status.availableReplicas: Invalid value: 0: cannot be greater than status.replicas",
        ]
    );

    let daemons = tc.dynamic(&daemonsets(), Some(&ns));
    daemons
        .create(&pp(), &workload("DaemonSet", "ds", json!({})))
        .await
        .expect("create");
    let e = expect_status(
        daemons
            .patch_status(
                "ds",
                &PatchParams::default(),
                &merge(json!({"status": {"numberReady": -1}})),
            )
            .await,
        422,
        "Invalid",
        "negative numberReady",
    );
    assert_eq!(
        causes(&e),
        vec!["status.numberReady: Invalid value: -1: must be greater than or equal to 0"]
    );
    // More ready than desired is not checked.
    daemons
        .patch_status(
            "ds",
            &PatchParams::default(),
            &merge(json!({"status": {"desiredNumberScheduled": 1, "numberReady": 2}})),
        )
        .await
        .expect("accepted");
}

#[tokio::test]
async fn api_service_availability_without_nodes() {
    let tc = cluster().await;
    let ns = tc.namespace("apisvc").await;
    let services = tc.dynamic(
        &crate::support::builtin("", "v1", "Service", "services"),
        Some(&ns),
    );
    services
        .create(
            &pp(),
            &serde_json::from_value(json!({"apiVersion": "v1", "kind": "Service",
                "metadata": {"name": "present"},
                "spec": {"selector": {"app": "present"}, "ports": [{"name": "https", "port": 443}]}}))
            .expect("service"),
        )
        .await
        .expect("create service");
    let resource =
        crate::support::builtin("apiregistration.k8s.io", "v1", "APIService", "apiservices");
    let api = tc.dynamic(&resource, None);
    let suffix = crate::support::unique("probe");
    services
        .create(
            &pp(),
            &serde_json::from_value(json!({"apiVersion": "v1", "kind": "Service",
                "metadata": {"name": "unselected"},
                "spec": {"ports": [{"name": "https", "port": 443}]}}))
            .expect("service"),
        )
        .await
        .expect("create service");
    let mut expected = Vec::new();
    for (kind, service, reason, message) in [
        (
            "local",
            None,
            "Local",
            "Local APIServices are always available".to_owned(),
        ),
        (
            "missing",
            Some("missing"),
            "ServiceNotFound",
            format!("service/missing in \"{ns}\" is not present"),
        ),
        (
            "unselected",
            Some("unselected"),
            "EndpointsNotFound",
            format!("cannot find endpointslices for service/unselected in \"{ns}\""),
        ),
        (
            "present",
            Some("present"),
            "MissingEndpoints",
            format!(
                "endpointslices for service/present in \"{ns}\" have no addresses with port name \"https\""
            ),
        ),
    ] {
        let group = format!("{kind}.{suffix}.example.test");
        let name = format!("v1.{group}");
        tc.track_cluster_object(&resource, &name);
        let mut spec = json!({"group": group, "version": "v1", "groupPriorityMinimum": 1000, "versionPriority": 15});
        if let Some(svc) = service {
            spec["service"] = json!({"name": svc, "namespace": ns, "port": 443});
            spec["insecureSkipTLSVerify"] = json!(true);
        }
        api.create(
            &pp(),
            &serde_json::from_value(json!({"apiVersion": "apiregistration.k8s.io/v1",
                "kind": "APIService", "metadata": {"name": name}, "spec": spec}))
            .expect("apiservice"),
        )
        .await
        .expect("create apiservice");
        expected.push((name, reason, message));
    }
    for (name, reason, message) in expected {
        let available = |s: &Value| {
            s["conditions"]
                .as_array()
                .and_then(|cs| cs.iter().find(|c| c["type"] == "Available"))
                .cloned()
        };
        // A real server may first say EndpointsNotFound, until the EndpointSlice exists.
        let obj = wait_status(&tc, &api, &name, &format!("{name}: Available"), |s| {
            available(s).is_some_and(|c| c["reason"] == reason)
        })
        .await;
        let available = available(&obj.data["status"]).expect("Available");
        let status = if reason == "Local" { "True" } else { "False" };
        assert_eq!(available["status"], status, "{name}: {available}");
        assert_eq!(available["reason"], reason, "{name}: {available}");
        assert_eq!(
            available["message"],
            message.as_str(),
            "{name}: {available}"
        );
    }
}
