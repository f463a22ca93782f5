fn main() -> std::process::ExitCode {
    cvo::cli::main()
}
