//! `policy assets [FOLDER]`: the asset audit of a built front end (`velocity_policy_delivery::assets`,
//! where its rules and their agreement with Lighthouse are documented).

use std::io::Write;
use std::path::PathBuf;

use velocity_policy_delivery::assets::{audit, choose};
use velocity_policy_lang::PolicySet;

use crate::{Exit, Format, check, files, render};

/// Arguments of `policy assets`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The built folder to audit; by default the `dir` of the policy's `assets` stanza,
    /// relative to its policy file.
    pub folder: Option<PathBuf>,
    /// Policy files, or directories of them, holding the `assets` stanza; without one the
    /// defaults apply.
    #[arg(long = "policy", value_name = "FILE")]
    pub policies: Vec<PathBuf>,
    /// Which `assets` stanza, when the policy has several.
    #[arg(long)]
    pub name: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t)]
    pub format: Format,
}

/// Runs `policy assets`.
pub fn run(args: &Args, out: &mut dyn Write, err: &mut dyn Write) -> Exit {
    let set = if args.policies.is_empty() {
        PolicySet::new()
    } else {
        let (set, _) =
            match check::load_valid(&args.policies, "policy assets: the policy has ", err) {
                Ok(loaded) => loaded,
                Err(exit) => return exit,
            };
        set
    };
    let chosen = match choose(&set, args.name.as_deref(), args.folder.as_deref()) {
        Ok(chosen) => chosen,
        Err(error) => {
            let _ = writeln!(err, "error: {error}\n  help: {}", error.help());
            return Exit::Usage;
        }
    };
    if chosen.defaults && !args.policies.is_empty() {
        let _ = writeln!(
            err,
            "note: the policy has no `assets` stanza: auditing with the defaults"
        );
    }
    let Some(folder) = args.folder.clone().or(chosen.folder) else {
        let _ = writeln!(
            err,
            "error: no folder to audit\n  help: name it, `policy assets web/dist`, or set `dir = \"web/dist\"` in the `assets` stanza"
        );
        return Exit::Usage;
    };
    let report = match audit(&folder, &chosen.spec) {
        Ok(report) => report,
        Err(error) => {
            let _ = writeln!(err, "{}", files::io_error(&folder, &error));
            return Exit::Usage;
        }
    };
    if report.documents == 0 {
        let _ = writeln!(
            err,
            "error: no `.html` documents under `{}`\n  help: audit the built output (the folder the server serves), not the sources",
            folder.display()
        );
        return Exit::Usage;
    }
    match args.format {
        Format::Human => {
            for finding in &report.findings {
                let _ = writeln!(err, "{}", render::human_of(&report.renderable(finding)));
            }
            let _ = writeln!(
                err,
                "policy assets: {} in {} ({}, {}) under `{}`",
                render::plural(report.findings.len(), "finding"),
                render::plural(report.documents, "document"),
                render::plural(report.images, "image"),
                render::plural(report.fonts, "font"),
                folder.display()
            );
        }
        Format::Json => {
            let _ = writeln!(out, "{:#}", report.to_json());
        }
    }
    if report.is_clean() {
        Exit::Clean
    } else {
        Exit::Problems
    }
}
