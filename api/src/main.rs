//! The `api` binary: `api serve`, `api migrate` and `api admin …`.

fn main() -> std::process::ExitCode {
    api::cli::main()
}
