//! The `policy` command: `check`, `explain`, `fmt`, `assets`, `locality` and `gate`; the logic
//! lives in the library so that it can be tested, and each subcommand is a module there.

use std::process::ExitCode;

use clap::Parser as _;

fn main() -> ExitCode {
    let cli = velocity_policy_cli::Cli::parse();
    // Buffered: a JSON document of thousands of diagnostics is hundreds of thousands of lines,
    // and a line-buffered standard output would make one write each. `run` flushes.
    velocity_policy_cli::run(
        cli,
        &mut std::io::BufWriter::new(std::io::stdout().lock()),
        &mut std::io::stderr().lock(),
    )
    .into()
}
