//! The gate (`policy gate FILE... [--ratchet]`): size and count ceilings with a ratchet,
//! quarantined heavy crates, and the asset audit of every `assets` stanza.
//!
//! The question is not "how big is this feature" but "did this capability make everything
//! else heavier?". Each line of a `ceilings` stanza is measured and compared with its ceiling; each
//! `quarantine` resolves the named package's default build and fails when the crate is in it,
//! printing the chain that pulls it in (as `cargo tree -i CRATE -e normal` draws it), unless
//! a `justification` allows it. With the feature on, it reports what the capability adds.
//!
//! Paths in the policy (`dir`, binaries, globs) are relative to the root [`check`] is given
//! (`--root`, by default the current directory), where `cargo metadata` also runs. A run ends
//! in a [`Verdict`]: [`Verdict::Pass`] within every ceiling, [`Verdict::Fail`] over a ceiling,
//! a quarantine broken or an asset finding, [`Verdict::Unmeasured`] when something could not be
//! measured (the command's exit codes 0, 1 and 2; the gate's own diagnostics,
//! `policy::gate::...`, are listed in [`problem`]).
//!
//! One module per step: [`ceilings`] measures each line (one module per kind of measurement:
//! [`web`] for a front-end build, [`graph`] for Cargo's dependency graph, [`artifact`] for
//! binaries and globs) and [`ratchet`] lowers it, [`quarantine`] checks the heavy crates,
//! [`audits`] runs the asset audit of every `assets` stanza; [`check`] puts them in that order,
//! and its [`Outcome`] writes the ratchet's numbers back ([`Outcome::write_ratchet`]) and
//! reports.
//!
//! ```
//! use velocity_policy_delivery::gate::{self, Verdict};
//! use velocity_policy_lang::PolicySet;
//!
//! let root = std::env::temp_dir().join(format!("policy-gate-doc-{}", std::process::id()));
//! std::fs::create_dir_all(root.join("dist"))?;
//! std::fs::write(root.join("dist/app.js"), "console.log(1)\n".repeat(100))?;
//! let mut policy = PolicySet::new();
//! policy.add_source(
//!     "project.policy",
//!     br#"ceilings web { files "dist/*.js" at most 1kb measured 1kb headroom 10% }"#,
//! );
//! let outcome = gate::check(&policy, &root, false);
//! assert_eq!(outcome.verdict(), Verdict::Fail);
//! assert_eq!(outcome.problems()[0].code(), "policy::gate::over-ceiling");
//! assert!(outcome.summary().starts_with("policy gate: 1 ceiling, 1 over"));
//! # std::fs::remove_dir_all(&root)?;
//! # Ok::<(), std::io::Error>(())
//! ```

use std::collections::HashMap;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use velocity_policy_lang::{Loc, PolicySet, Sources, suggest};

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

use audits::{Audit, AuditError};
use ceilings::{Edits, Row};
use graph::Workspace;
use problem::{GateError, Problem};
use quarantine::Checked;

/// How a gate run ends, from best to worst (`max` of two is the worse): the `policy gate`
/// command exits 0, 1 or 2.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Verdict {
    /// Within every ceiling, every quarantine kept, no asset finding (warnings allowed).
    Pass,
    /// Over a ceiling, a quarantine broken, or an asset finding.
    Fail,
    /// Something could not be measured: a folder, a binary, `cargo metadata`, a name.
    Unmeasured,
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
        self.labels.push(velocity_policy_lang::Label {
            loc,
            text: text.to_owned(),
        });
        self
    }
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// Everything one run found: [`check`]'s answer.
#[derive(Debug)]
pub struct Outcome {
    rows: Vec<Row>,
    checked: Vec<Checked>,
    audits: Vec<Audit>,
    audit_errors: Vec<AuditError>,
    problems: Vec<Problem>,
    edits: Edits,
    ratchet: bool,
    verdict: Verdict,
}

/// Runs the gate on a valid policy: the ceilings, the quarantines and the asset audits, in that
/// order. Paths in the policy are relative to `root`, where `cargo metadata` also runs. With
/// `ratchet`, the outcome also holds what the files' numbers become
/// ([`Outcome::write_ratchet`] writes them).
#[must_use]
pub fn check(set: &PolicySet, root: &Path, ratchet: bool) -> Outcome {
    let mut gate = Gate {
        root,
        workspace: None,
        metadata_reported: false,
        sites: HashMap::new(),
        problems: Vec::new(),
    };
    let (rows, edits) = gate.ceilings(set.spec(), ratchet);
    let checked = set
        .spec()
        .quarantines
        .iter()
        .filter_map(|quarantine| gate.quarantine(quarantine))
        .collect();
    let (audits, audit_errors, audit_verdict) = audits::audit_assets(set);
    let verdict = gate
        .problems
        .iter()
        .map(Problem::verdict)
        .fold(audit_verdict, Verdict::max);
    Outcome {
        rows,
        checked,
        audits,
        audit_errors,
        problems: gate.problems,
        edits,
        ratchet,
        verdict,
    }
}

impl Outcome {
    /// How the run ends: the worst of its problems and audits.
    #[must_use]
    pub fn verdict(&self) -> Verdict {
        self.verdict
    }

    /// The problems found, warnings included, in the order found.
    #[must_use]
    pub fn problems(&self) -> &[Problem] {
        &self.problems
    }

    /// The asset audit of each `assets` stanza with a `dir`.
    #[must_use]
    pub fn audits(&self) -> &[Audit] {
        &self.audits
    }

    /// The `assets` folders that could not be audited (each makes the verdict
    /// [`Verdict::Unmeasured`]).
    #[must_use]
    pub fn audit_errors(&self) -> &[AuditError] {
        &self.audit_errors
    }

    /// Writes the lowered ceilings into the policy's files (`files` in the order `set` read
    /// them); the paths written, or the file that could not be and why.
    pub fn write_ratchet(
        &self,
        files: &[PathBuf],
        set: &PolicySet,
    ) -> Result<Vec<String>, (PathBuf, io::Error)> {
        let mut rewritten = Vec::new();
        for (index, edits) in &self.edits {
            let (Some(path), Some((_, file))) =
                (files.get(*index), set.sources().iter().nth(*index))
            else {
                continue;
            };
            let text = ratchet::rewrite(file.text(), edits.clone());
            if let Err(error) = std::fs::write(path, text) {
                return Err((path.clone(), error));
            }
            rewritten.push(path.display().to_string());
        }
        Ok(rewritten)
    }

    /// The ceilings' and the quarantines' tables, as `policy gate` prints them.
    pub fn print_tables(&self, out: &mut dyn Write) {
        ceilings::print_ceilings(out, &self.rows);
        quarantine::print_quarantines(out, &self.checked);
    }

    /// `policy gate: 3 ceilings, 0 over; ...`, and what the ratchet did.
    #[must_use]
    pub fn summary(&self) -> String {
        let over = self.rows.iter().filter(|row| row.over()).count();
        let broken = self.checked.iter().filter(|c| c.broken).count();
        let findings: usize = self.audits.iter().map(|a| a.report.findings.len()).sum();
        let mut summary = format!(
            "policy gate: {}, {over} over; {}, {broken} broken; {}, {findings} asset findings",
            plural(self.rows.len(), "ceiling", "ceilings"),
            plural(self.checked.len(), "quarantine", "quarantines"),
            plural(self.audits.len(), "asset audit", "asset audits"),
        );
        if self.ratchet {
            if self.verdict == Verdict::Unmeasured {
                summary.push_str("; nothing ratcheted: fix the errors first");
            } else {
                let lowered = self.rows.iter().filter(|row| row.lowered.is_some()).count();
                summary.push_str(&format!(
                    "; {} lowered",
                    plural(lowered, "ceiling", "ceilings")
                ));
            }
        }
        summary
    }

    /// The run as one JSON document (`policy gate --format json`): the files read, whether it
    /// passed, each ceiling, quarantine and audit, the files the ratchet `rewritten`, and the
    /// problems drawn on `sources`.
    #[must_use]
    pub fn to_json(&self, files: &[PathBuf], rewritten: &[String], sources: &Sources) -> Value {
        json!({
            "files": files.iter().map(|f| f.display().to_string()).collect::<Vec<_>>(),
            "pass": self.verdict == Verdict::Pass,
            "ceilings": self.rows.iter().map(ceilings::row_json).collect::<Vec<_>>(),
            "quarantines": self.checked.iter().map(quarantine::checked_json).collect::<Vec<_>>(),
            "assets": self.audits.iter().map(|audit| json!({
                "name": audit.name,
                "folder": audit.folder.display().to_string(),
                "report": audit.report.to_json(),
            })).collect::<Vec<_>>(),
            "rewritten": rewritten,
            "diagnostics": self.problems.iter().map(|p| p.json(sources)).collect::<Vec<_>>(),
        })
    }
}
