//! YAML as Ansible reads and writes it, through bosun-yaml's PyYAML side (libyaml's parser,
//! SafeLoader's YAML 1.1 scalars, SafeRepresenter + libyaml's emitter), with the node
//! helpers the role loader uses and the conversions to JSON.
pub use bosun_yaml::{Mark, Node, Yaml};

/// A YAML error with the position it names.
#[derive(Debug, thiserror::Error)]
#[error("{line}:{col}: {msg}")]
pub struct YamlError {
    pub line: usize,
    pub col: usize,
    pub msg: String,
}

/// Every document of the stream (PyYAML's SafeLoader rules), no value nested deeper than
/// [`MAX_DEPTH`](crate::template::value::MAX_DEPTH).
pub fn load_all(src: &str) -> Result<Vec<Node>, YamlError> {
    let docs = bosun_yaml::load_all(src, bosun_yaml::Schema::PyYaml).map_err(|e| {
        let m = e.mark().unwrap_or_default();
        YamlError {
            line: m.line,
            col: m.col,
            msg: e.to_string(),
        }
    })?;
    docs.iter().try_for_each(check_depth)?;
    Ok(docs)
}

/// bosun-yaml reads up to 512 levels, but the engine converts and templates values
/// recursively: a value may nest no deeper than the CR specs it gets from the API server
/// (see [`MAX_DEPTH`](crate::template::value::MAX_DEPTH)). Iterative, so the check itself
/// costs no stack.
fn check_depth(root: &Node) -> Result<(), YamlError> {
    use crate::template::value::MAX_DEPTH;
    let mut stack = vec![(root, 1usize)];
    while let Some((n, depth)) = stack.pop() {
        if depth > MAX_DEPTH {
            return Err(YamlError {
                line: n.mark.line,
                col: n.mark.col,
                msg: format!(
                    "values nest more than {MAX_DEPTH} levels deep here (the most a Kubernetes \
                     object read from the API server can have); flatten this value"
                ),
            });
        }
        match &n.value {
            Yaml::Seq(items) => stack.extend(items.iter().map(|i| (i, depth + 1))),
            Yaml::Map(pairs) => stack.extend(
                pairs
                    .iter()
                    .flat_map(|(k, v)| [(k, depth + 1), (v, depth + 1)]),
            ),
            _ => {}
        }
    }
    Ok(())
}

/// Node accessors for the loader.
pub trait NodeExt {
    fn as_str(&self) -> Option<&str>;
    fn as_map(&self) -> Option<&[(Node, Node)]>;
    fn as_seq(&self) -> Option<&[Node]>;
    fn get(&self, key: &str) -> Option<&Node>;
    fn to_json(&self) -> serde_json::Value;
}

impl NodeExt for Node {
    fn as_str(&self) -> Option<&str> {
        self.value.as_str()
    }

    fn as_map(&self) -> Option<&[(Node, Node)]> {
        match &self.value {
            Yaml::Map(m) => Some(m),
            _ => None,
        }
    }

    fn as_seq(&self) -> Option<&[Node]> {
        match &self.value {
            Yaml::Seq(s) => Some(s),
            _ => None,
        }
    }

    fn get(&self, key: &str) -> Option<&Node> {
        self.value.get(key)
    }

    fn to_json(&self) -> serde_json::Value {
        use serde_json::Value as J;
        match &self.value {
            Yaml::Null => J::Null,
            Yaml::Bool(b) => J::Bool(*b),
            Yaml::Int(i) => J::from(*i),
            Yaml::BigInt(d) => d.parse::<u64>().map(J::from).unwrap_or_else(|_| {
                d.parse::<f64>()
                    .ok()
                    .and_then(serde_json::Number::from_f64)
                    .map_or(J::Null, J::Number)
            }),
            Yaml::Float(f) => serde_json::Number::from_f64(*f).map_or(J::Null, J::Number),
            Yaml::Str(s) => J::String(s.clone()),
            Yaml::Binary(b) => J::String(String::from_utf8_lossy(b).into_owned()),
            Yaml::Timestamp(t) => J::String(t.to_string()),
            Yaml::Seq(items) => J::Array(items.iter().map(NodeExt::to_json).collect()),
            Yaml::Map(pairs) => J::Object(
                pairs
                    .iter()
                    .map(|(k, v)| (key_text(k), v.to_json()))
                    .collect(),
            ),
        }
    }
}

/// A mapping key as Python would show it once it became a JSON key.
pub fn key_text(k: &Node) -> String {
    match &k.value {
        Yaml::Str(s) => s.clone(),
        Yaml::Null => "None".into(),
        Yaml::Bool(b) => if *b { "True" } else { "False" }.into(),
        Yaml::Int(i) => i.to_string(),
        Yaml::BigInt(d) => d.clone(),
        Yaml::Float(f) => crate::template::value::py_float(*f),
        Yaml::Timestamp(t) => t.to_string(),
        _ => format!("{:?}", k.value),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(s: &str) -> Yaml {
        load_all(s).expect("test value").remove(0).value
    }

    #[test]
    fn pyyaml_scalars_and_marks() {
        assert_eq!(one("yes"), Yaml::Bool(true));
        assert_eq!(one("0755"), Yaml::Int(493));
        assert_eq!(one("1e3"), Yaml::Str("1e3".into()));
        let docs = load_all("a: 1\nb:\n  - &x {c: 2}\n  - <<: *x\n    d: 3\n").expect("test value");
        let b = docs[0].get("b").expect("test value");
        assert_eq!((b.mark.line, b.mark.col), (3, 3));
        assert_eq!(
            b.as_seq().expect("test value")[1].to_json(),
            serde_json::json!({"c": 2, "d": 3})
        );
        assert!(load_all(&"[".repeat(100_000)).is_err());
    }
}
