//! Error responses are `Status` objects shaped like kube-apiserver's; overload and transient errors; invalid built-in objects.

use crate::helpers::*;

// ---------------------------------------------------------------------------------------------
// 12. errors are Status objects

async fn raw(tc: &TestCluster, request: http::Request<Vec<u8>>) -> (u16, String, Value) {
    let response = tc
        .client
        .send(request.map(kube::client::Body::from))
        .await
        .expect("send");
    let code = response.status().as_u16();
    let content_type = response
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let bytes = response.into_body().collect_bytes().await.expect("body");
    let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    (code, content_type, body)
}

fn assert_status_body(code: u16, content_type: &str, body: &Value, want_code: u16, reason: &str) {
    assert_eq!(code, want_code, "HTTP status; body {body}");
    assert!(
        content_type.starts_with("application/json"),
        "content-type {content_type:?}"
    );
    assert_eq!(body["kind"], "Status", "body {body}");
    assert_eq!(body["apiVersion"], "v1", "body {body}");
    assert_eq!(body["status"], "Failure", "body {body}");
    assert_eq!(body["code"], want_code, "body {body}");
    assert_eq!(body["reason"], reason, "body {body}");
    assert!(
        body["message"].as_str().is_some_and(|m| !m.is_empty()),
        "message in {body}"
    );
}

#[tokio::test]
async fn errors_are_status_objects_with_code_reason_and_details() {
    let tc = cluster().await;
    let ns = tc.namespace("status").await;
    let base = format!("/api/v1/namespaces/{ns}/configmaps");

    let (code, ct, body) = raw(
        &tc,
        http::Request::get(format!("{base}/missing"))
            .body(vec![])
            .unwrap(),
    )
    .await;
    assert_status_body(code, &ct, &body, 404, "NotFound");
    assert_eq!(body["details"]["name"], "missing");
    assert_eq!(body["details"]["kind"], "configmaps");

    let invalid = serde_json::to_vec(&json!({
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "Not_A_Valid_Name"}
    }))
    .unwrap();
    let (code, ct, body) = raw(
        &tc,
        http::Request::post(&base)
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(invalid)
            .unwrap(),
    )
    .await;
    assert_status_body(code, &ct, &body, 422, "Invalid");
    assert_eq!(
        body["details"]["kind"], "ConfigMap",
        "Invalid names the kind"
    );
    assert_eq!(body["details"]["name"], "Not_A_Valid_Name");
    let causes = body["details"]["causes"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        causes.iter().any(|c| c["field"] == "metadata.name"),
        "causes {causes:?}"
    );

    let (code, ct, body) = raw(
        &tc,
        http::Request::post(&base)
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(b"{not json".to_vec())
            .unwrap(),
    )
    .await;
    assert_status_body(code, &ct, &body, 400, "BadRequest");

    // PUT: the body's name must match the URL's.
    let created = cms(&tc, &ns)
        .create(&pp(), &configmap("named", json!({})))
        .await
        .expect("create");
    let mut renamed = serde_json::to_value(&created).unwrap();
    renamed["metadata"]["name"] = json!("other-name");
    let (code, ct, body) = raw(
        &tc,
        http::Request::put(format!("{base}/named"))
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(serde_json::to_vec(&renamed).unwrap())
            .unwrap(),
    )
    .await;
    assert_status_body(code, &ct, &body, 400, "BadRequest");

    // The object's namespace must match the request's.
    let elsewhere = serde_json::to_vec(&json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "elsewhere", "namespace": unique("other")},
    }))
    .unwrap();
    let (code, ct, body) = raw(
        &tc,
        http::Request::post(&base)
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(elsewhere)
            .unwrap(),
    )
    .await;
    assert_status_body(code, &ct, &body, 400, "BadRequest");

    // An unknown resource type is a 404 (body shape varies on real servers: only the code).
    let (code, _, _) = raw(
        &tc,
        http::Request::get(format!("/api/v1/namespaces/{ns}/nosuchthings/x"))
            .body(vec![])
            .unwrap(),
    )
    .await;
    assert_eq!(code, 404);
    let (code, _, _) = raw(
        &tc,
        http::Request::get(format!(
            "/apis/{}/v1/things",
            unique("nogroup") + "." + TEST_GROUP_SUFFIX
        ))
        .body(vec![])
        .unwrap(),
    )
    .await;
    assert_eq!(code, 404);

    // kube-rs turns them into Error::Api with the same code and reason.
    let status = expect_status(
        cms(&tc, &ns).get("missing").await,
        404,
        "NotFound",
        "typed GET",
    );
    assert_eq!(
        status.status,
        Some(kube::core::response::StatusSummary::Failure)
    );
}

/// Item 12: a body the server cannot decode is a 415 `UnsupportedMediaType` Status (not a 400):
/// a create or update in an unknown media type, a PATCH in an unknown patch type, and a strategic
/// merge patch of a custom resource (kube takes none; kubectl relies on this 415 to say so).
#[tokio::test]
async fn undecodable_bodies_are_unsupported_media_type() {
    let tc = cluster().await;
    let ns = tc.namespace("media").await;
    let base = format!("/api/v1/namespaces/{ns}/configmaps");
    let body = serde_json::to_vec(&json!({"metadata": {"name": "plain"}})).unwrap();
    let send = |method: http::Method, path: String, content_type: &str| {
        http::Request::builder()
            .method(method)
            .uri(path)
            .header(http::header::CONTENT_TYPE, content_type)
            .body(body.clone())
            .unwrap()
    };
    let unknown_format = "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml";

    let (code, ct, status) = raw(&tc, send(http::Method::POST, base.clone(), "text/plain")).await;
    assert_status_body(code, &ct, &status, 415, "UnsupportedMediaType");
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .starts_with(unknown_format),
        "{status}"
    );
    assert!(
        is_not_found(&cms(&tc, &ns).get("plain").await),
        "nothing is created"
    );

    cms(&tc, &ns)
        .create(&pp(), &configmap("plain", json!({"data": {"a": "b"}})))
        .await
        .expect("create");
    let item = format!("{base}/plain");
    let (code, ct, status) = raw(&tc, send(http::Method::PUT, item.clone(), "text/plain")).await;
    assert_status_body(code, &ct, &status, 415, "UnsupportedMediaType");
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .starts_with(unknown_format),
        "{status}"
    );
    let (code, ct, status) = raw(
        &tc,
        send(http::Method::PATCH, item, "application/x-unknown"),
    )
    .await;
    assert_status_body(code, &ct, &status, 415, "UnsupportedMediaType");

    let crd = TestCrd::new("Lever", true, false);
    let levers = tc.dynamic(&crd.install(&tc).await, Some(&ns));
    levers
        .create(
            &pp(),
            &crd.object("l", Some(&ns), json!({"spec": {"a": 1}})),
        )
        .await
        .expect("create custom resource");
    let smp = http::Request::patch(format!(
        "/apis/{}/v1/namespaces/{ns}/{}/l",
        crd.group, crd.plural
    ))
    .header(
        http::header::CONTENT_TYPE,
        "application/strategic-merge-patch+json",
    )
    .body(br#"{"spec":{"a":2}}"#.to_vec())
    .unwrap();
    let (code, ct, status) = raw(&tc, smp).await;
    assert_status_body(code, &ct, &status, 415, "UnsupportedMediaType");
    assert_eq!(
        status["message"],
        "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
    );
    let kept = levers.get("l").await.expect("get");
    assert_eq!(kept.data["spec"]["a"], 1, "the patch was not applied");
}

/// Item 12: what overload and transient failures look like on the wire. A real apiserver
/// cannot be made to throttle on demand, so this runs in memory whatever the environment,
/// where fault injection produces them; the expected shapes are kube-apiserver's
/// (`Retry-After` header and `details.retryAfterSeconds` on 429, reasons InternalError /
/// ServiceUnavailable / Timeout).
#[tokio::test]
async fn overload_and_transient_errors_look_like_kube_apiserver() {
    use memory_apiserver::{FaultAction, FaultRule};
    let tc = cluster_from_env(&[], memory_apiserver::Config::default()).await;
    let memory = tc.memory.as_ref().expect("the in-memory server");
    let ns = tc.namespace("faults").await;
    create_cm(&tc, &ns, "target", &[], json!({})).await;
    let url = format!("/api/v1/namespaces/{ns}/configmaps/target");
    let get = || http::Request::get(url.as_str()).body(vec![]).unwrap();

    memory.faults().add(
        FaultRule::new(FaultAction::TooManyRequests {
            retry_after_secs: 3,
        })
        .verb("get")
        .kind("ConfigMap")
        .name("target")
        .times(1),
    );
    let response = tc
        .client
        .send(get().map(kube::client::Body::from))
        .await
        .expect("send");
    assert_eq!(response.status().as_u16(), 429);
    assert_eq!(
        response
            .headers()
            .get(http::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok()),
        Some("3"),
        "429 carries Retry-After"
    );
    let body: Value =
        serde_json::from_slice(&response.into_body().collect_bytes().await.expect("body"))
            .expect("Status body");
    assert_eq!(body["kind"], "Status");
    assert_eq!(body["reason"], "TooManyRequests");
    assert_eq!(body["code"], 429);
    assert_eq!(body["details"]["retryAfterSeconds"], 3);
    // The rule fired once: the retry succeeds.
    let (code, _, _) = raw(&tc, get()).await;
    assert_eq!(code, 200, "retry after the throttled request");

    for (code, reason) in [
        (500, "InternalError"),
        (503, "ServiceUnavailable"),
        (504, "Timeout"),
    ] {
        memory.faults().add(
            FaultRule::new(FaultAction::Status(code))
                .verb("get")
                .name("target")
                .times(1),
        );
        let (got, ct, body) = raw(&tc, get()).await;
        assert_status_body(got, &ct, &body, code, reason);
        cms(&tc, &ns)
            .get("target")
            .await
            .expect("the rule is spent: GET works again");
    }
}

/// Beyond the semantics listed in the README, but the same principle: kube-apiserver validates built-in specs,
/// so a manifest it would reject must not be accepted here either.
#[tokio::test]
async fn invalid_builtin_objects_are_rejected() {
    let tc = cluster().await;
    let ns = tc.namespace("validate").await;
    expect_status(
        cms(&tc, &ns)
            .create(
                &pp(),
                &configmap("cm", json!({"data": {"not a valid key!": "x"}})),
            )
            .await,
        422,
        "Invalid",
        "ConfigMap data key outside [-._a-zA-Z0-9]",
    );
    let deploys = tc.dynamic(&deployments(), Some(&ns));
    let mut mismatched = deployment("mismatch");
    mismatched.data["spec"]["selector"] = json!({"matchLabels": {"app": "other"}});
    expect_status(
        deploys.create(&pp(), &mismatched).await,
        422,
        "Invalid",
        "Deployment whose selector does not match its template labels",
    );
    let mut no_containers = deployment("empty");
    no_containers.data["spec"]["template"]["spec"]["containers"] = json!([]);
    expect_status(
        deploys.create(&pp(), &no_containers).await,
        422,
        "Invalid",
        "Deployment without containers",
    );
}
