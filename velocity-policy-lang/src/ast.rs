//! The syntax tree: what was written, where, with its comments.
//!
//! The tree is generic (every stanza is a keyword, an optional name, optional tags and a body of
//! statements); what a stanza means is decided by lowering (`crate::lower`). The formatter works
//! on this tree, so it keeps every stanza, known or not, and every comment.
//!
//! Only [`File`] leaves the crate, opaque: what [`crate::fmt::parse`] gives and
//! [`crate::fmt::format()`] takes.

use crate::source::{Loc, SourceId};

/// A parsed file: its syntax tree and its comments, for [`crate::fmt::format()`].
#[derive(Debug, Clone)]
pub struct File {
    /// The file in the source map.
    pub(crate) source: SourceId,
    /// Its stanzas, in order. Stanzas that could not be read are absent.
    pub(crate) stanzas: Vec<Stanza>,
    /// Every `//` comment, in order.
    pub(crate) comments: Vec<Comment>,
}

impl File {
    /// The file in the source map (its text is `sources.get(file.source())`).
    #[must_use]
    pub fn source(&self) -> SourceId {
        self.source
    }

    /// The text of every `//` comment, in order (after the `//`, trailing spaces removed).
    pub fn comments(&self) -> impl Iterator<Item = &str> {
        self.comments.iter().map(|comment| comment.text.as_str())
    }
}

/// A name as written, with its location.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Ident {
    /// The text.
    pub(crate) text: String,
    /// Where it was written.
    pub(crate) loc: Loc,
}

/// `KEYWORD [NAME] [: tag, tag] { statements }`.
#[derive(Debug, Clone)]
pub(crate) struct Stanza {
    /// `breaker`, `retry`, `operation`, ...
    pub(crate) keyword: Ident,
    /// The stanza's name, for the stanzas that have one.
    pub(crate) name: Option<Ident>,
    /// The tags after `:` (an operation's class and flags).
    pub(crate) tags: Vec<Ident>,
    /// The statements of the body, in order.
    pub(crate) statements: Vec<Statement>,
    /// The whole stanza, keyword to `}`.
    pub(crate) loc: Loc,
    /// Whether the body was written over several lines.
    pub(crate) multiline: bool,
    /// Whether some statement of the body could not be read (so lowering should not complain
    /// that a setting is missing: it may be the one that failed).
    pub(crate) has_errors: bool,
}

/// One statement of a body.
#[derive(Debug, Clone)]
pub(crate) struct Statement {
    /// What kind of statement.
    pub(crate) kind: StatementKind,
    /// The whole statement.
    pub(crate) loc: Loc,
}

/// The two shapes of statement.
#[derive(Debug, Clone)]
pub(crate) enum StatementKind {
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
pub(crate) struct Value {
    /// The terms, in order.
    pub(crate) terms: Vec<Term>,
    /// The whole value.
    pub(crate) loc: Loc,
}

/// One term of a value.
#[derive(Debug, Clone)]
pub(crate) enum Term {
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
    pub(crate) fn loc(&self) -> Loc {
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
    pub(crate) fn as_word(&self) -> Option<&str> {
        match self {
            Term::Word(ident) => Some(&ident.text),
            _ => None,
        }
    }
}

/// A string literal.
#[derive(Debug, Clone)]
pub(crate) struct Str {
    /// The value, escapes resolved.
    pub(crate) value: String,
    /// The text between the quotes, as written.
    pub(crate) raw: String,
    /// Where it was written, quotes included.
    pub(crate) loc: Loc,
}

/// A call: `full_jitter(base = 50ms, cap = 1s)`, `shared(quorum = 2)`.
#[derive(Debug, Clone)]
pub(crate) struct Call {
    /// The function's name.
    pub(crate) name: Ident,
    /// The arguments, in order.
    pub(crate) args: Vec<Arg>,
    /// The whole call.
    pub(crate) loc: Loc,
}

/// One argument of a call.
#[derive(Debug, Clone)]
pub(crate) struct Arg {
    /// The key, for `key = value` arguments.
    pub(crate) key: Option<Ident>,
    /// The value (never contains a call).
    pub(crate) value: Value,
    /// The whole argument.
    pub(crate) loc: Loc,
}

/// A `//` comment.
#[derive(Debug, Clone)]
pub(crate) struct Comment {
    /// The text after `//`, trailing spaces removed.
    pub(crate) text: String,
    /// Where it was written.
    pub(crate) loc: Loc,
}

/// A number with an optional unit, as written.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Quantity {
    /// The number as written (`-1`, `0.25`, `30`).
    pub(crate) number: String,
    /// The unit as written (`s`, `ms`, `%`, `/s`, `kb`), if any.
    pub(crate) unit: Option<String>,
    /// Where it was written.
    pub(crate) loc: Loc,
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
