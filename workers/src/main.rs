//! The `workers` binary: `workers run`.

/// Every allocation of the process goes to mimalloc, as in the `api`
/// binary (docs/decisions.md, "The process allocator").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    workers::cli::main()
}
