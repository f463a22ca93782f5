//! `--timings`: the page and `-o json`'s `timings` of `apply` and `plan`, and the page read
//! back from a real browser (headless Chromium, network off).

use std::path::Path;

use serde_json::Value;

use super::common;

/// Every task of every pass in `timings`, as JSON.
fn tasks(timings: &Value) -> Vec<&Value> {
    timings["passes"]
        .as_array()
        .expect("passes")
        .iter()
        .flat_map(|p| p["tasks"].as_array().expect("tasks"))
        .collect()
}

/// `apply --in-memory --timings=FILE -o json` of `release` in `dir`: the JSON report and the page.
fn apply_in_memory(release: &Path, dir: &Path, extra: &[&str]) -> (Value, String) {
    let page = dir.join("t.html");
    let out = common::cli::cvo()
        .args(["apply", "--in-memory", "-o", "json", "--release"])
        .arg(release)
        .arg(format!("--timings={}", page.display()))
        .args(extra)
        .timeout(std::time::Duration::from_secs(120))
        .output()
        .expect("run cvo");
    let stderr = String::from_utf8_lossy(&out.stderr);
    // 3: a deletion the embedded server holds (manifests-example's) is in progress.
    assert!(matches!(out.status.code(), Some(0 | 3)), "{stderr}");
    assert!(stderr.contains("timings written to"), "{stderr}");
    let report: Value = serde_json::from_slice(&out.stdout).expect("json");
    (report, std::fs::read_to_string(&page).expect("the page"))
}

#[test]
fn apply_draws_each_task_once_with_the_critical_path_and_says_the_same_in_json() {
    let dir = tempfile::tempdir().unwrap();
    let (report, page) = apply_in_memory(&common::example::dir(), dir.path(), &[]);
    let timings = &report["timings"];
    let all = tasks(timings);
    assert_eq!(
        all.len(),
        report["results"].as_array().unwrap().len(),
        "one task per manifest: {timings}"
    );
    assert_eq!(page.matches("<rect class=\"task ").count(), all.len());
    let critical: Vec<&Value> = all
        .iter()
        .copied()
        .filter(|t| t["critical"] == true)
        .collect();
    assert!(!critical.is_empty(), "{timings}");
    assert_eq!(
        page.matches(" critical\" data-manifest=").count(),
        critical.len()
    );
    let pass = &timings["passes"][0];
    let (wall, limit, path) = (
        pass["seconds"].as_f64().unwrap(),
        pass["orderedLimitSeconds"].as_f64().unwrap(),
        pass["criticalPath"]["seconds"].as_f64().unwrap(),
    );
    assert!(limit > 0.0 && limit <= wall, "limit {limit}, wall {wall}");
    // With the pass's slots, the limit is no lower than without a bound (any schedule takes
    // at least the longest path).
    let in_slots = pass["orderedLimitInSlotsSeconds"].as_f64().unwrap();
    assert!(
        in_slots >= limit - 1e-9,
        "limit in slots {in_slots}, unbounded {limit}"
    );
    assert!(page.contains("data-key=\"limit-in-slots\""));
    assert!(path > 0.0 && path <= wall, "path {path}, wall {wall}");
    assert!(timings["seconds"].as_f64().unwrap() >= wall);
    assert_eq!(pass["slowest"].as_array().unwrap().len(), 10);
    // Each task's parts add up to no more than the task.
    for t in &all {
        let parts = ["serverSeconds", "healthSeconds", "deletionSeconds"]
            .iter()
            .map(|k| t[k].as_f64().unwrap())
            .sum::<f64>();
        assert!(parts <= t["seconds"].as_f64().unwrap() + 1e-6, "{t}");
    }
    assert!(
        page.contains("default-src 'none'"),
        "the page loads nothing"
    );
    assert!(!page.contains("<script"), "the page runs no script");
}

#[test]
fn plan_writes_the_page_to_cvo_timings_html_by_default() {
    let dir = tempfile::tempdir().unwrap();
    let out = common::cli::cvo()
        .current_dir(dir.path())
        .args(["plan", "--in-memory", "--timings", "--release"])
        .arg(common::example::dir())
        .timeout(std::time::Duration::from_secs(120))
        .output()
        .expect("run cvo");
    assert!(
        matches!(out.status.code(), Some(0 | 3)),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let page = std::fs::read_to_string(dir.path().join("cvo-timings.html")).expect("page");
    assert!(page.contains("<svg class=\"timeline\""), "{page}");
    // A flag value must be given with `=`: a path after a space is not taken for it.
    let out = common::cli::cvo()
        .current_dir(dir.path())
        .args([
            "plan",
            "--in-memory",
            "--timings",
            "elsewhere.html",
            "--release",
        ])
        .arg(common::example::dir())
        .output()
        .expect("run cvo");
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn names_from_the_release_are_escaped_on_the_page() {
    let release = tempfile::tempdir().unwrap();
    std::fs::write(
        release.path().join("0000_10_a_<b>&x'.yaml"),
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: timings-escaped\n",
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (_, page) = apply_in_memory(release.path(), dir.path(), &[]);
    assert!(
        page.contains("0000_10_a_&lt;b&gt;&amp;x&#39;.yaml"),
        "{page}"
    );
    assert!(!page.contains("<b>"), "{page}");
}

#[test]
fn a_page_that_cannot_be_written_is_a_failure_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let out = common::cli::cvo()
        .args(["plan", "--in-memory", "--release"])
        .arg(common::example::dir())
        .arg(format!(
            "--timings={}",
            dir.path().join("no-such-dir/t.html").display()
        ))
        .output()
        .expect("run cvo");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("--timings: cannot write") && stderr.contains("no-such-dir/t.html"),
        "{stderr}"
    );
}

/// The Chromium binary (Debian's `chromium`).
const CHROMIUM: &str = "/usr/bin/chromium";

/// Runs headless Chromium on `page` with the network off and a profile of its own, with
/// `args` (`--dump-dom`, `--screenshot=…`); its standard output.
fn chromium(page: &Path, profile: &Path, args: &[String]) -> String {
    let out = std::process::Command::new(CHROMIUM)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-quic",
            // The network off: no name resolves, no proxy is used.
            "--host-resolver-rules=MAP * ~NOTFOUND",
            "--no-proxy-server",
            "--window-size=1400,1000",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("run chromium");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 DOM")
}

/// Attribute `name` of every element `<tag …>` in `dom` whose class list has `class`.
fn attributes<'d>(dom: &'d str, tag: &str, class: &str, name: &str) -> Vec<&'d str> {
    let element = regex::Regex::new(&format!("<{tag} ([^>]*)>")).unwrap();
    let attr = |attrs: &'d str, n: &str| {
        let at = attrs.find(&format!("{n}=\""))? + n.len() + 2;
        Some(&attrs[at..at + attrs[at..].find('"')?])
    };
    element
        .captures_iter(dom)
        .filter_map(|c| {
            let attrs = c.get(1)?.as_str();
            attr(attrs, "class")?
                .split(' ')
                .any(|c| c == class)
                .then(|| attr(attrs, name))?
        })
        .collect()
}

/// manifests-example applied on the test cluster with `--timings`: the page Chromium loads
/// (from a file, the network off) has one bar per task, the critical path's tasks outlined
/// and the summary table, as `-o json` says; its screenshot is drawn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Chromium (apt-get install chromium): run with --include-ignored (.ci/run does)"]
async fn chromium_reads_the_bars_the_critical_path_and_the_table_of_an_apply() {
    let tc = common::cluster().await;
    let (_cv_turn, cv_resource) = common::cluster_version(&tc).await;
    common::example::prepare(&tc).await;
    let work = tempfile::tempdir().unwrap();
    let kubeconfig = tc.kubeconfig_file(work.path()).await;
    let page = work.path().join("timings.html");
    let (code, stdout, stderr) = common::run_cvo(
        &kubeconfig,
        &[
            "apply",
            "--release",
            &common::example::dir().display().to_string(),
            "-o",
            "json",
            "--install-timeout",
            "120s",
            "--health-timeout",
            "60s",
            &format!("--timings={}", page.display()),
        ],
    )
    .await;
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let report: Value = serde_json::from_str(&stdout).expect("json");
    let timings = &report["timings"];
    let size = std::fs::metadata(&page).expect("page").len();
    assert!(size < 2 << 20, "the page is {size} bytes");

    let (page_in, profile) = (page.clone(), work.path().join("profile"));
    let shot = work.path().join("timings.png");
    let shot_arg = format!("--screenshot={}", shot.display());
    let dom = tokio::task::spawn_blocking(move || {
        let dom = chromium(&page_in, &profile, &["--dump-dom".to_owned()]);
        chromium(&page_in, &profile, &[shot_arg]);
        dom
    })
    .await
    .expect("join");

    let all = tasks(timings);
    let bars = attributes(&dom, "rect", "task", "data-manifest");
    assert_eq!(bars.len(), all.len(), "one bar per task: {dom}");
    let mut outlined: Vec<String> = attributes(&dom, "rect", "critical", "data-manifest")
        .into_iter()
        .map(|m| m.replace("&amp;", "&"))
        .collect();
    let mut critical: Vec<String> = all
        .iter()
        .filter(|t| t["critical"] == true)
        .map(|t| t["manifest"].as_str().unwrap().to_owned())
        .collect();
    outlined.sort();
    critical.sort();
    assert!(!critical.is_empty());
    assert_eq!(outlined, critical, "the critical path's tasks are outlined");
    let pass = &timings["passes"][0];
    let cell = |key: &str| {
        let re = regex::Regex::new(&format!(r#"data-key="{key}">([^<]*)<"#)).unwrap();
        re.captures(&dom)
            .unwrap_or_else(|| panic!("no cell {key}: {dom}"))[1]
            .to_owned()
    };
    // The first pass's table (an install may take more rounds, each a section of its own).
    let first = pass["tasks"].as_array().unwrap().len();
    assert_eq!(cell("tasks"), first.to_string());
    assert_eq!(
        cell("critical-tasks"),
        pass["criticalPath"]["tasks"].to_string()
    );
    let seconds = |text: String| text.trim_end_matches(" s").parse::<f64>().expect("seconds");
    let wall = pass["seconds"].as_f64().unwrap();
    assert!((seconds(cell("wall")) - wall).abs() < 0.01 * wall.max(1.0));
    assert!(seconds(cell("limit")) <= seconds(cell("wall")));
    let path_nodes: usize = timings["passes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["criticalPath"]["nodes"].as_array().unwrap().len())
        .sum();
    assert_eq!(dom.matches("<li>").count(), path_nodes);
    let png = std::fs::read(&shot).expect("screenshot");
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 10_000,
        "{} bytes",
        png.len()
    );

    let cvs = tc.dynamic(&cv_resource, None);
    common::example::clean_up(&tc, &cvs).await;
}
