//! Finding the error PyYAML raises first. SafeConstructor builds collections with
//! generators: a mapping's scalars are built when the mapping is, its nested collections
//! later, round by round (breadth first), and each node once (aliases reuse it). Running the
//! checks in that order makes a document with several problems report the same one.

use std::collections::{HashSet, VecDeque};

use crate::compose::RawKind;
use crate::Error;

use super::construct::{marked, Constructor};
use super::resolve::{MAP, OMAP, PAIRS, SEQ, SET};

impl Constructor<'_> {
    /// Runs PyYAML's constructors in PyYAML's order, only to find the error Python would
    /// raise first. SafeConstructor builds collections with generators: a mapping's scalars
    /// are built when the mapping is, its nested collections later, round by round (breadth
    /// first), and each node once (aliases reuse it).
    pub(super) fn check_in_python_order(&mut self) -> Result<(), Error> {
        let mut done: HashSet<usize> = HashSet::new();
        let mut pending: VecDeque<usize> = VecDeque::new();
        self.check_object(self.doc.root, &mut done, &mut pending)?;
        while let Some(idx) = pending.pop_front() {
            self.check_generator(idx, &mut done, &mut pending)?;
        }
        Ok(())
    }

    pub(super) fn check_object(
        &mut self,
        idx: usize,
        done: &mut HashSet<usize>,
        pending: &mut VecDeque<usize>,
    ) -> Result<(), Error> {
        let idx = self.resolve_alias(idx);
        if !done.insert(idx) {
            return Ok(());
        }
        let tag = self.tag(idx);
        match tag.as_str() {
            SEQ | MAP | SET | OMAP | PAIRS => pending.push_back(idx),
            _ => {
                self.construct_tagged(idx, &tag)?;
            }
        }
        Ok(())
    }

    pub(super) fn check_generator(
        &mut self,
        idx: usize,
        done: &mut HashSet<usize>,
        pending: &mut VecDeque<usize>,
    ) -> Result<(), Error> {
        let tag = self.tag(idx);
        match tag.as_str() {
            SEQ => {
                let RawKind::Seq { items, .. } = &self.doc.nodes[idx].kind else {
                    return self.construct_sequence(idx).map(|_| ());
                };
                for &item in items {
                    self.check_object(item, done, pending)?;
                }
            }
            OMAP | PAIRS => {
                // Validates the shape without building; keys and values are built in order.
                let RawKind::Seq { items, .. } = &self.doc.nodes[idx].kind else {
                    return self.construct_pairs(idx, tag == OMAP).map(|_| ());
                };
                for &item in items {
                    let item = self.resolve_alias(item);
                    match &self.doc.nodes[item].kind {
                        RawKind::Map { pairs, .. } if pairs.len() == 1 => {
                            let (k, v) = pairs[0];
                            self.check_object(k, done, pending)?;
                            self.check_object(v, done, pending)?;
                        }
                        _ => return self.construct_pairs(idx, tag == OMAP).map(|_| ()),
                    }
                }
            }
            _ => {
                if !matches!(self.doc.nodes[idx].kind, RawKind::Map { .. }) {
                    return self.construct_mapping(idx).map(|_| ());
                }
                for (k, v) in self.flatten(idx)? {
                    self.check_object(k, done, pending)?;
                    let key = self.resolve_alias(k);
                    if matches!(self.tag(key).as_str(), SEQ | MAP | SET | OMAP | PAIRS) {
                        return Err(marked(
                            Some("while constructing a mapping"),
                            Some(self.mark(idx)),
                            "found unhashable key",
                            self.mark(key),
                        ));
                    }
                    self.check_object(v, done, pending)?;
                }
            }
        }
        Ok(())
    }
}
