//! `policy fmt FILE... [--check]`: canonical formatting, comments kept.

use std::io::Write;
use std::path::PathBuf;

use velocity_policy_lang::Sources;

use crate::{Exit, files, render};

/// Arguments of `policy fmt`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Policy files, directories whose `*.policy` files are formatted, or a crate's folder
    /// (its `policies/`, or the `dir` of `[package.metadata.policy]`).
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// Change nothing; list the files that are not formatted and exit 1 if there are any.
    #[arg(long)]
    pub check: bool,
}

/// Runs `policy fmt`.
pub fn run(args: &Args, out: &mut dyn Write, err: &mut dyn Write) -> Exit {
    let paths = match files::expand(&args.files, err) {
        Ok(paths) => paths,
        Err(exit) => return exit,
    };
    let mut exit = Exit::Clean;
    for path in &paths {
        let mut sources = Sources::new();
        let parsed = match velocity_policy_lang::fmt::parse_file(&mut sources, path) {
            Ok(parsed) => parsed,
            Err(error) => {
                let _ = writeln!(err, "{}", files::io_error(path, &error));
                return Exit::Usage;
            }
        };
        if !parsed.diagnostics.is_empty() {
            let diagnostics: Vec<_> = parsed.diagnostics.iter().collect();
            render::human_all(&diagnostics, &sources, render::CHECK_JSON, err);
            let _ = writeln!(
                err,
                "policy fmt: `{}` left as it is: it does not parse",
                path.display()
            );
            exit = Exit::Problems;
            continue;
        }
        let text = sources
            .get(parsed.file.source())
            .map(|file| file.text())
            .unwrap_or_default();
        let formatted = velocity_policy_lang::fmt::format(&parsed.file, text);
        if formatted == text {
            continue;
        }
        if args.check {
            let _ = writeln!(out, "{}", path.display());
            exit = Exit::Problems;
        } else if let Err(error) = std::fs::write(path, formatted) {
            let _ = writeln!(err, "error: cannot write `{}`: {error}", path.display());
            return Exit::Usage;
        }
    }
    exit
}
