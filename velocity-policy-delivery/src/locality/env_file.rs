//! Reading an environment file (`policy locality --env-file`): `NAME=VALUE` lines, as in a
//! `.env` file, for [`LocalityMap::from_vars`](super::LocalityMap::from_vars).
//!
//! The text holds credentials, so it is kept in a [`SecretString`] (zeroized when dropped, and
//! redacted if ever debug-printed), values are borrowed from it rather than copied, and nothing
//! here ever quotes the file: a line that cannot be read is reported by its number alone.
//!
//! The forms read: `NAME=VALUE`, `export NAME=VALUE`, values in single or double quotes (a double
//! quoted value may run over several lines, as a pasted key does), `#` comments on their own line
//! or after an unquoted value, and blank lines. Escapes inside quotes are left as written: the
//! locality probe only reads host names, which never hold one.
//!
//! ```
//! use velocity_policy_delivery::locality::LocalityMap;
//! use velocity_policy_delivery::locality::env_file::EnvFile;
//!
//! let path = std::env::temp_dir().join(format!("policy-env-doc-{}.env", std::process::id()));
//! std::fs::write(&path, "VERCEL_REGION=fra1\nexport DATABASE_URL='postgres://u:p@h.eu-central-1.aws.neon.tech/db'\nnot a line\n")?;
//! let file = EnvFile::read(&path)?;
//! assert_eq!(file.skipped(), [3]);
//! assert!(file.is_set("VERCEL_REGION"));
//! let map = LocalityMap::from_vars(file.vars());
//! assert_eq!(map.service("DATABASE_URL").and_then(|s| s.region()).map(|r| r.to_string()).as_deref(), Some("eu-central-1"));
//! # std::fs::remove_file(&path)?;
//! # Ok::<(), std::io::Error>(())
//! ```

use std::io;
use std::ops::Range;
use std::path::Path;

use secrecy::{ExposeSecret as _, SecretString};

/// The variables of an environment file.
#[derive(Debug)]
pub struct EnvFile {
    text: SecretString,
    /// Where each name and its value are in `text`, in file order.
    entries: Vec<(Range<usize>, Range<usize>)>,
    /// The lines (1-based) that are not `NAME=VALUE`, and were skipped.
    skipped: Vec<usize>,
}

impl EnvFile {
    /// Reads and splits the file. The error is the I/O error alone, which never holds the text.
    pub fn read(path: &Path) -> io::Result<Self> {
        let text = SecretString::from(std::fs::read_to_string(path)?);
        let (entries, skipped) = split(text.expose_secret());
        Ok(EnvFile {
            text,
            entries,
            skipped,
        })
    }

    /// Every `(name, value)` pair, in file order (a name given twice appears twice; the last
    /// one counts).
    pub fn vars(&self) -> impl Iterator<Item = (&str, &str)> {
        let text = self.text.expose_secret();
        self.entries.iter().map(move |(name, value)| {
            (
                text.get(name.clone()).unwrap_or_default(),
                text.get(value.clone()).unwrap_or_default(),
            )
        })
    }

    /// Whether the file sets `name` (to anything, even nothing).
    pub fn is_set(&self, name: &str) -> bool {
        self.vars().any(|(set, _)| set == name)
    }

    /// The lines that were skipped, by number.
    pub fn skipped(&self) -> &[usize] {
        &self.skipped
    }
}

type Entries = Vec<(Range<usize>, Range<usize>)>;

/// Splits `text` into the byte ranges of names and values, and the numbers of unreadable lines.
fn split(text: &str) -> (Entries, Vec<usize>) {
    let lines = line_ranges(text);
    let mut entries = Vec::new();
    let mut skipped = Vec::new();
    let mut index = 0;
    while let Some(line) = lines.get(index) {
        let number = index + 1;
        index += 1;
        let Some(content) = text.get(line.clone()) else {
            continue;
        };
        let trimmed = content.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let start = line.start + (content.len() - trimmed.len());
        let statement = trimmed.strip_prefix("export ").unwrap_or(trimmed);
        let start = start + (trimmed.len() - statement.len());
        let Some(equals) = statement.find('=') else {
            skipped.push(number);
            continue;
        };
        let name = statement[..equals].trim();
        if !is_name(name) {
            skipped.push(number);
            continue;
        }
        let name_start = start + (statement.len() - statement.trim_start().len());
        let name_range = name_start..name_start + name.len();
        let after = start + equals + 1;
        let rest = &text[after..line.end];
        let value_start = after + (rest.len() - rest.trim_start().len());
        match text[value_start..].chars().next() {
            Some(quote @ ('"' | '\'')) => {
                let inner = value_start + 1;
                match closing_quote(&text[inner..], quote) {
                    Some(length) => {
                        entries.push((name_range, inner..inner + length));
                        // A value over several lines consumes them.
                        let end = inner + length;
                        while lines.get(index).is_some_and(|next| next.start <= end) {
                            index += 1;
                        }
                    }
                    None => skipped.push(number),
                }
            }
            _ => {
                let value = &text[value_start..line.end];
                let value = value.find(" #").map_or(value, |at| &value[..at]).trim_end();
                entries.push((name_range, value_start..value_start + value.len()));
            }
        }
    }
    (entries, skipped)
}

/// The byte range of each line, without its `\n` or `\r\n`.
fn line_ranges(text: &str) -> Vec<Range<usize>> {
    let mut ranges = Vec::new();
    let mut start = 0;
    for line in text.split_inclusive('\n') {
        let end = start + line.len();
        let content = line.strip_suffix('\n').unwrap_or(line);
        let content = content.strip_suffix('\r').unwrap_or(content);
        ranges.push(start..start + content.len());
        start = end;
    }
    ranges
}

/// How long the quoted value at the start of `text` is, up to its closing `quote` (a `"` may be
/// escaped with `\`); `None` if it is never closed.
fn closing_quote(text: &str, quote: char) -> Option<usize> {
    let mut escaped = false;
    for (at, c) in text.char_indices() {
        if escaped {
            escaped = false;
        } else if c == '\\' && quote == '"' {
            escaped = true;
        } else if c == quote {
            return Some(at);
        } else if c == '\n' && quote == '\'' {
            return None;
        }
    }
    None
}

/// `[A-Za-z_][A-Za-z0-9_]*`, what a shell accepts as a variable's name.
fn is_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> (Vec<(String, String)>, Vec<usize>) {
        let (entries, skipped) = split(text);
        let vars = entries
            .into_iter()
            .map(|(name, value)| (text[name].to_owned(), text[value].to_owned()))
            .collect();
        (vars, skipped)
    }

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn the_usual_forms() {
        let (vars, skipped) = read(
            "# production\n\
             VERCEL_REGION=fra1\n\
             export DATABASE_URL=postgres://u:p@h/db?sslmode=require\n\
             \n\
             \x20 CACHE_URL = \"rediss://u:p#w@h:6379\" # quoted\n\
             R2_URL='https://a.r2.cloudflarestorage.com'\r\n\
             EMPTY=\n\
             PLAIN=value # comment\n",
        );
        assert_eq!(
            vars,
            pairs(&[
                ("VERCEL_REGION", "fra1"),
                ("DATABASE_URL", "postgres://u:p@h/db?sslmode=require"),
                ("CACHE_URL", "rediss://u:p#w@h:6379"),
                ("R2_URL", "https://a.r2.cloudflarestorage.com"),
                ("EMPTY", ""),
                ("PLAIN", "value"),
            ])
        );
        assert!(skipped.is_empty());
    }

    #[test]
    fn a_double_quoted_value_may_span_lines() {
        let (vars, skipped) = read("KEY=\"-----BEGIN\nAB=CD\n-----END\"\nNEXT=1\n");
        assert_eq!(
            vars,
            pairs(&[("KEY", "-----BEGIN\nAB=CD\n-----END"), ("NEXT", "1")])
        );
        assert!(skipped.is_empty());
    }

    #[test]
    fn unreadable_lines_are_skipped_by_number() {
        let (vars, skipped) = read(
            "postgres://user:secret@host/db\n\
             1BAD=x\n\
             OPEN=\"never closed\n\
             SINGLE='not closed\n\
             GOOD=1\n\
             BAD NAME=x\n",
        );
        assert_eq!(vars, pairs(&[("GOOD", "1")]));
        assert_eq!(skipped, [1, 2, 3, 4, 6]);
    }

    #[test]
    fn empty_and_odd_input() {
        assert_eq!(read(""), (Vec::new(), Vec::new()));
        assert_eq!(read("\n\n#\n"), (Vec::new(), Vec::new()));
        assert_eq!(
            read("A=é\u{1F600}"),
            (pairs(&[("A", "é\u{1F600}")]), Vec::new())
        );
        assert_eq!(read("=x\n"), (Vec::new(), vec![1]));
        assert_eq!(read("X=\""), (Vec::new(), vec![1]));
    }
}
