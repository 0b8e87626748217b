//! Charts: loading as Helm's loader does, values, dependencies and render objects.
pub mod capabilities;
pub mod coalesce;
pub mod deps;
pub mod files;
pub mod glob;
pub mod ignore;
pub mod load;
pub mod metadata;
pub mod schema;
pub mod tree;
pub mod values;
