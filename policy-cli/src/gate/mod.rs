//! `policy gate FILE... [--ratchet]`: size and count ceilings with a ratchet, quarantined
//! heavy crates, and the asset audit of every `assets` stanza.
//!
//! The question is not "how big is this feature" but "did this capability make everything
//! else heavier?". Each line of a `ceilings` stanza is measured and compared with its ceiling; each
//! `quarantine` resolves the named package's default build and fails when the crate is in it,
//! printing the chain that pulls it in (as `cargo tree -i CRATE -e normal` draws it), unless
//! a `justification` allows it. With the feature on, it reports what the capability adds.
//!
//! Paths in the policy (`dir`, binaries, globs) are relative to `--root` (default: the
//! current directory), where `cargo metadata` also runs. Exit codes: 0 within every ceiling, 1
//! over a ceiling, a quarantine broken or an asset finding, 2 when something could not be
//! measured (the gate's own diagnostics, `policy::gate::...`, are listed in [`problem`]).
//!
//! One module per step: [`ceilings`] measures each line (one module per kind of measurement:
//! [`web`] for a front-end build, [`graph`] for Cargo's dependency graph, [`artifact`] for
//! binaries and globs) and [`ratchet`] lowers it, [`quarantine`] checks the heavy crates,
//! [`audits`] runs the asset audit of every `assets` stanza; [`run`] puts them in that order,
//! writes the ratchet's numbers back, and reports.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use policy_lang::{Loc, PolicySet, suggest};
use serde_json::json;

use crate::{Exit, Format, check, render};

pub mod artifact;
pub mod audits;
pub mod ceilings;
pub mod graph;
pub mod imports;
pub mod platform;
pub mod problem;
pub mod quarantine;
pub mod ratchet;
pub mod web;

use audits::Audit;
use ceilings::{Edits, Row};
use graph::Workspace;
use problem::{GateError, Problem};
use quarantine::Checked;

/// Arguments of `policy gate`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Policy files, or directories whose `*.policy` files are read.
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

/// What the checks share: the root, the dependency graph and the folders, each read once, and
/// the problems found.
struct Gate<'a> {
    root: &'a Path,
    workspace: Option<Result<Workspace, String>>,
    metadata_reported: bool,
    sites: HashMap<String, Result<web::Site, String>>,
    problems: Vec<Problem>,
}

impl Gate<'_> {
    /// The dependency graph, read on first use; `None` (reported once) when `cargo metadata`
    /// fails.
    fn workspace(&mut self, loc: Loc) -> Option<&Workspace> {
        let root = self.root;
        let loaded = self
            .workspace
            .get_or_insert_with(|| Workspace::load(root).map_err(|error| error.0));
        match loaded {
            Ok(workspace) => Some(workspace),
            Err(output) => {
                if !self.metadata_reported {
                    self.metadata_reported = true;
                    self.problems.push(Problem::at(
                        GateError::CargoMetadata {
                            root: root.display().to_string(),
                            output: output.clone(),
                        },
                        loc,
                        "needs the dependency graph",
                    ));
                }
                None
            }
        }
    }

    /// The workspace member named `package`, or `None` with a "did you mean".
    fn member(&mut self, package: &str, loc: Loc) -> Option<usize> {
        let root = self.root.display().to_string();
        let workspace = self.workspace(loc)?;
        if let Some(index) = workspace.member(package) {
            return Some(index);
        }
        let help = suggest::did_you_mean(
            package,
            workspace.member_names(),
            "the workspace's packages",
            "the workspace has no packages",
        );
        self.problems.push(Problem::at(
            GateError::UnknownPackage {
                package: package.to_owned(),
                root,
                help,
            },
            loc,
            "not a package of the workspace",
        ));
        None
    }
}

impl Problem {
    fn with_label(mut self, loc: Loc, text: &str) -> Self {
        self.labels.push(policy_lang::Label {
            loc,
            text: text.to_owned(),
        });
        self
    }
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// Everything one run found.
struct Outcome {
    rows: Vec<Row>,
    checked: Vec<Checked>,
    audits: Vec<Audit>,
    problems: Vec<Problem>,
    exit: Exit,
}

/// Runs `policy gate`.
pub fn run(args: &Args, out: &mut dyn Write, err: &mut dyn Write) -> Exit {
    let (set, files) = match check::load_valid(&args.files, "policy gate: ", err) {
        Ok(loaded) => loaded,
        Err(exit) => return exit,
    };
    let (outcome, edits) = check_all(args, &set, err);
    let mut rewritten = Vec::new();
    if args.ratchet && outcome.exit != Exit::Usage {
        match write_ratchet(&files, &set, edits) {
            Ok(paths) => rewritten = paths,
            Err(message) => {
                let _ = writeln!(err, "{message}");
                return Exit::Usage;
            }
        }
    }
    match args.format {
        Format::Human => print_human(args, &set, &outcome, out, err),
        Format::Json => {
            let document = json!({
                "files": files.iter().map(|f| f.display().to_string()).collect::<Vec<_>>(),
                "pass": outcome.exit == Exit::Clean,
                "ceilings": outcome.rows.iter().map(ceilings::row_json).collect::<Vec<_>>(),
                "quarantines": outcome.checked.iter().map(quarantine::checked_json).collect::<Vec<_>>(),
                "assets": outcome.audits.iter().map(|audit| json!({
                    "name": audit.name,
                    "folder": audit.folder.display().to_string(),
                    "report": audit.report.to_json(),
                })).collect::<Vec<_>>(),
                "rewritten": rewritten,
                "diagnostics": outcome.problems.iter().map(|p| p.json(set.sources())).collect::<Vec<_>>(),
            });
            let _ = writeln!(out, "{document:#}");
        }
    }
    outcome.exit
}

/// The ceilings, the quarantines and the asset audits, in that order, and the worst exit of
/// them all.
fn check_all(args: &Args, set: &PolicySet, err: &mut dyn Write) -> (Outcome, Edits) {
    let mut gate = Gate {
        root: &args.root,
        workspace: None,
        metadata_reported: false,
        sites: HashMap::new(),
        problems: Vec::new(),
    };
    let (rows, edits) = gate.ceilings(set.spec(), args.ratchet);
    let checked = set
        .spec()
        .quarantines
        .iter()
        .filter_map(|quarantine| gate.quarantine(quarantine))
        .collect();
    let (audits, audit_exit) = audits::audit_assets(set, err);
    let exit = gate
        .problems
        .iter()
        .map(Problem::exit)
        .fold(audit_exit, Exit::max);
    let outcome = Outcome {
        rows,
        checked,
        audits,
        problems: gate.problems,
        exit,
    };
    (outcome, edits)
}

/// Writes the lowered ceilings into their files; the paths written, or why one could not be.
fn write_ratchet(files: &[PathBuf], set: &PolicySet, edits: Edits) -> Result<Vec<String>, String> {
    let mut rewritten = Vec::new();
    for (index, edits) in edits {
        let (Some(path), Some((_, file))) = (files.get(index), set.sources().iter().nth(index))
        else {
            continue;
        };
        let text = ratchet::rewrite(file.text(), edits);
        if let Err(error) = std::fs::write(path, text) {
            return Err(format!("error: cannot write `{}`: {error}", path.display()));
        }
        rewritten.push(path.display().to_string());
    }
    Ok(rewritten)
}

/// The tables on `out`; the problems, the audits' findings and the summary on `err`.
fn print_human(
    args: &Args,
    set: &PolicySet,
    outcome: &Outcome,
    out: &mut dyn Write,
    err: &mut dyn Write,
) {
    ceilings::print_ceilings(out, &outcome.rows);
    quarantine::print_quarantines(out, &outcome.checked);
    for problem in &outcome.problems {
        let _ = writeln!(err, "{}", problem.human(set.sources()));
    }
    for audit in &outcome.audits {
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
    let _ = writeln!(err, "{}", summary(args, outcome));
}

/// `policy gate: 3 ceilings, 0 over; ...`, and what the ratchet did.
fn summary(args: &Args, outcome: &Outcome) -> String {
    let over = outcome.rows.iter().filter(|row| row.over()).count();
    let broken = outcome.checked.iter().filter(|c| c.broken).count();
    let findings: usize = outcome.audits.iter().map(|a| a.report.findings.len()).sum();
    let mut summary = format!(
        "policy gate: {}, {over} over; {}, {broken} broken; {}, {findings} asset findings",
        plural(outcome.rows.len(), "ceiling", "ceilings"),
        plural(outcome.checked.len(), "quarantine", "quarantines"),
        plural(outcome.audits.len(), "asset audit", "asset audits"),
    );
    if args.ratchet {
        if outcome.exit == Exit::Usage {
            summary.push_str("; nothing ratcheted: fix the errors first");
        } else {
            let lowered = outcome
                .rows
                .iter()
                .filter(|row| row.lowered.is_some())
                .count();
            summary.push_str(&format!(
                "; {} lowered",
                plural(lowered, "ceiling", "ceilings")
            ));
        }
    }
    summary
}
