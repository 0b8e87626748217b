//! YAML 1.1 reading and writing that match, byte for byte, the two engines bosun stands in for:
//!
//! * **go-yaml v2** as Helm (v4.2.3) uses it through sigs.k8s.io/yaml ([`goyaml`]).
//! * **PyYAML 6.0** with libyaml as Ansible uses it ([`pyyaml`]): `CSafeLoader` for reading,
//!   `CSafeDumper` for the `to_yaml` / `to_nice_yaml` filters.
//!
//! # API
//!
//! Reading:
//! * [`load_all`]`(src, schema)`: every document as a [`Node`] tree — a [`Yaml`] value and
//!   the 1-based [`Mark`] (line, column in characters) where it starts. Plain scalars, tags,
//!   anchors, aliases and merge keys (`<<`) follow the [`Schema`]'s engine. Mappings keep
//!   document order; a repeated key keeps its first position and takes the last value.
//!   Errors ([`Error`]) carry the engine's own message and the real position.
//!
//! go-yaml v2 / Helm ([`goyaml`]):
//! * [`goyaml::yaml_to_json`]: `sigs.k8s.io/yaml.YAMLToJSON` (first document). Helm's
//!   `yaml.Unmarshal` is this plus a JSON decode to float64s, with errors prefixed
//!   `error converting YAML to JSON: `.
//! * [`goyaml::json_to_yaml`]: `JSONToYAML`; Helm's `toYaml` is this on Go's `json.Marshal`
//!   output, trailing newline trimmed, errors swallowed into `""`.
//! * [`goyaml::marshal`]: go-yaml's `Marshal` of a tree; [`goyaml::to_json`]: the JSON half.
//! * [`goyaml::split_documents`]: the Kubernetes `YAMLReader` Helm v4 reads values files with.
//! * [`goyaml::key_less`], [`goyaml::format_float`], [`goyaml::format_json_float`]: go-yaml's
//!   key order, Go's `%v` and `encoding/json` float texts.
//!
//! PyYAML / Ansible ([`pyyaml`]):
//! * [`pyyaml::dump`] with [`pyyaml::DumpOptions`] (`to_yaml()`, `to_nice_yaml()`, or
//!   `default()` for `yaml.dump`'s own defaults).
//!
//! # Design
//!
//! One libyaml-shaped scanner and parser (`syntax`) serves both engines: go-yaml v2 is a Go
//! port of libyaml 0.1, PyYAML's C loader is libyaml 0.2.5, and their few differences are a
//! dialect switch. Events are composed into an arena with anchors resolved (`compose`); each
//! schema then constructs values from it (go-yaml's decoder; PyYAML's SafeConstructor, whose
//! error precedence follows Python's breadth-first construction). One libyaml-shaped emitter
//! (`emit`) serves both writers. A YAML 1.2 parser crate was not used: its syntax and error
//! texts differ from libyaml's where real files and Helm's error messages show it.
//!
//! # Hostile input
//!
//! Nesting (counting alias hops) deeper than [`MAX_DEPTH`] is refused before any recursion;
//! alias expansion is bounded with go-yaml's own "excessive aliasing" ratio (for both
//! schemas); work is linear in the input; writers walk trees with explicit stacks. Nothing
//! here panics on input.
//!
//! # Known differences from the engines
//!
//! * Depth: go-yaml accepts 10000 levels, bosun [`MAX_DEPTH`].
//! * Trees are values: what an alias refers to is copied. PyYAML shares the object, so a
//!   structure that contains itself (legal in Python) is refused here, and `dump` never writes
//!   `&id001` anchors for objects Python would have shared.
//! * Where Go's random map order decides the outcome — keys that stringify alike in
//!   `yaml_to_json` (`true` and `"true"`), several refused keys in one document, or key sets
//!   on which go-yaml's order is not transitive — bosun picks one deterministic outcome.
//! * PyYAML `!!set` is read as a mapping to nulls, `!!omap`/`!!pairs` as a list of
//!   `[key, value]` lists; tags SafeLoader does not know (Ansible's `!unsafe`, `!vault`) are
//!   errors, as in SafeLoader.
//! * Only the libyaml emitter is imitated; PyYAML's pure-Python `yaml.Dumper` (used when
//!   libyaml is absent) ends bare scalars with `...` and folds double-quoted text
//!   differently.
//! * A refused control character is reported once the scanner reaches the reader chunk
//!   holding it (as both engines do), checked at token boundaries rather than mid-token.

mod compose;
mod emit;
mod error;
pub mod goyaml;
pub mod pyyaml;
mod syntax;
mod value;

pub use error::{Error, ErrorKind};
pub use value::{Mark, Node, Timestamp, TimestampTime, Yaml};

/// Deepest nesting accepted while reading, counting collections and alias hops. go-yaml
/// allows 10000 and Python about 1000; bosun stops at 512 so that building a tree recursively
/// stays well inside a 2 MiB thread stack even in debug builds (real charts and roles nest a
/// few dozen levels). The writers walk trees iteratively and have no such limit.
pub const MAX_DEPTH: usize = 512;

/// Whose rules resolve scalars and build the tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Schema {
    /// go-yaml v2 decoding into `interface{}`: `y`/`n`/`on` are bools, `0o17` and `010` are
    /// octal, `1e3` is a float, timestamps stay strings, integers beyond uint64 are floats.
    GoYamlV2,
    /// PyYAML's SafeLoader: `y`/`n` are strings, `1:20` is sexagesimal 80, `1e3` is a string,
    /// dates are timestamps, integers have arbitrary precision, `=` cannot be constructed.
    PyYaml,
}

/// Reads every document of `src`. An empty stream has no documents; an explicit empty
/// document (`---` alone) is a [`Yaml::Null`] node.
pub fn load_all(src: &str, schema: Schema) -> Result<Vec<Node>, Error> {
    match schema {
        Schema::GoYamlV2 => goyaml::load_all(src),
        Schema::PyYaml => pyyaml::load_all(src),
    }
}
