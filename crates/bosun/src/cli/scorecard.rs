//! `bosun scorecard [DIR]`: operator-sdk's built-in scorecard tests, in-process, printed as
//! operator-sdk prints them; exit code 1 when a test fails.
use std::path::PathBuf;

use bosun_scaffold::scorecard::{self, State};
use bosun_scaffold::validate;
use clap::Args;

#[derive(Args, Debug)]
pub struct ScorecardArgs {
    /// The bundle directory.
    #[arg(default_value = "bundle")]
    pub dir: PathBuf,
    /// Run only the tests with this label: suite=basic, suite=olm, test=<name>-test.
    #[arg(long, short = 'l')]
    pub selector: Option<String>,
    /// Output format: text or json.
    #[arg(long, short = 'o', default_value = "text")]
    pub output: String,
}

pub fn run(args: ScorecardArgs) -> anyhow::Result<()> {
    let (bundle, load_errors) = validate::load(&args.dir);
    if let Some(e) = load_errors.first() {
        anyhow::bail!("{}: {e}", args.dir.display());
    }
    let results = scorecard::run(&bundle, args.selector.as_deref()).map_err(anyhow::Error::msg)?;
    match args.output.as_str() {
        "json" => {
            let items: Vec<serde_json::Value> = results
                .iter()
                .map(|r| {
                    serde_json::json!({
                        "labels": {"suite": r.suite, "test": r.label()},
                        "name": r.name,
                        "state": if r.state == State::Pass { "pass" } else { "fail" },
                        "errors": r.errors,
                        "suggestions": r.suggestions,
                    })
                })
                .collect();
            println!("{}", serde_json::to_string_pretty(&items)?);
        }
        "text" => {
            for r in &results {
                println!("{}", "-".repeat(80));
                println!(
                    "Labels:\n\t\"suite\":\"{}\"\n\t\"test\":\"{}\"",
                    r.suite,
                    r.label()
                );
                println!("Results:\n\tName: {}", r.name);
                println!(
                    "\tState: {}",
                    if r.state == State::Pass {
                        "pass"
                    } else {
                        "fail"
                    }
                );
                if !r.suggestions.is_empty() {
                    println!("\tSuggestions:");
                    for s in &r.suggestions {
                        println!("\t\t{s}");
                    }
                }
                if !r.errors.is_empty() {
                    println!("\tErrors:");
                    for e in &r.errors {
                        println!("\t\t{e}");
                    }
                }
                println!();
            }
        }
        other => anyhow::bail!("--output {other}: use text or json"),
    }
    if results.iter().any(|r| r.state == State::Fail) {
        std::process::exit(1);
    }
    Ok(())
}
