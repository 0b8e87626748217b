//! The verdicts: one per (scenario, check), printed as a table and written as JUnit XML (one
//! testsuite per scenario, one testcase per check) for CI.
use std::fmt::Write as _;
use std::time::Duration;

/// The invariants, by the name the report gives them.
pub mod check {
    /// The end state equals the fault-free reference run's.
    pub const CONVERGES: &str = "converges";
    /// No child doubled, none without an owner reference, none outliving its parent.
    pub const CHILDREN: &str = "children";
    /// A restart over converged objects sends no mutating request.
    pub const RESTART_WRITES: &str = "restart-writes";
    /// Nothing written at rest (no hot loop, no status on every reconcile).
    pub const REST_WRITES: &str = "rest-writes";
    /// Every finalizer clears when its object is deleted.
    pub const FINALIZERS: &str = "finalizers";
    /// A failing reconcile shows in the custom resource's status conditions.
    pub const FAILURE_STATUS: &str = "failure-status";
    /// No Secret value appears in the operator's log.
    pub const SECRET_LOG: &str = "secret-log";
    /// Served an old view after a restart, the operator deletes nothing and writes none of
    /// its custom resources (a write the API server refuses on a precondition is fine).
    pub const OLD_VIEW: &str = "old-view";
}

#[derive(Clone, Debug)]
pub struct Verdict {
    pub scenario: String,
    pub check: &'static str,
    /// Empty when the check held.
    pub problems: Vec<String>,
    pub skipped: Option<String>,
}

/// Where a mid-convergence fault landed, so that a run says what it tested.
#[derive(Clone, Debug)]
pub struct Fault {
    pub scenario: String,
    /// The operator's writes of its work (2xx, events and leases aside) before the fault.
    pub after: usize,
    /// The seeded write it was to land after.
    pub wanted: usize,
    /// The fault-free run's writes until it converged (the bound of `wanted`).
    pub of: usize,
    /// The write it landed after (the last one, on a fallback), as `PATCH Widget/a (200)`.
    pub write: Option<String>,
    /// Why it landed elsewhere than after write `wanted`, when it did.
    pub fallback: Option<String>,
    /// The operator's writes of its work after the fault: none means it had converged.
    pub later: usize,
}

impl Fault {
    /// Where it landed.
    pub fn point(&self) -> String {
        let what = self.write.as_deref().unwrap_or("no write");
        match &self.fallback {
            None => format!(
                "after write #{} of the fault-free run's {} ({what})",
                self.after, self.of
            ),
            Some(why) => format!(
                "after write #{} ({what}), its last, not #{} of {}: {why}",
                self.after, self.wanted, self.of
            ),
        }
    }

    pub fn text(&self) -> String {
        format!("{}; {} writes after it", self.point(), self.later)
    }
}

#[derive(Debug, Default)]
pub struct Report {
    pub operator: String,
    pub seed: u64,
    pub verdicts: Vec<Verdict>,
    /// (scenario, seconds)
    pub timings: Vec<(String, f64)>,
    /// The command that reproduces this run.
    pub replay: String,
    pub logs: Option<std::path::PathBuf>,
    /// Where the mid-convergence faults landed.
    pub faults: Vec<Fault>,
}

impl Report {
    pub fn record(&mut self, scenario: &str, check: &'static str, problems: Vec<String>) {
        self.verdicts.push(Verdict {
            scenario: scenario.to_string(),
            check,
            problems,
            skipped: None,
        });
    }

    pub fn skip(&mut self, scenario: &str, check: &'static str, why: impl Into<String>) {
        self.verdicts.push(Verdict {
            scenario: scenario.to_string(),
            check,
            problems: Vec::new(),
            skipped: Some(why.into()),
        });
    }

    pub fn passed(&self) -> bool {
        self.verdicts.iter().all(|v| v.problems.is_empty())
    }

    pub fn failed(&self) -> Vec<&Verdict> {
        self.verdicts
            .iter()
            .filter(|v| !v.problems.is_empty())
            .collect()
    }

    pub fn text(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "bosun verify: {} (seed {})", self.operator, self.seed);
        let _ = writeln!(out, "{:<18} {:<16} RESULT", "SCENARIO", "CHECK");
        for v in &self.verdicts {
            let result = match (&v.skipped, v.problems.is_empty()) {
                (Some(why), _) => format!("skipped ({why})"),
                (None, true) => "ok".into(),
                (None, false) => "FAIL".into(),
            };
            let _ = writeln!(out, "{:<18} {:<16} {result}", v.scenario, v.check);
            for p in v.problems.iter().take(8) {
                let _ = writeln!(out, "    {p}");
            }
            if v.problems.len() > 8 {
                let _ = writeln!(out, "    … {} more", v.problems.len() - 8);
            }
        }
        let total: f64 = self.timings.iter().map(|(_, s)| s).sum();
        let times: Vec<String> = self
            .timings
            .iter()
            .map(|(s, t)| format!("{s} {t:.0} s"))
            .collect();
        let _ = writeln!(out, "time: {total:.0} s ({})", times.join(", "));
        for f in &self.faults {
            let _ = writeln!(out, "fault {}: {}", f.scenario, f.text());
        }
        if let Some(l) = &self.logs {
            let _ = writeln!(out, "operator logs: {}", l.display());
        }
        let failed = self.failed();
        if failed.is_empty() {
            let _ = writeln!(out, "PASSED: {} checks", self.verdicts.len());
        } else {
            let _ = writeln!(
                out,
                "FAILED: {} of {} checks; replay with the same seed:\n  {}",
                failed.len(),
                self.verdicts.len(),
                self.replay
            );
        }
        out
    }

    pub fn junit(&self) -> String {
        let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
        let failures = self.failed().len();
        let total: f64 = self.timings.iter().map(|(_, s)| s).sum();
        let _ = writeln!(
            out,
            "<testsuites name=\"bosun verify {}\" tests=\"{}\" failures=\"{failures}\" time=\"{total:.1}\">",
            xml(&self.operator),
            self.verdicts.len()
        );
        let mut scenarios: Vec<&str> = Vec::new();
        for v in &self.verdicts {
            if !scenarios.contains(&v.scenario.as_str()) {
                scenarios.push(&v.scenario);
            }
        }
        for s in scenarios {
            let cases: Vec<&Verdict> = self.verdicts.iter().filter(|v| v.scenario == s).collect();
            let time = self
                .timings
                .iter()
                .find(|(n, _)| n == s)
                .map(|(_, t)| *t)
                .unwrap_or(0.0);
            let _ = writeln!(
                out,
                "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" time=\"{time:.1}\">",
                xml(s),
                cases.len(),
                cases.iter().filter(|v| !v.problems.is_empty()).count()
            );
            for v in cases {
                let _ = write!(
                    out,
                    "    <testcase classname=\"verify.{}\" name=\"{}\"",
                    xml(s),
                    v.check
                );
                if let Some(why) = &v.skipped {
                    let _ = writeln!(
                        out,
                        ">\n      <skipped message=\"{}\"/>\n    </testcase>",
                        xml(why)
                    );
                } else if v.problems.is_empty() {
                    let _ = writeln!(out, "/>");
                } else {
                    let _ = writeln!(
                        out,
                        ">\n      <failure message=\"{}\">{}\nreplay: {}</failure>\n    </testcase>",
                        xml(&v.problems[0]),
                        xml(&v.problems.join("\n")),
                        xml(&self.replay)
                    );
                }
            }
            let _ = writeln!(out, "  </testsuite>");
        }
        out.push_str("</testsuites>\n");
        out
    }
}

fn xml(s: &str) -> String {
    s.chars()
        .filter(|c| !c.is_control() || *c == '\n' || *c == '\t')
        .collect::<String>()
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

pub fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn junit_names_each_check_and_escapes() {
        let mut r = Report {
            operator: "op".into(),
            seed: 7,
            replay: "bosun verify --seed 7".into(),
            ..Default::default()
        };
        r.record("crash", check::CONVERGES, vec![]);
        r.record(
            "crash",
            check::CHILDREN,
            vec!["configmaps/<a>: 2 here & 1".into()],
        );
        r.skip("spec-change", check::CONVERGES, "no field");
        let x = r.junit();
        assert!(x.contains("<testcase classname=\"verify.crash\" name=\"converges\"/>"));
        assert!(x.contains("failure message=\"configmaps/&lt;a&gt;: 2 here &amp; 1\""));
        assert!(x.contains("<skipped message=\"no field\"/>"));
        assert!(x.contains("failures=\"1\""));
        assert!(!r.passed());
        assert!(r
            .text()
            .contains("replay with the same seed:\n  bosun verify --seed 7"));
    }
}
