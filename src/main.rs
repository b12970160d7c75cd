//! The `fieldguard` binary.

fn main() -> std::process::ExitCode {
    fieldguard::cli::run()
}
