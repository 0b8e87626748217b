//! The scanner: characters to tokens, with libyaml's two "clever" parts — block collection
//! starts derived from indentation, and simple keys (a `KEY` token inserted back in the queue
//! once the `:` after a possible key is seen).

use std::collections::{HashMap, VecDeque};

use super::chars::{first_disallowed, is_blank, is_blankz, is_break, is_breakz};
use super::{Dialect, Pos, Stage, SyntaxError, Token, TokenKind, MAX_SCANNER_DEPTH};

#[derive(Debug, Clone, Copy, Default)]
struct SimpleKey {
    possible: bool,
    required: bool,
    token_number: usize,
    mark: Pos,
}

pub(crate) type ScanResult<T> = Result<T, SyntaxError>;

pub(crate) struct Scanner {
    pub(super) chars: Vec<char>,
    pub(super) pos: usize,
    pub(super) mark: Pos,
    pub(super) dialect: Dialect,
    tokens: VecDeque<Token>,
    tokens_parsed: usize,
    token_available: bool,
    stream_start_produced: bool,
    stream_end_produced: bool,
    pub(super) indent: i64,
    indents: Vec<i64>,
    pub(super) simple_key_allowed: bool,
    simple_keys: Vec<SimpleKey>,
    /// go-yaml's `simple_keys_by_tok`: token number to flow level of a possible key. go-yaml
    /// consults only this map to decide whether the head token may still become a key, and
    /// closing a flow collection deletes the entry of the collection's own token number, which
    /// an empty `{}`/`[]` shares with the key saved at its opening: such a key is then handed
    /// to the parser before its `:` is seen. Kept for that behaviour (GoYamlV2 only).
    keys_by_tok: HashMap<usize, usize>,
    pub(super) flow_level: usize,
    /// A character the reader refuses, and the character index from which the scanner's
    /// lookahead makes the reader decode it (see [`reader_trigger`]).
    reader_error: Option<(usize, SyntaxError)>,
}

impl Scanner {
    pub(crate) fn new(input: &str, dialect: Dialect) -> Scanner {
        let mut chars: Vec<char> = input.chars().collect();
        // A leading byte order mark selects the encoding and is not part of the stream.
        if chars.first() == Some(&'\u{FEFF}') {
            chars.remove(0);
        }
        let reader_error = first_disallowed(&chars).map(|(index, c, at)| {
            let error = SyntaxError {
                stage: Stage::Reader,
                context: None,
                context_mark: None,
                problem: "control characters are not allowed".to_string(),
                problem_mark: at,
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
    fn check_reader(&mut self, lookahead: usize) -> ScanResult<()> {
        if let Some((trigger, _)) = &self.reader_error {
            if self.pos + lookahead > *trigger {
                if let Some((_, e)) = self.reader_error.take() {
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    fn fetch_more_tokens(&mut self) -> ScanResult<()> {
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
    fn simple_key_is_valid(&mut self, i: usize) -> ScanResult<bool> {
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

    fn stale_simple_keys(&mut self) -> ScanResult<()> {
        for i in 0..self.simple_keys.len() {
            self.simple_key_is_valid(i)?;
        }
        Ok(())
    }

    fn fetch_next_token(&mut self) -> ScanResult<()> {
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

    /// libyaml 0.2.5 takes `?` in a flow collection as a key indicator only before a blank
    /// ("Allow question marks in plain scalars in flow collections"); go-yaml always does.
    fn is_key_indicator(&self, next: char) -> bool {
        match self.dialect {
            Dialect::GoYamlV2 => self.flow_level > 0 || is_blankz(next),
            Dialect::LibYaml => is_blankz(next),
        }
    }

    fn can_start_plain(&self, c: char, next: char) -> bool {
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
    fn scan_to_next_token(&mut self) {
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

    fn increase_flow_level(&mut self) -> ScanResult<()> {
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

    fn decrease_flow_level(&mut self) {
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
    fn insert_token(&mut self, number: Option<usize>, token: Token) {
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

    fn fetch_stream_start(&mut self) -> ScanResult<()> {
        self.indent = -1;
        self.simple_keys.push(SimpleKey::default());
        self.simple_key_allowed = true;
        self.stream_start_produced = true;
        self.push_token(TokenKind::StreamStart, self.mark, self.mark);
        Ok(())
    }

    fn fetch_stream_end(&mut self) -> ScanResult<()> {
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

    fn fetch_directive(&mut self) -> ScanResult<()> {
        self.unroll_indent(-1);
        self.remove_simple_key()?;
        self.simple_key_allowed = false;
        let token = self.scan_directive()?;
        self.tokens.push_back(token);
        Ok(())
    }

    fn fetch_document_indicator(&mut self, kind: TokenKind) -> ScanResult<()> {
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

    fn fetch_flow_collection_start(&mut self, kind: TokenKind) -> ScanResult<()> {
        self.save_simple_key()?;
        self.increase_flow_level()?;
        self.simple_key_allowed = true;
        let start = self.mark;
        self.skip();
        self.push_token(kind, start, self.mark);
        Ok(())
    }

    fn fetch_flow_collection_end(&mut self, kind: TokenKind) -> ScanResult<()> {
        self.remove_simple_key()?;
        self.decrease_flow_level();
        self.simple_key_allowed = false;
        let start = self.mark;
        self.skip();
        self.push_token(kind, start, self.mark);
        Ok(())
    }

    fn fetch_flow_entry(&mut self) -> ScanResult<()> {
        self.remove_simple_key()?;
        self.simple_key_allowed = true;
        let start = self.mark;
        self.skip();
        self.push_token(TokenKind::FlowEntry, start, self.mark);
        Ok(())
    }

    fn fetch_block_entry(&mut self) -> ScanResult<()> {
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

    fn fetch_key(&mut self) -> ScanResult<()> {
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

    fn fetch_value(&mut self) -> ScanResult<()> {
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

    fn fetch_anchor(&mut self, alias: bool) -> ScanResult<()> {
        self.save_simple_key()?;
        self.simple_key_allowed = false;
        let token = self.scan_anchor(alias)?;
        self.tokens.push_back(token);
        Ok(())
    }

    fn fetch_tag(&mut self) -> ScanResult<()> {
        self.save_simple_key()?;
        self.simple_key_allowed = false;
        let token = self.scan_tag()?;
        self.tokens.push_back(token);
        Ok(())
    }

    fn fetch_block_scalar(&mut self, literal: bool) -> ScanResult<()> {
        self.remove_simple_key()?;
        self.simple_key_allowed = true;
        let token = self.scan_block_scalar(literal)?;
        self.tokens.push_back(token);
        Ok(())
    }

    fn fetch_flow_scalar(&mut self, single: bool) -> ScanResult<()> {
        self.save_simple_key()?;
        self.simple_key_allowed = false;
        let token = self.scan_flow_scalar(single)?;
        self.tokens.push_back(token);
        Ok(())
    }

    fn fetch_plain_scalar(&mut self) -> ScanResult<()> {
        self.save_simple_key()?;
        self.simple_key_allowed = false;
        let token = self.scan_plain_scalar()?;
        self.tokens.push_back(token);
        Ok(())
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
