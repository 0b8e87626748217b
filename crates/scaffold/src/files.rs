//! A project as a map of relative paths to bytes, and the one writer: everything is written
//! into a hidden staging directory inside the target first, and only once every file is there
//! are they renamed into place — a failure before that (a chart that does not load, a
//! derivation error, a full disk) leaves the project as it was. The renames themselves (same
//! filesystem, each atomic) are the only step that could stop half-way.
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::Error;

/// Files (path relative to the project, `/`-separated → contents) and empty directories.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Tree {
    pub files: BTreeMap<String, Vec<u8>>,
    pub dirs: Vec<String>,
}

impl Tree {
    pub fn put(&mut self, path: impl Into<String>, text: impl Into<Vec<u8>>) {
        self.files.insert(path.into(), text.into());
    }

    pub fn extend(&mut self, other: Tree) {
        self.files.extend(other.files);
        self.dirs.extend(other.dirs);
    }
}

/// The staging directory; removed on drop (after a commit it is empty).
pub struct Stage {
    root: PathBuf,
    dir: PathBuf,
}

impl Stage {
    /// A fresh staging directory inside `root` (the same filesystem, so renames are atomic).
    pub fn new(root: &Path) -> Result<Stage, Error> {
        let dir = root.join(format!(".bosun-scaffold-{}", std::process::id()));
        if dir.exists() {
            std::fs::remove_dir_all(&dir).map_err(Error::io(&dir))?;
        }
        std::fs::create_dir_all(&dir).map_err(Error::io(&dir))?;
        Ok(Stage {
            root: root.to_path_buf(),
            dir,
        })
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Copies `rel` (a file or a directory) from the project into the stage, when it exists:
    /// what the derivation reads besides the new files.
    pub fn copy_in(&self, rel: &str) -> Result<(), Error> {
        copy(&self.root.join(rel), &self.dir.join(rel))
    }

    /// Writes the tree into the stage.
    pub fn write(&self, tree: &Tree) -> Result<(), Error> {
        for d in &tree.dirs {
            let p = self.dir.join(d);
            std::fs::create_dir_all(&p).map_err(Error::io(&p))?;
        }
        for (rel, data) in &tree.files {
            let p = self.dir.join(rel);
            if let Some(parent) = p.parent() {
                std::fs::create_dir_all(parent).map_err(Error::io(parent))?;
            }
            std::fs::write(&p, data).map_err(Error::io(&p))?;
        }
        Ok(())
    }

    /// Moves the tree's files and directories from the stage into the project.
    pub fn commit(self, tree: &Tree) -> Result<(), Error> {
        for d in &tree.dirs {
            let p = self.root.join(d);
            std::fs::create_dir_all(&p).map_err(Error::io(&p))?;
        }
        for rel in tree.files.keys() {
            let to = self.root.join(rel);
            if let Some(parent) = to.parent() {
                std::fs::create_dir_all(parent).map_err(Error::io(parent))?;
            }
            let from = self.dir.join(rel);
            std::fs::rename(&from, &to).map_err(Error::io(&to))?;
        }
        Ok(())
    }
}

impl Drop for Stage {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn copy(from: &Path, to: &Path) -> Result<(), Error> {
    let Ok(md) = std::fs::metadata(from) else {
        return Ok(());
    };
    if md.is_dir() {
        std::fs::create_dir_all(to).map_err(Error::io(to))?;
        for e in std::fs::read_dir(from).map_err(Error::io(from))? {
            let e = e.map_err(Error::io(from))?;
            copy(&e.path(), &to.join(e.file_name()))?;
        }
    } else {
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent).map_err(Error::io(parent))?;
        }
        std::fs::copy(from, to).map_err(Error::io(from))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_lands_before_the_commit_and_the_stage_goes_away() {
        let dir = tempfile::tempdir().expect("dir");
        let mut tree = Tree::default();
        tree.put("a/b.txt", "b");
        tree.dirs.push("empty".into());
        let stage = Stage::new(dir.path()).expect("stage");
        stage.write(&tree).expect("write");
        assert!(!dir.path().join("a/b.txt").exists(), "staged only");
        drop(stage);
        let left: Vec<_> = std::fs::read_dir(dir.path()).expect("ls").collect();
        assert!(left.is_empty(), "an abandoned stage leaves nothing");

        let stage = Stage::new(dir.path()).expect("stage");
        stage.write(&tree).expect("write");
        stage.commit(&tree).expect("commit");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("a/b.txt")).expect("b"),
            "b"
        );
        assert!(dir.path().join("empty").is_dir());
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .expect("ls")
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        assert!(names.iter().all(|n| !n.starts_with(".bosun")), "{names:?}");
    }
}
