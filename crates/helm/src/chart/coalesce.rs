//! Values coalescing exactly as Helm's `coalesce.go`: user values win; a user `null`
//! deletes a chart default (when coalescing, not when merging); maps merge
//! recursively, lists and scalars replace; a table never overwrites a scalar nor the
//! reverse; `global` is copied down into every subchart; each subchart's values live
//! under its name (or alias).
use super::tree::EffChart;
use crate::value::shared::Shared;
use crate::value::{Map, MapKind, Str, Value};

fn is_table(v: &Value) -> bool {
    matches!(v, Value::Map(m) if m.kind() == MapKind::Iface)
}

fn table(v: &Value) -> Option<Map> {
    match v {
        Value::Map(m) if m.kind() == MapKind::Iface => Some(m.clone()),
        _ => None,
    }
}

/// Helm's `CoalesceValues` (merge = false) or `MergeValues` (merge = true), in place.
pub fn coalesce(ch: &EffChart, dest: &Map, merge: bool) -> Result<(), String> {
    coalesce_values(ch, dest, merge);
    coalesce_deps(ch, dest, merge)
}

fn coalesce_deps(ch: &EffChart, dest: &Map, merge: bool) -> Result<(), String> {
    for sub in &ch.deps {
        let name = Str::from(sub.name.as_str());
        match dest.get(&name) {
            None => dest.insert(name.clone(), Value::empty_map()),
            Some(v) if !is_table(&v) => {
                return Err(format!(
                    "type mismatch on {}: %!t({}={})",
                    sub.name,
                    v.type_name(),
                    crate::value::format::sprint_value(&v)
                ));
            }
            Some(_) => {}
        }
        if let Some(dv) = dest.get(&name).as_ref().and_then(table) {
            coalesce_globals(&dv, dest);
            coalesce(sub, &dv, merge)?;
            dest.insert(name, Value::Map(dv));
        }
    }
    Ok(())
}

fn coalesce_globals(dest: &Map, src: &Map) {
    let dg = match dest.get("global") {
        None => Map::new(MapKind::Iface),
        Some(v) => match table(&v) {
            Some(m) => m,
            None => return,
        },
    };
    let sg = match src.get("global") {
        None => Map::new(MapKind::Iface),
        Some(v) => match table(&v) {
            Some(m) => m,
            None => return,
        },
    };
    for (key, val) in sg.snapshot() {
        if let Some(vm) = table(&val) {
            let vv = vm.shallow_copy(MapKind::Iface);
            match dg.get(&key) {
                None => dg.insert(key, Value::Map(vv)),
                Some(destv) => {
                    if let Some(dm) = table(&destv) {
                        coalesce_tables(&vv, &dm, true);
                        dg.insert(key, Value::Map(vv));
                    }
                }
            }
        } else if dg.get(&key).as_ref().is_some_and(is_table) {
            // A table in the destination is not replaced by a scalar.
        } else {
            dg.insert(key, val);
        }
    }
    dest.insert(Str::from("global"), Value::Map(dg));
}

fn coalesce_values(ch: &EffChart, v: &Map, merge: bool) {
    // The chart's defaults are read in their shared form: only what reaches the values is
    // converted, and a table copied without its nils is converted without them.
    for (key, val) in ch.values.shared().entries() {
        match v.get(key) {
            Some(value) => {
                if value.is_nil() && !merge {
                    v.remove(key);
                } else if let Some(dest) = table(&value) {
                    if let Value::Map(src) = val.to_value() {
                        let merge = merge || ch.deps.iter().any(|d| *d.name == **key);
                        coalesce_tables(&dest, &src, merge);
                    }
                }
            }
            // Helm v4 never lets a chart default's null into coalesced values.
            None if !merge => match val {
                Shared::Map(_) => v.insert(key.clone(), val.to_value_without_nils()),
                Shared::Null => {}
                _ => v.insert(key.clone(), val.to_value()),
            },
            None => v.insert(key.clone(), val.to_value()),
        }
    }
}

/// Helm's `coalesceTablesFullKey`: `dst` wins; changes `dst` (and `src`) in place.
pub fn coalesce_tables(dst: &Map, src: &Map, merge: bool) {
    coalesce_tables_depth(dst, src, merge, 0)
}

fn coalesce_tables_depth(dst: &Map, src: &Map, merge: bool, depth: usize) {
    if depth > 1_000 || dst.same(src) {
        return;
    }
    for (key, val) in dst.snapshot() {
        if val.is_nil() {
            src.insert(key, Value::Nil);
        }
    }
    for (key, val) in src.snapshot() {
        match dst.get(&key) {
            Some(dv) if !merge && dv.is_nil() => {
                dst.remove(&key);
            }
            None if !merge => match table(&val) {
                Some(t) => dst.insert(key, Value::Map(trim_nils(&t))),
                None if val.is_nil() => {}
                None => dst.insert(key, val),
            },
            None => dst.insert(key, val),
            Some(dv) => {
                if let Some(sm) = table(&val) {
                    if let Some(dm) = table(&dv) {
                        coalesce_tables_depth(&dm, &sm, merge, depth + 1);
                    }
                }
            }
        }
    }
}

/// Drops nil values recursively (Helm's `trimNilValues`).
pub fn trim_nils(m: &Map) -> Map {
    let out = Map::new(MapKind::Iface);
    for (k, v) in m.snapshot() {
        if v.is_nil() {
            continue;
        }
        match table(&v) {
            Some(t) => out.insert(k, Value::Map(trim_nils(&t))),
            None => out.insert(k, v),
        }
    }
    out
}

/// Merges `src` into `dst` with `src` winning (Helm's `mergeMaps` for values files).
pub fn merge_maps(dst: &Map, src: &Map) {
    for (k, v) in src.snapshot() {
        if let (Some(sm), Some(Value::Map(dm))) = (table(&v), dst.get(&k)) {
            if dm.kind() == MapKind::Iface {
                merge_maps(&dm, &sm);
                continue;
            }
        }
        dst.insert(k, v);
    }
}
