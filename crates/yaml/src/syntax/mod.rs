//! The YAML 1.1 syntax layer shared by both schemas: reader check, scanner (tokens) and parser
//! (events), written after libyaml's design because both engines bosun imitates are libyaml:
//! go-yaml v2 is a line-by-line Go port of libyaml 0.1, and PyYAML's `CSafeLoader` (what
//! Ansible uses when libyaml is present, which is the normal install) is libyaml 0.2.5.
//!
//! Why not a YAML 1.2 parser crate (yaml-rust2, saphyr-parser): their *syntax* differs from
//! libyaml's in places real files hit — tabs after indicators, `:` inside flow plain scalars
//! (`[http://x]`), the 1024-character simple-key limit, `%YAML 1.1` handling — and their error
//! texts and positions are not libyaml's, while Helm surfaces go-yaml's error text verbatim
//! (`yaml: line 3: mapping values are not allowed in this context`, including go-yaml's
//! 0-based line number for parser errors). Owning the scanner also lets the depth limit stop
//! hostile input before any recursion.
//!
//! The two engines differ in a few scanner rules; [`Dialect`] selects them.

pub(crate) mod chars;
pub(crate) mod parser;
mod parser_collections;
pub(crate) mod scanner;
mod scanner_props;
mod scanner_scalars;
mod scanner_tokens;

/// A position in the input, 0-based as libyaml keeps it. `index` and `column` count
/// characters, not bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Pos {
    pub index: usize,
    pub line: usize,
    pub column: usize,
}

/// Which libyaml descendant to imitate where they disagree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dialect {
    /// gopkg.in/yaml.v2 2.4 (through sigs.k8s.io/yaml, as Helm uses it).
    GoYamlV2,
    /// libyaml 0.2.5 behind PyYAML's `CParser`.
    LibYaml,
}

/// Deepest flow or block nesting the scanner accepts; go-yaml v2 has the same limit and
/// message. The composer applies a lower limit of its own ([`crate::MAX_DEPTH`]).
pub(crate) const MAX_SCANNER_DEPTH: usize = 10_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ScalarStyle {
    Plain,
    SingleQuoted,
    DoubleQuoted,
    Literal,
    Folded,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum TokenKind {
    StreamStart,
    StreamEnd,
    VersionDirective(u32, u32),
    TagDirective { handle: String, prefix: String },
    DocumentStart,
    DocumentEnd,
    BlockSequenceStart,
    BlockMappingStart,
    BlockEnd,
    FlowSequenceStart,
    FlowSequenceEnd,
    FlowMappingStart,
    FlowMappingEnd,
    BlockEntry,
    FlowEntry,
    Key,
    Value,
    Alias(String),
    Anchor(String),
    Tag { handle: String, suffix: String },
    Scalar { value: String, style: ScalarStyle },
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Token {
    pub kind: TokenKind,
    pub start: Pos,
    pub end: Pos,
}

/// Which stage refused the input; go-yaml words line numbers differently per stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stage {
    Reader,
    Scanner,
    Parser,
}

/// A libyaml-style error: a problem at a position, optionally inside a context that started
/// elsewhere ("while parsing a block mapping" at the mapping's start).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SyntaxError {
    pub stage: Stage,
    pub context: Option<&'static str>,
    pub context_mark: Option<Pos>,
    pub problem: String,
    pub problem_mark: Pos,
    /// The refused character, for reader errors.
    pub value: Option<u32>,
}
