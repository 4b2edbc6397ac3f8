//! `policy gate FILE... [--ratchet]`: size and count ceilings with a ratchet, quarantined
//! heavy crates, and the asset audit of every `assets` stanza (`velocity_policy_delivery::gate`, where
//! each step and the gate's own diagnostics are documented).
//!
//! Exit codes: 0 within every ceiling, 1 over a ceiling, a quarantine broken or an asset
//! finding, 2 when something could not be measured.

use std::io::Write;
use std::path::PathBuf;

use velocity_policy_delivery::gate::{self, Verdict};

use crate::{Exit, Format, check, render};

/// Arguments of `policy gate`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Policy files, directories whose `*.policy` files are read, or a crate's folder (its
    /// `policies/`, or the `dir` of `[package.metadata.policy]`).
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// Lower each ceiling toward `measured × (1 + headroom)` where the measurement allows it
    /// (never raising one), rewriting the numbers in the files in place.
    #[arg(long)]
    pub ratchet: bool,
    /// The directory the policy's paths are relative to, and where `cargo metadata` runs.
    #[arg(long, default_value = ".")]
    pub root: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value_t)]
    pub format: Format,
}

impl From<Verdict> for Exit {
    fn from(verdict: Verdict) -> Exit {
        match verdict {
            Verdict::Pass => Exit::Clean,
            Verdict::Fail => Exit::Problems,
            Verdict::Unmeasured => Exit::Usage,
        }
    }
}

/// Runs `policy gate`.
pub fn run(args: &Args, out: &mut dyn Write, err: &mut dyn Write) -> Exit {
    let (set, files) = match check::load_valid(&args.files, "policy gate: ", err) {
        Ok(loaded) => loaded,
        Err(exit) => return exit,
    };
    let outcome = gate::check(&set, &args.root, args.ratchet);
    for error in outcome.audit_errors() {
        let _ = writeln!(err, "{}", render::error_with_help(error, error.help()));
    }
    let mut rewritten = Vec::new();
    if args.ratchet && outcome.verdict() != Verdict::Unmeasured {
        match outcome.write_ratchet(&files, &set) {
            Ok(paths) => rewritten = paths,
            Err((path, error)) => {
                let _ = writeln!(err, "error: cannot write `{}`: {error}", path.display());
                return Exit::Usage;
            }
        }
    }
    match args.format {
        Format::Human => {
            outcome.print_tables(out);
            for problem in outcome.problems() {
                let _ = writeln!(
                    err,
                    "{}",
                    render::human_of(&problem.renderable(set.sources()))
                );
            }
            for audit in outcome.audits() {
                let report = &audit.report;
                for finding in &report.findings {
                    let _ = writeln!(err, "{}", render::human_of(&report.renderable(finding)));
                }
                let _ = writeln!(
                    out,
                    "assets {}: {} in {} under `{}`",
                    audit.name,
                    render::plural(report.findings.len(), "finding"),
                    render::plural(report.documents, "document"),
                    audit.folder.display()
                );
            }
            let _ = writeln!(err, "{}", outcome.summary());
        }
        Format::Json => {
            let document = outcome.to_json(&files, &rewritten, set.sources());
            let _ = writeln!(out, "{document:#}");
        }
    }
    outcome.verdict().into()
}
