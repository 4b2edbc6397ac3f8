//! `policy explain FILE [OPERATION]`: each operation's chain and worst-case latency.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use policy_lang::explain::{Explanation, explain_all};
use serde_json::json;

use crate::{Exit, Format, check, render};

/// Arguments of `policy explain`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// A policy file, a directory whose `*.policy` files form the policy, or a crate's folder
    /// (its `policies/`, or the `dir` of `[package.metadata.policy]`).
    pub file: PathBuf,
    /// Only this operation.
    pub operation: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t)]
    pub format: Format,
}

fn millis(duration: Option<Duration>) -> serde_json::Value {
    duration.map_or(serde_json::Value::Null, |d| json!(d.as_secs_f64() * 1000.0))
}

fn to_json(explanation: &Explanation) -> serde_json::Value {
    json!({
        "operation": explanation.operation,
        "class": explanation.class.as_str(),
        "flags": explanation.flags,
        "steps": explanation.steps.iter().map(ToString::to_string).collect::<Vec<_>>(),
        "attempts": explanation.attempts,
        "bound_ms": millis(explanation.bound),
        "bound_without_propagation_ms": millis(explanation.bound_without_propagation),
        "sum": explanation.sum,
    })
}

/// What the chains above do not show: the files are read alone, and an annotated function's
/// attribute changes what that function runs with (the rule of the `policy` crate docs,
/// "Attributes and files").
const ATTRIBUTES_OVERRIDE: &str = "\nnote: these are the files' values. A function bound to an operation (by its own name, or by \
`#[policy::operation(\"...\")]`) keeps the operation's class, and each value its attribute gives \
(`deadline`, `min_budget`, `breaker = \"...\"`, ...) replaces the file's for that function.\n";

/// Runs `policy explain`.
pub fn run(args: &Args, out: &mut dyn Write, err: &mut dyn Write) -> Exit {
    let (set, files) =
        match check::load_valid(std::slice::from_ref(&args.file), "policy explain: ", err) {
            Ok(loaded) => loaded,
            Err(exit) => return exit,
        };
    let mut explanations = explain_all(set.spec());
    if explanations.is_empty() && args.operation.is_none() {
        // Nothing to explain is said, not printed as nothing.
        let _ = writeln!(
            err,
            "policy explain: no operations in {}",
            render::plural(files.len(), "file")
        );
    }
    if let Some(wanted) = &args.operation {
        explanations.retain(|explanation| &explanation.operation == wanted);
        if explanations.is_empty() {
            let help = policy_lang::suggest::did_you_mean(
                wanted,
                set.spec().operations.names(),
                "the operations",
                "the policy has no operations",
            );
            let _ = writeln!(
                err,
                "error: no operation `{wanted}` in `{}`\n  help: {help}",
                args.file.display()
            );
            return Exit::Usage;
        }
    }
    match args.format {
        Format::Human => {
            for (i, explanation) in explanations.iter().enumerate() {
                if i > 0 {
                    let _ = writeln!(out);
                }
                let _ = write!(out, "{explanation}");
            }
            if !explanations.is_empty() {
                let _ = write!(out, "{ATTRIBUTES_OVERRIDE}");
            }
        }
        Format::Json => {
            let document: Vec<_> = explanations.iter().map(to_json).collect();
            let _ = writeln!(out, "{:#}", serde_json::Value::from(document));
        }
    }
    Exit::Clean
}
