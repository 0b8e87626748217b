//! go-yaml v2's map key order (`keyList.Less`): numbers and booleans by value, then by Go
//! kind; strings in a "natural" order where runs of digits compare as numbers and letters sort
//! after other characters; other kinds by Go kind number.

use std::borrow::Cow;

use unicode_general_category::{get_general_category, GeneralCategory as G};

use crate::value::Yaml;

/// Go's `reflect.Kind` numbers for the types go-yaml decodes into `interface{}`.
fn kind(v: &Yaml) -> u8 {
    match v {
        Yaml::Bool(_) => 1,
        Yaml::Int(_) => 2,
        Yaml::BigInt(_) => 11,
        Yaml::Float(_) => 14,
        Yaml::Seq(_) => 23,
        Yaml::Str(_) | Yaml::Binary(_) | Yaml::Timestamp(_) => 24,
        Yaml::Map(_) => 21,
        // A nil key stays an (empty) interface value.
        Yaml::Null => 20,
    }
}

fn key_float(v: &Yaml) -> Option<f64> {
    match v {
        Yaml::Int(i) => Some(*i as f64),
        Yaml::BigInt(s) => s.parse::<u64>().ok().map(|u| u as f64),
        Yaml::Float(f) => Some(*f),
        Yaml::Bool(b) => Some(if *b { 1.0 } else { 0.0 }),
        _ => None,
    }
}

fn is_letter(c: char) -> bool {
    matches!(
        get_general_category(c),
        G::UppercaseLetter
            | G::LowercaseLetter
            | G::TitlecaseLetter
            | G::ModifierLetter
            | G::OtherLetter
    )
}

fn is_digit(c: char) -> bool {
    get_general_category(c) == G::DecimalNumber
}

/// A character as `keyList.Less` sees it: ASCII text is compared as bytes (no copy), other
/// text as chars.
trait Rune: Copy + Ord {
    fn letter(self) -> bool;
    fn digit(self) -> bool;
    /// `int64(r - '0')` as Go computes it, also for non-ASCII decimal digits.
    fn value(self) -> i64;
    fn is_zero(self) -> bool;
}

impl Rune for u8 {
    fn letter(self) -> bool {
        self.is_ascii_alphabetic()
    }
    fn digit(self) -> bool {
        self.is_ascii_digit()
    }
    fn value(self) -> i64 {
        i64::from(self) - i64::from(b'0')
    }
    fn is_zero(self) -> bool {
        self == b'0'
    }
}

impl Rune for char {
    fn letter(self) -> bool {
        is_letter(self)
    }
    fn digit(self) -> bool {
        is_digit(self)
    }
    fn value(self) -> i64 {
        self as i64 - '0' as i64
    }
    fn is_zero(self) -> bool {
        self == '0'
    }
}

fn text(v: &Yaml) -> Cow<'_, str> {
    match v {
        Yaml::Str(s) => Cow::Borrowed(s),
        Yaml::Binary(b) => String::from_utf8_lossy(b),
        Yaml::Timestamp(t) => Cow::Owned(t.to_string()),
        _ => Cow::Borrowed(""),
    }
}

/// `keyList.Less(a, b)`.
pub(crate) fn less(a: &Yaml, b: &Yaml) -> bool {
    let (ak, bk) = (kind(a), kind(b));
    if let (Some(af), Some(bf)) = (key_float(a), key_float(b)) {
        if af != bf {
            return af < bf;
        }
        if ak != bk {
            return ak < bk;
        }
        return num_less(a, b);
    }
    if ak != 24 || bk != 24 {
        return ak < bk;
    }
    let (a, b) = (text(a), text(b));
    if a.is_ascii() && b.is_ascii() {
        return runes_less(a.as_bytes(), b.as_bytes());
    }
    let ar: Vec<char> = a.chars().collect();
    let br: Vec<char> = b.chars().collect();
    runes_less(&ar, &br)
}

/// The string branch of `keyList.Less`: runs of digits compare as numbers, letters sort
/// after other characters.
fn runes_less<R: Rune>(ar: &[R], br: &[R]) -> bool {
    for i in 0..ar.len().min(br.len()) {
        if ar[i] == br[i] {
            continue;
        }
        let al = ar[i].letter();
        let bl = br[i].letter();
        if al && bl {
            return ar[i] < br[i];
        }
        if al || bl {
            return bl;
        }
        let (mut an, mut bn) = (0i64, 0i64);
        if ar[i].is_zero() || br[i].is_zero() {
            let mut j = i;
            while j > 0 && ar[j - 1].digit() {
                j -= 1;
                if !ar[j].is_zero() {
                    an = 1;
                    bn = 1;
                    break;
                }
            }
        }
        let mut ai = i;
        while ai < ar.len() && ar[ai].digit() {
            an = an.wrapping_mul(10).wrapping_add(ar[ai].value());
            ai += 1;
        }
        let mut bi = i;
        while bi < br.len() && br[bi].digit() {
            bn = bn.wrapping_mul(10).wrapping_add(br[bi].value());
            bi += 1;
        }
        if an != bn {
            return an < bn;
        }
        if ai != bi {
            return ai < bi;
        }
        return ar[i] < br[i];
    }
    ar.len() < br.len()
}

fn num_less(a: &Yaml, b: &Yaml) -> bool {
    match (a, b) {
        (Yaml::Int(x), Yaml::Int(y)) => x < y,
        (Yaml::BigInt(x), Yaml::BigInt(y)) => {
            x.parse::<u64>().unwrap_or(0) < y.parse::<u64>().unwrap_or(0)
        }
        (Yaml::Float(x), Yaml::Float(y)) => x < y,
        (Yaml::Bool(x), Yaml::Bool(y)) => !x & y,
        _ => false,
    }
}

/// Sorts by key with `less`: a stable merge sort that stays well-defined when `less` is not
/// transitive, which happens for some mixes of digits and letters. (Go then sorts keys that
/// arrive in random map order, so such orders are not reproducible in Helm either.)
pub(crate) fn sort_pairs<T: Clone>(items: &mut [T], key: impl Fn(&T) -> &Yaml) {
    let mut scratch = Vec::with_capacity(items.len());
    merge_sort(items, &key, &mut scratch);
}

/// One scratch buffer serves every merge (it is empty between merges).
fn merge_sort<T: Clone>(items: &mut [T], key: &dyn Fn(&T) -> &Yaml, merged: &mut Vec<T>) {
    if items.len() < 2 {
        return;
    }
    let mid = items.len() / 2;
    merge_sort(&mut items[..mid], key, merged);
    merge_sort(&mut items[mid..], key, merged);
    let (mut i, mut j) = (0, mid);
    while i < mid && j < items.len() {
        if less(key(&items[j]), key(&items[i])) {
            merged.push(items[j].clone());
            j += 1;
        } else {
            merged.push(items[i].clone());
            i += 1;
        }
    }
    merged.extend_from_slice(&items[i..mid]);
    merged.extend_from_slice(&items[j..]);
    items.clone_from_slice(merged);
    merged.clear();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sorted(keys: &[&str]) -> Vec<String> {
        let mut v: Vec<Yaml> = keys.iter().map(|k| Yaml::Str(k.to_string())).collect();
        sort_pairs(&mut v, |y| y);
        v.iter()
            .map(|y| y.as_str().unwrap_or_default().to_string())
            .collect()
    }

    #[test]
    fn natural_order() {
        assert_eq!(sorted(&["a10", "a9", "a1"]), ["a1", "a9", "a10"]);
        assert_eq!(sorted(&["b", "_x", "1", "A"]), ["_x", "1", "A", "b"]);
        assert_eq!(sorted(&["a01", "a1"]), ["a1", "a01"]);
    }

    #[test]
    fn kinds() {
        let mut v = vec![
            Yaml::Str("a".into()),
            Yaml::Float(1.5),
            Yaml::Int(2),
            Yaml::Bool(true),
        ];
        sort_pairs(&mut v, |y| y);
        assert_eq!(
            v,
            vec![
                Yaml::Bool(true),
                Yaml::Float(1.5),
                Yaml::Int(2),
                Yaml::Str("a".into())
            ]
        );
    }
}
