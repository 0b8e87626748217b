//! The parser of Go's `text/template/parse`: the same grammar, checks and error texts
//! (`template: file:LINE: unexpected "}" in operand`, `function "x" not defined`,
//! `undefined variable "$x"`, `missing value for if`, `{{break}} outside {{range}}`).
//! One parse yields the file's tree plus one tree per `define` and `block`.
use std::sync::Arc;

use super::lex::{lex, Item, ItemType};
use super::node::*;
use crate::funcs;
use crate::value::Str;

/// A parse error, already formatted as Go's `template: file:LINE: message`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct ParseError(pub String);

/// Parses `text` as template `name`; `parse_name` names the file in errors.
pub fn parse(name: &str, parse_name: &str, text: &str) -> Result<Vec<Tree>, ParseError> {
    let items = lex(text);
    let mut p = Parser {
        items,
        i: 0,
        furthest: 0,
        parse_name: Str::from(parse_name),
        text: Arc::from(text),
        vars: vec![Str::from("$")],
        range_depth: 0,
        action_line: 0,
        trees: Vec::new(),
        depth: 0,
    };
    let root = p.parse_top()?;
    let tree = Tree {
        name: Str::from(name),
        parse_name: p.parse_name.clone(),
        text: p.text.clone(),
        root,
    };
    p.add(tree)?;
    Ok(p.trees)
}

struct Parser<'a> {
    items: Vec<Item<'a>>,
    i: usize,
    furthest: usize,
    parse_name: Str,
    text: Arc<str>,
    vars: Vec<Str>,
    range_depth: usize,
    action_line: u32,
    trees: Vec<Tree>,
    /// Nesting of pipelines and control structures, bounded so hostile text
    /// cannot exhaust the stack.
    depth: usize,
}

type PResult<T> = Result<T, ParseError>;

/// How deep pipelines and control structures may nest (Go has no limit; real
/// templates stay far below this).
const MAX_NESTING: usize = 500;

/// What `itemList` stopped at.
enum Stop {
    End,
    Else,
}

enum ListItem {
    Node(Node),
    End,
    Else,
}

impl<'a> Parser<'a> {
    fn item(&self, i: usize) -> Item<'a> {
        match self.items.get(i) {
            Some(it) => it.clone(),
            None => self.items.last().cloned().unwrap_or(Item {
                typ: ItemType::Eof,
                pos: 0,
                val: std::borrow::Cow::Borrowed(""),
                line: 1,
            }),
        }
    }
    fn next(&mut self) -> Item<'a> {
        let it = self.item(self.i);
        self.furthest = self
            .furthest
            .max(self.i.min(self.items.len().saturating_sub(1)));
        if self.i < self.items.len().saturating_sub(1) || it.typ != ItemType::Eof {
            self.i += 1;
        }
        it
    }
    fn backup(&mut self) {
        self.i = self.i.saturating_sub(1);
    }
    fn peek(&mut self) -> Item<'a> {
        let it = self.item(self.i);
        self.furthest = self.furthest.max(self.i);
        it
    }
    fn next_non_space(&mut self) -> Item<'a> {
        loop {
            let t = self.next();
            if t.typ != ItemType::Space {
                return t;
            }
        }
    }
    fn peek_non_space(&mut self) -> Item<'a> {
        let t = self.next_non_space();
        self.backup();
        t
    }

    fn errorf(&self, msg: String) -> ParseError {
        let line = self.item(self.furthest).line;
        ParseError(format!("template: {}:{}: {}", self.parse_name, line, msg))
    }

    fn unexpected(&self, token: &Item, context: &str) -> ParseError {
        if token.typ == ItemType::Error {
            let mut extra = String::new();
            if self.action_line != 0 && self.action_line != token.line {
                extra = format!(
                    " in action started at {}:{}",
                    self.parse_name, self.action_line
                );
                if token.val.ends_with(" action") {
                    extra = extra[" in action".len()..].to_string();
                }
            }
            return self.errorf(format!("{token}{extra}"));
        }
        self.errorf(format!("unexpected {token} in {context}"))
    }

    fn expect(&mut self, typ: ItemType, context: &str) -> PResult<Item<'a>> {
        let t = self.next_non_space();
        if t.typ != typ {
            return Err(self.unexpected(&t, context));
        }
        Ok(t)
    }

    fn add(&mut self, tree: Tree) -> PResult<()> {
        if let Some(k) = self.trees.iter().position(|t| t.name == tree.name) {
            if self.trees[k].is_empty() {
                self.trees[k] = tree;
                return Ok(());
            }
            if !tree.is_empty() {
                return Err(self.errorf(format!(
                    "template: multiple definition of template {}",
                    crate::value::format::quote(&tree.name, false)
                )));
            }
            return Ok(());
        }
        self.trees.push(tree);
        Ok(())
    }

    fn parse_top(&mut self) -> PResult<Vec<Node>> {
        let mut root = Vec::new();
        while self.peek().typ != ItemType::Eof {
            if self.peek().typ == ItemType::LeftDelim {
                let save = self.i;
                self.next();
                if self.next_non_space().typ == ItemType::Define {
                    self.parse_definition()?;
                    continue;
                }
                self.i = save;
            }
            match self.text_or_action()? {
                ListItem::Node(n) => root.push(n),
                ListItem::End => return Err(self.errorf("unexpected {{end}}".into())),
                ListItem::Else => return Err(self.errorf("unexpected {{else}}".into())),
            }
        }
        Ok(root)
    }

    fn parse_definition(&mut self) -> PResult<()> {
        const CONTEXT: &str = "define clause";
        let t = self.next_non_space();
        if t.typ != ItemType::String && t.typ != ItemType::RawString {
            return Err(self.unexpected(&t, CONTEXT));
        }
        let name = unquote(&t.val).map_err(|e| self.errorf(e))?;
        self.expect(ItemType::RightDelim, CONTEXT)?;
        let saved_vars = std::mem::replace(&mut self.vars, vec![Str::from("$")]);
        let saved_range = std::mem::replace(&mut self.range_depth, 0);
        let (list, stop) = self.item_list()?;
        self.vars = saved_vars;
        self.range_depth = saved_range;
        if !matches!(stop, Stop::End) {
            return Err(self.errorf(format!("unexpected {{{{else}}}} in {CONTEXT}")));
        }
        let tree = Tree {
            name: Str::from(name.as_str()),
            parse_name: self.parse_name.clone(),
            text: self.text.clone(),
            root: list,
        };
        self.add(tree)
    }

    fn item_list(&mut self) -> PResult<(Vec<Node>, Stop)> {
        let mut list = Vec::new();
        while self.peek_non_space().typ != ItemType::Eof {
            match self.text_or_action()? {
                ListItem::Node(n) => list.push(n),
                ListItem::End => return Ok((list, Stop::End)),
                ListItem::Else => return Ok((list, Stop::Else)),
            }
        }
        Err(self.errorf("unexpected EOF".into()))
    }

    fn text_or_action(&mut self) -> PResult<ListItem> {
        let token = self.next_non_space();
        match token.typ {
            ItemType::Text => Ok(ListItem::Node(Node::Text(Arc::from(token.val.as_ref())))),
            ItemType::LeftDelim => {
                self.action_line = token.line;
                let r = self.action();
                self.action_line = 0;
                r
            }
            _ => Err(self.unexpected(&token, "input")),
        }
    }

    fn action(&mut self) -> PResult<ListItem> {
        let token = self.next_non_space();
        match token.typ {
            ItemType::Block => return self.block_control().map(ListItem::Node),
            ItemType::Break | ItemType::Continue => {
                let what = if token.typ == ItemType::Break {
                    "break"
                } else {
                    "continue"
                };
                let t = self.next_non_space();
                if t.typ != ItemType::RightDelim {
                    return Err(self.unexpected(&t, &format!("{{{{{what}}}}}")));
                }
                if self.range_depth == 0 {
                    return Err(self.errorf(format!("{{{{{what}}}}} outside {{{{range}}}}")));
                }
                return Ok(ListItem::Node(if what == "break" {
                    Node::Break(token.pos)
                } else {
                    Node::Continue(token.pos)
                }));
            }
            ItemType::Else => {
                let peek = self.peek_non_space();
                if peek.typ == ItemType::If || peek.typ == ItemType::With {
                    return Ok(ListItem::Else);
                }
                self.expect(ItemType::RightDelim, "else")?;
                return Ok(ListItem::Else);
            }
            ItemType::End => {
                self.expect(ItemType::RightDelim, "end")?;
                return Ok(ListItem::End);
            }
            ItemType::If => return self.control("if").map(|b| ListItem::Node(Node::If(b))),
            ItemType::Range => {
                return self
                    .control("range")
                    .map(|b| ListItem::Node(Node::Range(b)))
            }
            ItemType::With => return self.control("with").map(|b| ListItem::Node(Node::With(b))),
            ItemType::Template => return self.template_control().map(ListItem::Node),
            _ => {}
        }
        self.backup();
        let token = self.peek();
        let pipe = self.pipeline("command", ItemType::RightDelim)?;
        Ok(ListItem::Node(Node::Action(Action {
            pos: token.pos,
            pipe,
        })))
    }

    fn control(&mut self, context: &str) -> PResult<Branch> {
        let mark = self.vars.len();
        self.depth += 1;
        let r = if self.depth > MAX_NESTING {
            Err(self.errorf(format!(
                "{context} nested more than {MAX_NESTING} levels deep"
            )))
        } else {
            stacker::maybe_grow(64 * 1024, 1024 * 1024, || self.control_inner(context))
        };
        self.depth -= 1;
        self.vars.truncate(mark);
        r
    }

    fn control_inner(&mut self, context: &str) -> PResult<Branch> {
        let pipe = self.pipeline(context, ItemType::RightDelim)?;
        if context == "range" {
            self.range_depth += 1;
        }
        let listed = self.item_list();
        if context == "range" {
            self.range_depth -= 1;
        }
        let (list, stop) = listed?;
        let mut else_list = None;
        if let Stop::Else = stop {
            if context == "if" && self.peek().typ == ItemType::If {
                self.next();
                let b = self.control("if")?;
                else_list = Some(vec![Node::If(b)]);
            } else if context == "with" && self.peek().typ == ItemType::With {
                self.next();
                let b = self.control("with")?;
                else_list = Some(vec![Node::With(b)]);
            } else {
                let (l, stop2) = self.item_list()?;
                if !matches!(stop2, Stop::End) {
                    return Err(self.errorf("expected end; found {{else}}".into()));
                }
                else_list = Some(l);
            }
        }
        Ok(Branch {
            pos: pipe.pos,
            pipe,
            list,
            else_list,
        })
    }

    fn template_name(&self, token: &Item, context: &str) -> PResult<String> {
        match token.typ {
            ItemType::String | ItemType::RawString => {
                unquote(&token.val).map_err(|e| self.errorf(e))
            }
            _ => Err(self.unexpected(token, context)),
        }
    }

    fn template_control(&mut self) -> PResult<Node> {
        const CONTEXT: &str = "template clause";
        let token = self.next_non_space();
        let name = self.template_name(&token, CONTEXT)?;
        let mut pipe = None;
        if self.next_non_space().typ != ItemType::RightDelim {
            self.backup();
            pipe = Some(self.pipeline(CONTEXT, ItemType::RightDelim)?);
        }
        Ok(Node::Template(TemplateCall {
            pos: token.pos,
            name: Str::from(name.as_str()),
            pipe,
        }))
    }

    fn block_control(&mut self) -> PResult<Node> {
        const CONTEXT: &str = "block clause";
        let token = self.next_non_space();
        let name = self.template_name(&token, CONTEXT)?;
        let pipe = self.pipeline(CONTEXT, ItemType::RightDelim)?;
        let saved_vars = std::mem::replace(&mut self.vars, vec![Str::from("$")]);
        let saved_range = std::mem::replace(&mut self.range_depth, 0);
        let listed = self.item_list();
        self.vars = saved_vars;
        self.range_depth = saved_range;
        let (list, stop) = listed?;
        if !matches!(stop, Stop::End) {
            return Err(self.errorf(format!("unexpected {{{{else}}}} in {CONTEXT}")));
        }
        self.add(Tree {
            name: Str::from(name.as_str()),
            parse_name: self.parse_name.clone(),
            text: self.text.clone(),
            root: list,
        })?;
        Ok(Node::Template(TemplateCall {
            pos: token.pos,
            name: Str::from(name.as_str()),
            pipe: Some(pipe),
        }))
    }

    fn pipeline(&mut self, context: &str, end: ItemType) -> PResult<Pipe> {
        self.depth += 1;
        let r = stacker::maybe_grow(64 * 1024, 1024 * 1024, || self.pipeline_inner(context, end));
        self.depth -= 1;
        r
    }

    fn pipeline_inner(&mut self, context: &str, end: ItemType) -> PResult<Pipe> {
        if self.depth > MAX_NESTING {
            return Err(self.errorf(format!(
                "{context} nested more than {MAX_NESTING} levels deep"
            )));
        }
        let token = self.peek_non_space();
        let mut pipe = Pipe {
            pos: token.pos,
            is_assign: false,
            decl: Vec::new(),
            cmds: Vec::new(),
        };
        // Declarations or assignments.
        loop {
            let v = self.peek_non_space();
            if v.typ != ItemType::Variable {
                break;
            }
            let save = self.i;
            self.next_non_space();
            let token_after = self.peek();
            let next = self.peek_non_space();
            match next.typ {
                ItemType::Assign | ItemType::Declare => {
                    pipe.is_assign = next.typ == ItemType::Assign;
                    self.next_non_space();
                    pipe.decl.push(Str::from(v.val.as_ref()));
                    self.vars.push(Str::from(v.val.as_ref()));
                    break;
                }
                ItemType::Char if next.val == "," => {
                    self.next_non_space();
                    pipe.decl.push(Str::from(v.val.as_ref()));
                    self.vars.push(Str::from(v.val.as_ref()));
                    if context == "range" && pipe.decl.len() < 2 {
                        match self.peek_non_space().typ {
                            ItemType::Variable | ItemType::RightDelim | ItemType::RightParen => {
                                continue
                            }
                            _ => {
                                return Err(
                                    self.errorf("range can only initialize variables".into())
                                )
                            }
                        }
                    }
                    return Err(self.errorf(format!("too many declarations in {context}")));
                }
                _ => {
                    let _ = token_after;
                    self.i = save;
                    break;
                }
            }
        }
        loop {
            let token = self.next_non_space();
            if token.typ == end {
                self.check_pipeline(&pipe, context)?;
                return Ok(pipe);
            }
            match token.typ {
                ItemType::Bool
                | ItemType::CharConstant
                | ItemType::Complex
                | ItemType::Dot
                | ItemType::Field
                | ItemType::Identifier
                | ItemType::Number
                | ItemType::Nil
                | ItemType::RawString
                | ItemType::String
                | ItemType::Variable
                | ItemType::LeftParen => {
                    self.backup();
                    let c = self.command()?;
                    pipe.cmds.push(c);
                }
                _ => return Err(self.unexpected(&token, context)),
            }
        }
    }

    fn check_pipeline(&self, pipe: &Pipe, context: &str) -> PResult<()> {
        if pipe.cmds.is_empty() {
            return Err(self.errorf(format!("missing value for {context}")));
        }
        for (i, c) in pipe.cmds.iter().enumerate().skip(1) {
            if matches!(
                c.args.first(),
                Some(
                    Arg::Bool(..)
                        | Arg::Dot(_)
                        | Arg::Nil(_)
                        | Arg::Number(..)
                        | Arg::String { .. }
                )
            ) {
                return Err(self.errorf(format!(
                    "non executable command in pipeline stage {}",
                    i + 1
                )));
            }
        }
        Ok(())
    }

    fn command(&mut self) -> PResult<Command> {
        let pos = self.peek_non_space().pos;
        let mut cmd = Command {
            pos,
            args: Vec::new(),
        };
        loop {
            self.peek_non_space();
            if let Some(op) = self.operand()? {
                cmd.args.push(op);
            }
            let token = self.next();
            match token.typ {
                ItemType::Space => continue,
                ItemType::RightDelim | ItemType::RightParen => self.backup(),
                ItemType::Pipe => {}
                _ => return Err(self.unexpected(&token, "operand")),
            }
            break;
        }
        if cmd.args.is_empty() {
            return Err(self.errorf("empty command".into()));
        }
        Ok(cmd)
    }

    fn operand(&mut self) -> PResult<Option<Arg>> {
        let Some(node) = self.term()? else {
            return Ok(None);
        };
        if self.peek().typ == ItemType::Field {
            let chain_pos = self.peek().pos;
            let mut fields: Vec<Str> = Vec::new();
            while self.peek().typ == ItemType::Field {
                let f = self.next();
                fields.push(Str::from(&f.val[1..]));
            }
            return Ok(Some(match node {
                Arg::Field { mut idents, .. } => {
                    idents.extend(fields);
                    Arg::Field {
                        pos: chain_pos,
                        idents,
                    }
                }
                Arg::Variable { mut idents, .. } => {
                    idents.extend(fields);
                    Arg::Variable {
                        pos: chain_pos,
                        idents,
                    }
                }
                Arg::Bool(..)
                | Arg::String { .. }
                | Arg::Number(..)
                | Arg::Nil(_)
                | Arg::Dot(_) => {
                    return Err(self.errorf(format!(
                        "unexpected . after term {}",
                        crate::value::format::quote(&node.to_string(), false)
                    )));
                }
                other => Arg::Chain {
                    pos: chain_pos,
                    node: Box::new(other),
                    fields,
                },
            }));
        }
        Ok(Some(node))
    }

    fn term(&mut self) -> PResult<Option<Arg>> {
        let token = self.next_non_space();
        let pos = token.pos;
        Ok(Some(match token.typ {
            ItemType::Identifier => match funcs::lookup(&token.val) {
                Some(func) => Arg::Ident {
                    pos,
                    name: Str::from(token.val.as_ref()),
                    func,
                },
                None => {
                    return Err(self.errorf(format!(
                        "function {} not defined",
                        crate::value::format::quote(&token.val, false)
                    )))
                }
            },
            ItemType::Dot => Arg::Dot(pos),
            ItemType::Nil => Arg::Nil(pos),
            ItemType::Variable => {
                let idents: Vec<Str> = token.val.split('.').map(Str::from).collect();
                if !self.vars.iter().any(|v| **v == *idents[0]) {
                    return Err(self.errorf(format!(
                        "undefined variable {}",
                        crate::value::format::quote(&idents[0], false)
                    )));
                }
                Arg::Variable { pos, idents }
            }
            ItemType::Field => Arg::Field {
                pos,
                idents: vec![Str::from(&token.val[1..])],
            },
            ItemType::Bool => Arg::Bool(pos, token.val == "true"),
            ItemType::CharConstant | ItemType::Complex | ItemType::Number => {
                let n = new_number(&token.val, token.typ).map_err(|e| self.errorf(e))?;
                Arg::Number(pos, n)
            }
            ItemType::LeftParen => Arg::Pipe(Box::new(
                self.pipeline("parenthesized pipeline", ItemType::RightParen)?,
            )),
            ItemType::String | ItemType::RawString => {
                let s = unquote(&token.val).map_err(|e| self.errorf(e))?;
                Arg::String {
                    pos,
                    quoted: Str::from(token.val.as_ref()),
                    text: Str::from(s.as_str()),
                }
            }
            _ => {
                self.backup();
                return Ok(None);
            }
        }))
    }
}

/// Go's `strconv.Unquote` for "double-quoted" and `raw` strings.
pub fn unquote(s: &str) -> Result<String, String> {
    let bad = || "invalid syntax".to_string();
    if s.len() >= 2 && s.starts_with('`') && s.ends_with('`') {
        return Ok(s[1..s.len() - 1].replace('\r', ""));
    }
    if s.len() < 2 || !s.starts_with('"') || !s.ends_with('"') {
        return Err(bad());
    }
    let body = &s[1..s.len() - 1];
    let mut out: Vec<u8> = Vec::with_capacity(body.len());
    let mut rest = body;
    while !rest.is_empty() {
        let (bytes, tail) = unquote_char(rest, '"').ok_or_else(bad)?;
        out.extend_from_slice(&bytes);
        rest = tail;
    }
    String::from_utf8(out).map_err(|_| bad())
}

/// Go's `strconv.UnquoteChar`: one (possibly escaped) character, as UTF-8 bytes.
fn unquote_char(s: &str, quote: char) -> Option<(Vec<u8>, &str)> {
    let c = s.chars().next()?;
    if c == quote && (quote == '\'' || quote == '"') {
        return None;
    }
    if c != '\\' {
        let mut b = [0u8; 4];
        return Some((
            c.encode_utf8(&mut b).as_bytes().to_vec(),
            &s[c.len_utf8()..],
        ));
    }
    let b = s.as_bytes();
    if b.len() < 2 {
        return None;
    }
    let e = b[1];
    let tail = &s[2..];
    let simple = |v: u8| Some((vec![v], tail));
    match e {
        b'a' => simple(7),
        b'b' => simple(8),
        b'f' => simple(12),
        b'n' => simple(b'\n'),
        b'r' => simple(b'\r'),
        b't' => simple(b'\t'),
        b'v' => simple(11),
        b'\\' => simple(b'\\'),
        b'\'' | b'"' => {
            if e as char != quote {
                return None;
            }
            simple(e)
        }
        b'x' | b'u' | b'U' => {
            let n = match e {
                b'x' => 2,
                b'u' => 4,
                _ => 8,
            };
            if tail.len() < n {
                return None;
            }
            let v = u32::from_str_radix(&tail[..n], 16).ok()?;
            if !tail[..n].bytes().all(|c| c.is_ascii_hexdigit()) {
                return None;
            }
            if e == b'x' {
                return Some((vec![v as u8], &tail[n..]));
            }
            let ch = char::from_u32(v)?;
            let mut buf = [0u8; 4];
            Some((ch.encode_utf8(&mut buf).as_bytes().to_vec(), &tail[n..]))
        }
        b'0'..=b'7' => {
            if s.len() < 4 {
                return None;
            }
            let oct = &s[1..4];
            if !oct.bytes().all(|c| (b'0'..=b'7').contains(&c)) {
                return None;
            }
            let v = u32::from_str_radix(oct, 8).ok()?;
            if v > 255 {
                return None;
            }
            Some((vec![v as u8], &s[4..]))
        }
        _ => None,
    }
}

/// Go's `underscoreOK`: underscores only between digits or after a base prefix.
fn underscore_ok(s: &str) -> bool {
    let b = s.as_bytes();
    let mut saw = b'^';
    let mut i = 0;
    if !b.is_empty() && (b[0] == b'-' || b[0] == b'+') {
        i = 1;
    }
    let mut hex = false;
    if b.len() - i >= 2 && b[i] == b'0' && matches!(b[i + 1] | 0x20, b'b' | b'o' | b'x') {
        i += 2;
        saw = b'0';
        hex = (b[i - 1] | 0x20) == b'x';
    }
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_digit() || (hex && c.is_ascii_hexdigit()) {
            saw = b'0';
        } else if c == b'_' {
            if saw != b'0' {
                return false;
            }
            saw = b'_';
        } else {
            if saw == b'_' {
                return false;
            }
            saw = b'!';
        }
        i += 1;
    }
    saw != b'_'
}

/// `strconv.ParseUint(s, 0, 64)` (no sign).
fn parse_uint(s: &str) -> Option<u64> {
    if s.is_empty() || s.starts_with('+') || s.starts_with('-') {
        return None;
    }
    let (base, digits) = if s.len() >= 2 && s.as_bytes()[0] == b'0' {
        match s.as_bytes()[1] | 0x20 {
            b'x' => (16, &s[2..]),
            b'o' => (8, &s[2..]),
            b'b' => (2, &s[2..]),
            _ => (8, &s[1..]),
        }
    } else {
        (10, s)
    };
    if s.contains('_') && !underscore_ok(s) {
        return None;
    }
    let digits: String = digits.chars().filter(|&c| c != '_').collect();
    if digits.is_empty() {
        return if base == 8 && s == "0" { Some(0) } else { None };
    }
    u64::from_str_radix(&digits, base).ok()
}

/// `strconv.ParseInt(s, 0, 64)`.
fn parse_int(s: &str) -> Option<i64> {
    let (neg, body) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if s.contains('_') && !underscore_ok(s) {
        return None;
    }
    let u = parse_uint(body)?;
    if neg {
        if u <= (i64::MAX as u64) + 1 {
            Some((u as i128).wrapping_neg() as i64)
        } else {
            None
        }
    } else {
        i64::try_from(u).ok()
    }
}

/// `strconv.ParseFloat(s, 64)` for Go number syntax (decimal and hexadecimal).
fn parse_float(s: &str) -> Option<f64> {
    if s.contains('_') && !underscore_ok(s) {
        return None;
    }
    let clean: String = s.chars().filter(|&c| c != '_').collect();
    let (neg, body) = match clean.as_bytes().first() {
        Some(b'-') => (true, &clean[1..]),
        Some(b'+') => (false, &clean[1..]),
        _ => (false, clean.as_str()),
    };
    let v = if body.len() > 2 && (body.starts_with("0x") || body.starts_with("0X")) {
        parse_hex_float(&body[2..])?
    } else {
        if !body
            .bytes()
            .all(|c| c.is_ascii_digit() || matches!(c, b'.' | b'e' | b'E' | b'+' | b'-'))
        {
            return None;
        }
        body.parse::<f64>().ok()?
    };
    if v.is_infinite() {
        return None;
    }
    Some(if neg { -v } else { v })
}

fn parse_hex_float(s: &str) -> Option<f64> {
    let (mant, exp) = match s.find(['p', 'P']) {
        Some(i) => (&s[..i], s[i + 1..].parse::<i32>().ok()?),
        None => (s, 0),
    };
    let (int, frac) = mant.split_once('.').unwrap_or((mant, ""));
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    let mut m: f64 = 0.0;
    for c in int.chars().chain(frac.chars()) {
        m = m * 16.0 + f64::from(c.to_digit(16)?);
    }
    Some(m * 2f64.powi(exp - 4 * frac.len() as i32))
}

/// Go's `newNumber`: every type the literal can take.
fn new_number(text: &str, typ: ItemType) -> Result<Number, String> {
    let mut n = Number {
        text: Str::from(text),
        int: None,
        uint: None,
        float: None,
        complex: false,
    };
    match typ {
        ItemType::CharConstant => {
            let inner = &text[1..];
            let (bytes, tail) =
                unquote_char(inner, '\'').ok_or_else(|| "invalid syntax".to_string())?;
            if tail != "'" {
                return Err(format!("malformed character constant: {text}"));
            }
            let ch = std::str::from_utf8(&bytes)
                .ok()
                .and_then(|s| s.chars().next())
                .map(|c| c as u32)
                .unwrap_or_else(|| u32::from(bytes.first().copied().unwrap_or(0)));
            n.int = Some(i64::from(ch));
            n.uint = Some(u64::from(ch));
            n.float = Some(f64::from(ch));
            return Ok(n);
        }
        ItemType::Complex => {
            n.complex = true;
            return Ok(n);
        }
        _ => {}
    }
    if let Some(body) = text.strip_suffix('i') {
        if parse_float(body).is_some() {
            n.complex = true;
            return Ok(n);
        }
    }
    let u = parse_uint(text);
    if let Some(u) = u {
        n.uint = Some(u);
    }
    if let Some(i) = parse_int(text) {
        n.int = Some(i);
        if i == 0 {
            n.uint = Some(u.unwrap_or(0));
        }
    }
    if let Some(i) = n.int {
        n.float = Some(i as f64);
    } else if let Some(u) = n.uint {
        n.float = Some(u as f64);
    } else if let Some(f) = parse_float(text) {
        if !text.contains(['.', 'e', 'E', 'p', 'P']) {
            return Err(format!("integer overflow: {text}"));
        }
        n.float = Some(f);
        if f.fract() == 0.0 && (-9.223372036854776e18..9.223372036854776e18).contains(&f) {
            n.int = Some(f as i64);
        }
        if f.fract() == 0.0 && (0.0..1.8446744073709552e19).contains(&f) {
            n.uint = Some(f as u64);
        }
    }
    if n.int.is_none() && n.uint.is_none() && n.float.is_none() {
        return Err(format!(
            "illegal number syntax: {}",
            crate::value::format::quote(text, false)
        ));
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers() {
        let n = new_number("0x1F", ItemType::Number).unwrap();
        assert_eq!(n.int, Some(31));
        assert_eq!(new_number("017", ItemType::Number).unwrap().int, Some(15));
        assert_eq!(
            new_number("1_000", ItemType::Number).unwrap().int,
            Some(1000)
        );
        assert_eq!(
            new_number("0x1p4", ItemType::Number).unwrap().float,
            Some(16.0)
        );
        let n = new_number("1e3", ItemType::Number).unwrap();
        assert_eq!((n.int, n.float), (Some(1000), Some(1000.0)));
        assert!(new_number("1i", ItemType::Number).unwrap().complex);
        assert_eq!(
            new_number("'a'", ItemType::CharConstant).unwrap().int,
            Some(97)
        );
        assert!(new_number("99999999999999999999", ItemType::Number).is_err());
    }

    #[test]
    fn parse_errors_read_like_go() {
        let e = |s: &str| parse("t", "t", s).unwrap_err().0;
        assert_eq!(e("{{ if }}"), "template: t:1: missing value for if");
        assert_eq!(
            e("{{ nope }}"),
            "template: t:1: function \"nope\" not defined"
        );
        assert_eq!(e("{{ $x }}"), "template: t:1: undefined variable \"$x\"");
        assert_eq!(e("{{ end }}"), "template: t:1: unexpected {{end}}");
        assert_eq!(
            e("\n{{ break }}"),
            "template: t:2: {{break}} outside {{range}}"
        );
        assert_eq!(e("{{ if true }}"), "template: t:1: unexpected EOF");
    }

    #[test]
    fn defines_are_separate_trees() {
        let trees = parse("f", "f", "{{ define \"a\" }}x{{ end }}y").unwrap();
        let names: Vec<&str> = trees.iter().map(|t| t.name.as_ref()).collect();
        assert_eq!(names, vec!["a", "f"]);
    }
}
