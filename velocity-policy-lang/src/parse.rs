//! Text → pest pairs → [`crate::ast`] nodes with locations, recovering from errors so that one run
//! reports every syntax error of a file.
//!
//! Robustness is bounded explicitly: input above [`MAX_SOURCE_LEN`] bytes is refused before
//! parsing, invalid UTF-8 is a diagnostic (not a panic), the grammar has no recursive rule (so no
//! input can nest deeply enough to exhaust the stack), every recovery step consumes input (so the
//! parse is linear), and at most [`MAX_SYNTAX_ERRORS`] syntax errors are reported per file.

use pest::Parser as _;
use pest::iterators::Pair;

use crate::ast::{
    Arg, Call, Comment, File, Ident, Quantity, Stanza, Statement, StatementKind, Str, Term, Value,
};
use crate::diagnostic::{Diagnostic, Kind};
use crate::source::{Loc, SourceId, Sources};

/// pest's parser for `grammar.pest`, generated and checked in (the workspace's `tests/grammar`
/// keeps the two in step, and says how to regenerate it). Left as prettyplease prints it:
/// rustfmt does not finish on its nesting.
#[rustfmt::skip]
#[allow(
    dead_code,
    unreachable_pub,
    missing_docs,
    clippy::all,
    clippy::allow_attributes_without_reason,
    reason = "pest_generator's code as it makes it: public items in a private module"
)]
mod grammar;

use grammar::{Grammar, Rule};

/// The largest policy file accepted, in bytes (4 MiB: a generated 10,000-line file is about
/// 250 KiB).
pub const MAX_SOURCE_LEN: usize = 4 * 1024 * 1024;

/// Syntax errors reported per file before giving up on the rest of it.
pub const MAX_SYNTAX_ERRORS: usize = 50;

const STANZA_HELP: &str = "a stanza is written `KEYWORD NAME { key = value; ... }`, with its `{` on the same line as the keyword";
const UNCLOSED_HELP: &str =
    "a stanza's body ends with `}` before the next stanza begins: add the missing `}`";
const BLOCK_COMMENT_HELP: &str = "policy files have only `//` comments, each to the end of its line: start every comment line with `//`";
const STATEMENT_HELP: &str =
    "a statement is `key = value` or a phrase such as `100 per 1m`; end it with `;` or a new line";

/// A parsed file and the problems found reading it.
#[derive(Debug, Clone)]
pub struct Parsed {
    /// The syntax tree; stanzas that could not be read are left out.
    pub file: File,
    /// Syntax errors, in order.
    pub diagnostics: Vec<Diagnostic>,
}

/// Adds `bytes` to `sources` under `name` and parses it.
///
/// Never panics and never fails: a file that is too large, not UTF-8 or not well formed gives
/// a [`File`] with what could be read and the diagnostics saying why.
pub fn parse(sources: &mut Sources, name: impl Into<String>, bytes: &[u8]) -> Parsed {
    let name = name.into();
    if bytes.len() > MAX_SOURCE_LEN {
        return too_large(sources, name, bytes.len());
    }
    match std::str::from_utf8(bytes) {
        Ok(text) => {
            let id = sources.add(name, text);
            parse_text(id, text)
        }
        Err(error) => {
            let offset = error.valid_up_to();
            let text = String::from_utf8_lossy(bytes);
            // The lossy text is identical up to `offset`, where U+FFFD (3 bytes) now stands.
            let end = text
                .get(offset..)
                .and_then(|rest| rest.chars().next())
                .map_or(offset, |c| offset + c.len_utf8());
            let id = sources.add(name, text.into_owned());
            refused(
                id,
                Diagnostic::new(
                    Kind::InvalidUtf8 { offset },
                    Loc::span(id, offset, end),
                    "not UTF-8",
                ),
            )
        }
    }
}

/// Reads the file at `path` and parses it, as [`parse`] does, named by its path. Only a regular
/// file is read (a named pipe or a device is an [`std::io::ErrorKind::InvalidInput`] error, see
/// [`crate::source::read_file`]), and no more of it than [`MAX_SOURCE_LEN`] and a byte: a
/// larger one is a `policy::too-large` diagnostic with its size on disk.
pub fn parse_file(sources: &mut Sources, path: &std::path::Path) -> std::io::Result<Parsed> {
    let read = crate::source::read_file(path, MAX_SOURCE_LEN)?;
    let name = path.display().to_string();
    Ok(if read.exceeds(MAX_SOURCE_LEN) {
        too_large(
            sources,
            name,
            usize::try_from(read.len).unwrap_or(usize::MAX),
        )
    } else {
        parse(sources, name, &read.bytes)
    })
}

/// Adds an empty file to `sources` under `name`, with the diagnostic that a file of `len`
/// bytes is over [`MAX_SOURCE_LEN`].
fn too_large(sources: &mut Sources, name: impl Into<String>, len: usize) -> Parsed {
    let id = sources.add(name, "");
    refused(
        id,
        Diagnostic::new(
            Kind::TooLarge {
                len,
                max: MAX_SOURCE_LEN,
            },
            Loc::span(id, 0, 0),
            "this file",
        ),
    )
}

fn refused(source: SourceId, diagnostic: Diagnostic) -> Parsed {
    Parsed {
        file: File {
            source,
            stanzas: Vec::new(),
            comments: Vec::new(),
        },
        diagnostics: vec![diagnostic],
    }
}

/// Parses text that is already in the source map as `source`, with pest and recovery.
#[must_use]
pub(crate) fn parse_text(source: SourceId, text: &str) -> Parsed {
    let mut reader = Reader {
        source,
        text,
        diagnostics: Vec::new(),
        syntax_errors: 0,
    };
    let stanzas = match Grammar::parse(Rule::file, text) {
        Ok(mut pairs) => pairs
            .next()
            .map(|file| reader.file(file))
            .unwrap_or_default(),
        // Recovery makes `file` match any input; this is a safety net, not a path.
        Err(error) => {
            reader.syntax_error(&error, 0, STANZA_HELP);
            Vec::new()
        }
    };
    Parsed {
        file: File {
            source,
            stanzas,
            comments: comments(source, text),
        },
        diagnostics: reader.diagnostics,
    }
}

struct Reader<'t> {
    source: SourceId,
    text: &'t str,
    diagnostics: Vec<Diagnostic>,
    syntax_errors: usize,
}

impl<'t> Reader<'t> {
    fn loc(&self, pair: &Pair<'_, Rule>) -> Loc {
        let span = pair.as_span();
        Loc::span(self.source, span.start(), span.end())
    }

    fn ident(&self, pair: &Pair<'_, Rule>) -> Ident {
        Ident {
            text: pair.as_str().to_owned(),
            loc: self.loc(pair),
        }
    }

    fn file(&mut self, file: Pair<'t, Rule>) -> Vec<Stanza> {
        let mut stanzas = Vec::new();
        for pair in file.into_inner() {
            match pair.as_rule() {
                Rule::stanza => stanzas.push(self.stanza(pair)),
                Rule::bad_stanza => self.reparse(&pair, Rule::stanza_only, STANZA_HELP),
                _ => {}
            }
        }
        stanzas
    }

    fn stanza(&mut self, stanza: Pair<'t, Rule>) -> Stanza {
        let loc = self.loc(&stanza);
        let mut keyword = None;
        let mut name = None;
        let mut tags = Vec::new();
        let mut statements = Vec::new();
        let mut has_errors = false;
        let (mut open, mut close) = (0, 0);
        for pair in stanza.into_inner() {
            match pair.as_rule() {
                Rule::keyword => keyword = Some(self.ident(&pair)),
                Rule::name => name = Some(self.ident(&pair)),
                Rule::tags => {
                    tags = pair
                        .into_inner()
                        .filter(|tag| tag.as_rule() == Rule::tag)
                        .map(|tag| self.ident(&tag))
                        .collect();
                }
                Rule::open => open = pair.as_span().start(),
                Rule::close => close = pair.as_span().end(),
                Rule::body => {
                    for statement in pair.into_inner() {
                        match statement.as_rule() {
                            Rule::statement => statements.push(self.statement(statement)),
                            Rule::bad_statement => {
                                has_errors = true;
                                self.reparse(&statement, Rule::statement_only, STATEMENT_HELP);
                            }
                            _ => {}
                        }
                    }
                }
                _ => {}
            }
        }
        let keyword = keyword.unwrap_or_else(|| Ident {
            text: String::new(),
            loc,
        });
        Stanza {
            keyword,
            name,
            tags,
            statements,
            loc,
            multiline: self
                .text
                .get(open..close)
                .is_some_and(|body| body.contains('\n')),
            has_errors,
        }
    }

    fn statement(&mut self, statement: Pair<'t, Rule>) -> Statement {
        let loc = self.loc(&statement);
        let mut kind = StatementKind::Phrase(Value {
            terms: Vec::new(),
            loc,
        });
        for pair in statement.into_inner() {
            match pair.as_rule() {
                Rule::setting => {
                    let mut key = None;
                    let mut value = None;
                    for part in pair.into_inner() {
                        match part.as_rule() {
                            Rule::key => key = Some(self.ident(&part)),
                            Rule::value => value = Some(self.value(part)),
                            _ => {}
                        }
                    }
                    if let (Some(key), Some(value)) = (key, value) {
                        kind = StatementKind::Setting { key, value };
                    }
                }
                Rule::phrase => kind = StatementKind::Phrase(self.value(pair)),
                _ => {}
            }
        }
        Statement { kind, loc }
    }

    fn value(&mut self, value: Pair<'t, Rule>) -> Value {
        let loc = self.loc(&value);
        let terms = value
            .into_inner()
            .filter_map(|term| self.term(term))
            .collect();
        Value { terms, loc }
    }

    fn term(&mut self, term: Pair<'t, Rule>) -> Option<Term> {
        let loc = self.loc(&term);
        Some(match term.as_rule() {
            Rule::word => Term::Word(self.ident(&term)),
            Rule::plus => Term::Plus(loc),
            Rule::quantity => {
                let mut number = String::new();
                let mut unit = None;
                for part in term.into_inner() {
                    match part.as_rule() {
                        Rule::number => part.as_str().clone_into(&mut number),
                        Rule::unit => unit = Some(part.as_str().to_owned()),
                        _ => {}
                    }
                }
                Term::Quantity(Quantity { number, unit, loc })
            }
            Rule::string => {
                let raw = term
                    .into_inner()
                    .next()
                    .map(|text| text.as_str())
                    .unwrap_or("");
                Term::Str(Str {
                    value: unescape(raw),
                    raw: raw.to_owned(),
                    loc,
                })
            }
            Rule::call => {
                let mut name = None;
                let mut args = Vec::new();
                for part in term.into_inner() {
                    match part.as_rule() {
                        Rule::word => name = Some(self.ident(&part)),
                        Rule::arg => args.push(self.arg(part)),
                        _ => {}
                    }
                }
                Term::Call(Call {
                    name: name?,
                    args,
                    loc,
                })
            }
            _ => return None,
        })
    }

    fn arg(&mut self, arg: Pair<'t, Rule>) -> Arg {
        let loc = self.loc(&arg);
        let mut key = None;
        let mut value = Value {
            terms: Vec::new(),
            loc,
        };
        for part in arg.into_inner() {
            match part.as_rule() {
                Rule::key => key = Some(self.ident(&part)),
                Rule::arg_value => value = self.value(part),
                _ => {}
            }
        }
        Arg { key, value, loc }
    }

    /// Re-parses a chunk that recovery skipped, with a strict rule, to say precisely what is
    /// wrong in it.
    fn reparse(&mut self, chunk: &Pair<'t, Rule>, rule: Rule, help: &str) {
        if self.syntax_errors > MAX_SYNTAX_ERRORS {
            return;
        }
        let base = chunk.as_span().start();
        match Grammar::parse(rule, chunk.as_str()) {
            Err(error) => self.syntax_error(&error, base, help),
            // The strict rule accepts it on its own; what failed is around it (a statement
            // glued to the next one, say). Point at the whole chunk.
            Ok(_) => {
                let found = describe_chunk(chunk.as_str());
                self.push_syntax(
                    format!("unexpected {found}"),
                    Loc::span(self.source, base, chunk.as_span().end()),
                    help,
                );
            }
        }
    }

    fn syntax_error(&mut self, error: &pest::error::Error<Rule>, base: usize, help: &str) {
        let offset = base
            + match error.location {
                pest::error::InputLocation::Pos(pos) => pos,
                pest::error::InputLocation::Span((start, _)) => start,
            };
        let (found, len) = describe_at(self.text, offset);
        let mut help = help;
        let rest = self.text.get(offset..).unwrap_or("");
        if rest.starts_with("/*") || rest.starts_with("*/") {
            let token = &rest[..2];
            self.push_syntax(
                format!("`{token}` is not a comment here: only `//` comments exist"),
                Loc::span(self.source, offset, offset + 2),
                BLOCK_COMMENT_HELP,
            );
            return;
        }
        let message = match &error.variant {
            // A `{` where the body should go on or close: the stanza above was never closed.
            pest::error::ErrorVariant::ParsingError { positives, .. }
                if found == "`{`" && positives.contains(&Rule::close) =>
            {
                help = UNCLOSED_HELP;
                "expected `}` to close the stanza above, found the `{` of another".to_owned()
            }
            pest::error::ErrorVariant::ParsingError { positives, .. } => {
                match expected(positives) {
                    Some(expected) => format!("expected {expected}, found {found}"),
                    None => format!("unexpected {found}"),
                }
            }
            pest::error::ErrorVariant::CustomError { message } => message.clone(),
        };
        self.push_syntax(message, Loc::span(self.source, offset, offset + len), help);
    }

    fn push_syntax(&mut self, message: String, loc: Loc, help: &str) {
        self.syntax_errors += 1;
        if self.syntax_errors < MAX_SYNTAX_ERRORS {
            self.diagnostics.push(Diagnostic::new(
                Kind::Syntax {
                    message,
                    help: help.to_owned(),
                },
                loc,
                "here",
            ));
        } else if self.syntax_errors == MAX_SYNTAX_ERRORS {
            self.diagnostics.push(Diagnostic::new(
                Kind::Syntax {
                    message: format!("too many syntax errors, stopped after {MAX_SYNTAX_ERRORS}"),
                    help: "is this a policy file? fix the errors above and check again".to_owned(),
                },
                loc,
                "and more from here on",
            ));
        }
    }
}

/// What the parser wanted, in words, with the token classes merged ("a value", not "a word, a
/// number or a string").
fn expected(positives: &[Rule]) -> Option<String> {
    let mut words: Vec<&str> = Vec::new();
    for rule in positives {
        let word = match rule {
            Rule::keyword | Rule::stanza | Rule::stanza_only => "a stanza",
            Rule::name => "a name",
            Rule::tags | Rule::colon => "`:`",
            Rule::tag => "a class or flag",
            Rule::open => "`{`",
            Rule::close => "`}`",
            Rule::body | Rule::statement | Rule::setting | Rule::phrase | Rule::statement_only => {
                "a statement"
            }
            Rule::key => "a setting name",
            Rule::equals => "`=`",
            Rule::value
            | Rule::arg_value
            | Rule::call
            | Rule::quantity
            | Rule::number
            | Rule::string
            | Rule::word
            | Rule::plus
            | Rule::arg => "a value",
            Rule::unit => "a unit",
            Rule::string_text => "the end of the string",
            Rule::comma => "`,`",
            Rule::lparen => "`(`",
            Rule::rparen => "`)`",
            Rule::EOI => "end of file",
            _ => continue,
        };
        if !words.contains(&word) {
            words.push(word);
        }
    }
    match words.as_slice() {
        [] => None,
        [one] => Some((*one).to_owned()),
        [init @ .., last] => Some(format!("{} or {last}", init.join(", "))),
    }
}

/// Describes what stands at `offset` (`` `foo` ``, "end of line", "end of file") and how many
/// bytes of it to underline.
fn describe_at(text: &str, offset: usize) -> (String, usize) {
    let rest = text.get(offset..).unwrap_or("");
    let Some(first) = rest.chars().next() else {
        return ("end of file".to_owned(), 0);
    };
    if first == '\n' || first == '\r' {
        return ("end of line".to_owned(), 0);
    }
    let is_word = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '.';
    let len = if is_word(first) {
        rest.find(|c: char| !is_word(c)).unwrap_or(rest.len())
    } else {
        first.len_utf8()
    };
    let token: String = rest.get(..len).unwrap_or("").chars().take(40).collect();
    (format!("`{}`", token.escape_debug()), len)
}

fn describe_chunk(chunk: &str) -> String {
    let token: String = chunk.trim().chars().take(40).collect();
    format!("`{}`", token.escape_debug())
}

fn unescape(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some(other) => out.push(other),
                None => {}
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Every `//` comment outside string literals. Strings never span lines, so the scan agrees
/// with the grammar on any file that parses.
fn comments(source: SourceId, text: &str) -> Vec<Comment> {
    let mut out = Vec::new();
    for (line_start, line) in line_spans(text) {
        let bytes = line.as_bytes();
        let mut in_string = false;
        let mut i = 0;
        while i < bytes.len() {
            match (bytes[i], in_string) {
                (b'\\', true) => i += 1,
                (b'"', _) => in_string = !in_string,
                (b'/', false) if bytes.get(i + 1) == Some(&b'/') => {
                    let body = line.get(i + 2..).unwrap_or("");
                    let body = body.trim_end_matches(['\r', ' ', '\t']);
                    out.push(Comment {
                        text: body.to_owned(),
                        loc: Loc::span(source, line_start + i, line_start + i + 2 + body.len()),
                    });
                    break;
                }
                _ => {}
            }
            i += 1;
        }
    }
    out
}

/// The lines of `text` as the grammar's `NEWLINE` ends them (`\n`, `\r\n` or a lone `\r`), each
/// with the offset it starts at; `\r\n` leaves an empty line between its two bytes.
fn line_spans(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let mut start = 0;
    text.split(['\n', '\r']).map(move |line| {
        let at = start;
        start += line.len() + 1;
        (at, line)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_str(text: &str) -> Parsed {
        parse(&mut Sources::new(), "test.policy", text.as_bytes())
    }

    #[test]
    fn a_comment_ends_where_the_grammar_ends_it_at_a_lone_carriage_return() {
        // Found by tests/fuzz.rs: the formatter wrote `// a\rb = 2` back as one comment, and
        // `b = 2` after it again, so each pass added a line.
        let text = "// one\rtwo = 2 // three\r\n// four\n";
        let source = Sources::new().add("test.policy", text);
        let found: Vec<_> = comments(source, text)
            .into_iter()
            .map(|comment| comment.text)
            .collect();
        assert_eq!(found, [" one", " three", " four"]);
    }

    #[test]
    fn reads_stanzas_statements_and_terms() {
        let parsed = parse_str(
            "// head\nretry transient { attempts = 3; backoff = full_jitter(base = 50ms, cap = 1s) } // tail\n\
             operation x: deferred, idempotent {\n  retry = transient\n  fallback = \"a\\\"b\"\n}\n",
        );
        assert!(parsed.diagnostics.is_empty(), "{:?}", parsed.diagnostics);
        let stanzas = &parsed.file.stanzas;
        assert_eq!(stanzas.len(), 2);
        assert_eq!(stanzas[0].keyword.text, "retry");
        assert_eq!(stanzas[0].statements.len(), 2);
        assert!(!stanzas[0].multiline);
        assert!(stanzas[1].multiline);
        assert_eq!(stanzas[1].tags.len(), 2);
        assert_eq!(parsed.file.comments.len(), 2);
        let StatementKind::Setting { value, .. } = &stanzas[1].statements[1].kind else {
            panic!("not a setting")
        };
        let [Term::Str(string)] = value.terms.as_slice() else {
            panic!("not a string")
        };
        assert_eq!(string.value, "a\"b");
    }

    #[test]
    fn recovers_and_reports_every_bad_statement() {
        let parsed = parse_str(
            "breaker a {\n  cooldown = \n  open_after = @\n}\nbulkhead b { max_concurrent = 1 }\n",
        );
        assert_eq!(parsed.diagnostics.len(), 2, "{:?}", parsed.diagnostics);
        assert_eq!(parsed.file.stanzas.len(), 2);
        assert!(parsed.file.stanzas[0].has_errors);
    }

    #[test]
    fn block_comments_are_said_to_not_exist() {
        for text in [
            "/* the budget */\nrequest { deadline = 1s }\n",
            "request { deadline = 1s /* why */ }\n",
            "/*\n  two lines\n*/\nrequest { deadline = 1s }\n",
        ] {
            let parsed = parse_str(text);
            let first = parsed.diagnostics.first().expect("an error");
            let message = first.to_string();
            assert!(
                message.contains("only `//` comments exist"),
                "{text:?}: {message}"
            );
        }
    }

    #[test]
    fn refuses_invalid_utf8_and_huge_input() {
        let parsed = parse(&mut Sources::new(), "x", b"request { \xff }");
        assert_eq!(parsed.diagnostics[0].code(), "policy::invalid-utf8");
        let huge = vec![b' '; MAX_SOURCE_LEN + 1];
        let parsed = parse(&mut Sources::new(), "x", &huge);
        assert_eq!(parsed.diagnostics[0].code(), "policy::too-large");
    }

    #[test]
    fn deep_nesting_is_a_syntax_error_not_a_stack_overflow() {
        let deep = "operation x: critical { a = f(".to_owned() + &"(".repeat(200_000) + "\n";
        let parsed = parse_str(&deep);
        assert!(!parsed.diagnostics.is_empty());
        let braces = "{".repeat(200_000);
        assert!(!parse_str(&braces).diagnostics.is_empty());
    }
}
