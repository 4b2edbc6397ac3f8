//! The `policy` command, a thin front: each subcommand (`check`, `explain`, `fmt`, `assets`,
//! `locality`, `gate`) is a module and a variant of [`Command`] that reads its arguments, calls
//! the library that does the work (`velocity-policy-lang` for the language, `velocity-policy-delivery` for the
//! asset audit, the gate and the locality probe) and prints what it says.
//!
//! Exit codes: 0 clean (warnings allowed), 1 problems found, 2 usage or I/O error.

use std::io::Write;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

pub mod assets;
pub mod check;
mod code;
pub mod explain;
mod files;
pub mod fmt;
pub mod gate;
pub mod locality;
mod render;

/// Latency and resilience policy: check, explain and format `.policy` files; audit a built
/// front end's assets; print the locality map; gate a build's ceilings and quarantines.
#[derive(Debug, Parser)]
#[command(name = "policy", version)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Check policy files (or directories of them) and report every problem.
    Check(check::Args),
    /// Show each operation's chain and its worst-case latency, with and without deadline
    /// propagation, and each entry point's tree of operations, from the policy and the code.
    Explain(explain::Args),
    /// Format policy files in the canonical style, keeping comments.
    Fmt(fmt::Args),
    /// Audit the images and fonts a built front end ships: sizes, formats, dimensions,
    /// priorities.
    Assets(assets::Args),
    /// Print where the compute and each service run, and the hops a request makes between them.
    ///
    /// The regions are derived from the environment (regions only, never a host or a
    /// credential); the hops come from the policy's `locality` stanza. With `--check`, a
    /// blocking hop that crosses regions fails.
    Locality(locality::Args),
    /// Measure size and count ceilings (with `--ratchet`, lower them) and check that quarantined
    /// heavy crates stay out of default builds.
    Gate(gate::Args),
}

/// How results are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum Format {
    /// Reports with source snippets, for people.
    #[default]
    Human,
    /// One JSON document on standard output, for tools.
    Json,
}

/// How a command ended, ordered from best to worst (`max` of two is the worse).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Exit {
    /// Nothing wrong (warnings allowed).
    Clean,
    /// Problems were found in the input.
    Problems,
    /// The command could not do its work: bad arguments, unreadable files.
    Usage,
}

impl From<Exit> for ExitCode {
    fn from(exit: Exit) -> ExitCode {
        ExitCode::from(match exit {
            Exit::Clean => 0,
            Exit::Problems => 1,
            Exit::Usage => 2,
        })
    }
}

/// Runs a parsed command line, writing results to `out` and reports to `err`.
pub fn run(cli: Cli, out: &mut dyn Write, err: &mut dyn Write) -> Exit {
    let exit = match cli.command {
        Command::Check(args) => check::run(&args, out, err),
        Command::Explain(args) => explain::run(&args, out, err),
        Command::Fmt(args) => fmt::run(&args, out, err),
        Command::Assets(args) => assets::run(&args, out, err),
        Command::Locality(args) => locality::run(&args, out, err),
        Command::Gate(args) => gate::run(&args, out, err),
    };
    let _ = out.flush();
    let _ = err.flush();
    exit
}
