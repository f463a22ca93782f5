//! Label selectors (equality- and set-based) and the field selectors every type supports
//! (`metadata.name`, `metadata.namespace`), parsed from list/watch query strings.

use serde_json::Value;

use super::errors::ApiError;

#[derive(Debug, Clone, PartialEq)]
enum Req {
    Eq(String, String),
    NotEq(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

/// A parsed label selector; the empty selector matches everything.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LabelSelector(Vec<Req>);

/// Split on commas that are not inside parentheses.
fn split_top(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

fn valid_key(k: &str) -> bool {
    !k.is_empty()
        && k.len() <= 317
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c))
}

impl LabelSelector {
    /// Parse `a=b,c!=d,e in (f,g),h notin (i),j,!k`.
    pub fn parse(s: &str) -> Result<Self, ApiError> {
        let bad =
            |why: &str| ApiError::bad_request(format!("unable to parse requirement: {why}: {s:?}"));
        let mut reqs = Vec::new();
        for part in split_top(s) {
            let p = part.trim();
            if p.is_empty() {
                continue;
            }
            let set_op = |op: &str| -> Option<(String, Vec<String>)> {
                let idx = p.find(op)?;
                let key = p[..idx].trim().to_string();
                let rest = p[idx + op.len()..].trim();
                let inner = rest.strip_prefix('(')?.strip_suffix(')')?;
                Some((
                    key,
                    inner
                        .split(',')
                        .map(|v| v.trim().to_string())
                        .filter(|v| !v.is_empty())
                        .collect(),
                ))
            };
            let r = if let Some((k, vs)) = set_op(" notin ") {
                Req::NotIn(k, vs)
            } else if let Some((k, vs)) = set_op(" in ") {
                Req::In(k, vs)
            } else if let Some((k, v)) = p.split_once("!=") {
                Req::NotEq(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = p.split_once("==") {
                Req::Eq(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = p.split_once('=') {
                Req::Eq(k.trim().into(), v.trim().into())
            } else if let Some(k) = p.strip_prefix('!') {
                Req::NotExists(k.trim().into())
            } else {
                Req::Exists(p.into())
            };
            let key = match &r {
                Req::Eq(k, _)
                | Req::NotEq(k, _)
                | Req::In(k, _)
                | Req::NotIn(k, _)
                | Req::Exists(k)
                | Req::NotExists(k) => k,
            };
            if !valid_key(key) {
                return Err(bad("invalid label key"));
            }
            reqs.push(r);
        }
        Ok(LabelSelector(reqs))
    }

    /// Does an object with these labels match?
    pub fn matches(&self, labels: Option<&serde_json::Map<String, Value>>) -> bool {
        let get = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
        self.0.iter().all(|r| match r {
            Req::Eq(k, v) => get(k) == Some(v.as_str()),
            Req::NotEq(k, v) => get(k) != Some(v.as_str()),
            Req::In(k, vs) => get(k).is_some_and(|x| vs.iter().any(|v| v == x)),
            Req::NotIn(k, vs) => get(k).is_none_or(|x| vs.iter().all(|v| v != x)),
            Req::Exists(k) => get(k).is_some(),
            Req::NotExists(k) => get(k).is_none(),
        })
    }

    /// Matches everything.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// A parsed field selector over `metadata.name` / `metadata.namespace`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FieldSelector(Vec<(String, bool, String)>);

impl FieldSelector {
    /// Parse `metadata.name=x,metadata.namespace!=y`; other fields are a 400 like kube-apiserver.
    pub fn parse(s: &str, kind: &str) -> Result<Self, ApiError> {
        let mut out = Vec::new();
        for p in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (f, eq, v) = if let Some((f, v)) = p.split_once("!=") {
                (f, false, v)
            } else if let Some((f, v)) = p.split_once("==") {
                (f, true, v)
            } else if let Some((f, v)) = p.split_once('=') {
                (f, true, v)
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid selector: '{s}'; can't understand '{p}'"
                )));
            };
            let f = f.trim();
            if f != "metadata.name" && f != "metadata.namespace" {
                return Err(ApiError::bad_request(format!(
                    "field label not supported: {f} (kind {kind}: only metadata.name and metadata.namespace are served in memory)"
                )));
            }
            out.push((f.to_string(), eq, v.trim().to_string()));
        }
        Ok(FieldSelector(out))
    }

    /// Does this object match?
    pub fn matches(&self, obj: &Value) -> bool {
        self.0.iter().all(|(f, eq, v)| {
            let actual = match f.as_str() {
                "metadata.name" => obj.pointer("/metadata/name"),
                _ => obj.pointer("/metadata/namespace"),
            }
            .and_then(Value::as_str)
            .unwrap_or("");
            (actual == v) == *eq
        })
    }

    /// An exact `metadata.name=` requirement, used to turn a list into a point lookup.
    pub fn exact_name(&self) -> Option<&str> {
        self.0
            .iter()
            .find(|(f, eq, _)| f == "metadata.name" && *eq)
            .map(|(_, _, v)| v.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn labels(v: Value) -> serde_json::Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn equality_and_sets() {
        let l = labels(json!({"app": "web", "tier": "front"}));
        let m = |s: &str| LabelSelector::parse(s).unwrap().matches(Some(&l));
        assert!(m("app=web"));
        assert!(m("app==web,tier"));
        assert!(!m("app!=web"));
        assert!(m("app in (web, db),tier notin (back)"));
        assert!(!m("app notin (web)"));
        assert!(m("!missing"));
        assert!(!m("missing"));
        assert!(m("missing notin (x)"));
        assert!(m(""));
        assert!(!LabelSelector::parse("env in (a)").unwrap().matches(None));
    }

    #[test]
    fn bad_label_selector_is_400() {
        assert_eq!(LabelSelector::parse("a b=c").unwrap_err().code, 400);
    }

    #[test]
    fn field_selector() {
        let o = json!({"metadata": {"name": "a", "namespace": "ns"}});
        assert!(
            FieldSelector::parse("metadata.name=a", "X")
                .unwrap()
                .matches(&o)
        );
        assert!(
            !FieldSelector::parse("metadata.namespace!=ns", "X")
                .unwrap()
                .matches(&o)
        );
        assert_eq!(FieldSelector::parse("spec.x=1", "X").unwrap_err().code, 400);
    }
}
