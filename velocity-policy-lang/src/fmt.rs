//! Canonical formatting of a `.policy` file: idempotent, and every comment kept.
//!
//! The rules: one stanza header per line (`keyword name: tag, tag {`); a body written on one
//! line stays on one line (`{ a = 1; b = 2 }`) unless it would pass [`MAX_WIDTH`] columns; a
//! body written over several lines gets one statement per line, indented by four spaces, no
//! `;`; one space between terms, `key = value`, `f(a = 1, b = 2)`; blank lines between items
//! are kept, at most one in a row; comments stay where they were, on their own line or at the
//! end of the line they ended.
//!
//! The formatter works on the syntax tree, not the model, so it keeps every comment and every
//! stanza, known or not: [`parse`] a file, and [`format()`] it if it parsed without errors.
//!
//! ```
//! use velocity_policy_lang::Sources;
//! use velocity_policy_lang::fmt::{format, parse};
//!
//! let text = "breaker   p{open_after=5 failures within 30s;cooldown=20s}  // why\n";
//! let mut sources = Sources::new();
//! let parsed = parse(&mut sources, "p.policy", text.as_bytes());
//! assert!(parsed.diagnostics.is_empty());
//! assert_eq!(
//!     format(&parsed.file, text),
//!     "breaker p { open_after = 5 failures within 30s; cooldown = 20s } // why\n"
//! );
//! ```

use std::fmt::Write as _;

pub use crate::ast::File;
use crate::ast::{Comment, Stanza, Statement, StatementKind};
pub use crate::parse::{Parsed, parse, parse_file};

/// A one-line stanza longer than this is broken over several lines.
pub const MAX_WIDTH: usize = 100;

const INDENT: &str = "    ";

/// Formats a parsed file. `text` is the text it was parsed from (the formatter reads blank
/// lines from it). Only call this on a file that parsed without errors: stanzas that could not
/// be read are not in the tree, and would be lost.
#[must_use]
pub fn format(file: &File, text: &str) -> String {
    let mut printer = Printer {
        text,
        comments: &file.comments,
        next_comment: 0,
        out: String::new(),
    };
    let mut previous_end: Option<usize> = None;
    for stanza in &file.stanzas {
        let Some(range) = stanza.loc.range() else {
            continue;
        };
        printer.comments_before(range.start, "", &mut previous_end);
        if let Some(end) = previous_end {
            printer.blank_line_if_gap(end, range.start);
        }
        printer.stanza(stanza, range.start, range.end);
        previous_end = Some(range.end);
    }
    printer.comments_before(usize::MAX, "", &mut previous_end);
    printer.out
}

struct Printer<'a> {
    text: &'a str,
    comments: &'a [Comment],
    next_comment: usize,
    out: String,
}

fn start(comment: &Comment) -> usize {
    comment.loc.range().map_or(0, |range| range.start)
}

fn end(comment: &Comment) -> usize {
    comment.loc.range().map_or(0, |range| range.end)
}

/// Where a statement's last token ends (its span may run on over a trailing comment).
fn statement_end(statement: &Statement) -> usize {
    let value = match &statement.kind {
        StatementKind::Setting { value, .. } | StatementKind::Phrase(value) => value,
    };
    value
        .loc
        .range()
        .or_else(|| statement.loc.range())
        .map_or(0, |range| range.end)
}

impl Printer<'_> {
    fn gap(&self, from: usize, to: usize) -> &str {
        self.text.get(from.min(to)..to).unwrap_or("")
    }

    fn same_line(&self, from: usize, to: usize) -> bool {
        !self.gap(from, to).contains('\n')
    }

    fn blank_line_if_gap(&mut self, from: usize, to: usize) {
        if self.gap(from, to).matches('\n').count() >= 2 && !self.out.is_empty() {
            self.out.push('\n');
        }
    }

    /// Prints the comments that start before `limit`: a comment on the line where the previous
    /// item ended trails that line; the others get lines of their own.
    fn comments_before(&mut self, limit: usize, indent: &str, previous_end: &mut Option<usize>) {
        while let Some(comment) = self.comments.get(self.next_comment) {
            if start(comment) >= limit {
                break;
            }
            self.next_comment += 1;
            let trailing = previous_end.is_some_and(|end| self.same_line(end, start(comment)));
            if trailing && self.out.ends_with('\n') {
                self.out.pop();
                let _ = writeln!(self.out, " //{}", comment.text);
            } else {
                if let Some(end) = *previous_end {
                    self.blank_line_if_gap(end, start(comment));
                }
                let _ = writeln!(self.out, "{indent}//{}", comment.text);
            }
            *previous_end = Some(end(comment));
        }
    }

    fn header(stanza: &Stanza) -> String {
        let mut header = stanza.keyword.text.clone();
        if let Some(name) = &stanza.name {
            header.push(' ');
            header.push_str(&name.text);
        }
        if !stanza.tags.is_empty() {
            header.push_str(": ");
            let tags: Vec<&str> = stanza.tags.iter().map(|tag| tag.text.as_str()).collect();
            header.push_str(&tags.join(", "));
        }
        header.push_str(" {");
        header
    }

    fn stanza(&mut self, stanza: &Stanza, stanza_start: usize, stanza_end: usize) {
        let header = Self::header(stanza);
        let has_inner_comments = self
            .comments
            .get(self.next_comment)
            .is_some_and(|comment| start(comment) < stanza_end);
        if !stanza.multiline && !has_inner_comments {
            let body: Vec<String> = stanza.statements.iter().map(ToString::to_string).collect();
            let line = if body.is_empty() {
                format!("{header}}}")
            } else {
                format!("{header} {} }}", body.join("; "))
            };
            if line.chars().count() <= MAX_WIDTH {
                let _ = writeln!(self.out, "{line}");
                return;
            }
        }
        let _ = writeln!(self.out, "{header}");
        // The header line ends at the keyword's line: a comment there trails the header.
        let mut previous_end = Some(stanza_start);
        for statement in &stanza.statements {
            let Some(range) = statement.loc.range() else {
                continue;
            };
            self.comments_before(range.start, INDENT, &mut previous_end);
            if let Some(end) = previous_end
                && end != stanza_start
            {
                self.blank_line_if_gap(end, range.start);
            }
            let _ = writeln!(self.out, "{INDENT}{statement}");
            previous_end = Some(statement_end(statement));
        }
        self.comments_before(stanza_end, INDENT, &mut previous_end);
        self.out.push_str("}\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::Sources;

    fn fmt(text: &str) -> String {
        let parsed = parse(&mut Sources::new(), "t.policy", text.as_bytes());
        assert!(parsed.diagnostics.is_empty(), "{:?}", parsed.diagnostics);
        format(&parsed.file, text)
    }

    #[test]
    fn normalises_spacing_and_keeps_comments() {
        let input = "// top\n\n\nbreaker   p{open_after=5 failures within 30s;cooldown=20s;shared}  // trailing\noperation x :critical,idempotent {\n// lead\n  deadline=3s // why\n\n\n  retry=r;backoff_note=full_jitter( base=1s ,cap=2s )\n  // end\n}\n";
        let out = fmt(input);
        assert_eq!(
            out,
            "// top\n\nbreaker p { open_after = 5 failures within 30s; cooldown = 20s; shared } // trailing\noperation x: critical, idempotent {\n    // lead\n    deadline = 3s // why\n\n    retry = r\n    backoff_note = full_jitter(base = 1s, cap = 2s)\n    // end\n}\n"
        );
        assert_eq!(fmt(&out), out);
    }

    #[test]
    fn breaks_long_one_line_stanzas() {
        let input = format!(
            "operation {}: critical {{ deadline = 1s; min_budget = 100ms; expected_cost = 50ms }}\n",
            "x".repeat(40)
        );
        let out = fmt(&input);
        assert!(out.contains("{\n    deadline = 1s\n"), "{out}");
        assert_eq!(fmt(&out), out);
    }

    #[test]
    fn empty_file_stays_empty() {
        assert_eq!(fmt(""), "");
        assert_eq!(fmt("// only\n"), "// only\n");
    }
}
