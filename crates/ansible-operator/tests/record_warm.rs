//! A kind a role names only at run time (a templated `kind:`) is not among the kinds that
//! start warm with the controller ([`bosun_watches::Flavor::warm_kinds`] reads the role's
//! text): only the replica whose run met it watched it. The leader now writes it in the
//! record of child kinds on its Lease, and a standby lists it before it leads — after a
//! failover the new leader's reconcile lists nothing of it.
mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use bosun_runtime::leader::LeaderConfig;
use bosun_runtime::manager::{Manager, ManagerConfig, ManagerError, Scope};
use bosun_watches::Flavor;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use serde_json::json;
use support::*;
use tower::{Layer, Service};

const LEASE: &str = "bosun-ansible-record";

/// Counts the LISTs (not watches) of one path the operators' client sends.
#[derive(Clone)]
struct Lists(Arc<(String, AtomicUsize)>);

impl Lists {
    fn of(path: String) -> Self {
        Lists(Arc::new((path, AtomicUsize::new(0))))
    }
    fn count(&self) -> usize {
        self.0 .1.load(Ordering::SeqCst)
    }
}

impl<S> Layer<S> for Lists {
    type Service = Listing<S>;
    fn layer(&self, inner: S) -> Listing<S> {
        Listing {
            inner,
            lists: self.clone(),
        }
    }
}

#[derive(Clone)]
struct Listing<S> {
    inner: S,
    lists: Lists,
}

impl<S, B> Service<http::Request<B>> for Listing<S>
where
    S: Service<http::Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> S::Future {
        let query = req.uri().query().unwrap_or("");
        if req.method() == http::Method::GET
            && req.uri().path() == self.lists.0 .0
            && !query.contains("watch=")
        {
            self.lists.0 .1.fetch_add(1, Ordering::SeqCst);
        }
        self.inner.call(req)
    }
}

/// A role whose only child's kind comes from a variable.
fn project(dir: &std::path::Path) -> std::path::PathBuf {
    let role = dir.join("roles/templated");
    std::fs::create_dir_all(role.join("tasks")).expect("mkdir");
    std::fs::create_dir_all(role.join("defaults")).expect("mkdir");
    std::fs::write(role.join("defaults/main.yml"), "child_kind: ConfigMap\n").expect("defaults");
    std::fs::write(
        role.join("tasks/main.yml"),
        "- k8s:\n    definition:\n      apiVersion: v1\n      kind: \"{{ child_kind }}\"\n      \
         metadata:\n        name: \"{{ ansible_operator_meta.name }}-child\"\n        \
         namespace: \"{{ ansible_operator_meta.namespace }}\"\n      data:\n        \
         size: \"{{ size | default(1) | string }}\"\n",
    )
    .expect("tasks");
    watches(
        dir,
        "- version: v1alpha1\n  group: test.bosun.dev\n  kind: Widget\n  role: templated\n",
    )
}

fn replica(
    env: &Env,
    watches: &std::path::Path,
    config: &kube::Config,
    identity: &str,
    lists: &Lists,
) -> (
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<Result<(), ManagerError>>,
) {
    let client = kube::client::ClientBuilder::try_from(config.clone())
        .expect("builder")
        .with_layer(lists)
        .build();
    let cfg = ManagerConfig {
        scope: Scope::Namespaces(vec![env.ns.clone()]),
        leader: Some(LeaderConfig::new(LEASE, &env.ns, identity)),
        ..Default::default()
    };
    let m = operators(watches).into_iter().fold(
        Manager::new(client, cfg).with_leader_client(env.admin.clone()),
        |m, op| m.with_operator(op),
    );
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(m.run(
        async move {
            let _ = stopped.await;
        },
        |_| {},
    ));
    (stop, task)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_warms_a_kind_the_role_names_only_at_run_time() {
    let env = env("ans-record").await;
    let dir = tempfile::tempdir().expect("tempdir");
    let watches = project(dir.path());
    let file = bosun_watches::WatchesFile::load(&watches).expect("watches");
    let opts = bosun_ansible_operator::AnsibleOptions {
        watches_dir: Some(dir.path().to_path_buf()),
        ansible: None,
        ..Default::default()
    };
    let loaded = bosun_ansible_operator::operators(&file.entries, &opts).expect("loads");
    assert!(
        loaded[0].flavor().warm_kinds().is_empty(),
        "the templated kind is not known from the role's text"
    );
    let ops = operators(&watches);
    install_crds(&env.admin, &ops).await;
    let config = env.cp.config().await.expect("config");
    let path = format!("/api/v1/namespaces/{}/configmaps", env.ns);
    let configmaps: Api<ConfigMap> = Api::namespaced(env.admin.clone(), &env.ns);

    let a_lists = Lists::of(path.clone());
    let (stop_a, run_a) = replica(&env, &watches, &config, "a", &a_lists);
    widget(&env, "w1", json!({"size": 1})).await;
    eventually(90, || async {
        configmaps
            .get_opt("w1-child")
            .await
            .ok()
            .flatten()
            .map(|_| ())
    })
    .await
    .expect("a leads and its run creates the templated ConfigMap");
    eventually(30, || async { (a_lists.count() >= 1).then_some(()) })
        .await
        .expect("a watches the kind its run met");

    let b_lists = Lists::of(path);
    let (stop_b, run_b) = replica(&env, &watches, &config, "b", &b_lists);
    eventually(60, || async { (b_lists.count() >= 1).then_some(()) })
        .await
        .expect("standby b lists the ConfigMaps a's run met, before it leads (a cold standby never does)");
    let warmed = b_lists.count();

    let _ = stop_a.send(());
    run_a.await.expect("join").expect("a stopped cleanly");
    widget(&env, "w2", json!({"size": 2})).await;
    eventually(90, || async {
        configmaps
            .get_opt("w2-child")
            .await
            .ok()
            .flatten()
            .map(|_| ())
    })
    .await
    .expect("b leads and its run creates the next ConfigMap");
    assert_eq!(
        b_lists.count(),
        warmed,
        "the new leader listed the ConfigMaps once it led: its cache was cold"
    );
    let _ = stop_b.send(());
    run_b.await.expect("join").expect("b stopped cleanly");
}
