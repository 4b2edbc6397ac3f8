//! `policy explain FILE [OPERATION]`: each operation's chain and worst-case latency, and each
//! entry point's tree of operations, composed from the policy and the code.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};
use velocity_policy_lang::bound::{Composition, Finding, Graph, Model, Node, Tree, compose};
use velocity_policy_lang::explain::{Explanation, explain_all};
use velocity_policy_lang::overrides::{Applied, PolicyFile, overridden};
use velocity_policy_lang::{PolicySet, Sources};

use crate::{Exit, Format, check, code, files, render};

/// How to read what `policy explain` prints (its `--help`).
const READING: &str = "\
Reading the output:

  operation NAME: the steps one call runs, in order (shedding, rate limit, retry, hedge,
  breaker, bulkhead, deadline, fallback), then two worst cases for that operation alone:
    with deadline propagation    every attempt and backoff draws from one budget, clamped by
                                 the request's: min(deadline, attempts' sum)
    if each timeout stood alone  attempts x (attempt timeout + hedges) + backoffs

  tree NAME: an entry point (a route's operation, a task, deferred or background work) and
  every annotated operation it runs, nested as the code calls them. Each call is marked
  [static] (an annotated body calls another annotated function, read from the crate's
  sources), [observed] (a running service saw it: the dashboard's tree) or [both]. Deferred
  and background work it hands over runs after the response: listed, outside the bound, and
  a tree of its own. Each node says its deadline, attempts and bound: the smaller of its own
  and what its parent can give it.
    worst case with deadline propagation    the request's deadline, or the tightest parent
    worst case if each timeout stood alone  every operation waits out its own window; the
                                            operations it calls add to each attempt
    what propagation saves                  the difference
    per path                                the same, from the entry point to each leaf

  Findings (on standard error, codes policy::explain::...; warnings): a child whose
  deadline or attempts never fit in any parent, a retry whose attempts x attempt timeout
  exceed its deadline, an operation with no min_budget that its parent can leave a fraction
  of a millisecond, an entry point with no request deadline above it, a call cycle.

  The numbers are the compiled policy's with each attribute's values (a function's
  `deadline = \"4s\"` replaces its operation's), and with --env NAME the overrides of
  policies/NAME/ in force, as the runtime applies them.";

/// Arguments of `policy explain`.
#[derive(Debug, clap::Args)]
#[command(after_long_help = READING)]
pub struct Args {
    /// A policy file, a directory whose `*.policy` files form the policy, or a crate's folder
    /// (its `policies/`, or the `dir` of `[package.metadata.policy]`).
    pub file: PathBuf,
    /// Only this operation, and the trees it is in.
    pub operation: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t)]
    pub format: Format,
    /// Apply the overrides of this environment (`policies/NAME/*.policy` beside the policy
    /// files, what the runtime reads with `POLICY_ENV=NAME`), checked as the runtime checks
    /// them: the numbers shown are the ones in force there.
    #[arg(long, value_name = "NAME")]
    pub env: Option<String>,
    /// Rust sources to read for the calls between annotated functions (repeatable). By
    /// default, the crate's `src/` when FILE is a crate's folder or its policies.
    #[arg(long, value_name = "DIR")]
    pub src: Vec<PathBuf>,
}

fn millis(duration: Option<Duration>) -> Value {
    duration.map_or(Value::Null, |d| json!(d.as_secs_f64() * 1000.0))
}

fn to_json(explanation: &Explanation) -> Value {
    json!({
        "operation": explanation.operation,
        "declared": "file",
        "class": explanation.class.as_str(),
        "flags": explanation.flags,
        "steps": explanation.steps.iter().map(ToString::to_string).collect::<Vec<_>>(),
        "attempts": explanation.attempts,
        "bound_ms": millis(explanation.bound),
        "bound_without_propagation_ms": millis(explanation.bound_without_propagation),
        "sum": explanation.sum,
    })
}

fn node_json(node: &Node) -> Value {
    json!({
        "operation": node.operation,
        "seen": node.seen.map(|s| s.as_str()),
        "class": node.class.map(|c| c.as_str()),
        "deadline_ms": millis(node.deadline),
        "attempts": node.attempts,
        "bound_ms": millis(node.bound),
        "alone_ms": millis(node.alone),
        "after_response": node.after_response,
        "cycle": node.cycle,
        "isolated": node.isolated,
        "unknown": node.unknown,
        "truncated": node.truncated,
        "children": node.children.iter().map(node_json).collect::<Vec<_>>(),
    })
}

/// A tree as JSON: both worst cases, per path, and every node.
fn tree_json(tree: &Tree) -> Value {
    json!({
        "entry": tree.entry(),
        "request_ms": millis(tree.request),
        "under_deadline": tree.under_deadline,
        "bound_ms": millis(tree.bound),
        "tightest": tree.tightest,
        "alone_ms": millis(tree.alone),
        "sum": tree.sum,
        "difference_ms": millis(tree.difference()),
        "root": node_json(&tree.root),
        "paths": tree.paths.iter().map(|path| json!({
            "operations": path.operations,
            "bound_ms": millis(path.bound),
            "tightest": path.tightest,
            "alone_ms": millis(path.alone),
            "sum": path.sum,
            "difference_ms": millis(path.difference()),
        })).collect::<Vec<_>>(),
        "paths_left_out": tree.paths_left_out,
    })
}

fn finding_json(finding: &Finding, sources: &Sources) -> Value {
    render::json_of(
        &finding.code(),
        &finding.message(),
        finding.help(),
        false,
        &finding.labels,
        sources,
    )
}

/// What the chains above do not show when no code was read: the files are read alone, and an
/// annotated function's attribute changes what that function runs with (the rule of the
/// `policy` crate docs, "Attributes and files").
const ATTRIBUTES_OVERRIDE: &str = "\nnote: these are the files' values. A function bound to an operation (by its own name, or by \
`#[velocity_policy::operation(\"...\")]`) keeps the operation's class, and each value its attribute gives \
(`deadline`, `min_budget`, `breaker = \"...\"`, ...) replaces the file's for that function.\n";

/// The policy, read as the runtime would in `env` (or compiled, without one), or the exit
/// after saying what is wrong.
fn load(args: &Args, err: &mut dyn Write) -> Result<(PolicySet, Vec<Applied>, Vec<PathBuf>), Exit> {
    let Some(env) = &args.env else {
        let (set, files) =
            check::load_valid(std::slice::from_ref(&args.file), "policy explain: ", err)?;
        return Ok((set, Vec::new(), files));
    };
    let files = files::expand(std::slice::from_ref(&args.file), err)?;
    let dir = files
        .first()
        .and_then(|file| file.parent())
        .map_or_else(|| args.file.clone(), Path::to_path_buf);
    let env_dir = dir.join(env);
    if !env_dir.is_dir() {
        let _ = writeln!(
            err,
            "{}",
            render::error_with_help(
                &format!(
                    "no overrides for environment `{env}`: `{}` is not a directory",
                    env_dir.display()
                ),
                &format!(
                    "an environment's overrides are the `*.policy` files of a folder named after it beside the policy files: create `{}`, or name one that exists",
                    env_dir.display()
                ),
            )
        );
        return Err(Exit::Usage);
    }
    let read = |paths: &[PathBuf], err: &mut dyn Write| -> Result<Vec<PolicyFile>, Exit> {
        paths
            .iter()
            .map(|path| {
                PolicyFile::read(path).map_err(|error| {
                    let _ = writeln!(err, "{}", files::io_error(path, &error));
                    Exit::Usage
                })
            })
            .collect()
    };
    let compiled = read(&files, err)?;
    let overrides = match PolicyFile::read_dir(&env_dir) {
        Ok(overrides) => overrides,
        Err(error) => {
            let _ = writeln!(err, "{}", files::io_error(&env_dir, &error));
            return Err(Exit::Usage);
        }
    };
    let merged = overridden(&compiled, &overrides);
    let report = merged.check();
    render::human_all(
        &report.all(),
        merged.set.sources(),
        "policy check --format json",
        err,
    );
    if report.has_errors() {
        let _ = writeln!(
            err,
            "policy explain: the overrides of `{env}` are refused, as the runtime would refuse them ({}); fix the errors first",
            render::summary(&report)
        );
        return Err(Exit::Problems);
    }
    Ok((merged.set, merged.applied, files))
}

/// The directories whose Rust sources say which annotated function calls which.
fn source_dirs(args: &Args) -> (Vec<PathBuf>, Option<PathBuf>) {
    let krate = code::crate_of(&args.file);
    if !args.src.is_empty() {
        return (args.src.clone(), krate);
    }
    let dirs = krate
        .as_ref()
        .map(|krate| krate.join("src"))
        .filter(|src| src.is_dir())
        .into_iter()
        .collect();
    (dirs, krate)
}

/// Whether `tree` is worth printing for `wanted`: it calls something, and holds `wanted`.
fn shown(tree: &Tree, wanted: Option<&str>) -> bool {
    !tree.root.children.is_empty() && wanted.is_none_or(|op| tree.find(op).is_some())
}

/// Runs `policy explain`.
pub fn run(args: &Args, out: &mut dyn Write, err: &mut dyn Write) -> Exit {
    let (set, applied, files) = match load(args, err) {
        Ok(loaded) => loaded,
        Err(exit) => return exit,
    };
    let spec = set.spec();
    let mut sources = set.sources().clone();
    let (dirs, krate) = source_dirs(args);
    let code = code::read(&dirs, &mut sources);
    for skipped in &code.skipped {
        let _ = writeln!(err, "warning: skipped {skipped}");
    }
    let binding = match velocity_policy_lang::files::binding(krate.as_deref()) {
        Ok(binding) => binding,
        Err(error) => {
            let _ = writeln!(err, "error: {error}");
            return Exit::Usage;
        }
    };
    let mut model = Model::from_spec(spec);
    let mut graph = Graph::new();
    code.lower(spec, binding, &applied, &mut model, &mut graph);
    let composition: Composition = compose(&model, &graph);

    let mut explanations = explain_all(spec);
    if explanations.is_empty() && args.operation.is_none() && graph.is_empty() {
        // Nothing to explain is said, not printed as nothing.
        let _ = writeln!(
            err,
            "policy explain: no operations in {}",
            render::plural(files.len(), "file")
        );
    }
    let wanted = args.operation.as_deref();
    let trees: Vec<&Tree> = composition
        .trees
        .iter()
        .filter(|tree| shown(tree, wanted))
        .collect();
    if let Some(wanted) = wanted {
        explanations.retain(|explanation| explanation.operation == wanted);
        if explanations.is_empty() && trees.is_empty() {
            let mut known: Vec<&str> = spec.operations.names().chain(graph.operations()).collect();
            known.sort_unstable();
            known.dedup();
            let help = velocity_policy_lang::suggest::did_you_mean(
                wanted,
                known.iter().copied(),
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
    let findings: Vec<&Finding> = composition
        .findings
        .iter()
        .filter(|finding| {
            wanted.is_none_or(|op| {
                finding.operation == op
                    || trees.iter().any(|t| t.find(&finding.operation).is_some())
            })
        })
        .collect();
    match args.format {
        Format::Human => {
            for (i, explanation) in explanations.iter().enumerate() {
                if i > 0 {
                    let _ = writeln!(out);
                }
                let _ = write!(out, "{explanation}");
            }
            if !applied.is_empty() {
                let _ = writeln!(
                    out,
                    "\noverrides in force ({}):",
                    args.env.as_deref().unwrap_or("")
                );
                for change in &applied {
                    let _ = writeln!(
                        out,
                        "  {} {}{}: {} (compiled: {})",
                        change.keyword,
                        change
                            .name
                            .as_deref()
                            .map(|n| format!("{n} "))
                            .unwrap_or_default(),
                        change.key,
                        change.value,
                        change.replaced.as_deref().unwrap_or("the default")
                    );
                }
            }
            if !trees.is_empty() {
                let _ = writeln!(
                    out,
                    "\ncalls, from {} annotated functions in {}: [static] seen in the code; each \
                     tree uses the values a function's attribute gives over its operation's",
                    code.functions(),
                    render::plural(code.read, "source file")
                );
                for tree in &trees {
                    let _ = write!(out, "\n{tree}");
                }
            }
            if !explanations.is_empty() && code.read == 0 {
                let _ = write!(out, "{ATTRIBUTES_OVERRIDE}");
            }
            for finding in &findings {
                let _ = writeln!(err, "{}", render::human_of(&finding.renderable(&sources)));
            }
        }
        Format::Json => {
            let mut document: Vec<Value> = explanations.iter().map(to_json).collect();
            // Entry points the files do not declare (an attribute's own operation).
            for tree in &trees {
                if !document.iter().any(|d| d["operation"] == tree.entry()) {
                    document.push(json!({
                        "operation": tree.entry(),
                        "declared": "attribute",
                        "class": tree.root.class.map(|c| c.as_str()),
                    }));
                }
            }
            for entry in &mut document {
                let Some(operation) = entry["operation"].as_str().map(str::to_owned) else {
                    continue;
                };
                if let Some(tree) = trees.iter().find(|t| t.entry() == operation) {
                    entry["tree"] = tree_json(tree);
                }
                entry["findings"] = findings
                    .iter()
                    .filter(|f| f.operation == operation)
                    .map(|f| finding_json(f, &sources))
                    .collect();
            }
            let _ = writeln!(out, "{:#}", Value::from(document));
        }
    }
    Exit::Clean
}
