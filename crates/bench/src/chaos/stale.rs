//! A stale view in the spirit of Sieve: the operator (in-process, its client perturbed) stops
//! receiving StatefulSet events while a resize recreates the StatefulSet, and Deployment
//! events while the Deployment is edited; then they arrive. No wrong write meanwhile — the
//! only StatefulSet deleted is the old one (the delete carries its UID), nothing is applied
//! over a newer object — and everything converges.
use std::sync::Arc;
use std::time::{Duration, Instant};

use bosun_bookstore::BookStoreOperator;
use bosun_runtime::manager::{Manager, ManagerConfig, Scope};
use bosun_testenv::perturb::Perturb;
use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use super::cluster::{names, now_us, writes_by, Env, GROUP};
use super::Report;

/// How long each view stays stale (the perturbation, not a wait for a result).
const STALE: Duration = Duration::from_secs(6);

pub async fn run(env: &mut Env) -> anyhow::Result<Report> {
    eprintln!("[chaos] stale: StatefulSet and Deployment events held back for {STALE:?}");
    let mut r = Report::new("stale");
    let ns = env.namespace("chaos-stale").await?;
    let user = Env::user("stale");
    let perturb = Perturb::default();
    let client = perturb
        .client_as(&env.cp, &user, &[GROUP, "system:authenticated"])
        .await?;
    let m = Manager::new(
        client,
        ManagerConfig {
            scope: Scope::Namespaces(vec![ns.clone()]),
            ..Default::default()
        },
    )
    .with_operator(Arc::new(BookStoreOperator));
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let run = tokio::spawn(m.run(
        async move {
            let _ = rx.await;
        },
        |_| {},
    ));
    let stores = names("stale", 1);
    env.create(&ns, &stores).await?;
    env.wait_ready(&ns, &stores, Duration::from_secs(60))
        .await?;
    let since = now_us();

    // The Deployment edited while its events are held: repaired once they arrive.
    perturb.stale("deployments", true);
    let deps: Api<Deployment> = Api::namespaced(env.admin.clone(), &ns);
    deps.patch(
        "stale-0-app",
        &PatchParams {
            field_manager: Some("kubectl-scale".into()),
            ..Default::default()
        },
        &Patch::Merge(json!({"spec": {"replicas": 4}})),
    )
    .await?;
    tokio::time::sleep(STALE).await;
    perturb.stale("deployments", false);

    // A resize while StatefulSet events are held: the operator orphan-deletes the old
    // StatefulSet but keeps seeing it.
    let sets: Api<StatefulSet> = Api::namespaced(env.admin.clone(), &ns);
    let old_uid = sets.get("stale-0-mongodb").await?.metadata.uid;
    perturb.stale("statefulsets", true);
    env.bookstores(&ns)
        .patch(
            "stale-0",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"bookDB": {"dbSize": "2Gi"}}})),
        )
        .await?;
    tokio::time::sleep(STALE).await;
    perturb.stale("statefulsets", false);
    let released = Instant::now();

    let converged = env.wait_ready(&ns, &stores, Duration::from_secs(120)).await;
    let sts = sets.get("stale-0-mongodb").await?;
    let claim = Api::<PersistentVolumeClaim>::namespaced(env.admin.clone(), &ns)
        .get("data-stale-0-mongodb-0")
        .await?;
    let size = claim
        .spec
        .and_then(|s| s.resources)
        .and_then(|r| r.requests)
        .and_then(|r| r.get("storage").map(|q| q.0.clone()))
        .unwrap_or_default();
    let replicas = deps.get("stale-0-app").await?.spec.and_then(|s| s.replicas);
    let all = env.writes_since(since)?;
    let mine = writes_by(&all, &user);
    // The old StatefulSet is deleted (perhaps several times while the view is stale: a
    // delete of an object already terminating succeeds again, one already gone is refused by
    // its UID precondition), and one new StatefulSet is created after that, never deleted.
    let on_sts = |verb: &str| -> Vec<_> {
        mine.iter()
            .filter(|w| w.resource == "statefulsets" && w.verb == verb)
            .collect()
    };
    let deletes = on_sts("delete");
    let deleted: Vec<_> = deletes.iter().filter(|w| w.code == 200).collect();
    let created: Vec<_> = on_sts("patch")
        .into_iter()
        .filter(|w| w.code == 201)
        .collect();
    r.figure(
        "StatefulSet deletes sent / accepted; creates",
        format!("{} / {}; {}", deletes.len(), deleted.len(), created.len()),
    );
    r.figure(
        "converged after the events arrive (s)",
        format!("{:.1}", released.elapsed().as_secs_f64()),
    );
    if let Err(e) = converged {
        r.check(false, e.to_string());
    }
    r.check(
        created.len() == 1,
        format!("{} StatefulSets created, want 1", created.len()),
    );
    let last_delete = deleted.iter().map(|w| w.at).max().unwrap_or(0);
    r.check(
        created.iter().all(|c| c.at > last_delete),
        "a delete was accepted after the new StatefulSet was created",
    );
    r.check(
        sts.metadata.uid != old_uid,
        "the StatefulSet was not recreated",
    );
    r.check(
        sts.metadata.deletion_timestamp.is_none(),
        "the new StatefulSet is being deleted",
    );
    r.check(size == "2Gi", format!("claim requests {size}, want 2Gi"));
    r.check(
        replicas == Some(1),
        format!("Deployment replicas {replicas:?}, want 1"),
    );
    let problems = env.check_children(&ns, &stores).await?;
    r.check(problems.is_empty(), format!("{problems:?}"));
    let _ = tx.send(());
    let _ = run.await;
    Ok(r)
}
