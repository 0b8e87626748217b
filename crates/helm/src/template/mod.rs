//! Go's `text/template`: lexer, parser, evaluator.
pub mod error;
pub mod exec;
pub mod lex;
pub mod node;
pub mod parse;
pub mod set;
pub mod tpl_cache;
