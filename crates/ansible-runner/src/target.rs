//! What ansible-runner runs for an entry: a role (by directory, or by FQCN from a
//! collection) or a playbook, found as ansible-operator finds them (the native loader's
//! order: a 3-part FQCN in the collections paths, each roles path as `<p>/<role>` and
//! `<p>/roles/<role>`, then `./roles/<role>`; a directory path as it is).
use std::path::{Path, PathBuf};

use bosun_ansible::LoadOptions;
use bosun_watches::Runner;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// `--role <name> --roles-path <dir>`.
    Role { name: String, roles_path: PathBuf },
    /// `--role ns.coll.role`: Ansible finds it in the collections paths.
    CollectionRole(String),
    /// `-p <absolute path>`.
    Playbook(PathBuf),
}

impl Target {
    /// What the log calls it.
    pub fn describe(&self) -> String {
        match self {
            Target::Role { name, roles_path } => {
                format!("role {}", roles_path.join(name).display())
            }
            Target::CollectionRole(n) => format!("role {n}"),
            Target::Playbook(p) => format!("playbook {}", p.display()),
        }
    }
}

/// Finds the entry's role or playbook on disk.
pub fn resolve(runner: &Runner, opts: &LoadOptions) -> Result<Target, String> {
    match runner {
        Runner::Playbook(p) => {
            let p = if p.is_absolute() {
                p.clone()
            } else {
                opts.cwd.join(p)
            };
            if p.is_file() {
                Ok(Target::Playbook(p))
            } else {
                Err(format!("the playbook {} was not found", p.display()))
            }
        }
        Runner::Role(name) => role(name, opts),
        Runner::Chart(c) => Err(format!("{} is a chart, not a role", c.display())),
    }
}

fn role(name: &str, opts: &LoadOptions) -> Result<Target, String> {
    let parts: Vec<&str> = name.split('.').collect();
    if parts.len() == 3 && !name.contains('/') {
        let found = opts.collections_paths.iter().any(|c| {
            c.join("ansible_collections")
                .join(parts[0])
                .join(parts[1])
                .join("roles")
                .join(parts[2])
                .is_dir()
        });
        if found {
            return Ok(Target::CollectionRole(name.to_string()));
        }
    }
    let direct = Path::new(name);
    let mut candidates: Vec<PathBuf> = Vec::new();
    if direct.is_absolute() || name.contains('/') {
        candidates.push(if direct.is_absolute() {
            direct.to_path_buf()
        } else {
            opts.cwd.join(direct)
        });
    }
    for p in &opts.roles_path {
        candidates.push(p.join(name));
        candidates.push(p.join("roles").join(name));
    }
    candidates.push(opts.cwd.join("roles").join(name));
    let dir = candidates.into_iter().find(|d| d.is_dir()).ok_or_else(|| {
        format!("the role '{name}' was not found (looked in collections paths, ANSIBLE_ROLES_PATH and ./roles)")
    })?;
    let dir = dir.canonicalize().unwrap_or(dir);
    match (dir.file_name(), dir.parent()) {
        (Some(n), Some(parent)) => Ok(Target::Role {
            name: n.to_string_lossy().into_owned(),
            roles_path: parent.to_path_buf(),
        }),
        _ => Err(format!("the role '{name}' is not a directory with a name")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_and_playbooks_are_found_as_ansible_operator_does() {
        let d = tempfile::tempdir().expect("dir");
        let root = d.path().canonicalize().expect("canon");
        std::fs::create_dir_all(root.join("a/roles/web/tasks")).expect("mkdir");
        std::fs::create_dir_all(root.join("cwd/roles/local")).expect("mkdir");
        std::fs::create_dir_all(root.join("col/ansible_collections/ns/c/roles/r")).expect("mkdir");
        std::fs::write(root.join("cwd/site.yml"), "- hosts: localhost\n").expect("write");
        let opts = LoadOptions {
            roles_path: vec![root.join("a")],
            collections_paths: vec![root.join("col")],
            cwd: root.join("cwd"),
        };
        assert_eq!(
            resolve(&Runner::Role("web".into()), &opts),
            Ok(Target::Role {
                name: "web".into(),
                roles_path: root.join("a/roles")
            })
        );
        assert_eq!(
            resolve(&Runner::Role("local".into()), &opts),
            Ok(Target::Role {
                name: "local".into(),
                roles_path: root.join("cwd/roles")
            })
        );
        assert_eq!(
            resolve(&Runner::Role("ns.c.r".into()), &opts),
            Ok(Target::CollectionRole("ns.c.r".into()))
        );
        assert_eq!(
            resolve(&Runner::Playbook("site.yml".into()), &opts),
            Ok(Target::Playbook(root.join("cwd/site.yml")))
        );
        let e = resolve(&Runner::Role("missing".into()), &opts).expect_err("missing");
        assert!(e.contains("'missing' was not found"), "{e}");
        assert!(resolve(&Runner::Playbook("nope.yml".into()), &opts).is_err());
    }
}
