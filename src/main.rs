//! The `fieldguard` binary.

#[global_allocator]
static GLOBAL: fieldguard::allocator::Mimalloc = fieldguard::allocator::Mimalloc;

fn main() -> std::process::ExitCode {
    fieldguard::cli::run()
}
