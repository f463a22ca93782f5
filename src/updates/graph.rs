//! The update graph an update service answers (Cincinnati's v1 graph format) and what it
//! offers a cluster at a version, read as OpenShift's cluster-version operator reads it:
//!
//! ```json
//! {"nodes": [{"version": "1.4.0", "payload": "registry.example.com/cvo:1.4.0",
//!             "metadata": {"url": "https://…", "io.openshift.upgrades.graph.release.channels": "stable-1,fast-1"}}],
//!  "edges": [[0, 1]],
//!  "conditionalEdges": [{"edges": [{"from": "1.4.0", "to": "1.6.0"}],
//!                        "risks": [{"url": "https://…", "name": "R", "message": "…",
//!                                   "matchingRules": [{"type": "Always"}]}]}]}
//! ```
//!
//! Edges are pairs of node indexes; conditional edges name versions. The updates of a
//! cluster at version V are the nodes an edge leads to from V's node, and the conditional
//! edges from V with their risks. As the CVO does: an update that is also conditional stays
//! only conditional; a target named by more than one conditional edge is dropped; matching
//! rules of a type that is not known (`Always`, `PromQL`) or not valid are pruned, and a
//! conditional update left with a risk without rules is dropped. Beyond the CVO, everything
//! OpenShift's ClusterVersion schema would refuse (a risk without name, message or URL, a
//! duplicate risk name, no risks at all) drops that conditional update too, and an edge
//! that points outside the nodes or a node without payload is an invalid response, never a
//! crash. Pure: bytes in, lists out.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::Failure;

/// One release, as `status.availableUpdates[]` and `conditionalUpdates[].release` hold it
/// (openshift/api's `Release`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Release {
    pub version: String,
    pub image: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channels: Option<Vec<String>>,
}

/// A risk of a conditional update (openshift/api's `ConditionalUpdateRisk`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Risk {
    #[serde(default)]
    pub url: String,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub message: String,
    #[serde(default, rename = "matchingRules")]
    pub matching_rules: Vec<Rule>,
}

/// A matching rule (openshift/api's `ClusterCondition`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rule {
    #[serde(default, rename = "type")]
    pub type_: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub promql: Option<PromQl>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromQl {
    #[serde(default)]
    pub promql: String,
}

/// What the graph offers the cluster: updates, and conditional updates with their risks
/// (not yet evaluated).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Offered {
    pub updates: Vec<Release>,
    pub conditional: Vec<(Release, Vec<Risk>)>,
}

#[derive(Deserialize)]
struct Graph {
    #[serde(default)]
    nodes: Vec<Node>,
    #[serde(default)]
    edges: Vec<[i64; 2]>,
    #[serde(default, rename = "conditionalEdges")]
    conditional_edges: Vec<ConditionalEdges>,
}

#[derive(Deserialize)]
struct Node {
    version: String,
    #[serde(default)]
    payload: String,
    #[serde(default)]
    metadata: BTreeMap<String, Value>,
}

#[derive(Deserialize)]
struct ConditionalEdges {
    #[serde(default)]
    edges: Vec<ConditionalEdge>,
    #[serde(default)]
    risks: Vec<Risk>,
}

#[derive(Deserialize)]
struct ConditionalEdge {
    #[serde(default)]
    from: String,
    #[serde(default)]
    to: String,
}

const CHANNELS: &str = "io.openshift.upgrades.graph.release.channels";
const ARCHITECTURE: &str = "release.openshift.io/architecture";

fn invalid(message: String) -> Failure {
    Failure::new("ResponseInvalid", message)
}

/// What the graph in `body` offers a cluster at `version` in `channel`.
pub fn offered(body: &[u8], version: &semver::Version, channel: &str) -> Result<Offered, Failure> {
    if body.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return Err(invalid("the response is not a JSON object".into()));
    }
    let graph: Graph = serde_json::from_slice(body).map_err(|e| invalid(e.to_string()))?;
    let mut versions = Vec::with_capacity(graph.nodes.len());
    for node in &graph.nodes {
        let v = crate::version::parse(&node.version).map_err(|e| {
            invalid(format!(
                "node version {:?} is not a semantic version: {e}",
                node.version
            ))
        })?;
        versions.push(v);
    }
    let Some(current) = versions
        .iter()
        .position(|v| v.cmp_precedence(version).is_eq())
    else {
        return Err(Failure::new(
            "VersionNotFound",
            format!(
                "currently reconciling cluster version {version} not found in the {channel:?} channel"
            ),
        ));
    };
    release(&graph.nodes[current], &versions[current])
        .map_err(|e| invalid(format!("invalid current node: {e}")))?;
    let count = graph.nodes.len();
    let mut updates = Vec::new();
    for [from, to] in &graph.edges {
        let index = |i: i64| usize::try_from(i).ok().filter(|i| *i < count);
        let (Some(from), Some(to)) = (index(*from), index(*to)) else {
            return Err(invalid(format!(
                "edge [{from}, {to}] points outside the {count} nodes"
            )));
        };
        if from == current {
            let update = release(&graph.nodes[to], &versions[to])
                .map_err(|e| invalid(format!("invalid recommended update node: {e}")))?;
            updates.push(update);
        }
    }
    // Conditional edges name versions as text, compared as the CVO compares them.
    let mut by_version: HashMap<String, usize> = HashMap::new();
    for (i, v) in versions.iter().enumerate() {
        by_version.entry(v.to_string()).or_insert(i);
    }
    let current_text = version.to_string();
    let mut conditional: Vec<(Release, Vec<Risk>)> = Vec::new();
    for group in &graph.conditional_edges {
        for edge in group.edges.iter().filter(|e| e.from == current_text) {
            let Some(&target) = by_version.get(&edge.to) else {
                return Err(invalid(format!(
                    "no node for conditional update {}",
                    edge.to
                )));
            };
            let update = release(&graph.nodes[target], &versions[target])
                .map_err(|e| invalid(format!("invalid conditional update node: {e}")))?;
            conditional.push((update, group.risks.clone()));
        }
    }
    updates.retain(|u| {
        let also = conditional.iter().any(|(c, _)| c.image == u.image);
        if also {
            tracing::warn!(version = %u.version, "update listed as both a conditional and unconditional update; preferring the conditional update");
        }
        !also
    });
    conditional.retain_mut(|(update, risks)| match acceptable(risks) {
        Ok(()) => true,
        Err(why) => {
            tracing::warn!(version = %update.version, "conditional update dropped: {why}");
            false
        }
    });
    let mut targets: HashMap<String, usize> = HashMap::new();
    for (c, _) in &conditional {
        *targets.entry(c.image.clone()).or_default() += 1;
    }
    conditional.retain(|(c, _)| {
        let n = targets[&c.image];
        if n > 1 {
            tracing::warn!(version = %c.version, "upstream declares {n} conditional updates to the same release; dropping them all");
        }
        n == 1
    });
    Ok(Offered {
        updates,
        conditional,
    })
}

/// Prunes the rules the CVO does not know or finds invalid; `Err` when the conditional update
/// must be dropped (a risk left without rules, or what the ClusterVersion schema refuses).
fn acceptable(risks: &mut [Risk]) -> Result<(), String> {
    if risks.is_empty() {
        return Err("it has no risks".into());
    }
    let mut names = std::collections::HashSet::new();
    for risk in risks.iter_mut() {
        if risk.name.is_empty() || risk.message.is_empty() || risk.url.is_empty() {
            return Err("a risk has no name, message or url".into());
        }
        if !names.insert(risk.name.clone()) {
            return Err(format!("risk {:?} is listed twice", risk.name));
        }
        let before = risk.matching_rules.len();
        risk.matching_rules
            .retain(|rule| match rule.type_.as_str() {
                "Always" => rule.promql.is_none(),
                "PromQL" => rule.promql.as_ref().is_some_and(|p| !p.promql.is_empty()),
                _ => false,
            });
        if risk.matching_rules.len() < before {
            tracing::warn!(risk = %risk.name, "matching rules of an unknown type, or invalid, were pruned");
        }
        if risk.matching_rules.is_empty() {
            return Err(format!(
                "risk {:?} has no matching rule cvo recognizes",
                risk.name
            ));
        }
    }
    Ok(())
}

/// The release a node stands for: version, payload, and from its metadata `url` and the
/// channels (sorted, without duplicates); bad metadata is an error, as in the CVO.
fn release(node: &Node, version: &semver::Version) -> Result<Release, String> {
    if node.payload.is_empty() {
        return Err(format!("version {version} has no payload"));
    }
    let mut errors = Vec::new();
    let url = match node.metadata.get("url") {
        None => None,
        Some(Value::String(u)) if u.parse::<http::Uri>().is_ok() || u.is_empty() => Some(u.clone()),
        Some(Value::String(u)) => {
            errors.push(format!("invalid release URL {u:?}"));
            None
        }
        Some(other) => {
            errors.push(format!("URL is not a string: {other}"));
            None
        }
    };
    match node.metadata.get(ARCHITECTURE) {
        None => {}
        Some(Value::String(a)) if a == "multi" => {}
        Some(Value::String(a)) => errors.push(format!("unrecognized {ARCHITECTURE} value {a:?}")),
        Some(other) => errors.push(format!("{ARCHITECTURE} is not a string: {other}")),
    }
    let channels = match node.metadata.get(CHANNELS) {
        None => None,
        Some(Value::String(text)) if text.is_empty() => {
            errors.push(format!("{CHANNELS} is an empty string"));
            None
        }
        Some(Value::String(text)) => {
            let mut channels: Vec<String> = text
                .split(',')
                .filter(|c| !c.is_empty())
                .map(str::to_owned)
                .collect();
            if channels.len() != text.split(',').count() {
                errors.push(format!("{CHANNELS} has an empty entry: {text:?}"));
            }
            channels.sort();
            channels.dedup();
            (!channels.is_empty()).then_some(channels)
        }
        Some(other) => {
            errors.push(format!("{CHANNELS} is not a string: {other}"));
            None
        }
    };
    if !errors.is_empty() {
        return Err(errors.join("\n"));
    }
    Ok(Release {
        version: version.to_string(),
        image: node.payload.clone(),
        url: url.filter(|u| !u.is_empty()),
        channels,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn v(s: &str) -> semver::Version {
        s.parse().unwrap()
    }

    fn node(version: &str) -> Value {
        json!({"version": version, "payload": format!("quay.example.com/cvo@sha256:{version}"), "metadata": {}})
    }

    fn graph() -> Value {
        json!({
            "nodes": [
                node("1.4.0"),
                {"version": "1.5.0", "payload": "quay.example.com/cvo:1.5.0",
                 "metadata": {"url": "https://example.com/1.5.0",
                              "io.openshift.upgrades.graph.release.channels": "stable-1,fast-1,stable-1"}},
                node("1.4.1"),
                node("1.6.0"),
                node("1.3.0"),
            ],
            "edges": [[0, 1], [0, 2], [4, 0], [0, 3]],
            "conditionalEdges": [{
                "edges": [{"from": "1.4.0", "to": "1.6.0"}, {"from": "1.3.0", "to": "1.6.0"}],
                "risks": [{"url": "https://example.com/risk", "name": "Widgets", "message": "Widgets break.",
                           "matchingRules": [{"type": "Always"}], "unknownField": 1}]
            }]
        })
    }

    fn offered_from(g: &Value, version: &str) -> Result<Offered, Failure> {
        offered(g.to_string().as_bytes(), &v(version), "stable-1")
    }

    #[test]
    fn a_valid_graph_offers_the_edges_from_the_current_version() {
        let o = offered_from(&graph(), "1.4.0").expect("valid");
        let versions: Vec<&str> = o.updates.iter().map(|u| u.version.as_str()).collect();
        assert_eq!(versions, ["1.5.0", "1.4.1"], "1.6.0 is only conditional");
        assert_eq!(
            o.updates[0],
            Release {
                version: "1.5.0".into(),
                image: "quay.example.com/cvo:1.5.0".into(),
                url: Some("https://example.com/1.5.0".into()),
                channels: Some(vec!["fast-1".into(), "stable-1".into()]),
            }
        );
        assert_eq!(o.conditional.len(), 1);
        let (release, risks) = &o.conditional[0];
        assert_eq!(release.version, "1.6.0");
        assert_eq!(risks[0].name, "Widgets");
        assert_eq!(risks[0].matching_rules[0].type_, "Always");
        // Build metadata does not matter for finding the current node; conditional edges
        // name versions as text, so they do not match then (as in the CVO).
        let with_build = offered_from(&graph(), "1.4.0+abc").unwrap();
        assert_eq!(with_build.updates.len(), 3);
        assert!(with_build.conditional.is_empty());
        // The newest version has nothing to go to.
        assert_eq!(offered_from(&graph(), "1.6.0").unwrap(), Offered::default());
    }

    #[test]
    fn a_version_not_in_the_graph_is_version_not_found() {
        let f = offered_from(&graph(), "2.0.0").expect_err("not found");
        assert_eq!(f.reason, "VersionNotFound");
        assert_eq!(
            f.message,
            "currently reconciling cluster version 2.0.0 not found in the \"stable-1\" channel"
        );
    }

    #[test]
    fn malformed_and_hostile_bodies_are_invalid_responses() {
        for body in [
            "".to_string(),
            "not json".into(),
            "[]".into(),
            r#"{"nodes": [{"payload": "x"}]}"#.into(),
            r#"{"nodes": [{"version": "one", "payload": "x"}]}"#.into(),
            r#"{"nodes": [{"version": "1.4.0", "payload": "x"}], "edges": [[0]]}"#.into(),
            r#"{"nodes": [{"version": "1.4.0", "payload": "x"}], "edges": [[0, 1, 2]]}"#.into(),
            r#"{"nodes": [{"version": "1.4.0", "payload": "x"}], "edges": [["0", "1"]]}"#.into(),
            format!("{}{}", "[".repeat(100_000), "]".repeat(100_000)),
            format!(r#"{{"nodes": {}}}"#, "[".repeat(5000)),
        ] {
            let f =
                offered(body.as_bytes(), &v("1.4.0"), "c").expect_err(&body[..body.len().min(60)]);
            assert_eq!(
                f.reason,
                "ResponseInvalid",
                "{}: {}",
                &body[..body.len().min(60)],
                f.message
            );
        }
    }

    #[test]
    fn a_node_version_past_64_bits_is_too_large_in_plain_words() {
        let body = r#"{"nodes": [{"version": "1.99999999999999999999999.0", "payload": "x"}]}"#;
        let f = offered(body.as_bytes(), &v("1.4.0"), "c").unwrap_err();
        assert!(
            f.message
                .contains("the minor version number is too large (at most 18446744073709551615)"),
            "{}",
            f.message
        );
        assert!(!f.message.contains("u64"), "{}", f.message);
    }

    #[test]
    fn edges_out_of_range_are_invalid_not_a_crash() {
        for edge in [
            json!([0, 5]),
            json!([0, -1]),
            json!([-7, 0]),
            json!([0, 9_223_372_036_854_775_807i64]),
        ] {
            let mut g = graph();
            g["edges"] = json!([edge]);
            let f = offered_from(&g, "1.4.0").expect_err("out of range");
            assert_eq!(f.reason, "ResponseInvalid");
            assert!(
                f.message.contains("points outside the 5 nodes"),
                "{}",
                f.message
            );
        }
        let mut g = graph();
        g["conditionalEdges"][0]["edges"] = json!([{"from": "1.4.0", "to": "9.9.9"}]);
        assert_eq!(
            offered_from(&g, "1.4.0").unwrap_err().message,
            "no node for conditional update 9.9.9"
        );
    }

    #[test]
    fn bad_metadata_or_payload_of_an_offered_node_is_invalid() {
        for (key, value) in [
            ("url", json!(7)),
            ("url", json!("http://bad host/")),
            (CHANNELS, json!("")),
            (CHANNELS, json!("a,,b")),
            (CHANNELS, json!(["a"])),
            (ARCHITECTURE, json!("amd64")),
        ] {
            let mut g = graph();
            g["nodes"][1]["metadata"] = json!({key: value});
            let f = offered_from(&g, "1.4.0").expect_err(key);
            assert_eq!(f.reason, "ResponseInvalid");
            assert!(
                f.message.starts_with("invalid recommended update node: "),
                "{}",
                f.message
            );
        }
        let mut g = graph();
        g["nodes"][1]["payload"] = json!("");
        assert!(
            offered_from(&g, "1.4.0")
                .unwrap_err()
                .message
                .contains("no payload")
        );
        // The current node is checked too; nodes nobody points to are not.
        let mut g = graph();
        g["nodes"][0]["metadata"] = json!({"url": 1});
        assert!(
            offered_from(&g, "1.4.0")
                .unwrap_err()
                .message
                .starts_with("invalid current node")
        );
        let mut g = graph();
        g["nodes"][4]["payload"] = json!("");
        assert!(offered_from(&g, "1.4.0").is_ok());
    }

    #[test]
    fn conditional_updates_the_schema_would_refuse_are_dropped() {
        let risk = |name: &str, rules: Value| json!({"url": "https://example.com/r", "name": name, "message": "m", "matchingRules": rules});
        for risks in [
            json!([]),
            json!([risk("", json!([{"type": "Always"}]))]),
            json!([
                risk("A", json!([{"type": "Always"}])),
                risk("A", json!([{"type": "Always"}]))
            ]),
            json!([risk("A", json!([{"type": "Sometimes"}]))]),
            json!([risk("A", json!([{"type": "PromQL"}]))]),
            json!([risk(
                "A",
                json!([{"type": "Always", "promql": {"promql": "1"}}])
            )]),
            json!([risk("A", json!([]))]),
        ] {
            let mut g = graph();
            g["conditionalEdges"][0]["risks"] = risks.clone();
            let o = offered_from(&g, "1.4.0").expect("valid");
            assert!(o.conditional.is_empty(), "{risks}");
        }
        // Unknown rules are pruned when a known one is left.
        let mut g = graph();
        g["conditionalEdges"][0]["risks"] = json!([risk(
            "A",
            json!([{"type": "Sometimes"}, {"type": "PromQL", "promql": {"promql": "up"}}])
        )]);
        let o = offered_from(&g, "1.4.0").unwrap();
        assert_eq!(o.conditional[0].1[0].matching_rules.len(), 1);
        assert_eq!(o.conditional[0].1[0].matching_rules[0].type_, "PromQL");
    }

    #[test]
    fn a_target_of_two_conditional_edges_is_dropped() {
        let mut g = graph();
        let group = g["conditionalEdges"][0].clone();
        g["conditionalEdges"] = json!([group.clone(), group]);
        let o = offered_from(&g, "1.4.0").unwrap();
        assert!(o.conditional.is_empty());
        assert_eq!(o.updates.len(), 2);
    }
}
