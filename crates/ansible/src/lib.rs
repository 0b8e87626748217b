//! bosun's native Ansible role engine: runs operator-sdk Ansible operators' roles in-process,
//! with no Python.
//!
//! - [`extra_vars`]: the variables ansible-operator passes a run (snake-cased spec, the CR).
//! - [`role`]: loading a role or playbook, with every construct outside the supported subset
//!   refused at load time with its file:line:col.
//! - [`template`]: Jinja through minijinja with Ansible 2.18's typing, filters, tests, lookups.
//! - [`engine`]: the task engine (blocks, loops, conditionals, registers, variable precedence).
//! - [`modules`]: `k8s`, `k8s_info`, `k8s_status`, `k8s_event`, `k8s_scale`, `requeue_after`
//!   and the control modules, on a dynamic `kube::Client` with a shared discovery cache.
//! - [`status`]: the status conditions ansible-operator writes, as pure functions.
pub mod engine;
pub mod extra_vars;
pub mod kube_api;
pub mod metrics;
pub mod modules;
pub mod role;
pub mod status;
pub mod template;
pub mod yaml;

pub use engine::{
    ObjectCache, Outcome, RunContext, Stats, StatusRequest, TaskResult, TaskStatus, CENSORED,
};
pub use extra_vars::{for_cr, ExtraVarsOptions};
pub use kube_api::{Discovery, Owner};
pub use role::{LoadOptions, Role};

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A role, playbook or template outside the supported subset, or malformed.
    #[error("{}:{line}:{col}: {msg}", file.display())]
    Load {
        file: PathBuf,
        line: usize,
        col: usize,
        msg: String,
    },
    /// Several constructs outside the native subset, in the order they were met: every one
    /// is listed, so a user porting a role sees the whole work at once.
    #[error("{}", list_errors(.0))]
    Unsupported(Vec<Error>),
    #[error("{0}")]
    Io(String),
    #[error("{0}")]
    Template(String),
    #[error("{0}")]
    Undefined(String),
    #[error("{0}")]
    Module(String),
    #[error("kubernetes: {0}")]
    Kube(String),
}

impl Error {
    /// Whether this load error is only the native subset's limit — real Ansible may run the
    /// role — rather than a role no engine can run (missing, malformed).
    pub fn is_outside_subset(&self) -> bool {
        match self {
            Error::Load { msg, .. } => {
                msg.contains("not supported by bosun") || msg.contains("cannot be checked")
            }
            Error::Unsupported(list) => list.iter().all(Error::is_outside_subset),
            _ => false,
        }
    }

    /// The first construct outside the subset (the whole error when it is one).
    pub fn first_construct(&self) -> &Error {
        match self {
            Error::Unsupported(list) => list.first().unwrap_or(self),
            _ => self,
        }
    }
}

fn list_errors(list: &[Error]) -> String {
    let mut out = format!("{} constructs outside the native subset:", list.len());
    for e in list {
        out.push_str(&format!("\n  {e}"));
    }
    out
}
