//! A small vSphere client: the vim25 SOAP calls an operator keeping VMs needs — sessions,
//! inventory paths, folders, custom fields, property retrieval, clone, reconfigure, power,
//! destroy and tasks —
//! on hyper + rustls with quick-xml, and no Kubernetes in it.
//!
//! - XML is matched by namespace URI, never by prefix (`xml`).
//! - Faults keep their kind and the server's message (`error::FaultKind`); a fixed category
//!   per error serves metric labels and status reasons.
//! - A session gone (`NotAuthenticated`) is re-established once per call, transparently.
//! - TLS is verified against a CA bundle unless `Tls::Insecure` is chosen explicitly.
//! - Every call is counted per method (`Client::counts`).
//!
//! No crate on crates.io served this: `vim_rs` targets the JSON API of vSphere 8 and compiles
//! slowly; the rest are unmaintained.
mod client;
mod config;
mod counter;
mod error;
mod fields;
mod inventory;
mod properties;
mod soap;
mod task;
mod tls;
mod transport;
mod types;
mod vm;
mod xml;

pub use client::Client;
pub use config::Config;
pub use counter::CallCounts;
pub use error::{Error, FaultKind, Result};
pub use properties::ObjectContent;
pub use tls::Tls;
pub use types::{FolderInfo, MoRef, PowerState, ServiceContent, VmInfo};
pub use vm::{CloneOptions, Shape};
