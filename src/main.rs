//! The `tern` binary: a thin shell over the library's command-line front ends.

fn main() -> std::process::ExitCode {
    tern::cli::main()
}
