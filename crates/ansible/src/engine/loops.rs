//! Loops: the items of `loop`/`with_items`/`with_list`/`with_dict`, the loop variables of
//! each item, and results shaped as Ansible registers them.
use std::sync::Arc;

use minijinja::value::{Value, ValueKind};
use serde_json::{json, Value as Json};

use super::exec::Run;
use crate::role::{LoopKind, Task};
use crate::template::{value, Scope, VarLayer};

/// Most items one loop may have.
const MAX_ITEMS: usize = 10_000;

/// The loop's items, or None when the task does not loop.
pub(crate) fn items(
    run: &Run,
    task: &Task,
    scope: &Arc<Scope>,
) -> Result<Option<Vec<Value>>, String> {
    let (Some(kind), Some(raw)) = (task.loop_kind, &task.loop_value) else {
        return Ok(None);
    };
    let v = run
        .templar
        .template_value(raw, scope)
        .map_err(|e| format!("Error in loop: {e}"))?;
    let list: Vec<Value> = match (kind, v.kind()) {
        (LoopKind::WithSequence, ValueKind::String | ValueKind::Seq) => {
            let terms: Vec<Value> = if v.kind() == ValueKind::Seq {
                v.try_iter().map_err(|e| e.to_string())?.collect()
            } else {
                vec![v.clone()]
            };
            let mut out = Vec::new();
            for t in terms {
                out.extend(
                    super::sequence::sequence(&value::py_str(&t))?
                        .into_iter()
                        .map(Value::from),
                );
            }
            out
        }
        (
            LoopKind::WithNested | LoopKind::WithTogether | LoopKind::WithSubelements,
            ValueKind::Seq,
        ) => combined(kind, &v)?,
        (LoopKind::WithNested | LoopKind::WithTogether | LoopKind::WithSubelements, _) => {
            return Err(format!(
                "{} needs a list, got {}",
                loop_keyword(kind),
                value::py_str(&v)
            ))
        }
        (LoopKind::WithDict, ValueKind::Map) => v
            .try_iter()
            .map_err(|e| e.to_string())?
            .map(|k| {
                Value::from_pairs([
                    (Value::from("key"), k.clone()),
                    (Value::from("value"), v.get_item(&k).unwrap_or_default()),
                ])
            })
            .collect(),
        (LoopKind::WithDict, _) => return Err("with_dict expects a dict".into()),
        (_, ValueKind::Seq) => v.try_iter().map_err(|e| e.to_string())?.collect(),
        (LoopKind::WithItems | LoopKind::WithList, ValueKind::String) => vec![v.clone()],
        (LoopKind::WithItems | LoopKind::WithList, ValueKind::None) => Vec::new(),
        (LoopKind::Loop, _) => {
            return Err(format!("Invalid data passed to 'loop', it requires a list, got this instead: {}. Hint: If you passed a list/dict of just one element, try adding wantlist=True to your lookup invocation or use q/query instead of lookup.", value::py_str(&v)));
        }
        _ => {
            return Err(format!(
                "loop items must be a list, got {}",
                value::py_str(&v)
            ))
        }
    };
    let list = if matches!(kind, LoopKind::WithItems | LoopKind::WithIndexedItems) {
        // with_items flattens one level.
        list.into_iter()
            .flat_map(|x| {
                if x.kind() == ValueKind::Seq {
                    x.try_iter()
                        .map(|i| i.collect::<Vec<_>>())
                        .unwrap_or_default()
                } else {
                    vec![x]
                }
            })
            .collect()
    } else {
        list
    };
    let list = if kind == LoopKind::WithIndexedItems {
        list.into_iter()
            .enumerate()
            .map(|(i, x)| Value::from(vec![Value::from(i), x]))
            .collect()
    } else {
        list
    };
    if list.len() > MAX_ITEMS {
        return Err(format!(
            "the loop has {} items, more than bosun's limit of {MAX_ITEMS}",
            list.len()
        ));
    }
    Ok(Some(list))
}

fn loop_keyword(kind: LoopKind) -> &'static str {
    match kind {
        LoopKind::WithNested => "with_nested",
        LoopKind::WithTogether => "with_together",
        LoopKind::WithSubelements => "with_subelements",
        LoopKind::WithIndexedItems => "with_indexed_items",
        LoopKind::WithSequence => "with_sequence",
        LoopKind::WithDict => "with_dict",
        LoopKind::WithItems => "with_items",
        LoopKind::WithList => "with_list",
        LoopKind::Loop => "loop",
    }
}

/// The items of `with_nested`, `with_together` and `with_subelements`: Ansible's `nested`,
/// `together` and `subelements` lookups, on the filters of the same logic.
fn combined(kind: LoopKind, v: &Value) -> Result<Vec<Value>, String> {
    use crate::template::itertools;
    let terms: Vec<Value> = v.try_iter().map_err(|e| e.to_string())?.collect();
    let err = |e: minijinja::Error| e.detail().map_or_else(|| e.to_string(), String::from);
    let out = match kind {
        LoopKind::WithNested => {
            let (first, rest) = terms
                .split_first()
                .ok_or("with_nested requires at least one element in the nested list")?;
            itertools::product_of(first, rest).map_err(err)?
        }
        LoopKind::WithTogether => {
            let (first, rest) = terms
                .split_first()
                .ok_or("with_together requires at least one element in each list")?;
            itertools::zip_longest_of(first, rest, Value::from(())).map_err(err)?
        }
        _ => {
            let (list, key, flags) = match terms.as_slice() {
                [l, k] => (l, k, None),
                [l, k, f] => (l, k, Some(f)),
                _ => return Err("subelements lookup expects a list of two or three items, the list, the name of the subelement and optionally a dictionary of flags".into()),
            };
            let skip = flags
                .and_then(|f| f.get_attr("skip_missing").ok())
                .is_some_and(|s| s.is_true());
            let pairs = itertools::subelements_of(list, key, skip).map_err(err)?;
            // The lookup (unlike the filter) takes the subelements out of the element.
            let path: Vec<String> = match key.as_str() {
                Some(k) => k.split('.').map(String::from).collect(),
                None => Vec::new(),
            };
            let pairs = pairs
                .try_iter()
                .map_err(|e| e.to_string())?
                .map(|pair| {
                    let mut j = value::to_json(&pair).unwrap_or(Json::Null);
                    if let Some((last, parents)) = path.split_last() {
                        let at = parents
                            .iter()
                            .try_fold(j.get_mut(0), |at, p| Some(at?.get_mut(p.as_str())))
                            .flatten();
                        if let Some(m) = at.and_then(Json::as_object_mut) {
                            m.remove(last);
                        }
                    }
                    value::from_json(&j)
                })
                .collect::<Vec<_>>();
            Value::from(pairs)
        }
    };
    let out = out.try_iter().map_err(|e| e.to_string())?;
    if kind == LoopKind::WithSubelements {
        return Ok(out.collect());
    }
    // The nested and together lookups flatten each combination one level.
    Ok(out
        .map(|combo| {
            let flat: Vec<Value> = combo
                .try_iter()
                .into_iter()
                .flatten()
                .flat_map(|x| match x.kind() {
                    ValueKind::Seq => x.try_iter().map(|i| i.collect()).unwrap_or_default(),
                    _ => vec![x],
                })
                .collect();
            Value::from(flat)
        })
        .collect())
}

/// The variables of one item: the loop variable, `ansible_loop_var`, the index variable and,
/// with `extended`, `ansible_loop`.
pub(crate) fn item_layer(task: &Task, item: &Value, i: usize, n: usize) -> Arc<VarLayer> {
    let lc = &task.loop_control;
    let mut l = VarLayer::new();
    l.insert(lc.loop_var.clone(), item.clone());
    l.insert("ansible_loop_var".into(), Value::from(lc.loop_var.as_str()));
    if let Some(iv) = &lc.index_var {
        l.insert(iv.clone(), Value::from(i));
        l.insert("ansible_index_var".into(), Value::from(iv.as_str()));
    }
    if lc.extended {
        l.insert(
            "ansible_loop".into(),
            Value::from_pairs([
                ("index", Value::from(i + 1)),
                ("index0", Value::from(i)),
                ("revindex", Value::from(n - i)),
                ("revindex0", Value::from(n - i - 1)),
                ("first", Value::from(i == 0)),
                ("last", Value::from(i + 1 == n)),
                ("length", Value::from(n)),
            ]),
        );
    }
    Arc::new(l)
}

pub(crate) fn label(run: &Run, task: &Task, item: &Value, scope: &Arc<Scope>) -> Option<Json> {
    let l = task.loop_control.label.as_ref()?;
    let v = run
        .templar
        .template_value(l, scope)
        .unwrap_or_else(|_| item.clone());
    value::to_json(&v).ok()
}

/// One item's result with the loop keys Ansible adds.
pub(crate) fn with_item(
    task: &Task,
    mut r: Json,
    item: &Value,
    i: usize,
    label: Option<Json>,
) -> Json {
    let lc = &task.loop_control;
    if let Some(o) = r.as_object_mut() {
        o.insert(
            lc.loop_var.clone(),
            value::to_json(item).unwrap_or(Json::Null),
        );
        o.insert("ansible_loop_var".into(), Json::String(lc.loop_var.clone()));
        if let Some(iv) = &lc.index_var {
            o.insert(iv.clone(), json!(i));
            o.insert("ansible_index_var".into(), Json::String(iv.clone()));
        }
        if let Some(l) = label {
            o.insert("_ansible_item_label".into(), l);
        }
        o.entry("failed").or_insert(Json::Bool(false));
        o.entry("changed").or_insert(Json::Bool(false));
    }
    r
}

/// A loop's registered result.
pub(crate) fn aggregate(results: Vec<Json>) -> Json {
    let flag = |r: &Json, k: &str| r.get(k).and_then(Json::as_bool).unwrap_or(false);
    let changed = results.iter().any(|r| flag(r, "changed"));
    let failed = results.iter().any(|r| flag(r, "failed"));
    let all_skipped = !results.is_empty() && results.iter().all(|r| flag(r, "skipped"));
    let mut out = json!({
        "changed": changed,
        "msg": if failed { "One or more items failed" } else { "All items completed" },
        "results": results,
    });
    if failed {
        out["failed"] = Json::Bool(true);
    }
    if all_skipped {
        out["skipped"] = Json::Bool(true);
    }
    if out["results"].as_array().is_some_and(Vec::is_empty) {
        out["skipped"] = Json::Bool(true);
        out["skipped_reason"] = Json::String("No items in the list".into());
        out["msg"] = Json::String("All items skipped".into());
    }
    out
}
