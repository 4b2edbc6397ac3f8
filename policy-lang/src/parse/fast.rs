//! A hand-written reader of `grammar.pest` for files without a syntax error: the common case of
//! `policy check`, at a fraction of pest's cost per token.
//!
//! The grammar stays the grammar of record. This reader follows its rules one for one (the same
//! ordered choices, the same implicit whitespace and comment skip between tokens, the same spans:
//! a statement's span takes the skip before its end as pest's does) and builds the same tree as
//! [`super::Reader`] builds from pest's pairs. It gives up at the first place where the grammar
//! would need its recovery rules (`bad_stanza`, `bad_statement`), which is where pest would
//! report a syntax error: the caller then parses the whole file with pest, so every diagnostic
//! is pest's, as before. The differential test below holds the two to the same tree on the
//! corpus, the examples and mutated inputs.

use crate::ast::{
    Arg, Call, Comment, Ident, Quantity, Stanza, Statement, StatementKind, Str, Term, Value,
};
use crate::source::{Loc, SourceId};

/// The stanzas of `text` and its comments, or `None` where pest would have to recover from an
/// error (or where this reader is unsure: it may always decline, never disagree).
pub(super) fn file(source: SourceId, text: &str) -> Option<(Vec<Stanza>, Vec<Comment>)> {
    let mut reader = Fast {
        source,
        text,
        bytes: text.as_bytes(),
        pos: 0,
        comments: Vec::new(),
        comments_end: 0,
    };
    let mut stanzas = Vec::new();
    // file = { SOI ~ (NEWLINE | stanza | bad_stanza)* ~ EOI }
    loop {
        reader.skip()?;
        if reader.pos == reader.bytes.len() {
            break;
        }
        if reader.newline() {
            continue;
        }
        stanzas.push(reader.stanza()?);
    }
    Some((stanzas, reader.comments))
}

struct Fast<'t> {
    source: SourceId,
    text: &'t str,
    bytes: &'t [u8],
    pos: usize,
    comments: Vec<Comment>,
    /// Where the last comment remembered ends: a skip that is undone (a term that does not
    /// follow it) and taken again meets its comment twice.
    comments_end: usize,
}

fn is_ident_start(byte: u8) -> bool {
    byte.is_ascii_alphabetic() || byte == b'_'
}

fn is_ident_continue(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || byte == b'_'
}

impl Fast<'_> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn loc(&self, start: usize, end: usize) -> Loc {
        Loc::span(self.source, start, end)
    }

    fn slice(&self, start: usize, end: usize) -> &str {
        self.text.get(start..end).unwrap_or("")
    }

    /// The implicit `(WHITESPACE | COMMENT)*` between two tokens. Each comment is remembered
    /// as `parse::comments` would find it; `None` for a comment ended by a lone `\r`, which the
    /// grammar and that line scan see differently.
    fn skip(&mut self) -> Option<()> {
        loop {
            match self.peek() {
                Some(b' ' | b'\t') => self.pos += 1,
                Some(b'/') if self.bytes.get(self.pos + 1) == Some(&b'/') => {
                    let start = self.pos;
                    let rest = &self.bytes[start..];
                    let len = rest
                        .iter()
                        .position(|&b| b == b'\n' || b == b'\r')
                        .unwrap_or(rest.len());
                    self.pos = start + len;
                    if self.peek() == Some(b'\r') && self.bytes.get(self.pos + 1) != Some(&b'\n') {
                        return None;
                    }
                    if start >= self.comments_end {
                        let body = self
                            .slice(start + 2, self.pos)
                            .trim_end_matches([' ', '\t']);
                        self.comments.push(Comment {
                            text: body.to_owned(),
                            loc: self.loc(start, start + 2 + body.len()),
                        });
                        self.comments_end = self.pos;
                    }
                }
                _ => return Some(()),
            }
        }
    }

    /// `NEWLINE`: `\n`, `\r\n` or `\r`.
    fn newline(&mut self) -> bool {
        match self.peek() {
            Some(b'\n') => {
                self.pos += 1;
                true
            }
            Some(b'\r') => {
                self.pos += 1;
                if self.peek() == Some(b'\n') {
                    self.pos += 1;
                }
                true
            }
            _ => false,
        }
    }

    /// `IDENT`, as an [`Ident`]; the position is unchanged when there is none.
    fn ident(&mut self) -> Option<Ident> {
        let start = self.pos;
        if !self.peek().is_some_and(is_ident_start) {
            return None;
        }
        let rest = &self.bytes[start + 1..];
        let len = rest
            .iter()
            .position(|&b| !is_ident_continue(b))
            .unwrap_or(rest.len());
        self.pos = start + 1 + len;
        Some(Ident {
            text: self.slice(start, self.pos).to_owned(),
            loc: self.loc(start, self.pos),
        })
    }

    fn byte(&mut self, byte: u8) -> bool {
        if self.peek() == Some(byte) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    /// `stanza = { keyword ~ name? ~ tags? ~ open ~ body ~ close }`
    fn stanza(&mut self) -> Option<Stanza> {
        let start = self.pos;
        let keyword = self.ident()?;
        self.skip()?;
        let name = self.ident();
        self.skip()?;
        let tags = self.tags()?;
        self.skip()?;
        let open = self.pos;
        if !self.byte(b'{') {
            return None;
        }
        // body = { (sep | statement | bad_statement)* }
        let mut statements = Vec::new();
        loop {
            self.skip()?;
            match self.peek()? {
                b'\n' | b'\r' => {
                    self.newline();
                }
                b';' => self.pos += 1,
                b'}' => break,
                _ => statements.push(self.statement()?),
            }
        }
        self.pos += 1;
        let close = self.pos;
        Some(Stanza {
            keyword,
            name,
            tags,
            statements,
            loc: self.loc(start, close),
            multiline: self.bytes[open..close].contains(&b'\n'),
            has_errors: false,
        })
    }

    /// `tags? = (colon ~ tag ~ (comma ~ tag)*)?`; `None` where the stanza cannot go on.
    fn tags(&mut self) -> Option<Vec<Ident>> {
        let mut tags = Vec::new();
        if !self.byte(b':') {
            return Some(tags);
        }
        self.skip()?;
        // Without a tag, `tags?` fails and the stanza then needs `{` where the `:` is.
        tags.push(self.ident()?);
        loop {
            let save = self.pos;
            self.skip()?;
            if self.byte(b',') {
                self.skip()?;
                if let Some(tag) = self.ident() {
                    tags.push(tag);
                    continue;
                }
            }
            self.pos = save;
            return Some(tags);
        }
    }

    /// `statement = { (setting | phrase) ~ &(sep | close) }`: its span ends after the skip
    /// before the look-ahead, as pest's does.
    fn statement(&mut self) -> Option<Statement> {
        let start = self.pos;
        let kind = match self.setting() {
            Some(kind) => kind,
            None => {
                self.pos = start;
                StatementKind::Phrase(self.value(true)?)
            }
        };
        self.skip()?;
        match self.peek()? {
            b'\n' | b'\r' | b';' | b'}' => Some(Statement {
                kind,
                loc: self.loc(start, self.pos),
            }),
            _ => None,
        }
    }

    /// `setting = { key ~ equals ~ value }`
    fn setting(&mut self) -> Option<StatementKind> {
        let key = self.ident()?;
        self.skip()?;
        if !self.byte(b'=') {
            return None;
        }
        self.skip()?;
        let value = self.value(true)?;
        Some(StatementKind::Setting { key, value })
    }

    /// `value = { term+ }` (and `phrase`), or with `calls` false `arg_value = { arg_term+ }`.
    fn value(&mut self, calls: bool) -> Option<Value> {
        let start = self.pos;
        let mut terms = vec![self.term(calls)?];
        // pest unrolls `term+` into `term ~ term*`: the skip after the first term stays in the
        // span, and `term*` undoes the skip before a term that is not there. So a value of one
        // term ends after the space that follows it, a value of several at its last term.
        self.skip()?;
        if let Some(term) = self.term(calls) {
            terms.push(term);
            loop {
                let save = self.pos;
                self.skip()?;
                match self.term(calls) {
                    Some(term) => terms.push(term),
                    None => {
                        self.pos = save;
                        break;
                    }
                }
            }
        }
        Some(Value {
            terms,
            loc: self.loc(start, self.pos),
        })
    }

    /// `term = _{ call | quantity | string | word | plus }` (`arg_term` without `call`); the
    /// position is unchanged when there is none.
    fn term(&mut self, calls: bool) -> Option<Term> {
        let start = self.pos;
        match self.peek()? {
            b'"' => self.string(),
            b'+' => {
                self.pos += 1;
                Some(Term::Plus(self.loc(start, self.pos)))
            }
            b'-' | b'0'..=b'9' => self.quantity(),
            byte if is_ident_start(byte) => {
                if calls {
                    if let Some(call) = self.call() {
                        return Some(Term::Call(call));
                    }
                    self.pos = start;
                }
                self.ident().map(Term::Word)
            }
            _ => None,
        }
    }

    /// `call = { word ~ lparen ~ (arg ~ (comma ~ arg)*)? ~ rparen }`
    fn call(&mut self) -> Option<Call> {
        let start = self.pos;
        let name = self.ident()?;
        self.skip()?;
        if !self.byte(b'(') {
            return None;
        }
        self.skip()?;
        let mut args = Vec::new();
        if let Some(arg) = self.arg() {
            args.push(arg);
            loop {
                let save = self.pos;
                self.skip()?;
                if self.byte(b',') {
                    self.skip()?;
                    if let Some(arg) = self.arg() {
                        args.push(arg);
                        continue;
                    }
                }
                self.pos = save;
                break;
            }
        }
        self.skip()?;
        if !self.byte(b')') {
            return None;
        }
        Some(Call {
            name,
            args,
            loc: self.loc(start, self.pos),
        })
    }

    /// `arg = { (key ~ equals)? ~ arg_value }`; the position is unchanged when there is none.
    fn arg(&mut self) -> Option<Arg> {
        let start = self.pos;
        let key = match self.ident() {
            Some(key) => {
                if self.skip().is_some() && self.byte(b'=') {
                    Some(key)
                } else {
                    self.pos = start;
                    None
                }
            }
            None => None,
        };
        if self.skip().is_none() {
            self.pos = start;
            return None;
        }
        let Some(value) = self.value(false) else {
            self.pos = start;
            return None;
        };
        Some(Arg {
            key,
            value,
            loc: self.loc(start, self.pos),
        })
    }

    /// `quantity = ${ number ~ unit? }`; the position is unchanged when there is none.
    fn quantity(&mut self) -> Option<Term> {
        let start = self.pos;
        self.byte(b'-');
        if self.digits() == 0 {
            self.pos = start;
            return None;
        }
        let save = self.pos;
        if self.byte(b'.') && self.digits() == 0 {
            self.pos = save;
        }
        let number_end = self.pos;
        // unit = @{ "%" | "/" ~ ASCII_ALPHA+ | ASCII_ALPHA ~ (ASCII_ALPHANUMERIC | "_")* }
        match self.peek() {
            Some(b'%') => self.pos += 1,
            Some(b'/') => {
                let rest = &self.bytes[self.pos + 1..];
                let len = rest
                    .iter()
                    .position(|b| !b.is_ascii_alphabetic())
                    .unwrap_or(rest.len());
                if len > 0 {
                    self.pos += 1 + len;
                }
            }
            Some(byte) if byte.is_ascii_alphabetic() => {
                let rest = &self.bytes[self.pos + 1..];
                let len = rest
                    .iter()
                    .position(|&b| !is_ident_continue(b))
                    .unwrap_or(rest.len());
                self.pos += 1 + len;
            }
            _ => {}
        }
        let unit = (self.pos > number_end).then(|| self.slice(number_end, self.pos).to_owned());
        Some(Term::Quantity(Quantity {
            number: self.slice(start, number_end).to_owned(),
            unit,
            loc: self.loc(start, self.pos),
        }))
    }

    fn digits(&mut self) -> usize {
        let rest = &self.bytes[self.pos..];
        let len = rest
            .iter()
            .position(|b| !b.is_ascii_digit())
            .unwrap_or(rest.len());
        self.pos += len;
        len
    }

    /// `string = ${ "\"" ~ string_text ~ "\"" }`; the position is unchanged when there is none.
    fn string(&mut self) -> Option<Term> {
        let start = self.pos;
        self.pos += 1;
        let text_start = self.pos;
        // string_text = @{ (!("\"" | "\\" | NEWLINE) ~ ANY | "\\" ~ ("\"" | "\\" | "n" | "t"))* }
        // (bytes of a multi-byte character are never any of these, so a byte scan agrees)
        loop {
            match self.peek() {
                None | Some(b'"' | b'\n' | b'\r') => break,
                Some(b'\\') => match self.bytes.get(self.pos + 1) {
                    Some(b'"' | b'\\' | b'n' | b't') => self.pos += 2,
                    _ => break,
                },
                Some(_) => self.pos += 1,
            }
        }
        let text_end = self.pos;
        if !self.byte(b'"') {
            self.pos = start;
            return None;
        }
        let raw = self.slice(text_start, text_end);
        Some(Term::Str(Str {
            value: super::unescape(raw),
            raw: raw.to_owned(),
            loc: self.loc(start, self.pos),
        }))
    }
}

#[cfg(test)]
mod tests {
    //! The hand-written reader against pest's, on every policy file of the repository and on
    //! thousands of mutations of them: where it reads a file, the tree and the comments are
    //! the ones pest's path gives, and pest finds no error in it.

    use super::*;
    use crate::source::Sources;

    fn both(text: &str) -> (Option<String>, super::super::Parsed) {
        let mut sources = Sources::new();
        let id = sources.add("t.policy", text);
        let fast = file(id, text).map(|(stanzas, comments)| format!("{stanzas:?}\n{comments:?}"));
        let slow = super::super::parse_with_pest(id, text);
        (fast, slow)
    }

    fn agree(text: &str) -> bool {
        let (fast, slow) = both(text);
        let Some(fast) = fast else { return false };
        assert!(
            slow.diagnostics.is_empty(),
            "the fast reader accepted what pest rejects: {text:?}\n{:?}",
            slow.diagnostics
        );
        let slow = format!("{:?}\n{:?}", slow.file.stanzas, slow.file.comments);
        if fast != slow {
            let at = fast
                .bytes()
                .zip(slow.bytes())
                .position(|(a, b)| a != b)
                .unwrap_or(fast.len().min(slow.len()));
            let from = at.saturating_sub(300);
            panic!(
                "different trees for {text:?}\nfast: {}\npest: {}",
                fast.get(from..(at + 200).min(fast.len())).unwrap_or(""),
                slow.get(from..(at + 200).min(slow.len())).unwrap_or("")
            );
        }
        true
    }

    fn policy_files() -> Vec<String> {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut out = Vec::new();
        let mut dirs = vec![root];
        while let Some(dir) = dirs.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                let path = entry.path();
                let name = entry.file_name();
                if path.is_dir() {
                    if name != "target" && name != ".git" {
                        dirs.push(path);
                    }
                } else if path.extension().is_some_and(|e| e == "policy")
                    && let Ok(text) = std::fs::read_to_string(&path)
                {
                    out.push(text);
                }
            }
        }
        out
    }

    #[test]
    fn reads_what_pest_reads_without_errors() {
        let files = policy_files();
        assert!(files.len() > 20, "found only {} policy files", files.len());
        let mut read = 0;
        for text in &files {
            let id = Sources::new().add("t.policy", text.as_str());
            let clean = super::super::parse_with_pest(id, text)
                .diagnostics
                .is_empty();
            let fast = agree(text);
            // Every file pest reads without an error takes the fast path.
            assert_eq!(fast, clean, "{text}");
            read += usize::from(fast);
        }
        assert!(read > 10, "only {read} files read");
    }

    #[test]
    fn agrees_with_pest_on_edge_cases() {
        for text in [
            "",
            "\n\r\n\r",
            "// only a comment",
            "// a\r\nrequest { deadline = 1s } // b \t\r\n",
            "request{deadline=1s}",
            "request { deadline = 1s ; }",
            "request { deadline = 1s // why\n }",
            "breaker a { trip = 5 failures within 30s; cooldown=1.5s }",
            "x { a = f ( ) ; b = g(1, k = 2ms, \"s\\\"t\") ; c = h(a b, c) }",
            "x { a = f(,) }",
            "x { a = f(k =) }",
            "x { a = f(k = 1,) }",
            "x { 3_000 per 1m }",
            "x { a = 1. }",
            "x { a = -1 + -2.5% 10/s 10/ 5ms5 \"\" }",
            "x { a = \"é\" ; b = \"\\q\" }",
            "x: a, b { }",
            "x y: a, { }",
            "x y: { }",
            "x y z { }",
            "x {\n}\n}",
            "x { a = 1 } y { b = 2 }",
            "x { a = 1 b }",
            "x { a = = 1 }",
            "x { = }",
            "x { a = 1 // c\r }",
            "x { a = 1 }// c\rx { }",
            "x { f(a) = 1 }",
            "x { f (a) }",
            "x {",
            "x { a",
            "x { \"open",
            "é { }",
        ] {
            let (fast, slow) = both(text);
            if fast.is_some() {
                agree(text);
            } else {
                // Declining is only for what pest cannot read cleanly, or a comment ended by
                // a lone `\r`.
                assert!(
                    !slow.diagnostics.is_empty() || text.contains('\r'),
                    "declined a clean file: {text:?}"
                );
            }
        }
    }

    #[test]
    fn agrees_with_pest_on_mutations() {
        const PIECES: &[&str] = &[
            " ", "\t", "\n", "\r\n", "\r", ";", "{", "}", "(", ")", ",", "=", ":", "+", "-", ".",
            "%", "/", "//", "\"", "\\", "a", "_", "1", "s", "é", "f(", "x = 1", "// c\n",
        ];
        let files = policy_files();
        let mut state = 0x1234_5678_9abc_def0_u64;
        let mut next = move || {
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            usize::try_from((z ^ (z >> 31)) >> 33).unwrap_or(0)
        };
        let (mut accepted, mut declined) = (0, 0);
        for round in 0..3_000 {
            let base = &files[round % files.len()];
            let mut text = base.clone();
            for _ in 0..1 + next() % 3 {
                let mut at = if text.is_empty() {
                    0
                } else {
                    next() % text.len()
                };
                while !text.is_char_boundary(at) {
                    at -= 1;
                }
                match next() % 3 {
                    0 => text.insert_str(at, PIECES[next() % PIECES.len()]),
                    1 => {
                        let mut end = (at + 1 + next() % 4).min(text.len());
                        while !text.is_char_boundary(end) {
                            end += 1;
                        }
                        text.replace_range(at..end, "");
                    }
                    _ => {
                        let mut end = (at + 1).min(text.len());
                        while !text.is_char_boundary(end) {
                            end += 1;
                        }
                        text.replace_range(at..end, PIECES[next() % PIECES.len()]);
                    }
                }
            }
            let (fast, slow) = both(&text);
            if fast.is_some() {
                agree(&text);
                accepted += 1;
            } else {
                assert!(
                    !slow.diagnostics.is_empty() || text.contains('\r'),
                    "declined a clean file: {text:?}"
                );
                declined += 1;
            }
        }
        assert!(accepted > 300 && declined > 300, "{accepted} / {declined}");
    }
}
