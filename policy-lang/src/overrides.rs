//! Overrides: the numbers of a compiled policy, replaced at run time by the files of one
//! environment (`policies/production/*.policy`), checked by the same validator.
//!
//! The compiled policy stays the baseline and keeps every structural rule: which operations
//! are idempotent, their classes, which mechanisms an operation uses, its fallback, how a
//! breaker is shared. An override file uses the language's own stanzas, naming what it tunes,
//! and sets only numbers ([`OVERRIDABLE`]): each of its settings replaces the compiled
//! stanza's setting of that key (or adds it), then the merged policy is lowered and validated
//! as one. So an override that makes an unsafe combination (an `attempt_timeout` above its
//! operation's deadline, a `min_budget` above the deadline, `shed_at` on critical work, zero
//! attempts) is the diagnostic `policy check` gives for the same policy written out whole,
//! labelled at the override's own file, line and column. An override of a name the compiled
//! policy does not declare is `policy::unknown-name`; one of a setting that is not a number
//! is `policy::not-overridable`.
//!
//! ```
//! use policy_lang::overrides::{PolicyFile, overridden};
//!
//! let compiled = [PolicyFile::new(
//!     "policies/search.policy",
//!     "retry transient { attempts = 3; backoff = full_jitter(base = 50ms, cap = 1s); attempt_timeout = 500ms }
//! operation search: critical, idempotent { retry = transient; deadline = 2s }",
//! )];
//! // Production runs with a shorter deadline: valid.
//! let production = [PolicyFile::new(
//!     "policies/production/search.policy",
//!     "operation search { deadline = 800ms }",
//! )];
//! let merged = overridden(&compiled, &production);
//! assert!(!merged.check().has_errors());
//! assert_eq!(merged.applied[0].key, "deadline");
//!
//! // Shorter than an attempt may take: refused, at the override's line and column.
//! let unsafe_ = [PolicyFile::new(
//!     "policies/production/search.policy",
//!     "operation search { deadline = 300ms }",
//! )];
//! let merged = overridden(&compiled, &unsafe_);
//! let report = merged.check();
//! assert_eq!(report.errors[0].code(), "policy::attempt-timeout-exceeds-deadline");
//! assert!(merged.set.render(&report.errors[0]).contains("policies/production/search.policy:1:31"));
//! ```

use std::io;
use std::path::{Path, PathBuf};

use crate::ast::{Ident, Stanza, Statement, StatementKind, Term};
use crate::diagnostic::{Diagnostic, Kind};
use crate::diagnostic::{Label, Report};
use crate::source::{Loc, SourceId, Sources};
use crate::{PolicySet, parse, suggest};

/// What an override may set, per stanza: numbers only, and only those the runtime can change
/// under a running service. A phrase's key is its first word (`deferred at load 0.5` is
/// `deferred`). The request's deadline belongs to the `DeadlineLayer` the service builds, and a
/// rate limit's rate and a retry's allowance to state built once; they stay compiled.
pub const OVERRIDABLE: &[(&str, &[&str])] = &[
    ("breaker", &["open_after", "cooldown", "max_retry_after"]),
    ("bulkhead", &["max_concurrent"]),
    ("retry", &["attempts", "backoff", "attempt_timeout"]),
    ("shedding", &["deferred", "background"]),
    ("operation", &["deadline", "min_budget", "shed_at"]),
    // A drill on or off per environment, and its faults' rates (the runtime's `chaos`).
    (
        "chaos",
        &[
            "enabled",
            "latency",
            "error",
            "refuse",
            "status",
            "instances",
        ],
    ),
];

/// One policy file's name (as diagnostics print it) and text.
#[derive(Debug, Clone)]
pub struct PolicyFile {
    /// The name diagnostics print: its path.
    pub name: String,
    /// Its bytes.
    pub bytes: Vec<u8>,
}

impl PolicyFile {
    /// A file named `name` holding `text`.
    pub fn new(name: impl Into<String>, text: impl Into<Vec<u8>>) -> Self {
        Self {
            name: name.into(),
            bytes: text.into(),
        }
    }

    /// Every `*.policy` file of `dir` (not recursive), in name order, each named by its path.
    /// A directory that does not exist has none.
    pub fn read_dir(dir: &Path) -> io::Result<Vec<PolicyFile>> {
        let mut paths: Vec<PathBuf> = Vec::new();
        let entries = match std::fs::read_dir(dir) {
            Ok(entries) => entries,
            Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(error) => return Err(error),
        };
        for entry in entries {
            let path = entry?.path();
            if path.extension().is_some_and(|ext| ext == "policy") && path.is_file() {
                paths.push(path);
            }
        }
        paths.sort();
        paths
            .into_iter()
            .map(|path| PolicyFile::read(&path))
            .collect()
    }

    /// Reads one file, named by its path: only a regular file, and no more of it than
    /// [`MAX_SOURCE_LEN`](crate::MAX_SOURCE_LEN) and a byte (a larger one is a
    /// `policy::too-large` diagnostic when merged), as [`PolicySet::load_file`] reads.
    pub fn read(path: &Path) -> io::Result<PolicyFile> {
        let read = crate::source::read_file(path, crate::MAX_SOURCE_LEN)?;
        Ok(PolicyFile {
            name: path.display().to_string(),
            bytes: read.bytes,
        })
    }
}

/// One setting an override file changed.
#[derive(Debug, Clone, PartialEq)]
pub struct Applied {
    /// The stanza's keyword: `operation`, `breaker`, ...
    pub keyword: String,
    /// The stanza's name (`None` for `request` and `shedding`).
    pub name: Option<String>,
    /// The setting's key (a phrase's first word, or `rate`).
    pub key: String,
    /// The value as written, in canonical text (`800ms`, `5 failures within 30s`).
    pub value: String,
    /// The compiled value it replaces, in canonical text; `None` when the compiled stanza
    /// left the setting to its default.
    pub replaced: Option<String>,
    /// Where the override file sets it.
    pub loc: Loc,
}

/// The compiled policy with the overrides merged into it: check it with
/// [`Overridden::check`], render with [`PolicySet::render`].
#[derive(Debug, Clone)]
pub struct Overridden {
    /// The merged policy, its diagnostics (the override files' own included).
    pub set: PolicySet,
    /// What the overrides changed, in file order.
    pub applied: Vec<Applied>,
    /// The override files, in the set's sources.
    overrides: Vec<SourceId>,
}

impl Overridden {
    /// Every problem of the merged policy, as [`PolicySet::check`] finds them, each labelled
    /// first at the override it involves, if any: the file, line and column an operator
    /// changed come first, the compiled setting it clashes with as a secondary label.
    #[must_use]
    pub fn check(&self) -> Report {
        let in_override = |label: &Label| match label.loc {
            Loc::Source { source, .. } => self.overrides.contains(&source),
            Loc::External(_) => false,
        };
        let report = self.set.check();
        Report::from_diagnostics(report.all().into_iter().cloned().map(|mut diagnostic| {
            if let Some(at) = diagnostic.labels.iter().position(in_override) {
                let label = diagnostic.labels.remove(at);
                diagnostic.labels.insert(0, label);
            }
            diagnostic
        }))
    }
}

/// The key of a statement: its setting's key, a phrase's first word, or `rate`.
fn statement_key(statement: &Statement) -> Option<(&str, Loc)> {
    match &statement.kind {
        StatementKind::Setting { key, .. } => Some((&key.text, key.loc)),
        StatementKind::Phrase(value) => match value.terms.first()? {
            Term::Word(word) => Some((&word.text, word.loc)),
            Term::Quantity(quantity) => Some(("rate", quantity.loc)),
            _ => None,
        },
    }
}

fn same_name(a: &Option<Ident>, b: &Option<Ident>) -> bool {
    a.as_ref().map(|ident| &ident.text) == b.as_ref().map(|ident| &ident.text)
}

/// `compiled` with `overrides` merged into it (see the [module](self)).
pub fn overridden(compiled: &[PolicyFile], overrides: &[PolicyFile]) -> Overridden {
    let mut sources = Sources::new();
    let mut diagnostics = Vec::new();
    let mut files = Vec::new();
    for file in compiled {
        let parsed = parse::parse(&mut sources, file.name.clone(), &file.bytes);
        diagnostics.extend(parsed.diagnostics);
        files.push(parsed.file);
    }
    let mut applied = Vec::new();
    let mut override_sources = Vec::new();
    for file in overrides {
        let parsed = parse::parse(&mut sources, file.name.clone(), &file.bytes);
        override_sources.push(parsed.file.source);
        diagnostics.extend(parsed.diagnostics);
        for stanza in &parsed.file.stanzas {
            merge(&mut files, stanza, &mut diagnostics, &mut applied);
        }
    }
    let mut set = PolicySet::with_sources(sources, diagnostics);
    for file in &files {
        set.add_file(file);
    }
    Overridden {
        set,
        applied,
        overrides: override_sources,
    }
}

/// Reads `compiled_dir` and `overrides_dir` (each's `*.policy`, not recursive) and merges
/// them: [`overridden`]. A missing overrides directory is no override.
pub fn load_overridden(compiled_dir: &Path, overrides_dir: &Path) -> io::Result<Overridden> {
    let compiled = PolicyFile::read_dir(compiled_dir)?;
    let overrides = PolicyFile::read_dir(overrides_dir)?;
    Ok(overridden(&compiled, &overrides))
}

/// Merges one override stanza into the compiled stanza of the same keyword and name.
fn merge(
    files: &mut [crate::ast::File],
    stanza: &Stanza,
    diagnostics: &mut Vec<Diagnostic>,
    applied: &mut Vec<Applied>,
) {
    let keyword = stanza.keyword.text.as_str();
    let Some((_, keys)) = OVERRIDABLE.iter().find(|(known, _)| *known == keyword) else {
        diagnostics.push(Diagnostic::new(
            Kind::NotOverridable {
                what: keyword.to_owned(),
                help: format!(
                    "an override tunes the numbers of {}",
                    OVERRIDABLE
                        .iter()
                        .map(|(keyword, _)| format!("`{keyword}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            },
            stanza.keyword.loc,
            "not a stanza an override may change",
        ));
        return;
    };
    let target = files
        .iter_mut()
        .flat_map(|file| file.stanzas.iter_mut())
        .find(|compiled| {
            compiled.keyword.text == keyword && same_name(&compiled.name, &stanza.name)
        });
    let Some(target) = target else {
        let name = stanza.name.as_ref().map(|name| name.text.clone());
        let declared: Vec<String> = files
            .iter()
            .flat_map(|file| file.stanzas.iter())
            .filter(|compiled| compiled.keyword.text == keyword)
            .filter_map(|compiled| compiled.name.as_ref().map(|name| name.text.clone()))
            .collect();
        let help = match &name {
            Some(name) => suggest::closest(name, declared.iter().map(String::as_str)).map_or_else(
                || {
                    format!(
                        "an override tunes a {keyword} the compiled policy declares: declare `{keyword} {name}` in the crate's policies first"
                    )
                },
                |closest| format!("did you mean `{closest}`?"),
            ),
            None => format!(
                "an override tunes the compiled `{keyword}` stanza, and the compiled policy has none: declare it in the crate's policies first"
            ),
        };
        diagnostics.push(Diagnostic::new(
            Kind::UnknownName {
                kind: keyword.to_owned(),
                name: name.unwrap_or_else(|| keyword.to_owned()),
                help,
            },
            stanza
                .name
                .as_ref()
                .map_or(stanza.keyword.loc, |name| name.loc),
            "not in the compiled policy",
        ));
        return;
    };
    let allowed = || {
        format!(
            "an override of a `{keyword}` may set {}; everything else stays as compiled",
            keys.iter()
                .map(|key| format!("`{key}`"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    for tag in &stanza.tags {
        diagnostics.push(Diagnostic::new(
            Kind::NotOverridable {
                what: tag.text.clone(),
                help: format!(
                    "a class or flag is structural, compiled in: drop `: {}`",
                    tag.text
                ),
            },
            tag.loc,
            "decided at compile time",
        ));
    }
    for statement in &stanza.statements {
        let Some((key, key_loc)) = statement_key(statement) else {
            continue;
        };
        if !keys.contains(&key) {
            diagnostics.push(Diagnostic::new(
                Kind::NotOverridable {
                    what: key.to_owned(),
                    help: allowed(),
                },
                key_loc,
                "decided at compile time",
            ));
            continue;
        }
        let value = match &statement.kind {
            StatementKind::Setting { value, .. } | StatementKind::Phrase(value) => {
                value.to_string()
            }
        };
        let compiled = target
            .statements
            .iter_mut()
            .find(|compiled| statement_key(compiled).is_some_and(|(known, _)| known == key));
        let replaced = compiled.as_ref().map(|compiled| match &compiled.kind {
            StatementKind::Setting { value, .. } | StatementKind::Phrase(value) => {
                value.to_string()
            }
        });
        match compiled {
            Some(compiled) => *compiled = statement.clone(),
            None => target.statements.push(statement.clone()),
        }
        applied.push(Applied {
            keyword: keyword.to_owned(),
            name: stanza.name.as_ref().map(|name| name.text.clone()),
            key: key.to_owned(),
            value,
            replaced,
            loc: statement.loc,
        });
    }
}
