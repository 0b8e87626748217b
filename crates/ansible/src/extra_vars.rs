//! The extra vars ansible-operator passes to every run, built exactly as its `makeParameters`
//! does: the spec (keys snake-cased by its `paramconv` converter when `snakeCaseParameters`),
//! `ansible_operator_meta`, `_<group>_<kind>` (the whole CR), `_<group>_<kind>_spec`, then the
//! watch `vars` and, on finalizer runs, the finalizer `vars` — later entries override earlier.
//!
//! ansible-operator marshals these with Go's `encoding/json`, so every map reaches Ansible with
//! its keys sorted; `serde_json::Map` (a BTreeMap here) gives the same order.
use serde_json::{Map, Value};

/// What the watch entry says about the variables of one run.
#[derive(Clone, Debug, Default)]
pub struct ExtraVarsOptions<'a> {
    /// `snakeCaseParameters` (ansible-operator's default: true).
    pub snake_case: bool,
    /// `markUnsafe`: every string of the spec and CR becomes `{"__ansible_unsafe": s}`, which
    /// the engine never templates.
    pub mark_unsafe: bool,
    /// The watch entry's `vars`.
    pub watch_vars: Option<&'a Map<String, Value>>,
    /// The finalizer's `vars`, given only on a finalizer run.
    pub finalizer_vars: Option<&'a Map<String, Value>>,
    pub group: &'a str,
    pub kind: &'a str,
}

/// The extra vars of one run for the custom resource `cr` (its JSON).
pub fn for_cr(cr: &Value, opts: &ExtraVarsOptions<'_>) -> Map<String, Value> {
    let spec = match cr.get("spec") {
        Some(Value::Object(m)) => m.clone(),
        _ => Map::new(),
    };
    let mut params: Map<String, Value> = if opts.snake_case {
        spec.iter()
            .map(|(k, v)| (to_snake(k), snake_keys(v, 0)))
            .collect()
    } else {
        spec.clone()
    };
    if opts.mark_unsafe {
        for v in params.values_mut() {
            *v = mark_unsafe(v);
        }
    }
    let meta = cr.get("metadata");
    let meta_str = |k: &str| {
        Value::String(
            meta.and_then(|m| m.get(k))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
        )
    };
    let mut ansible_meta = Map::new();
    ansible_meta.insert("name".into(), meta_str("name"));
    ansible_meta.insert("namespace".into(), meta_str("namespace"));
    params.insert("ansible_operator_meta".into(), Value::Object(ansible_meta));
    let obj_key = cr_var_name(opts.group, opts.kind);
    let spec_key = format!("{obj_key}_spec");
    let (obj, spec) = if opts.mark_unsafe {
        (mark_unsafe(cr), mark_unsafe(&Value::Object(spec)))
    } else {
        (cr.clone(), Value::Object(spec))
    };
    params.insert(obj_key, obj);
    params.insert(spec_key, spec);
    for vars in [opts.watch_vars, opts.finalizer_vars].into_iter().flatten() {
        for (k, v) in vars {
            params.insert(k.clone(), v.clone());
        }
    }
    params
}

/// `_<group>_<kind>` with `.` and `-` turned into `_` and the kind lower-cased.
pub fn cr_var_name(group: &str, kind: &str) -> String {
    format!("_{group}_{}", kind.to_lowercase()).replace(['.', '-'], "_")
}

/// JSON nesting deeper than serde_json's own parser accepts (128) is left as it is, so a
/// hand-built value cannot exhaust the stack.
const MAX_DEPTH: usize = 128;

fn snake_keys(v: &Value, depth: usize) -> Value {
    if depth > MAX_DEPTH {
        return v.clone();
    }
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, v)| (to_snake(k), snake_keys(v, depth + 1)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(|x| snake_keys(x, depth + 1)).collect()),
        other => other.clone(),
    }
}

/// How deep a JSON value nests (iteratively).
pub fn depth(v: &Value) -> usize {
    let mut max = 0;
    let mut stack = vec![(v, 1usize)];
    while let Some((v, d)) = stack.pop() {
        max = max.max(d);
        match v {
            Value::Object(m) => stack.extend(m.values().map(|x| (x, d + 1))),
            Value::Array(a) => stack.extend(a.iter().map(|x| (x, d + 1))),
            _ => {}
        }
    }
    max
}

fn mark_unsafe(v: &Value) -> Value {
    mark_unsafe_at(v, 0)
}

fn mark_unsafe_at(v: &Value, depth: usize) -> Value {
    if depth > MAX_DEPTH {
        return v.clone();
    }
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, v)| (k.clone(), mark_unsafe_at(v, depth + 1)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(|x| mark_unsafe_at(x, depth + 1)).collect()),
        Value::String(_) => {
            let mut m = Map::new();
            m.insert("__ansible_unsafe".into(), v.clone());
            Value::Object(m)
        }
        other => other.clone(),
    }
}

/// The special words ansible-operator keeps whole (and their plurals), so `egressIPs` becomes
/// `egress_ips` rather than `egress_i_ps`.
const SPECIAL_WORDS: [&str; 3] = ["HTTP", "URL", "IP"];

/// ansible-operator's snake-case converter (`paramconv.ToSnake`), quirks included: a leading
/// capital gives a leading `_`, digits split words only in the `a1b2` shape, and an empty or
/// all-blank key (on which upstream panics) stays as it is.
pub fn to_snake(key: &str) -> String {
    let spaced = split_number_runs(key);
    let s = spaced.trim_matches(' ');
    let Some(first) = s.chars().next() else {
        return key.to_string();
    };
    let prefix = if first.is_ascii_uppercase() { "_" } else { "" };
    let s = if s.to_uppercase() != s {
        isolate_special_words(s)
    } else {
        s.to_string()
    };
    let bytes = s.as_bytes();
    let mut bits: Vec<String> = Vec::new();
    let mut word = String::new();
    // Position inside the current word; -1 right after a word ended.
    let mut pos: i64 = -1;
    for (i, c) in s.char_indices() {
        pos += 1;
        let case_flips = bytes.get(i + 1).is_some_and(|&next| {
            (c.is_ascii_uppercase() && next.is_ascii_lowercase())
                || (c.is_ascii_lowercase() && next.is_ascii_uppercase())
        });
        if pos > 0 && !word.ends_with('_') && case_flips {
            if c.is_ascii_uppercase() {
                bits.push(word.to_lowercase());
                word = c.to_string();
                pos = 0;
            } else {
                word.push(c);
                bits.push(word.to_lowercase());
                word.clear();
                pos = -1;
            }
        } else if matches!(c, ' ' | '_' | '-') {
            bits.push(word.to_lowercase());
            word.clear();
            pos = -1;
        } else {
            word.push(c);
        }
    }
    bits.push(word.to_lowercase());
    let joined = bits.join("_");
    let first_is_special = SPECIAL_WORDS.iter().any(|w| w.to_lowercase() == bits[0]);
    if first_is_special {
        joined
    } else {
        format!("{prefix}{joined}")
    }
}

/// Upstream's `([a-zA-Z])(\d+)([a-zA-Z](\d+))` → `$1 $2 $3`, applied left to right without
/// overlap: `a1b2` becomes `a 1 b2`.
fn split_number_runs(s: &str) -> String {
    let b = s.as_bytes();
    let digits_from = |mut j: usize| {
        let start = j;
        while j < b.len() && b[j].is_ascii_digit() {
            j += 1;
        }
        (j > start).then_some(j)
    };
    let mut out = String::with_capacity(s.len() + 4);
    let mut last = 0;
    let mut i = 0;
    while i < b.len() {
        if b[i].is_ascii_alphabetic() {
            if let Some(d_end) = digits_from(i + 1) {
                if d_end < b.len() && b[d_end].is_ascii_alphabetic() {
                    if let Some(end) = digits_from(d_end + 1) {
                        out.push_str(&s[last..=i]);
                        out.push(' ');
                        out.push_str(&s[i + 1..d_end]);
                        out.push(' ');
                        out.push_str(&s[d_end..end]);
                        last = end;
                        i = end;
                        continue;
                    }
                }
            }
        }
        i += 1;
    }
    out.push_str(&s[last..]);
    out
}

/// Puts `_` around the first occurrence of each special word (an `s` right after it counts as
/// its plural and is upper-cased with it), as upstream's `preprocessWordMapping` does.
fn isolate_special_words(s: &str) -> String {
    let mut v = s.to_string();
    for word in SPECIAL_WORDS {
        let Some(idx) = v.find(word) else { continue };
        let end = idx + word.len();
        let (head, tail) = (&v[..idx], &v[end..]);
        v = if tail.is_empty() {
            format!("{head}_{word}")
        } else if tail.as_bytes()[0] == b's' {
            if tail.len() == 1 {
                format!("{head}_{word}S")
            } else if idx == 0 {
                format!("{word}S_{}", &tail[1..])
            } else {
                format!("{head}_{word}S_{}", &tail[1..])
            }
        } else if idx == 0 {
            format!("{word}_{tail}")
        } else {
            format!("{head}_{word}_{tail}")
        };
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn upstream_vectors() {
        for (input, want) in [
            ("sizeK8sBuckets", "size_k8s_buckets"),
            ("ThisShouldHaveUnderscores", "_this_should_have_underscores"),
            ("egressIPs", "egress_ips"),
            ("IPsegress", "_ips_egress"),
            ("URLsegressIPsEgressHTTPs", "_urls_egress_ips_egress_https"),
            ("k8s var", "k8s_var"),
            ("888", "888"),
            ("_CanYou_Handle_mixedVars", "_can_you_handle_mixed_vars"),
            ("pullPolicy", "pull_policy"),
            ("size", "size"),
        ] {
            assert_eq!(to_snake(input), want, "{input}");
        }
    }

    #[test]
    fn number_runs_split_only_letter_digits_letter_digits() {
        assert_eq!(split_number_runs("a1b2"), "a 1 b2");
        assert_eq!(split_number_runs("pg1_repo"), "pg1_repo");
        assert_eq!(split_number_runs("k8s"), "k8s");
        assert_eq!(to_snake(""), "");
    }

    #[test]
    fn seed_extra_vars() {
        let cr = json!({
            "apiVersion": "charts.example.com/v1alpha1", "kind": "BookStore",
            "metadata": {"name": "bookstore-sample", "namespace": "default"},
            "spec": {"metadata": {"namespace": "default"},
                     "image": {"app": {"pullPolicy": "Always"}},
                     "list": [{"fooBar": 1}]}
        });
        let watch: Map<String, Value> = json!({"state": "present"})
            .as_object()
            .cloned()
            .expect("test value");
        let fin: Map<String, Value> = json!({"state": "absent"})
            .as_object()
            .cloned()
            .expect("test value");
        let vars = for_cr(
            &cr,
            &ExtraVarsOptions {
                snake_case: true,
                mark_unsafe: false,
                watch_vars: Some(&watch),
                finalizer_vars: Some(&fin),
                group: "charts.example.com",
                kind: "BookStore",
            },
        );
        assert_eq!(vars["image"]["app"]["pull_policy"], "Always");
        assert_eq!(vars["list"][0]["foo_bar"], 1);
        assert_eq!(vars["metadata"]["namespace"], "default");
        assert_eq!(
            vars["ansible_operator_meta"],
            json!({"name": "bookstore-sample", "namespace": "default"})
        );
        assert_eq!(vars["_charts_example_com_bookstore"], cr);
        assert_eq!(
            vars["_charts_example_com_bookstore_spec"]["image"]["app"]["pullPolicy"],
            "Always"
        );
        assert_eq!(vars["state"], "absent");
    }

    #[test]
    fn unsafe_marking_and_no_spec() {
        let cr = json!({"metadata": {"name": "a"}, "spec": {"x": ["s", 1]}});
        let vars = for_cr(
            &cr,
            &ExtraVarsOptions {
                mark_unsafe: true,
                group: "",
                kind: "Foo",
                ..Default::default()
            },
        );
        assert_eq!(vars["x"], json!([{"__ansible_unsafe": "s"}, 1]));
        assert_eq!(
            vars["__foo"]["metadata"]["name"],
            json!({"__ansible_unsafe": "a"})
        );
        assert_eq!(vars["ansible_operator_meta"]["namespace"], "");
        let vars = for_cr(
            &json!({"metadata": {}}),
            &ExtraVarsOptions {
                group: "a-b.c",
                kind: "K",
                ..Default::default()
            },
        );
        assert_eq!(vars["_a_b_c_k_spec"], json!({}));
    }
}
