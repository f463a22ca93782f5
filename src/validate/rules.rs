//! The rule registry: every finding `cvo validate` can report, with its stable id, default
//! severity, a one-line summary and the default advice.
//!
//! The registry lists the loader's rules too (parse problems, duplicate identities, …) so that
//! documentation, `--format sarif` rule metadata and the fixture tests cover every id a user
//! can see. Ids are kebab-case and never change meaning once released.

use crate::diagnostic::Severity;

/// One rule as users see it in reports and in `docs/validation.md`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rule {
    /// Stable kebab-case id, shown as `error[id]`.
    pub id: &'static str,
    /// Default severity of its findings.
    pub severity: Severity,
    /// One line: what the rule catches.
    pub summary: &'static str,
    /// What to do about a finding, used when a finding carries no more specific advice.
    pub help: &'static str,
    /// True for rules reported by the release loader rather than by `validate`'s own checks.
    pub from_loader: bool,
    /// True for a rule that reports nothing unless a `--rule ID=LEVEL` (or the config file's
    /// `rules:`) turns it on; `severity` is then the severity it has when turned on by name
    /// only. See [`Rule::default_level`].
    pub off_by_default: bool,
}

impl Rule {
    /// This rule, reporting nothing unless turned on (`rule(…).off_by_default()`).
    pub const fn off_by_default(self) -> Rule {
        Rule {
            off_by_default: true,
            ..self
        }
    }

    /// The level of the rule when nothing configures it: off, or its severity.
    pub const fn default_level(&self) -> super::levels::Level {
        if self.off_by_default {
            super::levels::Level::Off
        } else {
            super::levels::Level::of(self.severity)
        }
    }
}

const fn rule(
    id: &'static str,
    severity: Severity,
    summary: &'static str,
    help: &'static str,
) -> Rule {
    Rule {
        id,
        severity,
        summary,
        help,
        from_loader: false,
        off_by_default: false,
    }
}

const fn loader(
    id: &'static str,
    severity: Severity,
    summary: &'static str,
    help: &'static str,
) -> Rule {
    Rule {
        from_loader: true,
        ..rule(id, severity, summary, help)
    }
}

pub const PARSE_ERROR: &str = "parse-error";
pub const INVALID_OBJECT: &str = "invalid-object";
pub const DUPLICATE_IDENTITY: &str = "duplicate-identity";
pub const APPLY_AND_DELETE: &str = "apply-and-delete";
pub const SUBDIRECTORY_IGNORED: &str = "subdirectory-ignored";
pub const RELEASE_METADATA: &str = "release-metadata";
pub const TEMPLATE_ERROR: &str = "template-error";
pub const UNRENDERED_TEMPLATE: &str = "unrendered-template";
pub const INVALID_DELETE_VALUE: &str = "invalid-delete-value";
pub const DELETE_ANNOTATION_TYPO: &str = "delete-annotation-typo";
pub const NAMESPACE_DELETED_IN_USE: &str = "namespace-deleted-in-use";
pub const CRD_DELETED_IN_USE: &str = "crd-deleted-in-use";
pub const CRD_DELETED_BEFORE_CRS: &str = "crd-deleted-before-crs";
pub const DELETE_MISSING_PROFILE: &str = "delete-missing-profile";
pub const DELETE_EXTRA_FIELDS: &str = "delete-extra-fields";
pub const FILE_NAME_CONVENTION: &str = "file-name-convention";
pub const DELETE_UNKNOWN_OBJECT: &str = "delete-unknown-object";
pub const REMOVED_WITHOUT_DELETE: &str = "removed-without-delete";
pub const STALE_DELETE_MANIFEST: &str = "stale-delete-manifest";
pub const IMMUTABLE_ROLEREF: &str = "immutable-roleref";
pub const DROPPED_FIELD: &str = "dropped-field";
pub const SCHEMA_MISMATCH: &str = "schema-mismatch";
pub const INVALID_SUPPRESSION: &str = "invalid-suppression";
pub const STALE_SUPPRESSION: &str = "stale-suppression";
pub const MANIFEST_IN_NO_PROFILE: &str = "manifest-in-no-profile";
pub const CAPABILITY_UNKNOWN: &str = "capability-unknown";
pub const CAPABILITY_EMPTY: &str = "capability-empty";
pub const CAPABILITY_IN_NO_SET: &str = "capability-in-no-set";
pub const CAPABILITY_MOVED: &str = "capability-moved";
pub const DUPLICATE_KEY: &str = "duplicate-key";
pub const REPEATED_DOCUMENT: &str = "repeated-document";
pub const UNKNOWN_TEMPLATE_ACTION: &str = "unknown-template-action";
pub const JSON_EXTENSION_YAML_CONTENT: &str = "json-extension-yaml-content";
pub const NON_STRING_ANNOTATION: &str = "non-string-annotation";
pub const UNKNOWN_FEATURE_SET: &str = "unknown-feature-set";
pub const HIDDEN_FILE: &str = "hidden-file";

/// Loader rules the CVO accepts silently (it leaves the manifest out and uses the release):
/// warnings for `apply`, `plan`, `graph` and the operator, which read a release as the CVO
/// does, and errors in `validate`, where catching them is the point.
pub const ERRORS_ONLY_IN_VALIDATE: [&str; 2] = [NON_STRING_ANNOTATION, UNKNOWN_FEATURE_SET];

pub const CRD_SCOPE: &str = "crd-scope";
pub const CRD_EXISTING_FIELD_REMOVAL: &str = "crd-existing-field-removal";
pub const CRD_STORED_VERSION_REMOVAL: &str = "crd-stored-version-removal";
pub const CRD_TYPE: &str = "crd-type";
pub const CRD_ENUM: &str = "crd-enum";
pub const CRD_DEFAULT: &str = "crd-default";
pub const CRD_REQUIRED: &str = "crd-required";
pub const CRD_MAXIMUM: &str = "crd-maximum";
pub const CRD_MINIMUM: &str = "crd-minimum";
pub const CRD_MAX_ITEMS: &str = "crd-max-items";
pub const CRD_MIN_ITEMS: &str = "crd-min-items";
pub const CRD_MAX_LENGTH: &str = "crd-max-length";
pub const CRD_MIN_LENGTH: &str = "crd-min-length";
pub const CRD_MAX_PROPERTIES: &str = "crd-max-properties";
pub const CRD_MIN_PROPERTIES: &str = "crd-min-properties";
pub const CRD_PATTERN: &str = "crd-pattern";
pub const CRD_NULLABLE: &str = "crd-nullable";
pub const CRD_ONE_OF: &str = "crd-one-of";
pub const CRD_ANY_OF: &str = "crd-any-of";
pub const CRD_ALL_OF: &str = "crd-all-of";
pub const CRD_DESCRIPTION: &str = "crd-description";
pub const CRD_UNHANDLED: &str = "crd-unhandled";
pub const CRD_SERVED_VERSION_REMOVAL: &str = "crd-served-version-removal";
pub const CRD_STORAGE_VERSION_CHANGED: &str = "crd-storage-version-changed";
pub const CRD_IMMUTABLE_FIELD_CHANGED: &str = "crd-immutable-field-changed";
pub const CRD_STORAGE_VERSION_COUNT: &str = "crd-storage-version-count";
pub const CRD_CONVERSION_WEBHOOK: &str = "crd-conversion-webhook";

/// The advice of most CRD schema rules.
const NEW_VERSION_HELP: &str = "add a new version with the new schema, migrate stored objects to it, then remove the old version in a later release; if the change is reviewed and safe, list the rule in the CRD's release.cvo.io/allow-crd-changes annotation";

/// Every rule, loader rules first, then `validate`'s own in the order of docs/validation.md.
pub const RULES: &[Rule] = &[
    loader(
        PARSE_ERROR,
        Severity::Error,
        "A file is not valid YAML/JSON (bad syntax, an invalid key or number, not UTF-8).",
        "fix the syntax at the line shown",
    ),
    loader(
        DUPLICATE_KEY,
        Severity::Warning,
        "A mapping has the same key twice; the last value is used, as the CVO and kubectl read it.",
        "remove one of the two keys so that the file says what it means; other tools keep the first value or refuse the file",
    ),
    loader(
        REPEATED_DOCUMENT,
        Severity::Error,
        "One file holds the same object (group, kind, namespace, name) twice; the CVO refuses the release, even when the filters leave the object out.",
        "remove one of the two documents",
    ),
    loader(
        HIDDEN_FILE,
        Severity::Warning,
        "A manifest file's name starts with `.`: the CVO applies it (first, in byte order), though it is easy to miss.",
        "rename the file without the leading `.` if it belongs to the release, or delete it",
    ),
    loader(
        JSON_EXTENSION_YAML_CONTENT,
        Severity::Warning,
        "A .json file holds YAML; it is read by its content, as the CVO reads it.",
        "rename the file to .yaml, or write it as JSON",
    ),
    loader(
        NON_STRING_ANNOTATION,
        Severity::Error,
        "An annotation value is not a string; the CVO then reads the object as having no annotations, and the API server refuses it.",
        "quote the value, such as `include.release.openshift.io/hypershift: \"true\"`",
    ),
    loader(
        UNKNOWN_FEATURE_SET,
        Severity::Error,
        "release.openshift.io/feature-set names a feature set OpenShift does not know (a typo, or spaces around a name): the manifest is never included.",
        "write a comma-separated list of CustomNoUpgrade, Default, DevPreviewNoUpgrade, OKD and TechPreviewNoUpgrade with no spaces",
    ),
    loader(
        INVALID_OBJECT,
        Severity::Error,
        "A document is not a Kubernetes object with apiVersion, kind and metadata.name.",
        "every document must be a Kubernetes object with apiVersion, kind and metadata.name",
    ),
    loader(
        DUPLICATE_IDENTITY,
        Severity::Error,
        "Two manifests define the same object (group, kind, namespace, name).",
        "objects are identified by group, kind, namespace and name (not API version): remove one of the two",
    ),
    loader(
        APPLY_AND_DELETE,
        Severity::Error,
        "The release both applies and deletes the same object.",
        "keep either the delete manifest or the manifest that applies the object, not both",
    ),
    loader(
        SUBDIRECTORY_IGNORED,
        Severity::Warning,
        "A sub-directory of the release is not read.",
        "move its manifests up one level if they belong to the release",
    ),
    loader(
        RELEASE_METADATA,
        Severity::Error,
        "release-metadata, image-references or capabilities.yaml is unreadable or invalid.",
        r#"write JSON like {"kind": "cincinnati-metadata-v0", "version": "4.16.2"}"#,
    ),
    loader(
        TEMPLATE_ERROR,
        Severity::Error,
        "A CVO template action in a payload's manifests/ cannot be rendered.",
        "files in a payload's manifests/ are Go templates: use only {{.ReleaseImage}}, {{.ClusterProfile}}, {{index .Images \"name\"}} and string literals",
    ),
    loader(
        UNKNOWN_TEMPLATE_ACTION,
        Severity::Warning,
        "A template action in a payload's manifests/ is not one cvo knows (a newer CVO's field); the file is skipped, as the CVO skips it.",
        "use only {{.ReleaseImage}}, {{.ClusterProfile}}, {{index .Images \"name\"}} and string literals, or write the value out, if the file must be applied",
    ),
    loader(
        UNRENDERED_TEMPLATE,
        Severity::Warning,
        "A file outside a payload's manifests/ contains CVO template fields that will be applied literally.",
        "move the file into <payload>/manifests/ or write the value out",
    ),
    rule(
        INVALID_DELETE_VALUE,
        Severity::Error,
        "release.openshift.io/delete has a value other than the string \"true\"; CVO refuses the manifest.",
        "write `release.openshift.io/delete: \"true\"` (a quoted string) to delete the object, or remove the annotation to apply it",
    ),
    rule(
        DELETE_ANNOTATION_TYPO,
        Severity::Error,
        "An annotation key is a near miss of release.openshift.io/delete, so the object would be applied instead of deleted.",
        "spell the key exactly `release.openshift.io/delete` (lower case, no spaces)",
    ),
    rule(
        NAMESPACE_DELETED_IN_USE,
        Severity::Error,
        "A Namespace is deleted while the release still applies objects in it.",
        "stop deleting the namespace, or delete (or move) every object the release applies in it",
    ),
    rule(
        CRD_DELETED_IN_USE,
        Severity::Error,
        "A CustomResourceDefinition is deleted while the release still applies resources of its kind.",
        "stop deleting the CRD, or turn the manifests of its resources into delete manifests",
    ),
    rule(
        CRD_DELETED_BEFORE_CRS,
        Severity::Error,
        "A CustomResourceDefinition is deleted before or at the same point as resources of its kind, so their finalizers may never be processed.",
        "delete the CRD in a later run level than its custom resources (or in a later release)",
    ),
    rule(
        DELETE_MISSING_PROFILE,
        Severity::Warning,
        "A delete manifest lacks include.release.openshift.io/<profile> annotations that the rest of its component carries, so it is skipped under that profile.",
        "copy the include.release.openshift.io/<profile>: \"true\" annotations of the component onto the delete manifest",
    ),
    rule(
        DELETE_EXTRA_FIELDS,
        Severity::Note,
        "A delete manifest has fields beyond apiVersion, kind and metadata; they have no effect.",
        "remove everything but apiVersion, kind and metadata from the delete manifest",
    ),
    rule(
        FILE_NAME_CONVENTION,
        Severity::Warning,
        "A file name does not follow 0000_<runlevel>_<component>_<name>, so it has no run level or component and runs serially.",
        "rename the file to 0000_<runlevel>_<component>_<name>.yaml, e.g. 0000_50_my-operator_03_deployment.yaml",
    ),
    rule(
        DELETE_UNKNOWN_OBJECT,
        Severity::Warning,
        "A delete manifest names an object the previous release neither applied nor deleted (typo? nothing to delete).",
        "check group, kind, namespace and name against the previous release, or drop the delete manifest",
    ),
    rule(
        REMOVED_WITHOUT_DELETE,
        Severity::Warning,
        "An object the previous release applied is neither applied nor deleted by this one: it is orphaned on every cluster.",
        "add a delete manifest (metadata plus `release.openshift.io/delete: \"true\"`) for the object, or keep applying it",
    ),
    rule(
        STALE_DELETE_MANIFEST,
        Severity::Error,
        "A delete manifest the previous release already carried, across a major or minor update: it is stale.",
        "remove the delete manifest: every cluster that updated through the previous release has already deleted the object",
    ),
    rule(
        IMMUTABLE_ROLEREF,
        Severity::Error,
        "A ClusterRoleBinding or RoleBinding both releases apply under one name binds another role: the API server refuses to change a roleRef (422), so the update fails on every pass.",
        "bind the new role under a new name, and delete the old binding with a delete manifest ordered after the new binding",
    ),
    rule(
        DROPPED_FIELD,
        Severity::Warning,
        "A manifest of a built-in kind has fields its type does not declare; they are dropped before applying.",
        "remove the field, or check its spelling and indentation against the API reference",
    ),
    rule(
        SCHEMA_MISMATCH,
        Severity::Error,
        "A manifest of a built-in kind does not decode as its type (a field has the wrong type); applying it fails.",
        "fix the field's type to match the Kubernetes API reference for this kind",
    ),
    rule(
        MANIFEST_IN_NO_PROFILE,
        Severity::Warning,
        "The release uses cluster profiles, and some manifests name none: the CVO applies them in no profile (one finding with the count and the first files).",
        "add `include.release.openshift.io/<profile>: \"true\"` for every profile the manifest belongs to, or remove it from the release",
    ),
    rule(
        CAPABILITY_UNKNOWN,
        Severity::Error,
        "capability.openshift.io/name names a capability the release's capabilities.yaml does not know, so the manifest is never applied (without capabilities.yaml: a warning for names that differ from another only in case).",
        "correct the name (capability names are case-sensitive), or add it to `known` in capabilities.yaml",
    ),
    rule(
        CAPABILITY_EMPTY,
        Severity::Error,
        "capability.openshift.io/name has an empty name (`a++b`, a `+` at either end) or a name with spaces around it; the CVO neither trims nor skips names, so the manifest is never applied.",
        "write the names joined by single `+` with nothing around them",
    ),
    rule(
        CAPABILITY_IN_NO_SET,
        Severity::Warning,
        "capabilities.yaml declares a capability that no set names, not even vCurrent: no baseline enables it, only additionalEnabledCapabilities.",
        "add the capability to vCurrent (and to the other sets that should enable it)",
    ),
    rule(
        CAPABILITY_MOVED,
        Severity::Warning,
        "An object the previous release applied without a capability is gated behind it now: every cluster that has the object and lacks the capability gets it enabled implicitly on update, for good.",
        "if intended, say so in the release notes; otherwise ship the gated object under a new name and delete the old one",
    ),
    rule(
        INVALID_SUPPRESSION,
        Severity::Error,
        "A validate.cvo.io/ignore annotation has no validate.cvo.io/ignore-reason, is not a string, or names a rule that does not exist (or a release.cvo.io/allow-crd-changes annotation names no CRD rule it may allow): it suppresses nothing.",
        "write `validate.cvo.io/ignore: \"RULE[,RULE]\"` with the ids reports show, and `validate.cvo.io/ignore-reason: \"why this is acceptable\"`",
    ),
    rule(
        STALE_SUPPRESSION,
        Severity::Warning,
        "A validate.cvo.io/ignore (or, with --previous, a release.cvo.io/allow-crd-changes) annotation names a rule that reports nothing about the object: the suppression outlived its reason.",
        "remove the rule from validate.cvo.io/ignore (and both annotations when nothing is left)",
    ),
    rule(
        CRD_SCOPE,
        Severity::Error,
        "A CRD's scope changed between Namespaced and Cluster (crdify `scope`): the API server refuses the update, and every client path changes.",
        "keep the scope; ship a new CRD (new group or plural) with the other scope and migrate the resources to it",
    ),
    rule(
        CRD_EXISTING_FIELD_REMOVAL,
        Severity::Error,
        "A field of a served version's schema is gone (crdify `existingFieldRemoval`): its values are pruned from stored objects on their next write, and clients that set it are refused or lose it.",
        NEW_VERSION_HELP,
    ),
    rule(
        CRD_STORED_VERSION_REMOVAL,
        Severity::Error,
        "A version that objects may be stored in is no longer in spec.versions (crdify `storedVersionRemoval`): the API server refuses the CRD update while status.storedVersions lists it, and stored objects become unreadable.",
        "keep the version (served: false is fine) until a storage migration has rewritten every object and status.storedVersions no longer lists it",
    ),
    rule(
        CRD_TYPE,
        Severity::Error,
        "A field's type changed (crdify `type`): stored objects no longer validate, and clients decode the wrong type.",
        NEW_VERSION_HELP,
    ),
    rule(
        CRD_ENUM,
        Severity::Error,
        "An enum lost a value, or an existing field got an enum (crdify `enum`): objects holding the value no longer validate.",
        NEW_VERSION_HELP,
    ),
    rule(
        CRD_DEFAULT,
        Severity::Error,
        "A field's default was added, changed or removed (crdify `default`): objects read or written after the update silently get another value.",
        NEW_VERSION_HELP,
    ),
    rule(
        CRD_REQUIRED,
        Severity::Error,
        "A field became required (crdify `required`): existing objects without it can no longer be updated.",
        NEW_VERSION_HELP,
    ),
    rule(
        CRD_MAXIMUM,
        Severity::Error,
        "A maximum was added or lowered (crdify `maximum`): objects with larger values no longer validate.",
        NEW_VERSION_HELP,
    ),
    rule(
        CRD_MINIMUM,
        Severity::Error,
        "A minimum was added or raised (crdify `minimum`): objects with smaller values no longer validate.",
        NEW_VERSION_HELP,
    ),
    rule(
        CRD_MAX_ITEMS,
        Severity::Error,
        "maxItems was added or lowered (crdify `maxItems`): objects with longer lists no longer validate.",
        NEW_VERSION_HELP,
    ),
    rule(
        CRD_MIN_ITEMS,
        Severity::Error,
        "minItems was added or raised (crdify `minItems`): objects with shorter lists no longer validate.",
        NEW_VERSION_HELP,
    ),
    rule(
        CRD_MAX_LENGTH,
        Severity::Error,
        "maxLength was added or lowered (crdify `maxLength`): objects with longer strings no longer validate.",
        NEW_VERSION_HELP,
    ),
    rule(
        CRD_MIN_LENGTH,
        Severity::Error,
        "minLength was added or raised (crdify `minLength`): objects with shorter strings no longer validate.",
        NEW_VERSION_HELP,
    ),
    rule(
        CRD_MAX_PROPERTIES,
        Severity::Error,
        "maxProperties was added or lowered (crdify `maxProperties`): objects with more keys no longer validate.",
        NEW_VERSION_HELP,
    ),
    rule(
        CRD_MIN_PROPERTIES,
        Severity::Error,
        "minProperties was added or raised (crdify `minProperties`): objects with fewer keys no longer validate.",
        NEW_VERSION_HELP,
    ),
    rule(
        CRD_PATTERN,
        Severity::Error,
        "A string field got a pattern or another one (crdify `pattern`): values that matched before may not match now.",
        NEW_VERSION_HELP,
    ),
    rule(
        CRD_NULLABLE,
        Severity::Error,
        "nullable: true was removed (crdify `nullable`): objects holding null no longer validate.",
        NEW_VERSION_HELP,
    ),
    rule(
        CRD_ONE_OF,
        Severity::Error,
        "A oneOf changed (crdify reports it as `unhandled`): objects valid before may not be now.",
        NEW_VERSION_HELP,
    ),
    rule(
        CRD_ANY_OF,
        Severity::Error,
        "An anyOf changed (crdify reports it as `unhandled`): objects valid before may not be now.",
        NEW_VERSION_HELP,
    ),
    rule(
        CRD_ALL_OF,
        Severity::Error,
        "An allOf changed (crdify reports it as `unhandled`): objects valid before may not be now.",
        NEW_VERSION_HELP,
    ),
    rule(
        CRD_DESCRIPTION,
        Severity::Warning,
        "A field's description changed (crdify `description`); off by default.",
        "nothing breaks; turn this rule on to review documentation changes",
    )
    .off_by_default(),
    rule(
        CRD_UNHANDLED,
        Severity::Error,
        "A schema keyword changed that no other rule judges (crdify `unhandled`), so its safety is unknown: an error, as OLM v1 treats it.",
        "review the change by hand; if it is safe, list `unhandled` in the CRD's release.cvo.io/allow-crd-changes annotation",
    ),
    rule(
        CRD_SERVED_VERSION_REMOVAL,
        Severity::Warning,
        "A version the previous release served is no longer served: every client of that version breaks (beyond crdify).",
        "announce the removal one release ahead, keep serving the version until clients moved, then set served: false",
    ),
    rule(
        CRD_STORAGE_VERSION_CHANGED,
        Severity::Warning,
        "The storage version changed: objects stay stored in the old version until a storage migration rewrites them, so the old version cannot be removed before that (beyond crdify).",
        "run a storage migration (read and write back every object, then patch status.storedVersions) before a later release removes the old version",
    ),
    rule(
        CRD_IMMUTABLE_FIELD_CHANGED,
        Severity::Error,
        "spec.group, spec.names.plural or spec.names.kind changed: the first two make up the CRD's name and the API server refuses them; a new kind breaks every manifest and client of the old one (beyond crdify).",
        "ship a new CRD under the new name and delete the old one once its resources have moved",
    ),
    rule(
        CRD_STORAGE_VERSION_COUNT,
        Severity::Error,
        "A CRD does not mark exactly one version storage: true; the API server refuses it.",
        "mark exactly one version of spec.versions storage: true",
    ),
    rule(
        CRD_CONVERSION_WEBHOOK,
        Severity::Note,
        "A CRD converts between versions with a webhook, so the cross-version schema checks for a version it adds are skipped: cvo cannot tell what the webhook does.",
        "test the conversion webhook with objects of every stored version",
    ),
];

/// True for a rule that compares the release with the one it updates from (`--previous`;
/// the CRD rules also with the cluster's CRDs, `--live`): without that it reports nothing, so
/// a suppression of it cannot be judged stale then.
pub fn compares(id: &str) -> bool {
    matches!(
        id,
        DELETE_UNKNOWN_OBJECT
            | REMOVED_WITHOUT_DELETE
            | STALE_DELETE_MANIFEST
            | IMMUTABLE_ROLEREF
            | CAPABILITY_MOVED
    ) || id.starts_with("crd-")
        && !matches!(
            id,
            CRD_STORAGE_VERSION_COUNT | CRD_DELETED_IN_USE | CRD_DELETED_BEFORE_CRS
        )
}

/// Looks a rule up by id.
pub fn rule_by_id(id: &str) -> Option<&'static Rule> {
    RULES.iter().find(|r| r.id == id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_kebab_case_and_documented() {
        let mut seen = std::collections::HashSet::new();
        for r in RULES {
            assert!(seen.insert(r.id), "duplicate id {}", r.id);
            assert!(
                r.id.chars().all(|c| c.is_ascii_lowercase() || c == '-'),
                "{} is not kebab-case",
                r.id
            );
            assert!(!r.summary.is_empty() && !r.help.is_empty());
        }
        assert!(rule_by_id(STALE_DELETE_MANIFEST).is_some());
        assert!(rule_by_id("nope").is_none());
    }
}
