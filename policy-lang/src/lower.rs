//! Lowering: the syntax tree of a file → items of the [`Spec`], one function per stanza.
//!
//! A new stanza (budget, quarantine, assets, locality) is a row in the `STANZAS` table and its
//! lowering function; the grammar, the formatter and the rest of lowering do not change.
//!
//! Lowering reports what only the text can get wrong (unknown keywords and settings, values of
//! the wrong kind, missing settings, negative durations, duplicate names); the rules that hold
//! for any front end live in [`crate::validate()`].

use std::time::Duration;

use crate::ast::{
    DURATION_UNITS, File, Ident, Quantity, QuantityError, SIZE_UNITS, Stanza, StatementKind, Term,
    Value,
};
use crate::diagnostic::{Diagnostic, Kind};
use crate::source::{Loc, Located};
use crate::spec::{
    Amount, BudgetLimit, BudgetSpec, Compression, Metric, QuarantineSpec, WebMetric,
};
use crate::spec::{
    AssetsSpec, Backoff, BreakerSpec, BulkheadSpec, Class, FailMode, Items, Named, OpenAfter,
    OperationSpec, Rate, RatelimitSpec, RequestSpec, RetryBudget, RetrySpec, Sharing, SheddingSpec,
    Spec,
};
use crate::spec::{HopKind, HopSpec, LocalitySpec};
use crate::suggest;

type LowerFn = fn(&mut Lowering<'_>, &Stanza);

/// The stanzas the language knows, each with its lowering function.
const STANZAS: &[(&str, LowerFn)] = &[
    ("request", lower_request),
    ("breaker", lower_breaker),
    ("bulkhead", lower_bulkhead),
    ("retry", lower_retry),
    ("shedding", lower_shedding),
    ("ratelimit", lower_ratelimit),
    ("operation", lower_operation),
    ("assets", lower_assets),
    ("locality", lower_locality),
    ("budget", lower_size_budget),
    ("quarantine", lower_quarantine),
];

/// The stanza keywords the language knows.
pub fn keywords() -> impl Iterator<Item = &'static str> + Clone {
    STANZAS.iter().map(|(keyword, _)| *keyword)
}

/// Lowers every stanza of `file` into `spec`, returning the problems found. Items whose
/// required settings are wrong or missing are left out, so validation does not report them
/// twice.
pub fn lower(file: &File, spec: &mut Spec) -> Lowered {
    let mut lowering = Lowering {
        spec,
        diagnostics: Vec::new(),
        dropped: Vec::new(),
    };
    for stanza in &file.stanzas {
        match STANZAS
            .iter()
            .find(|(keyword, _)| *keyword == stanza.keyword.text)
        {
            Some((_, lower)) => lower(&mut lowering, stanza),
            None => lowering.push(Diagnostic::new(
                Kind::UnknownStanza {
                    keyword: stanza.keyword.text.clone(),
                    help: suggest::did_you_mean(&stanza.keyword.text, keywords(), "stanzas", ""),
                },
                stanza.keyword.loc,
                "not a stanza",
            )),
        }
    }
    Lowered {
        diagnostics: lowering.diagnostics,
        dropped: lowering.dropped,
    }
}

struct Lowering<'a> {
    spec: &'a mut Spec,
    diagnostics: Vec<Diagnostic>,
    dropped: Vec<(&'static str, String)>,
}

/// What lowering a file produced besides the items it added to the spec.
#[derive(Debug, Clone, Default)]
pub struct Lowered {
    /// Problems found.
    pub diagnostics: Vec<Diagnostic>,
    /// Named items (`(kind, name)`) that were declared but left out of the spec because they had
    /// errors; references to them should not be reported as unknown.
    pub dropped: Vec<(&'static str, String)>,
}

/// The settings and phrases of one body, after unknown and duplicate keys were reported.
struct Body<'s> {
    stanza: &'s Stanza,
    /// Keys that were not known: a missing setting close to one of them is a typo, reported
    /// once as the unknown key.
    unknown: Vec<&'s str>,
    settings: Vec<(&'s Ident, &'s Value)>,
    phrases: Vec<&'s Value>,
}

impl<'s> Body<'s> {
    fn get(&self, key: &str) -> Option<(&'s Ident, &'s Value)> {
        self.settings
            .iter()
            .find(|(ident, _)| ident.text == key)
            .copied()
    }
}

fn insert<T: Named>(items: &mut Items<T>, item: T, diagnostics: &mut Vec<Diagnostic>) {
    if let Err(duplicate) = items.insert(item) {
        diagnostics.push(*duplicate);
    }
}

impl Lowering<'_> {
    fn push(&mut self, diagnostic: Diagnostic) {
        self.diagnostics.push(diagnostic);
    }

    /// Records a named item left out of the spec because it had errors, so that references to
    /// it are not reported again as unknown names.
    fn drop_item(&mut self, kind: &'static str, name: Option<Located<String>>) {
        if let Some(name) = name {
            self.dropped.push((kind, name.value));
        }
    }

    // ---- headers ----------------------------------------------------------------------------

    fn named(&mut self, stanza: &Stanza) -> Option<Located<String>> {
        self.no_tags(stanza);
        self.name(stanza)
    }

    fn name(&mut self, stanza: &Stanza) -> Option<Located<String>> {
        match &stanza.name {
            Some(name) => Some(Located::new(name.text.clone(), name.loc)),
            None => {
                self.push(Diagnostic::new(
                    Kind::MissingName {
                        keyword: stanza.keyword.text.clone(),
                    },
                    stanza.keyword.loc,
                    "needs a name after it",
                ));
                None
            }
        }
    }

    fn unnamed(&mut self, stanza: &Stanza) {
        self.no_tags(stanza);
        if let Some(name) = &stanza.name {
            self.push(Diagnostic::new(
                Kind::UnexpectedName {
                    keyword: stanza.keyword.text.clone(),
                    name: name.text.clone(),
                },
                name.loc,
                "no name here",
            ));
        }
    }

    fn no_tags(&mut self, stanza: &Stanza) {
        if let (Some(first), Some(last)) = (stanza.tags.first(), stanza.tags.last()) {
            self.push(Diagnostic::new(
                Kind::UnexpectedTags {
                    keyword: stanza.keyword.text.clone(),
                },
                first.loc.to(last.loc),
                "not allowed here",
            ));
        }
    }

    /// Sorts a body into settings and phrases, reporting unknown and duplicate keys.
    fn body<'s>(&mut self, stanza: &'s Stanza, keys: &[&str]) -> Body<'s> {
        let mut body = Body {
            stanza,
            unknown: Vec::new(),
            settings: Vec::new(),
            phrases: Vec::new(),
        };
        for statement in &stanza.statements {
            match &statement.kind {
                StatementKind::Setting { key, value } => {
                    if !keys.contains(&key.text.as_str()) {
                        body.unknown.push(&key.text);
                        self.unknown_setting(stanza, &key.text, key.loc, keys);
                    } else if let Some((first, _)) = body.get(&key.text) {
                        self.push(
                            Diagnostic::new(
                                Kind::DuplicateSetting {
                                    key: key.text.clone(),
                                },
                                key.loc,
                                "set again here",
                            )
                            .with_label(first.loc, "first set here"),
                        );
                    } else {
                        body.settings.push((key, value));
                    }
                }
                StatementKind::Phrase(value) => body.phrases.push(value),
            }
        }
        body
    }

    fn unknown_setting(&mut self, stanza: &Stanza, key: &str, loc: Loc, keys: &[&str]) {
        let help = if stanza.keyword.text == "operation"
            && (Class::from_name(key).is_some() || FLAGS.contains(&key))
        {
            format!(
                "the class and flags go in the header: `operation NAME: critical, {key} {{ ... }}`"
            )
        } else {
            suggest::did_you_mean(
                key,
                keys.iter().copied(),
                &format!("the settings of `{}`", stanza.keyword.text),
                &format!("`{}` has no settings", stanza.keyword.text),
            )
        };
        self.push(Diagnostic::new(
            Kind::UnknownSetting {
                keyword: stanza.keyword.text.clone(),
                key: key.to_owned(),
                help,
            },
            loc,
            "unknown",
        ));
    }

    /// A phrase the stanza does not take.
    fn unknown_phrase(&mut self, stanza: &Stanza, phrase: &Value, keys: &[&str]) {
        let text = phrase.to_string();
        self.unknown_setting(stanza, &text, phrase.loc, keys);
    }

    fn missing(&mut self, body: &Body<'_>, what: &str, key: &str, example: &str) {
        let misspelled = body
            .unknown
            .iter()
            .any(|unknown| suggest::closest(unknown, [key]).is_some());
        if body.stanza.has_errors || misspelled {
            // The setting may be the statement that could not be read, or the misspelled key:
            // already reported.
            return;
        }
        self.push(Diagnostic::new(
            Kind::MissingSetting {
                what: what.to_owned(),
                key: key.to_owned(),
                example: example.to_owned(),
            },
            body.stanza.keyword.loc.to(body
                .stanza
                .name
                .as_ref()
                .map_or(body.stanza.keyword.loc, |name| name.loc)),
            format!("no `{key}`"),
        ));
    }

    // ---- values -----------------------------------------------------------------------------

    fn invalid(
        &mut self,
        key: &str,
        expected: &str,
        found: &dyn std::fmt::Display,
        loc: Loc,
        help: String,
    ) {
        self.push(Diagnostic::new(
            Kind::InvalidValue {
                key: key.to_owned(),
                expected: expected.to_owned(),
                found: found.to_string(),
                help,
            },
            loc,
            format!("expected {expected}"),
        ));
    }

    fn single_quantity<'v>(
        &mut self,
        key: &str,
        value: &'v Value,
        expected: &str,
        example: &str,
    ) -> Option<&'v Quantity> {
        match value.terms.as_slice() {
            [Term::Quantity(quantity)] => Some(quantity),
            _ => {
                self.invalid(
                    key,
                    expected,
                    value,
                    value.loc,
                    format!("write it as `{key} = {example}`"),
                );
                None
            }
        }
    }

    fn duration(&mut self, key: &str, value: &Value) -> Option<Located<Duration>> {
        let quantity = self.single_quantity(key, value, "a duration like `30s`", "30s")?;
        self.quantity_duration(key, quantity)
    }

    fn quantity_duration(&mut self, key: &str, quantity: &Quantity) -> Option<Located<Duration>> {
        let expected = "a duration like `30s`";
        match quantity.as_duration() {
            Ok(duration) => return Some(Located::new(duration, quantity.loc)),
            Err(QuantityError::Negative) => self.push(Diagnostic::new(
                Kind::DurationNotPositive {
                    key: key.to_owned(),
                    found: quantity.to_string(),
                },
                quantity.loc,
                "negative",
            )),
            Err(QuantityError::MissingUnit) => self.invalid(
                key,
                expected,
                quantity,
                quantity.loc,
                format!(
                    "add a unit: `{}ms`, `{}s`, `{}m` or `{}h`",
                    quantity.number, quantity.number, quantity.number, quantity.number
                ),
            ),
            Err(QuantityError::UnknownUnit(unit)) => {
                let help = match suggest::closest(&unit, DURATION_UNITS.iter().copied()) {
                    Some(unit) => format!("did you mean `{}{unit}`?", quantity.number),
                    None => "durations take the units `ms`, `s`, `m` and `h`".to_owned(),
                };
                self.invalid(key, expected, quantity, quantity.loc, help);
            }
            Err(_) => self.invalid(
                key,
                expected,
                quantity,
                quantity.loc,
                "this duration is too long to represent".to_owned(),
            ),
        }
        None
    }

    fn count(&mut self, key: &str, value: &Value) -> Option<Located<u32>> {
        let quantity = self.single_quantity(key, value, "a whole number", "4")?;
        self.quantity_count(key, quantity)
    }

    fn quantity_count(&mut self, key: &str, quantity: &Quantity) -> Option<Located<u32>> {
        match quantity.as_count() {
            Ok(count) => Some(Located::new(count, quantity.loc)),
            Err(QuantityError::UnexpectedUnit(unit)) => {
                self.invalid(
                    key,
                    "a whole number",
                    quantity,
                    quantity.loc,
                    format!("remove the unit `{unit}`: this is a count"),
                );
                None
            }
            Err(_) => {
                self.invalid(
                    key,
                    "a whole number",
                    quantity,
                    quantity.loc,
                    "write a whole number between 0 and 4294967295".to_owned(),
                );
                None
            }
        }
    }

    fn ratio(&mut self, key: &str, value: &Value) -> Option<Located<f64>> {
        let quantity = self.single_quantity(key, value, "a load like `0.5`", "0.5")?;
        self.quantity_ratio(key, quantity)
    }

    fn quantity_ratio(&mut self, key: &str, quantity: &Quantity) -> Option<Located<f64>> {
        match quantity.as_ratio() {
            Ok(ratio) => Some(Located::new(ratio, quantity.loc)),
            Err(_) => {
                self.invalid(
                    key,
                    "a share like `0.5` or `50%`",
                    quantity,
                    quantity.loc,
                    "write a plain number or a percentage".to_owned(),
                );
                None
            }
        }
    }

    fn reference(&mut self, key: &str, value: &Value) -> Option<Located<String>> {
        match value.terms.as_slice() {
            [Term::Word(ident)] => Some(Located::new(ident.text.clone(), ident.loc)),
            _ => {
                self.invalid(
                    key,
                    &format!("the name of a {key}"),
                    value,
                    value.loc,
                    format!("write `{key} = NAME`, naming a `{key}` stanza"),
                );
                None
            }
        }
    }

    fn string(&mut self, key: &str, value: &Value) -> Option<Located<String>> {
        match value.terms.as_slice() {
            [Term::Str(string)] => Some(Located::new(string.value.clone(), string.loc)),
            _ => {
                self.invalid(
                    key,
                    "a string",
                    value,
                    value.loc,
                    format!("quote it: `{key} = \"{value}\"`"),
                );
                None
            }
        }
    }

    fn fail_mode(&mut self, key: &str, value: &Value) -> Option<Located<FailMode>> {
        match value.terms.as_slice() {
            [Term::Word(ident)] if ident.text == "open" => {
                Some(Located::new(FailMode::Open, ident.loc))
            }
            [Term::Word(ident)] if ident.text == "closed" => {
                Some(Located::new(FailMode::Closed, ident.loc))
            }
            _ => {
                let help = match value.terms.as_slice() {
                    [Term::Word(ident)] => suggest::closest(&ident.text, ["open", "closed"])
                        .map(|choice| format!("did you mean `{choice}`?")),
                    _ => None,
                }
                .unwrap_or_else(|| "`open` lets calls through, `closed` refuses them".to_owned());
                self.invalid(key, "`open` or `closed`", value, value.loc, help);
                None
            }
        }
    }
}

fn word(term: &Term, expected: &str) -> bool {
    term.as_word() == Some(expected)
}

// ---- one function per stanza ----------------------------------------------------------------

fn lower_request(lowering: &mut Lowering<'_>, stanza: &Stanza) {
    const KEYS: &[&str] = &["deadline"];
    lowering.unnamed(stanza);
    let body = lowering.body(stanza, KEYS);
    for phrase in &body.phrases {
        lowering.unknown_phrase(stanza, phrase, KEYS);
    }
    let mut request = RequestSpec::new(stanza.loc);
    if let Some((key, value)) = body.get("deadline") {
        request.deadline = lowering.duration(&key.text, value);
    }
    match &lowering.spec.request {
        Some(first) => {
            let first = first.loc;
            lowering.push(
                Diagnostic::new(
                    Kind::DuplicateStanza {
                        keyword: "request".to_owned(),
                    },
                    stanza.keyword.loc,
                    "declared again here",
                )
                .with_label(first, "first declared here"),
            );
        }
        None => lowering.spec.request = Some(request),
    }
}

const OPEN_AFTER_FORMS: &str =
    "`N failures within DURATION` or `P% of at least N calls within DURATION`";

fn lower_breaker(lowering: &mut Lowering<'_>, stanza: &Stanza) {
    const KEYS: &[&str] = &["open_after", "cooldown"];
    let name = lowering.named(stanza);
    let body = lowering.body(stanza, KEYS);
    let mut sharing = None;
    for phrase in &body.phrases {
        match lower_sharing(lowering, phrase) {
            Some(Some(found)) => match &sharing {
                Some(Located { loc, .. }) => {
                    let first: Loc = *loc;
                    lowering.push(
                        Diagnostic::new(
                            Kind::DuplicateSetting {
                                key: "shared".to_owned(),
                            },
                            phrase.loc,
                            "set again here",
                        )
                        .with_label(first, "first set here"),
                    );
                }
                None => sharing = Some(found),
            },
            Some(None) => {}
            None => lowering.unknown_phrase(stanza, phrase, &["open_after", "cooldown", "shared"]),
        }
    }
    let what = name.as_ref().map_or_else(
        || "breaker".to_owned(),
        |name| format!("breaker `{}`", name.value),
    );
    let open_after = match body.get("open_after") {
        Some((key, value)) => lower_open_after(lowering, &key.text, value),
        None => {
            lowering.missing(
                &body,
                &what,
                "open_after",
                "open_after = 5 failures within 30s",
            );
            None
        }
    };
    let cooldown = match body.get("cooldown") {
        Some((key, value)) => lowering.duration(&key.text, value),
        None => {
            lowering.missing(&body, &what, "cooldown", "cooldown = 20s");
            None
        }
    };
    match (name, open_after, cooldown) {
        (Some(name), Some(open_after), Some(cooldown)) => {
            let mut breaker = BreakerSpec::new(name, open_after, cooldown, stanza.loc);
            if let Some(sharing) = sharing {
                breaker.sharing = sharing;
            }
            insert(
                &mut lowering.spec.breakers,
                breaker,
                &mut lowering.diagnostics,
            );
        }
        (name, ..) => lowering.drop_item("breaker", name),
    }
}

/// `shared`, `shared(quorum = N)` or `shared(trips_only)`. `None` if the phrase is not about
/// sharing at all; `Some(None)` if it is but was wrong (and reported).
fn lower_sharing(lowering: &mut Lowering<'_>, phrase: &Value) -> Option<Option<Located<Sharing>>> {
    const HELP: &str = "write `shared`, `shared(quorum = 2)` or `shared(trips_only)`";
    let call = match phrase.terms.as_slice() {
        [Term::Word(ident)] if ident.text == "shared" => {
            return Some(Some(Located::new(Sharing::Shared { quorum: 1 }, ident.loc)));
        }
        [Term::Call(call)] if call.name.text == "shared" => call,
        _ => return None,
    };
    let sharing = match call.args.as_slice() {
        [arg]
            if arg.key.is_none()
                && matches!(arg.value.terms.as_slice(), [term] if word(term, "trips_only")) =>
        {
            Some(Sharing::TripsOnly)
        }
        [arg] if arg.key.as_ref().is_some_and(|key| key.text == "quorum") => lowering
            .count("quorum", &arg.value)
            .map(|quorum| Sharing::Shared {
                quorum: quorum.value,
            }),
        _ => {
            lowering.invalid(
                "shared",
                "`quorum = N` or `trips_only`",
                &Term::Call(call.clone()),
                call.loc,
                HELP.to_owned(),
            );
            None
        }
    };
    Some(sharing.map(|sharing| Located::new(sharing, call.loc)))
}

fn lower_open_after(
    lowering: &mut Lowering<'_>,
    key: &str,
    value: &Value,
) -> Option<Located<OpenAfter>> {
    match value.terms.as_slice() {
        [
            Term::Quantity(failures),
            failures_word,
            within,
            Term::Quantity(window),
        ] if word(failures_word, "failures") && word(within, "within") => {
            let failures = lowering.quantity_count(key, failures);
            let window = lowering.quantity_duration(key, window);
            Some(Located::new(
                OpenAfter::Count {
                    failures: failures?.value,
                    window: window?.value,
                },
                value.loc,
            ))
        }
        [
            Term::Quantity(ratio),
            of,
            at,
            least,
            Term::Quantity(calls),
            calls_word,
            within,
            Term::Quantity(window),
        ] if word(of, "of")
            && word(at, "at")
            && word(least, "least")
            && word(calls_word, "calls")
            && word(within, "within") =>
        {
            let ratio = lowering.quantity_ratio(key, ratio);
            let min_calls = lowering.quantity_count(key, calls);
            let window = lowering.quantity_duration(key, window);
            Some(Located::new(
                OpenAfter::Ratio {
                    ratio: ratio?.value,
                    min_calls: min_calls?.value,
                    window: window?.value,
                },
                value.loc,
            ))
        }
        _ => {
            lowering.invalid(key, OPEN_AFTER_FORMS, value, value.loc, "for example `open_after = 5 failures within 30s` or `open_after = 50% of at least 20 calls within 30s`".to_owned());
            None
        }
    }
}

fn lower_bulkhead(lowering: &mut Lowering<'_>, stanza: &Stanza) {
    const KEYS: &[&str] = &["max_concurrent", "max_queued"];
    let name = lowering.named(stanza);
    let body = lowering.body(stanza, KEYS);
    for phrase in &body.phrases {
        lowering.unknown_phrase(stanza, phrase, KEYS);
    }
    let what = name.as_ref().map_or_else(
        || "bulkhead".to_owned(),
        |name| format!("bulkhead `{}`", name.value),
    );
    let max_concurrent = match body.get("max_concurrent") {
        Some((key, value)) => lowering.count(&key.text, value),
        None => {
            lowering.missing(&body, &what, "max_concurrent", "max_concurrent = 4");
            None
        }
    };
    let max_queued = body
        .get("max_queued")
        .map(|(key, value)| lowering.count(&key.text, value));
    match (name, max_concurrent, max_queued) {
        (Some(name), Some(max_concurrent), max_queued @ (None | Some(Some(_)))) => {
            let mut bulkhead = BulkheadSpec::new(name, max_concurrent, stanza.loc);
            if let Some(Some(max_queued)) = max_queued {
                bulkhead.max_queued = max_queued;
            }
            insert(
                &mut lowering.spec.bulkheads,
                bulkhead,
                &mut lowering.diagnostics,
            );
        }
        (name, ..) => lowering.drop_item("bulkhead", name),
    }
}

fn lower_retry(lowering: &mut Lowering<'_>, stanza: &Stanza) {
    const KEYS: &[&str] = &["attempts", "backoff", "attempt_timeout", "budget"];
    let name = lowering.named(stanza);
    let body = lowering.body(stanza, KEYS);
    for phrase in &body.phrases {
        lowering.unknown_phrase(stanza, phrase, KEYS);
    }
    let what = name.as_ref().map_or_else(
        || "retry".to_owned(),
        |name| format!("retry `{}`", name.value),
    );
    let attempts = match body.get("attempts") {
        Some((key, value)) => lowering.count(&key.text, value),
        None => {
            lowering.missing(&body, &what, "attempts", "attempts = 3");
            None
        }
    };
    let backoff = match body.get("backoff") {
        Some((key, value)) => lower_backoff(lowering, &key.text, value),
        None => {
            lowering.missing(
                &body,
                &what,
                "backoff",
                "backoff = full_jitter(base = 50ms, cap = 1s)",
            );
            None
        }
    };
    let attempt_timeout = body
        .get("attempt_timeout")
        .map(|(key, value)| lowering.duration(&key.text, value));
    let budget = body
        .get("budget")
        .map(|(key, value)| lower_budget(lowering, &key.text, value));
    match (name, attempts, backoff, attempt_timeout, budget) {
        (
            Some(name),
            Some(attempts),
            Some(backoff),
            attempt_timeout @ (None | Some(Some(_))),
            budget @ (None | Some(Some(_))),
        ) => {
            let mut retry = RetrySpec::new(name, attempts, backoff, stanza.loc);
            retry.attempt_timeout = attempt_timeout.flatten();
            retry.budget = budget.flatten();
            insert(&mut lowering.spec.retries, retry, &mut lowering.diagnostics);
        }
        (name, ..) => lowering.drop_item("retry", name),
    }
}

fn lower_backoff(
    lowering: &mut Lowering<'_>,
    key: &str,
    value: &Value,
) -> Option<Located<Backoff>> {
    const EXAMPLE: &str = "full_jitter(base = 50ms, cap = 1s)";
    let call = match value.terms.as_slice() {
        [Term::Call(call)] if call.name.text == "full_jitter" => call,
        _ => {
            let help = match value.terms.as_slice() {
                [Term::Call(call)] => match suggest::closest(&call.name.text, ["full_jitter"]) {
                    Some(name) => {
                        format!("did you mean `{name}`? backoff always carries full jitter")
                    }
                    None => format!("backoff always carries full jitter: `{key} = {EXAMPLE}`"),
                },
                _ => format!("backoff always carries full jitter: `{key} = {EXAMPLE}`"),
            };
            lowering.invalid(key, &format!("`{EXAMPLE}`"), value, value.loc, help);
            return None;
        }
    };
    let (mut base, mut cap) = (None, None);
    let mut complete = true;
    for arg in &call.args {
        match arg.key.as_ref().map(|key| key.text.as_str()) {
            Some("base") if base.is_none() => base = lowering.duration("base", &arg.value),
            Some("cap") if cap.is_none() => cap = lowering.duration("cap", &arg.value),
            _ => {
                complete = false;
                let key_text = arg
                    .key
                    .as_ref()
                    .map_or_else(|| arg.value.to_string(), |key| key.text.clone());
                let help = suggest::did_you_mean(
                    &key_text,
                    ["base", "cap"],
                    "the arguments of `full_jitter`",
                    "",
                );
                lowering.push(Diagnostic::new(
                    Kind::UnknownSetting {
                        keyword: "full_jitter".to_owned(),
                        key: key_text,
                        help,
                    },
                    arg.loc,
                    "unknown or repeated",
                ));
            }
        }
    }
    let has = |name: &str| {
        call.args
            .iter()
            .any(|arg| arg.key.as_ref().is_some_and(|key| key.text == name))
    };
    for (arg, example) in [("base", "base = 50ms"), ("cap", "cap = 1s")] {
        if !has(arg) {
            complete = false;
            lowering.push(Diagnostic::new(
                Kind::MissingSetting {
                    what: "`full_jitter`".to_owned(),
                    key: arg.to_owned(),
                    example: example.to_owned(),
                },
                call.loc,
                format!("no `{arg}`"),
            ));
        }
    }
    match (base, cap) {
        (Some(base), Some(cap)) if complete => Some(Located::new(
            Backoff::FullJitter {
                base: base.value,
                cap: cap.value,
            },
            call.loc,
        )),
        _ => None,
    }
}

fn lower_budget(
    lowering: &mut Lowering<'_>,
    key: &str,
    value: &Value,
) -> Option<Located<RetryBudget>> {
    let (ratio, floor) = match value.terms.as_slice() {
        [Term::Quantity(ratio)] => (ratio, None),
        [Term::Quantity(ratio), Term::Plus(_), Term::Quantity(floor)]
            if floor.unit.as_deref() == Some("/s") =>
        {
            (ratio, Some(floor))
        }
        _ => {
            lowering.invalid(key, "`P% + N/s`", value, value.loc, "write the share of recent calls retries may add, plus a floor per second: `budget = 20% + 10/s`".to_owned());
            return None;
        }
    };
    let ratio = lowering.quantity_ratio(key, ratio)?;
    let floor = match floor {
        Some(floor) => {
            let per_second = Quantity {
                unit: None,
                ..floor.clone()
            };
            lowering.quantity_count(key, &per_second)?.value
        }
        None => 0,
    };
    Some(Located::new(
        RetryBudget::new(ratio.value, floor),
        value.loc,
    ))
}

fn lower_shedding(lowering: &mut Lowering<'_>, stanza: &Stanza) {
    const KEYS: &[&str] = &[];
    const HELP_FORM: &str = "write `deferred at load 0.5` or `background at load 0.25`";
    lowering.unnamed(stanza);
    let body = lowering.body(stanza, KEYS);
    let mut shedding = SheddingSpec::new(stanza.loc);
    let (mut deferred, mut background): (Option<Loc>, Option<Loc>) = (None, None);
    for phrase in &body.phrases {
        match phrase.terms.as_slice() {
            [Term::Word(class), at, load, Term::Quantity(threshold)]
                if (class.text == "deferred" || class.text == "background")
                    && word(at, "at")
                    && word(load, "load") =>
            {
                let seen = if class.text == "deferred" {
                    &mut deferred
                } else {
                    &mut background
                };
                if let Some(first) = *seen {
                    lowering.push(
                        Diagnostic::new(
                            Kind::DuplicateSetting {
                                key: class.text.clone(),
                            },
                            class.loc,
                            "set again here",
                        )
                        .with_label(first, "first set here"),
                    );
                    continue;
                }
                *seen = Some(class.loc);
                if let Some(ratio) = lowering.quantity_ratio(&class.text, threshold) {
                    if class.text == "deferred" {
                        shedding.deferred = ratio;
                    } else {
                        shedding.background = ratio;
                    }
                }
            }
            _ => lowering.invalid(
                "shedding",
                "`CLASS at load RATIO`",
                *phrase,
                phrase.loc,
                HELP_FORM.to_owned(),
            ),
        }
    }
    match &lowering.spec.shedding {
        Some(first) => {
            let first = first.loc;
            lowering.push(
                Diagnostic::new(
                    Kind::DuplicateStanza {
                        keyword: "shedding".to_owned(),
                    },
                    stanza.keyword.loc,
                    "declared again here",
                )
                .with_label(first, "first declared here"),
            );
        }
        None => lowering.spec.shedding = Some(shedding),
    }
}

fn lower_ratelimit(lowering: &mut Lowering<'_>, stanza: &Stanza) {
    const KEYS: &[&str] = &["on_timeout", "on_error"];
    let name = lowering.named(stanza);
    let body = lowering.body(stanza, KEYS);
    let mut rate: Option<Located<Rate>> = None;
    let mut rate_seen: Option<Loc> = None;
    for phrase in &body.phrases {
        match phrase.terms.as_slice() {
            [Term::Quantity(count), per, Term::Quantity(period)] if word(per, "per") => {
                if let Some(first) = rate_seen {
                    lowering.push(
                        Diagnostic::new(
                            Kind::DuplicateSetting {
                                key: "per".to_owned(),
                            },
                            phrase.loc,
                            "set again here",
                        )
                        .with_label(first, "first set here"),
                    );
                    continue;
                }
                rate_seen = Some(phrase.loc);
                let count = lowering.quantity_count("rate", count);
                let period = lowering.quantity_duration("rate", period);
                if let (Some(count), Some(period)) = (count, period) {
                    rate = Some(Located::new(
                        Rate::new(count.value, period.value),
                        phrase.loc,
                    ));
                }
            }
            _ => lowering.unknown_phrase(
                stanza,
                phrase,
                &["N per DURATION", "on_timeout", "on_error"],
            ),
        }
    }
    let what = name.as_ref().map_or_else(
        || "ratelimit".to_owned(),
        |name| format!("ratelimit `{}`", name.value),
    );
    if rate_seen.is_none() {
        lowering.missing(&body, &what, "N per DURATION", "100 per 1m");
    }
    let mut modes = [None, None];
    for (slot, key) in modes.iter_mut().zip(["on_timeout", "on_error"]) {
        match body.get(key) {
            Some((key, value)) => *slot = lowering.fail_mode(&key.text, value),
            None => lowering.missing(&body, &what, key, &format!("{key} = open")),
        }
    }
    match (name, rate, modes) {
        (Some(name), Some(rate), [Some(on_timeout), Some(on_error)]) => {
            let ratelimit = RatelimitSpec::new(name, rate, on_timeout, on_error, stanza.loc);
            insert(
                &mut lowering.spec.ratelimits,
                ratelimit,
                &mut lowering.diagnostics,
            );
        }
        (name, ..) => lowering.drop_item("ratelimit", name),
    }
}

const FLAGS: &[&str] = &["idempotent", "durable"];

fn lower_operation(lowering: &mut Lowering<'_>, stanza: &Stanza) {
    const KEYS: &[&str] = &[
        "breaker",
        "bulkhead",
        "retry",
        "ratelimit",
        "deadline",
        "min_budget",
        "expected_cost",
        "shed_at",
        "fallback",
        "stale_if_error",
    ];
    let name = lowering.name(stanza);
    let operation_name = name
        .as_ref()
        .map_or("", |name| name.value.as_str())
        .to_owned();
    let mut class: Option<Located<Class>> = None;
    let (mut idempotent, mut durable) = (None, None);
    let mut header_ok = true;
    for tag in &stanza.tags {
        if let Some(found) = Class::from_name(&tag.text) {
            match &class {
                Some(first) => {
                    header_ok = false;
                    lowering.push(
                        Diagnostic::new(
                            Kind::ConflictingClasses {
                                operation: operation_name.clone(),
                                first: first.value.to_string(),
                                second: tag.text.clone(),
                            },
                            tag.loc,
                            "second class",
                        )
                        .with_label(first.loc, "first class"),
                    );
                }
                None => class = Some(Located::new(found, tag.loc)),
            }
        } else if tag.text == "idempotent" {
            idempotent = Some(tag.loc);
        } else if tag.text == "durable" {
            durable = Some(tag.loc);
        } else {
            header_ok = false;
            let candidates = [
                "critical",
                "deferred",
                "background",
                "idempotent",
                "durable",
            ];
            lowering.push(Diagnostic::new(
                Kind::UnknownFlag {
                    operation: operation_name.clone(),
                    flag: tag.text.clone(),
                    help: suggest::did_you_mean(&tag.text, candidates, "the classes and flags", ""),
                },
                tag.loc,
                "unknown",
            ));
        }
    }
    if class.is_none() && header_ok {
        lowering.push(Diagnostic::new(
            Kind::MissingClass {
                operation: operation_name.clone(),
            },
            name.as_ref().map_or(stanza.keyword.loc, |name| name.loc),
            "no class",
        ));
    }
    let body = lowering.body(stanza, KEYS);
    for phrase in &body.phrases {
        lowering.unknown_phrase(stanza, phrase, KEYS);
    }
    let (Some(name), Some(class)) = (name, class) else {
        return;
    };
    let mut operation = OperationSpec::new(name, class, stanza.loc);
    operation.idempotent = idempotent;
    operation.durable = durable;
    let mut complete = header_ok;
    for (key, value) in &body.settings {
        let key = key.text.as_str();
        let lowered = match key {
            "breaker" => lowering
                .reference(key, value)
                .map(|r| operation.breaker = Some(r)),
            "bulkhead" => lowering
                .reference(key, value)
                .map(|r| operation.bulkhead = Some(r)),
            "retry" => lowering
                .reference(key, value)
                .map(|r| operation.retry = Some(r)),
            "ratelimit" => lowering
                .reference(key, value)
                .map(|r| operation.ratelimit = Some(r)),
            "deadline" => lowering
                .duration(key, value)
                .map(|d| operation.deadline = Some(d)),
            "min_budget" => lowering
                .duration(key, value)
                .map(|d| operation.min_budget = Some(d)),
            "expected_cost" => lowering
                .duration(key, value)
                .map(|d| operation.expected_cost = Some(d)),
            "stale_if_error" => lowering
                .duration(key, value)
                .map(|d| operation.stale_if_error = Some(d)),
            "shed_at" => lowering
                .ratio(key, value)
                .map(|r| operation.shed_at = Some(r)),
            "fallback" => lowering
                .string(key, value)
                .map(|s| operation.fallback = Some(s)),
            _ => Some(()),
        };
        complete &= lowered.is_some();
    }
    // An operation with a statement that failed to read is left out: validating what remains
    // would report consequences of the syntax error (a retry whose deadline failed to parse).
    if complete && !stanza.has_errors {
        insert(
            &mut lowering.spec.operations,
            operation,
            &mut lowering.diagnostics,
        );
    }
}

fn lower_assets(lowering: &mut Lowering<'_>, stanza: &Stanza) {
    const KEYS: &[&str] = &[
        "dir",
        "max_image",
        "large_image",
        "max_font",
        "max_font_files",
        "max_font_weights",
        "max_high_priority",
        "max_preloads",
    ];
    let name = lowering.named(stanza);
    let body = lowering.body(stanza, KEYS);
    for phrase in &body.phrases {
        lowering.unknown_phrase(stanza, phrase, KEYS);
    }
    let Some(name) = name else {
        return;
    };
    let mut assets = AssetsSpec::new(name, stanza.loc);
    let mut complete = true;
    for (key, value) in &body.settings {
        let key = key.text.as_str();
        let lowered = match key {
            "dir" => lowering.string(key, value).map(|s| assets.dir = Some(s)),
            "max_image" => lower_size(lowering, key, value).map(|s| assets.max_image = s),
            "large_image" => lower_size(lowering, key, value).map(|s| assets.large_image = s),
            "max_font" => lower_size(lowering, key, value).map(|s| assets.max_font = s),
            "max_font_files" => lowering
                .count(key, value)
                .map(|n| assets.max_font_files = n),
            "max_font_weights" => lowering
                .count(key, value)
                .map(|n| assets.max_font_weights = n),
            "max_high_priority" => lowering
                .count(key, value)
                .map(|n| assets.max_high_priority = n),
            "max_preloads" => lowering.count(key, value).map(|n| assets.max_preloads = n),
            _ => Some(()),
        };
        complete &= lowered.is_some();
    }
    if complete && !stanza.has_errors {
        insert(&mut lowering.spec.assets, assets, &mut lowering.diagnostics);
    }
}

/// A size: `200kb`, `1.5mb`, `512b` (powers of 1024).
fn lower_size(lowering: &mut Lowering<'_>, key: &str, value: &Value) -> Option<Located<u64>> {
    const EXPECTED: &str = "a size like `200kb`";
    let quantity = lowering.single_quantity(key, value, EXPECTED, "200kb")?;
    let help = match quantity.as_size() {
        Ok(bytes) => return Some(Located::new(bytes, quantity.loc)),
        Err(QuantityError::MissingUnit) => format!(
            "add a unit: `{n}kb`, `{n}mb` or `{n}b`",
            n = quantity.number
        ),
        Err(QuantityError::UnknownUnit(unit)) => {
            match suggest::closest(&unit, SIZE_UNITS.iter().copied()) {
                Some(unit) => format!("did you mean `{}{unit}`?", quantity.number),
                None => "sizes take the units `b`, `kb`, `mb` and `gb`".to_owned(),
            }
        }
        Err(QuantityError::Negative) => "a size is zero or more, such as `200kb`".to_owned(),
        Err(_) => "this size is too large to represent".to_owned(),
    };
    lowering.invalid(key, EXPECTED, quantity, quantity.loc, help);
    None
}

/// The form of a hop's value, for diagnostics.
const HOP_FORM: &str = "`blocking env VARIABLE` or `async env VARIABLE`";

fn lower_locality(lowering: &mut Lowering<'_>, stanza: &Stanza) {
    lowering.unnamed(stanza);
    let mut locality = LocalitySpec::new(stanza.loc);
    for statement in &stanza.statements {
        match &statement.kind {
            StatementKind::Setting { key, value } => {
                if let Some(hop) = lower_hop(lowering, key, value) {
                    insert(&mut locality.hops, hop, &mut lowering.diagnostics);
                }
            }
            StatementKind::Phrase(phrase) => lowering.invalid(
                "locality",
                "`NAME = blocking env VARIABLE`",
                phrase,
                phrase.loc,
                "name each hop after the service it calls: `database = blocking env DATABASE_URL`"
                    .to_owned(),
            ),
        }
    }
    if stanza.statements.is_empty() && !stanza.has_errors {
        lowering.push(Diagnostic::new(
            Kind::EmptyLocality,
            stanza.keyword.loc,
            "no hops",
        ));
    }
    match &lowering.spec.locality {
        Some(first) => {
            let first = first.loc;
            lowering.push(
                Diagnostic::new(
                    Kind::DuplicateStanza {
                        keyword: "locality".to_owned(),
                    },
                    stanza.keyword.loc,
                    "declared again here",
                )
                .with_label(first, "first declared here"),
            );
        }
        None => lowering.spec.locality = Some(locality),
    }
}

/// `NAME = blocking env VARIABLE` or `NAME = async env VARIABLE`.
fn lower_hop(lowering: &mut Lowering<'_>, key: &Ident, value: &Value) -> Option<HopSpec> {
    let hop = key.text.as_str();
    if let [Term::Word(kind), env, Term::Word(variable)] = value.terms.as_slice()
        && word(env, "env")
    {
        let Some(found) = HopKind::from_name(&kind.text) else {
            let help = match suggest::closest(&kind.text, ["blocking", "async"]) {
                Some(kind) => format!("did you mean `{kind}`?"),
                None => "a hop is `blocking` (the request waits for it) or `async` (it does not)"
                    .to_owned(),
            };
            lowering.push(Diagnostic::new(
                Kind::UnknownHopKind {
                    hop: hop.to_owned(),
                    kind: kind.text.clone(),
                    help,
                },
                kind.loc,
                "unknown",
            ));
            return None;
        };
        return Some(HopSpec::new(
            Located::new(hop.to_owned(), key.loc),
            Located::new(found, kind.loc),
            Located::new(variable.text.clone(), variable.loc),
            key.loc.to(value.loc),
        ));
    }
    let help = match value.terms.as_slice() {
        [env, Term::Word(variable)] if word(env, "env") => format!(
            "say whether the request waits for it: `{hop} = blocking env {0}` or `{hop} = async env {0}`",
            variable.text
        ),
        [Term::Word(kind), Term::Word(variable)] if HopKind::from_name(&kind.text).is_some() => {
            format!(
                "write `env` before the variable: `{hop} = {} env {}`",
                kind.text, variable.text
            )
        }
        [Term::Word(kind), env, Term::Str(variable)] if word(env, "env") => format!(
            "write the variable's name without quotes: `{hop} = {} env {}`",
            kind.text, variable.value
        ),
        _ => format!(
            "name the variable whose connection string locates the service, as in `{hop} = blocking env DATABASE_URL`: the region is derived from it where the check runs, never written here"
        ),
    };
    lowering.invalid(hop, HOP_FORM, value, value.loc, help);
    None
}

// ---- the build-time side: budgets and quarantines (`policy gate`) ----------------------------

const LIMIT_FORM: &str = "`METRIC [gzip] at most CEILING measured VALUE headroom P%`";
const LIMIT_EXAMPLE: &str = "baseline_js_kb at most 82kb measured 77.7kb headroom 5%";

fn lower_size_budget(lowering: &mut Lowering<'_>, stanza: &Stanza) {
    const KEYS: &[&str] = &["dir"];
    let name = lowering.named(stanza);
    let body = lowering.body(stanza, KEYS);
    let budget_name = name
        .as_ref()
        .map_or("", |name| name.value.as_str())
        .to_owned();
    let mut complete = true;
    let mut limits: Vec<BudgetLimit> = Vec::new();
    for phrase in &body.phrases {
        let Some(limit) = lower_limit(lowering, &budget_name, phrase) else {
            complete = false;
            continue;
        };
        let seen = limits.iter().find(|seen| {
            seen.metric.value == limit.metric.value && seen.compression == limit.compression
        });
        if let Some(first) = seen {
            let first = first.metric.loc;
            lowering.push(
                Diagnostic::new(
                    Kind::DuplicateSetting { key: limit.label() },
                    limit.metric.loc,
                    "set again here",
                )
                .with_label(first, "first set here"),
            );
            complete = false;
            continue;
        }
        limits.push(limit);
    }
    let dir = match body.get("dir") {
        Some((key, value)) => {
            let dir = lowering.string(&key.text, value);
            complete &= dir.is_some();
            dir
        }
        None => None,
    };
    if dir.is_none()
        && body.get("dir").is_none()
        && limits
            .iter()
            .any(|limit| matches!(limit.metric.value, Metric::Web(_)))
    {
        let what = format!("budget `{budget_name}`");
        lowering.missing(&body, &what, "dir", "dir = \"web/dist\"");
        complete = false;
    }
    match name {
        Some(name) if complete && !stanza.has_errors => {
            let mut budget = BudgetSpec::new(name, stanza.loc);
            budget.dir = dir;
            budget.limits = limits;
            insert(
                &mut lowering.spec.budgets,
                budget,
                &mut lowering.diagnostics,
            );
        }
        name => lowering.drop_item("budget", name),
    }
}

/// One line of a budget; `None` if it was wrong (and reported).
fn lower_limit(lowering: &mut Lowering<'_>, budget: &str, phrase: &Value) -> Option<BudgetLimit> {
    let form_error = |lowering: &mut Lowering<'_>, key: &str| {
        lowering.invalid(
            key,
            LIMIT_FORM,
            phrase,
            phrase.loc,
            format!("for example `{LIMIT_EXAMPLE}`"),
        );
    };
    let [Term::Word(keyword), rest @ ..] = phrase.terms.as_slice() else {
        form_error(lowering, "budget");
        return None;
    };
    let (metric, rest) = if let Some(web) = WebMetric::from_name(&keyword.text) {
        (Located::new(Metric::Web(web), keyword.loc), rest)
    } else if Metric::WITH_TARGET.contains(&keyword.text.as_str()) {
        let [Term::Str(target), rest @ ..] = rest else {
            let what = match keyword.text.as_str() {
                "crates" => "the package",
                "files" => "a glob",
                _ => "the path of the binary",
            };
            lowering.invalid(
                &keyword.text,
                &format!("{what} in quotes"),
                phrase,
                phrase.loc,
                format!(
                    "write it as `{} \"...\" at most ... measured ... headroom ...`",
                    keyword.text
                ),
            );
            return None;
        };
        let metric = match keyword.text.as_str() {
            "binary" => Metric::Binary(target.value.clone()),
            "binary_code" => Metric::BinaryCode(target.value.clone()),
            "crates" => Metric::Crates(target.value.clone()),
            _ => Metric::Files(target.value.clone()),
        };
        (Located::new(metric, keyword.loc.to(target.loc)), rest)
    } else {
        let help = suggest::did_you_mean(&keyword.text, Metric::names(), "the metrics", "");
        lowering.push(Diagnostic::new(
            Kind::UnknownMetric {
                budget: budget.to_owned(),
                metric: keyword.text.clone(),
                help,
            },
            keyword.loc,
            "not a metric",
        ));
        return None;
    };
    let (compression, rest) = match rest {
        [Term::Word(gzip), rest @ ..] if gzip.text == "gzip" => {
            if !metric.value.can_compress() {
                lowering.invalid(
                    "gzip",
                    "a front-end metric or `files`",
                    &metric.value.keyword(),
                    gzip.loc,
                    "compressed sizes are measured for the front-end metrics and `files`: remove `gzip`"
                        .to_owned(),
                );
                return None;
            }
            (Compression::Gzip, rest)
        }
        rest => (Compression::Raw, rest),
    };
    let [
        at,
        most,
        Term::Quantity(ceiling),
        measured_word,
        Term::Quantity(measured),
        headroom_word,
        Term::Quantity(headroom),
    ] = rest
    else {
        form_error(lowering, metric.value.keyword());
        return None;
    };
    if !(word(at, "at")
        && word(most, "most")
        && word(measured_word, "measured")
        && word(headroom_word, "headroom"))
    {
        form_error(lowering, metric.value.keyword());
        return None;
    }
    let is_count = metric.value.is_count();
    let key = metric.value.keyword();
    let ceiling = lower_amount(lowering, key, ceiling, is_count);
    let measured = lower_amount(lowering, key, measured, is_count);
    let headroom = lowering.quantity_ratio("headroom", headroom);
    let mut limit = BudgetLimit::new(metric, ceiling?, measured?, headroom?, phrase.loc);
    limit.compression = compression;
    Some(limit)
}

/// A size in bytes (`82kb`) or, for a count, a whole number.
fn lower_amount(
    lowering: &mut Lowering<'_>,
    key: &str,
    quantity: &Quantity,
    is_count: bool,
) -> Option<Located<Amount>> {
    if is_count {
        let count = lowering.quantity_count(key, quantity)?;
        return Some(Located::new(
            Amount::new(u64::from(count.value), None),
            count.loc,
        ));
    }
    let expected = "a size like `82kb`";
    match quantity.as_size() {
        Ok(bytes) => {
            return Some(Located::new(
                Amount::new(bytes, quantity.unit.clone()),
                quantity.loc,
            ));
        }
        Err(QuantityError::MissingUnit) => lowering.invalid(
            key,
            expected,
            quantity,
            quantity.loc,
            format!(
                "add a unit: `{}b`, `{}kb` or `{}mb` (1kb = 1024 bytes)",
                quantity.number, quantity.number, quantity.number
            ),
        ),
        Err(QuantityError::UnknownUnit(unit)) => {
            let lowercase = unit.to_ascii_lowercase();
            let closest = SIZE_UNITS
                .contains(&lowercase.as_str())
                .then_some(lowercase.as_str())
                .or_else(|| suggest::closest(&unit, SIZE_UNITS.iter().copied()));
            let help = match closest {
                Some(unit) => format!("did you mean `{}{unit}`?", quantity.number),
                None => "sizes take the units `b`, `kb`, `mb` and `gb`".to_owned(),
            };
            lowering.invalid(key, expected, quantity, quantity.loc, help);
        }
        Err(_) => lowering.invalid(
            key,
            expected,
            quantity,
            quantity.loc,
            "a size is zero or more bytes".to_owned(),
        ),
    }
    None
}

fn lower_quarantine(lowering: &mut Lowering<'_>, stanza: &Stanza) {
    const KEYS: &[&str] = &["crate", "package", "behind", "only", "justification"];
    let name = lowering.named(stanza);
    let body = lowering.body(stanza, KEYS);
    for phrase in &body.phrases {
        lowering.unknown_phrase(stanza, phrase, KEYS);
    }
    let what = name.as_ref().map_or_else(
        || "quarantine".to_owned(),
        |name| format!("quarantine `{}`", name.value),
    );
    let package = match body.get("package") {
        Some((key, value)) => lowering.string(&key.text, value),
        None => {
            lowering.missing(&body, &what, "package", "package = \"my-service\"");
            None
        }
    };
    let behind = match body.get("behind") {
        Some((key, value)) => lowering.string(&key.text, value),
        None => {
            lowering.missing(&body, &what, "behind", "behind = \"sqlite\"");
            None
        }
    };
    let mut complete = true;
    let krate = match body.get("crate") {
        Some((key, value)) => {
            let krate = lowering.string(&key.text, value);
            complete &= krate.is_some();
            krate
        }
        None => None,
    };
    let only = match body.get("only") {
        Some((key, value)) => {
            let mut only = Vec::new();
            for term in &value.terms {
                if let Term::Str(string) = term {
                    only.push(Located::new(string.value.clone(), string.loc));
                } else {
                    complete = false;
                    lowering.invalid(
                        &key.text,
                        "crate names in quotes",
                        term,
                        term.loc(),
                        "list the crates allowed to depend on it directly: `only = \"my-db\" \"my-service\"`"
                            .to_owned(),
                    );
                }
            }
            only
        }
        None => Vec::new(),
    };
    let justification = match body.get("justification") {
        Some((key, value)) => match lowering.string(&key.text, value) {
            Some(text) if text.value.trim().is_empty() => {
                complete = false;
                lowering.invalid(
                    &key.text,
                    "a reason",
                    value,
                    value.loc,
                    "say why the default build needs it, or remove `justification`".to_owned(),
                );
                None
            }
            Some(text) => Some(text),
            None => {
                complete = false;
                None
            }
        },
        None => None,
    };
    match (name, package, behind) {
        (Some(name), Some(package), Some(behind)) if complete && !stanza.has_errors => {
            let mut quarantine = QuarantineSpec::new(name, package, behind, stanza.loc);
            quarantine.krate = krate;
            quarantine.only = only;
            quarantine.justification = justification;
            insert(
                &mut lowering.spec.quarantines,
                quarantine,
                &mut lowering.diagnostics,
            );
        }
        (name, ..) => lowering.drop_item("quarantine", name),
    }
}

#[cfg(test)]
mod budget_and_quarantine_tests {
    use crate::PolicySet;
    use crate::spec::{Compression, Metric, WebMetric};

    #[test]
    fn budget_lines_and_quarantines_lower_to_the_model() {
        let mut set = PolicySet::new();
        set.add_source(
            "gate.policy",
            br#"
budget web {
    dir = "dist"
    baseline_js_kb gzip at most 82kb measured 77.7kb headroom 5%
    crates "app" at most 180 measured 171 headroom 3%
}
quarantine tokio_util { package = "app"; behind = "net"; only = "a" "b-c"; justification = "why" }
"#,
        );
        assert!(set.check().all().is_empty());
        let budget = set.spec().budgets.get("web").unwrap();
        assert_eq!(budget.dir.as_ref().unwrap().value, "dist");
        let [js, crates] = budget.limits.as_slice() else {
            panic!("two lines expected")
        };
        assert_eq!(js.metric.value, Metric::Web(WebMetric::BaselineJs));
        assert_eq!(js.compression, Compression::Gzip);
        assert_eq!(js.ceiling.value.value, 82 * 1024);
        assert_eq!(js.ceiling.value.unit.as_deref(), Some("kb"));
        assert_eq!(js.measured.value.value, 79_565); // 77.7 × 1024, rounded
        assert!((js.headroom.value - 0.05).abs() < 1e-12);
        assert_eq!(js.label(), "baseline_js_kb gzip");
        assert_eq!(crates.metric.value, Metric::Crates("app".to_owned()));
        assert_eq!(
            (
                crates.ceiling.value.value,
                crates.ceiling.value.unit.as_deref()
            ),
            (180, None)
        );
        assert_eq!(crates.label(), "crates \"app\"");

        let quarantine = set.spec().quarantines.get("tokio_util").unwrap();
        assert_eq!(quarantine.package.value, "app");
        assert_eq!(quarantine.behind.value, "net");
        let only: Vec<&str> = quarantine.only.iter().map(|c| c.value.as_str()).collect();
        assert_eq!(only, ["a", "b-c"]);
        assert_eq!(quarantine.justification.as_ref().unwrap().value, "why");
    }
}
