//! Helm's own functions (`pkg/engine/funcs.go`, `engine.go`): YAML and JSON through
//! Go's encoders, `include` and `tpl` with Helm's recursion limit, `required` and
//! `fail` with Helm's error markers, and an offline `lookup` that finds nothing.
use super::{s, Args, FnResult, FuncDef};
use crate::template::error::{helm_wrap, ExecError, FnError};
use crate::template::exec::Exec;
use crate::template::parse::parse;
use crate::template::set::Layer;
use crate::value::json::{self, Encode};
use crate::value::{format, Data, ListKind, Map, MapKind, Str, Value};
use crate::{func, yaml};

pub const FUNCS: &[FuncDef] = &[
    func!("toYaml", [Any], |_, a| Ok(Value::string(
        to_yaml(&a[0]).unwrap_or_default()
    ))),
    func!("mustToYaml", [Any], |_, a| Ok(Value::string(to_yaml(
        &a[0]
    )?))),
    func!("toYamlPretty", [Any], |_, a| Ok(Value::string(
        to_yaml(&a[0]).unwrap_or_default()
    ))),
    func!("fromYaml", [Str], |_, a| Ok(from_yaml_map(s(&a[0])))),
    func!("fromYamlArray", [Str], |_, a| Ok(from_yaml_array(s(&a[0])))),
    func!("toJson", [Any], |_, a| Ok(Value::string(
        json::marshal(&a[0]).unwrap_or_default()
    ))),
    func!("mustToJson", [Any], |_, a| Ok(Value::string(
        json::marshal(&a[0]).map_err(|e| e.0)?
    ))),
    func!("toPrettyJson", [Any], |_, a| Ok(Value::string(
        pretty(&a[0]).unwrap_or_default()
    ))),
    func!("mustToPrettyJson", [Any], |_, a| Ok(Value::string(
        pretty(&a[0]).map_err(|e| e.0)?
    ))),
    func!("toRawJson", [Any], |_, a| Ok(Value::string(
        raw(&a[0]).unwrap_or_default()
    ))),
    func!("mustToRawJson", [Any], |_, a| Ok(Value::string(
        raw(&a[0]).map_err(|e| e.0)?
    ))),
    func!("fromJson", [Str], |_, a| Ok(from_json_map(s(&a[0])))),
    func!("fromJsonArray", [Str], |_, a| Ok(from_json_array(s(&a[0])))),
    func!("mustFromJson", [Str], |_, a| Ok(json::decode(
        s(&a[0]),
        json::Numbers::Float
    )
    .map_err(|e| e.0)?
    .to_value())),
    func!("toToml", [Any], |_, a| Ok(Value::string(
        crate::toml::encode(&a[0]).unwrap_or_else(|e| e)
    ))),
    func!("mustToToml", [Any], |_, a| Ok(Value::string(
        crate::toml::encode(&a[0])?
    ))),
    func!("fromToml", [Str], |_, a| Ok(crate::toml::decode_map(s(
        &a[0]
    )))),
    func!("include", [Str, Any], include),
    func!("tpl", [Str, Any], tpl),
    func!("required", [Str, Any], |_, a| match &a[1] {
        Value::Nil => Err(helm_wrap(s(&a[0])).into()),
        Value::Str(v) if v.is_empty() => Err(helm_wrap(s(&a[0])).into()),
        v => Ok(v.clone()),
    }),
    func!("fail", [Str], |_, a| Err(helm_wrap(s(&a[0])).into())),
    func!("lookup", [Str, Str, Str, Str], lookup),
    func!("getHostByName", [Str], |_, _| Ok(Value::str(""))),
];

/// Helm's `toYAML`: JSON first (so Go's JSON rules apply), then YAML, without the
/// final newline.
pub fn to_yaml(v: &Value) -> Result<String, String> {
    let mut y = match yaml_tree(v, 0) {
        // Fast path: the tree JSONToYAML would read back from Go's JSON.
        Some(tree) => bosun_yaml::goyaml::marshal(&tree),
        None => {
            let j = json::marshal(v).map_err(|e| e.0)?;
            yaml::json_to_yaml(&j)?
        }
    };
    if y.ends_with('\n') {
        y.pop();
    }
    Ok(y)
}

/// The YAML value go-yaml reads from `json.Marshal(v)`: integral floats below 1e21 are
/// written as digits and come back as integers. None when the value holds something
/// JSON would refuse or render through a struct (the slow path decides then).
fn yaml_tree(v: &Value, depth: usize) -> Option<bosun_yaml::Yaml> {
    use bosun_yaml::{Node, Yaml};
    if depth > 1_000 {
        return None;
    }
    Some(match v {
        Value::Nil => Yaml::Null,
        Value::Bool(b) => Yaml::Bool(*b),
        Value::Int(i) | Value::Int64(i) => Yaml::Int(*i),
        Value::Uint64(u) => match i64::try_from(*u) {
            Ok(i) => Yaml::Int(i),
            Err(_) => Yaml::BigInt(u.to_string()),
        },
        Value::Float(f) => {
            let text = json::float(*f).ok()?;
            if text.contains(['.', 'e', 'E']) {
                Yaml::Float(*f)
            } else if let Ok(i) = text.parse::<i64>() {
                Yaml::Int(i)
            } else if text.parse::<u64>().is_ok() {
                Yaml::BigInt(text)
            } else {
                Yaml::Float(*f)
            }
        }
        Value::Str(s) => Yaml::Str(String::from(&**s)),
        Value::Bytes(b) => Yaml::Str(crate::funcs::encoding::base64_std(b)),
        Value::List(l) => Yaml::Seq(
            l.items
                .iter()
                .map(|x| yaml_tree(x, depth + 1).map(Node::new))
                .collect::<Option<Vec<_>>>()?,
        ),
        Value::Map(m) => Yaml::Map(
            m.entries()
                .iter()
                .map(|(k, x)| {
                    Some((
                        Node::new(Yaml::Str(String::from(&**k))),
                        Node::new(yaml_tree(x, depth + 1)?),
                    ))
                })
                .collect::<Option<Vec<_>>>()?,
        ),
        Value::Obj(_) => return None,
    })
}

fn pretty(v: &Value) -> Result<String, json::JsonError> {
    json::encode(
        v,
        Encode {
            escape_html: true,
            indent: Some("  "),
        },
    )
}

fn raw(v: &Value) -> Result<String, json::JsonError> {
    json::encode(
        v,
        Encode {
            escape_html: false,
            indent: None,
        },
    )
}

/// YAML text to data the way `sigs.k8s.io/yaml.Unmarshal` into `interface{}` does.
pub fn yaml_data(src: &str) -> Result<Data, String> {
    let j = yaml::yaml_to_json(src)?;
    json::decode(&j, json::Numbers::Float)
        .map_err(|e| format!("error unmarshaling JSON: while decoding JSON: {}", e.0))
}

fn error_map(msg: String) -> Value {
    let m = Map::new(MapKind::Iface);
    m.insert(Str::from("Error"), Value::string(msg));
    Value::Map(m)
}

fn unmarshal_into_map(d: Data, what: &str) -> Value {
    match d {
        Data::Map(_) => d.to_value(),
        Data::Null => Value::empty_map(),
        other => error_map(format!(
            "{what}json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
            json_kind(&other)
        )),
    }
}

fn json_kind(d: &Data) -> &'static str {
    match d {
        Data::List(_) => "array",
        Data::String(_) => "string",
        Data::Int(_) | Data::Float(_) => "number",
        Data::Bool(_) => "bool",
        Data::Map(_) => "object",
        Data::Null => "null",
    }
}

fn from_yaml_map(src: &str) -> Value {
    match yaml::yaml_to_json(src) {
        Err(e) => error_map(e),
        Ok(j) => match json::decode(&j, json::Numbers::Float) {
            Ok(d) => unmarshal_into_map(d, "error unmarshaling JSON: while decoding JSON: "),
            Err(e) => error_map(e.0),
        },
    }
}

fn from_yaml_array(src: &str) -> Value {
    let r = yaml::yaml_to_json(src)
        .and_then(|j| json::decode(&j, json::Numbers::Float).map_err(|e| e.0));
    match r {
        Ok(Data::List(l)) => Value::list(ListKind::Iface, l.iter().map(Data::to_value).collect()),
        Ok(Data::Null) => Value::list(ListKind::Iface, Vec::new()),
        Ok(other) => Value::list(
            ListKind::Iface,
            vec![Value::string(format!(
                "error unmarshaling JSON: while decoding JSON: json: cannot unmarshal {} into Go value of type []interface {{}}",
                json_kind(&other)
            ))],
        ),
        Err(e) => Value::list(ListKind::Iface, vec![Value::string(e)]),
    }
}

fn from_json_map(src: &str) -> Value {
    match json::decode(src, json::Numbers::Float) {
        Ok(d) => unmarshal_into_map(d, ""),
        Err(e) => error_map(e.0),
    }
}

fn from_json_array(src: &str) -> Value {
    match json::decode(src, json::Numbers::Float) {
        Ok(Data::List(l)) => Value::list(ListKind::Iface, l.iter().map(Data::to_value).collect()),
        Ok(Data::Null) => Value::list(ListKind::Iface, Vec::new()),
        Ok(other) => Value::list(
            ListKind::Iface,
            vec![Value::string(format!(
                "json: cannot unmarshal {} into Go value of type []interface {{}}",
                json_kind(&other)
            ))],
        ),
        Err(e) => Value::list(ListKind::Iface, vec![Value::string(e.0)]),
    }
}

fn include(ex: &mut Exec<'_>, a: Args) -> FnResult {
    // The name arrives as a shared string: count it without copying it.
    let name: Str = match &a[0] {
        Value::Str(n) => n.clone(),
        _ => Str::from(""),
    };
    {
        let mut inc = ex.rt.includes.borrow_mut();
        let limit = ex.rt.limits.max_include_per_name;
        match inc.get_mut(&name) {
            Some(v) => {
                if *v > limit {
                    return Err(FnError::Msg(format!(
                        "rendering template has a nested reference name: {name}: unable to execute template"
                    )));
                }
                *v += 1;
            }
            None => {
                inc.insert(name.clone(), 1);
            }
        }
    }
    let data = a.into_iter().nth(1).unwrap_or_default();
    let r = ex.execute_template_str(&name, data);
    if let Some(v) = ex.rt.includes.borrow_mut().get_mut(&name) {
        *v = v.saturating_sub(1);
    }
    r.map(Value::Str).map_err(FnError::Nested)
}

/// Helm's `lookup`: an empty map offline, else what the caller's [`Lookup`] reads
/// (`crate::render::lookup`).
///
/// [`Lookup`]: crate::render::lookup::Lookup
fn lookup(ex: &mut Exec<'_>, a: Args) -> FnResult {
    let Some(l) = ex.rt.lookup.clone() else {
        return Ok(Value::empty_map());
    };
    let (api_version, kind, namespace, name) = (s(&a[0]), s(&a[1]), s(&a[2]), s(&a[3]));
    let found = l.lookup(api_version, kind, namespace, name);
    let data = crate::render::lookup::answer(found, name, kind)?;
    Ok(data.to_value())
}

fn tpl(ex: &mut Exec<'_>, a: Args) -> FnResult {
    let text = s(&a[0]);
    let trees = match ex.rt.tpl_cache.get(text) {
        Some(t) => t,
        None => {
            let parsed = parse("gotpl", "gotpl", text)
                .map(|ts| ts.into_iter().map(std::sync::Arc::new).collect())
                .map_err(|e| e.0);
            ex.rt.tpl_cache.insert(text, parsed.clone());
            parsed
        }
    };
    let trees = match trees {
        Ok(t) => t,
        Err(e) => {
            return Err(FnError::Msg(format!(
                "cannot parse template {}: {e}",
                format::quote(text, false)
            )))
        }
    };
    let layer = Layer::over(&ex.set, &trees);
    // Go executes the template it just parsed, not the set's "gotpl": an empty or blank
    // text (whitespace, comments, only `define`s) does not replace the enclosing `tpl`'s
    // text in the set, and looking it up by name would run that enclosing text again.
    let Some(main) = trees.iter().find(|t| &*t.name == "gotpl") else {
        return Ok(Value::str(""));
    };
    let data = a.get(1).cloned().unwrap_or_default();
    match ex.execute_in(layer.clone(), main, data) {
        Ok(out) if out.contains("<no value>") => Ok(Value::string(out.replace("<no value>", ""))),
        Ok(out) => Ok(Value::string(out)),
        Err(e) if e.kind == crate::template::error::ErrorKind::Limit => Err(FnError::Nested(e)),
        Err(e) => Err(FnError::Nested(ExecError::exec(format!(
            "error during tpl function execution for {}: {}",
            format::quote(text, false),
            e.msg
        )))),
    }
}
