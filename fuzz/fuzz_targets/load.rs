//! Coverage-guided fuzzing of the release loader: any bytes, as one manifest file (YAML, or
//! JSON when the input starts with `{`), must load without a panic or a hang, and every
//! diagnostic must point into that file. Seed the corpus from ../shared/corpus (see the
//! README's developer section).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let dir = tempfile::tempdir().expect("tempdir");
    let ext = if data.first() == Some(&b'{') { "json" } else { "yaml" };
    let file = dir.path().join(format!("0000_10_fuzz_00_input.{ext}"));
    std::fs::write(&file, data).expect("write");
    let options = cvo::release::LoadOptions::default();
    if let Ok(release) = cvo::release::load(dir.path(), &options) {
        for d in &release.diagnostics {
            assert!(d.location.file.starts_with(dir.path()), "{d:?}");
        }
    }
});
