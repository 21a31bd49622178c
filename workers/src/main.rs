//! The `workers` binary: `workers run`.

fn main() -> std::process::ExitCode {
    workers::cli::main()
}
