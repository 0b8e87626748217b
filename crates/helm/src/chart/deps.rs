//! Per-render dependency processing, as Helm's `ProcessDependenciesWithMerge`:
//! `tags` and `condition` decide which subcharts take part, then `import-values`
//! copies child values into the parent's defaults.
use std::sync::Arc;

use super::coalesce::{coalesce, coalesce_tables};
use super::tree::EffChart;
use crate::value::shared::Defaults;
use crate::value::{Data, Map, MapKind, Str, Value};

fn table(v: &Value) -> Option<Map> {
    match v {
        Value::Map(m) if matches!(m.kind(), MapKind::Iface | MapKind::Values) => Some(m.clone()),
        _ => None,
    }
}

/// `Values.Table(path)`.
pub fn table_at(root: &Map, path: &str) -> Option<Map> {
    let mut cur = root.clone();
    for part in path.split('.') {
        cur = table(&cur.get(part)?)?;
    }
    Some(cur)
}

/// `Values.PathValue(path)`: a non-table value.
fn path_value(root: &Map, path: &str) -> Option<Value> {
    let (parent, key) = match path.rsplit_once('.') {
        Some((p, k)) => (table_at(root, p)?, k),
        None => (root.clone(), path),
    };
    let v = parent.get(key)?;
    if matches!(&v, Value::Map(m) if m.kind() == MapKind::Iface) {
        return None;
    }
    Some(v)
}

fn deep_copy(m: &Map) -> Map {
    match crate::funcs::dicts::deep_copy(&Value::Map(m.clone()), 0) {
        Value::Map(c) => c,
        _ => Map::new(MapKind::Iface),
    }
}

/// `processDependencyEnabled`: the tree without disabled subcharts.
pub fn enabled(ch: &EffChart, v: &Map, path: &str) -> Result<EffChart, String> {
    if ch.node.meta.dependencies.is_empty() {
        return Ok(ch.clone());
    }
    let cvals = deep_copy(v);
    coalesce(ch, &cvals, false)?;
    let mut reqs = ch.reqs.clone();
    for r in &mut reqs {
        r.enabled = true;
    }
    // Tags.
    if let Some(tags) = table_at(&cvals, "tags") {
        for r in &mut reqs {
            let (mut has_true, mut has_false) = (false, false);
            for k in &r.tags {
                if let Some(Value::Bool(b)) = tags.get(k) {
                    if b {
                        has_true = true;
                    } else {
                        has_false = true;
                    }
                }
            }
            r.enabled = has_true || !has_false;
        }
    }
    // Conditions: the first boolean found wins.
    for r in &mut reqs {
        for c in r.condition.trim().split(',') {
            if c.is_empty() {
                continue;
            }
            if let Some(Value::Bool(b)) = path_value(&cvals, &format!("{path}{c}")) {
                r.enabled = b;
                break;
            }
        }
    }
    let disabled: Vec<String> = reqs
        .iter()
        .filter(|r| !r.enabled)
        .map(|r| r.name.clone())
        .collect();
    let mut out = ch.clone();
    out.reqs = reqs.into_iter().filter(|r| r.enabled).collect();
    let mut deps = Vec::new();
    for d in &ch.deps {
        if disabled.contains(&d.name) {
            continue;
        }
        deps.push(enabled(d, &cvals, &format!("{path}{}.", d.name))?);
    }
    out.deps = deps;
    Ok(out)
}

fn path_to_map(path: &str, data: Map) -> Map {
    if path == "." {
        return data;
    }
    let mut cur = data;
    for part in path.split('.').rev() {
        let m = Map::new(MapKind::Iface);
        m.insert(Str::from(part), Value::Map(cur));
        cur = m;
    }
    cur
}

/// `processDependencyImportValues` (merge mode), bottom-up.
pub fn import_values(ch: &mut EffChart) -> Result<(), String> {
    for d in &mut ch.deps {
        import_values(d)?;
    }
    if ch.node.meta.dependencies.is_empty() {
        return Ok(());
    }
    let cvals = Map::new(MapKind::Iface);
    coalesce(ch, &cvals, true)?;
    let b = Map::new(MapKind::Iface);
    for r in &mut ch.reqs {
        let mut out = Vec::new();
        for iv in &r.import_values {
            match iv {
                Data::Map(m) => {
                    let child = m
                        .get("child")
                        .and_then(Data::as_str)
                        .unwrap_or("")
                        .to_string();
                    let parent = m
                        .get("parent")
                        .and_then(Data::as_str)
                        .unwrap_or("")
                        .to_string();
                    out.push(Data::Map(
                        [
                            ("child".to_string(), Data::String(child.clone())),
                            ("parent".to_string(), Data::String(parent.clone())),
                        ]
                        .into_iter()
                        .collect(),
                    ));
                    if let Some(vv) = table_at(&cvals, &format!("{}.{child}", r.name)) {
                        coalesce_tables(
                            &b,
                            &path_to_map(&parent, vv.shallow_copy(MapKind::Iface)),
                            true,
                        );
                    }
                }
                Data::String(s) => {
                    let child = format!("exports.{s}");
                    out.push(Data::Map(
                        [
                            ("child".to_string(), Data::String(child.clone())),
                            ("parent".to_string(), Data::String(".".into())),
                        ]
                        .into_iter()
                        .collect(),
                    ));
                    if let Some(vm) = table_at(&cvals, &format!("{}.{child}", r.name)) {
                        coalesce_tables(&b, &vm.shallow_copy(MapKind::Iface), true);
                    }
                }
                _ => {}
            }
        }
        r.import_values = out;
    }
    let merged = deep_copy(&cvals);
    coalesce_tables(&merged, &b, true);
    ch.values = Arc::new(Defaults::new(Data::from_value(&Value::Map(merged))));
    Ok(())
}
