//! What the code says: the annotated functions of a crate's Rust sources, what their
//! attributes set, and which of them call which, read with `syn`.
//!
//! # Why here, and why from the sources
//!
//! The attribute macros see one function at a time and cannot write files, and a table their
//! expansions emitted would reach the runtime only when the function runs, never `policy
//! explain`. So `policy explain` reads the crate's sources itself, the way the macros read its
//! `.policy` files: every function under `#[critical]`, `#[resilient]`, `#[deferred]`,
//! `#[background]` or `#[isolate]` (with or without the `velocity_policy::` path), bound to the operation
//! of its name or the one `#[velocity_policy::operation("...")]` names, and every call in its body to
//! another such function, by path or by name.
//!
//! This is what the syntax shows, not what the compiler resolved: a call through a closure
//! passed in, a trait object, a function pointer or a macro is not seen (a running service
//! observes those, and the dashboard shows them); two annotated functions of one name in
//! different modules are told apart by the file that calls them when one of them is there,
//! otherwise the call goes to each. A file that does not parse is skipped and said.

use std::path::{Path, PathBuf};
use std::time::Duration;

use syn::spanned::Spanned as _;
use syn::visit::Visit;
use velocity_policy_lang::bound::{Budget, Graph, HedgeBudget, Model, RetryBudget};
use velocity_policy_lang::files::Binding;
use velocity_policy_lang::overrides::Applied;
use velocity_policy_lang::units::parse_duration;
use velocity_policy_lang::{Backoff, Loc, Sources, Spec, WorkClass};

/// The most source files read under one directory, and the largest read.
const MAX_FILES: usize = 5_000;
const MAX_FILE_LEN: u64 = 4 * 1024 * 1024;

/// One annotated function.
#[derive(Debug, Clone)]
struct Function {
    /// The function's own name.
    name: String,
    /// The operation it runs as.
    operation: String,
    /// Its class, from its attribute.
    class: WorkClass,
    isolated: bool,
    /// What its attribute sets, each with where.
    deadline: Option<(Duration, Loc)>,
    min_budget: Option<(Duration, Loc)>,
    retry: Option<Mechanism<RetryBudget>>,
    hedge: Option<Mechanism<HedgeBudget>>,
    /// Its name's place.
    loc: Loc,
    /// Which file, by index.
    file: usize,
    /// The calls of its body: the callee's last path segment, its place.
    calls: Vec<(String, Loc)>,
}

/// A mechanism an attribute names or defines inline.
#[derive(Debug, Clone)]
enum Mechanism<T> {
    Named(String, Loc),
    Inline(T),
}

/// What the sources say.
#[derive(Debug, Default)]
pub(crate) struct Code {
    functions: Vec<Function>,
    /// Files read and files skipped (with why).
    pub(crate) read: usize,
    pub(crate) skipped: Vec<String>,
}

/// The crate whose policies `path` names (the crate folder itself, its policy directory, or a
/// file in it), as the folder holding its `Cargo.toml`.
pub(crate) fn crate_of(path: &Path) -> Option<PathBuf> {
    let path = std::fs::canonicalize(path).ok()?;
    if path.join("Cargo.toml").is_file() {
        return Some(path);
    }
    let mut dir = path.parent();
    for _ in 0..3 {
        let current = dir?;
        if current.join("Cargo.toml").is_file() {
            let policies = velocity_policy_lang::files::crate_dir(current).path;
            let policies = std::fs::canonicalize(&policies).unwrap_or(policies);
            return path.starts_with(&policies).then(|| current.to_path_buf());
        }
        dir = current.parent();
    }
    None
}

/// Reads every `*.rs` file under `dirs` into `sources` and finds the annotated functions.
pub(crate) fn read(dirs: &[PathBuf], sources: &mut Sources) -> Code {
    let mut code = Code::default();
    let mut files = Vec::new();
    for dir in dirs {
        collect(dir, &mut files, &mut code.skipped);
    }
    files.sort();
    files.dedup();
    for (index, path) in files.iter().enumerate() {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(error) => {
                code.skipped
                    .push(format!("`{}` cannot be read: {error}", path.display()));
                continue;
            }
        };
        let file = match syn::parse_file(&text) {
            Ok(file) => file,
            Err(error) => {
                let at = error.span().start();
                code.skipped.push(format!(
                    "`{}:{}:{}` does not parse as Rust: {error}",
                    path.display(),
                    at.line,
                    at.column + 1
                ));
                continue;
            }
        };
        let id = sources.add(path.display().to_string(), text);
        let mut finder = Finder {
            source: id,
            file: index,
            functions: &mut code.functions,
        };
        finder.visit_file(&file);
        code.read += 1;
    }
    code
}

/// Every `*.rs` file under `dir` (not under `target/` or hidden folders), at most
/// [`MAX_FILES`], none over [`MAX_FILE_LEN`].
fn collect(dir: &Path, files: &mut Vec<PathBuf>, skipped: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.filter_map(Result::ok).collect();
    entries.sort_by_key(std::fs::DirEntry::path);
    for entry in entries {
        let path = entry.path();
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        let name = entry.file_name();
        let hidden = name.to_string_lossy().starts_with('.');
        if kind.is_dir() && !hidden && name != "target" {
            collect(&path, files, skipped);
        } else if kind.is_file() && path.extension().is_some_and(|e| e == "rs") {
            if files.len() >= MAX_FILES {
                skipped.push(format!(
                    "`{}` and the files after it: more than {MAX_FILES} source files",
                    path.display()
                ));
                return;
            }
            if entry.metadata().is_ok_and(|m| m.len() > MAX_FILE_LEN) {
                skipped.push(format!(
                    "`{}` is over {} MB",
                    path.display(),
                    MAX_FILE_LEN / 1024 / 1024
                ));
                continue;
            }
            files.push(path);
        }
    }
}

/// The attribute's name when it is one of ours: `critical`, `velocity_policy::critical`, ...
fn ours(attr: &syn::Attribute) -> Option<String> {
    let path = attr.path();
    let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
    match segments.as_slice() {
        [one] => Some(one.clone()),
        [first, last] if first == "velocity_policy" => Some(last.clone()),
        _ => None,
    }
}

fn loc_of(source: velocity_policy_lang::SourceId, span: proc_macro2::Span) -> Loc {
    let range = span.byte_range();
    Loc::span(source, range.start, range.end)
}

struct Finder<'a> {
    source: velocity_policy_lang::SourceId,
    file: usize,
    functions: &'a mut Vec<Function>,
}

impl Finder<'_> {
    fn function(&mut self, attrs: &[syn::Attribute], sig: &syn::Signature, block: &syn::Block) {
        let mut class = None;
        let mut bound_to = None;
        let mut settings = Vec::new();
        for attr in attrs {
            let Some(name) = ours(attr) else { continue };
            match name.as_str() {
                "critical" | "resilient" => class = Some((WorkClass::Critical, false)),
                "deferred" => class = Some((WorkClass::Deferred, false)),
                "background" => class = Some((WorkClass::Background, false)),
                "isolate" => class = Some((WorkClass::Critical, true)),
                "operation" => {
                    if let Ok(lit) = attr.parse_args::<syn::LitStr>() {
                        bound_to = Some(lit.value());
                    }
                    continue;
                }
                _ => continue,
            }
            settings.push(attr);
        }
        let Some((class, isolated)) = class else {
            return;
        };
        let name = sig.ident.to_string();
        let mut function = Function {
            operation: bound_to.unwrap_or_else(|| name.clone()),
            name,
            class,
            isolated,
            deadline: None,
            min_budget: None,
            retry: None,
            hedge: None,
            loc: loc_of(self.source, sig.ident.span()),
            file: self.file,
            calls: Vec::new(),
        };
        for attr in settings {
            if matches!(attr.meta, syn::Meta::List(_)) {
                // A malformed attribute is the compiler's to report: what parses is kept.
                let _ = attr.parse_nested_meta(|meta| self.setting(&mut function, meta));
            }
        }
        let mut calls = Calls {
            source: self.source,
            calls: &mut function.calls,
        };
        calls.visit_block(block);
        self.functions.push(function);
    }

    fn duration(&self, meta: &syn::meta::ParseNestedMeta<'_>) -> syn::Result<(Duration, Loc)> {
        let lit: syn::LitStr = meta.value()?.parse()?;
        let value = parse_duration(&lit.value()).map_err(|e| meta.error(e))?;
        Ok((value, loc_of(self.source, lit.span())))
    }

    fn setting(
        &self,
        function: &mut Function,
        meta: syn::meta::ParseNestedMeta<'_>,
    ) -> syn::Result<()> {
        let key = meta
            .path
            .get_ident()
            .map(ToString::to_string)
            .unwrap_or_default();
        let named = meta.input.peek(syn::Token![=]);
        match key.as_str() {
            "deadline" => function.deadline = Some(self.duration(&meta)?),
            "min_budget" => function.min_budget = Some(self.duration(&meta)?),
            "retry" if named => {
                let lit: syn::LitStr = meta.value()?.parse()?;
                function.retry = Some(Mechanism::Named(
                    lit.value(),
                    loc_of(self.source, lit.span()),
                ));
            }
            "retry" => {
                let at = loc_of(self.source, meta.path.span());
                let (mut attempts, mut base, mut cap, mut timeout) =
                    (3, Duration::from_millis(50), Duration::from_secs(1), None);
                meta.parse_nested_meta(|inner| {
                    match inner.path.get_ident().map(ToString::to_string).as_deref() {
                        Some("attempts") => {
                            attempts = inner.value()?.parse::<syn::LitInt>()?.base10_parse()?;
                        }
                        Some("base") => base = self.duration(&inner)?.0,
                        Some("cap") => cap = self.duration(&inner)?.0,
                        Some("attempt_timeout") => timeout = Some(self.duration(&inner)?.0),
                        _ => skip(inner)?,
                    }
                    Ok(())
                })?;
                let backoff = Backoff::FullJitter { base, cap };
                function.retry = Some(Mechanism::Inline(
                    RetryBudget::new(
                        format!("{}'s retry", function.name),
                        attempts,
                        timeout,
                        (1..attempts).map(|k| backoff.max_delay_after(k)).collect(),
                    )
                    .at(at, at),
                ));
            }
            "hedge" if named => {
                let lit: syn::LitStr = meta.value()?.parse()?;
                function.hedge = Some(Mechanism::Named(
                    lit.value(),
                    loc_of(self.source, lit.span()),
                ));
            }
            "hedge" => {
                let (mut max, mut after) = (2, None);
                meta.parse_nested_meta(|inner| {
                    match inner.path.get_ident().map(ToString::to_string).as_deref() {
                        Some("max") => {
                            max = inner.value()?.parse::<syn::LitInt>()?.base10_parse()?
                        }
                        Some("after") => {
                            let lit: syn::LitStr = inner.value()?.parse()?;
                            after = parse_duration(&lit.value()).ok();
                        }
                        _ => skip(inner)?,
                    }
                    Ok(())
                })?;
                function.hedge = Some(Mechanism::Inline(HedgeBudget::new(
                    format!("{}'s hedge", function.name),
                    max,
                    after,
                )));
            }
            _ => skip(meta)?,
        }
        Ok(())
    }
}

/// Consumes a setting this reader does not need: `key`, `key = value` or `key(...)`.
fn skip(meta: syn::meta::ParseNestedMeta<'_>) -> syn::Result<()> {
    if meta.input.peek(syn::Token![=]) {
        meta.value()?.parse::<syn::Expr>()?;
    } else if meta.input.peek(syn::token::Paren) {
        meta.parse_nested_meta(skip)?;
    }
    Ok(())
}

impl<'ast> Visit<'ast> for Finder<'_> {
    fn visit_item_fn(&mut self, item: &'ast syn::ItemFn) {
        self.function(&item.attrs, &item.sig, &item.block);
        syn::visit::visit_item_fn(self, item);
    }

    fn visit_impl_item_fn(&mut self, item: &'ast syn::ImplItemFn) {
        self.function(&item.attrs, &item.sig, &item.block);
        syn::visit::visit_impl_item_fn(self, item);
    }
}

/// The calls of one body, in the order they run (arguments before the call).
struct Calls<'a> {
    source: velocity_policy_lang::SourceId,
    calls: &'a mut Vec<(String, Loc)>,
}

impl<'ast> Visit<'ast> for Calls<'_> {
    fn visit_expr_call(&mut self, call: &'ast syn::ExprCall) {
        syn::visit::visit_expr_call(self, call);
        if let syn::Expr::Path(path) = &*call.func
            && let Some(last) = path.path.segments.last()
        {
            self.calls.push((
                last.ident.to_string(),
                loc_of(self.source, last.ident.span()),
            ));
        }
    }

    fn visit_expr_method_call(&mut self, call: &'ast syn::ExprMethodCall) {
        syn::visit::visit_expr_method_call(self, call);
        self.calls.push((
            call.method.to_string(),
            loc_of(self.source, call.method.span()),
        ));
    }

    // A function declared inside a body is a function of its own, not part of this one.
    fn visit_item(&mut self, _item: &'ast syn::Item) {}
}

impl Code {
    /// How many annotated functions were found.
    pub(crate) fn functions(&self) -> usize {
        self.functions.len()
    }

    /// Every annotated function's operation and numbers added to `model` (over the file's
    /// operation it binds to: each value its attribute gives replaces the file's, unless an
    /// override in `applied` retuned the operation), and every call between them in `graph`.
    pub(crate) fn lower(
        &self,
        spec: &Spec,
        binding: Binding,
        applied: &[Applied],
        model: &mut Model,
        graph: &mut Graph,
    ) {
        // As the runtime applies them: an override that touches a file's operation (or the
        // shedding thresholds) retunes its deadline and minimum budget whole, to the merged
        // files' values, over what the attribute gave.
        let retuned = |op: &str| {
            spec.operations.get(op).is_some()
                && applied.iter().any(|a| {
                    (a.keyword == "operation" && a.name.as_deref() == Some(op))
                        || a.keyword == "shedding"
                })
        };
        for function in &self.functions {
            let bound = spec
                .operations
                .get(&function.operation)
                .filter(|_| binding == Binding::ByName || function.operation != function.name);
            let mut budget = match bound {
                Some(operation) => Budget::of(spec, operation),
                None => Budget::new(function.operation.clone(), function.class, function.loc),
            };
            budget.isolated |= function.isolated;
            if let Some((deadline, loc)) = function.deadline
                && !retuned(&function.operation)
            {
                budget = budget.deadline(deadline, loc);
            }
            if let Some((min_budget, loc)) = function.min_budget
                && !retuned(&function.operation)
            {
                budget = budget.min_budget(min_budget, loc);
            }
            match &function.retry {
                Some(Mechanism::Inline(retry)) => budget = budget.retry(retry.clone()),
                Some(Mechanism::Named(name, loc)) => {
                    if let Some(retry) = spec.retries.get(name) {
                        let config = retry.config;
                        budget = budget.retry(
                            RetryBudget::new(
                                name.clone(),
                                config.attempts,
                                config.attempt_timeout,
                                (1..config.attempts)
                                    .map(|k| config.backoff.max_delay_after(k))
                                    .collect(),
                            )
                            .at(*loc, retry.at.attempts),
                        );
                    }
                }
                None => {}
            }
            match &function.hedge {
                Some(Mechanism::Inline(hedge)) => budget = budget.hedge(hedge.clone()),
                Some(Mechanism::Named(name, _)) => {
                    if let Some(hedge) = spec.hedges.get(name) {
                        budget = budget.hedge(HedgeBudget::new(
                            name.clone(),
                            hedge.config.max,
                            hedge.config.after.fixed(),
                        ));
                    }
                }
                None => {}
            }
            model.insert(budget);
            graph.add_operation(&function.operation);
        }
        for function in &self.functions {
            let mut order = 0;
            for (callee, site) in &function.calls {
                let candidates: Vec<&Function> = self
                    .functions
                    .iter()
                    .filter(|f| &f.name == callee)
                    .collect();
                let same_file: Vec<&&Function> = candidates
                    .iter()
                    .filter(|f| f.file == function.file)
                    .collect();
                let targets: Vec<&Function> = if same_file.len() == 1 {
                    same_file.into_iter().copied().collect()
                } else {
                    candidates
                };
                if targets.is_empty() {
                    continue;
                }
                for target in targets {
                    graph.add_static(&function.operation, &target.operation, order, Some(*site));
                }
                order += 1;
            }
        }
    }
}
