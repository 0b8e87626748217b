//! [`Args`]: the checked arguments of one function call.
//!
//! A warm render calls tens of thousands of functions (`include`, `quote`, `default`,
//! `printf`...), nearly all with four arguments or fewer; a `Vec` per call was a fifth of
//! the render's allocations. Up to [`INLINE`] arguments live in the value itself; more
//! spill to a `Vec`. Functions read them as a slice (`a[0]`, `a.iter()`) or take them by
//! value (`a.into_iter()`), as they did the `Vec`.
use std::ops::{Deref, DerefMut};

use crate::value::Value;

/// Arguments kept without a heap allocation.
pub const INLINE: usize = 4;

pub enum Args {
    Inline { len: usize, items: [Value; INLINE] },
    Heap(Vec<Value>),
}

impl Args {
    /// Room for `n` arguments: inline when they fit.
    pub fn with_capacity(n: usize) -> Args {
        if n <= INLINE {
            Args::Inline {
                len: 0,
                items: Default::default(),
            }
        } else {
            Args::Heap(Vec::with_capacity(n))
        }
    }

    #[inline]
    pub fn push(&mut self, v: Value) {
        match self {
            Args::Inline { len, items } if *len < INLINE => {
                // The slot holds the nil it was made with: nothing to drop.
                std::mem::forget(std::mem::replace(&mut items[*len], v));
                *len += 1;
            }
            Args::Inline { len, items } => {
                let mut heap = Vec::with_capacity(INLINE * 2);
                heap.extend(items[..*len].iter_mut().map(std::mem::take));
                heap.push(v);
                *self = Args::Heap(heap);
            }
            Args::Heap(heap) => heap.push(v),
        }
    }

    pub fn into_vec(self) -> Vec<Value> {
        match self {
            Args::Heap(v) => v,
            inline => inline.into_iter().collect(),
        }
    }
}

impl Default for Args {
    fn default() -> Args {
        Args::with_capacity(0)
    }
}

impl From<Vec<Value>> for Args {
    fn from(v: Vec<Value>) -> Args {
        Args::Heap(v)
    }
}

impl FromIterator<Value> for Args {
    fn from_iter<I: IntoIterator<Item = Value>>(iter: I) -> Args {
        let iter = iter.into_iter();
        let mut a = Args::with_capacity(iter.size_hint().0);
        for v in iter {
            a.push(v);
        }
        a
    }
}

impl Deref for Args {
    type Target = [Value];
    #[inline]
    fn deref(&self) -> &[Value] {
        match self {
            Args::Inline { len, items } => &items[..*len],
            Args::Heap(v) => v,
        }
    }
}

impl DerefMut for Args {
    fn deref_mut(&mut self) -> &mut [Value] {
        match self {
            Args::Inline { len, items } => &mut items[..*len],
            Args::Heap(v) => v,
        }
    }
}

/// The arguments by value, in order.
pub enum IntoIter {
    Inline(std::iter::Take<std::array::IntoIter<Value, INLINE>>),
    Heap(std::vec::IntoIter<Value>),
}

impl Iterator for IntoIter {
    type Item = Value;
    fn next(&mut self) -> Option<Value> {
        match self {
            IntoIter::Inline(i) => i.next(),
            IntoIter::Heap(i) => i.next(),
        }
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        match self {
            IntoIter::Inline(i) => i.size_hint(),
            IntoIter::Heap(i) => i.size_hint(),
        }
    }
}

impl DoubleEndedIterator for IntoIter {
    fn next_back(&mut self) -> Option<Value> {
        match self {
            IntoIter::Inline(i) => i.next_back(),
            IntoIter::Heap(i) => i.next_back(),
        }
    }
}

impl ExactSizeIterator for IntoIter {}

impl IntoIterator for Args {
    type Item = Value;
    type IntoIter = IntoIter;
    fn into_iter(self) -> IntoIter {
        match self {
            Args::Inline { len, items } => IntoIter::Inline(items.into_iter().take(len)),
            Args::Heap(v) => IntoIter::Heap(v.into_iter()),
        }
    }
}

impl<'a> IntoIterator for &'a Args {
    type Item = &'a Value;
    type IntoIter = std::slice::Iter<'a, Value>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ints(a: &[Value]) -> Vec<i64> {
        a.iter()
            .map(|v| match v {
                Value::Int(i) => *i,
                _ => -1,
            })
            .collect()
    }

    #[test]
    fn inline_then_spilled_keep_order() {
        for n in 0..=INLINE + 3 {
            let mut a = Args::with_capacity(n.min(INLINE));
            for i in 0..n {
                a.push(Value::Int(i as i64));
            }
            let want: Vec<i64> = (0..n as i64).collect();
            assert_eq!(ints(&a), want, "slice of {n}");
            assert_eq!(a.len(), n);
            let back: Vec<Value> = a.into_iter().rev().collect();
            let mut rev = want.clone();
            rev.reverse();
            assert_eq!(ints(&back), rev, "reversed {n}");
        }
    }
}
