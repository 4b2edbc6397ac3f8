//! The static imports of a JavaScript module: `import ... from "x"`, `import "x"` and
//! `export ... from "x"`, the ones a browser fetches before the module runs. Dynamic
//! `import("x")` is left out on purpose: that is how a heavy capability stays off the
//! baseline.
//!
//! A small lexer skips comments, strings, template literals (with their `${}` expressions)
//! and regular expressions, so that an `import` inside any of them is not taken for one.
//! It reads bundler output, not every corner of the language.

#[derive(Debug, Clone, PartialEq)]
enum Token<'a> {
    Ident(&'a str),
    Str(String),
    Punct(char),
    /// A number, a template literal or a regular expression: something that is neither a
    /// name nor punctuation, after which `/` divides.
    Other,
}

/// Keywords after which `/` starts a regular expression rather than dividing.
const BEFORE_REGEX: &[&str] = &[
    "return",
    "typeof",
    "instanceof",
    "in",
    "of",
    "new",
    "delete",
    "void",
    "throw",
    "case",
    "do",
    "else",
    "yield",
    "await",
];

fn is_ident_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_' || c == '$' || !c.is_ascii()
}

fn is_ident_char(c: char) -> bool {
    is_ident_start(c) || c.is_ascii_digit()
}

struct Lexer<'a> {
    src: &'a str,
    pos: usize,
    /// For each open `{`: whether it opened a template literal's `${`.
    braces: Vec<bool>,
    tokens: Vec<Token<'a>>,
}

impl<'a> Lexer<'a> {
    fn peek(&self) -> Option<char> {
        self.src
            .get(self.pos..)
            .and_then(|rest| rest.chars().next())
    }

    fn peek_at(&self, offset: usize) -> Option<char> {
        self.src
            .get(self.pos..)
            .and_then(|rest| rest.chars().nth(offset))
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.pos += c.len_utf8();
        Some(c)
    }

    fn regex_allowed(&self) -> bool {
        match self.tokens.last() {
            None => true,
            Some(Token::Punct(c)) => !matches!(c, ')' | ']' | '}'),
            Some(Token::Ident(word)) => BEFORE_REGEX.contains(word),
            Some(Token::Str(_) | Token::Other) => false,
        }
    }

    fn string(&mut self, quote: char) -> String {
        let mut value = String::new();
        while let Some(c) = self.bump() {
            match c {
                '\\' => {
                    if let Some(escaped) = self.bump() {
                        value.push(escaped);
                    }
                }
                '\n' => break,
                c if c == quote => break,
                c => value.push(c),
            }
        }
        value
    }

    /// The rest of a template literal, up to its closing backtick or a `${`.
    fn template(&mut self) {
        while let Some(c) = self.bump() {
            match c {
                '\\' => {
                    self.bump();
                }
                '`' => return,
                '$' if self.peek() == Some('{') => {
                    self.bump();
                    self.braces.push(true);
                    return;
                }
                _ => {}
            }
        }
    }

    fn regex(&mut self) {
        let mut in_class = false;
        while let Some(c) = self.bump() {
            match c {
                '\\' => {
                    self.bump();
                }
                '[' => in_class = true,
                ']' => in_class = false,
                '/' if !in_class => break,
                '\n' => return,
                _ => {}
            }
        }
        while self.peek().is_some_and(is_ident_char) {
            self.bump();
        }
    }

    fn run(mut self) -> Vec<Token<'a>> {
        while let Some(c) = self.peek() {
            let start = self.pos;
            match c {
                c if c.is_whitespace() => {
                    self.bump();
                }
                '/' if self.peek_at(1) == Some('/') => {
                    while self.bump().is_some_and(|c| c != '\n') {}
                }
                '/' if self.peek_at(1) == Some('*') => {
                    self.pos += 2;
                    match self.src.get(self.pos..).and_then(|rest| rest.find("*/")) {
                        Some(end) => self.pos += end + 2,
                        None => self.pos = self.src.len(),
                    }
                }
                '/' if self.regex_allowed() => {
                    self.bump();
                    self.regex();
                    self.tokens.push(Token::Other);
                }
                '"' | '\'' => {
                    self.bump();
                    let value = self.string(c);
                    self.tokens.push(Token::Str(value));
                }
                '`' => {
                    self.bump();
                    self.template();
                    self.tokens.push(Token::Other);
                }
                '{' => {
                    self.bump();
                    self.braces.push(false);
                    self.tokens.push(Token::Punct('{'));
                }
                '}' => {
                    self.bump();
                    if self.braces.pop() == Some(true) {
                        self.template();
                        self.tokens.push(Token::Other);
                    } else {
                        self.tokens.push(Token::Punct('}'));
                    }
                }
                c if c.is_ascii_digit() => {
                    while self.peek().is_some_and(|c| is_ident_char(c) || c == '.') {
                        self.bump();
                    }
                    self.tokens.push(Token::Other);
                }
                c if is_ident_start(c) => {
                    while self.peek().is_some_and(is_ident_char) {
                        self.bump();
                    }
                    self.tokens.push(Token::Ident(&self.src[start..self.pos]));
                }
                c => {
                    self.bump();
                    self.tokens.push(Token::Punct(c));
                }
            }
        }
        self.tokens
    }
}

fn tokens(src: &str) -> Vec<Token<'_>> {
    Lexer {
        src,
        pos: 0,
        braces: Vec::new(),
        tokens: Vec::new(),
    }
    .run()
}

/// The specifier after the clause of an `import` or `export` starting at `tokens[start]`:
/// names, `{ ... }`, `*`, `as` and commas, then `from "x"`.
fn from_clause(tokens: &[Token<'_>], start: usize) -> Option<String> {
    let mut i = start;
    while let Some(token) = tokens.get(i) {
        match token {
            Token::Ident("from") => {
                if let Some(Token::Str(specifier)) = tokens.get(i + 1) {
                    return Some(specifier.clone());
                }
            }
            Token::Ident(_) | Token::Punct('{' | '}' | '*' | ',') | Token::Str(_) => {}
            _ => return None,
        }
        i += 1;
    }
    None
}

/// The specifiers a module imports statically, in order.
pub(crate) fn static_imports(src: &str) -> Vec<String> {
    let tokens = tokens(src);
    let mut found = Vec::new();
    for (i, token) in tokens.iter().enumerate() {
        let after_dot = i > 0 && tokens.get(i - 1) == Some(&Token::Punct('.'));
        if after_dot {
            continue;
        }
        let next = tokens.get(i + 1);
        match (token, next) {
            (Token::Ident("import"), Some(Token::Str(specifier))) => {
                found.push(specifier.clone());
            }
            (Token::Ident("import"), Some(Token::Punct('(' | '.')) | None) => {}
            (Token::Ident("import"), Some(_)) => found.extend(from_clause(&tokens, i + 1)),
            (Token::Ident("export"), Some(Token::Punct('*' | '{'))) => {
                found.extend(from_clause(&tokens, i + 1));
            }
            _ => {}
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::static_imports;

    #[test]
    fn every_static_form_and_no_dynamic_one() {
        let src = r#"
import def from "./a.js";
import * as ns from './b.js'
import { x, y as z } from "./c.js";
import def2, { w } from "./d.js";
import "./e.js";
export * from "./f.js";
export { q } from "./g.js";
export * as all from "./h.js";
import("./dynamic.js").then(m => m);
const u = new URL("./asset.png", import.meta.url);
export { local };
export const n = 1;
"#;
        assert_eq!(
            static_imports(src),
            [
                "./a.js", "./b.js", "./c.js", "./d.js", "./e.js", "./f.js", "./g.js", "./h.js"
            ]
        );
    }

    #[test]
    fn minified_output() {
        let src = r#"import{a as b}from"./x-1f2e.js";import"./y.js";export{c}from"./z.js";const d=await import("./lazy.js");"#;
        assert_eq!(static_imports(src), ["./x-1f2e.js", "./y.js", "./z.js"]);
    }

    #[test]
    fn imports_in_comments_strings_templates_and_regexes_are_not_imports() {
        let src = r#"
// import "./comment.js";
/* import x from "./block.js" */
const s = "import y from './string.js'";
const t = `import "./template.js" ${ "}" + `import "./nested.js"` } import "./after.js"`;
const r = /import "\.\/regex.js"/g;
const q = a / b; import "./real.js";
obj.import("./method.js");
"#;
        assert_eq!(static_imports(src), ["./real.js"]);
    }
}
