//! `policy check FILE...`: every problem of every file, in one run.

use std::io::Write;
use std::path::PathBuf;

use serde_json::json;
use velocity_policy_lang::PolicySet;
use velocity_policy_lang::overrides::{Overridden, PolicyFile, overridden};

use crate::{Exit, Format, files, render};

/// Arguments of `policy check`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Policy files, directories whose `*.policy` files are read, or a crate's folder (its
    /// `policies/`, or the `dir` of `[package.metadata.policy]`). All of them form one
    /// policy, as the attribute macros see it.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// Check FILES as overrides (a `policies/<env>/` directory, say) of the compiled policy in
    /// this directory or these files: each override replaces the compiled setting it names, and
    /// the merged policy is checked whole, as the runtime checks it before applying it.
    #[arg(long, value_name = "COMPILED")]
    pub against: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t)]
    pub format: Format,
}

/// Reads the compiled policy of `against` and merges the overrides of `paths` into it; an
/// unreadable file is a usage error.
fn load_against(
    against: &PathBuf,
    paths: &[PathBuf],
    err: &mut dyn Write,
) -> Result<(Overridden, Vec<PathBuf>), Exit> {
    let read = |paths: &[PathBuf], err: &mut dyn Write| {
        let files = files::expand(paths, err)?;
        let mut read = Vec::new();
        for file in &files {
            match PolicyFile::read(file) {
                Ok(policy) => read.push(policy),
                Err(error) => {
                    let _ = writeln!(err, "{}", files::io_error(file, &error));
                    return Err(Exit::Usage);
                }
            }
        }
        Ok((files, read))
    };
    let (_, compiled) = read(std::slice::from_ref(against), err)?;
    let (files, overrides) = read(paths, err)?;
    Ok((overridden(&compiled, &overrides), files))
}

/// Loads every file into one policy set; an unreadable file is a usage error.
pub(crate) fn load(
    paths: &[PathBuf],
    err: &mut dyn Write,
) -> Result<(PolicySet, Vec<PathBuf>), Exit> {
    let files = files::expand(paths, err)?;
    let mut set = PolicySet::new();
    for file in &files {
        if let Err(error) = set.load_file(file) {
            let _ = writeln!(err, "{}", files::io_error(file, &error));
            return Err(Exit::Usage);
        }
    }
    Ok((set, files))
}

/// Loads the files for a command that needs a valid policy (`explain`, `gate`, `assets`):
/// prints every diagnostic, and stops with [`Exit::Problems`] when any is an error.
/// `prefix` starts the closing line, before the summary: `policy gate: ` or
/// `policy assets: the policy has `.
pub(crate) fn load_valid(
    paths: &[PathBuf],
    prefix: &str,
    err: &mut dyn Write,
) -> Result<(PolicySet, Vec<PathBuf>), Exit> {
    let (set, files) = load(paths, err)?;
    let report = set.check();
    render::human_all(&report.all(), set.sources(), render::CHECK_JSON, err);
    if report.has_errors() {
        let _ = writeln!(
            err,
            "{prefix}{}; fix the errors first",
            render::summary(&report)
        );
        return Err(Exit::Problems);
    }
    Ok((set, files))
}

/// Runs `policy check`.
pub fn run(args: &Args, out: &mut dyn Write, err: &mut dyn Write) -> Exit {
    // Against a compiled policy, each problem is labelled first at the override it involves.
    let loaded = match &args.against {
        Some(against) => load_against(against, &args.files, err).map(|(merged, files)| {
            let report = merged.check();
            (merged.set, report, files)
        }),
        None => load(&args.files, err).map(|(set, files)| {
            let report = set.check();
            (set, report, files)
        }),
    };
    let (set, report, files) = match loaded {
        Ok(loaded) => loaded,
        Err(exit) => return exit,
    };
    match args.format {
        Format::Human => {
            render::human_all(&report.all(), set.sources(), render::CHECK_JSON, err);
            let operations = set.spec().operations.len();
            let _ = writeln!(
                err,
                "policy check: {} in {} ({})",
                render::summary(&report),
                render::plural(files.len(), "file"),
                render::plural(operations, "operation"),
            );
        }
        Format::Json => {
            let document = json!({
                "files": files.iter().map(|file| file.display().to_string()).collect::<Vec<_>>(),
                "errors": report.errors.len(),
                "warnings": report.warnings.len(),
                "diagnostics": report
                    .all()
                    .into_iter()
                    .map(|diagnostic| render::json(diagnostic, set.sources()))
                    .collect::<Vec<_>>(),
            });
            let _ = writeln!(out, "{document:#}");
        }
    }
    if report.has_errors() {
        Exit::Problems
    } else {
        Exit::Clean
    }
}
