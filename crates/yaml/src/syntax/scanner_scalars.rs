//! Scanning of scalars: block (`|`, `>`), quoted (`'`, `"`) and plain, with libyaml's line
//! folding rules.

use super::chars::{is_blank, is_blankz, is_break, is_breakz};
use super::scanner::{ScanResult, Scanner};
use super::{Dialect, ScalarStyle, Token, TokenKind};

impl Scanner {
    pub(super) fn scan_block_scalar(&mut self, literal: bool) -> ScanResult<Token> {
        let start = self.mark;
        self.skip();
        let mut chomping = 0i8;
        let mut increment = 0usize;
        let c = self.ch(0);
        if c == '+' || c == '-' {
            chomping = if c == '+' { 1 } else { -1 };
            self.skip();
            if let Some(d) = self.ch(0).to_digit(10) {
                if d == 0 {
                    return Err(self.error(
                        "while scanning a block scalar",
                        start,
                        "found an indentation indicator equal to 0",
                    ));
                }
                increment = d as usize;
                self.skip();
            }
        } else if let Some(d) = c.to_digit(10) {
            if d == 0 {
                return Err(self.error(
                    "while scanning a block scalar",
                    start,
                    "found an indentation indicator equal to 0",
                ));
            }
            increment = d as usize;
            self.skip();
            let c = self.ch(0);
            if c == '+' || c == '-' {
                chomping = if c == '+' { 1 } else { -1 };
                self.skip();
            }
        }
        while is_blank(self.ch(0)) {
            self.skip();
        }
        if self.ch(0) == '#' {
            while !is_breakz(self.ch(0)) {
                self.skip();
            }
        }
        if !is_breakz(self.ch(0)) {
            return Err(self.error(
                "while scanning a block scalar",
                start,
                "did not find expected comment or line break",
            ));
        }
        if is_break(self.ch(0)) {
            self.skip_line();
        }
        let mut end = self.mark;
        let mut indent = 0usize;
        if increment > 0 {
            indent = if self.indent >= 0 {
                self.indent as usize + increment
            } else {
                increment
            };
        }
        let mut value = String::new();
        let mut leading_break = String::new();
        let mut trailing_breaks = String::new();
        self.scan_block_scalar_breaks(&mut indent, &mut trailing_breaks, start, &mut end)?;
        let mut leading_blank = false;
        while self.mark.column == indent && self.ch(0) != '\0' {
            let trailing_blank = is_blank(self.ch(0));
            if !literal && !leading_blank && !trailing_blank && leading_break.starts_with('\n') {
                if trailing_breaks.is_empty() {
                    value.push(' ');
                }
            } else {
                value.push_str(&leading_break);
            }
            leading_break.clear();
            value.push_str(&trailing_breaks);
            trailing_breaks.clear();
            leading_blank = is_blank(self.ch(0));
            while !is_breakz(self.ch(0)) {
                self.read(&mut value);
            }
            self.read_line(&mut leading_break);
            self.scan_block_scalar_breaks(&mut indent, &mut trailing_breaks, start, &mut end)?;
        }
        if chomping != -1 {
            value.push_str(&leading_break);
        }
        if chomping == 1 {
            value.push_str(&trailing_breaks);
        }
        let style = if literal {
            ScalarStyle::Literal
        } else {
            ScalarStyle::Folded
        };
        Ok(Token {
            kind: TokenKind::Scalar { value, style },
            start,
            end,
        })
    }

    /// Eats indentation and empty lines before block scalar content, fixing the indentation
    /// from the first non-empty line when no indicator gave it.
    fn scan_block_scalar_breaks(
        &mut self,
        indent: &mut usize,
        breaks: &mut String,
        start: super::Pos,
        end: &mut super::Pos,
    ) -> ScanResult<()> {
        *end = self.mark;
        let mut max_indent = 0usize;
        loop {
            while (*indent == 0 || self.mark.column < *indent) && self.ch(0) == ' ' {
                self.skip();
            }
            max_indent = max_indent.max(self.mark.column);
            if (*indent == 0 || self.mark.column < *indent) && self.ch(0) == '\t' {
                return Err(self.error(
                    "while scanning a block scalar",
                    start,
                    "found a tab character where an indentation space is expected",
                ));
            }
            if !is_break(self.ch(0)) {
                break;
            }
            self.read_line(breaks);
            *end = self.mark;
        }
        if *indent == 0 {
            let floor = (self.indent + 1).max(1) as usize;
            *indent = max_indent.max(floor);
        }
        Ok(())
    }

    pub(super) fn scan_flow_scalar(&mut self, single: bool) -> ScanResult<Token> {
        let start = self.mark;
        self.skip();
        let mut value = String::new();
        let mut leading_break = String::new();
        let mut trailing_breaks = String::new();
        let mut whitespaces = String::new();
        loop {
            if self.mark.column == 0 && self.at_document_indicator() {
                return Err(self.error(
                    "while scanning a quoted scalar",
                    start,
                    "found unexpected document indicator",
                ));
            }
            if self.ch(0) == '\0' {
                return Err(self.error(
                    "while scanning a quoted scalar",
                    start,
                    "found unexpected end of stream",
                ));
            }
            let mut leading_blanks = false;
            while !is_blankz(self.ch(0)) {
                let c = self.ch(0);
                if single && c == '\'' && self.ch(1) == '\'' {
                    value.push('\'');
                    self.skip();
                    self.skip();
                } else if c == if single { '\'' } else { '"' } {
                    break;
                } else if !single && c == '\\' && is_break(self.ch(1)) {
                    self.skip();
                    self.skip_line();
                    leading_blanks = true;
                    break;
                } else if !single && c == '\\' {
                    self.scan_escape(start, &mut value)?;
                } else {
                    self.read(&mut value);
                }
            }
            if self.ch(0) == if single { '\'' } else { '"' } {
                break;
            }
            while is_blank(self.ch(0)) || is_break(self.ch(0)) {
                if is_blank(self.ch(0)) {
                    if leading_blanks {
                        self.skip();
                    } else {
                        self.read(&mut whitespaces);
                    }
                } else if leading_blanks {
                    self.read_line(&mut trailing_breaks);
                } else {
                    whitespaces.clear();
                    self.read_line(&mut leading_break);
                    leading_blanks = true;
                }
            }
            if leading_blanks {
                fold_breaks(&mut value, &leading_break, &trailing_breaks);
                leading_break.clear();
                trailing_breaks.clear();
            } else {
                value.push_str(&whitespaces);
                whitespaces.clear();
            }
        }
        self.skip();
        let style = if single {
            ScalarStyle::SingleQuoted
        } else {
            ScalarStyle::DoubleQuoted
        };
        Ok(Token {
            kind: TokenKind::Scalar { value, style },
            start,
            end: self.mark,
        })
    }

    fn scan_escape(&mut self, start: super::Pos, value: &mut String) -> ScanResult<()> {
        let mut code_length = 0;
        let replacement = match self.ch(1) {
            '0' => Some('\0'),
            'a' => Some('\u{7}'),
            'b' => Some('\u{8}'),
            't' | '\t' => Some('\t'),
            'n' => Some('\n'),
            'v' => Some('\u{b}'),
            'f' => Some('\u{c}'),
            'r' => Some('\r'),
            'e' => Some('\u{1b}'),
            ' ' => Some(' '),
            '"' => Some('"'),
            '\'' => Some('\''),
            '/' if self.dialect == Dialect::LibYaml => Some('/'),
            '\\' => Some('\\'),
            'N' => Some('\u{85}'),
            '_' => Some('\u{a0}'),
            'L' => Some('\u{2028}'),
            'P' => Some('\u{2029}'),
            'x' => {
                code_length = 2;
                None
            }
            'u' => {
                code_length = 4;
                None
            }
            'U' => {
                code_length = 8;
                None
            }
            _ => {
                return Err(self.error(
                    "while parsing a quoted scalar",
                    start,
                    "found unknown escape character",
                ))
            }
        };
        self.skip();
        self.skip();
        if let Some(c) = replacement {
            value.push(c);
            return Ok(());
        }
        let mut code = 0u32;
        for k in 0..code_length {
            match self.ch(k).to_digit(16) {
                Some(d) => code = (code << 4) + d,
                None => {
                    return Err(self.error(
                        "while parsing a quoted scalar",
                        start,
                        "did not find expected hexdecimal number",
                    ))
                }
            }
        }
        match char::from_u32(code) {
            Some(c) => value.push(c),
            None => {
                return Err(self.error(
                    "while parsing a quoted scalar",
                    start,
                    "found invalid Unicode character escape code",
                ))
            }
        }
        for _ in 0..code_length {
            self.skip();
        }
        Ok(())
    }

    /// Whether the character at the cursor ends a plain scalar on this line.
    fn ends_plain(&self) -> bool {
        let (c, next) = (self.ch(0), self.ch(1));
        if c == ':' && is_blankz(next) {
            return true;
        }
        if self.flow_level == 0 {
            return false;
        }
        match self.dialect {
            Dialect::GoYamlV2 => matches!(c, ',' | '?' | '[' | ']' | '{' | '}'),
            Dialect::LibYaml => matches!(c, ',' | '[' | ']' | '{' | '}'),
        }
    }

    /// libyaml 0.2.5 refuses `x:` followed by a flow indicator inside a flow collection.
    fn unexpected_colon(&self) -> bool {
        self.dialect == Dialect::LibYaml
            && self.flow_level > 0
            && self.ch(0) == ':'
            && matches!(self.ch(1), ',' | '?' | '[' | ']' | '{' | '}')
    }

    pub(super) fn scan_plain_scalar(&mut self) -> ScanResult<Token> {
        let start = self.mark;
        let mut end = self.mark;
        let indent = self.indent + 1;
        let mut value = String::new();
        let mut leading_break = String::new();
        let mut trailing_breaks = String::new();
        let mut whitespaces = String::new();
        let mut leading_blanks = false;
        loop {
            if self.mark.column == 0 && self.at_document_indicator() {
                break;
            }
            if self.ch(0) == '#' {
                break;
            }
            while !is_blankz(self.ch(0)) {
                if self.unexpected_colon() {
                    return Err(self.error(
                        "while scanning a plain scalar",
                        start,
                        "found unexpected ':'",
                    ));
                }
                if self.ends_plain() {
                    break;
                }
                if leading_blanks || !whitespaces.is_empty() {
                    if leading_blanks {
                        fold_breaks(&mut value, &leading_break, &trailing_breaks);
                        leading_break.clear();
                        trailing_breaks.clear();
                        leading_blanks = false;
                    } else {
                        value.push_str(&whitespaces);
                        whitespaces.clear();
                    }
                }
                self.read(&mut value);
                end = self.mark;
            }
            if !(is_blank(self.ch(0)) || is_break(self.ch(0))) {
                break;
            }
            while is_blank(self.ch(0)) || is_break(self.ch(0)) {
                if is_blank(self.ch(0)) {
                    if leading_blanks && (self.mark.column as i64) < indent && self.ch(0) == '\t' {
                        return Err(self.error(
                            "while scanning a plain scalar",
                            start,
                            "found a tab character that violates indentation",
                        ));
                    }
                    if leading_blanks {
                        self.skip();
                    } else {
                        self.read(&mut whitespaces);
                    }
                } else if leading_blanks {
                    self.read_line(&mut trailing_breaks);
                } else {
                    whitespaces.clear();
                    self.read_line(&mut leading_break);
                    leading_blanks = true;
                }
            }
            if self.flow_level == 0 && (self.mark.column as i64) < indent {
                break;
            }
        }
        if leading_blanks {
            self.simple_key_allowed = true;
        }
        Ok(Token {
            kind: TokenKind::Scalar {
                value,
                style: ScalarStyle::Plain,
            },
            start,
            end,
        })
    }
}

/// Line folding of flow and plain scalars: one line break becomes a space, further breaks
/// are kept; a break that is not LF (LS, PS) is kept as is.
fn fold_breaks(value: &mut String, leading_break: &str, trailing_breaks: &str) {
    if leading_break.starts_with('\n') {
        if trailing_breaks.is_empty() {
            value.push(' ');
        } else {
            value.push_str(trailing_breaks);
        }
    } else {
        value.push_str(leading_break);
        value.push_str(trailing_breaks);
    }
}
