//! The parser states inside collections: block and indentless sequences, block mappings,
//! flow sequences (with their single-pair mappings) and flow mappings.

use super::parser::{empty_scalar, Event, EventKind, Parser, State};
use super::scanner::ScanResult;
use super::TokenKind;

impl Parser {
    pub(super) fn parse_block_sequence_entry(&mut self, first: bool) -> ScanResult<Event> {
        if first {
            let token = self.peek()?;
            self.marks.push(token.start);
            self.skip()?;
        }
        let token = self.peek()?;
        match token.kind {
            TokenKind::BlockEntry => {
                let mark = token.end;
                self.skip()?;
                let token = self.peek()?;
                if !matches!(token.kind, TokenKind::BlockEntry | TokenKind::BlockEnd) {
                    self.states.push(State::BlockSequenceEntry);
                    return self.parse_node(true, false);
                }
                self.state = State::BlockSequenceEntry;
                Ok(empty_scalar(mark))
            }
            TokenKind::BlockEnd => {
                self.pop_state();
                self.marks.pop();
                self.skip()?;
                Ok(Event {
                    kind: EventKind::SequenceEnd,
                    start: token.start,
                    end: token.end,
                })
            }
            _ => {
                let context_mark = self.marks.pop().unwrap_or_default();
                Err(self.error_context(
                    "while parsing a block collection",
                    context_mark,
                    "did not find expected '-' indicator",
                    token.start,
                ))
            }
        }
    }

    pub(super) fn parse_indentless_sequence_entry(&mut self) -> ScanResult<Event> {
        let token = self.peek()?;
        if token.kind == TokenKind::BlockEntry {
            let mark = token.end;
            self.skip()?;
            let token = self.peek()?;
            if !matches!(
                token.kind,
                TokenKind::BlockEntry | TokenKind::Key | TokenKind::Value | TokenKind::BlockEnd
            ) {
                self.states.push(State::IndentlessSequenceEntry);
                return self.parse_node(true, false);
            }
            self.state = State::IndentlessSequenceEntry;
            return Ok(empty_scalar(mark));
        }
        self.pop_state();
        Ok(Event {
            kind: EventKind::SequenceEnd,
            start: token.start,
            end: token.start,
        })
    }

    pub(super) fn parse_block_mapping_key(&mut self, first: bool) -> ScanResult<Event> {
        if first {
            let token = self.peek()?;
            self.marks.push(token.start);
            self.skip()?;
        }
        let token = self.peek()?;
        match token.kind {
            TokenKind::Key => {
                let mark = token.end;
                self.skip()?;
                let token = self.peek()?;
                if !matches!(
                    token.kind,
                    TokenKind::Key | TokenKind::Value | TokenKind::BlockEnd
                ) {
                    self.states.push(State::BlockMappingValue);
                    return self.parse_node(true, true);
                }
                self.state = State::BlockMappingValue;
                Ok(empty_scalar(mark))
            }
            TokenKind::BlockEnd => {
                self.pop_state();
                self.marks.pop();
                self.skip()?;
                Ok(Event {
                    kind: EventKind::MappingEnd,
                    start: token.start,
                    end: token.end,
                })
            }
            _ => {
                let context_mark = self.marks.pop().unwrap_or_default();
                Err(self.error_context(
                    "while parsing a block mapping",
                    context_mark,
                    "did not find expected key",
                    token.start,
                ))
            }
        }
    }

    pub(super) fn parse_block_mapping_value(&mut self) -> ScanResult<Event> {
        let token = self.peek()?;
        if token.kind == TokenKind::Value {
            let mark = token.end;
            self.skip()?;
            let token = self.peek()?;
            if !matches!(
                token.kind,
                TokenKind::Key | TokenKind::Value | TokenKind::BlockEnd
            ) {
                self.states.push(State::BlockMappingKey);
                return self.parse_node(true, true);
            }
            self.state = State::BlockMappingKey;
            return Ok(empty_scalar(mark));
        }
        self.state = State::BlockMappingKey;
        Ok(empty_scalar(token.start))
    }

    pub(super) fn parse_flow_sequence_entry(&mut self, first: bool) -> ScanResult<Event> {
        if first {
            let token = self.peek()?;
            self.marks.push(token.start);
            self.skip()?;
        }
        let mut token = self.peek()?;
        if token.kind != TokenKind::FlowSequenceEnd {
            if !first {
                if token.kind == TokenKind::FlowEntry {
                    self.skip()?;
                    token = self.peek()?;
                } else {
                    let context_mark = self.marks.pop().unwrap_or_default();
                    return Err(self.error_context(
                        "while parsing a flow sequence",
                        context_mark,
                        "did not find expected ',' or ']'",
                        token.start,
                    ));
                }
            }
            if token.kind == TokenKind::Key {
                self.state = State::FlowSequenceEntryMappingKey;
                self.skip()?;
                return Ok(Event {
                    kind: EventKind::MappingStart {
                        anchor: None,
                        tag: None,
                        flow: true,
                    },
                    start: token.start,
                    end: token.end,
                });
            }
            if token.kind != TokenKind::FlowSequenceEnd {
                self.states.push(State::FlowSequenceEntry);
                return self.parse_node(false, false);
            }
        }
        self.pop_state();
        self.marks.pop();
        self.skip()?;
        Ok(Event {
            kind: EventKind::SequenceEnd,
            start: token.start,
            end: token.end,
        })
    }

    pub(super) fn parse_flow_sequence_entry_mapping_key(&mut self) -> ScanResult<Event> {
        let token = self.peek()?;
        if !matches!(
            token.kind,
            TokenKind::Value | TokenKind::FlowEntry | TokenKind::FlowSequenceEnd
        ) {
            self.states.push(State::FlowSequenceEntryMappingValue);
            return self.parse_node(false, false);
        }
        let mark = token.end;
        self.skip()?;
        self.state = State::FlowSequenceEntryMappingValue;
        Ok(empty_scalar(mark))
    }

    pub(super) fn parse_flow_sequence_entry_mapping_value(&mut self) -> ScanResult<Event> {
        // As in libyaml, an empty value is marked at the ':' rather than at what follows.
        let token = self.peek()?;
        if token.kind == TokenKind::Value {
            self.skip()?;
            let next = self.peek()?;
            if !matches!(next.kind, TokenKind::FlowEntry | TokenKind::FlowSequenceEnd) {
                self.states.push(State::FlowSequenceEntryMappingEnd);
                return self.parse_node(false, false);
            }
        }
        self.state = State::FlowSequenceEntryMappingEnd;
        Ok(empty_scalar(token.start))
    }

    pub(super) fn parse_flow_sequence_entry_mapping_end(&mut self) -> ScanResult<Event> {
        let token = self.peek()?;
        self.state = State::FlowSequenceEntry;
        Ok(Event {
            kind: EventKind::MappingEnd,
            start: token.start,
            end: token.start,
        })
    }

    pub(super) fn parse_flow_mapping_key(&mut self, first: bool) -> ScanResult<Event> {
        if first {
            let token = self.peek()?;
            self.marks.push(token.start);
            self.skip()?;
        }
        let mut token = self.peek()?;
        if token.kind != TokenKind::FlowMappingEnd {
            if !first {
                if token.kind == TokenKind::FlowEntry {
                    self.skip()?;
                    token = self.peek()?;
                } else {
                    let context_mark = self.marks.pop().unwrap_or_default();
                    return Err(self.error_context(
                        "while parsing a flow mapping",
                        context_mark,
                        "did not find expected ',' or '}'",
                        token.start,
                    ));
                }
            }
            if token.kind == TokenKind::Key {
                self.skip()?;
                let token = self.peek()?;
                if !matches!(
                    token.kind,
                    TokenKind::Value | TokenKind::FlowEntry | TokenKind::FlowMappingEnd
                ) {
                    self.states.push(State::FlowMappingValue);
                    return self.parse_node(false, false);
                }
                self.state = State::FlowMappingValue;
                return Ok(empty_scalar(token.start));
            }
            if token.kind != TokenKind::FlowMappingEnd {
                self.states.push(State::FlowMappingEmptyValue);
                return self.parse_node(false, false);
            }
        }
        self.pop_state();
        self.marks.pop();
        self.skip()?;
        Ok(Event {
            kind: EventKind::MappingEnd,
            start: token.start,
            end: token.end,
        })
    }

    pub(super) fn parse_flow_mapping_value(&mut self, empty: bool) -> ScanResult<Event> {
        let mut token = self.peek()?;
        if empty {
            self.state = State::FlowMappingKey;
            return Ok(empty_scalar(token.start));
        }
        if token.kind == TokenKind::Value {
            self.skip()?;
            token = self.peek()?;
            if !matches!(token.kind, TokenKind::FlowEntry | TokenKind::FlowMappingEnd) {
                self.states.push(State::FlowMappingKey);
                return self.parse_node(false, false);
            }
        }
        self.state = State::FlowMappingKey;
        Ok(empty_scalar(token.start))
    }
}
