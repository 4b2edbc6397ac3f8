//! The `@font-face` rules of a style sheet, with spans: a small scanner, not a CSS parser.
//!
//! It skips comments and strings, finds `@font-face` at any depth (inside `@media` or
//! `@supports` too), and reads the declarations of its block: `font-family`, `font-weight`,
//! `font-display` and the `url(...)` sources of `src` with their `format(...)` hints. Anything
//! else in the sheet is passed over. `@import` is not followed.

use std::ops::Range;

/// A declaration's value and where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Decl {
    /// The value, lowercased, comments and `!important` removed, spaces collapsed.
    pub(crate) value: String,
    /// The value as written.
    pub(crate) span: Range<usize>,
}

/// One `url(...)` of a `src` descriptor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FontSource {
    /// The URL, unquoted.
    pub(crate) url: String,
    /// The URL as written, inside the parentheses and quotes.
    pub(crate) span: Range<usize>,
    /// The `format(...)` hint, lowercased and unquoted.
    pub(crate) format: Option<String>,
}

/// One `@font-face` rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FontFace {
    /// The `@font-face` keyword.
    pub(crate) span: Range<usize>,
    /// `font-family`, unquoted (families compare without regard to ASCII case).
    pub(crate) family: Option<String>,
    /// `font-weight`, with `normal` and `bold` as 400 and 700.
    pub(crate) weight: Option<String>,
    /// `font-display`.
    pub(crate) display: Option<Decl>,
    /// The downloadable sources of `src`, in order (`local(...)` ones are left out).
    pub(crate) sources: Vec<FontSource>,
}

/// Every `@font-face` of `css`, with spans offset by `base`.
pub(crate) fn font_faces(css: &str, base: usize) -> Vec<FontFace> {
    let bytes = css.as_bytes();
    let mut faces = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'/' if bytes.get(i + 1) == Some(&b'*') => i = skip_comment(bytes, i),
            b'"' | b'\'' => i = skip_string(bytes, i),
            b'\\' => i += 2,
            b'@' => {
                let name_end = ident_end(bytes, i + 1);
                let is_font_face = css
                    .get(i + 1..name_end)
                    .is_some_and(|name| name.eq_ignore_ascii_case("font-face"));
                if !is_font_face {
                    i = name_end;
                    continue;
                }
                let keyword = i..name_end;
                let mut j = skip_blank(bytes, name_end);
                if bytes.get(j) != Some(&b'{') {
                    i = j.max(name_end);
                    continue;
                }
                j += 1;
                let body_end = block_end(bytes, j);
                faces.push(read_face(
                    css,
                    j..body_end,
                    base + keyword.start..base + keyword.end,
                    base,
                ));
                i = body_end + 1;
            }
            _ => i += 1,
        }
    }
    faces
}

fn skip_comment(bytes: &[u8], at: usize) -> usize {
    bytes
        .get(at + 2..)
        .and_then(|rest| rest.windows(2).position(|w| w == b"*/"))
        .map_or(bytes.len(), |p| at + 2 + p + 2)
}

/// Past the closing quote of the string opening at `at` (or its end of line, where CSS ends an
/// unterminated string).
fn skip_string(bytes: &[u8], at: usize) -> usize {
    let quote = bytes[at];
    let mut i = at + 1;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'\n' => return i,
            b if b == quote => return i + 1,
            _ => i += 1,
        }
    }
    bytes.len()
}

fn ident_end(bytes: &[u8], mut at: usize) -> usize {
    while at < bytes.len()
        && (bytes[at].is_ascii_alphanumeric() || matches!(bytes[at], b'-' | b'_'))
    {
        at += 1;
    }
    at
}

fn skip_blank(bytes: &[u8], mut at: usize) -> usize {
    loop {
        while at < bytes.len() && bytes[at].is_ascii_whitespace() {
            at += 1;
        }
        if bytes.get(at) == Some(&b'/') && bytes.get(at + 1) == Some(&b'*') {
            at = skip_comment(bytes, at);
        } else {
            return at;
        }
    }
}

/// The index of the `}` closing a block whose body starts at `at` (or the end of the text).
fn block_end(bytes: &[u8], mut at: usize) -> usize {
    let mut depth = 0usize;
    while at < bytes.len() {
        match bytes[at] {
            b'/' if bytes.get(at + 1) == Some(&b'*') => {
                at = skip_comment(bytes, at);
                continue;
            }
            b'"' | b'\'' => {
                at = skip_string(bytes, at);
                continue;
            }
            b'\\' => at += 1,
            b'{' => depth += 1,
            b'}' if depth == 0 => return at,
            b'}' => depth -= 1,
            _ => {}
        }
        at += 1;
    }
    bytes.len()
}

/// Splits `range` of `css` at top-level occurrences of `separator` (outside strings, comments
/// and parentheses).
fn split_top(css: &str, range: Range<usize>, separator: u8) -> Vec<Range<usize>> {
    let bytes = css.as_bytes();
    let mut parts = Vec::new();
    let (mut start, mut at, mut depth) = (range.start, range.start, 0usize);
    let end = range.end.min(bytes.len());
    while at < end {
        match bytes[at] {
            b'/' if bytes.get(at + 1) == Some(&b'*') => {
                at = skip_comment(bytes, at).min(end);
                continue;
            }
            b'"' | b'\'' => {
                at = skip_string(bytes, at).min(end);
                continue;
            }
            b'\\' => at += 1,
            b'(' => depth += 1,
            b')' => depth = depth.saturating_sub(1),
            b if b == separator && depth == 0 => {
                parts.push(start..at);
                start = at + 1;
            }
            _ => {}
        }
        at += 1;
    }
    parts.push(start..end);
    parts
}

/// `range` without the blanks and comments at either end.
fn trim(css: &str, range: Range<usize>) -> Range<usize> {
    let bytes = css.as_bytes();
    let mut start = skip_blank(bytes, range.start).min(range.end);
    let mut end = range.end;
    loop {
        while end > start && bytes[end - 1].is_ascii_whitespace() {
            end -= 1;
        }
        if end >= start + 4 && bytes.get(end - 2..end) == Some(b"*/") {
            // A trailing comment: find where it opens.
            match css.get(start..end - 2).and_then(|text| text.rfind("/*")) {
                Some(open) => end = start + open,
                None => break,
            }
        } else {
            break;
        }
    }
    if start > end {
        start = end;
    }
    start..end
}

/// A value for comparing: comments removed, lowercased, `!important` dropped, blanks collapsed.
fn normalise(css: &str, range: Range<usize>) -> String {
    collapse(css, range).to_ascii_lowercase()
}

/// A value with comments and `!important` removed and blanks collapsed, case kept.
fn collapse(css: &str, range: Range<usize>) -> String {
    let mut text = String::new();
    let bytes = css.as_bytes();
    let mut at = range.start;
    while at < range.end {
        if bytes[at] == b'/' && bytes.get(at + 1) == Some(&b'*') {
            at = skip_comment(bytes, at);
            text.push(' ');
            continue;
        }
        let next = (at + 1..=range.end)
            .find(|&n| css.is_char_boundary(n))
            .unwrap_or(range.end);
        text.push_str(css.get(at..next).unwrap_or_default());
        at = next;
    }
    let text = match text.to_ascii_lowercase().find("!important") {
        Some(at) => text.get(..at).unwrap_or_default().to_owned(),
        None => text,
    };
    text.split_ascii_whitespace().collect::<Vec<_>>().join(" ")
}

fn unquote(text: &str) -> String {
    let text = text.trim();
    let inner = text
        .strip_prefix('"')
        .and_then(|t| t.strip_suffix('"'))
        .or_else(|| text.strip_prefix('\'').and_then(|t| t.strip_suffix('\'')))
        .unwrap_or(text);
    inner.to_owned()
}

fn read_face(css: &str, body: Range<usize>, span: Range<usize>, base: usize) -> FontFace {
    let mut face = FontFace {
        span,
        family: None,
        weight: None,
        display: None,
        sources: Vec::new(),
    };
    for declaration in split_top(css, body, b';') {
        let declaration = trim(css, declaration);
        let Some(colon) = css.get(declaration.clone()).and_then(|text| text.find(':')) else {
            continue;
        };
        let name = normalise(css, declaration.start..declaration.start + colon);
        let value = trim(css, declaration.start + colon + 1..declaration.end);
        match name.as_str() {
            "font-family" => face.family = Some(unquote(&collapse(css, value))),
            "font-weight" => {
                let weight = normalise(css, value)
                    .split(' ')
                    .map(|w| match w {
                        "normal" => "400",
                        "bold" => "700",
                        other => other,
                    })
                    .collect::<Vec<_>>()
                    .join(" ");
                face.weight = Some(weight);
            }
            "font-display" => {
                face.display = Some(Decl {
                    value: normalise(css, value.clone()),
                    span: base + value.start..base + value.end,
                });
            }
            "src" => {
                face.sources = split_top(css, value, b',')
                    .into_iter()
                    .filter_map(|item| font_source(css, item, base))
                    .collect();
            }
            _ => {}
        }
    }
    face
}

/// `url(x) format("woff2")`; `None` for `local(...)` and anything without a URL.
fn font_source(css: &str, item: Range<usize>, base: usize) -> Option<FontSource> {
    let text = css.get(item.clone())?;
    let lower = text.to_ascii_lowercase();
    let open = lower.find("url(")?;
    let inner_start = item.start + open + 4;
    let bytes = css.as_bytes();
    let mut start = inner_start;
    while start < item.end && bytes[start].is_ascii_whitespace() {
        start += 1;
    }
    let (url_span, after) = match bytes.get(start) {
        Some(&(b'"' | b'\'')) => {
            let close = skip_string(bytes, start).min(item.end);
            let end = if close > start + 1 && bytes[close - 1] == bytes[start] {
                close - 1
            } else {
                close
            };
            (start + 1..end, close)
        }
        _ => {
            let close = css
                .get(start..item.end)
                .and_then(|rest| rest.find(')'))
                .map_or(item.end, |p| start + p);
            let mut end = close;
            while end > start && bytes[end - 1].is_ascii_whitespace() {
                end -= 1;
            }
            (start..end, close)
        }
    };
    let url = css.get(url_span.clone())?.to_owned();
    let rest = css
        .get(after..item.end)
        .unwrap_or_default()
        .to_ascii_lowercase();
    let format = rest.find("format(").map(|at| {
        let inside = &rest[at + 7..];
        let inside = inside.split(')').next().unwrap_or_default();
        unquote(inside)
    });
    Some(FontSource {
        url,
        span: base + url_span.start..base + url_span.end,
        format,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_font_faces_with_spans() {
        let css = r#"/* @font-face { font-family: commented } */
body { content: "@font-face {" }
@media (min-width: 1px) {
  @FONT-FACE {
    font-family: "Inter Var";
    src: local("Inter"), url('/fonts/inter.woff2') format("woff2"),
         url(/fonts/inter.woff) format('woff');
    font-weight: 100 900;
    font-display: SWAP !important; /* a comment */
  }
}
@font-face{font-family:Mono;src:url( mono.ttf );font-weight:bold}
"#;
        let faces = font_faces(css, 1000);
        assert_eq!(faces.len(), 2);
        let text = |range: &Range<usize>| &css[range.start - 1000..range.end - 1000];
        let inter = &faces[0];
        assert_eq!(text(&inter.span), "@FONT-FACE");
        assert_eq!(inter.family.as_deref(), Some("Inter Var"));
        assert_eq!(inter.weight.as_deref(), Some("100 900"));
        let display = inter.display.as_ref().unwrap();
        assert_eq!(display.value, "swap");
        assert_eq!(text(&display.span), "SWAP !important");
        let urls: Vec<(&str, Option<&str>)> = inter
            .sources
            .iter()
            .map(|s| (text(&s.span), s.format.as_deref()))
            .collect();
        assert_eq!(
            urls,
            [
                ("/fonts/inter.woff2", Some("woff2")),
                ("/fonts/inter.woff", Some("woff"))
            ]
        );
        let mono = &faces[1];
        assert_eq!(mono.family.as_deref(), Some("Mono"));
        assert_eq!(mono.weight.as_deref(), Some("700"));
        assert_eq!(mono.display, None);
        assert_eq!(mono.sources[0].url, "mono.ttf");
        assert_eq!(text(&mono.sources[0].span), "mono.ttf");
    }

    #[test]
    fn broken_sheets_do_not_panic() {
        for css in [
            "@font-face",
            "@font-face {",
            "@font-face { src: url(",
            "@font-face { src: url('x",
            "@font-face { font-display: }",
            "/* unterminated",
            "\"unterminated",
            "@font-face { src: url(\"é\") format(\"wöff2\"); font-family: ü }",
            "@",
            "\\",
        ] {
            let _ = font_faces(css, 0);
        }
        assert_eq!(font_faces("@font-face {", 0).len(), 1);
    }
}
