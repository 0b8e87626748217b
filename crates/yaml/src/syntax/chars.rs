//! Character classes of the libyaml family (libyaml, go-yaml v2, PyYAML), and the reader's
//! input check.
//!
//! The scanner works on `char`s with `'\0'` standing for the end of input, exactly as libyaml
//! pads its buffer with NUL; a real NUL can never reach the scanner because the reader rejects
//! it as a control character.

use super::Pos;

pub(crate) fn is_blank(c: char) -> bool {
    c == ' ' || c == '\t'
}

pub(crate) fn is_break(c: char) -> bool {
    matches!(c, '\r' | '\n' | '\u{85}' | '\u{2028}' | '\u{2029}')
}

pub(crate) fn is_breakz(c: char) -> bool {
    is_break(c) || c == '\0'
}

pub(crate) fn is_blankz(c: char) -> bool {
    is_blank(c) || is_breakz(c)
}

/// libyaml's `IS_ALPHA`: the characters of anchors, tag handles and directive names.
pub(crate) fn is_alpha(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

/// libyaml's `IS_PRINTABLE` as the emitter applies it. Characters outside the Basic
/// Multilingual Plane are *not* printable there, so emitters escape them.
pub(crate) fn is_printable(c: char) -> bool {
    let v = c as u32;
    v == 0x0A
        || (0x20..=0x7E).contains(&v)
        || (0xA0..=0xD7FF).contains(&v)
        || ((0xE000..=0xFFFD).contains(&v) && v != 0xFEFF)
}

/// The reader's rule for characters allowed in a YAML stream (libyaml `yaml_parser_update_buffer`,
/// PyYAML `Reader.NON_PRINTABLE`).
pub(crate) fn is_allowed_input(c: char) -> bool {
    let v = c as u32;
    v == 0x09
        || v == 0x0A
        || v == 0x0D
        || (0x20..=0x7E).contains(&v)
        || v == 0x85
        || (0xA0..=0xD7FF).contains(&v)
        || (0xE000..=0xFFFD).contains(&v)
        || (0x10000..=0x10FFFF).contains(&v)
}

/// The first character the reader refuses, with its position. The check covers the whole input
/// up front: libyaml decodes in chunks, so it may report an earlier syntax error first, but both
/// end in an error.
pub(crate) fn first_disallowed(chars: &[char]) -> Option<(usize, char, Pos)> {
    let mut pos = Pos::default();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if !is_allowed_input(c) {
            return Some((i, c, pos));
        }
        if c == '\r' && chars.get(i + 1) == Some(&'\n') {
            pos.index += 2;
            pos.line += 1;
            pos.column = 0;
            i += 2;
            continue;
        }
        pos.index += 1;
        if is_break(c) {
            pos.line += 1;
            pos.column = 0;
        } else {
            pos.column += 1;
        }
        i += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn printable_excludes_astral_and_bom() {
        assert!(is_printable('é'));
        assert!(!is_printable('\u{1F600}'));
        assert!(!is_printable('\u{FEFF}'));
        assert!(!is_printable('\t'));
        assert!(!is_printable('\u{85}'));
    }

    #[test]
    fn reader_refuses_controls() {
        let chars: Vec<char> = "a\nb\u{7f}".chars().collect();
        let (i, c, pos) = first_disallowed(&chars).expect("DEL is refused");
        assert_eq!((i, c, pos.line, pos.column), (3, '\u{7f}', 1, 1));
        assert!(first_disallowed(&"tab\there\r\n".chars().collect::<Vec<_>>()).is_none());
    }
}
