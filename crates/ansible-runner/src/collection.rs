//! bosun's stand-in `operator_sdk.util` collection (`k8s_status`, `requeue_after`,
//! `k8s_event`, and `osdk_metric`, which accepts its arguments but exports nothing yet),
//! written out for the runs: Galaxy is often unreachable, and roles made with
//! operator-sdk's scaffold call these modules. It goes last on the runs'
//! `ANSIBLE_COLLECTIONS_PATH`, so a real `operator_sdk.util` installed by the user wins.
use std::path::{Path, PathBuf};

use crate::run::{private_dir, private_file};

const FILES: &[(&str, &str)] = &[
    (
        "galaxy.yml",
        include_str!("../collection/ansible_collections/operator_sdk/util/galaxy.yml"),
    ),
    (
        "meta/runtime.yml",
        include_str!("../collection/ansible_collections/operator_sdk/util/meta/runtime.yml"),
    ),
    (
        "plugins/modules/k8s_status.py",
        include_str!(
            "../collection/ansible_collections/operator_sdk/util/plugins/modules/k8s_status.py"
        ),
    ),
    (
        "plugins/modules/requeue_after.py",
        include_str!(
            "../collection/ansible_collections/operator_sdk/util/plugins/modules/requeue_after.py"
        ),
    ),
    (
        "plugins/modules/osdk_metric.py",
        include_str!(
            "../collection/ansible_collections/operator_sdk/util/plugins/modules/osdk_metric.py"
        ),
    ),
    (
        "plugins/modules/k8s_event.py",
        include_str!(
            "../collection/ansible_collections/operator_sdk/util/plugins/modules/k8s_event.py"
        ),
    ),
];

/// Writes the collection under `<base>/collections` and returns that collections path.
pub fn install(base: &Path) -> std::io::Result<PathBuf> {
    let root = base.join("collections");
    let coll = root.join("ansible_collections/operator_sdk/util");
    for (rel, text) in FILES {
        let p = coll.join(rel);
        if let Some(parent) = p.parent() {
            private_dir(parent)?;
        }
        if std::fs::read(&p).ok().as_deref() != Some(text.as_bytes()) {
            // Written beside and renamed: another operator process may be reading it.
            let tmp = p.with_extension(format!("tmp{}", std::process::id()));
            private_file(&tmp, text.as_bytes())?;
            std::fs::rename(&tmp, &p)?;
        }
    }
    Ok(root)
}
