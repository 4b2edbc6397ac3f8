//! Overrides: the numbers of a compiled policy, replaced at run time by the files of one
//! environment (`policies/production/*.policy`), checked by the same validator.
//!
//! The compiled policy stays the baseline and keeps every structural rule: which operations
//! are idempotent, their classes, which mechanisms an operation uses, its fallback, how a
//! breaker is shared. An override file uses the language's own stanzas, naming what it tunes,
//! and sets only numbers ([`overridable`]): each of its settings replaces the compiled
//! stanza's setting of that key (or adds it), then the merged policy is lowered and validated
//! as one. So an override that makes an unsafe combination (an `attempt_timeout` above its
//! operation's deadline, a `min_budget` above the deadline, `shed_at` on critical work, zero
//! attempts) is the diagnostic `policy check` gives for the same policy written out whole,
//! labelled at the override's own file, line and column. An override of a name the compiled
//! policy does not declare is `policy::unknown-name`; one of a setting that is not a number
//! is `policy::not-overridable`.
//!
//! # The envelope
//!
//! An override set comes from outside the binary (a file of the environment, or the fleet's
//! set through Redis), so it is input, not truth: it moves a compiled number only within an
//! envelope around it, by default **a quarter to four times the compiled value**, and for
//! `cooldown` and `max_retry_after` (how long a breaker stays open) **a quarter of it up to
//! the compiled value, never above**. So `deadline = 1ms`, `max_concurrent = 1` on a bulkhead
//! of 8, `cooldown = 1000h` or `max_retry_after = 8760h` are refused, each with
//! `policy::override-outside-envelope`, the range it may set and how to widen it; so is an
//! override of a number the compiled policy does not set (nothing bounds it), and one that
//! changes a rule's kind (`N failures within D` into a ratio). Where both apply, an override
//! the validator refuses is reported once, by the validator. Counts are rounded inward (a
//! quarter of 3 attempts is 1), a number left to its default is measured from the default in
//! force (`max_retry_after`'s 5m, the shedding thresholds for `shed_at`), and an operation's
//! `deadline` from the deadline that governs it (its own, or the request's).
//!
//! The crate widens an envelope in its compiled policy, never in an override, with an
//! `envelope` stanza: one line per stanza or setting, the shares in percent, the lower at most
//! 100% and the upper at least 100%. A line for a setting wins over one for its stanza.
//!
//! ```text
//! envelope {
//!     operation search deadline within 10% to 400%
//!     breaker payments cooldown within 50% to 300%
//!     bulkhead search within 50% to 200%
//! }
//! ```
//!
//! The same envelope holds for every set, the environment's files and the fleet's: one
//! validator. The fleet's set ([`Origin::Fleet`]) may not name a `chaos` stanza at all: a drill
//! is armed and switched on each instance, never from Redis.
//!
//! ```
//! use velocity_policy_lang::overrides::{PolicyFile, overridden};
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

use std::collections::BTreeSet;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::ast::{Ident, Stanza, Statement, StatementKind, Term};
use crate::diagnostic::{Diagnostic, Kind};
use crate::diagnostic::{Label, Report};
use crate::source::{Loc, SourceId, Sources};
use crate::spec::{EnvelopeSpec, MechanismSpec, OpenAfter, Setting, Spec, WorkClass};
use crate::units::format_duration;

pub use crate::spec::overridable;
use crate::{PolicySet, parse, suggest};

/// Where a set of overrides comes from. Both are checked by the same validator, within the
/// same envelope; the fleet's set may not touch a drill.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Origin {
    /// The files of the running environment (`policies/<env>/*.policy`).
    Files,
    /// The set published to the fleet through the store: a drill is switched on each instance,
    /// never from it.
    Fleet,
}

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
    /// The compiled policy alone: what each override moves a number from.
    baseline: Spec,
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
        // One mistake, one error: an override the validator already refuses is not also
        // reported as outside its envelope.
        let refused: Vec<Loc> = report
            .errors
            .iter()
            .flat_map(|error| error.labels.iter().map(|label| label.loc))
            .collect();
        let envelope = self
            .envelope()
            .into_iter()
            .filter(|(at, _)| !refused.iter().any(|loc| overlaps(*loc, *at)))
            .map(|(_, diagnostic)| diagnostic);
        let all = report.all().into_iter().cloned().chain(envelope);
        Report::from_diagnostics(all.map(|mut diagnostic| {
            if let Some(at) = diagnostic.labels.iter().position(in_override) {
                let label = diagnostic.labels.remove(at);
                diagnostic.labels.insert(0, label);
            }
            diagnostic
        }))
    }

    /// Each override outside its envelope (see the [module](self)), with the statement it is
    /// in. The last override of a setting is the one in force, and the one checked.
    fn envelope(&self) -> Vec<(Loc, Diagnostic)> {
        let merged = self.set.spec();
        let mut seen = BTreeSet::new();
        let mut out = Vec::new();
        for applied in self.applied.iter().rev() {
            let id = (&applied.keyword, &applied.name, &applied.key);
            if applied.keyword == "chaos" || !seen.insert(id) {
                continue;
            }
            let name = applied.name.as_deref();
            let Some(now) = numbers(merged, &applied.keyword, name, &applied.key) else {
                // Not lowered: the override's own error says why.
                continue;
            };
            let stanza = match name {
                Some(name) => format!("{} {name}", applied.keyword),
                None => applied.keyword.clone(),
            };
            let setting = if applied.value.starts_with(applied.key.as_str()) {
                applied.value.clone()
            } else {
                format!("{} = {}", applied.key, applied.value)
            };
            let Some(compiled) = numbers(&self.baseline, &applied.keyword, name, &applied.key)
            else {
                out.push((
                    applied.loc,
                    Diagnostic::new(
                        Kind::OverrideNotCompiled {
                            setting,
                            stanza: stanza.clone(),
                            help: format!(
                                "an override moves a number the crate's policies set, within its envelope: set `{}` in `{stanza}` there first",
                                applied.key
                            ),
                        },
                        applied.loc,
                        "nothing compiled to move from",
                    ),
                ));
                continue;
            };
            let (low, high) = self.bounds(&applied.keyword, name, &applied.key);
            let widen = format!(
                "to allow more, widen the envelope in the crate's policies: `envelope {{ {stanza} {} within 10% to 400% }}`",
                applied.key
            );
            let default_help = if (low, high) == default_bounds(&applied.keyword, &applied.key) {
                if high <= 1.0 {
                    format!(
                        "an override may set `{}` from a quarter of its compiled value up to that value, never above it (a longer one keeps the dependency refused longer); {widen}",
                        applied.key
                    )
                } else {
                    format!(
                        "an override moves a compiled number within a quarter to four times it; {widen}"
                    )
                }
            } else {
                format!(
                    "the crate's envelope lets an override set {} to {} of the compiled value; {widen}",
                    percent(low),
                    percent(high)
                )
            };
            if compiled.len() != now.len() || compiled.iter().zip(&now).any(|(a, b)| a.0 != b.0) {
                out.push((
                    applied.loc,
                    Diagnostic::new(
                        Kind::OverrideOutsideEnvelope {
                            setting,
                            stanza,
                            range: "only the numbers of the compiled rule, not another kind of rule".to_owned(),
                            help: "an override moves the numbers of the compiled rule: keep its shape, or change it in the crate's policies".to_owned(),
                        },
                        applied.loc,
                        "another kind of rule",
                    ),
                ));
                continue;
            }
            let several = now.len() > 1;
            if let Some((label, compiled, _)) = compiled
                .iter()
                .zip(&now)
                .map(|((label, compiled), (_, now))| (*label, *compiled, *now))
                .find(|(_, compiled, now)| !compiled.admits(*now, low, high))
            {
                let range = format!(
                    "{}{} to {}",
                    if several {
                        format!("its {label} ")
                    } else {
                        String::new()
                    },
                    compiled.bound(low, false),
                    compiled.bound(high, true)
                );
                out.push((
                    applied.loc,
                    Diagnostic::new(
                        Kind::OverrideOutsideEnvelope {
                            setting,
                            stanza,
                            range,
                            help: default_help,
                        },
                        applied.loc,
                        format!("compiled {}", compiled.text()),
                    ),
                ));
            }
        }
        out
    }

    /// The shares of the compiled value an override of `key` may set: the crate's
    /// `envelope` line for that setting, else for its stanza, else the default.
    fn bounds(&self, keyword: &str, name: Option<&str>, key: &str) -> (f64, f64) {
        let of_stanza = |envelope: &&EnvelopeSpec| {
            envelope.keyword.value == keyword
                && envelope.name.as_ref().map(|name| name.value.as_str()) == name
        };
        let envelopes = &self.baseline.envelopes;
        envelopes
            .iter()
            .rev()
            .filter(of_stanza)
            .find(|envelope| envelope.key.as_ref().is_some_and(|k| k.value == key))
            .or_else(|| {
                envelopes
                    .iter()
                    .rev()
                    .filter(of_stanza)
                    .find(|envelope| envelope.key.is_none())
            })
            .map_or_else(
                || default_bounds(keyword, key),
                |envelope| (envelope.low, envelope.high),
            )
    }
}

/// A quarter to four times the compiled value; at most the compiled value for what keeps a
/// breaker open.
fn default_bounds(keyword: &str, key: &str) -> (f64, f64) {
    if EnvelopeSpec::at_most_compiled(keyword, key) {
        (EnvelopeSpec::DEFAULT_LOW, 1.0)
    } else {
        (EnvelopeSpec::DEFAULT_LOW, EnvelopeSpec::DEFAULT_HIGH)
    }
}

fn percent(share: f64) -> String {
    format!("{}%", trim(share * 100.0))
}

fn trim(n: f64) -> String {
    let text = format!("{n:.3}");
    text.trim_end_matches('0').trim_end_matches('.').to_owned()
}

/// Whether two locations in the same file overlap.
fn overlaps(a: Loc, b: Loc) -> bool {
    match (a, b) {
        (
            Loc::Source { source, start, end },
            Loc::Source {
                source: other,
                start: other_start,
                end: other_end,
            },
        ) => source == other && start < other_end && other_start < end,
        _ => false,
    }
}

/// One number of a setting, of its kind.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Number {
    Duration(Duration),
    Count(u32),
    Share(f64),
}

impl Number {
    fn value(self) -> f64 {
        match self {
            Number::Duration(d) => d.as_secs_f64(),
            Number::Count(n) => f64::from(n),
            Number::Share(share) => share,
        }
    }

    /// Whether `now` is within `low` to `high` times this compiled number (whole counts: the
    /// nearest whole numbers inside).
    fn admits(self, now: Number, low: f64, high: f64) -> bool {
        let (compiled, now) = (self.value(), now.value());
        let (lo, hi) = match self {
            Number::Count(_) => ((compiled * low).ceil(), (compiled * high).floor()),
            _ => (compiled * low, compiled * high),
        };
        let slack = 1e-9 * compiled.abs().max(1.0);
        now >= lo - slack && now <= hi + slack
    }

    /// The text of `share` times this number, rounded inward for a count.
    fn bound(self, share: f64, upper: bool) -> String {
        let scaled = self.value() * share;
        match self {
            Number::Duration(_) => Duration::try_from_secs_f64(scaled)
                .map_or_else(|_| "forever".to_owned(), |d| format_duration(round_ms(d))),
            Number::Count(_) => {
                let whole = if upper { scaled.floor() } else { scaled.ceil() };
                trim(whole)
            }
            Number::Share(_) => trim(scaled),
        }
    }

    fn text(self) -> String {
        match self {
            Number::Duration(d) => format_duration(d),
            Number::Count(n) => n.to_string(),
            Number::Share(share) => trim(share),
        }
    }
}

/// To the millisecond, as bounds are printed.
fn round_ms(d: Duration) -> Duration {
    let ms = (d.as_secs_f64() * 1000.0).round();
    if ms >= 1.0 {
        Duration::from_millis(ms as u64)
    } else {
        d
    }
}

/// The numbers of `keyword name`'s `key` in `spec`, each named; `None` when the spec does not
/// set it (or has no such stanza).
fn numbers(
    spec: &Spec,
    keyword: &str,
    name: Option<&str>,
    key: &str,
) -> Option<Vec<(&'static str, Number)>> {
    let name = name.unwrap_or_default();
    let duration = |label, d: Duration| vec![(label, Number::Duration(d))];
    Some(match (keyword, key) {
        ("breaker", _) => {
            let breaker = spec.breakers.get(name)?;
            match key {
                "open_after" => match breaker.config.open_after {
                    OpenAfter::Failures { count, window } => vec![
                        ("failures", Number::Count(count)),
                        ("window", Number::Duration(window)),
                    ],
                    OpenAfter::FailureRatio {
                        ratio,
                        min_calls,
                        window,
                    } => vec![
                        ("ratio", Number::Share(ratio)),
                        ("min_calls", Number::Count(min_calls)),
                        ("window", Number::Duration(window)),
                    ],
                    _ => return None,
                },
                "cooldown" => duration("cooldown", breaker.config.cooldown),
                _ => in_table(breaker, key)?,
            }
        }
        ("bulkhead", _) => {
            let bulkhead = spec.bulkheads.get(name)?;
            match key {
                "max_concurrent" => {
                    if bulkhead.config.adaptive.is_some() {
                        return None;
                    }
                    vec![(
                        "max_concurrent",
                        Number::Count(bulkhead.max_concurrent().value),
                    )]
                }
                _ => in_table(bulkhead, key)?,
            }
        }
        ("retry", _) => {
            let retry = spec.retries.get(name)?;
            match key {
                "attempts" => vec![("attempts", Number::Count(retry.config.attempts))],
                "backoff" => vec![
                    ("base", Number::Duration(retry.config.backoff.base())),
                    ("cap", Number::Duration(retry.config.backoff.cap())),
                ],
                _ => in_table(retry, key)?,
            }
        }
        ("shedding", "deferred") => vec![("deferred", Number::Share(spec.shedding_thresholds().0))],
        ("shedding", "background") => {
            vec![("background", Number::Share(spec.shedding_thresholds().1))]
        }
        ("operation", _) => {
            let operation = spec.operations.get(name)?;
            match key {
                "deadline" => duration("deadline", spec.governing_deadline(operation)?.value),
                "min_budget" => duration("min_budget", operation.min_budget.as_ref()?.value),
                "shed_at" => {
                    let (deferred, background) = spec.shedding_thresholds();
                    let share = match (operation.shed_at.as_ref(), operation.class.value) {
                        (Some(shed_at), _) => shed_at.value,
                        (None, WorkClass::Deferred) => deferred,
                        (None, WorkClass::Background) => background,
                        (None, _) => return None,
                    };
                    vec![("shed_at", Number::Share(share))]
                }
                _ => return None,
            }
        }
        _ => return None,
    })
}

/// The number in force of `key`, a row of the mechanism's table; `None` when the table has no
/// such row or nothing is in force (an attempt timeout not set).
fn in_table<S: MechanismSpec>(mechanism: &S, key: &str) -> Option<Vec<(&'static str, Number)>> {
    let setting = Setting::find(S::SETTINGS, key)?;
    let number = match setting.get(mechanism.config())? {
        crate::spec::Number::Duration(d) => Number::Duration(d),
        crate::spec::Number::Count(n) => Number::Count(n),
        crate::spec::Number::Share(share) => Number::Share(share),
    };
    Some(vec![(setting.key, number)])
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

/// `compiled` with `overrides` (the files of the running environment) merged into it (see
/// the [module](self)).
pub fn overridden(compiled: &[PolicyFile], overrides: &[PolicyFile]) -> Overridden {
    overridden_from(compiled, overrides, Origin::Files)
}

/// `compiled` with `overrides` from `origin` merged into it: as [`overridden`], and the
/// fleet's set may not name a `chaos` stanza.
pub fn overridden_from(
    compiled: &[PolicyFile],
    overrides: &[PolicyFile],
    origin: Origin,
) -> Overridden {
    let mut sources = Sources::new();
    let mut diagnostics = Vec::new();
    let mut files = Vec::new();
    for file in compiled {
        let parsed = parse::parse(&mut sources, file.name.clone(), &file.bytes);
        diagnostics.extend(parsed.diagnostics);
        files.push(parsed.file);
    }
    let mut baseline = Spec::default();
    for file in &files {
        // Its problems are the merged set's too, and reported there.
        let _ = crate::lower::lower(file, &mut baseline);
    }
    let mut applied = Vec::new();
    let mut override_sources = Vec::new();
    for file in overrides {
        let parsed = parse::parse(&mut sources, file.name.clone(), &file.bytes);
        override_sources.push(parsed.file.source);
        diagnostics.extend(parsed.diagnostics);
        for stanza in &parsed.file.stanzas {
            if origin == Origin::Fleet && stanza.keyword.text == "chaos" {
                diagnostics.push(Diagnostic::new(
                    Kind::NotOverridable {
                        what: "chaos".to_owned(),
                        help: "a drill is armed and switched on each instance, never by the fleet's set: remove the `chaos` stanza from the set".to_owned(),
                    },
                    stanza.keyword.loc,
                    "not from the fleet",
                ));
                continue;
            }
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
        baseline,
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
    let overridable = overridable();
    let Some((_, keys)) = overridable.iter().find(|(known, _)| *known == keyword) else {
        diagnostics.push(Diagnostic::new(
            Kind::NotOverridable {
                what: keyword.to_owned(),
                help: format!(
                    "an override tunes the numbers of {}",
                    overridable
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
