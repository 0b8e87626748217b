//! Values as Go's `text/template` sees them inside Helm.
//!
//! Byte identity with Helm depends on Go's dynamic types more than on template syntax:
//! `float64` prints `1.234567e+06` where `int64` prints `1234567`, `[]string` and
//! `[]interface {}` answer `typeOf` differently, a Go map is a shared reference that
//! `set` mutates in place, and `eq` refuses to compare an `int` with a `float64`. So
//! [`Value`] keeps the Go type, not just the JSON shape:
//!
//! * numbers: `int` (template literals, `len`, `atoi`), `int64` (`add`, `--set`, a
//!   custom resource's spec), `uint64` (semver parts) and `float64` (values.yaml);
//! * lists and maps carry their Go element type ([`ListKind`], [`MapKind`]); a map is
//!   a reference (`Rc<RefCell<..>>`), like a Go map, so `set` is seen by every holder;
//! * host objects (`.Capabilities`, certificates, semver versions) implement [`Object`].
//!
//! Values live inside one render on one thread (`Rc`); data that crosses threads
//! (a loaded chart's defaults, user values) is a [`Data`] tree instead.
pub mod data;
pub mod entries;
pub mod format;
pub mod json;
pub mod object;
pub mod shared;

use std::cell::{Ref, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::Arc;

pub use data::Data;
pub use entries::Entries;
pub use object::{Method, Object};

/// Shared immutable string: template literals are cloned into values without copying.
pub type Str = Arc<str>;

/// A Go value as a template sees it.
#[derive(Clone, Default)]
pub enum Value {
    /// Untyped nil: a missing value, a nil interface.
    #[default]
    Nil,
    Bool(bool),
    /// Go `int`.
    Int(i64),
    /// Go `int64`.
    Int64(i64),
    /// Go `uint64`.
    Uint64(u64),
    /// Go `float64`.
    Float(f64),
    Str(Str),
    /// Go `[]byte` (`.Files.GetBytes`, the values of `.Files`).
    Bytes(Arc<[u8]>),
    List(Rc<List>),
    Map(Map),
    Obj(Rc<dyn Object>),
}

/// The Go element type of a slice.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ListKind {
    /// `[]interface {}`
    Iface,
    /// `[]string`
    Str,
    /// `[]int`
    Int,
    /// `common.VersionSet` (`.Capabilities.APIVersions`), a `[]string` with `Has`.
    VersionSet,
}

/// A Go slice. Sprig never mutates a slice in place, so lists are shared immutably.
pub struct List {
    pub kind: ListKind,
    pub items: Vec<Value>,
}

/// The Go type of a map; all have string keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MapKind {
    /// `map[string]interface {}`
    Iface,
    /// `common.Values`: a `map[string]interface {}` with methods (`.`, `.Values`, `.Template`).
    Values,
    /// `map[string]string` (`split`, `.Chart.Annotations`)
    Str,
    /// `engine.files`: a `map[string][]byte` with methods (`.Files`).
    Files,
}

/// A Go map: a shared, mutable reference with keys kept in Go's print order. Two
/// handles may see the same entries as different Go types (Helm's `Values.Table`
/// returns a `common.Values` view of a `map[string]interface {}`).
#[derive(Clone)]
pub struct Map {
    entries: Rc<RefCell<Entries>>,
    kind: MapKind,
}

impl Map {
    pub fn new(kind: MapKind) -> Map {
        Map::with_entries(kind, Entries::default())
    }
    pub fn from_entries(kind: MapKind, entries: BTreeMap<Str, Value>) -> Map {
        Map::with_entries(kind, Entries::from(entries))
    }
    pub fn with_entries(kind: MapKind, entries: Entries) -> Map {
        Map {
            entries: Rc::new(RefCell::new(entries)),
            kind,
        }
    }
    /// The same Go map seen as another map type.
    pub fn with_kind(&self, kind: MapKind) -> Map {
        Map {
            entries: self.entries.clone(),
            kind,
        }
    }
    pub fn kind(&self) -> MapKind {
        self.kind
    }
    pub fn get(&self, key: &str) -> Option<Value> {
        self.entries.borrow().get(key).cloned()
    }
    pub fn contains_key(&self, key: &str) -> bool {
        self.entries.borrow().contains_key(key)
    }
    pub fn insert(&self, key: Str, value: Value) {
        self.entries.borrow_mut().insert(key, value);
    }
    pub fn remove(&self, key: &str) -> Option<Value> {
        self.entries.borrow_mut().remove(key)
    }
    pub fn len(&self) -> usize {
        self.entries.borrow().len()
    }
    pub fn is_empty(&self) -> bool {
        self.entries.borrow().is_empty()
    }
    /// Borrow the entries; do not evaluate templates while holding this.
    pub fn entries(&self) -> Ref<'_, Entries> {
        self.entries.borrow()
    }
    /// A snapshot of the entries in key order, as Go's `range` takes one before looping.
    pub fn snapshot(&self) -> Vec<(Str, Value)> {
        self.entries
            .borrow()
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }
    pub fn keys(&self) -> Vec<Str> {
        self.entries.borrow().keys().cloned().collect()
    }
    /// Whether two handles name the same Go map.
    pub fn same(&self, other: &Map) -> bool {
        Rc::ptr_eq(&self.entries, &other.entries)
    }
    /// A new map with the same entries (a shallow copy).
    pub fn shallow_copy(&self, kind: MapKind) -> Map {
        Map::with_entries(kind, self.entries.borrow().clone())
    }
}

/// The reflect kinds that decide comparisons and truth.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Invalid,
    Bool,
    Int,
    Int64,
    Uint64,
    Float64,
    String,
    Slice,
    Map,
    Struct,
    Ptr,
}

impl Kind {
    /// `reflect.Kind.String()`, as Sprig's `kindOf` prints it.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Invalid => "invalid",
            Kind::Bool => "bool",
            Kind::Int => "int",
            Kind::Int64 => "int64",
            Kind::Uint64 => "uint64",
            Kind::Float64 => "float64",
            Kind::String => "string",
            Kind::Slice => "slice",
            Kind::Map => "map",
            Kind::Struct => "struct",
            Kind::Ptr => "ptr",
        }
    }
}

impl Value {
    pub fn str(s: &str) -> Value {
        Value::Str(Str::from(s))
    }
    pub fn string(s: String) -> Value {
        Value::Str(Str::from(s))
    }
    pub fn list(kind: ListKind, items: Vec<Value>) -> Value {
        Value::List(Rc::new(List { kind, items }))
    }
    pub fn iface_list(items: Vec<Value>) -> Value {
        Value::list(ListKind::Iface, items)
    }
    pub fn str_list(items: Vec<String>) -> Value {
        Value::list(
            ListKind::Str,
            items.into_iter().map(Value::string).collect(),
        )
    }
    pub fn empty_map() -> Value {
        Value::Map(Map::new(MapKind::Iface))
    }

    pub fn is_nil(&self) -> bool {
        matches!(self, Value::Nil)
    }

    pub fn kind(&self) -> Kind {
        match self {
            Value::Nil => Kind::Invalid,
            Value::Bool(_) => Kind::Bool,
            Value::Int(_) => Kind::Int,
            Value::Int64(_) => Kind::Int64,
            Value::Uint64(_) => Kind::Uint64,
            Value::Float(_) => Kind::Float64,
            Value::Str(_) => Kind::String,
            Value::Bytes(_) | Value::List(_) => Kind::Slice,
            Value::Map(_) => Kind::Map,
            Value::Obj(o) => o.kind(),
        }
    }

    /// The Go type name, as `%T` and Sprig's `typeOf` print it.
    pub fn type_name(&self) -> String {
        match self {
            Value::Nil => "<nil>".into(),
            Value::Bool(_) => "bool".into(),
            Value::Int(_) => "int".into(),
            Value::Int64(_) => "int64".into(),
            Value::Uint64(_) => "uint64".into(),
            Value::Float(_) => "float64".into(),
            Value::Str(_) => "string".into(),
            Value::Bytes(_) => "[]uint8".into(),
            Value::List(l) => match l.kind {
                ListKind::Iface => "[]interface {}".into(),
                ListKind::Str => "[]string".into(),
                ListKind::Int => "[]int".into(),
                ListKind::VersionSet => "common.VersionSet".into(),
            },
            Value::Map(m) => match m.kind() {
                MapKind::Iface => "map[string]interface {}".into(),
                MapKind::Values => "common.Values".into(),
                MapKind::Str => "map[string]string".into(),
                MapKind::Files => "engine.files".into(),
            },
            Value::Obj(o) => o.type_name().into(),
        }
    }

    /// Go's `IsTrue`: the zero value of its type is false; structs are always true.
    pub fn truth(&self) -> bool {
        match self {
            Value::Nil => false,
            Value::Bool(b) => *b,
            Value::Int(i) | Value::Int64(i) => *i != 0,
            Value::Uint64(u) => *u != 0,
            Value::Float(f) => *f != 0.0,
            Value::Str(s) => !s.is_empty(),
            Value::Bytes(b) => !b.is_empty(),
            Value::List(l) => !l.items.is_empty(),
            Value::Map(m) => !m.is_empty(),
            Value::Obj(o) => o.truth(),
        }
    }

    /// Whether `len` is zero (or there is no length).
    pub fn is_empty(&self) -> bool {
        self.len().is_none_or(|n| n == 0)
    }

    /// The length of a string (bytes), slice or map.
    pub fn len(&self) -> Option<usize> {
        match self {
            Value::Str(s) => Some(s.len()),
            Value::Bytes(b) => Some(b.len()),
            Value::List(l) => Some(l.items.len()),
            Value::Map(m) => Some(m.len()),
            Value::Obj(o) => o.items().map(|i| i.len()),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The elements of a slice, or of an object that behaves as one.
    pub fn list_items(&self) -> Option<Vec<Value>> {
        match self {
            Value::List(l) => Some(l.items.clone()),
            Value::Bytes(b) => Some(b.iter().map(|&x| Value::Uint64(u64::from(x))).collect()),
            Value::Obj(o) => o.items(),
            _ => None,
        }
    }

    /// Go's `reflect.DeepEqual` (types must match exactly).
    pub fn deep_equal(&self, other: &Value) -> bool {
        deep_equal(self, other, 0)
    }
}

fn deep_equal(a: &Value, b: &Value, depth: usize) -> bool {
    if depth > 1_000 {
        return false;
    }
    match (a, b) {
        (Value::Nil, Value::Nil) => true,
        (Value::Bool(x), Value::Bool(y)) => x == y,
        (Value::Int(x), Value::Int(y)) | (Value::Int64(x), Value::Int64(y)) => x == y,
        (Value::Uint64(x), Value::Uint64(y)) => x == y,
        (Value::Float(x), Value::Float(y)) => x == y,
        (Value::Str(x), Value::Str(y)) => x == y,
        (Value::Bytes(x), Value::Bytes(y)) => x == y,
        (Value::List(x), Value::List(y)) => {
            x.kind == y.kind
                && x.items.len() == y.items.len()
                && x.items
                    .iter()
                    .zip(&y.items)
                    .all(|(p, q)| deep_equal(p, q, depth + 1))
        }
        (Value::Map(x), Value::Map(y)) => {
            if x.kind() != y.kind() {
                return false;
            }
            if x.same(y) {
                return true;
            }
            let (ex, ey) = (x.entries(), y.entries());
            ex.len() == ey.len()
                && ex.iter().all(|(k, v)| match ey.get(k) {
                    Some(w) => deep_equal(v, w, depth + 1),
                    None => false,
                })
        }
        (Value::Obj(x), Value::Obj(y)) => Rc::ptr_eq(x, y) || x.deep_equal(y.as_ref()),
        _ => false,
    }
}

impl std::fmt::Debug for Value {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}({})", self.type_name(), format::sprint_value(self))
    }
}
