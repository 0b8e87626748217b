//! `bosun`: the library's commands over bosun's own operators (see `registry.rs`).
#[cfg(feature = "heap-stats")]
#[global_allocator]
static ALLOC: bosun_runtime::heap::Counting = bosun_runtime::heap::Counting;

fn main() -> std::process::ExitCode {
    bosun::main(bosun::registry::builtin())
}
