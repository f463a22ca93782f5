//! Watch: replay, bookmarks, finalized deletes, selectors, 410 Gone.

use crate::helpers::*;

// ---------------------------------------------------------------------------------------------
// 11. watch

#[tokio::test]
async fn watch_replays_and_streams_added_modified_deleted() {
    let tc = cluster().await;
    let ns = tc.namespace("watch").await;
    let api = cms(&tc, &ns);
    let selector = "cvo-watch=yes";
    let start = api
        .list(&ListParams::default().labels(selector))
        .await
        .expect("list")
        .metadata
        .resource_version
        .expect("list resourceVersion");

    // Changes made before the watch opens are replayed from the resourceVersion.
    let labels = json!({"metadata": {"labels": {"cvo-watch": "yes"}}});
    create_cm(&tc, &ns, "a", &[], labels.clone()).await;
    create_cm(&tc, &ns, "unwatched", &[], json!({})).await;
    api.patch(
        "a",
        &PatchParams::default(),
        &merge(json!({"data": {"v": "2"}})),
    )
    .await
    .expect("modify");
    api.delete("a", &DeleteParams::default())
        .await
        .expect("delete");

    let wp = WatchParams::default().labels(selector).timeout(60);
    let mut stream = api.watch(&wp, &start).await.expect("watch").boxed();
    let mut seen = Vec::new();
    let mut versions = Vec::new();
    let deadline = tokio::time::Instant::now() + tc.deadline();
    while seen.len() < 3 && tokio::time::Instant::now() < deadline {
        match next_event(&mut stream, Duration::from_secs(1)).await {
            Some(Ok(WatchEvent::Bookmark(_))) | None => continue,
            Some(Ok(event)) => {
                if let WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o) =
                    &event
                {
                    versions.push(rv(o));
                }
                seen.push(describe(&event));
            }
            Some(Err(e)) => panic!("watch error: {e}"),
        }
    }
    assert_eq!(
        seen,
        vec!["ADDED a", "MODIFIED a", "DELETED a"],
        "replayed events"
    );
    assert_eq!(
        versions.iter().collect::<BTreeSet<_>>().len(),
        3,
        "each event has its own resourceVersion"
    );

    // Live events on the same stream.
    create_cm(&tc, &ns, "b", &[], labels).await;
    let live = loop {
        match next_event(&mut stream, tc.deadline()).await {
            Some(Ok(WatchEvent::Bookmark(_))) => continue,
            Some(Ok(event)) => break describe(&event),
            other => panic!("no live event: {other:?}"),
        }
    };
    assert_eq!(live, "ADDED b");
}

#[tokio::test]
async fn watch_sends_bookmarks_when_allowed_and_ends_at_its_timeout() {
    let tc = cluster().await;
    let ns = tc.namespace("bookmark").await;
    let api = cms(&tc, &ns);
    create_cm(
        &tc,
        &ns,
        "x",
        &[],
        json!({"metadata": {"labels": {"cvo-bm": "yes"}}}),
    )
    .await;
    let start = api
        .list(&ListParams::default().labels("cvo-bm=yes"))
        .await
        .expect("list")
        .metadata
        .resource_version
        .expect("rv");

    // kube-apiserver's watch cache sends a bookmark shortly (2 s) before a watch's
    // timeoutSeconds when the client allowed bookmarks and the cache has moved past the
    // watch's resourceVersion, then closes the stream at the timeout. A write outside the
    // selector moves it without sending the watcher an event.
    let wp = WatchParams::default().labels("cvo-bm=yes").timeout(5);
    assert!(
        wp.bookmarks,
        "kube's WatchParams allow bookmarks by default"
    );
    let mut stream = api.watch(&wp, &start).await.expect("watch").boxed();
    create_cm(&tc, &ns, "outside-1", &[], json!({})).await;
    let mut bookmarks = Vec::new();
    let ended = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(event) = stream.next().await {
            match event.expect("watch event") {
                WatchEvent::Bookmark(b) => bookmarks.push(b.metadata.resource_version),
                other => panic!(
                    "unexpected event on an idle namespace: {}",
                    describe(&other)
                ),
            }
        }
    })
    .await;
    assert!(ended.is_ok(), "the watch must end at timeoutSeconds=5");
    assert!(
        !bookmarks.is_empty(),
        "no BOOKMARK within a 5 s watch that allowed them"
    );
    assert!(
        bookmarks.iter().all(|v| !v.is_empty()),
        "bookmarks carry a resourceVersion"
    );

    // Without allowWatchBookmarks there are none.
    let quiet = WatchParams::default()
        .labels("cvo-bm=yes")
        .timeout(3)
        .disable_bookmarks();
    let mut stream = api.watch(&quiet, &start).await.expect("watch").boxed();
    create_cm(&tc, &ns, "outside-2", &[], json!({})).await;
    let ended = tokio::time::timeout(Duration::from_secs(30), async {
        if let Some(event) = stream.next().await {
            let event = event.expect("watch event");
            panic!("unexpected event without bookmarks: {}", describe(&event));
        }
    })
    .await;
    assert!(ended.is_ok(), "the watch must end at timeoutSeconds=3");
}

#[tokio::test]
async fn watch_shows_a_finalized_delete_as_modified_then_deleted() {
    let tc = cluster().await;
    let ns = tc.namespace("watch-fin").await;
    let api = cms(&tc, &ns);
    let selector = "cvo-watch=fin";
    create_cm(
        &tc,
        &ns,
        "held",
        &[TEST_FINALIZER],
        json!({"metadata": {"labels": {"cvo-watch": "fin"}}}),
    )
    .await;
    let start = api
        .list(&ListParams::default().labels(selector))
        .await
        .expect("list")
        .metadata
        .resource_version
        .expect("rv");
    let mut stream = api
        .watch(&WatchParams::default().labels(selector).timeout(60), &start)
        .await
        .expect("watch")
        .boxed();
    let mut next = async || loop {
        match next_event(&mut stream, tc.deadline()).await {
            Some(Ok(WatchEvent::Bookmark(_))) => continue,
            Some(Ok(event)) => break event,
            other => panic!("no watch event: {other:?}"),
        }
    };

    api.delete("held", &DeleteParams::default())
        .await
        .expect("delete");
    match next().await {
        WatchEvent::Modified(o) => {
            assert!(
                o.metadata.deletion_timestamp.is_some(),
                "MODIFIED carries deletionTimestamp"
            )
        }
        other => panic!(
            "DELETE of a finalized object must be MODIFIED, got {}",
            describe(&other)
        ),
    }
    api.patch(
        "held",
        &PatchParams::default(),
        &merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .expect("release");
    match next().await {
        WatchEvent::Deleted(o) => assert_eq!(o.metadata.name.as_deref(), Some("held")),
        other => panic!("removal must be DELETED, got {}", describe(&other)),
    }
}

#[tokio::test]
async fn watch_with_a_label_selector_reports_objects_entering_and_leaving_it() {
    // kube-apiserver's watch cache compares old and new objects against the selector: an
    // object that stops matching is DELETED for that watcher, one that starts matching ADDED.
    let tc = cluster().await;
    let ns = tc.namespace("watch-sel").await;
    let api = cms(&tc, &ns);
    let start = api
        .list(&ListParams::default())
        .await
        .expect("list")
        .metadata
        .resource_version
        .expect("rv");
    let mut stream = api
        .watch(
            &WatchParams::default().labels("tier=web").timeout(60),
            &start,
        )
        .await
        .expect("watch")
        .boxed();
    let mut next = async || loop {
        match next_event(&mut stream, tc.deadline()).await {
            Some(Ok(WatchEvent::Bookmark(_))) => continue,
            Some(Ok(event)) => break describe(&event),
            other => panic!("no watch event: {other:?}"),
        }
    };
    let relabel = |tier: &str| merge(json!({"metadata": {"labels": {"tier": tier}}}));

    create_cm(
        &tc,
        &ns,
        "x",
        &[],
        json!({"metadata": {"labels": {"tier": "web"}}}),
    )
    .await;
    assert_eq!(next().await, "ADDED x");
    api.patch("x", &PatchParams::default(), &relabel("db"))
        .await
        .expect("relabel");
    assert_eq!(next().await, "DELETED x", "leaving the selector");
    api.patch("x", &PatchParams::default(), &relabel("web"))
        .await
        .expect("relabel back");
    assert_eq!(next().await, "ADDED x", "entering the selector");
}

/// Watch from `version`: Ok(status) when the server says 410 (as an HTTP error, or, like
/// kube-apiserver, as an ERROR event with code 410), Err(what happened) otherwise.
async fn watch_gone(api: &Api<DynamicObject>, version: &str) -> Result<Status, String> {
    match api
        .watch(&WatchParams::default().timeout(10), version)
        .await
    {
        Err(kube::Error::Api(s)) if s.code == 410 => Ok(*s),
        Err(e) => Err(format!("watch failed otherwise: {e}")),
        Ok(stream) => {
            let mut stream = stream.boxed();
            match next_event(&mut stream, Duration::from_millis(500)).await {
                Some(Ok(WatchEvent::Error(s))) if s.code == 410 => Ok(*s),
                Some(Ok(event)) => Err(format!("got {}", describe(&event))),
                Some(Err(e)) => Err(format!("stream error: {e}")),
                None => Err("watch accepted, no error".into()),
            }
        }
    }
}

/// Environment variable with the URL of etcd's JSON gateway (set by the realk8s scripts).
const ETCD_ENDPOINT_ENV: &str = "REALK8S_ETCD_ENDPOINT";

/// POST `body` to etcd's JSON gateway (`curl`, as the realk8s README does); the JSON answer.
async fn etcd_call(endpoint: &str, path: &str, body: Value) -> Value {
    let url = format!("{}{path}", endpoint.trim_end_matches('/'));
    let args = [
        "-sS",
        "--max-time",
        "10",
        "-X",
        "POST",
        &url,
        "-d",
        &body.to_string(),
    ]
    .map(str::to_string);
    let out =
        tokio::task::spawn_blocking(move || std::process::Command::new("curl").args(args).output())
            .await
            .expect("curl task")
            .unwrap_or_else(|e| panic!("run curl for {url}: {e}"));
    assert!(
        out.status.success(),
        "curl {url}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let answer: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "etcd answered {url} with something other than JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    });
    assert!(answer.get("error").is_none(), "etcd {url}: {answer}");
    answer
}

/// Compact etcd's history up to `revision`: older resourceVersions expire.
async fn etcd_compact(endpoint: &str, revision: u64) {
    let answer = etcd_call(endpoint, "/v3/kv/range", json!({"key": "AA==", "limit": 1})).await;
    let current = answer["header"]["revision"]
        .as_str()
        .and_then(|r| r.parse::<u64>().ok())
        .unwrap_or_else(|| panic!("etcd range answer without header.revision: {answer}"));
    assert!(
        current >= revision,
        "etcd is at revision {current}, cannot compact to {revision}"
    );
    etcd_call(
        endpoint,
        "/v3/kv/compaction",
        json!({"revision": revision.to_string()}),
    )
    .await;
}

#[tokio::test]
async fn watch_from_a_too_old_resource_version_is_gone() {
    // A resourceVersion expires once the server's history no longer reaches back to it: in
    // memory after `watch_history` newer writes (a short history here); on a real cluster once
    // etcd is compacted past it. kube-apiserver compacts every 5 minutes; this test compacts
    // etcd itself, just past its own first write. It watches Events, which kube-apiserver keeps
    // no watch cache for: their watches go to etcd and see the compaction at once (a cached
    // kind would still be served from the cache's own window).
    #[allow(clippy::field_reassign_with_default)]
    let config = {
        let mut config = memory_apiserver::Config::default();
        config.watch_history = 300;
        config
    };
    let tc = cluster_with(config).await;
    let etcd = match std::env::var(ETCD_ENDPOINT_ENV) {
        _ if tc.is_memory() => None,
        Ok(endpoint) if !endpoint.is_empty() => Some(endpoint),
        _ => panic!(
            "on a real cluster this test compacts etcd to expire a resourceVersion: set \
             {ETCD_ENDPOINT_ENV} to etcd's JSON gateway (../shared/realk8s/start.sh exports it)"
        ),
    };
    let ns = tc.namespace("gone").await;
    let api = cms(&tc, &ns);
    let events = tc.dynamic(&builtin("", "v1", "Event", "events"), Some(&ns));
    let old = rv(&create_cm(&tc, &ns, "churn", &[], json!({"data": {"n": "0"}})).await);
    if let Ok(status) = watch_gone(&events, &old).await {
        panic!("watch from a fresh resourceVersion must work: {status:?}");
    }
    let writes = if tc.is_memory() { 350 } else { 2 };
    for i in 0..writes {
        api.patch(
            "churn",
            &PatchParams::default(),
            &merge(json!({"data": {"n": format!("write-{i}")}})),
        )
        .await
        .expect("churn write");
    }
    if let Some(endpoint) = &etcd {
        let old: u64 = old
            .parse()
            .expect("a real cluster's resourceVersion is an etcd revision");
        // The watch starts after `old`; compacting past that start expires it.
        etcd_compact(endpoint, old + 2).await;
    }

    let status = poll_until(
        "watch from an expired resourceVersion answers 410",
        tc.deadline(),
        || watch_gone(&events, &old),
    )
    .await;
    assert!(
        status.reason == "Expired" || status.reason == "Gone",
        "410 reason should be Expired or Gone: {status:?}"
    );

    // A recent resourceVersion is still fine.
    let current = events
        .list(&ListParams::default())
        .await
        .expect("list")
        .metadata
        .resource_version
        .expect("rv");
    if let Ok(status) = watch_gone(&events, &current).await {
        panic!("watch from the current resourceVersion must work: {status:?}");
    }
}
