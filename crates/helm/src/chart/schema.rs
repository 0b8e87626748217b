//! `values.schema.json` validation, chart by chart as Helm's `ValidateAgainstSchema`
//! does (each subchart against its own values), with Helm 4's error layout:
//! `values don't meet the specifications of the schema(s) in the following chart(s):`
//! then `chart:` and one `- at '<path>': <problem>` line per violation, worded as Helm's
//! validator (santhosh-tekuri/jsonschema v6) words it.
//!
//! * `$ref`s resolve against `file:///values.schema.json`, as in Helm 4: `file://` URLs
//!   are read from disk (`file://./x` is `/x` to Helm 4). Helm up to 3.17 read such a URL
//!   relative to the working directory, and Helm-based operators built then keep their
//!   charts' shared schemas there (`file://./helm-charts/…` from the image's work
//!   directory): when Helm 4's path does not exist, that path is tried too. Other schemes
//!   (`http`, `https`, `urn`) are not fetched: validation never leaves the machine.
//! * Where one instance location has several violations, they are listed under
//!   `validation failed`, indented, as Helm lists them. Helm's order of sibling
//!   properties follows Go's random map order; bosun's is the schema's keyword order then
//!   the instance's key order.
use std::sync::Mutex;

use jsonschema::error::{TypeKind, ValidationErrorKind};
use jsonschema::ValidationError;
use serde_json::Value as Json;

use super::tree::EffChart;
use crate::value::{json, Map, MapKind, Value};

pub fn validate_tree(ch: &EffChart, vals: &Map) -> Result<(), String> {
    let mut report = String::new();
    walk(ch, vals, &mut report);
    if report.is_empty() {
        return Ok(());
    }
    Err(format!(
        "values don't meet the specifications of the schema(s) in the following chart(s):\n{report}"
    ))
}

fn walk(ch: &EffChart, vals: &Map, report: &mut String) {
    if let Some(schema) = &ch.node.schema {
        if let Err(e) = validate(schema, vals) {
            report.push_str(&format!("{}:\n{e}", ch.name));
        }
    }
    for d in &ch.deps {
        let sub = match vals.get(&d.name) {
            Some(Value::Map(m)) => m,
            _ => Map::new(MapKind::Iface),
        };
        walk(d, &sub, report);
    }
}

/// The base URI Helm compiles every chart's schema under.
const BASE: &str = "file:///values.schema.json";

fn validate(schema: &[u8], vals: &Map) -> Result<(), String> {
    let schema: Json = serde_json::from_slice(schema)
        .map_err(|e| format!("- invalid values.schema.json: {e}\n"))?;
    let doc = json::marshal(&Value::Map(vals.clone())).map_err(|e| format!("- {}\n", e.0))?;
    let doc: Json = serde_json::from_str(&doc).map_err(|e| format!("- {e}\n"))?;
    let retriever = std::sync::Arc::new(FileRetriever::default());
    let v = jsonschema::options()
        .with_base_uri(BASE)
        .with_retriever(SharedRetriever(retriever.clone()))
        .build(&schema);
    let v = match v {
        Ok(v) => v,
        // Helm's compiler error for a `$ref` it cannot load, without the list prefix.
        Err(e) => {
            let failure = retriever.failure.lock().ok().and_then(|f| f.clone());
            return Err(failure.unwrap_or_else(|| format!("- invalid values.schema.json: {e}\n")));
        }
    };
    let mut tree = Node::default();
    for e in v.iter_errors(&doc) {
        let path: Vec<String> = e
            .instance_path()
            .to_string()
            .split('/')
            .skip(1)
            .map(unescape_pointer)
            .collect();
        // An `additionalProperties: false` compiled as a false schema per property:
        // Helm reports the property names on the object.
        let additional = matches!(e.kind(), ValidationErrorKind::FalseSchema)
            && e.schema_path()
                .to_string()
                .ends_with("/additionalProperties");
        if additional {
            // The crate stops at the first extra property and names the object: the
            // names Helm lists are read from the object and the schema beside it.
            let sch = e.schema_path().to_string();
            let parent = &sch[..sch.len() - "/additionalProperties".len()];
            let obj = doc.pointer(&e.instance_path().to_string());
            if let (Some(Json::Object(obj)), Some(parent)) = (obj, schema.pointer(parent)) {
                tree.node(&path).additional.extend(extra_keys(obj, parent));
                continue;
            }
        }
        match e.kind() {
            ValidationErrorKind::Required { property } => tree
                .node(&path)
                .missing
                .push(property.as_str().unwrap_or("").to_string()),
            ValidationErrorKind::AdditionalProperties { unexpected } => tree
                .node(&path)
                .additional
                .extend(unexpected.iter().cloned()),
            kind => {
                let msg = message(&e);
                tree.node(&path).own.push((rank(kind), msg));
            }
        }
    }
    tree.finish();
    let mut out = String::new();
    // Helm's validator returns a location's single error as it is, and a root with one
    // failing entry hands up that entry's causes: one level of grouping is flattened.
    match tree.single() {
        Some(Entry::Child(..)) => {
            let (path, node) = tree.result("");
            node.write_entries(&path, 0, &mut out);
        }
        _ => tree.write_entries("", 0, &mut out),
    }
    if out.is_empty() {
        Ok(())
    } else {
        Err(out)
    }
}

/// Violations by instance location: the location's own, then its children's.
#[derive(Default)]
struct Node {
    own: Vec<(u8, String)>,
    missing: Vec<String>,
    additional: Vec<String>,
    children: Vec<(String, Node)>,
}

enum Entry<'a> {
    Own(&'a str),
    Child(String, &'a Node),
}

impl Node {
    fn node(&mut self, path: &[String]) -> &mut Node {
        match path.split_first() {
            None => self,
            Some((head, rest)) => {
                let i = match self.children.iter().position(|(k, _)| k == head) {
                    Some(i) => i,
                    None => {
                        self.children.push((head.clone(), Node::default()));
                        self.children.len() - 1
                    }
                };
                self.children[i].1.node(rest)
            }
        }
    }

    /// Turns the collected `required` and `additionalProperties` names into one message
    /// each, and orders the location's messages as the validator evaluates keywords.
    fn finish(&mut self) {
        if !self.missing.is_empty() {
            let q: Vec<String> = self.missing.iter().map(|p| quote(p)).collect();
            let msg = if q.len() == 1 {
                format!("missing property {}", q[0])
            } else {
                format!("missing properties {}", q.join(", "))
            };
            self.own.push((RANK_REQUIRED, msg));
        }
        if !self.additional.is_empty() {
            self.additional.sort();
            self.additional.dedup();
            let q: Vec<String> = self.additional.iter().map(|p| quote(p)).collect();
            self.own.push((
                RANK_ADDITIONAL,
                format!("additional properties {} not allowed", q.join(", ")),
            ));
        }
        self.own.sort_by_key(|(r, _)| *r);
        for (_, c) in &mut self.children {
            c.finish();
        }
    }

    fn entries(&self) -> usize {
        self.own.len() + self.children.len()
    }

    /// The one entry of a location that has exactly one.
    fn single(&self) -> Option<Entry<'_>> {
        if self.entries() != 1 {
            return None;
        }
        Some(match self.own.first() {
            Some((_, m)) => Entry::Own(m),
            None => {
                let (k, c) = &self.children[0];
                Entry::Child(k.clone(), c)
            }
        })
    }

    /// Every entry of this location (at `path`), in evaluation order: keywords before
    /// `properties`/`items`, the children, then `additionalProperties` and later ones.
    fn write_entries(&self, path: &str, indent: usize, out: &mut String) {
        let split = self.own.partition_point(|(r, _)| *r < CHILDREN);
        for (_, m) in &self.own[..split] {
            line(out, indent, path, m);
        }
        for (k, c) in &self.children {
            c.write(&format!("{path}/{}", escape_pointer(k)), indent, out);
        }
        for (_, m) in &self.own[split..] {
            line(out, indent, path, m);
        }
    }

    /// The location whose result this one passes up unchanged (through locations with a
    /// single failing child), and its path.
    fn result(&self, path: &str) -> (String, &Node) {
        match self.single() {
            Some(Entry::Child(k, c)) => c.result(&format!("{path}/{}", escape_pointer(&k))),
            _ => (path.to_string(), self),
        }
    }

    /// This location's result: its one error as it is, or `validation failed` over all.
    fn write(&self, path: &str, indent: usize, out: &mut String) {
        match self.single() {
            Some(Entry::Own(m)) => line(out, indent, path, m),
            Some(Entry::Child(k, c)) => {
                c.write(&format!("{path}/{}", escape_pointer(&k)), indent, out)
            }
            None => {
                line(out, indent, path, "validation failed");
                self.write_entries(path, indent + 2, out);
            }
        }
    }
}

/// The keys `properties` and `patternProperties` of `schema` do not cover.
fn extra_keys(obj: &serde_json::Map<String, Json>, schema: &Json) -> Vec<String> {
    let props = schema.get("properties").and_then(Json::as_object);
    let patterns: Vec<regex::Regex> = schema
        .get("patternProperties")
        .and_then(Json::as_object)
        .map(|p| p.keys().filter_map(|k| regex::Regex::new(k).ok()).collect())
        .unwrap_or_default();
    obj.keys()
        .filter(|k| !props.is_some_and(|p| p.contains_key(*k)))
        .filter(|k| !patterns.iter().any(|r| r.is_match(k)))
        .cloned()
        .collect()
}

fn unescape_pointer(s: &str) -> String {
    s.replace("~1", "/").replace("~0", "~")
}

fn escape_pointer(s: &str) -> String {
    s.replace('~', "~0").replace('/', "~1")
}

fn line(out: &mut String, indent: usize, path: &str, msg: &str) {
    out.push_str(&format!("{:indent$}- at '{path}': {msg}\n", ""));
}

/// Where a keyword's violations come relative to the location's children.
const CHILDREN: u8 = 50;
const RANK_REQUIRED: u8 = 21;
const RANK_ADDITIONAL: u8 = 60;

fn rank(k: &ValidationErrorKind) -> u8 {
    use ValidationErrorKind as K;
    match k {
        K::FalseSchema => 0,
        K::Type { .. } => 1,
        K::Constant { .. } => 2,
        K::Enum { .. } => 3,
        K::Format { .. } => 4,
        K::Minimum { .. }
        | K::Maximum { .. }
        | K::ExclusiveMinimum { .. }
        | K::ExclusiveMaximum { .. }
        | K::MultipleOf { .. } => 10,
        K::MinLength { .. } | K::MaxLength { .. } => 11,
        K::Pattern { .. } => 12,
        K::MaxProperties { .. } | K::MinProperties { .. } => 20,
        K::Required { .. } => RANK_REQUIRED,
        K::MaxItems { .. } | K::MinItems { .. } | K::UniqueItems => 22,
        K::AdditionalProperties { .. } => RANK_ADDITIONAL,
        K::AdditionalItems { .. } => 60,
        K::PropertyNames { .. } => 61,
        _ => 70,
    }
}

/// Helm's wording (santhosh-tekuri/jsonschema `kind` texts, printed in English).
fn message(e: &ValidationError<'_>) -> String {
    use ValidationErrorKind as K;
    let inst = e.instance();
    match e.kind() {
        K::Type { kind } => {
            let want: Vec<String> = match kind {
                TypeKind::Single(t) => vec![t.to_string()],
                TypeKind::Multiple(ts) => ts.iter().map(|t| t.to_string()).collect(),
            };
            format!("got {}, want {}", type_of(inst), want.join(" or "))
        }
        K::Required { property } => {
            format!(
                "missing property {}",
                quote(property.as_str().unwrap_or(""))
            )
        }
        K::Enum { options } => match options.as_array() {
            Some(opts) if opts.iter().all(|o| !o.is_array() && !o.is_object()) => {
                let want: Vec<String> = opts.iter().map(display).collect();
                if want.len() == 1 {
                    format!("value must be {}", want[0])
                } else {
                    format!("value must be one of {}", want.join(", "))
                }
            }
            _ => "'enum' failed".into(),
        },
        K::Constant { expected_value } => {
            if expected_value.is_array() || expected_value.is_object() {
                "'const' failed".into()
            } else {
                format!("value must be {}", display(expected_value))
            }
        }
        K::Minimum { limit } => format!("minimum: got {}, want {}", num(inst), num(limit)),
        K::Maximum { limit } => format!("maximum: got {}, want {}", num(inst), num(limit)),
        K::ExclusiveMinimum { limit } => {
            format!("exclusiveMinimum: got {}, want {}", num(inst), num(limit))
        }
        K::ExclusiveMaximum { limit } => {
            format!("exclusiveMaximum: got {}, want {}", num(inst), num(limit))
        }
        K::MultipleOf { multiple_of } => format!(
            "multipleOf: got {}, want {}",
            num(inst),
            go_float(*multiple_of)
        ),
        K::MinLength { limit } => format!(
            "minLength: got {}, want {}",
            group(str_len(inst)),
            group(*limit)
        ),
        K::MaxLength { limit } => format!(
            "maxLength: got {}, want {}",
            group(str_len(inst)),
            group(*limit)
        ),
        K::Pattern { pattern } => format!(
            "{} does not match pattern {}",
            quote(inst.as_str().unwrap_or("")),
            quote(pattern)
        ),
        K::MinItems { limit } => format!(
            "minItems: got {}, want {}",
            group(len_of(inst)),
            group(*limit)
        ),
        K::MaxItems { limit } => format!(
            "maxItems: got {}, want {}",
            group(len_of(inst)),
            group(*limit)
        ),
        K::MinProperties { limit } => format!(
            "minProperties: got {}, want {}",
            group(len_of(inst)),
            group(*limit)
        ),
        K::MaxProperties { limit } => format!(
            "maxProperties: got {}, want {}",
            group(len_of(inst)),
            group(*limit)
        ),
        K::UniqueItems => match duplicates(inst) {
            Some((i, j)) => format!("items at {i} and {j} are equal"),
            None => "uniqueItems failed".into(),
        },
        K::AdditionalProperties { unexpected } => {
            let q: Vec<String> = unexpected.iter().map(|p| quote(p)).collect();
            format!("additional properties {} not allowed", q.join(", "))
        }
        K::AdditionalItems { limit } => format!(
            "last {} additionalItem(s) not allowed",
            len_of(inst).saturating_sub(*limit as u64)
        ),
        K::FalseSchema => "false schema".into(),
        K::AnyOf { .. } => "anyOf failed".into(),
        K::OneOfNotValid { .. } => "oneOf failed, none matched".into(),
        K::Not { .. } => "not failed".into(),
        K::Contains => "no items match contains schema".into(),
        _ => e.to_string(),
    }
}

/// santhosh-tekuri's JSON type names.
fn type_of(v: &Json) -> &'static str {
    match v {
        Json::Null => "null",
        Json::Bool(_) => "boolean",
        // Helm's values are float64 (or int64 from a custom resource): numbers either way.
        Json::Number(_) => "number",
        Json::String(_) => "string",
        Json::Array(_) => "array",
        Json::Object(_) => "object",
    }
}

fn str_len(v: &Json) -> u64 {
    v.as_str().map_or(0, |s| s.chars().count() as u64)
}

fn len_of(v: &Json) -> u64 {
    match v {
        Json::Array(a) => a.len() as u64,
        Json::Object(o) => o.len() as u64,
        _ => 0,
    }
}

fn duplicates(v: &Json) -> Option<(usize, usize)> {
    let a = v.as_array()?;
    for j in 1..a.len() {
        for i in 0..j {
            if a[i] == a[j] {
                return Some((i, j));
            }
        }
    }
    None
}

/// Go's `%q` in single quotes, as santhosh-tekuri's `quote`.
fn quote(s: &str) -> String {
    let q = crate::value::format::quote(s, false);
    let inner = &q[1..q.len() - 1];
    format!("'{}'", inner.replace("\\\"", "\"").replace('\'', "\\'"))
}

fn display(v: &Json) -> String {
    match v {
        Json::String(s) => quote(s),
        Json::Array(_) | Json::Object(_) => "value".into(),
        Json::Number(_) => num(v),
        // Go's `%v` of a nil interface.
        Json::Null => "<nil>".into(),
        other => other.to_string(),
    }
}

/// A number as Helm's validator prints a limit or a value: converted to float64 and
/// written with golang.org/x/text's English `%v`: thousands grouped, and where Go's `%v`
/// would switch to an exponent (shortest form, exponent below -4 or from 6 up) a
/// `×10` with a superscript exponent of two digits or more.
fn num(v: &Json) -> String {
    match v.as_f64() {
        Some(f) => go_float(f),
        None => v.to_string(),
    }
}

fn go_float(f: f64) -> String {
    if !f.is_finite() {
        return format!("{f}");
    }
    // Rust's `{:e}` is the shortest round-trip form, as Go's precision -1.
    let e = format!("{f:e}");
    let (mant, exp) = e.split_once('e').unwrap_or((&e, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if f != 0.0 && !(-4..6).contains(&exp) {
        const SUP: [char; 10] = ['⁰', '¹', '²', '³', '⁴', '⁵', '⁶', '⁷', '⁸', '⁹'];
        let digits = format!("{:02}", exp.unsigned_abs());
        let sup: String = digits.bytes().map(|d| SUP[usize::from(d - b'0')]).collect();
        let sign = if exp < 0 { "⁻" } else { "" };
        return format!("{mant}×10{sign}{sup}");
    }
    group_number(&format!("{f}"))
}

fn group(u: u64) -> String {
    group_number(&u.to_string())
}

/// Groups the integer digits of a decimal text in threes.
fn group_number(s: &str) -> String {
    let (sign, rest) = match s.strip_prefix('-') {
        Some(r) => ("-", r),
        None => ("", s),
    };
    let (int, frac) = match rest.find(['.', 'e']) {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    let mut out = String::with_capacity(s.len() + int.len() / 3);
    for (i, c) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    format!("{sign}{out}{frac}")
}

/// Reads `file://` references from disk (see the module notes); remembers the first
/// failure in Helm's words, which the compile error then reports.
#[derive(Default)]
struct FileRetriever {
    failure: Mutex<Option<String>>,
}

struct SharedRetriever(std::sync::Arc<FileRetriever>);

impl jsonschema::Retrieve for SharedRetriever {
    fn retrieve(
        &self,
        uri: &jsonschema::Uri<String>,
    ) -> Result<Json, Box<dyn std::error::Error + Send + Sync>> {
        self.0.retrieve(uri.as_str())
    }
}

impl FileRetriever {
    fn retrieve(&self, url: &str) -> Result<Json, Box<dyn std::error::Error + Send + Sync>> {
        let r = load(url);
        if let Err(e) = &r {
            if let Ok(mut f) = self.failure.lock() {
                f.get_or_insert_with(|| format!("failing loading {}: {e}", go_quote(url)));
            }
        }
        r.map_err(Into::into)
    }
}

fn go_quote(s: &str) -> String {
    crate::value::format::quote(s, false)
}

/// Candidate paths for a `file://` URL: Helm 4's (the URL's path), then, for a URL with
/// an authority (`file://./x`, `file://dir/x`), Helm 3.17's (what follows `file://`,
/// relative to the working directory).
fn file_paths(url: &str) -> Option<(String, Option<String>)> {
    let rest = url.strip_prefix("file://")?;
    let rest = percent_decode(rest);
    match rest.find('/') {
        Some(0) => Some((rest, None)),
        Some(i) => Some((rest[i..].to_string(), Some(rest))),
        None => Some((String::new(), Some(rest))),
    }
}

fn load(url: &str) -> Result<Json, String> {
    let Some((helm4, legacy)) = file_paths(url) else {
        return Err(format!(
            "no loader registered for {}: bosun reads only file:// schemas",
            url.split(':').next().unwrap_or("")
        ));
    };
    let read = |p: &str| std::fs::read(p).map_err(|e| format!("open {p}: {}", go_io_error(&e)));
    let bytes = match read(&helm4) {
        Ok(b) => b,
        Err(first) => match legacy.as_deref().map(read) {
            Some(Ok(b)) => b,
            _ => return Err(first),
        },
    };
    serde_json::from_slice(&bytes).map_err(|e| e.to_string())
}

/// Go's text for an OS error: the C library's, lower-case, without Rust's "(os error N)".
fn go_io_error(e: &std::io::Error) -> String {
    let s = e.to_string();
    let s = match s.find(" (os error") {
        Some(i) => &s[..i],
        None => &s,
    };
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_lowercase().chain(c).collect(),
        None => String::new(),
    }
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            if let Ok(v) = u8::from_str_radix(&s[i + 1..i + 3], 16) {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_group_as_gos_english_printer() {
        assert_eq!(group_number("70000"), "70,000");
        assert_eq!(group_number("-1234567.5"), "-1,234,567.5");
        assert_eq!(group_number("999"), "999");
        assert_eq!(go_float(1.5), "1.5");
        assert_eq!(go_float(70000.0), "70,000");
        assert_eq!(go_float(-1234567.0), "-1.234567×10⁰⁶");
        assert_eq!(go_float(0.00001), "1×10⁻⁰⁵");
    }

    #[test]
    fn file_urls_give_helm4_then_legacy_paths() {
        assert_eq!(
            file_paths("file://./helm-charts/a.json"),
            Some((
                "/helm-charts/a.json".into(),
                Some("./helm-charts/a.json".into())
            ))
        );
        assert_eq!(
            file_paths("file:///abs/a%20b.json"),
            Some(("/abs/a b.json".into(), None))
        );
        assert_eq!(file_paths("https://x/y"), None);
    }
}
