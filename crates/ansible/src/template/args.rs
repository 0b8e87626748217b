//! Python-style arguments for filters, tests and lookups: positional or by keyword.
use minijinja::value::{Value, ValueKind};
use minijinja::{Error, ErrorKind};

pub struct Args {
    pub pos: Vec<Value>,
    pub kw: Vec<(String, Value)>,
}

impl Args {
    pub fn parse(mut rest: Vec<Value>) -> Args {
        let mut kw = Vec::new();
        if rest.last().is_some_and(Value::is_kwargs) {
            if let Some(k) = rest.pop() {
                if let Ok(keys) = k.try_iter() {
                    for key in keys {
                        let v = k.get_item(&key).unwrap_or_default();
                        kw.push((key.as_str().unwrap_or_default().to_string(), v));
                    }
                }
            }
        }
        Args { pos: rest, kw }
    }

    /// The argument at position `i` (after the filtered value) or named `name`.
    pub fn get(&self, i: usize, name: &str) -> Option<Value> {
        self.kw
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .or_else(|| self.pos.get(i).cloned())
    }

    pub fn kw(&self, name: &str) -> Option<Value> {
        self.kw
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    }

    pub fn get_str(&self, i: usize, name: &str, default: &str) -> Result<String, Error> {
        match self.get(i, name) {
            None => Ok(default.to_string()),
            Some(v) if v.is_undefined() => Err(undefined_arg(name)),
            Some(v) => Ok(super::value::py_str(&v)),
        }
    }

    pub fn get_bool(&self, i: usize, name: &str, default: bool) -> bool {
        self.get(i, name).map_or(default, |v| v.is_true())
    }

    /// Refuses keyword arguments not in `known` and more positionals than `max`.
    pub fn check(&self, what: &str, known: &[&str], max: usize) -> Result<(), Error> {
        if let Some((k, _)) = self.kw.iter().find(|(k, _)| !known.contains(&k.as_str())) {
            return Err(invalid(format!(
                "{what}() got an unexpected keyword argument '{k}'"
            )));
        }
        if self.pos.len() > max {
            return Err(invalid(format!(
                "{what}() takes at most {max} arguments ({} given)",
                self.pos.len()
            )));
        }
        Ok(())
    }
}

pub fn invalid(msg: impl Into<String>) -> Error {
    Error::new(ErrorKind::InvalidOperation, msg.into())
}

pub fn undefined_arg(name: &str) -> Error {
    Error::new(
        ErrorKind::UndefinedError,
        format!("argument '{name}' is undefined"),
    )
}

/// Refuses an undefined input, as Ansible's filters do when they touch it.
pub fn defined(v: &Value) -> Result<&Value, Error> {
    if v.is_undefined() {
        Err(Error::new(
            ErrorKind::UndefinedError,
            "undefined value passed to a filter",
        ))
    } else if v.kind() == ValueKind::Invalid {
        v.get_attr("x").map(|_| v)
    } else {
        Ok(v)
    }
}

/// The first element of a filter's arguments: the value being filtered.
pub fn split_first(mut rest: Vec<Value>) -> (Value, Args) {
    let first = if rest.is_empty() {
        Value::UNDEFINED
    } else {
        rest.remove(0)
    };
    (first, Args::parse(rest))
}
