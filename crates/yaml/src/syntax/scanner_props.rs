//! Scanning of node properties and directives: `%YAML`/`%TAG`, `&anchor`, `*alias`, `!tag`.

use super::chars::{is_alpha, is_blank, is_blankz, is_break, is_breakz};
use super::scanner::{ScanResult, Scanner};
use super::{Dialect, Token, TokenKind};

impl Scanner {
    pub(super) fn scan_directive(&mut self) -> ScanResult<Token> {
        let start = self.mark;
        self.skip();
        let name = self.scan_directive_name(start)?;
        let kind = match name.as_str() {
            "YAML" => {
                let (major, minor) = self.scan_version_directive_value(start)?;
                TokenKind::VersionDirective(major, minor)
            }
            "TAG" => {
                let (handle, prefix) = self.scan_tag_directive_value(start)?;
                TokenKind::TagDirective { handle, prefix }
            }
            _ => {
                return Err(self.error(
                    "while scanning a directive",
                    start,
                    "found unknown directive name",
                ))
            }
        };
        let end = self.mark;
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
                "while scanning a directive",
                start,
                "did not find expected comment or line break",
            ));
        }
        if is_break(self.ch(0)) {
            self.skip_line();
        }
        Ok(Token { kind, start, end })
    }

    fn scan_directive_name(&mut self, start: super::Pos) -> ScanResult<String> {
        let mut name = String::new();
        while is_alpha(self.ch(0)) {
            self.read(&mut name);
        }
        if name.is_empty() {
            return Err(self.error(
                "while scanning a directive",
                start,
                "could not find expected directive name",
            ));
        }
        if !is_blankz(self.ch(0)) {
            return Err(self.error(
                "while scanning a directive",
                start,
                "found unexpected non-alphabetical character",
            ));
        }
        Ok(name)
    }

    fn scan_version_directive_value(&mut self, start: super::Pos) -> ScanResult<(u32, u32)> {
        while is_blank(self.ch(0)) {
            self.skip();
        }
        let major = self.scan_version_number(start)?;
        if self.ch(0) != '.' {
            return Err(self.error(
                "while scanning a %YAML directive",
                start,
                "did not find expected digit or '.' character",
            ));
        }
        self.skip();
        let minor = self.scan_version_number(start)?;
        Ok((major, minor))
    }

    fn scan_version_number(&mut self, start: super::Pos) -> ScanResult<u32> {
        let mut value = 0u32;
        let mut length = 0;
        while let Some(d) = self.ch(0).to_digit(10) {
            length += 1;
            if length > 9 {
                return Err(self.error(
                    "while scanning a %YAML directive",
                    start,
                    "found extremely long version number",
                ));
            }
            value = value * 10 + d;
            self.skip();
        }
        if length == 0 {
            return Err(self.error(
                "while scanning a %YAML directive",
                start,
                "did not find expected version number",
            ));
        }
        Ok(value)
    }

    fn scan_tag_directive_value(&mut self, start: super::Pos) -> ScanResult<(String, String)> {
        while is_blank(self.ch(0)) {
            self.skip();
        }
        let handle = self.scan_tag_handle(true, start)?;
        if !is_blank(self.ch(0)) {
            return Err(self.error(
                "while scanning a %TAG directive",
                start,
                "did not find expected whitespace",
            ));
        }
        while is_blank(self.ch(0)) {
            self.skip();
        }
        let prefix = self.scan_tag_uri(true, true, "", start)?;
        if !is_blankz(self.ch(0)) {
            return Err(self.error(
                "while scanning a %TAG directive",
                start,
                "did not find expected whitespace or line break",
            ));
        }
        Ok((handle, prefix))
    }

    pub(super) fn scan_anchor(&mut self, alias: bool) -> ScanResult<Token> {
        let start = self.mark;
        self.skip();
        let mut value = String::new();
        while is_alpha(self.ch(0)) {
            self.read(&mut value);
        }
        let end = self.mark;
        let c = self.ch(0);
        if value.is_empty()
            || !(is_blankz(c) || matches!(c, '?' | ':' | ',' | ']' | '}' | '%' | '@' | '`'))
        {
            let context = if alias {
                "while scanning an alias"
            } else {
                "while scanning an anchor"
            };
            return Err(self.error(
                context,
                start,
                "did not find expected alphabetic or numeric character",
            ));
        }
        let kind = if alias {
            TokenKind::Alias(value)
        } else {
            TokenKind::Anchor(value)
        };
        Ok(Token { kind, start, end })
    }

    pub(super) fn scan_tag(&mut self) -> ScanResult<Token> {
        let start = self.mark;
        let (handle, suffix) = if self.ch(1) == '<' {
            self.skip();
            self.skip();
            let suffix = self.scan_tag_uri(true, false, "", start)?;
            if self.ch(0) != '>' {
                return Err(self.error(
                    "while scanning a tag",
                    start,
                    "did not find the expected '>'",
                ));
            }
            self.skip();
            (String::new(), suffix)
        } else {
            let handle = self.scan_tag_handle(false, start)?;
            if handle.len() > 1 && handle.starts_with('!') && handle.ends_with('!') {
                let suffix = self.scan_tag_uri(false, false, "", start)?;
                (handle, suffix)
            } else {
                let suffix = self.scan_tag_uri(false, false, &handle, start)?;
                if suffix.is_empty() {
                    // The lone '!' tag: empty handle, suffix '!'.
                    (String::new(), "!".to_string())
                } else {
                    ("!".to_string(), suffix)
                }
            }
        };
        let c = self.ch(0);
        let ends =
            is_blankz(c) || (self.dialect == Dialect::LibYaml && self.flow_level > 0 && c == ',');
        if !ends {
            return Err(self.error(
                "while scanning a tag",
                start,
                "did not find expected whitespace or line break",
            ));
        }
        Ok(Token {
            kind: TokenKind::Tag { handle, suffix },
            start,
            end: self.mark,
        })
    }

    fn scan_tag_handle(&mut self, directive: bool, start: super::Pos) -> ScanResult<String> {
        let context = tag_context(directive);
        if self.ch(0) != '!' {
            return Err(self.error(context, start, "did not find expected '!'"));
        }
        let mut handle = String::new();
        self.read(&mut handle);
        while is_alpha(self.ch(0)) {
            self.read(&mut handle);
        }
        if self.ch(0) == '!' {
            self.read(&mut handle);
        } else if directive && handle != "!" {
            return Err(self.error(context, start, "did not find expected '!'"));
        }
        Ok(handle)
    }

    /// A tag URI. `uri_char` admits `,`, `[` and `]`, which libyaml 0.2.5 refuses in local
    /// tags ("Flow indicators can not be part of local tags"); go-yaml always admits them.
    fn scan_tag_uri(
        &mut self,
        uri_char: bool,
        directive: bool,
        head: &str,
        start: super::Pos,
    ) -> ScanResult<String> {
        let mut uri: String = head.chars().skip(1).collect();
        let mut has_tag = !head.is_empty();
        let flow_ok = uri_char || self.dialect == Dialect::GoYamlV2;
        loop {
            let c = self.ch(0);
            let accepted = is_alpha(c)
                || matches!(
                    c,
                    ';' | '/'
                        | '?'
                        | ':'
                        | '@'
                        | '&'
                        | '='
                        | '+'
                        | '$'
                        | '.'
                        | '%'
                        | '!'
                        | '~'
                        | '*'
                        | '\''
                        | '('
                        | ')'
                )
                || (flow_ok && matches!(c, ',' | '[' | ']'));
            if !accepted {
                break;
            }
            if c == '%' {
                self.scan_uri_escapes(directive, start, &mut uri)?;
            } else {
                self.read(&mut uri);
            }
            has_tag = true;
        }
        if !has_tag {
            return Err(self.error(
                tag_context(directive),
                start,
                "did not find expected tag URI",
            ));
        }
        Ok(uri)
    }

    fn scan_uri_escapes(
        &mut self,
        directive: bool,
        start: super::Pos,
        uri: &mut String,
    ) -> ScanResult<()> {
        let context = tag_context(directive);
        let mut bytes = Vec::new();
        let mut width = 0usize;
        loop {
            let (c0, c1, c2) = (self.ch(0), self.ch(1), self.ch(2));
            let (Some(h), Some(l)) = (c1.to_digit(16), c2.to_digit(16)) else {
                return Err(self.error(context, start, "did not find URI escaped octet"));
            };
            if c0 != '%' {
                return Err(self.error(context, start, "did not find URI escaped octet"));
            }
            let octet = (h * 16 + l) as u8;
            if width == 0 {
                width = utf8_width(octet);
                if width == 0 {
                    return Err(self.error(
                        context,
                        start,
                        "found an incorrect leading UTF-8 octet",
                    ));
                }
            } else if octet & 0xC0 != 0x80 {
                return Err(self.error(context, start, "found an incorrect trailing UTF-8 octet"));
            }
            bytes.push(octet);
            self.skip();
            self.skip();
            self.skip();
            if bytes.len() == width {
                break;
            }
        }
        match std::str::from_utf8(&bytes) {
            Ok(s) => {
                uri.push_str(s);
                Ok(())
            }
            Err(_) => Err(self.error(context, start, "found an incorrect leading UTF-8 octet")),
        }
    }
}

fn tag_context(directive: bool) -> &'static str {
    if directive {
        "while parsing a %TAG directive"
    } else {
        "while parsing a tag"
    }
}

fn utf8_width(octet: u8) -> usize {
    if octet & 0x80 == 0 {
        1
    } else if octet & 0xE0 == 0xC0 {
        2
    } else if octet & 0xF0 == 0xE0 {
        3
    } else if octet & 0xF8 == 0xF0 {
        4
    } else {
        0
    }
}
