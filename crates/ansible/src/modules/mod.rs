//! The modules a task can call.
pub mod spec;

pub use spec::Module;
pub mod validate;
