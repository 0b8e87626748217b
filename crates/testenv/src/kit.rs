//! One call that readies the test cluster for an operator: its CRDs applied and **served**, its
//! RBAC granted to the identity the test runs it as, and a namespace (plus a node agent) per
//! test. Every test binary used to carry its own "apply the CRD, wait for Established" prelude;
//! `Established` alone is not "served": the API server reports it before every handler has the
//! new kind, and the first LIST of a kind just established can still answer 404. The kit waits
//! for the LIST itself.
use std::time::Duration;

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::wait::{await_condition, conditions};
use kube::{Client, ResourceExt};

use crate::controlplane::{ControlPlane, TestEnvError};
use crate::nodeagent::{NodeAgent, NodeAgentConfig};

/// The field manager of everything the kit applies.
const MANAGER: &str = "bosun-testenv";
/// How long a CRD may take to be established and served.
const SERVED_WITHIN: Duration = Duration::from_secs(60);

/// Applies `crds` (server-side, forced) and returns once every served version of each answers a
/// LIST. A CRD the API server refuses is an error naming it.
pub async fn install_crds(
    client: &Client,
    crds: impl IntoIterator<Item = CustomResourceDefinition>,
) -> Result<(), TestEnvError> {
    install_crds_with(client, crds, |_| {}).await
}

/// [`install_crds`], each CRD changed by `edit` first (its scope, say).
pub async fn install_crds_with(
    client: &Client,
    crds: impl IntoIterator<Item = CustomResourceDefinition>,
    edit: impl Fn(&mut CustomResourceDefinition),
) -> Result<(), TestEnvError> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let pp = PatchParams::apply(MANAGER).force();
    let mut applied = Vec::new();
    for mut crd in crds {
        edit(&mut crd);
        let name = crd.name_any();
        api.patch(&name, &pp, &Patch::Apply(&crd))
            .await
            .map_err(|e| TestEnvError::Setup(format!("CRD {name} refused: {e}")))?;
        applied.push(crd);
    }
    for crd in &applied {
        wait_served(client, crd).await?;
    }
    Ok(())
}

/// Returns once `crd` is established and every served version of it answers a LIST (60 s at
/// most): what a client that creates custom resources right after installing their CRD needs.
pub async fn wait_served(
    client: &Client,
    crd: &CustomResourceDefinition,
) -> Result<(), TestEnvError> {
    let name = crd.name_any();
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    tokio::time::timeout(
        SERVED_WITHIN,
        await_condition(api, &name, conditions::is_crd_established()),
    )
    .await
    .map_err(|_| TestEnvError::Setup(format!("CRD {name} not established within 60 s")))?
    .map_err(|e| TestEnvError::Setup(format!("CRD {name}: {e}")))?;
    let spec = &crd.spec;
    for v in spec.versions.iter().filter(|v| v.served) {
        let path = format!(
            "/apis/{}/{}/{}?limit=1",
            spec.group, v.name, spec.names.plural
        );
        let served = crate::eventually(SERVED_WITHIN.as_secs(), || {
            let client = client.clone();
            let path = path.clone();
            async move {
                let req = http::Request::get(&path).body(Vec::new()).ok()?;
                client.request_text(req).await.ok().map(|_| ())
            }
        })
        .await;
        if served.is_none() {
            return Err(TestEnvError::Setup(format!(
                "CRD {name}: {path} not served within 60 s"
            )));
        }
    }
    Ok(())
}

/// Binds `user` to exactly `rules`, cluster-wide, under a ClusterRole and ClusterRoleBinding
/// both called `name`. Applying again with other rules replaces them.
pub async fn grant(
    client: &Client,
    name: &str,
    rules: Vec<PolicyRule>,
    user: &str,
) -> Result<(), TestEnvError> {
    let pp = PatchParams::apply(MANAGER).force();
    let role = ClusterRole {
        metadata: kube::api::ObjectMeta {
            name: Some(name.to_string()),
            ..Default::default()
        },
        rules: Some(rules),
        ..Default::default()
    };
    Api::<ClusterRole>::all(client.clone())
        .patch(name, &pp, &Patch::Apply(&role))
        .await
        .map_err(|e| TestEnvError::Setup(format!("ClusterRole {name}: {e}")))?;
    let binding: ClusterRoleBinding = serde_json::from_value(serde_json::json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"kind": "User", "name": user, "apiGroup": "rbac.authorization.k8s.io"}]
    }))
    .map_err(|e| TestEnvError::Setup(format!("ClusterRoleBinding {name}: {e}")))?;
    Api::<ClusterRoleBinding>::all(client.clone())
        .patch(name, &pp, &Patch::Apply(&binding))
        .await
        .map_err(|e| TestEnvError::Setup(format!("ClusterRoleBinding {name}: {e}")))?;
    Ok(())
}

/// What one test works in: the binary's shared control plane, an admin client, a namespace
/// of its own and (unless asked otherwise) a node agent for that namespace.
pub struct TestCluster {
    pub cp: &'static ControlPlane,
    pub admin: Client,
    pub ns: String,
    pub agent: Option<NodeAgent>,
}

/// The usual prelude of an e2e test: [`crate::shared`], an admin client, a fresh namespace
/// named after `prefix`, and a simulated node agent marking its pods ready.
pub async fn cluster(prefix: &str) -> Result<TestCluster, TestEnvError> {
    cluster_with(prefix, Some(NodeAgentConfig::default())).await
}

/// [`cluster`] with the node agent configured (`None`: no agent).
pub async fn cluster_with(
    prefix: &str,
    agent: Option<NodeAgentConfig>,
) -> Result<TestCluster, TestEnvError> {
    let cp = crate::shared().await?;
    let admin = cp.client().await?;
    let ns = crate::test_namespace(&admin, prefix).await?;
    let agent = agent.map(|mut cfg| {
        cfg.namespace.get_or_insert_with(|| ns.clone());
        NodeAgent::start(admin.clone(), cfg)
    });
    Ok(TestCluster {
        cp,
        admin,
        ns,
        agent,
    })
}

/// The CRDs and RBAC an operator needs, installed in one call: CRDs served, `rules` bound to
/// `user` under `role_name`.
pub async fn install(
    client: &Client,
    crds: impl IntoIterator<Item = CustomResourceDefinition>,
    role_name: &str,
    rules: Vec<PolicyRule>,
    user: &str,
) -> Result<(), TestEnvError> {
    install_crds(client, crds).await?;
    grant(client, role_name, rules, user).await
}

/// Server-side applies one CRD as raw JSON and returns the API server's `Warning` headers
/// (kube's client drops them): what a newer server only tolerates shows up there first.
pub async fn apply_crd_warnings(
    client: &Client,
    crd: &serde_json::Value,
) -> Result<Vec<String>, TestEnvError> {
    let name = crd["metadata"]["name"]
        .as_str()
        .ok_or_else(|| TestEnvError::Setup("a CRD without a name".into()))?;
    let body = serde_json::to_vec(crd).map_err(|e| TestEnvError::Setup(e.to_string()))?;
    let req = http::Request::patch(format!(
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}?fieldManager={MANAGER}&force=true"
    ))
    .header("content-type", "application/apply-patch+yaml")
    .body(kube::client::Body::from(body))
    .map_err(|e| TestEnvError::Setup(e.to_string()))?;
    let resp = client.send(req).await?;
    let status = resp.status();
    let warnings: Vec<String> = resp
        .headers()
        .get_all("warning")
        .iter()
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
        .collect();
    if !status.is_success() {
        let body = resp.into_body().collect_bytes().await.unwrap_or_default();
        return Err(TestEnvError::Setup(format!(
            "CRD {name} refused: {status}: {}",
            String::from_utf8_lossy(&body)
        )));
    }
    Ok(warnings)
}
