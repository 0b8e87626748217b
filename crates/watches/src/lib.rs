//! Operators whose kinds are known only at run time, from operator-sdk's `watches.yaml`:
//! [`file`] reads and checks the file (both flavours' fields), [`host`] runs one entry as an
//! operator on the shared runtime, for any [`host::Flavor`] — Helm charts and Ansible roles;
//! [`schema`] infers a kind's spec schema from default values, for both.
pub mod file;
pub mod host;
pub mod kinds;
pub mod packed;
pub mod schema;

pub use file::{
    parse_duration, Entry, Runner, ValuesFrom, ValuesSourceKind, WatchesError, WatchesFile,
};
pub use host::{Flavor, Host, Next, WatchOperator};
