#![cfg_attr(test, allow(clippy::unwrap_used))]
//! bosun-helm: Helm chart rendering in Rust, byte-identical to Helm's engine.
//!
//! The layers, bottom up:
//! * [`value`]: Go values with their Go types, Go's `fmt` and `encoding/json`;
//! * [`template`]: Go's `text/template` (lexer, parser, evaluator, limits);
//! * [`funcs`]: Helm's function map (Go builtins, Sprig, Helm's own);
//! * [`chart`]: chart loading, values coalescing, dependencies, render objects.
pub mod chart;
pub mod funcs;
pub mod render;
pub mod template;
pub mod toml;
pub mod value;
pub mod yaml;
