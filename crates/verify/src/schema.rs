//! A second valid spec from the CRD's OpenAPI schema, Acto-style: one field of `spec` the
//! schema bounds (an integer or number with its minimum and maximum, an enum, a boolean)
//! changed to another value it allows. Free strings are left alone: the schema cannot say
//! what an image name or a quantity may be, and a spec the operator must refuse is not the
//! point here.
use serde_json::{json, Value};

use crate::Rng;

/// A leaf the schema bounds: its path under the object and the values it may take.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    pub path: Vec<String>,
    pub schema: Value,
}

/// The bounded leaves under `spec` of `schema` (an `openAPIV3Schema`).
pub fn fields(schema: &Value) -> Vec<Field> {
    let mut out = Vec::new();
    walk(&schema["properties"]["spec"], vec!["spec".into()], &mut out);
    out
}

fn walk(s: &Value, path: Vec<String>, out: &mut Vec<Field>) {
    if let Some(props) = s["properties"].as_object() {
        for (k, v) in props {
            let mut p = path.clone();
            p.push(k.clone());
            walk(v, p, out);
        }
        return;
    }
    let bounded = s["enum"].as_array().is_some_and(|e| e.len() > 1)
        || s["type"] == "boolean"
        || ((s["type"] == "integer" || s["type"] == "number")
            && s["x-kubernetes-int-or-string"] != true);
    if bounded && path.len() > 1 {
        out.push(Field {
            path,
            schema: s.clone(),
        });
    }
}

fn get<'a>(v: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(v, |v, k| v.get(k))
}

/// Another value `field` allows, given its current one.
pub fn other_value(field: &Field, current: Option<&Value>, rng: &mut Rng) -> Option<Value> {
    let s = &field.schema;
    if let Some(e) = s["enum"].as_array() {
        let others: Vec<&Value> = e.iter().filter(|v| Some(*v) != current).collect();
        return (!others.is_empty())
            .then(|| others[rng.range(0, others.len() as u64) as usize].clone());
    }
    if s["type"] == "boolean" {
        let cur = current
            .and_then(Value::as_bool)
            .or(s["default"].as_bool())
            .unwrap_or(false);
        return Some(json!(!cur));
    }
    let min = s["minimum"].as_f64();
    let max = s["maximum"].as_f64();
    let cur = current
        .and_then(Value::as_f64)
        .or(s["default"].as_f64())
        .or(min)
        .unwrap_or(1.0);
    // One step, the way a user turns a knob: up when the schema lets it, else down.
    let up = cur + 1.0;
    let down = cur - 1.0;
    let ok = |x: f64| min.is_none_or(|m| x >= m) && max.is_none_or(|m| x <= m);
    let next = if ok(up) {
        up
    } else if ok(down) {
        down
    } else {
        return None;
    };
    // A whole number stays one: a chart's `number` is often a port or a count.
    Some(if s["type"] == "integer" || next.fract() == 0.0 {
        json!(next as i64)
    } else {
        json!(next)
    })
}

/// A second spec for `sample`: one bounded field changed. None when the schema bounds none.
/// Returns the changed object and a description of the change.
pub fn mutate(schema: &Value, sample: &Value, rng: &mut Rng) -> Option<(Value, String)> {
    let mut candidates = fields(schema);
    // Fields the sample sets first: the ones its author cares about.
    candidates.sort_by_key(|f| get(sample, &f.path).is_none());
    let set = candidates
        .iter()
        .filter(|f| get(sample, &f.path).is_some())
        .count();
    let pool = if set > 0 {
        &candidates[..set]
    } else {
        &candidates[..]
    };
    if pool.is_empty() {
        return None;
    }
    let start = rng.range(0, pool.len() as u64) as usize;
    for i in 0..pool.len() {
        let f = &pool[(start + i) % pool.len()];
        let current = get(sample, &f.path);
        if let Some(v) = other_value(f, current, rng) {
            let mut out = sample.clone();
            let mut at = &mut out;
            for k in &f.path[..f.path.len() - 1] {
                if !at[k.as_str()].is_object() {
                    at[k.as_str()] = json!({});
                }
                at = &mut at[k.as_str()];
            }
            let last = &f.path[f.path.len() - 1];
            at[last.as_str()] = v.clone();
            let what = format!(
                "{}: {} → {v}",
                f.path.join("."),
                current
                    .map(|c| c.to_string())
                    .unwrap_or_else(|| "(unset)".into())
            );
            return Some((out, what));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> Value {
        json!({"properties": {"spec": {"properties": {
            "size": {"type": "integer", "minimum": 1, "maximum": 3},
            "color": {"type": "string", "enum": ["red", "blue"]},
            "image": {"type": "string"},
            "port": {"x-kubernetes-int-or-string": true, "type": "integer"},
            "on": {"type": "boolean"}
        }}}})
    }

    #[test]
    fn only_bounded_fields_change_and_stay_within_bounds() {
        let names: Vec<String> = fields(&schema()).iter().map(|f| f.path.join(".")).collect();
        assert_eq!(names, vec!["spec.color", "spec.on", "spec.size"]);
        let sample = json!({"spec": {"size": 3, "color": "red"}});
        for seed in 1..40 {
            let mut rng = Rng::new(seed);
            let (out, what) = mutate(&schema(), &sample, &mut rng).expect("a change");
            let changed = (out["spec"]["size"] != 3) as u8 + (out["spec"]["color"] != "red") as u8;
            assert_eq!(changed, 1, "{what}: {out}");
            assert!(
                out["spec"]["size"] == 2 || out["spec"]["size"] == 3,
                "{out}"
            );
            assert!(
                out["spec"]["color"] == "red" || out["spec"]["color"] == "blue",
                "{out}"
            );
            assert!(
                out["spec"].get("on").is_none(),
                "fields the sample sets go first: {out}"
            );
        }
    }

    #[test]
    fn a_whole_number_stays_whole() {
        let s = json!({"properties": {"spec": {"properties": {"port": {"type": "number"}}}}});
        let (out, _) =
            mutate(&s, &json!({"spec": {"port": 80}}), &mut Rng::new(3)).expect("a change");
        assert_eq!(out["spec"]["port"].to_string(), "81");
    }

    #[test]
    fn nothing_bounded_means_no_second_spec() {
        let s = json!({"properties": {"spec": {"properties": {"image": {"type": "string"}}}}});
        assert_eq!(mutate(&s, &json!({"spec": {}}), &mut Rng::new(1)), None);
    }
}
