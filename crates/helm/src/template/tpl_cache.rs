//! Parsed `tpl` texts, kept across the renders of one chart.
//!
//! Helm parses a `tpl` text at every call. The texts usually come from the chart's values
//! (annotations, labels, a `common.tplvalues.render` of anything), so the same few texts
//! come back at every render of a chart: a loaded chart keeps their parse, as it keeps
//! its templates'. Texts from user values vary from release to release, so the cache is
//! bounded: it is emptied when full, and long texts are not kept.
use std::sync::{Arc, Mutex};

use super::exec::FastMap;
use super::node::Tree;

/// A text's trees (its `define`s included), or the parse error Go reports.
pub type TplTrees = Result<Arc<[Arc<Tree>]>, String>;

/// Texts kept before the cache is emptied.
const MAX_ENTRIES: usize = 1024;
/// Longer texts are parsed at each call.
const MAX_TEXT_BYTES: usize = 16 << 10;

#[derive(Default)]
pub struct TplCache {
    parsed: Mutex<FastMap<String, TplTrees>>,
}

impl TplCache {
    pub fn get(&self, text: &str) -> Option<TplTrees> {
        self.parsed.lock().ok()?.get(text).cloned()
    }

    pub fn insert(&self, text: &str, trees: TplTrees) {
        if text.len() > MAX_TEXT_BYTES {
            return;
        }
        if let Ok(mut parsed) = self.parsed.lock() {
            if parsed.len() >= MAX_ENTRIES {
                parsed.clear();
            }
            parsed.insert(text.to_string(), trees);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded() {
        let c = TplCache::default();
        for i in 0..MAX_ENTRIES + 10 {
            c.insert(&format!("t{i}"), Err(String::new()));
        }
        assert!(c.parsed.lock().map(|p| p.len()).unwrap_or(usize::MAX) <= MAX_ENTRIES);
        assert!(c.get(&format!("t{}", MAX_ENTRIES + 9)).is_some());
        c.insert(&"x".repeat(MAX_TEXT_BYTES + 1), Err(String::new()));
        assert!(c.get(&"x".repeat(MAX_TEXT_BYTES + 1)).is_none());
    }
}
