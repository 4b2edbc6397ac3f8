//! Lowering: the syntax tree of a file → items of the [`Spec`], one function per stanza.
//!
//! A new stanza is a row in the `STANZAS` table and its lowering function; the grammar, the
//! formatter and the rest of lowering do not change. The functions live by family, as the
//! model does: `mechanisms` (request, breaker, bulkhead, retry, shedding, ratelimit, queue),
//! `operation`, and `delivery` (assets, locality, ceilings, quarantine). This module holds the
//! table and what every stanza shares: headers, bodies, and reading values.
//!
//! Lowering reports what only the text can get wrong (unknown keywords and settings, values of
//! the wrong kind, missing settings, negative durations, duplicate names); the rules that hold
//! for any front end live in [`crate::validate()`].

use std::time::Duration;

use crate::ast::{File, Ident, Quantity, Stanza, StatementKind, Term, Value};
use crate::diagnostic::{Diagnostic, Kind};
use crate::source::{Loc, Located};
use crate::spec::{FailMode, Items, Named, Number, Rate, Setting, Spec, Unit, WorkClass};
use crate::suggest;
use crate::units::{DURATION_UNITS, QuantityError};

mod chaos;
mod delivery;
mod envelope;
mod mechanisms;
mod operation;

use chaos::lower_chaos;
use delivery::{lower_assets, lower_ceilings, lower_locality, lower_quarantine};
use envelope::lower_envelope;
use mechanisms::{
    lower_breaker, lower_bulkhead, lower_hedge, lower_queue, lower_ratelimit, lower_request,
    lower_retry, lower_shedding,
};
use operation::{FLAGS, lower_operation};
pub use operation::{OPERATION_FLAGS, OPERATION_STATEMENTS};

/// Every stanza keyword the language accepts.
pub fn stanza_keywords() -> impl Iterator<Item = &'static str> {
    STANZAS.iter().map(|(keyword, _)| *keyword)
}

type LowerFn = fn(&mut Lowering<'_>, &Stanza);

/// The stanzas the language knows, each with its lowering function.
const STANZAS: &[(&str, LowerFn)] = &[
    ("request", lower_request),
    ("breaker", lower_breaker),
    ("bulkhead", lower_bulkhead),
    ("retry", lower_retry),
    ("hedge", lower_hedge),
    ("shedding", lower_shedding),
    ("ratelimit", lower_ratelimit),
    ("queue", lower_queue),
    ("chaos", lower_chaos),
    ("operation", lower_operation),
    ("assets", lower_assets),
    ("locality", lower_locality),
    ("ceilings", lower_ceilings),
    ("quarantine", lower_quarantine),
    ("envelope", lower_envelope),
];

/// Words that mean something else here than a user may expect, with the help that names the
/// word to use: a budget is time alone (`min_budget`, what is left of a deadline). `(stanza,
/// word, help)`; the stanza is `None` for a stanza keyword.
const OTHER_WORDS: &[(Option<&str>, &str, &str)] = &[
    (
        None,
        "budget",
        "did you mean `ceilings`? what a build may weigh is a `ceilings NAME { ... }` stanza (a budget is time, as in `min_budget`)",
    ),
    (
        Some("retry"),
        "budget",
        "did you mean `allowance`? the share of traffic retries may add is `allowance = 20% + 10/s` (a budget is time, as in `min_budget`)",
    ),
];

/// The help for a word listed in [`OTHER_WORDS`].
fn other_word(stanza: Option<&str>, word: &str) -> Option<String> {
    OTHER_WORDS
        .iter()
        .find(|(in_stanza, other, _)| *in_stanza == stanza && *other == word)
        .map(|(_, _, help)| (*help).to_owned())
}

/// The stanza keywords the language knows.
pub(crate) fn keywords() -> impl Iterator<Item = &'static str> + Clone {
    STANZAS.iter().map(|(keyword, _)| *keyword)
}

/// Lowers every stanza of `file` into `spec`, returning the problems found. Items whose
/// required settings are wrong or missing are left out, so validation does not report them
/// twice.
pub(crate) fn lower(file: &File, spec: &mut Spec) -> Lowered {
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
                    help: other_word(None, &stanza.keyword.text).unwrap_or_else(|| {
                        suggest::did_you_mean(&stanza.keyword.text, keywords(), "stanzas", "")
                    }),
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
pub(crate) struct Lowered {
    /// Problems found.
    pub(crate) diagnostics: Vec<Diagnostic>,
    /// Named items (`(kind, name)`) that were declared but left out of the spec because they had
    /// errors; references to them should not be reported as unknown.
    pub(crate) dropped: Vec<(&'static str, String)>,
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
            && (WorkClass::from_name(key).is_some() || FLAGS.contains(&key))
        {
            format!(
                "the class and flags go in the header: `operation NAME: critical, {key} {{ ... }}`"
            )
        } else if let Some(help) = other_word(Some(&stanza.keyword.text), key) {
            help
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
                format!(
                    "it is too large: the longest duration accepted is `{}` (about 114 years)",
                    crate::units::MAX_DURATION_TEXT
                ),
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

    /// The settings of `table` written in `body`, each read as its unit says; `complete`
    /// becomes false when one is wrong (and reported).
    fn table_settings<C>(
        &mut self,
        body: &Body<'_>,
        table: &[Setting<C>],
        complete: &mut bool,
    ) -> Vec<(&'static str, Located<Number>)> {
        let mut written = Vec::new();
        for setting in table {
            let Some((key, value)) = body.get(setting.key) else {
                continue;
            };
            let number = match setting.unit() {
                Unit::Duration => self
                    .duration(&key.text, value)
                    .map(|d| Located::new(Number::Duration(d.value), d.loc)),
                Unit::Count => self
                    .count(&key.text, value)
                    .map(|n| Located::new(Number::Count(n.value), n.loc)),
                Unit::Share => self
                    .ratio(&key.text, value)
                    .map(|r| Located::new(Number::Share(r.value), r.loc)),
            };
            match number {
                Some(number) => written.push((setting.key, number)),
                None => *complete = false,
            }
        }
        written
    }

    /// An optional string setting of `body`; `complete` becomes false when it is set but not a
    /// string (and reported).
    fn optional_string(
        &mut self,
        body: &Body<'_>,
        key: &str,
        complete: &mut bool,
    ) -> Option<Located<String>> {
        let (key, value) = body.get(key)?;
        let string = self.string(&key.text, value);
        *complete &= string.is_some();
        string
    }

    fn fail_mode(&mut self, key: &str, value: &Value) -> Option<Located<FailMode>> {
        if let [Term::Word(ident)] = value.terms.as_slice()
            && let Some(mode) = FailMode::from_name(&ident.text)
        {
            return Some(Located::new(mode, ident.loc));
        }
        let names = FailMode::ALL.map(FailMode::as_str);
        let help = match value.terms.as_slice() {
            [Term::Word(ident)] => suggest::closest(&ident.text, names)
                .map(|choice| format!("did you mean `{choice}`?")),
            _ => None,
        }
        .unwrap_or_else(|| {
            "`open` lets calls through, `closed` refuses them, `local` applies this instance's own rate".to_owned()
        });
        self.invalid(key, "`open`, `closed` or `local`", value, value.loc, help);
        None
    }

    /// `N per DURATION`, spelled `key = N per DURATION` or as a phrase.
    fn rate(&mut self, key: &str, value: &Value) -> Option<Located<Rate>> {
        match value.terms.as_slice() {
            [Term::Quantity(count), per, Term::Quantity(period)] if word(per, "per") => {
                let count = self.quantity_count(key, count);
                let period = self.quantity_duration(key, period);
                Some(Located::new(
                    Rate::new(count?.value, period?.value),
                    value.loc,
                ))
            }
            _ => {
                self.invalid(
                    key,
                    "a rate like `100 per 1m`",
                    value,
                    value.loc,
                    format!("write it as `{key} = 100 per 1m`"),
                );
                None
            }
        }
    }
}

fn word(term: &Term, expected: &str) -> bool {
    term.as_word() == Some(expected)
}
