//! Shared by the scaffold's integration tests.
#![allow(dead_code)]
use std::path::Path;

use bosun_scaffold::{Derive, Derived};

/// A [`Derive`] that derives nothing from a watches file: `Empty` gives no CRDs or RBAC (the
/// scaffold alone is under test), `Refuse` fails (a plugin that must never derive).
pub enum NoDerive {
    Empty,
    Refuse,
}

impl Derive for NoDerive {
    fn derive(
        &self,
        _: Option<&Path>,
        _: &str,
    ) -> Result<Derived, Box<dyn std::error::Error + Send + Sync>> {
        match self {
            NoDerive::Empty => Ok(Derived::default()),
            NoDerive::Refuse => Err("this plugin must not derive from a watches file".into()),
        }
    }
}

/// Every file under `dir`, relative, sorted.
pub fn files(dir: &Path) -> Vec<String> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
        for e in std::fs::read_dir(dir).expect("ls").flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(root, &p, out);
            } else {
                let rel = p.strip_prefix(root).expect("inside");
                out.push(rel.to_string_lossy().into_owned());
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}
