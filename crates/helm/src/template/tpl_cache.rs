//! Parsed `tpl` texts, kept across the renders of one chart.
//!
//! Helm parses a `tpl` text at every call. The texts usually come from the chart's values
//! (annotations, labels, a `common.tplvalues.render` of anything), so the same few texts
//! come back at every render of a chart: a loaded chart keeps their parse, as it keeps
//! its templates'. Texts from user values vary from release to release, so the cache is
//! bounded: it is emptied when full (by count or by bytes of text, which bounds the trees
//! too), and long texts are not kept.
use std::sync::{Arc, Mutex};

use super::exec::FastMap;
use super::node::Tree;

/// A text's trees (its `define`s included), or the parse error Go reports.
pub type TplTrees = Result<Arc<[Arc<Tree>]>, String>;

/// Texts kept before the cache is emptied.
const MAX_ENTRIES: usize = 1024;
/// Bytes of text kept before the cache is emptied.
const MAX_TOTAL_BYTES: usize = 256 << 10;
/// Longer texts are parsed at each call.
const MAX_TEXT_BYTES: usize = 4 << 10;

#[derive(Default)]
pub struct TplCache {
    parsed: Mutex<Parsed>,
}

#[derive(Default)]
struct Parsed {
    trees: FastMap<String, TplTrees>,
    bytes: usize,
}

impl TplCache {
    pub fn get(&self, text: &str) -> Option<TplTrees> {
        self.parsed.lock().ok()?.trees.get(text).cloned()
    }

    pub fn insert(&self, text: &str, trees: TplTrees) {
        if text.len() > MAX_TEXT_BYTES {
            return;
        }
        if let Ok(mut parsed) = self.parsed.lock() {
            if parsed.trees.len() >= MAX_ENTRIES || parsed.bytes + text.len() > MAX_TOTAL_BYTES {
                *parsed = Parsed::default();
            }
            if parsed.trees.insert(text.to_string(), trees).is_none() {
                parsed.bytes += text.len();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(c: &TplCache) -> (usize, usize) {
        c.parsed
            .lock()
            .map(|p| (p.trees.len(), p.bytes))
            .unwrap_or((usize::MAX, usize::MAX))
    }

    #[test]
    fn bounded_by_count_and_bytes() {
        let c = TplCache::default();
        for i in 0..MAX_ENTRIES + 10 {
            c.insert(&format!("t{i}"), Err(String::new()));
            assert!(held(&c).0 <= MAX_ENTRIES);
        }
        assert!(c.get(&format!("t{}", MAX_ENTRIES + 9)).is_some());
        let long = "x".repeat(MAX_TEXT_BYTES);
        for i in 0..2 * MAX_TOTAL_BYTES / MAX_TEXT_BYTES {
            c.insert(
                &format!("{long:.*}{i}", MAX_TEXT_BYTES - 8),
                Err(String::new()),
            );
            assert!(held(&c).1 <= MAX_TOTAL_BYTES);
        }
        c.insert(&"y".repeat(MAX_TEXT_BYTES + 1), Err(String::new()));
        assert!(c.get(&"y".repeat(MAX_TEXT_BYTES + 1)).is_none());
    }
}
