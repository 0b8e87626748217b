//! Render benchmark: `cargo run --release -p bosun-helm --example render_bench -- CHART [N]`
//! prints the median load time and the median render time (ms) over N renders.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use std::time::Instant;

use bosun_helm::render::{Chart, RenderOptions};

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let mut args = std::env::args().skip(1);
    let path = args.next().expect("usage: render_bench CHART [N]");
    let n: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(100);
    let mut loads = Vec::new();
    let mut chart = None;
    for _ in 0..n.clamp(1, 20) {
        let t = Instant::now();
        chart = Some(Chart::load(path.as_ref()).expect("load"));
        loads.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let chart = chart.expect("chart");
    let mut opts = RenderOptions::new("bench", "default");
    opts.kube_version = Some("v1.31.0".into());
    let mut renders = Vec::new();
    for _ in 0..n {
        let t = Instant::now();
        let r = chart.render(&opts).expect("render");
        renders.push(t.elapsed().as_secs_f64() * 1e3);
        std::hint::black_box(r);
    }
    println!(
        "{{\"chart\": \"{path}\", \"load_ms\": {:.3}, \"render_ms\": {:.3}, \"n\": {n}}}",
        median(loads),
        median(renders)
    );
}
