//! Rendering diagnostics for a terminal or for tools.

use std::fmt;

use miette::{MietteHandler, MietteHandlerOpts, ReportHandler as _};
use policy_lang::{Diagnostic, Report, Sources};
use serde_json::{Value, json};

/// miette's graphical report, with colours, unicode and width chosen for the terminal (plain
/// when standard error is not one).
pub(crate) fn human(diagnostic: &Diagnostic, sources: &Sources) -> String {
    human_of(&diagnostic.renderable(sources))
}

/// [`human`] for any miette diagnostic (the asset audit's findings).
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
    let labels: Vec<Value> = diagnostic
        .labels
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
    let primary = diagnostic
        .primary_loc()
        .and_then(|loc| sources.position(loc));
    json!({
        "severity": if diagnostic.is_error() { "error" } else { "warning" },
        "code": diagnostic.code(),
        "message": diagnostic.message(),
        "help": diagnostic.help(),
        "file": primary.map(|p| p.file),
        "line": primary.map(|p| p.line),
        "column": primary.map(|p| p.column),
        "labels": labels,
    })
}
