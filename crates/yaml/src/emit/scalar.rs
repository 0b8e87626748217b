//! Scalar analysis (which styles a text allows) and the five scalar writers, including the
//! folding of long lines at spaces once the column passes the preferred width.

use super::{Dialect, Emitter, ScalarAnalysis};
use crate::syntax::chars::{is_blank, is_blankz, is_break, is_printable};

fn is_space(c: Option<char>) -> bool {
    c == Some(' ')
}

/// Names, numbers, versions, paths and quantities (`app-1`, `8080`, `1.2.3`, `128Mi`,
/// `team/image`): ASCII letters, digits, `.`, `_`, `/`, and `-` after the first character,
/// not starting with `...`. Such a text has no indicator, space, break or special character,
/// so every style allows it.
fn is_simple_word(value: &str) -> bool {
    !value.is_empty()
        && !value.starts_with("...")
        && value.bytes().enumerate().all(|(i, b)| {
            b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'/') || (b == b'-' && i > 0)
        })
}

impl Emitter<'_> {
    pub(super) fn analyze_scalar(&self, value: &str) -> ScalarAnalysis {
        if is_simple_word(value) {
            return ScalarAnalysis {
                multiline: false,
                flow_plain_allowed: true,
                block_plain_allowed: true,
                single_quoted_allowed: true,
                block_allowed: true,
            };
        }
        self.analyze_scalar_chars(value)
    }

    /// libyaml's `yaml_emitter_analyze_scalar`, character by character.
    fn analyze_scalar_chars(&self, value: &str) -> ScalarAnalysis {
        if value.is_empty() {
            return ScalarAnalysis {
                multiline: false,
                flow_plain_allowed: false,
                block_plain_allowed: true,
                single_quoted_allowed: true,
                block_allowed: false,
            };
        }
        let mut block_indicators = false;
        let mut flow_indicators = false;
        let mut line_breaks = false;
        let mut special_characters = false;
        let mut leading_space = false;
        let mut leading_break = false;
        let mut trailing_space = false;
        let mut trailing_break = false;
        let mut break_space = false;
        let mut space_break = false;
        let mut previous_space = false;
        let mut previous_break = false;
        if value.starts_with("---") || value.starts_with("...") {
            block_indicators = true;
            flow_indicators = true;
        }
        let mut preceded_by_whitespace = true;
        let mut chars = value.chars().peekable();
        let mut first = true;
        while let Some(c) = chars.next() {
            let next = chars.peek().copied();
            let is_last = next.is_none();
            // What counts as whitespace after an indicator: go-yaml looks for a blank or the
            // end; libyaml also accepts a line break.
            let followed_by_whitespace = match (next, self.dialect) {
                (None, _) => true,
                (Some(n), Dialect::GoYamlV2) => is_blank(n),
                (Some(n), Dialect::LibYaml) => is_blankz(n),
            };
            if first {
                match c {
                    '#' | ',' | '[' | ']' | '{' | '}' | '&' | '*' | '!' | '|' | '>' | '\''
                    | '"' | '%' | '@' | '`' => {
                        flow_indicators = true;
                        block_indicators = true;
                    }
                    '?' | ':' => {
                        flow_indicators = true;
                        if followed_by_whitespace {
                            block_indicators = true;
                        }
                    }
                    '-' if followed_by_whitespace => {
                        flow_indicators = true;
                        block_indicators = true;
                    }
                    _ => {}
                }
            } else {
                match c {
                    ',' | '?' | '[' | ']' | '{' | '}' => flow_indicators = true,
                    ':' => {
                        flow_indicators = true;
                        if followed_by_whitespace {
                            block_indicators = true;
                        }
                    }
                    '#' if preceded_by_whitespace => {
                        flow_indicators = true;
                        block_indicators = true;
                    }
                    _ => {}
                }
            }
            if !is_printable(c) || (!c.is_ascii() && !self.unicode) {
                special_characters = true;
            }
            if c == ' ' {
                leading_space |= first;
                trailing_space |= is_last;
                break_space |= previous_break;
                previous_space = true;
                previous_break = false;
            } else if is_break(c) {
                line_breaks = true;
                leading_break |= first;
                trailing_break |= is_last;
                space_break |= previous_space;
                previous_space = false;
                previous_break = true;
            } else {
                previous_space = false;
                previous_break = false;
            }
            preceded_by_whitespace = is_blankz(c);
            first = false;
        }
        let mut a = ScalarAnalysis {
            multiline: line_breaks,
            flow_plain_allowed: true,
            block_plain_allowed: true,
            single_quoted_allowed: true,
            block_allowed: true,
        };
        if leading_space || leading_break || trailing_space || trailing_break {
            a.flow_plain_allowed = false;
            a.block_plain_allowed = false;
        }
        if trailing_space {
            a.block_allowed = false;
        }
        if break_space {
            a.flow_plain_allowed = false;
            a.block_plain_allowed = false;
            a.single_quoted_allowed = false;
        }
        if space_break || special_characters {
            a.flow_plain_allowed = false;
            a.block_plain_allowed = false;
            a.single_quoted_allowed = false;
            a.block_allowed = false;
        }
        if line_breaks {
            a.flow_plain_allowed = false;
            a.block_plain_allowed = false;
        }
        if flow_indicators {
            a.flow_plain_allowed = false;
        }
        if block_indicators {
            a.block_plain_allowed = false;
        }
        a
    }

    pub(super) fn write_plain(&mut self, value: &str, allow_breaks: bool) {
        let needs_space = match self.dialect {
            Dialect::GoYamlV2 => true,
            // libyaml avoids a trailing space before an empty value in block context.
            Dialect::LibYaml => !value.is_empty() || self.flow_level > 0,
        };
        if !self.whitespace && needs_space {
            self.put(' ');
        }
        // Without spaces and line breaks nothing folds: the text goes out as it is.
        if value
            .bytes()
            .all(|b| b != b' ' && b != b'\n' && b != b'\r' && b.is_ascii())
        {
            self.out.push_str(value);
            self.column += value.len();
            self.whitespace = false;
            self.indention = false;
            return;
        }
        let mut chars = value.chars().peekable();
        let mut spaces = false;
        let mut breaks = false;
        while let Some(c) = chars.next() {
            if c == ' ' {
                if allow_breaks
                    && !spaces
                    && self.column > self.best_width
                    && !is_space(chars.peek().copied())
                {
                    self.write_indent();
                } else {
                    self.put(c);
                }
                spaces = true;
            } else if is_break(c) {
                if !breaks && c == '\n' {
                    self.put_break();
                }
                self.write_break(c);
                self.indention = true;
                breaks = true;
            } else {
                if breaks {
                    self.write_indent();
                }
                self.put(c);
                self.indention = false;
                spaces = false;
                breaks = false;
            }
        }
        self.whitespace = false;
        self.indention = false;
    }

    pub(super) fn write_single_quoted(&mut self, value: &str, allow_breaks: bool) {
        self.write_indicator("'", true, false, false);
        let mut chars = value.chars().peekable();
        let mut first = true;
        let mut spaces = false;
        let mut breaks = false;
        while let Some(c) = chars.next() {
            let is_first = std::mem::replace(&mut first, false);
            if c == ' ' {
                if allow_breaks
                    && !spaces
                    && self.column > self.best_width
                    && !is_first
                    && chars.peek().is_some()
                    && !is_space(chars.peek().copied())
                {
                    self.write_indent();
                } else {
                    self.put(c);
                }
                spaces = true;
            } else if is_break(c) {
                if !breaks && c == '\n' {
                    self.put_break();
                }
                self.write_break(c);
                self.indention = true;
                breaks = true;
            } else {
                if breaks {
                    self.write_indent();
                }
                if c == '\'' {
                    self.put('\'');
                }
                self.put(c);
                self.indention = false;
                spaces = false;
                breaks = false;
            }
        }
        // libyaml indents the closing quote after a final line break; go-yaml does not.
        if breaks && self.dialect == Dialect::LibYaml {
            self.write_indent();
        }
        self.write_indicator("'", false, false, false);
        self.whitespace = false;
        self.indention = false;
    }

    pub(super) fn write_double_quoted(&mut self, value: &str, allow_breaks: bool) {
        self.write_indicator("\"", true, false, false);
        let mut chars = value.chars().peekable();
        let mut first = true;
        // go-yaml's `is_bom(value, i)` looks at the start of the value whatever `i` is, so a
        // value that starts with a byte order mark has every character escaped.
        let all_bom = self.dialect == Dialect::GoYamlV2 && value.starts_with('\u{FEFF}');
        let mut spaces = false;
        while let Some(c) = chars.next() {
            let is_first = std::mem::replace(&mut first, false);
            let bom = if self.dialect == Dialect::GoYamlV2 {
                all_bom
            } else {
                c == '\u{FEFF}'
            };
            if !is_printable(c)
                || (!self.unicode && !c.is_ascii())
                || bom
                || is_break(c)
                || c == '"'
                || c == '\\'
            {
                self.put('\\');
                let code = c as u32;
                match c {
                    '\0' => self.put('0'),
                    '\u{7}' => self.put('a'),
                    '\u{8}' => self.put('b'),
                    '\t' => self.put('t'),
                    '\n' => self.put('n'),
                    '\u{b}' => self.put('v'),
                    '\u{c}' => self.put('f'),
                    '\r' => self.put('r'),
                    '\u{1b}' => self.put('e'),
                    '"' => self.put('"'),
                    '\\' => self.put('\\'),
                    '\u{85}' => self.put('N'),
                    '\u{a0}' => self.put('_'),
                    '\u{2028}' => self.put('L'),
                    '\u{2029}' => self.put('P'),
                    _ => {
                        let (letter, width) = if code <= 0xFF {
                            ('x', 2)
                        } else if code <= 0xFFFF {
                            ('u', 4)
                        } else {
                            ('U', 8)
                        };
                        self.put(letter);
                        for k in (0..width).rev() {
                            let digit = (code >> (4 * k)) & 0xF;
                            self.put(
                                char::from_digit(digit, 16)
                                    .unwrap_or('0')
                                    .to_ascii_uppercase(),
                            );
                        }
                    }
                }
                spaces = false;
            } else if c == ' ' {
                if allow_breaks
                    && !spaces
                    && self.column > self.best_width
                    && !is_first
                    && chars.peek().is_some()
                {
                    self.write_indent();
                    if is_space(chars.peek().copied()) {
                        self.put('\\');
                    }
                } else {
                    self.put(c);
                }
                spaces = true;
            } else {
                self.put(c);
                spaces = false;
            }
        }
        self.write_indicator("\"", false, false, false);
        self.whitespace = false;
        self.indention = false;
    }

    /// The `|`/`>` header: an indentation indicator when the text starts with a space or a
    /// break, and the chomping indicator (`-` without a final break, `+` with several).
    fn write_block_scalar_hints(&mut self, chars: &[char]) {
        if let Some(&first) = chars.first() {
            if first == ' ' || is_break(first) {
                let hint = char::from_digit(self.best_indent as u32, 10).unwrap_or('2');
                self.write_indicator(&hint.to_string(), false, false, false);
            }
        }
        self.open_ended = 0;
        let chomp = match chars {
            [] => Some('-'),
            [.., last] if !is_break(*last) => Some('-'),
            [_] => {
                self.open_ended = 2;
                Some('+')
            }
            [.., before, _] if is_break(*before) => {
                self.open_ended = 2;
                Some('+')
            }
            _ => None,
        };
        if let Some(c) = chomp {
            self.write_indicator(&c.to_string(), false, false, false);
        }
    }

    pub(super) fn write_literal(&mut self, value: &str) {
        let chars: Vec<char> = value.chars().collect();
        self.write_indicator("|", true, false, false);
        self.write_block_scalar_hints(&chars);
        self.put_break();
        self.indention = true;
        self.whitespace = true;
        let mut breaks = true;
        for &c in &chars {
            if is_break(c) {
                self.write_break(c);
                self.indention = true;
                breaks = true;
            } else {
                if breaks {
                    self.write_indent();
                }
                self.put(c);
                self.indention = false;
                breaks = false;
            }
        }
    }

    pub(super) fn write_folded(&mut self, value: &str) {
        let chars: Vec<char> = value.chars().collect();
        self.write_indicator(">", true, false, false);
        self.write_block_scalar_hints(&chars);
        self.put_break();
        self.indention = true;
        self.whitespace = true;
        let mut breaks = true;
        let mut leading_spaces = true;
        for (i, &c) in chars.iter().enumerate() {
            if is_break(c) {
                if !breaks && !leading_spaces && c == '\n' {
                    let mut k = i;
                    while k < chars.len() && is_break(chars[k]) {
                        k += 1;
                    }
                    if chars.get(k).is_some_and(|&n| !is_blankz(n)) {
                        self.put_break();
                    }
                }
                self.write_break(c);
                self.indention = true;
                breaks = true;
            } else {
                if breaks {
                    self.write_indent();
                    leading_spaces = is_blank(c);
                }
                if !breaks
                    && c == ' '
                    && !is_space(chars.get(i + 1).copied())
                    && self.column > self.best_width
                {
                    self.write_indent();
                } else {
                    self.put(c);
                }
                self.indention = false;
                breaks = false;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::emit::Settings;

    #[test]
    fn simple_words_analyze_as_the_full_analysis_does() {
        let simple = [
            "a",
            "app-1",
            "8080",
            "1.2.3",
            "128Mi",
            "team/image",
            "..x",
            ".x",
            "x..",
            "a_b",
            "0x1F",
            "y",
            "null",
            "1e3",
            "a-",
            "v1.31.0",
        ];
        let not_simple = [
            "", "-", "-a", "...", "...a", "a:b", "a b", "a#", "é", "a\n", "[a",
        ];
        for dialect in [Dialect::GoYamlV2, Dialect::LibYaml] {
            let settings = Settings {
                dialect,
                indent: 2,
                width: Some(80),
                unicode: true,
            };
            let e = Emitter::new(&[], settings);
            for w in simple {
                assert!(is_simple_word(w), "{w:?}");
                assert_eq!(e.analyze_scalar(w), e.analyze_scalar_chars(w), "{w:?}");
            }
            for w in not_simple {
                assert!(!is_simple_word(w), "{w:?}");
            }
        }
    }
}
