//! go-yaml v2 as Helm reaches it through sigs.k8s.io/yaml.
//!
//! * [`yaml_to_json`] is `sigs.k8s.io/yaml.YAMLToJSON`: go-yaml decodes the first document into
//!   `interface{}`, map keys are stringified, and `encoding/json` writes the result. Helm's
//!   `yaml.Unmarshal` (values files, `fromYaml`) is this followed by a JSON decode that turns
//!   every number into a float64, and wraps errors as `error converting YAML to JSON: <err>`.
//! * [`json_to_yaml`] is `JSONToYAML`: go-yaml reads the JSON text as YAML (so integers stay
//!   integers) and [`marshal`]s it. Helm's `toYaml` is this applied to `json.Marshal(v)`, with
//!   the trailing newline trimmed by Helm.
//! * [`split_documents`] is the Kubernetes `YAMLReader` that Helm v4 uses to read values
//!   files document by document (each then goes through `yaml.Unmarshal`, and the maps are
//!   merged by Helm).
//! * [`to_json`] is the JSON half of `yaml_to_json` for a tree already in hand.
//!
//! Errors keep go-yaml's wording (`yaml: line 3: mapping values are not allowed in this
//! context`) and carry the real position in [`Error::mark`].

mod base64;
mod decode;
mod documents;
mod encode;
mod json;
mod resolve;
mod sort;
mod strconv;
mod timestamp;

use crate::compose::{AnchorRule, ComposeError, Composer, RawDoc};
use crate::error::ErrorKind;
use crate::syntax::parser::Parser;
use crate::syntax::Dialect;
use crate::value::{Mark, Node, Yaml};
use crate::{Error, MAX_DEPTH};

pub use documents::split_documents;
pub use encode::marshal;
pub use json::to_json;

/// go-yaml v2's map key order (`keyList.Less`), which `marshal` uses: numbers by value,
/// strings "naturally" (digit runs as numbers, letters after other characters).
pub fn key_less(a: &Yaml, b: &Yaml) -> bool {
    sort::less(a, b)
}

/// `strconv.FormatFloat(f, 'g', -1, 64)`, Go's `%v` for a float64 (`1.234567e+06`).
pub fn format_float(f: f64) -> String {
    strconv::format_g(f, false)
}

/// `encoding/json`'s text for a float64, or `None` for NaN and infinities.
pub fn format_json_float(f: f64) -> Option<String> {
    strconv::format_json(f)
}

/// Every document of `src`, decoded as go-yaml's `yaml.Decoder` would into `interface{}`.
pub(crate) fn load_all(src: &str) -> Result<Vec<Node>, Error> {
    let mut composer = composer(src);
    let mut docs = Vec::new();
    while let Some(doc) = composer.next_document().map_err(compose_error)? {
        docs.push(decode::Decoder::new(&doc).decode()?);
    }
    Ok(docs)
}

/// The first document as go-yaml's `yaml.Unmarshal` into `interface{}` sees it; `None` for a
/// stream without documents.
pub(crate) fn load_first(src: &str) -> Result<Option<Node>, Error> {
    let mut composer = composer(src);
    let doc: Option<RawDoc> = composer.next_document().map_err(compose_error)?;
    doc.map(|doc| decode::Decoder::new(&doc).decode())
        .transpose()
}

fn composer(src: &str) -> Composer {
    Composer::new(Parser::new(src, Dialect::GoYamlV2), AnchorRule::Replace)
}

fn compose_error(e: ComposeError) -> Error {
    match e {
        ComposeError::Syntax(e) => Error::from_syntax_goyaml(&e),
        ComposeError::UndefinedAlias { anchor, at } => Error::new(
            ErrorKind::Construct,
            format!("yaml: unknown anchor '{anchor}' referenced"),
            Some(Mark::from_pos(at)),
        ),
        ComposeError::DuplicateAnchor { second, .. } => Error::new(
            ErrorKind::Construct,
            "yaml: duplicate anchor",
            Some(Mark::from_pos(second)),
        ),
        ComposeError::TooDeep { at } => Error::new(
            ErrorKind::Limit,
            format!("yaml: exceeded max depth of {MAX_DEPTH}"),
            Some(Mark::from_pos(at)),
        ),
    }
}

/// `sigs.k8s.io/yaml.YAMLToJSON(src)`: JSON text exactly as Go writes it. An empty stream is
/// `null`. Errors are go-yaml's (`yaml: ...`) or encoding/json's (`json: unsupported value:
/// +Inf`), without the `error converting YAML to JSON: ` prefix that `yaml.Unmarshal` adds.
pub fn yaml_to_json(src: &str) -> Result<String, Error> {
    match load_first(src)? {
        None => Ok("null".to_string()),
        Some(node) => to_json(&node.value),
    }
}

/// `sigs.k8s.io/yaml.JSONToYAML(json)`: go-yaml v2's `Marshal` of the JSON read as YAML,
/// with its trailing newline. The input is normally what Go's `json.Marshal` wrote.
pub fn json_to_yaml(json: &str) -> Result<String, Error> {
    let value = load_first(json)?.map(|n| n.value).unwrap_or(Yaml::Null);
    Ok(marshal(&value))
}
