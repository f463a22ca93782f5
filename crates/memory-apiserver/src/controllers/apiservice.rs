//! APIService availability, as kube-aggregator's availability controller reports it on a
//! control plane without nodes: a local APIService (no `spec.service`) is `Available=True
//! Local`; one whose Service does not exist is `Available=False ServiceNotFound`; a Service
//! without a selector gets no EndpointSlice (`EndpointsNotFound`), and one with a selector has
//! no ready endpoints here (no Pod ever runs): `MissingEndpoints`. Messages are kube's words.

use serde_json::Value;

use super::crd::set_condition;
use crate::handler::State;
use crate::resources::ResKey;
use crate::store::ObjKey;

fn key(group: &str, resource: &str, namespace: &str, name: &str) -> ObjKey {
    ObjKey {
        res: ResKey {
            group: group.into(),
            resource: resource.into(),
        },
        namespace: namespace.into(),
        name: name.into(),
    }
}

/// (status, reason, message) of `Available` for `api_service`.
fn availability(st: &State, api_service: &Value) -> (&'static str, &'static str, String) {
    let Some(service) = api_service
        .pointer("/spec/service")
        .filter(|s| s.is_object())
    else {
        return (
            "True",
            "Local",
            "Local APIServices are always available".into(),
        );
    };
    let text = |k: &str| service.get(k).and_then(Value::as_str).unwrap_or("");
    let (name, namespace) = (text("name"), text("namespace"));
    let Some(svc) = st.store.get(&key("", "services", namespace, name)) else {
        return (
            "False",
            "ServiceNotFound",
            format!("service/{name} in \"{namespace}\" is not present"),
        );
    };
    if svc
        .pointer("/spec/selector")
        .is_none_or(|s| s.as_object().is_none_or(|m| m.is_empty()))
    {
        return (
            "False",
            "EndpointsNotFound",
            format!("cannot find endpointslices for service/{name} in \"{namespace}\""),
        );
    }
    let port = service.get("port").and_then(Value::as_i64).unwrap_or(443);
    let port_name = svc
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|p| p.get("port").and_then(Value::as_i64) == Some(port))
        .and_then(|p| p.get("name").and_then(Value::as_str))
        .unwrap_or("");
    (
        "False",
        "MissingEndpoints",
        format!(
            "endpointslices for service/{name} in \"{namespace}\" have no addresses with port name \"{port_name}\""
        ),
    )
}

/// One pass.
pub fn reconcile(st: &mut State) {
    let res = ResKey {
        group: "apiregistration.k8s.io".into(),
        resource: "apiservices".into(),
    };
    let updates: Vec<(String, (&'static str, &'static str, String))> = st
        .store
        .range(&res, None, None)
        .filter_map(|a| {
            let want = availability(st, a);
            let current = a
                .pointer("/status/conditions")
                .and_then(Value::as_array)
                .and_then(|cs| cs.iter().find(|c| c["type"] == "Available"));
            let same = current.is_some_and(|c| {
                c["status"] == want.0 && c["reason"] == want.1 && c["message"] == want.2.as_str()
            });
            (!same).then(|| {
                (
                    a["metadata"]["name"].as_str().unwrap_or("").to_owned(),
                    want,
                )
            })
        })
        .collect();
    for (name, (status, reason, message)) in updates {
        let k = key("apiregistration.k8s.io", "apiservices", "", &name);
        st.controller_update(&k, "kube-apiserver", Some("status"), |o| {
            set_condition(o, "Available", status, reason, &message)
        });
    }
}
