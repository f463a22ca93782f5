//! Listing every object of a kind, page by page (`limit`/`continue`), each page sent under
//! the one retry policy ([`super::retry`]).

use std::fmt::Debug;

use kube::api::{Api, ListParams, ObjectList};
use kube::core::PartialObjectMeta;
use serde::de::DeserializeOwned;

use super::retry::{RequestError, RetryPolicy};

/// Objects per page.
pub const PAGE_SIZE: u32 = 500;

async fn pages<T, F, Fut>(
    lp: &ListParams,
    retry: &RetryPolicy,
    mut page: F,
) -> Result<Vec<T>, RequestError>
where
    T: Clone,
    F: FnMut(ListParams) -> Fut,
    Fut: std::future::Future<Output = kube::Result<ObjectList<T>>>,
{
    let mut out = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let mut params = lp.clone().limit(lp.limit.unwrap_or(PAGE_SIZE));
        if let Some(t) = &token {
            params = params.continue_token(t);
        }
        let list = retry
            .run(|| page(params.clone()))
            .await
            .map_err(|(e, _)| e)?;
        out.extend(list.items);
        match list.metadata.continue_ {
            Some(t) if !t.is_empty() => token = Some(t),
            _ => return Ok(out),
        }
    }
}

/// Every object `api` lists with `lp` (its label and field selectors).
pub async fn all<K>(
    api: &Api<K>,
    lp: &ListParams,
    retry: &RetryPolicy,
) -> Result<Vec<K>, RequestError>
where
    K: Clone + DeserializeOwned + Debug,
{
    pages(lp, retry, |p| async move { api.list(&p).await }).await
}

/// The metadata of every object `api` lists with `lp`: no object bodies (a Secret's data is
/// never fetched).
pub async fn all_metadata<K>(
    api: &Api<K>,
    lp: &ListParams,
    retry: &RetryPolicy,
) -> Result<Vec<PartialObjectMeta<K>>, RequestError>
where
    K: Clone + DeserializeOwned + Debug,
{
    pages(lp, retry, |p| async move { api.list_metadata(&p).await }).await
}

/// Every object `api` lists with `lp`, decoded as `T`: for a reader of a few fields of large
/// objects, a narrow `T` whose decoding skips the rest (each page decoded once, no typed
/// object of the kind, no JSON tree).
pub async fn all_as<K: kube::Resource + Clone, T: DeserializeOwned + Clone>(
    api: &Api<K>,
    lp: &ListParams,
    retry: &RetryPolicy,
) -> Result<Vec<T>, RequestError> {
    let client = api.clone().into_client();
    let request = kube::core::Request::new(api.resource_url());
    pages(lp, retry, |p| {
        let (client, request) = (&client, &request);
        async move {
            let mut req = request.list(&p).map_err(kube::Error::BuildRequest)?;
            req.extensions_mut().insert("list");
            client.request::<ObjectList<T>>(req).await
        }
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::PostParams;
    use serde_json::{Value, json};

    #[tokio::test]
    async fn json_pages_follow_the_continue_token_and_keep_the_selector() {
        let server = memory_apiserver::MemoryServer::start(memory_apiserver::Config::default());
        let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
        for (name, team) in [("a", "x"), ("b", "y"), ("c", "x"), ("d", "x")] {
            let cm =
                json!({"metadata": {"name": name, "labels": {"team": team}}, "data": {"k": name}});
            api.create(&PostParams::default(), &serde_json::from_value(cm).unwrap())
                .await
                .unwrap();
        }
        let lp = ListParams::default().labels("team=x").limit(2);
        let items: Vec<Value> = all_as(&api, &lp, &RetryPolicy::default()).await.unwrap();
        let names: Vec<&str> = items
            .iter()
            .filter_map(|o| o.pointer("/metadata/name")?.as_str())
            .collect();
        assert_eq!(
            names,
            ["a", "c", "d"],
            "two pages of two, the selector kept"
        );
        assert_eq!(
            items[1].pointer("/data/k"),
            Some(&json!("c")),
            "whole objects"
        );
    }
}
