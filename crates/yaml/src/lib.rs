//! YAML 1.1 reading and writing that match, byte for byte, the two engines bosun stands in for:
//!
//! * **go-yaml v2** as Helm uses it through sigs.k8s.io/yaml ([`goyaml`]): values.yaml,
//!   Chart.yaml and `fromYaml` go through [`goyaml::yaml_to_json`]; `toYaml` is
//!   [`goyaml::json_to_yaml`] of Go's `json.Marshal` output.
//! * **PyYAML 6** as Ansible uses it ([`pyyaml`]): `CSafeLoader` for reading (libyaml 0.2.5 plus
//!   PyYAML's SafeConstructor) and `CSafeDumper` for `to_yaml`/`to_nice_yaml`.
//!
//! # API
//!
//! * [`load_all`] reads every document of a stream into [`Node`] trees (a [`Yaml`] value and
//!   the 1-based [`Mark`] where it starts), resolving plain scalars, tags, anchors, aliases and
//!   merge keys (`<<`) with the chosen [`Schema`]'s rules. Mappings keep document order;
//!   a repeated key keeps its first position and takes the last value (both engines' outcome).
//! * [`goyaml::yaml_to_json`], [`goyaml::json_to_yaml`], [`goyaml::marshal`],
//!   [`goyaml::to_json`]: the sigs.k8s.io/yaml conversions and go-yaml's `Marshal`.
//! * [`pyyaml::dump`] with [`pyyaml::DumpOptions`] (`to_yaml` / `to_nice_yaml` presets).
//!
//! # Design
//!
//! One libyaml-shaped scanner and parser (`syntax`) serves both engines; the differences
//! between go-yaml's Go port of libyaml 0.1 and libyaml 0.2.5 are a [`syntax::Dialect`] switch.
//! Events are composed into an arena with anchors resolved ([`compose`]), then each schema
//! constructs values from it. One libyaml-shaped emitter (`emit`) serves both writers.
//!
//! # Hostile input
//!
//! Nesting deeper than [`MAX_DEPTH`] is refused before any recursion; alias expansion is
//! bounded with go-yaml's own "excessive aliasing" ratio; every error carries a position.
//! Nothing here panics on input.

mod compose;
mod emit;
mod error;
pub mod goyaml;
pub mod pyyaml;
mod syntax;
mod value;

pub use error::Error;
pub use value::{Mark, Node, Timestamp, TimestampTime, Yaml};

/// Deepest nesting of collections accepted, counting through aliases. go-yaml allows 10000;
/// bosun stops at 1000 so that the recursive walks over a tree stay far from a thread's stack
/// limit (no real chart or role nests beyond a few dozen levels).
pub const MAX_DEPTH: usize = 1000;

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
