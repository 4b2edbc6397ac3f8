//! The `policy` command: `check`, `explain`, `fmt`, `assets`, `locality` and `gate`; the logic
//! lives in the library so that it can be tested, and each subcommand is a module there.

use std::process::ExitCode;

use clap::Parser as _;

fn main() -> ExitCode {
    let cli = policy_cli::Cli::parse();
    policy_cli::run(
        cli,
        &mut std::io::stdout().lock(),
        &mut std::io::stderr().lock(),
    )
    .into()
}
