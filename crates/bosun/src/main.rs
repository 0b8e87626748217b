//! `bosun`: Kubernetes operators in Rust. Thin: parses flags and wires the crates together.
mod cli;
mod manifests;
mod registry;

use clap::Parser;

#[cfg(feature = "heap-stats")]
#[global_allocator]
static ALLOC: bosun_runtime::heap::Counting = bosun_runtime::heap::Counting;

fn main() -> std::process::ExitCode {
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
