//! The node process-mode pods run on. Pods must be bound to a node (what a scheduler does):
//! the API server deletes an unscheduled pod at once, with no grace period to honour. And the
//! node must look alive, or kube-controller-manager's node lifecycle controller marks it (and
//! its pods) not ready after 40 s, and pod garbage collection deletes pods of a node that
//! does not exist.
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::Client;
use serde_json::{json, Value};

use super::now;

/// The node's name.
pub const NODE_NAME: &str = "bosun-process-node";

/// Creates the node when missing and reports it Ready (the node lifecycle controller of
/// kube-controller-manager marks a node silent for 40 s not ready, and its pods with it).
pub async fn heartbeat(client: &Client) -> Result<(), kube::Error> {
    let nodes: Api<Node> = Api::all(client.clone());
    if nodes.get_opt(NODE_NAME).await?.is_none() {
        let node: Node = serde_json::from_value(json!({
            "metadata": {"name": NODE_NAME, "labels": {"kubernetes.io/hostname": NODE_NAME,
                                                       "bosun.dev/process-mode": "true"}},
        }))
        .map_err(kube::Error::SerdeError)?;
        match nodes.create(&PostParams::default(), &node).await {
            Ok(_) | Err(kube::Error::Api(_)) => {}
            Err(e) => return Err(e),
        }
    }
    let t = now();
    let mut status = json!({"status": {
        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                        "message": "bosun's process-mode node agent is running",
                        "lastHeartbeatTime": t, "lastTransitionTime": t}],
        "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
    }});
    // Where the API server proxies `pods/exec` to (the field is spelled `Port`).
    if let Some(port) = super::kubelet::port() {
        status["status"]["daemonEndpoints"] = json!({"kubeletEndpoint": {"Port": port}});
    }
    nodes
        .patch_status(NODE_NAME, &PatchParams::default(), &Patch::Merge(&status))
        .await?;
    Ok(())
}

/// Binds the pod `name` to the node.
pub async fn bind(client: &Client, ns: &str, name: &str) -> Result<(), kube::Error> {
    let binding = json!({"apiVersion": "v1", "kind": "Binding",
        "metadata": {"name": name, "namespace": ns},
        "target": {"apiVersion": "v1", "kind": "Node", "name": NODE_NAME}});
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    let _: Value = api
        .create_subresource("binding", name, &PostParams::default(), &binding)
        .await?;
    Ok(())
}
