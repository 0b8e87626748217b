//! `create api` for another version of a Rust kind: a spoke. The kind's first version stays
//! the hub — the types the operator reconciles (`api.rs`) and the version the API server
//! stores — and each spoke is a module `src/<kind>/<version>.rs` with its own types and its
//! conversion to and from the hub. `src/<kind>/versions.rs` serves them all from one CRD
//! (exactly one storage version) and converts any version to any other through the hub: what
//! `create webhook --conversion` serves.
use std::path::Path;

use super::{insert_before, insert_module_in, Names};
use crate::files::Tree;
use crate::project::{Project, Resource};
use crate::Error;

const SPOKE_CRDS: &str = "// +bosun:scaffold:spoke-crds";
const TO_HUB: &str = "// +bosun:scaffold:to-hub";
const FROM_HUB: &str = "// +bosun:scaffold:from-hub";
/// What `create api` wrote for the CRD of a kind with one version.
const ONE_VERSION_CRD: &str = "vec![__Kind__::crd()]";

/// The files for `spoke`, a new version of the kind whose hub is `hub` (the kind's first
/// resource in the PROJECT file).
pub fn version(dir: &Path, project: &Project, hub: &Resource, spoke: &str) -> Result<Tree, Error> {
    let mut n = Names::of(project, hub);
    n.spoke = spoke.to_string();
    let module_dir = format!("src/{}", n.module);
    let read = |rel: &str| {
        let p = dir.join(&module_dir).join(rel);
        std::fs::read_to_string(&p).map_err(Error::io(&p))
    };
    let spoke_file = format!("{module_dir}/{spoke}.rs");
    if dir.join(&spoke_file).exists() {
        return Err(Error::RunnerExists(spoke_file));
    }
    let mut t = Tree::default();
    t.put(&spoke_file, n.fill(include_str!("templates/spoke.rs.tmpl")));

    let versions_path = dir.join(&module_dir).join("versions.rs");
    let first_spoke = !versions_path.exists();
    let versions = if first_spoke {
        let spokes = spoke.to_string();
        n.fill(include_str!("templates/versions.rs.tmpl"))
            .replace("__spokes__", &spokes)
    } else {
        read("versions.rs")?
    };
    let mark = |text: &str, marker: &str, line: &str| {
        insert_before(text, marker, &n.fill(line)).map_err(|_| {
            Error::Flag(format!(
                "{module_dir}/versions.rs has no '{marker}' line: add it where `bosun create api` should register a version"
            ))
        })
    };
    let versions = mark(&versions, SPOKE_CRDS, "super::__spoke__::__Kind__::crd(),")?;
    let versions = mark(
        &versions,
        TO_HUB,
        "\"__spoke__\" => decode(version, spec).map(super::__spoke__::to_hub),",
    )?;
    let versions = mark(
        &versions,
        FROM_HUB,
        "\"__spoke__\" => encode(super::__spoke__::from_hub(hub)),",
    )?;
    t.put(format!("{module_dir}/versions.rs"), versions);

    let mut module = insert_module_in(&read("mod.rs")?, spoke);
    if first_spoke {
        module = insert_module_in(&module, "versions");
        // The operator's CRD serves every version from now on.
        let reconcile = read("reconcile.rs")?;
        let one = n.fill(ONE_VERSION_CRD);
        if !reconcile.contains(&one) {
            return Err(Error::Flag(format!(
                "{module_dir}/reconcile.rs does not return `{one}` from crds(): make it `vec![super::versions::crd()]` to serve every version"
            )));
        }
        t.put(
            format!("{module_dir}/reconcile.rs"),
            reconcile.replace(&one, "vec![super::versions::crd()]"),
        );
    }
    t.put(format!("{module_dir}/mod.rs"), module);
    Ok(t)
}
