//! `kill -9` at random points while N BookStores converge, then one clean start.
use std::time::{Duration, Instant};

use bosun_verify::Rng;

use super::bosun::{Bosun, Flags};
use super::cluster::{names, now_us, writes_by, Env};
use super::Report;

pub async fn run(env: &mut Env, seed: u64) -> anyhow::Result<Report> {
    let (n, kills) = if env.args.quick { (30, 5) } else { (200, 20) };
    eprintln!("[chaos] crash: {n} BookStores, {kills} kill -9");
    let mut r = Report::new("crash");
    let ns = env.namespace("chaos-crash").await?;
    let stores = names("store", n);
    // Each run meets a fresh batch, so every kill lands while something converges.
    let batch = n.div_ceil(kills);
    let mut rng = Rng::new(seed);
    let mut ready_at_kill = Vec::new();
    for (k, chunk) in stores.chunks(batch).enumerate() {
        env.create(&ns, chunk).await?;
        let b = Bosun::start(env, "crash", &ns, &Flags::default()).await?;
        tokio::time::sleep(Duration::from_millis(rng.range(200, 2500))).await;
        b.kill9().await;
        let created = &stores[..((k + 1) * batch).min(n)];
        ready_at_kill.push(format!(
            "{}/{}",
            env.ready(&ns, created).await.unwrap_or(0),
            created.len()
        ));
    }
    r.figure("Ready/created at each kill", ready_at_kill.join(" "));
    let t0 = Instant::now();
    let b = Bosun::start(env, "crash", &ns, &Flags::default()).await?;
    let limit = Duration::from_secs(if env.args.quick { 180 } else { 900 });
    match env.wait_ready(&ns, &stores, limit).await {
        Ok(_) => r.figure(
            "all Ready after the clean start (s)",
            format!("{:.1}", t0.elapsed().as_secs_f64()),
        ),
        Err(e) => r.check(false, e.to_string()),
    }
    let problems = env.check_children(&ns, &stores).await?;
    r.figure(
        "children missing, doubled or foreign; claims lost",
        problems.len(),
    );
    r.check(problems.is_empty(), format!("{problems:?}"));

    // A restart over the converged set writes nothing.
    b.wait_idle(Duration::from_secs(3), Duration::from_secs(120))
        .await?;
    b.stop().await?;
    let since = now_us();
    let b = Bosun::start(env, "crash", &ns, &Flags::default()).await?;
    b.wait_ready(Duration::from_secs(60)).await?;
    b.wait_idle(Duration::from_secs(3), Duration::from_secs(120))
        .await?;
    let all = env.writes_since(since)?;
    let writes = writes_by(&all, &Env::user("crash"));
    r.figure(
        "mutating requests on a restart over the converged set",
        writes.len(),
    );
    r.check(
        writes.is_empty(),
        format!(
            "restart wrote: {:?}",
            writes
                .iter()
                .map(|w| format!("{} {}", w.verb, w.resource))
                .collect::<Vec<_>>()
        ),
    );
    b.stop().await?;
    Ok(r)
}
