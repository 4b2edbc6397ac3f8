//! The syntax tree: what was written, where, with its comments.
//!
//! The tree is generic (every stanza is a keyword, an optional name, optional tags and a body of
//! statements); what a stanza means is decided by [`crate::lower`]. The formatter works on this
//! tree, so it keeps every stanza, known or not, and every comment.

use std::time::Duration;

use crate::source::{Loc, SourceId};

/// A parsed file.
#[derive(Debug, Clone)]
pub struct File {
    /// The file in the source map.
    pub source: SourceId,
    /// Its stanzas, in order. Stanzas that could not be read are absent.
    pub stanzas: Vec<Stanza>,
    /// Every `//` comment, in order.
    pub comments: Vec<Comment>,
}

/// A name as written, with its location.
#[derive(Debug, Clone, PartialEq)]
pub struct Ident {
    /// The text.
    pub text: String,
    /// Where it was written.
    pub loc: Loc,
}

/// `KEYWORD [NAME] [: tag, tag] { statements }`.
#[derive(Debug, Clone)]
pub struct Stanza {
    /// `breaker`, `retry`, `operation`, ...
    pub keyword: Ident,
    /// The stanza's name, for the stanzas that have one.
    pub name: Option<Ident>,
    /// The tags after `:` (an operation's class and flags).
    pub tags: Vec<Ident>,
    /// The statements of the body, in order.
    pub statements: Vec<Statement>,
    /// The whole stanza, keyword to `}`.
    pub loc: Loc,
    /// Whether the body was written over several lines.
    pub multiline: bool,
    /// Whether some statement of the body could not be read (so lowering should not complain
    /// that a setting is missing: it may be the one that failed).
    pub has_errors: bool,
}

/// One statement of a body.
#[derive(Debug, Clone)]
pub struct Statement {
    /// What kind of statement.
    pub kind: StatementKind,
    /// The whole statement.
    pub loc: Loc,
}

/// The two shapes of statement.
#[derive(Debug, Clone)]
pub enum StatementKind {
    /// `key = value`.
    Setting {
        /// The key.
        key: Ident,
        /// The value.
        value: Value,
    },
    /// A bare phrase: `shared`, `100 per 1m`, `deferred at load 0.5`.
    Phrase(Value),
}

/// A sequence of terms: `5 failures within 30s`, `full_jitter(base = 50ms, cap = 1s)`.
#[derive(Debug, Clone)]
pub struct Value {
    /// The terms, in order.
    pub terms: Vec<Term>,
    /// The whole value.
    pub loc: Loc,
}

/// One term of a value.
#[derive(Debug, Clone)]
pub enum Term {
    /// A bare word: `failures`, `open`, a name.
    Word(Ident),
    /// A number with an optional unit: `3`, `30s`, `50%`, `10/s`, `0.25`.
    Quantity(Quantity),
    /// A string literal.
    Str(Str),
    /// `+`.
    Plus(Loc),
    /// `name(arg, key = value)`.
    Call(Call),
}

impl Term {
    /// Where the term was written.
    #[must_use]
    pub fn loc(&self) -> Loc {
        match self {
            Term::Word(ident) => ident.loc,
            Term::Quantity(quantity) => quantity.loc,
            Term::Str(string) => string.loc,
            Term::Plus(loc) => *loc,
            Term::Call(call) => call.loc,
        }
    }

    /// The word, if this term is one.
    #[must_use]
    pub fn as_word(&self) -> Option<&str> {
        match self {
            Term::Word(ident) => Some(&ident.text),
            _ => None,
        }
    }
}

/// A string literal.
#[derive(Debug, Clone)]
pub struct Str {
    /// The value, escapes resolved.
    pub value: String,
    /// The text between the quotes, as written.
    pub raw: String,
    /// Where it was written, quotes included.
    pub loc: Loc,
}

/// A call: `full_jitter(base = 50ms, cap = 1s)`, `shared(quorum = 2)`.
#[derive(Debug, Clone)]
pub struct Call {
    /// The function's name.
    pub name: Ident,
    /// The arguments, in order.
    pub args: Vec<Arg>,
    /// The whole call.
    pub loc: Loc,
}

/// One argument of a call.
#[derive(Debug, Clone)]
pub struct Arg {
    /// The key, for `key = value` arguments.
    pub key: Option<Ident>,
    /// The value (never contains a call).
    pub value: Value,
    /// The whole argument.
    pub loc: Loc,
}

/// A `//` comment.
#[derive(Debug, Clone)]
pub struct Comment {
    /// The text after `//`, trailing spaces removed.
    pub text: String,
    /// Where it was written.
    pub loc: Loc,
}

/// A number with an optional unit, as written.
#[derive(Debug, Clone, PartialEq)]
pub struct Quantity {
    /// The number as written (`-1`, `0.25`, `30`).
    pub number: String,
    /// The unit as written (`s`, `ms`, `%`, `/s`, `kb`), if any.
    pub unit: Option<String>,
    /// Where it was written.
    pub loc: Loc,
}

/// Why a quantity is not the kind of value a setting wants.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum QuantityError {
    /// The number is negative.
    Negative,
    /// The unit is missing.
    MissingUnit,
    /// The unit is not one this kind of value takes.
    UnknownUnit(String),
    /// A unit was given where a plain number is expected.
    UnexpectedUnit(String),
    /// A fraction where a whole number is expected, or a number too large.
    NotWhole,
}

/// Units a duration takes.
pub const DURATION_UNITS: &[&str] = &["ms", "s", "m", "h"];
/// Units a size takes.
pub const SIZE_UNITS: &[&str] = &["b", "kb", "mb", "gb"];

impl Quantity {
    fn magnitude(&self) -> f64 {
        self.number.parse::<f64>().unwrap_or(f64::NAN)
    }

    fn is_negative(&self) -> bool {
        self.number.starts_with('-')
    }

    /// The quantity as a duration: `ms`, `s`, `m` or `h`.
    pub fn as_duration(&self) -> Result<Duration, QuantityError> {
        let unit = self.unit.as_deref().ok_or(QuantityError::MissingUnit)?;
        let scale = match unit {
            "ms" => 0.001,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            other => return Err(QuantityError::UnknownUnit(other.to_owned())),
        };
        if self.is_negative() {
            return Err(QuantityError::Negative);
        }
        Duration::try_from_secs_f64(self.magnitude() * scale).map_err(|_| QuantityError::NotWhole)
    }

    /// The quantity as a size in bytes: `b`, `kb`, `mb` or `gb` (powers of 1024).
    pub fn as_size(&self) -> Result<u64, QuantityError> {
        let unit = self.unit.as_deref().ok_or(QuantityError::MissingUnit)?;
        let scale: f64 = match unit {
            "b" => 1.0,
            "kb" => 1024.0,
            "mb" => 1024.0 * 1024.0,
            "gb" => 1024.0 * 1024.0 * 1024.0,
            other => return Err(QuantityError::UnknownUnit(other.to_owned())),
        };
        if self.is_negative() {
            return Err(QuantityError::Negative);
        }
        let bytes = (self.magnitude() * scale).round();
        if bytes.is_finite() && bytes <= u64::MAX as f64 {
            #[expect(
                clippy::cast_possible_truncation,
                clippy::cast_sign_loss,
                reason = "checked finite, non-negative and in range just above"
            )]
            Ok(bytes as u64)
        } else {
            Err(QuantityError::NotWhole)
        }
    }

    /// The quantity as a ratio: a plain number (`0.25`) or a percentage (`25%`).
    pub fn as_ratio(&self) -> Result<f64, QuantityError> {
        let ratio = match self.unit.as_deref() {
            None => self.magnitude(),
            Some("%") => self.magnitude() / 100.0,
            Some(other) => return Err(QuantityError::UnknownUnit(other.to_owned())),
        };
        if ratio.is_finite() {
            Ok(ratio)
        } else {
            Err(QuantityError::NotWhole)
        }
    }

    /// The quantity as a whole count without a unit.
    pub fn as_count(&self) -> Result<u32, QuantityError> {
        if let Some(unit) = &self.unit {
            return Err(QuantityError::UnexpectedUnit(unit.clone()));
        }
        if self.is_negative() {
            return Err(QuantityError::Negative);
        }
        self.number
            .parse::<u32>()
            .map_err(|_| QuantityError::NotWhole)
    }
}

// Canonical text of the tree: one space between terms, `key = value`, `f(a = 1, b)`. The
// formatter prints with these, and diagnostics quote values with them.

impl std::fmt::Display for Value {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, term) in self.terms.iter().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            write!(f, "{term}")?;
        }
        Ok(())
    }
}

impl std::fmt::Display for Term {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Term::Word(ident) => f.write_str(&ident.text),
            Term::Quantity(quantity) => write!(f, "{quantity}"),
            Term::Str(string) => write!(f, "\"{}\"", string.raw),
            Term::Plus(_) => f.write_str("+"),
            Term::Call(call) => {
                write!(f, "{}(", call.name.text)?;
                for (i, arg) in call.args.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    if let Some(key) = &arg.key {
                        write!(f, "{} = ", key.text)?;
                    }
                    write!(f, "{}", arg.value)?;
                }
                f.write_str(")")
            }
        }
    }
}

impl std::fmt::Display for Quantity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}{}", self.number, self.unit.as_deref().unwrap_or(""))
    }
}

impl std::fmt::Display for Statement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.kind {
            StatementKind::Setting { key, value } => write!(f, "{} = {value}", key.text),
            StatementKind::Phrase(value) => write!(f, "{value}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::Loc;

    fn quantity(number: &str, unit: Option<&str>) -> Quantity {
        Quantity {
            number: number.to_owned(),
            unit: unit.map(str::to_owned),
            loc: Loc::External(0),
        }
    }

    #[test]
    fn units_convert() {
        assert_eq!(
            quantity("1.5", Some("s")).as_duration(),
            Ok(Duration::from_millis(1500))
        );
        assert_eq!(
            quantity("2", Some("m")).as_duration(),
            Ok(Duration::from_secs(120))
        );
        assert_eq!(quantity("10", Some("kb")).as_size(), Ok(10 * 1024));
        assert_eq!(
            quantity("1.5", Some("mb")).as_size(),
            Ok(1024 * 1024 * 3 / 2)
        );
        assert_eq!(quantity("25", Some("%")).as_ratio(), Ok(0.25));
        assert_eq!(quantity("0.25", None).as_ratio(), Ok(0.25));
        assert_eq!(quantity("7", None).as_count(), Ok(7));
    }

    #[test]
    fn wrong_units_are_errors_not_guesses() {
        assert_eq!(
            quantity("3", None).as_duration(),
            Err(QuantityError::MissingUnit)
        );
        assert_eq!(
            quantity("3", Some("sec")).as_duration(),
            Err(QuantityError::UnknownUnit("sec".to_owned()))
        );
        assert_eq!(
            quantity("-3", Some("s")).as_duration(),
            Err(QuantityError::Negative)
        );
        assert_eq!(
            quantity("3", Some("s")).as_count(),
            Err(QuantityError::UnexpectedUnit("s".to_owned()))
        );
        assert_eq!(
            quantity("2.5", None).as_count(),
            Err(QuantityError::NotWhole)
        );
        assert_eq!(
            quantity("99999999999999999999", None).as_count(),
            Err(QuantityError::NotWhole)
        );
        assert_eq!(
            quantity("1", Some("tb")).as_size(),
            Err(QuantityError::UnknownUnit("tb".to_owned()))
        );
    }
}
