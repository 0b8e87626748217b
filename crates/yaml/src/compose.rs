//! Events to a node graph: collections and scalars in an arena, aliases as references to the
//! anchored node. Built iteratively, so nesting depth costs no stack; the depth limit is
//! enforced here, before any recursive construction runs.
//!
//! An anchor is registered when its node *starts*, before its children (both engines do
//! this), so `&a [*a]` refers to itself; constructors refuse such cycles.

use std::collections::HashMap;

use crate::syntax::parser::{Event, EventKind, Parser};
use crate::syntax::{Pos, SyntaxError};
use crate::MAX_DEPTH;

#[derive(Debug)]
pub(crate) enum RawKind {
    Scalar {
        value: String,
        tag: Option<String>,
        plain_implicit: bool,
    },
    Seq {
        tag: Option<String>,
        items: Vec<usize>,
    },
    Map {
        tag: Option<String>,
        pairs: Vec<(usize, usize)>,
    },
    Alias {
        anchor: String,
        target: usize,
    },
}

#[derive(Debug)]
pub(crate) struct RawNode {
    pub kind: RawKind,
    pub start: Pos,
}

/// One composed document; `root` indexes `nodes`.
#[derive(Debug)]
pub(crate) struct RawDoc {
    pub nodes: Vec<RawNode>,
    pub root: usize,
}

/// What stopped composition.
#[derive(Debug)]
pub(crate) enum ComposeError {
    Syntax(SyntaxError),
    UndefinedAlias { anchor: String, at: Pos },
    DuplicateAnchor { first: Pos, second: Pos },
    TooDeep { at: Pos },
}

impl From<SyntaxError> for ComposeError {
    fn from(e: SyntaxError) -> Self {
        ComposeError::Syntax(e)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AnchorRule {
    /// go-yaml: a later anchor of the same name replaces the earlier one.
    Replace,
    /// PyYAML: a repeated anchor is an error.
    Refuse,
}

pub(crate) struct Composer {
    parser: Parser,
    rule: AnchorRule,
    started: bool,
}

impl Composer {
    pub(crate) fn new(parser: Parser, rule: AnchorRule) -> Composer {
        Composer {
            parser,
            rule,
            started: false,
        }
    }

    fn next(&mut self) -> Result<Event, ComposeError> {
        match self.parser.next_event()? {
            Some(e) => Ok(e),
            None => Ok(Event {
                kind: EventKind::StreamEnd,
                start: Pos::default(),
                end: Pos::default(),
            }),
        }
    }

    /// The next document, or `None` at the end of the stream. The document's end event is
    /// consumed too, which (as in both engines) scans the token that follows it.
    pub(crate) fn next_document(&mut self) -> Result<Option<RawDoc>, ComposeError> {
        if !self.started {
            self.started = true;
            self.next()?; // STREAM-START
        }
        let event = self.next()?;
        match event.kind {
            EventKind::DocumentStart { .. } => {}
            _ => return Ok(None),
        }
        let doc = self.compose_node()?;
        self.next()?; // DOCUMENT-END
        Ok(Some(doc))
    }

    fn compose_node(&mut self) -> Result<RawDoc, ComposeError> {
        let mut nodes: Vec<RawNode> = Vec::new();
        let mut anchors: HashMap<String, (usize, Pos)> = HashMap::new();
        // Open collections: (node index, pending mapping key).
        let mut stack: Vec<(usize, Option<usize>)> = Vec::new();
        loop {
            let event = self.next()?;
            let start = event.start;
            let (index, anchor, opens) = match event.kind {
                EventKind::Alias { anchor } => {
                    let target = match anchors.get(&anchor) {
                        Some(&(t, _)) => t,
                        None => return Err(ComposeError::UndefinedAlias { anchor, at: start }),
                    };
                    nodes.push(RawNode {
                        kind: RawKind::Alias { anchor, target },
                        start,
                    });
                    (nodes.len() - 1, None, false)
                }
                EventKind::Scalar {
                    anchor,
                    tag,
                    value,
                    plain_implicit,
                    ..
                } => {
                    nodes.push(RawNode {
                        kind: RawKind::Scalar {
                            value,
                            tag,
                            plain_implicit,
                        },
                        start,
                    });
                    (nodes.len() - 1, anchor, false)
                }
                EventKind::SequenceStart { anchor, tag, .. } => {
                    nodes.push(RawNode {
                        kind: RawKind::Seq {
                            tag,
                            items: Vec::new(),
                        },
                        start,
                    });
                    (nodes.len() - 1, anchor, true)
                }
                EventKind::MappingStart { anchor, tag, .. } => {
                    nodes.push(RawNode {
                        kind: RawKind::Map {
                            tag,
                            pairs: Vec::new(),
                        },
                        start,
                    });
                    (nodes.len() - 1, anchor, true)
                }
                EventKind::SequenceEnd | EventKind::MappingEnd => {
                    let Some((done, _)) = stack.pop() else {
                        return Err(ComposeError::TooDeep { at: start });
                    };
                    match stack.last_mut() {
                        None => return Ok(RawDoc { nodes, root: done }),
                        Some(parent) => {
                            attach(&mut nodes, parent, done);
                            continue;
                        }
                    }
                }
                // The parser never yields these inside a document.
                _ => return Err(ComposeError::TooDeep { at: start }),
            };
            if let Some(name) = anchor {
                if let Some(&(_, first)) = anchors.get(&name) {
                    if self.rule == AnchorRule::Refuse {
                        return Err(ComposeError::DuplicateAnchor {
                            first,
                            second: start,
                        });
                    }
                }
                anchors.insert(name, (index, start));
            }
            if opens {
                if stack.len() >= MAX_DEPTH {
                    return Err(ComposeError::TooDeep { at: start });
                }
                stack.push((index, None));
                continue;
            }
            match stack.last_mut() {
                None => return Ok(RawDoc { nodes, root: index }),
                Some(parent) => attach(&mut nodes, parent, index),
            }
        }
    }
}

fn attach(nodes: &mut [RawNode], parent: &mut (usize, Option<usize>), child: usize) {
    match &mut nodes[parent.0].kind {
        RawKind::Seq { items, .. } => items.push(child),
        RawKind::Map { pairs, .. } => match parent.1.take() {
            None => parent.1 = Some(child),
            Some(key) => pairs.push((key, child)),
        },
        _ => {}
    }
}
