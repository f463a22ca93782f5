//! Label selectors evaluated on an object's labels, as the API server evaluates them: every
//! `matchLabels` entry AND every `matchExpressions` requirement (`In`, `NotIn`, `Exists`,
//! `DoesNotExist`). An empty selector matches everything.
//!
//! Fails closed: a selector the API server would refuse — an unknown operator, `In`/`NotIn`
//! without values, `Exists`/`DoesNotExist` with values — is an error for every object, never a
//! match nor a silent non-match, so a caller cannot act on a guess. Callers that take several
//! objects call [`validate`] first, so the error does not depend on which objects there are.
//!
//! The in-memory API server has its own matcher on raw JSON (it stays self-contained).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};

/// A selector the API server would refuse, in words.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    #[error(
        "the label selector's operator {operator:?} (key {key:?}) is unknown: use In, NotIn, Exists or DoesNotExist"
    )]
    UnknownOperator { key: String, operator: String },
    #[error(
        "the label selector's requirement {key:?} {operator} has no values: list at least one, or use Exists / DoesNotExist"
    )]
    MissingValues { key: String, operator: String },
    #[error(
        "the label selector's requirement {key:?} {operator} has values: remove them, or use In / NotIn"
    )]
    UnexpectedValues { key: String, operator: String },
}

/// What one requirement asks of a label's value.
enum Op<'a> {
    In(&'a [String]),
    NotIn(&'a [String]),
    Exists,
    DoesNotExist,
}

fn op(req: &LabelSelectorRequirement) -> Result<Op<'_>, SelectorError> {
    let values = req.values.as_deref().unwrap_or(&[]);
    let err = |make: fn(String, String) -> SelectorError| {
        Err(make(req.key.clone(), req.operator.clone()))
    };
    let missing = |key, operator| SelectorError::MissingValues { key, operator };
    let unexpected = |key, operator| SelectorError::UnexpectedValues { key, operator };
    match req.operator.as_str() {
        "In" | "NotIn" if values.is_empty() => err(missing),
        "Exists" | "DoesNotExist" if !values.is_empty() => err(unexpected),
        "In" => Ok(Op::In(values)),
        "NotIn" => Ok(Op::NotIn(values)),
        "Exists" => Ok(Op::Exists),
        "DoesNotExist" => Ok(Op::DoesNotExist),
        _ => err(|key, operator| SelectorError::UnknownOperator { key, operator }),
    }
}

/// True when the selector has neither `matchLabels` nor `matchExpressions` entries (it
/// matches everything).
pub fn is_empty(sel: &LabelSelector) -> bool {
    sel.match_labels.as_ref().is_none_or(|m| m.is_empty())
        && sel.match_expressions.as_ref().is_none_or(|e| e.is_empty())
}

/// Whether the API server would accept the selector (see the module doc).
pub fn validate(sel: &LabelSelector) -> Result<(), SelectorError> {
    sel.match_expressions
        .iter()
        .flatten()
        .try_for_each(|req| op(req).map(drop))
}

/// Whether `labels` match `sel`; an invalid selector is an error whatever the labels.
pub fn matches(
    sel: &LabelSelector,
    labels: &BTreeMap<String, String>,
) -> Result<bool, SelectorError> {
    validate(sel)?;
    let labels_match = sel
        .match_labels
        .iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v));
    if !labels_match {
        return Ok(false);
    }
    for req in sel.match_expressions.iter().flatten() {
        let got = labels.get(&req.key);
        let ok = match op(req)? {
            Op::In(values) => got.is_some_and(|g| values.contains(g)),
            Op::NotIn(values) => got.is_none_or(|g| !values.contains(g)),
            Op::Exists => got.is_some(),
            Op::DoesNotExist => got.is_none(),
        };
        if !ok {
            return Ok(false);
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn req(key: &str, operator: &str, values: &[&str]) -> LabelSelectorRequirement {
        LabelSelectorRequirement {
            key: key.into(),
            operator: operator.into(),
            values: (!values.is_empty()).then(|| values.iter().map(|v| v.to_string()).collect()),
        }
    }

    fn expr(reqs: Vec<LabelSelectorRequirement>) -> LabelSelector {
        LabelSelector {
            match_expressions: Some(reqs),
            ..Default::default()
        }
    }

    #[test]
    fn match_labels_must_all_be_present_and_equal() {
        let sel = LabelSelector {
            match_labels: Some(labels(&[("a", "1"), ("b", "2")])),
            ..Default::default()
        };
        assert_eq!(
            matches(&sel, &labels(&[("a", "1"), ("b", "2"), ("c", "3")])),
            Ok(true)
        );
        assert_eq!(matches(&sel, &labels(&[("a", "1")])), Ok(false));
        assert_eq!(matches(&sel, &labels(&[("a", "1"), ("b", "x")])), Ok(false));
    }

    #[test]
    fn every_operator_as_the_api_server_reads_it() {
        let team_x = labels(&[("team", "x")]);
        let team_y = labels(&[("team", "y")]);
        let none = labels(&[]);
        let cases = [
            (req("team", "In", &["x", "z"]), [true, false, false]),
            (req("team", "NotIn", &["x"]), [false, true, true]),
            (req("team", "Exists", &[]), [true, true, false]),
            (req("team", "DoesNotExist", &[]), [false, false, true]),
        ];
        for (r, want) in cases {
            let sel = expr(vec![r.clone()]);
            let got: Vec<_> = [&team_x, &team_y, &none]
                .iter()
                .map(|l| matches(&sel, l).unwrap())
                .collect();
            assert_eq!(got, want, "{} {}", r.key, r.operator);
        }
    }

    #[test]
    fn labels_and_expressions_are_anded_and_empty_matches_all() {
        let sel = LabelSelector {
            match_labels: Some(labels(&[("env", "prod")])),
            match_expressions: Some(vec![req("team", "In", &["x"])]),
        };
        assert_eq!(
            matches(&sel, &labels(&[("env", "prod"), ("team", "x")])),
            Ok(true)
        );
        assert_eq!(
            matches(&sel, &labels(&[("env", "prod"), ("team", "y")])),
            Ok(false)
        );
        assert_eq!(matches(&sel, &labels(&[("team", "x")])), Ok(false));
        let empty = LabelSelector::default();
        assert!(is_empty(&empty) && !is_empty(&sel));
        assert_eq!(matches(&empty, &labels(&[])), Ok(true));
        assert!(is_empty(&expr(vec![])));
    }

    #[test]
    fn an_invalid_selector_is_an_error_for_every_object() {
        let unknown = expr(vec![req("team", "Bogus", &["x"])]);
        for l in [labels(&[]), labels(&[("team", "x")])] {
            let err = matches(&unknown, &l).unwrap_err();
            assert!(
                matches!(err, SelectorError::UnknownOperator { .. }),
                "{err}"
            );
            assert!(err.to_string().contains("\"Bogus\""), "{err}");
        }
        // Even when matchLabels already rules the object out.
        let ruled_out = LabelSelector {
            match_labels: Some(labels(&[("team", "nobody")])),
            ..unknown.clone()
        };
        assert!(matches(&ruled_out, &labels(&[])).is_err());
        assert!(validate(&unknown).is_err());
        assert_eq!(
            validate(&expr(vec![req("team", "In", &[])])),
            Err(SelectorError::MissingValues {
                key: "team".into(),
                operator: "In".into()
            })
        );
        assert!(matches!(
            validate(&expr(vec![req("team", "NotIn", &[])])),
            Err(SelectorError::MissingValues { .. })
        ));
        assert!(matches!(
            validate(&expr(vec![req("team", "Exists", &["x"])])),
            Err(SelectorError::UnexpectedValues { .. })
        ));
        assert_eq!(validate(&expr(vec![req("team", "Exists", &[])])), Ok(()));
    }
}
