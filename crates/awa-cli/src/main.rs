//! The `awa` binary: see the library (`src/lib.rs`) for what it owns.

fn main() -> std::process::ExitCode {
    awa_cli::main_with_args(std::env::args_os())
}
