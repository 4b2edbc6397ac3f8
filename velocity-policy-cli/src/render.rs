//! Rendering diagnostics for a terminal or for tools.

use std::fmt;
use std::io::Write;

use miette::{MietteHandler, MietteHandlerOpts, ReportHandler as _};
use serde_json::{Value, json};
use velocity_policy_lang::{Diagnostic, Report, Sources};

/// Reports drawn in full by [`human_all`]; the rest are counted in one line. A file with
/// thousands of errors is fixed from the top, and `--format json` lists every one.
pub(crate) const MAX_RENDERED: usize = 50;

/// The command that lists every diagnostic of a policy.
pub(crate) const CHECK_JSON: &str = "policy check --format json";

/// miette's graphical report, with colours, unicode and width chosen for the terminal (plain
/// when standard error is not one).
pub(crate) fn human(diagnostic: &Diagnostic, sources: &Sources) -> String {
    human_of(&diagnostic.renderable(sources))
}

/// Writes the reports of `diagnostics` to `out`, in order: the first [`MAX_RENDERED`] drawn
/// with [`human`], then one line counting the errors and warnings left out and naming the
/// command that lists them all (`every`).
pub(crate) fn human_all(
    diagnostics: &[&Diagnostic],
    sources: &Sources,
    every: &str,
    out: &mut dyn Write,
) {
    for diagnostic in diagnostics.iter().take(MAX_RENDERED) {
        let _ = writeln!(out, "{}", human(diagnostic, sources));
    }
    let rest = diagnostics.get(MAX_RENDERED..).unwrap_or_default();
    if !rest.is_empty() {
        let errors = rest.iter().filter(|d| d.is_error()).count();
        let _ = writeln!(
            out,
            "... and {} more not shown ({}, {}): `{every}` lists every one\n",
            rest.len(),
            plural(errors, "error"),
            plural(rest.len() - errors, "warning"),
        );
    }
}

/// [`human`] for any miette diagnostic (the asset audit's findings, the gate's problems).
pub(crate) fn human_of(diagnostic: &dyn miette::Diagnostic) -> String {
    struct Show<'a>(&'a MietteHandler, &'a dyn miette::Diagnostic);
    impl fmt::Display for Show<'_> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            self.0.debug(self.1, f)
        }
    }
    let handler = MietteHandlerOpts::new().build();
    Show(&handler, diagnostic).to_string()
}

/// `error: MESSAGE`, and `  help: HELP` on the next line unless `help` is empty.
pub(crate) fn error_with_help(error: &dyn fmt::Display, help: &str) -> String {
    if help.is_empty() {
        format!("error: {error}")
    } else {
        format!("error: {error}\n  help: {help}")
    }
}

/// "1 file", "2 files".
pub(crate) fn plural(n: usize, word: &str) -> String {
    format!("{n} {word}{}", if n == 1 { "" } else { "s" })
}

/// "2 errors, 1 warning".
pub(crate) fn summary(report: &Report) -> String {
    format!(
        "{}, {}",
        plural(report.errors.len(), "error"),
        plural(report.warnings.len(), "warning")
    )
}

/// One diagnostic as JSON: severity, code, message, help, primary position, and every label.
pub(crate) fn json(diagnostic: &Diagnostic, sources: &Sources) -> Value {
    json_of(
        &diagnostic.code(),
        &diagnostic.message(),
        diagnostic.help(),
        diagnostic.is_error(),
        &diagnostic.labels,
        sources,
    )
}

/// [`json`] for any rule with labels on policy text (`policy explain`'s findings).
pub(crate) fn json_of(
    code: &str,
    message: &str,
    help: Option<String>,
    is_error: bool,
    labels: &[velocity_policy_lang::Label],
    sources: &Sources,
) -> Value {
    let json_labels: Vec<Value> = labels
        .iter()
        .map(|label| {
            let position = sources.position(label.loc);
            json!({
                "file": position.map(|p| p.file),
                "line": position.map(|p| p.line),
                "column": position.map(|p| p.column),
                "end_line": position.map(|p| p.end_line),
                "end_column": position.map(|p| p.end_column),
                "text": label.text,
            })
        })
        .collect();
    let primary = labels.first().and_then(|label| sources.position(label.loc));
    json!({
        "severity": if is_error { "error" } else { "warning" },
        "code": code,
        "message": message,
        "help": help,
        "file": primary.map(|p| p.file),
        "line": primary.map(|p| p.line),
        "column": primary.map(|p| p.column),
        "labels": json_labels,
    })
}
