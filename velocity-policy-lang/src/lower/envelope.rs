//! `envelope { ... }`: how far run-time overrides may move the compiled numbers, where the
//! default (a quarter to four times the compiled value) is not what the crate wants.
//!
//! ```text
//! envelope {
//!     operation search deadline within 10% to 400%
//!     breaker payments within 50% to 200%
//!     shedding deferred within 50% to 150%
//! }
//! ```
//!
//! Each line names a stanza an override may tune (its keyword, its name unless it is
//! `shedding`), optionally one of its settings (else every overridable number of the stanza),
//! and the shares of the compiled value an override may set, in percent: the lower at most
//! 100%, the upper at least 100%. Only the crate's compiled policy can say this: an override
//! file naming `envelope` is refused (`policy::not-overridable`).

use crate::ast::{Stanza, Term};
use crate::source::Located;
use crate::spec::EnvelopeSpec;
use crate::spec::overridable;

use super::{Lowering, word};

const EXPECTED: &str = "`KIND NAME [SETTING] within LOW% to HIGH%`";
const EXAMPLE: &str = "write a line such as `operation search deadline within 10% to 400%`, or `shedding deferred within 50% to 150%`";

pub(super) fn lower_envelope(lowering: &mut Lowering<'_>, stanza: &Stanza) {
    lowering.unnamed(stanza);
    let body = lowering.body(stanza, &[]);
    for phrase in &body.phrases {
        let terms = phrase.terms.as_slice();
        let Some(within) = terms.iter().position(|term| word(term, "within")) else {
            lowering.invalid(
                "envelope",
                EXPECTED,
                *phrase,
                phrase.loc,
                EXAMPLE.to_owned(),
            );
            continue;
        };
        let (head, tail) = terms.split_at(within);
        let words: Option<Vec<_>> = head
            .iter()
            .map(|term| match term {
                Term::Word(ident) => Some(ident),
                _ => None,
            })
            .collect();
        let (Some(words), [_, Term::Quantity(low), to, Term::Quantity(high)]) = (words, tail)
        else {
            lowering.invalid(
                "envelope",
                EXPECTED,
                *phrase,
                phrase.loc,
                EXAMPLE.to_owned(),
            );
            continue;
        };
        if !word(to, "to") {
            lowering.invalid(
                "envelope",
                EXPECTED,
                *phrase,
                phrase.loc,
                EXAMPLE.to_owned(),
            );
            continue;
        }
        let Some((keyword, rest)) = words.split_first() else {
            lowering.invalid(
                "envelope",
                EXPECTED,
                *phrase,
                phrase.loc,
                EXAMPLE.to_owned(),
            );
            continue;
        };
        let overridable = overridable();
        let tunable: Vec<&str> = overridable
            .iter()
            .map(|(known, _)| *known)
            .filter(|known| *known != "chaos")
            .collect();
        let Some((_, keys)) = overridable
            .iter()
            .find(|(known, _)| *known == keyword.text && *known != "chaos")
        else {
            lowering.invalid(
                "envelope",
                &format!(
                    "a stanza an override tunes ({})",
                    tunable
                        .iter()
                        .map(|known| format!("`{known}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                &keyword.text,
                keyword.loc,
                EXAMPLE.to_owned(),
            );
            continue;
        };
        let (name, key) = match (keyword.text.as_str(), rest) {
            ("shedding", []) => (None, None),
            ("shedding", [key]) => (None, Some(*key)),
            (_, [name]) if keyword.text != "shedding" => (Some(*name), None),
            (_, [name, key]) if keyword.text != "shedding" => (Some(*name), Some(*key)),
            _ => {
                lowering.invalid(
                    "envelope",
                    EXPECTED,
                    *phrase,
                    phrase.loc,
                    EXAMPLE.to_owned(),
                );
                continue;
            }
        };
        if let Some(key) = key
            && !keys.contains(&key.text.as_str())
        {
            lowering.invalid(
                "envelope",
                &format!(
                    "a number an override of a `{}` may set ({})",
                    keyword.text,
                    keys.iter()
                        .map(|key| format!("`{key}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                &key.text,
                key.loc,
                EXAMPLE.to_owned(),
            );
            continue;
        }
        let percent = |quantity: &crate::ast::Quantity| match quantity.unit.as_deref() {
            Some("%") => quantity
                .as_ratio()
                .ok()
                .filter(|share| share.is_finite() && *share >= 0.0),
            _ => None,
        };
        match (percent(low), percent(high)) {
            (Some(low_share), Some(high_share)) if low_share <= 1.0 && high_share >= 1.0 => {
                lowering.spec.envelopes.push(EnvelopeSpec {
                    keyword: Located::new(keyword.text.clone(), keyword.loc),
                    name: name.map(|name| Located::new(name.text.clone(), name.loc)),
                    key: key.map(|key| Located::new(key.text.clone(), key.loc)),
                    low: low_share,
                    high: high_share,
                    loc: phrase.loc,
                });
            }
            _ => lowering.invalid(
                "envelope",
                "shares in percent around the compiled value, the lower at most `100%` and the upper at least `100%`",
                *phrase,
                low.loc.to(high.loc),
                EXAMPLE.to_owned(),
            ),
        }
    }
}
