//! `bench/chaos`: the reliability suite. See `bosun_bench::chaos`.
fn main() -> std::process::ExitCode {
    bosun_bench::chaos::main()
}
