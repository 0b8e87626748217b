//! Producing tokens: the simple-key bookkeeping (a `KEY` token inserted back into the queue
//! once a `:` shows that what came before was a key), flow levels, the indentation stack
//! that yields block collection starts and ends, and one `fetch_*` per token kind.

use super::scanner::{ScanResult, Scanner, SimpleKey};
use super::{Dialect, Pos, Token, TokenKind, MAX_SCANNER_DEPTH};

impl Scanner {
    pub(super) fn push_token(&mut self, kind: TokenKind, start: Pos, end: Pos) {
        self.tokens.push_back(Token { kind, start, end });
    }

    pub(super) fn save_simple_key(&mut self) -> ScanResult<()> {
        let required = self.flow_level == 0 && self.indent == self.mark.column as i64;
        if self.simple_key_allowed {
            let key = SimpleKey {
                possible: true,
                required,
                token_number: self.tokens_parsed + self.tokens.len(),
                mark: self.mark,
            };
            self.remove_simple_key()?;
            if let Some(last) = self.simple_keys.last_mut() {
                *last = key;
            }
            if self.dialect == Dialect::GoYamlV2 {
                self.keys_by_tok
                    .insert(key.token_number, self.simple_keys.len() - 1);
            }
        }
        Ok(())
    }

    pub(super) fn remove_simple_key(&mut self) -> ScanResult<()> {
        if let Some(key) = self.simple_keys.last().copied() {
            if key.possible && key.required {
                return Err(self.error(
                    "while scanning a simple key",
                    key.mark,
                    "could not find expected ':'",
                ));
            }
            if let Some(last) = self.simple_keys.last_mut() {
                last.possible = false;
            }
            if key.possible && self.dialect == Dialect::GoYamlV2 {
                self.keys_by_tok.remove(&key.token_number);
            }
        }
        Ok(())
    }

    pub(super) fn increase_flow_level(&mut self) -> ScanResult<()> {
        let mark = self.mark;
        self.simple_keys.push(SimpleKey {
            token_number: self.tokens_parsed + self.tokens.len(),
            mark,
            ..SimpleKey::default()
        });
        self.flow_level += 1;
        if self.flow_level > MAX_SCANNER_DEPTH {
            return Err(self.error(
                "while increasing flow level",
                mark,
                format!("exceeded max depth of {MAX_SCANNER_DEPTH}"),
            ));
        }
        Ok(())
    }

    pub(super) fn decrease_flow_level(&mut self) {
        if self.flow_level > 0 {
            self.flow_level -= 1;
            if let Some(key) = self.simple_keys.pop() {
                if self.dialect == Dialect::GoYamlV2 {
                    self.keys_by_tok.remove(&key.token_number);
                }
            }
        }
    }

    /// Inserts a token at queue position `number` (a token number); a position already handed
    /// to the parser falls back to the end of the queue, as go-yaml's `yaml_insert_token` does
    /// with a negative position.
    pub(super) fn insert_token(&mut self, number: Option<usize>, token: Token) {
        match number.and_then(|n| n.checked_sub(self.tokens_parsed)) {
            Some(at) if at <= self.tokens.len() => self.tokens.insert(at, token),
            _ => self.tokens.push_back(token),
        }
    }

    /// Opens a block collection when `column` is deeper than the current indentation, inserting
    /// its start token at queue position `number` (a simple key found late) or at the end.
    pub(super) fn roll_indent(
        &mut self,
        column: usize,
        number: Option<usize>,
        kind: TokenKind,
        mark: Pos,
    ) -> ScanResult<()> {
        if self.flow_level > 0 {
            return Ok(());
        }
        if self.indent < column as i64 {
            self.indents.push(self.indent);
            self.indent = column as i64;
            if self.indents.len() > MAX_SCANNER_DEPTH {
                let context_mark = self.simple_keys.last().map(|k| k.mark).unwrap_or(mark);
                return Err(self.error(
                    "while increasing indent level",
                    context_mark,
                    format!("exceeded max depth of {MAX_SCANNER_DEPTH}"),
                ));
            }
            self.insert_token(
                number,
                Token {
                    kind,
                    start: mark,
                    end: mark,
                },
            );
        }
        Ok(())
    }

    pub(super) fn unroll_indent(&mut self, column: i64) {
        if self.flow_level > 0 {
            return;
        }
        while self.indent > column {
            self.push_token(TokenKind::BlockEnd, self.mark, self.mark);
            self.indent = self.indents.pop().unwrap_or(-1);
        }
    }

    pub(super) fn fetch_stream_start(&mut self) -> ScanResult<()> {
        self.indent = -1;
        self.simple_keys.push(SimpleKey::default());
        self.simple_key_allowed = true;
        self.stream_start_produced = true;
        self.push_token(TokenKind::StreamStart, self.mark, self.mark);
        Ok(())
    }

    pub(super) fn fetch_stream_end(&mut self) -> ScanResult<()> {
        // Force a new line so errors at the end point past the last line.
        if self.mark.column != 0 {
            self.mark.column = 0;
            self.mark.line += 1;
        }
        self.unroll_indent(-1);
        self.remove_simple_key()?;
        self.simple_key_allowed = false;
        self.push_token(TokenKind::StreamEnd, self.mark, self.mark);
        Ok(())
    }

    pub(super) fn fetch_directive(&mut self) -> ScanResult<()> {
        self.unroll_indent(-1);
        self.remove_simple_key()?;
        self.simple_key_allowed = false;
        let token = self.scan_directive()?;
        self.tokens.push_back(token);
        Ok(())
    }

    pub(super) fn fetch_document_indicator(&mut self, kind: TokenKind) -> ScanResult<()> {
        self.unroll_indent(-1);
        self.remove_simple_key()?;
        self.simple_key_allowed = false;
        let start = self.mark;
        self.skip();
        self.skip();
        self.skip();
        self.push_token(kind, start, self.mark);
        Ok(())
    }

    pub(super) fn fetch_flow_collection_start(&mut self, kind: TokenKind) -> ScanResult<()> {
        self.save_simple_key()?;
        self.increase_flow_level()?;
        self.simple_key_allowed = true;
        let start = self.mark;
        self.skip();
        self.push_token(kind, start, self.mark);
        Ok(())
    }

    pub(super) fn fetch_flow_collection_end(&mut self, kind: TokenKind) -> ScanResult<()> {
        self.remove_simple_key()?;
        self.decrease_flow_level();
        self.simple_key_allowed = false;
        let start = self.mark;
        self.skip();
        self.push_token(kind, start, self.mark);
        Ok(())
    }

    pub(super) fn fetch_flow_entry(&mut self) -> ScanResult<()> {
        self.remove_simple_key()?;
        self.simple_key_allowed = true;
        let start = self.mark;
        self.skip();
        self.push_token(TokenKind::FlowEntry, start, self.mark);
        Ok(())
    }

    pub(super) fn fetch_block_entry(&mut self) -> ScanResult<()> {
        if self.flow_level == 0 {
            if !self.simple_key_allowed {
                return Err(self.error(
                    "",
                    self.mark,
                    "block sequence entries are not allowed in this context",
                ));
            }
            self.roll_indent(
                self.mark.column,
                None,
                TokenKind::BlockSequenceStart,
                self.mark,
            )?;
        }
        // A '-' in flow context is left for the parser to report with its context.
        self.remove_simple_key()?;
        self.simple_key_allowed = true;
        let start = self.mark;
        self.skip();
        self.push_token(TokenKind::BlockEntry, start, self.mark);
        Ok(())
    }

    pub(super) fn fetch_key(&mut self) -> ScanResult<()> {
        if self.flow_level == 0 {
            if !self.simple_key_allowed {
                return Err(self.error(
                    "",
                    self.mark,
                    "mapping keys are not allowed in this context",
                ));
            }
            self.roll_indent(
                self.mark.column,
                None,
                TokenKind::BlockMappingStart,
                self.mark,
            )?;
        }
        self.remove_simple_key()?;
        self.simple_key_allowed = self.flow_level == 0;
        let start = self.mark;
        self.skip();
        self.push_token(TokenKind::Key, start, self.mark);
        Ok(())
    }

    pub(super) fn fetch_value(&mut self) -> ScanResult<()> {
        let i = self.simple_keys.len() - 1;
        let valid = match self.dialect {
            Dialect::GoYamlV2 => self.simple_key_is_valid(i)?,
            Dialect::LibYaml => self.simple_keys[i].possible,
        };
        if valid {
            let key = self.simple_keys[i];
            self.insert_token(
                Some(key.token_number),
                Token {
                    kind: TokenKind::Key,
                    start: key.mark,
                    end: key.mark,
                },
            );
            self.roll_indent(
                key.mark.column,
                Some(key.token_number),
                TokenKind::BlockMappingStart,
                key.mark,
            )?;
            self.simple_keys[i].possible = false;
            if self.dialect == Dialect::GoYamlV2 {
                self.keys_by_tok.remove(&key.token_number);
            }
            self.simple_key_allowed = false;
        } else {
            if self.flow_level == 0 {
                if !self.simple_key_allowed {
                    return Err(self.error(
                        "",
                        self.mark,
                        "mapping values are not allowed in this context",
                    ));
                }
                self.roll_indent(
                    self.mark.column,
                    None,
                    TokenKind::BlockMappingStart,
                    self.mark,
                )?;
            }
            self.simple_key_allowed = self.flow_level == 0;
        }
        let start = self.mark;
        self.skip();
        self.push_token(TokenKind::Value, start, self.mark);
        Ok(())
    }

    pub(super) fn fetch_anchor(&mut self, alias: bool) -> ScanResult<()> {
        self.save_simple_key()?;
        self.simple_key_allowed = false;
        let token = self.scan_anchor(alias)?;
        self.tokens.push_back(token);
        Ok(())
    }

    pub(super) fn fetch_tag(&mut self) -> ScanResult<()> {
        self.save_simple_key()?;
        self.simple_key_allowed = false;
        let token = self.scan_tag()?;
        self.tokens.push_back(token);
        Ok(())
    }

    pub(super) fn fetch_block_scalar(&mut self, literal: bool) -> ScanResult<()> {
        self.remove_simple_key()?;
        self.simple_key_allowed = true;
        let token = self.scan_block_scalar(literal)?;
        self.tokens.push_back(token);
        Ok(())
    }

    pub(super) fn fetch_flow_scalar(&mut self, single: bool) -> ScanResult<()> {
        self.save_simple_key()?;
        self.simple_key_allowed = false;
        let token = self.scan_flow_scalar(single)?;
        self.tokens.push_back(token);
        Ok(())
    }

    pub(super) fn fetch_plain_scalar(&mut self) -> ScanResult<()> {
        self.save_simple_key()?;
        self.simple_key_allowed = false;
        let token = self.scan_plain_scalar()?;
        self.tokens.push_back(token);
        Ok(())
    }
}
