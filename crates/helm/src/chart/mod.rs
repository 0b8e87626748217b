//! Charts: loading as Helm's loader does, values, dependencies and render objects.
pub mod capabilities;
pub mod files;
pub mod glob;
pub mod values;
