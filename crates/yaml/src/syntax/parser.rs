//! The parser: tokens to events, libyaml's LL(1) state machine for the YAML 1.1 grammar.

use super::scanner::{ScanResult, Scanner};
use super::{Dialect, Pos, ScalarStyle, Stage, SyntaxError, Token, TokenKind};

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum EventKind {
    StreamStart,
    StreamEnd,
    DocumentStart {
        implicit: bool,
    },
    DocumentEnd {
        implicit: bool,
    },
    Alias {
        anchor: String,
    },
    Scalar {
        anchor: Option<String>,
        tag: Option<String>,
        value: String,
        /// The scalar may be resolved from its plain form (no tag, plain style, or the `!` tag).
        plain_implicit: bool,
        style: ScalarStyle,
    },
    SequenceStart {
        anchor: Option<String>,
        tag: Option<String>,
        flow: bool,
    },
    SequenceEnd,
    MappingStart {
        anchor: Option<String>,
        tag: Option<String>,
        flow: bool,
    },
    MappingEnd,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Event {
    pub kind: EventKind,
    pub start: Pos,
    pub end: Pos,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum State {
    StreamStart,
    ImplicitDocumentStart,
    DocumentStart,
    DocumentContent,
    DocumentEnd,
    BlockNode,
    BlockSequenceFirstEntry,
    BlockSequenceEntry,
    IndentlessSequenceEntry,
    BlockMappingFirstKey,
    BlockMappingKey,
    BlockMappingValue,
    FlowSequenceFirstEntry,
    FlowSequenceEntry,
    FlowSequenceEntryMappingKey,
    FlowSequenceEntryMappingValue,
    FlowSequenceEntryMappingEnd,
    FlowMappingFirstKey,
    FlowMappingKey,
    FlowMappingValue,
    FlowMappingEmptyValue,
    End,
}

pub(crate) struct Parser {
    pub(super) scanner: Scanner,
    pub(super) state: State,
    pub(super) states: Vec<State>,
    pub(super) marks: Vec<Pos>,
    pub(super) tag_directives: Vec<(String, String)>,
    pub(super) dialect: Dialect,
}

const DEFAULT_TAGS: [(&str, &str); 2] = [("!", "!"), ("!!", "tag:yaml.org,2002:")];

impl Parser {
    pub(crate) fn new(input: &str, dialect: Dialect) -> Parser {
        Parser {
            scanner: Scanner::new(input, dialect),
            state: State::StreamStart,
            states: Vec::new(),
            marks: Vec::new(),
            tag_directives: Vec::new(),
            dialect,
        }
    }

    /// The next event, or `None` once the stream has ended.
    pub(crate) fn next_event(&mut self) -> ScanResult<Option<Event>> {
        if self.state == State::End {
            return Ok(None);
        }
        self.state_machine().map(Some)
    }

    pub(super) fn peek(&mut self) -> ScanResult<Token> {
        match self.scanner.peek()? {
            Some(t) => Ok(t.clone()),
            // Unreachable in practice: the parser stops at STREAM-END.
            None => Ok(Token {
                kind: TokenKind::StreamEnd,
                start: Pos::default(),
                end: Pos::default(),
            }),
        }
    }

    pub(super) fn skip(&mut self) -> ScanResult<()> {
        self.scanner.next_token().map(|_| ())
    }

    pub(super) fn pop_state(&mut self) {
        self.state = self.states.pop().unwrap_or(State::End);
    }

    pub(super) fn error(&self, problem: &str, problem_mark: Pos) -> SyntaxError {
        SyntaxError {
            stage: Stage::Parser,
            context: None,
            context_mark: None,
            problem: problem.to_string(),
            problem_mark,
            value: None,
        }
    }

    pub(super) fn error_context(
        &self,
        context: &'static str,
        context_mark: Pos,
        problem: &str,
        problem_mark: Pos,
    ) -> SyntaxError {
        SyntaxError {
            stage: Stage::Parser,
            context: Some(context),
            context_mark: Some(context_mark),
            problem: problem.to_string(),
            problem_mark,
            value: None,
        }
    }

    pub(super) fn state_machine(&mut self) -> ScanResult<Event> {
        match self.state {
            State::StreamStart => self.parse_stream_start(),
            State::ImplicitDocumentStart => self.parse_document_start(true),
            State::DocumentStart => self.parse_document_start(false),
            State::DocumentContent => self.parse_document_content(),
            State::DocumentEnd => self.parse_document_end(),
            State::BlockNode => self.parse_node(true, false),
            State::BlockSequenceFirstEntry => self.parse_block_sequence_entry(true),
            State::BlockSequenceEntry => self.parse_block_sequence_entry(false),
            State::IndentlessSequenceEntry => self.parse_indentless_sequence_entry(),
            State::BlockMappingFirstKey => self.parse_block_mapping_key(true),
            State::BlockMappingKey => self.parse_block_mapping_key(false),
            State::BlockMappingValue => self.parse_block_mapping_value(),
            State::FlowSequenceFirstEntry => self.parse_flow_sequence_entry(true),
            State::FlowSequenceEntry => self.parse_flow_sequence_entry(false),
            State::FlowSequenceEntryMappingKey => self.parse_flow_sequence_entry_mapping_key(),
            State::FlowSequenceEntryMappingValue => self.parse_flow_sequence_entry_mapping_value(),
            State::FlowSequenceEntryMappingEnd => self.parse_flow_sequence_entry_mapping_end(),
            State::FlowMappingFirstKey => self.parse_flow_mapping_key(true),
            State::FlowMappingKey => self.parse_flow_mapping_key(false),
            State::FlowMappingValue => self.parse_flow_mapping_value(false),
            State::FlowMappingEmptyValue => self.parse_flow_mapping_value(true),
            State::End => Err(self.error("no events after the end of the stream", Pos::default())),
        }
    }

    pub(super) fn parse_stream_start(&mut self) -> ScanResult<Event> {
        let token = self.peek()?;
        if token.kind != TokenKind::StreamStart {
            return Err(self.error("did not find expected <stream-start>", token.start));
        }
        self.state = State::ImplicitDocumentStart;
        self.skip()?;
        Ok(Event {
            kind: EventKind::StreamStart,
            start: token.start,
            end: token.end,
        })
    }

    pub(super) fn parse_document_start(&mut self, implicit: bool) -> ScanResult<Event> {
        let mut token = self.peek()?;
        if !implicit {
            while token.kind == TokenKind::DocumentEnd {
                self.skip()?;
                token = self.peek()?;
            }
        }
        let starts_explicitly = matches!(
            token.kind,
            TokenKind::VersionDirective(..)
                | TokenKind::TagDirective { .. }
                | TokenKind::DocumentStart
                | TokenKind::StreamEnd
        );
        if implicit && !starts_explicitly {
            self.process_directives()?;
            self.states.push(State::DocumentEnd);
            self.state = State::BlockNode;
            return Ok(Event {
                kind: EventKind::DocumentStart { implicit: true },
                start: token.start,
                end: token.end,
            });
        }
        if token.kind == TokenKind::StreamEnd {
            self.state = State::End;
            self.skip()?;
            return Ok(Event {
                kind: EventKind::StreamEnd,
                start: token.start,
                end: token.end,
            });
        }
        let start = token.start;
        self.process_directives()?;
        let token = self.peek()?;
        if token.kind != TokenKind::DocumentStart {
            return Err(self.error("did not find expected <document start>", token.start));
        }
        self.states.push(State::DocumentEnd);
        self.state = State::DocumentContent;
        self.skip()?;
        Ok(Event {
            kind: EventKind::DocumentStart { implicit: false },
            start,
            end: token.end,
        })
    }

    pub(super) fn process_directives(&mut self) -> ScanResult<()> {
        let mut seen_version = false;
        let mut tags: Vec<(String, String)> = Vec::new();
        loop {
            let token = self.peek()?;
            match token.kind {
                TokenKind::VersionDirective(major, minor) => {
                    if seen_version {
                        return Err(self.error("found duplicate %YAML directive", token.start));
                    }
                    let compatible = match self.dialect {
                        Dialect::GoYamlV2 => major == 1 && minor == 1,
                        Dialect::LibYaml => major == 1 && (minor == 1 || minor == 2),
                    };
                    if !compatible {
                        return Err(self.error("found incompatible YAML document", token.start));
                    }
                    seen_version = true;
                }
                TokenKind::TagDirective { handle, prefix } => {
                    if tags.iter().any(|(h, _)| *h == handle) {
                        return Err(self.error("found duplicate %TAG directive", token.start));
                    }
                    tags.push((handle, prefix));
                }
                _ => break,
            }
            self.skip()?;
        }
        for (handle, prefix) in DEFAULT_TAGS {
            if !tags.iter().any(|(h, _)| h == handle) {
                tags.push((handle.to_string(), prefix.to_string()));
            }
        }
        self.tag_directives = tags;
        Ok(())
    }

    pub(super) fn parse_document_content(&mut self) -> ScanResult<Event> {
        let token = self.peek()?;
        if matches!(
            token.kind,
            TokenKind::VersionDirective(..)
                | TokenKind::TagDirective { .. }
                | TokenKind::DocumentStart
                | TokenKind::DocumentEnd
                | TokenKind::StreamEnd
        ) {
            self.pop_state();
            return Ok(empty_scalar(token.start));
        }
        self.parse_node(true, false)
    }

    pub(super) fn parse_document_end(&mut self) -> ScanResult<Event> {
        let token = self.peek()?;
        let start = token.start;
        let mut end = token.start;
        let mut implicit = true;
        if token.kind == TokenKind::DocumentEnd {
            end = token.end;
            self.skip()?;
            implicit = false;
        }
        self.tag_directives.clear();
        self.state = State::DocumentStart;
        Ok(Event {
            kind: EventKind::DocumentEnd { implicit },
            start,
            end,
        })
    }

    pub(super) fn parse_node(
        &mut self,
        block: bool,
        indentless_sequence: bool,
    ) -> ScanResult<Event> {
        let mut token = self.peek()?;
        if let TokenKind::Alias(anchor) = token.kind {
            self.pop_state();
            self.skip()?;
            return Ok(Event {
                kind: EventKind::Alias { anchor },
                start: token.start,
                end: token.end,
            });
        }
        let start = token.start;
        let mut end = token.start;
        let mut anchor = None;
        let mut tag_parts: Option<(String, String, Pos)> = None;
        if let TokenKind::Anchor(a) = &token.kind {
            anchor = Some(a.clone());
            end = token.end;
            self.skip()?;
            token = self.peek()?;
            if let TokenKind::Tag { handle, suffix } = &token.kind {
                tag_parts = Some((handle.clone(), suffix.clone(), token.start));
                end = token.end;
                self.skip()?;
                token = self.peek()?;
            }
        } else if let TokenKind::Tag { handle, suffix } = &token.kind {
            tag_parts = Some((handle.clone(), suffix.clone(), token.start));
            end = token.end;
            self.skip()?;
            token = self.peek()?;
            if let TokenKind::Anchor(a) = &token.kind {
                anchor = Some(a.clone());
                end = token.end;
                self.skip()?;
                token = self.peek()?;
            }
        }
        let tag = match tag_parts {
            None => None,
            Some((handle, suffix, _)) if handle.is_empty() => Some(suffix),
            Some((handle, suffix, tag_mark)) => {
                match self.tag_directives.iter().find(|(h, _)| *h == handle) {
                    Some((_, prefix)) => Some(format!("{prefix}{suffix}")),
                    None => {
                        return Err(self.error_context(
                            "while parsing a node",
                            start,
                            "found undefined tag handle",
                            tag_mark,
                        ))
                    }
                }
            }
        };
        if indentless_sequence && token.kind == TokenKind::BlockEntry {
            self.state = State::IndentlessSequenceEntry;
            return Ok(Event {
                kind: EventKind::SequenceStart {
                    anchor,
                    tag,
                    flow: false,
                },
                start,
                end: token.end,
            });
        }
        match token.kind {
            TokenKind::Scalar { value, style } => {
                let plain_implicit =
                    (tag.is_none() && style == ScalarStyle::Plain) || tag.as_deref() == Some("!");
                self.pop_state();
                self.skip()?;
                return Ok(Event {
                    kind: EventKind::Scalar {
                        anchor,
                        tag,
                        value,
                        plain_implicit,
                        style,
                    },
                    start,
                    end: token.end,
                });
            }
            TokenKind::FlowSequenceStart => {
                self.state = State::FlowSequenceFirstEntry;
                return Ok(Event {
                    kind: EventKind::SequenceStart {
                        anchor,
                        tag,
                        flow: true,
                    },
                    start,
                    end: token.end,
                });
            }
            TokenKind::FlowMappingStart => {
                self.state = State::FlowMappingFirstKey;
                return Ok(Event {
                    kind: EventKind::MappingStart {
                        anchor,
                        tag,
                        flow: true,
                    },
                    start,
                    end: token.end,
                });
            }
            TokenKind::BlockSequenceStart if block => {
                self.state = State::BlockSequenceFirstEntry;
                return Ok(Event {
                    kind: EventKind::SequenceStart {
                        anchor,
                        tag,
                        flow: false,
                    },
                    start,
                    end: token.end,
                });
            }
            TokenKind::BlockMappingStart if block => {
                self.state = State::BlockMappingFirstKey;
                return Ok(Event {
                    kind: EventKind::MappingStart {
                        anchor,
                        tag,
                        flow: false,
                    },
                    start,
                    end: token.end,
                });
            }
            _ => {}
        }
        if anchor.is_some() || tag.is_some() {
            self.pop_state();
            let plain_implicit = tag.is_none();
            return Ok(Event {
                kind: EventKind::Scalar {
                    anchor,
                    tag,
                    value: String::new(),
                    plain_implicit,
                    style: ScalarStyle::Plain,
                },
                start,
                end,
            });
        }
        let context = if block {
            "while parsing a block node"
        } else {
            "while parsing a flow node"
        };
        Err(self.error_context(
            context,
            start,
            "did not find expected node content",
            token.start,
        ))
    }
}

pub(super) fn empty_scalar(mark: Pos) -> Event {
    Event {
        kind: EventKind::Scalar {
            anchor: None,
            tag: None,
            value: String::new(),
            plain_implicit: true,
            style: ScalarStyle::Plain,
        },
        start: mark,
        end: mark,
    }
}
