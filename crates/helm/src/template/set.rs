//! A set of named templates, as Go's `*template.Template` common structure holds them.
//!
//! Files are added in Helm's order; a later `define` of a name replaces an earlier one
//! (Go's `associate`), unless the later body is empty. `tpl` parses its text into a
//! clone of the set: [`Layer`] stacks those short-lived additions over the shared base
//! without copying it.
use std::rc::Rc;
use std::sync::Arc;

use super::exec::FastMap;
use super::node::Tree;
use super::parse::{parse, ParseError};
use crate::value::Str;

/// The templates of a chart, parsed once and shared by every render (`Send + Sync`).
#[derive(Default, Debug)]
pub struct TemplateSet {
    trees: FastMap<Str, Arc<Tree>>,
}

impl TemplateSet {
    pub fn new() -> TemplateSet {
        TemplateSet::default()
    }

    /// Parses `text` as the template `name` (a file name; also used in errors).
    pub fn add(&mut self, name: &str, text: &str) -> Result<(), ParseError> {
        for tree in parse(name, name, text)? {
            associate(&mut self.trees, tree);
        }
        Ok(())
    }

    /// Adds already-parsed trees (one file's), replacing earlier definitions.
    pub fn add_trees(&mut self, trees: &[Arc<Tree>]) {
        for t in trees {
            if t.is_empty() && self.trees.contains_key(&t.name) {
                continue;
            }
            self.trees.insert(t.name.clone(), t.clone());
        }
    }

    pub fn get(&self, name: &str) -> Option<&Arc<Tree>> {
        self.trees.get(name)
    }

    pub fn len(&self) -> usize {
        self.trees.len()
    }

    pub fn is_empty(&self) -> bool {
        self.trees.is_empty()
    }
}

/// Go's `associate`: keep an existing template rather than replace it with an empty one.
fn associate(trees: &mut FastMap<Str, Arc<Tree>>, tree: Tree) {
    if tree.is_empty() {
        if let Some(old) = trees.get(&tree.name) {
            let _ = old;
            return;
        }
    }
    trees.insert(tree.name.clone(), Arc::new(tree));
}

/// The set a template executes in: the chart's base set plus the `define`s of the `tpl`
/// calls that enclose it.
///
/// Go's `tpl` clones the whole set at each call; a layer copies only what the enclosing
/// `tpl`s added (usually just their main template), so a lookup is one probe and a `tpl`
/// costs what Go's clone costs or less, however deep the calls nest. A chain of parent
/// layers instead made each lookup, and each drop, walk the whole nesting: time grew with
/// the square of the depth, and the recursive walk overflowed the stack.
pub struct Layer {
    base: Arc<TemplateSet>,
    /// What the enclosing `tpl` texts defined, innermost first in precedence.
    own: FastMap<Str, Arc<Tree>>,
}

impl Layer {
    pub fn base(base: Arc<TemplateSet>) -> Rc<Layer> {
        Rc::new(Layer {
            base,
            own: FastMap::default(),
        })
    }

    /// A clone of `parent` with `trees` added (what `tpl` builds). As in Go's
    /// `associate`, an empty tree does not replace a defined one of the same name.
    pub fn over(parent: &Rc<Layer>, trees: &[Arc<Tree>]) -> Rc<Layer> {
        let mut own = parent.own.clone();
        for t in trees {
            if t.is_empty() && parent.lookup(&t.name).is_some() {
                continue;
            }
            own.insert(t.name.clone(), t.clone());
        }
        Rc::new(Layer {
            base: parent.base.clone(),
            own,
        })
    }

    pub fn lookup(&self, name: &str) -> Option<Arc<Tree>> {
        match self.own.get(name) {
            Some(t) => Some(t.clone()),
            None => self.base.get(name).cloned(),
        }
    }
}
