//! Host objects: Go structs and pointers that templates reach through fields and methods
//! (`.Capabilities`, `.Capabilities.KubeVersion`, a semver version, a generated
//! certificate). Go looks up a method before a field, and both before a map key.
use std::rc::Rc;

use super::{Kind, Value};

/// The Go type of a function or method parameter. The evaluator checks arguments
/// against it the way `text/template` does (`wrong type for value; expected int; got
/// float64`), so a chart that Helm rejects is rejected here too.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ty {
    /// `interface {}`: anything, nil included.
    Any,
    /// `reflect.Value`: Go's builtins see the argument untouched.
    Raw,
    Str,
    Int,
    Int64,
    Float64,
    Bool,
    /// `map[string]interface {}` (a `common.Values` is assignable to it).
    Map,
    /// `[]interface {}`
    List,
}

impl Ty {
    /// The Go spelling, for error messages.
    pub fn name(self) -> &'static str {
        match self {
            Ty::Any | Ty::Raw => "interface {}",
            Ty::Str => "string",
            Ty::Int => "int",
            Ty::Int64 => "int64",
            Ty::Float64 => "float64",
            Ty::Bool => "bool",
            Ty::Map => "map[string]interface {}",
            Ty::List => "[]interface {}",
        }
    }
    /// Whether an untyped nil can be passed (`reflect` `canBeNil`).
    pub fn can_be_nil(self) -> bool {
        matches!(self, Ty::Any | Ty::Raw | Ty::Map | Ty::List)
    }
}

/// The signature of a callable: fixed parameters, then an optional variadic one.
#[derive(Clone, Copy, Debug)]
pub struct Sig {
    pub params: &'static [Ty],
    pub variadic: Option<Ty>,
}

/// A bound method, ready to be called with checked arguments.
#[derive(Clone)]
pub struct Method {
    pub sig: Sig,
    #[allow(clippy::type_complexity)]
    pub call: Rc<dyn Fn(Vec<Value>) -> Result<Value, String>>,
}

impl Method {
    pub fn new(
        params: &'static [Ty],
        call: impl Fn(Vec<Value>) -> Result<Value, String> + 'static,
    ) -> Method {
        Method {
            sig: Sig {
                params,
                variadic: None,
            },
            call: Rc::new(call),
        }
    }
}

/// A Go struct (or pointer to one) exposed to templates.
pub trait Object {
    /// `%T`, e.g. `*common.Capabilities`.
    fn type_name(&self) -> &str;
    /// `Kind::Struct` or `Kind::Ptr`.
    fn kind(&self) -> Kind;
    /// Exported field names in declaration order (for `%v` and JSON).
    fn field_names(&self) -> &'static [&'static str];
    /// The fields `%v` prints (Go prints unexported ones too), by default the exported.
    fn print_fields(&self) -> Vec<Value> {
        self.field_names()
            .iter()
            .map(|n| self.field(n).unwrap_or_default())
            .collect()
    }
    /// An exported field's value.
    fn field(&self, name: &str) -> Option<Value>;
    /// A method bound to this object.
    fn method(&self, _name: &str) -> Option<Method> {
        None
    }
    /// Go's `String()`, when fmt would call it. `top` is true when the object is printed
    /// directly by an action (addressable), false inside a container.
    fn stringer(&self, _top: bool) -> Option<String> {
        None
    }
    /// The elements, when the object is a slice-like type.
    fn items(&self) -> Option<Vec<Value>> {
        None
    }
    fn truth(&self) -> bool {
        true
    }
    fn deep_equal(&self, _other: &dyn Object) -> bool {
        false
    }
    /// What `encoding/json` marshals for this object; by default its exported fields.
    fn json_value(&self) -> Option<Value> {
        None
    }
}
