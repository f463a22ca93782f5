//! Server-side apply and field ownership (`metadata.managedFields`, `FieldsV1`).
//!
//! Each managedFields entry is a set of leaf paths. Apply merges the applied configuration into
//! the live object, reports conflicts with other managers whose fields it would change (409
//! unless `force`, which takes ownership), removes the fields the manager applied before and
//! omits now (unless another manager still owns them), and records the new set. Non-apply
//! writes (create/update/patch) give their manager ownership of every leaf whose value changed,
//! except on an existing object without managedFields: like kube, that one stays untracked until
//! an apply first records all its fields as owned by `before-first-apply`.
//!
//! List handling is an approximation of structured-merge-diff without OpenAPI schemas: lists of
//! objects that all carry `name` (or `ownerReferences`, keyed by `uid`) are associative
//! (`k:{"name":…}`), `metadata.finalizers` is a set (`v:"…"`), every other list is atomic.

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

/// One step of a field path.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Pe {
    /// `f:<name>`: a map field.
    Field(String),
    /// `k:<json>`: an item of an associative list, identified by its key fields.
    Key(String),
    /// `v:<json>`: an item of a set list.
    Value(String),
}

/// A field path from the object root.
pub type Path = Vec<Pe>;
/// A set of owned paths.
pub type FieldSet = BTreeSet<Path>;

const IGNORED_META: &[&str] = &[
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "selfLink",
    "generateName",
];

/// Which part of an object a write addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// The whole object (types without a status subresource).
    Whole,
    /// Main resource of a type with a status subresource: `status` is not owned here.
    Main,
    /// The `status` subresource: only `status` is owned.
    Status,
}

/// How a list is merged and owned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListKind {
    /// Replaced and owned as a whole.
    Atomic,
    /// Items are scalars owned one by one (`v:`).
    Set,
    /// Items are objects identified by these key fields (`k:`).
    Map(Vec<String>),
}

/// Where list types come from: the built-in heuristic, or a CRD's structural schema
/// (`x-kubernetes-list-type` / `x-kubernetes-list-map-keys`; lists are atomic by default).
#[derive(Debug, Clone, Copy, Default)]
pub struct Lists<'a> {
    /// The version's `openAPIV3Schema`, for custom resources.
    pub schema: Option<&'a Value>,
}

impl Lists<'_> {
    /// The kind of the list at `path` holding `items`.
    pub fn kind(&self, path: &[Pe], items: &[Value]) -> ListKind {
        let in_meta = matches!(path.first(), Some(Pe::Field(f)) if f == "metadata");
        match self.schema {
            Some(schema) if !in_meta => {
                let node = super::schema::node_at(schema, path);
                match node
                    .and_then(|n| n.get("x-kubernetes-list-type"))
                    .and_then(Value::as_str)
                {
                    Some("set") if items.iter().all(|i| !i.is_object() && !i.is_array()) => {
                        ListKind::Set
                    }
                    Some("map") => {
                        let keys: Vec<String> = node
                            .and_then(|n| n.get("x-kubernetes-list-map-keys"))
                            .and_then(Value::as_array)
                            .map(|a| {
                                a.iter()
                                    .filter_map(|k| k.as_str().map(str::to_string))
                                    .collect()
                            })
                            .unwrap_or_default();
                        if !keys.is_empty()
                            && items
                                .iter()
                                .all(|i| keys.iter().all(|k| i.get(k).is_some()))
                        {
                            ListKind::Map(keys)
                        } else {
                            ListKind::Atomic
                        }
                    }
                    _ => ListKind::Atomic,
                }
            }
            _ => heuristic(path, items),
        }
    }
}

impl Lists<'_> {
    /// The object at `path` is merged and owned as a whole (kube's `+structType=atomic`): a
    /// CRD version's `schema.openAPIV3Schema` (a `JSONSchemaProps`), so that an apply of a
    /// new schema leaves nothing of another manager's old one. Only for built-in kinds.
    pub fn atomic(&self, path: &[Pe]) -> bool {
        // The merge walks list items without their key (`k:`), field collection with it.
        let fields: Vec<&str> = path
            .iter()
            .filter_map(|pe| match pe {
                Pe::Field(f) => Some(f.as_str()),
                _ => None,
            })
            .collect();
        self.schema.is_none() && fields == ["spec", "versions", "schema", "openAPIV3Schema"]
    }
}

fn heuristic(path: &[Pe], items: &[Value]) -> ListKind {
    if path == [Pe::Field("metadata".into()), Pe::Field("finalizers".into())]
        && items.iter().all(Value::is_string)
    {
        return ListKind::Set;
    }
    let parent = match path.last() {
        Some(Pe::Field(f)) => f.as_str(),
        _ => "",
    };
    match builtin_list_keys(parent, items) {
        Some(keys) => ListKind::Map(keys),
        None => ListKind::Atomic,
    }
}

/// Merge keys of a built-in list, from its field name and items (kube's patchMergeKey for the
/// common cases: `mountPath`, `devicePath`, `containerPort`+`protocol`, `port`+`protocol`,
/// `ip`, `uid` for ownerReferences, `name` otherwise). `None` = atomic: not all items are
/// objects carrying the key, or two items share a key.
pub fn builtin_list_keys(parent: &str, items: &[Value]) -> Option<Vec<String>> {
    if items.is_empty() || !items.iter().all(Value::is_object) {
        return None;
    }
    let has = |k: &str| {
        items
            .iter()
            .all(|i| i.get(k).is_some_and(|v| v.is_string() || v.is_number()))
    };
    let keys: Vec<&str> = match parent {
        "ownerReferences" => vec!["uid"],
        "volumeMounts" => vec!["mountPath"],
        "volumeDevices" => vec!["devicePath"],
        "hostAliases" => vec!["ip"],
        "ports" if has("containerPort") => vec!["containerPort", "protocol"],
        "ports" if has("port") => vec!["port", "protocol"],
        _ => vec!["name"],
    };
    if !has(keys[0]) {
        return None;
    }
    let keys: Vec<String> = keys.into_iter().map(str::to_string).collect();
    let mut seen = std::collections::HashSet::new();
    items
        .iter()
        .all(|i| seen.insert(item_key(i, &keys)))
        .then_some(keys)
}

fn item_key(item: &Value, keys: &[String]) -> String {
    let mut m = Map::new();
    for k in keys {
        m.insert(k.clone(), item.get(k).cloned().unwrap_or(Value::Null));
    }
    Value::Object(m).to_string()
}

fn same_key(a: &Value, b: &Value, keys: &[String]) -> bool {
    keys.iter().all(|k| a.get(k) == b.get(k))
}

fn collect(v: &Value, path: &mut Path, out: &mut FieldSet, lists: &Lists<'_>) {
    match v {
        Value::Object(m) if !m.is_empty() && !lists.atomic(path) => {
            for (k, c) in m {
                path.push(Pe::Field(k.clone()));
                collect(c, path, out, lists);
                path.pop();
            }
        }
        Value::Array(items) if !items.is_empty() => match lists.kind(path, items) {
            ListKind::Set => {
                for i in items {
                    path.push(Pe::Value(i.to_string()));
                    out.insert(path.clone());
                    path.pop();
                }
            }
            ListKind::Map(keys) => {
                for i in items {
                    path.push(Pe::Key(item_key(i, &keys)));
                    out.insert(path.clone());
                    collect(i, path, out, lists);
                    path.pop();
                }
            }
            ListKind::Atomic => {
                out.insert(path.clone());
            }
        },
        _ => {
            out.insert(path.clone());
        }
    }
}

/// The part of `obj` that field management covers for `scope`.
pub fn managed_view(obj: &Value, scope: Scope) -> Value {
    let mut v = obj.clone();
    if let Some(m) = v.as_object_mut() {
        m.remove("apiVersion");
        m.remove("kind");
        match scope {
            Scope::Whole => {}
            Scope::Main => {
                m.remove("status");
            }
            Scope::Status => m.retain(|k, _| k == "status"),
        }
        if let Some(meta) = m.get_mut("metadata").and_then(Value::as_object_mut) {
            for f in IGNORED_META {
                meta.remove(*f);
            }
        }
        if m.get("metadata")
            .and_then(Value::as_object)
            .is_some_and(Map::is_empty)
        {
            m.remove("metadata");
        }
    }
    v
}

/// Leaf paths of an object (after [`managed_view`]).
pub fn fields_of(view: &Value, lists: &Lists<'_>) -> FieldSet {
    let mut out = FieldSet::new();
    if view.as_object().is_some_and(|m| !m.is_empty()) {
        collect(view, &mut Vec::new(), &mut out, lists);
    }
    out
}

fn pe_str(pe: &Pe) -> String {
    match pe {
        Pe::Field(f) => format!("f:{f}"),
        Pe::Key(k) => format!("k:{k}"),
        Pe::Value(v) => format!("v:{v}"),
    }
}

/// Render a set in the `FieldsV1` JSON format.
pub fn to_fields_v1(set: &FieldSet) -> Value {
    let mut root = Map::new();
    for p in set {
        let mut node = &mut root;
        for pe in p {
            node = node
                .entry(pe_str(pe))
                .or_insert_with(|| json!({}))
                .as_object_mut()
                .expect("map");
        }
        if matches!(p.last(), Some(Pe::Key(_))) || !node.is_empty() {
            node.insert(".".into(), json!({}));
        }
    }
    // A field that is a leaf and also has children gets "." too (inserted above when the leaf
    // came after its children); make sure leaves inserted first are marked as well.
    Value::Object(root)
}

/// Parse a `FieldsV1` JSON tree.
pub fn from_fields_v1(v: &Value) -> FieldSet {
    fn walk(m: &Map<String, Value>, path: &mut Path, out: &mut FieldSet) {
        for (k, c) in m {
            if k == "." {
                out.insert(path.clone());
                continue;
            }
            let pe = if let Some(f) = k.strip_prefix("f:") {
                Pe::Field(f.into())
            } else if let Some(f) = k.strip_prefix("k:") {
                Pe::Key(f.into())
            } else if let Some(f) = k.strip_prefix("v:") {
                Pe::Value(f.into())
            } else {
                continue;
            };
            path.push(pe);
            match c.as_object() {
                Some(cm) if !cm.is_empty() => walk(cm, path, out),
                _ => {
                    out.insert(path.clone());
                }
            }
            path.pop();
        }
    }
    let mut out = FieldSet::new();
    if let Some(m) = v.as_object() {
        walk(m, &mut Vec::new(), &mut out);
    }
    out
}

fn key_matches(item: &Value, key: &str) -> bool {
    match serde_json::from_str::<Value>(key) {
        Ok(Value::Object(k)) => k.iter().all(|(f, v)| item.get(f) == Some(v)),
        _ => false,
    }
}

fn value_matches(item: &Value, v: &str) -> bool {
    serde_json::from_str::<Value>(v).is_ok_and(|x| &x == item)
}

/// The value at `path`, if present.
pub fn get_at<'a>(obj: &'a Value, path: &[Pe]) -> Option<&'a Value> {
    let mut cur = obj;
    for pe in path {
        cur = match pe {
            Pe::Field(f) => cur.get(f)?,
            Pe::Key(k) => cur.as_array()?.iter().find(|i| key_matches(i, k))?,
            Pe::Value(v) => cur.as_array()?.iter().find(|i| value_matches(i, v))?,
        };
    }
    Some(cur)
}

fn get_at_mut<'a>(obj: &'a mut Value, path: &[Pe]) -> Option<&'a mut Value> {
    let mut cur = obj;
    for pe in path {
        cur = match pe {
            Pe::Field(f) => cur.get_mut(f)?,
            Pe::Key(k) => cur.as_array_mut()?.iter_mut().find(|i| key_matches(i, k))?,
            Pe::Value(v) => cur
                .as_array_mut()?
                .iter_mut()
                .find(|i| value_matches(i, v))?,
        };
    }
    Some(cur)
}

/// Remove the value at `path`; then drop parents that became empty (maps and lists).
pub fn remove_at(obj: &mut Value, path: &[Pe]) {
    let Some((last, parent_path)) = path.split_last() else {
        return;
    };
    let Some(parent) = get_at_mut(obj, parent_path) else {
        return;
    };
    match (last, parent) {
        (Pe::Field(f), Value::Object(m)) => {
            m.remove(f);
        }
        (Pe::Key(k), Value::Array(a)) => a.retain(|i| !key_matches(i, k)),
        (Pe::Value(v), Value::Array(a)) => a.retain(|i| !value_matches(i, v)),
        _ => return,
    }
    let now_empty = get_at(obj, parent_path).is_some_and(|p| match p {
        Value::Object(m) => m.is_empty(),
        Value::Array(a) => a.is_empty(),
        _ => false,
    });
    if now_empty && !parent_path.is_empty() {
        remove_at(obj, parent_path);
    }
}

/// Merge an applied configuration into `live`: maps recursively, associative lists by key, set
/// lists by union, everything else replaced.
pub fn merge_applied(live: &mut Value, applied: &Value, path: &mut Path, lists: &Lists<'_>) {
    match (live, applied) {
        (Value::Object(l), Value::Object(a)) if !lists.atomic(path) => {
            for (k, av) in a {
                path.push(Pe::Field(k.clone()));
                match l.get_mut(k) {
                    Some(lv) => merge_applied(lv, av, path, lists),
                    None => {
                        l.insert(k.clone(), av.clone());
                    }
                }
                path.pop();
            }
        }
        (Value::Array(l), Value::Array(a)) => match lists.kind(path, a) {
            ListKind::Set if l.iter().all(|i| !i.is_object()) => {
                for i in a {
                    if !l.contains(i) {
                        l.push(i.clone());
                    }
                }
            }
            ListKind::Map(keys) if l.iter().all(|i| keys.iter().all(|k| i.get(k).is_some())) => {
                for ai in a {
                    match l.iter_mut().find(|li| same_key(li, ai, &keys)) {
                        Some(li) => merge_applied(li, ai, path, lists),
                        None => l.push(ai.clone()),
                    }
                }
            }
            _ => *l = a.clone(),
        },
        (l, a) => *l = a.clone(),
    }
}

/// One `managedFields` entry.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// Manager name.
    pub manager: String,
    /// `Apply` or `Update`.
    pub operation: String,
    /// apiVersion the manager used.
    pub api_version: String,
    /// Last time (RFC 3339).
    pub time: String,
    /// `status` for status-subresource writes.
    pub subresource: String,
    /// Owned leaf paths.
    pub fields: FieldSet,
}

/// Parse `metadata.managedFields`.
pub fn entries(obj: &Value) -> Vec<Entry> {
    let s = |e: &Value, f: &str| e.get(f).and_then(Value::as_str).unwrap_or("").to_string();
    obj.pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|e| Entry {
                    manager: s(e, "manager"),
                    operation: s(e, "operation"),
                    api_version: s(e, "apiVersion"),
                    time: s(e, "time"),
                    subresource: s(e, "subresource"),
                    fields: e.get("fieldsV1").map(from_fields_v1).unwrap_or_default(),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Write entries back as `metadata.managedFields` (removed when empty).
pub fn set_entries(obj: &mut Value, list: &[Entry]) {
    let list: Vec<Value> = list
        .iter()
        .filter(|e| !e.fields.is_empty())
        .map(|e| {
            let mut v = json!({
                "manager": e.manager, "operation": e.operation, "apiVersion": e.api_version,
                "time": e.time, "fieldsType": "FieldsV1", "fieldsV1": to_fields_v1(&e.fields),
            });
            if !e.subresource.is_empty() {
                v["subresource"] = json!(e.subresource);
            }
            v
        })
        .collect();
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        if list.is_empty() {
            meta.remove("managedFields");
        } else {
            meta.insert("managedFields".into(), Value::Array(list));
        }
    }
}

/// Render a path the way conflict messages do: `.spec.replicas`, `.data.key`,
/// `.spec.containers[name="a"].image`.
pub fn display_path(p: &[Pe]) -> String {
    let mut s = String::new();
    for pe in p {
        match pe {
            Pe::Field(f) => {
                s.push('.');
                s.push_str(f);
            }
            Pe::Key(k) => {
                let inner = serde_json::from_str::<Map<String, Value>>(k)
                    .map(|m| {
                        m.iter()
                            .map(|(k, v)| format!("{k}={v}"))
                            .collect::<Vec<_>>()
                            .join(",")
                    })
                    .unwrap_or_default();
                s.push_str(&format!("[{inner}]"));
            }
            Pe::Value(v) => s.push_str(&format!("[={v}]")),
        }
    }
    s
}

/// `name` inside `k:{"name":…}`: removed only together with its item.
fn is_key_field(p: &[Pe]) -> bool {
    match p {
        [.., Pe::Key(k), Pe::Field(f)] => {
            serde_json::from_str::<Map<String, Value>>(k).is_ok_and(|m| m.contains_key(f))
        }
        _ => false,
    }
}

fn related(a: &[Pe], b: &[Pe]) -> bool {
    a.starts_with(b) || b.starts_with(a)
}

/// One conflict: another manager owns a field the apply would change.
#[derive(Debug, Clone, PartialEq)]
pub struct Conflict {
    /// The other manager.
    pub manager: String,
    /// Its apiVersion.
    pub api_version: String,
    /// The field.
    pub path: Path,
}

/// Inputs of one apply.
pub struct ApplyRequest<'a> {
    /// The applied configuration (whole object as sent).
    pub applied: &'a Value,
    /// `fieldManager`.
    pub manager: &'a str,
    /// `force=true`.
    pub force: bool,
    /// apiVersion of the request.
    pub api_version: &'a str,
    /// Which part is addressed.
    pub scope: Scope,
    /// Timestamp for the entry.
    pub now: &'a str,
    /// List types.
    pub lists: Lists<'a>,
}

/// Apply onto `base` (the live object, or a fresh skeleton for a create). Returns the new object
/// with managedFields updated, or the conflicts.
pub fn apply(base: &Value, req: &ApplyRequest<'_>) -> Result<Value, Vec<Conflict>> {
    let sub = if req.scope == Scope::Status {
        "status"
    } else {
        ""
    };
    let view = managed_view(req.applied, req.scope);
    let applied_fields = fields_of(&view, &req.lists);
    let mut list = entries(base);
    let mine =
        |e: &Entry| e.manager == req.manager && e.operation == "Apply" && e.subresource == sub;

    // Conflicts: another manager owns a related path whose value the apply changes.
    let mut conflicts = Vec::new();
    let mut merged = base.clone();
    merge_applied(&mut merged, &view, &mut Vec::new(), &req.lists);
    for e in list.iter().filter(|e| !mine(e)) {
        for p in &applied_fields {
            if let Some(q) = e.fields.iter().find(|q| related(p, q)) {
                let at = if q.len() < p.len() { q } else { p };
                if get_at(base, at) != get_at(&merged, at) {
                    conflicts.push(Conflict {
                        manager: e.manager.clone(),
                        api_version: e.api_version.clone(),
                        path: p.clone(),
                    });
                }
            }
        }
    }
    conflicts.dedup();
    if !conflicts.is_empty() {
        if !req.force {
            return Err(conflicts);
        }
        for e in list.iter_mut().filter(|e| !mine(e)) {
            for c in conflicts.iter().filter(|c| c.manager == e.manager) {
                e.fields.retain(|q| !related(q, &c.path));
            }
        }
    }

    let prev = list
        .iter()
        .find(|e| mine(e))
        .map(|e| e.fields.clone())
        .unwrap_or_default();
    let mut obj = merged;
    // Remove what this manager applied before and no longer applies, unless someone else owns it.
    let mut gone: Vec<&Path> = prev.difference(&applied_fields).collect();
    gone.sort_by_key(|p| p.len());
    let mut removed: Vec<&Path> = Vec::new();
    for p in gone {
        if removed.iter().any(|r| p.starts_with(r)) || is_key_field(p) {
            continue;
        }
        let kept = applied_fields.iter().any(|q| q.starts_with(p))
            || list
                .iter()
                .filter(|e| !mine(e))
                .any(|e| e.fields.iter().any(|q| related(p, q)));
        if !kept {
            remove_at(&mut obj, p);
            removed.push(p);
        }
    }
    let entry = Entry {
        manager: req.manager.into(),
        operation: "Apply".into(),
        api_version: req.api_version.into(),
        time: req.now.into(),
        subresource: sub.into(),
        fields: applied_fields,
    };
    match list.iter_mut().find(|e| mine(e)) {
        Some(e) => {
            if e.fields == entry.fields && e.api_version == entry.api_version {
                // Keep the old timestamp so an unchanged apply is a no-op.
                let time = e.time.clone();
                *e = Entry { time, ..entry };
            } else {
                *e = entry;
            }
        }
        None => list.push(entry),
    }
    list.retain(|e| !e.fields.is_empty());
    set_entries(&mut obj, &list);
    Ok(obj)
}

/// The manager kube gives the fields an object had before its first apply.
pub const BEFORE_FIRST_APPLY: &str = "before-first-apply";

/// Before applying to an existing object without managedFields, kube records every field it
/// has (in `scope`) as set by an `Update` of [`BEFORE_FIRST_APPLY`], so the apply has owners to
/// merge with. Objects that already have managedFields are left alone.
pub fn adopt_unmanaged(
    obj: &mut Value,
    api_version: &str,
    scope: Scope,
    now: &str,
    lists: &Lists<'_>,
) {
    if entries(obj).is_empty() {
        track_update(
            Some(&json!({})),
            obj,
            BEFORE_FIRST_APPLY,
            api_version,
            scope,
            now,
            lists,
        );
    }
}

/// Record a non-apply write by `manager`: leaves whose value changed from `old` to `new` become
/// its own (operation `Update`), other managers lose them, and paths that no longer exist are
/// dropped from every entry. `new` keeps managedFields from the request if it changed them.
pub fn track_update(
    old: Option<&Value>,
    new: &mut Value,
    manager: &str,
    api_version: &str,
    scope: Scope,
    now: &str,
    lists: &Lists<'_>,
) {
    let sub = if scope == Scope::Status { "status" } else { "" };
    let requested = new.pointer("/metadata/managedFields").cloned();
    let old_mf = old
        .and_then(|o| o.pointer("/metadata/managedFields"))
        .cloned();
    let mut list = match (&requested, &old_mf) {
        (Some(r), o) if Some(r) != o.as_ref() => entries(new),
        _ => old.map(entries).unwrap_or_default(),
    };
    if requested
        .as_ref()
        .and_then(Value::as_array)
        .is_some_and(Vec::is_empty)
    {
        // An explicit empty list resets ownership (kube: "managedFields: []" clears it).
        if let Some(m) = new.get_mut("metadata").and_then(Value::as_object_mut) {
            m.remove("managedFields");
        }
        return;
    }
    // kube's field manager does not start tracking an existing object that has no managed
    // fields on a non-apply write; only an apply adopts it (see [`adopt_unmanaged`]).
    let existing = old
        .and_then(|o| o.pointer("/metadata/uid"))
        .is_some_and(|u| u != "");
    if existing && list.is_empty() {
        set_entries(new, &[]);
        return;
    }
    // A write to /status also owns the metadata it changed: only the workload kinds let
    // /status change metadata (the handler resets it for the others, so nothing shows here).
    let new_view = match scope {
        Scope::Status => {
            let mut v = managed_view(new, Scope::Whole);
            if let Some(m) = v.as_object_mut() {
                m.retain(|k, _| k == "status" || k == "metadata");
            }
            v
        }
        _ => managed_view(new, scope),
    };
    let changed: FieldSet = fields_of(&new_view, lists)
        .into_iter()
        .filter(|p| old.is_none_or(|o| get_at(o, p) != get_at(new, p)))
        .collect();
    for e in list.iter_mut() {
        e.fields
            .retain(|p| get_at(new, p).is_some() && !changed.contains(p));
    }
    if !changed.is_empty() {
        let mine =
            |e: &Entry| e.manager == manager && e.operation == "Update" && e.subresource == sub;
        match list.iter_mut().find(|e| mine(e)) {
            Some(e) => {
                e.fields.extend(changed);
                e.time = now.into();
                e.api_version = api_version.into();
            }
            None => list.push(Entry {
                manager: manager.into(),
                operation: "Update".into(),
                api_version: api_version.into(),
                time: now.into(),
                subresource: sub.into(),
                fields: changed,
            }),
        }
    }
    list.retain(|e| !e.fields.is_empty());
    set_entries(new, &list);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req<'a>(applied: &'a Value, manager: &'a str, force: bool) -> ApplyRequest<'a> {
        ApplyRequest {
            applied,
            manager,
            force,
            api_version: "v1",
            scope: Scope::Whole,
            now: "t",
            lists: Lists::default(),
        }
    }

    fn cm(data: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "n"}, "data": data})
    }

    #[test]
    fn fields_v1_round_trip() {
        let v = json!({"metadata": {"labels": {"a": "1"}, "finalizers": ["x"]}, "spec": {"containers": [{"name": "c", "image": "i"}], "args": ["1"]}});
        let f = fields_of(&v, &Lists::default());
        let tree = to_fields_v1(&f);
        assert_eq!(
            tree["f:spec"]["f:containers"]["k:{\"name\":\"c\"}"]["."],
            json!({})
        );
        assert_eq!(tree["f:metadata"]["f:finalizers"]["v:\"x\""], json!({}));
        assert_eq!(tree["f:spec"]["f:args"], json!({}));
        assert_eq!(from_fields_v1(&tree), f);
    }

    #[test]
    fn omitted_fields_are_removed_and_others_kept() {
        let base = cm(json!({}));
        let a1 = cm(json!({"a": "1", "b": "2"}));
        let o1 = apply(&base, &req(&a1, "m1", false)).unwrap();
        let a2 = cm(json!({"z": "9"}));
        let o2 = apply(&o1, &req(&a2, "m2", false)).unwrap();
        let a3 = cm(json!({"a": "1"}));
        let o3 = apply(&o2, &req(&a3, "m1", false)).unwrap();
        assert_eq!(o3["data"], json!({"a": "1", "z": "9"}));
        assert_eq!(o3["metadata"]["managedFields"].as_array().unwrap().len(), 2);
        // Unchanged re-apply is identical (no write needed).
        assert_eq!(apply(&o3, &req(&a3, "m1", false)).unwrap(), o3);
    }

    #[test]
    fn conflicts_and_force() {
        let base = cm(json!({}));
        let o1 = apply(&base, &req(&cm(json!({"a": "1"})), "m1", false)).unwrap();
        // Same value: shared ownership, no conflict.
        let shared = apply(&o1, &req(&cm(json!({"a": "1"})), "m2", false)).unwrap();
        assert_eq!(entries(&shared).len(), 2);
        let err = apply(&o1, &req(&cm(json!({"a": "2"})), "m2", false)).unwrap_err();
        assert_eq!(err[0].manager, "m1");
        assert_eq!(display_path(&err[0].path), ".data.a");
        let forced = apply(&o1, &req(&cm(json!({"a": "2"})), "m2", true)).unwrap();
        assert_eq!(forced["data"]["a"], "2");
        let es = entries(&forced);
        assert_eq!(es.len(), 1);
        assert_eq!(es[0].manager, "m2");
    }

    #[test]
    fn update_takes_ownership() {
        let o1 = apply(&cm(json!({})), &req(&cm(json!({"a": "1"})), "m1", false)).unwrap();
        let mut upd = o1.clone();
        upd["data"]["a"] = json!("changed");
        track_update(
            Some(&o1),
            &mut upd,
            "kubectl-edit",
            "v1",
            Scope::Whole,
            "t2",
            &Lists::default(),
        );
        let es = entries(&upd);
        assert_eq!(es.len(), 1);
        assert_eq!(es[0].operation, "Update");
        let err = apply(&upd, &req(&cm(json!({"a": "1"})), "m1", false)).unwrap_err();
        assert_eq!(err[0].manager, "kubectl-edit");
    }

    #[test]
    fn unmanaged_objects_stay_so_until_an_apply_adopts_them() {
        let mut live = cm(json!({"a": "1"}));
        live["metadata"]["uid"] = json!("u");
        let mut upd = live.clone();
        upd["data"]["b"] = json!("2");
        let lists = Lists::default();
        track_update(Some(&live), &mut upd, "ed", "v1", Scope::Whole, "t", &lists);
        assert!(entries(&upd).is_empty(), "{upd}");
        adopt_unmanaged(&mut upd, "v1", Scope::Whole, "t", &lists);
        let es = entries(&upd);
        assert_eq!(es.len(), 1);
        assert_eq!(
            (es[0].manager.as_str(), es[0].operation.as_str()),
            (BEFORE_FIRST_APPLY, "Update")
        );
        assert_eq!(
            to_fields_v1(&es[0].fields),
            json!({"f:data": {"f:a": {}, "f:b": {}}})
        );
        // Only once: an object with managedFields is left alone.
        let before = upd.clone();
        adopt_unmanaged(&mut upd, "v1", Scope::Whole, "t2", &lists);
        assert_eq!(upd, before);
    }

    #[test]
    fn a_crd_schema_is_applied_as_a_whole_over_another_managers() {
        let crd = |schema: Value| {
            json!({"apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition", "metadata": {"name": "xs.example.com"},
            "spec": {"versions": [{"name": "v1", "schema": {"openAPIV3Schema": schema}}]}})
        };
        let loose = json!({"type": "object", "properties": {
            "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}});
        let strict = json!({"type": "object", "properties": {
            "status": {"type": "object", "properties": {"a": {"type": "string"}}}}});
        let mut live = crd(json!({}));
        live["metadata"]["uid"] = json!("u");
        let first = apply(&live, &req(&crd(strict.clone()), "cvo", false)).unwrap();
        // Another manager replaces the schema (a test putting its stand-in back).
        let mut replaced = first.clone();
        replaced["spec"]["versions"][0]["schema"]["openAPIV3Schema"] = loose;
        let lists = Lists::default();
        track_update(
            Some(&first),
            &mut replaced,
            "test",
            "apiextensions.k8s.io/v1",
            Scope::Whole,
            "t2",
            &lists,
        );
        let again = apply(&replaced, &req(&crd(strict.clone()), "cvo", true)).unwrap();
        assert_eq!(
            again["spec"]["versions"][0]["schema"]["openAPIV3Schema"], strict,
            "nothing of the other schema is left (kube: JSONSchemaProps is atomic)"
        );
    }

    #[test]
    fn keyed_lists_merge_and_remove_items() {
        let dep = |cs: Value| json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": {"template": {"spec": {"containers": cs}}}});
        let o1 = apply(
            &dep(json!([])),
            &req(
                &dep(json!([{"name": "a", "image": "1"}, {"name": "b", "image": "2"}])),
                "m",
                false,
            ),
        )
        .unwrap();
        let o2 = apply(
            &o1,
            &req(&dep(json!([{"name": "b", "image": "3"}])), "m", false),
        )
        .unwrap();
        assert_eq!(
            o2["spec"]["template"]["spec"]["containers"],
            json!([{"name": "b", "image": "3"}])
        );
    }

    #[test]
    fn crd_lists_are_atomic_unless_the_schema_says_map() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "atomic": {"type": "array", "items": {"type": "object"}},
            "keyed": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["id"], "items": {"type": "object"}}}}}});
        let lists = Lists {
            schema: Some(&schema),
        };
        let v = json!({"spec": {"atomic": [{"name": "a"}], "keyed": [{"id": 1, "v": 2}]}});
        let f = fields_of(&v, &lists);
        let tree = to_fields_v1(&f);
        assert_eq!(tree["f:spec"]["f:atomic"], json!({}));
        assert_eq!(tree["f:spec"]["f:keyed"]["k:{\"id\":1}"]["f:v"], json!({}));
    }

    #[test]
    fn builtin_merge_keys() {
        assert_eq!(
            builtin_list_keys(
                "volumeMounts",
                &[
                    json!({"name": "v", "mountPath": "/a"}),
                    json!({"name": "v", "mountPath": "/b"})
                ]
            ),
            Some(vec!["mountPath".to_string()])
        );
        assert_eq!(
            builtin_list_keys("env", &[json!({"name": "A"}), json!({"name": "A"})]),
            None
        );
        assert_eq!(
            builtin_list_keys("ports", &[json!({"containerPort": 80})]),
            Some(vec!["containerPort".to_string(), "protocol".to_string()])
        );
        assert_eq!(builtin_list_keys("args", &[json!("x")]), None);
    }

    #[test]
    fn finalizers_are_a_set() {
        let mk = |f: Value| json!({"metadata": {"name": "x", "finalizers": f}});
        let o1 = apply(
            &mk(json!(["other"])),
            &req(&mk(json!(["mine"])), "m", false),
        )
        .unwrap();
        assert_eq!(o1["metadata"]["finalizers"], json!(["other", "mine"]));
    }
}
