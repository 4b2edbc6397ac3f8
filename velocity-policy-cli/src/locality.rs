//! `policy locality [FILE...] [--check] [--format json] [--env-file PATH]`: where the compute
//! and each service run, derived from the environment, and the hops the policy declares
//! (judged by `velocity_policy_delivery::locality::hops`).

use std::io::Write;
use std::path::PathBuf;

use serde_json::json;
use velocity_policy_delivery::locality::env_file::EnvFile;
use velocity_policy_delivery::locality::hops::{
    Assessed, Environment, assess, hop_json, hops_table, judge,
};
use velocity_policy_lang::{PolicySet, Report};

use crate::{Exit, Format, check, files, render};

/// Arguments of `policy locality`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Policy files, or directories whose `*.policy` files are read, whose `locality` stanza
    /// declares the hops. Without any, only the map is printed.
    pub files: Vec<PathBuf>,
    /// Judge the declared hops: exit 1 when a blocking hop crosses regions or a hop's variable
    /// locates no service; warn when a region cannot be derived.
    #[arg(long, requires = "files")]
    pub check: bool,
    /// Output format.
    #[arg(long, value_enum, default_value_t)]
    pub format: Format,
    /// Read the variables from this file (`NAME=VALUE` lines, as in `.env`) instead of the
    /// process environment.
    #[arg(long, value_name = "PATH")]
    pub env_file: Option<PathBuf>,
}

/// Runs `policy locality`.
pub fn run(args: &Args, out: &mut dyn Write, err: &mut dyn Write) -> Exit {
    let environment = match &args.env_file {
        None => Environment::Process,
        Some(path) => match EnvFile::read(path) {
            Ok(file) => {
                for line in file.skipped() {
                    let _ = writeln!(
                        err,
                        "warning: line {line} of `{}` is not `NAME=VALUE`; skipped (its text is not shown)",
                        path.display()
                    );
                }
                Environment::File(file)
            }
            Err(error) => {
                let _ = writeln!(err, "{}", files::io_error(path, &error));
                return Exit::Usage;
            }
        },
    };
    let (set, files) = if args.files.is_empty() {
        (PolicySet::new(), Vec::new())
    } else {
        match check::load(&args.files, err) {
            Ok(loaded) => loaded,
            Err(exit) => return exit,
        }
    };
    // A policy with errors cannot be trusted to say what its hops are; its warnings are about
    // other stanzas, and `policy check`'s to report.
    let report = set.check();
    if report.has_errors() {
        render::human_all(&report.all(), set.sources(), render::CHECK_JSON, err);
        let _ = writeln!(
            err,
            "policy locality: {}; fix the errors first",
            render::summary(&report)
        );
        return Exit::Problems;
    }
    let locality = set.spec().locality.as_ref();
    if args.check && locality.is_none() {
        let _ = writeln!(
            err,
            "error: the policy declares no hops to check\n  help: add a `locality` stanza, such as `locality {{ database = blocking env DATABASE_URL }}`"
        );
        return Exit::Problems;
    }

    let map = environment.map();
    let assessed: Vec<Assessed<'_>> = locality
        .map(|locality| {
            locality
                .hops
                .iter()
                .map(|hop| assess(&map, &environment, hop))
                .collect()
        })
        .unwrap_or_default();
    let findings = Report::from_diagnostics(if args.check {
        assessed.iter().filter_map(judge).collect()
    } else {
        Vec::new()
    });

    match args.format {
        Format::Human => {
            let _ = write!(out, "{map}");
            if !files.is_empty() {
                let _ = writeln!(out);
                if locality.is_none() {
                    let _ = writeln!(out, "(no hops: the policy has no `locality` stanza)");
                }
                let _ = write!(out, "{}", hops_table(&assessed));
            }
            if args.check {
                render::human_all(
                    &findings.all(),
                    set.sources(),
                    "policy locality --check --format json",
                    err,
                );
                let _ = writeln!(
                    err,
                    "policy locality: {} in {}",
                    render::summary(&findings),
                    render::plural(assessed.len(), "hop"),
                );
            }
        }
        Format::Json => {
            // The probe's own JSON (what a service's dashboard serves), with the hops added.
            let mut document = json!(map);
            if let Some(object) = document.as_object_mut() {
                object.insert(
                    "files".to_owned(),
                    json!(
                        files
                            .iter()
                            .map(|file| file.display().to_string())
                            .collect::<Vec<_>>()
                    ),
                );
                object.insert(
                    "hops".to_owned(),
                    assessed.iter().map(hop_json).collect::<Vec<_>>().into(),
                );
                if args.check {
                    object.insert("errors".to_owned(), findings.errors.len().into());
                    object.insert("warnings".to_owned(), findings.warnings.len().into());
                    object.insert(
                        "diagnostics".to_owned(),
                        findings
                            .all()
                            .into_iter()
                            .map(|diagnostic| render::json(diagnostic, set.sources()))
                            .collect::<Vec<_>>()
                            .into(),
                    );
                }
            }
            let _ = writeln!(out, "{document:#}");
        }
    }
    if findings.has_errors() {
        Exit::Problems
    } else {
        Exit::Clean
    }
}
