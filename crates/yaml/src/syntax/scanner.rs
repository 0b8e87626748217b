//! The scanner: characters to tokens, with libyaml's two "clever" parts — block collection
//! starts derived from indentation, and simple keys (a `KEY` token inserted back in the queue
//! once the `:` after a possible key is seen).

use std::collections::{HashMap, VecDeque};

use super::chars::{first_disallowed, is_blank, is_blankz, is_break, is_breakz};
use super::{Dialect, Pos, Stage, SyntaxError, Token, TokenKind};

#[derive(Debug, Clone, Copy, Default)]
pub(super) struct SimpleKey {
    pub(super) possible: bool,
    pub(super) required: bool,
    pub(super) token_number: usize,
    pub(super) mark: Pos,
}

pub(crate) type ScanResult<T> = Result<T, SyntaxError>;

pub(crate) struct Scanner {
    pub(super) chars: Vec<char>,
    pub(super) pos: usize,
    pub(super) mark: Pos,
    pub(super) dialect: Dialect,
    pub(super) tokens: VecDeque<Token>,
    pub(super) tokens_parsed: usize,
    pub(super) token_available: bool,
    pub(super) stream_start_produced: bool,
    pub(super) stream_end_produced: bool,
    pub(super) indent: i64,
    pub(super) indents: Vec<i64>,
    pub(super) simple_key_allowed: bool,
    pub(super) simple_keys: Vec<SimpleKey>,
    /// go-yaml's `simple_keys_by_tok`: token number to flow level of a possible key. go-yaml
    /// consults only this map to decide whether the head token may still become a key, and
    /// closing a flow collection deletes the entry of the collection's own token number, which
    /// an empty `{}`/`[]` shares with the key saved at its opening: such a key is then handed
    /// to the parser before its `:` is seen. Kept for that behaviour (GoYamlV2 only).
    pub(super) keys_by_tok: HashMap<usize, usize>,
    pub(super) flow_level: usize,
    /// A character the reader refuses, and the character index from which the scanner's
    /// lookahead makes the reader decode it (see [`reader_trigger`]).
    pub(super) reader_error: Option<(usize, SyntaxError)>,
}

impl Scanner {
    pub(crate) fn new(input: &str, dialect: Dialect) -> Scanner {
        let mut chars: Vec<char> = input.chars().collect();
        // A leading byte order mark selects the encoding and is not part of the stream.
        if chars.first() == Some(&'\u{FEFF}') {
            chars.remove(0);
        }
        let reader_error = first_disallowed(&chars).map(|(index, c, at)| {
            // Readers report the offset in bytes of the UTF-8 input, BOM included.
            let bom = usize::from(input.starts_with('\u{FEFF}'));
            let offset = input
                .char_indices()
                .nth(index + bom)
                .map_or(input.len(), |(o, _)| o);
            let error = SyntaxError {
                stage: Stage::Reader,
                context: None,
                context_mark: None,
                problem: "control characters are not allowed".to_string(),
                problem_mark: Pos {
                    index: offset,
                    ..at
                },
                value: Some(c as u32),
            };
            (reader_trigger(input, index, dialect), error)
        });
        Scanner {
            chars,
            pos: 0,
            mark: Pos::default(),
            dialect,
            tokens: VecDeque::new(),
            tokens_parsed: 0,
            token_available: false,
            stream_start_produced: false,
            stream_end_produced: false,
            indent: -1,
            indents: Vec::new(),
            simple_key_allowed: false,
            simple_keys: Vec::new(),
            keys_by_tok: HashMap::new(),
            flow_level: 0,
            reader_error,
        }
    }

    /// The character `k` places ahead, `'\0'` past the end.
    pub(super) fn ch(&self, k: usize) -> char {
        self.chars.get(self.pos + k).copied().unwrap_or('\0')
    }

    pub(super) fn skip(&mut self) {
        self.pos += 1;
        self.mark.index += 1;
        self.mark.column += 1;
    }

    pub(super) fn skip_line(&mut self) {
        if self.ch(0) == '\r' && self.ch(1) == '\n' {
            self.pos += 2;
            self.mark.index += 2;
            self.mark.line += 1;
            self.mark.column = 0;
        } else if is_break(self.ch(0)) {
            self.pos += 1;
            self.mark.index += 1;
            self.mark.line += 1;
            self.mark.column = 0;
        }
    }

    pub(super) fn read(&mut self, s: &mut String) {
        s.push(self.ch(0));
        self.skip();
    }

    /// Copies a line break, normalised the way libyaml does (CR, LF, CRLF and NEL become LF;
    /// LS and PS are kept).
    pub(super) fn read_line(&mut self, s: &mut String) {
        let c = self.ch(0);
        if c == '\r' && self.ch(1) == '\n' {
            s.push('\n');
            self.pos += 2;
            self.mark.index += 2;
        } else if matches!(c, '\r' | '\n' | '\u{85}') {
            s.push('\n');
            self.pos += 1;
            self.mark.index += 1;
        } else if matches!(c, '\u{2028}' | '\u{2029}') {
            s.push(c);
            self.pos += 1;
            self.mark.index += 1;
        } else {
            return;
        }
        self.mark.line += 1;
        self.mark.column = 0;
    }

    pub(super) fn error(
        &self,
        context: &'static str,
        context_mark: Pos,
        problem: impl Into<String>,
    ) -> SyntaxError {
        SyntaxError {
            stage: Stage::Scanner,
            context: if context.is_empty() {
                None
            } else {
                Some(context)
            },
            context_mark: Some(context_mark),
            problem: problem.into(),
            problem_mark: self.mark,
            value: None,
        }
    }

    /// The next token without consuming it; `None` after the stream end.
    pub(crate) fn peek(&mut self) -> ScanResult<Option<&Token>> {
        if !self.token_available {
            if self.stream_end_produced {
                return Ok(None);
            }
            self.fetch_more_tokens()?;
        }
        Ok(self.tokens.front())
    }

    pub(crate) fn next_token(&mut self) -> ScanResult<Option<Token>> {
        if !self.token_available {
            if self.stream_end_produced {
                return Ok(None);
            }
            self.fetch_more_tokens()?;
        }
        let token = self.tokens.pop_front();
        self.token_available = false;
        self.tokens_parsed += 1;
        if let Some(Token {
            kind: TokenKind::StreamEnd,
            ..
        }) = &token
        {
            self.stream_end_produced = true;
        }
        Ok(token)
    }

    /// Fails once the scanner has looked at `lookahead` characters reaching into the chunk
    /// that holds a refused character.
    pub(super) fn check_reader(&mut self, lookahead: usize) -> ScanResult<()> {
        if let Some((trigger, _)) = &self.reader_error {
            if self.pos + lookahead > *trigger {
                if let Some((_, e)) = self.reader_error.take() {
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    pub(super) fn fetch_more_tokens(&mut self) -> ScanResult<()> {
        loop {
            let need_more = if self.tokens.is_empty() {
                true
            } else {
                match self.dialect {
                    Dialect::LibYaml => {
                        self.stale_simple_keys()?;
                        self.simple_keys
                            .iter()
                            .any(|k| k.possible && k.token_number == self.tokens_parsed)
                    }
                    // go-yaml only looks at a key registered for the head of the queue.
                    Dialect::GoYamlV2 => match self.keys_by_tok.get(&self.tokens_parsed) {
                        Some(&i) => self.simple_key_is_valid(i)?,
                        None => false,
                    },
                }
            };
            if !need_more {
                break;
            }
            self.fetch_next_token()?;
            self.check_reader(1)?;
        }
        self.token_available = true;
        Ok(())
    }

    /// Whether a saved key can still be one: same line, within 1024 characters. A required key
    /// that can no longer be one is an error.
    pub(super) fn simple_key_is_valid(&mut self, i: usize) -> ScanResult<bool> {
        let Some(&key) = self.simple_keys.get(i) else {
            return Ok(false);
        };
        if !key.possible {
            return Ok(false);
        }
        if key.mark.line < self.mark.line || key.mark.index + 1024 < self.mark.index {
            if key.required {
                return Err(self.error(
                    "while scanning a simple key",
                    key.mark,
                    "could not find expected ':'",
                ));
            }
            self.simple_keys[i].possible = false;
            return Ok(false);
        }
        Ok(true)
    }

    pub(super) fn stale_simple_keys(&mut self) -> ScanResult<()> {
        for i in 0..self.simple_keys.len() {
            self.simple_key_is_valid(i)?;
        }
        Ok(())
    }

    pub(super) fn fetch_next_token(&mut self) -> ScanResult<()> {
        self.check_reader(1)?;
        if !self.stream_start_produced {
            return self.fetch_stream_start();
        }
        self.scan_to_next_token();
        // libyaml makes sure of four characters here (the longest indicator, `--- `).
        self.check_reader(4)?;
        if self.dialect == Dialect::LibYaml {
            self.stale_simple_keys()?;
        }
        self.unroll_indent(self.mark.column as i64);

        let c = self.ch(0);
        if c == '\0' {
            return self.fetch_stream_end();
        }
        if self.mark.column == 0 && c == '%' {
            return self.fetch_directive();
        }
        if self.mark.column == 0 && self.at_document_indicator() {
            let kind = if c == '-' {
                TokenKind::DocumentStart
            } else {
                TokenKind::DocumentEnd
            };
            return self.fetch_document_indicator(kind);
        }
        let next = self.ch(1);
        match c {
            '[' => return self.fetch_flow_collection_start(TokenKind::FlowSequenceStart),
            '{' => return self.fetch_flow_collection_start(TokenKind::FlowMappingStart),
            ']' => return self.fetch_flow_collection_end(TokenKind::FlowSequenceEnd),
            '}' => return self.fetch_flow_collection_end(TokenKind::FlowMappingEnd),
            ',' => return self.fetch_flow_entry(),
            '-' if is_blankz(next) => return self.fetch_block_entry(),
            '?' if self.is_key_indicator(next) => return self.fetch_key(),
            ':' if self.flow_level > 0 || is_blankz(next) => return self.fetch_value(),
            '*' => return self.fetch_anchor(true),
            '&' => return self.fetch_anchor(false),
            '!' => return self.fetch_tag(),
            '|' if self.flow_level == 0 => return self.fetch_block_scalar(true),
            '>' if self.flow_level == 0 => return self.fetch_block_scalar(false),
            '\'' => return self.fetch_flow_scalar(true),
            '"' => return self.fetch_flow_scalar(false),
            _ => {}
        }
        if self.can_start_plain(c, next) {
            return self.fetch_plain_scalar();
        }
        Err(self.error(
            "while scanning for the next token",
            self.mark,
            "found character that cannot start any token",
        ))
    }

    pub(super) fn is_key_indicator(&self, next: char) -> bool {
        self.flow_level > 0 || is_blankz(next)
    }

    pub(super) fn can_start_plain(&self, c: char, next: char) -> bool {
        let indicator = is_blankz(c)
            || matches!(
                c,
                '-' | '?'
                    | ':'
                    | ','
                    | '['
                    | ']'
                    | '{'
                    | '}'
                    | '#'
                    | '&'
                    | '*'
                    | '!'
                    | '|'
                    | '>'
                    | '\''
                    | '"'
                    | '%'
                    | '@'
                    | '`'
            );
        if !indicator {
            return true;
        }
        if c == '-' && !is_blank(next) {
            return true;
        }
        match self.dialect {
            Dialect::GoYamlV2 => self.flow_level == 0 && (c == '?' || c == ':') && !is_blankz(next),
            Dialect::LibYaml => {
                (c == '?' || (c == ':' && self.flow_level == 0)) && !is_blankz(next)
            }
        }
    }

    pub(super) fn at_document_indicator(&self) -> bool {
        let c = self.ch(0);
        (c == '-' || c == '.') && self.ch(1) == c && self.ch(2) == c && is_blankz(self.ch(3))
    }

    /// Skips blanks, comments and line breaks. Tabs count as separation only in flow context
    /// or where a simple key cannot start (so never as indentation).
    pub(super) fn scan_to_next_token(&mut self) {
        loop {
            if self.mark.column == 0 && self.ch(0) == '\u{FEFF}' {
                self.skip();
            }
            while self.ch(0) == ' '
                || ((self.flow_level > 0 || !self.simple_key_allowed) && self.ch(0) == '\t')
            {
                self.skip();
            }
            if self.ch(0) == '#' {
                while !is_breakz(self.ch(0)) {
                    self.skip();
                }
            }
            if is_break(self.ch(0)) {
                self.skip_line();
                if self.flow_level == 0 {
                    self.simple_key_allowed = true;
                }
            } else {
                break;
            }
        }
    }
}

/// The index of the first character the reader decodes in the same read as character
/// `bad`. Readers fill a raw buffer from the input a chunk at a time (go-yaml 512 bytes,
/// libyaml 16 KiB) and check every character of a chunk as they decode it, so a refused
/// character surfaces only once the scanner needs text from its chunk; an error earlier in
/// the stream wins.
fn reader_trigger(input: &str, bad: usize, dialect: Dialect) -> usize {
    let chunk = match dialect {
        Dialect::GoYamlV2 => 512,
        Dialect::LibYaml => 16384,
    };
    let bytes = input.as_bytes();
    let skip_bom = usize::from(input.starts_with('\u{FEFF}')) * 3;
    let mut read_end = 0; // input bytes in the raw buffer so far
    let mut decoded_bytes = skip_bom; // input bytes decoded into characters
    let mut decoded_chars = 0;
    while read_end < bytes.len() {
        let carry = read_end.saturating_sub(decoded_bytes);
        read_end = (read_end + chunk - carry).min(bytes.len());
        let first_char = decoded_chars;
        // Decode every complete character now in the raw buffer.
        let mut end = read_end;
        while end > decoded_bytes && !input.is_char_boundary(end) {
            end -= 1;
        }
        let n = input
            .get(decoded_bytes..end)
            .map_or(0, |s| s.chars().count());
        decoded_chars += n;
        decoded_bytes = end;
        if bad < decoded_chars {
            return first_char;
        }
    }
    0
}
