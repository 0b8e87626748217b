//! Sprig's arithmetic: integer functions return `int64`, the `*f` functions compute in
//! decimal (shopspring/decimal: floats enter by their shortest text, division keeps 16
//! decimal places) and return `float64`.
use super::conv::{to_float64, to_int64};
use super::{check_list, int, FnResult, FuncDef};
use crate::template::exec::Exec;
use crate::value::{ListKind, Value};
use crate::{func, funcv};

pub const FUNCS: &[FuncDef] = &[
    func!("add1", [Any], |_, a| Ok(Value::Int64(
        to_int64(&a[0]).wrapping_add(1)
    ))),
    funcv!("add", [], Any, |_, a| Ok(Value::Int64(
        a.iter().fold(0i64, |s, x| s.wrapping_add(to_int64(x)))
    ))),
    func!("sub", [Any, Any], |_, a| Ok(Value::Int64(
        to_int64(&a[0]).wrapping_sub(to_int64(&a[1]))
    ))),
    func!("div", [Any, Any], |_, a| {
        let d = to_int64(&a[1]);
        if d == 0 {
            return Err("runtime error: integer divide by zero".into());
        }
        Ok(Value::Int64(to_int64(&a[0]).wrapping_div(d)))
    }),
    func!("mod", [Any, Any], |_, a| {
        let d = to_int64(&a[1]);
        if d == 0 {
            return Err("runtime error: integer divide by zero".into());
        }
        Ok(Value::Int64(to_int64(&a[0]).wrapping_rem(d)))
    }),
    funcv!("mul", [Any], Any, |_, a| Ok(Value::Int64(
        a[1..]
            .iter()
            .fold(to_int64(&a[0]), |p, x| p.wrapping_mul(to_int64(x)))
    ))),
    func!("randInt", [Int, Int], |_, a| {
        let (lo, hi) = (int(&a[0]), int(&a[1]));
        if hi - lo <= 0 {
            return Err("invalid argument to Intn".into());
        }
        Ok(Value::Int(
            lo + (rand::random::<u64>() % (hi - lo) as u64) as i64,
        ))
    }),
    func!("add1f", [Any], |_, a| Ok(Value::Float(decimal_op(
        &a[0],
        &[Value::Int(1)],
        Op::Add
    )))),
    funcv!("addf", [], Any, |_, a| Ok(Value::Float(decimal_op(
        &Value::Float(0.0),
        &a,
        Op::Add
    )))),
    funcv!("subf", [Any], Any, |_, a| Ok(Value::Float(decimal_op(
        &a[0],
        &a[1..],
        Op::Sub
    )))),
    funcv!("mulf", [Any], Any, |_, a| Ok(Value::Float(decimal_op(
        &a[0],
        &a[1..],
        Op::Mul
    )))),
    funcv!("divf", [Any], Any, |_, a| Ok(Value::Float(decimal_op(
        &a[0],
        &a[1..],
        Op::Div
    )))),
    funcv!("biggest", [Any], Any, |_, a| Ok(Value::Int64(
        a[1..].iter().map(to_int64).fold(to_int64(&a[0]), i64::max)
    ))),
    funcv!("max", [Any], Any, |_, a| Ok(Value::Int64(
        a[1..].iter().map(to_int64).fold(to_int64(&a[0]), i64::max)
    ))),
    funcv!("min", [Any], Any, |_, a| Ok(Value::Int64(
        a[1..].iter().map(to_int64).fold(to_int64(&a[0]), i64::min)
    ))),
    funcv!("maxf", [Any], Any, |_, a| Ok(Value::Float(
        a[1..]
            .iter()
            .map(to_float64)
            .fold(to_float64(&a[0]), go_max)
    ))),
    funcv!("minf", [Any], Any, |_, a| Ok(Value::Float(
        a[1..]
            .iter()
            .map(to_float64)
            .fold(to_float64(&a[0]), go_min)
    ))),
    func!("floor", [Any], |_, a| Ok(Value::Float(
        to_float64(&a[0]).floor()
    ))),
    func!("ceil", [Any], |_, a| Ok(Value::Float(
        to_float64(&a[0]).ceil()
    ))),
    funcv!("round", [Any, Int], Float64, |_, a| {
        let on = a.get(2).map(to_float64).unwrap_or(0.5);
        let val = to_float64(&a[0]);
        let pow = 10f64.powf(int(&a[1]) as f64);
        let digit = pow * val;
        let frac = digit.fract();
        let r = if frac >= on {
            digit.ceil()
        } else {
            digit.floor()
        };
        Ok(Value::Float(r / pow))
    }),
    func!("until", [Int], |ex, a| {
        let c = int(&a[0]);
        until_step(ex, 0, c, if c < 0 { -1 } else { 1 })
    }),
    func!("untilStep", [Int, Int, Int], |ex, a| until_step(
        ex,
        int(&a[0]),
        int(&a[1]),
        int(&a[2])
    )),
    funcv!("seq", [], Int, |ex, a| seq(ex, a.iter().map(int).collect())),
];

fn go_max(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        return f64::NAN;
    }
    a.max(b)
}

fn go_min(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        return f64::NAN;
    }
    a.min(b)
}

fn range_len(start: i64, stop: i64, step: i64) -> u128 {
    if step == 0 {
        return 0;
    }
    let span = (i128::from(stop) - i128::from(start)).unsigned_abs();
    span.div_ceil(i128::from(step).unsigned_abs())
}

fn steps(start: i64, stop: i64, step: i64) -> Vec<i64> {
    let mut v = Vec::new();
    if stop < start {
        if step >= 0 {
            return v;
        }
        let mut i = start;
        while i > stop {
            v.push(i);
            i = match i.checked_add(step) {
                Some(n) => n,
                None => break,
            };
        }
        return v;
    }
    if step <= 0 {
        return v;
    }
    let mut i = start;
    while i < stop {
        v.push(i);
        i = match i.checked_add(step) {
            Some(n) => n,
            None => break,
        };
    }
    v
}

fn until_step(ex: &mut Exec<'_>, start: i64, stop: i64, step: i64) -> FnResult {
    let valid = (stop < start && step < 0) || (stop >= start && step > 0);
    if valid {
        check_list(
            ex,
            usize::try_from(range_len(start, stop, step)).unwrap_or(usize::MAX),
        )?;
    }
    Ok(Value::list(
        ListKind::Int,
        steps(start, stop, step)
            .into_iter()
            .map(Value::Int)
            .collect(),
    ))
}

fn seq(ex: &mut Exec<'_>, p: Vec<i64>) -> FnResult {
    let (start, end, step) = match p.len() {
        1 => {
            let inc = if p[0] < 1 { -1 } else { 1 };
            (1, p[0] + inc, inc)
        }
        2 => {
            let step = if p[1] < p[0] { -1 } else { 1 };
            (p[0], p[1] + step, step)
        }
        3 => {
            let inc = if p[2] < p[0] {
                if p[1] > 0 {
                    return Ok(Value::str(""));
                }
                -1
            } else {
                1
            };
            (p[0], p[2] + inc, p[1])
        }
        _ => return Ok(Value::str("")),
    };
    let valid = (end < start && step < 0) || (end >= start && step > 0);
    if valid {
        check_list(
            ex,
            usize::try_from(range_len(start, end, step)).unwrap_or(usize::MAX),
        )?;
    }
    let v: Vec<String> = steps(start, end, step)
        .iter()
        .map(|i| i.to_string())
        .collect();
    Ok(Value::string(v.join(" ")))
}

#[derive(Clone, Copy)]
enum Op {
    Add,
    Sub,
    Mul,
    Div,
}

/// A decimal number: mantissa × 10^-scale.
#[derive(Clone, Copy)]
struct Dec {
    m: i128,
    scale: u32,
}

impl Dec {
    fn from_f64(f: f64) -> Option<Dec> {
        if !f.is_finite() {
            return None;
        }
        let s = crate::value::format::format_float(f, 'e', None);
        let (mant, exp) = s.split_once('e')?;
        let exp: i32 = exp.parse().ok()?;
        let neg = mant.starts_with('-');
        let digits: String = mant.chars().filter(char::is_ascii_digit).collect();
        let frac_len = mant.split_once('.').map_or(0, |(_, f)| f.len()) as i32;
        let mut m: i128 = digits.parse().ok()?;
        let mut scale = frac_len - exp;
        if scale < 0 {
            m = m.checked_mul(10i128.checked_pow((-scale) as u32)?)?;
            scale = 0;
        }
        Some(Dec {
            m: if neg { -m } else { m },
            scale: scale as u32,
        })
    }
    fn rescale(self, scale: u32) -> Option<Dec> {
        let k = scale.checked_sub(self.scale)?;
        Some(Dec {
            m: self.m.checked_mul(10i128.checked_pow(k)?)?,
            scale,
        })
    }
    fn to_f64(self) -> f64 {
        let s = format!("{}e-{}", self.m, self.scale);
        s.parse().unwrap_or(f64::NAN)
    }
    fn op(self, o: Dec, op: Op) -> Option<Dec> {
        match op {
            Op::Add | Op::Sub => {
                let sc = self.scale.max(o.scale);
                let (a, b) = (self.rescale(sc)?, o.rescale(sc)?);
                let m = if matches!(op, Op::Add) {
                    a.m.checked_add(b.m)?
                } else {
                    a.m.checked_sub(b.m)?
                };
                Some(Dec { m, scale: sc })
            }
            Op::Mul => Some(Dec {
                m: self.m.checked_mul(o.m)?,
                scale: self.scale + o.scale,
            }),
            Op::Div => {
                if o.m == 0 {
                    return None;
                }
                // shopspring's DivRound(d2, 16): 16 decimal places, half away from zero.
                let target = 16u32;
                let num = self
                    .m
                    .checked_mul(10i128.checked_pow(target + o.scale + 1)?)?;
                let den = o.m.checked_mul(10i128.checked_pow(self.scale)?)?;
                let q = num / den;
                let r = if q >= 0 { (q + 5) / 10 } else { (q - 5) / 10 };
                Some(Dec {
                    m: r,
                    scale: target,
                })
            }
        }
    }
}

fn decimal_op(a: &Value, rest: &[Value], op: Op) -> f64 {
    let fa = to_float64(a);
    let mut acc = Dec::from_f64(fa);
    let mut fallback = fa;
    for x in rest {
        let fx = to_float64(x);
        fallback = match op {
            Op::Add => fallback + fx,
            Op::Sub => fallback - fx,
            Op::Mul => fallback * fx,
            Op::Div => fallback / fx,
        };
        acc = acc.and_then(|d| Dec::from_f64(fx).and_then(|e| d.op(e, op)));
    }
    match acc {
        Some(d) => d.to_f64(),
        None => {
            if matches!(op, Op::Div) && rest.iter().any(|x| to_float64(x) == 0.0) {
                // shopspring panics on division by zero; Sprig lets the panic through.
                return f64::NAN;
            }
            fallback
        }
    }
}
