//! The custom metrics roles publish with `operator_sdk.util.osdk_metric`, kept as
//! ansible-operator keeps them (`internal/ansible/metrics`): one process-wide set of named
//! counters, gauges, histograms and summaries, created by the first request that names them
//! and served with the operator's own metrics.
//!
//! ansible-operator receives the module's requests on a local HTTP endpoint
//! (`localhost:5050/metrics`); bosun runs the module in-process, so the module's `address`
//! is accepted and not used. [`UserMetrics::encode`] writes the Prometheus text exposition
//! a `/metrics` endpoint appends to its own.
use std::collections::BTreeMap;
use std::sync::{Mutex, OnceLock};

use serde_json::{Map, Value as Json};

/// client_golang's default histogram buckets (what ansible-operator's histograms use).
const BUCKETS: [f64; 11] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

#[derive(Clone, Debug, PartialEq)]
enum Value {
    Counter(f64),
    Gauge(f64),
    /// Per-bucket counts (not cumulative), sum, count.
    Histogram(Vec<u64>, f64, u64),
    /// Sum, count (client_golang's summaries have no quantiles by default).
    Summary(f64, u64),
}

#[derive(Clone, Debug, PartialEq)]
struct Metric {
    help: String,
    value: Value,
}

/// The set of user metrics (see the module doc).
#[derive(Debug, Default)]
pub struct UserMetrics(Mutex<BTreeMap<String, Metric>>);

/// One `osdk_metric` request, as the module sends it.
#[derive(Debug, Default)]
pub struct Request {
    pub name: String,
    pub description: String,
    pub counter: Option<Map<String, Json>>,
    pub gauge: Option<Map<String, Json>>,
    pub histogram: Option<Map<String, Json>>,
    pub summary: Option<Map<String, Json>>,
}

fn num(m: &Map<String, Json>, k: &str) -> f64 {
    match m.get(k) {
        Some(Json::Number(n)) => n.as_f64().unwrap_or(0.0),
        Some(Json::String(s)) => s.trim().parse().unwrap_or(0.0),
        Some(Json::Bool(b)) => f64::from(u8::from(*b)),
        _ => 0.0,
    }
}

fn yes(m: &Map<String, Json>, k: &str) -> bool {
    match m.get(k) {
        Some(Json::Bool(b)) => *b,
        Some(Json::String(s)) => {
            matches!(
                s.to_lowercase().as_str(),
                "yes" | "on" | "1" | "true" | "y" | "t"
            )
        }
        Some(Json::Number(n)) => n.as_f64() == Some(1.0),
        _ => false,
    }
}

impl UserMetrics {
    /// The process's metrics (ansible-operator's are global too).
    pub fn global() -> &'static UserMetrics {
        static GLOBAL: OnceLock<UserMetrics> = OnceLock::new();
        GLOBAL.get_or_init(UserMetrics::default)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Metric>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Applies a request with ansible-operator's rules (`HandleUserMetric`); the error text
    /// is its HTTP handler's.
    pub fn handle(&self, r: &Request) -> Result<(), String> {
        let kinds = [
            r.counter.is_some(),
            r.gauge.is_some(),
            r.histogram.is_some(),
            r.summary.is_some(),
        ]
        .iter()
        .filter(|b| **b)
        .count();
        if kinds > 1 {
            return Err("only one metric can be processed at a time".into());
        }
        if kinds == 0 {
            return Err("a request should contain at least one metric".into());
        }
        let mut all = self.lock();
        let m = all.entry(r.name.clone()).or_insert_with(|| Metric {
            help: r.description.clone(),
            value: if r.counter.is_some() {
                Value::Counter(0.0)
            } else if r.gauge.is_some() {
                Value::Gauge(0.0)
            } else if r.histogram.is_some() {
                Value::Histogram(vec![0; BUCKETS.len()], 0.0, 0)
            } else {
                Value::Summary(0.0, 0)
            },
        });
        match &mut m.value {
            Value::Gauge(v) => {
                let g = r.gauge.as_ref().ok_or_else(|| {
                    format!("cannot change metric type of {}, which is a gauge", r.name)
                })?;
                // The first option given wins, in this order; `set: 0` is a no-op there.
                if yes(g, "increment") {
                    *v += 1.0;
                } else if yes(g, "decrement") {
                    *v -= 1.0;
                } else if num(g, "add") != 0.0 {
                    *v += num(g, "add");
                } else if num(g, "subtract") != 0.0 {
                    *v -= num(g, "subtract");
                } else if num(g, "set") != 0.0 {
                    *v = num(g, "set");
                } else if yes(g, "set_to_current_time") {
                    *v = chrono::Utc::now().timestamp_micros() as f64 / 1e6;
                }
            }
            Value::Counter(v) => {
                let c = r.counter.as_ref().ok_or_else(|| {
                    format!(
                        "cannot change metric type of {}, which is a counter",
                        r.name
                    )
                })?;
                if yes(c, "increment") {
                    *v += 1.0;
                } else if num(c, "add") != 0.0 {
                    if num(c, "add") < 0.0 {
                        return Err("counter metrics cannot decrease in value".into());
                    }
                    *v += num(c, "add");
                }
            }
            value => {
                let o = r.histogram.as_ref().or(r.summary.as_ref()).ok_or_else(|| {
                    format!(
                        "cannot change metric type of {}, which is a histogram or summary",
                        r.name
                    )
                })?;
                let x = num(o, "observe");
                match value {
                    Value::Histogram(b, sum, count) => {
                        if let Some(i) = BUCKETS.iter().position(|le| x <= *le) {
                            b[i] += 1;
                        }
                        *sum += x;
                        *count += 1;
                    }
                    Value::Summary(sum, count) => {
                        *sum += x;
                        *count += 1;
                    }
                    _ => {}
                }
            }
        }
        Ok(())
    }

    /// The Prometheus text exposition (format 0.0.4) of every user metric.
    pub fn encode(&self) -> String {
        use std::fmt::Write;
        let mut out = String::new();
        for (name, m) in self.lock().iter() {
            let help = m.help.replace('\\', "\\\\").replace('\n', "\\n");
            let ty = match m.value {
                Value::Counter(_) => "counter",
                Value::Gauge(_) => "gauge",
                Value::Histogram(..) => "histogram",
                Value::Summary(..) => "summary",
            };
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {ty}");
            match &m.value {
                Value::Counter(v) | Value::Gauge(v) => {
                    let _ = writeln!(out, "{name} {}", float(*v));
                }
                Value::Histogram(b, sum, count) => {
                    let mut cum = 0;
                    for (le, n) in BUCKETS.iter().zip(b) {
                        cum += n;
                        let _ = writeln!(out, "{name}_bucket{{le=\"{}\"}} {cum}", float(*le));
                    }
                    let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {count}");
                    let _ = writeln!(out, "{name}_sum {}\n{name}_count {count}", float(*sum));
                }
                Value::Summary(sum, count) => {
                    let _ = writeln!(out, "{name}_sum {}\n{name}_count {count}", float(*sum));
                }
            }
        }
        out
    }

    /// The metrics as OpenMetrics families, for an exposition that speaks OpenMetrics (the
    /// runtime's `/metrics`): the same series names Prometheus stores from ansible-operator's
    /// text format. OpenMetrics names a counter's sample `<family>_total`, so a counter whose
    /// name ends in `_total` is a counter family of the name without it, and any other
    /// counter is served as an `unknown` family under its own name (typed so, Prometheus
    /// would store it as `<name>_total`, and dashboards written for ansible-operator would
    /// not find it).
    pub fn encode_openmetrics(&self) -> String {
        use std::fmt::Write;
        let mut out = String::new();
        for (name, m) in self.lock().iter() {
            let help = m.help.replace('\\', "\\\\").replace('\n', "\\n");
            let (family, ty) = match m.value {
                Value::Counter(_) => match name.strip_suffix("_total") {
                    Some(base) => (base, "counter"),
                    None => (name.as_str(), "unknown"),
                },
                Value::Gauge(_) => (name.as_str(), "gauge"),
                Value::Histogram(..) => (name.as_str(), "histogram"),
                Value::Summary(..) => (name.as_str(), "summary"),
            };
            let _ = writeln!(out, "# HELP {family} {help}\n# TYPE {family} {ty}");
            match &m.value {
                Value::Counter(v) | Value::Gauge(v) => {
                    let _ = writeln!(out, "{name} {}", float(*v));
                }
                Value::Histogram(b, sum, count) => {
                    let mut cum = 0;
                    for (le, n) in BUCKETS.iter().zip(b) {
                        cum += n;
                        let _ = writeln!(out, "{name}_bucket{{le=\"{}\"}} {cum}", om_float(*le));
                    }
                    let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {count}");
                    let _ = writeln!(out, "{name}_sum {}\n{name}_count {count}", float(*sum));
                }
                Value::Summary(sum, count) => {
                    let _ = writeln!(out, "{name}_sum {}\n{name}_count {count}", float(*sum));
                }
            }
        }
        out
    }

    /// The current value of a counter or gauge, the count of a histogram or summary.
    pub fn value(&self, name: &str) -> Option<f64> {
        self.lock().get(name).map(|m| match &m.value {
            Value::Counter(v) | Value::Gauge(v) => *v,
            Value::Histogram(_, _, c) | Value::Summary(_, c) => *c as f64,
        })
    }
}

/// A bucket bound as OpenMetrics writes it: always with a decimal point (`1.0`, `0.005`).
fn om_float(v: f64) -> String {
    let s = float(v);
    if s.contains(['.', 'e']) {
        s
    } else {
        format!("{s}.0")
    }
}

/// Go's `strconv.FormatFloat(v, 'g', -1, 64)` for the values metrics hold.
fn float(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e21 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn req(name: &str, kind: &str, opts: Json) -> Request {
        let mut r = Request {
            name: name.into(),
            description: "d".into(),
            ..Default::default()
        };
        let o = opts.as_object().cloned();
        match kind {
            "counter" => r.counter = o,
            "gauge" => r.gauge = o,
            "histogram" => r.histogram = o,
            _ => r.summary = o,
        }
        r
    }

    #[test]
    fn openmetrics_keeps_the_series_names_ansible_operator_exposes() {
        let m = UserMetrics::default();
        m.handle(&req("jobs", "counter", json!({"increment": true})))
            .expect("counter");
        m.handle(&req("runs_total", "counter", json!({"add": 2})))
            .expect("counter");
        m.handle(&req("depth", "gauge", json!({"set": 4})))
            .expect("gauge");
        m.handle(&req("lat", "histogram", json!({"observe": 0.3})))
            .expect("histogram");
        let text = m.encode_openmetrics();
        assert!(text.contains("# TYPE jobs unknown\njobs 1\n"), "{text}");
        assert!(
            text.contains("# HELP runs d\n# TYPE runs counter\nruns_total 2\n"),
            "{text}"
        );
        assert!(text.contains("# TYPE depth gauge\ndepth 4\n"), "{text}");
        assert!(text.contains("lat_bucket{le=\"0.5\"} 1\n"), "{text}");
        assert!(text.contains("lat_bucket{le=\"1.0\"} 1\n"), "{text}");
        assert!(
            text.contains("lat_bucket{le=\"+Inf\"} 1\nlat_sum 0.3\nlat_count 1\n"),
            "{text}"
        );
        assert!(!text.contains("# EOF"));
    }

    #[test]
    fn metrics_follow_ansible_operators_rules() {
        let m = UserMetrics::default();
        m.handle(&req("c", "counter", json!({}))).expect("create");
        m.handle(&req("c", "counter", json!({"increment": true})))
            .expect("inc");
        m.handle(&req("c", "counter", json!({"add": 2.5})))
            .expect("add");
        assert_eq!(m.value("c"), Some(3.5));
        assert_eq!(
            m.handle(&req("c", "counter", json!({"add": -1}))),
            Err("counter metrics cannot decrease in value".into())
        );
        assert_eq!(
            m.handle(&req("c", "gauge", json!({"set": 1}))),
            Err("cannot change metric type of c, which is a counter".into())
        );
        m.handle(&req("g", "gauge", json!({"set": 4})))
            .expect("set");
        m.handle(&req("g", "gauge", json!({"decrement": true, "set": 9})))
            .expect("dec wins");
        m.handle(&req("g", "gauge", json!({"set": 0})))
            .expect("set 0");
        assert_eq!(
            m.value("g"),
            Some(3.0),
            "set: 0 is a no-op, as in ansible-operator"
        );
        m.handle(&req("h", "histogram", json!({"observe": 0.2})))
            .expect("observe");
        m.handle(&req("h", "summary", json!({"observe": 20})))
            .expect("a summary request observes a histogram");
        let text = m.encode();
        assert!(text.contains("# TYPE h histogram\n"), "{text}");
        assert!(text.contains("h_bucket{le=\"0.25\"} 1\n"), "{text}");
        assert!(
            text.contains("h_bucket{le=\"+Inf\"} 2\nh_sum 20.2\nh_count 2\n"),
            "{text}"
        );
        assert!(text.contains("# TYPE c counter\nc 3.5\n"), "{text}");
        let two = Request {
            counter: Some(Map::new()),
            gauge: Some(Map::new()),
            ..req("x", "counter", json!({}))
        };
        assert_eq!(
            m.handle(&two),
            Err("only one metric can be processed at a time".into())
        );
    }
}
