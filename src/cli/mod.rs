//! The `cvo` command line: clap definitions and thin glue to the library (placeholder).

/// Runs the CLI and returns the process exit code.
pub fn main() -> std::process::ExitCode {
    std::process::ExitCode::SUCCESS
}
