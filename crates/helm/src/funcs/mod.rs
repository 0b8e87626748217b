//! Helm's function map: Go's builtins, Sprig's `TxtFuncMap` without `env` and
//! `expandenv`, and Helm's own (`toYaml`, `include`, `tpl`, `required`, `lookup`...).
//!
//! Every function declares its Go signature ([`Sig`]) so the evaluator rejects what Go
//! rejects (`trunc .Values.n "x"` with a float64 `n` fails in Helm too) and passes the
//! same Go types in. Sprig functions that panic in Go return an error with the panic's
//! text, as `text/template` reports a recovered panic.
//!
//! Not provided: `call` always fails (templates have no function values); `getHostByName`
//! returns "" (Helm's default without DNS). Everything else of Sprig v3 and Helm v4 is
//! here; see the per-area modules. Random, clock and key-generating functions work but
//! cannot be compared byte for byte with Helm.
pub mod args;
pub mod builtins;
pub mod certs;
pub mod conv;
pub mod crypto;
pub mod date;
pub mod dicts;
pub mod encoding;
pub mod helm;
pub mod lists;
pub mod math;
pub mod misc;
pub mod regex;
pub mod semver;
pub mod strings;

use std::collections::HashMap;
use std::sync::OnceLock;

pub use args::Args;

use crate::template::error::FnError;
use crate::template::exec::Exec;
use crate::value::object::{Sig, Ty};
use crate::value::Value;

pub type FnResult = Result<Value, FnError>;
pub type FnImpl = fn(&mut Exec<'_>, Args) -> FnResult;

/// Go's lazily evaluated builtins.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lazy {
    No,
    And,
    Or,
}

/// One template function.
pub struct FuncDef {
    pub name: &'static str,
    pub sig: Sig,
    pub imp: FnImpl,
    pub lazy: Lazy,
    /// The result changes from one call to the next (randomness, the clock); set from
    /// [`NONDETERMINISTIC`] when the table is built.
    pub nondeterministic: bool,
}

/// Functions whose result differs between renders with the same input: random values,
/// keys and certificates (random serials, validity from the clock), random salts and IVs,
/// and the clock. A render reports which it called (`Rendered::nondeterministic`).
pub const NONDETERMINISTIC: &[&str] = &[
    "randAlphaNum",
    "randAlpha",
    "randNumeric",
    "randAscii",
    "randBytes",
    "randInt",
    "uuidv4",
    "shuffle",
    "bcrypt",
    "htpasswd",
    "encryptAES",
    "now",
    "ago",
    "genPrivateKey",
    "genCA",
    "genCAWithKey",
    "genSelfSignedCert",
    "genSelfSignedCertWithKey",
    "genSignedCert",
    "genSignedCertWithKey",
];

impl std::fmt::Debug for FuncDef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "func {}", self.name)
    }
}

/// A function with fixed parameters.
#[macro_export]
macro_rules! func {
    ($name:literal, [$($p:ident),*], $imp:expr) => {
        $crate::funcs::FuncDef {
            name: $name,
            sig: $crate::value::object::Sig { params: &[$($crate::value::object::Ty::$p),*], variadic: None },
            imp: $imp,
            lazy: $crate::funcs::Lazy::No,
            nondeterministic: false,
        }
    };
}

/// A variadic function: fixed parameters, then any number of `$v`.
#[macro_export]
macro_rules! funcv {
    ($name:literal, [$($p:ident),*], $v:ident, $imp:expr) => {
        $crate::funcs::FuncDef {
            name: $name,
            sig: $crate::value::object::Sig { params: &[$($crate::value::object::Ty::$p),*], variadic: Some($crate::value::object::Ty::$v) },
            imp: $imp,
            lazy: $crate::funcs::Lazy::No,
            nondeterministic: false,
        }
    };
}

type Table = HashMap<&'static str, &'static FuncDef, foldhash::fast::RandomState>;

fn table() -> &'static Table {
    static TABLE: OnceLock<Table> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut m = Table::default();
        // Later groups win, as Helm's map overrides Sprig's and Sprig's overrides Go's.
        for group in [
            builtins::FUNCS,
            strings::FUNCS,
            conv::FUNCS,
            math::FUNCS,
            misc::FUNCS,
            lists::FUNCS,
            dicts::FUNCS,
            encoding::FUNCS,
            regex::FUNCS,
            semver::FUNCS,
            date::FUNCS,
            crypto::FUNCS,
            certs::FUNCS,
            helm::FUNCS,
        ] {
            for f in group {
                let f: &'static FuncDef = if NONDETERMINISTIC.contains(&f.name) {
                    // Built once per process: a flagged copy of the static definition.
                    Box::leak(Box::new(FuncDef {
                        nondeterministic: true,
                        ..*f
                    }))
                } else {
                    f
                };
                m.insert(f.name, f);
            }
        }
        m
    })
}

/// The function a template may call by this name.
pub fn lookup(name: &str) -> Option<&'static FuncDef> {
    table().get(name).copied()
}

/// Every function name, sorted.
pub fn names() -> Vec<&'static str> {
    let mut v: Vec<&'static str> = table().keys().copied().collect();
    v.sort_unstable();
    v
}

// Argument helpers: the evaluator has checked the Go types already.

pub(crate) fn s(v: &Value) -> &str {
    match v {
        Value::Str(s) => s,
        _ => "",
    }
}

pub(crate) fn int(v: &Value) -> i64 {
    match v {
        Value::Int(i) | Value::Int64(i) => *i,
        Value::Uint64(u) => *u as i64,
        _ => 0,
    }
}

pub(crate) fn boolean(v: &Value) -> bool {
    matches!(v, Value::Bool(true))
}

/// The panic text Go reports for `reflect.TypeOf(nil).Kind()`.
pub(crate) const NIL_DEREF: &str =
    "runtime error: invalid memory address or nil pointer dereference";

/// Checks a built string against the render's limit.
pub(crate) fn check_len(ex: &Exec<'_>, n: usize) -> Result<(), FnError> {
    if n > ex.rt.limits.max_string_bytes {
        return Err(FnError::Nested(crate::template::error::ExecError::limit(
            format!(
                "a function would build a string of {n} bytes, over the limit of {}",
                ex.rt.limits.max_string_bytes
            ),
        )));
    }
    Ok(())
}

/// Checks a built list against the render's limit.
pub(crate) fn check_list(ex: &Exec<'_>, n: usize) -> Result<(), FnError> {
    if n > ex.rt.limits.max_list_len {
        return Err(FnError::Nested(crate::template::error::ExecError::limit(
            format!(
                "a function would build a list of {n} items, over the limit of {}",
                ex.rt.limits.max_list_len
            ),
        )));
    }
    Ok(())
}

#[allow(dead_code)]
pub(crate) const ANY: Ty = Ty::Any;
