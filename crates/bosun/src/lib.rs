//! bosun as a library: every command of the `bosun` binary (`run`, `dev`, `crd`, `rbac`,
//! `manifests`, `bundle`, `scorecard`, `init`, `create api`, `version`, …) over a list of
//! operators the caller chooses. bosun's own binary is [`main`] with `registry::builtin`
//! (bosun's own operators, the default feature `builtin`); an operator written on
//! `bosun-runtime` in its own crate gets the same commands from a `main.rs` of a few lines,
//! depending on `bosun` with `default-features = false` so that none of bosun's own operators
//! (nor `bosun dev`, which runs bosun's samples) is compiled into it:
//!
//! ```no_run
//! # use std::sync::Arc;
//! # fn my_operators() -> Vec<Arc<dyn bosun_runtime::manager::Operator>> { vec![] }
//! fn main() -> std::process::ExitCode {
//!     bosun::main(bosun::Operators::new(|_env| my_operators()))
//! }
//! ```
mod cli;
mod manifests;
pub mod registry;

use clap::Parser;

pub use registry::Operators;

/// Parses the process's arguments and runs the command over `operators`; the exit code says
/// whether it succeeded (the error is printed on stderr).
pub fn main(operators: Operators) -> std::process::ExitCode {
    if let Err(e) = registry::install(operators) {
        eprintln!("bosun: {e}");
        return std::process::ExitCode::FAILURE;
    }
    // Before the async runtime starts its threads (see the function's documentation).
    bosun_runtime::heap::one_arena();
    let args = cli::Cli::parse();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("bosun: cannot start the async runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match rt.block_on(cli::dispatch(args)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bosun: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
