//! Load and render times of one chart, as `scripts/helm-oracle.py bench` measures Helm's:
//! `cargo run --release -p bosun-helm --example render-bench -- CHART [N]`.
//! Prints the cold load, the first render (which parses the templates), and the medians
//! of N loads and of N warm renders of one loaded chart, in milliseconds.
use std::path::Path;
use std::time::Instant;

use bosun_helm::render::{Chart, RenderOptions};

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

fn main() -> Result<(), String> {
    let mut args = std::env::args().skip(1);
    let path = args.next().ok_or("usage: render-bench CHART [N]")?;
    let n: usize = args
        .next()
        .map_or(Ok(50), |s| s.parse().map_err(|e| format!("{e}")))?;
    let mut opts = RenderOptions::new("release-name", "default");
    opts.kube_version = Some("v1.31.0".into());
    let t = Instant::now();
    let chart = Chart::load(Path::new(&path)).map_err(|e| e.message)?;
    let cold_load = ms(t);
    let t = Instant::now();
    chart.render(&opts).map_err(|e| e.message)?;
    let first_render = ms(t);
    let mut loads = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        let c = Chart::load(Path::new(&path)).map_err(|e| e.message)?;
        loads.push(ms(t));
        drop(c);
    }
    let mut renders = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        let r = chart.render(&opts).map_err(|e| e.message)?;
        renders.push(ms(t));
        drop(r);
    }
    println!(
        "cold_load_ms {cold_load:.3} first_render_ms {first_render:.3} load_ms {:.3} render_ms {:.3} (medians of {n})",
        median(loads),
        median(renders)
    );
    Ok(())
}
