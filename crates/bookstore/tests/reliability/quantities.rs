//! `quantity::canonical` against the API server's own spelling of quantities: a LimitRange
//! stores each value the way it stores a container's resources or a claim's size.
use bosun_bookstore::quantity::canonical;
use k8s_openapi::api::core::v1::LimitRange;
use kube::api::PostParams;
use serde_json::json;

use crate::support::*;

#[tokio::test]
async fn canonical_spellings_match_the_api_server() {
    let env = env("rel-quantities", false).await;
    let cases = [
        "1024Mi",
        "0.125Gi",
        "1536Mi",
        "1.5Ki",
        "0.5Ki",
        "0.1",
        "1000",
        "1500m",
        "1.5",
        "1e3",
        "1E",
        "2Ei",
        "0Gi",
        "0.3Ki",
        "1234567e-2",
        "10E",
        "12e1",
        "1e-3",
        "1000Ki",
        "1024",
        "100m",
        "64Mi",
        "2Gi",
        "0",
        "1n",
        "0.5m",
        "5e-7",
        "-1",
        "-0.1",
        "-1024Mi",
        "1e19",
        "+3Ti",
        ".5Ki",
        "2.5G",
        "1.000",
        "0.000001Ki",
    ];
    let max: serde_json::Map<String, serde_json::Value> = cases
        .iter()
        .enumerate()
        .map(|(i, q)| (format!("example.com/q{i}"), json!(q)))
        .collect();
    let lr: LimitRange = serde_json::from_value(json!({
        "metadata": {"name": "quantities"},
        "spec": {"limits": [{"type": "Container", "max": max}]}
    }))
    .expect("limit range");
    let stored = env
        .api::<LimitRange>()
        .create(&PostParams::default(), &lr)
        .await
        .expect("create");
    let max = stored.spec.expect("spec").limits[0]
        .max
        .clone()
        .expect("max");
    let mut wrong = Vec::new();
    for (i, q) in cases.iter().enumerate() {
        let server = &max[&format!("example.com/q{i}")].0;
        let ours = canonical(q);
        if ours.as_deref() != Some(server.as_str()) {
            wrong.push(format!("{q}: server {server}, ours {ours:?}"));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}
