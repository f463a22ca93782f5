//! What the benchmarks share: a generated release.

/// A release of `n` ConfigMaps (40 components over 9 run levels, 10 documents per file) and
/// the 40 Namespaces they live in.
pub fn generated(n: usize) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut ns = String::new();
    for c in 0..40 {
        ns.push_str(&format!(
            "---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: ns-comp{c}\n"
        ));
    }
    std::fs::write(dir.path().join("0000_00_namespaces_00.yaml"), ns).expect("write");
    let per_file = 10;
    for file in 0..n.div_ceil(per_file) {
        let runlevel = 10 + (file % 9) * 10;
        let component = format!("comp{}", file % 40);
        let mut text = String::new();
        for doc in 0..per_file.min(n - file * per_file) {
            let i = file * per_file + doc;
            text.push_str(&format!(
                "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-{i}\n  namespace: ns-{component}\ndata:\n  key: value-{i}\n  config.yaml: |\n    replicas: 3\n    image: quay.io/example/app@sha256:{i:064}\n"
            ));
        }
        std::fs::write(
            dir.path()
                .join(format!("0000_{runlevel:02}_{component}_{file:05}.yaml")),
            text,
        )
        .expect("write");
    }
    dir
}
