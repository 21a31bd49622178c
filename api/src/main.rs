//! The `api` binary: `api serve`, `api migrate` and `api admin …`.

/// Every allocation of the process, SQLite's included, goes to mimalloc:
/// under a burst glibc's allocator took about a fifth of the core
/// (docs/decisions.md, "The process allocator").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    api::cli::main()
}
