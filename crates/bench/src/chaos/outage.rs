//! The API server down for 10 s under a running bosun, then new BookStores: the same process
//! converges them.
use std::time::{Duration, Instant};

use super::bosun::{Bosun, Flags};
use super::cluster::{names, Env};
use super::Report;

const DOWN: Duration = Duration::from_secs(10);

pub async fn run(env: &mut Env) -> anyhow::Result<Report> {
    let m = if env.args.quick { 5 } else { 20 };
    eprintln!("[chaos] outage: API server down {DOWN:?}, then {m} new BookStores");
    let mut r = Report::new("outage");
    let ns = env.namespace("chaos-outage").await?;
    let before = names("before", m);
    env.create(&ns, &before).await?;
    let mut b = Bosun::start(env, "outage", &ns, &Flags::default()).await?;
    env.wait_ready(&ns, &before, Duration::from_secs(120))
        .await?;

    env.cp.restart("kube-apiserver", DOWN).await?;
    let back = Instant::now();
    let after = names("after", m);
    // The first requests may meet connections the restart cut: retry them.
    let mut created = false;
    for _ in 0..20 {
        if env.create(&ns, &after).await.is_ok() {
            created = true;
            break;
        }
        // The ones already created make the retry fail with 409: skip those.
        let have: Vec<String> = env
            .bookstores(&ns)
            .list(&Default::default())
            .await
            .map(|l| {
                l.items
                    .into_iter()
                    .filter_map(|b| b.metadata.name)
                    .collect()
            })
            .unwrap_or_default();
        let missing: Vec<String> = after
            .iter()
            .filter(|n| !have.contains(n))
            .cloned()
            .collect();
        if missing.is_empty() || env.create(&ns, &missing).await.is_ok() {
            created = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    r.check(created, "could not create BookStores after the outage");
    // bosun's part: every child written and a status observed; Ready also needs
    // kube-controller-manager (pods), which reconnects on its own schedule.
    let deps: kube::Api<k8s_openapi::api::apps::v1::Deployment> =
        kube::Api::namespaced(env.admin.clone(), &ns);
    loop {
        let have = deps
            .list_metadata(&Default::default())
            .await
            .map(|l| l.items.len())
            .unwrap_or(0);
        let observed = env
            .bookstores(&ns)
            .list(&Default::default())
            .await
            .map(|l| {
                l.items
                    .iter()
                    .filter(|b| {
                        b.status
                            .as_ref()
                            .is_some_and(|s| s.observed_generation.is_some())
                    })
                    .count()
            })
            .unwrap_or(0);
        if have == 2 * m && observed == 2 * m {
            r.figure(
                "new BookStores' children written after the API server is back (s)",
                format!("{:.1}", back.elapsed().as_secs_f64()),
            );
            break;
        }
        if back.elapsed() > Duration::from_secs(120) {
            r.check(
                false,
                "children of the new BookStores not written within 120 s",
            );
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    match env.wait_ready(&ns, &after, Duration::from_secs(180)).await {
        Ok(_) => r.figure(
            "new BookStores Ready after the API server is back (s)",
            format!("{:.1}", back.elapsed().as_secs_f64()),
        ),
        Err(e) => r.check(false, e.to_string()),
    }
    let alive = b.alive();
    r.figure("same bosun process throughout", alive);
    r.check(alive, "bosun exited during the outage");
    let all: Vec<String> = before.iter().chain(&after).cloned().collect();
    let problems = env.check_children(&ns, &all).await?;
    r.check(problems.is_empty(), format!("{problems:?}"));
    b.stop().await?;
    Ok(r)
}
