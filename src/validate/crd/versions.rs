//! The version-level CRD rules: scope and immutable names, stored, served and storage
//! versions, exactly one storage version, and which schemas of two CRDs are compared (the same
//! version in both releases; a version the new release adds against the storage version,
//! unless a conversion webhook converts between them).

use serde_json::Value;

use super::schema_diff::{self, Change};
use super::{Crd, Version};
use crate::validate::rules::{
    CRD_CONVERSION_WEBHOOK, CRD_IMMUTABLE_FIELD_CHANGED, CRD_SCOPE, CRD_SERVED_VERSION_REMOVAL,
    CRD_STORAGE_VERSION_CHANGED, CRD_STORAGE_VERSION_COUNT, CRD_STORED_VERSION_REMOVAL,
};

/// Checks of one CRD on its own: exactly one version is the storage version.
pub fn single(crd: &Crd) -> Vec<Change> {
    if crd.versions.is_empty() {
        return Vec::new();
    }
    let storage: Vec<&str> = crd
        .versions
        .iter()
        .filter(|v| v.storage)
        .map(|v| v.name)
        .collect();
    if storage.len() == 1 {
        return Vec::new();
    }
    vec![Change {
        rule: CRD_STORAGE_VERSION_COUNT,
        path: ".spec.versions".into(),
        what: format!(
            "{} versions are marked storage: true ({}); exactly one must be",
            storage.len(),
            if storage.is_empty() {
                "none".to_owned()
            } else {
                storage.join(", ")
            }
        ),
        before: None,
        after: None,
    }]
}

/// Versions in `stored` (where objects may be stored; `source` says how that is known) that
/// `new` no longer has.
pub fn stored_removed(stored: &[String], source: &str, new: &Crd) -> Vec<Change> {
    stored
        .iter()
        .filter(|s| new.version(s).is_none())
        .map(|s| Change {
            rule: CRD_STORED_VERSION_REMOVAL,
            path: format!(".spec.versions[{s}]"),
            what: format!(
                "version {s} is gone from spec.versions, but objects may be stored in it ({source})"
            ),
            before: Some(s.clone()),
            after: None,
        })
        .collect()
}

/// The update from `old` to `new` (the same CRD in the previous and the new release); versions
/// in `stored` that are gone are reported by [`stored_removed`], not here.
pub fn compare(old: &Crd, new: &Crd, stored: &[String]) -> Vec<Change> {
    let mut out = identity_changed(old, new);
    out.extend(served_removed(old, new, stored));
    out.extend(storage_changed(old, new));
    for n in &new.versions {
        let schema_path = format!(".spec.versions[{}].schema.openAPIV3Schema", n.name);
        match old.version(n.name) {
            Some(o) => {
                if let (Some(a), Some(b)) = (o.schema, n.schema) {
                    out.extend(schema_diff::diff(a, b, &schema_path));
                }
            }
            None if n.served => out.extend(new_version(old, new, n, &schema_path)),
            None => {}
        }
    }
    out
}

/// The scope and the names the API server keeps immutable (group, plural, kind).
fn identity_changed(old: &Crd, new: &Crd) -> Vec<Change> {
    let mut out = Vec::new();
    let text = |crd: &Crd, p: &str| crd.text(p).map(str::to_owned);
    let scope = |crd: &Crd| text(crd, "/spec/scope").or(Some("Namespaced".into()));
    if scope(old) != scope(new) {
        out.push(field(
            CRD_SCOPE,
            ".spec.scope",
            "the scope changed: the API server refuses it, and every resource's address changes",
            scope(old),
            scope(new),
        ));
    }
    for (pointer, path) in [
        ("/spec/group", ".spec.group"),
        ("/spec/names/plural", ".spec.names.plural"),
        ("/spec/names/kind", ".spec.names.kind"),
    ] {
        let (before, after) = (text(old, pointer), text(new, pointer));
        if before.is_some() && after.is_some() && before != after {
            out.push(field(
                CRD_IMMUTABLE_FIELD_CHANGED,
                path,
                &format!("{} changed", &path[1..]),
                before,
                after,
            ));
        }
    }
    out
}

/// Versions `old` served that `new` no longer serves (a removed version in `stored` is a
/// stored-version removal instead).
fn served_removed(old: &Crd, new: &Crd, stored: &[String]) -> Vec<Change> {
    let mut out = Vec::new();
    for v in old.versions.iter().filter(|v| v.served) {
        if stored.iter().any(|s| s == v.name) && new.version(v.name).is_none() {
            continue;
        }
        match new.version(v.name) {
            Some(n) if n.served => {}
            now => out.push(field(
                CRD_SERVED_VERSION_REMOVAL,
                &format!(".spec.versions[{}].served", v.name),
                &format!(
                    "version {} is no longer served{}: clients that use it get 404 Not Found",
                    v.name,
                    if now.is_none() {
                        " (it was removed)"
                    } else {
                        ""
                    }
                ),
                Some("true".into()),
                now.map(|_| "false".into()),
            )),
        }
    }
    out
}

/// The storage version moved to another version that `new` keeps (a storage version that is
/// gone is a stored-version removal, reported on its own).
fn storage_changed(old: &Crd, new: &Crd) -> Option<Change> {
    let (o, n) = (old.storage()?, new.storage()?);
    if o.name == n.name || new.version(o.name).is_none() {
        return None;
    }
    Some(field(
        CRD_STORAGE_VERSION_CHANGED,
        ".spec.versions[*].storage",
        &format!(
            "the storage version changed from {} to {}: objects stay stored as {} until a storage migration rewrites them, so {} must stay in spec.versions until then",
            o.name, n.name, o.name, o.name
        ),
        Some(o.name.to_owned()),
        Some(n.name.to_owned()),
    ))
}

/// A served version `new` adds (`n`, its schema at `schema_path`): objects stored as the
/// (old) storage version are served as it too, converted by the webhook or, without one,
/// only relabelled — so its schema is judged against the storage version's.
fn new_version(old: &Crd, new: &Crd, n: &Version, schema_path: &str) -> Vec<Change> {
    let Some(base) = old.storage() else {
        return Vec::new();
    };
    if new.webhook {
        return vec![field(
            CRD_CONVERSION_WEBHOOK,
            ".spec.conversion.strategy",
            &format!(
                "version {} is new and a conversion webhook converts it from {}: its schema is not compared with {}'s, as cvo cannot tell what the webhook does",
                n.name, base.name, base.name
            ),
            None,
            Some("Webhook".into()),
        )];
    }
    let base_schema = new.version(base.name).unwrap_or(base).schema;
    let (Some(a), Some(b)) = (base_schema, n.schema) else {
        return Vec::new();
    };
    schema_diff::diff(a, b, schema_path)
        .into_iter()
        .map(|mut c| {
            c.what = format!(
                "{} (new version {} against storage version {}, which it is served from without conversion)",
                c.what, n.name, base.name
            );
            c
        })
        .collect()
}

/// A change whose values are names or words (shown quoted, as JSON strings).
fn field(
    rule: &'static str,
    path: &str,
    what: &str,
    before: Option<String>,
    after: Option<String>,
) -> Change {
    schema_diff::change(
        rule,
        path,
        what,
        before.map(Value::String).as_ref(),
        after.map(Value::String).as_ref(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validate::crd::tests::crd_manifest;
    use crate::validate::rules::*;

    fn rules(changes: &[Change]) -> Vec<&'static str> {
        changes.iter().map(|c| c.rule).collect()
    }

    const S: &str = "{type: object, properties: {a: {type: string}}}";

    #[test]
    fn storage_version_count() {
        let one = crd_manifest("", &[("v1", true, true, S)]);
        assert!(single(&Crd::of(&one).unwrap()).is_empty());
        let two = crd_manifest("", &[("v1", true, true, S), ("v2", true, true, S)]);
        assert_eq!(
            rules(&single(&Crd::of(&two).unwrap())),
            [CRD_STORAGE_VERSION_COUNT]
        );
        let none = crd_manifest("", &[("v1", true, false, S)]);
        assert_eq!(
            rules(&single(&Crd::of(&none).unwrap())),
            [CRD_STORAGE_VERSION_COUNT]
        );
    }

    #[test]
    fn version_rules_hit_and_near_miss() {
        let base = crd_manifest("", &[("v1alpha1", true, false, S), ("v1", true, true, S)]);
        let old = Crd::of(&base).unwrap();
        let stored = ["v1alpha1".to_owned(), "v1".to_owned()];
        let run = |extra: &str, versions: &[(&str, bool, bool, &str)]| {
            let m = crd_manifest(extra, versions);
            let new = Crd::of(&m).unwrap();
            let mut out = stored_removed(&stored, "test", &new);
            out.extend(compare(&old, &new, &stored));
            rules(&out)
        };
        // Near miss: the same CRD.
        assert!(run("", &[("v1alpha1", true, false, S), ("v1", true, true, S)]).is_empty());
        // Stored version removed (no separate served finding for it).
        assert_eq!(
            run("", &[("v1", true, true, S)]),
            [CRD_STORED_VERSION_REMOVAL]
        );
        // Served → not served: a warning, the version stays for stored objects.
        assert_eq!(
            run("", &[("v1alpha1", false, false, S), ("v1", true, true, S)]),
            [CRD_SERVED_VERSION_REMOVAL]
        );
        // Storage version moved (both still there).
        assert_eq!(
            run("", &[("v1alpha1", true, true, S), ("v1", true, false, S)]),
            [CRD_STORAGE_VERSION_CHANGED]
        );
        // Scope.
        assert_eq!(
            run(
                "  scope: Cluster\n",
                &[("v1alpha1", true, false, S), ("v1", true, true, S)]
            ),
            [CRD_SCOPE]
        );
        // A new version without conversion is compared with the storage version ...
        let narrower = "{type: object, properties: {}}";
        assert_eq!(
            run(
                "",
                &[
                    ("v1alpha1", true, false, S),
                    ("v1", true, true, S),
                    ("v2", true, false, narrower)
                ]
            ),
            [CRD_EXISTING_FIELD_REMOVAL]
        );
        // ... and a near miss: the new version adds a field.
        let wider = "{type: object, properties: {a: {type: string}, b: {type: string}}}";
        assert!(
            run(
                "",
                &[
                    ("v1alpha1", true, false, S),
                    ("v1", true, true, S),
                    ("v2", true, false, wider)
                ]
            )
            .is_empty()
        );
        // With a webhook the cross-version check is skipped, and says so.
        assert_eq!(
            run(
                "  conversion:\n    strategy: Webhook\n",
                &[
                    ("v1alpha1", true, false, S),
                    ("v1", true, true, S),
                    ("v2", true, false, narrower)
                ]
            ),
            [CRD_CONVERSION_WEBHOOK]
        );
    }

    #[test]
    fn immutable_names() {
        let old_m = crd_manifest("", &[("v1", true, true, S)]);
        let new_m = crd_manifest("", &[("v1", true, true, S)]);
        let mut renamed = new_m.clone();
        std::sync::Arc::make_mut(&mut renamed.object)["spec"]["names"]["kind"] =
            serde_json::json!("Gadget");
        let (old, new) = (Crd::of(&old_m).unwrap(), Crd::of(&renamed).unwrap());
        let changes = compare(&old, &new, &[]);
        assert_eq!(rules(&changes), [CRD_IMMUTABLE_FIELD_CHANGED]);
        assert_eq!(changes[0].path, ".spec.names.kind");
        assert!(compare(&old, &Crd::of(&new_m).unwrap(), &[]).is_empty());
    }
}
