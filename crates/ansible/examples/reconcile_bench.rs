//! Micro-benchmark: the seed BookStore role's reconcile (load once, then N runs against the
//! test control plane), reporting the operator process's CPU time per run (user + system,
//! from getrusage; etcd and kube-apiserver are child processes and not counted).
//!
//! `cargo run --release -p bosun-ansible --example reconcile_bench -- [N]`
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use bosun_ansible::{for_cr, Discovery, ExtraVarsOptions, LoadOptions, Owner, Role, RunContext};
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use serde_json::json;

fn cpu_seconds() -> f64 {
    let mut ru = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage fills the struct it is given.
    let ru = unsafe {
        libc::getrusage(libc::RUSAGE_SELF, ru.as_mut_ptr());
        ru.assume_init()
    };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(100);
    let cp = bosun_testenv::ControlPlane::start(Default::default()).await?;
    let client = cp.client().await?;
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "bookstores.charts.example.com"},
        "spec": {"group": "charts.example.com", "scope": "Namespaced",
                 "names": {"plural": "bookstores", "singular": "bookstore", "kind": "BookStore"},
                 "versions": [{"name": "v1alpha1", "served": true, "storage": true, "subresources": {"status": {}},
                               "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
    });
    let crd_ar = ApiResource {
        group: "apiextensions.k8s.io".into(),
        version: "v1".into(),
        api_version: "apiextensions.k8s.io/v1".into(),
        kind: "CustomResourceDefinition".into(),
        plural: "customresourcedefinitions".into(),
    };
    Api::<DynamicObject>::all_with(client.clone(), &crd_ar)
        .create(&PostParams::default(), &serde_json::from_value(crd)?)
        .await?;
    let ar = ApiResource {
        group: "charts.example.com".into(),
        version: "v1alpha1".into(),
        api_version: "charts.example.com/v1alpha1".into(),
        kind: "BookStore".into(),
        plural: "bookstores".into(),
    };
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ar);
    let sample = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../examples/ansible-bookstore/config/samples/charts_v1alpha1_bookstore.yaml"),
    )?;
    let cr_json: serde_json::Value = serde_yaml::from_str(&sample)?;
    let mut created = None;
    for _ in 0..50 {
        match api
            .create(
                &PostParams::default(),
                &serde_json::from_value(cr_json.clone())?,
            )
            .await
        {
            Ok(o) => {
                created = Some(o);
                break;
            }
            Err(_) => tokio::time::sleep(std::time::Duration::from_millis(100)).await,
        }
    }
    let cr = serde_json::to_value(created.ok_or_else(|| anyhow::anyhow!("CRD never served"))?)?;

    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/ansible-bookstore");
    let t = Instant::now();
    let role = Role::load(
        "bookstore",
        &LoadOptions {
            roles_path: vec![],
            collections_paths: vec![],
            cwd: root,
        },
    )?;
    println!("role load: {:.2} ms", t.elapsed().as_secs_f64() * 1e3);
    let discovery = Arc::new(Discovery::new());
    let ctx = RunContext::new(Some(client.clone()), discovery, Owner::from_object(&cr));
    let vars = for_cr(
        &cr,
        &ExtraVarsOptions {
            snake_case: true,
            group: "charts.example.com",
            kind: "BookStore",
            ..Default::default()
        },
    );

    let (c0, w0) = (cpu_seconds(), Instant::now());
    let first = role.run(&ctx, &vars).await;
    let (c1, w1) = (cpu_seconds(), Instant::now());
    anyhow::ensure!(first.succeeded(), "first run failed: {:?}", first.failures);
    println!(
        "first run (4 creates): cpu {:.2} ms, wall {:.2} ms, stats {:?}",
        (c1 - c0) * 1e3,
        (w1 - w0).as_secs_f64() * 1e3,
        first.stats
    );
    let (c0, w0) = (cpu_seconds(), Instant::now());
    for _ in 0..n {
        let o = role.run(&ctx, &vars).await;
        anyhow::ensure!(
            o.succeeded() && o.stats.changed == 0,
            "steady run changed or failed: {:?}",
            o.stats
        );
    }
    let (c1, w1) = (cpu_seconds(), Instant::now());
    println!(
        "steady runs (4 GET + 4 no-op PATCH each), n={n}: cpu {:.3} ms/run, wall {:.2} ms/run",
        (c1 - c0) * 1e3 / n as f64,
        (w1 - w0).as_secs_f64() * 1e3 / n as f64
    );
    Ok(())
}
