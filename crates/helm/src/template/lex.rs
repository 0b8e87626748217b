//! The lexer of Go's `text/template/parse`, producing the same items with the same
//! positions (byte offsets) and line numbers, including trim markers (`{{- ` and
//! ` -}}` eat the adjacent white space) and comments.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ItemType {
    Error,
    Bool,
    Char,
    CharConstant,
    Comment,
    Complex,
    Assign,
    Declare,
    Eof,
    Field,
    Identifier,
    LeftDelim,
    LeftParen,
    Number,
    Pipe,
    RawString,
    RightDelim,
    RightParen,
    Space,
    String,
    Text,
    Variable,
    // Keywords (Go's itemKeyword and above).
    Block,
    Break,
    Continue,
    Dot,
    Define,
    Else,
    End,
    If,
    Nil,
    Range,
    Template,
    With,
}

impl ItemType {
    pub fn is_keyword(self) -> bool {
        matches!(
            self,
            ItemType::Block
                | ItemType::Break
                | ItemType::Continue
                | ItemType::Dot
                | ItemType::Define
                | ItemType::Else
                | ItemType::End
                | ItemType::If
                | ItemType::Nil
                | ItemType::Range
                | ItemType::Template
                | ItemType::With
        )
    }
}

#[derive(Clone, Debug)]
pub struct Item<'a> {
    pub typ: ItemType,
    pub pos: u32,
    /// The item's text; for errors, the message.
    pub val: std::borrow::Cow<'a, str>,
    pub line: u32,
}

impl std::fmt::Display for Item<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.typ {
            ItemType::Eof => write!(f, "EOF"),
            ItemType::Error => write!(f, "{}", self.val),
            t if t.is_keyword() => write!(f, "<{}>", self.val),
            _ => {
                if self.val.chars().count() > 10 {
                    let head: String = self.val.chars().take(10).collect();
                    write!(f, "{}...", crate::value::format::quote(&head, false))
                } else {
                    write!(f, "{}", crate::value::format::quote(&self.val, false))
                }
            }
        }
    }
}

const LEFT: &str = "{{";
const RIGHT: &str = "}}";

fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\r' | b'\n')
}

fn is_alnum(c: char) -> bool {
    c == '_' || c.is_alphabetic() || c.is_numeric()
}

fn keyword(word: &str) -> Option<ItemType> {
    Some(match word {
        "block" => ItemType::Block,
        "break" => ItemType::Break,
        "continue" => ItemType::Continue,
        "define" => ItemType::Define,
        "else" => ItemType::Else,
        "end" => ItemType::End,
        "if" => ItemType::If,
        "range" => ItemType::Range,
        "nil" => ItemType::Nil,
        "template" => ItemType::Template,
        "with" => ItemType::With,
        _ => return None,
    })
}

/// Lexes the whole input. The list ends with an EOF or an error item.
pub fn lex(input: &str) -> Vec<Item<'_>> {
    let mut l = Lexer {
        input,
        b: input.as_bytes(),
        start: 0,
        pos: 0,
        line: 1,
        start_line: 1,
        items: Vec::new(),
        paren_depth: 0,
    };
    l.run();
    l.items
}

struct Lexer<'a> {
    input: &'a str,
    b: &'a [u8],
    start: usize,
    pos: usize,
    line: u32,
    start_line: u32,
    items: Vec<Item<'a>>,
    paren_depth: i32,
}

enum State {
    Text,
    LeftDelim,
    Comment,
    RightDelim,
    InsideAction,
    Done,
}

impl<'a> Lexer<'a> {
    fn run(&mut self) {
        let mut state = State::Text;
        loop {
            state = match state {
                State::Text => self.lex_text(),
                State::LeftDelim => self.lex_left_delim(),
                State::Comment => self.lex_comment(),
                State::RightDelim => self.lex_right_delim(),
                State::InsideAction => self.lex_inside_action(),
                State::Done => return,
            }
        }
    }

    fn peek_char(&self) -> Option<char> {
        self.input[self.pos..].chars().next()
    }

    fn next_char(&mut self) -> Option<char> {
        let c = self.peek_char()?;
        self.pos += c.len_utf8();
        if c == '\n' {
            self.line += 1;
        }
        Some(c)
    }

    fn backup(&mut self, c: Option<char>) {
        if let Some(c) = c {
            self.pos -= c.len_utf8();
            if c == '\n' {
                self.line -= 1;
            }
        }
    }

    fn emit(&mut self, typ: ItemType) {
        let val = std::borrow::Cow::Borrowed(&self.input[self.start..self.pos]);
        self.items.push(Item {
            typ,
            pos: self.start as u32,
            val,
            line: self.start_line,
        });
        self.start = self.pos;
        self.start_line = self.line;
    }

    fn ignore(&mut self) {
        self.line += self.input[self.start..self.pos].matches('\n').count() as u32;
        self.start = self.pos;
        self.start_line = self.line;
    }

    fn error(&mut self, msg: String) -> State {
        self.items.push(Item {
            typ: ItemType::Error,
            pos: self.start as u32,
            val: std::borrow::Cow::Owned(msg),
            line: self.start_line,
        });
        State::Done
    }

    fn has_left_trim_marker(&self, at: usize) -> bool {
        self.b.len() >= at + 2 && self.b[at] == b'-' && is_space(self.b[at + 1])
    }

    fn has_right_trim_marker(&self, at: usize) -> bool {
        self.b.len() >= at + 2 && is_space(self.b[at]) && self.b[at + 1] == b'-'
    }

    fn at_right_delim(&self) -> (bool, bool) {
        if self.has_right_trim_marker(self.pos) && self.input[self.pos + 2..].starts_with(RIGHT) {
            return (true, true);
        }
        (self.input[self.pos..].starts_with(RIGHT), false)
    }

    fn lex_text(&mut self) -> State {
        if let Some(x) = self.input[self.pos..].find(LEFT) {
            if x > 0 {
                self.pos += x;
                let delim_end = self.pos + LEFT.len();
                let mut trim = 0;
                if self.has_left_trim_marker(delim_end) {
                    let text = &self.b[self.start..self.pos];
                    trim = text.len()
                        - text
                            .iter()
                            .rposition(|&c| !is_space(c))
                            .map_or(0, |p| p + 1);
                }
                self.pos -= trim;
                let text_end = self.pos;
                self.line += self.input[self.start..text_end].matches('\n').count() as u32;
                let val = std::borrow::Cow::Borrowed(&self.input[self.start..text_end]);
                let item = Item {
                    typ: ItemType::Text,
                    pos: self.start as u32,
                    val,
                    line: self.start_line,
                };
                self.start = text_end;
                self.start_line = self.line;
                self.pos += trim;
                self.ignore();
                if !item.val.is_empty() {
                    self.items.push(item);
                }
            }
            return State::LeftDelim;
        }
        self.pos = self.input.len();
        if self.pos > self.start {
            self.line += self.input[self.start..self.pos].matches('\n').count() as u32;
            let val = std::borrow::Cow::Borrowed(&self.input[self.start..self.pos]);
            self.items.push(Item {
                typ: ItemType::Text,
                pos: self.start as u32,
                val,
                line: self.start_line,
            });
            self.start = self.pos;
            self.start_line = self.line;
        }
        self.emit(ItemType::Eof);
        State::Done
    }

    fn lex_left_delim(&mut self) -> State {
        self.pos += LEFT.len();
        let trim = self.has_left_trim_marker(self.pos);
        let after_marker = if trim { 2 } else { 0 };
        if self.input[self.pos + after_marker..].starts_with("/*") {
            self.pos += after_marker;
            self.ignore();
            return State::Comment;
        }
        self.emit(ItemType::LeftDelim);
        self.pos += after_marker;
        self.ignore();
        self.paren_depth = 0;
        State::InsideAction
    }

    fn lex_comment(&mut self) -> State {
        self.pos += 2;
        let Some(x) = self.input[self.pos..].find("*/") else {
            return self.error("unclosed comment".into());
        };
        self.pos += x + 2;
        let (delim, trim) = self.at_right_delim();
        if !delim {
            return self.error("comment ends before closing delimiter".into());
        }
        // Comments are dropped (Helm does not ask for ParseComments). Like Go, the
        // newlines inside the comment are not counted.
        self.start = self.pos;
        self.start_line = self.line;
        if trim {
            self.pos += 2;
        }
        self.pos += RIGHT.len();
        if trim {
            while self.pos < self.b.len() && is_space(self.b[self.pos]) {
                self.pos += 1;
            }
        }
        self.ignore();
        State::Text
    }

    fn lex_right_delim(&mut self) -> State {
        let trim = self.has_right_trim_marker(self.pos);
        if trim {
            self.pos += 2;
            self.ignore();
        }
        self.pos += RIGHT.len();
        self.emit(ItemType::RightDelim);
        if trim {
            while self.pos < self.b.len() && is_space(self.b[self.pos]) {
                self.pos += 1;
            }
            self.ignore();
        }
        State::Text
    }

    fn lex_inside_action(&mut self) -> State {
        let (delim, _) = self.at_right_delim();
        if delim {
            if self.paren_depth == 0 {
                return State::RightDelim;
            }
            return self.error("unclosed left paren".into());
        }
        let r = self.next_char();
        match r {
            None => return self.error("unclosed action".into()),
            Some(c) if c.is_ascii() && is_space(c as u8) => {
                self.backup(r);
                return self.lex_space();
            }
            Some('=') => self.emit(ItemType::Assign),
            Some(':') => {
                if self.next_char() != Some('=') {
                    return self.error("expected :=".into());
                }
                self.emit(ItemType::Declare);
            }
            Some('|') => self.emit(ItemType::Pipe),
            Some('"') => return self.lex_quote(),
            Some('`') => return self.lex_raw_quote(),
            Some('$') => return self.lex_variable(),
            Some('\'') => return self.lex_char(),
            Some('.') => {
                let is_field = match self.b.get(self.pos) {
                    Some(c) => !c.is_ascii_digit(),
                    None => true,
                };
                if is_field {
                    return self.lex_field_or_variable(ItemType::Field);
                }
                self.backup(r);
                return self.lex_number();
            }
            Some(c) if c == '+' || c == '-' || c.is_ascii_digit() => {
                self.backup(r);
                return self.lex_number();
            }
            Some(c) if is_alnum(c) => {
                self.backup(r);
                return self.lex_identifier();
            }
            Some('(') => {
                self.emit(ItemType::LeftParen);
                self.paren_depth += 1;
            }
            Some(')') => {
                self.emit(ItemType::RightParen);
                self.paren_depth -= 1;
                if self.paren_depth < 0 {
                    return self.error("unexpected right paren".into());
                }
            }
            Some(c) if c.is_ascii() && !c.is_ascii_control() => self.emit(ItemType::Char),
            Some(c) => {
                return self.error(format!(
                    "unrecognized character in action: {}",
                    unicode_desc(c)
                ))
            }
        }
        State::InsideAction
    }

    fn lex_space(&mut self) -> State {
        let mut num = 0;
        while self.pos < self.b.len() && is_space(self.b[self.pos]) {
            let c = self.next_char();
            let _ = c;
            num += 1;
        }
        if self.has_right_trim_marker(self.pos - 1) && self.input[self.pos + 1..].starts_with(RIGHT)
        {
            self.backup(Some(self.b[self.pos - 1] as char));
            if num == 1 {
                return State::RightDelim;
            }
        }
        self.emit(ItemType::Space);
        State::InsideAction
    }

    fn at_terminator(&self) -> bool {
        match self.b.get(self.pos) {
            None => true,
            Some(&c) if is_space(c) => true,
            Some(b'.' | b',' | b'|' | b':' | b')' | b'(') => true,
            _ => self.input[self.pos..].starts_with(RIGHT),
        }
    }

    fn lex_identifier(&mut self) -> State {
        loop {
            let r = self.next_char();
            match r {
                Some(c) if is_alnum(c) => {}
                _ => {
                    self.backup(r);
                    let word = &self.input[self.start..self.pos];
                    if !self.at_terminator() {
                        let c = self.peek_char().unwrap_or('\0');
                        return self.error(format!("bad character {}", unicode_desc(c)));
                    }
                    let typ = if let Some(k) = keyword(word) {
                        k
                    } else if word == "true" || word == "false" {
                        ItemType::Bool
                    } else {
                        ItemType::Identifier
                    };
                    self.emit(typ);
                    return State::InsideAction;
                }
            }
        }
    }

    fn lex_variable(&mut self) -> State {
        if self.at_terminator() {
            self.emit(ItemType::Variable);
            return State::InsideAction;
        }
        self.lex_field_or_variable(ItemType::Variable)
    }

    fn lex_field_or_variable(&mut self, typ: ItemType) -> State {
        if self.at_terminator() {
            self.emit(if typ == ItemType::Variable {
                ItemType::Variable
            } else {
                ItemType::Dot
            });
            return State::InsideAction;
        }
        loop {
            let r = self.next_char();
            match r {
                Some(c) if is_alnum(c) => {}
                _ => {
                    self.backup(r);
                    break;
                }
            }
        }
        if !self.at_terminator() {
            let c = self.peek_char().unwrap_or('\0');
            return self.error(format!("bad character {}", unicode_desc(c)));
        }
        self.emit(typ);
        State::InsideAction
    }

    fn lex_char(&mut self) -> State {
        loop {
            match self.next_char() {
                Some('\\') => match self.next_char() {
                    Some('\n') | None => {
                        return self.error("unterminated character constant".into())
                    }
                    _ => {}
                },
                None | Some('\n') => return self.error("unterminated character constant".into()),
                Some('\'') => break,
                _ => {}
            }
        }
        self.emit(ItemType::CharConstant);
        State::InsideAction
    }

    fn accept(&mut self, valid: &str) -> bool {
        match self.b.get(self.pos) {
            Some(&c) if valid.as_bytes().contains(&c) => {
                self.pos += 1;
                true
            }
            _ => false,
        }
    }

    fn accept_run(&mut self, valid: &str) {
        while self.accept(valid) {}
    }

    fn scan_number(&mut self) -> bool {
        self.accept("+-");
        let mut digits = "0123456789_";
        if self.accept("0") {
            if self.accept("xX") {
                digits = "0123456789abcdefABCDEF_";
            } else if self.accept("oO") {
                digits = "01234567_";
            } else if self.accept("bB") {
                digits = "01_";
            }
        }
        self.accept_run(digits);
        if self.accept(".") {
            self.accept_run(digits);
        }
        if digits.len() == 11 && self.accept("eE") {
            self.accept("+-");
            self.accept_run("0123456789_");
        }
        if digits.len() == 23 && self.accept("pP") {
            self.accept("+-");
            self.accept_run("0123456789_");
        }
        self.accept("i");
        if let Some(c) = self.peek_char() {
            if is_alnum(c) {
                self.next_char();
                return false;
            }
        }
        true
    }

    fn lex_number(&mut self) -> State {
        if !self.scan_number() {
            let s = self.input[self.start..self.pos].to_string();
            return self.error(format!(
                "bad number syntax: {}",
                crate::value::format::quote(&s, false)
            ));
        }
        if matches!(self.b.get(self.pos), Some(b'+' | b'-')) {
            if !self.scan_number() || self.b[self.pos - 1] != b'i' {
                let s = self.input[self.start..self.pos].to_string();
                return self.error(format!(
                    "bad number syntax: {}",
                    crate::value::format::quote(&s, false)
                ));
            }
            self.emit(ItemType::Complex);
        } else {
            self.emit(ItemType::Number);
        }
        State::InsideAction
    }

    fn lex_quote(&mut self) -> State {
        loop {
            match self.next_char() {
                Some('\\') => match self.next_char() {
                    Some('\n') | None => return self.error("unterminated quoted string".into()),
                    _ => {}
                },
                None | Some('\n') => return self.error("unterminated quoted string".into()),
                Some('"') => break,
                _ => {}
            }
        }
        self.emit(ItemType::String);
        State::InsideAction
    }

    fn lex_raw_quote(&mut self) -> State {
        loop {
            match self.next_char() {
                None => return self.error("unterminated raw quoted string".into()),
                Some('`') => break,
                _ => {}
            }
        }
        self.emit(ItemType::RawString);
        State::InsideAction
    }
}

/// Go's `%#U`: `U+0023 '#'`.
fn unicode_desc(c: char) -> String {
    if crate::value::format::is_print(c) {
        format!("U+{:04X} '{}'", c as u32, c)
    } else {
        format!("U+{:04X}", c as u32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn types(s: &str) -> Vec<ItemType> {
        lex(s).into_iter().map(|i| i.typ).collect()
    }

    #[test]
    fn trims_and_comments() {
        let items = lex("a  {{- 1 -}}  b{{/* c */}}d");
        let texts: Vec<&str> = items
            .iter()
            .filter(|i| i.typ == ItemType::Text)
            .map(|i| i.val.as_ref())
            .collect();
        assert_eq!(texts, vec!["a", "b", "d"]);
    }

    #[test]
    fn action_items() {
        use ItemType::*;
        assert_eq!(
            types("{{ $x := .a.b | f 1 \"s\" }}"),
            vec![
                LeftDelim, Space, Variable, Space, Declare, Space, Field, Field, Space, Pipe,
                Space, Identifier, Space, Number, Space, String, Space, RightDelim, Eof
            ]
        );
    }
}
