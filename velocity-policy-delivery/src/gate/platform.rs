//! The platform a build is for: the host, as `rustc` describes it, and whether a dependency's
//! `[target.'cfg(...)'.dependencies]` applies to it.
//!
//! `cargo metadata --filter-platform` keeps a dependency when any of its declarations applies,
//! and still lists the others, so each declaration's `cfg(...)` is evaluated here against
//! `rustc --print cfg` (as Cargo does; `--cfg` flags from `RUSTFLAGS` are not read).

use std::process::Command;

/// The host: its target triple and its `cfg` values.
#[derive(Debug, Clone)]
pub(crate) struct Platform {
    pub(crate) triple: String,
    cfgs: Vec<(String, Option<String>)>,
}

fn rustc(args: &[&str]) -> Result<String, String> {
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let output = Command::new(&rustc)
        .args(args)
        .output()
        .map_err(|error| format!("cannot run `rustc {}`: {error}", args.join(" ")))?;
    if !output.status.success() {
        return Err(String::from_utf8_lossy(&output.stderr).trim().to_owned());
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

impl Platform {
    /// The host platform, from `rustc -vV` and `rustc --print cfg`.
    pub(crate) fn host() -> Result<Platform, String> {
        let triple = rustc(&["-vV"])?
            .lines()
            .find_map(|line| line.strip_prefix("host: "))
            .map(|host| host.trim().to_owned())
            .ok_or_else(|| "`rustc -vV` did not say the host platform".to_owned())?;
        let cfgs = rustc(&["--print", "cfg"])?;
        Ok(Platform::new(triple, &cfgs))
    }

    /// A platform from its triple and `rustc --print cfg` output.
    pub(crate) fn new(triple: String, cfgs: &str) -> Platform {
        let cfgs = cfgs
            .lines()
            .filter(|line| !line.trim().is_empty())
            .map(|line| match line.split_once('=') {
                Some((key, value)) => (
                    key.trim().to_owned(),
                    Some(value.trim().trim_matches('"').to_owned()),
                ),
                None => (line.trim().to_owned(), None),
            })
            .collect();
        Platform { triple, cfgs }
    }

    /// Whether a declaration's `target` (a triple or `cfg(...)`) applies here.
    pub(crate) fn matches(&self, target: &str) -> bool {
        match target
            .trim()
            .strip_prefix("cfg(")
            .and_then(|rest| rest.strip_suffix(')'))
        {
            Some(expression) => {
                let tokens = tokenize(expression);
                let mut parser = Parser {
                    tokens: &tokens,
                    pos: 0,
                    platform: self,
                };
                let value = parser.expression(0);
                value.unwrap_or(false) && parser.pos == tokens.len()
            }
            None => target.trim() == self.triple,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Ident(String),
    Str(String),
    Punct(char),
}

fn tokenize(text: &str) -> Vec<Token> {
    let mut tokens = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(&c) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
        } else if c == '"' {
            chars.next();
            let mut value = String::new();
            for c in chars.by_ref() {
                if c == '"' {
                    break;
                }
                value.push(c);
            }
            tokens.push(Token::Str(value));
        } else if c.is_alphanumeric() || c == '_' {
            let mut ident = String::new();
            while let Some(&c) = chars.peek() {
                if !(c.is_alphanumeric() || c == '_') {
                    break;
                }
                ident.push(c);
                chars.next();
            }
            tokens.push(Token::Ident(ident));
        } else {
            tokens.push(Token::Punct(c));
            chars.next();
        }
    }
    tokens
}

struct Parser<'a> {
    tokens: &'a [Token],
    pos: usize,
    platform: &'a Platform,
}

/// Nesting beyond this is not a real `cfg`.
const MAX_DEPTH: usize = 32;

impl Parser<'_> {
    fn next(&mut self) -> Option<&Token> {
        let token = self.tokens.get(self.pos);
        self.pos += 1;
        token
    }

    fn eat(&mut self, c: char) -> bool {
        if self.tokens.get(self.pos) == Some(&Token::Punct(c)) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn list(&mut self, depth: usize) -> Option<Vec<bool>> {
        if !self.eat('(') {
            return None;
        }
        let mut values = Vec::new();
        loop {
            if self.eat(')') {
                return Some(values);
            }
            values.push(self.expression(depth + 1)?);
            if !self.eat(',') && self.tokens.get(self.pos) != Some(&Token::Punct(')')) {
                return None;
            }
        }
    }

    fn expression(&mut self, depth: usize) -> Option<bool> {
        if depth > MAX_DEPTH {
            return None;
        }
        let Some(Token::Ident(name)) = self.next().cloned() else {
            return None;
        };
        match name.as_str() {
            "all" => Some(self.list(depth)?.into_iter().all(|v| v)),
            "any" => Some(self.list(depth)?.into_iter().any(|v| v)),
            "not" => match self.list(depth)?.as_slice() {
                [value] => Some(!value),
                _ => None,
            },
            _ if self.eat('=') => {
                let Some(Token::Str(value)) = self.next().cloned() else {
                    return None;
                };
                Some(
                    self.platform.cfgs.iter().any(|(key, found)| {
                        *key == name && found.as_deref() == Some(value.as_str())
                    }),
                )
            }
            _ => Some(
                self.platform
                    .cfgs
                    .iter()
                    .any(|(key, found)| *key == name && found.is_none()),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Platform;

    fn linux() -> Platform {
        Platform::new(
            "x86_64-unknown-linux-gnu".to_owned(),
            "debug_assertions\npanic=\"unwind\"\ntarget_arch=\"x86_64\"\ntarget_endian=\"little\"\ntarget_family=\"unix\"\ntarget_os=\"linux\"\ntarget_pointer_width=\"64\"\nunix\n",
        )
    }

    #[test]
    fn cfg_expressions_evaluate_against_the_platform() {
        let linux = linux();
        assert!(linux.matches("cfg(unix)"));
        assert!(!linux.matches("cfg(windows)"));
        assert!(linux.matches("cfg(target_os = \"linux\")"));
        assert!(linux.matches("x86_64-unknown-linux-gnu"));
        assert!(!linux.matches("aarch64-apple-darwin"));
        assert!(linux.matches(
            "cfg(all(unix, not(windows), any(target_arch = \"x86\", target_arch = \"x86_64\")))"
        ));
        // rustix: a custom cfg set by nobody is false.
        assert!(linux.matches("cfg(all(not(rustix_use_libc), not(miri), target_os = \"linux\"))"));
        assert!(!linux.matches(
            "cfg(all(not(windows), any(rustix_use_libc, miri, not(target_os = \"linux\"))))"
        ));
        assert!(!linux.matches("cfg(all(unix"));
        assert!(!linux.matches("cfg()"));
    }
}
