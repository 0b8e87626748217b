//! `bosun render CHART`: what `helm template` prints, rendered by bosun's own engine.
use std::path::PathBuf;

use anyhow::{bail, Context};
use bosun_helm::render::manifest::helm_template_output;
use bosun_helm::render::{Chart, RenderOptions};
use bosun_helm::value::Data;

#[derive(clap::Args, Debug)]
pub struct RenderArgs {
    /// Chart directory or .tgz archive.
    pub chart: PathBuf,
    /// Values files, later ones winning.
    #[arg(short = 'f', long = "values")]
    pub values: Vec<PathBuf>,
    /// Set values (a.b=c), typed as Helm types them.
    #[arg(long = "set")]
    pub set: Vec<String>,
    /// Set string values (a.b=c).
    #[arg(long = "set-string")]
    pub set_string: Vec<String>,
    /// Release name.
    #[arg(long, default_value = "release-name")]
    pub name: String,
    /// Release namespace.
    #[arg(short = 'n', long, default_value = "default")]
    pub namespace: String,
    /// Kubernetes version for .Capabilities (Helm's default when unset).
    #[arg(long)]
    pub kube_version: Option<String>,
    /// Extra API versions for .Capabilities.APIVersions.
    #[arg(short = 'a', long = "api-versions")]
    pub api_versions: Vec<String>,
    /// Only print manifests from these templates (glob patterns).
    #[arg(short = 's', long = "show-only")]
    pub show_only: Vec<String>,
    /// Also print the chart's crds/ files.
    #[arg(long)]
    pub include_crds: bool,
    /// Benchmark: render N times and print the median time per render.
    #[arg(long, hide = true)]
    pub bench: Option<usize>,
    /// Values as JSON with every number a float64 (how Helm's engine receives them in
    /// the differential harness); replaces -f/--set.
    #[arg(long, hide = true)]
    pub values_json: Option<PathBuf>,
    /// Print the rendered files as a JSON object {"ok": {path: text}} or {"err": msg}.
    #[arg(long, hide = true)]
    pub files_json: bool,
}

/// Merges values files and --set flags the way Helm's `values.Options` does.
fn user_values(args: &RenderArgs) -> anyhow::Result<Data> {
    let mut texts = Vec::new();
    for f in &args.values {
        texts.push(std::fs::read_to_string(f).with_context(|| format!("reading {}", f.display()))?);
    }
    let files: Vec<&str> = texts.iter().map(String::as_str).collect();
    let set: Vec<&str> = args.set.iter().map(String::as_str).collect();
    let set_string: Vec<&str> = args.set_string.iter().map(String::as_str).collect();
    bosun_helm::render::user_values(&files, &set, &set_string).map_err(|e| anyhow::anyhow!("{e}"))
}

pub fn run(args: RenderArgs) -> anyhow::Result<()> {
    let chart = Chart::load(&args.chart).map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut opts = RenderOptions::new(&args.name, &args.namespace);
    opts.values = match &args.values_json {
        Some(p) => {
            let text =
                std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
            Data::from_json_float(&text).map_err(|e| anyhow::anyhow!("{}: {e}", p.display()))?
        }
        None => user_values(&args)?,
    };
    opts.kube_version = args.kube_version.clone();
    opts.api_versions = args.api_versions.clone();
    if let Some(n) = args.bench {
        let mut times = Vec::with_capacity(n);
        for _ in 0..n.max(1) {
            let t = std::time::Instant::now();
            chart.render(&opts).map_err(|e| anyhow::anyhow!("{e}"))?;
            times.push(t.elapsed().as_secs_f64() * 1e3);
        }
        times.sort_by(f64::total_cmp);
        println!("render_ms {:.3}", times[times.len() / 2]);
        return Ok(());
    }
    if args.files_json {
        use bosun_helm::value::{json, Map, MapKind, Value};
        let out = match chart.render(&opts) {
            Ok(r) => {
                let m = Map::new(MapKind::Iface);
                for (k, v) in &r.files {
                    m.insert(k.as_str().into(), Value::str(v));
                }
                let top = Map::new(MapKind::Iface);
                top.insert("ok".into(), Value::Map(m));
                Value::Map(top)
            }
            Err(e) => {
                let top = Map::new(MapKind::Iface);
                top.insert("err".into(), Value::string(e.message));
                Value::Map(top)
            }
        };
        println!(
            "{}",
            json::marshal(&out).map_err(|e| anyhow::anyhow!("{e}"))?
        );
        return Ok(());
    }
    let rendered = chart.render(&opts).map_err(|e| anyhow::anyhow!("{e}"))?;
    let out =
        helm_template_output(&rendered, args.include_crds).map_err(|e| anyhow::anyhow!("{e}"))?;
    if args.show_only.is_empty() {
        print!("{out}");
        return Ok(());
    }
    print!("{}", show_only(&out, &args.show_only)?);
    Ok(())
}

/// `helm template --show-only`: the output split again as Helm splits manifests, the
/// documents whose `# Source:` path (without the chart name) matches each pattern, in
/// pattern order; nothing is printed when a pattern matches no template.
fn show_only(out: &str, patterns: &[String]) -> anyhow::Result<String> {
    let docs = bosun_helm::render::manifest::split_documents(out);
    let mut picked = String::new();
    for pattern in patterns {
        let mut found = false;
        for d in &docs {
            let Some(rel) = source_path(d) else {
                continue;
            };
            if bosun_helm::chart::ignore::go_match(pattern, rel) {
                picked.push_str(&format!("---\n{d}\n"));
                found = true;
            }
        }
        if !found {
            bail!("could not find template {pattern} in chart");
        }
    }
    Ok(picked)
}

/// What Helm's `# Source: [^/]+/(.+)` captures: the path after the chart's name.
fn source_path(doc: &str) -> Option<&str> {
    let rest = &doc[doc.find("# Source: ")? + "# Source: ".len()..];
    let slash = rest.find('/').filter(|i| *i > 0)?;
    let rel = rest[slash + 1..].split('\n').next()?;
    (!rel.is_empty()).then_some(rel)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::show_only;

    #[test]
    fn show_only_splits_as_helm_does() {
        let out = "---\n# Source: c/templates/a.yaml\nx: a---\ny: 1\n---\n# Source: c/templates/b.yaml\nz: 2\n---\n# Source: c/templates/a.yaml\nw: 3\n";
        // Helm prints each picked document as split, then a newline: the last one of the
        // output keeps its own newline, hence a blank line at the end.
        let patterns = |p: &[&str]| p.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            show_only(out, &patterns(&["templates/a.yaml"])).unwrap(),
            "---\n# Source: c/templates/a.yaml\nx: a---\ny: 1\n---\n# Source: c/templates/a.yaml\nw: 3\n\n"
        );
        assert_eq!(
            show_only(out, &patterns(&["templates/b.yaml", "templates/*.yaml"])).unwrap(),
            "---\n# Source: c/templates/b.yaml\nz: 2\n---\n# Source: c/templates/a.yaml\nx: a---\ny: 1\n---\n# Source: c/templates/b.yaml\nz: 2\n---\n# Source: c/templates/a.yaml\nw: 3\n\n"
        );
        let e = show_only(out, &patterns(&["templates/a.yaml", "templates/c.yaml"])).unwrap_err();
        assert_eq!(
            e.to_string(),
            "could not find template templates/c.yaml in chart"
        );
    }
}
