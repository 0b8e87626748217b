//! Python's `repr()` of a `str`, for the messages of the exceptions PyYAML lets through
//! (`ValueError: invalid literal for int() with base 10: 'x\n'`, `KeyError: 'maybe'`).

use unicode_general_category::{get_general_category, GeneralCategory as G};

/// `str.isprintable()` for one character.
fn printable(c: char) -> bool {
    c == ' '
        || !matches!(
            get_general_category(c),
            G::Control
                | G::Format
                | G::Surrogate
                | G::PrivateUse
                | G::Unassigned
                | G::LineSeparator
                | G::ParagraphSeparator
                | G::SpaceSeparator
        )
}

pub(crate) fn repr(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::new();
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if printable(c) => out.push(c),
            c if (c as u32) < 0x100 => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if (c as u32) < 0x10000 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push_str(&format!("\\U{:08x}", c as u32)),
        }
    }
    out.push(quote);
    out
}

/// `%.200R`: the repr cut to 200 characters, as `int()`'s message does.
pub(crate) fn repr200(s: &str) -> String {
    repr(s).chars().take(200).collect()
}

#[cfg(test)]
mod tests {
    use super::repr;

    #[test]
    fn like_python() {
        assert_eq!(repr("x\n"), "'x\\n'");
        assert_eq!(repr("'"), "\"'\"");
        assert_eq!(repr("a'\""), "'a\\'\"'");
        assert_eq!(repr("a\\b"), "'a\\\\b'");
        assert_eq!(repr("\u{85}\u{a0}é\u{feff}"), "'\\x85\\xa0é\\ufeff'");
    }
}
