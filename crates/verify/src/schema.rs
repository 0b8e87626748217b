//! A second valid spec from the CRD's OpenAPI schema, Acto-style: one field of `spec` changed
//! to another value it allows. The rules, in the order a field is tried:
//! - bounded fields: an enum gets another member, a boolean flips, an integer or number moves
//!   one step within its `minimum` and `maximum`;
//! - free strings, only where a valid other value can be told from the field's name or its
//!   value (never a spec the operator must refuse): a string whose value is one of a
//!   Kubernetes vocabulary (`Always`/`IfNotPresent`/`Never`, `ClusterIP`/`NodePort`/
//!   `LoadBalancer`) gets another word of it; an image (a field named `image` or `*Image`)
//!   gets another tag, as does a field named `tag` under an image; a quantity (`1Gi`, `500m`,
//!   or a number in an int-or-string field) is doubled. A string with a `format`, or with a
//!   `pattern` other than Kubernetes' quantity pattern, is left alone: nothing here can prove
//!   a generated value matches it. `minLength`/`maxLength` are kept;
//! - where the schema preserves unknown fields (operator-sdk's Ansible and Helm kinds: `spec`
//!   is an open object), the sample's own values stand for the schema: each leaf the sample
//!   sets (arrays aside) gets a value of the same type by the rules above (a boolean flipped,
//!   an integer plus one, a string as a free string).
//!
//! Fields the sample sets are tried first, from a seeded start.
use serde_json::{json, Value};

use crate::Rng;

/// Keeps the fields a schema does not list.
const OPEN: &str = "x-kubernetes-preserve-unknown-fields";

/// Words of a Kubernetes vocabulary: any of them is valid where one is.
const VOCABULARIES: &[&[&str]] = &[
    &["Always", "IfNotPresent", "Never"],
    &["ClusterIP", "NodePort", "LoadBalancer"],
];

/// A leaf that may change: its path under the object and its schema (for a leaf of an open
/// object, one made from the sample's value: its type only).
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    pub path: Vec<String>,
    pub schema: Value,
}

/// The leaves under `spec` of `schema` (an `openAPIV3Schema`) that may get another value, and
/// the leaves `sample` sets where the schema leaves `spec` open.
pub fn fields(schema: &Value, sample: &Value) -> Vec<Field> {
    let mut out = Vec::new();
    walk(
        &schema["properties"]["spec"],
        vec!["spec".into()],
        sample.get("spec"),
        &mut out,
    );
    out
}

fn walk(s: &Value, path: Vec<String>, sample: Option<&Value>, out: &mut Vec<Field>) {
    let props = s["properties"].as_object();
    if let Some(props) = props {
        for (k, v) in props {
            let mut p = path.clone();
            p.push(k.clone());
            walk(v, p, sample.and_then(|x| x.get(k)), out);
        }
    }
    if s[OPEN] == true {
        // What the schema does not list, the sample's values stand for.
        for (k, v) in sample.and_then(Value::as_object).into_iter().flatten() {
            if props.is_none_or(|p| !p.contains_key(k)) {
                let mut p = path.clone();
                p.push(k.clone());
                from_values(v, p, out);
            }
        }
        return;
    }
    if props.is_some() || path.len() < 2 {
        return;
    }
    let t = &s["type"];
    let candidate = s["enum"].as_array().is_some_and(|e| e.len() > 1)
        || t == "boolean"
        || t == "integer"
        || t == "number"
        || t == "string"
        || s["x-kubernetes-int-or-string"] == true;
    if candidate {
        out.push(Field {
            path,
            schema: s.clone(),
        });
    }
}

fn from_values(v: &Value, path: Vec<String>, out: &mut Vec<Field>) {
    let t = match v {
        Value::Object(m) => {
            for (k, v) in m {
                let mut p = path.clone();
                p.push(k.clone());
                from_values(v, p, out);
            }
            return;
        }
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) | Value::Null => return,
    };
    out.push(Field {
        path,
        schema: json!({ "type": t }),
    });
}

fn get<'a>(v: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(v, |v, k| v.get(k))
}

/// Another value `field` allows, given its current one; None when none can be told valid.
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
    let current = current.or(s.get("default"));
    if let Some(text) = current.and_then(Value::as_str) {
        return free_string(&field.path, text, s, rng).map(Value::String);
    }
    if s["x-kubernetes-int-or-string"] == true {
        // A number there is a port as often as a quantity: changed only when the pattern
        // says quantity.
        let n = current.and_then(Value::as_i64)?;
        return is_quantity_pattern(s).then(|| json!(if n == 0 { 1 } else { n * 2 }));
    }
    if s["type"] != "integer" && s["type"] != "number" {
        return None;
    }
    let min = s["minimum"].as_f64();
    let max = s["maximum"].as_f64();
    let cur = current.and_then(Value::as_f64).or(min).unwrap_or(1.0);
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

/// Kubernetes' quantity pattern (what `resource.Quantity` puts in a CRD).
fn is_quantity_pattern(s: &Value) -> bool {
    s["pattern"]
        .as_str()
        .is_some_and(|p| p.contains("[KMGTPE]i"))
}

fn free_string(path: &[String], cur: &str, s: &Value, rng: &mut Rng) -> Option<String> {
    let quantity_pattern = is_quantity_pattern(s);
    if s.get("format").is_some() || (s.get("pattern").is_some() && !quantity_pattern) {
        return None;
    }
    let key = path.last().map(String::as_str).unwrap_or("");
    let under_image = path[..path.len().saturating_sub(1)]
        .iter()
        .any(|p| p.to_ascii_lowercase().contains("image"));
    let out = if let Some(words) = VOCABULARIES.iter().find(|w| w.contains(&cur)) {
        let others: Vec<&&str> = words.iter().filter(|w| **w != cur).collect();
        Some(others[rng.range(0, others.len() as u64) as usize].to_string())
    } else if key.eq_ignore_ascii_case("image") || key.ends_with("Image") {
        image_with_other_tag(cur)
    } else if key == "tag" && under_image {
        valid_tag(cur).then(|| other_tag(cur))
    } else {
        let unit = cur.trim_start_matches(|c: char| c.is_ascii_digit() || c == '.');
        let typed = quantity_pattern || s["x-kubernetes-int-or-string"] == true;
        // A bare number in a free string may be anything (a version, a name): only a unit,
        // or a schema that says quantity, makes it one.
        if unit.is_empty() && !typed {
            None
        } else {
            doubled_quantity(cur)
        }
    }?;
    let len = out.chars().count() as u64;
    let fits = s["minLength"].as_u64().is_none_or(|m| len >= m)
        && s["maxLength"].as_u64().is_none_or(|m| len <= m);
    fits.then_some(out)
}

/// A tag as the image reference grammar allows: `[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}`.
fn valid_tag(t: &str) -> bool {
    let mut chars = t.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c))
        && t.len() <= 128
}

/// The last number of the tag plus one (`1.25.3` → `1.25.4`, `v9` → `v10`); a tag without a
/// number becomes `latest`, and `latest` becomes `stable`.
fn other_tag(tag: &str) -> String {
    let end = tag.rfind(|c: char| c.is_ascii_digit());
    let Some(end) = end else {
        return if tag == "latest" { "stable" } else { "latest" }.into();
    };
    let start = tag[..=end]
        .rfind(|c: char| !c.is_ascii_digit())
        .map_or(0, |i| i + 1);
    match tag[start..=end].parse::<u64>() {
        Ok(n) => format!("{}{}{}", &tag[..start], n + 1, &tag[end + 1..]),
        Err(_) => "latest".into(),
    }
}

/// `repo/name:tag` with another tag; no tag reads as `latest`. A digest is left alone (no
/// other valid one can be made up).
fn image_with_other_tag(image: &str) -> Option<String> {
    if image.is_empty() || image.contains('@') || image.contains(char::is_whitespace) {
        return None;
    }
    let name_start = image.rfind('/').map_or(0, |i| i + 1);
    match image[name_start..].rfind(':') {
        Some(i) => {
            let (name, tag) = image.split_at(name_start + i);
            let tag = &tag[1..];
            valid_tag(tag).then(|| format!("{name}:{}", other_tag(tag)))
        }
        None => Some(format!("{image}:{}", other_tag("latest"))),
    }
}

/// Twice the quantity, in its unit (`1Gi` → `2Gi`, `500m` → `1000m`, `0.5` → `1`); None when
/// it is not one.
fn doubled_quantity(q: &str) -> Option<String> {
    let digits = q
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(q.len());
    let (number, unit) = q.split_at(digits);
    const UNITS: &[&str] = &[
        "", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "n", "u", "m", "k", "M", "G", "T", "P", "E",
    ];
    if number.is_empty() || number.starts_with('.') || !UNITS.contains(&unit) {
        return None;
    }
    let out = if let Ok(n) = number.parse::<u64>() {
        n.max(1).checked_mul(2)?.to_string()
    } else {
        let f: f64 = number.parse().ok()?;
        let d = if f == 0.0 { 1.0 } else { f * 2.0 };
        let s = format!("{d}");
        if s.contains(['e', 'E']) {
            return None;
        }
        s
    };
    Some(format!("{out}{unit}"))
}

/// A second spec for `sample`: one field changed. None when no field can change. Returns the
/// changed object and a description of the change.
pub fn mutate(schema: &Value, sample: &Value, rng: &mut Rng) -> Option<(Value, String)> {
    let (set, unset): (Vec<Field>, Vec<Field>) = fields(schema, sample)
        .into_iter()
        .partition(|f| get(sample, &f.path).is_some());
    // Fields the sample sets first: the ones its author cares about.
    for pool in [set, unset] {
        if pool.is_empty() {
            continue;
        }
        let start = rng.range(0, pool.len() as u64) as usize;
        for i in 0..pool.len() {
            let f = &pool[(start + i) % pool.len()];
            let current = get(sample, &f.path);
            if let Some(v) = other_value(f, current, rng) {
                if Some(&v) == current {
                    continue;
                }
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
    fn fields_the_sample_sets_change_one_at_a_time_within_bounds() {
        let sample = json!({"spec": {"size": 3, "color": "red"}});
        let names: Vec<String> = fields(&schema(), &sample)
            .iter()
            .map(|f| f.path.join("."))
            .collect();
        assert_eq!(
            names,
            vec![
                "spec.color",
                "spec.image",
                "spec.on",
                "spec.port",
                "spec.size"
            ]
        );
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

    fn change(field: Value, value: Value) -> Option<Value> {
        let s = json!({"properties": {"spec": {"properties": {"f": field}}}});
        let (out, _) = mutate(&s, &json!({"spec": {"f": value}}), &mut Rng::new(5))?;
        Some(out["spec"]["f"].clone())
    }

    #[test]
    fn an_image_gets_another_tag() {
        let named = |key: &str, v: &str| {
            let s = json!({"properties": {"spec": {"properties": {key: {"type": "string"}}}}});
            mutate(&s, &json!({"spec": {key: v}}), &mut Rng::new(1))
                .map(|(o, _)| o["spec"][key].clone())
        };
        assert_eq!(named("image", "nginx:1.25.3"), Some(json!("nginx:1.25.4")));
        assert_eq!(
            named("sidecarImage", "quay.io/a/b:v9"),
            Some(json!("quay.io/a/b:v10"))
        );
        // The registry's port is not a tag; no tag reads as latest.
        assert_eq!(
            named("image", "reg:5000/app"),
            Some(json!("reg:5000/app:stable"))
        );
        assert_eq!(named("image", "mongo:latest"), Some(json!("mongo:stable")));
        assert_eq!(named("image", "mongo:focal"), Some(json!("mongo:latest")));
        // No valid digest can be made up.
        assert_eq!(named("image", "app@sha256:0123abcd"), None);
        // A free string named otherwise is nobody's to guess.
        assert_eq!(named("name", "nginx:1.25.3"), None);
    }

    #[test]
    fn a_quantity_is_doubled_and_a_pattern_or_format_is_respected() {
        let string = json!({"type": "string"});
        assert_eq!(change(string.clone(), json!("1Gi")), Some(json!("2Gi")));
        assert_eq!(change(string.clone(), json!("500m")), Some(json!("1000m")));
        assert_eq!(
            change(string.clone(), json!("0.5")),
            None,
            "a bare number in a free string"
        );
        let quantity = json!({"x-kubernetes-int-or-string": true,
            "pattern": "^(\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))))?$"});
        assert_eq!(change(quantity.clone(), json!("0.5")), Some(json!("1")));
        assert_eq!(change(quantity.clone(), json!(2)), Some(json!(4)));
        assert_eq!(change(quantity, json!("1.5Gi")), Some(json!("3Gi")));
        // An int-or-string number with no quantity pattern may be a port.
        assert_eq!(
            change(json!({"x-kubernetes-int-or-string": true}), json!(8080)),
            None
        );
        assert_eq!(
            change(
                json!({"type": "string", "pattern": "^[a-z]+$"}),
                json!("1Gi")
            ),
            None
        );
        assert_eq!(
            change(json!({"type": "string", "format": "byte"}), json!("1Gi")),
            None
        );
        assert_eq!(
            change(json!({"type": "string", "maxLength": 3}), json!("9Gi")),
            None
        );
    }

    #[test]
    fn a_word_of_a_kubernetes_vocabulary_gets_another() {
        for seed in 1..10 {
            let s = json!({"properties": {"spec": {"properties": {"p": {"type": "string"}}}}});
            let (out, _) = mutate(&s, &json!({"spec": {"p": "Always"}}), &mut Rng::new(seed))
                .expect("a change");
            assert!(
                ["IfNotPresent", "Never"].contains(&out["spec"]["p"].as_str().unwrap_or("")),
                "{out}"
            );
        }
    }

    /// operator-sdk's Ansible kinds: `spec` open, the sample's values the only schema.
    #[test]
    fn an_open_spec_changes_a_value_the_sample_sets_keeping_its_type() {
        let s = json!({"properties": {"spec": {"type": "object", OPEN: true}}});
        let sample = json!({"spec": {
            "metadata": {"namespace": "default"},
            "image": {"app": {"repository": "akash125/pyapp", "tag": "latest", "pullPolicy": "Always"}},
            "service": {"app": {"type": "ClusterIP"}},
            "replicas": 2, "debug": false, "ports": [80],
        }});
        let mut seen = std::collections::BTreeSet::new();
        for seed in 1..60 {
            let (out, what) = mutate(&s, &sample, &mut Rng::new(seed)).expect("a change");
            let diff: Vec<&str> = [
                (
                    "image.app.tag",
                    out["spec"]["image"]["app"]["tag"] != "latest",
                    out["spec"]["image"]["app"]["tag"] == "stable",
                ),
                (
                    "image.app.pullPolicy",
                    out["spec"]["image"]["app"]["pullPolicy"] != "Always",
                    out["spec"]["image"]["app"]["pullPolicy"].is_string(),
                ),
                (
                    "service.app.type",
                    out["spec"]["service"]["app"]["type"] != "ClusterIP",
                    ["NodePort", "LoadBalancer"]
                        .contains(&out["spec"]["service"]["app"]["type"].as_str().unwrap_or("")),
                ),
                (
                    "replicas",
                    out["spec"]["replicas"] != 2,
                    out["spec"]["replicas"] == 3,
                ),
                (
                    "debug",
                    out["spec"]["debug"] != false,
                    out["spec"]["debug"] == true,
                ),
            ]
            .iter()
            .filter(|(_, changed, _)| *changed)
            .map(|(name, _, valid)| {
                assert!(valid, "{what}: {out}");
                *name
            })
            .collect();
            assert_eq!(diff.len(), 1, "{what}: {out}");
            assert_eq!(out["spec"]["metadata"], sample["spec"]["metadata"]);
            assert_eq!(out["spec"]["image"]["app"]["repository"], "akash125/pyapp");
            seen.insert(diff[0]);
        }
        assert_eq!(
            seen.len(),
            5,
            "every kind of leaf is chosen by some seed: {seen:?}"
        );
    }

    #[test]
    fn nothing_to_change_means_no_second_spec() {
        let s = json!({"properties": {"spec": {"properties": {"name": {"type": "string"}}}}});
        assert_eq!(
            mutate(&s, &json!({"spec": {"name": "x"}}), &mut Rng::new(1)),
            None
        );
        let open = json!({"properties": {"spec": {OPEN: true}}});
        assert_eq!(
            mutate(
                &open,
                &json!({"spec": {"name": "x", "list": [1]}}),
                &mut Rng::new(1)
            ),
            None
        );
    }
}
