//! The architecture's import rules, checked (docs/architecture.md, "Who may import whom").
//!
//! The data flows one way: release → graph → apply/health → status, with `sync` orchestrating
//! and `operator`, `olm`, `lifecycle` beside it, and the CLI on top. This test reads every
//! `crate::<module>` path in the product's code (comments and `#[cfg(test)]` modules left out)
//! and fails when a module reaches a module it may not. A new top-level module must be added to
//! [`RULES`]: an unlisted one fails the test too, so the rules never silently fall behind the tree.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Each top-level module and the top-level modules its code may name. `cli` is the shell over
/// everything; nothing below it names `cli`.
const RULES: &[(&str, &[&str])] = &[
    // Leaves: know nothing of the product.
    ("exit", &[]),
    // Semantic versions read from input, with errors in plain words.
    ("version", &[]),
    ("graph", &[]),
    // How long every retry loop waits (the one backoff): API requests, registry requests,
    // watches, rounds and restarts alike, so it knows nothing of either side.
    ("retry", &[]),
    // Every request to an API server, retried under the one backoff.
    ("cluster", &["retry"]),
    // The one finding type names the object it is about.
    ("diagnostic", &["release"]),
    // The loader is pure: files in, manifests and diagnostics out. It may read an OCI source
    // through `oci`.
    ("release", &["diagnostic", "oci", "version"]),
    // Releases as OCI artifacts: verified bytes from registries and layouts, under the one
    // request backoff (`retry`); never the Kubernetes side (no cluster) nor the engine (no
    // apply, sync, operator).
    ("oci", &["retry"]),
    ("validate", &["diagnostic", "release"]),
    ("health", &["cluster", "release"]),
    (
        "apply",
        &["cluster", "diagnostic", "graph", "health", "release"],
    ),
    // Status judges results (it reads apply's and health's result types) and never runs the
    // engine: no sync, no operator.
    (
        "status",
        &["apply", "cluster", "diagnostic", "health", "release"],
    ),
    // The risks of an update, judged from what a sync read and its dry run: it reads
    // results and the cluster, never runs the engine itself.
    ("preflight", &["apply", "cluster", "release", "status"]),
    // One run; it never knows the operator or the managed components.
    (
        "sync",
        &[
            "apply",
            "cluster",
            "exit",
            "graph",
            "health",
            "preflight",
            "release",
            "retry",
            "status",
        ],
    ),
    ("olm", &["cluster", "retry"]),
    // Where a sync's time went: read from the passes' timelines after the sync, never from
    // the cluster.
    ("timings", &["apply", "graph", "release"]),
    // The update-graph client: it speaks HTTP to an update service, never to the cluster;
    // it names status's condition type only.
    ("updates", &["status", "version"]),
    (
        "lifecycle",
        &["cluster", "exit", "olm", "release", "status"],
    ),
    (
        "rbac",
        &["apply", "cluster", "diagnostic", "olm", "release", "status"],
    ),
    // The operator pulls the releases spec.desiredUpdate.image names through `oci`.
    (
        "operator",
        &[
            "apply",
            "cluster",
            "exit",
            "health",
            "oci",
            "olm",
            "preflight",
            "release",
            "retry",
            "status",
            "sync",
            "timings",
            "updates",
        ],
    ),
    // Fleets on OCM: the hub's objects (through `cluster`'s requests), the update rules of
    // `status`, the operator's objects (`release`, `rbac`); never the engine (no apply, sync,
    // operator): each cluster's own operator updates it.
    (
        "fleet",
        &[
            "cluster",
            "exit",
            "preflight",
            "rbac",
            "release",
            "status",
            "version",
        ],
    ),
    // What an empty embedded server lacks that a real cluster has (the `in-memory` feature).
    ("dev", &["cluster", "olm", "release", "retry"]),
    (
        "cli",
        &[
            "apply",
            "cluster",
            "dev",
            "diagnostic",
            "exit",
            "fleet",
            "graph",
            "health",
            "lifecycle",
            "oci",
            "olm",
            "operator",
            "preflight",
            "rbac",
            "release",
            "retry",
            "status",
            "sync",
            "timings",
            "updates",
            "validate",
            "version",
        ],
    ),
];

/// Modules that must not name the Kubernetes client or API types at all.
const NO_KUBERNETES: &[&str] = &["graph", "retry"];
/// Modules that may use API types as data but must not name the client (`kube::`).
const NO_CLIENT: &[&str] = &[
    "graph",
    "release",
    "validate",
    "diagnostic",
    "exit",
    "oci",
    "retry",
];

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src/") {
        let path = entry.expect("read src/").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level module a file under `src/` belongs to (`src/sync/mod.rs` → `sync`).
fn module_of(path: &Path) -> String {
    let rel = path.strip_prefix(src_dir()).expect("under src/");
    let first = rel.components().next().expect("non-empty path");
    let name = first.as_os_str().to_string_lossy();
    name.trim_end_matches(".rs").to_string()
}

/// The product's code lines of a file: comments dropped, and everything from the first
/// `#[cfg(test)]` module on (tests may reach further, e.g. fixtures from another module).
fn code_lines(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut lines = text.lines().enumerate().peekable();
    while let Some((i, line)) = lines.next() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("#[cfg(test)]")
            && lines
                .peek()
                .is_some_and(|(_, next)| next.trim_start().contains("mod "))
        {
            break;
        }
        let code = match trimmed.find("//") {
            Some(at) => &trimmed[..at],
            None => trimmed,
        };
        if !code.is_empty() {
            out.push((i + 1, code.to_string()));
        }
    }
    out
}

/// The top-level modules a code line names through `crate::` (also `crate::{a, b::c}`).
fn named_modules(line: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = line;
    while let Some(at) = rest.find("crate::") {
        rest = &rest[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            for item in group[..end].split(',') {
                let name: String = item
                    .trim()
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() && name != "self" {
                    out.insert(name);
                }
            }
        } else {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                out.insert(name);
            }
        }
    }
    out
}

fn allowed(module: &str) -> Option<&'static [&'static str]> {
    RULES.iter().find(|(m, _)| *m == module).map(|(_, a)| *a)
}

#[test]
fn every_module_imports_only_what_the_architecture_allows() {
    let mut files = Vec::new();
    rust_files(&src_dir(), &mut files);
    files.sort();
    let mut broken = Vec::new();
    for path in &files {
        let module = module_of(path);
        // The crate root and the binary name every module; this file names them in its tests.
        if ["lib", "main", "import_rules", "function_length"].contains(&module.as_str()) {
            continue;
        }
        let Some(allowed) = allowed(&module) else {
            broken.push(format!(
                "{}: module `{module}` has no import rule; add it to RULES in src/import_rules.rs \
                 and to docs/architecture.md",
                path.display()
            ));
            continue;
        };
        let text = std::fs::read_to_string(path).expect("read source file");
        for (line_no, line) in code_lines(&text) {
            for named in named_modules(&line) {
                if named != module && !allowed.contains(&named.as_str()) {
                    broken.push(format!(
                        "{}:{line_no}: `{module}` may not import `{named}` (docs/architecture.md)",
                        path.display()
                    ));
                }
            }
            let kube = line.contains("kube::") || line.contains("kube_runtime::");
            if kube && NO_CLIENT.contains(&module.as_str()) {
                broken.push(format!(
                    "{}:{line_no}: `{module}` may not use the Kubernetes client",
                    path.display()
                ));
            }
            if line.contains("k8s_openapi") && NO_KUBERNETES.contains(&module.as_str()) {
                broken.push(format!(
                    "{}:{line_no}: `{module}` knows nothing of Kubernetes",
                    path.display()
                ));
            }
        }
    }
    assert!(
        broken.is_empty(),
        "import rules broken:\n{}",
        broken.join("\n")
    );
}

#[test]
fn the_scanner_reads_paths_groups_and_skips_comments_and_tests() {
    let named = named_modules("use crate::{apply::Task, cluster, self};");
    assert_eq!(named, ["apply", "cluster"].map(String::from).into());
    assert_eq!(
        named_modules("let x = crate::sync::sync(a, crate::status::X);"),
        ["status", "sync"].map(String::from).into()
    );
    let lines = code_lines(
        "use crate::graph;\n/// see [`crate::cli`]\nfn f() {} // crate::operator\n#[cfg(test)]\nmod tests {\n    use crate::cli;\n}\n",
    );
    let all: BTreeSet<String> = lines.iter().flat_map(|(_, l)| named_modules(l)).collect();
    assert_eq!(all, ["graph"].map(String::from).into());
}

#[test]
fn a_rule_names_only_modules_that_have_rules() {
    for (module, may_import) in RULES {
        for a in *may_import {
            assert!(
                allowed(a).is_some(),
                "`{module}` allows unknown module `{a}`"
            );
        }
    }
}
