//! Where a task's relative file name is looked for, in ansible-core 2.18's order
//! (`Task.get_search_path` + `DataLoader.path_dwim_relative_stack`): for each directory of
//! the task's search path — the role's directory, then the task file's — `<p>/<dir>/<name>`
//! and `<p>/<name>` (with the role's `<dir>` first when `<p>` is a role's `tasks/`
//! subdirectory), then the play's base directory likewise. `<dir>` is left out when the
//! name already starts with it. The first file that exists wins.
//!
//! Roles run as ansible-runner runs a role entry have no base directory of their own (the
//! generated playbook's directory holds nothing else); playbooks have theirs.
//!
//! Not followed: the directories of the roles that depend on, or include, the task's role
//! (Ansible searches them after the role's own).
//!
//! A name with templates is known only at run time: [`SearchPath::matching_files`] lists
//! every file it could name, so the loader reads and checks them all up front and a run
//! never meets a file the loader has not seen.
use std::path::{Path, PathBuf};

/// How many directory entries a templated name's search may visit before the loader gives
/// up on reading every file it could name.
pub(crate) const MAX_VISITED: usize = 5000;
const MAX_DEPTH: usize = 8;

#[derive(Clone, Debug, Default)]
pub struct SearchPath {
    /// The role's directory (when the task is in a role), then the task file's directory.
    pub stack: Vec<PathBuf>,
    /// The play's directory (a playbook's), searched last.
    pub basedir: Option<PathBuf>,
}

impl SearchPath {
    pub(crate) fn new(role_dir: Option<&Path>, task_dir: &Path, basedir: Option<&Path>) -> Self {
        let mut stack: Vec<PathBuf> = role_dir.map(Path::to_path_buf).into_iter().collect();
        if !stack.iter().any(|p| p == task_dir) {
            stack.push(task_dir.to_path_buf());
        }
        SearchPath {
            stack,
            basedir: basedir.map(Path::to_path_buf),
        }
    }

    /// The paths tried for `source`, in order.
    pub fn candidates(&self, dirname: &str, source: &str) -> Vec<PathBuf> {
        if source.starts_with('/') || source.starts_with('~') {
            return vec![expand_home(source)];
        }
        let first_is_dir = source.split('/').next() == Some(dirname);
        let mut out = Vec::new();
        for p in &self.stack {
            if let Some(parent) = p.parent().filter(|pp| pp.ends_with("tasks") && is_role(p)) {
                if let Some(role) = parent.parent() {
                    out.push(role.join(dirname).join(source));
                }
                out.push(parent.join(source));
            }
            if !first_is_dir {
                out.push(p.join(dirname).join(source));
            }
            out.push(p.join(source));
        }
        if let Some(b) = &self.basedir {
            if !first_is_dir {
                out.push(b.join(dirname).join(source));
            }
            out.push(b.join(source));
        }
        out
    }

    /// The first existing candidate, or Ansible's `AnsibleFileNotFound` message.
    pub fn find(&self, dirname: &str, source: &str) -> Result<PathBuf, String> {
        let cands = self.candidates(dirname, source);
        if let Some(found) = cands.iter().find(|c| c.exists()) {
            return Ok(found.clone());
        }
        let searched: Vec<String> = cands.iter().map(|c| c.display().to_string()).collect();
        Err(format!(
            "Could not find or access '{source}'\nSearched in:\n\t{} on the Ansible Controller.\nIf you are using a module and expect the file to exist on the remote, see the remote_src option",
            searched.join("\n\t")
        ))
    }

    /// Every file a templated `source` could name (each template standing for any text),
    /// or Err when the search would visit more than [`MAX_VISITED`] entries.
    pub(crate) fn matching_files(
        &self,
        dirname: &str,
        source: &str,
    ) -> Result<Vec<PathBuf>, String> {
        let mut out = Vec::new();
        let mut visited = 0usize;
        for cand in self.candidates(dirname, source) {
            let text = cand.display().to_string();
            let Some(re) = pattern(&text) else {
                if cand.is_file() {
                    out.push(cand);
                }
                continue;
            };
            let cut = template_start(&text).unwrap_or(text.len());
            let root = match text[..cut].rfind('/') {
                Some(i) => PathBuf::from(&text[..i.max(1)]),
                None => continue,
            };
            walk(&root, 0, &mut visited, &mut |p| {
                if re.is_match(&p.display().to_string()) {
                    out.push(p.to_path_buf());
                }
            })?;
        }
        out.sort();
        out.dedup();
        Ok(out)
    }
}

fn expand_home(source: &str) -> PathBuf {
    match source.strip_prefix('~') {
        Some(rest) if rest.is_empty() || rest.starts_with('/') => {
            let home = std::env::var("HOME").unwrap_or_default();
            PathBuf::from(format!("{home}{rest}"))
        }
        _ => PathBuf::from(source),
    }
}

/// ansible-core's `DataLoader._is_role`: a directory, or its parent, holding `tasks/main`
/// or `meta/main`, or a directory holding `main`.
fn is_role(p: &Path) -> bool {
    let mains = ["main.yml", "main.yaml", "main"];
    if mains.iter().any(|m| p.join(m).exists()) {
        return true;
    }
    let parent = p.parent().unwrap_or(p);
    [p, parent].iter().any(|d| {
        ["tasks", "meta"]
            .iter()
            .any(|sub| mains.iter().any(|m| d.join(sub).join(m).exists()))
    })
}

fn template_start(s: &str) -> Option<usize> {
    match (s.find("{{"), s.find("{%")) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The candidate as a regular expression: literal text as it is, each `{{ … }}` or
/// `{% … %}` as any text. None when it holds no template.
fn pattern(s: &str) -> Option<regex::Regex> {
    template_start(s)?;
    let mut re = String::from("^");
    let mut rest = s;
    while let Some(i) = template_start(rest) {
        re.push_str(&regex::escape(&rest[..i]));
        let close = if rest[i..].starts_with("{{") {
            "}}"
        } else {
            "%}"
        };
        match rest[i + 2..].find(close) {
            Some(j) => {
                re.push_str(".*");
                rest = &rest[i + 2 + j + 2..];
            }
            None => {
                re.push_str(".*");
                rest = "";
            }
        }
    }
    re.push_str(&regex::escape(rest));
    re.push('$');
    regex::Regex::new(&re).ok()
}

/// Every file under `dir` (bounded like a templated name's search).
pub(crate) fn files_under(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let mut out = Vec::new();
    let mut visited = 0usize;
    walk(dir, 0, &mut visited, &mut |p| out.push(p.to_path_buf()))?;
    Ok(out)
}

fn walk(
    dir: &Path,
    depth: usize,
    visited: &mut usize,
    f: &mut dyn FnMut(&Path),
) -> Result<(), String> {
    if depth > MAX_DEPTH {
        return Ok(());
    }
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Ok(());
    };
    let mut entries: Vec<PathBuf> = rd.flatten().map(|e| e.path()).collect();
    entries.sort();
    for p in entries {
        *visited += 1;
        if *visited > MAX_VISITED {
            return Err(format!(
                "more than {MAX_VISITED} files under {} could be named",
                dir.display()
            ));
        }
        if p.is_dir() {
            walk(&p, depth + 1, visited, f)?;
        } else if p.is_file() {
            f(&p);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn role(dir: &Path) -> PathBuf {
        let r = dir.join("roles/exp");
        std::fs::create_dir_all(r.join("tasks")).expect("test value");
        std::fs::write(r.join("tasks/main.yml"), "[]").expect("test value");
        r
    }

    #[test]
    fn candidates_follow_ansible_order() {
        let d = tempfile::tempdir().expect("test value");
        let r = role(d.path());
        let s = SearchPath::new(Some(&r), &r.join("tasks"), Some(Path::new("/pb")));
        let c = s.candidates("vars", "x/a.yml");
        assert_eq!(
            c,
            vec![
                r.join("vars/x/a.yml"),
                r.join("x/a.yml"),
                r.join("tasks/vars/x/a.yml"),
                r.join("tasks/x/a.yml"),
                PathBuf::from("/pb/vars/x/a.yml"),
                PathBuf::from("/pb/x/a.yml"),
            ]
        );
        // A name that starts with the directory is not prefixed again.
        let c = s.candidates("vars", "vars/a.yml");
        assert_eq!(c[0], r.join("vars/a.yml"));
        assert_eq!(c.len(), 3);
        assert_eq!(
            s.candidates("vars", "/abs/a.yml"),
            vec![PathBuf::from("/abs/a.yml")]
        );
    }

    #[test]
    fn a_task_file_in_a_subdirectory_of_tasks_searches_the_role_first() {
        let d = tempfile::tempdir().expect("test value");
        let r = role(d.path());
        let sub = r.join("tasks/sub");
        std::fs::create_dir_all(&sub).expect("test value");
        let s = SearchPath::new(None, &sub, None);
        // Not a role's directory by Ansible's test (no main file in it or beside it).
        assert_eq!(s.candidates("vars", "a.yml")[0], sub.join("vars/a.yml"));
        std::fs::write(sub.join("main.yml"), "[]").expect("test value");
        let c = s.candidates("vars", "a.yml");
        assert_eq!(c[0], r.join("vars/a.yml"));
        assert_eq!(c[1], r.join("tasks/a.yml"));
    }

    #[test]
    fn templated_names_list_every_file_they_could_name() {
        let d = tempfile::tempdir().expect("test value");
        let r = role(d.path());
        for f in [
            "vars/exporters/node/vars.yml",
            "vars/exporters/redis/vars.yml",
            "vars/other.yml",
        ] {
            std::fs::create_dir_all(r.join(f).parent().expect("test value")).expect("test value");
            std::fs::write(r.join(f), "a: 1\n").expect("test value");
        }
        let s = SearchPath::new(Some(&r), &r.join("tasks"), None);
        let files = s
            .matching_files("vars", "exporters/{{ type }}/vars.yml")
            .expect("test value");
        let canon = |p: &str| r.join(p);
        assert_eq!(
            files,
            vec![
                canon("vars/exporters/node/vars.yml"),
                canon("vars/exporters/redis/vars.yml")
            ]
        );
        let missing = s
            .find("vars", "exporters/none/vars.yml")
            .expect_err("missing");
        assert!(
            missing.starts_with(
                "Could not find or access 'exporters/none/vars.yml'\nSearched in:\n\t"
            ),
            "{missing}"
        );
    }
}
