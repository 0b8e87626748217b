//! The load-time check of a fallback entry: `ansible-playbook --syntax-check` of what the
//! runs will play (the playbook, or the play ansible-runner generates for a role), with the
//! runs' roles and collections paths. Real Ansible resolves every module and role there, so
//! a role that does not parse, or that calls a module of a collection that is not
//! installed, is refused when the watches file is loaded — with Ansible's own file:line —
//! rather than failing every reconcile. About half a second per entry.
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::engine::Installation;
use crate::run::{private_dir, private_file};
use crate::target::Target;

/// The longest part of Ansible's error kept in the message.
const MAX_ERROR: usize = 4096;

pub fn check(
    install: &Installation,
    target: &Target,
    collections_paths: &[PathBuf],
    roles_paths: &[PathBuf],
    scratch: &Path,
) -> Result<(), String> {
    let playbook_bin = install.bin_dir().join("ansible-playbook");
    let mut cmd = std::process::Command::new(&playbook_bin);
    cmd.args(["--syntax-check", "-i", "localhost,"]);
    let mut generated = None;
    match target {
        Target::Playbook(p) => {
            cmd.arg(p);
        }
        Target::Role { name, .. } | Target::CollectionRole(name) => {
            static N: AtomicU64 = AtomicU64::new(0);
            private_dir(scratch).map_err(|e| format!("{}: {e}", scratch.display()))?;
            let p = scratch.join(format!(
                "preflight-{}-{}.yml",
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed)
            ));
            let play =
                serde_json::json!([{"hosts": "localhost", "gather_facts": false, "roles": [name]}]);
            private_file(&p, play.to_string().as_bytes())
                .map_err(|e| format!("{}: {e}", p.display()))?;
            cmd.arg(&p);
            generated = Some(p);
        }
    }
    if let Some(r) = crate::roles_path_env(target, roles_paths) {
        cmd.env("ANSIBLE_ROLES_PATH", r);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut paths = vec![install.bin_dir()];
    paths.extend(std::env::split_paths(&path));
    if let Ok(p) = std::env::join_paths(paths) {
        cmd.env("PATH", p);
    }
    if let Ok(c) = std::env::join_paths(collections_paths) {
        cmd.env("ANSIBLE_COLLECTIONS_PATH", c);
    }
    let out = cmd.output();
    if let Some(p) = generated {
        let _ = std::fs::remove_file(p);
    }
    let out = out.map_err(|e| format!("running {}: {e}", playbook_bin.display()))?;
    if out.status.success() {
        return Ok(());
    }
    let mut err = String::from_utf8_lossy(&out.stderr).trim().to_string();
    if err.is_empty() {
        err = String::from_utf8_lossy(&out.stdout).trim().to_string();
    }
    if err.len() > MAX_ERROR {
        let mut cut = MAX_ERROR;
        while !err.is_char_boundary(cut) {
            cut -= 1;
        }
        err.truncate(cut);
        err.push('…');
    }
    if err.contains("couldn't resolve module/action") || err.contains("was not found") {
        err.push_str("\n(a module or role of a collection that is not installed: install it with `ansible-galaxy collection install <namespace>.<name>` into the same Ansible, or put its directory on ANSIBLE_COLLECTIONS_PATH)");
    }
    Err(format!("real Ansible refuses it: {err}"))
}
