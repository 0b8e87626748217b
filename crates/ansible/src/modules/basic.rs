//! `set_fact`, `debug`, `fail`, `assert`, `pause` and `requeue_after`.
use std::sync::Arc;
use std::time::Duration;

use minijinja::value::{Value, ValueKind};
use serde_json::{json, Map, Value as Json};

use super::Effects;
use crate::engine::RunContext;
use crate::template::{value, Scope};

pub fn set_fact(args: &Value, fx: &mut Effects) -> Result<Json, String> {
    let mut facts = Map::new();
    for k in args.try_iter().map_err(|e| e.to_string())? {
        let name = value::py_str(&k);
        if name == "cacheable" {
            continue;
        }
        if !crate::role::parse::valid_var_name(&name) {
            return Err(format!("The variable name '{name}' is not valid. Variables must start with a letter or underscore character, and contain only letters, numbers and underscores."));
        }
        let mut v = args.get_item(&k).map_err(|e| e.to_string())?;
        // jinja2_native off: the strings true/false/yes/no become booleans.
        if let Some(s) = v.as_str() {
            let l = s.to_lowercase();
            if ["true", "false", "yes", "no"].contains(&l.as_str()) {
                v = Value::from(l == "true" || l == "yes");
            }
        }
        facts.insert(name.clone(), value::to_json(&v).map_err(|e| e.to_string())?);
        fx.facts.push((name, v));
    }
    if facts.is_empty() {
        return Err(
            "No key/value pairs provided, at least one is required for this action to succeed"
                .into(),
        );
    }
    Ok(json!({"changed": false, "ansible_facts": facts}))
}

pub fn debug(args: &Value, scope: &Arc<Scope>) -> Result<Json, String> {
    let get = |k: &str| args.get_attr(k).ok().filter(|v| !v.is_undefined());
    let templar = scope.templar();
    if let Some(var) = get("var") {
        let name = value::py_str(&var);
        let shown = match templar.template_str(&format!("{{{{ {name} }}}}"), scope) {
            Ok(v) => value::to_json(&v).unwrap_or(Json::Null),
            Err(crate::Error::Undefined(_)) => Json::String("VARIABLE IS NOT DEFINED!".into()),
            Err(e) => return Err(e.to_string()),
        };
        let mut m = Map::new();
        m.insert(name, shown);
        m.insert("changed".into(), Json::Bool(false));
        return Ok(Json::Object(m));
    }
    // `msg` comes templated, with the task's other arguments.
    let msg = match get("msg") {
        Some(m) => value::to_json(&m).map_err(|e| e.to_string())?,
        None => Json::Null,
    };
    let msg = if msg.is_null() || msg.as_str() == Some(crate::engine::OMIT) {
        Json::String("Hello world!".into())
    } else {
        msg
    };
    Ok(json!({"changed": false, "msg": msg}))
}

pub fn fail(args: &Value) -> Result<Json, String> {
    let msg = args.get_attr("msg").ok().filter(|v| !v.is_undefined());
    let msg = msg.map_or_else(
        || Json::String("Failed as requested from task".into()),
        |m| value::to_json(&m).unwrap_or(Json::Null),
    );
    Ok(json!({"changed": false, "failed": true, "msg": msg}))
}

pub fn assert(args: &Value, scope: &Arc<Scope>) -> Result<Json, String> {
    let templar = scope.templar();
    let get = |k: &str| {
        args.get_attr(k)
            .ok()
            .filter(|v| !v.is_undefined() && !v.is_none())
    };
    let that: Vec<String> = match get("that") {
        Some(t) if t.kind() == ValueKind::Seq => t
            .try_iter()
            .map_err(|e| e.to_string())?
            .map(|c| value::py_str(&c))
            .collect(),
        Some(t) => vec![value::py_str(&t)],
        None => return Err("conditional required in \"that\" string".into()),
    };
    let render = |v: Option<Value>| -> Result<Option<Json>, String> {
        v.map(|m| {
            templar
                .template_value(&m, scope)
                .map_err(|e| e.to_string())
                .and_then(|x| value::to_json(&x).map_err(|e| e.to_string()))
        })
        .transpose()
    };
    for cond in &that {
        let ok = templar
            .eval_bool(cond, scope)
            .map_err(|e| format!("The conditional check '{cond}' failed. The error was: {e}"))?;
        if !ok {
            let msg = render(get("fail_msg").or(get("msg")))?
                .unwrap_or(Json::String("Assertion failed".into()));
            return Ok(
                json!({"changed": false, "failed": true, "assertion": cond, "evaluated_to": false, "msg": msg}),
            );
        }
    }
    let msg = render(get("success_msg"))?.unwrap_or(Json::String("All assertions passed".into()));
    Ok(json!({"changed": false, "msg": msg}))
}

pub async fn pause(args: &Value, ctx: &RunContext) -> Result<Json, String> {
    let num = |k: &str| -> Result<Option<f64>, String> {
        match args
            .get_attr(k)
            .ok()
            .filter(|v| !v.is_undefined() && !v.is_none())
        {
            None => Ok(None),
            Some(v) => value::py_str(&v)
                .trim()
                .parse::<f64>()
                .map(Some)
                .map_err(|_| {
                    format!(
                        "non-integer value given for prompt duration: {}",
                        value::py_str(&v)
                    )
                }),
        }
    };
    let secs =
        match (num("seconds")?, num("minutes")?) {
            (Some(s), _) => s,
            (None, Some(m)) => m * 60.0,
            (None, None) => return Err(
                "pause without seconds or minutes waits for a prompt, which bosun cannot answer"
                    .into(),
            ),
        };
    if secs >= ctx.remaining().as_secs_f64() {
        return Err(format!(
            "pause of {secs} s would go past the run's deadline of {} s",
            ctx.run_timeout.as_secs()
        ));
    }
    let start = chrono::Utc::now();
    if secs > 0.0 {
        tokio::time::sleep(Duration::from_secs_f64(secs)).await;
    }
    let stop = chrono::Utc::now();
    let fmt = |t: chrono::DateTime<chrono::Utc>| t.format("%Y-%m-%d %H:%M:%S%.6f").to_string();
    Ok(
        json!({"changed": false, "rc": 0, "stderr": "", "stdout": format!("Paused for {} seconds", secs), "start": fmt(start), "stop": fmt(stop), "delta": secs as i64, "echo": true, "user_input": ""}),
    )
}

/// Go's `time.ParseDuration` (what ansible-operator applies to the module's `period`).
pub fn parse_go_duration(s: &str) -> Result<Duration, String> {
    let bad = || format!("time: invalid duration \"{s}\"");
    let t = s.trim();
    if t == "0" {
        return Ok(Duration::ZERO);
    }
    let (neg, mut rest) = match t.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    if rest.is_empty() {
        return Err(bad());
    }
    let mut total = 0f64;
    while !rest.is_empty() {
        let num_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(bad)?;
        if num_end == 0 {
            return Err(bad());
        }
        let n: f64 = rest[..num_end].parse().map_err(|_| bad())?;
        rest = &rest[num_end..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let mult = match &rest[..unit_end] {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return Err(bad()),
        };
        total += n * mult;
        rest = &rest[unit_end..];
    }
    if neg {
        return Ok(Duration::ZERO);
    }
    Ok(Duration::from_secs_f64(total))
}

pub fn requeue_after(args: &Value, fx: &mut Effects) -> Result<Json, String> {
    let time = args
        .get_attr("time")
        .ok()
        .filter(|v| !v.is_undefined())
        .map(|v| value::py_str(&v))
        .ok_or("requeue_after needs time")?;
    fx.requeue = Some(parse_go_duration(&time)?);
    Ok(json!({"changed": false, "period": time}))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations() {
        assert_eq!(
            parse_go_duration("30s").expect("test value"),
            Duration::from_secs(30)
        );
        assert_eq!(
            parse_go_duration("1m30s").expect("test value"),
            Duration::from_secs(90)
        );
        assert_eq!(
            parse_go_duration("1.5h").expect("test value"),
            Duration::from_secs(5400)
        );
        assert_eq!(
            parse_go_duration("250ms").expect("test value"),
            Duration::from_millis(250)
        );
        assert!(parse_go_duration("30").is_err());
        assert!(parse_go_duration("").is_err());
        assert!(parse_go_duration("5x").is_err());
    }
}
