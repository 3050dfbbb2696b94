//! The `stowage` binary: the command line over the library crates (crates/*; ARCHITECTURE.md).

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
